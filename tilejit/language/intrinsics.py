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
