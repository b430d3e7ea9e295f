"""Typing of a thread's own asynchronous copies (``language/cp_async.py``)."""
from __future__ import annotations

from numba.core import errors, types
from numba.core.typing import signature
from numba.core.typing.templates import AbstractTemplate

from tilejit import language as T
from tilejit.ir import markers
from tilejit.language.cp_async import CP_ASYNC_BYTES
from tilejit.codegen.typing.templates import infer_global
from tilejit.codegen.typing.tiles import TileType
from tilejit.codegen.typing.types import GlobalTensorType


def _index_ok(index, ndim) -> bool:
    if isinstance(index, types.BaseTuple):
        return len(index) == ndim and all(isinstance(t, types.Integer) for t in index)
    return ndim == 1 and isinstance(index, types.Integer)


@infer_global(markers.stub(markers.CP_ASYNC))
class CpAsyncTemplate(AbstractTemplate):
    prefer_literal = True

    def generic(self, args, kws):
        what = "T.ptx_cp_async"
        dst, d_index, src, s_index, n, predicate = args
        if not (isinstance(dst, TileType) and dst.kind == "shared"):
            raise errors.TypingError(f"{what}: the destination must be an element of a shared "
                                     f"tile, got {dst}")
        if not isinstance(src, GlobalTensorType):
            raise errors.TypingError(f"{what}: the source must be an element of a global "
                                     f"tensor, got {src}")
        for name, t, index in (("destination", dst, d_index), ("source", src, s_index)):
            if not _index_ok(index, t.ndim):
                raise errors.TypingError(f"{what}: the {name} has {t.ndim} dimension(s); "
                                         f"index each with an integer, got {index}")
        if not isinstance(n, types.IntegerLiteral):
            raise errors.TypingError(f"{what}: num_elems must be an integer known at compile "
                                     f"time, got {n}")
        if dst.dtype.name != src.dtype.name:
            raise errors.TypingError(f"{what}: the source ({src.dtype.name}) and destination "
                                     f"({dst.dtype.name}) must have one element type")
        size = n.literal_value * dst.dtype.bits // 8
        if size not in CP_ASYNC_BYTES:
            raise errors.TypingError(f"{what}: {n.literal_value} elements of {dst.dtype.name} "
                                     f"are {size} bytes; cp.async copies 4, 8 or 16")
        if not isinstance(predicate, (types.Boolean, types.Integer)):
            raise errors.TypingError(f"{what}: the predicate must be a boolean, got "
                                     f"{predicate}")
        return signature(types.none, dst, d_index, src, s_index, n, predicate)


@infer_global(T.cp_async_barrier_noinc)
class CpAsyncArriveTemplate(AbstractTemplate):
    def generic(self, args, kws):
        if len(args) == 1 and not kws and isinstance(args[0], types.Integer):
            return signature(types.none, types.int32)
        raise errors.TypingError(f"T.cp_async_barrier_noinc takes one mbarrier (bars[i]), "
                                 f"got {args}")


@infer_global(T.fence_proxy_async)
@infer_global(T.ptx_commit_group)
@infer_global(T.pdl_trigger)
@infer_global(T.pdl_sync)
class CommitGroupTemplate(AbstractTemplate):
    def generic(self, args, kws):
        if not args and not kws:
            return signature(types.none)
        raise errors.TypingError("T.ptx_commit_group(), T.fence_proxy_async(), "
                                 "T.pdl_trigger() and T.pdl_sync() take no arguments")


@infer_global(T.ptx_wait_group)
class WaitGroupTemplate(AbstractTemplate):
    prefer_literal = True

    def generic(self, args, kws):
        if len(args) == 1 and not kws and isinstance(args[0], types.IntegerLiteral) \
                and args[0].literal_value >= 0:
            return signature(types.none, args[0])
        raise errors.TypingError(f"T.ptx_wait_group(n) takes a count of groups >= 0 known at "
                                 f"compile time, got {args}")
