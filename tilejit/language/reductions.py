"""Reductions and scans over tiles: ``T.reduce`` (TileLang's generic form) and
``T.reduce_sum | reduce_max | reduce_min |
reduce_abssum | reduce_absmax | reduce_bitand | reduce_bitor | reduce_bitxor`` (the
bitwise ones on integer tiles) and the scans ``T.cumsum | cummax``.

Declarations, with TileLang's parameters in TileLang's order (the compiler reads them
from here: ``passes/tile_allocation.py``; ``annotations=`` is accepted and not used):
the GPU lowering is ``codegen/lowering/reductions.py``, the simulator's meaning
``sim/semantics.py``. ``out`` has ``buffer``'s shape without ``dim`` (or with it kept as
1). Values are converted to ``out``'s dtype before they are combined. With
``clear=False`` the result is combined with ``out``'s previous values, once per element.
The scans run along ``dim=0`` unless told (TileLang's default).
``reduce_max``/``reduce_min``/``reduce_absmax`` ignore NaN (as ``T.max``/``T.min`` and
PTX ``max``/``min`` do): the result is NaN only when every value is; with
``nan_propagate=True`` (TileLang's keyword) any NaN makes the result NaN (PTX
``max.NaN``/``min.NaN``, LLVM's ``maximum``/``minimum``). ``batch`` (TileLang's: how
many outputs one of its shared-memory all-reduces combines, a barrier-count tuning) is
accepted and checked at compile time (a positive integer); it changes nothing here,
where a reduction across threads is warp shuffles.
"""
from __future__ import annotations

from tilejit.language._semantics import meaning


def reduce(buffer, out, reduce_type, dim, clear):
    """TileLang's generic reduction: ``T.reduce(S, r, "max", 1, True)`` is
    ``T.reduce_max(S, r, dim=1, clear=True)``; ``reduce_type`` one of ``"sum"``,
    ``"max"``, ``"min"``, ``"abssum"``, ``"absmax"``, ``"bitand"``, ``"bitor"``,
    ``"bitxor"``, written as a string (the front end rewrites the call:
    ``frontend/generic_reduce.py``)."""
    raise RuntimeError("T.reduce is a statement of a kernel: the front end writes it as the "
                       "T.reduce_<kind> it names")


def reduce_sum(buffer, out, dim=-1, clear=True, batch=1, annotations=None):
    """out = Σ buffer along dim."""
    meaning("reduce_sum")(buffer, out, dim, clear)


def reduce_max(buffer, out, dim=-1, clear=True, batch=1, nan_propagate=False,
               annotations=None):
    """out = max of buffer along dim (NaN ignored; any NaN gives NaN with
    ``nan_propagate``)."""
    meaning("reduce_max")(buffer, out, dim, clear, nan_propagate)


def reduce_min(buffer, out, dim=-1, clear=True, batch=1, nan_propagate=False,
               annotations=None):
    """out = min of buffer along dim (NaN ignored; any NaN gives NaN with
    ``nan_propagate``)."""
    meaning("reduce_min")(buffer, out, dim, clear, nan_propagate)


def reduce_abssum(buffer, out, dim=-1, batch=1, annotations=None, *, clear=True):
    """out = Σ |buffer| along dim (TileLang's takes no ``clear``: tilejit's is a keyword
    after TileLang's parameters)."""
    meaning("reduce_abssum")(buffer, out, dim, clear)


def reduce_absmax(buffer, out, dim=-1, clear=True, batch=1, nan_propagate=False,
                  annotations=None):
    """out = max |buffer| along dim (NaN ignored; any NaN gives NaN with
    ``nan_propagate``)."""
    meaning("reduce_absmax")(buffer, out, dim, clear, nan_propagate)


def reduce_bitand(buffer, out, dim=-1, clear=True, batch=1, annotations=None):
    """out = buffer[0] & buffer[1] & ... along dim (integer tiles)."""
    meaning("reduce_bitand")(buffer, out, dim, clear)


def reduce_bitor(buffer, out, dim=-1, clear=True, batch=1, annotations=None):
    """out = buffer[0] | buffer[1] | ... along dim (integer tiles)."""
    meaning("reduce_bitor")(buffer, out, dim, clear)


def reduce_bitxor(buffer, out, dim=-1, clear=True, batch=1, annotations=None):
    """out = buffer[0] ^ buffer[1] ^ ... along dim (integer tiles)."""
    meaning("reduce_bitxor")(buffer, out, dim, clear)


def cumsum(src, dst=None, dim=0, reverse=False, annotations=None):
    """Inclusive prefix sum of src along dim into dst (src itself when dst is None);
    ``reverse=True`` sums from the end."""
    meaning("cumsum")(src, dst, dim, reverse)


def cummax(src, dst=None, dim=0, reverse=False, annotations=None):
    """Inclusive running maximum of src along dim into dst (src itself when dst is
    None); ``reverse=True`` runs from the end. NaN is ignored, as by ``T.max`` and
    ``T.reduce_max`` (a row of NaN stays NaN)."""
    meaning("cummax")(src, dst, dim, reverse)
