"""TIR's expression builders that TileLang programs call in their helpers (``from tvm
import tirx``; TileLang's dequantizing GEMMs build their bit manipulations with them):
``tirx.const``, ``tirx.reinterpret``, ``tirx.Cast`` and ``tirx.Select``. In a kernel
they compile as the language's ``T.cast`` / ``T.reinterpret`` / ``T.if_then_else``
(their typing: ``codegen/typing/templates.py``); in simulation they are these
functions.

One difference from TIR: tilejit computes a helper's integer arithmetic in the types
Numba (and numpy) give it, at least as wide as TIR's, so ``tirx.reinterpret`` of an
integer of another width first cuts it to (or zero-extends it to) the width of the
dtype: the bits TIR's narrower arithmetic would have left where nothing shifted right
past them."""
from __future__ import annotations

import warnings

import numpy as np

from tilejit.language import numerics as _num
from tilejit.language.dtypes import DType, as_dtype


class PrimExpr:
    """TIR's expression type, for annotations (``val: tirx.PrimExpr``); a helper's values
    are numbers here."""


def const(value, dtype=None):
    """``value`` in ``dtype`` (the value itself when no dtype is given)."""
    return value if dtype is None else _num.cast(value, as_dtype(dtype))


def unsigned_of(dtype: DType) -> DType:
    return as_dtype(f"uint{dtype.bits}")


_OLD_REINTERPRET_WARNED = False


def warn_old_reinterpret() -> None:
    """TileLang deprecated ``T.reinterpret(dtype, value)`` for ``T.reinterpret(value,
    dtype)`` and still takes it: so does tilejit, with the warning (once per process)."""
    global _OLD_REINTERPRET_WARNED
    if not _OLD_REINTERPRET_WARNED:
        _OLD_REINTERPRET_WARNED = True
        warnings.warn("T.reinterpret(dtype, value) is deprecated (as in TileLang): use "
                      "T.reinterpret(value, dtype)", DeprecationWarning, stacklevel=3)


def reinterpret(dtype, value):
    """``value``'s bits as ``dtype`` (TIR's argument order); an integer of another width
    is first cut or zero-extended to the width of ``dtype``."""
    dtype = as_dtype(dtype)
    arr = np.asarray(value)
    if arr.dtype.kind in "iub" and arr.dtype.itemsize * 8 != dtype.bits:
        value = _num.cast(value, unsigned_of(dtype))
    return _num.reinterpret(value, dtype)


def Cast(dtype, value):  # noqa: N802 - TIR's name
    return _num.cast(value, as_dtype(dtype))


def Select(cond, then_value, else_value):  # noqa: N802 - TIR's name
    return _num.select(cond, then_value, else_value)
