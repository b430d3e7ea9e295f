"""A ``T.Parallel`` that accumulates into fragments with only some of its indices (always
the same ones) and indexes no fragment with all of them accumulates along the others.

A KernelBench cosine loss writes ``dot[i] += P_s[i, k] * T_s[i, k]`` in
``T.Parallel(M, K)``: in TileLang the thread holding ``dot[i]`` runs every ``(i, k)``,
in order. The indices the stores leave out become serial loops around a T.Parallel over
the others, in their order, which is that meaning for the simulator and the GPU alike
(the simulator would otherwise run every ``(i, k)`` at once, and the layout inference
refuses a store a loop's other threads would repeat):

    for i, k in T.Parallel(M, K):          →     for k in range(K):
        dot[i] += P_s[i, k] * T_s[i, k]               for i in T.Parallel(M):
                                                          dot[i] += P_s[i, k] * T_s[i, k]

Only accumulations are taken: each store is ``F[i] += e`` (or ``*=``, ``|=``, ``&=``,
``^=``), ``F[i] = F[i] + e`` or ``F[i] = T.max(F[i], e)`` / ``T.min``, and nothing else in
the body reads F, so no iteration sees another's partial value and the order along k
changes only rounding. Any other store with some of the indices (``f[j] = t`` after a
read of ``f[j]``) means one thing run in order and another run at once: it stays refused
(``passes/dynamic_parallel.py``, the layout inference).

Run on the device program after ``T.serial`` became ``range`` (``rewrite.py``)."""
from __future__ import annotations

import ast
import copy

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.loop_fragments import fragment_names, fragment_subscripts, parallel_names
from tilejit.frontend.source import resolve_static, statement_lists


def serialize_accumulations(fdef: ast.FunctionDef, namespace) -> ast.FunctionDef:
    fragments = fragment_names(fdef, namespace)
    if not fragments:
        return fdef
    for block in list(statement_lists(fdef)):
        for at, stmt in enumerate(block):
            if isinstance(stmt, ast.For):
                block[at] = _serialized(stmt, fragments, namespace)
    return fdef


def _serialized(loop, fragments, namespace):
    """``loop`` with the indices its fragment stores leave out as serial loops around it,
    or ``loop`` as it is."""
    names = parallel_names(loop, namespace)
    if names is None or len(names) < 2:
        return loop
    targets = loop.target.elts if isinstance(loop.target, ast.Tuple) else [loop.target]
    stored, full = set(), False
    for sub, elts, used in fragment_subscripts(loop, fragments, names):
        used = [n for n in used if n is not None]
        full |= sorted(used) == sorted(names)
        if isinstance(sub.ctx, ast.Store):
            if len(used) != len(elts):
                return loop         # a store at an index that is not the loop's own
            stored.add(tuple(used))
    if full or len(stored) != 1:
        return loop
    if not _only_accumulations(loop.body, fragments, namespace):
        return loop
    kept = next(iter(stored))
    if not kept:
        return loop
    keep = [k for k, n in enumerate(names) if n in kept]
    inner = ast.For(ast.Tuple([copy.deepcopy(targets[k]) for k in keep], ast.Store())
                    if len(keep) > 1 else copy.deepcopy(targets[keep[0]]),
                    ast.Call(loop.iter.func, [loop.iter.args[k] for k in keep],
                             loop.iter.keywords), loop.body, [])
    new = inner
    for k in reversed([k for k in range(len(names)) if k not in keep]):
        serial = ast.Call(ast.Name("range", ast.Load()), [loop.iter.args[k]], [])
        new = ast.For(copy.deepcopy(targets[k]), serial, [new], [])
    return syntax.fix_missing_locations(ast.copy_location(new, loop))


_FOLDS = (ast.Add, ast.Mult, ast.BitOr, ast.BitAnd, ast.BitXor)


def _only_accumulations(body, fragments, namespace) -> bool:
    """Whether every fragment store of ``body`` is an accumulation of the element it
    stores and nothing else in the body reads a fragment it stores (module docstring)."""
    stores, own_reads = [], set()
    for stmt in body:
        for node in syntax.walk(stmt):
            if isinstance(node, (ast.Assign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                hits = [t for t in targets if isinstance(t, ast.Subscript) and
                        isinstance(t.value, ast.Name) and t.value.id in fragments]
                if not hits:
                    continue
                if len(targets) != 1:
                    return False
                target = hits[0]
                if isinstance(node, ast.AugAssign):
                    if not isinstance(node.op, _FOLDS):
                        return False
                    rest = [node.value]
                else:
                    rest = _folded_operands(node.value, target, namespace)
                    if rest is None:
                        return False
                    own_reads |= {id(n) for n in syntax.walk(node.value)
                                  if _same(n, target)}
                stores.append((target.value.id, rest))
    stored = {name for name, _ in stores}
    for stmt in body:
        for node in syntax.walk(stmt):
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and \
                    isinstance(node.value, ast.Name) and node.value.id in stored and \
                    id(node) not in own_reads:
                return False
    return True


def _folded_operands(value, target, namespace):
    """The other operands of ``target + e`` / ``e + target`` (``*``, ``|``, ``&``, ``^``)
    or ``T.max(target, e)`` / ``T.min`` (either order), or None."""
    if isinstance(value, ast.BinOp) and isinstance(value.op, _FOLDS):
        pair = [value.left, value.right]
    elif isinstance(value, ast.Call) and len(value.args) == 2 and not value.keywords and \
            resolve_static(value.func, namespace) in (T.max, T.min):
        pair = list(value.args)
    else:
        return None
    own = [k for k, e in enumerate(pair) if _same(e, target)]
    return [pair[1 - own[0]]] if len(own) == 1 else None


def _same(node, target) -> bool:
    return isinstance(node, ast.Subscript) and ast.dump(node.value) == ast.dump(target.value) \
        and ast.dump(node.slice) == ast.dump(target.slice)
