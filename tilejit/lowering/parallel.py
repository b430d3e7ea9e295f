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

from .. import language as T
from ..language import intrinsics
from ..typing.types import ParallelIterType, ParallelType
from .registry import lower
from .target_hooks import current_kernel

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


@lower("iternext", ParallelIterType)
@iternext_impl(RefType.UNTRACKED)
def parallel_iternext(context, builder, sig, args, result):
    iterty = sig.args[0]
    extents = iterty.extents
    kernel = current_kernel()
    vec, steps, guarded = parallel_schedule(extents, kernel.threads, kernel.max_vector)
    it = context.make_helper(builder, iterty, value=args[0])
    j = builder.load(it.counter)
    k = builder.udiv(j, I32(vec))
    v = builder.urem(j, I32(vec))
    tid = context.thread_index(builder)
    group = builder.add(builder.mul(k, I32(kernel.threads), flags=["nuw", "nsw"]), tid,
                        flags=["nuw", "nsw"])
    flat = builder.add(builder.mul(group, I32(vec), flags=["nuw", "nsw"]), v,
                       flags=["nuw", "nsw"])
    valid = builder.icmp_unsigned("<", j, I32(steps))
    if guarded:
        total = 1
        for e in extents:
            total *= e
        valid = builder.and_(valid, builder.icmp_unsigned("<", flat, I32(total)))
    result.set_valid(valid)
    with builder.if_then(valid):
        coords = []
        rest = flat
        for e in reversed(extents[1:]):
            coords.append(builder.urem(rest, I32(e)))
            rest = builder.udiv(rest, I32(e))
        coords.append(rest)
        coords.reverse()
        if len(extents) == 1:
            result.yield_(coords[0])
        else:
            result.yield_(context.make_tuple(builder, iterty.yield_type, coords))
        builder.store(builder.add(j, I32(1)), it.counter)


@lower(intrinsics.block_index, types.IntegerLiteral)
def block_index_impl(context, builder, sig, args):
    return context.block_index(builder, sig.args[0].literal_value)


@lower(T.Parallel, types.VarArg(types.Any))
def parallel_value(context, builder, sig, args):
    # the extents live in the type; the value carries nothing
    return context.get_dummy_value()
