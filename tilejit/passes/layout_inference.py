"""Pass: choose every tile's layout, and turn ``T.Parallel`` loops over fragments into
loops over each thread's registers.

Fragments. Uses that fix a layout: the accumulator of ``T.gemm`` (its warp tiling of
m16n8 tiles) and a ``T.gemm`` A operand held in registers. Uses that tie layouts
together: ``T.copy`` between two fragments, and a ``T.Parallel`` loop indexing several
fragments. Each group of tied fragments takes the one fixed layout among its members
(two different ones are a ``CompileError`` naming both uses) or, if none, the
``T.Parallel`` distribution of its shape (``layouts.parallel_fragment``).

A ``T.Parallel`` over a fragment's shape then iterates that fragment's layout: thread
t visits its own slots s, the loop indices are the layout's coordinates of (t, s), and
``F[i, j]`` reads register s:

    for i, j in T.Parallel(M, N):        for s in __tj_frag_loop("L0"):
        C[i, j] = T.max(C[i, j], 0)  →       i, j = __tj_frag_index("L0", s)
                                             __tj_frag_set(C, s, T.max(__tj_frag_get(C, s), 0))

The loop is fully unrolled, so every slot is a constant and the fragment lives in
registers. A fragment indexed any other way is a ``CompileError``.

Shared tiles read by ``T.gemm`` get the bank-conflict-free swizzled layout
(``layouts.make_swizzled_layout``); ``T.annotate_layout({tile: layout})`` sets one
explicitly; other shared tiles are row-major.
"""
from __future__ import annotations

import ast

from .. import language as T
from ..frontend.source import resolve_static
from ..layouts import ComposedLayout, Layout, make_swizzled_layout, parallel_fragment
from ..tile.addressing import fragment_indexing, row_major
from ..tile.plan import FRAGMENT, SHARED

FRAG_LOOP = "__tj_frag_loop"
FRAG_INDEX = "__tj_frag_index"
FRAG_VALID = "__tj_frag_valid"
FRAG_GET = "__tj_frag_get"
FRAG_SET = "__tj_frag_set"
SLOT = "__tj_s"


def _same(f, g) -> bool:
    return (f.shape == g.shape and f.thread_layout == g.thread_layout
            and f.slot_layout == g.slot_layout and f.num_threads == g.num_threads
            and f.replicate == g.replicate)


class _Groups:
    def __init__(self):
        self.parent: dict[str, str] = {}

    def find(self, x):
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a, b):
        self.parent[self.find(a)] = self.find(b)


def _loop_names(target) -> list[str] | None:
    elts = target.elts if isinstance(target, ast.Tuple) else [target]
    if not all(isinstance(e, ast.Name) for e in elts):
        return None
    return [e.id for e in elts]


def _index_names(sub: ast.Subscript):
    elts = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
    return [e.id if isinstance(e, ast.Name) else None for e in elts]


class _Collect(ast.NodeVisitor):
    """Fragment loops, copies between fragments, and annotate_layout calls."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.frags = {n for n, t in ctx.plan.tiles.items() if t.kind == FRAGMENT}
        self.loops: list[tuple[ast.For, list[str]]] = []
        self.copies: list[tuple[str, str, int]] = []
        self.annotations: list[ast.Call] = []

    def visit_For(self, node):
        it = node.iter
        if isinstance(it, ast.Call) and resolve_static(it.func, self.ctx.namespace) is T.Parallel:
            used = []
            for sub in ast.walk(ast.Module(body=node.body, type_ignores=[])):
                if (isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name)
                        and sub.value.id in self.frags and sub.value.id not in used):
                    used.append(sub.value.id)
            if used:
                self.loops.append((node, used))
        self.generic_visit(node)

    def visit_Call(self, node):
        fn = resolve_static(node.func, self.ctx.namespace)
        if fn is T.copy and len(node.args) == 2 and all(
                isinstance(a, ast.Name) and a.id in self.frags for a in node.args):
            self.copies.append((node.args[0].id, node.args[1].id, node.lineno))
        if fn is T.annotate_layout:
            self.annotations.append(node)
        self.generic_visit(node)


class _RewriteLoops(ast.NodeTransformer):
    def __init__(self, ctx, loop_ids):
        self.ctx = ctx
        self.loop_ids = loop_ids          # id(For node) -> (loop id, fragment names)
        self.frags = {n for n, t in ctx.plan.tiles.items() if t.kind == FRAGMENT}
        self.current: set[str] | None = None
        self.counter = 0

    def visit_For(self, node):
        key = self.loop_ids.get(id(node))
        if key is None:
            return self.generic_visit(node)
        lid, names, loop_vars = key
        outer = self.current
        self.current = (set(names), loop_vars)
        body = [self.visit(s) for s in node.body]
        self.current = outer
        slot = f"{SLOT}{self.counter}"
        self.counter += 1
        index = ast.Assign([ast.Tuple([ast.Name(v, ast.Store()) for v in loop_vars], ast.Store())
                            if len(loop_vars) > 1 else ast.Name(loop_vars[0], ast.Store())],
                           ast.Call(ast.Name(FRAG_INDEX, ast.Load()),
                                    [ast.Constant(lid), ast.Name(slot, ast.Load())], []))
        body = [ast.copy_location(index, node)] + _flatten(body)
        if self.ctx.plan.loops[lid][1].valid is not None:
            test = ast.Call(ast.Name(FRAG_VALID, ast.Load()),
                            [ast.Constant(lid), ast.Name(slot, ast.Load())], [])
            body = [body[0], ast.copy_location(ast.If(test, body[1:], []), node)]
        loop = ast.For(ast.Name(slot, ast.Store()),
                       ast.Call(ast.Name(FRAG_LOOP, ast.Load()), [ast.Constant(lid)], []),
                       body, [], None)
        return ast.copy_location(loop, node)

    def _slot(self, sub: ast.Subscript):
        name = sub.value.id
        if self.current is None or name not in self.current[0]:
            raise self.ctx.error(
                f"fragment {name!r} is spread over the block's threads: index it only inside "
                f"a `for ... in T.Parallel(...)` over its shape {self.ctx.plan.tiles[name].shape}, "
                f"with the loop's indices", sub)
        if _index_names(sub) != list(self.current[1]):
            raise self.ctx.error(
                f"fragment {name!r} must be indexed with the T.Parallel loop's indices "
                f"[{', '.join(self.current[1])}] in order (each thread holds only its own "
                f"elements), got `{ast.unparse(sub)}`", sub)
        return ast.Name(f"{SLOT}{self.counter}", ast.Load())

    def visit_Subscript(self, node):
        node = self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id in self.frags:
            if not isinstance(node.ctx, ast.Load):
                raise self.ctx.error("unsupported use of a fragment element", node)
            return ast.copy_location(ast.Call(ast.Name(FRAG_GET, ast.Load()),
                                              [node.value, self._slot(node)], []), node)
        return node

    def _store(self, target, value, node):
        slot = self._slot(target)
        return ast.copy_location(ast.Expr(ast.Call(ast.Name(FRAG_SET, ast.Load()),
                                                   [target.value, slot, value], [])), node)

    def visit_Assign(self, node):
        t = node.targets[0]
        if (len(node.targets) == 1 and isinstance(t, ast.Subscript)
                and isinstance(t.value, ast.Name) and t.value.id in self.frags):
            return self._store(t, self.visit(node.value), node)
        return self.generic_visit(node)

    def visit_AugAssign(self, node):
        t = node.target
        if (isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
                and t.value.id in self.frags):
            load = ast.Subscript(t.value, t.slice, ast.Load())
            ast.copy_location(load, t)
            value = ast.BinOp(self.visit(load), node.op, self.visit(node.value))
            return self._store(t, ast.copy_location(value, node), node)
        return self.generic_visit(node)

    def visit_Expr(self, node):
        call = node.value
        if (isinstance(call, ast.Call)
                and resolve_static(call.func, self.ctx.namespace) is T.annotate_layout):
            return ast.copy_location(ast.Pass(), node)
        return self.generic_visit(node)


def _flatten(stmts):
    out = []
    for s in stmts:
        out.extend(s if isinstance(s, list) else [s])
    return out


def _parallel_layout(shape, dtypes, threads):
    widest = max(d.itemsize for d in dtypes)
    vec = max(1, 16 // widest)
    while vec >= 1:
        if shape[-1] % vec == 0:
            try:
                frag = parallel_fragment(shape, threads, vec)
                return frag, vec
            except ValueError:
                pass
        vec //= 2
    frag = parallel_fragment(shape, threads, 1)
    return frag, 1


def infer_layouts(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    plan = ctx.plan
    tiles = plan.tiles
    col = _Collect(ctx)
    col.visit(fdef)
    groups = _Groups()
    fixed: dict[str, tuple] = {}          # fragment -> (Fragment, line, reason)

    def demand(name, frag, line, reason):
        old = fixed.get(name)
        if old is not None and not _same(old[0], frag):
            raise ctx.error(f"fragment {name!r} needs two different layouts: {old[2]} (line "
                            f"{old[1]}: {ctx.source_line(old[1])}) and {reason} (line {line}: "
                            f"{ctx.source_line(line)})", line)
        fixed.setdefault(name, (frag, line, reason))

    for gp, a, _b, c, line in plan.gemms.values():
        demand(c, gp.c_fragment(), line, "the accumulator of T.gemm")
        if tiles[a].kind == FRAGMENT:
            demand(a, gp.a_fragment(), line, "the A operand of T.gemm held in registers")
    for src, dst, line in col.copies:
        if tiles[src].shape != tiles[dst].shape:
            raise ctx.error(f"T.copy between fragments of different shapes {tiles[src].shape} "
                            f"and {tiles[dst].shape}", line)
        groups.union(src, dst)
    loop_ids = {}
    for k, (loop, names) in enumerate(col.loops):
        loop_vars = _loop_names(loop.target)
        extents = []
        for a in loop.iter.args:
            try:
                from .static_eval import StaticEval
                extents.append(StaticEval(ctx.namespace, ctx.param_dtypes, fdef).value(a))
            except Exception:
                extents.append(None)
        for n in names:
            if tuple(extents) != tiles[n].shape:
                raise ctx.error(f"a T.Parallel over fragment {n!r} must cover its shape "
                                f"{tiles[n].shape}; this loop covers {tuple(extents)}", loop)
            groups.union(n, names[0])
        if loop_vars is None:
            raise ctx.error("a T.Parallel over a fragment must bind plain names", loop)
        loop_ids[id(loop)] = (f"L{k}", names, loop_vars)
    # resolve each group's layout
    frags = [n for n, t in tiles.items() if t.kind == FRAGMENT]
    members: dict[str, list[str]] = {}
    for n in frags:
        members.setdefault(groups.find(n), []).append(n)
    for _root, names in members.items():
        shapes = {tiles[n].shape for n in names}
        if len(shapes) > 1:
            raise ctx.error(f"fragments {', '.join(names)} are used together but have shapes "
                            f"{sorted(shapes)}", tiles[names[0]].line)
        chosen = None
        for n in names:
            if n in fixed:
                frag, line, reason = fixed[n]
                if chosen is not None and not _same(chosen[0], frag):
                    raise ctx.error(
                        f"fragments {chosen[3]!r} and {n!r} are copied or looped over together "
                        f"but need different layouts: {chosen[2]} (line {chosen[1]}: "
                        f"{ctx.source_line(chosen[1])}) and {reason} (line {line}: "
                        f"{ctx.source_line(line)})", line)
                chosen = chosen or (frag, line, reason, n)
        if chosen is not None:
            layout, ix = chosen[0], fragment_indexing(chosen[0])
            reason = f"{chosen[2]} at line {chosen[1]}"
        else:
            layout, vec = _parallel_layout(tiles[names[0]].shape,
                                           [tiles[n].dtype for n in names], ctx.threads)
            ix = fragment_indexing(layout, vec)
            reason = "T.Parallel distribution"
        for n in names:
            tiles[n].layout, tiles[n].layout_reason = layout, reason
            tiles[n].indexing = ix
    for loop, names in col.loops:
        lid, _, _ = loop_ids[id(loop)]
        plan.loops[lid] = (tiles[names[0]].layout, tiles[names[0]].indexing)
    # shared tiles
    for t in tiles.values():
        if t.kind == SHARED:
            t.layout = row_major(t.shape)
    for _gp, a, b, _c, line in plan.gemms.values():
        for name in (a, b):
            t = tiles[name]
            if t.kind == SHARED:
                t.layout = make_swizzled_layout(t.shape, t.dtype.itemsize)
                t.layout_reason = f"swizzled for T.gemm at line {line}"
    for call in col.annotations:
        _annotate(call, ctx)
    return _RewriteLoops(ctx, loop_ids).visit(fdef)


def _annotate(call, ctx):
    from .static_eval import NotStatic, StaticEval
    if len(call.args) != 1 or not isinstance(call.args[0], ast.Dict):
        raise ctx.error("T.annotate_layout({tile: layout, ...}) takes one dict", call)
    static = StaticEval(ctx.namespace, ctx.param_dtypes)
    for k, v in zip(call.args[0].keys, call.args[0].values):
        if not (isinstance(k, ast.Name) and k.id in ctx.plan.tiles
                and ctx.plan.tiles[k.id].kind == SHARED):
            raise ctx.error(f"T.annotate_layout: keys must be shared tiles, got "
                            f"`{ast.unparse(k)}`", call)
        tile = ctx.plan.tiles[k.id]
        if (isinstance(v, ast.Call) and v.args and isinstance(v.args[0], ast.Name)
                and v.args[0].id == k.id):
            layout = make_swizzled_layout(tile.shape, tile.dtype.itemsize)
        else:
            try:
                layout = static.value(v)
            except NotStatic:
                raise ctx.error(f"T.annotate_layout: the layout of {k.id!r} must be known at "
                                f"compile time, got `{ast.unparse(v)}`", call) from None
        if not isinstance(layout, (Layout, ComposedLayout)) or layout.size != tile.size:
            raise ctx.error(f"T.annotate_layout: expected a layout of {tile.size} elements for "
                            f"{k.id!r}, got {layout}", call)
        tile.layout, tile.layout_reason = layout, f"T.annotate_layout at line {call.lineno}"
