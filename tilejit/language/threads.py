"""TileLang's thread and block bindings inside ``with T.Kernel(...)``.

``T.get_thread_binding(dim)`` is the thread's index along ``dim`` of the block
(``threadIdx.x/y/z``; the block's ``threads=(x, y, z)`` of ``T.Kernel``, x fastest);
``T.thread_binding(start, stop, thread="threadIdx.x")`` binds it as TileLang's TIR
does, as an expression (``tx = T.thread_binding(0, 128, thread="threadIdx.x")``) or a
loop (``for tx in T.thread_binding(0, 128, thread="threadIdx.x"): ...``, its body run by
the threads whose index is below ``stop - start``). ``T.get_block_binding(dim)`` is
the block's index (as the names ``with T.Kernel(...) as (bx, by)`` binds), and the
``*_extent`` forms the launch's sizes. ``T.get_lane_idx()``, ``T.get_warp_idx()`` (and
``_sync``) and ``T.get_warp_group_idx()`` split the block's linear thread index by the
warp size (the target's: 32, 64 on AMDGPU; the simulator's 32) or the one given.

They are declarations: the front end rewrites them in a kernel's body
(``frontend/thread_bindings.py``); called as Python they raise.
"""
from __future__ import annotations

THREAD_AXES = {"threadIdx.x": 0, "threadIdx.y": 1, "threadIdx.z": 2}
BLOCK_AXES = {"blockIdx.x": 0, "blockIdx.y": 1, "blockIdx.z": 2}


def _in_kernel_only(name):
    raise RuntimeError(f"T.{name} is only meaningful in the body of a `with T.Kernel(...)` "
                       "block of a kernel (not in a @T.macro or host code)")


def get_thread_binding(dim: int = 0):
    """This thread's index along ``dim`` (0: x, 1: y, 2: z) of the block."""
    _in_kernel_only("get_thread_binding")


def get_thread_bindings():
    """(x, y, z): this thread's index along each dimension of the block."""
    _in_kernel_only("get_thread_bindings")


def get_thread_extent(dim: int = 0):
    """The block's threads along ``dim`` (1 past the dimensions T.Kernel gives)."""
    _in_kernel_only("get_thread_extent")


def get_thread_extents():
    """The block's threads along x, y and z."""
    _in_kernel_only("get_thread_extents")


def get_block_binding(dim: int = 0):
    """The block's index along grid dimension ``dim``."""
    _in_kernel_only("get_block_binding")


def get_block_bindings():
    """The block's index along each grid dimension T.Kernel gives."""
    _in_kernel_only("get_block_bindings")


def get_block_extent(dim: int = 0):
    """The grid's extent along ``dim``."""
    _in_kernel_only("get_block_extent")


def get_block_extents():
    """The grid's extent along each dimension T.Kernel gives."""
    _in_kernel_only("get_block_extents")


def get_lane_idx(warp_size=None):
    """This thread's lane: its linear index in the block modulo ``warp_size`` (the
    target's warp size when not given)."""
    _in_kernel_only("get_lane_idx")


def get_warp_idx(warp_size=None):
    """This thread's warp: its linear index in the block divided by ``warp_size``."""
    _in_kernel_only("get_warp_idx")


def get_warp_idx_sync(warp_size=None):
    """``T.get_warp_idx`` (TileLang's form for converged warps; the same index)."""
    _in_kernel_only("get_warp_idx_sync")


def get_warp_group_idx(warp_size=None, warps_per_group=None):
    """This thread's warp group: its linear index in the block divided by ``warp_size *
    warps_per_group`` (4 warps when not given: Hopper's warpgroup of 128 threads)."""
    _in_kernel_only("get_warp_group_idx")


def thread_binding(start, stop=None, thread=None, annotations=None):
    """``start + threadIdx`` along the axis ``thread`` names ("threadIdx.x", …;
    "blockIdx.x", … for the block's index): TileLang's TIR binding, as an expression or
    a ``for`` loop over ``[start, stop)``."""
    _in_kernel_only("thread_binding")



def launch_thread(thread, extent):
    """TVM's ``T.launch_thread("threadIdx.x", n)``: the index along that axis, launched
    with ``n`` (the kernel's own ``T.Kernel`` extent; opening a kernel's body, it makes
    the launch, ``frontend/raw_launches.py``)."""
    _in_kernel_only("launch_thread")
