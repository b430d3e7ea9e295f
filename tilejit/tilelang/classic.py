"""TileLang's classic style: ``@T.prim_func`` kernels whose parameters carry their
shapes and dtypes (``A: T.Tensor((M, K), "float16")``, evaluated when the function is
defined), compiled by ``tilejit.compile(prim_func, out_idx=...)`` or returned by a
factory decorated ``@tilejit.jit(out_idx=[...])``. Calling the compiled kernel checks
each tensor against its annotation, allocates the ``out_idx`` outputs (like the first
input: torch stays torch, on its device) and returns them.

A shape symbol (``n = T.dynamic("n")``, or the deprecated ``T.symbolic``) used in the
body means the run-time extent of the first parameter dimension it annotates: the
kernel's source gets ``n = A.shape[0]`` before ``T.Kernel``, as the eager style does, so
one compiled kernel serves every ``n``; a dynamic symbol only a ``T.Parallel`` extent
needs is read at run time there; one that is a tile's extent (TileLang's dynamic shared
memory) specializes the kernel on its size, one compiled kernel per size (as ``T.const``
does; logged at INFO)."""
from __future__ import annotations

import ast
import inspect
import sys
import warnings

import numpy as np

from tilejit import syntax
from tilejit.errors import CompileError, GridError
from tilejit.frontend.analysis import compile_time_shapes, unread_params
from tilejit.runtime.arguments import (TensorSpec, as_declared, as_tensor_arg, check_scalar,
                                       element_span, packed_hint,
                                       pointer_argument, typed_scalar)
from tilejit import language as T
from tilejit.frontend.references import current_namespace
from tilejit.frontend.source import function_def_from_file, function_namespace, resolve_static
from tilejit.frontend.tile_helpers import helper_of
from tilejit.log import logger
from tilejit.runtime.host import allocate_output, allocating_like, placement_without_inputs
from tilejit.runtime.kernel import default_arch, kernel_function
from tilejit.target import Target
from tilejit.tilelang.tvm_target import (Target as TvmTarget, arch_option, check_execution_backend,
                                         check_target)
from tilejit.runtime.sequence import KernelSequence
from tilejit.tilelang.output_params import out_positions
from tilejit.tilelang.engine.param import KernelParam
from tilejit.sim.runner import FRESH_OUTPUTS
from tilejit.tilelang.jit import (DYNAMIC_PLACEHOLDER, BoundProgram, JITKernel,
                                  KernelConveniences, pass_config_options)
from tilejit.language.tilelang_names import (SYMBOLIC, LinearExtent, PrimFunc, Symbol,
                                             SymbolicInt, returned_count)


def _bind_symbols(pf: PrimFunc, order):
    """(the prim_func's source with ``n = A.shape[0]`` for each symbol its body uses,
    {symbol: (parameter, dimension, a, b, "shape" or "strides")}: the symbol is
    ``(shape[dim] - b) // a``, from a plain extent where one has it, else from a linear
    one, ``a * n + b``, else from a ``T.StridedTensor``'s stride the same ways); the
    source is None when the body uses none. A closure value computed from symbols
    (``grid = T.ceildiv(m, 128)``) is computed at the top of the body from the sizes."""
    found = function_def_from_file(pf.func)
    dims: dict = {}
    strided: dict = {}      # symbol -> every (parameter, dimension) whose stride it is
    for name in order:       # `tokens: n`: the parameter is the symbol's value
        symbol = getattr(pf.annotations[name], "symbol", None)
        if symbol is not None:
            dims.setdefault(symbol, (name, None, 1, 0, "scalar"))
    for what in ("shape", "strides"):
        for linear in (False, True):
            for name in order:
                for dim, extent in enumerate(getattr(pf.annotations[name], what, ())):
                    if isinstance(extent, Symbol) and not linear:
                        dims.setdefault(extent, (name, dim, 1, 0, what))
                        if what == "strides":
                            strided.setdefault(extent, []).append((name, dim))
                    elif isinstance(extent, LinearExtent) and linear:
                        dims.setdefault(extent.symbol, (name, dim, extent.a, extent.b, what))
    if found is None:
        return None, dims
    filename, fdef = found
    namespace = function_namespace(pf.func)
    # (and those the macros it calls read from their factory)
    namespace = {**symbols_read_by_helpers(fdef, namespace), **namespace}
    used = sorted({node.id for stmt in fdef.body for node in syntax.walk(stmt)
                   if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
                   and isinstance(namespace.get(node.id), SymbolicInt)}
                  | set(symbols_read_by_helpers(fdef, namespace)))
    if not used:
        return None, dims

    def line_of(name):
        return next(node.lineno for stmt in fdef.body for node in syntax.walk(stmt)
                    if isinstance(node, ast.Name) and node.id == name)

    bindings = []
    for name in used:
        value = namespace[name]

        def read(symbol, name=name, value=value):
            if symbol not in dims:
                raise CompileError(
                    f"@T.prim_func {pf.__name__}: symbol {symbol.name} ({symbol!r}) is used "
                    f"in the body{'' if value is symbol else f' (in {name} = {value!r})'} "
                    "but is not an extent of any parameter's annotation (an extent n or "
                    "a * n + b gives n; one such as n // 2 does not)", filename, line_of(name))
            param, dim, a, b, what = dims[symbol]
            if what == "scalar":
                return ast.Name(param, ast.Load())
            if what == "strides" and symbol in strided:   # a plain symbol (not a * n + b)
                return _stride_read(strided[symbol])
            expr = ast.Subscript(ast.Attribute(ast.Name(param, ast.Load()), what,
                                               ast.Load()), ast.Constant(dim), ast.Load())
            if (a, b) != (1, 0):
                expr = ast.BinOp(ast.BinOp(expr, ast.Sub(), ast.Constant(b)), ast.FloorDiv(),
                                 ast.Constant(a))
            return expr
        bindings.append(ast.copy_location(
            ast.Assign([ast.Name(name, ast.Store())], value.to_ast(read)), fdef))
    fdef.body = bindings + fdef.body
    return (filename, syntax.fix_missing_locations(fdef)), dims


def symbols_read_by_helpers(fdef, namespace, depth=4) -> dict:
    """{name: symbol} of the shape symbols that the macros and helpers ``fdef`` calls
    (and those they call, ``depth`` levels) read from their factory, where the kernel's
    namespace names no other value so (mate's varlen cumsum: a ``@T.macro`` returning
    ``real_batch_size``, a ``T.dynamic`` the kernel's annotations bind): the kernel
    binds them at its top, as those it reads itself, and the inlined body reads them
    (``kernel_macros.inline_call``)."""
    found = {}
    for node in syntax.walk(fdef):
        if not (isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute))):
            continue
        try:
            inner = helper_of(resolve_static(node.func, namespace))
        except TypeError:           # an unhashable value called
            continue
        source = inner is not None and function_def_from_file(inner)
        if not source:
            continue
        own = current_namespace(inner)
        found.update({n.id: own[n.id] for n in syntax.walk(source[1])
                      if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
                      and isinstance(own.get(n.id), SymbolicInt)
                      and namespace.get(n.id, own[n.id]) is own[n.id]})
        if depth > 1:
            inner_found = symbols_read_by_helpers(source[1], {**own, "T": T}, depth - 1)
            found.update({n: v for n, v in inner_found.items()
                          if namespace.get(n, v) is v})
    return found


def _stride_read(candidates) -> ast.expr:
    """A stride symbol's value in the body: the stride of the first of its dimensions
    that holds more than one element (a dimension of one element may have any stride, and
    the call checks only the others), the last one's otherwise."""
    def read(param, dim, what):
        return ast.Subscript(ast.Attribute(ast.Name(param, ast.Load()), what, ast.Load()),
                             ast.Constant(dim), ast.Load())
    expr = read(*candidates[-1], "strides")
    for param, dim in reversed(candidates[:-1]):
        test = ast.Compare(read(param, dim, "shape"), [ast.NotEq()], [ast.Constant(1)])
        expr = ast.IfExp(test, read(param, dim, "strides"), expr)
    return expr


def _with_static_extents(kernel, pf: PrimFunc) -> tuple:
    """The kernel's shape entries and every integer extent of a tensor annotation that
    the kernel reads: the call checks those (``_check``), so the kernel is compiled for
    them as TileLang's is, and its bounds tests (safe memory access, tile copies' edges)
    compare with constants LLVM folds, not with the shape the launch passes."""
    read = set(kernel.source.params) - set(kernel.source.constexpr_params)
    static = {(name, dim) for name in pf.params if name in read
              and not getattr(pf.annotations[name], "scalar", False)
              and not getattr(pf.annotations[name], "pointer", False)
              for dim, extent in enumerate(getattr(pf.annotations[name], "shape", ()) or ())
              if isinstance(extent, int) and not isinstance(extent, bool)}
    return tuple(sorted(set(kernel.shape_entries) | static))


class CompiledPrimFunc(KernelConveniences):
    """A compiled T.prim_func: ``kernel(*inputs)`` with ``out_idx`` outputs allocated and
    returned, or ``kernel(*all_tensors)``; ``get_kernel_source()`` gives the PTX."""

    def __init__(self, pf: PrimFunc, out_idx=None, target="auto", pass_configs=None):
        self.prim = pf
        self._fixed = False     # the call signature of fixed tensors (unknown yet)
        # the outputs are returned in the order out_idx names them (TileLang's)
        self.out_order = out_positions([] if out_idx is None else out_idx, pf.params,
                                       pf.__name__)
        self.out_idx = sorted(self.out_order)
        for i in self.out_idx:
            if getattr(pf.annotations[pf.params[i]], "scalar", False):
                raise ValueError(f"out_idx {i}: parameter {pf.params[i]!r} of {pf.__name__} "
                                 "is a scalar, not a tensor to allocate and return")
        target, arch = target_and_arch(target)
        # TileLang's target names a backend; tilejit runs where the tensors live (the
        # GPU for device tensors, the simulator for host ones), as the seeds expect
        # the body's own T.annotate_pass_configs, compile()'s over them key by key
        options = pass_config_options({**pf.pass_configs, **(pass_configs or {})})
        if arch is not None:
            options["arch"] = arch
        order = [p for i, p in enumerate(pf.params) if i not in self.out_idx] + \
            [pf.params[i] for i in self.out_idx]
        tree, self._symbol_dims = _bind_symbols(pf, order)
        self.kernel = kernel_function(pf.func, target=target, source_tree=tree, **options)
        for name, (rank, line) in getattr(self.kernel, "ranks", {}).items():
            shape = getattr(pf.annotations.get(name), "shape", None)
            if shape is not None and len(shape) != rank:
                raise CompileError(f"tensor {name!r} has {len(shape)} dimension(s) (its "
                                   f"annotation: shape {tuple(shape)}), indexed with {rank}",
                                   self.kernel.source.filename, line)
        # a tensor with a dynamic extent is one kernel for every size: no specializing on
        # its shape because a T.copy moves it whole to another tensor (one moved whole to
        # a tile has the tile's extents: specialized, a size that differs refused)
        self.kernel.whole_copies = tuple(
            p for p in self.kernel.whole_copies if p in self.kernel.tile_copies
            or not any(getattr(e, "dynamic", False)
                       for e in getattr(pf.annotations.get(p), "shape", ())))
        # a dynamic symbol that only T.Parallel extents need is read at run time there
        # (passes/dynamic_parallel.py), as TileLang's loops over it are
        needed = None
        for symbol, entry in self._symbol_dims.items():
            if symbol.dynamic and entry[4] == "shape" and entry[:2] in self.kernel.shape_entries:
                if needed is None:
                    needed = set(compile_time_shapes(self.kernel.source, parallel=False))
                if entry[:2] not in needed:
                    self.kernel.shape_entries = tuple(
                        e for e in self.kernel.shape_entries if e != entry[:2])
                    continue
                # a tile's extent (TileLang's dynamic shared memory): the kernel is
                # specialized on it, one compiled kernel per size, as for T.const
                logger.info("@T.prim_func %s: dynamic symbol %s is a tile extent; one "
                            "kernel is compiled per size", pf.__name__, symbol.name)
        if not isinstance(self.kernel, KernelSequence):
            self.kernel.shape_entries = _with_static_extents(self.kernel, pf)

    def _check_now(self, target: str) -> None:
        """TileLang compiles at ``tilejit.compile``: with every shape static, the front end
        runs now (``kernel.check``), so a program it refuses (a T.gemm no warp partition
        covers, a shared layout that is not injective) fails here, not at the first call.
        For the GPU when the target says CUDA or a CUDA device is present, else for the
        simulator."""
        if isinstance(self.kernel, KernelSequence) or target == "cpu":
            return              # several launches (and their scratch): at the first call;
            #                     a CPU target's program has no GPU front end to pass
        if any(p in self.kernel.tile_copies and any(
                getattr(e, "dynamic", False) for e in getattr(self.prim.annotations.get(p),
                                                               "shape", ()))
               for p in self.kernel.whole_copies):
            return      # a T.dynamic tensor moved whole to a tile: its size is the call's
        try:        # a T.dynamic extent takes its placeholder; a T.symbolic one waits
            specs = self._specs(None)
        except TypeError:
            return
        try:
            if target != "sim" and (target == "cuda" or _cuda_present()):
                self.kernel.check(*specs, target="cuda", arch=self._arch())
            else:
                self.kernel.check(*specs, target="sim")
        except GridError:
            pass        # TileLang compiles it and refuses the call (an empty grid), or the
            #             sizes checked here are placeholders: the call checks its grid


    @property
    def params(self) -> list:
        """TileLang's ``kernel.params``: a ``KernelParam`` of each parameter, in order (a
        symbolic extent as its symbol's name, a scalar's shape ``[]``)."""
        out = []
        for name in self.prim.params:
            ann = self.prim.annotations[name]
            shape = [] if getattr(ann, "scalar", False) else [
                int(d) if isinstance(d, int) else str(getattr(d, "name", d))
                for d in getattr(ann, "shape", ())]
            out.append(KernelParam(ann.dtype, shape))
        return out

    def get_profiler(self, tensor_supply_type=None):
        """TileLang's ``kernel.get_profiler(tensor_supply_type=...)`` (``profiler.py``)."""
        # loaded when a program first asks for a profiler (nothing else imports it)
        from tilejit.tilelang.profiler import Profiler, TensorSupplyType
        return Profiler(self, tensor_supply_type or TensorSupplyType.Auto)

    def _check(self, name, value, sizes):
        """The tensor ``value`` for parameter ``name`` against its annotation; a symbol's
        size goes into ``sizes`` ({symbol name: (parameter, value)}), an extent computed
        from symbols (``m // 2``) is checked once they are known (``sizes['']``, then
        ``_check_computed``)."""
        ann = self.prim.annotations[name]
        if getattr(ann, "pointer", False):
            pointer_argument(name, value)
            return None
        if getattr(ann, "scalar", False):
            check_scalar(name, value, ann.dtype)
            if getattr(ann, "symbol", None) is not None:     # `tokens: n`: n's value
                _match(name, "value", 0, ann.symbol, int(value), sizes)
            return None
        if value is None and name in self._unread():
            return None         # TileLang's null pointer: the kernel never reads it
        arg = as_tensor_arg(as_declared(value, ann.dtype))
        if arg is None:
            raise TypeError(f"argument {name!r}: expected a tensor, got {type(value).__name__}")
        if arg.ndim != len(ann.shape):
            raise ValueError(f"argument {name!r}: expected a {len(ann.shape)}-d tensor, got "
                             f"shape {tuple(arg.shape)}")
        if arg.dtype != ann.dtype:
            raise TypeError(f"argument {name!r}: expected dtype {ann.dtype.name}, got "
                            f"{arg.dtype.name}" + packed_hint(ann.dtype))
        for dim, (want, have) in enumerate(zip(ann.shape, arg.shape)):
            try:
                _match(name, "shape", dim, want, have, sizes)
            except ValueError as e:
                if dim != arg.ndim - 1 or ann.dtype.packed == 1:
                    raise
                raise ValueError(f"{e}{packed_hint(ann.dtype)}") from None
        for dim, want in enumerate(getattr(ann, "strides", ())):
            if arg.shape[dim] != 1:     # a dimension of one element: any stride
                _match(name, "strides", dim, want, arg.strides[dim], sizes)
        return arg

    def _unread(self) -> frozenset:
        """The parameters the kernel never reads once its compile-time branches are
        settled, which may be passed as None."""
        unread = getattr(self, "_unread_params", None)
        if unread is None:
            unread = self._unread_params = unread_params(self.kernel.source)
        return unread

    def _null_pointers(self, values, sizes):
        """None for an unread tensor as a tensor of its shape that holds no memory of its
        own (one element, broadcast), where the other tensors live; a symbol no tensor
        given binds is 0 (TileLang binds it so)."""
        like = next((a for a in map(as_tensor_arg, values) if a is not None), None)
        if like is None:
            like = placement_without_inputs(self.kernel)
        out = []
        for name, value in zip(self.prim.params, values):
            if value is None:
                ann = self.prim.annotations[name]
                shape = [0 if unknown_symbols((d,), sizes) else _extent(d, sizes)
                         for d in ann.shape]
                with allocating_like(like):
                    value = allocate_output([1] * len(shape), ann.dtype)
                value = value.expand(*shape) if hasattr(value, "expand") else \
                    np.broadcast_to(value, shape)
            out.append(value)
        return out

    @staticmethod
    def _check_computed(sizes):
        """The extents and strides computed from symbols (``m // 2``), once every tensor
        is seen."""
        for name, what, dim, want, have in sizes.pop("", []):
            expected = _extent(want, sizes, name)
            if expected != have:
                raise ValueError(f"argument {name!r}: {what}[{dim}] must be {want!r} = "
                                 f"{expected}, got {have}")

    def _fixed_signature(self):
        """Per parameter, the torch dtype and shape its tensor must have, where every
        parameter is a tensor of fixed shape, dtype and layout (no symbol, declared
        strides, packed dtype, pointer or scalar); None otherwise. A call of torch tensors
        that match it passes every check ``_check`` makes and needs no conversion."""
        torch = sys.modules.get("torch")
        if torch is None:
            return None
        signature = []
        for name in self.prim.params:
            ann = self.prim.annotations[name]
            if getattr(ann, "pointer", False) or getattr(ann, "scalar", False) or \
                    getattr(ann, "strides", None) is not None or ann.dtype.packed != 1 or \
                    not all(type(d) is int for d in ann.shape):
                return None
            try:
                dtype = ann.dtype.as_torch()
            except (AttributeError, TypeError, ValueError):
                return None
            signature.append((dtype, tuple(ann.shape)))
        return torch.Tensor, tuple(signature)

    def _matches_fixed(self, args) -> bool:
        fixed = self._fixed
        if fixed is False:
            fixed = self._fixed = self._fixed_signature()
        if fixed is None:
            return False
        tensor, signature = fixed
        if len(args) != len(signature):
            return False
        for arg, (dtype, shape) in zip(args, signature):
            if type(arg) is not tensor or arg.dtype is not dtype or arg.shape != shape:
                return False
        return True

    def __call__(self, *args):
        # the launch of a kernel is a few microseconds: a call of the tensors its fixed
        # annotations name goes straight to it (the checks below cost ~10 µs a call, which
        # a benchmark timing each call sees)
        if self._matches_fixed(args):
            self.kernel(*args)
            return None
        params = self.prim.params
        inputs = [p for i, p in enumerate(params) if i not in self.out_idx]
        if len(args) == len(params):
            values = list(args)
            outputs = []
        elif len(args) == len(inputs):
            sizes: dict = {}
            like = None
            for name, value in zip(inputs, args):
                arg = self._check(name, value, sizes)
                like = like or arg
            self._check_computed(sizes)
            if like is None:        # outputs only: where a kernel without inputs runs
                like = placement_without_inputs(self.kernel)
            values, outputs, it = [], [], iter(args)
            with allocating_like(like):
                for i, name in enumerate(params):
                    if i in self.out_idx:
                        ann = self.prim.annotations[name]
                        unsized = unknown_symbols(ann.shape, sizes)
                        if unsized:
                            raise ValueError(
                                f"output {name!r} (out_idx): symbol(s) {', '.join(unsized)} "
                                "are not extents of any input, so its shape is unknown; "
                                f"call with all {len(params)} tensors")
                        shape = [_extent(d, sizes) for d in ann.shape]
                        out = allocate_output(shape, ann.dtype)
                        if getattr(ann, "strides", None) is not None:
                            out = _with_strides(out, name, ann, sizes)
                        values.append(out)
                        outputs.append(out)
                    else:
                        values.append(next(it))
        else:
            raise TypeError(f"{self.prim.__name__}() takes the {len(inputs)} input(s) "
                            f"{inputs} (or all {len(params)} tensors), got {len(args)}")
        sizes = {}
        for name, value in zip(params, values):
            self._check(name, value, sizes)
        self._check_computed(sizes)
        if any(v is None for v in values):
            values = self._null_pointers(values, sizes)
        values = [pointer_argument(name, v)
                  if getattr(self.prim.annotations[name], "pointer", False)
                  else typed_scalar(name, v, self.prim.annotations[name].dtype)
                  if getattr(self.prim.annotations[name], "scalar", False)
                  else v if v is None
                  else as_declared(v, self.prim.annotations[name].dtype)
                  for name, v in zip(params, values)]
        # host outputs (the simulator's) hold torch.empty's garbage: it reports reading
        # them first (one launch: in a sequence a later kernel reads what an earlier one
        # wrote). A launch on the GPU skips this.
        fresh = tuple(o.data_ptr() for o in outputs if not getattr(o, "is_cuda", True)
                      and o.numel()) if not isinstance(self.kernel, KernelSequence) else ()
        if not fresh:
            self.kernel(*values)
        else:
            token = FRESH_OUTPUTS.set(fresh)
            try:
                self.kernel(*values)
            finally:
                FRESH_OUTPUTS.reset(token)
        if not outputs:
            return None
        # TileLang's list of outputs (its adapters return one tensor, or a list), in the
        # order out_idx names them
        if len(outputs) == 1:
            return outputs[0]
        by_index = dict(zip(self.out_idx, outputs))
        return [by_index[i] for i in self.out_order]

    def get_kernel_source(self, arch=None, tensors=None, kernel_only=True) -> str:
        """The PTX for the annotated shapes; symbolic extents take their sizes from
        ``tensors`` (the inputs, or all the tensors), when given. ``kernel_only`` is
        TileLang's: the PTX holds only the kernel."""
        specs = self._specs(tensors)
        return self.kernel.compile(*specs, target="cuda", arch=arch or self._arch()).ptx

    def _arch(self) -> str:
        """The arch the target names (``"cuda -arch=sm_80"``), else the device's."""
        return getattr(self.kernel, "arch", None) or default_arch()

    def _specs(self, tensors=None, strict=True, placeholders=True):
        """A TensorSpec (or a scalar of its kind) for each parameter, from the annotations
        and ``tensors``; a T.dynamic extent no tensor gives takes a placeholder size (the
        code is the same for every size; not with ``placeholders=False``); another
        symbolic extent unknown: a TypeError (``strict``) or None."""
        sizes: dict = {}
        given: dict = {}
        if tensors is not None:
            params = self.prim.params
            names = params if len(tensors) == len(params) else [
                p for i, p in enumerate(params) if i not in self.out_idx]
            for name, value in zip(names, tensors):
                if getattr(self.prim.annotations[name], "scalar", False):
                    continue                      # a scalar: any value of its kind below
                arg = self._check(name, value, sizes)
                given[name] = TensorSpec(arg.shape, arg.dtype)
            self._check_computed(sizes)
        specs = []
        for name in self.prim.params:
            if name in given:
                specs.append(given[name])
                continue
            ann = self.prim.annotations[name]
            if getattr(ann, "scalar", False):     # any value of its kind: a run-time scalar
                # (in the annotation's dtype, as a call passes it: the same specialization,
                # so the kernel compiled here is the one the call runs)
                specs.append(True if ann.dtype.kind == "bool" else typed_scalar(
                    name, 1.0 if ann.dtype.is_float else 1, ann.dtype))
                continue
            unsized = unknown_symbols(ann.shape, sizes)
            if unsized and strict and placeholders and all(_is_dynamic(ann.shape, n)
                                                           for n in unsized):
                # a T.dynamic extent is a run-time value, never specialized on: the
                # placeholder gives the kernel of aligned sizes (DYNAMIC_PLACEHOLDER)
                for n in unsized:
                    sizes[n] = ("a placeholder", DYNAMIC_PLACEHOLDER)
                unsized = []
            if unsized:
                if not strict:
                    return None
                raise TypeError(f"get_kernel_source(): {name} has symbolic extent(s) "
                                f"{', '.join(unsized)}; give example tensors "
                                "(get_kernel_source(tensors=[...])) or call the kernel")
            specs.append(TensorSpec(tuple(_extent(d, sizes) for d in ann.shape), ann.dtype))
        return specs


def _with_strides(out, name, ann, sizes):
    """An ``out_idx`` output annotated ``T.StridedTensor``: ``out`` (row-major) where its
    strides are the annotation's, else a view with them into new memory of the extent
    they reach."""
    shape = list(out.shape)
    row_major = [int(np.prod(shape[d + 1:], dtype=np.int64)) for d in range(len(shape))]
    missing = [s for s, n in zip(ann.strides, shape)
               if n != 1 and unknown_symbols((s,), sizes)]
    if missing:
        names = ", ".join(dict.fromkeys(n for s in missing for n in unknown_symbols((s,),
                                                                                 sizes)))
        raise ValueError(f"output {name!r} (out_idx): stride symbol(s) {names} are not "
                         "extents or strides of any input, so its strides are unknown; "
                         "call with all the tensors")
    # a dimension of one element: any stride (its symbol may be unknown)
    strides = [r if n == 1 and unknown_symbols((s,), sizes) else _extent(s, sizes)
               for s, n, r in zip(ann.strides, shape, row_major)]
    if all(n == 1 or s == r for n, s, r in zip(shape, strides, row_major)):
        return out
    if min(strides) < 0 or not hasattr(out, "as_strided") and not isinstance(out, np.ndarray):
        raise ValueError(f"output {name!r} (out_idx): T.StridedTensor strides {tuple(strides)} "
                         "need a torch or numpy output with nonnegative strides; pass it in")
    base = allocate_output([element_span(shape, strides)], ann.dtype)
    if hasattr(base, "as_strided"):
        return base.as_strided(shape, strides)
    return np.lib.stride_tricks.as_strided(base, shape, [s * base.itemsize for s in strides])


def _match(name, what, dim, want, have, sizes) -> None:
    """One extent (``what`` "shape") or stride ("strides") ``have`` of argument ``name``
    against its annotation's ``want``: a symbol's value goes into ``sizes``, an expression
    of symbols waits for ``_check_computed``, a number must be equal."""
    if isinstance(want, (Symbol, LinearExtent)):
        value = have if isinstance(want, Symbol) else want.solve(have)
        if value is None:
            raise ValueError(f"argument {name!r}: {what}[{dim}] is {have}, which no "
                             f"{want.name} makes {want!r}")
        first = sizes.setdefault(want.name, (name, value))
        if first[1] != value:
            said = f"is {have}" if isinstance(want, Symbol) else f"= {have} makes it {value}"
            where = name if what == "value" else f"{name}.{what}[{dim}]"
            raise ValueError(f"symbol {want.name}: {first[0]} has {first[1]} but "
                             f"{where} {said}")
    elif isinstance(want, SYMBOLIC):
        sizes.setdefault("", []).append((name, what, dim, want, have))
    elif int(want) != have:
        raise ValueError(f"argument {name!r}: {what}[{dim}] must be {want}, got {have}")


def _cuda_present() -> bool:
    # the driver (cuda.bindings) only when asked (as default_arch loads it)
    from tilejit.runtime import cuda_driver
    return cuda_driver.cuda_available()


def _extent(d, sizes, name=None) -> int:
    """An annotation's extent, its symbols' values in ``sizes`` ({name: (from, value)})."""
    if isinstance(d, SymbolicInt):
        missing = unknown_symbols((d,), sizes)
        if missing:
            raise ValueError(f"{'argument ' + repr(name) + ': ' if name else ''}the extent "
                             f"{d!r} needs symbol(s) {', '.join(missing)}, which no tensor's "
                             "extent n or a * n + b gives")
        return d.evaluate({k: v[1] for k, v in sizes.items() if k})
    return int(d)




def _is_dynamic(shape, name) -> bool:
    return any(s.name == name and s.dynamic for d in shape if isinstance(d, SymbolicInt)
               for s in d.symbols())


def unknown_symbols(shape, sizes) -> list[str]:
    """The names of the symbols of ``shape``'s extents that ``sizes`` has no value for."""
    return list(dict.fromkeys(s.name for d in shape if isinstance(d, SymbolicInt)
                              for s in d.symbols() if s.name not in sizes))


# TileLang's other keywords of compile(): they choose its host code and C++ compiler
def compile(func, out_idx=None, execution_backend=None,  # noqa: A001 - TileLang's name
            target="auto", target_host=None, verbose=None, pass_configs=None,
            compile_flags=None, **unknown):
    """``tilelang.compile(prim_func, out_idx=..., target=..., pass_configs=...)``, its
    parameters in TileLang's order; the target may name an arch as TileLang's do
    (``"cuda -arch=sm_80"``, ``{"kind": "cuda", "arch": "sm_80"}``; None: "auto").
    ``execution_backend``, ``target_host``, ``verbose`` and ``compile_flags`` (NVIDIA's
    C++ compiler's) are accepted and not used: tilejit launches its PTX itself."""
    if isinstance(func, BoundProgram):     # an eager program's get_tir(...)
        return func.compile()
    if not isinstance(func, PrimFunc):
        raise TypeError(f"tilejit.compile expects a @T.prim_func, got {type(func).__name__}")
    if unknown:
        raise TypeError(f"tilejit.compile() got unexpected keyword argument(s) "
                        f"{', '.join(map(repr, unknown))}; it takes TileLang's out_idx, "
                        f"execution_backend, target, target_host, verbose, pass_configs and "
                        f"compile_flags (an arch goes in the target: "
                        f"target=\"cuda -arch=sm_80\")")
    check_target(target, "tilelang.compile")
    check_execution_backend(execution_backend, "tilelang.compile")
    if pass_configs is not None and not isinstance(pass_configs, dict):
        raise TypeError(f"tilelang.compile pass_configs: expected a dict of "
                        f"{{PassConfigKey: value}}, got {type(pass_configs).__name__} "
                        f"{pass_configs!r}")
    target = "auto" if target is None else target
    if func.lazy:
        return _compile_lazy(func, out_idx, target, pass_configs)
    compiled = CompiledPrimFunc(func, out_idx=out_idx, target=target,
                                pass_configs=pass_configs)
    compiled._check_now(_target_kind(target))
    return compiled


def _current_target(target):
    """``target``, or for "auto" (None) the ``tvm.target.Target`` entered as a context;
    a Target as its text."""
    if target in (None, "auto"):
        target = TvmTarget.current() or target
    return str(target) if isinstance(target, TvmTarget) else target


# TileLang's CPU backends: the simulator runs their programs as they do (Target.is_cpu)
_CPU_TARGETS = ("c", "llvm")


def _target_kind(target) -> str:
    """"sim", "cpu", "cuda" or "auto" for TileLang's target argument: "cuda" (with an arch
    or not) checks the GPU's front end even without a device; "c" and "llvm" are "cpu"."""
    target = _current_target(target)
    named = target.get("kind") if isinstance(target, dict) else \
        (str(target).split() or ["auto"])[0]
    if named in _CPU_TARGETS:
        return "cpu"
    return named if named in ("sim", "cuda") else "auto"


def _compile_lazy(func, out_idx, target, pass_configs):
    """A @T.prim_func whose parameters are annotated in its body (TileLang's lazy form):
    the eager @tilejit.jit program of its function, compiled for the shapes of each call
    (its ``T.empty`` outputs returned). ``out_idx`` is for a program that does not return
    its outputs itself: given for one that does, it is TileLang's "Out index conflict";
    the parameters it names are allocated and returned (``output_params.py``)."""
    from tilejit.tilelang.jit import jit          # this module is imported by jit.py
    if out_idx is not None and _returns(func.func):
        raise ValueError(f"Out index conflict: @T.prim_func {func.__name__} returns its "
                         f"outputs (T.empty); out_idx={out_idx!r} names outputs too")
    return jit(func.func, out_idx=out_idx, target=target, pass_configs=pass_configs)


def _returns(f) -> bool:
    """Whether the function's own body (not a function defined in it) returns a value."""
    found_def = function_def_from_file(f, copy_tree=False)
    return found_def is not None and returned_count(found_def[1]) > 0


def par_compile(funcs, out_idx=None, execution_backend=None, target="auto",
                target_host=None, verbose=None, pass_configs=None, compile_flags=None,
                num_workers=None, ignore_error=False):
    """``tilelang.par_compile(prim_funcs, out_idx=..., num_workers=..., ignore_error=...)``:
    ``compile`` of each prim_func, in order, one after another. A program is built and
    checked here and its device code compiled at its first call or
    ``get_kernel_source()``, so there is no compile to spread over threads
    (``@tilejit.autotune`` compiles its configs in parallel processes). With
    ``ignore_error``, a prim_func that fails to build gives None in its place, with a
    warning naming it, as TileLang's; an error in its device code (typing, lowering)
    shows at its first call, where TileLang's full compile would have given None."""
    if num_workers is not None and (isinstance(num_workers, bool)
                                    or not isinstance(num_workers, int) or num_workers < 1):
        raise ValueError(f"tilejit.par_compile: num_workers must be a positive int or None, "
                         f"got {num_workers!r}")
    # (checked once: ignore_error would take them for each function's own failure)
    check_target(target, "tilelang.par_compile")
    check_execution_backend(execution_backend, "tilelang.par_compile")
    keywords = {k: v for k, v in (("execution_backend", execution_backend),
                                  ("target_host", target_host), ("verbose", verbose),
                                  ("compile_flags", compile_flags)) if v is not None}
    out = []
    for index, func in enumerate(funcs):
        try:
            out.append(compile(func, out_idx=out_idx, target=target,
                               pass_configs=pass_configs, **keywords))
        except Exception as e:          # noqa: BLE001 - TileLang's ignore_error: any error
            if not ignore_error:
                raise
            warnings.warn(f"tilejit.par_compile: function {index} did not build: {e}",
                          stacklevel=2)
            out.append(None)
    return out


def target_and_arch(target) -> tuple[str, str | None]:
    """TileLang's target as ("sim", "cpu" or "auto", arch or None): a name (``"cuda"``,
    ``"auto"``, ``"sim"``), a target string with ``-arch=sm_XX``, or a dict with ``"kind"``
    and ``"arch"``, or a ``tvm.target.Target`` (``"auto"`` takes the one entered as a
    context, ``with tvm.target.Target(...)``). TileLang's CPU targets ``"c"`` and
    ``"llvm"`` are ``"cpu"`` (the simulator, a block of one thread: ``Target.is_cpu``);
    other backends' names run where the tensors live, as ``"auto"``."""
    target = _current_target(target)
    if isinstance(target, dict):
        kind, arch = target.get("kind", "auto"), target.get("arch")
    else:
        words = str(target or "auto").split() or ["auto"]
        kind, arch = words[0], arch_option(words)
    kind = "sim" if kind == "sim" else "cpu" if kind in _CPU_TARGETS else "auto"
    if arch is not None and kind == "auto":
        Target.cuda(arch)        # a malformed arch: a clear error now
    return kind, arch


class ClassicJit:
    """``@tilejit.jit(out_idx=...)`` on a factory that returns a T.prim_func: calling
    the factory (its arguments are all compile-time) returns the compiled kernel."""

    def make_autotuner(self, configs, warmup, rep, key, timeout=None, **profile):
        """What ``@tilejit.autotune`` makes of this program (tuning/autotune.py asks)."""
        # autotuner.py imports this module for the classes it tunes: imported here, on use
        from tilejit.tilelang.autotuner import for_program
        return for_program(self, configs, warmup, rep, key, timeout, **profile)

    def __init__(self, factory, out_idx=None, target="auto", pass_configs=None):
        pass_config_options(dict(pass_configs or {}))     # checked (and warned) once here
        self.factory = factory
        self.out_idx = out_idx
        self.target = target
        self.pass_configs = dict(pass_configs or {})
        self.__name__ = factory.__name__
        self.__wrapped__ = factory
        self._compiled: dict = {}

    @property
    def func(self):
        """The factory (TileLang's ``JITImpl.func``)."""
        return self.factory

    def get_tir(self, *args, **kwargs) -> PrimFunc:
        """TileLang's ``f.get_tir(...)``: the @T.prim_func the factory returns for these
        arguments, not compiled (``tilejit.compile`` of it compiles; there is no TIR:
        tilejit emits PTX from the program's source)."""
        pf = self.factory(*args, **kwargs)
        if not isinstance(pf, PrimFunc):
            raise TypeError(f"{self.__name__}() must return a @T.prim_func, returned "
                            f"{type(pf).__name__}")
        return pf

    def __call__(self, *args, **kwargs):
        key = self._call_key(args, kwargs)
        if key is not None and key in self._compiled:
            return self._compiled[key]
        pf = self.factory(*args, **kwargs)
        if not isinstance(pf, PrimFunc):
            raise TypeError(f"{self.__name__}() must return a @T.prim_func, returned "
                            f"{type(pf).__name__}")
        if pf.lazy:
            compiled = _compile_lazy(pf, self.out_idx, self.target, self.pass_configs)
        else:       # TileLang compiles here: what the front end refuses fails here
            compiled = CompiledPrimFunc(pf, out_idx=self.out_idx, target=self.target,
                                        pass_configs=self.pass_configs)
            compiled._check_now(_target_kind(self.target))
        if key is not None:
            self._compiled[key] = compiled
        return compiled

    def _call_key(self, args, kwargs):
        """The factory's arguments bound to its parameters, defaults applied, each value
        with its type (``1``, ``1.0`` and ``True`` are different programs), and the target
        entered as a context (``with tvm.target.Target(...)``): one program for
        ``f(16)``, ``f(16, 1.0)`` and ``f(N=16)``. None when a value is unhashable (the
        program is then made at every call) or the arguments do not bind (the factory's
        own call raises)."""
        signature = self.__dict__.get("_signature")
        if signature is None:
            signature = self._signature = inspect.signature(self.factory)
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return None
        bound.apply_defaults()
        values = []
        for name, value in bound.arguments.items():
            kind = signature.parameters[name].kind
            if kind is inspect.Parameter.VAR_KEYWORD:
                values.extend((k, type(v), v) for k, v in sorted(value.items()))
            elif kind is inspect.Parameter.VAR_POSITIONAL:
                values.extend((name, type(v), v) for v in value)
            else:
                values.append((name, type(value), value))
        key = (tuple(values), str(_current_target(self.target)))
        try:
            hash(key)
        except TypeError:
            return None
        return key

    def compile(self, *args, **kwargs):
        """TileLang's ``kernel.compile(*args)``: the program for these compile-time
        arguments (the same as calling the factory)."""
        return self(*args, **kwargs)

    def get_kernel_source(self, *args, **kwargs) -> str:
        """The PTX of the program for these compile-time arguments (TileLang's
        ``factory.get_kernel_source()`` of a factory whose arguments all have defaults)."""
        return self(*args, **kwargs).get_kernel_source()

    def with_pass_configs(self, pass_configs) -> "ClassicJit":
        """This program with ``pass_configs`` over its own (an autotune config's
        ``"pass_configs"`` entry); the same program when there are none. Each set of
        extra configs is one program, kept, with its own compiled kernels."""
        if not pass_configs:
            return self
        if not isinstance(pass_configs, dict):
            raise TypeError(f"{self.__name__}: pass_configs: expected a dict of "
                            f"PassConfigKey values, got {type(pass_configs).__name__}")
        key = tuple(sorted((str(k), repr(v)) for k, v in pass_configs.items()))
        variants = self.__dict__.setdefault("_variants", {})
        if key not in variants:
            variants[key] = ClassicJit(self.factory, out_idx=self.out_idx, target=self.target,
                                       pass_configs={**self.pass_configs, **pass_configs})
        return variants[key]

    def par_compile(self, configs, num_workers=None, ignore_error=False):
        """TileLang's ``kernel.par_compile(configs)``: the program for each config (a tuple
        of the factory's positional arguments, or a dict of keywords), in order. Each is
        built here and its device code compiled at its first call or
        ``get_kernel_source()``, one after another (``@tilejit.autotune`` is where configs
        compile in parallel processes); with ``ignore_error``, a config whose program
        fails to build gives None instead of raising."""
        out = []
        for config in configs:
            try:
                out.append(self(**config) if isinstance(config, dict) else self(*config))
            except (CompileError, TypeError, ValueError):
                if not ignore_error:
                    raise
                out.append(None)
        return out


JITKernel.register(CompiledPrimFunc)
