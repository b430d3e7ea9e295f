"""Which names of a program are computed from given ones: assignments and loop
targets whose value (or range) reads a name already dependent, to a fixpoint. The
barrier pass asks for the names computed from the thread index, layout inference for
those computed from a T.Parallel's indices."""
from __future__ import annotations

import ast

from tilejit import syntax

# a tensor's attributes that are not its elements: the same for every thread whatever a
# thread stored into its elements (``topk = index.shape[1]`` after ``index[bx, pos] = i``)
_METADATA = frozenset(("shape", "strides", "dtype", "ndim"))


def reads_any(expr, names) -> bool:
    """Whether ``expr`` reads one of ``names``."""
    return any(isinstance(n, ast.Name) and n.id in names for n in syntax.walk(expr))


def _reads(expr, bound, stored) -> bool:
    """Whether ``expr`` reads a name bound from a dependent value (``bound``), or an
    element of one a dependent store went into (``stored``): the shape, strides or
    dtype of a ``stored``-only name are not its elements."""
    metadata = {id(n.value) for n in syntax.walk(expr)
                if isinstance(n, ast.Attribute) and n.attr in _METADATA}
    return any(isinstance(n, ast.Name) and (n.id in bound or (
        n.id in stored and id(n) not in metadata)) for n in syntax.walk(expr))


_ATOMIC_PREFIX = ("atomic_", "__tj_atomic")


def _returns_per_thread(expr) -> bool:
    """Whether ``expr`` calls an atomic: its returned value (``return_prev=True``, a load)
    differs from thread to thread whatever its operands."""
    for n in syntax.walk(expr):
        if isinstance(n, ast.Call):
            name = n.func.attr if isinstance(n.func, ast.Attribute) else \
                n.func.id if isinstance(n.func, ast.Name) else ""
            if name.startswith(_ATOMIC_PREFIX):
                return True
    return False


def dependent_names(tree, seeds, memory=frozenset(), atomics=False) -> set[str]:
    """``seeds`` and the names ``tree`` computes from them, directly or through other
    such names (a loop variable of a range that reads one counts). A store into an
    element of a ``memory`` name (a shared tile the barriers order: ``S[tx] = v``) does
    not make the name one: every thread that reads one element reads the same value; a
    store into any other name's element (a thread's own local tile, a global tensor
    whose stores no barrier orders) does, of a dependent value or at a dependent index
    (``L[tx] = 5``), and then its elements are dependent, not its shape. The store's
    indices are read, not made dependent (``index[bx, pos] = v`` leaves ``bx`` alone).
    ``atomics``: a value an atomic returns is dependent too (the thread index's)."""
    bound, stored = set(seeds), set()
    changed = True
    while changed:
        changed = False
        for node in syntax.walk(tree):
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and \
                    node.value is not None:
                source = node.value
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            elif isinstance(node, ast.For):
                source, targets = node.iter, [node.target]
            else:
                continue
            value_depends = _reads(source, bound, stored) or (
                atomics and _returns_per_thread(source))
            for t in targets:
                for name, element, index in _stores(t):
                    if element and name in memory:
                        continue
                    if not (value_depends or (index is not None and
                                              _reads(index, bound, stored))):
                        continue
                    into = stored if element else bound
                    if name not in bound and name not in into:
                        into.add(name)
                        changed = True
    return bound | stored


def _stores(target) -> list[tuple[str, bool, ast.AST | None]]:
    """(name, whether an element of it is stored, the element's index) for each name an
    assignment's target binds or stores into: ``x``, each of ``a, b``, the tensor of
    ``A[i, j]`` (``i`` and ``j`` are read, not bound)."""
    if isinstance(target, ast.Name):
        return [(target.id, False, None)]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [s for e in target.elts for s in _stores(e)]
    if isinstance(target, ast.Starred):
        return _stores(target.value)
    if isinstance(target, ast.Subscript):
        return [(name, True, target.slice if index is None else
                 ast.Tuple([index, target.slice], ast.Load()))
                for name, _, index in _stores(target.value)]
    if isinstance(target, ast.Attribute):
        return [(name, True, index) for name, _, index in _stores(target.value)]
    return []
