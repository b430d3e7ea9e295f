"""TVM's parallel loop, ``for i in T.parallel(n)``, which TileLang's programs write as
well as ``T.Parallel``: TileLang's layout inference takes both as parallel loops (a
perfect nest of them as one loop of their extents), so tilejit makes it a ``T.Parallel``
loop. With a start, ``for i in T.parallel(a, b)`` becomes ``for i' in T.Parallel(b -
a)`` with ``i = i' + a`` first in its body."""
from __future__ import annotations

import ast
import itertools

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import KernelSource, resolve_static
from tilejit.ir.markers import LANGUAGE

_names = itertools.count()


def rewrite_tir_parallel(ks: KernelSource) -> None:
    ks.tree = syntax.fix_missing_locations(_Loops(ks).visit(ks.tree))


class _Loops(syntax.NodeTransformer):
    def __init__(self, ks):
        self.ks = ks

    def visit_For(self, node):
        node = self.generic_visit(node)
        it = node.iter
        if not (isinstance(it, ast.Call) and
                resolve_static(it.func, self.ks.namespace) is T.parallel):
            return node
        args = list(it.args)
        for k in it.keywords:
            if k.arg == "stop" and len(args) == 1:
                args.append(k.value)
            elif k.arg == "start" and not args:
                args.append(k.value)
            elif k.arg != "annotations":
                raise self.ks.error(f"T.parallel(): unknown or misplaced keyword {k.arg}= "
                                    f"(it takes start, stop and annotations=)", it)
        if not 1 <= len(args) <= 2 or node.orelse or not isinstance(node.target, ast.Name):
            raise self.ks.error("T.parallel(stop) or T.parallel(start, stop) loops over one "
                                "variable (`for i in T.parallel(n):`)", node)
        self.ks.namespace.setdefault(LANGUAGE, T)
        loop = ast.Attribute(ast.Name(LANGUAGE, ast.Load()), "Parallel", ast.Load())
        start = args[0] if len(args) == 2 else None
        if start is not None and isinstance(start, ast.Constant) and start.value == 0:
            start = None
        if start is None:
            node.iter = ast.copy_location(ast.Call(loop, [args[-1]], []), it)
            return node
        inner = f"__tj_parallel{next(_names)}"
        extent = ast.BinOp(args[1], ast.Sub(), start)
        node.iter = ast.copy_location(ast.Call(loop, [extent], []), it)
        first = ast.Assign([ast.Name(node.target.id, ast.Store())],
                           ast.BinOp(ast.Name(inner, ast.Load()), ast.Add(), start))
        node.target = ast.copy_location(ast.Name(inner, ast.Store()), node.target)
        node.body = [ast.copy_location(first, node.body[0])] + node.body
        return node
