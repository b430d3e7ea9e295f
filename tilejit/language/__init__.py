"""``import tilejit.language as T``: the tile language.

Declarations: every name here has one meaning in three places, its typing
(``tilejit/codegen/typing``), its code generation per target (``tilejit/codegen/lowering``)
and its simulation semantics (``tilejit/sim/semantics.py``, numpy on whole tiles). The
compiler recognises the ``T.*`` objects themselves; an operation run as Python takes its
meaning from ``_semantics.py``, which the host side (``T.empty``, at ``import tilejit``)
and the simulator (device operations, when one first runs as Python) fill. Scalar
helpers that the compiler also evaluates at compile time or host programs call
(``T.ceildiv``, ``T.max``, ``T.cast``, …) keep their meaning here, in ``numerics.py``.
Imports nothing from tilejit but ``target`` (the bottom floor).
"""
from __future__ import annotations

import itertools
import sys
import warnings
import numbers as _numbers

import numpy as np

from tilejit.language.dtypes import (BUILTIN_NAMED, DType, as_dtype, bfloat16, bool_, double,
                                     float4_e2m1fn, float8_e4m3, float8_e4m3fn, float8_e5m2,
                                     float8_e8m0fnu, float16, float32,
                                     float64, half, int4, int8, int16, int32, int64, long, ptr,
                                     not_held, short, tfloat32, uint, uint8, uint16, uint32,
                                     uint64)
from tilejit.errors import EmptyGridError, GridError
from tilejit.language import numerics as _num
from tilejit.language._semantics import meaning
from tilejit.language.cp_async import (access_ptr, async_copy, cp_async_barrier_noinc,
                                      ptx_commit_group, ptx_cp_async, ptx_wait_group)
from tilejit.language.atomics import (atomic_add, atomic_addx2, atomic_addx4, atomic_load,
                                      atomic_max, atomic_min, atomic_or, atomic_store)
from tilejit.language.cluster import (block_rank_in_cluster, check_cluster_grid,
                                      cluster_arrive, cluster_arrive_relaxed, cluster_shape,
                                      cluster_sync, cluster_wait, copy_cluster)
from tilejit.language.hopper import (Persistent, PersistentTileScheduler, WarpSpecialize,
                                     alloc_barrier, barrier_arrive, barrier_wait,
                                     fence_proxy_async, pdl_sync, pdl_trigger,
                                     mbarrier_arrive, mbarrier_wait_parity,
                                     tma_copy, tma_store_arrive, tma_store_wait, ws)
from tilejit.language.tilelang_names import PrimFunc as _PrimFunc
from tilejit.language.tilelang_names import (Buffer, FragmentBuffer, LocalBuffer,
                                             SharedBuffer, StridedTensor, Symbol, Tensor,
                                             const, dyn, dynamic, symbolic)
from tilejit.language.compat import dtype_names as _tilelang_dtype_names
from tilejit.language.compat import not_supported as _not_supported
from tilejit.language.random import rng_init, rng_rand, rng_rand_float
from tilejit.language.bit_moves import (ldg32, ldg64, ldg128, ldg256, lds32, lds64, lds128,
                                        stg32, stg64, stg128, stg256, sts32, sts64, sts128)
from tilejit.language.function_attrs import annotate_compile_flags, annotate_pass_configs
from tilejit.language.threads import (get_block_binding, get_block_bindings, get_block_extent,
                                      get_block_extents, get_lane_idx, get_warp_group_idx,
                                      get_warp_idx, get_warp_idx_sync, get_thread_binding,
                                      get_thread_bindings, get_thread_extent,
                                      get_thread_extents, launch_thread,
                                      thread_binding)
from tilejit.language.reductions import (cummax, cumsum, reduce, reduce_abssum, reduce_absmax,
                                         reduce_bitand, reduce_bitor, reduce_bitxor,
                                         reduce_max, reduce_min, reduce_sum)
from tilejit.language.warp import (shfl_down, shfl_sync, shfl_up, shfl_xor, warp_reduce_bitand,
                                   warp_reduce_bitor, warp_reduce_max, warp_reduce_min,
                                   warp_reduce_sum)
from tilejit.language.warp import (activemask, all_sync, any_sync, ballot, ballot_sync,
                                   match_all_sync, match_any_sync, sync_warp,
                                   syncthreads_and, syncthreads_count, syncthreads_or)
from tilejit.language.warp import __ffs, __fns
from tilejit.language.tvm_calls import (call_extern, shuffle_elect,  # noqa: F401
                                        thread_return,
                                        tvm_warp_activemask, tvm_warp_shuffle,
                                        tvm_warp_shuffle_down, tvm_warp_shuffle_up)
from tilejit.language.thread_allreduce import attr, comm_reducer, evaluate, tvm_thread_allreduce
from tilejit.language.tiles import (GemmWarpPolicy, Pipelined, all_of, alloc_fragment,
                                    alloc_local, alloc_reducer, alloc_shared, alloc_var,
                                    annotate_layout, annotate_restrict_buffers, __ldg,
                                    annotate_l2_hit_ratio, annotate_min_blocks_per_sm,
                                    annotate_safe_value, any_of, clear,
                                    copy, fill, let,
                                    disable_warp_group_reg_alloc, finalize_reducer, gemm,
                                    import_source, make_tensor, no_set_max_nreg,
                                    reducer_init,
                                    reducer_update, reshape,
                                    set_max_nreg, inc_max_nreg, dec_max_nreg,
                                    annotate_producer_reg_dealloc,
                                    annotate_consumer_reg_alloc,
                                    sync_threads, sync_grid, loop_break, named_barrier_arrive,
                                    tvm_storage_sync, func_attr, And, Or, Not, If, Then,
                                    Else,
                                    transpose,
                                    use_swizzle, view, wgmma_gemm, wait_wgmma,
                                    warpgroup_fence_operand)
from tilejit.language.tiles import view_of  # noqa: F401 - what kernels call T.view as
from tilejit.language.mma_emitter import TensorCoreIntrinEmitter
from tilejit.language.sparse import gemm_sp, wgmma_gemm_sp
from tilejit.language.convolution import c2d_im2col, im2col
from tilejit.language import scalar_math as _scalar_math
from tilejit.language.scalar_math import (  # noqa: F401  (T.<name>)
    acos, acosh, asin, asinh, atan, atan2, atanh, bitwise_and, bitwise_not, bitwise_or,
    bitwise_xor, clz, copysign, cos, cosh, exp10, fmod, hypot, isfinite, isinf, isnan, log10,
    log1p, nearbyint, popcount, round, shift_left, shift_right, sin, sinh, tan, trunc)
from tilejit.language import math_intrinsics as _math_intrinsics
from tilejit.language.math_intrinsics import (  # noqa: F401  (T.<name>)
    __cos, __exp, __exp10, __log, __log10, __log2, __sin, __tan, ieee_add, ieee_fdiv,
    fast_rcp, ieee_fmaf, ieee_frcp, ieee_frsqrt, ieee_fsqrt, ieee_mul, ieee_sub)
from tilejit.language.packed import abs2, add2, fma2, max2, min2, mul2, sub2  # noqa: F401
from tilejit.language.fragment_layout import Fragment
from tilejit.language.layout import Layout, get_swizzle_layout, make_mma_swizzle_layout


__all__ = [
    "DType", "dtype", "DataType", "as_dtype", "bfloat16", "bool_", "float16", "float32",
    "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "half", "double",
    "short", "long", "uint", "tfloat32", "float8_e4m3", "float8_e4m3fn", "float8_e5m2",
    "float8_e8m0fnu", "float4_e2m1fn",
    "Buffer", "SharedBuffer", "FragmentBuffer", "LocalBuffer", "StridedTensor", "Symbol",
    "Var", "Tensor", "const", "dyn", "dynamic", "symbolic",
    "Cast", "Serial",
    "prim_func", "device_assert", "assume", "print", "constexpr", "Kernel", "Parallel",
    "parallel", "serial",
    "grid", "dp4a",
    "unroll", "vectorized", "ceildiv", "reinterpret", "Ramp", "Broadcast",
    "attr", "comm_reducer", "evaluate", "tvm_thread_allreduce",
    "if_then_else", "cast", "max", "min", "abs", "clamp", "cdiv", "infinity", "max_value",
    "min_value", "empty", "macro",
    "Unroll", "Vectorized",
    "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "sigmoid", "pow", "floor",
    "ceil", "erf", *_scalar_math.NAMES, *_math_intrinsics.NAMES,
    "GemmWarpPolicy", "Pipelined", "alloc_fragment", "alloc_local",
    "alloc_shared", "alloc_var", "alloc_reducer", "match_buffer", "finalize_reducer",
    "reducer_init", "reducer_update",
    "annotate_layout", "annotate_safe_value", "clear", "copy", "fill", "gemm", "gemm_sp", "let",
    "transpose",
    "any_of", "all_of",
    "use_swizzle", "atomic_add", "atomic_max", "atomic_min", "atomic_or", "atomic_load",
    "atomic_store", "atomic_addx2", "atomic_addx4",
    "ldg32", "ldg64", "ldg128", "ldg256", "lds32", "lds64", "lds128",
    "stg32", "stg64", "stg128", "stg256", "sts32", "sts64", "sts128",
    "cumsum", "cummax",
    "reduce", "reduce_abssum", "reduce_absmax", "reduce_max", "reduce_min", "reduce_sum",
    "reduce_bitand", "reduce_bitor", "reduce_bitxor",
    "warp_reduce_sum", "warp_reduce_max", "warp_reduce_min", "warp_reduce_bitand",
    "warp_reduce_bitor", "shfl_xor", "shfl_down", "shfl_up", "shfl_sync",
    "any_sync", "all_sync", "ballot_sync", "ballot", "activemask", "match_any_sync",
    "match_all_sync", "sync_warp", "syncthreads_count",
    "syncthreads_and", "syncthreads_or", "__ffs", "__fns",
    "Persistent", "PersistentTileScheduler", "WarpSpecialize", "alloc_barrier",
    "access_ptr", "async_copy", "ptx_cp_async", "cp_async_barrier_noinc", "ptx_commit_group",
    "ptx_wait_group",
    "mbarrier_arrive", "mbarrier_wait_parity", "barrier_arrive", "barrier_wait", "tma_copy",
    "tma_store_arrive", "tma_store_wait", "fence_proxy_async", "pdl_sync", "pdl_trigger",
    "ws",
    "get_thread_binding", "get_thread_bindings", "get_thread_extent", "get_thread_extents",
    "get_lane_idx", "get_warp_idx", "get_warp_idx_sync", "get_warp_group_idx",
    "index_to_coordinates",
    "get_block_binding", "get_block_bindings", "get_block_extent", "get_block_extents",
    "rng_init", "rng_rand", "rng_rand_float",
    "thread_binding", "launch_thread", "Select", "align_up", "floordiv", "floormod",
    "truncdiv", "truncmod",
    "no_set_max_nreg",
    "annotate_restrict_buffers", "__ldg", "annotate_min_blocks_per_sm", "annotate_l2_hit_ratio",
    "annotate_pass_configs", "annotate_compile_flags",
    "set_max_nreg", "inc_max_nreg", "dec_max_nreg", "annotate_producer_reg_dealloc",
    "annotate_consumer_reg_alloc", "disable_warp_group_reg_alloc", "reshape",
    "make_tensor", "ptr", "int4", "import_source",
    "view", "sync_threads", "sync_grid", "loop_break", "named_barrier_arrive", "wgmma_gemm",
    "tvm_storage_sync", "func_attr", "And", "Or", "Not", "If", "Then", "Else",
    "wgmma_gemm_sp",
    "wait_wgmma", "warpgroup_fence_operand",
    "im2col",
    "c2d_im2col",
    "alloc_global", "alloc_buffer", "Ref", "ClusterKernel", "block_rank_in_cluster",
    "copy_cluster", "cluster_arrive",
    "cluster_arrive_relaxed", "cluster_wait", "cluster_sync",
    "TensorCoreIntrinEmitter",
    "Layout", "Fragment", "get_swizzle_layout", "make_mma_swizzle_layout",
]


# TileLang's ``T.dtype`` (the dtype class: ``T.dtype("float16")``, ``isinstance(x,
# T.dtype)``) and ``T.Var`` (the class of shape symbols)
dtype = DType
DataType = DType        # TVM's name, which TileLang's language module once re-exported
Var = Symbol


def __getattr__(name):
    """``T.bool``, ``T.float``, ``T.int`` (TileLang's dtypes named as Python's builtins,
    kept out of this module's globals), TileLang's vector and narrow dtypes (names no
    tensor or tile holds: ``dtypes.not_held``), and TileLang's names tilejit does not
    have: an error that names the feature and says it is not supported (``compat.py``)."""
    if name in BUILTIN_NAMED:
        return BUILTIN_NAMED[name]
    if name in _tilelang_dtype_names():
        named = not_held(name)      # a vector or narrow dtype: a name, no tensor holds it
        if named is not None:
            return named
    raise _not_supported(name, "tilelang.language", __name__)


class constexpr:
    """Annotation of a kernel parameter whose value is a compile-time constant:
    ``def k(A, block: T.constexpr = 128)``. Each distinct value is a specialization."""


def launch_shape(grid, threads):
    """(grid extents as a tuple of 1–3 ints, threads per block), checked: threads in
    [1, 1024] (a tuple of block extents multiplies out; any count, as TileLang and CUDA
    allow: the last warp of a count that is not a multiple of 32 is partial, and what
    needs whole warps says so when it compiles), extents at least 1, within CUDA's
    limits (``GRID_LIMITS``). No extent at all (``T.Kernel(threads=128)``) is one block, as
    in TileLang."""
    if len(grid) > 3:
        raise ValueError(f"T.Kernel takes 1 to 3 grid extents, got {len(grid)}")
    grid = tuple(grid) or (1,)
    if type(threads) is not int:        # (every launch comes here: an int goes straight on)
        parts = list(threads) if isinstance(threads, (tuple, list)) else [threads]
        if not 1 <= len(parts) <= 3 or any(
                isinstance(t, (bool, str, float)) or not isinstance(t, _numbers.Integral)
                and not hasattr(t, "__index__") for t in parts):
            raise ValueError(f"T.Kernel threads: expected a count in [1, 1024] or a tuple of "
                             f"1 to 3 block extents (ints), got {threads!r}")
        if any(int(t) < 1 for t in parts):
            raise ValueError(f"T.Kernel threads: each block extent is at least 1, got "
                             f"{threads!r}")
        threads = 1
        for t in parts:
            threads *= int(t)
    if not 1 <= threads <= 1024:
        raise ValueError(f"T.Kernel threads: expected a count in [1, 1024], got {threads}")
    dims = tuple(int(g) for g in grid)
    if any(g < 0 for g in dims):
        raise GridError(f"T.Kernel grid extents must not be negative, got {dims}")
    if 0 in dims:
        # CUDA's launch refuses an empty grid (CUDA_ERROR_INVALID_VALUE), and TileLang
        # raises: an error on every target, not a launch that silently does nothing
        axis = dims.index(0)
        raise EmptyGridError(f"T.Kernel grid extent {axis} ({'xyz'[axis]}) is 0 (grid {dims}): "
                         f"a launch needs at least one block in each dimension; skip the "
                         f"call when its input is empty")
    for axis, (g, limit) in enumerate(zip(dims, GRID_LIMITS)):
        if g > limit:
            raise GridError(f"T.Kernel grid extent {axis} ({'xyz'[axis]}) is {g}, above "
                             f"CUDA's limit of {limit} blocks in that dimension (grid {dims})")
    return dims, threads


# CUDA's largest grid: 2^31 - 1 blocks in x, 65535 in y and z
GRID_LIMITS = (2 ** 31 - 1, 65535, 65535)


# the most threads any SM holds (Target.max_threads_per_sm; ptxas has the last word)
from tilejit.target import MOST_THREADS_PER_SM as MAX_THREADS_PER_SM  # noqa: E402


def check_min_blocks(min_blocks_per_sm, threads):
    """``T.Kernel(..., min_blocks_per_sm=K)``: None, or K ≥ 1 blocks of ``threads``
    that fit an SM's 2048 threads."""
    if min_blocks_per_sm is None:
        return None
    if isinstance(min_blocks_per_sm, bool) or not isinstance(min_blocks_per_sm,
                                                             _numbers.Integral) \
            or min_blocks_per_sm < 1:
        raise ValueError(f"T.Kernel min_blocks_per_sm: expected a positive int, got "
                         f"{min_blocks_per_sm!r}")
    min_blocks_per_sm = int(min_blocks_per_sm)
    if min_blocks_per_sm * threads > MAX_THREADS_PER_SM:
        raise ValueError(f"T.Kernel min_blocks_per_sm={min_blocks_per_sm} with threads="
                         f"{threads}: {min_blocks_per_sm * threads} threads per SM, more "
                         f"than the {MAX_THREADS_PER_SM} an SM holds")
    return min_blocks_per_sm


class Kernel:
    """``with T.Kernel(gx[, gy[, gz]], threads=N) as (bx, by, bz):`` declares the launch.
    ``min_blocks_per_sm=K`` (CUDA's second launch bound): ptxas fits K blocks on an SM,
    capping registers at 65536 / (K·N) per thread (spilling if it must): more blocks in
    flight for a memory-bound kernel.

    Only meaningful as the ``with`` statement of a kernel; the front end turns it into
    the block indices (device) and the grid computation (host)."""

    def __init__(self, *grid, threads=128, prelude=None, min_blocks_per_sm=None):
        self.grid, self.threads = launch_shape(grid, threads)
        self.min_blocks_per_sm = check_min_blocks(min_blocks_per_sm, self.threads)

    def __enter__(self):
        raise RuntimeError("T.Kernel can only be used inside a @tilejit.kernel function")

    def __exit__(self, *exc):
        return False


class ClusterKernel(Kernel):
    """``with T.ClusterKernel(gx[, gy[, gz]], threads=N, cluster_dims=(cx, cy, cz)) as
    (bx, by, bz):`` a launch whose blocks run in clusters of ``cx·cy·cz`` (at most 8;
    sm_90+): ``T.block_rank_in_cluster()`` and multicast loads (``T.copy_cluster``,
    ``language/cluster.py``). Each grid extent must be a multiple of the cluster's."""

    def __init__(self, *grid, threads=128, cluster_dims=1, prelude=None,
                 min_blocks_per_sm=None):
        super().__init__(*grid, threads=threads, prelude=prelude,
                         min_blocks_per_sm=min_blocks_per_sm)
        self.cluster_dims = cluster_shape(cluster_dims)
        check_cluster_grid(self.grid + (1,) * (3 - len(self.grid)), self.cluster_dims)


def Parallel(*extents, coalesced_width=None, loop_layout=None, prefer_async=None,
             annotations=None):
    """``for i, j in T.Parallel(m, n):`` the iterations of an m×n tile spread over the
    block's threads (row-major, consecutive iterations on consecutive threads).
    Outside a kernel it iterates in row-major order. ``loop_layout=`` (TileLang's
    thread/vector mapping of the loop, a ``T.Fragment``), ``coalesced_width=``,
    ``prefer_async=`` and ``annotations=`` are scheduling hints tilejit accepts and does
    not use: the loop's results are the same (docs/tilelang-compat.md)."""
    if len(extents) == 1:
        return iter(range(int(extents[0])))
    return itertools.product(*(range(int(e)) for e in extents))


def parallel(start, stop=None, *, annotations=None):
    """TVM's parallel loop, ``for i in T.parallel(n)`` (or ``(start, stop)``): TileLang
    lays it out as a ``T.Parallel`` loop, and so does tilejit (nested ones as one
    ``T.Parallel`` of their extents; ``frontend/tir_parallel.py``). Outside a kernel it
    iterates in order."""
    return range(start) if stop is None else range(start, stop)


def serial(start, stop=None, step=1):
    """A sequential loop, as ``range``."""
    return range(start) if stop is None else range(start, stop, step)


def grid(*extents):
    """TileLang's ``for i, j in T.grid(m, n)``: nested sequential loops, the last index
    fastest (the front end writes them as nested ``range`` loops)."""
    return itertools.product(*(range(e) for e in extents))


def unroll(start, stop=None, step=1):
    """A sequential loop the compiler unrolls."""
    return serial(start, stop, step)


def vectorized(start, stop=None, step=1):
    """A sequential loop the compiler may vectorize."""
    return serial(start, stop, step)


def Ramp(base, stride, lanes):
    """TVM's vector index ``base, base + stride, ..., base + (lanes - 1) * stride``, as
    TileLang's programs index with it (``B[i, T.Ramp(j * 4, 1, 4)] = A[i, T.Ramp(j * 4,
    1, 4)]``, a store of 4 elements): in a kernel, a statement that holds Ramps (of one
    lane count) is that statement for each lane (``frontend/ramp_vectors.py``). Outside a
    kernel, the indices as an array."""
    import numpy as np
    return base + stride * np.arange(int(lanes))


def Broadcast(value, lanes):
    """TVM's vector of ``lanes`` copies of ``value``: in a statement with Ramps, the value
    in every lane (``frontend/ramp_vectors.py``); outside a kernel, an array."""
    import numpy as np
    return np.full(int(lanes), value)


def ceildiv(a, b):
    """``(a + b - 1) // b`` for non-negative integers."""
    return (a + b - 1) // b


def index_to_coordinates(index, shape):
    """The coordinates of the flat row-major ``index`` in ``shape`` (TileLang's
    ``T.index_to_coordinates``): from the last dimension, ``index % extent`` and then
    ``index //= extent``. In a kernel the front end writes it out as those expressions;
    ``shape`` is a tuple written in the call or one the program holds."""
    coordinates = []
    for extent in reversed(tuple(shape)):
        coordinates.append(index % extent)
        index = index // extent
    return coordinates[::-1]


def floordiv(a, b):
    """``a // b`` rounded toward minus infinity (TVM's ``floordiv``: Python's ``//``, not
    C's truncation). In a kernel the front end writes it as ``a // b``."""
    return a // b


def floormod(a, b):
    """``a - floordiv(a, b) * b``, the sign of ``b`` (TVM's ``floormod``: Python's ``%``).
    In a kernel the front end writes it as ``a % b``."""
    return a % b


def truncdiv(a, b):
    """``a / b`` rounded toward zero (TVM's ``truncdiv``: C's integer division, not
    Python's ``//``): ``-7 / 2`` is -3. In a kernel the front end writes it with ``//``
    and ``%``, in the operands' type."""
    return a // b + ((a % b != 0) & ((a < 0) != (b < 0)))


def truncmod(a, b):
    """``a - truncdiv(a, b) * b``, the sign of ``a`` (TVM's ``truncmod``: C's ``%``):
    ``-7 % 2`` is -1. In a kernel the front end writes it with ``%``."""
    r = a % b
    return r - b * ((r != 0) & ((a < 0) != (b < 0)))


def align_up(value, alignment):
    """``value`` rounded up to a multiple of ``alignment``: ``T.ceildiv(value, alignment)
    * alignment``. In a kernel the front end writes it as that expression."""
    return ceildiv(value, alignment) * alignment


# TileLang's other names of these (the same objects, so the compiler knows them)
cdiv = ceildiv
Unroll = unroll
Vectorized = vectorized


def if_then_else(cond, then_value, else_value):
    """A select: both values are computed, ``cond`` picks one (no branch)."""
    return _num.select(cond, then_value, else_value)


Select = if_then_else       # TileLang's (TIR's) name of the same select


def cast(value, dtype, round="", sat=True, rbits=None, span=None):  # noqa: A002, F811
    """``value`` converted to ``dtype`` (floats round to nearest even; float to int
    truncates toward zero). TileLang's ``round=`` takes ``""`` or ``"rn"`` (the same;
    ``"rz"``, ``"rp"``, ``"rm"``, which TileLang reserves and rounds to nearest, with a
    warning); its ``sat=`` (a bool) changes only stochastic rounding's conversions, which
    tilejit has not (``round="rs"`` with ``rbits=``: refused); ``span`` is TVM's source
    location, not used. Bad options are TileLang's ValueErrors."""
    problem = _num.cast_options_problem(round, sat, rbits)
    if problem:
        raise ValueError(problem)
    if _num.cast_mode_warning(round):
        warnings.warn(_num.cast_mode_warning(round), stacklevel=2)
    return _num.cast(value, as_dtype(dtype))


def dp4a(a, b, c):
    """TileLang's ``T.dp4a(A[i, k], B[j, k], C[n])``: ``C[n] += A[i, k + t] * B[j, k + t]``
    for t = 0…3, the products of the int8 elements summed in int32. In a kernel the front
    end writes the four multiply-adds (frontend/rewrite.py), for the simulator and the GPU
    alike; LLVM, not a ``dp4a`` instruction, does the arithmetic."""
    raise RuntimeError("T.dp4a(a, b, c) is used inside a kernel")


def reinterpret(value, dtype):
    """``value``'s bits as ``dtype`` of the same width (``T.reinterpret(x, T.uint32)`` for
    a float32 ``x``): a bitcast, no conversion. Integers and float16/32/64; bfloat16 and
    float8 only from an integer (a ``TypeError`` otherwise, a ``CompileError`` in a
    kernel). An integer wider
    than ``dtype`` gives its low bits (a kernel's integer arithmetic may run in 64 bits
    where TileLang's runs in 32: ``T.reinterpret((e + 127) << 23, "float32")``).
    TileLang's deprecated order ``T.reinterpret(dtype, value)`` is taken with its
    DeprecationWarning."""
    if isinstance(value, (str, DType)) and not isinstance(dtype, (str, DType)):
        # (tir_exprs imports this package's numerics: imported on use)
        from tilejit.language.tir_exprs import warn_old_reinterpret
        warn_old_reinterpret()
        value, dtype = dtype, value
    return _num.reinterpret(value, as_dtype(dtype))


def max(a, b):  # noqa: A001 - TileLang's name
    """The larger of two values; if one is NaN the other is returned (PTX ``max``)."""
    return _num.maximum(a, b)


def min(a, b):  # noqa: A001
    """The smaller of two values; if one is NaN the other is returned (PTX ``min``)."""
    return _num.minimum(a, b)


def abs(x):  # noqa: A001
    """Absolute value."""
    return np.abs(x)


def clamp(dst, min_val, max_val):
    """``dst`` limited to ``[min_val, max_val]``: ``T.min(T.max(dst, min_val), max_val)``
    (TileLang's order: a NaN ``dst`` gives ``min_val``, as ``T.max`` ignores NaN). In a
    kernel the front end writes it as those two calls."""
    return _num.minimum(_num.maximum(dst, min_val), max_val)


def match_buffer(param, shape, dtype="float32"):
    """TileLang's ``A = T.match_buffer(A, shape, dtype)`` in an eager ``@tilejit.jit``
    program's body: the annotation ``A: T.Tensor[shape, dtype]`` of its parameter A (a
    ``T.ptr``), its ``T.const`` symbols sized by the call's tensor
    (``tilelang/match_buffer.py`` rewrites it so). It has no other use: called anywhere
    else it is a TypeError saying so."""
    raise TypeError(MATCH_BUFFER_USE)


MATCH_BUFFER_USE = ("T.match_buffer(A, shape, dtype) binds a parameter A of an eager "
                    "@tilejit.jit program to a tensor of that shape (a statement of the "
                    "program's body, before its kernel); elsewhere annotate the tensor "
                    "(`A: T.Tensor[shape, dtype]`) or make one of a T.ptr "
                    "(`T.make_tensor(A, shape, dtype)`)")


class Ref:
    """A ``@T.macro`` parameter annotation: the argument (a ``T.alloc_var`` name, or an
    element ``buf[i]``) is passed by reference, so the macro's assignments to the
    parameter store into it (``def warp_max(v: T.Ref): ... v = o``), as TileLang's
    ``T.Ref`` (and its deprecated ``T.Var`` annotation) do. The front end substitutes
    the argument for the parameter (``frontend/kernel_macros.inline_call``)."""


class macro:
    """``@T.macro`` on a plain Python function makes it a piece of kernel code that
    kernels call: compiled inline into each kernel that uses it (in simulation, a
    plain Python call). Its body follows the kernel language."""

    def __init__(self, func):
        self.func = func
        self.__wrapped__ = func
        self.__name__ = getattr(func, "__name__", "macro")
        self.__doc__ = getattr(func, "__doc__", None)

    def __call__(self, *args, **kwargs):
        return self.func(*args, **kwargs)

    def __repr__(self):
        return f"<T.macro {self.__name__}>"


def empty(*shape, dtype=None):
    """An output of the kernel, allocated on the host before the launch (write it before
    ``with T.Kernel`` and ``return`` it): a tensor of the inputs' kind (torch stays
    torch) on the inputs' device. ``T.empty((M, N), dtype)``, or TileLang's
    ``T.empty(M, N, dtype=dtype)``; without a dtype float32 (TileLang's default)."""
    args = list(shape)
    if dtype is None and len(args) >= 2 and not isinstance(args[-1], (int, np.integer)) \
            and not _is_extent(args[-1]):
        dtype = args.pop()
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = list(args[0])
    return meaning("empty")(tuple(args), float32 if dtype is None else dtype)


def _is_extent(value) -> bool:
    """An extent of T.empty's shape (an int or a symbolic size), not a dtype."""
    return isinstance(value, _numbers.Integral) or type(value).__name__ == "SymInt"


def alloc_global(shape, dtype, scope="global"):
    """A global scratch tensor the kernel's launches share (``X = T.alloc_global(shape,
    dtype)`` before the first ``with T.Kernel``; ``runtime/sequence.py``): allocated as
    ``T.empty`` allocates, at each call, and not returned."""
    return meaning("empty")(shape, dtype)


def alloc_buffer(shape, dtype="float32", scope="global", **tvm_options):
    """TVM's allocation that TileLang re-exports, by its scope: "global" (the default) is
    ``T.alloc_global`` (a scratch tensor the launches share, before the first
    ``T.Kernel``), "shared"/"shared.dyn" ``T.alloc_shared``, "local" ``T.alloc_local``,
    "local.fragment" ``T.alloc_fragment`` (``frontend/tir_buffers.py`` writes the call so
    before anything reads the kernel)."""
    return meaning("empty")(shape, dtype)


def infinity(dtype):
    """+inf of a floating dtype (float8_e4m3's and float4_e2m1fn's largest value, which
    have no infinity, as the GPU's conversion saturates)."""
    dtype = as_dtype(dtype)
    return dtype(np.inf) if dtype.held_in_float32 else dtype.numpy.type(np.inf)


def max_value(dtype):
    """The largest finite value of ``dtype`` (TIR's ``max_value``): an integer type's
    largest, a float's largest finite (not an infinity)."""
    dtype = as_dtype(dtype)
    return dtype(_num.finite_range(dtype)[1])


def min_value(dtype):
    """The smallest finite value of ``dtype`` (TIR's ``min_value``): an integer type's
    smallest, a float's largest finite negated."""
    dtype = as_dtype(dtype)
    return dtype(_num.finite_range(dtype)[0])


def reducer_identity(op, dtype):
    """Where a max or min reducer of ``dtype`` starts (``frontend/reducers.py``): -inf /
    +inf of a float dtype (as ``T.infinity``), an integer type's smallest / largest."""
    dtype = as_dtype(dtype)
    if dtype.is_float:
        value = infinity(dtype)
        return -value if op == "max" else value
    return min_value(dtype) if op == "max" else max_value(dtype)


# TileLang's (TIR's) spelling of ``T.cast(value, dtype)``: TIR's expression builder itself,
# typed in device-function helpers too (TileLang's DeepSeek-V4 quantizer calls it in one)
from tilejit.language.tir_exprs import Cast  # noqa: E402
from tilejit.language import builtin  # noqa: E402,F401 - T.builtin.<name> (TileLang's module)


Serial = serial


def prim_func(func):
    """TileLang's classic kernel: parameters annotated ``T.Tensor(shape, dtype)``
    (compiled by ``tilejit.compile(func)`` or a ``@tilejit.jit`` factory)."""
    outer = None
    if any(isinstance(a, str) for a in getattr(func, "__annotations__", {}).values()):
        # annotations as strings (``from __future__ import annotations``) may read names
        # of the function the kernel is defined in that its body does not read (so not
        # in its closure): that function's locals, now
        caller = sys._getframe(1)
        outer = dict(caller.f_locals) if caller.f_code.co_name != "<module>" else None
        del caller
    return _PrimFunc(func, outer)


# -- math functions -----------------------------------------------------------------
# In the simulator (``sim/semantics.py``): numpy in the operands' float type (integers,
# booleans and Python scalars compute in float32, float16 in float32 rounded back). The
# GPU code (``codegen/lowering/math.py``) is within 2 ulp of the correctly rounded result.

def exp(x):
    """e^x."""
    return meaning("exp")(x)


def exp2(x):
    """2^x."""
    return meaning("exp2")(x)


def log(x):
    """Natural logarithm (−inf at 0, NaN below)."""
    return meaning("log")(x)


def log2(x):
    """Base-2 logarithm."""
    return meaning("log2")(x)


def sqrt(x):
    """Square root (correctly rounded)."""
    return meaning("sqrt")(x)


def rsqrt(x):
    """1/sqrt(x)."""
    return meaning("rsqrt")(x)


def tanh(x):
    """Hyperbolic tangent."""
    return meaning("tanh")(x)


def sigmoid(x):
    """1/(1 + e^-x), without overflow for large |x|."""
    return meaning("sigmoid")(x)


def pow(x, y):  # noqa: A001 - TileLang's name
    """x^y with C99's special cases (pow(x, 0) = 1, pow(1, y) = 1, NaN for a negative
    base and a non-integer exponent, …); the operands meet as in arithmetic."""
    return meaning("pow")(x, y)


def floor(x):
    """Largest integer not greater than x, as a float."""
    return meaning("floor")(x)


def ceil(x):
    """Smallest integer not less than x, as a float."""
    return meaning("ceil")(x)


def erf(x):
    """Error function."""
    return meaning("erf")(x)


def assume(cond):
    """A fact the compiler may rely on (TileLang's ``T.assume(N % 16 == 0)``): given to
    LLVM (``llvm.assume``) on the GPU, where a false one is undefined behaviour; checked
    by the simulator, and on the GPU too in kernels compiled with ``debug=True`` (as
    ``T.device_assert``)."""
    return meaning("assume")(cond)


def device_assert(cond, msg=""):
    """Check ``cond`` on the device in kernels compiled with ``debug=True`` (a failure
    prints the message, the block and thread, and stops the kernel); always checked in
    the simulator (``AssertionError`` naming the kernel's line)."""
    return meaning("device_assert")(cond, msg)


def print(value, msg=""):  # noqa: A001 - TileLang's name
    """Print ``value`` from the device (each thread that reaches it), prefixed by
    ``msg``; in the simulator, Python's print of the value (a whole tile at once). A string
    alone is printed as a message. TileLang's full form, ``T.print(obj=None, msg="",
    warp_group_id=0, warp_id=0)`` with a tile or tensor for ``obj``, is rewritten when the
    kernel is parsed (``frontend/print_buffers.py``) into ``T.print_at`` of each element."""
    return meaning("print")(value, msg)


def print_at(value, msg, lane, *index):
    """One element of a buffer, printed as ``msg[index] = value`` by the block's thread
    ``lane`` (every thread for -1): what ``T.print(buffer)`` becomes."""
    return meaning("print_at")(value, msg, lane, *index)


# TileLang's tilelang.language.annotations by attribute too (last: the name `annotations`
# of `from __future__ import annotations`, here and in star-imported modules, would answer)
import importlib as _importlib  # noqa: E402
globals()["annotations"] = _importlib.import_module("tilejit.language.annotations")
