"""Names TileLang's programs bind that are plain Python here, rewritten on the kernel's
tree before anything else reads it (``source.parse_kernel``):

- ``v = T.int32()`` declares a variable and ``T.let(v, value)`` binds it (TileLang's
  alias test writes an offset so): the assignment ``v = value``. ``T.let``'s expression
  form (``T.let(v, value, body)``) stays not supported, with its error at the line.
- ``X = A_shared[:block_M, :block_K]`` names a region of a tile (a buffer region in
  TileLang): where X is bound once and used only as an operand (``T.copy(.., X)``,
  ``T.gemm(X, ..)``, ``T.clear(X)``), each use is the region itself."""
from __future__ import annotations

import ast
import copy

from tilejit import language as T
from tilejit.frontend.source import KernelSource, resolve_static
from tilejit.language.dtypes import DType


def _language_attr(node, name: str, namespace) -> bool:
    """``T.<name>`` with T the language module (``T.let`` itself is not an attribute of
    it: reading it raises the not-supported error)."""
    return isinstance(node, ast.Attribute) and node.attr == name and \
        resolve_static(node.value, namespace) is T


class _Lets(ast.NodeTransformer):
    def __init__(self, namespace, error):
        self.namespace = namespace
        self.error = error

    def visit_Call(self, node):
        if _language_attr(node.func, "let", self.namespace):
            raise self.error("T.let's expression form, T.let(v, value, body), is not built "
                             "(the statement T.let(v, value) is the assignment v = value)",
                             node)
        return self.generic_visit(node)

    def visit_Expr(self, node):
        call = node.value
        if isinstance(call, ast.Call) and _language_attr(call.func, "let", self.namespace) \
                and len(call.args) == 2 and not call.keywords \
                and isinstance(call.args[0], ast.Name):
            target = ast.Name(call.args[0].id, ast.Store())
            return ast.copy_location(ast.Assign([target], call.args[1]), node)
        return node

    def visit_Assign(self, node):
        value = node.value
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and \
                isinstance(value, ast.Call) and not value.args and not value.keywords and \
                isinstance(resolve_static(value.func, self.namespace), DType):
            # ``v = T.int32()``: a variable of that dtype, bound later (T.let or an
            # assignment); zero until then
            value.args = [ast.Constant(0)]
        return self.generic_visit(node)


_ALLOCATIONS = ("alloc_shared", "alloc_fragment", "alloc_local")


def _region_aliases(tree, namespace) -> dict:
    """{name: its region subscript} for ``X = A[s0:e0, s1:e1]`` with A a tile the kernel
    allocates, every index a slice, X bound nowhere else and used only as a bare operand
    of a call."""
    tiles = {t.id for node in ast.walk(tree) if isinstance(node, ast.Assign)
             and isinstance(node.value, ast.Call) and any(
                 _language_attr(node.value.func, a, namespace) for a in _ALLOCATIONS)
             for t in node.targets if isinstance(t, ast.Name)}
    stores: dict = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            stores[node.id] = stores.get(node.id, 0) + 1
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Subscript) \
                and isinstance(node.value.value, ast.Name) and node.value.value.id in tiles:
            index = node.value.slice
            elts = index.elts if isinstance(index, ast.Tuple) else [index]
            if all(isinstance(e, ast.Slice) for e in elts) and \
                    stores.get(node.targets[0].id) == 1:
                found[node.targets[0].id] = (node, node.value)
    operands = {id(a) for node in ast.walk(tree) if isinstance(node, ast.Call)
                for a in node.args + [k.value for k in node.keywords]}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in found and \
                isinstance(node.ctx, ast.Load) and id(node) not in operands:
            found.pop(node.id)
    return found


class _Aliases(ast.NodeTransformer):
    def __init__(self, aliases):
        self.aliases = aliases
        self.bindings = {id(stmt) for stmt, _ in aliases.values()}

    def visit_Assign(self, node):
        if id(node) in self.bindings:
            return None
        return self.generic_visit(node)

    def visit_Name(self, node):
        if node.id in self.aliases and isinstance(node.ctx, ast.Load):
            return ast.copy_location(copy.deepcopy(self.aliases[node.id][1]), node)
        return node


def _wanted(tree) -> tuple[bool, bool]:
    """(whether the kernel spells ``T.let`` or calls something with no arguments, a
    dtype's declaration among them; whether it binds a name to a sliced subscript): one
    walk, so a kernel with neither (most) costs no rewrite, on the disk-cache-hit path
    too (every decoration parses its kernel)."""
    lets = aliases = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "let" or (
                isinstance(node, ast.Call) and not node.args and not node.keywords
                and isinstance(node.func, ast.Attribute)):
            lets = True
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Subscript) and any(
                isinstance(e, ast.Slice) for e in ast.walk(node.value.slice)):
            aliases = True
    return lets, aliases


def rewrite_let_bindings(ks: KernelSource) -> None:
    lets, aliases = _wanted(ks.tree)
    if not (lets or aliases):
        return
    tree = _Lets(ks.namespace, ks.error).visit(ks.tree) if lets else ks.tree
    found = _region_aliases(tree, ks.namespace) if aliases else {}
    if found:
        tree = _Aliases(found).visit(tree)
    ks.tree = ast.fix_missing_locations(tree)
