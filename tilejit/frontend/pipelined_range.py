"""``T.Pipelined(start, stop, num_stages=...)`` (TileLang's signature: ``start, stop=None,
num_stages=0, order=None, stage=None, sync=None, group=None, annotations=None``) as the
passes take it: a loop from 0.

    for i in T.Pipelined(a, b, num_stages=2):    __tj_start0 = a
        body(i)                              →   for i in T.Pipelined(b - __tj_start0,
                                                                      num_stages=2):
                                                     body(i + __tj_start0)

The start is evaluated once, before the loop, as Python evaluates ``range(a, b)``; each
read of the loop variable in the body reads ``i + start``. With one positional argument
(``T.Pipelined(n, ...)``) the loop is left as written. A body that assigns the loop
variable is a compile error: the rewrite would change what it reads.
"""
from __future__ import annotations

import ast
import copy

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import resolve_static

_NAMES = ("start", "stop", "num_stages", "order", "stage", "sync", "group", "annotations")


class _ShiftReads(syntax.NodeTransformer):
    def __init__(self, name: str, start: ast.expr):
        self.name, self.start = name, start

    def visit_Name(self, node):
        if node.id == self.name and isinstance(node.ctx, ast.Load):
            return ast.copy_location(
                ast.BinOp(ast.Name(self.name, ast.Load()), ast.Add(), copy.deepcopy(self.start)),
                node)
        return node


class _PipelinedRanges(syntax.NodeTransformer):
    def __init__(self, namespace: dict, error):
        self.namespace, self.error = namespace, error
        self.count = 0

    def visit_For(self, node):
        node = self.generic_visit(node)
        it = node.iter
        if not (isinstance(it, ast.Call)
                and resolve_static(it.func, self.namespace) is T.Pipelined):
            return node
        args = dict(zip(_NAMES, it.args))
        for k in it.keywords:
            if k.arg is None:
                raise self.error("T.Pipelined(..., **options): the options must be known at "
                                 "compile time (a dict of constants the program's closure or "
                                 "globals hold, not one the kernel builds)", node)
            if k.arg in args or k.arg not in _NAMES:
                raise self.error(f"T.Pipelined: {k.arg}= given twice or unknown; it takes "
                                 f"({', '.join(_NAMES)})", node)
            args[k.arg] = k.value
        if "start" not in args:
            raise self.error("T.Pipelined(n, num_stages=...) needs the trip count", node)
        stop = args.pop("stop", None)
        start = args.pop("start")
        keywords = [ast.keyword(k, v) for k, v in args.items()]
        if stop is None or (isinstance(stop, ast.Constant) and stop.value is None):
            it.args, it.keywords = [start], keywords
            return node
        if not isinstance(node.target, ast.Name):
            raise self.error("T.Pipelined(start, stop): the loop variable must be one name",
                             node)
        var = node.target.id
        if any(isinstance(n, ast.Name) and n.id == var and isinstance(n.ctx, ast.Store)
               for s in node.body for n in syntax.walk(s)):
            raise self.error(f"T.Pipelined(start, stop): the body assigns the loop variable "
                             f"{var!r}", node)
        prelude = []
        if not isinstance(start, ast.Constant):
            name = f"__tj_start{self.count}"
            self.count += 1
            prelude.append(ast.copy_location(
                ast.Assign([ast.Name(name, ast.Store())], start), node))
            start = ast.Name(name, ast.Load())
        trips = ast.BinOp(stop, ast.Sub(), copy.deepcopy(start))
        it.args, it.keywords = [trips], keywords
        shift = _ShiftReads(var, start)
        node.body = [shift.visit(s) for s in node.body]
        return prelude + [node]


def rewrite_pipelined_ranges(fdef: ast.FunctionDef, namespace: dict, error) -> ast.FunctionDef:
    """Every ``T.Pipelined`` loop with a start and a stop as a loop from 0."""
    out = _PipelinedRanges(namespace, error).visit(fdef)
    syntax.fix_missing_locations(out)
    return out
