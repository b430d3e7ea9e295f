"""The simulation of the explicit loads and stores (``frontend/bit_moves.py``'s markers):
the elements covering the access's bytes are read (or written) through the buffer's own
element accesses, so bounds, unwritten elements and races are checked as for any access,
and their bits (bfloat16 and float8, held in float32 here, as the GPU's codes) are cut
into (or made of) 32-bit little-endian words. What the GPU faults on is an error here
too: an address not aligned to the access's size. A 64-bit element cut by a 32-bit access,
and bytes past the end of a row of a tensor that is not contiguous, are refused (the
simulator does not follow the GPU's memory past the element it reads)."""
from __future__ import annotations

import numpy as np

from tilejit.language import numerics as _num
from tilejit.language.dtypes import as_dtype
from tilejit.sim.runtime import STATE, any_active, ifexp, where


def _name(load: bool, memory: str, words: int) -> str:
    return f"T.{'ld' if load else 'st'}{'g' if memory == 'global' else 's'}{32 * words}"


def _bits(values, dtype):
    """The elements' codes as uint64 (a float's bits; bfloat16/float8 from float32)."""
    a = np.asarray(values)
    if dtype.name == "bfloat16":
        return (a.astype(np.float32).view(np.uint32) >> 16).astype(np.uint64)
    if dtype.name in ("float8_e4m3", "float8_e5m2"):
        return a.astype(np.float32).astype(_num.ml_dtype(dtype)).view(np.uint8).astype(
            np.uint64)
    if dtype.name == "float8_e8m0fnu":
        return _num._round_to_e8m0(a.astype(np.float32)).astype(np.uint64)
    size = dtype.bits // 8
    held = a.astype(dtype.numpy)
    return held.view(np.dtype(f"u{size}")).astype(np.uint64)


def _values(bits, dtype):
    """Elements of ``dtype`` (held as the simulator holds them) of their codes."""
    b = np.asarray(bits, dtype=np.uint64)
    if dtype.name == "bfloat16":
        return (b.astype(np.uint32) << np.uint32(16)).view(np.float32)
    if dtype.name in ("float8_e4m3", "float8_e5m2", "float8_e8m0fnu"):
        return _num.from_float8_bits(b.astype(np.uint8), dtype)
    size = dtype.bits // 8
    return b.astype(np.dtype(f"u{size}")).view(dtype.numpy)


def _layout(buffer, index, nbytes, what):
    """(index tuple, element size, the number of elements the bytes cover), after the
    checks of what the GPU would fault on or read past: the address aligned to the
    access's size (the tensor's own address counted), the bytes inside the buffer, and
    consecutive in memory as its elements are."""
    dtype = buffer.dtype
    if dtype.bits < 8 or dtype.name == "bool":
        raise TypeError(f"{what}: {dtype.name} elements have no byte address of their own")
    size = dtype.bits // 8
    idx = tuple(index) if isinstance(index, tuple) else (index,)
    if not idx:
        idx = (0,) * buffer.data.ndim
    if nbytes % size:
        raise TypeError(f"{what}: {nbytes} bytes cut a {dtype.name} element of {size} bytes "
                        f"(not simulated)")
    count = nbytes // size
    shape = buffer.data.shape
    strides = buffer.gpu_strides or tuple(s // buffer.data.itemsize
                                          for s in buffer.data.strides)
    if count > 1 and shape and strides[-1] != 1 and shape[-1] > 1:
        raise ValueError(f"{what}: {buffer.name}'s last dimension has stride {strides[-1]}: "
                         f"its elements are not consecutive in memory, which the access "
                         f"reads as {count} consecutive elements")
    active = STATE.mask
    linear = 0
    for i, n in zip(idx, shape):
        linear = linear * n + np.asarray(i, dtype=np.int64)
    outside = (np.asarray(linear) < 0) | (np.asarray(linear) + count > int(np.prod(shape)))
    contiguous = tuple(strides) == tuple(int(np.prod(shape[k + 1:]))
                                         for k in range(len(shape)))
    if not contiguous and shape:
        outside = outside | (np.asarray(idx[-1]) < 0) | (np.asarray(idx[-1]) + count > shape[-1])
    if active is not None:
        outside = outside & active
    if np.any(outside):
        first = tuple(int(np.broadcast_to(np.asarray(i), np.shape(outside))[outside][0])
                      if np.ndim(outside) else int(i) for i in idx)
        raise IndexError(f"{what}: {count} element(s) of {buffer.name} from {list(first)} "
                         f"run outside its shape {tuple(shape)} (on the GPU an access past "
                         f"the buffer)")
    offset = sum(np.asarray(i, dtype=np.int64) * int(s) for i, s in zip(idx, strides)) * size
    base = buffer.gpu_address if buffer.gpu_address is not None else (
        buffer.data.ctypes.data if buffer.kind is None else 0)
    bad = (np.asarray(offset) + base) % nbytes != 0
    if active is not None:
        bad = bad & active
    if np.any(bad):
        first = int(np.broadcast_to(np.asarray(offset), np.shape(bad))[bad][0]
                    if np.ndim(bad) else offset)
        raise ValueError(f"{what}: {buffer.name}'s element at byte {first} (from an address "
                         f"{base % nbytes} bytes past a {nbytes}-byte boundary) is not aligned "
                         f"to {nbytes} bytes (on the GPU a misaligned access is a fault)")
    return idx, size, count


def _element(buffer, idx, k):
    """The index of the ``k``-th element from ``idx`` in row-major order (inside the
    buffer: ``_layout`` checked it)."""
    if k == 0:
        return idx
    shape = buffer.data.shape
    linear = 0
    for i, n in zip(idx, shape):
        linear = linear * n + np.asarray(i, dtype=np.int64)
    linear = linear + k
    out = []
    for n in reversed(shape):
        out.append(linear % n)
        linear = linear // n
    return tuple(reversed(out))


def _raw_load(buffer, index, words, memory):
    what = _name(True, memory, words)
    idx, size, count = _layout(buffer, index, 4 * words, what)
    codes = [_bits(buffer[_element(buffer, idx, k)], buffer.dtype) for k in range(count)]
    out = []
    for w in range(words):
        word = np.uint64(0)
        for j in range(4):
            byte = 4 * w + j
            part = (codes[byte // size] >> np.uint64(8 * (byte % size))) & np.uint64(0xFF)
            word = word | (part << np.uint64(8 * j))
        out.append(np.asarray(word).astype(np.uint32)[()])
    return out[0] if words == 1 else tuple(out)


def bits_load(buffer, index, words, pred, memory):
    """``__tj_bits_load``: the words at the element's address (0 where ``pred`` is false,
    where nothing is read)."""
    zero = np.uint32(0) if words == 1 else (np.uint32(0),) * words
    return ifexp(pred, lambda: _raw_load(buffer, index, words, memory), lambda: zero)


def _word_list(value, words):
    items = list(value) if isinstance(value, tuple) else [value]
    if len(items) != words:
        raise TypeError(f"a store of {words} words given {len(items)}")
    return [np.asarray(v).astype(np.uint64) & np.uint64(0xFFFFFFFF) for v in items]


def bits_store(buffer, index, value, words, pred, memory):
    """``__tj_bits_store``: the words stored from the element's address (nothing where
    ``pred`` is false)."""
    what = _name(False, memory, words)
    with where(pred):
        if not any_active():
            return
        idx, size, count = _layout(buffer, index, 4 * words, what)
        ws = _word_list(value, words)
        for k in range(count):
            code = _code_of_words(ws, k, size)
            buffer[_element(buffer, idx, k)] = _values(code, buffer.dtype)[()]


def bits_as(value, dtype, lanes):
    """``__tj_bits_as``: the words' bits as ``lanes`` elements of ``dtype``."""
    d = as_dtype(dtype)
    ws = _word_list(value, len(value) if isinstance(value, tuple) else 1)
    size = d.bits // 8
    if d.bits < 8 or size * lanes != 4 * len(ws):
        raise TypeError(f"T.reinterpret(..., T.{dtype}x{lanes}): {lanes} {dtype} values are "
                        f"not the {32 * len(ws)} bits of the words")
    return tuple(_values(_code_of_words(ws, e, size), d)[()] for e in range(lanes))


def _code_of_words(ws, e, size):
    """The code of element ``e`` (``size`` bytes) of little-endian 32-bit words."""
    code = np.uint64(0)
    for j in range(size):
        byte = e * size + j
        part = (ws[byte // 4] >> np.uint64(8 * (byte % 4))) & np.uint64(0xFF)
        code = code | (part << np.uint64(8 * j))
    return code
