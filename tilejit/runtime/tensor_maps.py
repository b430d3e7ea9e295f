"""Tensor maps (TMA descriptors) for Hopper's ``cp.async.bulk.tensor``, encoded on the host.

A map describes a global tensor (base address, extents and byte strides) and the box one
copy moves into shared memory, with the swizzle of the shared tile's layout. The driver
encodes it (``cuTensorMapEncodeTiled``) into 128 opaque bytes, which a kernel takes as a
64-byte-aligned ``.param`` (a ``byval`` ``"nvvm.grid_constant"`` parameter in LLVM).
The driver wants every list innermost dimension first; tilejit's shapes are outermost
first, so the lists are reversed here. Encoding is a driver call, so maps are cached on
everything they encode.

``passes/tma.py`` decides which copies use TMA and records the boxes; the launch
(``kernel.py``, ``runtime/fastlaunch.py``) passes the maps from one ``TensorMaps`` cache.
"""
from __future__ import annotations

import ctypes
from collections import OrderedDict

from tilejit.ir.tma_box import (DATA_TYPES, MAP_BYTES, MAX_BOX, MAX_RANK, SWIZZLES,  # noqa: F401
                                Box, data_type_supported)


def encode_arguments(pointer: int, shape, strides, box: Box) -> dict:
    """The arguments of ``cuTensorMapEncodeTiled`` as plain ints, innermost dimension
    first; raises ValueError naming what TMA cannot take. ``strides`` in elements."""
    rank = len(shape)
    if not 1 <= rank <= MAX_RANK or len(strides) != rank or len(box.extents) != rank:
        raise ValueError(f"tensor map: expected rank 1..{MAX_RANK} with one stride and one box "
                         f"extent per dimension, got shape {tuple(shape)}, strides "
                         f"{tuple(strides)}, box {box.extents}")
    if any(not 0 < n < 1 << 31 for n in shape):
        raise ValueError(f"tensor map: every extent must be 1..2^31-1 (TMA's coordinates are "
                         f"32-bit), got shape {tuple(shape)}")
    if box.dtype not in DATA_TYPES:
        raise ValueError(f"tensor map: element type {box.dtype!r} has no TMA data type; "
                         f"expected one of {', '.join(DATA_TYPES)}")
    if pointer % 16:
        raise ValueError(f"tensor map: the tensor's address must be 16-byte aligned, got "
                         f"{pointer:#x}")
    if strides[-1] != 1 and shape[-1] != 1:
        raise ValueError(f"tensor map: the innermost dimension must be contiguous, got stride "
                         f"{strides[-1]}")
    # a dimension of extent 1 is only ever at coordinate 0 (or outside): any stride does,
    # and the driver wants a positive multiple of 16 bytes
    byte_strides, span = [], shape[-1] * box.itemsize
    for d in range(rank - 2, -1, -1):
        s = strides[d] * box.itemsize if shape[d] != 1 else -(-max(span, 1) // 16) * 16
        byte_strides.insert(0, s)
        span = max(span, s * shape[d])
    for d, s in enumerate(byte_strides):
        if s % 16 or s <= 0 or s >= 1 << 40:
            raise ValueError(f"tensor map: stride of dimension {d} must be a positive multiple "
                             f"of 16 bytes below 2^40, got {s} bytes")
    for d, e in enumerate(box.extents):
        if not 1 <= e <= MAX_BOX:
            raise ValueError(f"tensor map: box extent of dimension {d} must be 1..{MAX_BOX}, "
                             f"got {e}")
    inner = box.extents[-1] * box.itemsize
    if inner % 16:
        raise ValueError(f"tensor map: the box's innermost extent must be a multiple of 16 "
                         f"bytes, got {inner}")
    if box.swizzle not in SWIZZLES:
        raise ValueError(f"tensor map: swizzle must be one of {SWIZZLES} bytes, got "
                         f"{box.swizzle}")
    if box.swizzle and inner > box.swizzle:
        raise ValueError(f"tensor map: with a {box.swizzle}-byte swizzle the box's innermost "
                         f"extent may span at most {box.swizzle} bytes, got {inner}")
    return {"data_type": DATA_TYPES[box.dtype], "rank": rank, "address": pointer,
            "dims": [int(n) for n in reversed(shape)],
            "strides": [int(s) for s in reversed(byte_strides)],
            "box": [int(e) for e in reversed(box.extents)],
            "element_strides": [1] * rank, "swizzle": box.swizzle}


def _driver_encode(args: dict) -> bytes:
    """128 bytes from the driver for ``encode_arguments``' output."""
    from cuda.bindings import driver as drv

    # the driver, like cuda.bindings above, only when it encodes a map: encode_arguments
    # and a TensorMaps with another encoder (the tests') run without cuda.bindings
    from tilejit.runtime.cuda_driver import CudaError
    u64, u32 = drv.cuuint64_t, drv.cuuint32_t
    swizzle = ("CU_TENSOR_MAP_SWIZZLE_NONE" if not args["swizzle"]
               else f"CU_TENSOR_MAP_SWIZZLE_{args['swizzle']}B")
    err, tensor_map = drv.cuTensorMapEncodeTiled(
        getattr(drv.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{args['data_type']}"),
        args["rank"], args["address"], [u64(n) for n in args["dims"]],
        [u64(s) for s in args["strides"]], [u32(e) for e in args["box"]],
        [u32(e) for e in args["element_strides"]],
        drv.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(drv.CUtensorMapSwizzle, swizzle),
        drv.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
        drv.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    if err:
        raise CudaError("cuTensorMapEncodeTiled", err, f"{args}")
    return ctypes.string_at(tensor_map.getPtr(), MAP_BYTES)


class TensorMaps:
    """Encoded maps, least recently used dropped past ``capacity``; ``encode`` is the
    driver call (replaceable for tests)."""

    def __init__(self, capacity: int = 1024, encode=_driver_encode):
        self.capacity, self._encode = capacity, encode
        self._maps: OrderedDict = OrderedDict()

    def get(self, pointer: int, shape, strides, box: Box) -> bytes:
        """The map of one tensor for ``box``. A tensor with no elements (a launch whose
        loop never copies from it, such as a GEMM with K = 0) gets 128 zero bytes: the
        driver refuses empty dimensions."""
        key = (pointer, tuple(shape), tuple(strides), box)
        found = self._maps.get(key)
        if found is not None:
            try:
                self._maps.move_to_end(key)
            except KeyError:        # dropped by another thread meanwhile: still valid
                pass
            return found
        if 0 in key[1]:
            return bytes(MAP_BYTES)
        encoded = self._encode(encode_arguments(pointer, shape, strides, box))
        if len(encoded) != MAP_BYTES:
            raise ValueError(f"tensor map: the encoder returned {len(encoded)} bytes, expected "
                             f"{MAP_BYTES}")
        self._maps[key] = encoded
        if len(self._maps) > self.capacity:
            self._maps.popitem(last=False)
        return encoded


MAPS = TensorMaps()      # the launches' maps (kernel.py, fastlaunch.py)
