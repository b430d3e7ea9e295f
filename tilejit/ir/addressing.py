"""Index arithmetic as small expression trees over the thread index ``t`` and a
register slot ``s``: where a fragment's slot lives in its tile, where a shared tile's
element lives in memory. The same tree is evaluated in Python (to check it against the
layout at every index, at compile time) and emitted as LLVM IR
(``lowering/tiles.py``), where a constant slot folds away.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from tilejit.layouts import ComposedLayout, Fragment, Layout


class Expr:
    def __add__(self, other):
        return _binop("add", self, other)

    def __mul__(self, other):
        return _binop("mul", self, other)

    def __floordiv__(self, other):
        return _binop("div", self, other)

    def __mod__(self, other):
        return _binop("mod", self, other)

    def __xor__(self, other):
        return _binop("xor", self, other)

    def __and__(self, other):
        return _binop("and", self, other)

    def __rshift__(self, other):
        return _binop("shr", self, other)

    def __sub__(self, other):
        return _binop("sub", self, other)

    def __lshift__(self, other):
        return _binop("shl", self, other)

    def __or__(self, other):
        return _binop("or", self, other)

    # the reflected forms: ``8 * i``, ``64 - j`` in a user's T.Layout function
    def __rsub__(self, other):
        return _binop("sub", other, self)

    def __rfloordiv__(self, other):
        return _binop("div", other, self)

    def __rmod__(self, other):
        return _binop("mod", other, self)

    def __rlshift__(self, other):
        return _binop("shl", other, self)

    def __rrshift__(self, other):
        return _binop("shr", other, self)

    __radd__ = __add__
    __rmul__ = __mul__
    __rxor__ = __xor__
    __rand__ = __and__
    __ror__ = __or__


@dataclass(frozen=True, eq=False)
class Var(Expr):
    name: str


@dataclass(frozen=True, eq=False)
class Const(Expr):
    value: int


@dataclass(frozen=True, eq=False)
class BinOp(Expr):
    op: str
    a: Expr
    b: Expr


def const(x) -> Expr:
    return x if isinstance(x, Expr) else Const(int(x))


def _binop(op, a, b) -> Expr:
    a, b = const(a), const(b)
    if isinstance(a, Const) and isinstance(b, Const):
        return Const(_APPLY[op](a.value, b.value))
    if op == "add":
        if isinstance(a, Const) and a.value == 0:
            return b
        if isinstance(b, Const) and b.value == 0:
            return a
    if op == "mul":
        for x, y in ((a, b), (b, a)):
            if isinstance(x, Const) and x.value == 0:
                return Const(0)
            if isinstance(x, Const) and x.value == 1:
                return y
    if op == "div" and isinstance(b, Const) and b.value == 1:
        return a
    if op in ("sub", "shl", "or") and isinstance(b, Const) and b.value == 0:
        return a
    return BinOp(op, a, b)


_APPLY = {
    "add": lambda x, y: x + y, "mul": lambda x, y: x * y, "div": lambda x, y: x // y,
    "mod": lambda x, y: x % y, "xor": lambda x, y: x ^ y, "and": lambda x, y: x & y,
    "shr": lambda x, y: x >> y, "sub": lambda x, y: x - y, "shl": lambda x, y: x << y,
    "or": lambda x, y: x | y,
}

T_VAR, S_VAR = Var("t"), Var("s")


def evaluate(e: Expr, env: dict) -> int:
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Var):
        return env[e.name]
    return _APPLY[e.op](evaluate(e.a, env), evaluate(e.b, env))


def substitute(e: Expr, env: dict) -> Expr:
    """``e`` with the named variables replaced by constants (and folded)."""
    if isinstance(e, Var):
        return Const(env[e.name]) if e.name in env else e
    if isinstance(e, Const):
        return e
    return _binop(e.op, substitute(e.a, env), substitute(e.b, env))


# -- shared-memory tiles --------------------------------------------------------------

def _mode_offset(coord: Expr, leaves) -> Expr:
    out: Expr = Const(0)
    place = 1
    for k, (size, stride) in enumerate(leaves):
        digit = coord // place
        if k < len(leaves) - 1:
            digit = digit % size
        out = out + digit * stride
        place *= size
    return out


def layout_offset(layout, coords: list[Expr]) -> Expr:
    """The element offset ``layout(*coords)`` of a Layout, a swizzled ComposedLayout, or
    a user's ``T.Layout`` (``ir/function_layout.FunctionLayout``, its ``offset_expr``)."""
    offset_expr = getattr(layout, "offset_expr", None)
    if offset_expr is not None:
        return offset_expr(coords)
    if isinstance(layout, ComposedLayout):
        inner = layout_offset(layout.layout, coords) + layout.offset
        sw = layout.swizzle
        if sw.bits == 0:
            return inner
        if sw.shift >= 0:
            return inner ^ ((inner & sw.yyy_mask) >> sw.shift)
        raise ValueError(f"unsupported swizzle {sw}")
    assert isinstance(layout, Layout)
    out: Expr = Const(0)
    for mode, c in zip(layout, coords):
        out = out + _mode_offset(const(c), mode._leaves)
    return out


def row_major(shape) -> Layout:
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    return Layout(tuple(shape), tuple(reversed(strides)))


# -- fragments --------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class FragmentIndexing:
    """(thread t, slot s) -> the element's tile coordinates; whether that slot holds an
    element at all (the last round of a parallel layout may be partial); and, for a
    layout that several threads hold copies of, which thread writes (one per copy)."""

    layout: object                  # a layouts.Fragment or a tile.digits.DigitLayout
    coords: tuple[Expr, ...]
    valid: Expr | None              # None: every (thread, slot) holds an element
    slots: int
    writer: Expr | None = None      # None: every element has one holder

    @property
    def fragment(self):
        return self.layout


def _digit_coords(frag: Fragment):
    """Coordinates of a fragment whose thread and slot layouts share one leaf structure
    with each leaf owned by the thread or by the slot (every mma tiling)."""
    coords = []
    for tm, sm in zip(frag.thread_layout, frag.slot_layout):
        tl, sl = tm._leaves, sm._leaves
        if [s for s, _ in tl] != [s for s, _ in sl]:
            return None
        out: Expr = Const(0)
        place = 1
        for (size, dt), (_, ds) in zip(tl, sl):
            if dt and ds:
                return None
            if size > 1 and (dt or ds):
                src, stride = (T_VAR, dt) if dt else (S_VAR, ds)
                out = out + ((src // stride) % size) * place
            elif size > 1:
                return None               # a leaf neither owns: not a distribution
            place *= size
        coords.append(out)
    return tuple(coords)


@dataclass(frozen=True)
class ParallelLayout:
    """The T.Parallel distribution of a shape whose row-major chunks do not form a
    CuTe layout (``layouts.parallel_fragment`` raises): defined by its index formula,
    flat = (s mod vec) + vec·(t + threads·(s div vec))."""

    shape: tuple
    threads: int
    vec: int

    @property
    def slots_per_thread(self) -> int:
        return -(-math.prod(self.shape) // (self.threads * self.vec)) * self.vec

    @property
    def base_threads(self) -> int:
        return self.threads

    @property
    def name(self) -> str:
        return f"parallel {self.shape} threads={self.threads} vector={self.vec}"

    def __str__(self):
        return self.name


@lru_cache(maxsize=None)
def fragment_indexing(frag: Fragment, parallel_vector: int | None = None) -> FragmentIndexing:
    """The indexing of ``frag``, checked against the layout at every (thread, slot)."""
    if parallel_vector is not None:
        vec, threads = parallel_vector, frag.base_threads
        flat = (S_VAR % vec) + (T_VAR % threads + (S_VAR // vec) * threads) * vec
        total = math.prod(frag.shape)
        coords, rest = [], flat
        for n in reversed(frag.shape[1:]):
            coords.append(rest % n)
            rest = rest // n
        coords.append(rest)
        coords = tuple(reversed(coords))
        per_round = threads * vec
        valid = None if total % per_round == 0 else BinOp("lt", flat, Const(total))
        # copies held by several thread groups (Fragment.replicated): the first writes
        writer = BinOp("lt", T_VAR, Const(threads)) \
            if getattr(frag, "num_threads", threads) > threads else None
        ix = FragmentIndexing(frag, coords, valid, frag.slots_per_thread, writer)
        if isinstance(frag, ParallelLayout):
            return ix                   # the formula is the definition
    else:
        coords = _digit_coords(frag)
        if coords is None:
            raise ValueError(f"fragment {frag.name!r}: no index formula for this layout")
        writer = None
        if frag.replicate > 1:
            writer = BinOp("lt", T_VAR, Const(frag.base_threads))
        ix = FragmentIndexing(frag, coords, None, frag.slots_per_thread, writer)
    _check(ix)
    return ix


def digit_indexing(layout) -> FragmentIndexing:
    """The indexing of a ``tile.digits.DigitLayout`` (every slot of every thread holds an
    element; threads differing only in bits no thread digit reads hold copies, and the
    one with those bits 0 writes)."""
    return FragmentIndexing(layout, layout.coords(), None, layout.slots, _writer(layout))


def _writer(layout) -> Expr | None:
    """None when every thread of the block holds its own elements; else the condition
    that thread t is the one copy that writes: t is the sum of its own thread digits
    (t & free == 0 when the digits are powers of two)."""
    digits = [d for dim in layout.dims for d in dim if d.src == "t"]
    own = [sum(((t // d.stride) % d.size) * d.stride for d in digits)
           for t in range(layout.threads)]
    if all(o == t for t, o in enumerate(own)):
        return None
    tv = layout.thread() if getattr(layout, "base", 0) else T_VAR   # t - base, mod n
    if all(_pow2(d.size) and _pow2(d.stride) for d in digits):
        covered = 0
        for d in digits:
            covered |= (d.size - 1) * d.stride
        return BinOp("lt", tv & ((layout.threads - 1) & ~covered), Const(1))
    if any(o > t for t, o in enumerate(own)):
        raise ValueError(f"{layout}: overlapping thread digits")
    expr: Expr = Const(1)
    for d in digits:
        expr = expr + ((tv // d.stride) % d.size) * d.stride
    return BinOp("lt", tv, expr)            # t < own(t) + 1, i.e. t == own(t)


def _pow2(x: int) -> bool:
    return x > 0 and x & (x - 1) == 0


_APPLY["lt"] = lambda x, y: (x < y) * 1       # 0/1, for ints and numpy arrays alike


def fragment_tables(frag: Fragment):
    """``(threads, slots)``: numpy arrays of the tile's shape holding the thread (copy
    0) and the slot of every element. A layout's offset is a sum of one term per
    dimension, so each table is the outer sum of one vector per dimension."""
    rank = len(frag.shape)

    def table(layout):
        out = np.zeros(frag.shape, np.int64)
        for d, n in enumerate(frag.shape):
            per = [layout(*(x if k == d else 0 for k in range(rank))) for x in range(n)]
            out = out + np.array(per, np.int64).reshape([n if k == d else 1
                                                         for k in range(rank)])
        return out
    return table(frag.thread_layout), table(frag.slot_layout)


def _check(ix: FragmentIndexing) -> None:
    """The index formula against the layout at every (thread, slot), all at once: numpy
    arrays of threads and slots through the expressions."""
    frag = ix.fragment
    n_t, n_s = frag.base_threads, frag.slots_per_thread
    holder, slot = fragment_tables(frag)
    holder = holder % n_t
    count = np.zeros((n_t, n_s), np.int64)
    np.add.at(count, (holder, slot), 1)
    if (count > 1).any():
        frag.inverse()                      # names the two elements that collide
    index = np.indices(frag.shape)
    want = np.full((len(frag.shape), n_t, n_s), -1, np.int64)
    for d in range(len(frag.shape)):
        want[d][holder, slot] = index[d]
    t, s = np.meshgrid(np.arange(n_t), np.arange(n_s), indexing="ij")
    env = {"t": t, "s": s}
    ok = (np.ones((n_t, n_s), bool) if ix.valid is None
          else np.broadcast_to(evaluate(ix.valid, env), (n_t, n_s)) != 0)
    got = np.stack([np.broadcast_to(evaluate(c, env), (n_t, n_s)) for c in ix.coords])
    held = count > 0
    bad = (~held & ok) | (held & (~ok | (got != want).any(axis=0)))
    if bad.any():
        ti, si = (int(x) for x in np.argwhere(bad)[0])
        if not held[ti, si]:
            raise ValueError(f"fragment {frag.name!r}: thread {ti} slot {si} holds "
                             f"nothing but the index formula says it does")
        raise ValueError(f"fragment {frag.name!r}: index formula gives "
                         f"{tuple(int(x) for x in got[:, ti, si])} for thread {ti} slot {si}, "
                         f"the layout says {tuple(int(x) for x in want[:, ti, si])}")
