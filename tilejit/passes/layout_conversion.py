"""Pass: convert between conflicting fragment layouts instead of stopping the compile
(issue 27), as Triton's ``convert_layout`` does.

A gemm fixes the layouts of the fragments it uses (its accumulator's warp tiling, its A
operand held in registers: ``layout_inference.fixed_fragment_layouts``), and a data flow
between fragments ties their layouts together: ``T.copy(F, G)`` and a ``T.Parallel`` loop
indexing both with all of its indices (``G[i, j] = f(F[i, j])``; a cast is either). Where
a flow would join two different fixed layouts (FlashAttention at block 32 x 32, 128
threads, FullRow: the scores' accumulator is tiled 2 x 2 over the warps, while the second
gemm's A operand in registers needs each warp to hold whole rows, 2 warp rows copied on
both warp columns), the data goes through a row-major shared scratch tile: each thread
stores the elements it holds in the source layout, a block barrier, each thread loads the
elements it needs in the destination layout, and a barrier before the scratch is written
again (the barrier pass places both)::

    T.copy(s, p)                      __tj_convert0 = __tj_tile("__tj_convert0")
                                →     __tj_convert_layout("s", "p", "__tj_convert0", "...")
                                      T.copy(s, __tj_convert0)
                                      T.copy(__tj_convert0, p)

    for i, j in T.Parallel(M, N):     (the same first three statements)
        p[i, j] = s[i, j] * 0.5   →   for i, j in T.Parallel(M, N):
                                          p[i, j] = __tj_convert0[i, j] * 0.5

The written fragment keeps its layout (the loop iterates it); a fragment the loop only
reads, in another fixed layout, is read from the scratch tile. ``__tj_convert_layout``
marks the place in the IR dump, naming both fragments and where each layout comes from;
it generates no code. The scratch is an ordinary shared tile of the plan: the
shared-memory pass places it (counted in the kernel's bytes, its bytes shared with tiles
not live at the same time) and the barrier pass orders its writes and reads. A T.copy's
scratch has the destination's dtype (the copy into it converts), a loop's the source's.
The simulator runs the kernel as written: a conversion moves values unchanged.

Flows are taken in program order: a tie that joins no two fixed layouts is made, one that
would is converted. A loop that writes two fragments whose fixed layouts differ runs in no
single layout: a ``CompileError`` naming both and where their layouts come from.
"""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import resolve_static
from tilejit.ir.addressing import row_major
from tilejit.ir.markers import CONVERT_LAYOUT, LANGUAGE, TILE
from tilejit.ir.plan import FRAGMENT, SHARED, Tile
from tilejit.passes.layout_inference import UnionFind, fixed_fragment_layouts, same_layout

SCRATCH = "__tj_convert"


def convert_fragment_layouts(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    fixed = fixed_fragment_layouts(ctx)
    if len(fixed) < 2:
        return fdef                      # no two fixed layouts to conflict
    tiles = ctx.plan.tiles
    frags = {n for n, t in tiles.items() if t.kind == FRAGMENT}
    groups = _FixedGroups(fixed)
    conversions = []      # (the T.copy or the loop, [(src, dst)], which flow it is)
    for node in _flows(fdef, ctx, frags):
        if isinstance(node, ast.Call):
            src, dst = node.args[0].id, node.args[1].id
            if groups.conflict(src, dst):
                conversions.append((node, [(src, dst)], f"the T.copy at line {node.lineno}"))
            else:
                groups.union(src, dst)
            continue
        written, read = _loop_fragments(node, frags, tiles)
        if not written and not read:
            continue
        base = written[0] if written else next(
            (n for n in read if groups.origin(n) is not None), read[0])
        for n in written[1:]:
            if groups.conflict(base, n):
                raise ctx.error(
                    f"the T.Parallel at line {node.lineno} writes fragments {base!r} and "
                    f"{n!r}, whose layouts differ: {groups.describe(base, ctx)} and "
                    f"{groups.describe(n, ctx)}. A loop runs in one layout (tilejit converts "
                    f"what a loop reads, not what it writes): write them in separate "
                    f"T.Parallel loops", node)
            groups.union(base, n)
        moved = []
        for n in read:
            if n == base:
                continue
            if groups.conflict(n, base):
                moved.append((n, base))
            else:
                groups.union(n, base)
        if moved:
            conversions.append((node, moved, f"read in the T.Parallel at line {node.lineno}"))
    flat = [(node, pair, where) for node, pairs, where in conversions for pair in pairs]
    for count, (node, pair, where) in enumerate(flat):
        _insert(ctx, fdef, node, pair, where, count, groups)
    return syntax.fix_missing_locations(fdef)


class _FixedGroups(UnionFind):
    """Fragments tied by data flows; a group's fixed layout is its member's, kept with
    that member, its line and the use that fixes it."""

    def __init__(self, fixed):
        super().__init__()
        self.fixed = {n: (frag, n, line, reason) for n, (frag, line, reason) in fixed.items()}

    def origin(self, name):
        return self.fixed.get(self.find(name))

    def conflict(self, a, b) -> bool:
        fa, fb = self.origin(a), self.origin(b)
        return (fa is not None and fb is not None and self.find(a) != self.find(b)
                and not same_layout(fa[0], fb[0]))

    def union(self, a, b):
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        self.parent[ra] = rb
        moved = self.fixed.pop(ra, None)
        if moved is not None:
            self.fixed.setdefault(rb, moved)

    def describe(self, name, ctx, source=True) -> str:
        """The fragment and where its group's fixed layout comes from (with the source
        line of that use unless ``source`` is False)."""
        _frag, member, line, reason = self.origin(name)
        tied = "" if member == name else f" (tied to {member!r})"
        at = f"line {line}: {ctx.source_line(line)}" if source else f"line {line}"
        return f"{name!r}{tied}: {reason} ({at})"


def _flows(fdef, ctx, frags) -> list:
    """The T.copy calls between two whole fragments and the T.Parallel loops, in program
    order."""
    out = []

    class Visit(syntax.NodeVisitor):
        def visit_Call(self, node):
            if (resolve_static(node.func, ctx.namespace) is T.copy and len(node.args) == 2
                    and all(isinstance(a, ast.Name) and a.id in frags for a in node.args)):
                out.append(node)
            self.generic_visit(node)

        def visit_For(self, node):
            if (isinstance(node.iter, ast.Call)
                    and resolve_static(node.iter.func, ctx.namespace) is T.Parallel):
                out.append(node)
            self.generic_visit(node)

    Visit().visit(fdef)
    return out


def _loop_fragments(loop, frags, tiles) -> tuple[list, list]:
    """(fragments the loop writes, fragments it only reads), each indexed somewhere in the
    loop with all of the loop's indices in order, in order of appearance."""
    elts = loop.target.elts if isinstance(loop.target, ast.Tuple) else [loop.target]
    if not all(isinstance(e, ast.Name) for e in elts):
        return [], []
    loop_vars = [e.id for e in elts]
    full, stored = [], set()
    for stmt in loop.body:
        for sub in syntax.walk(stmt):
            if not (isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name)
                    and sub.value.id in frags):
                continue
            name = sub.value.id
            if not isinstance(sub.ctx, ast.Load):
                stored.add(name)
            if name not in full and _all_indices(sub, loop_vars, tiles[name].shape):
                full.append(name)
    return [n for n in full if n in stored], [n for n in full if n not in stored]


def _all_indices(sub, loop_vars, shape) -> bool:
    """``F[i, j]`` with the loop's indices in order (a 0 for an extent-1 dimension), as
    ``layout_inference`` ties a loop's fragments."""
    elts = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
    if len(elts) != len(loop_vars) or len(elts) != len(shape):
        return False
    return all((isinstance(e, ast.Name) and e.id == v)
               or (isinstance(e, ast.Constant) and e.value == 0 and n == 1)
               for e, v, n in zip(elts, loop_vars, shape))


def _insert(ctx, fdef, node, pair, where, count, groups):
    """The scratch tile into the plan, and the statements: the allocation, the marker,
    the copy into the scratch, then the copy out of it (a T.copy) or the loop reading it."""
    src, dst = pair
    tiles = ctx.plan.tiles
    loop = isinstance(node, ast.For)
    name = f"{SCRATCH}{count}"
    like = tiles[src] if loop else tiles[dst]
    tiles[name] = Tile(name, SHARED, like.shape, like.dtype, node.lineno,
                       layout=row_major(like.shape),
                       layout_reason=f"converts {src!r} to the layout of {dst!r} ({where})")
    found = _statement_of(fdef, node)
    if found is None:
        raise ctx.error(f"T.copy of fragment {src!r} into {dst!r}: their layouts differ "
                        f"({groups.describe(src, ctx)}; {groups.describe(dst, ctx)}) and the "
                        f"copy is not a statement of its own, where a conversion through "
                        f"shared memory could go", node)
    body, index = found
    note = (f"{groups.describe(src, ctx, False)} -> {groups.describe(dst, ctx, False)}, "
            f"{where}")
    new = _scratch_statements(src, dst, name, note, body[index])
    if loop:
        _ReadFrom(src, name).visit(node)
        body[index:index] = new
    else:
        copy = ast.Attribute(ast.Name(LANGUAGE, ast.Load()), "copy", ast.Load())
        out = ast.Expr(ast.Call(copy, [ast.Name(name, ast.Load()), ast.Name(dst, ast.Load())],
                                []))
        body[index:index + 1] = new + [ast.copy_location(out, body[index])]


def read_through_shared(ctx, fdef, loop: ast.For, src: str, why: str) -> None:
    """The T.Parallel ``loop`` reads fragment ``src`` from a row-major shared copy made
    just before it (``layout_inference.infer_layouts``: a broadcast read whose layout
    would conflict with another derivation, ``why``). ``__tj_convert_layout`` marks it
    in the IR dump."""
    tiles = ctx.plan.tiles
    name = f"{SCRATCH}_read{ctx.number('read_conversion')}"
    like = tiles[src]
    tiles[name] = Tile(name, SHARED, like.shape, like.dtype, loop.lineno,
                       layout=row_major(like.shape),
                       layout_reason=f"a shared copy of {src!r} the T.Parallel at line "
                                     f"{loop.lineno} reads")
    found = _statement_of(fdef, loop)
    if found is None:
        raise ctx.error(f"fragment {src!r}: {why}", loop)
    body, index = found
    note = (f"{src!r} read from shared memory in the T.Parallel at line {loop.lineno}, "
            f"where its layout would conflict: {why}")
    new = _scratch_statements(src, f"the T.Parallel at line {loop.lineno}", name, note, loop)
    _ReadFrom(src, name).visit(loop)
    body[index:index] = new


def _scratch_statements(src, dst, name, note, where) -> list:
    """The scratch tile's allocation, the conversion's marker, the copy into it."""
    copy = ast.Attribute(ast.Name(LANGUAGE, ast.Load()), "copy", ast.Load())
    new = [
        ast.Assign([ast.Name(name, ast.Store())],
                   ast.Call(ast.Name(TILE, ast.Load()), [ast.Constant(name)], [])),
        ast.Expr(ast.Call(ast.Name(CONVERT_LAYOUT, ast.Load()),
                          [ast.Constant(src), ast.Constant(dst), ast.Constant(name),
                           ast.Constant(note)], [])),
        ast.Expr(ast.Call(copy, [ast.Name(src, ast.Load()), ast.Name(name, ast.Load())], [])),
    ]
    return [ast.copy_location(x, where) for x in new]


class _ReadFrom(syntax.NodeTransformer):
    """Every read ``src[...]`` becomes ``scratch[...]``."""

    def __init__(self, src, scratch):
        self.src, self.scratch = src, scratch

    def visit_Subscript(self, node):
        self.generic_visit(node)
        if (isinstance(node.ctx, ast.Load) and isinstance(node.value, ast.Name)
                and node.value.id == self.src):
            node.value = ast.copy_location(ast.Name(self.scratch, ast.Load()), node.value)
        return node


def _statement_of(fdef, node):
    """(statement list, index) of the statement that is ``node`` (a loop) or whose
    expression is ``node`` (a call), or None."""
    for parent in syntax.walk(fdef):
        for field in ("body", "orelse"):
            stmts = getattr(parent, field, None)
            if isinstance(stmts, list):
                for i, st in enumerate(stmts):
                    if st is node or (isinstance(st, ast.Expr) and st.value is node):
                        return stmts, i
    return None
