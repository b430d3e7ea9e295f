"""Typing of the tile language: one template per language function, and the
attributes and indexing of global tensors. Errors name the construct and what it got;
Numba attaches the kernel's source location."""
from __future__ import annotations

import operator
import sys

from numba.core import errors, typeinfer, types, utils
from numba.core.typing import signature
from numba.core.typing.templates import (AbstractTemplate, AttributeTemplate, Registry,
                                         bound_function)
from numba.core.typing.typeof import typeof_impl

from tilejit import language as T
from tilejit.ir import markers
from tilejit.language import tir_exprs
from tilejit.language.dtypes import DType, as_dtype, packed_view_message
from tilejit.codegen.typing.context import harmonize
from tilejit.codegen.typing.types import (NUMBA_OF, DTypeType, GlobalTensorType, ParallelType,
                                          StorageFloat,
                                          numba_type, weak_float, WeakFloat)

registry = Registry()
infer_global = registry.register_global
infer_getattr = registry.register_attr


@typeof_impl.register(DType)
def _typeof_dtype(val, c):
    return DTypeType(val)


@typeof_impl.register(T.macro)
def _typeof_macro(val, c):
    # a device function of the kernel being compiled; a new dispatcher per kernel
    # compilation, since the macro's code depends on the kernel (threads, vectors)
    from tilejit.codegen.macros import dispatcher_for
    return types.Dispatcher(dispatcher_for(val))


def _common(args, what):
    """The type two or more operands meet in: the weak-scalar rules, else the widest
    (floats before integers)."""
    for a in args:
        if not isinstance(a, (types.Number, types.Boolean)):
            raise errors.TypingError(f"{what}: expected numbers, got {a}")
    _, result = harmonize(tuple(args))
    if result is not None:
        return result
    tys = [types.unliteral(a) for a in args]
    return max(tys, key=lambda t: (isinstance(t, types.Float), getattr(t, "bitwidth", 1)))


def _literal_int(ty, what) -> int:
    if isinstance(ty, types.IntegerLiteral):
        return ty.literal_value
    raise errors.TypingError(
        f"{what} must be a compile-time integer (a literal, a T.constexpr parameter, a "
        f"shape entry such as A.shape[0], or arithmetic on them), got a run-time value "
        f"of type {ty}")


@infer_global(T.Parallel)
class ParallelTemplate(AbstractTemplate):
    def generic(self, args, kws):
        if kws:
            raise errors.TypingError(f"T.Parallel: unsupported keyword(s) {sorted(kws)}")
        if not args:
            raise errors.TypingError("T.Parallel takes one extent or more, got none")
        extents = tuple(_literal_int(a, f"T.Parallel extent {i}") for i, a in enumerate(args))
        if any(e <= 0 for e in extents):
            raise errors.TypingError(f"T.Parallel extents must be positive, got {extents}")
        return signature(ParallelType(extents), *args)


def _extents(args, what):
    extents = tuple(_literal_int(a, f"{what} extent {i}") for i, a in enumerate(args))
    if not extents or any(e <= 0 for e in extents):
        raise errors.TypingError(f"{what}: one positive extent or more, got {extents}")
    return extents


class _TileLoopTemplate(AbstractTemplate):
    kind = ""

    def generic(self, args, kws):
        return signature(ParallelType(_extents(args, "T.Parallel"), self.kind), *args)


@infer_global(markers.stub(markers.GROUPS))
class ParallelGroupsTemplate(_TileLoopTemplate):
    kind = "groups"


@infer_global(markers.stub(markers.LANES))
class GroupLanesTemplate(_TileLoopTemplate):
    kind = "lanes"


@infer_global(markers.stub(markers.LANES_REVERSED))
class GroupLanesReversedTemplate(_TileLoopTemplate):
    kind = "lanes_reversed"


@infer_global(markers.stub(markers.ENDS))
class GroupEndsTemplate(_TileLoopTemplate):
    kind = "ends"


@infer_global(markers.stub(markers.LANE_INDEX))
class LaneIndexTemplate(AbstractTemplate):
    def generic(self, args, kws):
        group, lane, *extents = args
        extents = _extents(extents, "T.Parallel")
        ret = types.int32 if len(extents) == 1 else types.UniTuple(types.int32, len(extents))
        return signature(ret, types.int32, types.int32, *args[2:])


@infer_global(markers.stub(markers.BLOCK_INDEX))
class BlockIndexTemplate(AbstractTemplate):
    def generic(self, args, kws):
        axis, *extent = args         # (the grid's extent there, when compile-time)
        _literal_int(axis, "block axis")
        for e in extent:
            _literal_int(e, "grid extent")
        return signature(types.int32, *args)


class _Int32Query(AbstractTemplate):
    """A marker of no arguments whose value is an int32: the thread index, the warp
    size."""

    def generic(self, args, kws):
        if args or kws:
            return None
        return signature(types.int32)


for _marker in (markers.THREAD_INDEX, markers.WARP_SIZE):
    infer_global(markers.stub(_marker))(type(f"{_marker}_template", (_Int32Query,), {}))


@infer_global(markers.stub(markers.GRID_DIM))
class GridDimTemplate(AbstractTemplate):
    def generic(self, args, kws):
        (axis,) = args
        _literal_int(axis, "grid axis")
        return signature(types.int32, axis)


@infer_global(T.ceildiv)
class CeilDivTemplate(AbstractTemplate):
    def generic(self, args, kws):
        if len(args) != 2 or not all(isinstance(a, types.Integer) for a in args):
            raise errors.TypingError(f"T.ceildiv expects two integers, got {args}")
        if all(isinstance(a, types.IntegerLiteral) for a in args) and args[1].literal_value:
            a, b = args[0].literal_value, args[1].literal_value
            return signature(types.IntegerLiteral(-(-a // b)), types.int64, types.int64)
        ty = _common(args, "T.ceildiv")
        return signature(ty, ty, ty)


@infer_global(T.if_then_else)
class IfThenElseTemplate(AbstractTemplate):
    def generic(self, args, kws):
        if len(args) != 3:
            raise errors.TypingError("T.if_then_else(cond, a, b) takes three arguments")
        cond, a, b = args
        if not isinstance(cond, (types.Boolean, types.Integer)):
            raise errors.TypingError(f"T.if_then_else: condition must be a boolean, got {cond}")
        ty = _common((a, b), "T.if_then_else")
        return signature(ty, types.boolean, ty, ty)


class _Logical(AbstractTemplate):
    """TIR's ``T.And(a, b)``/``T.Or(a, b)``/``T.Not(a)`` in a helper the kernel calls (the
    kernel body's are ``and``/``or``/``not``, frontend/rewrite.py): booleans (an integer
    is its truth), both operands evaluated, as TIR's."""
    def generic(self, args, kws):
        key = type(self).key            # (self.key is a bound method of the function)
        name, arity = key.__name__, 1 if key is T.Not else 2
        if len(args) != arity or kws:
            raise errors.TypingError(f"T.{name} takes {arity} condition(s), got {len(args)}")
        for a in args:
            if not isinstance(a, (types.Boolean, types.Integer)):
                raise errors.TypingError(f"T.{name}: expected conditions (booleans), got {a}")
        return signature(types.boolean, *args)


@infer_global(T.And)
class AndTemplate(_Logical):
    pass


@infer_global(T.Or)
class OrTemplate(_Logical):
    pass


@infer_global(T.Not)
class NotTemplate(_Logical):
    pass


class _BinaryMath(AbstractTemplate):
    def generic(self, args, kws):
        if len(args) != 2 or kws:
            raise errors.TypingError(f"{self.key.__name__} takes two values, got {len(args)}")
        ints = [types.unliteral(a) for a in args if isinstance(a, types.Integer)
                and not isinstance(a, types.IntegerLiteral)]
        if len(ints) == 2 and ints[0].signed != ints[1].signed:
            # one of the two would be read in the other's type, and which one depends on
            # the order (the simulator's numpy widens instead): the program says
            raise errors.TypingError(
                f"T.{self.key.__name__} of {ints[0]} and {ints[1]}: one is signed, the "
                f"other not; cast one to the other's type (T.cast(x, \"{ints[0]}\"))")
        ty = _common(args, f"T.{self.key.__name__}")
        if isinstance(ty, WeakFloat):
            ty = types.float32
        return signature(ty, ty, ty)


@infer_global(T.max)
class MaxTemplate(_BinaryMath):
    key = T.max


@infer_global(T.min)
class MinTemplate(_BinaryMath):
    key = T.min


@infer_global(T.clamp)
class ClampTemplate(AbstractTemplate):
    """``T.clamp(x, lo, hi)`` met outside the front end's rewrite (a helper compiled from
    its bytecode, a function picked from a dict): ``T.min(T.max(x, lo), hi)``."""
    def generic(self, args, kws):
        if len(args) != 3 or kws:
            raise errors.TypingError(f"T.clamp takes three values (x, min_val, max_val), "
                                     f"got {len(args)}")
        ty = _common(args, "T.clamp")
        if isinstance(ty, WeakFloat):
            ty = types.float32
        return signature(ty, ty, ty, ty)


@infer_global(T.__ldg)
class LdgTemplate(AbstractTemplate):
    """``T.__ldg(value)`` / ``T.__ldg(x, index)`` met outside the front end's rewrite (a
    helper compiled on its own): the value (``T.__ldg(x[i])`` loaded it already), or
    ``x[index]``."""
    def generic(self, args, kws):
        if len(args) == 1 and not kws and isinstance(args[0], (types.Number, types.Boolean)):
            return signature(args[0], args[0])
        if len(args) == 2 and not kws:
            element = self.context.resolve_function_type(operator.getitem, args, {})
            if element is not None:
                return signature(element.return_type, *args)
        raise errors.TypingError(f"T.__ldg takes a loaded element (T.__ldg(x[i])) or a "
                                 f"tensor and its index (T.__ldg(x, i)), got "
                                 f"{', '.join(map(str, args))}")


@infer_global(T.abs)
class AbsTemplate(AbstractTemplate):
    def generic(self, args, kws):
        (x,) = args
        if not isinstance(x, types.Number):
            raise errors.TypingError(f"T.abs expects a number, got {x}")
        ty = types.float32 if isinstance(x, WeakFloat) else types.unliteral(x)
        return signature(ty, ty)


def dtype_of(ty):
    """The DType a compile-time dtype argument names (``T.float16``, ``A.dtype`` or a
    dtype string such as ``"float16"``), or None. A dtype no value can have (``T.uint4``)
    is a TypingError saying so."""
    dtype = named_dtype(ty)
    if dtype is not None and dtype.name not in NUMBA_OF:
        try:
            as_dtype(dtype)
        except TypeError as e:
            raise errors.TypingError(str(e)) from None
        raise errors.TypingError(f"{dtype.name}: no value in a kernel has this dtype")
    return dtype


def named_dtype(ty):
    """``dtype_of`` without its check: the dtype a compile-time argument names."""
    if isinstance(ty, DTypeType):
        return ty.dtype
    if isinstance(ty, types.StringLiteral):
        try:
            return as_dtype(ty.literal_value)
        except TypeError:
            return None
    if isinstance(ty, types.NumberClass):       # numpy's scalar type: np.float32
        return dtype_of_number(ty.instance_type)
    return None


def _dtype_problem(sig, args):
    """What is wrong with the dtype argument of ``sig`` (its second): a string the
    language has no dtype of, one not known at compile time, or no dtype at all."""
    if len(args) != 2:
        return f"{sig}: expected a value and a dtype, got {len(args)} argument(s)"
    ty = args[1]
    if isinstance(ty, types.StringLiteral):
        try:
            as_dtype(ty.literal_value)
        except TypeError as e:
            return f"{sig}: {e}"
    if isinstance(ty, types.UnicodeType):
        return (f"{sig}: the dtype must be known when the kernel is compiled (a dtype such as "
                f"T.float16, a string constant or a tensor's .dtype), got a string computed "
                f"in the kernel")
    return f"{sig}: expected a dtype (T.float16, \"float16\", A.dtype) second, got {ty}"


@infer_global(T.cast)
class CastTemplate(AbstractTemplate):
    def generic(self, args, kws):
        dtype = dtype_of(args[1]) if len(args) == 2 else None
        if dtype is None:
            raise errors.TypingError(_dtype_problem("T.cast(value, dtype)", args))
        if not isinstance(args[0], (types.Number, types.Boolean)):
            raise errors.TypingError(f"T.cast: expected one value (a number, an element) to "
                                     f"convert to {dtype.name}, got {args[0]}")
        return signature(numba_type(dtype), *args)


@infer_global(T.reinterpret)
class ReinterpretTemplate(AbstractTemplate):
    def generic(self, args, kws):
        given = args
        if len(args) == 2 and not kws and dtype_of(args[1]) is None and \
                dtype_of(args[0]) is not None and isinstance(args[1], types.Number):
            # TileLang's deprecated T.reinterpret(dtype, value) (DeepSeek's helpers)
            tir_exprs.warn_old_reinterpret()
            args = (args[1], args[0])
        dtype = dtype_of(args[1]) if len(args) == 2 and not kws else None
        if dtype is None:
            raise errors.TypingError(_dtype_problem("T.reinterpret(value, dtype)", args)
                                     if not kws else "T.reinterpret(value, dtype) takes no "
                                     "keyword arguments")
        value, to = types.unliteral(args[0]), numba_type(dtype)
        if isinstance(args[0], types.IntegerLiteral):
            # a number has no bits of its own (the simulator's error too)
            raise errors.TypingError(f"T.reinterpret: expected a typed value (an element, "
                                     f"or a T.cast), got the number {args[0].literal_value}")
        if isinstance(value, types.Integer) and value.bitwidth > getattr(to, "bitwidth", 64):
            # a wider integer is cut to the dtype's width (Numba's integer arithmetic runs
            # in 64 bits where TileLang's stays in 32: ``(e + 127) << 23`` as float32)
            value = numba_type(tir_exprs.unsigned_of(dtype))
        _check_bitcast(value, to, dtype)
        return signature(to, *given)


def _check_bitcast(value, to, dtype):
    """A bitcast of ``value`` to ``to`` (of ``dtype``): integers and float16/32/64 of the
    same width, or an integer to bfloat16 / a float8 of its width. A float4_e2m1fn has
    four bits, no integer's width: refused either way, as is a bitcast to int4."""
    if dtype.packed > 1 or getattr(value, "name", "") == "float4_e2m1fn":
        four = dtype.with_article if dtype.packed > 1 else "a float4_e2m1fn"
        raise errors.TypingError(f"T.reinterpret: {value} as {dtype.name}: {four} "
                                 f"value is four bits, which no integer is (not supported); "
                                 f"decode the byte's halves with shifts and T.cast")
    ok = (types.Integer, types.Float)
    if isinstance(to, StorageFloat) and isinstance(value, types.Integer):
        ok = (types.Integer, StorageFloat)
    if not isinstance(value, ok) or not isinstance(to, ok) or \
            getattr(value, "bitwidth", 0) != getattr(to, "bitwidth", 0):
        raise errors.TypingError(f"T.reinterpret: {value} as {dtype.name}: a bitcast "
                                 f"needs integers or float16/32/64 of the same width (or "
                                 f"an integer to bfloat16 or a float8 of its width)")


class _ViewTemplate(AbstractTemplate):
    """``T.reshape(A, shape)`` / ``T.view(A, shape, dtype)`` of a global tensor: a
    contiguous global tensor of the shape's rank (the host checks that A is contiguous)."""
    what = "T.reshape"

    def generic(self, args, kws):
        what = self.what
        if kws or not 2 <= len(args) <= (3 if what == "T.view" else 2):
            raise errors.TypingError(f"{what}(buffer, shape{', dtype' * (what == 'T.view')})"
                                     f": got {args} {kws or ''}")
        src, shape = args[0], args[1]
        if not isinstance(src, GlobalTensorType):
            raise errors.TypingError(f"{what}: expected a global tensor (a tensor parameter "
                                     f"of the kernel), got {src}; a view of a tile is "
                                     f"assigned to a name of its own (`V = {what}(S, "
                                     f"shape)`)")
        dtype = src.dtype
        if len(args) == 3 and not isinstance(args[2], types.NoneType):
            dtype = dtype_of(args[2])
            if src.dtype.packed > 1 and dtype != src.dtype:
                raise errors.TypingError(packed_view_message(what, "the tensor", src.dtype,
                                                             dtype))
            ok = ("int", "uint", "float")
            if dtype is None or any(d.held_in_float32 or not d.name.startswith(ok)
                                    for d in (dtype, src.dtype)):
                raise errors.TypingError(f"{what}: a view as another dtype takes integers "
                                         f"and float16/32/64, got {src.dtype.name} as "
                                         f"{args[2]}")
        if isinstance(shape, types.NoneType):
            if dtype.itemsize != src.dtype.itemsize:
                raise errors.TypingError(f"{what}: a view of {src.dtype.name} as "
                                         f"{dtype.name} (another size) needs its shape")
            ndim = src.ndim
        elif isinstance(shape, types.BaseTuple) and shape.types and all(
                isinstance(t, types.Integer) for t in shape.types):
            ndim = len(shape.types)
        else:
            raise errors.TypingError(f"{what}: the shape must be a tuple of integers, "
                                     f"got {shape}")
        # not `aligned`: that promises 16-byte rows, and a view's rows are its own
        return signature(GlobalTensorType(dtype, ndim, contiguous=True), *args)


@infer_global(T.make_tensor)
class MakeTensorTemplate(AbstractTemplate):
    """``T.make_tensor(ptr, shape, dtype, strides)``: a global tensor at an address (an
    integer), row-major (contiguous) unless strides are given."""

    def generic(self, args, kws):
        names = ("ptr", "shape", "dtype", "strides")
        if kws or not 2 <= len(args) <= 4:
            raise errors.TypingError(f"T.make_tensor(ptr, shape, dtype, strides): got "
                                     f"{args} {kws or ''} (keywords are taken in the "
                                     f"kernel's body, not in a helper it calls)")
        given = dict(zip(names, args))
        ptr, shape = given.get("ptr"), given.get("shape")
        if not isinstance(ptr, types.Integer):
            raise errors.TypingError(f"T.make_tensor: argument `ptr`: expected an address "
                                     f"(a T.ptr parameter or a pointer table's element), "
                                     f"got {ptr}")
        if not (isinstance(shape, types.BaseTuple) and shape.types and all(
                isinstance(t, types.Integer) for t in shape.types)):
            raise errors.TypingError(f"T.make_tensor: argument `shape`: expected a tuple of "
                                     f"integers, got {shape}")
        dtype = dtype_of(given["dtype"]) if "dtype" in given else as_dtype("float32")
        if dtype is None:
            raise errors.TypingError(f"T.make_tensor: argument `dtype`: expected a dtype, "
                                     f"got {given['dtype']}")
        strides = given.get("strides")
        if strides is not None and not isinstance(strides, (types.NoneType, types.Omitted)):
            if not (isinstance(strides, types.BaseTuple) and len(strides.types) == len(
                    shape.types) and all(isinstance(t, types.Integer) for t in strides.types)):
                raise errors.TypingError(f"T.make_tensor: argument `strides`: expected "
                                         f"{len(shape.types)} integers, got {strides}")
            out = GlobalTensorType(dtype, len(shape.types))
        else:
            out = GlobalTensorType(dtype, len(shape.types), contiguous=True)
        return signature(out, *[given[n] for n in names if n in given])


@infer_global(T.reshape)
class ReshapeTemplate(_ViewTemplate):
    what = "T.reshape"


@infer_global(T.view)
class ViewTemplate(_ViewTemplate):
    what = "T.view"


@infer_global(T.infinity)
class InfinityTemplate(AbstractTemplate):
    def generic(self, args, kws):
        (d,) = args
        dtype = dtype_of(d)
        if dtype is None or not dtype.is_float:
            raise errors.TypingError(f"T.infinity expects a float dtype, got {d}")
        return signature(numba_type(dtype), d)


@infer_global(T.max_value)
@infer_global(T.min_value)
class FiniteLimitTemplate(AbstractTemplate):
    def generic(self, args, kws):
        (d,) = args
        dtype = dtype_of(d)
        if dtype is None or not (dtype.is_float or dtype.is_int) or \
                dtype.name in ("float4_e2m1fn", "float8_e8m0fnu"):
            raise errors.TypingError(f"T.max_value / T.min_value expect an integer or float "
                                     f"dtype, got {d}")
        return signature(numba_type(dtype), d)


@infer_global(T.reducer_identity)
class ReducerIdentityTemplate(AbstractTemplate):
    def generic(self, args, kws):
        op, d = args
        dtype = dtype_of(d)
        if not isinstance(op, types.StringLiteral) or op.literal_value not in ("max", "min") \
                or dtype is None or not (dtype.is_float or dtype.is_int):
            raise errors.TypingError(f"a max or min reducer's dtype must be a float or "
                                     f"integer dtype, got {d}")
        return signature(numba_type(dtype), op, d)


@infer_getattr
class GlobalTensorAttributes(AttributeTemplate):
    key = GlobalTensorType

    def resolve_shape(self, ty):
        return types.UniTuple(types.int64, ty.ndim)

    def resolve_strides(self, ty):
        return types.UniTuple(types.int64, ty.ndim)

    def resolve_dtype(self, ty):
        return DTypeType(ty.dtype)

    def resolve_ndim(self, ty):
        return types.IntegerLiteral(ty.ndim)


def _index_types(tensor: GlobalTensorType, index):
    idx = index.types if isinstance(index, types.BaseTuple) else (index,)
    for i in idx:
        if isinstance(i, types.SliceType):
            raise errors.TypingError(
                f"slicing a global tensor ({tensor}) names a region, which only tile "
                "operations such as T.copy accept; index it with one integer per dimension")
        if not isinstance(i, (types.Integer, types.Boolean)):
            raise errors.TypingError(f"tensor index must be an integer, got {i}")
    if len(idx) != tensor.ndim:
        raise errors.TypingError(f"a {tensor.ndim}-d tensor is indexed with {len(idx)} "
                                 f"index(es); give one integer per dimension")
    return index


@infer_global(operator.getitem)
class TensorGetItem(AbstractTemplate):
    def generic(self, args, kws):
        tensor, index = args
        if isinstance(tensor, GlobalTensorType):
            return signature(tensor.element, tensor, _index_types(tensor, index))


@infer_global(operator.setitem)
class TensorSetItem(AbstractTemplate):
    def generic(self, args, kws):
        tensor, index, value = args
        if isinstance(tensor, GlobalTensorType):
            if not isinstance(value, (types.Number, types.Boolean)):
                raise errors.TypingError(f"cannot store a {value} into {tensor}")
            check_float_to_int_store(None, "tensor", tensor.dtype, value)
            return signature(types.none, tensor, _index_types(tensor, index), tensor.element)


# -- element stores of floats into integers ---------------------------------------------
# A float with a dtype of its own (a tensor or tile element, a T.cast, arithmetic on them)
# stored into an integer tensor or tile element is an error, not a silent truncation: the
# kernel converts it with T.cast. A weak Python float (a literal, a run-time Python float,
# a float constexpr) converts as T.cast would. The simulator raises the same message for
# what it stores (``sim/runtime.float_to_int_message``, kept word for word).

def is_typed_float(ty) -> bool:
    """A float that has a dtype of its own (float16/32/64, bfloat16, float8), not a weak
    Python float."""
    return isinstance(ty, StorageFloat) or (
        isinstance(ty, types.Float) and not isinstance(ty, WeakFloat))


def float_to_int_message(target: str | None, what: str, dtype: str, value_dtype: str) -> str:
    """``what``: "tensor", "shared tile", "fragment" or "local tile"."""
    article = "an" if dtype[0] in "aeio" else "a"      # a uint8
    into = f"{target!r}, {article} {dtype} {what}" if target else f"{article} {dtype} {what}"
    return (f"cannot store a {value_dtype} value into {into}: a float is not converted to an "
            f"integer implicitly; write T.cast(value, \"{dtype}\") to convert it (toward zero)")


def check_float_to_int_store(target: str | None, what: str, dtype: DType, value) -> None:
    """``target``: the tile's name; None for a tensor, whose name is looked up (only when
    the store is refused: the lookup walks the typing's frames)."""
    if dtype.is_int and is_typed_float(value):
        target = target if target is not None else store_target_name()
        raise errors.TypingError(float_to_int_message(target, what, dtype.name,
                                                      str(types.unliteral(value))))


def store_target_name() -> str | None:
    """The variable the store being typed writes (``C`` in ``C[i] = x``), read from
    Numba's setitem constraint a few frames up (a template is not told it); None for a
    temporary or where there is none."""
    constraints = (typeinfer.SetItemConstraint, typeinfer.StaticSetItemConstraint)
    frame = sys._getframe(1)
    for _ in range(40):
        if frame is None:
            break
        owner = frame.f_locals.get("self") if frame.f_code.co_name == "__call__" else None
        if isinstance(owner, constraints):
            name = owner.target.unversioned_name
            return None if name.startswith("$") else name
        frame = frame.f_back
    return None


# -- math functions ---------------------------------------------------------------------
# T.exp … T.erf take floats: float32 and float64 compute in their own type; an integer,
# a boolean or a weak Python scalar is converted to float32; float16 and bfloat16 are
# passed as they are and the lowering computes in float32 and rounds the result back.

def _math_result(ty):
    if isinstance(ty, WeakFloat) or not isinstance(ty, (types.Float, StorageFloat)):
        return types.float32
    return types.unliteral(ty)


class _UnaryMath(AbstractTemplate):
    def generic(self, args, kws):
        name = f"T.{self.key.__name__}"
        if kws or len(args) != 1:
            raise errors.TypingError(f"{name} takes one value, got {len(args)} "
                                     f"argument(s){' and keywords' if kws else ''}")
        (x,) = args
        if not isinstance(x, (types.Number, types.Boolean)):
            raise errors.TypingError(f"{name} expects a number, got {x}")
        ret = _math_result(x)
        return signature(ret, ret)


@infer_global(T.exp)
class ExpTemplate(_UnaryMath):
    key = T.exp


@infer_global(T.exp2)
class Exp2Template(_UnaryMath):
    key = T.exp2


@infer_global(T.log)
class LogTemplate(_UnaryMath):
    key = T.log


@infer_global(T.log2)
class Log2Template(_UnaryMath):
    key = T.log2


@infer_global(T.sqrt)
class SqrtTemplate(_UnaryMath):
    key = T.sqrt


@infer_global(T.rsqrt)
class RsqrtTemplate(_UnaryMath):
    key = T.rsqrt


@infer_global(T.tanh)
class TanhTemplate(_UnaryMath):
    key = T.tanh


@infer_global(T.sigmoid)
class SigmoidTemplate(_UnaryMath):
    key = T.sigmoid


@infer_global(T.floor)
class FloorTemplate(_UnaryMath):
    key = T.floor


@infer_global(T.ceil)
class CeilTemplate(_UnaryMath):
    key = T.ceil


@infer_global(T.erf)
class ErfTemplate(_UnaryMath):
    key = T.erf


@infer_global(T.pow)
class PowTemplate(AbstractTemplate):
    """``T.pow(x, y)``: the operands meet by the weak-scalar rules (``T.pow(h, 2.0)``
    on float16 stays float16), then as the unary functions."""

    def generic(self, args, kws):
        if kws or len(args) != 2:
            raise errors.TypingError(f"T.pow takes two values, got {len(args)} "
                                     f"argument(s){' and keywords' if kws else ''}")
        ret = _math_result(_common(args, "T.pow"))
        return signature(ret, ret, ret)


__all__ = ["registry", "weak_float"]


def _message(args, what):
    if len(args) > 1 and not isinstance(args[1], types.StringLiteral):
        raise errors.TypingError(f"{what}: the message must be a string literal, got {args[1]}")
    return args[1:]


@infer_global(T.print)
class PrintTemplate(AbstractTemplate):
    def generic(self, args, kws):
        if kws or not 1 <= len(args) <= 2:
            raise errors.TypingError("T.print(value, msg='') takes a value and a message")
        if len(args) == 1 and isinstance(args[0], types.StringLiteral):
            return signature(types.none, args[0])           # a message alone
        if not isinstance(args[0], (types.Number, types.Boolean)):
            raise errors.TypingError(f"T.print prints a number (a scalar, or one element "
                                     f"such as A[i] or tile[i, j]), got {args[0]}")
        return signature(types.none, types.unliteral(args[0]), *_message(args, "T.print"))


@infer_global(T.print_at)
class PrintAtTemplate(AbstractTemplate):
    """``T.print_at(element, msg, lane, *index)`` (what T.print of a buffer becomes)."""

    def generic(self, args, kws):
        if kws or len(args) < 3 or not isinstance(args[0], (types.Number, types.Boolean)) \
                or not isinstance(args[1], types.StringLiteral) or \
                not isinstance(args[2], types.IntegerLiteral) or \
                not all(isinstance(a, types.Integer) for a in args[3:]):
            raise errors.TypingError(f"T.print_at(element, msg, lane, *index) takes a number, "
                                     f"a string, a constant and integers, got {args}")
        return signature(types.none, types.unliteral(args[0]), args[1], args[2],
                         *(types.unliteral(a) for a in args[3:]))


@infer_global(T.device_assert)
class DeviceAssertTemplate(AbstractTemplate):
    def generic(self, args, kws):
        if kws or not 1 <= len(args) <= 2:
            raise errors.TypingError("T.device_assert(cond, msg='') takes a condition and a "
                                     "message")
        return signature(types.none, types.boolean, *_message(args, "T.device_assert"))


@infer_global(T.assume)
class AssumeTemplate(AbstractTemplate):
    def generic(self, args, kws):
        if kws or len(args) != 1:
            raise errors.TypingError("T.assume(cond) takes one condition")
        return signature(types.none, types.boolean)


# -- warp primitives (language/warp.py) -------------------------------------------------

def _warp_value(ty, what, integers_only=False):
    """The type a warp primitive's value travels as (a literal as its plain type)."""
    ty = types.unliteral(ty)
    if isinstance(ty, WeakFloat):
        ty = types.float32
    ok = isinstance(ty, types.Integer) if integers_only else isinstance(
        ty, (types.Integer, types.Float, StorageFloat))
    if not ok:
        kind = "an integer" if integers_only else "a number"
        raise errors.TypingError(f"T.{what}: expected {kind} value, got {ty}")
    return ty


class _WarpReduce(AbstractTemplate):
    def generic(self, args, kws):
        what = self.key.__name__
        if len(args) != 1 or kws:
            raise errors.TypingError(f"T.{what}(value) takes one value")
        ty = _warp_value(args[0], what, integers_only=what.endswith(("bitand", "bitor")))
        return signature(ty, ty)


class _WarpShuffle(AbstractTemplate):
    def generic(self, args, kws):
        what = self.key.__name__
        if kws or not 2 <= len(args) <= 4:
            raise errors.TypingError(f"T.{what}(value, lane, width=32, mask=0xFFFFFFFF) takes "
                                     f"2 to 4 positional arguments")
        ty = _warp_value(args[0], what)
        for a in args[1:]:
            if not isinstance(a, types.Integer):
                raise errors.TypingError(f"T.{what}: lane, width and mask are integers, got {a}")
        return signature(ty, ty, *[types.int64] * (len(args) - 1))


for _fn in (T.warp_reduce_sum, T.warp_reduce_max, T.warp_reduce_min, T.warp_reduce_bitand,
            T.warp_reduce_bitor):
    infer_global(_fn)(type(f"{_fn.__name__}_template", (_WarpReduce,), {}))
for _fn in (T.shfl_xor, T.shfl_down, T.shfl_up, T.shfl_sync):
    infer_global(_fn)(type(f"{_fn.__name__}_template", (_WarpShuffle,), {}))


def _vote_predicate(ty, what):
    """A vote's or predicate barrier's predicate: an integer or a boolean, as TileLang
    requires (a float would be truncated)."""
    ty = types.unliteral(ty)
    if not isinstance(ty, (types.Integer, types.Boolean)):
        raise errors.TypingError(f"T.{what} requires an integer or boolean predicate, but "
                                 f"got {ty}")
    return ty


class _WarpVote(AbstractTemplate):
    """``T.any_sync|all_sync(p, mask)`` → int32, ``T.ballot_sync(p, mask)`` → uint64."""

    def generic(self, args, kws):
        what = self.key.__name__
        if kws or not 1 <= len(args) <= 2:
            raise errors.TypingError(f"T.{what}(predicate, mask=0xFFFFFFFF) takes 1 or 2 "
                                     f"positional arguments")
        pred = _vote_predicate(args[0], what)
        if len(args) == 2 and not isinstance(args[1], types.Integer):
            raise errors.TypingError(f"T.{what}: the mask is an integer, got {args[1]}")
        result = types.uint64 if what == "ballot_sync" else types.int32
        return signature(result, pred, *[types.int64] * (len(args) - 1))


class _PredicateOp(AbstractTemplate):
    """``T.ballot(p)`` → uint64; ``T.syncthreads_count|and|or(p)`` → int32."""

    def generic(self, args, kws):
        what = self.key.__name__
        if kws or len(args) != 1:
            raise errors.TypingError(f"T.{what}(predicate) takes one predicate")
        result = types.uint64 if what == "ballot" else types.int32
        return signature(result, _vote_predicate(args[0], what))


class _WarpMatch(AbstractTemplate):
    """``T.match_any_sync|match_all_sync(value, mask)`` → uint32; the value an integer or
    float of 32 or 64 bits."""

    def generic(self, args, kws):
        what = self.key.__name__
        if kws or not 1 <= len(args) <= 2:
            raise errors.TypingError(f"T.{what}(value, mask=0xFFFFFFFF) takes 1 or 2 "
                                     f"positional arguments")
        value = types.unliteral(args[0])
        if isinstance(value, types.Integer) and value.bitwidth < 32:
            value = types.int32
        if isinstance(value, WeakFloat):
            value = types.float32
        if not (isinstance(value, (types.Integer, types.Float))
                and value.bitwidth in (32, 64)):
            raise errors.TypingError(f"T.{what} takes an integer or float of 32 or 64 bits, "
                                     f"got {args[0]}")
        if len(args) == 2 and not isinstance(args[1], types.Integer):
            raise errors.TypingError(f"T.{what}: the mask is an integer, got {args[1]}")
        return signature(types.uint32, value, *[types.int64] * (len(args) - 1))


@infer_global(T.sync_threads)
@infer_global(T.sync_grid)
class _BarrierInADeviceFunction(AbstractTemplate):
    """A block or grid barrier the tile passes did not see: one in a helper compiled as a
    device function (the kernel's own are markers by now)."""

    def generic(self, args, kws):
        name = getattr(self.key, "__name__", "sync_threads")
        raise errors.TypingError(
            f"T.{name}() in a helper compiled as a device function: a helper holding a "
            f"barrier is inlined into the kernel, which needs the call made each time its "
            f"statement runs (not under `and`/`or`/`x if c else y` or in a `while` test), "
            f"its arguments names or constants, its parameters not assigned and the helper "
            f"in the kernel's file; or write the barrier in the kernel")


@infer_global(T.sync_warp)
class _SyncWarp(AbstractTemplate):
    def generic(self, args, kws):
        if kws or len(args) > 1 or (args and not isinstance(args[0], types.Integer)):
            raise errors.TypingError(f"T.sync_warp(mask=0xFFFFFFFF) takes an integer mask, "
                                     f"got {args}")
        return signature(types.none, *[types.int64] * len(args))


@infer_global(T.activemask)
class _ActiveMask(AbstractTemplate):
    def generic(self, args, kws):
        if args or kws:
            raise errors.TypingError("T.activemask() takes no arguments")
        return signature(types.uint64)


def _bit_operand(ty, what):
    ty = types.unliteral(ty)
    if not isinstance(ty, (types.Integer, types.Boolean)):
        raise errors.TypingError(f"T.{what}: expected an integer, got {ty}")
    return ty


@infer_global(T.__ffs)
class _FindFirstSet(AbstractTemplate):
    def generic(self, args, kws):
        if kws or len(args) != 1:
            raise errors.TypingError("T.__ffs(value) takes one integer")
        return signature(types.int32, _bit_operand(args[0], "__ffs"))


@infer_global(T.__fns)
class _FindNthSet(AbstractTemplate):
    def generic(self, args, kws):
        if kws or len(args) != 3:
            raise errors.TypingError("T.__fns(mask, base, offset) takes three integers")
        for a in args:
            _bit_operand(a, "__fns")
        return signature(types.uint32, types.int64, types.int64, types.int64)


for _fn in (T.any_sync, T.all_sync, T.ballot_sync):
    infer_global(_fn)(type(f"{_fn.__name__}_template", (_WarpVote,), {}))
for _fn in (T.match_any_sync, T.match_all_sync):
    infer_global(_fn)(type(f"{_fn.__name__}_template", (_WarpMatch,), {}))
for _fn in (T.ballot, T.syncthreads_count, T.syncthreads_and, T.syncthreads_or):
    infer_global(_fn)(type(f"{_fn.__name__}_template", (_PredicateOp,), {}))


# (an int4 element is read as an int8 value: int8 is its dtype; uint4's uint8)
_DTYPE_OF_NUMBA = {ty: as_dtype(name) for name, ty in NUMBA_OF.items()
                   if name not in ("int4", "uint4")}


def dtype_of_number(ty) -> DType | None:
    """The DType of a scalar Numba type (``x.dtype`` of a value), or None."""
    return _DTYPE_OF_NUMBA.get(types.unliteral(ty))


@infer_getattr
class NumberAttributes(AttributeTemplate):
    """TileLang's (TIR's) ``x.dtype`` and ``x.astype(dtype)`` of a value, in the helpers a
    kernel calls (TileLang's dequantizing examples build their bit manipulations in such
    helpers; in the kernel's own body the front end writes ``x.astype(d)`` as
    ``T.cast(x, d)``)."""
    key = types.Number

    def resolve_dtype(self, ty):
        dtype = dtype_of_number(ty)
        if dtype is not None and dtype.held_in_float32:
            # the simulator holds these in float32: it could not give the same answer
            raise errors.TypingError(f"x.dtype of a {dtype.name} value: not supported (the "
                                     f"simulator holds {dtype.name} values in float32); "
                                     f"compare the dtype the kernel was given instead")
        return None if dtype is None else DTypeType(dtype)

    @bound_function("number.astype")
    def resolve_astype(self, ty, args, kws):
        dtype = dtype_of(args[0]) if len(args) == 1 and not kws else None
        if dtype is None:
            raise errors.TypingError(f"x.astype(dtype): expected one dtype, got {args}")
        return signature(numba_type(dtype), *args)


@infer_getattr
class BooleanAttributes(NumberAttributes):
    key = types.Boolean


class _DTypeCompare(AbstractTemplate):
    """``x.dtype == T.uint8`` / ``dtype != "float16"``: known at compile time."""

    def generic(self, args, kws):
        if kws or len(args) != 2:
            return None
        a, b = (named_dtype(t) for t in args)
        if a is None or b is None or not any(isinstance(t, DTypeType) for t in args):
            return None
        same = a == b
        return signature(types.BooleanLiteral(same if self.key is operator.eq else not same),
                         *args)


infer_global(operator.eq)(type("DTypeEq", (_DTypeCompare,), {"key": operator.eq}))
infer_global(operator.ne)(type("DTypeNe", (_DTypeCompare,), {"key": operator.ne}))


@infer_global(tir_exprs.const)
class TirConstTemplate(AbstractTemplate):
    """``tirx.const(value)`` is the value itself (a literal stays weak, as in the
    simulator); ``tirx.const(value, dtype)`` (dtype also by keyword) the value in it."""

    def generic(self, args, kws):
        if set(kws) - {"dtype"} or not 1 <= len(args) + len(kws) <= 2 or (
                "dtype" in kws and len(args) != 1):
            raise errors.TypingError(f"tirx.const(value, dtype): got {args} {kws or ''}")
        given = list(args) + [kws["dtype"]] if kws else list(args)
        pysig = utils.pysignature(tir_exprs.const)
        if len(given) == 1 or isinstance(given[1], (types.NoneType, types.Omitted)):
            sig = signature(given[0], *given)
        else:
            dtype = dtype_of(given[1])
            if dtype is None or not isinstance(given[0], (types.Number, types.Boolean)):
                raise errors.TypingError(f"tirx.const(value, dtype): expected a number and a "
                                         f"dtype, got {given}")
            sig = signature(numba_type(dtype), *given)
        return sig.replace(pysig=pysig) if kws else sig


@infer_global(tir_exprs.Cast)
class TirCastTemplate(AbstractTemplate):
    def generic(self, args, kws):
        dtype = dtype_of(args[0]) if len(args) == 2 and not kws else None
        if dtype is None or not isinstance(args[1], (types.Number, types.Boolean)):
            raise errors.TypingError(f"tirx.Cast(dtype, value): got {args}")
        return signature(numba_type(dtype), *args)


@infer_global(tir_exprs.Select)
class TirSelectTemplate(AbstractTemplate):
    def generic(self, args, kws):
        if kws or len(args) != 3:
            raise errors.TypingError(f"tirx.Select(cond, a, b): got {args}")
        return self.context.resolve_function_type(T.if_then_else, args, {})


@infer_global(tir_exprs.reinterpret)
class TirReinterpretTemplate(AbstractTemplate):
    def generic(self, args, kws):
        dtype = dtype_of(args[0]) if len(args) == 2 and not kws else None
        if dtype is None:
            raise errors.TypingError(f"tirx.reinterpret(dtype, value): expected a dtype and "
                                     f"a value, got {args}")
        value, to = types.unliteral(args[1]), numba_type(dtype)
        if isinstance(value, types.Integer):
            value = numba_type(tir_exprs.unsigned_of(dtype))
        _check_bitcast(value, to, dtype)
        return signature(to, *args)
