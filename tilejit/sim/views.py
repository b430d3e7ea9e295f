"""``T.reshape`` and ``T.view`` in simulation: a view of a global tensor's or a tile's
numpy array.

A view shares the tensor's elements (writes through it are writes to the tensor), so
the tensor must be contiguous; the element count (the byte count, for a view as another
dtype) must be the same. bfloat16 and float8 tensors are held as float32 copies here,
whose bits are not theirs: a view between dtypes of those is not supported. A view of a
tile is a tile of the same kind sharing its record of unwritten elements (for a view as
another dtype, whose elements straddle the tile's, that record is dropped from both: no
read through either is then reported as uninitialized). The compiler's checks of tile
views (``passes/tile_allocation.py``: a view of a fragment, a view as another dtype of
a fragment) run before the simulation, as they run for the GPU."""
from __future__ import annotations

import math

from tilejit.language.dtypes import as_dtype
from tilejit.sim.runtime import SimTensor
from tilejit.sim.threads import LaneTensor


def reshape(buffer, shape):
    return _view(buffer, shape, None, "T.reshape")


def view(buffer, shape=None, dtype=None):
    return _view(buffer, shape, dtype, "T.view")


def _view(buffer, shape, dtype, what):
    if not isinstance(buffer, SimTensor):
        raise TypeError(f"{what}: expected a global tensor (a tensor parameter of the "
                        f"kernel) or a tile, got {type(buffer).__name__}")
    data = buffer.data
    if not data.flags.c_contiguous:
        raise ValueError(f"{what}: {buffer.name} is not contiguous (strides "
                         f"{tuple(s // data.itemsize for s in data.strides)} for shape "
                         f"{data.shape}); a view needs its elements in row-major order")
    to = buffer.dtype if dtype is None else as_dtype(dtype)
    if shape is None and to.itemsize != buffer.dtype.itemsize:
        raise TypeError(f"{what}: a view of {buffer.name} ({buffer.dtype.name}) as "
                        f"{to.name} (another size) needs its shape")
    if shape is None:
        shape = data.shape
    if to != buffer.dtype:
        if buffer.dtype.held_in_float32 or to.held_in_float32:
            raise TypeError(f"{what}: a view of {buffer.name} ({buffer.dtype.name}) as "
                            f"{to.name}: bfloat16 and float8 bits are not viewed as another "
                            f"dtype")
        flat = data.reshape(-1)
        if flat.nbytes % to.itemsize:
            raise ValueError(f"{what}: {buffer.name}'s {flat.nbytes} bytes are not a whole "
                             f"number of {to.name} elements")
        data = flat.view(to.numpy)
    shape = tuple(int(s) for s in shape)
    # a local tile of per-thread code holds one copy per thread (the thread first)
    lanes = data.shape[:1] if isinstance(buffer, LaneTensor) else ()
    if math.prod(shape) != data.size // math.prod(lanes):
        raise ValueError(f"{what}: {buffer.name} has {data.size // math.prod(lanes)} elements "
                         f"of {to.name}; the shape {shape} has {math.prod(shape)}")
    if buffer.kind is None:
        return SimTensor(data.reshape(shape), to, buffer.name)
    if lanes:
        out = LaneTensor.__new__(LaneTensor)
        SimTensor.__init__(out, data.reshape(lanes + shape), to, buffer.name, buffer.kind)
    else:
        out = SimTensor(data.reshape(shape), to, buffer.name, buffer.kind)
    if to != buffer.dtype:
        buffer.unwritten = out.unwritten = None
    elif buffer.unwritten is None:
        out.unwritten = None
    else:
        out.unwritten = buffer.unwritten.reshape(lanes + shape)      # a view: shared
    out.races = buffer.races if out.data.shape == data.shape else None
    return out
