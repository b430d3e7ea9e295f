"""Front end: an ``if`` whose test is made of constants and of names the kernel's globals
and closure bind and the kernel does not assign (``if op == "sum":`` with ``op`` the
factory's argument) is decided when the kernel is parsed, as TileLang's Python does when
it builds the program: the branch taken stays, the other goes (of a conditional
expression, ``a if op == "max" else b``, too). A helper that dispatches
on such a value and ends in ``else: raise ValueError(op)`` (TileLang's CPU reduce tests)
then holds no ``raise`` the kernel could reach. Tests that read anything else (a
constexpr parameter, a tensor's shape, a value the kernel computes) stay for the later
steps."""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit.frontend.source import KernelSource, assigned_names, static_truth


class _Fold(syntax.NodeTransformer):
    def __init__(self, namespace, assigned):
        self.namespace = namespace
        self.assigned = assigned

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
    if not any(isinstance(n, (ast.If, ast.IfExp)) for n in syntax.walk(ks.tree)):
        return
    ks.tree = syntax.fix_missing_locations(
        _Fold(ks.namespace, assigned_names(ks.tree)).visit(ks.tree))
