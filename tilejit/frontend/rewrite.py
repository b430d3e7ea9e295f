"""The three programs derived from one kernel source.

- device: the function Numba types and lowers. ``with T.Kernel(...) as (bx, by)``
  becomes ``bx = block_index(0); by = block_index(1)`` followed by the block body
  (Numba's bytecode front end rejects ``with ... as``); constexpr parameters leave the
  signature and become globals, so Numba sees them as literals; ``T.Persistent`` loops
  and ``T.PersistentTileScheduler`` objects become plain loops and variables
  (``persistent.py``, the simulator's program too); ``TensorCoreIntrinEmitter``'s
  methods become per-thread code (``mma_emitter_calls.py``); ``T.get_thread_binding`` and the
  other bindings become the thread and block indices (``thread_bindings.py``); host queries
  (``driver.get_num_sms()``) become compile-time globals (``host_queries.py``); the
  explicit mbarrier/TMA/``T.ws`` forms are left to ``passes/warp_roles.py`` (sm_90+).
- host: the statements before ``T.Kernel`` followed by ``return launch_config(...)``;
  run in Python before every launch to size the grid.
- sim: the device form again, with ``T.Parallel`` loops replaced by the simulator's
  vectorised (masked) or scalar iteration (``tilejit/sim/transform.py``).

All three keep the file's line numbers, so errors, tracebacks and ``breakpoint()``
point at the user's source.
"""
from __future__ import annotations

import ast
import copy
import types
import warnings

from tilejit import syntax
from tilejit import language as T
from tilejit.errors import AssumptionError
from tilejit.frontend.assumptions import RaiseAssumptions
from tilejit.frontend.analysis import plain_value
from tilejit.frontend.shuffle_keywords import SHUFFLES, positional_shuffle
from tilejit.frontend.static_comprehensions import unroll_constexpr_comprehensions
from tilejit.frontend.attribute_chains import fold_attribute_chains
from tilejit.frontend.host_queries import replace_host_queries
from tilejit.frontend.mma_emitter_calls import expand_emitter_calls
from tilejit.frontend.pipelined_range import rewrite_pipelined_ranges
from tilejit.frontend.parallel_barriers import split_parallel_at_barriers
from tilejit.frontend.fused_indices import split_fused_indices
from tilejit.frontend.loop_aliases import inline_loop_aliases
from tilejit.frontend.accumulating_loops import serialize_accumulations
from tilejit.frontend.negative_indices import legalize_negative_indices
from tilejit.frontend.parallel_nests import rewrite_parallel_nests
from tilejit.frontend.persistent import rewrite_persistent
from tilejit.frontend.source import (KernelSource, alloc_var_arguments, assigned_names,
                                     block_index_names, flatten_statements, kernel_call,
                                     resolve_static)
from tilejit.frontend.async_copies import rewrite_async_copies
from tilejit.frontend.thread_bindings import rewrite_thread_bindings
from tilejit.frontend.thread_roles import rewrite_thread_roles
from tilejit.frontend.unrolled_regions import unroll_gemm_regions
from tilejit.language.numerics import cast_mode_warning, cast_options_problem
from tilejit.language.tiles import COPY_HINTS
from tilejit.frontend.random_draws import rewrite_random_draws
from tilejit.frontend.reducers import rewrite_reducers
from tilejit.frontend.ramp_vectors import expand_vector_lanes
from tilejit.frontend.slice_vectors import expand_slice_statements
from tilejit.frontend.bit_moves import rewrite_bit_moves
from tilejit.frontend.static_branches import fold_compile_time_branches
from tilejit.frontend.static_grid import static_grid
from tilejit.frontend.static_prologue import fold_static_prologue
from tilejit.frontend.validate import UNSUPPORTED
from tilejit.ir.markers import BLOCK_INDEX, CAST, DP4A_OPERANDS, LANGUAGE
from tilejit.frontend.im2col import im2col_loop
from tilejit.language import scalar_math as _scalar_math
from tilejit.language import math_intrinsics as _math_intrinsics

# T.Parallel's keywords: TileLang's hints of how to schedule the loop (the keyword
# arguments of ``T.Parallel``)
PARALLEL_HINTS = ("coalesced_width", "loop_layout", "prefer_async", "annotations")

# T.clamp(x, lo, hi) → T.min(T.max(x, lo), hi): through the call's own `T.` when it has
# one, else these names, which ``materialize`` binds (as CAST)
MAX, MIN = "__tj_max", "__tj_min"

LAUNCH_CONFIG = "__tj_launch_config"     # the host program's (runtime/kernel.py binds it)
ASSUMPTION_ERROR = "__tj_AssumptionError"  # the host program's (materialize binds it)


def shape_constant_name(param: str, dim: int) -> str:
    """The global a specialized shape entry ``param.shape[dim]`` becomes."""
    return f"__tj_shape_{param}_{dim}"


_NOT_INT = object()


def _int_constant(node):
    """The int a slice bound spells (None where it is left out), else _NOT_INT."""
    if node is None:
        return None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _int_constant(node.operand)
        return -inner if isinstance(inner, int) else _NOT_INT
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return _NOT_INT


class _SpecializeShapes(syntax.NodeTransformer):
    """``P.shape[i]`` → the specialization's constant, for the entries given; a bare
    ``P.shape`` (``T.alloc_shared(A.shape, ...)``) → the tuple of them where every entry
    of P is one (``ranks``: such a tensor's rank)."""

    def __init__(self, entries, ranks=None):
        self.entries = set(entries)
        self.ranks = ranks or {}

    def visit_Subscript(self, node):
        v = node.value
        if (isinstance(v, ast.Attribute) and v.attr == "shape" and isinstance(v.value, ast.Name)
                and isinstance(node.slice, ast.Constant)
                and (v.value.id, node.slice.value) in self.entries):
            return ast.copy_location(
                ast.Name(shape_constant_name(v.value.id, node.slice.value), ast.Load()), node)
        node = self.generic_visit(node)
        if isinstance(node.value, ast.Tuple) and isinstance(node.slice, ast.Slice):
            # `A.shape[-2:]` of a whole shape: those entries
            bounds = [_int_constant(b) for b in (node.slice.lower, node.slice.upper,
                                                  node.slice.step)]
            if all(b is not _NOT_INT for b in bounds):
                return ast.copy_location(ast.Tuple(node.value.elts[slice(*bounds)],
                                                   ast.Load()), node)
        return node

    def visit_Attribute(self, node):
        param = node.value.id if isinstance(node.value, ast.Name) else None
        if node.attr != "shape" or param not in self.ranks or \
                not isinstance(node.ctx, ast.Load):
            return self.generic_visit(node)
        return ast.copy_location(ast.Tuple([ast.Name(shape_constant_name(param, d), ast.Load())
                                            for d in range(self.ranks[param])], ast.Load()), node)

    def visit_Call(self, node):
        node = self.generic_visit(node)
        if any(isinstance(a, ast.Starred) and isinstance(a.value, ast.Tuple) for a in node.args):
            # T.Parallel(*A.shape): the entries as arguments
            node.args = [e for a in node.args for e in (
                a.value.elts if isinstance(a, ast.Starred) and isinstance(a.value, ast.Tuple)
                else [a])]
        return node

    def visit_Assign(self, node):
        v = node.value
        if (len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple)
                and isinstance(v, ast.Attribute) and v.attr == "shape"
                and isinstance(v.value, ast.Name)):
            param, n = v.value.id, len(node.targets[0].elts)
            if any((param, d) in self.entries for d in range(n)):
                elts = [ast.Name(shape_constant_name(param, d), ast.Load())
                        if (param, d) in self.entries else
                        ast.Subscript(ast.Attribute(ast.Name(param, ast.Load()), "shape",
                                                    ast.Load()), ast.Constant(d), ast.Load())
                        for d in range(n)]
                node.value = ast.copy_location(ast.Tuple(elts, ast.Load()), v)
                return node
        return self.generic_visit(node)


def _located(new: ast.AST, old: ast.AST) -> ast.AST:
    for node in syntax.walk(new):
        node.lineno = old.lineno
        node.col_offset = old.col_offset
        node.end_lineno = getattr(old, "end_lineno", old.lineno)
        node.end_col_offset = getattr(old, "end_col_offset", old.col_offset)
    return new


def _block_index_assignments(ks: KernelSource, extents=()) -> list[ast.stmt]:
    """``bx = __tj_block_index(0)``, with the axis's extent where the launch fixes it at
    compile time (``static_grid.py``)."""
    launch = ks.launch
    out = []
    for axis, name in enumerate(block_index_names(ks)):
        extent = extents[axis] if axis < len(extents) else None
        stmt = ast.Assign(targets=[ast.Name(name, ast.Store())],
                          value=ast.Call(ast.Name(BLOCK_INDEX, ast.Load()),
                                         [ast.Constant(axis)] + (
                                             [] if extent is None else [ast.Constant(extent)]),
                                         []))
        out.append(_located(stmt, launch.items[0].optional_vars or launch))
    return out


# tile operations whose operands may be views written in the call
_VIEW_OPERAND_OPS = tuple(getattr(T, name) for name in (
    "copy", "fill", "clear", "cumsum", "cummax", "reduce_sum", "reduce_max", "reduce_min",
    "reduce_abssum", "reduce_absmax", "reduce_bitand", "reduce_bitor", "reduce_bitxor",
    "gemm", "transpose"))


def _element_copy(call) -> bool:
    """``T.copy(A[i, j], B[k, l])``: two elements (subscripts without slices); options
    such as ``disable_tma=True`` mean nothing for one element."""
    def element(node):
        if not isinstance(node, ast.Subscript):
            return False
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return not any(isinstance(p, ast.Slice) for p in parts)
    return len(call.args) == 2 and all(map(element, call.args))


class _DeviceForms(syntax.NodeTransformer):
    """Language calls with a control-flow meaning become Python control flow:
    ``T.if_then_else(c, a, b)`` evaluates only the chosen side (it guards loads), so
    it becomes ``a if c else b``; ``T.serial/unroll/vectorized`` become ``range``;
    TileLang's ``x.astype(dtype)`` is ``T.cast(x, dtype)`` and ``T.clamp(x, lo, hi)`` is
    ``T.min(T.max(x, lo), hi)``."""

    def __init__(self, namespace, strip_breakpoints=True, error=None, constexprs=None):
        self.namespace = namespace
        self.constexprs = constexprs or {}  # the constexpr parameters' values, where known
        self.strip_breakpoints = strip_breakpoints
        self.error = error          # (message, node) -> CompileError at the kernel's line
        self.reductions = 0
        self.loops = []         # the loops around the statement visited: is each T.Parallel
        self.inline_views = 0   # views written inside a tile operation's call, named
        self.variables = {}     # name -> the dtype expression of its T.alloc_var
        self.parallel = 0       # T.Parallel loops around the statement visited
        self.assigned = None    # the names the kernel binds (visit_FunctionDef)
        self.stored = set()     # the names the kernel's body stores to

    # T.any_of(X[...]) / T.all_of(X) in an `if` test or an assignment: a loop over the
    # elements before the statement, into a flag the statement reads
    def visit_If(self, node):
        hoisted = self._hoist_bool_reductions(node, "test")
        node = self.generic_visit(node)
        return hoisted + [node] if hoisted else node

    def visit_FunctionDef(self, node):
        if self.assigned is None:       # the kernel's own names (its locals)
            self.assigned = assigned_names(node)
            # (a constexpr the body stores to is not its parameter's value there)
            self.stored = {n.id for n in syntax.walk(node) if isinstance(n, ast.Name)
                           and isinstance(n.ctx, ast.Store)}
        return self.generic_visit(node)

    def _python_math(self, node):
        """``math.sqrt(N)`` of compile-time values (constants, the kernel's globals,
        closure values and constexpr parameters it does not assign): the value,
        computed here as TileLang's parser computes it in Python; else the call as
        written."""
        known = {k: v for k, v in self.namespace.items() if k not in (self.assigned or ())}
        known.update({k: v for k, v in self.constexprs.items() if k not in self.stored})
        values = [plain_value(a, known, (int, float)) for a in node.args]
        if not node.keywords and all(known for _, known in values):
            try:
                result = resolve_static(node.func, self.namespace)(*(v for v, _ in values))
            except (ValueError, OverflowError, TypeError) as e:
                raise self.error(f"`{ast.unparse(node)}`: {e}", node) from None
            if isinstance(result, (int, float)) and not isinstance(result, bool):
                return ast.copy_location(ast.Constant(result), node)
        # (of a parameter's value: the prologue computes it in Python; of a value of the
        # kernel, typing names it: pipeline._python_math_hint)
        return node

    def _int_method(self, node):
        """``(n - 1).bit_length()`` of a compile-time int (as ``_python_math``'s values):
        its value, as TileLang's parser computes it in Python; else None."""
        known = {k: v for k, v in self.namespace.items() if k not in (self.assigned or ())}
        known.update({k: v for k, v in self.constexprs.items() if k not in self.stored})
        value, ok = plain_value(node.func.value, known, (int,))
        if not ok or isinstance(value, bool) or not isinstance(value, int):
            return None
        return ast.copy_location(ast.Constant(getattr(value, node.func.attr)()), node)

    def visit_Assign(self, node):
        hoisted = self._hoist_bool_reductions(node, "value")
        self._typed_variable_store(node)
        node = self.generic_visit(node)
        return hoisted + [node] if hoisted else node

    def visit_AugAssign(self, node):
        # `x += v` on a T.alloc_var: x = cast(x + v, its dtype)
        target = node.target
        if isinstance(target, ast.Name) and target.id in self.variables:
            value = ast.BinOp(ast.Name(target.id, ast.Load()), node.op, node.value)
            store = ast.Assign([ast.Name(target.id, ast.Store())], value)
            ast.copy_location(store, node)
            return self.visit_Assign(syntax.fix_missing_locations(store))
        return self.generic_visit(node)

    def _typed_variable_store(self, node):
        """A name made by ``T.alloc_var(dtype)`` keeps its dtype, as in TileLang: every
        later ``name = value`` stores ``value`` converted to it (``x = A[i]`` into a
        bfloat16 variable rounds to bfloat16)."""
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            return
        name = node.targets[0].id
        value = node.value
        if isinstance(value, ast.Call) and resolve_static(value.func, self.namespace) \
                is T.alloc_var:
            try:
                dtype = alloc_var_arguments(value).get("dtype")
            except TypeError:
                dtype = None        # the allocation's own error, where it is made
            if dtype is not None:
                self.variables[name] = dtype
            return
        dtype = self.variables.get(name)
        if dtype is not None:
            node.value = ast.copy_location(
                ast.Call(ast.Name(CAST, ast.Load()), [value, copy.deepcopy(dtype)], []), value)

    def _hoist_bool_reductions(self, stmt, field):
        hoisted = []
        expr = getattr(stmt, field)
        for call in [n for n in syntax.walk(expr) if isinstance(n, ast.Call)]:
            target = resolve_static(call.func, self.namespace)
            if target not in (T.any_of, T.all_of) or len(call.args) != 1 or call.keywords:
                continue
            self.reductions += 1
            flag = f"__tj_boolred{self.reductions}"
            hoisted += bool_reduction(call.args[0], flag, target is T.any_of,
                                      f"__tj_boolred{self.reductions}_i")
            setattr(stmt, field, _Replace(call, ast.Name(flag, ast.Load())).visit(
                getattr(stmt, field)))
        return [syntax.fix_missing_locations(ast.copy_location(h, stmt)) for h in hoisted]

    def visit_For(self, node):
        # for i, j in T.grid(m, n): nested range loops, the last index innermost
        it = node.iter
        names = node.target.elts if isinstance(node.target, ast.Tuple) else [node.target]
        if (isinstance(it, ast.Call) and resolve_static(it.func, self.namespace) is T.grid
                and not it.keywords and len(it.args) == len(names) and len(names) > 0
                and all(isinstance(n, ast.Name) for n in names) and not node.orelse):
            body = node.body
            for name, extent in reversed(list(zip(names, it.args))):
                body = [ast.copy_location(ast.For(
                    ast.Name(name.id, ast.Store()),
                    ast.Call(ast.Name("range", ast.Load()), [extent], []), body, [], None),
                    node)]
            return self.generic_visit(syntax.fix_missing_locations(body[0]))
        parallel = isinstance(it, ast.Call) and resolve_static(
            it.func, self.namespace) is T.Parallel
        self.parallel += parallel
        self.loops.append(parallel)
        try:
            return self.generic_visit(node)
        finally:
            self.parallel -= parallel
            self.loops.pop()

    def visit_While(self, node):
        self.loops.append(False)
        try:
            return self.generic_visit(node)
        finally:
            self.loops.pop()

    def visit_Break(self, node):
        self._check_break(node, "break")
        return node

    def _check_fenced(self, call, node):
        """T.warpgroup_fence_operand's operand: a name (the accumulator fragment) or an
        element of one; the statement is then dropped, so which tile it names is not
        checked."""
        args = list(call.args) + [k.value for k in call.keywords
                                  if k.arg == "buffer_or_ptr"]
        target = args[0] if args else None
        if isinstance(target, ast.Subscript):
            target = target.value
        if not isinstance(target, ast.Name) and self.error is not None:
            raise self.error("T.warpgroup_fence_operand(buffer, offset, num_regs): expected "
                             "a wgmma accumulator fragment (or an element of one) first, "
                             f"got `{ast.unparse(call)}`", node)

    def _check_break(self, node, what):
        if self.loops and self.loops[-1] and self.error is not None:
            raise self.error(f"`{what}` in a T.Parallel loop: its iterations run on the "
                             "block's threads at once, so there is no later iteration to "
                             "skip (on the GPU each thread would only leave its own); "
                             "use a T.serial loop, or guard the body with an `if`", node)

    def visit_Expr(self, node):
        call = node.value
        if not isinstance(call, ast.Call):
            return self.generic_visit(node)
        fn = resolve_static(call.func, self.namespace)
        # breakpoint() stops the simulator; on a device it does nothing
        if self.strip_breakpoints and fn is breakpoint:
            return ast.copy_location(ast.Pass(), node)
        if fn is T.wait_wgmma:          # the gemms wait where their products are needed
            return ast.copy_location(ast.Pass(), node)
        if fn is T.warpgroup_fence_operand:     # so do their accumulators' registers
            self._check_fenced(call, node)
            return ast.copy_location(ast.Pass(), node)
        if fn is T.loop_break:
            if (call.args or call.keywords or not self.loops) and self.error is not None:
                raise self.error("T.loop_break() takes no arguments and leaves the loop "
                                 "around it: write it inside a loop", node)
            self._check_break(node, "T.loop_break()")
            return ast.copy_location(ast.Break(), node)
        if fn is T.import_source:       # None only (language/tiles.import_source)
            args = list(call.args) + [k.value for k in call.keywords]
            arg = args[0] if args else ast.Constant(None)
            none = (isinstance(arg, ast.Constant) and arg.value is None) or (
                isinstance(arg, ast.Name) and arg.id in self.namespace
                and self.namespace[arg.id] is None)
            if not none:
                raise self.error("T.import_source: CUDA C++ source is not supported by "
                                 "tilejit (it compiles no C++; T.call_extern is not built "
                                 "either); only None, no source, is accepted", node)
            return ast.copy_location(ast.Pass(), node)
        if fn is T.copy and _element_copy(call):
            # T.copy(A[i, j], B[k, l]): one element (each iteration's in a T.Parallel;
            # outside one, as any element statement: TileLang's gather into a local)
            value = call.args[0]
            dst = call.args[1].value
            if isinstance(call.func, ast.Attribute) and isinstance(dst, ast.Name):
                # converted to the destination's dtype, as a tile copy converts
                value = ast.Call(ast.Attribute(copy.deepcopy(call.func.value), "cast",
                                               ast.Load()),
                                 [value, ast.Attribute(ast.Name(dst.id, ast.Load()), "dtype",
                                                       ast.Load())], [])
            store = ast.Assign([ast.Subscript(dst, call.args[1].slice, ast.Store())], value)
            return self.visit_Assign(syntax.fix_missing_locations(ast.copy_location(store, node)))
        if fn in (T.im2col, T.c2d_im2col):  # a T.Parallel loop over the column tile
            return self.visit(im2col_loop(call, node, self._language_name(call), self.error))
        if fn is T.dp4a and len(call.args) == 3 and not call.keywords and all(
                isinstance(a, (ast.Subscript, ast.Name)) for a in call.args):
            # a whole buffer (TileLang's reference: `T.dp4a(a, b, c)` of local buffers of
            # 4, 4 and 1 elements) is its first element
            call.args = [ast.copy_location(ast.Subscript(a, ast.Constant(0), ast.Load()), a)
                         if isinstance(a, ast.Name) else a for a in call.args]
            return [self.generic_visit(s) for s in _dp4a_loop(call, node)]
        # a view made in a tile operation's call, T.cumsum(T.view(S, (1, n)), dim=1)
        # (TileLang's issue 1001): a named view first, as the tile passes take views
        views = [k for k, a in enumerate(call.args) if isinstance(a, ast.Call) and
                 resolve_static(a.func, self.namespace) in (T.view, T.reshape)]
        if views and fn in _VIEW_OPERAND_OPS:
            out = []
            for k in views:
                name = f"__tj_inline_view{self.inline_views}"
                self.inline_views += 1
                out.append(ast.copy_location(
                    ast.Assign([ast.Name(name, ast.Store())], call.args[k]), node))
                call.args[k] = ast.copy_location(ast.Name(name, ast.Load()), call.args[k])
            out.append(node)
            return [self.visit(syntax.fix_missing_locations(s)) for s in out]
        # T.clear(v) / T.fill(v, x) of a T.alloc_var: v = 0 / v = x, in its dtype
        if (fn in (T.clear, T.fill) and not call.keywords and call.args
                and isinstance(call.args[0], ast.Name) and call.args[0].id in self.variables):
            value = (ast.Constant(0) if fn is T.clear and len(call.args) == 1 else
                     call.args[1] if fn is T.fill and len(call.args) == 2 else None)
            if value is not None:
                store = ast.copy_location(
                    ast.Assign([ast.Name(call.args[0].id, ast.Store())], value), node)
                return self.visit_Assign(syntax.fix_missing_locations(store))
        return self.generic_visit(node)

    def _language_name(self, call) -> str:
        """How the kernel's source names ``tilejit.language`` (``T`` in ``T.im2col``), for
        code written in its place."""
        if isinstance(call.func, ast.Attribute):
            return ast.unparse(call.func.value)
        return next((name for name, value in self.namespace.items() if value is T), "T")

    def visit_List(self, node):
        # a list argument (a tile shape) is a tuple to Numba
        node = self.generic_visit(node)
        if isinstance(node.ctx, ast.Load):
            return ast.copy_location(ast.Tuple(node.elts, ast.Load()), node)
        return node

    def _storage_sync(self, node):
        """``T.tvm_storage_sync("shared")``: ``T.sync_threads()`` (``"warp"``:
        ``T.sync_warp()``)."""
        scopes = {"shared": "sync_threads", "shared.dyn": "sync_threads", "warp": "sync_warp"}
        scope, ok = plain_value(node.args[0], self.namespace, (str,)) \
            if len(node.args) == 1 and not node.keywords else (None, False)
        scope = scope if ok else None
        if scope not in scopes:
            raise self.error(
                f"T.tvm_storage_sync(scope): expected \"shared\", \"shared.dyn\" (a block "
                f"barrier, T.sync_threads()) or \"warp\" (T.sync_warp()), got "
                f"{ast.unparse(node)}; a grid-wide barrier is T.sync_grid() in a cooperative "
                f"launch", node)
        call = ast.Call(ast.Attribute(ast.Name(LANGUAGE, ast.Load()), scopes[scope],
                                      ast.Load()), [], [])
        return ast.copy_location(call, node)

    def visit_Call(self, node):
        node = self.generic_visit(node)
        if isinstance(node.func, ast.Call):
            # getattr(T, "reduce_" + op)(...) with op a compile-time string: T.reduce_max
            attribute = _static_getattr(node.func, self.namespace)
            if attribute is not None:
                node.func = attribute
        if isinstance(node.func, ast.Attribute) and node.func.attr in _INT_METHODS and \
                not node.args and not node.keywords:
            folded = self._int_method(node)     # `(batch - 1).bit_length()`
            if folded is not None:
                return folded
        target = resolve_static(node.func, self.namespace)
        if getattr(target, "__module__", None) == "math" and callable(target):
            return self._python_math(node)
        if target in (T.wgmma_gemm, T.wgmma_gemm_sp):   # T.gemm(_sp), which waits where
            node.keywords = [k for k in node.keywords if k.arg != "annotations"]   # needed
            name = "gemm" if target is T.wgmma_gemm else "gemm_sp"
            node.func = ast.copy_location(ast.Attribute(ast.Name(LANGUAGE, ast.Load()), name,
                                                        ast.Load()), node.func)
            return node
        if target is T.if_then_else and len(node.args) == 3 and not node.keywords:
            cond, a, b = node.args
            return ast.copy_location(ast.IfExp(cond, a, b), node)
        if target in (T.print, T.device_assert) and node.keywords:
            # msg= by keyword → positional (the typing templates take it second)
            msg = [k.value for k in node.keywords if k.arg == "msg"]
            return ast.copy_location(ast.Call(node.func, node.args[:1] + msg, []), node)
        if target in (T.Tensor, T.Buffer) and _over_data(node):
            # T.Tensor(shape, dtype, X.data) in the body: X's elements in another shape
            # (and dtype), TileLang's way to flatten a tensor: T.view(X, shape, dtype)
            given = dict(zip(("shape", "dtype", "data"), node.args))
            given.update({k.arg: k.value for k in node.keywords})
            shape, dtype, data = given["shape"], given["dtype"], given["data"]
            view = ast.copy_location(ast.Call(ast.Attribute(
                ast.Name(LANGUAGE, ast.Load()), "view_of", ast.Load()),
                [data.value, shape, dtype], []), node)
            return self._view(view, T.view)
        if target is T.Cast and len(node.args) == 2 and not node.keywords:
            dtype, value = node.args          # TileLang's argument order
            return ast.copy_location(ast.Call(ast.Name(CAST, ast.Load()), [value, dtype], []),
                                     node)
        if (isinstance(node.func, ast.Attribute) and node.func.attr == "astype"
                and len(node.args) == 1 and not node.keywords):
            # TileLang's x.astype(dtype) on a value: T.cast(x, dtype)
            return ast.copy_location(ast.Call(ast.Name(CAST, ast.Load()),
                                              [node.func.value, node.args[0]], []), node)
        if target in (T.any_of, T.all_of) and self.error is not None:
            # what _hoist_bool_reductions did not take (a while test, an argument)
            name = "any_of" if target is T.any_of else "all_of"
            if len(node.args) != 1 or node.keywords:
                op = "or" if target is T.any_of else "and"
                raise self.error(f"T.{name}(buffer) takes one buffer or region (whether "
                                 f"{'any' if op == 'or' else 'every'} element of it is "
                                 f"nonzero), got {ast.unparse(node)}; for conditions write "
                                 f"them with `{op}`", node)
            raise self.error(f"T.{name}(x) is computed before the statement that uses it: "
                             "write it in an `if` test or on the right of an assignment "
                             f"(`flag = T.{name}(x)`), not in a loop condition or as an "
                             "argument", node)
        if target is T.tvm_storage_sync:
            return self._storage_sync(node)
        if target in SHUFFLES and node.keywords:
            return positional_shuffle(node, target, self.error)
        if target is T.func_attr:       # TVM's function attributes: nothing tilejit uses
            return ast.copy_location(ast.Constant(None), node)
        if target in (T.And, T.Or) and len(node.args) == 2 and not node.keywords:
            op = ast.And() if target is T.And else ast.Or()
            return ast.copy_location(ast.BoolOp(op, list(node.args)), node)
        if target is T.Not and len(node.args) == 1 and not node.keywords:
            return ast.copy_location(ast.UnaryOp(ast.Not(), node.args[0]), node)
        if target is T.clamp:
            return self._clamp(node)
        if target is T.cast and (node.keywords or len(node.args) > 2):
            return self._cast(node)
        if target is T.index_to_coordinates:
            return self._coordinates(node)
        if target is T.align_up and len(node.args) == 2 and not node.keywords:
            value, alignment = node.args
            prefix = node.func.value if isinstance(node.func, ast.Attribute) else None
            fn = (ast.Attribute(copy.deepcopy(prefix), "ceildiv", ast.Load()) if prefix
                  is not None else ast.Name("ceildiv", ast.Load()))
            return ast.copy_location(ast.BinOp(ast.Call(fn, [value, alignment], []),
                                               ast.Mult(), copy.deepcopy(alignment)), node)
        if target in (T.reshape, T.view):
            return self._view(node, target)
        if target is T.make_tensor and node.keywords:
            return self._positional(node, ("ptr", "shape", "dtype", "strides"),
                                    (ast.Constant("float32"), ast.Constant(None)))
        if getattr(target, "__module__", None) == _scalar_math.__name__:
            bit_op = _scalar_math.OPERATORS.get(target.__name__)
            if bit_op is not None and len(node.args) == 2 and not node.keywords:
                return ast.copy_location(ast.BinOp(node.args[0], getattr(ast, bit_op)(),
                                                   node.args[1]), node)
            if target is T.bitwise_not and len(node.args) == 1 and not node.keywords:
                return ast.copy_location(ast.UnaryOp(ast.Invert(), node.args[0]), node)
            if target is T.round and node.keywords:
                mode = [k.value for k in node.keywords if k.arg == "rounding_mode"]
                return ast.copy_location(ast.Call(node.func, node.args[:1] + mode, []), node)
        if getattr(target, "__module__", None) == _math_intrinsics.__name__ and \
                node.keywords and all(k.arg == "rounding_mode" for k in node.keywords):
            # T.ieee_add(a, b, rounding_mode="rz"): the mode positional, as typed
            return ast.copy_location(ast.Call(node.func, node.args + [
                k.value for k in node.keywords], []), node)
        if target in (T.floordiv, T.floormod) and len(node.args) == 2 and not node.keywords:
            op = ast.FloorDiv() if target is T.floordiv else ast.Mod()
            return ast.copy_location(ast.BinOp(node.args[0], op, node.args[1]), node)
        if target in (T.truncdiv, T.truncmod) and len(node.args) == 2 and not node.keywords:
            return ast.copy_location(_truncated(target is T.truncdiv, *node.args), node)
        if target is T.copy and any(k.arg in ("src", "dst") for k in node.keywords):
            node = _copy_operands_positional(node)
        if target is T.copy and node.keywords and all(k.arg in COPY_HINTS
                                                      for k in node.keywords):
            # TileLang's lowering hints (disable_tma=, annotations=, ...): not semantics
            return ast.copy_location(ast.Call(node.func, node.args, []), node)
        if target is T.Parallel and node.keywords and all(k.arg in PARALLEL_HINTS
                                                          for k in node.keywords):
            # TileLang's scheduling hints (coalesced_width=, ...): tilejit lays the loop
            # out itself and the iterations' results do not depend on them. `loop_layout=`
            # stays: which thread runs an iteration is the program's, and warp shuffles or
            # the thread index in the body read it (passes/loop_layouts.py)
            kept = [k for k in node.keywords if k.arg == "loop_layout"
                    and not (isinstance(k.value, ast.Constant) and k.value.value is None)]
            return ast.copy_location(ast.Call(node.func, node.args, kept), node)
        if target in (T.serial, T.unroll, T.vectorized):
            return self._range(node)
        return node

    def _cast(self, node):
        """``T.cast(x, dtype, round="", sat=True, rbits=None, span=None)``: the options,
        compile-time values, checked (``numerics.cast_options_problem``) and dropped."""
        names = ("value", "dtype", "round", "sat", "rbits", "span")
        given = dict(zip(names, node.args))
        for k in node.keywords:
            if k.arg not in names or k.arg in given:
                raise self.error(f"T.cast(): unknown or repeated keyword {k.arg}= (it takes "
                                 f"value, dtype, round=, sat=, rbits=, span=)", node)
            given[k.arg] = k.value
        if len(node.args) > len(names) or "value" not in given or "dtype" not in given:
            raise self.error("T.cast(value, dtype, round='', sat=True, rbits=None): a value "
                             "and a dtype", node)
        options = {}
        for name, default in (("round", ""), ("sat", True), ("rbits", None)):
            expr = given.get(name)
            if expr is None:
                options[name] = default
            elif isinstance(expr, ast.Constant):
                options[name] = expr.value
            elif isinstance(resolve_static(expr, self.namespace), (str, bool)):
                options[name] = resolve_static(expr, self.namespace)   # (a flag's name)
            elif name == "rbits":
                options[name] = expr        # (refused: stochastic rounding)
            else:
                raise self.error(f"T.cast({name}=...): a constant is expected, got "
                                 f"`{ast.unparse(expr)}`", node)
        problem = cast_options_problem(**options)
        if problem:
            raise self.error(problem, node)
        if cast_mode_warning(options["round"]):
            at = self.error(cast_mode_warning(options["round"]), node)    # (its place)
            warnings.warn_explicit(at.bare_message, UserWarning, at.filename or "<kernel>",
                                   at.lineno or 0)
        return ast.copy_location(ast.Call(node.func, [given["value"], given["dtype"]], []),
                                 node)

    def _range(self, node):
        """``range`` of ``T.serial(start, stop=None, step=1, *, annotations=None)`` (and
        ``T.unroll``'s ``explicit=``, ``unroll_factor=``: hints to TileLang's unroller,
        the iterations the same)."""
        args = list(node.args)
        for k in node.keywords:
            if k.arg in ("stop", "step") and len(args) == ("start", "stop",
                                                           "step").index(k.arg):
                args.append(k.value)
            elif k.arg == "start" and not args:
                args.append(k.value)
            elif k.arg not in ("annotations", "explicit", "unroll_factor"):
                raise self.error(f"T.{ast.unparse(node.func).split('.')[-1]}(): unknown or "
                                 f"misplaced keyword {k.arg}= (it takes start, stop, step, "
                                 f"and the hints annotations=, explicit=, unroll_factor=)",
                                 node)
        return ast.copy_location(ast.Call(ast.Name("range", ast.Load()), args, []), node)


    def _positional(self, node, names, defaults):
        """A call with its keywords as positional arguments, the missing trailing ones
        their defaults (the typing takes positional arguments); left as written where a
        keyword is unknown, repeated, or leaves a required argument out."""
        args = list(node.args) + [None] * (len(names) - len(node.args))
        for k in node.keywords:
            if k.arg not in names or args[names.index(k.arg)] is not None:
                return node
            args[names.index(k.arg)] = k.value
        first_default = len(names) - len(defaults)
        if any(a is None for a in args[:first_default]):
            return node
        args = [a if a is not None else copy.deepcopy(defaults[i - first_default])
                for i, a in enumerate(args)]
        return ast.copy_location(ast.Call(node.func, args, []), node)

    def _view(self, node, target):
        """T.view(A, shape, dtype=...) with positional arguments, as the typing takes them,
        and called as ``__tj_language.view_of`` (the same function: Numba rejects any
        attribute named ``view`` on what is not a numpy array)."""
        func = node.func
        if target is T.view:
            func = ast.Attribute(ast.Name(LANGUAGE, ast.Load()), "view_of", ast.Load())
        if not node.keywords:
            return ast.copy_location(ast.Call(func, node.args, []), node)
        names = ("buffer", "shape") + (("dtype",) if target is T.view else ())
        args = list(node.args) + [None] * (len(names) - len(node.args))
        for k in node.keywords:
            if k.arg not in names or args[names.index(k.arg)] is not None:
                return node              # left as written: the typing reports the call
            args[names.index(k.arg)] = k.value
        while args and args[-1] is None:
            args.pop()
        args = [a if a is not None else ast.Constant(None) for a in args]
        return ast.copy_location(ast.Call(func, args, []), node)

    def _coordinates(self, node):
        """``T.index_to_coordinates(index, shape)`` → a tuple of ``index // s_last //
        … % s_k``, one per dimension, for a shape written as a tuple in the call or held
        by the program (a tuple of numbers)."""
        given = dict(zip(("index", "shape"), node.args))
        for k in node.keywords:
            if k.arg not in ("index", "shape") or k.arg in given:
                return node     # left as written: the typing reports the call
            given[k.arg] = k.value
        if len(node.args) > 2 or set(given) != {"index", "shape"}:
            return node
        index, shape = given["index"], given["shape"]
        if isinstance(shape, (ast.Tuple, ast.List)):
            extents = list(shape.elts)
        else:
            value = self._static(shape)
            if not (isinstance(value, (tuple, list)) and value and all(
                    isinstance(v, int) and not isinstance(v, bool) for v in value)):
                if self.error is None:
                    return node
                raise self.error("T.index_to_coordinates(index, shape): the shape is a "
                                 "tuple written in the call or a tuple of numbers the "
                                 f"program holds, got {ast.unparse(shape)}", node)
            extents = [ast.Constant(v) for v in value]
        coordinates, rest = [], index
        for extent in reversed(extents):
            coordinates.append(ast.BinOp(copy.deepcopy(rest), ast.Mod(), copy.deepcopy(extent)))
            rest = ast.BinOp(rest, ast.FloorDiv(), copy.deepcopy(extent))
        return ast.copy_location(ast.Tuple(coordinates[::-1], ast.Load()), node)

    def _static(self, node):
        """The value a name or attribute chain holds in the program, else None."""
        try:
            return resolve_static(node, self.namespace)
        except Exception:       # not a static chain
            return None

    def _clamp(self, node):
        args = list(node.args)
        names = ("dst", "min_val", "max_val")
        for k in node.keywords:
            if k.arg not in names or names.index(k.arg) < len(node.args):
                return node       # left as written: the typing reports the call
            args += [None] * (names.index(k.arg) + 1 - len(args))
            args[names.index(k.arg)] = k.value
        if len(args) != 3 or any(a is None for a in args):
            return node
        prefix = node.func.value if isinstance(node.func, ast.Attribute) else None

        def fn(attr, name):
            if prefix is not None:
                return ast.Attribute(copy.deepcopy(prefix), attr, ast.Load())
            return ast.Name(name, ast.Load())
        lower = ast.Call(fn("max", MAX), [args[0], args[1]], [])
        return ast.copy_location(ast.Call(fn("min", MIN), [lower, args[2]], []), node)


class _Replace(syntax.NodeTransformer):
    def __init__(self, old, new):
        self.old, self.new = old, new

    def visit_Call(self, node):
        return self.new if node is self.old else self.generic_visit(node)


def bool_reduction(operand, flag, any_: bool, index_prefix) -> list[ast.stmt]:
    """``flag = T.any_of(operand)`` (``all_of`` when not ``any_``) as loops:

        flag = False                        # all_of: True
        for i0 in range(lo, hi):            # per sliced dimension of X[e, lo:hi, ...]
            if X[e, i0, ...] != 0:          # all_of: == 0
                flag = True                 # all_of: False

    A bare name is a 1-d tile or tensor, its whole extent (``X.shape[0]``)."""
    if isinstance(operand, ast.Subscript):
        base = operand.value
        dims = operand.slice.elts if isinstance(operand.slice, ast.Tuple) else [operand.slice]
    else:
        base, dims = operand, [ast.Slice(None, None, None)]
    index, loops = [], []
    for d, e in enumerate(dims):
        if isinstance(e, ast.Slice):
            var = f"{index_prefix}{d}"
            lo = e.lower or ast.Constant(0)
            hi = e.upper or ast.Subscript(ast.Attribute(copy.deepcopy(base), "shape",
                                                        ast.Load()), ast.Constant(d),
                                          ast.Load())
            loops.append((var, lo, hi))
            index.append(ast.Name(var, ast.Load()))
        else:
            index.append(e)
    element = ast.Subscript(copy.deepcopy(base), ast.Tuple(index, ast.Load())
                            if len(index) > 1 else index[0], ast.Load())
    test = ast.Compare(element, [ast.NotEq() if any_ else ast.Eq()], [ast.Constant(0)])
    body = [ast.If(test, [ast.Assign([ast.Name(flag, ast.Store())],
                                     ast.Constant(any_))], [])]
    for var, lo, hi in reversed(loops):
        body = [ast.For(ast.Name(var, ast.Store()),
                        ast.Call(ast.Name("range", ast.Load()), [lo, hi], []), body, [])]
    return [ast.Assign([ast.Name(flag, ast.Store())], ast.Constant(not any_))] + body


class _DropAsserts(syntax.NodeTransformer):
    def visit_Assert(self, node):
        return None

    def generic_visit(self, node):
        node = super().generic_visit(node)
        if isinstance(getattr(node, "body", None), list) and not node.body:
            node.body = [ast.copy_location(ast.Pass(), node)]     # a block left empty
        return node


def _without_asserts(stmt):
    """A host statement without the asserts nested in it (the host program checks them)."""
    if not any(isinstance(n, ast.Assert) for n in syntax.walk(stmt)):
        return stmt
    return syntax.fix_missing_locations(_DropAsserts().visit(copy.deepcopy(stmt)))


def _read_first(name: str, stmts: list) -> bool:
    """Whether the first of ``stmts`` that mentions ``name`` reads it."""
    for stmt in stmts:
        ctxs = {type(n.ctx) for n in syntax.walk(stmt) if isinstance(n, ast.Name) and n.id == name}
        if ast.Load in ctxs:
            return True
        if ctxs:
            return False
    return False


def device_tree(ks: KernelSource, drop_params=(), passes=(), simulator=False,
                outputs=(), shape_entries=(), on_rewritten=None,
                namespace=None, constants=None, whole_shapes=None) -> ast.FunctionDef:
    """The device program; ``passes`` are source-level passes applied to it (the GPU
    pipeline's, such as the parallel-guard versioning; the simulator takes none, and
    keeps ``breakpoint()``). With ``namespace`` (the compiled program's globals, the
    constexprs among them) attribute chains through objects become globals of it
    (``attribute_chains.py``) and the prologue's compile-time assignments are folded
    (``static_prologue.py``). ``constants``: the compile-time values the simulator's
    program is built for, where it depends on them (an emitter built in the prologue:
    ``mma_emitter_calls.py``); the compiled program reads them from ``namespace``.
    ``whole_shapes``: {tensor parameter: rank} of those whose every shape entry is in
    ``shape_entries`` (a bare ``P.shape`` of one is the tuple of its entries)."""
    known = {**ks.namespace, **(constants or {}), **(namespace or {})}
    constexprs = {n: given[n] for given in (constants or {}, namespace or {})
                  for n in ks.constexpr_params if n in given}
    fdef = copy.deepcopy(ks.tree)
    # `if len(shape) == 1:` of a module global: decided with this compilation's value
    fdef = fold_compile_time_branches(fdef, known)
    # T.ldg128(X[i:i + 4]), T.stg128(Y[j:j + 4], v): the markers of explicit accesses
    fdef, words = rewrite_bit_moves(fdef, ks)
    # A[0, 4:8] = A[0, 0:4] (a statement's slices): TVM's vector statement, in T.Ramp form
    fdef = expand_slice_statements(fdef, ks, words)
    # B[i, T.Ramp(j * 4, 1, 4)] = ...: the statement once per lane
    fdef = expand_vector_lanes(fdef, ks.namespace, ks.error)
    # comprehensions over a constexpr's sequence in the block's code, unrolled
    unroll_constexpr_comprehensions(ks, fdef, constexprs)
    forms = _DeviceForms(ks.namespace, strip_breakpoints=not simulator, error=ks.error,
                         constexprs=constexprs)
    # T.unroll loops whose gemm regions move with their index, unrolled (before
    # _DeviceForms makes T.unroll a range)
    fdef = forms.visit(unroll_gemm_regions(fdef, known))
    # A[-1], A[-i - 1]: counted from the end, where provably negative (TileLang's)
    fdef = legalize_negative_indices(fdef, ks)
    # T.Parallel in T.Parallel: one loop where perfectly nested, else refused
    fdef = rewrite_parallel_nests(fdef, ks.namespace, ks.error)
    # for i in T.Parallel(M * N) reading F[i // N, i % N]: the two-index loop
    fdef = split_fused_indices(fdef, ks.namespace)
    # idx = d; frag[idx] in a T.Parallel over d: frag[d] (the loop's own index)
    fdef = inline_loop_aliases(fdef, ks.namespace)
    # dot[i] += P[i, k] in T.Parallel(M, K): for k in range(K) around T.Parallel(M)
    fdef = serialize_accumulations(fdef, ks.namespace)
    # a barrier among a T.Parallel body's statements: the loop cut in two there
    fdef = split_parallel_at_barriers(fdef, ks.namespace, ks.error)
    fdef = expand_emitter_calls(fdef, ks.namespace, ks.error,
                                namespace if constants is None else constants)
    fdef = rewrite_pipelined_ranges(fdef, ks.namespace, ks.error)
    fdef = rewrite_persistent(fdef, ks.namespace, ks.error)
    # before the bindings its default seq reads; bit=, dist= read where constexprs are
    fdef = rewrite_random_draws(fdef, ks, namespace if namespace is not None else
                                {**ks.namespace, **(constants or {})})
    fdef = rewrite_thread_bindings(fdef, ks)
    fdef = rewrite_async_copies(fdef, ks)
    # hand-written warpgroup branches as T.ws roles; the block's size may be a constexpr
    fdef = rewrite_thread_roles(fdef, ks, known)
    fdef = rewrite_reducers(fdef, ks.namespace, ks.error)
    if not simulator:
        fdef = replace_host_queries(fdef, ks.namespace)
    if namespace is not None:
        # `cfg.BLOCK` through an object: a global of the program (attribute_chains.py)
        fdef = fold_attribute_chains(fdef, namespace, ks.error)
    # a compile-time parameter the program binds again (`H = H_kv` after `H` was read):
    # its value enters as a global of the program, bound to it first
    rebound = [a.arg for a in fdef.args.args if a.arg in drop_params and namespace is not None
               and a.arg in namespace and any(isinstance(n, ast.Name) and n.id == a.arg and
                                              isinstance(n.ctx, ast.Store)
                                              for n in syntax.walk(fdef))]
    for name in rebound:
        namespace[f"__tj_param_{name}"] = namespace[name]
    fdef.args.args = [a for a in fdef.args.args if a.arg not in drop_params]
    fdef.args.defaults = []
    for a in fdef.args.args:
        a.annotation = None
    fdef.returns = None
    body = fdef.body
    launch = body[ks.launch_index]
    launch.body = [_SequenceCalls(known).visit(s) for s in launch.body]
    # the host's asserts (shapes, dtypes), also those in its `if` blocks, are the host
    # program's
    prologue = [_without_asserts(s) for s in body[:ks.launch_index] if not (
        isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
        and s.targets[0].id in outputs) and not isinstance(s, ast.Assert)]
    extents = []
    if namespace is not None:
        if shape_entries:
            specialize = _SpecializeShapes(shape_entries, whole_shapes)
            prologue = flatten_statements(specialize.visit(s) for s in prologue)
        runtime = [a.arg for a in fdef.args.args] + list(outputs)
        prologue = fold_static_prologue(prologue, launch.body, namespace, UNSUPPORTED,
                                        ks.error, runtime)
        extents = static_grid(ks, prologue, namespace, runtime,
                              _SpecializeShapes(shape_entries or (), whole_shapes))
    # (not one the folded prologue first assigns a constant: `h_blk = math.gcd(hidden,
    # h_blk)` folded to `h_blk = 128` stays a compile-time value)
    rebound = [n for n in rebound if _read_first(n, prologue + launch.body)]
    fdef.body = [ast.Assign([ast.Name(n, ast.Store())], ast.Name(f"__tj_param_{n}", ast.Load()))
                 for n in rebound] + prologue + _block_index_assignments(ks, extents) + launch.body
    fdef.args.args += [ast.arg(name) for name in outputs]
    if shape_entries:
        fdef = _SpecializeShapes(shape_entries, whole_shapes).visit(fdef)
    if on_rewritten is not None:
        on_rewritten(fdef)
    for source_pass in passes:
        fdef = source_pass(fdef, ks.namespace)
    return syntax.fix_missing_locations(fdef)


class _SequenceCalls(syntax.NodeTransformer):
    """``list(t)`` / ``tuple(t)`` of a value in the kernel's body (TileLang's quantization
    helpers return tuples their callers wrap: ``list(unpack(x))[0]``): the value itself,
    a tuple the device indexes alike. A comprehension or generator inside stays (Numba's
    own error where it cannot be typed)."""

    def __init__(self, namespace):
        self.namespace = namespace

    def visit_Call(self, node):
        node = self.generic_visit(node)
        if resolve_static(node.func, self.namespace) in (list, tuple) and \
                len(node.args) == 1 and not node.keywords and not isinstance(
                    node.args[0], (ast.GeneratorExp, ast.ListComp, ast.Starred)):
            return node.args[0]
        return node


def host_tree(ks: KernelSource, outputs=()) -> ast.FunctionDef:
    # a shallow copy with its own arguments and the statements before the launch: the
    # kernel's body (most of the tree) is left out rather than copied
    fdef = copy.copy(ks.tree)
    fdef.args = copy.deepcopy(ks.tree.args)
    fdef.decorator_list = []
    fdef.args.defaults = []
    for a in fdef.args.args:
        a.annotation = None
    fdef.body = [RaiseAssumptions(ASSUMPTION_ERROR).visit(s)
                 for s in copy.deepcopy(ks.tree.body[:ks.launch_index])]
    call = copy.deepcopy(kernel_call(ks))
    keywords = call.keywords + [ast.keyword("outputs", ast.Tuple(
        [ast.Name(name, ast.Load()) for name in outputs], ast.Load()))]
    ret = ast.Return(ast.Call(ast.Name(LAUNCH_CONFIG, ast.Load()), call.args, keywords))
    # at the `T.Kernel(...)` call's own line (the `with` statement spans its block)
    fdef.body = fdef.body + [_located(ret, kernel_call(ks))]
    fdef.name = f"{ks.tree.name}__host"
    return fdef


def materialize(ks: KernelSource, fdef: ast.FunctionDef, namespace: dict,
                name: str | None = None) -> types.FunctionType:
    """Compile one rewritten function definition into a function whose globals are
    ``namespace`` (the kernel's globals and closure, plus anything injected)."""
    namespace.setdefault(CAST, T.cast)
    namespace.setdefault(ASSUMPTION_ERROR, AssumptionError)
    namespace.setdefault(LANGUAGE, T)
    namespace.setdefault(MAX, T.max)
    namespace.setdefault(MIN, T.min)
    module = ast.Module(body=[fdef], type_ignores=[])
    syntax.fix_missing_locations(module)
    code = compile(module, ks.filename, "exec")
    fn_code = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    fn = types.FunctionType(fn_code, namespace, name or fdef.name)
    fn.__qualname__ = ks.func.__qualname__
    fn.__module__ = ks.func.__module__
    return fn


def _copy_operands_positional(node: ast.Call) -> ast.Call:
    """``T.copy(src, dst=X)`` (TileLang's keywords for the operands) with the operands
    positional, as the passes and the typing read them; a call that gives an operand
    twice is left as written (the typing then names it)."""
    args = list(node.args)
    for pos, name in enumerate(("src", "dst")):
        given = [k for k in node.keywords if k.arg == name]
        if given:
            if len(args) != pos:
                return node
            args.append(given[0].value)
    rest = [k for k in node.keywords if k.arg not in ("src", "dst")]
    return ast.copy_location(ast.Call(node.func, args, rest), node)


def _static_getattr(call: ast.Call, namespace) -> ast.Attribute | None:
    """``getattr(obj, name)`` as ``obj.<name>`` when ``obj`` is a compile-time value (a
    module, ``T``) and ``name`` a string made of literals and compile-time strings."""
    if not (isinstance(call.func, ast.Name) and call.func.id == "getattr"
            and namespace.get("getattr", getattr) is getattr and len(call.args) == 2
            and not call.keywords and resolve_static(call.args[0], namespace) is not None):
        return None
    name, ok = plain_value(call.args[1], namespace, (str,))
    if not ok or not isinstance(name, str) or not name.isidentifier():
        return None
    return ast.copy_location(ast.Attribute(copy.deepcopy(call.args[0]), name, ast.Load()), call)


def _over_data(call: ast.Call) -> bool:
    """``T.Tensor(shape, dtype, X.data)``: shape, dtype and data, by position or by name
    (nothing else), the data a tensor's ``.data``."""
    given = dict(zip(("shape", "dtype", "data"), call.args))
    for k in call.keywords:
        if k.arg not in ("shape", "dtype", "data") or k.arg in given:
            return False
        given[k.arg] = k.value
    data = given.get("data")
    return len(call.args) <= 3 and set(given) == {"shape", "dtype", "data"} and \
        isinstance(data, ast.Attribute) and data.attr == "data"


def _dp4a_loop(call: ast.Call, stmt: ast.stmt) -> list:
    """``T.dp4a(A[i, k], B[j, k], C[n])`` as ``for t in range(4): C[n] = C[n] +
    int32(A[i, k + t]) * int32(B[j, k + t])``, after a check of the operands' dtypes
    (int8, int8, int32: a CompileError at the line otherwise, as TileLang refuses them)."""
    a, b, c = call.args
    t = f"__tj_dp4a_{stmt.lineno}_{stmt.col_offset}"

    def shifted(sub):
        sub = copy.deepcopy(sub)
        elts = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
        elts[-1] = ast.BinOp(elts[-1], ast.Add(), ast.Name(t, ast.Load()))
        sub.slice = ast.Tuple(elts, ast.Load()) if len(elts) > 1 else elts[0]
        return sub

    def int32(x):
        return ast.Call(ast.Name(CAST, ast.Load()), [x, ast.Constant("int32")], [])

    target = copy.deepcopy(c)
    target.ctx = ast.Store()
    value = ast.BinOp(copy.deepcopy(c), ast.Add(),
                      ast.BinOp(int32(shifted(a)), ast.Mult(), int32(shifted(b))))
    loop = ast.For(ast.Name(t, ast.Store()), ast.Call(ast.Name("range", ast.Load()),
                                                       [ast.Constant(4)], []),
                   [ast.Assign([target], value)], [], None)
    check = ast.Expr(ast.Call(ast.Name(DP4A_OPERANDS, ast.Load()),
                              [copy.deepcopy(x) for x in (a, b, c)], []))
    return [syntax.fix_missing_locations(ast.copy_location(s, stmt)) for s in (check, loop)]


# Python's int methods of no argument a kernel may call on a compile-time int (folded)
_INT_METHODS = ("bit_length", "bit_count")


def _truncated(quotient: bool, a, b):
    """C's ``a / b`` (``quotient``) or ``a % b`` on integers from Python's floor forms: one
    step toward zero where the remainder is not 0 and the signs differ, in the operands'
    type (``T.if_then_else(c, a // b + 1, a // b)``)."""
    def copy_(e):
        return copy.deepcopy(e)
    floor = ast.BinOp(copy_(a), ast.FloorDiv() if quotient else ast.Mod(), copy_(b))
    negative = [ast.Compare(copy_(x), [ast.Lt()], [ast.Constant(0)]) for x in (a, b)]
    inexact = ast.Compare(ast.BinOp(copy_(a), ast.Mod(), copy_(b)), [ast.NotEq()],
                          [ast.Constant(0)])
    cond = ast.BinOp(inexact, ast.BitAnd(), ast.Compare(negative[0], [ast.NotEq()],
                                                        [negative[1]]))
    step = ast.BinOp(copy_(floor), ast.Add(), ast.Constant(1)) if quotient else \
        ast.BinOp(copy_(floor), ast.Sub(), copy_(b))
    select = ast.Attribute(ast.Name(LANGUAGE, ast.Load()), "if_then_else", ast.Load())
    return ast.Call(select, [cond, step, floor], [])
