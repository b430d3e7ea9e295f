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
nested functions keep their tests: their parameters are their own names.

The same parse also spells out what TileLang's Python would pass: a starred tuple the
closure (or a module global) holds (``T.Parallel(*shape)``, ``T.Kernel(*grid)``) as its
elements, and the keywords of the tile operations whose operands the later steps read by
position (``T.alloc_shared(shape=..., dtype=...)``, ``T.fill(buf, value=...)``,
``T.gemm(A, B, C=...)``) in their places; their ``annotations=`` is dropped."""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import KernelSource, assigned_names, resolve_static, static_truth
from tilejit.frontend.static_prologue import constant_ast

# the operations whose keywords are put in their places: {op: its parameters, in order}
_POSITIONAL = {T.alloc_shared: ("shape", "dtype"), T.alloc_fragment: ("shape", "dtype"),
               T.alloc_local: ("shape", "dtype"), T.fill: ("buffer", "value"),
               T.gemm: ("A", "B", "C")}
# the operations whose ``annotations=`` (TileLang's per-operation lowering hints) is
# dropped here: hints to TileLang's passes, the operation's result the same
_ANNOTATED = (T.fill, T.clear, T.gemm, T.atomic_add, T.atomic_max, T.atomic_min,
              T.finalize_reducer)


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


class _Spell(syntax.NodeTransformer):
    def __init__(self, namespace, assigned):
        self.namespace, self.assigned = namespace, assigned

    def visit_Call(self, node):
        node = self.generic_visit(node)
        if any(isinstance(a, ast.Starred) for a in node.args):
            args = []
            for a in node.args:
                value = self._tuple(a.value) if isinstance(a, ast.Starred) else None
                if isinstance(a, ast.Starred) and value is None:
                    return node             # a starred value not known here: as written
                args.extend([ast.copy_location(ast.Constant(v), a) for v in value]
                            if isinstance(a, ast.Starred) else [a])
            node.args = args
        if any(k.arg is None for k in node.keywords):
            keywords = []
            for k in node.keywords:
                spelt = self._keywords(k.value) if k.arg is None else [k]
                if spelt is None:
                    return node             # a splat not known here: as written
                keywords.extend(spelt)
            node.keywords = keywords
        fn = resolve_static(node.func, self.namespace)
        if fn in _ANNOTATED and any(k.arg == "annotations" for k in node.keywords):
            node.keywords = [k for k in node.keywords if k.arg != "annotations"]
        names = _POSITIONAL.get(fn)
        placed = [k for k in node.keywords if names and k.arg in names]
        if placed and len(node.args) <= len(names):
            given = dict(zip(names, node.args))
            if any(k.arg in given for k in placed):
                return node                 # given twice: the operation's own error
            given.update((k.arg, k.value) for k in placed)
            # in their places when they leave no gap (a later operand given, an earlier
            # one not: as written)
            count = next((i for i, n in enumerate(names) if n not in given), len(names))
            if all(n not in given for n in names[count:]):
                node.args = [given[n] for n in names[:count]]
                node.keywords = [k for k in node.keywords if k not in placed]
        return node

    def _keywords(self, node):
        """``**name``'s keywords, where the name (not assigned by the kernel) holds a dict
        of names to constants (``dict(num_stages=2)``), or None."""
        if not isinstance(node, ast.Name) or node.id in self.assigned:
            return None
        value = self.namespace.get(node.id)
        if not isinstance(value, dict) or not all(
                isinstance(k, str) and k.isidentifier() for k in value):
            return None
        spelt = {k: constant_ast(v) for k, v in value.items()}
        if any(v is None for v in spelt.values()):
            return None
        return [ast.copy_location(ast.keyword(k, ast.copy_location(v, node)), node)
                for k, v in spelt.items()]

    def _tuple(self, node):
        """The ints of a tuple (or list) a name not assigned by the kernel holds, or
        None."""
        if not isinstance(node, ast.Name) or node.id in self.assigned:
            return None
        value = self.namespace.get(node.id)
        if isinstance(value, (tuple, list)) and all(
                isinstance(v, int) and not isinstance(v, bool) for v in value):
            return tuple(value)
        return None


def fold_static_branches(ks: KernelSource) -> None:
    """``ks.tree`` with its compile-time ``if`` statements decided, starred tuples,
    ``**`` dicts of constants and the tile operations' keywords spelled out."""
    if any(isinstance(n, ast.Starred) for n in syntax.walk(ks.tree)) or any(
            isinstance(n, ast.Call) and n.keywords for n in syntax.walk(ks.tree)):
        spell = _Spell(ks.namespace, assigned_names(ks.tree))
        ks.tree = syntax.fix_missing_locations(spell.visit(ks.tree))
    closure = getattr(getattr(ks.func, "__code__", None), "co_freevars", ())
    if not closure or not any(isinstance(n, (ast.If, ast.IfExp))
                              for n in syntax.walk(ks.tree)):
        return
    values = {n: ks.namespace[n] for n in closure if n in ks.namespace}
    fold = _Fold(values, assigned_names(ks.tree))
    fold.top = ks.tree
    ks.tree = syntax.fix_missing_locations(fold.visit(ks.tree))


def fold_compile_time_branches(fdef: ast.FunctionDef, namespace: dict) -> ast.FunctionDef:
    """``fdef`` with the ``if`` statements whose tests read the program's globals (and
    constants) decided with their values as this compilation reads them (``if len(shape)
    == 1:`` of a module's ``shape``): the values the kernel is compiled with, so the
    branch left out is never typed, as TileLang's Python never builds it."""
    if not any(isinstance(n, (ast.If, ast.IfExp)) for n in syntax.walk(fdef)):
        return fdef
    params = {a.arg for a in fdef.args.args + fdef.args.kwonlyargs}
    fold = _Fold(namespace, assigned_names(fdef) | params)
    fold.top = fdef
    return syntax.fix_missing_locations(fold.visit(fdef))

