"""Names the front end inserts into the device program (never written by users)."""


def block_index(axis):
    """The block's index along grid axis 0, 1 or 2 (``blockIdx.x/y/z``)."""
    raise RuntimeError("block_index is only meaningful inside a compiled kernel")
