"""Pass: software pipelines whose copies the Tensor Memory Accelerator can do (sm_90+).

The pipeline pass (``pipeline.py``) schedules every pipelined loop with ``cp.async``:
each thread copies its 16-byte chunks of every tile, and commit groups count them.
After the layouts are known, this pass rewrites a loop whose producers all qualify to
Hopper's TMA: per producer and iteration, thread 0 issues one ``cp.async.bulk.tensor``
per box (a tile whose row is wider than the swizzle span is one box per column of
swizzle atoms), and the copies of a stage complete on that stage's mbarrier:

    (kernel entry)  ph = 0; init(S mbarriers, P arrivals each); sync()
    fence.proxy.async                              # earlier generic writes of those bytes
    for p in range(S - 1):
        if p < n:  tma_load(<producers at k = p> → stage p, mbarrier p)
    for k in range(n):
        tma_wait(mbarrier k % S, parity (ph >> k % S) & 1); ph ^= 1 << k % S
        sync()                                     # everyone finished iteration k - 1
        if k + S - 1 < n:  tma_load(<producers at k + S - 1> → stage (k + S - 1) % S)
        <consumers>

``tma_load`` is thread 0's ``mbarrier.arrive.expect_tx`` of the tile's bytes and its
boxes' copies; the wait is every thread's ``mbarrier.try_wait.parity``. Each stage's
phase completes once per iteration that loads it, and every loaded iteration is waited
on once, so ``ph`` (bit j: the parity stage j's next phase completes) stays exact
across several runs of the loop (a pipeline inside another loop). TMA zero-fills the
parts of a box outside the tensor and counts the whole box's bytes, so edges need no
code. No commit groups remain, and the gemm's folded refill (``_fold_refill``) is
unfolded: the refill is a few instructions of one thread.

Measured and not kept (the patch is ``benchmarks/experiments/tma_release.patch``):
per-stage "empty" mbarriers instead of the block barrier (each warp's lane 0 arrives
after the warp read the stage; thread 0 waits on it before refilling the stage). The
GEMM ran 4–10 % faster, but ptxas schedules the arrive above ``ldmatrix`` of the stage
it releases (nothing orders them: the reads' results are not used by the arrive), and
14 of 20 bf16 128×128×32 launches came out wrong; a proxy fence before the arrive fixes
that and costs more than the barrier (H200, benchmarks/results/archive/NOTES-2026-11.md,
tenth session). A stage may be released only after the reads of it have completed,
which wgmma's ``wait_group`` provides and ``ldmatrix`` does not.

A producer qualifies when its source is a region of a tensor parameter that the launch
checks to be 16-byte aligned with a contiguous last dimension (``GlobalTensorType``),
the copy's two ranged dimensions are the tile's (the last the tensor's last), and the
tile's layout is exactly what TMA writes: row-major, or a 32/64/128-byte swizzle with
atoms down a column (``layouts/swizzle.make_swizzled_layout``), which this pass checks
element by element. Anything else keeps ``cp.async``, as does a loop a consumer may
leave early (break, return: copies would still be in flight) or whose consumers write
a staged tile (TMA's later write of those bytes would need a proxy fence per
iteration). ``TILEJIT_TMA=0`` turns the pass off (measurements).

The host encodes one tensor map per (tensor, box) (``runtime/tensor_maps.py``); the
kernel takes it as a hidden 128-byte parameter, ``__tj_map_<tensor>_<i>``, appended to
its parameters (``plan.tensor_maps``). Limits TMA has and cp.async has not: a tensor
with no elements gets a zeroed map (right when its loop never runs, as in a GEMM with
K = 0; a loop over an empty tensor that does run would fault, where cp.async would
zero-fill); extents from 2^31 on are refused at launch; an input the same kernel also
writes with ordinary stores and then reads through a pipeline would need a
``fence.proxy.async.global`` that is not emitted.
"""
from __future__ import annotations

import ast
import copy
from dataclasses import dataclass

from tilejit import syntax
from tilejit.ir.smem_layouts import canonical_layout
from tilejit.ir.tma_box import MAX_RANK, Box, data_type_supported
from tilejit.ir.markers import (COPY_ASYNC, MULTICAST_ATTR, REGION, STAGE, SYNC, TMA_COPY,
                                TMA_EXPECT_LOAD, TMA_FENCE, TMA_INIT, TMA_LOAD, TMA_WAIT)
from tilejit.ir.regions import RegionError, copy_dims
from tilejit.passes.pipeline import role_of
from tilejit.passes.static_eval import NotStatic, StaticEval

MAP_PREFIX = "__tj_map_"
_ALIGN = {0: 128, 32: 256, 64: 512, 128: 1024}   # a box's shared address, per swizzle


@dataclass(frozen=True)
class TmaCopy:
    """One producer's copy: the hidden map parameter it reads, its boxes as (byte
    offset in the stage, offset of the box along the tensor's last dimension), the
    bytes it lands (every box whole) and the tensor's rank."""
    map_index: int
    boxes: tuple
    nbytes: int
    rank: int
    multicast: int = 0      # T.copy_cluster's mask (issued once for it when plan.multicast)

    def __str__(self):
        mask = f", multicast {self.multicast:#b}" if self.multicast else ""
        return (f"map {self.map_index}, {len(self.boxes)} box(es) at "
                f"{[b[0] for b in self.boxes]}, {self.nbytes} B{mask}")


def tma_layout(tile):
    """(swizzle bytes, box columns) when TMA writes ``tile``'s layout, else None
    (``ir/smem_layouts.canonical_layout``: every element's offset is compared with
    where a box of that swizzle puts it; a box has at most 256 rows and columns)."""
    if len(tile.shape) != 2 or tile.shape[0] > 256:
        return None
    found = canonical_layout(tile.layout, tuple(tile.shape), tile.dtype.itemsize)
    if found is None or found[1] > 256:
        return None
    return found


def _copy_plan(ctx, call, layouts):
    """(tensor name, Box, TmaCopy without its map) of a producer, or None. ``layouts``
    caches ``tma_layout`` per tile (tens of milliseconds each)."""
    src, dst = call.args
    return box_plan(ctx, src, ctx.plan.tiles[dst.args[0].id], layouts)


def box_plan(ctx, region, tile, layouts, one_row=False, columns=None):
    """(tensor name, Box, (boxes, bytes, rank, alignment)) of a TMA copy between the
    ``REGION`` call ``region`` of a tensor parameter and the whole shared ``tile``, or
    None when TMA cannot do it (see the module's docstring); shared by loads and stores
    (``tma_store.py``). ``one_row``: a (1, n) tile may take a region of one row (a
    kernel's own ``T.tma_copy``; the pipelines keep their plans). ``columns``: (first,
    end) of a band of the tile's columns the copy writes instead of the whole tile, whole
    swizzle atoms of it (FlashMLA's ``T.tma_copy(KV[..], KV_s[:, j * 64:(j + 1) * 64])``)."""
    src = region
    if not (isinstance(src, ast.Call) and isinstance(src.func, ast.Name)
            and src.func.id == REGION and isinstance(src.args[0], ast.Name)):
        return None
    ty = ctx.params.get(src.args[0].id)
    if ty is None or not (ty.contiguous and ty.aligned) or ty.dtype != tile.dtype:
        return None
    if not data_type_supported(ty.dtype.name) or len(tile.shape) != 2:
        return None
    kinds, extents = src.args[1].value, src.args[4].value
    if len(kinds) > MAX_RANK:
        return None
    ranged = [d for d, k in enumerate(kinds) if k == "s"]
    known = [int(e) for e in extents.split(",")] if extents else []
    known = [known[d] for d in ranged] if known else []
    src_extents = tuple(known) if known and all(e > 0 for e in known) else None
    first, end = columns or (0, tile.shape[1])
    shape = (tile.shape[0], end - first)
    try:
        (s_r, s_e), _, _ = copy_dims((len(kinds), ranged or None, src_extents),
                                     (2, [0, 1], shape))
    except RegionError:
        return None
    wide = [(d, e) for d, e in zip(s_r, s_e) if e != 1]
    if one_row and len(wide) == 1 and tile.shape[0] == 1:   # a (1, n) tile: one row
        wide = [(None, 1)] + wide
    if len(wide) != 2 or wide[1][0] != len(kinds) - 1 or tuple(e for _, e in wide) != shape:
        return None
    if tile.name not in layouts:
        layouts[tile.name] = tma_layout(tile)
    found = layouts[tile.name]
    if found is None:
        return None
    swizzle, width = found
    rows, cols = tile.shape
    if tile.stage_bytes % _ALIGN[swizzle]:
        return None
    box_extents = tuple(width if d == len(kinds) - 1 else dict(wide).get(d, 1)
                        for d in range(len(kinds)))
    box = Box(ty.dtype.name, ty.dtype.itemsize, box_extents, swizzle)
    if first % width or (end - first) % width:
        return None             # a band of whole swizzle atoms only
    step = rows * width * ty.dtype.itemsize
    boxes = tuple(((first // width + j) * step, j * width) for j in range((end - first) //
                                                                         width))
    nbytes = tile.nbytes if columns is None else rows * (end - first) * ty.dtype.itemsize
    return src.args[0].id, box, (boxes, nbytes, len(kinds), _ALIGN[swizzle])


def _statements(fdef, pid, role):
    return [n for n in syntax.walk(fdef) if role_of(n) == (pid, role)]


def _call(name, args):
    return ast.Call(ast.Name(name, ast.Load()), args, [])


def _name(name):
    return ast.Name(name, ast.Load())


def _bit(phase, stage):
    """``(phase >> stage) & 1``: the parity the stage's mbarrier completes next."""
    return ast.BinOp(ast.BinOp(_name(phase), ast.RShift(), copy.deepcopy(stage)), ast.BitAnd(),
                     ast.Constant(1))


def _flip(phase, stage):
    """``phase ^= 1 << stage``."""
    return ast.Assign([ast.Name(phase, ast.Store())], ast.BinOp(
        _name(phase), ast.BitXor(), ast.BinOp(ast.Constant(1), ast.LShift(),
                                               copy.deepcopy(stage))))


class _Rewrite(syntax.NodeTransformer):
    """One pipeline's cp.async schedule → TMA's (see the module's docstring)."""

    def __init__(self, pipe, slot0, ids, map_names):
        self.pipe, self.slot0 = pipe, slot0
        self.ids = ids                  # id(copy statement) or (id(fold), i) -> copy id
        self.map_names = map_names      # copy id -> its tensor map's parameter
        self.full = f"__tj_ph{pipe.pid}"

    def _slot(self, stage):
        return ast.BinOp(ast.Constant(self.slot0), ast.Add(), copy.deepcopy(stage))

    def _load(self, src, dst, cid, like):
        call = _call(TMA_LOAD, [src, dst, self._slot(dst.args[1]), _name(self.map_names[cid]),
                                ast.Constant(cid)])
        return ast.copy_location(ast.Expr(call), like)

    def visit_Expr(self, node):
        role = role_of(node)
        if role is None or role[0] != self.pipe.pid:
            return self.generic_visit(node)
        kind = role[1]
        out = node
        if kind in ("copy", "refill"):
            src, dst = node.value.args
            out = self._load(src, dst, self.ids[id(node)], node)
        elif kind in ("commit", "drain"):
            out = None
        elif kind == "wait":
            stage = self.pipe.current
            out = [ast.Expr(_call(TMA_WAIT, [self._slot(stage), _bit(self.full, stage),
                                             ast.Constant(False)])), _flip(self.full, stage)]
        elif kind == "fold":
            args = node.value.args
            cond, pairs = args[4], args[5:]
            node.value.args = args[:4]
            loads = [self._load(pairs[i], pairs[i + 1], self.ids[(id(node), i)], node)
                     for i in range(0, len(pairs), 2)]
            out = [ast.If(cond, loads, []), node]
        return [ast.copy_location(o, node) for o in out] if isinstance(out, list) else out

    def visit_For(self, node):
        node = self.generic_visit(node)
        if role_of(node) == (self.pipe.pid, "prologue"):
            return [ast.copy_location(ast.Expr(_call(TMA_FENCE, [])), node), node]
        return node

    def visit_If(self, node):
        node = self.generic_visit(node)
        if not node.body:
            node.body = [ast.Pass()]
        return node


def use_tma(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    explicit = [n for n in syntax.walk(fdef) if isinstance(n, ast.Call)
                and isinstance(n.func, ast.Name) and n.func.id == TMA_COPY]
    if explicit and not ctx.target.is_sim and not ctx.options.tma:
        raise ctx.error("T.tma_copy needs TMA, which this compilation turned off (tma=False)",
                        explicit[0])
    if not (ctx.target.has_tma and ctx.options.tma) or not (ctx.pipelines or explicit):
        return fdef
    if ctx.plan.grid_sync and not explicit:
        # T.sync_grid: a TMA load after the barrier reads, through the async proxy, what
        # other blocks' ordinary stores wrote before it; cp.async stays in the generic
        # proxy the barrier's release and acquire order (passes/grid_sync.py)
        return fdef
    plan = ctx.plan
    maps: dict = {}                 # (tensor, Box) -> hidden parameter name
    entry, layouts = [], {}
    for pipe in ctx.pipelines:
        if pipe.leaves or pipe.writes_staged:
            continue
        sites = [(id(n), n.value) for role in ("copy", "refill")
                 for n in _statements(fdef, pipe.pid, role)]
        for fold in _statements(fdef, pipe.pid, "fold"):
            pairs = fold.value.args[5:]
            sites += [((id(fold), i), _call(COPY_ASYNC, pairs[i:i + 2]))
                      for i in range(0, len(pairs), 2)]
        if not sites or not all(isinstance(call.args[1], ast.Call)
                                and call.args[1].func.id == STAGE for _, call in sites):
            continue
        plans = [_copy_plan(ctx, call, layouts) for _, call in sites]
        if not all(plans):
            continue
        ids, map_names = {}, {}
        for (key, call), planned in zip(sites, plans):
            cid, name = _register(plan, maps, planned, plan.tiles[call.args[1].args[0].id],
                                  getattr(call, MULTICAST_ATTR, 0))
            map_names[cid], ids[key] = name, cid
        slot0 = plan.mbarriers
        plan.mbarriers += pipe.stages
        fdef = _Rewrite(pipe, slot0, ids, map_names).visit(fdef)
        entry += [ast.Assign([ast.Name(f"__tj_ph{pipe.pid}", ast.Store())], ast.Constant(0)),
                  ast.Expr(_call(TMA_INIT, [ast.Constant(slot0), ast.Constant(pipe.stages),
                                            ast.Constant(pipe.producers)]))]
    for call in explicit:
        _plan_explicit(ctx, call, maps, layouts)
    if not maps:
        return fdef
    plan.tensor_maps = [(tensor, box) for tensor, box in maps]
    fdef.args.args += [ast.arg(name) for name in maps.values()]
    if entry:
        fdef.body = entry + [ast.Expr(_call(SYNC, []))] + fdef.body
    return syntax.fix_missing_locations(fdef)


def _register(plan, maps, planned, tile, multicast=0):
    """(copy id, tensor map parameter) of a planned copy (``box_plan``) into ``tile``: its
    TmaCopy in the plan, one map per (tensor, box), the tile aligned for the boxes."""
    tensor, box, (boxes, nbytes, rank, align) = planned
    name = maps.setdefault((tensor, box), f"{MAP_PREFIX}{tensor}_{len(maps)}")
    cid = f"t{len(plan.tma_copies)}"
    plan.tma_copies[cid] = TmaCopy(list(maps).index((tensor, box)), boxes, nbytes, rank,
                                   multicast)
    tile.align = max(tile.align, align)
    return cid, name


def _column_band(ctx, dst):
    """(first, end) of ``REGION(X, "ss", (0, a), (None, b), ...)``: all the rows of a 2-d
    shared tile and columns a … b − 1 known at compile time; else None."""
    if not (isinstance(dst, ast.Call) and isinstance(dst.func, ast.Name)
            and dst.func.id == REGION and isinstance(dst.args[0], ast.Name)):
        return None
    tile = ctx.plan.tiles.get(dst.args[0].id)
    if tile is None or tile.kind != "shared" or len(tile.shape) != 2 or \
            dst.args[1].value != "ss":
        return None
    static = StaticEval(ctx.namespace, ctx.param_dtypes)
    try:
        (r0, c0), (r1, c1) = ([None if isinstance(e, ast.Constant) and e.value is None
                               else static.value(e) for e in t.elts] for t in dst.args[2:4])
    except NotStatic:
        return None
    rows, cols = tile.shape
    r1, c1 = rows if r1 is None else r1, cols if c1 is None else c1
    if r0 != 0 or r1 != rows or not 0 <= c0 < c1 <= cols:
        return None
    return c0, c1


def _plan_explicit(ctx, call, maps, layouts):
    """A kernel's own ``T.tma_copy`` (``warp_roles.py``) → ``tma_expect_load`` with its
    tensor map and boxes, or a CompileError saying what TMA cannot do."""
    src, dst, bar = call.args
    columns = _column_band(ctx, dst)
    if columns is not None:                 # X[:, a:b]: boxes into the tile at a band
        dst = call.args[1] = ast.copy_location(ast.Name(dst.args[0].id, ast.Load()), dst)
    name = dst.args[0] if isinstance(dst, ast.Call) and isinstance(dst.func, ast.Name) \
        and dst.func.id == STAGE else dst
    tile = ctx.plan.tiles.get(name.id) if isinstance(name, ast.Name) else None
    if tile is None or tile.kind != "shared":
        raise ctx.error(f"T.tma_copy: the destination must be a shared tile, one version "
                        f"of a stacked one (X[s, :, :]) or a band of a 2-d tile's columns "
                        f"known at compile time (X[:, a:b]), got `{ast.unparse(dst)}`", call)
    planned = box_plan(ctx, src, tile, layouts, one_row=True, columns=columns)
    if planned is None:
        raise ctx.error(f"T.tma_copy: TMA cannot copy `{ast.unparse(src)}` into tile "
                        f"{tile.name!r} ({tile.shape}, {tile.dtype}): the source must be a "
                        f"region of a tensor argument with a contiguous, 16-byte aligned last "
                        f"dimension, of the tile's dtype and shape, and the tile row-major or "
                        f"in a swizzled layout TMA writes", call)
    cid, map_name = _register(ctx.plan, maps, planned, tile)
    call.func = ast.Name(TMA_EXPECT_LOAD, ast.Load())
    call.args = [src, dst, bar, _name(map_name), ast.Constant(cid)]
