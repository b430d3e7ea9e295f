"""``T.Parallel`` over the block's threads, and the block indices.

The iterations of an extents = (e0, …, ek) tile are numbered row-major, flat in
[0, total). Thread t of a `threads`-thread block takes groups of `vec` consecutive
flats: flat = (k·threads + t)·vec + v for k = 0, 1, … and v < vec. Consecutive threads
therefore touch consecutive groups (each warp's accesses are coalesced), and the `vec`
iterations of one group touch consecutive elements, which LLVM merges into one 16-byte
access when the tensor is contiguous and aligned (the specialization says so).

vec is the largest power of two ≤ 16 bytes / the smallest element size of the kernel's
tensors that divides both the last extent and total / threads; iterations past total
(when threads·vec does not divide it) end the thread's loop early.
"""
from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.imputils import RefType, iternext_impl

from tilejit import language as T
from tilejit.ir import markers
from tilejit.codegen.typing.types import ParallelIterType, ParallelType
from tilejit.codegen.lowering.registry import lower
from tilejit.ir.kernel_config import current_kernel

I32 = ir.IntType(32)


def vector_width(extents, threads: int, max_vec: int) -> int:
    total = 1
    for e in extents:
        total *= e
    vec = max_vec
    while vec > 1 and (extents[-1] % vec or total % (threads * vec)):
        vec //= 2
    return vec


def parallel_schedule(extents, threads: int, max_vec: int):
    """(vec, trips·vec, guarded): the per-thread loop of a T.Parallel."""
    total = 1
    for e in extents:
        total *= e
    vec = vector_width(extents, threads, max_vec)
    trips = -(-total // (threads * vec))
    return vec, trips * vec, total % (threads * vec) != 0


@lower("getiter", ParallelType)
def parallel_getiter(context, builder, sig, args):
    it = context.make_helper(builder, sig.return_type)
    it.counter = cgutils.alloca_once_value(builder, I32(0))
    return it._getvalue()


def _unflatten(context, builder, flat, extents, yield_type):
    coords = []
    rest = flat
    for e in reversed(extents[1:]):
        coords.append(builder.urem(rest, I32(e)))
        rest = builder.udiv(rest, I32(e))
    coords.append(rest)
    coords.reverse()
    if len(extents) == 1:
        return coords[0]
    return context.make_tuple(builder, yield_type, coords)


def _total(extents) -> int:
    total = 1
    for e in extents:
        total *= e
    return total


def _thread_step(context, builder, kernel, vec, k):
    """The first flat index of this thread's k-th group: (k·threads + tid)·vec."""
    tid = context.thread_index(builder)
    group = builder.add(builder.mul(k, I32(kernel.threads), flags=["nuw", "nsw"]), tid,
                        flags=["nuw", "nsw"])
    return builder.mul(group, I32(vec), flags=["nuw", "nsw"])


@lower("iternext", ParallelIterType)
@iternext_impl(RefType.UNTRACKED)
def parallel_iternext(context, builder, sig, args, result):
    iterty = sig.args[0]
    extents, kind = iterty.extents, iterty.kind
    kernel = current_kernel()
    vec, steps, guarded = parallel_schedule(extents, kernel.threads, kernel.max_vector)
    if kind == "slots":
        # a fragment loop: fully unrolled, so each slot index is a constant
        context.unroll_headers.append(builder.block)
    it = context.make_helper(builder, iterty, value=args[0])
    j = builder.load(it.counter)
    if kind == "slots":
        value = j
        valid = builder.icmp_unsigned("<", j, I32(extents[0]))
    elif kind == "parallel":
        k, v = builder.udiv(j, I32(vec)), builder.urem(j, I32(vec))
        value = builder.add(_thread_step(context, builder, kernel, vec, k), v,
                            flags=["nuw", "nsw"])
        valid = builder.icmp_unsigned("<", j, I32(steps))
        if guarded:
            valid = builder.and_(valid, builder.icmp_unsigned("<", value, I32(_total(extents))))
    elif kind == "groups":
        value = _thread_step(context, builder, kernel, vec, j)
        valid = builder.icmp_unsigned("<", j, I32(steps // vec))
        if guarded:
            valid = builder.and_(valid, builder.icmp_unsigned("<", value, I32(_total(extents))))
    elif kind == "lanes":
        value = j
        valid = builder.icmp_unsigned("<", j, I32(vec))
    elif kind == "lanes_reversed":
        value = builder.sub(I32(vec - 1), j)
        valid = builder.icmp_unsigned("<", j, I32(vec))
    else:  # "ends": lanes 0 and vec-1
        value = builder.mul(j, I32(vec - 1))
        valid = builder.icmp_unsigned("<", j, I32(2 if vec > 1 else 1))
    result.set_valid(valid)
    with builder.if_then(valid):
        if kind == "parallel":
            result.yield_(_unflatten(context, builder, value, extents, iterty.yield_type))
        else:
            result.yield_(value)
        builder.store(builder.add(j, I32(1)), it.counter)


@lower(markers.stub(markers.LANE_INDEX), types.int32, types.int32, types.VarArg(types.Any))
def lane_index_impl(context, builder, sig, args):
    extents = tuple(t.literal_value for t in sig.args[2:])
    flat = builder.add(args[0], args[1], flags=["nuw", "nsw"])
    return _unflatten(context, builder, flat, extents, sig.return_type)


@lower(markers.stub(markers.GROUPS), types.VarArg(types.Any))
@lower(markers.stub(markers.LANES), types.VarArg(types.Any))
@lower(markers.stub(markers.ENDS), types.VarArg(types.Any))
@lower(markers.stub(markers.LANES_REVERSED), types.VarArg(types.Any))
def tile_loop_value(context, builder, sig, args):
    return context.get_dummy_value()


@lower(markers.stub(markers.BLOCK_INDEX), types.IntegerLiteral)
@lower(markers.stub(markers.BLOCK_INDEX), types.IntegerLiteral, types.IntegerLiteral)
def block_index_impl(context, builder, sig, args):
    """The block's index on an axis; with the grid's extent there (a launch fixed at
    compile time: frontend/static_grid.py) it is known to lie in [0, extent)."""
    extent = sig.args[1].literal_value if len(sig.args) > 1 else None
    return context.block_index(builder, sig.args[0].literal_value, extent)


@lower(markers.stub(markers.THREAD_INDEX))
def thread_index_impl(context, builder, sig, args):
    """The kernel's own reads of its thread index (``T.get_thread_binding()``): the
    block's, also inside a ``T.ws`` role (TileLang: ``T.ws(1)`` is ``if 128 <= tx <
    256``), where the tiles' planning uses the index within the warpgroup."""
    return context.block_thread_index(builder)


@lower(markers.stub(markers.WARP_SIZE))
def warp_size_impl(context, builder, sig, args):
    return context.get_constant(types.int32, current_kernel().target.warp_size)


@lower(markers.stub(markers.GRID_DIM), types.IntegerLiteral)
def grid_dim_impl(context, builder, sig, args):
    return context.grid_dim(builder, sig.args[0].literal_value)


@lower(T.Parallel, types.VarArg(types.Any))
def parallel_value(context, builder, sig, args):
    # the extents live in the type; the value carries nothing
    return context.get_dummy_value()
