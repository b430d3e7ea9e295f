"""Numba's nopython pipeline with tilejit's lowering class, and its two inliners (closures,
functions jitted with ``inline=``) run only where there is something to inline.

``TilejitLower`` changes one thing: a binary operation typed as
``(float32, float32) -> float16`` (half types compute in float32, by the typing
context's rule) or ``(float64, float64) -> weak float`` runs the implementation of its
operand types and converts the result, where Numba's own ``lower_binop`` would re-type
the operation and lose the result type.
"""
from __future__ import annotations

import functools
import operator

from llvmlite import ir
from numba.core import ir as nir
from numba.core import lowering, postproc
from numba.core.compiler import CompilerBase, DefaultPassBuilder
from numba.core.compiler_machinery import register_pass
from numba.core import types
from numba.core.ir_utils import is_operator_or_getitem
from numba.core.typed_passes import InlineOverloads, NativeLowering
from numba.core.untyped_passes import (InlineClosureLikes, InlineInlinables, ReconstructSSA,
                                       fixup_var_define_in_scope)

from tilejit.codegen.lowering.debug import _thread_prefix, emit_printf, emit_trap
from tilejit.codegen.sparse_ssa import TilejitReconstructSSA
from tilejit.errors import CompileError
from tilejit.codegen.typing.context import BITWISE as C_BITWISE
from tilejit.codegen.typing.types import WeakFloat, is_half


class TilejitLower(lowering.Lower):
    def return_exception(self, exc_class, exc_args=None, loc=None):
        """A ``raise`` (an ``assert``) in kernel code, a helper's: the thread prints where
        and what, and traps (the launch fails, as ``T.device_assert``'s does), where
        Numba's convention would return a status no caller reads and end the thread
        without a word. A check whose condition is known at compile time folds away."""
        where = loc or self.loc
        name = getattr(exc_class, "__name__", "exception")
        message = ", ".join(str(a) for a in (exc_args or ()) if isinstance(a, (str, int,
                                                                               float)))
        text = f"{getattr(where, 'filename', '?')}:{getattr(where, 'line', '?')}: {name}" + \
            (f": {message}" if message else "")
        prefix, ids = _thread_prefix(self.context, self.builder)
        emit_printf(self.builder, prefix + text.replace("%", "%%") + "\n", ids)
        emit_trap(self.builder)
        self.builder.unreachable()

    def return_dynamic_exception(self, exc_class, exc_args, nb_types, loc=None):
        """``raise ValueError("...", x)``: as ``return_exception``, with the arguments
        known at compile time (a run-time value is not printed)."""
        self.return_exception(exc_class, tuple(a for a in exc_args or ()
                                               if isinstance(a, (str, int, float))), loc)

    def lower_normal_function(self, fndesc):
        self.context.unroll_headers = []
        super().lower_normal_function(fndesc)
        mark_full_unroll(self.function, self.context.unroll_headers)
        # the kernel body and its helpers always inline into the entry: a call would cost
        # the global address space of the tensor pointers and their noalias facts
        self.function.attributes.add("alwaysinline")

    def lower_inst(self, inst):
        # rules that report a source location (debug checks) read it from the context
        self.context.current_loc = inst.loc
        try:
            return super().lower_inst(inst)
        except CompileError as e:
            loc = inst.loc
            if e.lineno is not None or loc is None or not getattr(loc, "line", None):
                raise
            # a rule's error without a place: the kernel's line being lowered
            raise type(e)(e.bare_message, loc.filename, loc.line) from None

    def lower_binop(self, resty, expr, op):
        signature = self.fndesc.calltypes[expr]
        result = signature.return_type
        context, builder = self.context, self.builder
        if op in C_BITWISE and isinstance(result, types.Integer) and \
                result.bitwidth <= 32 and signature.args == (result, result):
            # the typing's C types (typing/context._c_bitwise: 32 bits; Numba's own are
            # 64), which Numba's lowering would re-derive from its templates
            lhs = context.cast(builder, self.loadvar(expr.lhs.name),
                               self.typeof(expr.lhs.name), result)
            count, count_ty = self.loadvar(expr.rhs.name), self.typeof(expr.rhs.name)
            rhs = context.cast(builder, count, count_ty, result)
            if op in (operator.lshift, operator.rshift):
                # past the width: decided on the count in its own type, before the cast
                # to the result's could cut a 64-bit count's high bits
                big = builder.icmp_unsigned(">=", count, ir.Constant(count.type,
                                                                    result.bitwidth))
                value = _shift(builder, op, lhs, rhs, result.signed, big)
            else:
                value = context.get_function(op, signature)(builder, (lhs, rhs))
            return context.cast(builder, value, result, resty)
        if not (is_half(result) or isinstance(result, WeakFloat)):
            return super().lower_binop(resty, expr, op)
        compute = signature.args[0]

        def operand(name, to):
            value, ty = self.loadvar(name), self.typeof(name)
            if isinstance(ty, WeakFloat) and result == types.float16:
                # a Python float meeting a float16 value is a float16 (as the simulator
                # and TileLang have it: x * 0.1 multiplies by float16(0.1))
                value, ty = context.cast(builder, value, ty, result), result
            return context.cast(builder, value, ty, to)
        lhs = operand(expr.lhs.name, signature.args[0])
        rhs = operand(expr.rhs.name, signature.args[1])
        # by the operator itself: an in-place operator on a number arrives as its
        # copying operator (Numba's immutable_fn), whose typing never saw these types
        impl = context.get_function(op, signature.replace(return_type=compute))
        value = context.cast(builder, impl(builder, (lhs, rhs)), compute, result)
        return context.cast(builder, value, result, resty)


def _shift(builder, op, x, n, signed, big):
    """A shift whose count may reach the type's width (``big``; LLVM leaves that
    undefined): as PTX's shl/shr, which clamp the count, and numpy do it: 0 for a left
    shift or an unsigned right shift, the sign for a signed right shift."""
    width = x.type.width
    if op is operator.rshift and signed:
        count = builder.select(big, ir.Constant(x.type, width - 1), n)
        return builder.ashr(x, count)
    shifted = builder.shl(x, n) if op is operator.lshift else builder.lshr(x, n)
    return builder.select(big, ir.Constant(x.type, 0), shifted)


def mark_full_unroll(function, headers) -> None:
    """Give the loops whose header blocks are ``headers`` LLVM's
    ``llvm.loop.unroll.full`` metadata: the branches back to a header from blocks laid
    out after it are the loop's back edges."""
    if not headers:
        return
    module = function.module
    order = {id(b): k for k, b in enumerate(function.blocks)}
    option = module.add_metadata([ir.MetaDataString(module, "llvm.loop.unroll.full")])
    for _n, header in enumerate(headers):
        for block in function.blocks:
            term = block.terminator
            if (isinstance(term, ir.Branch) and not isinstance(term, ir.ConditionalBranch)
                    and term.operands[0] is header
                    and order.get(id(block), -1) > order.get(id(header), 0)):
                loop_id = module.add_metadata(
                    [option, ir.MetaDataString(module, f"tilejit.unroll.{id(term)}")])
                loop_id.operands = (loop_id, option)
                term.set_metadata("llvm.loop", loop_id)


@register_pass(mutates_CFG=True, analysis_only=False)
class TilejitNativeLowering(NativeLowering):
    _name = "tilejit_native_lowering"

    @property
    def lowering_class(self):
        return TilejitLower


def _closure_likes(func_ir) -> bool:
    """Whether the IR holds what Numba's closure inliner rewrites: a closure
    (``make_function``), a list that may be an array comprehension (``build_list``), a
    call of ``functools.reduce`` or of a stencil. A kernel body has none as a rule."""
    for block in func_ir.blocks.values():
        for inst in block.body:
            value = getattr(inst, "value", None)
            if isinstance(value, nir.Expr) and value.op in ("make_function", "build_list"):
                return True
            if isinstance(value, (nir.Global, nir.FreeVar)) and (
                    value.value is functools.reduce
                    or type(value.value).__name__ == "StencilFunc"):
                return True
    return False


@register_pass(mutates_CFG=True, analysis_only=False)
class TilejitInlineClosureLikes(InlineClosureLikes):
    """Numba's ``inline_closure_likes``, skipped where it would find nothing to inline
    (its walk over every call cost a 128x128 GEMM's compile 32 ms on the H200's host);
    the post-processing it ends with still runs."""
    _name = "tilejit_inline_closure_likes"

    def run_pass(self, state):
        if _closure_likes(state.func_ir):
            return super().run_pass(state)
        postproc.PostProcessor(state.func_ir).run()
        fixup_var_define_in_scope(state.func_ir.blocks)
        return True


def _inlinables(func_ir) -> bool:
    """Whether a call in the IR may reach a function jitted with Numba's ``inline=``
    option (a global, a closure variable, or an attribute of a global module): what
    Numba's ``inline_inlinables`` pass looks for at every call."""
    for block in func_ir.blocks.values():
        for inst in block.body:
            value = getattr(inst, "value", None)
            if isinstance(value, (nir.Global, nir.FreeVar)):
                found = value.value
            elif isinstance(value, nir.Expr) and value.op == "getattr":
                try:
                    base = func_ir.get_definition(value.value)
                except Exception:   # several definitions: the pass cannot resolve it either
                    continue
                # (an Expr's attributes raise KeyError: ask for a Global's only)
                if not isinstance(base, (nir.Global, nir.FreeVar)):
                    continue
                found = getattr(base.value, value.attr, None)
            else:
                continue
            try:
                options = getattr(found, "targetoptions", None)
            except Exception:       # an object whose __getattr__ raises something else
                options = None
            if isinstance(options, dict) and options.get("inline", "never") != "never":
                return True
    return False


@register_pass(mutates_CFG=True, analysis_only=False)
class TilejitInlineInlinables(InlineInlinables):
    """Numba's ``inline_inlinables``, skipped where no call can reach a function jitted
    with ``inline=`` (its walk resolves every call's definition: 15 ms of a 128x128 GEMM's
    compile and of FlashAttention's on the CPU machine)."""
    _name = "tilejit_inline_inlinables"

    def run_pass(self, state):
        if _inlinables(state.func_ir):
            return super().run_pass(state)
        return True


def _inline_template(template) -> bool:
    """Whether a typing template is an ``@overload`` (or ``@overload_method`` /
    ``@overload_attribute``) with ``inline=`` other than never that was typed here."""
    inline = getattr(template, "_inline", None)
    return (inline is not None and not inline.is_never_inline
            and bool(getattr(template, "_inline_overloads", None)))


def _inline_overloads(state) -> bool:
    """Whether an expression of the typed IR resolves to a template that
    ``inline_overloads`` could inline (the calls, operators and attributes it looks at)."""
    typemap, typing = state.typemap, state.typingctx
    for block in state.func_ir.blocks.values():
        for inst in block.body:
            expr = getattr(inst, "value", None)
            if not isinstance(inst, nir.Assign) or not isinstance(expr, nir.Expr):
                continue
            if expr.op == "call":
                fnty = typemap.get(expr.func.name)
            elif is_operator_or_getitem(expr):
                fnty = typing.resolve_value_type(expr.fn)
            elif expr.op == "getattr" and expr.value.name in typemap:
                found = typing.find_matching_getattr_template(
                    types.unliteral(typemap[expr.value.name]), expr.attr)
                if found and _inline_template(found["template"]):
                    return True
                continue
            else:
                continue
            templates = list(getattr(fnty, "templates", None) or ())
            templates.append(getattr(fnty, "template", None))
            if any(_inline_template(t) for t in templates if t is not None):
                return True
    return False


@register_pass(mutates_CFG=True, analysis_only=False)
class TilejitInlineOverloads(InlineOverloads):
    """Numba's ``inline_overloads``, skipped where no expression resolves to an overload
    typed with ``inline=``: its scan is ~2 ms, but it imports Numba's inliner
    (``inline_closurecall``), 15–20 ms of a fresh process's first compile."""
    _name = "tilejit_inline_overloads"

    def run_pass(self, state):
        if _inline_overloads(state):
            return super().run_pass(state)
        return True


_REPLACED = {NativeLowering: TilejitNativeLowering, InlineClosureLikes: TilejitInlineClosureLikes,
             InlineInlinables: TilejitInlineInlinables, InlineOverloads: TilejitInlineOverloads,
             ReconstructSSA: TilejitReconstructSSA}


class TilejitCompiler(CompilerBase):
    def define_pipelines(self):
        pm = DefaultPassBuilder.define_nopython_pipeline(self.state)
        pm.passes = [(_REPLACED.get(cls, cls), desc) for cls, desc in pm.passes]
        pm.finalize()
        return [pm]
