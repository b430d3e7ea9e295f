"""TVM's TIR calls that TileLang programs write for per-thread code, which the front end
writes as tilejit's own (``frontend/tvm_calls.py``): ``T.thread_return()`` (a thread's
early exit), ``T.tvm_warp_activemask()`` and ``T.tvm_warp_shuffle{,_down,_up}(mask,
value, lane_or_delta, width, warp_size)`` (the warp shuffles), and ``T.call_extern(dtype,
name, *args)`` of a CUDA math library function (``CUDA_MATH``), and TileLang's
``T.shuffle_elect(thread_extent)`` (one thread per group, by the thread index). Called as
Python outside a kernel they say so."""
from __future__ import annotations

# CUDA's math functions a program may name in T.call_extern: tilejit's function of the
# same meaning (language names), and the number of arguments. The correctly rounded
# __f*_rn intrinsics are tilejit's IEEE operations (no fma contraction across them).
CUDA_MATH = {
    "fmaxf": ("max", 2), "fmax": ("max", 2), "fminf": ("min", 2), "fmin": ("min", 2),
    "powf": ("pow", 2), "pow": ("pow", 2), "exp2f": ("exp2", 1), "expf": ("exp", 1),
    "exp": ("exp", 1), "__expf": ("exp", 1), "exp10f": ("exp10", 1), "logf": ("log", 1),
    "log": ("log", 1), "__logf": ("log", 1), "log2f": ("log2", 1), "log1pf": ("log1p", 1),
    "sqrtf": ("sqrt", 1), "sqrt": ("sqrt", 1), "rsqrtf": ("rsqrt", 1), "fabsf": ("abs", 1),
    "fabs": ("abs", 1), "floorf": ("floor", 1), "ceilf": ("ceil", 1), "truncf": ("trunc", 1),
    "nearbyintf": ("nearbyint", 1), "rintf": ("nearbyint", 1), "tanhf": ("tanh", 1),
    "sinf": ("sin", 1), "cosf": ("cos", 1), "__sinf": ("sin", 1), "__cosf": ("cos", 1),
    "erff": ("erf", 1), "fmodf": ("fmod", 2),
    "__fdiv_rn": ("ieee_fdiv", 2), "__fadd_rn": ("ieee_add", 2), "__fsub_rn": ("ieee_sub", 2),
    "__fmul_rn": ("ieee_mul", 2), "__fmaf_rn": ("ieee_fmaf", 3), "__fsqrt_rn": ("ieee_fsqrt", 1),
    "__frcp_rn": ("ieee_frcp", 1),
}


def _kernel_only(name):
    def call(*args, **kwargs):
        raise RuntimeError(f"T.{name} is a statement of a kernel's per-thread code; it "
                           f"has no meaning outside a kernel")
    call.__name__ = name
    return call


def thread_return():
    """Ends this thread's run of the kernel (TVM's ``thread_return``: a ``return``)."""
    return _kernel_only("thread_return")()


def tvm_warp_activemask():
    """TVM's ``__activemask()``: ``T.activemask()`` as uint32."""
    return _kernel_only("tvm_warp_activemask")()


def tvm_warp_shuffle(mask, value, src_lane, width, warp_size):
    """TVM's ``__shfl_sync``: ``T.shfl_sync(value, src_lane, width, mask)``."""
    return _kernel_only("tvm_warp_shuffle")()


def tvm_warp_shuffle_down(mask, value, delta, width, warp_size):
    """TVM's ``__shfl_down_sync``: ``T.shfl_down(value, delta, width, mask)``."""
    return _kernel_only("tvm_warp_shuffle_down")()


def tvm_warp_shuffle_up(mask, value, delta, width, warp_size):
    """TVM's ``__shfl_up_sync``: ``T.shfl_up(value, delta, width, mask)``."""
    return _kernel_only("tvm_warp_shuffle_up")()


def call_extern(dtype, func_name, *args):
    """A CUDA math function by its C name (``T.call_extern("float32", "fmaxf", a, b)``):
    tilejit's function of the same meaning, cast to ``dtype`` (``CUDA_MATH``). Any other
    name is refused at its line: tilejit emits PTX and links no C."""
    return _kernel_only("call_extern")()


def shuffle_elect(thread_extent):
    """TileLang's ``T.shuffle_elect(thread_extent)``: true in one thread of each group of
    ``thread_extent`` threads (a multiple of 32): lane 0 of the group's first warp, the
    lane ``elect.sync`` elects in a whole warp; ``0``: one thread of the block (thread
    0)."""
    return _kernel_only("shuffle_elect")()


NAMES = ("thread_return", "tvm_warp_activemask", "tvm_warp_shuffle", "tvm_warp_shuffle_down",
         "tvm_warp_shuffle_up", "call_extern", "shuffle_elect")
