"""TVM's thread all-reduce, as TileLang's GEMV examples write it inside a kernel:

    with T.attr(T.comm_reducer(lambda x, y: x + y, [T.cast(0, dtype)]),
                "reduce_scope", T.reinterpret(T.uint64(0), dtype="handle")):
        T.evaluate(T.tvm_thread_allreduce(T.uint32(1), value, True, result[0], tk,
                                          dtype="handle"))

reduces ``value`` with the reducer over the threads whose indices along the named thread
variables (bound by ``T.get_thread_binding(d)``) differ, every one of them getting the
result. The front end recognizes exactly this statement (``frontend/thread_allreduce.py``)
and rewrites it before anything else reads the kernel; these names are declarations for
it: called anywhere else they raise.
"""
from __future__ import annotations

IDIOM = ("`with T.attr(T.comm_reducer(lambda x, y: <expr>, [identity]), \"reduce_scope\", "
         "...): T.evaluate(T.tvm_thread_allreduce(T.uint32(1), value, cond, result, "
         "*thread_vars, dtype=\"handle\"))`")


def _idiom_only(name):
    raise RuntimeError(f"T.{name} is only supported in TVM's thread all-reduce inside a "
                       f"kernel, {IDIOM}")


def attr(node, key, value):
    """TVM's ``T.attr``: only the ``"reduce_scope"`` of the thread all-reduce."""
    _idiom_only("attr")


def comm_reducer(combiner, identity):
    """TVM's commutative reducer: ``lambda x, y: <expr>`` and ``[identity]`` (one value)."""
    _idiom_only("comm_reducer")


def tvm_thread_allreduce(*args, dtype=None):
    """TVM's all-reduce across the threads named by its last arguments."""
    _idiom_only("tvm_thread_allreduce")


def evaluate(value):
    """TVM's expression statement: ``value`` evaluated and dropped (a statement of its
    own, ``T.evaluate(A[0, 0])``), and around ``T.tvm_thread_allreduce`` in TVM's
    all-reduce idiom."""
    return None
