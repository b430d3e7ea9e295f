"""``from tilelang import tvm``: most of TileLang's programs and tests import TVM through
TileLang on their first line, and many never use it. The import works here; reading any
of its names raises ``NotSupportedError`` naming it (tilejit is built without TVM), so a
program that uses TVM's IR stops at that line with the reason, not at its imports. The
exceptions: ``DataType`` (``from tvm import DataType``; ``DataType(dtype).bits``), which is
tilejit's dtype class, as ``tilejit.DataType``; ``tirx.decl_buffer`` (a buffer of a shape and
dtype, what tilelang.layout's swizzles read); the expression builders that TileLang's
dequantizing helpers use, ``tirx.const``, ``tirx.reinterpret``, ``tirx.Cast``,
``tirx.Select`` and ``tirx.PrimExpr`` (``language/tir_exprs.py``), also under TVM's older
name ``tir``; ``te.var`` (a run-time dimension, ``T.dynamic``); and
``arith.Analyzer().can_prove_equal`` on ints and on the index functions tilejit's layouts
return where TileLang returns a ``PrimExpr`` (equal at every index of their shape); and
``target.Target`` (``tvm_target.py``: a target string, a context a compile takes)."""
from __future__ import annotations

import sys
import types

import numpy as np

from tilejit.language.compat import NotSupportedError
from tilejit.language.dtypes import DType as DataType
from tilejit.language.dtypes import as_dtype
from tilejit.language.layout import IndexFunction
from tilejit.language.tilelang_names import Symbol
from tilejit.language.tir_exprs import Cast, PrimExpr, Select, const, reinterpret
from tilejit.tilelang.tvm_target import Target

__all__ = ["DataType", "arith", "target", "te", "tir", "tirx"]


def _not_supported(module: str, name: str):
    return NotSupportedError(
        f"tvm.{module}{name} (TVM, which TileLang programs import as `from tilelang import "
        f"tvm`) is not supported by tilejit: tilejit is built without TVM; the import works, "
        f"its IR, targets and passes do not; see docs/tilelang-compat.md")


class _Namespace(types.ModuleType):
    """A TVM submodule of which tilejit has a few names; the others raise."""

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__") or \
                f"{self.__name__}.{name}" in sys.modules:
            raise AttributeError(name)      # (a submodule being imported: Python finds it)
        raise _not_supported(f"{self.__name__.rpartition('.')[2]}.", name)


class Buffer(types.SimpleNamespace):
    """``tirx.decl_buffer``'s buffer: ``shape``, ``dtype``, ``name``, ``scope``."""


def decl_buffer(shape, dtype="float32", name="buffer", scope="global", **_):
    return Buffer(shape=tuple(int(s) for s in shape), dtype=str(as_dtype(dtype)), name=name,
                  scope=scope)


class Analyzer:
    """``tvm.arith.Analyzer``: ``can_prove_equal`` only."""

    def can_prove_equal(self, lhs, rhs) -> bool:
        """``lhs == rhs`` at every index: ints, or ``IndexFunction``s over one shape (a
        proof over the finite domain)."""
        for side, value in (("lhs", lhs), ("rhs", rhs)):
            if not isinstance(value, (int, np.integer, IndexFunction)) or isinstance(
                    value, bool):
                raise TypeError(f"tvm.arith.Analyzer.can_prove_equal {side}: expected an int "
                                f"or a layout's index function, got {type(value).__name__}")
        if isinstance(lhs, IndexFunction) and isinstance(rhs, IndexFunction):
            return lhs == rhs
        if isinstance(lhs, IndexFunction) or isinstance(rhs, IndexFunction):
            fn, value = (lhs, rhs) if isinstance(lhs, IndexFunction) else (rhs, lhs)
            return bool((fn.values() == value).all())
        return int(lhs) == int(rhs)

    def __getattr__(self, name):
        raise _not_supported("arith.Analyzer.", name)


# ``import tvm`` gives this module (``compat.MissingModules``, where no TVM is installed):
# it and its namespaces are packages, so that an import of a TVM module tilejit lacks
# (``tvm.ir``, ``tvm.tirx.expr``) reaches the finder, which refuses it by name
__path__ = []
tirx = _Namespace("tvm.tirx")
# ``tvm.tir``: TVM's name of the same module before TileLang's fork renamed it ``tirx``
# (BitBLAS's and older TileLang programs' `from tvm import tir`; `tir.const(...)`)
tir = _Namespace("tvm.tir")
for _ns in (tirx, tir):
    _ns.decl_buffer, _ns.Buffer, _ns.PrimExpr = decl_buffer, Buffer, PrimExpr
    _ns.const, _ns.reinterpret, _ns.Cast, _ns.Select = const, reinterpret, Cast, Select
arith = _Namespace("tvm.arith")
arith.Analyzer = Analyzer
target = _Namespace("tvm.target")
target.Target = Target
te = _Namespace("tvm.te")


def _te_var(name: str = "tindex", dtype="int32", span=None):
    """``tvm.te.var("m")``: a shape variable, as older TileLang programs declare a run-time
    dimension (``T.dynamic("m")``)."""
    return Symbol(name, dtype, dynamic=True)


te.var = _te_var
tirx.__path__ = tir.__path__ = arith.__path__ = target.__path__ = te.__path__ = []


def __getattr__(name):
    if name.startswith("__") and name.endswith("__") or f"tvm.{name}" in sys.modules:
        raise AttributeError(f"module 'tilejit.tvm' has no attribute {name!r}")
    raise NotSupportedError(
        f"tvm.{name} (TVM, which TileLang programs import as `from tilelang import tvm`) "
        "is not supported by tilejit: tilejit is built without TVM; the import works, its "
        "IR, targets and passes do not; see docs/tilelang-compat.md")
