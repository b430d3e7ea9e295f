"""TileLang's explicit TMA store, rewritten on the kernel's tree when it is parsed
(``source.parse_kernel``, after macros and helpers are inlined):

- ``T.tma_copy(S, C[i, j])`` without a ``barrier`` (a store: shared tile → tensor; TileLang
  issues the TMA store and commits its group) is ``T.copy(S, C[i, j])``, which tilejit
  stores through TMA where it qualifies (``passes/tma_store.py``: a whole shared tile,
  sm_90+), waiting for the store's reads of ``S`` before ``S`` is written again and
  before the kernel ends, and with ordinary stores otherwise;
- ``T.tma_store_arrive()`` and ``T.tma_store_wait()`` (commit the stores, wait until
  their shared tiles are read) are statements with nothing left to do: taken out.

A ``T.tma_copy`` from a tensor (a load: its ``barrier`` required) stays as it is
(``passes/warp_roles.py``)."""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import KernelSource, resolve_static

_DONE_BY_THE_COPY = ("tma_store_arrive", "tma_store_wait")


class _Stores(syntax.NodeTransformer):
    def __init__(self, ks: KernelSource):
        self.ks = ks
        # the kernel's shared tiles: a store's source is one (a load without a barrier
        # stays, for warp_roles.py's error)
        self.shared = {t.id for n in syntax.walk(ks.tree) if isinstance(n, ast.Assign)
                       and isinstance(n.value, ast.Call)
                       and resolve_static(n.value.func, ks.namespace) is T.alloc_shared
                       for t in n.targets if isinstance(t, ast.Name)}

    def _fn(self, node):
        return resolve_static(node.func, self.ks.namespace) if isinstance(node, ast.Call) \
            else None

    def visit_Expr(self, node):
        call = node.value
        fn = self._fn(call)
        if fn is not None and getattr(T, getattr(fn, "__name__", ""), None) is fn and \
                fn.__name__ in _DONE_BY_THE_COPY:
            allowed = ("count", "read") if fn.__name__ == "tma_store_wait" else ()
            if len(call.args) > len(allowed) or any(k.arg not in allowed
                                                   for k in call.keywords):
                raise self.ks.error(f"T.{fn.__name__}({', '.join(allowed)}) takes "
                                    f"{'no arguments' if not allowed else 'these arguments'}",
                                    node)
            return ast.copy_location(ast.Pass(), node)
        source = call.args[0] if isinstance(call, ast.Call) and call.args else None
        if isinstance(source, ast.Subscript):
            source = source.value
        if fn is T.tma_copy and not any(k.arg == "barrier" for k in call.keywords) \
                and len(call.args) == 2 and isinstance(source, ast.Name) \
                and source.id in self.shared:
            if any(k.arg not in ("eviction_policy", "annotations") for k in call.keywords):
                raise self.ks.error("T.tma_copy(src, dst): a store takes no other operand "
                                    "than its eviction_policy / annotations hints", node)
            copy = ast.Attribute(call.func.value, "copy", ast.Load()) \
                if isinstance(call.func, ast.Attribute) else None
            if copy is None:
                return node
            return ast.copy_location(ast.Expr(ast.Call(copy, list(call.args), [])), node)
        return self.generic_visit(node)


def rewrite_tma_store_forms(ks: KernelSource) -> None:
    """``T.tma_copy`` stores made ``T.copy``; ``T.tma_store_arrive/wait()`` taken out."""
    ks.tree = syntax.fix_missing_locations(_Stores(ks).visit(ks.tree))
