"""Numba's nopython pipeline with tilejit's lowering class, and its closure inliner run
only where there is something to inline.

``TilejitLower`` changes one thing: a binary operation typed as
``(float32, float32) -> float16`` (half types compute in float32, by the typing
context's rule) or ``(float64, float64) -> weak float`` runs the implementation of its
operand types and converts the result, where Numba's own ``lower_binop`` would re-type
the operation and lose the result type.
"""
from __future__ import annotations

import functools

from llvmlite import ir
from numba.core import ir as nir
from numba.core import lowering, postproc
from numba.core.compiler import CompilerBase, DefaultPassBuilder
from numba.core.compiler_machinery import register_pass
from numba.core.typed_passes import NativeLowering
from numba.core.untyped_passes import InlineClosureLikes, fixup_var_define_in_scope

from tilejit.codegen.typing.types import WeakFloat, is_half


class TilejitLower(lowering.Lower):
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
        return super().lower_inst(inst)

    def lower_binop(self, resty, expr, op):
        signature = self.fndesc.calltypes[expr]
        result = signature.return_type
        if not (is_half(result) or isinstance(result, WeakFloat)):
            return super().lower_binop(resty, expr, op)
        context, builder = self.context, self.builder
        fnty = context.typing_context.resolve_value_type(op)
        compute = signature.args[0]
        lhs = context.cast(builder, self.loadvar(expr.lhs.name), self.typeof(expr.lhs.name),
                           signature.args[0])
        rhs = context.cast(builder, self.loadvar(expr.rhs.name), self.typeof(expr.rhs.name),
                           signature.args[1])
        impl = context.get_function(fnty, signature.replace(return_type=compute))
        value = context.cast(builder, impl(builder, (lhs, rhs)), compute, result)
        return context.cast(builder, value, result, resty)


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


_REPLACED = {NativeLowering: TilejitNativeLowering, InlineClosureLikes: TilejitInlineClosureLikes}


class TilejitCompiler(CompilerBase):
    def define_pipelines(self):
        pm = DefaultPassBuilder.define_nopython_pipeline(self.state)
        pm.passes = [(_REPLACED.get(cls, cls), desc) for cls, desc in pm.passes]
        pm.finalize()
        return [pm]
