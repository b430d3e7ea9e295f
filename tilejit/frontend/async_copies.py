"""``T.ptx_cp_async(T.access_ptr(D[i..], "w", n), T.access_ptr(S[j..], "r", n), n,
predicate)`` → ``__tj_cp_async(D, (i..), S, (j..), n, predicate)``, for the GPU and the
simulator alike (``language/cp_async.py`` says what it means).

The operands must be ``T.access_ptr`` of one element each (every dimension indexed): the
destination a shared tile's, the source a global tensor's; ``n`` a compile-time count
(the bytes, ``n`` times the element's size, are checked where the types are known). A
``T.access_ptr`` anywhere else is a CompileError: it has no other use here.
"""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import KernelSource, resolve_static
from tilejit.ir.markers import CP_ASYNC


def _args(call, names):
    values = dict(zip(names, call.args))
    values.update({k.arg: k.value for k in call.keywords})
    return [values.get(n) for n in names]


class _Copies(syntax.NodeTransformer):
    def __init__(self, ks: KernelSource):
        self.ks = ks

    def visit_Call(self, node):
        fn = resolve_static(node.func, self.ks.namespace)
        if fn is T.access_ptr:
            raise self.ks.error("T.access_ptr(A[i, j], mode, ...) is supported as an operand of "
                                "T.ptx_cp_async only", node)
        if fn is not T.ptx_cp_async:
            return self.generic_visit(node)
        dst, src, n, predicate = _args(node, ["dst_access_ptr", "src_access_ptr", "num_elems",
                                              "predicate"])
        if dst is None or src is None or n is None:
            raise self.ks.error("T.ptx_cp_async(dst, src, num_elems, predicate=None): the "
                                "destination and source T.access_ptr and the element count",
                                node)
        d_base, d_index = self._element(dst, "destination")
        s_base, s_index = self._element(src, "source")
        n = self._count(self.visit(n))
        predicate = ast.Constant(True) if predicate is None or (
            isinstance(predicate, ast.Constant) and predicate.value is None) \
            else self.visit(predicate)
        return ast.copy_location(ast.Call(ast.Name(CP_ASYNC, ast.Load()), [
            d_base, d_index, s_base, s_index, n, predicate], []), node)

    def _count(self, n):
        """The element count as a literal where the namespace gives it (a closure's
        ``n``): the copy's size is the instruction's."""
        try:
            value = eval(compile(ast.Expression(n), "<num_elems>", "eval"),  # noqa: S307
                         {"__builtins__": {}}, dict(self.ks.namespace))
        except Exception:       # a name of the kernel's own: typing says what it needs
            return n
        if isinstance(value, int) and not isinstance(value, bool):
            return ast.copy_location(ast.Constant(value), n)
        return n

    def _element(self, ptr, what):
        if not (isinstance(ptr, ast.Call) and resolve_static(
                ptr.func, self.ks.namespace) is T.access_ptr and ptr.args):
            raise self.ks.error(f"T.ptx_cp_async: the {what} must be T.access_ptr(A[i, j], "
                                f"mode, ...) of one element, got `{ast.unparse(ptr)}`", ptr)
        base = ptr.args[0]
        extra = [k.arg for k in ptr.keywords if k.arg in ("offset", "ignore_last_ndim")
                 and not (isinstance(k.value, ast.Constant) and k.value.value == 0)]
        if extra:
            raise self.ks.error(f"T.access_ptr: {extra[0]}= is not supported; index the "
                                f"element itself", ptr)
        if not (isinstance(base, ast.Subscript) and isinstance(base.value, ast.Name)):
            raise self.ks.error(f"T.ptx_cp_async: the {what} must name one element (A[i, j]), "
                                f"got `{ast.unparse(base)}`", ptr)
        index = base.slice.elts if isinstance(base.slice, ast.Tuple) else [base.slice]
        if any(isinstance(i, ast.Slice) for i in index):
            raise self.ks.error(f"T.ptx_cp_async: the {what} must name one element (A[i, j]): "
                                f"index every dimension, got `{ast.unparse(base)}`", ptr)
        return (ast.Name(base.value.id, ast.Load()),
                ast.Tuple([self.visit(i) for i in index], ast.Load()))


def rewrite_async_copies(fdef: ast.FunctionDef, ks: KernelSource) -> ast.FunctionDef:
    if not any(isinstance(n, ast.Call) and resolve_static(n.func, ks.namespace) in (
            T.ptx_cp_async, T.access_ptr) for n in syntax.walk(fdef)):
        return fdef
    return _Copies(ks).visit(fdef)
