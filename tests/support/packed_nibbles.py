"""Helpers that unpack 4-bit values with TIR's expression vocabulary (``tirx.const``,
``tirx.reinterpret``, ``tirx.Cast``, ``x.astype``, ``x.dtype``), as TileLang's
dequantizing examples write theirs; used by tests/tilelang/test_tir_helpers.py. In a
module of their own: pytest rewrites the ``assert`` statements of test files into calls
of its own, which a kernel cannot make."""
import tilejit.language as T
from tilejit.tilelang.tvm import tirx


def e2m1_to_half(val: tirx.PrimExpr, pos: tirx.PrimExpr, dtype: str):
    """Nibble ``pos`` of the byte ``val``, an e2m1 float (sign, 2 exponent bits, 1
    mantissa bit), as float16 built from its bits (exponent rebiased by 14; a zero
    exponent is not special-cased, as the examples do)."""
    assert dtype == T.float16
    assert val.dtype == T.uint8
    nib = (val >> (pos.astype(T.uint16) * tirx.const(4, T.uint16))) & tirx.const(15, T.uint16)
    sign = nib >> tirx.const(3, T.uint16)
    exp = ((nib & tirx.const(6, T.uint16)) >> tirx.const(1, T.uint16)) + tirx.const(14, "uint16")
    man = nib & tirx.const(1, T.uint16)
    bits = ((sign << tirx.const(5, T.uint16)) | exp) << tirx.const(10, T.uint16)
    return tirx.reinterpret(dtype, (bits | (man << tirx.const(9, T.uint16))).astype(T.uint16))


def e2m1_to_bfloat16(val, pos, scale, dtype):
    """The same nibble as bfloat16 (exponent rebiased by 126), its exponent raised by
    ``scale`` (a power-of-two block scale)."""
    nib = (val >> (pos.astype(T.uint16) * tirx.const(4, T.uint16))) & tirx.const(15, T.uint16)
    sign = nib >> tirx.const(3, T.uint16)
    exp = ((nib & tirx.const(6, T.uint16)) >> tirx.const(1, T.uint16)) + tirx.const(126, T.uint16)
    exp = exp + scale.astype(T.uint16)
    man = nib & tirx.const(1, T.uint16)
    bits = (((sign << tirx.const(8, T.uint16)) | exp) << tirx.const(7, T.uint16)) | (
        man << tirx.const(6, T.uint16))
    return tirx.reinterpret(dtype, bits)


def int4_to_int8(val, pos):
    """Nibble ``pos`` of ``val`` as a signed 4-bit integer: moved to the top of a byte,
    taken as int8 and shifted back (arithmetic shift: the sign extends)."""
    nib = (val >> (pos.astype(T.uint8) * tirx.const(4, T.uint8))) & tirx.const(15, T.uint8)
    top = tirx.reinterpret(T.int8, nib << tirx.const(4, T.uint8))
    return tirx.Cast(T.int8, top >> tirx.const(4, T.int8))


def int4_to_int8_by_int32_shifts(val, pos):
    """The same signed nibble, sign-extended in int32 as C code does it: moved to the
    top of an int32 and shifted back (the bits shifted past bit 31 are dropped)."""
    nib = (val >> (pos.astype(T.int32) * tirx.const(4, T.int32))) & tirx.const(15, T.int32)
    return tirx.Cast(T.int8, (nib << tirx.const(28, T.int32)) >> tirx.const(28, T.int32))


def plus_three(x):
    """``tirx.const`` with no dtype is the value itself (a literal stays weak), with a
    dtype by keyword the value in it."""
    return x + tirx.const(3) + tirx.const(0, dtype="int8")


def dtype_of_value(x):
    """``x.dtype`` of the value: refused for bfloat16 (the simulator holds it in float32)."""
    return x if x.dtype == T.bfloat16 else x


def int_converter(storage_type="int", storage_nbit=8):
    """A factory of converters, as TileLang's dequantizing GEMV builds its own: called in
    the kernel with compile-time arguments, its result called on the values."""
    storage_dtype = storage_type + str(storage_nbit)

    def convert(nbit, val, pos, dtype):
        assert val.dtype == storage_dtype
        mask = tirx.const((1 << nbit) - 1, T.int32)
        raw = (val >> (pos.astype(T.int32) * tirx.const(nbit, T.int32))) & mask
        return tirx.Cast(dtype, (raw << tirx.const(32 - nbit, T.int32))
                         >> tirx.const(32 - nbit, T.int32))
    return convert
