"""Which names of a program are computed from given ones: assignments and loop
targets whose value (or range) reads a name already dependent, to a fixpoint. The
barrier pass asks for the names computed from the thread index, layout inference for
those computed from a T.Parallel's indices."""
from __future__ import annotations

import ast

from tilejit import syntax


def reads_any(expr, names) -> bool:
    """Whether ``expr`` reads one of ``names``."""
    return any(isinstance(n, ast.Name) and n.id in names for n in syntax.walk(expr))


def dependent_names(tree, seeds, memory=frozenset()) -> set[str]:
    """``seeds`` and the names ``tree`` computes from them, directly or through other
    such names (a loop variable of a range that reads one counts). A store into an
    element of a ``memory`` name (a shared tile the barriers order: ``S[tx] = v``) does
    not make the name one: every thread that reads one element reads the same value; a
    store into any other name's element (a thread's own local tile, a global tensor
    whose stores no barrier orders) does."""
    dependent = set(seeds)
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
            if not reads_any(source, dependent):
                continue
            for t in targets:
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and \
                        t.value.id in memory:
                    continue
                for n in syntax.walk(t):
                    if isinstance(n, ast.Name) and n.id not in dependent:
                        dependent.add(n.id)
                        changed = True
    return dependent
