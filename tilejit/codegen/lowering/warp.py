"""Lowering of the warp primitives (``language/warp.py``), NVPTX: ``shfl.sync`` with the
call's mask (the full one by default), values moved as ``reductions.exchange_value`` moves them;
the reductions are butterflies (lane ``l`` combines with ``l ^ 16``, ``l ^ 8`` … ``l ^ 1``:
every lane ends with the warp's result, in the order the simulator reproduces)."""
from __future__ import annotations

from llvmlite import ir
from numba.core import types

from tilejit import language as T
from tilejit.errors import CompileError
from tilejit.ir.kernel_config import current_kernel
from tilejit.codegen.lowering.reductions import exchange_value, present_lanes
from tilejit.codegen.lowering.registry import lower
from tilejit.codegen.lowering.scalar import _min_max
from tilejit.codegen.lowering.tiles import intrinsic

I32, I64 = ir.IntType(32), ir.IntType(64)
FULL = 0xFFFFFFFF


def _whole_cuda_warps(what, kind="warp shuffles", partial=False):
    """A CUDA target, and whole warps unless ``partial``: a shuffle in a block whose last
    warp is partial (16 threads, 48) runs there with its mask cut to the lanes the warp
    has (``reductions.present_lanes``); a lane reading one it does not have reads an
    undefined value, which the simulator reports. The block's thread count."""
    config = current_kernel()
    if config.target.kind == "amdgpu":
        raise CompileError(f"T.{what}: {kind} are built for CUDA only (on AMDGPU a "
                           f"wave is 64 lanes; not built yet)")
    threads = config.tiles.block_threads
    if threads % 32 and not partial:
        raise CompileError(f"T.{what} needs whole warps (its mask names all 32 lanes), and "
                           f"the block has {threads} threads: use a multiple of 32")
    return threads


def _shuffle(builder, kind, v, lane, clamp, mask=None):
    """``v`` of the lane ``shfl.sync.<kind>`` names (``lane``, ``clamp``, ``mask``: i32;
    the full mask when None)."""
    fn = intrinsic(builder, f"llvm.nvvm.shfl.sync.{kind}.i32", I32, [I32] * 4)
    mask = ir.Constant(I32, FULL) if mask is None else mask
    return exchange_value(builder, v, lambda x: builder.call(fn, [mask, x, lane, clamp]))


def _as_i32(builder, value):
    if value.type == I32:
        return value
    return builder.trunc(value, I32) if value.type.width > 32 else builder.zext(value, I32)


def _clamp(builder, kind, width):
    """The ``c`` operand: the segment mask ``(32 - width) << 8`` and, except for ``up``,
    the highest lane index 31."""
    width = builder.trunc(width, I32) if width.type != I32 else width
    seg = builder.shl(builder.sub(I32(32), width), I32(8))
    return seg if kind == "up" else builder.or_(seg, I32(0x1F))


def _combine(context, builder, name, ty, a, b):
    if name == "sum":
        return builder.fadd(a, b) if isinstance(ty, types.Float) else builder.add(a, b)
    if name in ("max", "min"):
        return _min_max(context, builder, ty, a, b, name == "max")
    return builder.and_(a, b) if name == "bitand" else builder.or_(a, b)


def _register_reductions():
    for name in ("sum", "max", "min", "bitand", "bitor"):
        fn = getattr(T, f"warp_reduce_{name}")

        @lower(fn, types.Any)
        def impl(context, builder, sig, args, name=name):
            _whole_cuda_warps(f"warp_reduce_{name}")
            ty, v = sig.args[0], args[0]
            clamp = I32(0x1F)
            for offset in (16, 8, 4, 2, 1):
                other = _shuffle(builder, "bfly", v, I32(offset), clamp)
                v = _combine(context, builder, name, ty, v, other)
            return v


def _register_shuffles():
    kinds = {T.shfl_xor: "bfly", T.shfl_down: "down", T.shfl_up: "up", T.shfl_sync: "idx"}
    for fn, kind in kinds.items():
        def impl(context, builder, sig, args, kind=kind, fn=fn):
            threads = _whole_cuda_warps(fn.__name__, partial=True)
            lane = builder.trunc(args[1], I32)
            width = args[2] if len(args) > 2 else I64(32)
            # the lanes of the mask run the shuffle together (half-warps apart in
            # divergent code: ``mask=0xFFFF`` and ``0xFFFF0000``)
            mask = _as_i32(builder, args[3]) if len(args) > 3 else None
            if threads % 32:
                present = present_lanes(builder)
                mask = present if mask is None else builder.and_(mask, present)
            return _shuffle(builder, kind, args[0], lane, _clamp(builder, kind, width), mask)
        for n in (2, 3, 4):
            lower(fn, *[types.Any] * n)(impl)


_register_reductions()
_register_shuffles()


# --- votes and predicate barriers (PTX ISA: "vote.sync", "activemask", "bar.red",
# "fns"); a vote's result is the same in every lane of its mask

I1 = ir.IntType(1)


def _cuda_only(what, kind):
    if current_kernel().target.kind == "amdgpu":
        raise CompileError(f"T.{what}: {kind} are built for CUDA only (on AMDGPU a wave is "
                           f"64 lanes; not built yet)")


def _truth(builder, ty, value):
    """A predicate (integer or boolean) as an i1."""
    if isinstance(ty, types.Boolean):
        return value if value.type == I1 else builder.trunc(value, I1)
    return builder.icmp_unsigned("!=", value, ir.Constant(value.type, 0))


def _mask(builder, sig, args):
    return builder.trunc(args[1], I32) if len(args) > 1 else I32(FULL)


def _register_votes():
    for fn, mode in ((T.any_sync, "any"), (T.all_sync, "all")):
        def impl(context, builder, sig, args, mode=mode, fn=fn):
            _whole_cuda_warps(fn.__name__, "warp votes")
            vote = intrinsic(builder, f"llvm.nvvm.vote.{mode}.sync", I1, [I32, I1])
            bit = builder.call(vote, [_mask(builder, sig, args),
                                      _truth(builder, sig.args[0], args[0])])
            return builder.zext(bit, I32)
        lower(fn, types.Any)(impl)
        lower(fn, types.Any, types.Any)(impl)

    def ballot(context, builder, sig, args, name="ballot_sync"):
        _whole_cuda_warps(name, "warp votes")
        vote = intrinsic(builder, "llvm.nvvm.vote.ballot.sync", I32, [I32, I1])
        bits = builder.call(vote, [_mask(builder, sig, args),
                                   _truth(builder, sig.args[0], args[0])])
        return builder.zext(bits, I64)
    lower(T.ballot_sync, types.Any)(ballot)
    lower(T.ballot_sync, types.Any, types.Any)(ballot)
    lower(T.ballot, types.Any)(lambda c, b, s, a: ballot(c, b, s, a, "ballot"))

    for fn, mode in ((T.match_any_sync, "any"), (T.match_all_sync, "all")):
        def match(context, builder, sig, args, mode=mode, fn=fn):
            _whole_cuda_warps(fn.__name__, "warp matches")
            value = args[0]
            if isinstance(value.type, (ir.FloatType, ir.DoubleType)):
                value = builder.bitcast(value, ir.IntType(
                    64 if isinstance(value.type, ir.DoubleType) else 32))
            width = value.type.width
            mask = _mask(builder, sig, args)
            if mode == "any":
                found = intrinsic(builder, f"llvm.nvvm.match.any.sync.i{width}", I32,
                                  [I32, value.type])
                return builder.call(found, [mask, value])
            found = intrinsic(builder, f"llvm.nvvm.match.all.sync.i{width}p",
                              ir.LiteralStructType([I32, I1]), [I32, value.type])
            return builder.extract_value(builder.call(found, [mask, value]), 0)
        lower(fn, types.Any)(match)
        lower(fn, types.Any, types.Any)(match)

    def sync_warp(context, builder, sig, args):
        _whole_cuda_warps("sync_warp", "warp barriers")
        mask = builder.trunc(args[0], I32) if args else I32(FULL)
        builder.call(intrinsic(builder, "llvm.nvvm.bar.warp.sync", ir.VoidType(), [I32]), [mask])
        return context.get_dummy_value()
    lower(T.sync_warp)(sync_warp)
    lower(T.sync_warp, types.Any)(sync_warp)

    @lower(T.activemask)
    def activemask(context, builder, sig, args):
        _whole_cuda_warps("activemask", "warp votes")
        return builder.zext(builder.call(intrinsic(builder, "llvm.nvvm.activemask", I32, []),
                                         []), I64)


def _register_predicate_barriers():
    # barrier 0, the block's, all its threads (bar.red.{popc,and,or} 0, p)
    for fn, op, ret in ((T.syncthreads_count, "popc", I32), (T.syncthreads_and, "and", I1),
                        (T.syncthreads_or, "or", I1)):
        @lower(fn, types.Any)
        def impl(context, builder, sig, args, fn=fn, op=op, ret=ret):
            _cuda_only(fn.__name__, "predicate block barriers")
            bar = intrinsic(builder, f"llvm.nvvm.barrier.cta.red.{op}.aligned.all", ret,
                            [I32, I1])
            out = builder.call(bar, [I32(0), _truth(builder, sig.args[0], args[0])])
            return out if ret == I32 else builder.zext(out, I32)


def _register_bit_searches():
    @lower(T.__ffs, types.Any)
    def ffs(context, builder, sig, args):
        v = args[0]
        if v.type == I1:
            v = builder.zext(v, I32)
        cttz = intrinsic(builder, f"llvm.cttz.i{v.type.width}", v.type, [v.type, I1])
        first = builder.add(builder.call(cttz, [v, ir.Constant(I1, 1)]), ir.Constant(v.type, 1))
        zero = builder.icmp_unsigned("==", v, ir.Constant(v.type, 0))
        first = builder.select(zero, ir.Constant(v.type, 0), first)
        width = v.type.width
        return first if width == 32 else (builder.trunc(first, I32) if width > 32 else
                                          builder.zext(first, I32))

    @lower(T.__fns, types.Any, types.Any, types.Any)
    def fns(context, builder, sig, args):
        _cuda_only("__fns", "PTX's bit searches")
        fnty = ir.FunctionType(I32, [I32] * 3)
        asm = ir.InlineAsm(fnty, "fns.b32 $0, $1, $2, $3;", "=r,r,r,r")
        return builder.call(asm, [builder.trunc(a, I32) for a in args])


_register_votes()
_register_predicate_barriers()
_register_bit_searches()
