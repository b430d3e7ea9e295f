"""Lowering of the warp primitives (``language/warp.py``), NVPTX: ``shfl.sync`` with the
full mask, values moved as ``reductions.exchange_value`` moves them;
the reductions are butterflies (lane ``l`` combines with ``l ^ 16``, ``l ^ 8`` … ``l ^ 1``:
every lane ends with the warp's result, in the order the simulator reproduces)."""
from __future__ import annotations

from llvmlite import ir
from numba.core import types

from tilejit import language as T
from tilejit.errors import CompileError
from tilejit.ir.kernel_config import current_kernel
from tilejit.codegen.lowering.reductions import exchange_value
from tilejit.codegen.lowering.registry import lower
from tilejit.codegen.lowering.scalar import _min_max
from tilejit.codegen.lowering.tiles import intrinsic

I32, I64 = ir.IntType(32), ir.IntType(64)
FULL = 0xFFFFFFFF


def _whole_cuda_warps(what):
    config = current_kernel()
    if config.target.kind == "amdgpu":
        raise CompileError(f"T.{what}: warp shuffles are built for CUDA only (on AMDGPU a "
                           f"wave is 64 lanes; not built yet)")
    threads = config.tiles.block_threads
    if threads % 32:
        raise CompileError(f"T.{what} needs whole warps (its mask names all 32 lanes), and "
                           f"the block has {threads} threads: use a multiple of 32")


def _shuffle(builder, kind, v, lane, clamp):
    """``v`` of the lane ``shfl.sync.<kind>`` names (``lane``, ``clamp``: i32)."""
    fn = intrinsic(builder, f"llvm.nvvm.shfl.sync.{kind}.i32", I32, [I32] * 4)
    return exchange_value(builder, v,
                          lambda x: builder.call(fn, [ir.Constant(I32, FULL), x, lane, clamp]))


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
            _whole_cuda_warps(fn.__name__)
            lane = builder.trunc(args[1], I32)
            width = args[2] if len(args) > 2 else I64(32)
            return _shuffle(builder, kind, args[0], lane, _clamp(builder, kind, width))
        for n in (2, 3, 4):
            lower(fn, *[types.Any] * n)(impl)


_register_reductions()
_register_shuffles()
