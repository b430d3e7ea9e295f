"""Pass: place every shared tile in the kernel's one dynamic shared-memory buffer.

Each tile is live from the first to the last top-level statement of the block that
uses it (in a warp-specialized kernel, the consumers' statements: ``_timeline``); its
allocation is not a use, and a loop counts as one statement (a tile used in a loop is
live for the whole loop). Tiles are placed largest first at the lowest
16-byte-aligned offset (1024 for a TMA destination: ``Tile.align``) that overlaps no
tile live at the same time, so a dead tile's bytes are reused. Where that is over the
limit, a tile the kernel allocates and no statement uses (TileLang's dequantizing GEMM
allocates its bias tile whether or not it adds a bias) takes none. A view of a tile
(``T.reshape`` / ``T.view``, ``Tile.view_of``) takes its base's offset; the base lives
while either is used and is aligned for both. The mbarriers of TMA
pipelines (``passes/tma.py``) go after every tile, never reused. The barrier pass
treats tiles that share bytes as one buffer, so the reuse is safe.

Over the device limit of the target architecture is a ``CompileError`` naming the
bytes needed and the limit; over 48 KB the loader raises the kernel's limit
(``CudaModule``).
"""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit.ir.markers import TILE, WS_ATTR
from tilejit.ir.plan import SHARED

ALIGN = 16


def _mentions(stmt, names) -> set[str]:
    return {n.id for n in syntax.walk(stmt) if isinstance(n, ast.Name) and n.id in names}


def _allocates(stmt) -> str | None:
    """The tile name of an allocation statement ``X = __tj_tile("X")``, else None."""
    if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name) and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Name) and stmt.value.func.id == TILE):
        return stmt.targets[0].id
    return None


def _timeline(fdef: ast.FunctionDef) -> tuple[list, list]:
    """(statements in execution order, the producer branches' statements). A
    warp-specialized kernel's split (``barriers.WS_ATTR``) counts as the consumers'
    statements in order: its producer only writes the stages its consumers wait for and
    read within their pipeline loop, so its uses of a tile end where the consumers' do."""
    order, producers = [], []
    for stmt in fdef.body:
        if isinstance(stmt, ast.If) and getattr(stmt, WS_ATTR, False):
            order.extend(stmt.orelse)
            producers.extend(stmt.body)
        else:
            order.append(stmt)
    return order, producers


def live_ranges(fdef: ast.FunctionDef, names) -> dict[str, tuple[int, int]]:
    """name → (first, last) statement of the timeline (``_timeline``) that uses the tile;
    the allocation is not a use (its bytes hold nothing until written), so a tile
    allocated at the top and first written after a loop can take the bytes of one that
    died in the loop. A tile only a producer uses lives throughout."""
    order, producers = _timeline(fdef)
    ranges: dict[str, list[int]] = {}
    for pos, stmt in enumerate(order):
        if _allocates(stmt) is not None:
            continue
        for n in _mentions(stmt, names):
            r = ranges.setdefault(n, [pos, pos])
            r[1] = pos
    for stmt in producers:
        for n in _mentions(stmt, names) - set(ranges):
            ranges[n] = [0, len(order)]
    return {n: tuple(r) for n, r in ranges.items()}


def _unused(fdef, ranges) -> set:
    """The tiles the kernel allocates (``X = __tj_tile("X")`` among its statements) and
    no statement uses; a tile the compiler made for itself (a reduction's scratch) has no
    such statement and is used by the lowering, not by name."""
    order, _ = _timeline(fdef)
    return {n for n in map(_allocates, order) if n is not None and n not in ranges}


def place(fdef: ast.FunctionDef, plan, drop_unused: bool = False) -> tuple[dict, int]:
    """({tile: offset}, bytes with the mbarriers) of the placement described above,
    without changing the plan (``epilogue_staging.py`` asks whether a tile would fit).
    ``drop_unused``: tiles the kernel allocates and never uses take no bytes."""
    everything = {n: t for n, t in plan.tiles.items() if t.kind == SHARED}
    # a view (T.reshape / T.view) takes its base's bytes: the base lives while either does
    shared = {n: t for n, t in everything.items() if not t.view_of}
    # a kernel's own warpgroup roles run side by side, ordered by its mbarriers, not by
    # the program's order: each tile keeps its bytes throughout
    ranges = {} if plan.role_threads else live_ranges(fdef, set(everything))
    for n, t in everything.items():
        if t.view_of and n in ranges:
            mine, base = ranges[n], ranges.get(t.view_of, ranges[n])
            ranges[t.view_of] = (min(mine[0], base[0]), max(mine[1], base[1]))
    placed: list[tuple[int, int, tuple[int, int]]] = []     # (start, end, live range)
    offsets = {}
    unused = _unused(fdef, ranges) if drop_unused and not plan.role_threads else set()
    for t in sorted(shared.values(), key=lambda t: (-t.total_bytes, t.line)):
        if t.name in unused:
            offsets[t.name] = 0         # allocated and never used: no bytes at all
            continue
        live = ranges.get(t.name, (0, 1 << 30))
        size = -(-t.total_bytes // ALIGN) * ALIGN
        align = max(v.align for v in everything.values() if v is t or v.view_of == t.name)
        busy = sorted((s, e) for s, e, r in placed if not (r[1] < live[0] or live[1] < r[0]))
        offset = 0
        for s, e in busy:
            if offset + size <= s:
                break
            offset = -(-max(offset, e) // align) * align
        offsets[t.name] = offset
        placed.append((offset, offset + size, live))
    for n, t in everything.items():
        if t.view_of:
            offsets[n] = offsets[t.view_of]
    total = max((e for _, e, _ in placed), default=0)
    if plan.mbarriers:
        total = -(-total // 8) * 8 + 8 * plan.mbarriers
    return offsets, total


def plan_shared_memory(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    plan = ctx.plan
    offsets, total = place(fdef, plan)
    limit = ctx.target.shared_limit
    if limit is not None and total > limit:
        offsets, total = place(fdef, plan, drop_unused=True)
    for name, offset in offsets.items():
        plan.tiles[name].offset = offset
    plan.shared_bytes = total
    if plan.mbarriers:
        plan.mbarrier_offset = total - 8 * plan.mbarriers
    if limit is not None and plan.shared_bytes > limit:
        order = sorted((t for t in plan.tiles.values() if t.kind == SHARED and not t.view_of),
                       key=lambda t: (-t.total_bytes, t.line))
        detail = ", ".join(f"{t.name} {t.total_bytes} B" for t in order)
        raise ctx.error(f"the kernel needs {plan.shared_bytes} bytes of shared memory ({detail}); "
                        f"{ctx.target.shared_limit_text}", fdef.body[0]
                        if fdef.body else None)
    return fdef


def shares_bytes(a, b) -> bool:
    """Whether two shared tiles overlap in the buffer."""
    return a.offset < b.offset + b.total_bytes and b.offset < a.offset + a.total_bytes
