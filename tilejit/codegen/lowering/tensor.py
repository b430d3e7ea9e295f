"""Global tensors: shape/strides/dtype attributes, element load and store.

A tensor argument is a struct {data: T addrspace(1)*, shape: i64[n], strides: i64[n]}
(strides in elements). Element (i0, …) lives at data + Σ i_k·stride_k; in the
specialization for a contiguous last dimension stride[n-1] is the constant 1, which
lets LLVM see consecutive addresses and merge them into 16-byte vector accesses.
"""
from __future__ import annotations

import operator

from llvmlite import ir
from numba.core import cgutils, types

from tilejit import language as T
from tilejit.codegen.typing.types import DTypeType, GlobalTensorType
from tilejit.codegen.lowering.debug import emit_bounds_check
from tilejit.codegen.lowering.registry import lower, lower_getattr
from tilejit.ir.kernel_config import current_kernel

I64 = ir.IntType(64)


def tensor_struct(context, builder, ty, value):
    return cgutils.create_struct_proxy(ty)(context, builder, value=value)


def _where(context) -> str:
    loc = getattr(context, "current_loc", None)
    if loc is None:
        return ""
    return f" at {loc.filename}:{loc.line}".replace("%", "%%")


def element_pointer(context, builder, ty: GlobalTensorType, value, index_ty, index):
    tensor = tensor_struct(context, builder, ty, value)
    return builder.gep(tensor.data, [element_offset(context, builder, ty, tensor, index_ty,
                                                    index)], inbounds=True)


def element_offset(context, builder, ty: GlobalTensorType, tensor, index_ty, index):
    """The element's offset from the tensor's data, in elements (an i64)."""
    checked = current_kernel().debug
    if isinstance(index_ty, types.BaseTuple):
        indices = cgutils.unpack_tuple(builder, index, len(index_ty))
        idx_tys = index_ty.types
    else:
        indices, idx_tys = [index], [index_ty]
    strides = cgutils.unpack_tuple(builder, tensor.strides, ty.ndim)
    shape = cgutils.unpack_tuple(builder, tensor.shape, ty.ndim) if checked else None
    offset = None
    for k, (i, ity) in enumerate(zip(indices, idx_tys)):
        i64 = context.cast(builder, i, ity, types.int64)
        if checked:
            emit_bounds_check(builder, i64, shape[k],
                              f"of a {ty.dtype.name} tensor, dimension {k},{_where(context)}")
        term = i64 if (k == ty.ndim - 1 and ty.contiguous) else builder.mul(
            i64, strides[k], flags=["nsw"])
        offset = term if offset is None else builder.add(offset, term, flags=["nsw"])
    return offset


def packed_place(builder, data, offset):
    """(the byte holding a packed element, the element's bit offset in it: an i8) of the
    element ``offset`` (i64, in elements) of a packed tensor whose bytes start at
    ``data``: element 2k in the low four bits of byte k."""
    byte = builder.gep(data, [builder.ashr(offset, I64(1))], inbounds=True)
    shift = builder.shl(builder.trunc(builder.and_(offset, I64(1)), ir.IntType(8)),
                        ir.IntType(8)(2))
    return byte, shift


def packed_load(builder, data, offset, dtype):
    """A packed element's value, an i8: int4's sign-extended, float4_e2m1fn's code."""
    byte, shift = packed_place(builder, data, offset)
    i8 = ir.IntType(8)
    if dtype.kind == "int":         # int4: the half to the top, shifted back signed
        return builder.ashr(builder.shl(builder.load(byte), builder.sub(i8(4), shift)), i8(4))
    return builder.and_(builder.lshr(builder.load(byte), shift), i8(0xF))


def packed_store(builder, data, offset, value):
    """A float4_e2m1fn or int4 element (the low four bits of the i8 ``value``) written
    into its half of a byte: two atomics on the aligned 32-bit word holding it (clear its
    four bits, then set them), since the byte's other half may be another thread's
    element, written at the same time (a T.Parallel over a row). Other bits of the word
    are left as they are."""
    byte, shift = packed_place(builder, data, offset)
    i32 = ir.IntType(32)
    address = builder.ptrtoint(byte, I64)
    word = builder.inttoptr(builder.and_(address, I64(~3)), i32.as_pointer(
        byte.type.addrspace))
    bits = builder.add(builder.shl(builder.trunc(builder.and_(address, I64(3)), i32),
                                   i32(3)), builder.zext(shift, i32))
    code = builder.and_(builder.zext(value, i32), i32(0xF))
    builder.atomic_rmw("and", word, builder.not_(builder.shl(i32(0xF), bits)), "monotonic")
    builder.atomic_rmw("or", word, builder.shl(code, bits), "monotonic")


def _packed_offset(context, builder, ty, value, index_ty, index):
    tensor = tensor_struct(context, builder, ty, value)
    return tensor.data, element_offset(context, builder, ty, tensor, index_ty, index)


@lower(operator.getitem, GlobalTensorType, types.Any)
def tensor_getitem(context, builder, sig, args):
    ty, index_ty = sig.args
    if ty.dtype.packed > 1:       # float4_e2m1fn, int4: its half of the byte (2k low)
        data, offset = _packed_offset(context, builder, ty, args[0], index_ty, args[1])
        return packed_load(builder, data, offset, ty.dtype)
    ptr = element_pointer(context, builder, ty, args[0], index_ty, args[1])
    return context.unpack_value(builder, ty.element, ptr, align=ty.dtype.itemsize)


@lower(operator.setitem, GlobalTensorType, types.Any, types.Any)
def tensor_setitem(context, builder, sig, args):
    ty, index_ty, value_ty = sig.args
    if ty.dtype.packed > 1:
        data, offset = _packed_offset(context, builder, ty, args[0], index_ty, args[1])
        packed_store(builder, data, offset, args[2])
        return context.get_dummy_value()
    ptr = element_pointer(context, builder, ty, args[0], index_ty, args[1])
    context.pack_value(builder, ty.element, args[2], ptr, align=ty.dtype.itemsize)
    return context.get_dummy_value()


@lower_getattr(GlobalTensorType, "shape")
def tensor_shape(context, builder, ty, value):
    return tensor_struct(context, builder, ty, value).shape


@lower_getattr(GlobalTensorType, "strides")
def tensor_strides(context, builder, ty, value):
    return tensor_struct(context, builder, ty, value).strides


@lower_getattr(GlobalTensorType, "ndim")
def tensor_ndim(context, builder, ty, value):
    return I64(ty.ndim)


@lower_getattr(GlobalTensorType, "dtype")
def tensor_dtype(context, builder, ty, value):
    return context.get_dummy_value()


__all__ = ["element_pointer", "DTypeType"]


@lower(T.reshape, GlobalTensorType, types.BaseTuple)
@lower(T.view, GlobalTensorType, types.Any)
@lower(T.view, GlobalTensorType, types.Any, types.Any)
def view_impl(context, builder, sig, args):
    """A view: the same data pointer (as the new element type), the shape given (for
    ``T.view`` without one, a dtype of the same size, the tensor's) and row-major
    strides."""
    src_ty, out_ty = sig.args[0], sig.return_type
    src = tensor_struct(context, builder, src_ty, args[0])
    out = cgutils.create_struct_proxy(out_ty)(context, builder)
    out.data = builder.bitcast(src.data, context.get_value_type(out_ty.pointer))
    if isinstance(sig.args[1], types.NoneType):         # the same shape (same itemsize)
        dims = cgutils.unpack_tuple(builder, src.shape, src_ty.ndim)
    else:
        dims = [context.cast(builder, v, t, types.int64) for v, t in
                zip(cgutils.unpack_tuple(builder, args[1], len(sig.args[1].types)),
                    sig.args[1].types)]
    strides, acc = [], I64(1)
    for d in reversed(dims):
        strides.append(acc)
        acc = builder.mul(acc, d)
    tup = types.UniTuple(types.int64, out_ty.ndim)
    out.shape = context.make_tuple(builder, tup, dims)
    out.strides = context.make_tuple(builder, tup, strides[::-1])
    return out._getvalue()


@lower(T.make_tensor, types.Integer, types.BaseTuple)
@lower(T.make_tensor, types.Integer, types.BaseTuple, types.Any)
@lower(T.make_tensor, types.Integer, types.BaseTuple, types.Any, types.Any)
def make_tensor_impl(context, builder, sig, args):
    """A tensor at an address: the integer as a global pointer, the shape given, the
    strides given or row-major."""
    out_ty = sig.return_type
    out = cgutils.create_struct_proxy(out_ty)(context, builder)
    address = context.cast(builder, args[0], sig.args[0], types.int64)
    out.data = builder.inttoptr(address, context.get_value_type(out_ty.pointer))
    dims = [context.cast(builder, v, t, types.int64) for v, t in
            zip(cgutils.unpack_tuple(builder, args[1], len(sig.args[1].types)),
                sig.args[1].types)]
    if len(sig.args) == 4 and isinstance(sig.args[3], types.BaseTuple):
        strides = [context.cast(builder, v, t, types.int64) for v, t in
                   zip(cgutils.unpack_tuple(builder, args[3], len(sig.args[3].types)),
                       sig.args[3].types)]
    else:
        strides, acc = [], I64(1)
        for d in reversed(dims):
            strides.append(acc)
            acc = builder.mul(acc, d)
        strides = strides[::-1]
    tup = types.UniTuple(types.int64, out_ty.ndim)
    out.shape = context.make_tuple(builder, tup, dims)
    out.strides = context.make_tuple(builder, tup, strides)
    return out._getvalue()
