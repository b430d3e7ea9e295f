"""TileLang's user fragment layouts: ``T.Fragment(shape, forward_thread_fn=...,
replicate=1, forward_index_fn=...)`` (``tilelang.layout.Fragment``), given to a
``T.alloc_fragment`` tile by ``T.annotate_layout({frag: fragment})``.

A fragment layout says which thread holds each element of a tile and where among that
thread's registers: ``forward_thread_fn(i, j)`` is the thread (with ``replicate = r > 1``
it takes one more argument, ``rep`` in ``[0, r)``, and each element is held by the ``r``
threads it gives), ``forward_index_fn(i, j)`` the local index (one expression, or a list
of them stored row-major over their output shape, as ``T.Layout``'s). TileLang's other
form, ``forward_fn(i, j[, rep])``, returns the pair ``(thread, index)``. Without an index
function the local index is the element's rank among the elements of its thread in
row-major order (what TileLang derives from the indices the thread leaves unused).

Worked example: a 16x8 tile over 32 threads, four consecutive columns per thread::

    >>> F = Fragment([16, 8], forward_thread_fn=lambda i, j: i * 2 + j // 4,
    ...              forward_index_fn=lambda i, j: j % 4)
    >>> F.get_thread_size(), F.get_output_shape()
    (32, (4,))
    >>> F.map_forward_thread([3, 5]), F.map_forward_index([3, 5])
    (7, [1])
    >>> F.check(threads=128)         # threads in range, one element per (thread, slot)

Like ``T.Layout``'s, the functions are Python arithmetic on the indices, evaluated here
with numpy arrays of all the indices at once (``thread_table``, ``offsets``); the compiler
reads only those tables (``passes/user_fragments.py``).
"""
from __future__ import annotations

import numpy as np

from tilejit.language.layout import (Layout, _Evaluation, LayoutError, _arity, _name, _shape,
                                     evaluate_user_function)


def _evaluate(fn, what: str, shape, args):
    return evaluate_user_function(fn, f"{what} {_name(fn)}", shape, args)


def _integers(value, shape, what: str):
    out = np.broadcast_to(np.asarray(value), shape)
    if not np.issubdtype(out.dtype, np.integer):
        raise LayoutError(f"{what}: expected integer values, got values of type {out.dtype}")
    return out.astype(np.int64)


def _check_arity(fn, count: int, what: str, shape, replicate: int) -> None:
    least, most = _arity(fn)
    if count < least or (most is not None and count > most):
        takes = f"{least}" if least == most else (
            f"{least} or more" if most is None else f"{least} to {most}")
        rep = " and the replica index rep" if replicate > 1 else ""
        raise LayoutError(f"{what}: expected a function of {count} arguments (one index per "
                          f"dimension of shape {list(shape)}{rep}), got {_name(fn)} taking "
                          f"{takes}")


class Fragment(Layout):
    """``T.Fragment``: TileLang's fragment layout (``tilelang.layout.Fragment``).

    ``Layout``'s methods read the local index (``get_output_shape``, ``offsets``: the
    flat slot of each element); ``thread_table`` and ``map_forward_thread`` the thread.
    ``T.annotate_layout({frag: fragment})`` makes the compiler distribute the fragment so."""

    def __init__(self, shape, forward_fn=None, forward_thread_fn=None, replicate=1,
                 forward_index_fn=None):
        shape = _shape(shape, "T.Fragment shape")
        if isinstance(replicate, bool) or not isinstance(replicate, (int, np.integer)) \
                or replicate < 1:
            raise LayoutError(f"T.Fragment replicate: expected a positive int, got "
                              f"{replicate!r}")
        replicate = int(replicate)
        n = len(shape)
        with_rep = n + (replicate > 1)
        if forward_fn is not None:
            if forward_thread_fn is not None or forward_index_fn is not None:
                raise LayoutError("T.Fragment: expected forward_fn, or forward_thread_fn "
                                  "(with forward_index_fn), got both forms")
            if not callable(forward_fn):
                raise LayoutError(f"T.Fragment forward_fn: expected a function returning "
                                  f"(thread, index), got {forward_fn!r}")
            _check_arity(forward_fn, with_rep, "T.Fragment forward_fn", shape, replicate)

            def pair(*args):
                out = forward_fn(*args)
                if not (isinstance(out, (list, tuple)) and len(out) == 2):
                    raise LayoutError(f"T.Fragment forward_fn {_name(forward_fn)}: expected "
                                      f"a pair (thread, index), got {out!r}")
                return out
            thread_fn = lambda *a: pair(*a)[0]
            index_fn = lambda *idx: pair(*idx, *([0] if replicate > 1 else []))[1]
            thread_fn.__name__ = index_fn.__name__ = _name(forward_fn)
            thread_what = index_what = "T.Fragment forward_fn"
        else:
            if not callable(forward_thread_fn):
                raise LayoutError(f"T.Fragment forward_thread_fn: expected a function of the "
                                  f"{n} indices returning the thread, got {forward_thread_fn!r}")
            _check_arity(forward_thread_fn, with_rep, "T.Fragment forward_thread_fn", shape,
                         replicate)
            if forward_index_fn is not None:
                if not callable(forward_index_fn):
                    raise LayoutError(f"T.Fragment forward_index_fn: expected a function of "
                                      f"the {n} indices, got {forward_index_fn!r}")
                _check_arity(forward_index_fn, n, "T.Fragment forward_index_fn", shape, 1)
            thread_fn, index_fn = forward_thread_fn, forward_index_fn
            thread_what, index_what = ("T.Fragment forward_thread_fn",
                                       "T.Fragment forward_index_fn")
        self._shape = shape
        self.replicate_size = replicate
        self.forward_thread_fn = thread_fn
        self._thread_what, self._index_what = thread_what, index_what
        self._threads = None
        self._outputs = None
        self._known = _Evaluation()     # its own: its values depend on both functions
        if index_fn is None:
            index_fn = self._ranks_by_thread()
            index_what = "T.Fragment's local index (no forward_index_fn: each element's rank"\
                         " among its thread's, row-major)"
        self.forward_fn = index_fn
        self._index_what = index_what

    # -- the two tables ---------------------------------------------------------------

    def thread_table(self):
        """The thread of every element and replica: int64, of shape ``shape + (replicate,)``."""
        if self._threads is None:
            full = self._shape + (self.replicate_size,)
            grid = tuple(np.indices(full, dtype=np.int64))
            args = grid if self.replicate_size > 1 else tuple(g[..., 0] for g in grid[:-1])
            out = _evaluate(self.forward_thread_fn, self._thread_what, self._shape, args)
            if isinstance(out, (list, tuple)):
                raise LayoutError(f"{self._thread_what} {_name(self.forward_thread_fn)}: "
                                  f"expected one thread index, got {len(out)} values")
            if self.replicate_size == 1:
                out = np.asarray(out)[..., None] if np.ndim(out) else out
            self._threads = _integers(out, full, f"{self._thread_what} "
                                                 f"{_name(self.forward_thread_fn)}")
        return self._threads

    def _ranks_by_thread(self):
        """The index of each element among its thread's elements (replica 0), in row-major
        order: a table, read through a function of the indices."""
        threads = self.thread_table()[..., 0].reshape(-1)
        order = np.lexsort((np.arange(threads.size), threads))
        ranks = np.empty(threads.size, np.int64)
        sorted_threads = threads[order]
        starts = np.r_[0, np.nonzero(sorted_threads[1:] != sorted_threads[:-1])[0] + 1]
        first = np.repeat(starts, np.diff(np.r_[starts, threads.size]))
        ranks[order] = np.arange(threads.size) - first
        table = ranks.reshape(self._shape)

        def index_in_thread(*idx):
            return table[tuple(idx)]
        return index_in_thread

    def __tj_key__(self):
        return [list(self._shape), list(self._evaluated()), self.thread_table()]

    def _evaluated(self) -> tuple:
        if self._outputs is None:
            grid = tuple(np.indices(self._shape, dtype=np.int64))
            out = _evaluate(self.forward_fn, self._index_what, self._shape, grid)
            outs = tuple(out) if isinstance(out, (list, tuple)) else (out,)
            if not outs:
                raise LayoutError(f"{self._index_what}: expected a local index, got {out!r}")
            self._outputs = tuple(_integers(o, self._shape, f"{self._index_what} "
                                                             f"{_name(self.forward_fn)}")
                                  for o in outs)
        return self._outputs

    # -- TileLang's methods ---------------------------------------------------------

    def get_thread_size(self) -> int:
        """One past the largest thread (TileLang's ``ThreadExtent``)."""
        return int(self.thread_table().max()) + 1

    def get_replicate_size(self) -> int:
        return self.replicate_size

    def map_forward_thread(self, indices, rep: int = 0) -> int:
        return int(self.thread_table()[tuple(int(x) for x in indices) + (int(rep),)])

    def is_equal(self, other) -> bool:
        """The same placement: shapes, replicas, threads, local index shapes and local
        indices equal (TileLang compares the expressions structurally, and calls fragments
        of different shapes equal, a broadcast its layout inference allows)."""
        return (isinstance(other, Fragment) and other._shape == self._shape
                and other.replicate_size == self.replicate_size
                and np.array_equal(self.thread_table(), other.thread_table())
                and Layout.is_equal(self, other))

    def repeat(self, repeats, repeat_on_thread: bool = False, lower_dim_first: bool = True):
        """The layout tiled ``repeats[d]`` times along each dimension: copy ``c``
        (numbered with the last dimension fastest when ``lower_dim_first``, else the first)
        goes to threads ``+ c * get_thread_size()`` (``repeat_on_thread``) or to local
        indices ``+ c * `` the local extent (a one-output index)."""
        if isinstance(repeats, int):
            repeats = [repeats]
        repeats = _shape(repeats, "T.Fragment.repeat repeats")
        if len(repeats) != len(self._shape):
            raise LayoutError(f"T.Fragment.repeat repeats: expected one factor per dimension "
                              f"of {list(self._shape)}, got {list(repeats)}")
        base, threads = self._shape, self.get_thread_size()
        order = range(len(base) - 1, -1, -1) if lower_dim_first else range(len(base))
        if not repeat_on_thread and len(self._evaluated()) != 1:
            raise LayoutError("T.Fragment.repeat: expected a one-output local index to repeat "
                              f"over, got {len(self._evaluated())} outputs")
        extent = self.get_output_shape()[0]
        inner_thread, inner_index = self.forward_thread_fn, self.forward_fn

        def copy_of(idx):
            c, stride = 0, 1
            for d in order:
                c = c + (idx[d] // base[d]) * stride
                stride *= repeats[d]
            return c

        def inner(idx):
            return tuple(x % n for x, n in zip(idx, base))

        def thread(*args):
            idx, rep = args[:len(base)], args[len(base):]
            t = inner_thread(*inner(idx), *rep)
            return t + copy_of(idx) * threads if repeat_on_thread else t

        def index(*idx):
            out = inner_index(*inner(idx))
            if repeat_on_thread:
                return out
            out = out[0] if isinstance(out, (list, tuple)) else out
            return out + copy_of(idx) * extent
        return Fragment([b * r for b, r in zip(base, repeats)], forward_thread_fn=thread,
                        replicate=self.replicate_size, forward_index_fn=index)

    def replicate(self, replicate: int):
        """Held ``replicate`` times more: replica ``rep`` of the new layout is replica
        ``rep % r`` of this one on threads ``+ (rep // r) * get_thread_size()``."""
        if isinstance(replicate, bool) or not isinstance(replicate, int) or replicate < 1:
            raise LayoutError(f"T.Fragment.replicate: expected a positive int, got "
                              f"{replicate!r}")
        r, threads, inner = self.replicate_size, self.get_thread_size(), self.forward_thread_fn

        def thread(*args):
            idx, rep = args[:len(self._shape)], args[len(self._shape)]
            own = inner(*idx, rep % r) if r > 1 else inner(*idx)
            return own + (rep // r) * threads
        return Fragment(self._shape, forward_thread_fn=thread, replicate=r * replicate,
                        forward_index_fn=self.forward_fn)

    def inverse(self):
        """TileLang's ``Fragment.inverse`` ((thread, local index) -> element) is not built."""
        # compat.py reads tilejit.language, which imports this module: on use
        from tilejit.language.compat import NotSupportedError
        raise NotSupportedError("T.Fragment.inverse (a map from (thread, local index) to the "
                                "element) is not supported by tilejit: read thread_table() "
                                "and offsets(); see docs/tilelang-compat.md")

    def _index_shown(self) -> str:
        if self._index_what.startswith("T.Fragment's"):
            return self._index_what
        return f"{self._index_what} {_name(self.forward_fn)}"

    def __repr__(self) -> str:
        rep = f", replicate={self.replicate_size}" if self.replicate_size > 1 else ""
        return (f"T.Fragment({list(self._shape)}, thread={_name(self.forward_thread_fn)}, "
                f"index={_name(self.forward_fn)}{rep})")

    # -- validation -------------------------------------------------------------------

    def check(self, shape=None, name: str = "the fragment", threads: int | None = None):
        """A ``LayoutError`` unless this layout can place a fragment of ``shape`` (default
        its own) over ``threads`` threads (default: any): every thread in ``[0, threads)``,
        every local index >= 0, and no thread holding two elements (or two replicas of one)
        at one local index. Every element is placed by construction."""
        if shape is not None and tuple(int(s) for s in shape) != self._shape:
            raise LayoutError(f"T.annotate_layout: the T.Fragment of {name} has shape "
                              f"{list(self._shape)}, expected the fragment's shape "
                              f"{[int(s) for s in shape]}")
        thread = self.thread_table()
        fn = _name(self.forward_thread_fn)
        low = thread < 0
        high = thread >= threads if threads is not None else np.zeros_like(low)
        if (low | high).any():
            at = tuple(int(x) for x in np.argwhere(low | high)[0])
            rep = f" replica {at[-1]}" if self.replicate_size > 1 else ""
            want = f"[0, {threads}) (the kernel's threads)" if threads else "a value >= 0"
            raise LayoutError(f"{self._thread_what} {fn} for {name}: thread out of range: "
                              f"element {list(at[:-1])}{rep} is on thread {int(thread[at])}, "
                              f"expected a thread in {want}")
        slot = self.offsets()          # a LayoutError for a negative local index
        count = self.replicate_size
        keys = np.stack([thread.reshape(-1),
                         np.repeat(slot.reshape(-1), count)], axis=1)
        order = np.lexsort((keys[:, 1], keys[:, 0]))
        ranked = keys[order]
        same = np.nonzero((ranked[1:] == ranked[:-1]).all(axis=1))[0]
        if same.size:
            full = self._shape + (count,)
            a, b = (np.unravel_index(order[k], full) for k in (same[0], same[0] + 1))
            t, s = (int(x) for x in ranked[same[0]])

            def shown(ix):
                rep = f" (replica {int(ix[-1])})" if count > 1 else ""
                return f"{[int(x) for x in ix[:-1]]}{rep}"
            raise LayoutError(
                f"T.Fragment for {name}: thread {t} holds elements {shown(a)} and {shown(b)} "
                f"both at local index {s}; expected each (thread, local index) to hold at "
                f"most one element ({self._index_shown()})")


# -- TileLang's named fragment layouts (``tilelang.layout``) ---------------------------

def make_gemm_fragment_8x8() -> Fragment:
    """TileLang's ``make_gemm_fragment_8x8()``: an 8x8 tile over a warp as ``ldmatrix``
    gives it (and ``stmatrix`` takes it): row ``i`` on threads ``4i … 4i+3``, two
    consecutive columns each (thread ``4i + j // 2``, local index ``j % 2``)."""
    return Fragment([8, 8], forward_thread_fn=_thread_8x8, forward_index_fn=_index_8x8)


def make_gemm_fragment_8x8_transposed() -> Fragment:
    """TileLang's ``make_gemm_fragment_8x8_transposed()``: the 8x8 fragment of
    ``make_gemm_fragment_8x8`` with rows and columns exchanged (thread ``4j + i // 2``,
    local index ``i % 2``)."""
    return Fragment([8, 8], forward_thread_fn=_thread_8x8_t, forward_index_fn=_index_8x8_t)


def _thread_8x8(i, j):
    return j // 2 + 4 * i


def _index_8x8(i, j):
    return j % 2


def _thread_8x8_t(i, j):
    return i // 2 + 4 * j


def _index_8x8_t(i, j):
    return i % 2


def make_fully_replicated_layout_fragment(buffer, threads: int) -> Fragment:
    """TileLang's ``make_fully_replicated_layout_fragment(buffer, threads)``: every one of
    ``threads`` threads holds the whole buffer (replica ``rep`` on thread ``rep``), its
    elements in row-major order."""
    shape = _shape(getattr(buffer, "shape", buffer),
                   "make_fully_replicated_layout_fragment buffer shape")
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1:
        raise LayoutError(f"make_fully_replicated_layout_fragment threads: expected a "
                          f"positive int, got {threads!r}")
    strides = [int(np.prod(shape[d + 1:], dtype=np.int64)) for d in range(len(shape))]

    def thread(*args):
        return args[-1]

    def index(*idx):
        return sum(i * s for i, s in zip(idx, strides))
    return Fragment(shape, forward_thread_fn=thread, replicate=int(threads),
                    forward_index_fn=index)
