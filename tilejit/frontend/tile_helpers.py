"""Helpers that hold tile operations, inlined into the kernel's syntax tree.

A plain helper (or ``@T.macro``) that a kernel calls is otherwise compiled from its
bytecode as a device function (``codegen/macros.py``): scalar code only, since the tile
passes work on the kernel's source. TileLang programs also put tile operations in
helpers, with the options of the operation chosen in Python::

    def _reduce(T, op, src, dst, dim, batch=1):
        kwargs = {} if batch == 1 else {"batch": batch}
        if op == "sum":
            T.reduce_sum(src, dst, dim=dim, **kwargs)
        elif op == "max":
            T.reduce_max(src, dst, dim=dim, **kwargs)

    with T.Kernel(1, threads=128):
        ...
        _reduce(T, op, src, dst, dim=1)

A call statement of such a helper (one whose body names a tile operation that only the
tile passes lower, ``T.copy``, ``T.gemm``, ``T.reduce_*``, an allocation of a shared or
fragment tile, a block or grid barrier, ..., or passes ``**`` a dict, itself or through a
helper it calls) is
replaced by the helper's body, as ``kernel_macros.inline_call`` does for a helper holding
the launch (same rules: the helper in the kernel's file, arguments names or constants,
parameters not assigned). The names the body assigns are renamed apart from the
kernel's (``<name>__<helper><n>``), and a dict the body builds from compile-time values
only to pass it as ``**kwargs`` is evaluated here and passed as keywords. The ``if``s on
the now constant arguments (``op == "sum"``) are folded by the tile passes as any other
compile-time ``if``. In simulation the helper is an ordinary Python call. An object of a
class of the program's own called in the kernel (``scale(F, m, n)``, ``C[i] = affine(x)``)
is its ``__call__`` with the object first, always inlined (a device function cannot be
called through an object).
"""
from __future__ import annotations

import ast
import builtins
import copy
from collections import Counter

from tilejit import syntax
from tilejit.frontend.tail_returns import always_returns
from tilejit import language as T
from tilejit.errors import CompileError
from tilejit.frontend.helpers import is_helper
from tilejit.frontend.kernel_macros import (call_method, has_reference_params, inline_call,
                                            rename_locals)
from tilejit.frontend.references import current_namespace
from tilejit.frontend.source import (FRAGMENT_ALLOCATIONS, function_def_from_file, names_bound_to,
                                     resolve_static, statement_lists)
from tilejit.language.bit_moves import ACCESSES
from tilejit.language.tilelang_names import SymbolicInt

_DEPTH = 8
# the tile operations only the tile passes lower: a helper that uses one cannot be a
# device function (T.Parallel loops, element atomics and scalars can, and stay one)
_TILE_OPS = {getattr(T, name) for name in (
    "copy", "gemm", "fill", "clear", "reduce", "reduce_sum", "reduce_max", "reduce_min",
    "reduce_abssum", "reduce_absmax", "reduce_bitand", "reduce_bitor", "reduce_bitxor",
    "cumsum", "cummax", "alloc_shared", "alloc_fragment", "annotate_layout", "all_of",
    "any_of", "alloc_reducer", "reducer_init", "reducer_update", "finalize_reducer",
    "sync_threads", "sync_grid", "annotate_restrict_buffers",
    "copy_cluster", "gemm_sp", "block_rank_in_cluster",   # rewritten by the source passes
    "rng_init", "rng_rand", "rng_rand_float",       # the kernel's random stream
    # the launch's indices and extents (frontend/thread_bindings.py, raw_launches.py)
    "thread_binding", "launch_thread", "get_thread_binding", "get_thread_bindings",
    "get_thread_extent", "get_thread_extents", "get_block_binding", "get_block_bindings",
    "get_block_extent", "get_block_extents", "get_lane_idx", "get_warp_idx",
    "get_warp_idx_sync", "get_warp_group_idx")
    if hasattr(T, name)}


def _indexes_a_parameter(fdef) -> bool:
    """A body that indexes one of its parameters, with nothing only a device function
    holds (an ``assert`` or ``raise``, which traps there; a call of itself)."""
    params = {a.arg for a in fdef.args.args}
    nodes = list(syntax.walk(fdef))
    if any(isinstance(n, (ast.Assert, ast.Raise, ast.Try)) or (
            isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
            and n.func.id == fdef.name) for n in nodes):
        return False
    return any(isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name)
               and n.value.id in params for n in nodes)


def inline_tile_helpers(ks) -> None:
    """Every call statement in ``ks.tree`` of a helper that holds tile operations,
    replaced by the helper's body (in place)."""
    _Inliner(ks).run(ks.tree, _DEPTH)


class _Inliner:
    def __init__(self, ks):
        self.ks = ks
        self.count = 0
        self.fragments = None       # the kernel's fragments' names, when first asked
        self.must = {}              # helper -> whether a call of it must be inlined

    def run(self, node, depth):
        for stmts in statement_lists(node):
            out = []
            for stmt in stmts:
                for part in (self._hoisted(stmt) if depth else [stmt]):
                    body = self._inline(part, depth) if depth else None
                    out.extend(body if body is not None else [part])
            stmts[:] = out

    def _hoisted(self, stmt) -> list:
        """``B[tid] = lane() + 1``, ``if lane() == 0:`` with ``lane`` a helper that must be
        inlined (it reads the thread's index, holds a tile operation, ...): each such call
        inside the statement's expression first bound to a name of its own, in the order
        Python evaluates them (``__tj_call0 = lane()``), so it is a call statement the
        inliner replaces; calls under ``and``/``or``/``x if c else y`` or in a ``while``'s
        test (evaluated only sometimes, or again) stay."""
        if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return)):
            field = "value"
        elif isinstance(stmt, ast.If):
            field = "test"
        elif isinstance(stmt, ast.Expr):
            field = "value"
        else:
            return [stmt]
        expr = getattr(stmt, field)
        if expr is None:
            return [stmt]
        top = expr if (isinstance(stmt, (ast.Assign, ast.Expr)) and
                       isinstance(expr, ast.Call)) else None
        calls = []
        self._hoistable(expr, top, calls)
        if not calls:
            return [stmt]
        names = {}
        for call in calls:
            names[id(call)] = f"__tj_call{self.count}"
            self.count += 1
        setattr(stmt, field, _ByName(names).visit(expr))
        before = [ast.copy_location(ast.Assign([ast.Name(names[id(c)], ast.Store())],
                                               _ByName(names, c).visit(c)), stmt)
                  for c in calls]
        return before + [stmt]

    def _hoistable(self, node, top, out):
        if isinstance(node, (ast.BoolOp, ast.IfExp, ast.Lambda, ast.ListComp, ast.SetComp,
                             ast.DictComp, ast.GeneratorExp, ast.NamedExpr)):
            return
        for child in syntax.iter_child_nodes(node):
            self._hoistable(child, top, out)
        if isinstance(node, ast.Call) and node is not top and self._must_inline(node):
            out.append(node)

    def _must_inline(self, call) -> bool:
        fn = _helper(resolve_static(call.func, self.ks.namespace))
        if fn is None:
            return False
        if fn not in self.must:         # (one answer per helper: its source is read once)
            found = function_def_from_file(fn)
            own = {**current_namespace(fn), "T": T} if found else None
            self.must[fn] = bool(found) and always_returns(found[1].body) and (
                    reaches(found[1], own, _tile_op, _DEPTH) or
                    reaches(found[1], own, _front_end_op, _DEPTH))
        return self.must[fn]

    def _inline(self, stmt, depth):
        # `v = helper(...)`: the body, its last statement `return e` made `v = e`
        assign = isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and \
            isinstance(stmt.value, ast.Call)
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)) and \
                not assign:
            return None
        target = resolve_static(stmt.value.func, self.ks.namespace)
        fn = _helper(target)
        found = fn is not None and function_def_from_file(fn)
        # a @T.macro handed an element or region (`addto(C[i % 4], v)`): TileLang's macro
        # takes the place itself, which a device function, taking values, cannot
        # (in an assignment a device function takes elements as values: as before)
        place = not assign and isinstance(target, T.macro) and any(
            isinstance(a, ast.Subscript) for a in stmt.value.args + [
                k.value for k in stmt.value.keywords])
        # a helper of the kernel's body reading the kernel's own names (local_helpers.py)
        closure = self.ks.local_helpers.get(getattr(stmt.value.func, "id", None))
        if not found:
            return None
        method = fn is not target and not isinstance(target, T.macro)
        if method:
            # `scale(F, m, n)` of an object: `type(scale).__call__(scale, F, m, n)`, inlined
            # (a device function cannot be called through an object)
            stmt.value.args.insert(0, copy.deepcopy(stmt.value.func))
        own = {**current_namespace(fn), "T": T}
        # a shape symbol read from the helper's factory (`return n`, n = T.dynamic("n")):
        # the kernel's value of it, which a device function cannot see
        symbols = any(isinstance(n, ast.Name) and isinstance(own.get(n.id), SymbolicInt)
                      for n in syntax.walk(found[1]))
        must = method or _slice_statement(found[1]) or reaches(found[1], own, _tile_op, depth) or \
            self._passes_fragment(stmt.value) or place or closure or symbols or \
            has_reference_params(found[1], own)
        # TileLang's doors: a macro that indexes a parameter (a tensor's element access,
        # which safe memory access guards) is inlined where it can be, so the guard is
        prefer = self.ks.inline_macros and isinstance(target, T.macro) and \
            _indexes_a_parameter(found[1])
        if not must and not prefer and not reaches(found[1], own, _front_end_op, depth):
            return None
        try:
            return self._inlined(stmt, fn, found, assign, depth)
        except CompileError:
            if must or reaches(found[1], own, _element_atomic, depth):
                raise       # (a device function cannot hold an element atomic either)
            # only what the front end rewrites (T.serial, T.alloc_var, ...): a helper that
            # cannot be inlined (it assigns a parameter, it is in another module) stays a
            # device function as before, whose error names what Numba lacks
            return None

    def _inlined(self, stmt, fn, found, assign, depth):
        if assign and not (always_returns(found[1].body) and not any(
                isinstance(n, ast.Return) and n.value is None for n in syntax.walk(found[1]))):
            raise self.ks.error(f"{found[1].name}(), inlined here, gives its value by a "
                                f"`return` as its last statement", stmt)
        body = inline_call(self.ks, stmt, fn, *found,
                           "a helper with tile operations (or T.serial loops, T.alloc_var "
                           "variables, element atomics: what the front end rewrites),")
        self.count += 1
        module = ast.Module(body=body, type_ignores=[])
        suffix = f"__{found[1].name}{self.count}"
        rename_locals(module, suffix)
        if assign:
            result = module.body.pop()
            if isinstance(result.value, ast.Name) and isinstance(stmt.targets[0], ast.Name) \
                    and result.value.id.endswith(suffix):
                # a tile the body made and returns (`s = total(f)`): named `s` itself, not
                # aliased (a tile is not a value a name can take)
                for n in syntax.walk(module):
                    if isinstance(n, ast.Name) and n.id == result.value.id:
                        n.id = stmt.targets[0].id
            else:
                module.body.append(ast.copy_location(ast.Assign(stmt.targets, result.value),
                                                     stmt))
        _expand_static_kwargs(module, self.ks)
        self.run(module, depth - 1)
        return module.body



    def _passes_fragment(self, call) -> bool:
        """Whether the call hands the helper one of the kernel's fragments (TileLang's
        ``Rescale(acc_o, scores_scale)``, a T.Parallel over them): a fragment is the
        block's, laid out over its threads, so a device function cannot take it."""
        if self.fragments is None:
            self.fragments = names_bound_to(self.ks.tree, self.ks.namespace,
                                            FRAGMENT_ALLOCATIONS)
        return any(isinstance(a, ast.Name) and a.id in self.fragments
                   for a in list(call.args) + [k.value for k in call.keywords])


class _ByName(syntax.NodeTransformer):
    """Each call of ``names`` (by identity) read from its name, but ``keep`` itself."""

    def __init__(self, names, keep=None):
        self.names, self.keep = names, keep

    def visit_Call(self, node):
        if node is not self.keep and id(node) in self.names:
            return ast.copy_location(ast.Name(self.names[id(node)], ast.Load()), node)
        return self.generic_visit(node)


# what the front end rewrites in a kernel's own body and Numba cannot type in a device
# function: a helper that uses one is inlined too, where a call statement names it
_FRONT_END_ONLY = {getattr(T, name) for name in (
    "serial", "unroll", "vectorized", "grid", "Pipelined", "Serial", "Unroll", "Vectorized",
    "alloc_var", "alloc_local", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
    "shift_left", "shift_right", "floordiv", "floormod", "align_up", "index_to_coordinates",
    "get_lane_idx", "loop_break", "atomic_load", "atomic_store", "atomic_add", "atomic_max",
    "atomic_min", "atomic_or", "atomic_addx2", "atomic_addx4", "evaluate", "let",
    "async_copy", "ptx_wait_group", "thread_return", "tvm_warp_activemask",
    "tvm_warp_shuffle", "tvm_warp_shuffle_down", "tvm_warp_shuffle_up", "call_extern",
    *ACCESSES) if hasattr(T, name)}


def _slice_statement(fdef) -> bool:
    """Whether a helper assigns through a slice outside a call (``B[4:8] = A[0:4]``: a
    vector statement, which the kernel's front end makes lanes, ``slice_vectors.py``)."""
    for stmt in syntax.walk(fdef):
        if isinstance(stmt, (ast.Assign, ast.AugAssign)):
            called = {id(n) for c in syntax.walk(stmt) if isinstance(c, ast.Call)
                      for n in syntax.walk(c)}
            if any(isinstance(n, ast.Slice) and id(n) not in called
                   for n in syntax.walk(stmt)):
                return True
    return False


_ELEMENT_ATOMICS = {getattr(T, name) for name in (
    "atomic_load", "atomic_store", "atomic_add", "atomic_max", "atomic_min", "atomic_or",
    "atomic_addx2", "atomic_addx4") if hasattr(T, name)}


def _element_atomic(call, namespace) -> bool:
    try:
        return resolve_static(call.func, namespace) in _ELEMENT_ATOMICS
    except TypeError:           # an unhashable value called: not one of them
        return False


def _tile_op(call, namespace) -> bool:
    """A call only the tile passes lower, or one passing ``**`` a dict."""
    return any(k.arg is None for k in call.keywords) or \
        resolve_static(call.func, namespace) in _TILE_OPS


def _front_end_op(call, namespace) -> bool:
    """A tile operation, or a call only the front end rewrites (``T.serial``, ``T.alloc_var``,
    an element atomic, …), or one with the keywords the front end takes off
    (``T.Parallel(..., coalesced_width=4)``, ``rounding_mode=``)."""
    if _tile_op(call, namespace):
        return True
    fn = resolve_static(call.func, namespace)
    try:
        if fn in _FRONT_END_ONLY:
            return True
    except TypeError:           # an unhashable value called: not one of them
        return False
    return bool(call.keywords) and (fn is T.Parallel or any(
        k.arg == "rounding_mode" for k in call.keywords))


def reaches(fdef, namespace, hit, depth=_DEPTH) -> bool:
    """Whether a call in ``fdef`` (its names resolved in ``namespace``), or in a helper
    (or ``@T.macro``) it calls, or one those call (read from their sources, ``depth``
    levels in all), is one ``hit(call, namespace)`` takes."""
    for node in syntax.walk(fdef):
        if not isinstance(node, ast.Call):
            continue
        if hit(node, namespace):
            return True
        if depth > 1 and isinstance(node.func, (ast.Name, ast.Attribute)):
            inner = _helper(resolve_static(node.func, namespace))
            found = inner is not None and function_def_from_file(inner)
            if found and reaches(found[1], {**current_namespace(inner), "T": T}, hit,
                                 depth - 1):
                return True
    return False


def helper_of(obj):
    """The function of a ``@T.macro`` or plain helper the kernel calls (of an object of a
    user's class, its ``__call__``), else None."""
    if isinstance(obj, T.macro):
        obj = obj.func
    if is_helper(obj):
        return obj
    method = call_method(obj)
    return method if is_helper(method) else None


_helper = helper_of


def _expand_static_kwargs(module, ks):
    """``kw = <dict of compile-time values>`` used only as ``f(..., **kw)``: the
    assignment dropped and its items passed as keywords."""
    loads = Counter(n.id for n in syntax.walk(module)
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))
    starred = Counter(k.value.id for c in syntax.walk(module) if isinstance(c, ast.Call)
                      for k in c.keywords if k.arg is None and isinstance(k.value, ast.Name))
    values = {}
    for stmts in statement_lists(module):
        for stmt in list(stmts):
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Name)):
                continue
            name = stmt.targets[0].id
            if not starred[name] or name in values or loads[name] != starred[name]:
                continue
            value = _static_dict(stmt.value, ks.namespace)
            if value is not None:
                values[name] = value
                stmts.remove(stmt)
    for call in syntax.walk(module):
        if isinstance(call, ast.Call):
            keywords = []
            for k in call.keywords:
                if k.arg is None and isinstance(k.value, ast.Name) and k.value.id in values:
                    keywords += [ast.keyword(key, ast.Constant(v))
                                 for key, v in values[k.value.id].items()]
                else:
                    keywords.append(k)
            call.keywords = keywords


def _static_dict(expr, namespace):
    """The dict ``expr`` gives when every name in it is a compile-time value of the
    kernel's namespace and its items are plain constants; else None."""
    names = {n.id for n in syntax.walk(expr) if isinstance(n, ast.Name)}
    if any(n not in namespace and not hasattr(builtins, n) for n in names):
        return None
    try:
        value = eval(compile(ast.Expression(expr), "<kwargs>", "eval"),    # noqa: S307
                     {"__builtins__": builtins}, {n: namespace[n] for n in names
                                                  if n in namespace})
    except Exception:           # not evaluable here: left to the compiler's own errors
        return None
    if isinstance(value, dict) and all(isinstance(k, str) and k.isidentifier() and
                                       isinstance(v, (bool, int, float, str, type(None)))
                                       for k, v in value.items()):
        return value
    return None
