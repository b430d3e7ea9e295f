"""Front end: a one-index ``T.Parallel`` that indexes a tile or tensor by its index split
in two (``F[i // c, i % c]``, TileLang's fused-index form) becomes the two-index loop it
walks, so the fragment is indexed by the loop's own indices::

    for i in T.Parallel(M * N):             for i_0, i_1 in T.Parallel(M, N):
        B[i] = F[i // N, i % N]       →         B[i_0 * N + i_1] = F[i_0, i_1]

The iterations are the same (``i = i_0 * c + i_1`` over the same range, the order of a
T.Parallel not being the program's), so the simulator and the GPU run the rewritten loop
alike. Only where ``c`` and the extent are compile-time values and ``c`` divides the
extent; any other use of ``i`` reads ``i_0 * c + i_1``."""
from __future__ import annotations

import ast
import copy
import operator

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import is_call_to, resolve_static


_ARITH = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
          ast.FloorDiv: operator.floordiv}
_ARITH_TYPES = tuple(_ARITH)


def split_fused_indices(fdef: ast.FunctionDef, namespace: dict) -> ast.FunctionDef:
    if not any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.FloorDiv)
               for n in syntax.walk(fdef)):
        return fdef
    return syntax.fix_missing_locations(_Split(namespace).visit(fdef))


class _Split(syntax.NodeTransformer):
    def __init__(self, namespace):
        self.namespace = namespace
        self.count = 0

    def _static(self, node):
        """An int the expression is at compile time (constants, the namespace's names,
        ``+ - * //`` of them), or None."""
        if isinstance(node, ast.BinOp) and isinstance(node.op, _ARITH_TYPES):
            a, b = self._static(node.left), self._static(node.right)
            if a is None or b is None or (isinstance(node.op, ast.FloorDiv) and not b):
                return None
            return _ARITH[type(node.op)](a, b)
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and \
                not isinstance(node.value, bool):
            return node.value
        value = resolve_static(node, self.namespace) if isinstance(node, ast.Name) else None
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def visit_For(self, node):
        node = self.generic_visit(node)
        it = node.iter
        if not (isinstance(node.target, ast.Name) and is_call_to(it, T.Parallel, self.namespace)
                and len(it.args) == 1 and not it.keywords):
            return node
        var = node.target.id
        extent = self._static(it.args[0])
        if extent is None or any(isinstance(n, ast.Name) and n.id == var
                                 and isinstance(n.ctx, ast.Store)
                                 for s in node.body for n in syntax.walk(s)):
            return node
        divisors = {self._static(n.right) for n in syntax.walk(node)
                    if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.FloorDiv, ast.Mod))
                    and isinstance(n.left, ast.Name) and n.left.id == var}
        if len(divisors) != 1:
            return node
        c = divisors.pop()
        if not c or c <= 1 or extent % c or not self._both(node, var, c):
            return node
        hi, lo = f"{var}__tj_hi{self.count}", f"{var}__tj_lo{self.count}"
        self.count += 1
        body = [_Substitute(var, c, hi, lo).visit(copy.deepcopy(s)) for s in node.body]
        loop = ast.For(ast.Tuple([ast.Name(hi, ast.Store()), ast.Name(lo, ast.Store())],
                                 ast.Store()),
                       ast.Call(copy.deepcopy(it.func),
                                [ast.Constant(extent // c), ast.Constant(c)], []),
                       body, node.orelse, None)
        return ast.copy_location(loop, node)

    def _both(self, node, var, c) -> bool:
        """Whether a subscript of the body is indexed by both ``var // c`` and ``var % c``
        (``F[var // c, var % c]``; one of them alone, ``B[i // 2]``, is a quotient the
        layout pass reads as it is)."""
        def split(e):
            return (isinstance(e, ast.BinOp) and isinstance(e.left, ast.Name)
                    and e.left.id == var and isinstance(e.op, (ast.FloorDiv, ast.Mod))
                    and self._static(e.right) == c) and type(e.op)
        for n in syntax.walk(node):
            if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Tuple):
                if {split(e) for e in n.slice.elts} >= {ast.FloorDiv, ast.Mod}:
                    return True
        return False


class _Substitute(syntax.NodeTransformer):
    def __init__(self, var, c, hi, lo):
        self.var, self.c, self.hi, self.lo = var, c, hi, lo

    def visit_BinOp(self, node):
        if isinstance(node.left, ast.Name) and node.left.id == self.var and isinstance(
                node.op, (ast.FloorDiv, ast.Mod)):
            name = self.hi if isinstance(node.op, ast.FloorDiv) else self.lo
            return ast.copy_location(ast.Name(name, ast.Load()), node)
        return self.generic_visit(node)

    def visit_Name(self, node):
        if node.id == self.var and isinstance(node.ctx, ast.Load):
            fused = ast.BinOp(ast.BinOp(ast.Name(self.hi, ast.Load()), ast.Mult(),
                                        ast.Constant(self.c)),
                              ast.Add(), ast.Name(self.lo, ast.Load()))
            return ast.copy_location(fused, node)
        return node
