"""Tiles in LLVM IR: allocation, element access, regions, fragment loops, clear/fill.

- A shared tile is a pointer into the kernel's one dynamic shared buffer
  (``@__tj_smem``, addrspace 3) at the offset the planner chose; element (i, j) lives
  at its layout's offset (swizzled for tiles ``T.gemm`` reads).
- A fragment is this thread's array of ``slots`` values (an ``alloca`` in the entry
  block); inside the fully unrolled fragment loops every slot index is a constant, so
  SROA turns the array into registers.
- A local tile is this thread's array of all its elements.
"""
from __future__ import annotations

import contextlib
import operator
import weakref

import numpy as np

from llvmlite import ir
from numba.core import cgutils, types

from tilejit import language as T
from tilejit.errors import CompileError
from tilejit.ir import markers
from tilejit.ir.addressing import BinOp, Const, Var, layout_offset, row_major
from tilejit.ir.plan import STARVED
from tilejit.codegen.typing.tiles import RegionType, TileType
from tilejit.codegen.lowering.debug import emit_bounds_check
from tilejit.codegen.lowering.registry import lower, lower_getattr
from tilejit.ir.kernel_config import current_kernel

I32 = ir.IntType(32)
SMEM = "__tj_smem"


def emit(builder, expr, env: dict, memo: SlotMemo | None = None) -> ir.Value:
    """An addressing expression as i32 IR; ``env`` maps variable names to i32 values
    or Python ints. ``memo``: a ``SlotMemo`` that reuses the values of subexpressions
    free of its slot variable, emitted for an earlier slot."""
    if memo is not None:
        return memo.emit(builder, expr, env)
    return _emit(builder, expr, env, {})


def _emit(builder, expr, env: dict, seen: dict) -> ir.Value:
    """``emit``, each subexpression object once: a swizzled layout's offset reads its
    unswizzled offset twice (``o ^ ((o & 448) >> 3)``), one subtree, emitted once
    (``seen``: id(expr) → (expr, value)) rather than twice for LLVM's CSE to merge."""
    if isinstance(expr, Const):
        return I32(expr.value)
    if isinstance(expr, Var):
        v = env[expr.name]
        return I32(v) if isinstance(v, int) else v
    hit = seen.get(id(expr))
    if hit is not None and hit[0] is expr:
        return hit[1]
    value = _emit_op(builder, expr.op, _emit(builder, expr.a, env, seen),
                     _emit(builder, expr.b, env, seen))
    seen[id(expr)] = (expr, value)
    return value


# the i32 operations of address arithmetic, by the IRBuilder method that emits each
# (unsigned: index arithmetic is unsigned on the GPU)
_I32_BUILDERS = {"add": "add", "mul": "mul", "div": "udiv", "mod": "urem", "xor": "xor",
                 "and": "and_", "shr": "lshr", "sub": "sub", "shl": "shl", "or": "or_"}


def _emit_op(builder, op, a, b) -> ir.Value:
    if isinstance(a, ir.Constant):
        if isinstance(b, ir.Constant):
            folded = _fold_i32(op, a.constant, b.constant)
            if folded is not None:
                return I32(folded)
        elif a.constant == _IDENTITY.get(op):      # 0 + x, 1 * x: x, as LLVM folds it
            return b
    elif isinstance(b, ir.Constant) and b.constant == _IDENTITY.get(op):
        return a
    method = _I32_BUILDERS.get(op)
    if method is not None:
        return getattr(builder, method)(a, b)
    if op == "lt":
        return builder.zext(builder.icmp_unsigned("<", a, b), I32)
    raise NotImplementedError(op)


class SlotMemo:
    """``emit`` for one fragment's slots, one after another: a subexpression that does
    not read the slot variable (the thread's part of a slot's coordinates, ``t // 4 %
    8``) has the same value at every slot and is emitted once, at the first, instead of
    once a slot for LLVM's CSE to merge (most of the lowered IR of an accumulator's
    epilogue). The values must dominate where they are reused: one memo serves a
    straight run of slots in one function, each slot's code after the previous one's
    (``_fragment_runs``, ``owned_elements``), never across the arms of a branch."""

    def __init__(self, slot_var: str = "s"):
        self.slot_var = slot_var
        self.values: dict[int, tuple] = {}       # id(expr): (expr, value), free of s
        self.slot_values: dict[int, tuple] = {}  # id(expr): (expr, env, value), reads s

    def emit(self, builder, expr, env: dict) -> ir.Value:
        return self._emit(builder, expr, env)[0]

    def _emit(self, builder, expr, env):
        """(value, whether it reads the slot variable)."""
        if isinstance(expr, Const):
            return I32(expr.value), False
        if isinstance(expr, Var):
            v = env[expr.name]
            return (I32(v) if isinstance(v, int) else v), expr.name == self.slot_var
        hit = self.values.get(id(expr))
        if hit is not None and hit[0] is expr:
            return hit[1], False
        hit = self.slot_values.get(id(expr))
        if hit is not None and hit[0] is expr and hit[1] is env:
            return hit[2], True
        (a, ra), (b, rb) = self._emit(builder, expr.a, env), self._emit(builder, expr.b, env)
        value = _emit_op(builder, expr.op, a, b)
        reads = ra or rb
        if not reads:
            self.values[id(expr)] = (expr, value)
        else:           # this slot's only (emit's ``seen``)
            self.slot_values[id(expr)] = (expr, env, value)
        return value, reads


def _fold_i32(op, a: int, b: int):
    """``a op b`` on i32 constants as LLVM folds it (``emit``'s operations: wrapping
    add and mul, unsigned division, remainder, shift and compare), or None where LLVM
    would not fold it (a division by 0, a shift by 32 or more). A fragment slot's index
    expression at a constant slot is mostly constants: folded here, they are not
    emitted as instructions for LLVM to fold (a tenth of FlashAttention's lowered IR)."""
    x, y = a & _MASK32, b & _MASK32
    if op == "add":
        r = x + y
    elif op == "mul":
        r = x * y
    elif op in ("div", "mod"):
        if y == 0:
            return None
        r = x // y if op == "div" else x % y
    elif op == "xor":
        r = x ^ y
    elif op == "and":
        r = x & y
    elif op == "shr":
        if y >= 32:
            return None
        r = x >> y
    elif op == "sub":
        r = x - y
    elif op == "shl":
        if y >= 32:
            return None
        r = x << y
    elif op == "or":
        r = x | y
    elif op == "lt":
        r = int(x < y)
    else:
        return None
    r &= _MASK32
    return r - (1 << 32) if r >= 1 << 31 else r


_MASK32 = (1 << 32) - 1
_IDENTITY = {"add": 0, "mul": 1}    # x op identity == identity op x == x


def plan():
    return current_kernel().tiles


def guarded(builder, cond):
    """``with guarded(builder, cond):`` runs the body where ``cond`` holds (always when
    cond is None)."""
    return builder.if_then(cond) if cond is not None else contextlib.nullcontext()


def inline_asm(builder, text, constraints, args, ret=None):
    """A side-effecting PTX statement (``ret``: its result type, void when None)."""
    fnty = ir.FunctionType(ret or ir.VoidType(), [a.type for a in args])
    return builder.call(ir.InlineAsm(fnty, text, constraints, side_effect=True), args)


def intrinsic(builder, name, ret, argtys):
    """The declaration of an LLVM intrinsic in the builder's module."""
    fn = builder.module.globals.get(name)
    return fn or ir.Function(builder.module, ir.FunctionType(ret, argtys), name)


def opaque(builder, value):
    """``value`` through an inline-asm move: LLVM cannot see through it, so expressions
    of it stay where they are written instead of being reassociated or hoisted out of a
    loop as one live register each."""
    bits = value.type.width
    mov = ir.InlineAsm(ir.FunctionType(value.type, [value.type]), f"mov.b{bits} $0, $1;",
                       "=r,r" if bits == 32 else "=l,l")
    return builder.call(mov, [value])


def workgroup_barrier(builder):
    """AMDGPU: s_barrier with the workgroup's memory ordered around it (as HIP's
    __syncthreads)."""
    builder.fence("release", "workgroup")
    builder.call(intrinsic(builder, "llvm.amdgcn.s.barrier", ir.VoidType(), []), [])
    builder.fence("acquire", "workgroup")


def block_barrier(builder):
    if current_kernel().target.kind == "amdgpu":
        workgroup_barrier(builder)
        return
    builder.call(intrinsic(builder, "llvm.nvvm.barrier.cta.sync.aligned.all", ir.VoidType(),
                           [I32]), [I32(0)])


def tile_threads_barrier(builder):
    """A barrier among the threads that run the tile operations, inside one (a
    reduction's exchange through shared memory): the block's; in a warp-specialized
    kernel the consumers' named barrier 1 (``bar.sync 1, N``); in a kernel with its own
    ``T.ws`` roles the role's, ``1 + k`` of its warpgroup k (as ``warp_roles.py``'s
    barriers). Barrier 0 there would also wait for the other warpgroups, which may be
    waiting for these to release a stage: a deadlock once the pipeline is longer than its
    stages (TileLang's MLA decode example hung so)."""
    tiles = plan()
    if current_kernel().target.kind == "amdgpu" or not (tiles.ws_consumers or
                                                       tiles.role_threads):
        block_barrier(builder)
        return
    sync = intrinsic(builder, "llvm.nvvm.barrier.sync.cnt", ir.VoidType(), [I32, I32])
    if tiles.ws_consumers:
        builder.call(sync, [I32(1), I32(tiles.ws_consumers)])
        return
    tid = builder.call(intrinsic(builder, "llvm.nvvm.read.ptx.sreg.tid.x", I32, []), [])
    role = builder.udiv(tid, I32(tiles.role_threads))
    builder.call(sync, [builder.add(role, I32(1)), I32(tiles.role_threads)])


def unflatten(builder, flat, extents):
    """Row-major coordinates of a flat index over ``extents`` (ints or values of the
    flat index's type, i32 or i64)."""
    if not extents:
        return []
    coords, rest = [], flat
    for n in reversed(extents[1:]):
        n = n if isinstance(n, ir.Value) else flat.type(n)
        coords.append(builder.urem(rest, n))
        rest = builder.udiv(rest, n)
    coords.append(rest)
    return list(reversed(coords))


def rounds(context, builder, count):
    """This thread's share of ``count`` items dealt round-robin over the block:
    (item index, guard or None) for item ``tid + k·threads``; only the last round,
    when it is partial, needs the guard."""
    threads = plan().threads
    tid = thread_index(context, builder)
    for k in range(-(-count // threads)):
        item = builder.add(tid, I32(k * threads))
        partial = (k + 1) * threads > count
        yield item, builder.icmp_unsigned("<", item, I32(count)) if partial else None


def nonzero(builder, expr, env) -> ir.Value:
    """An i1: the index expression ``expr`` (0/1 valued) is not 0."""
    return builder.icmp_unsigned("!=", emit(builder, expr, env), I32(0))


def writer_guard(builder, ix, tid):
    """For stores out of a fragment: None when every element has one holder, else the
    i1 that this thread is the copy of a replicated element that writes."""
    return None if ix.writer is None else nonzero(builder, ix.writer, {"t": tid})


def fragment_slot(builder, ix, tid, s, writer=None, memo: SlotMemo | None = None):
    """(tile coordinates as i32 values, guard or None) of slot ``s`` of this thread of a
    fragment: the guard holds where the slot is an element of the tile (and, with a
    ``writer`` guard, where this thread writes it). ``memo``: one ``SlotMemo`` for the
    slots of a straight run (``emit``)."""
    env = {"t": tid, "s": s}
    coords = [emit(builder, c, env, memo) for c in ix.coords]
    guard = builder.icmp_unsigned("!=", emit(builder, ix.valid, env, memo), I32(0)) \
        if ix.valid is not None else None
    if writer is not None:
        guard = writer if guard is None else builder.and_(guard, writer)
    return coords, guard


def owned_elements(context, builder, ty, value):
    """(coords as i32 values, element pointer, guard or None) for each element of a
    tile this thread holds: its slots of a fragment, all of a local tile, its
    round-robin share of a shared tile."""
    import itertools
    t = plan().tile(ty.tile_name)
    tid = thread_index(context, builder)
    out = []
    if ty.kind == "fragment":
        memo = SlotMemo()
        for s in range(t.indexing.slots):
            coords, guard = fragment_slot(builder, t.indexing, tid, s, memo=memo)
            out.append((coords, builder.gep(value, [I32(s)]), guard))
        return out
    if ty.kind == "local":
        for cs in itertools.product(*(range(n) for n in t.shape)):
            coords = [I32(c) for c in cs]
            out.append((coords, builder.gep(value, [element_offset(builder, ty, coords)]), None))
        return out
    for flat, guard in rounds(context, builder, t.size):
        coords = unflatten(builder, flat, t.shape)
        out.append((coords, builder.gep(value, [element_offset(builder, ty, coords)],
                                        inbounds=True), guard))
    return out


def shared_base(builder) -> ir.Value:
    module = builder.module
    gv = module.globals.get(SMEM)
    if gv is None:
        gv = ir.GlobalVariable(module, ir.ArrayType(ir.IntType(8), 0), SMEM, addrspace=3)
        gv.linkage = "external"
        # TMA's swizzled boxes and wgmma's swizzle atoms want 1024-byte aligned shared
        # addresses (passes/tma.py, layout_inference._choose_gemm_engines)
        aligned = plan().tma_copies or any(g[0].engine == "wgmma" for g in plan().gemms.values())
        gv.align = 1024 if aligned else 16
    return gv


def shared_pointer(builder, tile, elem_type) -> ir.Value:
    """The first byte of a shared tile, typed as a pointer to its elements."""
    base = builder.gep(shared_base(builder), [I32(0), I32(tile.offset)], inbounds=True)
    return builder.bitcast(base, ir.PointerType(elem_type, 3))




def thread_index(context, builder, where_used=False) -> ir.Value:
    """This thread's index in the block. ``where_used``: for values derived from it that
    a loop would otherwise carry (a copy's chunk addresses, a fragment loop's
    coordinates): when the kernel's tiles already take more than ``STARVED`` registers per
    thread, the index is read where it is used, so LLVM does not hoist what is computed
    from it out of the loop (``thread_index_here``) and the values are recomputed in each
    iteration instead of held through it. Causal FlashAttention (244 words of fragments):
    124 B of spills become 72, 0.971 → 1.034 of FA2; the 128×128 GEMM (128 words) keeps
    its addresses, which recomputed cost it 3–8 % (H200, 2026-11-30)."""
    if where_used and plan().register_words() > STARVED:
        return context.thread_index_here(builder)
    return context.thread_index(builder)


@lower(markers.stub(markers.TILE), types.StringLiteral)
def tile_impl(context, builder, sig, args):
    ty: TileType = sig.return_type
    t = plan().tile(ty.tile_name)
    elem = context.get_data_type(ty.element)
    if ty.kind == "shared":
        return shared_pointer(builder, t, elem)
    # a view (T.reshape) of a fragment or local tile is its tile's registers: slot s of
    # the view holds what slot s of the tile holds (passes/layout_inference.py), and a
    # local tile is row-major under either name; one alloca per function for both
    root = t.view_of or t.name
    storages = _REGISTER_TILES.setdefault(builder.function, {}) if plan().viewed(root) else {}
    storage = storages.get(root)
    if storage is None:
        base = plan().tile(root)
        count = base.indexing.slots if ty.kind == "fragment" else base.size
        storage = cgutils.alloca_once(builder, ir.ArrayType(elem, count), name=root)
        storages[root] = storage
        if current_kernel().debug:
            # debug=True: every slot starts as all-ones bits (NaN, -1), as shared memory
            # does (nvptx.poison_shared): a read before a write is visible on the GPU too
            cgutils.memset(builder, storage,
                           ir.IntType(64)(context.get_abi_sizeof(elem) * count), 0xFF)
    return builder.bitcast(storage, ir.PointerType(elem))


# ir.Function -> {tile with views: its alloca}: a fragment or local tile and its views
# share one
_REGISTER_TILES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@lower(markers.stub(markers.REGION), types.Any, types.StringLiteral, types.Any, types.Any,
       types.StringLiteral)
def region_impl(context, builder, sig, args):
    ty: RegionType = sig.return_type
    region = cgutils.create_struct_proxy(ty)(context, builder)
    region.base = args[0]
    region.starts = args[2]
    n = len(ty.kinds)
    ends_ty = sig.args[3]
    if isinstance(ends_ty, types.BaseTuple):
        ends = list(zip(ends_ty.types, cgutils.unpack_tuple(builder, args[3], len(ends_ty))))
    else:
        ends = [(ends_ty, args[3])]
    # a slice with no end runs to the tensor's: the largest i64, clamped to the shape
    # where a fill of run-time extent reads it (copy.py)
    open_end = ir.Constant(ir.IntType(64), (1 << 63) - 1)
    stops = [context.cast(builder, v, t, types.int64)
             if isinstance(t, (types.Integer, types.Boolean)) else open_end
             for t, v in ends[:n]]
    stops += [open_end] * (n - len(stops))
    region.stops = context.make_tuple(builder, types.UniTuple(types.int64, n), stops)
    return region._getvalue()


def _indices(context, builder, index_ty, index):
    if isinstance(index_ty, types.BaseTuple):
        values = cgutils.unpack_tuple(builder, index, len(index_ty))
        tys = index_ty.types
    else:
        values, tys = [index], [index_ty]
    return [context.cast(builder, v, t, types.int32) for v, t in zip(values, tys)]


def element_offset(builder, ty: TileType, coords) -> ir.Value:
    t = plan().tile(ty.tile_name)
    layout = t.layout if ty.kind == "shared" else _row_major(t.shape)
    names = [Var(f"c{k}") for k in range(len(coords))]
    return emit(builder, layout_offset(layout, names), {n.name: c for n, c in zip(names, coords)})


def _row_major(shape):
    return row_major(shape)


def _element_pointer(context, builder, ty, tile, index_ty, index):
    coords = _indices(context, builder, index_ty, index)
    if current_kernel().debug:
        for k, (c, n) in enumerate(zip(coords, ty.shape)):
            emit_bounds_check(builder, builder.sext(c, ir.IntType(64)), ir.IntType(64)(n),
                              f"of {ty.kind} tile {ty.tile_name}, dimension {k}")
    return builder.gep(tile, [element_offset(builder, ty, coords)], inbounds=True)


@lower(operator.getitem, TileType, types.Any)
def tile_getitem(context, builder, sig, args):
    ty, index_ty = sig.args
    ptr = _element_pointer(context, builder, ty, args[0], index_ty, args[1])
    return context.unpack_value(builder, ty.element, ptr, align=ty.dtype.itemsize)


@lower(operator.setitem, TileType, types.Any, types.Any)
def tile_setitem(context, builder, sig, args):
    ty, index_ty, _ = sig.args
    ptr = _element_pointer(context, builder, ty, args[0], index_ty, args[1])
    context.pack_value(builder, ty.element, args[2], ptr, align=ty.dtype.itemsize)
    return context.get_dummy_value()


# -- fragments ------------------------------------------------------------------------

@lower(markers.stub(markers.FRAG_GET), TileType, types.int32)
def frag_get_impl(context, builder, sig, args):
    ty = sig.args[0]
    ptr = builder.gep(args[0], [args[1]], inbounds=True)
    return context.unpack_value(builder, ty.element, ptr)


@lower(markers.stub(markers.FRAG_SET), TileType, types.int32, types.Any)
def frag_set_impl(context, builder, sig, args):
    ty = sig.args[0]
    ptr = builder.gep(args[0], [args[1]], inbounds=True)
    context.pack_value(builder, ty.element, args[2], ptr)
    return context.get_dummy_value()


def _loop_indexing(sig):
    lid = sig.args[0].literal_value
    return plan().loops[lid][1]


@lower(markers.stub(markers.FRAG_INDEX), types.StringLiteral, types.int32)
def frag_index_impl(context, builder, sig, args):
    """The tile coordinates of a fragment loop's slot (from the thread index read where
    used in a register-starved kernel: ``thread_index``)."""
    ix = _loop_indexing(sig)
    env = {"t": thread_index(context, builder, where_used=True), "s": args[1]}
    coords = [emit(builder, c, env) for c in ix.coords]
    if len(coords) == 1:
        return coords[0]
    return context.make_tuple(builder, sig.return_type, coords)


@lower(markers.stub(markers.FRAG_VALID), types.StringLiteral, types.int32)
def frag_valid_impl(context, builder, sig, args):
    ix = _loop_indexing(sig)
    if ix.valid is None:
        return ir.IntType(1)(1)
    env = {"t": thread_index(context, builder, where_used=True), "s": args[1]}
    return builder.icmp_unsigned("!=", emit(builder, ix.valid, env), I32(0))


@lower(markers.stub(markers.FRAG_WRITER), types.StringLiteral)
def frag_writer_impl(context, builder, sig, args):
    """Whether this thread is the copy that stores, in a loop whose layout several
    threads hold copies of (every copy runs the iterations; one stores)."""
    guard = writer_guard(builder, _loop_indexing(sig),
                         thread_index(context, builder, where_used=True))
    return ir.IntType(1)(1) if guard is None else guard


# -- clear / fill -----------------------------------------------------------------------

def fill_tile(context, builder, ty: TileType, tile, value_ty, value) -> None:
    """Every element of ``tile`` (this thread's share of it) := value."""
    v = context.cast(builder, value, value_ty, ty.element)
    ix = plan().tile(ty.tile_name).indexing if ty.kind == "fragment" else None
    if ix is not None and ix.valid is None:
        # every slot holds an element: no coordinates needed (an accumulator's clear)
        for s in range(ix.slots):
            context.pack_value(builder, ty.element, v, builder.gep(tile, [I32(s)]),
                               align=ty.dtype.itemsize)
        return
    for _, ptr, guard in owned_elements(context, builder, ty, tile):
        with guarded(builder, guard):
            context.pack_value(builder, ty.element, v, ptr, align=ty.dtype.itemsize)


def _fill_target(sig, what):
    ty = sig.args[0]
    if not isinstance(ty, TileType):
        raise CompileError(f"{what} of a region is not supported: pass the whole tile")
    return ty


@lower(markers.stub(markers.CONVERT_LAYOUT), *(types.StringLiteral,) * 4)
def convert_layout_impl(context, builder, sig, args):
    """The IR dump's mark of a layout conversion (passes/layout_conversion.py): the
    copies through shared memory that follow it do the work."""
    return context.get_dummy_value()


@lower(markers.stub(markers.DP4A_OPERANDS), types.Any, types.Any, types.Any)
def dp4a_operands_impl(context, builder, sig, args):
    """T.dp4a's dtype check: all in the typing."""
    return context.get_dummy_value()


@lower(markers.stub(markers.SYNC))
def sync_impl(context, builder, sig, args):
    if plan().proxy_fence:          # generic writes of tiles wgmma reads (async_proxy.py)
        fence = ir.InlineAsm(ir.FunctionType(ir.VoidType(), []),
                             "fence.proxy.async.shared::cta;", "~{memory}", side_effect=True)
        builder.call(fence, [])
    block_barrier(builder)
    return context.get_dummy_value()


def _register_fill():
    @lower(T.clear, TileType)
    def clear_impl(context, builder, sig, args):
        ty = _fill_target(sig, "T.clear")
        fill_tile(context, builder, ty, args[0], types.int32, I32(0))
        return context.get_dummy_value()

    @lower(T.fill, TileType, types.Any)
    def fill_impl(context, builder, sig, args):
        ty = _fill_target(sig, "T.fill")
        fill_tile(context, builder, ty, args[0], sig.args[1], args[1])
        return context.get_dummy_value()


_register_fill()
__all__ = ["emit", "shared_pointer", "element_offset", "BinOp"]


@lower(markers.stub(markers.FRAG_LOOP), types.StringLiteral)
def frag_loop_impl(context, builder, sig, args):
    # the slot count lives in the type; the value carries nothing
    return context.get_dummy_value()


@lower(markers.stub(markers.STAGE), TileType, types.int32)
def stage_impl(context, builder, sig, args):
    """Version ``index`` of a pipelined shared tile."""
    ty = sig.args[0]
    t = plan().tile(ty.tile_name)
    step = I32(t.stage_bytes // t.dtype.itemsize)
    return builder.gep(args[0], [builder.mul(args[1], step)], inbounds=True)


@lower(markers.stub(markers.SWIZZLE_BLOCKS), types.IntegerLiteral, types.BooleanLiteral)
def swizzle_blocks_impl(context, builder, sig, args):
    """(bx, by) after T.use_swizzle: panels of ``panel`` block rows walked column-wise."""
    panel = sig.args[0].literal_value
    row = sig.args[1].literal_value
    bx, by = context.block_index(builder, 0), context.block_index(builder, 1)
    gx, gy = context.grid_dim(builder, 0), context.grid_dim(builder, 1)
    if not row:
        bx, by, gx, gy = by, bx, gy, gx
    pid = builder.add(builder.mul(by, gx), bx)
    width = builder.mul(I32(panel), gx)
    group = builder.udiv(pid, width)
    first = builder.mul(group, I32(panel))
    left = builder.sub(gy, first)
    rows = builder.select(builder.icmp_unsigned("<", left, I32(panel)), left, I32(panel))
    inner = builder.urem(pid, width)
    new_y = builder.add(first, builder.urem(inner, rows))
    new_x = builder.udiv(inner, rows)
    if not row:
        new_x, new_y = new_y, new_x
    return context.make_tuple(builder, sig.return_type, [new_x, new_y])


def _register_attributes():
    @lower_getattr(TileType, "dtype")
    def tile_dtype(context, builder, ty, value):
        return context.get_dummy_value()

    @lower_getattr(TileType, "shape")
    def tile_shape(context, builder, ty, value):
        return context.make_tuple(builder, types.Tuple(tuple(types.IntegerLiteral(n)
                                                             for n in ty.shape)),
                                  [ir.Constant(ir.IntType(64), n) for n in ty.shape])


_register_attributes()


def uniform_slot(frag, tables, thread, row, col, what: str, instruction: str) -> int:
    """The fragment slot that holds element (row[i], col[i]) at thread[i] for every i (numpy
    arrays: one instruction register at every lane of every warp): checked that each
    thread holds its element and that the slot is the same everywhere. ``tables`` is
    ``fragment_tables(frag)``; the mma.sync (gemm.py) and MFMA
    (mfma.py) lowerings share this check."""
    holder, slot_of = tables
    k = thread - holder[row, col]
    held = (k >= 0) & (k % frag.base_threads == 0) & (k // frag.base_threads < frag.replicate)
    if not held.all():
        i = int(np.argmin(held))
        raise CompileError(f"T.gemm: {what}'s layout does not give thread {thread[i]} "
                           f"element ({row[i]}, {col[i]})")
    s = slot_of[row, col]
    if (s != s[0]).any():
        raise CompileError(f"T.gemm: {what}'s layout puts one {instruction} register at "
                           f"different slots")
    return int(s[0])
