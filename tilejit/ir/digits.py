"""Fragments in digit form, and what reducing one along a dimension gives.

Every layout tilejit builds for a fragment (the mma tilings, the ``T.Parallel``
distribution) is a *digit layout*: each tile coordinate is a sum of digits,

    coord_k = Σ ((src // stride) % size) · place        src ∈ {thread t, slot s}

so each digit of the thread index and of the slot index moves one coordinate by a
fixed amount. Reducing along dimension ``d`` then needs no search:

- the result's element is held by every thread whose *kept* thread digits match, i.e.
  the thread digits of dimension d are free (replication);
- this thread's partial results are indexed by the slot digits of the kept
  dimensions (renumbered compactly): ``reduced slot = Σ ((s // stride) % size) · new``;
- the threads to combine differ only in the thread digits of dimension d: the ones
  inside a warp (stride·size ≤ 32; 64 on AMDGPU, whose waves are 64 lanes) are combined
  with ``shfl.xor`` (``ds_bpermute``) over those lane bits, the ones across warps through
  shared memory.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from tilejit.ir.addressing import Const, Expr, S_VAR, T_VAR

WARP = 32


@dataclass(frozen=True)
class Digit:
    src: str        # "t" or "s"
    stride: int
    size: int
    place: int

    def expr(self, thread: Expr = T_VAR) -> Expr:
        var = thread if self.src == "t" else S_VAR
        return ((var // self.stride) % self.size) * self.place


@dataclass(frozen=True)
class DigitLayout:
    """A fragment layout in digit form (see the module docstring); ``name`` says where
    it came from (it does not take part in equality)."""

    shape: tuple[int, ...]
    dims: tuple[tuple[Digit, ...], ...]
    threads: int
    slots: int
    name: str = ""
    base: int = 0       # the thread of element (0, ...): the digits read t - base (mod
    #                     threads), a layout of threads [base, base + n) of the block

    def __eq__(self, other):
        return (isinstance(other, DigitLayout) and self.shape == other.shape
                and self.dims == other.dims and self.threads == other.threads
                and self.slots == other.slots and self.base == other.base)

    def __hash__(self):
        return hash((self.shape, self.dims, self.threads, self.slots, self.base))

    def thread(self) -> Expr:
        """The thread index the digits read: ``t``, or ``(t - base) mod threads``."""
        if not self.base:
            return T_VAR
        return (T_VAR + Const(self.threads - self.base)) % Const(self.threads)

    def coords(self) -> tuple[Expr, ...]:
        thread = self.thread()
        out = []
        for digits in self.dims:
            e: Expr = Const(0)
            for d in digits:
                e = e + d.expr(thread)
            out.append(e)
        return tuple(out)

    def __str__(self):
        return self.name or f"digit layout {self.shape}"


def digit_layout(frag) -> DigitLayout | None:
    """The digit form of a ``layouts.Fragment`` whose thread and slot layouts share one
    leaf structure, each leaf owned by the thread or by the slot; None otherwise."""
    dims = []
    for tm, sm in zip(frag.thread_layout, frag.slot_layout):
        tl, sl = tm._leaves, sm._leaves
        if [s for s, _ in tl] != [s for s, _ in sl]:
            return None
        digits, place = [], 1
        for (size, dt), (_, ds) in zip(tl, sl):
            if dt and ds:
                return None
            if size > 1:
                if not (dt or ds):
                    return None
                digits.append(Digit("t" if dt else "s", dt or ds, size, place))
            place *= size
        dims.append(tuple(digits))
    return DigitLayout(tuple(frag.shape), tuple(dims), frag.num_threads,
                       frag.slots_per_thread, frag.name)


@dataclass(frozen=True)
class Reduction:
    """How to reduce a digit layout along ``dim``."""

    source: DigitLayout
    dim: int
    result: DigitLayout                   # the layout of the reduced fragment
    slot_map: Expr                        # source slot -> result slot
    lane_offsets: tuple[int, ...]         # shfl.xor offsets combining lanes
    warp_digits: tuple[Digit, ...]        # thread digits across warps (shared memory)

    @property
    def warp_groups(self) -> int:
        return math.prod(d.size for d in self.warp_digits)


def _pow2(x: int) -> bool:
    return x > 0 and x & (x - 1) == 0


def _split_at_warp(digits, warp=WARP):
    """A thread digit spanning lanes and warps as two digits, one on each side."""
    out = []
    for d in digits:
        if (d.src == "t" and d.stride < warp < d.stride * d.size and _pow2(d.stride)
                and _pow2(d.size)):
            inner = warp // d.stride
            out.append(Digit("t", d.stride, inner, d.place))
            out.append(Digit("t", warp, d.size // inner, d.place * inner))
        else:
            out.append(d)
    return out


def reduce_layout(src: DigitLayout, dim: int, keep_dim: bool = False,
                  warp: int = WARP) -> Reduction | None:
    """The reduction of ``src`` along ``dim`` (None when its thread digits along dim are
    not powers of two, which shuffles cannot combine); ``warp``: the lanes one exchange
    reaches (the target's ``warp_size``)."""
    if src.base % warp:
        return None             # lanes exchanged by shuffles: the offset keeps lane bits
    kept = [k for k in range(len(src.shape)) if k != dim]
    slot_digits = sorted((d for k in kept for d in src.dims[k] if d.src == "s"),
                         key=lambda d: d.stride)
    new_stride, acc = {}, 1
    for d in slot_digits:
        new_stride[d] = acc
        acc *= d.size
    slot_map: Expr = Const(0)
    for d in slot_digits:
        slot_map = slot_map + ((S_VAR // d.stride) % d.size) * new_stride[d]

    def renumber(d: Digit) -> Digit:
        return Digit("s", new_stride[d], d.size, d.place) if d.src == "s" else d

    dims = [tuple(renumber(d) for d in src.dims[k]) for k in kept]
    shape = [src.shape[k] for k in kept]
    if keep_dim:
        dims.insert(dim, ())
        shape.insert(dim, 1)
    lane, across = [], []
    for d in _split_at_warp(src.dims[dim], warp):
        if d.src != "t":
            continue
        if not (_pow2(d.stride) and _pow2(d.size)):
            return None
        if d.stride * d.size <= warp:
            lane += [d.stride << k for k in range(d.size.bit_length() - 1)]
        elif d.stride >= warp:
            across.append(d)
        else:
            return None
    result = DigitLayout(tuple(shape), tuple(dims), src.threads, acc,
                         f"{src.name} reduced along dim {dim}", src.base)
    return Reduction(src, dim, result, slot_map, tuple(lane), tuple(across))


def idle_copies(source: DigitLayout, partial: bool, threads: int) -> bool:
    """Whether a reduction of ``source`` leaves threads without the result: its thread
    digits name fewer of the ``threads`` than there are (the others hold copies in its
    digit form), and the layout is ``partial`` (its tile is smaller than one round of
    the loop that laid it out: the copies are threads that loop gave no element, so
    their partials are the identity). The result is then handed out through shared
    memory (``lowering/reductions.py``, ``layout_inference._plan_reduction_scratch``)."""
    named = math.prod(d.size for digits in source.dims for d in digits if d.src == "t")
    return partial and named < threads


def merged_digits(layout: DigitLayout) -> DigitLayout:
    """``layout`` with each run of adjacent digits of one source that continue each other
    (the next's stride and place those of the previous times its size) as one digit: the
    same map, in a form two layouts equal as maps share."""
    dims = []
    for digits in layout.dims:
        out: list[Digit] = []
        for d in digits:
            p = out[-1] if out else None
            if p is not None and p.src == d.src and p.stride * p.size == d.stride \
                    and p.place * p.size == d.place:
                out[-1] = Digit(p.src, p.stride, p.size * d.size, p.place)
            else:
                out.append(d)
        dims.append(tuple(out))
    return DigitLayout(layout.shape, tuple(dims), layout.threads, layout.slots, layout.name,
                       layout.base)


class ReshapeError(ValueError):
    """A fragment layout that no digit layout of the new shape expresses (the reason)."""


def reshape_layout(src: DigitLayout, shape, name: str = "") -> DigitLayout:
    """``src`` seen through a row-major renumbering as a fragment of ``shape`` (the same
    element count): element ``x`` of the new shape is ``src``'s element at the same
    row-major flat index, held by the same thread in the same slot (``T.reshape`` of a
    fragment).

    Over the flat index each digit of ``src`` moves ``place·R_k`` (``R_k`` the row-major
    stride of its dimension). A new dimension m covers the flat range ``[B_m, B_m·n_m)``
    (``B_m`` its row-major stride): a digit inside one range is a digit of that dimension
    (its flat place a multiple of ``B_m``); a digit that crosses ``B_{m-1}`` splits there
    when the crossing is a whole number of its steps ``q = B_{m-1} / place`` dividing its
    size: ``v mod q`` stays below, ``v div q`` (stride·q) goes on above. Merging
    dimensions never crosses a boundary; a split the digits cannot follow raises
    ``ReshapeError`` saying which digit it cuts. With ``src`` of shape (16, 64), four
    registers of consecutive columns and 16 threads along the row (``s mod 4`` at place
    1, ``t mod 16`` at place 4), the shape (16, 8, 8) splits the thread digit at 8:
    ``t mod 2`` at place 4 of the last dimension, ``(t div 2) mod 8`` at place 1 of the
    middle one."""
    shape = tuple(int(n) for n in shape)
    if math.prod(shape) != math.prod(src.shape):
        raise ReshapeError(f"the shape {shape} holds {math.prod(shape)} elements, the "
                           f"fragment {math.prod(src.shape)}")
    old_strides = _row_major_strides(src.shape)
    strides = _row_major_strides(shape)
    bounds = [math.prod(shape[m:]) for m in range(len(shape))]     # B_{m-1}: dim m's end
    dims: list[list[Digit]] = [[] for _ in shape]
    for k, digits in enumerate(src.dims):
        for d in digits:
            stride, size, place = d.stride, d.size, d.place * old_strides[k]
            while size > 1:
                m = next(m for m in range(len(shape)) if strides[m] <= place < bounds[m])
                if place % strides[m]:
                    raise ReshapeError(
                        f"{_digit_words(d.src, size, place)} starts at flat element {place}, "
                        f"not on a multiple of {strides[m]}, where dimension {m} of the new "
                        f"shape steps")
                if place * size <= bounds[m]:
                    dims[m].append(Digit(d.src, stride, size, place // strides[m]))
                    break
                q, rem = divmod(bounds[m], place)
                if rem or size % q:
                    raise ReshapeError(
                        f"{_digit_words(d.src, size, place)} is cut at flat element "
                        f"{bounds[m]}, where dimension {m} of the new shape ends, which is "
                        f"not after a whole number of its steps dividing {size}")
                dims[m].append(Digit(d.src, stride, q, place // strides[m]))
                stride, size, place = stride * q, size // q, bounds[m]
    out = tuple(tuple(sorted(ds, key=lambda d: d.place)) for ds in dims)
    return DigitLayout(shape, out, src.threads, src.slots,
                       name or f"{src.name or 'layout'} reshaped to {shape}", src.base)


def _row_major_strides(shape) -> list[int]:
    return [math.prod(shape[k + 1:]) for k in range(len(shape))]


def _digit_words(src: str, size: int, place: int) -> str:
    who = "consecutive threads" if src == "t" else "one thread's consecutive registers"
    return f"a run of {size} elements {place} apart in the flat order, held by {who},"
