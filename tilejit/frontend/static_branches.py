"""Front end: an ``if`` whose test is made of constants and of names the kernel's closure
binds and the kernel does not assign (``if op == "sum":`` with ``op`` the factory's
argument) is decided when the kernel is parsed, as TileLang's Python does when it builds
the program: the branch taken stays, the other goes (of a conditional
expression, ``a if op == "max" else b``, too). A helper that dispatches
on such a value and ends in ``else: raise ValueError(op)`` (TileLang's CPU reduce tests)
then holds no ``raise`` the kernel could reach. Tests that read anything else (a
constexpr parameter, a tensor's shape, a value the kernel computes) stay for the later
steps, and so do tests of module globals: a global may be bound again between the
kernel's definition and its first compilation, which reads it (``KernelSource.resolve``);
a closure's value is the factory call's. Lambdas (a ``T.comm_reducer``'s combiner) and
nested functions keep their tests: their parameters are their own names."""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit.frontend.source import KernelSource, assigned_names, static_truth


class _Fold(syntax.NodeTransformer):
    def __init__(self, namespace, assigned):
        self.namespace = namespace
        self.assigned = assigned

    def visit_Lambda(self, node):
        return node

    def visit_FunctionDef(self, node):
        if node is self.top:
            return self.generic_visit(node)
        return node

    def visit_If(self, node):
        node = self.generic_visit(node)
        truth = static_truth(node.test, self.namespace, self.assigned)
        if truth is None:
            return node
        kept = node.body if truth else node.orelse
        return kept or ast.copy_location(ast.Pass(), node)

    def visit_IfExp(self, node):
        node = self.generic_visit(node)
        truth = static_truth(node.test, self.namespace, self.assigned)
        if truth is None:
            return node
        return node.body if truth else node.orelse


def fold_static_branches(ks: KernelSource) -> None:
    """``ks.tree`` with its compile-time ``if`` statements decided."""
    closure = getattr(getattr(ks.func, "__code__", None), "co_freevars", ())
    if not closure or not any(isinstance(n, (ast.If, ast.IfExp))
                              for n in syntax.walk(ks.tree)):
        return
    values = {n: ks.namespace[n] for n in closure if n in ks.namespace}
    fold = _Fold(values, assigned_names(ks.tree))
    fold.top = ks.tree
    ks.tree = syntax.fix_missing_locations(fold.visit(ks.tree))
