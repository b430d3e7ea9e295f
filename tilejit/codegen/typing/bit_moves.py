"""Typing of the explicit loads and stores (``frontend/bit_moves.py``'s markers):

- ``__tj_bits_load(buffer, index, words, pred, memory)``: a global tensor (``memory``
  "global") or a shared tile ("shared"), one integer index per dimension (none: the first
  element), ``words`` a literal 1, 2, 4 or 8; a ``uint32`` for one word, else a
  ``UniTuple(uint32, words)``;
- ``__tj_bits_store(buffer, index, value, words, pred, memory)``: ``value`` an integer
  for one word, else a tuple of ``words`` integers (a load's, or written out);
- ``__tj_bits_as(value, dtype, lanes)``: the words' bits as a tuple of ``lanes``
  elements of ``dtype`` (as many bits in all).
"""
from __future__ import annotations

from numba.core import errors, types
from numba.core.typing import signature
from numba.core.typing.templates import AbstractTemplate

from tilejit.ir import markers
from tilejit.language.dtypes import as_dtype
from tilejit.codegen.typing.templates import infer_global
from tilejit.codegen.typing.tiles import TileType
from tilejit.codegen.typing.types import GlobalTensorType, numba_type

_WORDS = (1, 2, 4, 8)


def _literal(ty):
    """A literal argument's value (the front end writes them), else None: Numba retries
    a template without literals, which these refuse quietly (the first error stays)."""
    return getattr(ty, "literal_value", None)


def _access_name(load: bool, memory: str, words: int) -> str:
    return f"T.{'ld' if load else 'st'}{'g' if memory == 'global' else 's'}{32 * words}"


def _check_address(what, buffer, index, memory):
    if memory == "global" and not isinstance(buffer, GlobalTensorType):
        raise errors.TypingError(f"{what}: the operand must be an element or region of a "
                                 f"global tensor (a tensor parameter), got {buffer}")
    if memory == "shared" and not (isinstance(buffer, TileType) and buffer.kind == "shared"):
        raise errors.TypingError(f"{what}: the operand must be an element or region of a "
                                 f"shared tile, got {buffer}")
    if buffer.dtype.bits < 8 or buffer.dtype.name == "bool":
        raise errors.TypingError(f"{what}: {buffer.dtype.name} elements have no byte "
                                 f"address of their own")
    idx = index.types if isinstance(index, types.BaseTuple) else (index,)
    if len(idx) not in (0, buffer.ndim):
        raise errors.TypingError(f"{what}: a {buffer.ndim}-d operand indexed with {len(idx)} "
                                 f"index(es)")
    for i in idx:
        if not isinstance(i, (types.Integer, types.Boolean)):
            raise errors.TypingError(f"{what}: indices must be integers, got {i}")


def _check_pred(what, pred):
    if not isinstance(pred, (types.Boolean, types.Integer)):
        raise errors.TypingError(f"{what}: pred must be a condition, got {pred}")


class BitsLoad(AbstractTemplate):
    prefer_literal = True

    def generic(self, args, kws):
        buffer, index, words, pred, memory = args
        words, memory = _literal(words), _literal(memory)
        if words is None or memory is None:
            return None
        what = _access_name(True, memory, words)
        if words not in _WORDS:
            raise errors.TypingError(f"{what}: {words} words")
        _check_address(what, buffer, index, memory)
        _check_pred(what, pred)
        ret = types.uint32 if words == 1 else types.UniTuple(types.uint32, words)
        return signature(ret, *args)


class BitsStore(AbstractTemplate):
    prefer_literal = True

    def generic(self, args, kws):
        buffer, index, value, words, pred, memory = args
        words, memory = _literal(words), _literal(memory)
        if words is None or memory is None:
            return None
        what = _access_name(False, memory, words)
        _check_address(what, buffer, index, memory)
        _check_pred(what, pred)
        if words == 1:
            if not isinstance(value, (types.Integer, types.Boolean)):
                raise errors.TypingError(f"{what}: the value is 32 bits, a uint32 "
                                         f"(T.reinterpret(x, T.uint32) of a 32-bit x), got "
                                         f"{value}")
        elif not (isinstance(value, types.BaseTuple) and len(value) == words and all(
                isinstance(t, (types.Integer, types.Boolean)) for t in value.types)):
            raise errors.TypingError(f"{what}: the value is {words} uint32 words (what "
                                     f"T.{'ldg' if memory == 'global' else 'lds'}"
                                     f"{32 * words} gives), got {value}")
        return signature(types.none, *args)


class BitsAs(AbstractTemplate):
    prefer_literal = True

    def generic(self, args, kws):
        value, dtype, lanes = args
        name, lanes = _literal(dtype), _literal(lanes)
        if name is None or lanes is None:
            return None
        dtype = as_dtype(name)
        what = f"T.reinterpret(..., T.{name}x{lanes})"
        if isinstance(value, (types.Integer,)) and value.bitwidth == 32:
            words = 1
        elif isinstance(value, types.UniTuple) and isinstance(value.dtype, types.Integer) \
                and value.dtype.bitwidth == 32:
            words = len(value)
        else:
            raise errors.TypingError(f"{what}: reads the bits of 32-bit words (what T.ldg* and "
                                     f"T.lds* give), got {value}")
        if dtype.bits < 8 or dtype.name == "bool" or dtype.bits * lanes != 32 * words:
            raise errors.TypingError(f"{what}: {lanes} {dtype.name} values are "
                                     f"{dtype.bits * lanes} bits, the words {32 * words}")
        return signature(types.UniTuple(numba_type(dtype), lanes), *args)


infer_global(markers.stub(markers.BITS_LOAD))(BitsLoad)
infer_global(markers.stub(markers.BITS_STORE))(BitsStore)
infer_global(markers.stub(markers.BITS_AS))(BitsAs)
