"""Front end: ``T.Parallel`` loops nested in one another, as TileLang's loop-nest checker
has them, for the GPU and the simulator alike.

- Perfectly nested ``T.Parallel`` loops (the outer body is the inner loop and nothing
  else, the inner extents do not read the outer indices) are one loop:
  ``for i in T.Parallel(a): for j in T.Parallel(b): S`` → ``for i, j in T.Parallel(a,
  b): S``. Each ``T.Parallel`` spreads its iterations over the block's threads, so two
  nested ones would each give a thread its own share of the other's, and the
  ``(i, j)`` pairs off the diagonal would run nowhere.
- Any other ``T.Parallel`` inside a ``T.Parallel`` (after other statements, under an
  ``if``, in a serial loop between them, in a helper or macro called there), a
  ``T.Pipelined`` loop or a tile operation (``T.gemm``, a reduction, ``T.fill``, …) in a
  ``T.Parallel`` body is a ``LoopNestError`` at its line (a ``ValueError``, as TileLang
  raises it). A serial loop in a ``T.Parallel``, and a ``T.Parallel`` in a serial or
  pipelined loop, stay as they are.
- A value carried from one iteration to the next (``s += x[i]`` of a variable, or of a
  ``T.alloc_local`` element, not set earlier in the iteration) is a ``LoopNestError``:
  the iterations run on the block's threads at once, each would carry its own.
"""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit import language as T
from tilejit.errors import LoopNestError
from tilejit.frontend.helpers import is_helper
from tilejit.frontend.references import current_namespace
from tilejit.frontend.source import function_def_from_file, names_bound_to, resolve_static
from tilejit.frontend.tile_helpers import reaches

# tile operations a T.Parallel body may not hold: each is the whole block's work (an
# element T.copy, `T.copy(A[i, j], B[i, j])`, is one element's and stays allowed)
_TILE_OPS = ("gemm", "gemm_v1", "gemm_v2", "gemm_sp", "wgmma_gemm", "fill", "clear",
             "reduce", "reduce_sum", "reduce_max", "reduce_min", "reduce_abssum",
             "reduce_absmax", "reduce_bitand", "reduce_bitor", "reduce_bitxor", "cumsum",
             "finalize_reducer")


class _Nests(syntax.NodeTransformer):
    def __init__(self, namespace, error):
        self.namespace = namespace
        self.error = error
        self.tile_ops = {getattr(T, n): n for n in _TILE_OPS if hasattr(T, n)}

    def _loop_kind(self, node):
        if not (isinstance(node, (ast.For, ast.AsyncFor)) and isinstance(node.iter, ast.Call)):
            return None
        fn = resolve_static(node.iter.func, self.namespace)
        if fn is T.Parallel:
            return "parallel"
        if fn is T.Pipelined:
            return "pipelined"
        return None

    def visit_For(self, node):
        if self._loop_kind(node) != "parallel":
            return self.generic_visit(node)
        while len(node.body) == 1 and self._loop_kind(node.body[0]) == "parallel" \
                and not node.orelse:
            inner = node.body[0]
            outer_names = {n.id for n in syntax.walk(node.target) if isinstance(n, ast.Name)}
            read = {n.id for n in syntax.walk(inner.iter) if isinstance(n, ast.Name)}
            if read & outer_names:
                raise self.error(
                    f"a T.Parallel whose extents read the indices of the T.Parallel around "
                    f"it ({', '.join(sorted(read & outer_names))}): nested T.Parallel loops "
                    f"are one loop over a rectangle; write its extents with values known "
                    f"before the outer loop", inner)
            node = self._merged(node, inner)
        self._check_body(node)
        self._check_carried(node)
        self._check_local_indices(node)
        node.body = [self.visit(s) for s in node.body]
        return node

    def _check_carried(self, loop):
        """A value carried from one iteration to the next (``acc += x[i]`` of a variable
        or of a T.alloc_local element set before the loop): the iterations run on the
        block's threads at once, each thread would carry its own partial value."""
        targets = {n.id for n in syntax.walk(loop.target) if isinstance(n, ast.Name)}
        body = ast.Module(body=loop.body, type_ignores=[])
        first: dict = {}                 # name -> (line, col) of its first binding here
        for n in syntax.walk(body):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                at = (n.lineno, n.col_offset)
                first[n.id] = min(first.get(n.id, at), at)
            elif isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Subscript) and \
                    not _reads_itself(n.targets[0], n.value):
                key = _element(n.targets[0])        # an element set in this iteration
                at = (n.lineno, n.col_offset)
                first[key] = min(first.get(key, at), at)
        for n in syntax.walk(body):
            if isinstance(n, ast.AugAssign):
                target, reads = n.target, True
            elif isinstance(n, ast.Assign) and len(n.targets) == 1:
                target = n.targets[0]
                reads = _reads_itself(target, n.value)
            else:
                continue
            if not reads:
                continue
            at = (n.lineno, n.col_offset)
            if isinstance(target, ast.Name):
                name = target.id
            elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) \
                    and self._allocated_local(target.value.id) and not targets & {
                        x.id for x in syntax.walk(target.slice) if isinstance(x, ast.Name)}:
                name = target.value.id
                if first.get(_element(target), at) < at:
                    continue
            else:
                continue
            if name in targets or first.get(name, at) < at:
                continue
            raise self.error(
                f"this update of {name} in the T.Parallel at line {loop.lineno} carries "
                f"{name} from one iteration to the next, but the "
                f"iterations run on the block's threads at once: each thread would hold "
                f"its own partial value. Reduce a fragment (T.reduce_*, T.alloc_reducer), "
                f"use an atomic, or loop with T.serial", n)

    def _check_local_indices(self, loop):
        """A ``T.alloc_local`` array indexed by the loop's indices (or by names computed
        from them in the body): the array is each thread's own, and the iterations are
        spread over the threads, so each thread's copy would hold only its iterations'
        elements (TileLang refuses it too). An index the iterations share
        (``scale[0]``, ``scratch[lane]`` of an inner serial loop) is the thread's own."""
        if not self.locals:
            return
        indices = [n.id for n in syntax.walk(loop.target) if isinstance(n, ast.Name)]
        body = ast.Module(body=loop.body, type_ignores=[])
        derived = derived_names(body, set(indices))
        for n in syntax.walk(body):
            if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and \
                    n.value.id in self.locals and _reads(n.slice, derived):
                read = {x.id for x in syntax.walk(n.slice) if isinstance(x, ast.Name)}
                direct = [i for i in indices if i in read]
                by = f"T.Parallel loop variable `{', '.join(direct)}`" if direct else \
                    f"`{', '.join(sorted(read & derived))}`, computed from T.Parallel loop " \
                    f"variable `{', '.join(indices)}`"
                raise self.error(
                    f"Local buffer `{n.value.id}` is indexed by {by} "
                    f"(`{ast.unparse(n)}`, in the T.Parallel at line "
                    f"{loop.lineno}): a T.alloc_local array is each thread's own and the "
                    f"loop's iterations are spread over the threads, so each thread's copy "
                    f"would hold only its own iterations' elements. Index it with T.serial, "
                    f"T.vectorized or T.unroll loops, or allocate a fragment "
                    f"(T.alloc_fragment) to spread it over the threads", n)

    def _allocated_local(self, name) -> bool:
        return name in self.locals

    def _merged(self, outer, inner):
        def names(target):
            return list(target.elts) if isinstance(target, ast.Tuple) else [target]
        target = ast.Tuple(names(outer.target) + names(inner.target), ast.Store())
        seen = {k.arg for k in outer.iter.keywords}
        call = ast.Call(outer.iter.func, list(outer.iter.args) + list(inner.iter.args),
                        list(outer.iter.keywords)
                        + [k for k in inner.iter.keywords if k.arg not in seen])
        merged = ast.For(target, call, inner.body, list(inner.orelse), None)
        return ast.copy_location(merged, outer)

    def _check_body(self, loop):
        for stmt in loop.body:
            for node in syntax.walk(stmt):
                kind = self._loop_kind(node)
                if kind == "parallel":
                    raise self.error(
                        f"a T.Parallel inside the T.Parallel at line {loop.lineno} that is "
                        f"not its whole body: T.Parallel loops nest only directly (one "
                        f"loop over both); after other statements, under an `if` or in a "
                        f"serial loop between them, each would spread its iterations over "
                        f"the block's threads on its own", node)
                if kind == "pipelined":
                    raise self.error(
                        f"a T.Pipelined loop inside the T.Parallel at line {loop.lineno}: "
                        f"a pipeline is the whole block's; put the T.Parallel inside it",
                        node)
                if isinstance(node, ast.Call):
                    fn = resolve_static(node.func, self.namespace)
                    name = self.tile_ops.get(fn) if _hashable(fn) else None
                    if name is not None:
                        raise self.error(
                            f"T.{name} inside the T.Parallel at line {loop.lineno}: a tile "
                            f"operation is the whole block's work, not one iteration's; "
                            f"call it outside the loop", node)
                    if fn is T.copy and _region_operand(node):
                        raise self.error(
                            f"a T.copy of a region inside the T.Parallel at line "
                            f"{loop.lineno}: a region's copy is the whole block's work, not "
                            f"one iteration's; copy the whole region once outside the loop, "
                            f"or write the loop's elements (S[i, j] = A[i, j])", node)
                    self._check_helper(fn, node, loop)

    def _check_helper(self, fn, call, loop):
        """A helper (or @T.macro) called in a T.Parallel body that holds a T.Parallel
        loop itself, or through the helpers it calls: the same nest, out of sight."""
        helper = fn.func if isinstance(fn, T.macro) else fn
        if not is_helper(helper):
            return
        found = function_def_from_file(helper)
        if found and reaches(found[1], {**current_namespace(helper), "T": T},
                             lambda c, ns: resolve_static(c.func, ns) is T.Parallel):
            raise self.error(
                f"{ast.unparse(call.func)}() holds a T.Parallel loop and is called inside the "
                f"T.Parallel at line {loop.lineno}: T.Parallel loops nest only directly (one "
                f"loop over both); call it outside the loop, or write its loop here", call)


def _region_operand(call) -> bool:
    """Whether a T.copy names a region (a slice) rather than one element."""
    for arg in list(call.args) + [k.value for k in call.keywords]:
        if isinstance(arg, ast.Subscript):
            index = arg.slice.elts if isinstance(arg.slice, ast.Tuple) else [arg.slice]
            if any(isinstance(i, ast.Slice) for i in index):
                return True
    return False


def _hashable(value) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def derived_names(body: ast.AST, seeds: set) -> set:
    """``seeds`` and the names ``body`` binds only to values computed from them (every
    binding an assignment of such a value: a name also bound otherwise, by a loop or
    another assignment, is not counted)."""
    bindings: dict = {}
    for n in syntax.walk(body):
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets, value = (n.targets if isinstance(n, ast.Assign) else [n.target]), n.value
        elif isinstance(n, (ast.For, ast.AsyncFor)):
            targets, value = [n.target], None
        elif isinstance(n, ast.withitem) and n.optional_vars is not None:
            targets, value = [n.optional_vars], None
        elif isinstance(n, ast.NamedExpr):
            targets, value = [n.target], n.value
        else:
            continue
        for t in targets:
            for x in syntax.walk(t):
                if isinstance(x, ast.Name) and isinstance(x.ctx, ast.Store):
                    bindings.setdefault(x.id, []).append(value)
    derived = set(seeds)
    grew = True
    while grew:
        grew = False
        for name, values in bindings.items():
            if name not in derived and all(v is not None and _reads(v, derived)
                                           for v in values):
                derived.add(name)
                grew = True
    return derived


def _reads(expr, names) -> bool:
    return any(isinstance(x, ast.Name) and x.id in names for x in syntax.walk(expr))


def _element(sub):
    return (ast.unparse(sub.value), ast.dump(sub.slice))


def _reads_itself(target, value) -> bool:
    """Whether ``value`` reads what ``target`` (a name, or an element) stores."""
    if isinstance(target, ast.Name):
        return any(isinstance(v, ast.Name) and v.id == target.id for v in syntax.walk(value))
    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
        return any(isinstance(v, ast.Subscript) and isinstance(v.value, ast.Name)
                   and v.value.id == target.value.id
                   and ast.dump(v.slice) == ast.dump(target.slice)
                   for v in syntax.walk(value))
    return False


def rewrite_parallel_nests(fdef: ast.FunctionDef, namespace: dict, error) -> ast.FunctionDef:
    """``fdef`` with perfectly nested T.Parallel loops merged; the other nests that
    TileLang refuses raise a LoopNestError (``error``: the kernel source's error maker,
    whose message and line the LoopNestError takes)."""
    def loop_error(message, node):
        e = error(message, node)
        return LoopNestError(e.bare_message, e.filename, e.lineno)
    nests = _Nests(namespace, loop_error)
    nests.locals = names_bound_to(fdef, namespace, (T.alloc_local,))
    return nests.visit(fdef)
