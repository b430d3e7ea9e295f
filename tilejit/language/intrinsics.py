"""Names the front end inserts into the device program (never written by users)."""


def block_index(axis):
    """The block's index along grid axis 0, 1 or 2 (``blockIdx.x/y/z``)."""
    raise RuntimeError("block_index is only meaningful inside a compiled kernel")


def parallel_groups(*extents):
    """The vector groups of a T.Parallel this thread runs (parallel-guard pass)."""
    raise RuntimeError("parallel_groups is only meaningful inside a compiled kernel")


def group_lanes(*extents):
    """Lanes 0 … vec-1 of a vector group (parallel-guard pass)."""
    raise RuntimeError("group_lanes is only meaningful inside a compiled kernel")


def group_lanes_reversed(*extents):
    """Lanes vec-1 … 0 of a vector group (parallel-guard pass)."""
    raise RuntimeError("group_lanes_reversed is only meaningful inside a compiled kernel")


def group_ends(*extents):
    """Lanes 0 and vec-1 of a vector group (parallel-guard pass)."""
    raise RuntimeError("group_ends is only meaningful inside a compiled kernel")


def lane_index(group, lane, *extents):
    """The T.Parallel indices of a group's lane (parallel-guard pass)."""
    raise RuntimeError("lane_index is only meaningful inside a compiled kernel")


# -- tiles (passes/tile_allocation.py, layout_inference.py, barriers.py) --------------

def _device_only(name):
    def stub(*args):
        raise RuntimeError(f"{name} is only meaningful inside a compiled kernel")
    stub.__name__ = stub.__qualname__ = name
    return stub


tile = _device_only("tile")                    # tile("X"): the tile the plan calls X
region = _device_only("region")                # region(tensor, kinds, starts, ends)
gemm = _device_only("gemm")                    # gemm(A, B, C, "g0")
frag_loop = _device_only("frag_loop")          # the slots of this thread (a loop)
frag_index = _device_only("frag_index")        # (lid, slot) -> tile coordinates
frag_valid = _device_only("frag_valid")        # (lid, slot) -> whether the slot holds one
frag_get = _device_only("frag_get")            # (F, slot) -> value
frag_set = _device_only("frag_set")            # (F, slot, value)
sync_threads = _device_only("sync_threads")    # a block barrier
stage = _device_only("stage")                  # stage(tile, index): one version of a tile
copy_async = _device_only("copy_async")        # copy_async(src, dst): cp.async copy
cp_commit = _device_only("cp_commit")          # close this thread's group of async copies
cp_wait = _device_only("cp_wait")              # cp_wait(n): at most n groups still pending
tma_init = _device_only("tma_init")            # (first mbarrier, count, arrivals): thread 0
tma_load = _device_only("tma_load")            # (src, dst stage, mbarrier, map, copy id)
tma_wait = _device_only("tma_wait")            # (mbarrier, parity, thread 0 only): phase done
tma_fence = _device_only("tma_fence")          # generic-proxy shared writes → async proxy
swizzle_blocks = _device_only("swizzle_blocks")  # (panel, row order) -> (bx, by) rasterized
atomic_add = _device_only("atomic_add")        # (tensor, index, value, return_prev, per_lane)
atomic_max = _device_only("atomic_max")        # element atomics (language/atomics.py)
atomic_min = _device_only("atomic_min")
frag_slot = _device_only("frag_slot")          # (loop id, fragment, loop slot) -> its slot
reduce = _device_only("reduce")                # reduce(src, dst, op, dim, clear)
cumsum = _device_only("cumsum")                # cumsum(src, dst, dim, reverse)
