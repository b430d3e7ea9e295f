"""What one TMA copy moves (a ``Box``) and what TMA can take: the plain data the TMA
pass decides (``passes/tma.py``) and the launch encodes into a tensor map
(``runtime/tensor_maps.py``)."""
from __future__ import annotations

from dataclasses import dataclass

MAP_BYTES = 128
MAX_RANK = 5
MAX_BOX = 256
SWIZZLES = (0, 32, 64, 128)
DATA_TYPES = {"float16": "FLOAT16", "bfloat16": "BFLOAT16", "float32": "FLOAT32",
               "float64": "FLOAT64", "int8": "UINT8", "uint8": "UINT8",
               "int16": "UINT16", "uint16": "UINT16", "int32": "INT32",
               "uint32": "UINT32", "int64": "INT64", "uint64": "UINT64",
               # float8: bytes to TMA (it never converts)
               "float8_e4m3": "UINT8", "float8_e5m2": "UINT8", "float8_e8m0fnu": "UINT8"}


def data_type_supported(name: str) -> bool:
    return name in DATA_TYPES


@dataclass(frozen=True)
class Box:
    """What one copy moves: ``extents`` per tensor dimension (outermost first; 1 for a
    dimension the copy indexes with a scalar), the element type's name, and the shared
    layout's swizzle span in bytes (0, 32, 64 or 128)."""
    dtype: str
    itemsize: int
    extents: tuple
    swizzle: int = 128
