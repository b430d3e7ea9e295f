"""Types and typing of tiles, regions and tile operations.

- ``TileType(kind, dtype, shape, name)``: a shared, fragment or local tile; everything
  else about it (layout, offset) is in the kernel's tile plan under ``name``.
- ``RegionType(base, kinds)``: ``A[r0:r1, c]`` as an operand: the base tensor or tile
  and the start of each dimension ("s" sliced, "p" a point).
"""
from __future__ import annotations

import operator

from numba.core import errors, types
from numba.core.typing import signature
from numba.core.typing.templates import AbstractTemplate, AttributeTemplate

from tilejit import language as T
from tilejit.ir import markers
from tilejit.ir.kernel_config import current_kernel
from tilejit.codegen.typing.templates import (check_float_to_int_store, infer_getattr,
                                              infer_global)
from tilejit.codegen.typing.types import (DTypeType, GlobalTensorType, ParallelType, TensorMapType,
                                          numba_type)


class TileType(types.Type):
    def __init__(self, kind: str, dtype, shape: tuple, name: str):
        self.kind, self.dtype, self.shape, self.tile_name = kind, dtype, tuple(shape), name
        self.element = numba_type(dtype)
        self.ndim = len(shape)
        super().__init__(f"{kind.capitalize()}Tile({name}: {dtype.name}{list(shape)})")

    @property
    def key(self):
        return (self.kind, self.dtype.name, self.shape, self.tile_name)


# how a store's error names a tile (check_float_to_int_store; the simulator's words too)
_TILE_WHAT = {"shared": "shared tile", "fragment": "fragment", "local": "local tile"}


class RegionType(types.Type):
    """``kinds``: "s" (sliced) or "p" (point) per dimension; ``extents``: the
    compile-time length of each sliced dimension, 0 where unknown; ``static_starts``:
    the start of each dimension where it is an integer literal, else None (None when
    none is)."""

    def __init__(self, base, kinds: str, extents: tuple = (), static_starts=None):
        self.base, self.kinds, self.extents = base, kinds, tuple(extents)
        if static_starts is not None and all(s is None for s in static_starts):
            static_starts = None
        self.static_starts = None if static_starts is None else tuple(static_starts)
        self.dtype = base.dtype
        known = "" if self.static_starts is None else ", " + ",".join(
            "?" if s is None else str(s) for s in self.static_starts)
        super().__init__(f"Region({base}, {kinds}, {self.extents}{known})")

    @property
    def key(self):
        return (self.base, self.kinds, self.extents, self.static_starts)


def _plan():
    plan = current_kernel().tiles
    if plan is None:
        raise errors.TypingError("tiles are only available inside a kernel")
    return plan


def _str(ty, what):
    if not isinstance(ty, types.StringLiteral):
        raise errors.TypingError(f"{what}: expected a string literal, got {ty}")
    return ty.literal_value


@infer_global(markers.stub(markers.TILE))
class TileTemplate(AbstractTemplate):
    def generic(self, args, kws):
        t = _plan().tile(_str(args[0], "tile"))
        return signature(TileType(t.kind, t.dtype, t.shape, t.name), *args)


def _ints(ty, what):
    tys = ty.types if isinstance(ty, types.BaseTuple) else (ty,)
    for t in tys:
        if not isinstance(t, types.Integer):
            raise errors.TypingError(f"{what}: indices must be integers, got {t}")
    return tys


@infer_global(markers.stub(markers.REGION))
class RegionTemplate(AbstractTemplate):
    def generic(self, args, kws):
        base, kinds, starts, ends, extents = args
        kinds = _str(kinds, "region")
        extents = tuple(int(e) for e in _str(extents, "region").split(","))
        if not isinstance(base, (GlobalTensorType, TileType)):
            raise errors.TypingError(f"only a tensor or a tile can be sliced into a region, "
                                     f"got {base}")
        if isinstance(base, TileType) and base.kind == "fragment":
            # T.clear, T.fill and T.copy on a fragment region are element loops by now
            # (passes/fragment_regions.py); any other operation takes fragments whole
            raise errors.TypingError(f"a region of fragment {base.tile_name!r} is not supported "
                                     f"here: use the whole fragment (T.clear, T.fill and "
                                     f"T.copy take a region of a fragment)")
        if len(kinds) != base.ndim:
            raise errors.TypingError(f"a {base.ndim}-d {base} is indexed with {len(kinds)} "
                                     f"indices")
        known = tuple(getattr(t, "literal_value", None) for t in _ints(starts, "region"))
        n = len(kinds)
        if isinstance(base, TileType) and 0 in extents:
            # `S[:, k:]` of a tile: a slice to the end whose start is known has the rest
            # of the tile's extent
            stops = ends.types if isinstance(ends, types.BaseTuple) else (ends,)
            extents = tuple(
                base.shape[d] - known[d] if e == 0 and kinds[d] == "s" and d < len(stops)
                and isinstance(stops[d], types.NoneType) and known[d] is not None
                and 0 <= known[d] < base.shape[d] else e
                for d, e in enumerate(extents))
        return signature(RegionType(base, kinds, extents, known), base, args[1],
                         types.UniTuple(types.int64, n), ends, args[4])


def _operand_ok(ty):
    return isinstance(ty, (GlobalTensorType, TileType, RegionType))


def _refuse_packed(op: str, args) -> None:
    """A packed tensor (float4_e2m1fn, two elements a byte) as a tile operation's
    operand, under any name (an alias, a view): the operation's lowering moves bytes.
    ``passes/fragment_regions.py`` has already made the copies between one named as a
    parameter and a whole tile element loops."""
    for a in args:
        base = a.base if isinstance(a, RegionType) else a
        if isinstance(base, GlobalTensorType) and base.dtype.packed > 1:
            raise errors.TypingError(
                f"T.{op} on a {base.dtype.name} tensor (two elements a byte) is not "
                f"supported here: T.copy it by its parameter's name to or from a whole "
                f"shared tile or fragment, or read and write its elements one at a time")


def _int4_tile_copy(args) -> bool:
    """An int4 tensor (or a region of one) and a shared int8 or uint8 tile: a tile copy
    (``codegen/lowering/packed_copy.py``)."""
    bases = [a.base if isinstance(a, RegionType) else a for a in args]
    tensors = [b for b in bases if isinstance(b, GlobalTensorType)]
    tiles = [b for b in bases if isinstance(b, TileType)]
    return len(tensors) == 1 and tensors[0].dtype.is_packed_int and len(tiles) == 1 and \
        tiles[0].kind == "shared" and tiles[0].dtype.name in ("int8", "uint8")


@infer_global(T.copy)
class CopyTemplate(AbstractTemplate):
    def generic(self, args, kws):
        if kws or len(args) != 2:
            raise errors.TypingError("T.copy(src, dst) takes two operands")
        for role, a in zip(("source", "destination"), args):
            if not _operand_ok(a):
                raise errors.TypingError(f"T.copy: the {role} must be a tensor, a tile or a "
                                         f"region, got {a}")
        if not _int4_tile_copy(args):
            _refuse_packed("copy", args)
        return signature(types.none, *args)


@infer_global(T.clear)
class ClearTemplate(AbstractTemplate):
    def generic(self, args, kws):
        if len(args) != 1 or not _operand_ok(args[0]):
            raise errors.TypingError(f"T.clear(buf) takes one tile or region, got {args}")
        _refuse_packed("clear", args)
        return signature(types.none, *args)


@infer_global(T.fill)
class FillTemplate(AbstractTemplate):
    def generic(self, args, kws):
        if len(args) != 2 or not _operand_ok(args[0]) or not isinstance(
                args[1], (types.Number, types.Boolean)):
            raise errors.TypingError(f"T.fill(buf, value) takes a tile and a number, got {args}")
        _refuse_packed("fill", args[:1])
        return signature(types.none, args[0], args[1])


@infer_global(markers.stub(markers.GEMM))
class GemmTemplate(AbstractTemplate):
    def generic(self, args, kws):
        _str(args[3], "gemm")
        return signature(types.none, *args)


@infer_global(markers.stub(markers.FRAG_LOOP))
class FragLoopTemplate(AbstractTemplate):
    def generic(self, args, kws):
        _, ix = _plan().loops[_str(args[0], "frag_loop")]
        return signature(ParallelType((ix.slots,), "slots"), *args)


@infer_global(markers.stub(markers.FRAG_INDEX))
class FragIndexTemplate(AbstractTemplate):
    def generic(self, args, kws):
        if not isinstance(args[0], types.StringLiteral):
            return None
        frag, _ = _plan().loops[_str(args[0], "frag_index")]
        n = len(frag.shape)
        ret = types.int32 if n == 1 else types.UniTuple(types.int32, n)
        return signature(ret, args[0], types.int32)


@infer_global(markers.stub(markers.FRAG_VALID))
class FragValidTemplate(AbstractTemplate):
    def generic(self, args, kws):
        if not isinstance(args[0], types.StringLiteral):
            return None
        return signature(types.boolean, args[0], types.int32)


@infer_global(markers.stub(markers.FRAG_WRITER))
class FragWriterTemplate(AbstractTemplate):
    def generic(self, args, kws):
        if len(args) != 1 or not isinstance(args[0], types.StringLiteral):
            return None
        return signature(types.boolean, args[0])


def _fragment(ty, what):
    if not (isinstance(ty, TileType) and ty.kind == "fragment"):
        raise errors.TypingError(f"{what}: expected a fragment, got {ty}")
    return ty


@infer_global(markers.stub(markers.FRAG_GET))
class FragGetTemplate(AbstractTemplate):
    def generic(self, args, kws):
        f = _fragment(args[0], "fragment read")
        return signature(f.element, f, types.int32)


@infer_global(markers.stub(markers.FRAG_SET))
class FragSetTemplate(AbstractTemplate):
    def generic(self, args, kws):
        f = _fragment(args[0], "fragment write")
        if not isinstance(args[2], (types.Number, types.Boolean)):
            raise errors.TypingError(f"cannot store a {args[2]} into fragment {f.tile_name!r}")
        check_float_to_int_store(f.tile_name, _TILE_WHAT[f.kind], f.dtype, args[2])
        return signature(types.none, f, types.int32, f.element)


@infer_global(markers.stub(markers.STAGE))
class StageTemplate(AbstractTemplate):
    def generic(self, args, kws):
        tile, index = args
        if not (isinstance(tile, TileType) and tile.kind == "shared"):
            raise errors.TypingError(f"only shared tiles have pipeline stages, got {tile}")
        if not isinstance(index, types.Integer):
            raise errors.TypingError(f"a stage index must be an integer, got {index}")
        return signature(tile, tile, types.int32)


@infer_global(markers.stub(markers.COPY_ASYNC))
class CopyAsyncTemplate(CopyTemplate):
    pass


@infer_global(markers.stub(markers.UNPACK_INT4))
class UnpackInt4Template(AbstractTemplate):
    def generic(self, args, kws):
        if len(args) != 3 or not all(isinstance(a, TileType) and a.kind == "shared"
                                     for a in args[:2]) or not isinstance(
                                         args[2], types.BooleanLiteral):
            raise errors.TypingError(f"unpack_int4(bytes tile, tile, signed) takes two shared "
                                     f"tiles and a bool, got {args}")
        return signature(types.none, *args)


@infer_global(markers.stub(markers.COMMIT))
class CommitTemplate(AbstractTemplate):
    def generic(self, args, kws):
        return signature(types.none)


@infer_global(markers.stub(markers.WAIT))
class WaitTemplate(AbstractTemplate):
    def generic(self, args, kws):
        if len(args) != 1 or not isinstance(args[0], types.IntegerLiteral):
            raise errors.TypingError("cp_wait takes a literal group count")
        return signature(types.none, *args)


@infer_global(markers.stub(markers.TMA_INIT))
class TmaInitTemplate(AbstractTemplate):
    def generic(self, args, kws):
        if len(args) == 3 and all(isinstance(a, types.IntegerLiteral) for a in args):
            return signature(types.none, *args)
        raise errors.TypingError("tma_init takes three literal integers")


@infer_global(markers.stub(markers.TMA_LOAD))
@infer_global(markers.stub(markers.TMA_EXPECT_LOAD))
class TmaLoadTemplate(AbstractTemplate):
    def generic(self, args, kws):
        src, dst, slot, tmap, cid = args
        if not (isinstance(dst, TileType) and dst.kind == "shared"
                and isinstance(slot, types.Integer) and isinstance(tmap, TensorMapType)
                and isinstance(cid, types.StringLiteral)):
            raise errors.TypingError(f"tma_load: unexpected operands {args}")
        return signature(types.none, src, dst, types.int32, tmap, cid)


@infer_global(markers.stub(markers.TMA_WAIT))
class TmaWaitTemplate(AbstractTemplate):
    def generic(self, args, kws):
        if (len(args) == 3 and all(isinstance(a, types.Integer) for a in args[:2])
                and isinstance(args[2], types.BooleanLiteral)):
            return signature(types.none, types.int32, types.int32, args[2])
        raise errors.TypingError(f"tma_wait takes two integers and a literal bool, got {args}")


@infer_global(markers.stub(markers.TMA_STORE))
class TmaStoreTemplate(AbstractTemplate):
    def generic(self, args, kws):
        src, dst, tmap, cid = args
        if not (isinstance(src, TileType) and src.kind == "shared"
                and isinstance(tmap, TensorMapType) and isinstance(cid, types.StringLiteral)):
            raise errors.TypingError(f"tma_store: unexpected operands {args}")
        return signature(types.none, src, dst, tmap, cid)


@infer_global(markers.stub(markers.WGMMA_WAIT))
class WgmmaWaitTemplate(AbstractTemplate):
    def generic(self, args, kws):
        if args and all(isinstance(a, types.StringLiteral) for a in args):
            return signature(types.none, *args)


@infer_global(markers.stub(markers.TMA_STORE_WAIT))
@infer_global(markers.stub(markers.TMA_FENCE))
class TmaFenceTemplate(AbstractTemplate):
    def generic(self, args, kws):
        return signature(types.none)


@infer_global(markers.stub(markers.WS_PRODUCER))
@infer_global(markers.stub(markers.WS_LEADER))
@infer_global(markers.stub(markers.ROLE_LEADER))
class WsRoleTemplate(AbstractTemplate):
    def generic(self, args, kws):
        return signature(types.boolean)


@infer_global(markers.stub(markers.SETMAXNREG))
class SetMaxNRegTemplate(AbstractTemplate):
    def generic(self, args, kws):
        if (len(args) == 2 and isinstance(args[0], types.BooleanLiteral)
                and isinstance(args[1], types.IntegerLiteral)):
            return signature(types.none, *args)
        raise errors.TypingError(f"setmaxnreg takes a literal bool and int, got {args}")


@infer_global(markers.stub(markers.MBAR_ARRIVE_ALL))
class MbarArriveAllTemplate(AbstractTemplate):
    def generic(self, args, kws):
        if (len(args) == 2 and isinstance(args[0], types.Integer)
                and isinstance(args[1], types.IntegerLiteral)):
            return signature(types.none, types.int32, args[1])
        raise errors.TypingError(f"mbar_arrive_all takes an integer and a literal, got {args}")


@infer_global(markers.stub(markers.MBAR_ARRIVE))
class MbarArriveTemplate(AbstractTemplate):
    def generic(self, args, kws):
        if len(args) == 1 and isinstance(args[0], types.Integer):
            return signature(types.none, types.int32)
        raise errors.TypingError(f"mbar_arrive takes an integer, got {args}")


@infer_global(markers.stub(markers.SYNC_CONSUMERS))
class SyncConsumersTemplate(AbstractTemplate):
    def generic(self, args, kws):
        return signature(types.none)


@infer_global(markers.stub(markers.TURN))
class TurnTemplate(AbstractTemplate):
    def generic(self, args, kws):
        if len(args) == 1 and isinstance(args[0], types.IntegerLiteral):
            return signature(types.none, *args)
        raise errors.TypingError(f"turn takes a literal step, got {args}")


@infer_global(markers.stub(markers.SYNC_ROLE))
class SyncRoleTemplate(AbstractTemplate):
    def generic(self, args, kws):
        if len(args) == 1 and isinstance(args[0], types.IntegerLiteral):
            return signature(types.none, *args)
        raise errors.TypingError(f"sync_role takes a literal role, got {args}")


@infer_global(markers.stub(markers.DP4A_OPERANDS))
class Dp4aOperandsTemplate(AbstractTemplate):
    def generic(self, args, kws):
        if len(args) == 3 and [types.unliteral(a) for a in args] == [types.int8, types.int8,
                                                                      types.int32]:
            return signature(types.none, *args)
        raise errors.TypingError(markers.DP4A_MESSAGE.format(*args))


@infer_global(markers.stub(markers.SYNC_RANGE))
class SyncRangeTemplate(AbstractTemplate):
    def generic(self, args, kws):
        if len(args) == 2 and all(isinstance(a, types.IntegerLiteral) for a in args):
            return signature(types.none, *args)
        raise errors.TypingError(f"sync_range takes a literal barrier and thread count, got "
                                 f"{args}")


@infer_global(markers.stub(markers.SYNC_NAMED))
@infer_global(markers.stub(markers.ARRIVE_NAMED))
class NamedBarrierTemplate(AbstractTemplate):
    def generic(self, args, kws):
        if len(args) == 2 and all(isinstance(types.unliteral(a), types.Integer)
                                  for a in args):
            return signature(types.none, *args)
        raise errors.TypingError(f"a named barrier's id and thread count are integers, got "
                                 f"{', '.join(map(str, args))}")


@infer_global(markers.stub(markers.WS_ROLE))
class WsRoleIndexTemplate(AbstractTemplate):
    def generic(self, args, kws):
        return signature(types.int32)


@infer_global(markers.stub(markers.SWIZZLE_BLOCKS))
class SwizzleBlocksTemplate(AbstractTemplate):
    def generic(self, args, kws):
        if not (isinstance(args[0], types.IntegerLiteral)
                and isinstance(args[1], types.BooleanLiteral)):
            return None
        return signature(types.UniTuple(types.int32, 2), *args)


@infer_global(markers.stub(markers.FRAG_SLOT))
class FragSlotTemplate(AbstractTemplate):
    def generic(self, args, kws):
        if not all(isinstance(a, types.StringLiteral) for a in args[:2]):
            return None
        return signature(types.int32, args[0], args[1], types.int32)


@infer_global(markers.stub(markers.REDUCE))
class ReduceTemplate(AbstractTemplate):
    def generic(self, args, kws):
        src, dst, op, dim, clear, rid = args
        if not (isinstance(op, types.StringLiteral) and isinstance(dim, types.IntegerLiteral)
                and isinstance(clear, types.BooleanLiteral)
                and isinstance(rid, types.IntegerLiteral)):
            return None
        for role, t in (("src", src), ("dst", dst)):
            if not isinstance(t, TileType):
                raise errors.TypingError(f"T.reduce_{op.literal_value}: {role} must be a "
                                         f"tile, got {t}")
        return signature(types.none, *args)


@infer_global(markers.stub(markers.CUMSUM))
class CumsumTemplate(AbstractTemplate):
    def generic(self, args, kws):
        src, dst, dim, reverse, sid, op = args
        if not (isinstance(dim, types.IntegerLiteral)
                and isinstance(reverse, types.BooleanLiteral)
                and isinstance(sid, types.IntegerLiteral)
                and isinstance(op, types.StringLiteral)):
            return None
        for role, t in (("src", src), ("dst", dst)):
            if not isinstance(t, TileType):
                raise errors.TypingError(f"T.cumsum/T.cummax: {role} must be a tile, got {t}")
        return signature(types.none, *args)


@infer_global(markers.stub(markers.CONVERT_LAYOUT))
class ConvertLayoutTemplate(AbstractTemplate):
    def generic(self, args, kws):
        if len(args) == 4 and all(isinstance(a, types.StringLiteral) for a in args):
            return signature(types.none, *args)


@infer_global(markers.stub(markers.SYNC))
class SyncTemplate(AbstractTemplate):
    def generic(self, args, kws):
        return signature(types.none)


@infer_global(markers.stub(markers.CLUSTER_SYNC))
@infer_global(markers.stub(markers.GRID_SYNC))
@infer_global(markers.stub(markers.CLUSTER_WAIT))
class ClusterSyncTemplate(AbstractTemplate):
    def generic(self, args, kws):
        if args or kws:
            return None
        return signature(types.none)


@infer_global(markers.stub(markers.CLUSTER_ARRIVE))
class ClusterArriveTemplate(AbstractTemplate):
    def generic(self, args, kws):
        if len(args) == 1 and isinstance(args[0], types.BooleanLiteral):
            return signature(types.none, *args)
        return None


@infer_global(markers.stub(markers.CLUSTER_RANK))
class ClusterRankTemplate(AbstractTemplate):
    def generic(self, args, kws):
        if args or kws:
            return None
        return signature(types.int32)


def _tile_index(tile: TileType, index):
    idx = index.types if isinstance(index, types.BaseTuple) else (index,)
    for i in idx:
        if isinstance(i, types.SliceType):
            raise errors.TypingError(f"slicing tile {tile.tile_name!r} names a region, which "
                                     f"only tile operations such as T.copy accept")
        if not isinstance(i, (types.Integer, types.Boolean)):
            raise errors.TypingError(f"a tile index must be an integer, got {i}")
    if len(idx) != tile.ndim:
        raise errors.TypingError(f"tile {tile.tile_name!r} has {tile.ndim} dimension(s), "
                                 f"indexed with {len(idx)}")
    if tile.kind == "fragment":
        raise errors.TypingError(f"fragment {tile.tile_name!r} can only be indexed inside a "
                                 f"T.Parallel over its shape")
    return index


@infer_global(operator.getitem)
class TileGetItem(AbstractTemplate):
    def generic(self, args, kws):
        tile, index = args
        if isinstance(tile, TileType):
            return signature(tile.element, tile, _tile_index(tile, index))


@infer_global(operator.setitem)
class TileSetItem(AbstractTemplate):
    def generic(self, args, kws):
        tile, index, value = args
        if isinstance(tile, TileType):
            if not isinstance(value, (types.Number, types.Boolean)):
                raise errors.TypingError(f"cannot store a {value} into tile {tile.tile_name!r}")
            index = _tile_index(tile, index)
            check_float_to_int_store(tile.tile_name, _TILE_WHAT[tile.kind], tile.dtype, value)
            return signature(types.none, tile, index, tile.element)


@infer_getattr
class TileAttributes(AttributeTemplate):
    key = TileType

    def resolve_dtype(self, ty):
        return DTypeType(ty.dtype)

    def resolve_shape(self, ty):
        return types.Tuple(tuple(types.IntegerLiteral(n) for n in ty.shape))


class _KernelBodyOnly(AbstractTemplate):
    """A tile operation the source passes rewrite (``T.copy_cluster``, ``T.gemm_sp``,
    ``T.block_rank_in_cluster``) reached by Numba itself: it was written in a @T.macro or
    helper, whose body Numba compiles inline, after the passes. Said, where it is."""

    def generic(self, args, kws):
        raise errors.TypingError(f"T.{self.key.__name__} in a @T.macro or helper function is "
                                 f"not supported: the compiler rewrites it in the kernel's "
                                 f"own body; write it there")


for _fn in (T.copy_cluster, T.gemm_sp, T.block_rank_in_cluster):
    infer_global(_fn)(type(f"KernelBodyOnly_{_fn.__name__}", (_KernelBodyOnly,), {}))
