"""0-d tensors (TileLang's ``T.Tensor((), dtype)``): a parameter read or written as
``s[()]`` holds one element. The kernel indexes it ``s[0]``; the call passes the
0-d tensor as a view of it with one dimension (``runtime/host.scalar_views``), so the
compiled kernel, the simulator and the launch see a tensor of one element, and the
caller's tensor is the one written.

``ks.scalar_tensors`` records {parameter: line of its first ``[()]``}: the call's rank
check asks that argument to be 0-d (``expected_ranks``)."""
from __future__ import annotations

import ast

from tilejit import syntax


def rewrite_scalar_indexing(ks) -> None:
    """``P[()]`` of a parameter → ``P[0]``, recorded in ``ks.scalar_tensors``."""
    params = set(ks.params) - set(ks.constexpr_params)
    for node in syntax.walk(ks.tree):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
                and node.value.id in params and isinstance(node.slice, ast.Tuple) \
                and not node.slice.elts:
            ks.scalar_tensors.setdefault(node.value.id, node.lineno)
            node.slice = ast.copy_location(ast.Constant(0), node.slice)


def has_scalar_indexing(tree) -> bool:
    """Whether any subscript of the tree is ``[()]`` (the step's cheap test)."""
    return any(isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Tuple)
               and not n.slice.elts for n in syntax.walk(tree))


__all__ = ["rewrite_scalar_indexing", "has_scalar_indexing"]
