"""``from tilelang import tvm``: most of TileLang's programs and tests import TVM through
TileLang on their first line, and many never use it. The import works here; reading any
of its names raises ``NotSupportedError`` naming it (tilejit is built without TVM), so a
program that uses TVM's IR stops at that line with the reason, not at its imports. The one
exception is ``DataType`` (``from tvm import DataType``; ``DataType(dtype).bits``), which is
tilejit's dtype class, as ``tilejit.DataType``."""
from __future__ import annotations

from tilejit.language.compat import NotSupportedError
from tilejit.language.dtypes import DType as DataType

__all__ = ["DataType"]


def __getattr__(name):
    if name.startswith("__") and name.endswith("__"):
        raise AttributeError(f"module 'tilejit.tvm' has no attribute {name!r}")
    raise NotSupportedError(
        f"tvm.{name} (TVM, which TileLang programs import as `from tilelang import tvm`) "
        "is not supported by tilejit: tilejit is built without TVM; the import works, its "
        "IR, targets and passes do not; see docs/tilelang-compat.md")
