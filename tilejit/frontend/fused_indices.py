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
from tilejit.frontend.source import FRAGMENT_ALLOCATIONS, is_call_to, names_bound_to, resolve_static


_ARITH = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
          ast.FloorDiv: operator.floordiv}
_ARITH_TYPES = tuple(_ARITH)


def split_fused_indices(fdef: ast.FunctionDef, namespace: dict) -> ast.FunctionDef:
    if not any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.FloorDiv)
               for n in syntax.walk(fdef)):
        return fdef
    # a name the kernel binds itself is not the namespace's: a local `W = 16` is not the
    # global `W`, so neither an extent nor a divisor read through it is compile-time here
    stored = {n.id for n in syntax.walk(fdef) if isinstance(n, ast.Name)
              and isinstance(n.ctx, ast.Store)}
    fragments = names_bound_to(fdef, namespace, FRAGMENT_ALLOCATIONS)
    return syntax.fix_missing_locations(_Split(namespace, stored, fragments).visit(fdef))




class _Split(syntax.NodeTransformer):
    def __init__(self, namespace, stored=(), fragments=()):
        self.namespace = namespace
        self.static = {k: v for k, v in namespace.items() if k not in stored}
        self.fragments = fragments
        self.count = 0

    def _static(self, node):
        """An int the expression is at compile time (constants, the namespace's names
        the kernel does not bind itself, ``+ - * //`` of them), or None."""
        if isinstance(node, ast.BinOp) and isinstance(node.op, _ARITH_TYPES):
            a, b = self._static(node.left), self._static(node.right)
            if a is None or b is None or (isinstance(node.op, ast.FloorDiv) and not b):
                return None
            return _ARITH[type(node.op)](a, b)
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and \
                not isinstance(node.value, bool):
            return node.value
        value = resolve_static(node, self.static) if isinstance(node, ast.Name) else None
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def visit_For(self, node):
        node = self.generic_visit(node)
        it = node.iter
        if isinstance(node.target, ast.Tuple) and is_call_to(it, T.Parallel, self.namespace):
            return self._refolded(node)
        if not (isinstance(node.target, ast.Name) and is_call_to(it, T.Parallel, self.namespace)
                and len(it.args) == 1 and not it.keywords):
            return node
        var = node.target.id
        extent = self._static(it.args[0])
        if extent is None or any(isinstance(n, ast.Name) and n.id == var
                                 and isinstance(n.ctx, ast.Store)
                                 for s in node.body for n in syntax.walk(s)):
            return node
        c = self._divisor(node, var)
        if not c or c <= 1 or extent % c or not self._both(node, var, c):
            return node
        hi, lo = self._names(var)
        body = [_Substitute(var, c, hi, lo).visit(copy.deepcopy(s)) for s in node.body]
        return _split_loop(node, hi, lo, extent // c, c, body)

    def _divisor(self, tree, var):
        """The one compile-time ``c`` the tree divides ``var`` by (``var // c``, ``var %
        c``), or None (none, several, or one not known at compile time)."""
        divisors = {self._static(n.right) for n in syntax.walk(tree)
                    if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.FloorDiv, ast.Mod))
                    and isinstance(n.left, ast.Name) and n.left.id == var}
        return divisors.pop() if len(divisors) == 1 else None

    def _names(self, var):
        self.count += 1
        return f"{var}__tj_hi{self.count - 1}", f"{var}__tj_lo{self.count - 1}"

    def _refolded(self, node):
        """``for i, j in T.Parallel(M, N)`` whose body opens with ``idx = i * N + j`` and
        indexes a tile by ``idx // c`` and ``idx % c`` (TileLang's fused fragment index:
        ``F[idx // 32, idx % 32]`` of a fragment of M * N / 32 rows): the loop over that
        tile's indices, ``idx``, ``i`` and ``j`` computed from them::

            for i__tj_hi, i__tj_lo in T.Parallel(M * N // c, c):
                idx = i__tj_hi * c + i__tj_lo
                i, j = idx // N, idx % N
                ... F[i__tj_hi, i__tj_lo] ...

        Only where ``F`` is a fragment (a shared tile or a tensor is read at any index as
        it is) and no fragment is indexed by ``i``, ``j`` or ``idx`` other than split: one
        laid out over the loop as written (``G[i, j]``, ``G[idx]``) is not over ``F``'s,
        so the loop stays, and the error names the loop the kernel has, not this one.
        """
        it = node.iter
        names = [t.id for t in node.target.elts if isinstance(t, ast.Name)]
        if len(names) != 2 or len(names) != len(node.target.elts) or len(it.args) != 2 or \
                it.keywords or not node.body:
            return node
        first = node.body[0]
        extents = [self._static(a) for a in it.args]
        if None in extents or not (isinstance(first, ast.Assign) and len(first.targets) == 1
                                   and isinstance(first.targets[0], ast.Name)):
            return node
        fused = first.targets[0].id
        i, j = names
        n = extents[1]
        if fused in names or not self._row_major(first.value, i, j, n):
            return node
        rest = ast.Module(node.body[1:], [])
        if any(isinstance(x, ast.Name) and x.id in (fused, i, j) and
               not isinstance(x.ctx, ast.Load) for x in syntax.walk(rest)):
            return node
        c = self._divisor(rest, fused)
        total = extents[0] * n
        if not c or c <= 1 or total % c or not self._both(rest, fused, c, self.fragments):
            return node
        if any(isinstance(x, ast.Subscript) and isinstance(x.value, ast.Name)
               and x.value.id in self.fragments and any(
                   isinstance(y, ast.Name) and y.id in (i, j, fused) for y in syntax.walk(
                       _SplitOnly(fused, "", "").visit(copy.deepcopy(x.slice))))
               for x in syntax.walk(rest)):
            return node
        hi, lo = self._names(i)
        split = _Substitute(fused, c, hi, lo)
        body = [ast.Assign([ast.Name(fused, ast.Store())], split.visit_Name(
                    ast.Name(fused, ast.Load()))),
                ast.Assign([ast.Name(i, ast.Store())], ast.BinOp(
                    ast.Name(fused, ast.Load()), ast.FloorDiv(), ast.Constant(n))),
                ast.Assign([ast.Name(j, ast.Store())], ast.BinOp(
                    ast.Name(fused, ast.Load()), ast.Mod(), ast.Constant(n)))]
        body = [ast.copy_location(a, first) for a in body]
        body += [_SplitOnly(fused, hi, lo).visit(s) for s in rest.body]
        return _split_loop(node, hi, lo, total // c, c, body)

    def _row_major(self, value, i, j, n) -> bool:
        """Whether ``value`` is ``i * n + j`` (or ``j + i * n``, ``n * i + j``)."""
        if not (isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add)):
            return False
        for prod, last in ((value.left, value.right), (value.right, value.left)):
            if isinstance(last, ast.Name) and last.id == j and isinstance(prod, ast.BinOp) \
                    and isinstance(prod.op, ast.Mult):
                for a, b in ((prod.left, prod.right), (prod.right, prod.left)):
                    if isinstance(a, ast.Name) and a.id == i and self._static(b) == n:
                        return True
        return False

    def _both(self, node, var, c, tiles=None) -> bool:
        """Whether a subscript of the body is indexed by both ``var // c`` and ``var % c``
        (``F[var // c, var % c]``; one of them alone, ``B[i // 2]``, is a quotient the
        layout pass reads as it is); with ``tiles``, a subscript of one of those names."""
        def split(e):
            return (isinstance(e, ast.BinOp) and isinstance(e.left, ast.Name)
                    and e.left.id == var and isinstance(e.op, (ast.FloorDiv, ast.Mod))
                    and self._static(e.right) == c) and type(e.op)
        for n in syntax.walk(node):
            if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Tuple) and (
                    tiles is None or isinstance(n.value, ast.Name) and n.value.id in tiles):
                if {split(e) for e in n.slice.elts} >= {ast.FloorDiv, ast.Mod}:
                    return True
        return False


def _split_loop(node, hi, lo, rows, c, body):
    """``for hi, lo in T.Parallel(rows, c): body`` in the place of the loop ``node``."""
    loop = ast.For(ast.Tuple([ast.Name(hi, ast.Store()), ast.Name(lo, ast.Store())],
                             ast.Store()),
                   ast.Call(copy.deepcopy(node.iter.func),
                            [ast.Constant(rows), ast.Constant(c)], []),
                   body, node.orelse, None)
    return ast.copy_location(loop, node)


class _SplitOnly(syntax.NodeTransformer):
    """``var // c`` and ``var % c`` as the two indices; ``var`` itself stays (bound)."""

    def __init__(self, var, hi, lo):
        self.var, self.hi, self.lo = var, hi, lo

    def visit_BinOp(self, node):
        if isinstance(node.left, ast.Name) and node.left.id == self.var and isinstance(
                node.op, (ast.FloorDiv, ast.Mod)):
            name = self.hi if isinstance(node.op, ast.FloorDiv) else self.lo
            return ast.copy_location(ast.Name(name, ast.Load()), node)
        return self.generic_visit(node)


class _Substitute(_SplitOnly):
    """``_SplitOnly``'s split, and ``var`` itself read as ``hi * c + lo``."""

    def __init__(self, var, c, hi, lo):
        super().__init__(var, hi, lo)
        self.c = c

    def visit_Name(self, node):
        if node.id == self.var and isinstance(node.ctx, ast.Load):
            fused = ast.BinOp(ast.BinOp(ast.Name(self.hi, ast.Load()), ast.Mult(),
                                        ast.Constant(self.c)),
                              ast.Add(), ast.Name(self.lo, ast.Load()))
            return ast.copy_location(fused, node)
        return node
