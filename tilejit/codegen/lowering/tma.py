"""Lowering of the TMA pipeline's operations (``passes/tma.py``), NVPTX only.

mbarriers live in the shared buffer at ``plan().mbarrier_offset``, 8 bytes each; their
operands, like every shared address here, are 32-bit (``--nvptx-short-ptr``). The PTX is
inline assembly (PTX ISA 8.0, sm_90): ``mbarrier.init`` / ``arrive.expect_tx`` /
``try_wait.parity`` on ``.shared::cta`` and ``cp.async.bulk.tensor`` completing on the
mbarrier (``complete_tx::bytes``), whose tensor-map operand is the generic address of
the hidden ``.param`` the entry declares (``targets/nvptx.build_entry``).
"""
from __future__ import annotations


from llvmlite import ir
from numba.core import types

from tilejit.ir import markers
from tilejit.codegen.typing.tiles import TileType
from tilejit.codegen.typing.types import TensorMapType
from tilejit.codegen.lowering.copy import operands
from tilejit.codegen.lowering.copy_sides import describe
from tilejit.codegen.lowering.registry import lower
from tilejit.codegen.lowering.tiles import I32, plan, shared_base
from tilejit.codegen.lowering.cluster import cluster_rank

I64 = ir.IntType(64)


def _asm(builder, text, constraints, args):
    """A side-effecting, memory-clobbering PTX statement with i32/i64 operands."""
    fnty = ir.FunctionType(ir.VoidType(), [a.type for a in args])
    clobbers = ",~{memory}"
    constraints = constraints + clobbers if constraints else clobbers[1:]
    builder.call(ir.InlineAsm(fnty, text, constraints, side_effect=True), args)


def _shared_address(builder, pointer):
    return builder.ptrtoint(pointer, I32)


def mbarrier(builder, slot) -> ir.Value:
    """The 32-bit shared address of mbarrier ``slot`` (an i32 value or an int)."""
    base = builder.ptrtoint(shared_base(builder), I32)
    slot = I32(slot) if isinstance(slot, int) else slot
    return builder.add(base, builder.add(I32(plan().mbarrier_offset), builder.mul(slot, I32(8))))


def _thread_zero(context, builder):
    return builder.icmp_unsigned("==", context.thread_index(builder), I32(0))


def _issuer(context, builder):
    """The thread that issues TMA copies: 0, or a warp-specialized kernel's producer."""
    return builder.icmp_unsigned("==", context.thread_index(builder), I32(plan().tma_issuer))


@lower(markers.stub(markers.TMA_INIT), types.IntegerLiteral, types.IntegerLiteral,
       types.IntegerLiteral, target="cuda")
def tma_init_impl(context, builder, sig, args):
    """Thread 0 initializes mbarriers first … first + count - 1 to expect ``arrivals``
    arrivals per phase, and fences the initialization (the pass puts a block barrier
    after it, before any thread waits)."""
    first, count, arrivals = (t.literal_value for t in sig.args)
    block_thread = context.block_thread_index(builder)     # thread 0 of the block
    with builder.if_then(builder.icmp_unsigned("==", block_thread, I32(0))):
        for j in range(count):
            _asm(builder, "mbarrier.init.shared::cta.b64 [$0], $1;", "r,r",
                 [mbarrier(builder, first + j), I32(arrivals)])
        _asm(builder, "fence.mbarrier_init.release.cluster;", "", [])
    return context.get_dummy_value()


@lower(markers.stub(markers.TMA_FENCE), target="cuda")
def tma_fence_impl(context, builder, sig, args):
    """This thread's earlier shared-memory writes are ordered before later TMA writes
    (the async proxy) of the same bytes."""
    _asm(builder, "fence.proxy.async.shared::cta;", "", [])
    return context.get_dummy_value()


def _boxes(builder, copy, starts):
    """(byte offset in the tile, the box's coordinates innermost first) of each box of a
    TMA copy whose tensor region starts at ``starts`` (outermost first, i64)."""
    coords = [builder.trunc(s, I32) for s in reversed(starts)]
    for offset, delta in copy.boxes:
        inner = builder.add(coords[0], I32(delta)) if delta else coords[0]
        yield offset, [inner, *coords[1:]]


@lower(markers.stub(markers.TMA_LOAD), types.Any, TileType, types.int32, TensorMapType,
       types.StringLiteral, target="cuda")
def tma_load_impl(context, builder, sig, args):
    """Thread 0: expect the copy's bytes on the stage's mbarrier (one arrival), then one
    ``cp.async.bulk.tensor`` per box at the region's start (coordinates innermost first;
    TMA zero-fills what lies outside the tensor)."""
    _load(context, builder, sig, args, _issuer,
          "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;")
    return context.get_dummy_value()


@lower(markers.stub(markers.TMA_EXPECT_LOAD), types.Any, TileType, types.int32, TensorMapType,
       types.StringLiteral, target="cuda")
def tma_expect_load_impl(context, builder, sig, args):
    """``T.tma_copy``: the first thread of its warpgroup role adds the copy's bytes to the
    mbarrier's phase without arriving (the role's ``T.mbarrier_arrive`` does), then
    issues the boxes as ``tma_load`` does."""
    _load(context, builder, sig, args, _thread_zero,
          "mbarrier.expect_tx.shared::cta.b64 [$0], $1;")
    return context.get_dummy_value()


def _load(context, builder, sig, args, issuer, expect):
    # the boxes say where in the tile the bytes go (all of it, or a band of its
    # columns: tma.py's box_plan), the source where they come from
    src = describe(context, builder, sig.args[0], args[0])
    dst = describe(context, builder, sig.args[1], args[1])
    copy = plan().tma_copies[sig.args[4].literal_value]
    bar = mbarrier(builder, args[2])
    tensor_map = builder.ptrtoint(args[3], I64)
    with builder.if_then(issuer(context, builder)):
        _asm(builder, expect, "r,r", [bar, I32(copy.nbytes)])
        destination = _shared_address(builder, dst.value)
        rank = copy.rank
        places = ", ".join(f"${2 + d}" for d in range(rank))
        text = (f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.tile."
                f"mbarrier::complete_tx::bytes [$0], [$1, {{{places}}}], [${2 + rank}];")
        constraints = "r,l," + ",".join(["r"] * rank) + ",r"
        if copy.multicast and plan().multicast:
            _multicast_boxes(builder, copy, src.starts, destination, tensor_map, bar)
            return
        for offset, coords in _boxes(builder, copy, src.starts):
            _asm(builder, text, constraints,
                 [builder.add(destination, I32(offset)), tensor_map, *coords, bar])


def _multicast_boxes(builder, copy, starts, destination, tensor_map, bar):
    """The boxes of a ``T.copy_cluster`` load, each issued by one block of its mask (in
    turn: box i by the mask's i-th rank, modulo) into the same offsets of every block of
    the mask, completing on each one's mbarrier at this one's offset. Every block of the
    mask expected the whole copy's bytes."""
    ranks = [r for r in range(copy.multicast.bit_length()) if copy.multicast >> r & 1]
    rank = cluster_rank(builder)
    places = ", ".join(f"${2 + d}" for d in range(copy.rank))
    text = (f"cp.async.bulk.tensor.{copy.rank}d.shared::cluster.global.tile."
            f"mbarrier::complete_tx::bytes.multicast::cluster [$0], [$1, {{{places}}}], "
            f"[${2 + copy.rank}], ${3 + copy.rank};")
    constraints = "r,l," + ",".join(["r"] * copy.rank) + ",r,h"
    mask = ir.Constant(ir.IntType(16), copy.multicast)
    for i, (offset, coords) in enumerate(_boxes(builder, copy, starts)):
        mine = builder.icmp_unsigned("==", rank, I32(ranks[i % len(ranks)]))
        with builder.if_then(mine):
            _asm(builder, text, constraints,
                 [builder.add(destination, I32(offset)), tensor_map, *coords, bar, mask])


@lower(markers.stub(markers.TMA_WAIT), types.int32, types.int32, types.BooleanLiteral,
       target="cuda")
def tma_wait_impl(context, builder, sig, args):
    """Every thread (or thread 0 alone) spins until mbarrier ``slot`` completes the phase
    of ``parity``."""
    text = ("{ .reg .pred tjp; TJW${:uid}: mbarrier.try_wait.parity.shared::cta.b64 tjp, "
            "[$0], $1; @!tjp bra TJW${:uid}; }")
    bar = mbarrier(builder, args[0])
    if sig.args[2].literal_value:
        with builder.if_then(_thread_zero(context, builder)):
            _asm(builder, text, "r,r", [bar, args[1]])
    else:
        _asm(builder, text, "r,r", [bar, args[1]])
    return context.get_dummy_value()


@lower(markers.stub(markers.TMA_STORE), TileType, types.Any, TensorMapType,
       types.StringLiteral, target="cuda")
def tma_store_impl(context, builder, sig, args):
    """Thread 0: one ``cp.async.bulk.tensor`` store per box of the tile to the region's
    start, then ``commit_group`` (TMA clips the boxes at the tensor's edges). The barrier
    pass put every writer's proxy fence and a barrier before it, and a ``tma_store_wait``
    before the next barrier."""
    src, dst, _ = operands(context, builder, sig.args[:2], args[:2])
    copy = plan().tma_copies[sig.args[3].literal_value]
    tensor_map = builder.ptrtoint(args[2], I64)
    with builder.if_then(_thread_zero(context, builder)):
        source = _shared_address(builder, src.value)
        rank = copy.rank
        places = ", ".join(f"${1 + d}" for d in range(rank))
        text = (f"cp.async.bulk.tensor.{rank}d.global.shared::cta.tile.bulk_group "
                f"[$0, {{{places}}}], [${1 + rank}];")
        constraints = "l," + ",".join(["r"] * rank) + ",r"
        for offset, coords in _boxes(builder, copy, dst.starts):
            _asm(builder, text, constraints,
                 [tensor_map, *coords, builder.add(source, I32(offset))])
        _asm(builder, "cp.async.bulk.commit_group;", "", [])
    return context.get_dummy_value()


@lower(markers.stub(markers.TMA_STORE_WAIT), target="cuda")
def tma_store_wait_impl(context, builder, sig, args):
    """Thread 0 waits until TMA has read the tiles it stores: before the barrier after
    which they may be written again, and at the kernel's end (the block's shared memory
    must outlive the reads). Nothing in flight: it returns at once."""
    with builder.if_then(_thread_zero(context, builder)):
        _asm(builder, "cp.async.bulk.wait_group.read 0;", "", [])
    return context.get_dummy_value()
