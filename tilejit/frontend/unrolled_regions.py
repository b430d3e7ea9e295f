"""``for j in T.unroll(n):`` whose gemms (or ``T.tma_copy``) take regions that move with
``j`` is unrolled in the front end, for the GPU and the simulator alike.

TileLang's FlashMLA kernels split the head dimension into ``k`` tiles and multiply them
one by one::

    for j in T.unroll(num_k_tiles):
        T.wgmma_gemm(Q_shared[:, j * k_tile:(j + 1) * k_tile], KV_shared[:, j * k_tile:...],
                     acc_s, transpose_B=True)

A gemm's region must be known at compile time (its descriptors or fragment loads are
planned once, ``gemm_operands.py``; a TMA copy's boxes too); ``T.unroll`` says the loop
is unrolled, so each copy
of the body has its ``j``. Such a loop, its extent known at compile time (a literal, or
names of the program's and its constexprs'), its variable not assigned in the body and
no ``break``/``continue`` in it, becomes its bodies one after the other with ``j`` the
constant of each. Other ``T.unroll`` loops stay loops (``range``), as before.
"""
from __future__ import annotations

import ast
import copy

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import resolve_static

_GEMMS = (T.gemm, T.wgmma_gemm, T.tma_copy)     # operations whose regions are static
_MOST = 64          # copies of a body the front end makes at most


def _static(expr, namespace):
    try:
        value = eval(compile(syntax.fix_missing_locations(ast.Expression(copy.deepcopy(expr))),
                             "<extent>", "eval"), {"__builtins__": {}}, dict(namespace))
    except Exception:       # a run-time extent: the loop stays a loop
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class _Substitute(syntax.NodeTransformer):
    def __init__(self, name, value):
        self.name, self.value = name, value

    def visit_Name(self, node):
        if node.id == self.name and isinstance(node.ctx, ast.Load):
            return ast.copy_location(ast.Constant(self.value), node)
        return node


class _Unroll(syntax.NodeTransformer):
    def __init__(self, namespace, stored):
        self.namespace, self.stored = namespace, stored

    def visit_For(self, node):
        node = self.generic_visit(node)
        it = node.iter
        if not (isinstance(it, ast.Call) and resolve_static(it.func, self.namespace) is T.unroll
                and isinstance(node.target, ast.Name) and not node.orelse):
            return node
        var = node.target.id
        if not self._moves_a_gemm_region(node.body, var):
            return node
        bounds = [_static(a, self._known()) for a in it.args]
        if not it.args or len(it.args) > 2 or it.keywords or None in bounds:
            return node
        start, stop = (0, bounds[0]) if len(bounds) == 1 else bounds
        body = ast.Module(body=node.body, type_ignores=[])
        if stop - start > _MOST or any(
                isinstance(n, (ast.Break, ast.Continue)) or (
                    isinstance(n, ast.Name) and n.id == var and isinstance(n.ctx, ast.Store))
                for n in syntax.walk(body)):
            return node
        out = []
        for v in range(start, stop):
            for st in node.body:
                new = self.visit(_Substitute(var, v).visit(copy.deepcopy(st)))   # nested
                out.extend(new if isinstance(new, list) else [new])
        if stop > start:            # after the loop its variable holds its last value
            out.append(ast.copy_location(ast.Assign([ast.Name(var, ast.Store())],
                                                    ast.Constant(stop - 1)), node))
        return out or [ast.copy_location(ast.Pass(), node)]

    def _known(self):
        return {k: v for k, v in self.namespace.items() if k not in self.stored}

    def _moves_a_gemm_region(self, body, var) -> bool:
        for node in syntax.walk(ast.Module(body=list(body), type_ignores=[])):
            if isinstance(node, ast.Call) and resolve_static(node.func,
                                                             self.namespace) in _GEMMS:
                for arg in node.args[:3] + [k.value for k in node.keywords]:
                    if isinstance(arg, ast.Subscript) and any(
                            isinstance(n, ast.Name) and n.id == var
                            for s in syntax.walk(arg.slice) if isinstance(s, ast.Slice)
                            for n in syntax.walk(s)):
                        return True
        return False


def unroll_gemm_regions(fdef: ast.FunctionDef, namespace) -> ast.FunctionDef:
    """``fdef`` with its ``T.unroll`` loops that move a gemm's region unrolled;
    ``namespace``: the program's values and its constexprs'."""
    if not any(isinstance(n, ast.Call) and resolve_static(n.func, namespace) is T.unroll
               for n in syntax.walk(fdef)):
        return fdef
    stored = {n.id for n in syntax.walk(fdef) if isinstance(n, ast.Name)
              and isinstance(n.ctx, ast.Store)}
    return syntax.fix_missing_locations(_Unroll(namespace, stored).visit(fdef))
