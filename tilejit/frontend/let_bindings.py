"""Names TileLang's programs bind that are plain Python here, rewritten on the kernel's
tree before anything else reads it (``source.parse_kernel``):

- ``a, b = T.alloc_var(T.int), T.alloc_var(T.int)`` declares each name on its own.
- ``v = T.int32()`` declares a variable and ``T.let(v, value)`` binds it (TileLang's
  alias test writes an offset so): the assignment ``v = value``. ``T.let``'s expression
  form (``T.let(v, value, body)``) stays not supported, with its error at the line.
- ``X = A_shared[:block_M, :block_K]`` names a region of a tile (a buffer region in
  TileLang): where X is bound once and used only as an operand (``T.copy(.., X)``,
  ``T.gemm(X, ..)``, ``T.clear(X)``), each use is the region itself. ``O_shared =
  Q_shared`` (TileLang's MLA kernels reuse a tile's bytes under another name), both
  bound once: each use of O_shared is Q_shared.
- ``scan = T.cumsum if op == "cumsum" else T.cummax`` (the test made of compile-time
  names) or ``scan = T.cumsum`` names a function of the language: where every binding
  of the name names the same function, each use is that function.
- ``T.__ldg(x[i])`` / ``T.__ldg(x, i)`` (CUDA's load through the read-only data cache)
  is the load ``x[i]`` (``rewrite_ldg``, after macros and helpers are inlined): LLVM
  already emits ``ld.global.nc`` where a tensor is read-only and not aliased, and
  TileLang itself falls back to a plain load off CUDA."""
from __future__ import annotations

import ast
import copy

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import KernelSource, assigned_names, resolve_static, static_truth
from tilejit.language.dtypes import DType


def _language_attr(node, name: str, namespace) -> bool:
    """``T.<name>`` with T the language module (``T.let`` itself is not an attribute of
    it: reading it raises the not-supported error)."""
    return isinstance(node, ast.Attribute) and node.attr == name and \
        resolve_static(node.value, namespace) is T


class _Lets(syntax.NodeTransformer):
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
            value = self.visit(call.args[1])
            return ast.copy_location(ast.Assign([target], value), node)
        return self.generic_visit(node)

    def visit_Assign(self, node):
        value = node.value
        split = _split_allocations(node, self.namespace)
        if split is not None:
            return [self.visit_Assign(one) for one in split]
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and \
                isinstance(value, ast.Call) and not value.args and not value.keywords and \
                isinstance(resolve_static(value.func, self.namespace), DType):
            # ``v = T.int32()``: a variable of that dtype, bound later (T.let or an
            # assignment); zero until then
            value.args = [ast.Constant(0)]
        return self.generic_visit(node)


_ALLOCATIONS = ("alloc_shared", "alloc_fragment", "alloc_local")


def _split_allocations(node, namespace):
    """``a, b = T.alloc_var(T.int), T.alloc_var(T.int)`` (TileLang's issue 1008): a tuple
    assignment with an allocation among its values, one assignment per name (a buffer
    the kernel declares is bound by its own statement), or None. The values must not
    read the names assigned (``a, b = b, a`` is not a declaration)."""
    if len(node.targets) != 1 or not isinstance(node.targets[0], (ast.Tuple, ast.List)) or \
            not isinstance(node.value, (ast.Tuple, ast.List)):
        return None
    names, values = node.targets[0].elts, node.value.elts
    if not any(isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute)
               and v.func.attr.startswith("alloc_")
               and _language_attr(v.func, v.func.attr, namespace) for v in values):
        return None
    read = {n.id for v in values for n in syntax.walk(v) if isinstance(n, ast.Name)}
    if len(names) != len(values) or not all(isinstance(n, ast.Name) for n in names) or \
            len({n.id for n in names}) != len(names) or read & {n.id for n in names}:
        return None
    return [ast.copy_location(ast.Assign([n], v), node) for n, v in zip(names, values)]


def _region_aliases(tree, namespace) -> dict:
    """{name: its region subscript} for ``X = A[s0:e0, s1:e1]`` with A a tile the kernel
    allocates, every index a slice, X bound nowhere else and used only as a bare operand
    of a call; {name: the tile's name} for ``X = A``, both bound once. A region of a
    tensor parameter (``dst = Dst[0:2]``, then ``T.atomic_addx2(dst, ...)``) is one too."""
    tiles = {t.id for node in syntax.walk(tree) if isinstance(node, ast.Assign)
             and isinstance(node.value, ast.Call) and any(
                 _language_attr(node.value.func, a, namespace) for a in _ALLOCATIONS)
             for t in node.targets if isinstance(t, ast.Name)}
    params = {a.arg for a in tree.args.args} if isinstance(tree, ast.FunctionDef) else set()
    stores: dict = {}
    for node in syntax.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            stores[node.id] = stores.get(node.id, 0) + 1
    found, whole = {}, {}
    for body in _bodies(tree):          # X = Y after Y's allocation, in the same block
        allocated = set()
        for node in body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                    isinstance(node.targets[0], ast.Name):
                if node.targets[0].id in tiles:
                    allocated.add(node.targets[0].id)
                elif isinstance(node.value, ast.Name) and node.value.id in allocated and \
                        stores.get(node.value.id) == 1 and stores.get(node.targets[0].id) == 1:
                    whole[node.targets[0].id] = (node, node.value)   # O_shared = Q_shared
    for node in syntax.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Subscript) \
                and isinstance(node.value.value, ast.Name) and \
                node.value.value.id in tiles | params:
            index = node.value.slice
            elts = index.elts if isinstance(index, ast.Tuple) else [index]
            tile = node.value.value.id in tiles
            if (all(isinstance(e, ast.Slice) for e in elts) if tile else
                    any(isinstance(e, ast.Slice) for e in elts)) and \
                    stores.get(node.targets[0].id) == 1 and \
                    (tile or stores.get(node.value.value.id, 0) == 0):
                found[node.targets[0].id] = (node, node.value)
    operands = {id(a) for node in syntax.walk(tree) if isinstance(node, ast.Call)
                for a in node.args + [k.value for k in node.keywords]}
    for node in syntax.walk(tree):
        if isinstance(node, ast.Name) and node.id in found and \
                isinstance(node.ctx, ast.Load) and id(node) not in operands:
            found.pop(node.id)
    return {**found, **whole}


def _bodies(tree):
    """Every block of statements in ``tree``."""
    for node in syntax.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                yield block


class _Aliases(syntax.NodeTransformer):
    def __init__(self, aliases):
        self.aliases = aliases
        self.bindings = {id(stmt) for stmt, _ in aliases.values()}

    def visit_Assign(self, node):
        if id(node) in self.bindings:
            return ast.copy_location(ast.Pass(), node)
        return self.generic_visit(node)

    def visit_Name(self, node):
        if node.id in self.aliases and isinstance(node.ctx, ast.Load):
            return ast.copy_location(copy.deepcopy(self.aliases[node.id][1]), node)
        return node


def _language_function(node, namespace, assigned):
    """The expression of the language function ``node`` names (through conditional
    expressions with compile-time tests), or None."""
    if isinstance(node, ast.IfExp):
        truth = static_truth(node.test, namespace, assigned)
        if truth is None:
            return None
        return _language_function(node.body if truth else node.orelse, namespace, assigned)
    if not isinstance(node, (ast.Attribute, ast.Name)):
        return None
    value = resolve_static(node, namespace)
    if callable(value) and getattr(value, "__module__", "").startswith("tilejit.language") \
            and not isinstance(value, type) and getattr(T, getattr(value, "__name__", ""),
                                                        None) is value:
        return node
    return None


def _function_aliases(tree, namespace) -> dict:
    """{name: (its bindings, the function's expression)} for a name bound only to one
    function of the language (every binding a plain ``name = <expr>``)."""
    assigned = assigned_names(tree)
    bindings: dict = {}
    stores: dict = {}
    for node in syntax.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name):
            bindings.setdefault(node.targets[0].id, []).append(node)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            stores[node.id] = stores.get(node.id, 0) + 1
    found = {}
    for name, nodes in bindings.items():
        # every store of the name one of these bindings (no loop target, tuple or
        # augmented assignment besides)
        if stores.get(name) != len(nodes):
            continue
        exprs = [_language_function(n.value, namespace, assigned) for n in nodes]
        if any(e is None for e in exprs):
            continue
        if len({id(resolve_static(e, namespace)) for e in exprs}) == 1:
            found[name] = (nodes, exprs[0])
    return found


class _FunctionAliases(syntax.NodeTransformer):
    def __init__(self, aliases):
        self.aliases = aliases
        self.bindings = {id(n) for nodes, _ in aliases.values() for n in nodes}

    def visit_Assign(self, node):
        if id(node) in self.bindings:
            return ast.copy_location(ast.Pass(), node)
        return self.generic_visit(node)

    def visit_Name(self, node):
        if node.id in self.aliases and isinstance(node.ctx, ast.Load):
            return ast.copy_location(copy.deepcopy(self.aliases[node.id][1]), node)
        return node


def _wanted(tree) -> tuple[bool, bool]:
    """(whether the kernel spells ``T.let``, calls something with no arguments (a
    dtype's declaration among them) or assigns a tuple to a tuple; whether it binds a
    name to a sliced subscript): one walk, so a kernel with neither (most) costs no
    rewrite, on the disk-cache-hit path too (every decoration parses its kernel)."""
    lets = aliases = False
    for node in syntax.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "let" or (
                isinstance(node, ast.Call) and not node.args and not node.keywords
                and isinstance(node.func, ast.Attribute)):
            lets = True
        elif isinstance(node, ast.Assign) and isinstance(node.value, (ast.Tuple, ast.List)) \
                and isinstance(node.targets[0], (ast.Tuple, ast.List)):
            lets = True             # perhaps allocations, one per name (_split_allocations)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Subscript) and any(
                isinstance(e, ast.Slice) for e in syntax.walk(node.value.slice)):
            aliases = True
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Name):
            aliases = True          # perhaps a tile under a second name
    return lets, aliases


def _binds_functions(tree, namespace) -> bool:
    """Whether some assignment's value is a conditional expression or a plain attribute
    chain naming a function of the language (one walk)."""
    for node in syntax.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, (ast.IfExp, ast.Attribute)):
            value = node.value.body if isinstance(node.value, ast.IfExp) else node.value
            if isinstance(value, ast.Attribute) and callable(resolve_static(value, namespace)):
                return True
    return False


def rewrite_let_bindings(ks: KernelSource) -> None:
    if _binds_functions(ks.tree, ks.namespace):
        found = _function_aliases(ks.tree, ks.namespace)
        if found:
            ks.tree = syntax.fix_missing_locations(_FunctionAliases(found).visit(ks.tree))
    lets, aliases = _wanted(ks.tree)
    if not (lets or aliases):
        return
    tree = _Lets(ks.namespace, ks.error).visit(ks.tree) if lets else ks.tree
    found = _region_aliases(tree, ks.namespace) if aliases else {}
    if found:
        tree = _Aliases(found).visit(tree)
    ks.tree = syntax.fix_missing_locations(tree)


class _Ldg(syntax.NodeTransformer):
    def __init__(self, namespace, error):
        self.namespace = namespace
        self.error = error

    def visit_Call(self, node):
        if _language_attr(node.func, "__ldg", self.namespace):
            return self._ldg(node)
        return self.generic_visit(node)

    def _ldg(self, node):
        node = self.generic_visit(node)
        if node.keywords or not 1 <= len(node.args) <= 2:
            raise self.error("T.__ldg(x[i]) or T.__ldg(x, index): one load", node)
        if len(node.args) == 1:
            if not isinstance(node.args[0], ast.Subscript):
                raise self.error(f"T.__ldg(x[i]) loads one element: got "
                                 f"`{ast.unparse(node.args[0])}` (T.__ldg(x, index) takes a "
                                 f"tensor and its index)", node)
            return node.args[0]
        buffer, index = node.args
        if isinstance(index, ast.List):
            index = ast.Tuple(index.elts, ast.Load())
        return ast.copy_location(ast.Subscript(buffer, index, ast.Load()), node)


def rewrite_ldg(ks: KernelSource) -> None:
    """``T.__ldg(x[i])`` / ``T.__ldg(x, i)`` in ``ks.tree`` made the load ``x[i]`` (after
    macros and helpers are inlined: theirs too)."""
    ks.tree = syntax.fix_missing_locations(_Ldg(ks.namespace, ks.error).visit(ks.tree))
