"""``tilejit.jit``: TileLang's front door, for the seeds' programs as written.

The eager style::

    @tilejit.jit                       # import tilejit as tilelang
    def vector_add(A, B, block_M: int = 128):
        M = T.const("M")
        A: T.Tensor((M,), T.float32)
        B: T.Tensor((M,), T.float32)
        C = T.empty((M,), T.float32)
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as (bx,):
            ...
        return C

is desugared, from its source, into a ``@tilejit.kernel`` function: parameters
annotated in the body are tensors, every other parameter is compile-time (TileLang's
rule); ``T.const``/``T.dynamic`` symbols become reads of the first annotated tensor
dimension that binds them (``M = A.shape[0]``), so a symbol used as a tile extent
specializes the kernel and any other stays a run-time value (a ``T.const`` no input
tensor binds, one only a ``T.empty`` output's shape holds, is a compile-time parameter
the call or ``.compile()`` gives by keyword, as TileLang's); the annotations become
checks made before the launch (rank, dtype, literal extents, one size per symbol).
Line numbers are kept: errors and ``breakpoint()`` point at the user's source.
"""
from __future__ import annotations

import abc
import ast
import copy
import enum
import numbers
import os
import sys
import warnings

import numpy as np

from tilejit import syntax
from tilejit import language as T
from tilejit.log import logger
from tilejit.errors import CompileError
from tilejit.frontend.source import (function_def_from_file, function_namespace, is_call_to,
                                     resolve_static)
from tilejit.runtime.arguments import (TensorSpec, as_declared, as_tensor_arg, packed_hint,
                                       pointer_argument, typed_scalar)
from tilejit.runtime.kernel import default_arch, kernel_function
from tilejit.tilelang.branching import BranchingProgram, launching_ifs
from tilejit.tilelang.engine.param import KernelParam
from tilejit.tilelang.match_buffer import matched_buffers
from tilejit.tilelang.output_params import outputs_as_empty
from tilejit.tilelang.tvm_target import check_execution_backend, check_target
from tilejit.language.function_attrs import PASS_CONFIGS, AnnotationError, function_annotations
from tilejit.language.compat import NotSupportedError
from tilejit.language.dtypes import DType, as_dtype
from tilejit.language.tilelang_names import (LinearExtent, PrimFunc, StridedTensorAnnotation,
                                             TensorAnnotation, warn_symbolic)
from tilejit.frontend.references import current_namespace
from tilejit.options import compile_options
from tilejit.tilelang.shape_symbols import (DerivedExtent, Prologue, annotation_shape,
                                            annotation_strides,
                                            derived_extents, has_computed_extents,
                                            symbol_bindings)
from tilejit.language.compat import TILELANG_ATTRIBUTES, missing_attribute, module_getattr


class JITKernel(abc.ABC):  # noqa: B024 - a class for isinstance and annotations only
    """TileLang's class of compiled kernels, for ``isinstance`` and annotations: what
    ``tilelang.compile`` (``classic.CompiledPrimFunc``) and an eager program's
    ``.compile(...)`` (``CompiledProgram``) return are its (virtual) subclasses. Made
    directly, ``JITKernel(prim_func, out_idx=..., target=...)`` compiles as TileLang's
    constructor does: it is ``tilelang.compile``'s kernel (``from_database`` and
    ``backend_context``, TileLang's cache and backend internals, are not taken)."""

    def __new__(cls, func=None, out_idx=None, execution_backend=None, target="auto",
                target_host=None, verbose=False, pass_configs=None, from_database=False,
                compile_flags=None, backend_context=None):
        from tilejit.tilelang.classic import compile as compile_prim_func  # (it imports us)
        if from_database or backend_context is not None:
            raise NotSupportedError("JITKernel(from_database=..., backend_context=...) "
                                    "(TileLang's kernel cache and backend internals) is not "
                                    "supported by tilejit: JITKernel(prim_func, out_idx=..., "
                                    "target=...) compiles as tilelang.compile does")
        return compile_prim_func(func, out_idx=out_idx, execution_backend=execution_backend,
                                 target=target, target_host=target_host, verbose=verbose,
                                 pass_configs=pass_configs, compile_flags=compile_flags)


class PassConfigKey(enum.StrEnum):
    """TileLang's pass configuration keys (an enum of strings, as TileLang's: a key is its
    string, ``PassConfigKey.TL_ENABLE_FAST_MATH.value`` too). All are accepted; these have
    a tilejit meaning and are honoured: ``TL_ENABLE_DUMP_IR`` (every compilation stage written as
    ``TILEJIT_DUMP_IR`` does, under ``TL_DUMP_IR_DIR``, else ``$TILEJIT_DUMP_IR``, else
    ``./tilejit_dump_ir``), ``TL_ENABLE_FAST_MATH`` (``fast_math=True``: the ``.approx``
    PTX instructions; ``TL_DISABLE_FAST_MATH`` wins over it), ``TL_DISABLE_TMA_LOWER``,
    ``TL_DISABLE_WGMMA`` and ``TL_DISABLE_WARP_SPECIALIZED`` (``CompileOptions.tma``,
    ``wgmma``, ``warp_specialize`` off), ``TL_DISABLE_SAFE_MEMORY_ACCESS`` (global reads and
    writes outside a tensor are no longer masked: ``CompileOptions.safe_memory``),
    ``TL_DISABLE_THREAD_STORAGE_SYNC`` (no block barriers inserted for shared memory: the
    kernel's own only, ``CompileOptions.thread_sync``). The others tune TileLang's own TVM
    passes; they are accepted and change nothing."""
    TL_ENABLE_DUMP_IR = "tl.enable_dump_ir"
    TL_DUMP_IR_DIR = "tl.dump_ir_path"
    TL_DISABLE_TMA_LOWER = "tl.disable_tma_lower"
    TL_DISABLE_WARP_SPECIALIZED = "tl.disable_warp_specialized"
    TL_DISABLE_WGMMA = "tl.disable_wgmma"
    TL_ENABLE_FAST_MATH = "tl.enable_fast_math"
    TL_DISABLE_FAST_MATH = "tl.disable_fast_math"
    TL_CONFIG_INDEX_BITWIDTH = "tl.config_index_bitwidth"
    TL_DISABLE_SAFE_MEMORY_ACCESS = "tl.disable_safe_memory_legalize"
    TL_DISABLE_THREAD_STORAGE_SYNC = "tl.disable_thread_storage_sync"
    # TileLang's checks and TVM pass tuning: accepted, no effect in tilejit
    TL_DISABLE_DATA_RACE_CHECK = "tl.disable_data_race_check"
    TL_DISABLE_BUFFER_INIT_CHECK = "tl.disable_buffer_init_check"
    TL_DISABLE_PRELOWER_SEMANTIC_CHECK = "tl.disable_prelower_semantic_check"
    TL_REDUCER_FORCE_BASELINE = "tl.reducer_force_baseline"
    TL_ENABLE_REDUCER_PLAN_VERBOSE = "tl.enable_reducer_plan_verbose"
    TL_PTXAS_REGISTER_USAGE_LEVEL = "tl.ptxas_register_usage_level"
    TL_DEVICE_COMPILE_FLAGS = "tl.device_compile_flags"
    TL_DISABLE_VECTORIZE_256 = "tl.disable_vectorize_256"
    TL_ENABLE_ASYNC_COPY = "tl.enable_async_copy"
    TL_DISABLE_SHARED_MEMORY_REUSE = "tl.disable_shared_memory_reuse"
    TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE = "tl.enable_aggressive_shared_memory_merge"
    TL_DISABLE_SHUFFLE_ELECT = "tl.disable_shuffle_elect"
    TL_DISABLE_LOOP_UNSWITCHING = "tl.disable_loop_unswitching"
    TL_DISABLE_OUT_OF_BOUND_WARNING = "tl.disable_out_of_bound_warning"
    TL_LAYOUT_VISUALIZATION_ENABLE = "tl.layout_visualization_enable"
    TIR_DISABLE_VECTORIZE = "tirx.disable_vectorize"
    TIR_DISABLE_CSE = "tirx.disable_cse_tir"
    TIR_MERGE_STATIC_SMEM = "tirx.merge_static_smem"
    TIR_ENABLE_DEBUG = "tirx.enable_debug"
    # the rest of TileLang's keys (its simplifier's, its printing and profiling of passes)
    TL_SIMPLIFY = "tl.Simplify"
    TL_SIMPLIFY_TRANSITIVELY_PROVE_INEQUALITIES = "transitively_prove_inequalities"
    TL_SIMPLIFY_CONVERT_BOOLEAN_TO_AND_OF_ORS = "convert_boolean_to_and_of_ors"
    TL_SIMPLIFY_APPLY_CONSTRAINTS_TO_BOOLEAN_BRANCHES = "apply_constraints_to_boolean_branches"
    TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_PROVE_CONDITIONAL = "propagate_knowns_to_prove_conditional"
    TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_SIMPLIFY_EXPRESSIONS = (
        "propagate_knowns_to_simplify_expressions")
    TL_SIMPLIFY_ENABLE_LET_INLINE = "enable_simplify_let_inline"
    TL_EMIT_LINE_DIRECTIVES = "tl.emit_line_directives"
    TL_LAYOUT_COST_MODEL = "tl.layout_cost_model"
    TL_ENABLE_LOWER_LDGSTG = "tl.enable_lower_ldgstg"
    TL_ENABLE_LOWER_LDGSTG_PREDICATED = "tl.enable_lower_ldgstg_predicated"
    TL_ENABLE_VECTORIZE_PLANNER_VERBOSE = "tl.enable_vectorize_planner_verbose"
    TL_ENABLE_FP32X2_REDUCTION = "tl.enable_fp32x2_reduction"
    TL_ENABLE_AUTO_WARP_SPECIALIZATION = "tl.enable_auto_warp_specialization"
    TL_DEBUG_MERGE_SHARED_MEMORY_ALLOCATIONS = "tl.debug_merge_shared_memory_allocations"
    TL_LOOP_UNSWITCHING_ALLOW_NON_TRIVIAL_ELSE = "tl.loop_unswitching_allow_non_trivial_else"
    TL_IF_STMT_BINDING_INLINE_REPLAYABLE_BINDS = "tl.if_stmt_binding_inline_replayable_binds"
    TL_FORCE_LET_INLINE = "tl.force_let_inline"
    TL_AST_PRINT_ENABLE = "tl.ast_print_enable"
    TL_LAYOUT_VISUALIZATION_FORMATS = "tl.layout_visualization_formats"
    TL_STORAGE_REWRITE_DETECT_INPLACE = "tl.storage_rewrite_detect_inplace"
    TIR_ENABLE_EQUIV_TERMS_IN_CSE = "tir.enable_equiv_terms_in_cse_tir"
    TIR_SIMPLIFY = "tirx.Simplify"
    TIR_DISABLE_STORAGE_REWRITE = "tirx.disable_storage_rewrite"
    TIR_USE_ASYNC_COPY = "tirx.use_async_copy"
    TIR_ADD_LOWER_PASS = "tirx.add_lower_pass"
    TIR_NOALIAS = "tirx.noalias"
    CUDA_KERNELS_OUTPUT_DIR = "cuda.kernels_output_dir"
    TL_PASS_PROFILE = "tl.pass_profile"
    TL_PASS_PROFILE_THRESHOLD_MS = "tl.pass_profile_threshold_ms"


_KNOWN_PASS_CONFIGS = {key.value for key in PassConfigKey}
_WARNED: set = set()


def _definition_scope(func, fdef, namespace) -> dict:
    """{name: value} of the names the function's annotations read that its globals and
    closure lack, from the frame of the function that defines it (TileLang's builder
    takes the annotations Python evaluated there: a stride symbol `T.dynamic` made in a
    builder and named only in a parameter's annotation). Empty where that frame is not
    on the stack (the decorator applied elsewhere)."""
    annotations = [a.annotation for a in fdef.args.args + fdef.args.kwonlyargs
                   if a.annotation is not None]
    annotations += [s.annotation for s in syntax.walk(fdef) if isinstance(s, ast.AnnAssign)]
    wanted = {n.id for a in annotations for n in syntax.walk(a)
              if isinstance(n, ast.Name) and n.id not in namespace}
    if not wanted:
        return {}
    frame = sys._getframe(1)
    while frame is not None and func.__code__ not in frame.f_code.co_consts:
        frame = frame.f_back
    if frame is None:
        return {}
    local = frame.f_locals
    return {name: local[name] for name in wanted if name in local}


class _Desugared:
    """What the eager-style source says: tensors, symbols, annotations, the kernel."""

    def __init__(self, func, out_idx=None, source=None):
        found = source or function_def_from_file(func)
        if found is None:
            raise CompileError(f"cannot read the source of "
                               f"{getattr(func, '__qualname__', func.__name__)}; a "
                               "tilejit.jit program must be defined in a file")
        self.filename, fdef = found
        self.func = func
        self.namespace = function_namespace(func)
        # names only the annotations read, locals of the function that defines this one
        # (Python evaluated the signature's there; they are no closure cells of it)
        self.outer = _definition_scope(func, fdef, self.namespace)
        self.namespace.update(self.outer)
        self.static_locals = {}     # `dtype = T.float16` in the body, before annotations
        self.symbols: dict[str, bool] = {}          # name -> dynamic?
        self.annotations: list[tuple[str, ast.expr, int]] = []
        self.scalars: dict[str, ast.expr] = {}     # parameter -> its dtype, annotated in the body
        body = []
        prologue = Prologue()
        # `**metadata` (TileLang's lazy programs take extra keywords): accepted by a call
        # and dropped; the body may not read it (nothing of it reaches the kernel)
        self.var_keywords = fdef.args.kwarg.arg if fdef.args.kwarg is not None else None
        if self.var_keywords is not None:
            if any(isinstance(n, ast.Name) and n.id == self.var_keywords
                   for s in fdef.body for n in syntax.walk(s)):
                raise CompileError(f"{func.__name__}: the body reads **{self.var_keywords}; "
                                   f"extra keywords reach no kernel (name the parameters "
                                   f"the kernel uses)", self.filename, fdef.lineno)
            fdef.args.kwarg = None
        # `A = T.match_buffer(A, shape, dtype)`: the annotation `A: T.Tensor[shape, dtype]`
        fdef.body = matched_buffers(fdef, self.namespace, self.filename)
        # out_idx's parameters: outputs the program allocates (T.empty) and returns
        self.outputs = [] if out_idx is None else outputs_as_empty(
            fdef, out_idx, self._is_tensor_annotation, self.filename, func.__name__,
            self.namespace)
        # ``def f(A: T.Tensor((M, N), dtype), ...)``: a tensor annotated in the signature,
        # as one annotated at the top of the body
        for a in fdef.args.args:
            if self._is_tensor_annotation(a.annotation):
                self.annotations.append((a.arg, a.annotation, a.lineno))
        # T.annotate_pass_configs / T.annotate_compile_flags: read now, taken out
        try:
            self.function_attrs, statements = function_annotations(fdef.body, self.namespace)
        except AnnotationError as e:
            raise CompileError(str(e), self.filename, e.node.lineno) from None
        # {a symbol's declared name: the program's name for it} where the two differ
        # (``M_ = T.const("M")``): TileLang keys a symbol's size by its declared name
        # (``f.compile(M=64)``), tilejit by the program's; ``keyword_names`` maps them
        self.declared_names: dict = {}
        for stmt in statements:
            symbols = self._symbol_statement(stmt)
            if symbols is not None:
                self.symbols.update(symbols)
                self.declared_names.update(_declared_names(stmt))
                for name in symbols:
                    prologue.declare(name)
                continue
            self._static_local(stmt)
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) \
                    and stmt.value is None:
                if self._is_scalar_annotation(stmt.annotation) and stmt.target.id in {
                        a.arg for a in fdef.args.args}:
                    # `M: T.int32` in the body: a run-time scalar, as in the signature
                    self.scalars[stmt.target.id] = stmt.annotation
                    continue
                annotation = prologue.substitute(stmt.annotation)
                prologue.check(annotation, self.filename, stmt.lineno)
                self.annotations.append((stmt.target.id, annotation, stmt.lineno))
                continue
            prologue.follow(stmt)
            body.append(stmt)
        self.symbols.update(self._outer_symbols(statements, fdef))
        bindings, bound = symbol_bindings(self.annotations, self.symbols)
        body[:0] = bindings
        unbound = set(self.symbols) - bound
        # a T.const symbol no input tensor's extent gives (one a T.empty output's shape
        # alone holds): a compile-time value the call or .compile() gives by keyword, as
        # TileLang takes it; a parameter after the others, None until given
        self.keyword_symbols = sorted(s for s in unbound if not self.symbols[s])
        if unbound:
            self._unsupported_names(body)       # the cause, where one is (T.match_buffer)
        for name in self.keyword_symbols:
            fdef.args.args.append(ast.arg(arg=name))
            fdef.args.defaults.append(ast.Constant(None))
        unbound -= set(self.keyword_symbols)
        if unbound:
            raise CompileError(f"symbol(s) {', '.join(sorted(unbound))} are not the extent of "
                               "any annotated tensor", self.filename, fdef.lineno)
        self.tensors = [name for name, _, _ in self.annotations]
        params = [a.arg for a in fdef.args.args]
        for name in self.tensors:
            if name not in params:
                raise CompileError(f"annotated tensor {name!r} is not a parameter",
                                   self.filename, fdef.lineno)
        self.pointers = self._pointer_params(fdef)
        # a scalar annotated with its dtype (`alpha: T.float32`) is a run-time value, as
        # TileLang's typed variable; any other parameter specializes the kernel
        for a in fdef.args.args:
            a.annotation = self.scalars.get(a.arg, a.annotation)
            runtime = a.arg in self.tensors or self._is_scalar_annotation(a.annotation)
            a.annotation = None if runtime else ast.Attribute(
                ast.Name("T", ast.Load()), "constexpr", ast.Load())
        fdef.body = body
        fdef.decorator_list = []
        self.fdef = syntax.fix_missing_locations(fdef)
        self.params = params

    def _unsupported_names(self, body) -> None:
        """A ``T.<name>`` of TileLang's that tilejit does not have, used in the body: its
        error at its line (it is why a symbol goes unbound: ``A = T.match_buffer(A, [M,
        N], dtype)`` sizes M and N in TileLang)."""
        for stmt in body:
            for node in syntax.walk(stmt):
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                        self.namespace.get(node.value.id) is T:
                    try:
                        getattr(T, node.attr)
                    except NotSupportedError as e:
                        hint = (" (annotate the tensor instead, `A: T.Tensor[[M, N], dtype]`, "
                                "or make one of a T.ptr, `A = T.make_tensor(A, (M, N), dtype)`)"
                                if node.attr == "match_buffer" else "")
                        raise CompileError(f"{e}{hint}", self.filename, node.lineno) from None

    def _pointer_params(self, fdef) -> frozenset:
        """The parameters annotated ``T.ptr`` (an address, passed at each call). One the
        body binds again, ``A = T.make_tensor(A, (M, K), dtype)`` as TileLang's eager
        programs write it, is renamed in the kernel (``__tj_ptr_A``) where it is read up
        to that binding, so that the name is the address before and the tensor after."""
        out = []
        for a in fdef.args.args:
            if a.annotation is None or resolve_static(a.annotation, self.namespace) \
                    is not T.ptr:
                continue
            out.append(a.arg)
            rebinding = next((k for k, stmt in enumerate(fdef.body) if any(
                isinstance(n, ast.Name) and n.id == a.arg and isinstance(n.ctx, ast.Store)
                for n in syntax.walk(stmt))), None)
            if rebinding is None:
                continue
            renamed = f"__tj_ptr_{a.arg}"
            for stmt in fdef.body[:rebinding + 1]:
                for n in syntax.walk(stmt):
                    if isinstance(n, ast.Name) and n.id == a.arg and \
                            isinstance(n.ctx, ast.Load):
                        n.id = renamed
            a.arg = renamed
        return frozenset(out)

    def _is_scalar_annotation(self, annotation) -> bool:
        if annotation is None:
            return False
        value = resolve_static(annotation, self.namespace)
        return isinstance(value, DType) and value.held

    def _is_tensor_annotation(self, annotation) -> bool:
        """``T.Tensor(shape, dtype)`` / ``T.Tensor[shape, dtype]`` / ``T.Buffer(...)``."""
        if isinstance(annotation, ast.Call):
            head = annotation.func
        elif isinstance(annotation, ast.Subscript):
            head = annotation.value
        else:
            return False
        kind = resolve_static(head, self.namespace)
        return kind in (TensorAnnotation, StridedTensorAnnotation)

    def _static_local(self, stmt):
        """``input_dtype = T.float16`` in the body, before the annotations that use it:
        a name bound to a constant or an attribute chain is visible to the annotations."""
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)):
            return
        if not all(isinstance(n, (ast.Name, ast.Attribute, ast.Constant, ast.Load))
                   for n in syntax.walk(stmt.value)):
            return
        try:
            value = eval(compile(ast.Expression(stmt.value), "<body>", "eval"), self.namespace)
        except Exception:
            return
        if isinstance(value, (DType, str, int, float, bool)):
            self.namespace[stmt.targets[0].id] = value
            self.static_locals[stmt.targets[0].id] = value

    def current(self) -> dict:
        """The names the annotations read as they are now: the function's globals and
        closure at the call (a global defined below the function, as TileLang's online
        softmax example defines its M and N), the body's compile-time locals over them."""
        ns = current_namespace(self.func)
        for name, value in self.outer.items():
            ns.setdefault(name, value)
        ns.update(self.static_locals)
        return ns

    def _outer_symbols(self, statements, fdef) -> dict:
        """{name: whether it is dynamic} of the symbols made outside the function (``N =
        T.dynamic("N")`` at module level, or in an enclosing function) that an annotated
        extent names: declared symbols of their kind, sized by the tensor they annotate
        (as one declared in the body), not a symbol without a value in the kernel. A name
        the body or the signature binds is the body's own."""
        local = {a.arg for a in fdef.args.args} | set(self.symbols)
        local.update(n.id for stmt in statements for n in syntax.walk(stmt)
                     if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
        found = {}
        for _, annotation, _ in self.annotations:
            extents = (annotation_shape(annotation) or []) + \
                (annotation_strides(annotation) or [])
            for extent in extents:
                for node in syntax.walk(extent):
                    if not (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)) \
                            or node.id in local:
                        continue
                    value = self.namespace.get(node.id)
                    if isinstance(value, T.Symbol):
                        found.setdefault(node.id, bool(value.dynamic))
        return found

    def _symbol_statement(self, stmt):
        """{name: whether it is dynamic} of a statement declaring symbols: ``M =
        T.const("M")``, ``m, n = T.dynamic("m, n")``, ``m, n = T.dynamic("m"),
        T.dynamic("n")`` (one call per name); else None."""
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
            return None
        target = stmt.targets[0]
        if isinstance(stmt.value, ast.Tuple) and isinstance(target, ast.Tuple) and \
                len(stmt.value.elts) == len(target.elts) and \
                all(isinstance(e, ast.Name) for e in target.elts):
            kinds = [self._symbol_kind(call, stmt) for call in stmt.value.elts]
            if None in kinds:
                return None
            return {e.id: dynamic for e, dynamic in zip(target.elts, kinds)}
        dynamic = self._symbol_kind(stmt.value, stmt)
        if dynamic is None:
            return None
        names = [target.id] if isinstance(target, ast.Name) else [
            e.id for e in getattr(target, "elts", []) if isinstance(e, ast.Name)]
        return {n: dynamic for n in names}

    def keyword_names(self, kwargs: dict) -> dict:
        """``kwargs`` with a symbol's declared name (``M`` of ``M_ = T.const("M")``)
        given as the program's name for it; a keyword that is a parameter's or the
        program's own name stays."""
        if not self.declared_names:
            return kwargs
        own = set(self.params) | set(self.symbols)
        named, keys = {}, {}
        for k, v in kwargs.items():
            name = k if k in own else self.declared_names.get(k, k)
            if name in named:
                raise TypeError(f"{self.func.__name__}() got two values for symbol {name} "
                                f"({keys[name]!r} and {k!r})")
            named[name], keys[name] = v, k
        return named

    def _symbol_kind(self, call, stmt):
        """True for a dynamic symbol's declaration (T.dynamic, T.symbolic, ``T.dyn[...]``),
        False for T.const's, None for anything else."""
        if is_call_to(call, T.symbolic, self.namespace):
            warn_symbolic((self.filename, stmt.lineno))
        if any(is_call_to(call, f, self.namespace) for f in (T.dynamic, T.symbolic)):
            return True
        if isinstance(call, ast.Subscript) and isinstance(call.value, ast.Attribute) and \
                call.value.attr == "dyn":
            return True
        return False if is_call_to(call, T.const, self.namespace) else None


def _declared_names(stmt) -> dict:
    """{declared name: target name} of a symbol declaration whose string names differ
    from the names it binds (``M_, N_ = T.const("M, N")``, ``m_ = T.dynamic("m")``)."""
    target, value = stmt.targets[0], stmt.value
    targets = target.elts if isinstance(target, ast.Tuple) else [target]
    calls = value.elts if isinstance(value, ast.Tuple) and isinstance(target, ast.Tuple) \
        else [value]
    declared = []
    for call in calls:
        if not (isinstance(call, ast.Call) and call.args and isinstance(call.args[0], ast.Constant)
                and isinstance(call.args[0].value, str)):
            return {}
        declared += [n.strip() for n in call.args[0].value.replace(" ", ",").split(",")
                     if n.strip()]
    if len(declared) != len(targets) or not all(isinstance(t, ast.Name) for t in targets):
        return {}
    return {d: t.id for d, t in zip(declared, targets) if d != t.id}


class JitFunction:
    """A TileLang program compiled by tilejit (what ``@tilejit.jit`` returns)."""
    # not a test pytest collects (a program named `test_kernel` in a test file: pytest
    # would unwrap it and call it with fixtures; TileLang's JITImpl is not collected)
    __test__ = False

    def __getattr__(self, name):
        # (a property that raised, or a TileLang name: JITImpl's internals are TileLang's;
        # its lazy programs answer for their compiled kernel, JITKernel's names too)
        if name in TILELANG_ATTRIBUTES["JITKernel"]:
            raise missing_attribute(self, name, "JITKernel", _KERNEL_MISSING.get(
                name, "a part of TileLang's compiled kernel that tilejit's does not have"))
        raise missing_attribute(self, name, "JITImpl", "a part of TileLang's @jit object "
                                "(its argument binding and cache internals) that tilejit's "
                                "does not have")

    def make_autotuner(self, configs, warmup, rep, key, timeout=None, **profile):
        """What ``@tilejit.autotune`` makes of this program (tuning/autotune.py asks)."""
        # autotuner.py imports this module for the classes it tunes: imported here, on use
        from tilejit.tilelang.autotuner import for_program
        return for_program(self, configs, warmup, rep, key, timeout, **profile)

    def __init__(self, func, out_idx=None, target="auto", pass_configs=None, verbose=False,
                 execution_backend=None, source=None, **ignored):
        self.func = func
        self.__name__ = func.__name__
        self.__doc__ = func.__doc__
        self.__wrapped__ = func
        # (source: (filename, FunctionDef) of a body other than the function's file's, the
        # branch a BranchingProgram chose)
        sugar = _Desugared(func, out_idx, source)
        self.sugar = sugar
        # the body's own T.annotate_pass_configs, @tilejit.jit's over them key by key
        self.attrs = {"global_symbol": func.__name__, **sugar.function_attrs}
        self.pass_configs = {**sugar.function_attrs.get(PASS_CONFIGS, {}),
                             **(pass_configs or {})}
        options = pass_config_options(self.pass_configs)
        self.out_idx = out_idx
        self.verbose = verbose
        self._packed_names: dict = {}   # parameters given as bytes: their packed dtype
        tj_target = {"sim": "sim", "c": "cpu", "llvm": "cpu"}.get(
            str(target).split()[0] if target else "auto", "auto")
        # TileLang's target names a backend; tilejit runs where the tensors live (the
        # GPU for device tensors, the simulator for host ones), as the seeds expect
        self.kernel = kernel_function(func, target=tj_target,
                                      source_tree=(sugar.filename, copy.deepcopy(sugar.fdef)),
                                      **options)
        # a tensor with a dynamic extent is one kernel for every size: no specializing on
        # its shape because a T.copy moves it whole
        self.kernel.whole_copies = tuple(p for p in self.kernel.whole_copies
                                         if p in self.kernel.tile_copies
                                         or not self._has_dynamic_extent(p))
        dynamic_used = [p for p, d in self.kernel.shape_entries if self._symbol_of(p, d)
                        and sugar.symbols[self._symbol_of(p, d)]]
        if dynamic_used:
            # a tile's or T.Parallel's extent (TileLang's dynamic shared memory): the
            # kernel is specialized on it, one compiled kernel per size, as for T.const
            logger.info("%s: T.dynamic extent(s) %s are compile-time extents here; one "
                        "kernel is compiled per size (T.const says so)", func.__name__,
                        dynamic_used)
        self._checks = {}       # compile-time settings -> evaluated annotations
        self._checked = {}      # _call_key of a call that passed the checks -> _argument_order
        # scalar parameter -> its annotation's dtype (`alpha: T.float32` in the signature;
        # one annotated in the body when its annotations are evaluated)
        self._scalars = {n: a for n, a in getattr(func, "__annotations__", {}).items()
                         if isinstance(a, DType) and a.held and n not in sugar.pointers
                         and n not in sugar.tensors}
        self._scalars.update({n: resolve_static(a, sugar.namespace)
                              for n, a in sugar.scalars.items()})
        self._pointers = sugar.pointers     # `A: T.ptr`: a tensor's address at each call
        # what a call gives at run time: the tensors and the typed scalars
        self._runtime_names = frozenset(sugar.tensors) | frozenset(self._scalars)
        self._tensor_names = frozenset(sugar.tensors)
        self._tensor_positions = frozenset(i for i, p in enumerate(sugar.params)
                                           if p in self._tensor_names)
        # a T.StridedTensor's checks read strides: they are part of a call's key then
        self._strided = any(annotation_strides(ann) is not None
                            for _, ann, _ in sugar.annotations)

    def _has_dynamic_extent(self, tensor):
        """Whether an extent of the tensor's annotation mentions a T.dynamic symbol."""
        for name, ann, _ in self.sugar.annotations:
            if name == tensor:
                for extent in annotation_shape(ann) or []:
                    if any(isinstance(n, ast.Name) and self.sugar.symbols.get(n.id)
                           for n in syntax.walk(extent)):
                        return True
        return False

    def _symbol_of(self, tensor, dim):
        for name, ann, _ in self.sugar.annotations:
            if name == tensor:
                shape = annotation_shape(ann) or []
                if dim < len(shape) and isinstance(shape[dim], ast.Name):
                    return shape[dim].id if shape[dim].id in self.sugar.symbols else None
        return None

    def _bind(self, args, kwargs, partial=False):
        if len(args) > len(self.sugar.params):
            raise TypeError(f"{self.__name__}() takes {len(self.sugar.params)} argument(s) "
                            f"({', '.join(self.sugar.params)}), got {len(args)}")
        values = dict(zip(self.sugar.params, args))
        for k, v in self.sugar.keyword_names(kwargs).items():
            if k in values:
                raise TypeError(f"{self.__name__}() got two values for argument {k!r}")
            if k not in self.sugar.params:
                if self.sugar.var_keywords is not None:
                    continue        # `**metadata`: extra keywords, which the body never reads
                raise TypeError(f"{self.__name__}() got an unexpected argument {k!r}")
            values[k] = v
        for name, default in self.kernel.source.defaults.items():
            values.setdefault(name, default)
        if partial:
            return values
        self._check_keyword_symbols(values, f"{self.__name__}(..., {{}}=...)")
        missing = [p for p in self.sugar.params if p not in values]
        if missing:
            raise TypeError(f"{self.__name__}() missing argument(s) {', '.join(missing)}")
        return values

    def _check_keyword_symbols(self, values, call):
        """Each symbol only a keyword sizes (``_Desugared.keyword_symbols``) given (the
        kernel checks it is an int, as any T.constexpr extent)."""
        for name in self.sugar.keyword_symbols:
            if values.get(name) is None:
                raise TypeError(f"{self.__name__}: give the size of symbol {name} (a T.const "
                                f"no input tensor's shape gives) as a keyword: "
                                f"{call.format(name)}")

    def _annotation_specs(self, values):
        """(name, TensorAnnotation, line) of each annotated tensor for these compile-time
        values: the annotations are evaluated once per distinct set of them (compiling and
        evaluating them on every call cost ~50 µs of each launch)."""
        settings = tuple((k, v) for k, v in values.items() if k not in self.sugar.tensors)
        try:
            return self._checks[settings]
        except KeyError:
            pass
        except TypeError:       # an unhashable setting: evaluated every time
            return self._evaluate_annotations(dict(settings))
        specs = self._checks[settings] = self._evaluate_annotations(dict(settings))
        return specs

    def _evaluate_annotations(self, settings):
        env = self.sugar.current()
        env.update(settings)
        for s, dynamic in self.sugar.symbols.items():
            env[s] = T.Symbol(s, dynamic=dynamic)
        specs = []
        for name, ann, line in self.sugar.annotations:
            try:
                spec = eval(compile(ast.Expression(ann), self.sugar.filename, "eval"), env)
            except TypeError:
                spec = None
            if spec is None or has_computed_extents(spec):     # T.ceildiv(K, 128)
                try:
                    spec = derived_extents(ann, env, self.sugar.filename)
                except TypeError as e:      # a dtype no tensor holds (T.float4_e2m1fn)
                    raise TypeError(f"argument {name!r} (annotated at line {line}): "
                                    f"{e}") from None
            if isinstance(spec, DType) and spec.held:
                # a scalar parameter (`n: T.int32`): passed in its dtype
                self._scalars[name] = spec
                continue
            if not isinstance(spec, TensorAnnotation):
                raise TypeError(f"line {line}: annotation of {name!r} is not T.Tensor/T.Buffer "
                                f"or a scalar dtype (T.int32)")
            specs.append((name, spec, line))
        return specs

    def _check_annotations(self, values):
        """Rank, dtype and extents of each annotated tensor, and one size per symbol."""
        sizes: dict[str, tuple[str, int]] = {}
        loose: dict[str, tuple[str, int]] = {}  # stride symbols seen on extent-1 dims only
        derived = []
        for name, spec, line in self._annotation_specs(values):
            if name not in values:
                continue
            x = values[name]
            packed = False
            if spec.dtype.packed > 1:   # float4_e2m1fn: its logical shape and strides
                declared = as_declared(x, spec.dtype)
                if declared is not x:   # bytes, passed on as float4_e2m1fn
                    self._packed_names[name] = spec.dtype
                arg = as_tensor_arg(declared)
                if arg is not None and arg.dtype.packed > 1:
                    x, packed = arg, True
            if not (hasattr(x, "shape") and hasattr(x, "dtype")):
                raise TypeError(f"argument {name!r}: expected a tensor (line {line}), got "
                                f"{type(x).__name__}")
            shape = tuple(x.shape)
            if len(shape) != len(spec.shape):
                raise ValueError(f"argument {name!r}: expected a {len(spec.shape)}-d tensor "
                                 f"(line {line}), got shape {shape}")
            got = x.dtype if packed else as_dtype(x.dtype)
            if got != spec.dtype:
                raise TypeError(f"argument {name!r}: expected dtype {spec.dtype.name} "
                                f"(line {line}), got {got.name}" + packed_hint(spec.dtype))
            for dim, (want, have) in enumerate(zip(spec.shape, shape)):
                try:
                    _match_entry(name, "shape", dim, want, have, line, sizes, derived)
                except ValueError as e:
                    if not packed or dim != len(shape) - 1:
                        raise
                    raise ValueError(f"{e}{packed_hint(spec.dtype)}") from None
            for dim, want in enumerate(getattr(spec, "strides", ())):
                have = x.strides[dim] if packed else _stride(x, dim)
                if shape[dim] == 1:     # a dimension of one element: any stride
                    if isinstance(want, T.Symbol):
                        loose.setdefault(want.name, (name, have))
                    continue
                _match_entry(name, "strides", dim, want, have, line, sizes, derived)
        for sym, first in loose.items():        # any stride does there: the first
            sizes.setdefault(sym, first)
        if derived:
            env = self.sugar.current()
            env.update((k, v) for k, v in values.items() if k not in self._tensor_names)
            env.update((sym, size) for sym, (_, size) in sizes.items())
            for name, dim, want, have, line, what in derived:
                expected = want.value(env) if isinstance(want, DerivedExtent) else (
                    want.value(env[want.name]) if want.name in env else None)
                if expected is not None and expected != have:
                    raise ValueError(f"argument {name!r}: {what}[{dim}] must be {want} = "
                                     f"{expected} (line {line}), got {have}")
        if all(name in values for name in self.sugar.tensors):
            unsized = sorted(set(self.sugar.symbols) - set(sizes)
                             - set(self.sugar.keyword_symbols))
            if unsized:
                raise CompileError(f"symbol(s) {', '.join(unsized)} are not the extent of any "
                                   f"annotated tensor for these compile-time values",
                                   self.sugar.filename, self.sugar.fdef.lineno)
        return sizes

    @property
    def source(self):
        """The desugared kernel's source (what ``@tilejit.autotune`` reads)."""
        return self.kernel.source

    def __call__(self, *args, **kwargs):
        if kwargs and self.sugar.declared_names:
            kwargs = self.sugar.keyword_names(kwargs)
        key = self._call_key(args, kwargs)
        order = self._checked.get(key) if key is not None else None
        if order is None:
            values = self._bind(args, kwargs)
            self._check_annotations(values)
            order = self._argument_order(len(args))
            if key is not None:
                if len(self._checked) >= 4096:      # shapes that never repeat
                    self._checked.clear()
                self._checked[key] = order
        values = [args[i] if i >= 0 else kwargs.get(p, d) for i, p, d in order]
        if self._scalars:
            values = [typed_scalar(p, v, self._scalars[p]) if p in self._scalars else v
                      for v, (_, p, _) in zip(values, order)]
        if self._pointers:
            values = [pointer_argument(p, v) if p in self._pointers else v
                      for v, (_, p, _) in zip(values, order)]
        if self._packed_names:      # byte tensors of float4_e2m1fn parameters
            values = [as_declared(v, self._packed_names[p]) if p in self._packed_names
                      else v for v, (_, p, _) in zip(values, order)]
        if not self._scalars:
            return _as_list(self.kernel(*values))
        try:
            return _as_list(self.kernel(*values))
        except CompileError as e:
            raise self._typed_scalar_hint(e) from None

    def _typed_scalar_hint(self, e: CompileError) -> CompileError:
        """``e``, saying so where a parameter annotated with a dtype (a run-time value, as
        TileLang's typed variable) is used where a compile-time value is needed."""
        named = [n for n in self._scalars if f"`{n}" in e.bare_message or f"({n}," in
                 e.bare_message or f" {n} " in e.bare_message]
        if not named or "compile time" not in e.bare_message:
            return e
        n = named[0]
        return CompileError(f"{e.bare_message} ({n!r} is annotated {self._scalars[n]!r}: a "
                            f"run-time value, as TileLang's typed variable; leave it "
                            f"unannotated, or `{n}: int`, for a compile-time one)",
                            e.filename, e.lineno)

    def parse_cache_key(self, *args, **kwargs):
        """TileLang's ``f.parse_cache_key(*args)``: the key a call with these arguments
        finds its checked binding by (each tensor's kind, shape and dtype, every other
        argument's value), without running it; None where a value is unhashable. Its
        eager-JIT tutorial times it beside a call to show the dispatch's cost."""
        if kwargs and self.sugar.declared_names:
            kwargs = self.sugar.keyword_names(kwargs)
        return self._call_key(args, kwargs)

    def _call_key(self, args, kwargs):
        """What the checks of a call depend on: each tensor's kind, shape and dtype (not
        its data) and every other argument's value; None where a value is unhashable. A
        call whose key passed the checks before passes them again (they read nothing
        else), so it skips them: they cost ~10 µs of a launch."""
        tensors, positions = self._tensor_names, self._tensor_positions
        key = [(type(a), tuple(a.shape), a.dtype) if i in positions and hasattr(a, "shape")
               else a for i, a in enumerate(args)]
        for k in sorted(kwargs):
            v = kwargs[k]
            key.append((k, (type(v), tuple(v.shape), v.dtype) if k in tensors
                        and hasattr(v, "shape") else v))
        if self._strided:
            key += [tuple(_stride(a, d) for d in range(len(a.shape)))
                    for a in list(args) + [kwargs[k] for k in sorted(kwargs)]
                    if hasattr(a, "shape") and hasattr(a, "dtype")]
        key = tuple(key)
        try:
            hash(key)
        except TypeError:
            return None
        return key

    def _argument_order(self, npositional):
        """Where each parameter's value comes from: (position or -1, name, default)."""
        defaults = self.kernel.source.defaults
        return tuple((i, p, None) if i < npositional else (-1, p, defaults.get(p))
                     for i, p in enumerate(self.sugar.params))

    def compile(self, *args, target=None, arch=None, **params):
        """TileLang's ``f.compile(M=..., N=..., **params)``: symbols' sizes and
        compile-time parameters; or ``f.compile(a, b, **params)`` with example tensors
        whose shapes give the symbols' sizes. Parameters not given take their defaults.
        Returns a kernel with ``get_kernel_source()``, called with the tensors only."""
        params = self.sugar.keyword_names(params)
        symbols = {k: params.pop(k) for k in list(params)
                   if k in self.sugar.symbols and k not in self.sugar.params}
        # a tensor given as its annotation (TileLang's `f.compile(out=T.Tensor[(16, 16),
        # T.float32])`): its shape and dtype
        given = {k: _annotation_spec(v) if k in self.sugar.tensors else v
                 for k, v in self._bind(args, params, partial=True).items()}
        # a run-time scalar (`scale: T.float32`): its type (the compiled program takes it at
        # each call, as the tensors); the value given, else 1, sizes what the host code
        # computes from it here (a grid of T.ceildiv(M, 32) blocks: 0 would be no launch)
        given.update({k: typed_scalar(k, given.get(k, 1), dtype)
                      for k, dtype in self._scalars.items()})
        tensors = {k: v for k, v in given.items() if k in self._runtime_names}
        settings = {k: v for k, v in given.items() if k not in self._runtime_names}
        self._check_keyword_symbols(given, f"{self.__name__}.compile(..., {{}}=...)")
        missing = [p for p in self.sugar.params if p not in given and p not in self.sugar.tensors]
        if missing:
            raise TypeError(f"{self.__name__}.compile(): missing compile-time argument(s) "
                            f"{', '.join(missing)}")
        for sym, (_, size) in self._check_annotations(given).items():
            symbols.setdefault(sym, size)
        # a T.dynamic symbol no tensor sizes: the kernel is the same for every size but for
        # the rows' alignment, which this placeholder keeps (as the classic door's)
        for sym, dynamic in self.sugar.symbols.items():
            if dynamic:
                symbols.setdefault(sym, DYNAMIC_PLACEHOLDER)
        env = self.sugar.current()
        env.update(settings)
        env.update(symbols)
        unsized = []
        for name, ann, _ in self.sugar.annotations:
            if name in tensors:
                continue
            missing = [node.id for node in annotation_shape(ann) or []
                       if isinstance(node, ast.Name) and node.id in self.sugar.symbols
                       and node.id not in symbols]
            if missing:
                unsized += missing
                continue
            value = eval(compile(ast.Expression(ann), self.sugar.filename, "eval"), env)
            if isinstance(value, TensorAnnotation):
                tensors[name] = TensorSpec(tuple(int(d) for d in value.shape), value.dtype)
            else:           # a run-time scalar (`alpha: T.float32`): its type alone
                tensors[name] = typed_scalar(name, 0, as_dtype(value))
        if unsized:
            raise TypeError(f"{self.__name__}.compile(): give the size of symbol(s) "
                            f"{', '.join(sorted(set(unsized)))} (as keywords, or example "
                            "tensors)")
        values = [tensors[p] if p in tensors else settings[p] for p in self.sugar.params]
        handle = self.kernel.compile(*values, target=target or "cuda",
                                     arch=arch or default_arch())
        return CompiledProgram(self, handle, settings, tensors,
                               self._kernel_params(tensors, env))

    def _kernel_params(self, tensors, env) -> list:
        """TileLang's ``kernel.params``: a ``KernelParam`` of each run-time parameter, in
        order, then of each ``T.empty`` output (its shape evaluated with the sizes
        given)."""
        out = []
        for name in self.sugar.params:
            value = tensors.get(name)
            if value is None:
                continue
            if hasattr(value, "shape") and hasattr(value, "dtype") and np.ndim(value) > 0:
                out.append(KernelParam(as_dtype(value.dtype), [int(d) for d in value.shape]))
            else:
                out.append(KernelParam(as_dtype(np.asarray(value).dtype), []))
        for stmt in self.sugar.fdef.body:
            call = stmt.value if isinstance(stmt, ast.Assign) else None
            if not (isinstance(call, ast.Call) and is_call_to(call, T.empty, self.sugar.namespace)
                    and call.args):
                continue
            try:
                shape = eval(compile(ast.Expression(call.args[0]), self.sugar.filename,
                                     "eval"), env)
                dtype = eval(compile(ast.Expression(call.args[1]), self.sugar.filename,
                                     "eval"), env) if len(call.args) > 1 else T.float32
            except Exception:       # (a shape the kernel computes: not listed)
                continue
            shape = shape if isinstance(shape, (list, tuple)) else [shape]
            out.append(KernelParam(as_dtype(dtype), [int(d) if isinstance(d, numbers.Integral)
                                                     else str(d) for d in shape]))
        return out

    def get_kernel_source(self, *args, **kwargs) -> str:
        """The PTX for these compile-time values and symbol sizes (``.compile``'s
        arguments), as TileLang's ``tl_gemm.get_kernel_source(M=..., block_N=...)``."""
        return self.compile(*args, **kwargs).get_kernel_source()

    def get_tir(self, *args, **kwargs) -> "BoundProgram":
        """TileLang's ``f.get_tir(T.Tensor((128, 128)), ...)``: the program for these
        arguments (``.compile``'s), not compiled yet; ``tilejit.par_compile`` of a list
        of them compiles each (there is no TIR: tilejit emits PTX from the source)."""
        self._bind(args, kwargs, partial=True)      # a wrong argument: an error now
        return BoundProgram(self, args, kwargs)

    def par_compile(self, configs, num_workers=None, ignore_error=False):
        """TileLang's ``f.par_compile([{param: value, ...}, ...])``: the program for each
        config (``.compile``'s keywords; a tensor parameter given as an annotation, such
        as ``T.ptr()``, is left to its annotation), in order, each compiled for the GPU
        now, so that the calls with those values find their kernel compiled (the disk
        cache; ``@tilejit.autotune`` is where configs compile in parallel processes).
        With ``ignore_error``, a config that does not compile gives None."""
        if not isinstance(configs, (list, tuple)):
            raise TypeError(f"{self.__name__}.par_compile(configs): expected a list of dicts "
                            f"of parameter values, got {type(configs).__name__}")
        out = []
        for config in configs:
            if not isinstance(config, dict):
                raise TypeError(f"{self.__name__}.par_compile: each config is a dict of "
                                f"parameter values, got {type(config).__name__}")
            # (a T.Tensor annotation of numbers stays: compile() takes it as the tensor's
            # shape and dtype)
            params = {k: v for k, v in config.items()
                      if not (k in self.sugar.tensors and _is_annotation_value(v)
                              and not isinstance(_annotation_spec(v), TensorSpec))}
            try:
                out.append(self.compile(**params))
            except (CompileError, TypeError, ValueError):
                if not ignore_error:
                    raise
                out.append(None)
        return out


def _is_annotation_value(value) -> bool:
    """A tensor parameter's value that is a type, not a tensor (``T.ptr()``,
    ``T.Tensor((m, n), dtype)``)."""
    return not hasattr(value, "shape") or type(value).__module__.startswith("tilejit.")


class KernelConveniences:
    """What TileLang's JITKernel offers beside calling it, over ``get_profiler()`` and
    ``get_kernel_source()``."""

    def __getattr__(self, name):
        raise missing_attribute(self, name, "JITKernel", _KERNEL_MISSING.get(
            name, "a part of TileLang's compiled kernel that tilejit's does not have"))

    def run_once(self, func=None):
        """Run the kernel (or ``func``) once on inputs the profiler makes; its result."""
        return self.get_profiler().run_once(func)

    def show_source(self, which: str = "kernel") -> None:
        """Print the kernel's PTX (``which="kernel"``); tilejit has no host source (the
        launch is Python), so "host" and "both" say so."""
        if which not in ("kernel", "host", "both"):
            raise ValueError(f"show_source: `which` must be 'kernel', 'host' or 'both', got "
                             f"{which!r}")
        if which in ("kernel", "both"):
            print(self.get_kernel_source())
        if which in ("host", "both"):
            print("// tilejit launches from Python (cuda.bindings); no host source")

    def export_sources(self, kernel_path=None, host_path=None) -> None:
        """Write the kernel's PTX to ``kernel_path`` (its folder made); tilejit has no
        host source, so ``host_path`` gets a line saying so. One of the two is needed."""
        if kernel_path is None and host_path is None:
            raise ValueError("export_sources: give kernel_path or host_path (or both)")
        for path, text in ((kernel_path, self.get_kernel_source), (host_path, lambda: (
                "// tilejit launches from Python (cuda.bindings); no host source\n"))):
            if path is not None:
                folder = os.path.dirname(path)
                if folder:
                    os.makedirs(folder, exist_ok=True)
                with open(path, "w") as f:
                    f.write(text())

    def print_source_code(self, which: str = "kernel", file=None) -> None:
        """TileLang's deprecated name: ``show_source(which)``, or with ``file`` the
        kernel's source written there (``export_sources(kernel_path=file)``)."""
        logger.warning("print_source_code is deprecated; use show_source() or "
                       "export_sources() instead")
        if file is not None:
            self.export_sources(kernel_path=file)
        else:
            self.show_source(which)


class BoundProgram:
    """A program and the arguments ``get_tir`` was given: what ``par_compile`` compiles
    (``program.compile(*args, **kwargs)``)."""

    def __getattr__(self, name):
        # TileLang's get_tir gives a TVM PrimFunc
        raise missing_attribute(self, name, "PrimFunc", _TVM_PRIM_FUNC)

    def __init__(self, program: "JitFunction", args, kwargs):
        self.program, self.args, self.kwargs = program, args, kwargs
        self.__name__ = program.__name__

    def compile(self, **options):
        return self.program.compile(*self.args, **{**self.kwargs, **options})

    def __repr__(self):
        return f"<tilejit program {self.__name__} bound for par_compile>"


class CompiledProgram(KernelConveniences):
    """A compiled TileLang program: ``get_kernel_source()`` gives the PTX; calling it
    with the tensors (in parameter order) runs it with the compile-time parameters it
    was compiled for; ``get_profiler()`` makes its inputs from the compiled shapes."""

    def __init__(self, program: JitFunction, handle, constants, tensors=None, params=()):
        self.program = program
        self.handle = handle
        self.constants = constants          # the compile-time parameters' values
        self.params = list(params)          # TileLang's list[KernelParam]
        # the run-time arguments, in parameter order: tensors and typed scalars
        self.tensor_params = [p for p in program.sugar.params if p in program._runtime_names]
        self.tensors = tensors or {}

    def get_kernel_source(self, kernel_only: bool = True, arch=None) -> str:
        """The PTX (only the kernel's: ``kernel_only`` is TileLang's, always so here);
        ``arch="sm_80"`` compiles the same specialization for another GPU, as a compiled
        prim_func's ``get_kernel_source(arch=)`` does."""
        if arch is None:
            return self.handle.ptx
        values = [self.tensors[p] if p in self.tensors else self.constants[p]
                  for p in self.program.sugar.params]
        return self.program.kernel.compile(*values, target="cuda", arch=arch).ptx

    def get_profiler(self, tensor_supply_type=None):
        """TileLang's profiler (``tilelang/profiler.py``) over this program's tensors."""
        # profiler.py is TileLang's module (it imports torch where it makes tensors): on use
        from tilejit.tilelang.profiler import Profiler
        from tilejit.tilelang.utils import TensorSupplyType  # its supply types, on use too
        inputs = [(name, tuple(self.tensors[name].shape), as_dtype(self.tensors[name].dtype),
                   False) for name in self.tensor_params]
        return Profiler(self, tensor_supply_type or TensorSupplyType.Auto, inputs=inputs)

    def __call__(self, *tensors):
        if len(tensors) != len(self.tensor_params):
            raise TypeError(f"compiled {self.program.__name__}() takes the tensor(s) "
                            f"{', '.join(self.tensor_params)}, got {len(tensors)} argument(s)")
        return self.program(**dict(zip(self.tensor_params, tensors)), **self.constants)


def _match_entry(name, what, dim, want, have, line, sizes, derived) -> None:
    """One extent (``what`` "shape") or stride ("strides") ``have`` of argument ``name``
    against its annotation's ``want``: a symbol's size goes into ``sizes``, an extent
    computed from symbols into ``derived`` (checked once all are sized), a number must
    be equal."""
    if isinstance(want, T.Symbol):
        first = sizes.setdefault(want.name, (name, have))
        if first[1] != have:
            raise ValueError(f"symbol {want.name}: {first[0]} has {first[1]} but "
                             f"{name}.{what}[{dim}] is {have} (line {line})")
    elif isinstance(want, int) and want != have:
        raise ValueError(f"argument {name!r}: {what}[{dim}] must be {want} "
                         f"(line {line}), got {have}")
    elif isinstance(want, (DerivedExtent, LinearExtent)):
        derived.append((name, dim, want, have, line, what))


def _stride(x, dim) -> int:
    """A tensor's or array's stride along ``dim``, in elements."""
    if callable(getattr(x, "stride", None)):
        return int(x.stride(dim))
    return int(x.strides[dim]) // int(x.itemsize)


def _check_pass_configs(configs):
    for key in configs:
        if key not in _KNOWN_PASS_CONFIGS and key not in _WARNED:
            _WARNED.add(key)
            warnings.warn(f"tilejit.jit: pass config {key!r} means nothing to tilejit; "
                          "ignored", stacklevel=4)


def pass_config_options(configs) -> dict:
    """The ``KernelFunction`` options TileLang's pass configs ask for: ``fast_math``,
    ``dump_dir`` (the IR dump directory or None) and ``switches`` (CompileOptions turned
    off); unknown keys are warned about once each."""
    if not isinstance(configs, dict):
        raise TypeError(f"pass_configs: expected a dict of PassConfigKey values, got "
                        f"{type(configs).__name__}")
    _check_pass_configs(configs)
    fast_math = bool(configs.get(PassConfigKey.TL_ENABLE_FAST_MATH, False)) and not bool(
        configs.get(PassConfigKey.TL_DISABLE_FAST_MATH, False))
    dump = None
    if configs.get(PassConfigKey.TL_ENABLE_DUMP_IR):
        dump = os.path.abspath(str(configs.get(PassConfigKey.TL_DUMP_IR_DIR)
                                   or compile_options().dump_dir or "tilejit_dump_ir"))
    switches = {option: False for key, option in (
        (PassConfigKey.TL_DISABLE_TMA_LOWER, "tma"), (PassConfigKey.TL_DISABLE_WGMMA, "wgmma"),
        (PassConfigKey.TL_DISABLE_WARP_SPECIALIZED, "warp_specialize"),
        (PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC, "thread_sync")) if configs.get(key)}
    # TileLang's programs rely on its safe memory access unless they turn it off
    switches["safe_memory"] = not configs.get(PassConfigKey.TL_DISABLE_SAFE_MEMORY_ACCESS)
    return {"fast_math": fast_math, "dump_dir": dump, "switches": switches}


_JIT_OPTIONS = ("out_idx", "target", "target_host", "execution_backend", "verbose",
                "pass_configs", "debug_root_path", "compile_flags")


def jit(func=None, *, out_idx=None, target="auto", pass_configs=None, verbose=False,
        execution_backend=None, **options):
    """TileLang's ``@tilelang.jit`` (bare or with options): TileLang's options; another
    keyword (a misspelling such as ``out_idxx``) is a TypeError naming them."""
    unknown = sorted(set(options) - set(_JIT_OPTIONS))
    if unknown:
        raise TypeError(f"@tilelang.jit: unexpected option(s) {', '.join(map(repr, unknown))};"
                        f" it takes {', '.join(_JIT_OPTIONS)}")
    check_target(target, "@tilelang.jit")
    check_execution_backend(execution_backend, "@tilelang.jit")
    if pass_configs is not None and not isinstance(pass_configs, dict):
        raise TypeError(f"@tilelang.jit pass_configs: expected a dict of {{PassConfigKey: "
                        f"value}}, got {type(pass_configs).__name__} {pass_configs!r}")

    def wrap(f):
        # `@tilelang.jit([1])` / `tilelang.jit("cuda")`: an option given by position, which
        # failed inside asking it for its __name__
        if not callable(f) or not isinstance(getattr(f, "__name__", None), str):
            raise TypeError(f"@tilelang.jit takes a function; its options are keywords, "
                            f"e.g. out_idx=[1]; got {type(f).__name__} {f!r:.80}")
        if isinstance(f, PrimFunc):
            # `@tilelang.jit(out_idx=-1)` over `@T.prim_func` (KernelBench solutions, older
            # TileLang): the prim_func compiled as tilelang.compile does it
            from tilejit.tilelang.classic import compile as compile_prim_func
            try:
                return compile_prim_func(f, out_idx=out_idx, target=target,
                                         pass_configs=pass_configs)
            except CompileError as error:
                return FailedProgram(f, error)
        if _returns_prim_func(f):
            # classic.py imports this module (pass_config_options): imported here, on use
            from tilejit.tilelang.classic import ClassicJit
            return ClassicJit(f, out_idx=out_idx, target=target, pass_configs=pass_configs)
        def make(source=None):
            return JitFunction(f, out_idx=out_idx, target=target, pass_configs=pass_configs,
                               verbose=verbose, execution_backend=execution_backend,
                               source=source, **options)
        found = function_def_from_file(f)
        if found is not None and launching_ifs(found[1], function_namespace(f)):
            # an `if` of the body around its T.Kernel: one program per outcome
            return BranchingProgram(f, *found, lambda filename, fdef: make((filename, fdef)),
                                    out_idx=out_idx)
        try:
            return make()
        except CompileError as error:
            return FailedProgram(f, error)
    return wrap(func) if func is not None else wrap


class FailedProgram:
    """An eager ``@tilejit.jit`` program that does not compile: its ``CompileError``,
    found when it was defined, is raised when it is used (called, compiled, tuned, asked
    anything), not when its module is imported. TileLang compiles on the first call,
    and its example modules define kernels for other GPUs beside the ones their tests
    run (a Blackwell kernel in a module whose Hopper tests skip it); such a module still
    imports, and its other kernels still run."""

    def __init__(self, func, error):
        self.func, self.error = func, error
        self.__name__ = func.__name__
        self.__doc__ = func.__doc__
        self.__wrapped__ = func

    def _raise(self):
        raise self.error.with_traceback(None)

    def __call__(self, *args, **kwargs):
        self._raise()

    def make_autotuner(self, *args, **kwargs):
        return self             # tuning it raises the error too, when it is called

    def __getattr__(self, name):
        # a use is what a compiled program has (f.compile, f.kernel, ...); any other name
        # is a probe (hasattr(p, "_repr_html_"); pytest's, collecting a program named
        # test_*), not a use
        if name in _USES:
            self._raise()
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __repr__(self):
        return f"<tilejit.jit program {self.__name__} that does not compile: {self.error}>"


# why TileLang's compiled kernel's names tilejit's lacks are not there
_BACKENDS = ("TileLang's execution backends (tvm_ffi, cython, nvrtc, ...) and their "
             "adapters; tilejit's one launch path is the CUDA driver, from Python")
_KERNEL_MISSING = {
    "get_host_source": "tilejit launches from Python through the CUDA driver: there is no "
                       "host source",
    "host_source": "tilejit launches from Python through the CUDA driver: there is no host "
                   "source",
    "adapter": _BACKENDS, "execution_backend": _BACKENDS, "backend": _BACKENDS,
    "execution_backend_spec": _BACKENDS, "backend_context": _BACKENDS,
    "torch_function": _BACKENDS, "artifact": _BACKENDS,
    "prim_func": "TileLang's TVM PrimFunc (tilejit compiles the program's Python)",
}
_TVM_PRIM_FUNC = ("TVM's PrimFunc (its IR: body, buffer_map, script); tilejit compiles the "
                  "program's Python and keeps no TVM IR")


# the size a T.dynamic extent takes where no tensor gives one (get_kernel_source()): the
# kernel is the same for every size but for the alignment of rows (a size that leaves a
# tensor's rows off 16 bytes compiles a variant without vector accesses); this one keeps
# them aligned
DYNAMIC_PLACEHOLDER = 1024


# what a use of a program reads: JitFunction's public methods and attributes
_USES = frozenset(n for n in dir(JitFunction) if not n.startswith("_")) | frozenset((
    "kernel", "sugar", "pass_configs", "attrs", "out_idx", "verbose", "func"))


def _annotation_spec(value):
    """A tensor given to ``compile`` as its annotation (``T.Tensor[(16, 16), T.float32]``,
    by position or keyword) as the TensorSpec of its shape and dtype; else ``value``."""
    if isinstance(value, TensorAnnotation) and all(
            isinstance(d, numbers.Integral) and not isinstance(d, bool) for d in value.shape):
        return TensorSpec(tuple(int(d) for d in value.shape), value.dtype)
    return value


def _as_list(result):
    """Several outputs as TileLang's adapters return them: a list (one stays itself)."""
    return list(result) if isinstance(result, tuple) else result


def _returns_prim_func(func) -> bool:
    """The classic style: the function defines a nested ``@T.prim_func``, or is a factory
    that returns one another function builds (``return build(N, dtype)``): no tensor
    annotated in its body or signature (only plain types: ``N: int``), no ``with`` block,
    T.empty or T.Kernel of its own, a value returned."""
    found = function_def_from_file(func)
    if found is None:
        return False
    fdef = found[1]
    namespace = function_namespace(func)
    for node in syntax.walk(fdef):
        if isinstance(node, ast.FunctionDef) and node is not fdef and any(
                resolve_static(d, namespace) is T.prim_func for d in node.decorator_list):
            return True
    plain = (int, float, bool, str, type(None))
    signature = [a.annotation for a in fdef.args.args + fdef.args.kwonlyargs
                 if a.annotation is not None]
    makes_outputs = any(isinstance(n, ast.Call) and resolve_static(n.func, namespace) in (
        T.empty, T.Kernel) for n in syntax.walk(fdef))
    return (not makes_outputs
            and not any(isinstance(s, (ast.AnnAssign, ast.With)) for s in fdef.body)
            and all(resolve_static(a, namespace) in plain or (
                isinstance(a, ast.Constant) and a.value in ("int", "float", "bool", "str"))
                for a in signature)
            and any(isinstance(s, ast.Return) and s.value is not None for s in fdef.body))


JITKernel.register(CompiledProgram)

# ``from tilelang.jit import JITImpl`` (a type annotation of what ``@tilelang.jit``
# returns, in programs that pass the decorated factory around): an eager program's class
JITImpl = JitFunction

# TileLang's names this module does not have: an error naming them (``compat.py``); TileLang's
# jit is a package (``jit.adapter``, ``jit.kernel``): its submodules are refused too
__path__ = []
_missing_name = module_getattr(
    "tilelang.jit", __name__,
    "of TileLang's jit module tilejit has jit, compile, par_compile, JITKernel, JITImpl "
    "and PassConfigKey (its adapters, execution backends and cache are TileLang's own)")


def __getattr__(name):
    if name in ("compile", "par_compile"):     # `from tilelang.jit import compile`
        from tilejit.tilelang import classic    # (it imports this module)
        return getattr(classic, name)
    return _missing_name(name)
