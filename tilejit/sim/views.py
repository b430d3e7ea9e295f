"""``T.reshape`` and ``T.view`` in simulation: a view of a global tensor's or a tile's
numpy array.

A view shares the tensor's elements (writes through it are writes to the tensor), so
the tensor must be contiguous; the element count (the byte count, for a view as another
dtype) must be the same. bfloat16 and float8 tensors are held as float32 copies here,
whose bits are not theirs: a view of a global tensor between dtypes of those is not
supported. A view of a tile is a tile of the same kind sharing its record of unwritten
elements (for a view as another dtype numpy holds, whose elements straddle the tile's,
that record is dropped from both: no read through either is then reported as
uninitialized).

A view of a shared tile as another dtype where either is held in float32 (a uint8 tile
read as float8_e4m3fn or bfloat16, as sglang's fp8 paged MQA logits does) is an
``overlay``: a tile of its own over the same bytes, reinterpreting them as the GPU does.
Made after elements of the tile were written (``T.copy`` into the uint8 tile, then
``T.view``), it starts from the bytes held then: an element all of whose bytes are
written is decoded from them with the view's dtype (``runtime._from_bits``: bfloat16 and
the float8s through their bits, not numpy's ``.view`` of the float32 copies) and is
written; one with a byte nothing wrote stays unwritten, and reading it is an
``UninitializedReadError``, as it is for a view made before the writes. Later writes
through either side reach the other (``SimTensor.clobbered``) the same way. Bits are
reinterpreted between any two dtypes whose bits the simulator knows (integers, float16,
float32, bfloat16, the float8s, in any order of writing); where either dtype's bits are
not known (float4, float8_e8m0fnu) nothing is reinterpreted: an element whose bytes were
written in the other dtype reads as an error naming that dtype (``stale``,
``SimTensor.check_written``), and a view used as scratch, written before it is read,
runs. The compiler's checks of tile views (``passes/tile_allocation.py``: a view of a
fragment, a view as another dtype of a fragment) run before the simulation, as they run
for the GPU."""
from __future__ import annotations

import contextvars
import ctypes
import math

import numpy as np

from tilejit.language.dtypes import as_dtype, packed_view_message
from tilejit.sim import garbage
from tilejit.sim.runtime import SimTensor, _bits, _from_bits
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
    if to != buffer.dtype and buffer.dtype.packed > 1:
        raise TypeError(packed_view_message(what, buffer.name, buffer.dtype, to))
    if to != buffer.dtype:
        if (buffer.dtype.held_in_float32 or to.held_in_float32) and buffer.kind == "shared":
            return overlay(buffer, shape, to, what)
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
    if buffer.kind == "shared":
        # its bytes are the buffer's: a write through it reaches the buffer's overlays
        # (those made later too)
        out.overlaid = _Linked(buffer)
    return out


class _Linked:
    """The overlays of a view sharing its buffer's memory (a numpy view): the buffer's,
    read when they are used; one added through it is added to the buffer."""

    def __init__(self, base):
        self.base = base

    def __iter__(self):
        return iter(self.base.overlaid)

    def __add__(self, more):
        self.base.overlaid = self.base.overlaid + tuple(more)
        return self


def overlay(buffer, shape, to, what):
    """A view of a shared tile as another dtype where either is held in float32 (bfloat16,
    the float8s): a tile of its own values over the same bytes (the GPU's), linked to
    ``buffer`` (and its other overlays) so that a write through one gives the elements of
    the others those bytes hold the bits written (``SimTensor.clobbered``: bfloat16 and
    the float8s through their bits; float4 and e8m0 elements read as written in another
    dtype, an error): a view reused as scratch (TileLang's ``T.view(KV_shared, shape,
    dtype=accum_dtype)``) runs, and so does a bit reinterpretation (bfloat16 pairs read
    as int32)."""
    shape = tuple(int(s) for s in shape)
    held, asked = buffer.data.size * buffer.dtype.itemsize, math.prod(shape) * to.itemsize
    if held != asked:
        raise ValueError(f"{what}: {buffer.name} holds {held} bytes; the shape {shape} of "
                         f"{to.name} holds {asked}")
    out = SimTensor(garbage.fill(shape, to.numpy), to, buffer.name, buffer.kind)
    _decode_into(out, buffer)
    out.overlaid = (buffer,) + tuple(buffer.overlaid)
    for other in buffer.overlaid:
        other.overlaid = other.overlaid + (out,)
    buffer.overlaid = buffer.overlaid + (out,)
    return out


def _decode_into(out, buffer) -> None:
    """A new overlay ``out`` of ``buffer`` starts from the bytes ``buffer`` holds now (a
    view made after a copy into the tile reads what the copy wrote): an element all of
    whose bytes ``buffer`` has written takes their bits in ``out``'s dtype
    (``runtime._from_bits``: bfloat16 and the float8s decoded, as the GPU reads them) and
    is written; one with a byte not written stays unwritten. Where either dtype's bits
    are not known here (float4, e8m0) nothing is decoded: an element with a byte written
    reads as written in another dtype (``stale``, as ``SimTensor.clobbered`` records a
    later write). ``buffer``'s own stale bytes (written in such a dtype through another
    overlay) stay stale in ``out``."""
    unwritten = buffer.unwritten
    if unwritten is not None and unwritten.all():
        return                      # nothing written yet (a view made before its copy)
    a, b = buffer.dtype.itemsize, out.dtype.itemsize
    done = np.ones(buffer.data.size, dtype=bool) if unwritten is None else \
        ~unwritten.reshape(-1)
    per_byte = np.repeat(done, a).reshape(-1, b)
    raw = _bits(buffer.data.reshape(-1), buffer.dtype)
    if raw is None or _bits(out.data.reshape(-1), out.dtype) is None:
        touched = per_byte.any(axis=1).reshape(out.data.shape)
        if touched.any():
            out.stale = (touched, buffer)
        return
    whole = per_byte.all(axis=1)
    out.data.reshape(-1)[whole] = _from_bits(raw, out.dtype)[whole]
    out.unwritten.reshape(-1)[whole] = False
    if buffer.stale is not None and buffer.stale[0].any():
        stale = np.repeat(buffer.stale[0].reshape(-1), a).reshape(-1, b).any(axis=1)
        out.stale = (stale.reshape(out.data.shape), buffer.stale[1])
    if not out.unwritten.any():
        out.unwritten = None


def _mapped(address: int, nbytes: int) -> bool:
    """Whether [address, address + nbytes) lies in readable and writable mappings of this
    process, one or several back to back (the heap grown by a second mapping: Linux's
    /proc/self/maps; elsewhere nothing can be checked: False)."""
    end, covered = address + nbytes, address
    try:
        with open("/proc/self/maps") as f:
            for line in f:             # in address order
                span, perms = line.split()[:2]
                lo, hi = (int(x, 16) for x in span.split("-"))
                if hi <= covered:
                    continue
                if lo > covered or not perms.startswith("rw"):
                    return False
                covered = hi
                if covered >= end:
                    return True
    except OSError:
        return False
    return False


class DeviceMemory:
    """Host copies of the device memory ``T.make_tensor`` reaches during one simulated
    launch (the simulator on a GPU machine, TILEJIT_TARGET=sim: a pointer table holds
    CUDA tensors' addresses): each span read once, shared by every block's tensor at that
    address, and the spans the launch changed written back after it, as the launch's
    CUDA arguments are. A span must lie inside one allocation of the driver's."""

    def __init__(self, allocation_of):
        self.allocation_of = allocation_of  # address -> (start, bytes) or None
        self.spans = []         # [address, host bytes, the bytes as read]

    def host(self, address: int, nbytes: int):
        """Host bytes standing for [address, address + nbytes) of device memory, or None
        when the driver allocated no memory there."""
        for start, data, _ in self.spans:
            if start <= address and address + nbytes <= start + data.size:
                return data[address - start:address - start + nbytes]
            if address < start + data.size and start < address + nbytes:
                raise ValueError(
                    f"T.make_tensor: the {nbytes} bytes at address {address:#x} overlap, "
                    f"without lying inside, the {data.size} bytes at {start:#x} another "
                    f"T.make_tensor of this launch reaches: not supported in the simulator "
                    f"(make both from one address)")
        found = self.allocation_of(address) if self.allocation_of is not None else None
        if found is None:
            return None
        start, size = found
        if address + nbytes > start + size:
            raise ValueError(f"T.make_tensor: the {nbytes} bytes at address {address:#x} "
                             f"run {address + nbytes - start - size} bytes past the end of "
                             f"the device allocation at {start:#x} ({size} bytes) that "
                             f"holds its start: an access out of bounds")
        data = _device_tensor(address, nbytes).cpu().numpy()
        self.spans.append([address, data, data.tobytes()])
        return data

    def write_back(self) -> None:
        for address, data, before in self.spans:
            if data.tobytes() != before:
                import torch
                _device_tensor(address, data.size).copy_(torch.from_numpy(data))


def _device_tensor(address: int, nbytes: int):
    """A torch CUDA byte tensor over [address, address + nbytes) (no copy)."""
    import torch

    class Span:
        __cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1",
                                    "data": (address, False), "version": 3}
    return torch.as_tensor(Span(), device="cuda")


_DEVICE_MEMORY: contextvars.ContextVar = contextvars.ContextVar("device_memory",
                                                                default=None)


def open_device_memory(allocation_of):
    """A launch's ``DeviceMemory`` begins (the token ``close_device_memory`` takes);
    ``allocation_of(address)``: the runtime's (start, bytes) of a device allocation."""
    return _DEVICE_MEMORY.set(DeviceMemory(allocation_of))


def close_device_memory(token, write_back: bool) -> None:
    """The launch's end: its device memory written back when it completed."""
    memory = _DEVICE_MEMORY.get()
    _DEVICE_MEMORY.reset(token)
    if write_back:
        memory.write_back()


def make_tensor(ptr, shape, dtype="float32", strides=None):
    """``T.make_tensor`` in simulation: a tensor over this process's memory at ``ptr``
    (a host tensor's data pointer), read when the kernel first touches its elements (a
    launch's host program, which computes the grid, makes it too) and checked then to
    lie inside a writable mapping, so that a wrong address is an error, not a crash; a
    dtype the simulator holds in float32 (bfloat16, float8) is refused then too. On a
    GPU machine an address of device memory is read through a host copy
    (``DeviceMemory``), checked to lie inside the driver's allocation."""
    dtype = as_dtype(dtype)
    try:
        address = int(ptr)
    except (TypeError, ValueError):
        raise TypeError(f"T.make_tensor: argument `ptr`: expected an address (a T.ptr "
                        f"parameter or a pointer table's element), got {ptr!r}") from None
    shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    if strides is None:
        strides, acc = [], 1
        for n in reversed(shape):
            strides.append(acc)
            acc *= n
        strides = strides[::-1]
    strides = tuple(int(s) for s in (strides if isinstance(strides, (tuple, list))
                                     else (strides,)))
    if len(strides) != len(shape) or any(s < 0 for s in strides) or any(n < 0 for n in shape):
        raise ValueError(f"T.make_tensor: shape {shape} with strides {strides}")
    return AddressTensor(address, shape, strides, dtype)


class AddressTensor(SimTensor):
    """A global tensor of ``T.make_tensor``: the memory at its address, mapped on first
    use of ``data``."""
    __slots__ = ("address", "_shape", "_strides", "_data")

    def __init__(self, address, shape, strides, dtype):
        self.address, self._shape, self._strides, self._data = address, shape, strides, None
        super().__init__(None, dtype, f"T.make_tensor({address:#x})")

    @property
    def data(self):
        if self._data is None:
            self._data = _at_address(self.address, self._shape, self._strides, self.dtype)
        return self._data

    @data.setter
    def data(self, value):
        self._data = value


def _at_address(address, shape, strides, dtype):
    # (when the kernel reads it: a GPU launch's host program makes such a tensor for its
    # shape alone)
    if dtype.held_in_float32:
        raise TypeError(f"T.make_tensor: {dtype.name} in the simulator, which holds it in "
                        f"float32, is not supported (its bits are not at the address)")
    span = (sum((n - 1) * s for n, s in zip(shape, strides)) + 1) * dtype.itemsize \
        if all(shape) else 0
    memory = _DEVICE_MEMORY.get()
    device = memory.host(address, span) if memory is not None and span else None
    if device is not None:
        return np.lib.stride_tricks.as_strided(
            device.view(dtype.numpy), shape, tuple(s * dtype.itemsize for s in strides),
            writeable=True)
    if span and not _mapped(address, span):
        raise ValueError(f"T.make_tensor: the {span} bytes at address {address:#x} are not "
                         f"in this process's memory: the simulator reads host tensors "
                         f"(tensor.data_ptr() of a CPU tensor); a CUDA tensor's address "
                         f"is the GPU's")
    if not span:
        return np.zeros(shape, dtype.numpy)
    buf = (ctypes.c_char * span).from_address(address)
    flat = np.frombuffer(buf, dtype=dtype.numpy, count=span // dtype.itemsize)
    return np.lib.stride_tricks.as_strided(
        flat, shape, tuple(s * dtype.itemsize for s in strides), writeable=True)
