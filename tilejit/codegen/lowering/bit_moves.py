"""Explicit loads and stores (``frontend/bit_moves.py``'s markers) in LLVM IR: one access
of ``<words x i32>`` at the operand element's address, aligned to its size (PTX
``ld.global.v4.b32`` for 128 bits, ``ld.shared.v2.b32`` for 64; 256 bits the backend's
two v4 accesses below sm_100), under ``pred`` a branch around it (a load then gives 0).
A shared tile's element address is its row-major one: a swizzled tile (one a gemm or
a TMA copy reads) is refused. ``__tj_bits_as`` bitcasts the words to ``<lanes x T>``."""
from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils, types

from tilejit.errors import CompileError
from tilejit.ir import markers
from tilejit.ir.addressing import row_major
from tilejit.codegen.lowering.atomics import element_ptr
from tilejit.codegen.lowering.registry import lower
from tilejit.codegen.lowering.tiles import plan
from tilejit.codegen.typing.tiles import TileType

I32 = ir.IntType(32)


def _address(context, builder, buffer_ty, buffer, index_ty, index, words, memory):
    """A ``<words x i32>*`` (an ``i32*`` for one word) at the operand's element."""
    if isinstance(buffer_ty, TileType):
        t = plan().tile(buffer_ty.tile_name)
        if t.layout != row_major(t.shape):
            raise CompileError(f"T.lds{32 * words} or T.sts{32 * words} on shared tile "
                               f"{buffer_ty.tile_name!r}, "
                               f"which is laid out swizzled or padded (a gemm or TMA copy "
                               f"reads it): its elements' addresses are not row-major; use a "
                               f"tile of its own")
    if len(getattr(index_ty, "types", (index_ty,))) == 0:
        index_ty = types.UniTuple(types.int64, buffer_ty.ndim)
        index = context.make_tuple(builder, index_ty, [ir.Constant(ir.IntType(64), 0)]
                                   * buffer_ty.ndim)
    ptr = element_ptr(context, builder, buffer_ty, buffer, index_ty, index)
    target = I32 if words == 1 else ir.VectorType(I32, words)
    return builder.bitcast(ptr, target.as_pointer(ptr.type.addrspace))


def _words_of(builder, value, words):
    """The ``<words x i32>`` (an ``i32`` for one) of a typed value's words."""
    if words == 1:
        return value
    vec = ir.Constant(ir.VectorType(I32, words), None)
    for k in range(words):
        vec = builder.insert_element(vec, builder.extract_value(value, k), I32(k))
    return vec


def _tuple_of(context, builder, tuple_ty, vec, count):
    items = [builder.extract_element(vec, I32(k)) for k in range(count)]
    return context.make_tuple(builder, tuple_ty, items)


@lower(markers.stub(markers.BITS_LOAD), types.Any, types.Any, types.Any, types.Any, types.Any)
def bits_load(context, builder, sig, args):
    buffer_ty, index_ty, words_ty, pred_ty, memory_ty = sig.args
    words, memory = words_ty.literal_value, memory_ty.literal_value
    ptr = _address(context, builder, buffer_ty, args[0], index_ty, args[1], words, memory)
    align = 4 * words
    pred = context.cast(builder, args[3], pred_ty, types.boolean)
    out = cgutils.alloca_once_value(builder, ir.Constant(ptr.type.pointee, None))
    with builder.if_then(pred):
        value = builder.load(ptr, align=align)
        builder.store(value, out)
    value = builder.load(out)
    if words == 1:
        return value
    return _tuple_of(context, builder, sig.return_type, value, words)


@lower(markers.stub(markers.BITS_STORE), types.Any, types.Any, types.Any, types.Any, types.Any,
       types.Any)
def bits_store(context, builder, sig, args):
    buffer_ty, index_ty, value_ty, words_ty, pred_ty, memory_ty = sig.args
    words, memory = words_ty.literal_value, memory_ty.literal_value
    if words == 1:
        value = context.cast(builder, args[2], value_ty, types.uint32)
    else:
        items = cgutils.unpack_tuple(builder, args[2], words)
        value = ir.Constant(ir.VectorType(I32, words), None)
        for k, (item, ty) in enumerate(zip(items, value_ty.types)):
            value = builder.insert_element(value, context.cast(builder, item, ty,
                                                               types.uint32), I32(k))
    pred = context.cast(builder, args[4], pred_ty, types.boolean)
    with builder.if_then(pred):
        ptr = _address(context, builder, buffer_ty, args[0], index_ty, args[1], words, memory)
        builder.store(value, ptr, align=4 * words)
    return context.get_dummy_value()


@lower(markers.stub(markers.BITS_AS), types.Any, types.Any, types.Any)
def bits_as(context, builder, sig, args):
    value_ty = sig.args[0]
    words = 1 if isinstance(value_ty, types.Integer) else len(value_ty)
    element = context.get_value_type(sig.return_type.dtype)
    lanes = len(sig.return_type)
    vec = _words_of(builder, args[0], words)
    if words == 1:
        vec = builder.bitcast(vec, ir.VectorType(I32, 1))
    cast = builder.bitcast(vec, ir.VectorType(element, lanes))
    return _tuple_of(context, builder, sig.return_type, cast, lanes)
