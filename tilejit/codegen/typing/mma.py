"""Typing of the warp instructions ``TensorCoreIntrinEmitter``'s methods expand to
(``frontend/mma_emitter_calls.py``): ``__tj_ldmatrix(local, offset, shared, row, col,
count, trans)`` and ``__tj_mma_sync(C, c_off, A, a_off, B, b_off)``, on ``T.alloc_local``
arrays at compile-time offsets. The checks name the emitter's method and the tiles."""
from __future__ import annotations

from numba.core import errors, types
from numba.core.typing import signature
from numba.core.typing.templates import AbstractTemplate

from tilejit.ir import markers
from tilejit.ir.kernel_config import current_kernel
from tilejit.codegen.typing.templates import infer_global
from tilejit.codegen.typing.tiles import TileType

# A/B dtype -> the accumulator dtypes mma.sync takes, and the operands' elements per lane
_MMA = {"float16": (("float32", "float16"), 8, 4), "bfloat16": (("float32",), 8, 4),
        "int8": (("int32",), 16, 8)}
_C_SLOTS = 4


def _nvidia(method: str) -> None:
    target = current_kernel().target
    if target.kind == "amdgpu":
        raise errors.TypingError(
            f"TensorCoreIntrinEmitter.{method}: the emitter is NVIDIA-only (ldmatrix and "
            f"mma.sync); on AMDGPU ({target.arch}) use T.gemm, which runs on MFMA")
    if target.kind == "cuda" and target.sm < 80:
        raise errors.TypingError(
            f"TensorCoreIntrinEmitter.{method}: mma.sync.m16n8k16 needs sm_80 or later, the "
            f"target is {target.arch}")


def _size(tile: TileType) -> int:
    n = 1
    for e in tile.shape:
        n *= e
    return n


def _local(ty, what: str, method: str) -> TileType:
    if not (isinstance(ty, TileType) and ty.kind == "local"):
        raise errors.TypingError(f"TensorCoreIntrinEmitter.{method}: {what} must be a "
                                 f"T.alloc_local array, got {ty}")
    return ty


def _offset(ty, what: str) -> int:
    if not isinstance(ty, types.IntegerLiteral):
        raise errors.TypingError(f"{what}: the register offset must be a constant, got {ty}")
    return ty.literal_value


def _fits(tile: TileType, offset: int, count: int, method: str, what: str):
    if tile.ndim != 1 or offset + count > _size(tile):
        raise errors.TypingError(
            f"TensorCoreIntrinEmitter.{method}: {what} {tile.tile_name} (shape "
            f"{list(tile.shape)}) is too small: it writes elements {offset} to "
            f"{offset + count - 1} of a 1-d array")


@infer_global(markers.stub(markers.LDMATRIX))
class LdmatrixTemplate(AbstractTemplate):
    def generic(self, args, kws):
        local, offset, shared, row, col, count, trans = args
        method = "ldmatrix_a/ldmatrix_b"
        _nvidia(method)
        _local(local, "the local array", method)
        if not (isinstance(shared, TileType) and shared.kind == "shared" and shared.ndim == 2):
            raise errors.TypingError(f"TensorCoreIntrinEmitter.{method}: the shared operand "
                                     f"must be a 2-d shared tile (T.alloc_shared), got {shared}")
        if shared.dtype != local.dtype:
            raise errors.TypingError(
                f"TensorCoreIntrinEmitter.{method}: {shared.tile_name} holds "
                f"{shared.dtype.name} and {local.tile_name} {local.dtype.name}: expected the "
                "emitter's operand dtype in both")
        if shared.dtype.name not in _MMA:
            raise errors.TypingError(f"TensorCoreIntrinEmitter.{method}: operands of "
                                     f"{shared.dtype.name} are not built")
        if not (isinstance(row, types.Integer) and isinstance(col, types.Integer)):
            raise errors.TypingError(f"TensorCoreIntrinEmitter.{method}: the k step must be "
                                     f"an integer, got {row}, {col}")
        if not (isinstance(count, types.IntegerLiteral)
                and isinstance(trans, (types.BooleanLiteral, types.IntegerLiteral))):
            raise errors.TypingError(f"{method}: the matrix count and .trans must be constants")
        n = count.literal_value * 4 // shared.dtype.itemsize
        _fits(local, _offset(offset, method), n, method, "the local array")
        return signature(types.none, local, offset, shared, types.int32, types.int32, count,
                         trans)


@infer_global(markers.stub(markers.MMA_SYNC))
class MmaSyncTemplate(AbstractTemplate):
    def generic(self, args, kws):
        c, c_off, a, a_off, b, b_off = args
        _nvidia("mma")
        for ty, what in ((c, "C_local_buf"), (a, "A_local_buf"), (b, "B_local_buf")):
            _local(ty, what, "mma")
        name = a.dtype.name
        if name not in _MMA or b.dtype != a.dtype:
            raise errors.TypingError(
                f"TensorCoreIntrinEmitter.mma: A and B must be float16, bfloat16 or int8 "
                f"arrays of one dtype, got {a.tile_name}: {a.dtype.name}, {b.tile_name}: "
                f"{b.dtype.name}")
        accums, a_slots, b_slots = _MMA[name]
        if c.dtype.name not in accums:
            raise errors.TypingError(
                f"TensorCoreIntrinEmitter.mma: the accumulator {c.tile_name} of {name} "
                f"operands must be {' or '.join(accums)}, got {c.dtype.name}")
        for tile, off, count, what in ((c, c_off, _C_SLOTS, "C_local_buf"),
                                       (a, a_off, a_slots, "A_local_buf"),
                                       (b, b_off, b_slots, "B_local_buf")):
            _fits(tile, _offset(off, "TensorCoreIntrinEmitter.mma"), count, "mma", what)
        return signature(types.none, *args)
