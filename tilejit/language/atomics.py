"""Atomics: ``T.atomic_add | atomic_max | atomic_min(dst, value, memory_order=None,
return_prev=False)``, TileLang's signature; ``T.atomic_load(src, memory_order="seq_cst")``
and ``T.atomic_store(dst, value, memory_order="seq_cst")`` on one element;
``T.atomic_or(dst, value, memory_order=None)`` on one integer element (TileLang's has no
region form and returns nothing).

Two forms (the front end tells them apart in the source, ``frontend/tile_operands.py``):

- element: ``dst`` is one element, ``C[i, j]`` of a global tensor or ``S[i]`` of a shared
  tile. The front end rewrites the call to ``__tj_atomic_add(C, (i, j), v, return_prev,
  per_lane, memory_order)`` (simulated by ``element_atomic`` in ``sim/semantics.py``). Inside a
  ``T.Parallel`` each iteration performs its atomic once; outside one, every thread of
  the block performs it, as TileLang runs a block's statement in each of its threads
  (its atomic tests expect ``nthreads`` adds), each thread with its own previous value
  under ``return_prev=True`` (the simulator then runs the block lane-wise).
  ``T.atomic_load`` / ``T.atomic_store`` outside a ``T.Parallel`` in a kernel that does
  not read its thread index are the block's one access.
- region: ``dst`` is a sliced region ``C[r0:r1, c0:c1]`` (or a whole tensor or shared
  tile) and ``value`` a tile of the same extent: every element of ``value`` is combined
  into its element of ``dst`` once; elements of a global region outside the tensor are
  skipped, as ``T.copy`` does.

The value converts to ``dst``'s dtype first (weak-scalar rules: ``T.atomic_add(H[i],
1.0)`` on float16 adds a float16 1). ``atomic_max``/``atomic_min`` on floats follow
``T.max``/``T.min``: a NaN operand is ignored (IEEE maxNum; a NaN already in memory is
replaced by the value). ``return_prev=True`` returns the element's value just before
this atomic. When several lanes of one ``T.Parallel`` hit the same element the GPU
orders them arbitrarily; the simulator applies them in row-major lane order, so its
previous values are one of the orders the GPU may produce, and its final values equal
the GPU's exactly for integers, max and min (for float adds, up to rounding order).

``memory_order`` is TileLang's: None (relaxed, the default), ``"relaxed"``, ``"consume"``,
``"acquire"``, ``"release"``, ``"acq_rel"`` or ``"seq_cst"``, a compile-time string (any
other value is a compile error). On the GPU it orders the atomic with the thread's
other memory accesses at GPU scope (``codegen/lowering/atomics.py``); the simulator runs
atomics one after another, which every order allows.
"""
from __future__ import annotations

from tilejit.language._semantics import meaning

OPS = ("add", "max", "min", "or")
# the element dtypes atomics support
DTYPES = ("float16", "bfloat16", "float32", "float64", "int32", "int64", "uint32", "uint64")
# atomic_load and atomic_store: element form only, whole 32- or 64-bit words
WORD_DTYPES = ("float32", "float64", "int32", "int64", "uint32", "uint64")
# the element dtypes T.atomic_or supports
BITWISE_DTYPES = ("int32", "int64", "uint32", "uint64")
# the atomics that take fewer element dtypes than DTYPES
RESTRICTED_DTYPES = {"load": WORD_DTYPES, "store": WORD_DTYPES, "or": BITWISE_DTYPES}
# TileLang's memory orders (None: relaxed)
MEMORY_ORDERS = ("relaxed", "consume", "acquire", "release", "acq_rel", "seq_cst")
SIGNATURE = "(dst, value, memory_order=None, return_prev=False)"
_SIGNATURES = {"load": '(src, memory_order="seq_cst")',
               "store": '(dst, value, memory_order="seq_cst")',
               "or": "(dst, value, memory_order=None)"}


def call_signature(op: str) -> str:
    """``T.atomic_<op>``'s parameters, as its messages show them."""
    return _SIGNATURES.get(op, SIGNATURE)


# the orders a plain load or store has (TileLang's, as C++'s): a load does not release,
# a store does not acquire
OP_MEMORY_ORDERS = {"load": ("relaxed", "consume", "acquire", "seq_cst"),
                    "store": ("relaxed", "release", "seq_cst")}


def memory_order_error(op: str, order) -> str | None:
    """Why ``order`` is not a memory order of ``T.atomic_<op>``, or None when it is one."""
    if op in OP_MEMORY_ORDERS and isinstance(order, str):
        allowed = OP_MEMORY_ORDERS[op]
        if order in allowed:
            return None
        return (f"T.atomic_{op} does not support memory_order {order!r} (illegal for a "
                f"{op}): a {op} takes {', '.join(repr(o) for o in allowed)}")
    if order is None or (isinstance(order, str) and order in MEMORY_ORDERS):
        return None
    expected = ", ".join(repr(o) for o in MEMORY_ORDERS)
    return (f"T.atomic_{op}{call_signature(op)}: memory_order must be None or one of {expected} "
            f"(a compile-time string); got {order!r}")


def element_dtype_error(op: str, dtype_name: str) -> str | None:
    """Why an element of ``dtype_name`` cannot be ``T.atomic_<op>``'s operand, where the
    atomic takes fewer dtypes than the others (``RESTRICTED_DTYPES``), or None."""
    allowed = RESTRICTED_DTYPES.get(op)
    if allowed is None or dtype_name in allowed:
        return None
    return (f"T.atomic_{op}: {', '.join(allowed)} elements; the "
            f"{'source' if op == 'load' else 'destination'} is {dtype_name}")


def atomic_add(dst, value, memory_order=None, return_prev=False, use_tma=False,
               annotations=None):
    """``dst += value`` atomically: ``dst`` an element (``C[i, j]``, a global tensor or a
    shared tile) or a region (``C[r0:r1, c0:c1]``) with a tile ``value``. With
    ``return_prev=True`` (element form) returns the element's previous value.
    ``memory_order``: None (relaxed), "relaxed", "consume", "acquire", "release",
    "acq_rel" or "seq_cst", as in TileLang. ``use_tma``: TileLang's request for a TMA
    reduction of a region; the sums are the same, and tilejit adds by atomics."""
    return meaning("atomic_add")(dst, value, memory_order, return_prev)


def atomic_max(dst, value, memory_order=None, return_prev=False, annotations=None):
    """``dst = max(dst, value)`` atomically (a NaN operand is ignored, as ``T.max``)."""
    return meaning("atomic_max")(dst, value, memory_order, return_prev)


def atomic_min(dst, value, memory_order=None, return_prev=False, annotations=None):
    """``dst = min(dst, value)`` atomically (a NaN operand is ignored, as ``T.min``)."""
    return meaning("atomic_min")(dst, value, memory_order, return_prev)


def atomic_or(dst, value, memory_order=None):
    """``dst |= value`` atomically for one element ``dst`` (``F[i]`` of a global tensor or
    a shared tile) of an int32, int64, uint32 or uint64 dtype, with TileLang's
    ``memory_order``. As TileLang's, no region form and no previous value; inside a
    ``T.Parallel`` every iteration performs it, outside one the block does once."""
    return meaning("atomic_or")(dst, value, memory_order)


def atomic_load(src, memory_order="seq_cst"):
    """The value of the element ``src`` (``F[i]`` of a global tensor or a shared tile),
    read atomically with TileLang's ``memory_order`` (default ``"seq_cst"``): every
    thread that runs it reads (a flag another block sets, spun on with
    ``while T.atomic_load(F[0], memory_order="acquire") == 0``). 32- and 64-bit dtypes."""
    return meaning("atomic_load")(src, memory_order)


def atomic_store(dst, value, memory_order="seq_cst"):
    """``dst = value`` atomically for the element ``dst``, with TileLang's
    ``memory_order`` (default ``"seq_cst"``). Inside a ``T.Parallel`` every iteration
    stores; outside one the block stores once, as the other element atomics.
    32- and 64-bit dtypes."""
    return meaning("atomic_store")(dst, value, memory_order)


def atomic_addx2(dst, value, return_prev=False):
    """``dst`` and the element after it along the last dimension += ``value`` and the
    element after it (or ``value`` twice, for a scalar), as two element atomics:
    TileLang's pair atomic (``T.atomic_addx2(C[m, n], C_shared[i, 2 * j])``)."""
    return meaning("atomic_addx2")(dst, value, return_prev)


def atomic_addx4(dst, value, return_prev=False):
    """As ``atomic_addx2``, four consecutive elements."""
    return meaning("atomic_addx4")(dst, value, return_prev)


FUNCTIONS = {"add": atomic_add, "max": atomic_max, "min": atomic_min, "or": atomic_or,
             "load": atomic_load, "store": atomic_store}

__all__ = ["atomic_add", "atomic_max", "atomic_min", "atomic_or", "atomic_load",
           "atomic_store", "atomic_addx2", "atomic_addx4"]
