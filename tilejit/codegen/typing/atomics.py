"""Typing of atomics (``language/atomics.py``).

- element form ``__tj_atomic_add(dst, index, value, return_prev, per_lane,
  memory_order)``: dst a global tensor or a shared tile, one integer index per
  dimension, value any number (converted to dst's element dtype by the signature, so
  the weak-scalar rules apply), return_prev and per_lane compile-time booleans. Returns
  the element's type with ``return_prev=True``, else none.
- region form ``T.atomic_add(dst, value, memory_order, return_prev)``: dst a tensor, a
  shared tile or a region of one; value a fragment, a shared tile or a region of a
  shared tile.

``memory_order`` is a constant None or string (``frontend/tile_operands.py`` checks it;
checked again here).
"""
from __future__ import annotations

from numba.core import errors, types
from numba.core.typing import signature
from numba.core.typing.templates import AbstractTemplate

from tilejit import language as T
from tilejit.ir import markers
from tilejit.ir.kernel_config import current_kernel_or_none
from tilejit.language.atomics import (DTYPES, call_signature, element_dtype_error,
                                      memory_order_error)
from tilejit.codegen.typing.templates import infer_global
from tilejit.codegen.typing.tiles import RegionType, TileType
from tilejit.codegen.typing.types import GlobalTensorType


def _literal_bool(ty, what):
    if isinstance(ty, (types.BooleanLiteral, types.IntegerLiteral)):
        return bool(ty.literal_value)
    raise errors.TypingError(f"{what} must be a compile-time True or False, got a run-time "
                             f"{ty}")


def literal_memory_order(ty, op):
    """The memory order a typed ``memory_order`` operand holds: None or its string."""
    if isinstance(ty, (types.NoneType, types.Omitted)) or ty is types.none:
        return None
    order = ty.literal_value if isinstance(ty, types.StringLiteral) else ty
    message = memory_order_error(op, order)
    if message is not None:
        raise errors.TypingError(message)
    return order


def _check_base(ty, what):
    if isinstance(ty, TileType) and ty.kind != "shared":
        raise errors.TypingError(
            f"{what}: the destination must be in global or shared memory; {ty.kind} tile "
            f"{ty.tile_name!r} is private to each thread (use a shared tile)")
    if not isinstance(ty, (GlobalTensorType, TileType)):
        raise errors.TypingError(f"{what}: the destination must be an element or region of a "
                                 f"tensor or shared tile, got {ty}")
    if ty.dtype.name not in DTYPES:
        raise errors.TypingError(f"{what}: atomics support {', '.join(DTYPES)}; the "
                                 f"destination is {ty.dtype.name}")


class _ElementAtomic(AbstractTemplate):
    prefer_literal = True
    op = ""

    def generic(self, args, kws):
        what = f"T.atomic_{self.op}"
        if kws or len(args) != 6:
            raise errors.TypingError(f"{what}{call_signature(self.op)} takes a destination "
                                     f"and a value")
        dst, index, value, return_prev, per_lane, order = args
        literal_memory_order(order, self.op)
        _check_base(dst, what)
        message = element_dtype_error(self.op, dst.dtype.name)
        if message is not None:
            raise errors.TypingError(message)
        idx = index.types if isinstance(index, types.BaseTuple) else (index,)
        if len(idx) != dst.ndim:
            raise errors.TypingError(f"{what}: a {dst.ndim}-d destination indexed with "
                                     f"{len(idx)} index(es)")
        for i in idx:
            if not isinstance(i, (types.Integer, types.Boolean)):
                raise errors.TypingError(f"{what}: indices must be integers, got {i}")
        if not isinstance(value, (types.Number, types.Boolean)):
            raise errors.TypingError(f"{what}: the value must be a number, got {value}")
        prev = _literal_bool(return_prev, f"{what}'s return_prev")
        lanes = _literal_bool(per_lane, what)
        if prev and not lanes and _block_threads() != 1:
            raise errors.TypingError(
                f"{what}(..., return_prev=True) outside a T.Parallel: the block performs "
                f"the atomic once, so there is no per-thread previous value; move it into "
                f"a T.Parallel loop")
        ret = dst.element if prev else types.none
        return signature(ret, dst, index, dst.element, return_prev, per_lane, order)


def _block_threads():
    """The threads of the block being compiled (None outside a compilation): a block of
    one thread performs an atomic outside a T.Parallel once, as its one thread."""
    config = current_kernel_or_none()
    return None if config is None else config.threads


class _RegionAtomic(AbstractTemplate):
    prefer_literal = True
    op = ""

    def generic(self, args, kws):
        what = f"T.atomic_{self.op}"
        if kws or len(args) != 4:
            raise errors.TypingError(f"{what}{call_signature(self.op)} takes a destination "
                                     f"and a value")
        dst, value, order, return_prev = args
        literal_memory_order(order, self.op)
        if _literal_bool(return_prev, f"{what}'s return_prev"):
            raise errors.TypingError(f"{what}: return_prev=True needs an element destination "
                                     f"(C[i, j]), not a region")
        _check_base(dst.base if isinstance(dst, RegionType) else dst, what)
        if isinstance(value, (types.Number, types.Boolean)):     # into every element
            return signature(types.none, dst, value, order, return_prev)
        src = value.base if isinstance(value, RegionType) else value
        if not (isinstance(src, TileType) and src.kind in ("shared", "fragment", "local")
                or isinstance(src, GlobalTensorType)):
            raise errors.TypingError(f"{what}: the value of a region atomic must be a "
                                     f"tile, a tensor, a region of one, or a number; got "
                                     f"{value}")
        return signature(types.none, dst, value, order, return_prev)


class _ElementOr(_ElementAtomic):
    """``__tj_atomic_or``: as the element atomics, with an integer value."""

    def generic(self, args, kws):
        sig = super().generic(args, kws)
        if sig is not None and not isinstance(args[2], (types.Integer, types.Boolean)):
            raise errors.TypingError(f"T.atomic_or: the value must be an integer, got "
                                     f"{args[2]}")
        return sig


def _register():
    infer_global(markers.stub(markers.ATOMIC_OR))(
        type("AtomicElementOr", (_ElementOr,), {"op": "or"}))
    for op in ("load", "store"):
        element = type(f"AtomicElement{op.capitalize()}", (_ElementAtomic,), {"op": op})
        infer_global(markers.stub(getattr(markers, f"ATOMIC_{op.upper()}")))(element)
    for op in ("add", "max", "min"):
        element = type(f"AtomicElement{op.capitalize()}", (_ElementAtomic,), {"op": op})
        infer_global(markers.stub(getattr(markers, f"ATOMIC_{op.upper()}")))(element)
        region = type(f"AtomicRegion{op.capitalize()}", (_RegionAtomic,), {"op": op})
        infer_global(getattr(T, f"atomic_{op}"))(region)


_register()
