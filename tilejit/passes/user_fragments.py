"""``T.annotate_layout({frag: T.Fragment(...)})``: the layout a ``T.alloc_fragment`` tile
gets from its annotation (called by ``layout_inference._annotate``; TileLang's
``tilelang.layout.Fragment``, ``language/fragment_layout.py``).

The annotation is evaluated as ``user_layouts.AnnotationScope`` evaluates a shared tile's,
checked against the tile and the kernel (its shape; every thread below the kernel's
thread count; at most one element per thread and local index), and expressed as one of
the layouts the compiler builds for fragments: a digit layout (``ir/digits.py``), each
tile coordinate a sum of digits of the thread and of the slot. It is read off the two
tables of the user's layout (thread and local index of every element): along each
dimension, the thread and the slot of ``x`` with every other index 0 must be sums of
mixed-radix digits of ``x`` each moving the thread or the slot by a fixed stride
(``_factor``), the sums over dimensions must give every element's (thread, slot), and
every thread that holds an element (each replica too) must find it at its slot from its
own index (``_verify``). TileLang's fragments are written this way (``i % 4 * 32 + j %
32``, ``i // 4 * 4 + j // 32``). The local indices must be dense, ``[0, slots)`` in
every thread that holds any; threads the layout leaves out (a layout of 64 threads in a
kernel of 128) hold copies, which the first holder writes (``addressing._writer``).

The layout is then fixed, as a gemm's accumulator is (``fixed_fragment_layouts``):
fragments tied to it by ``T.copy`` or a ``T.Parallel`` take it, a reduction of it derives
its result's, and a gemm that needs another layout of the same fragment is a
``CompileError`` naming both; a data flow that joins it to a fragment of another fixed
layout goes through shared memory (``passes/layout_conversion.py``).
"""
from __future__ import annotations

import ast

import numpy as np

from tilejit.ir.addressing import digit_indexing, evaluate
from tilejit.ir.digits import Digit, DigitLayout, merged_digits
from tilejit.language.fragment_layout import Fragment as UserFragment
from tilejit.language.layout import Layout as UserLayout
from tilejit.language.layout import LayoutError
from tilejit.passes.user_layouts import annotation_value


def annotated_fragment(ctx, scope, name, tile, value_node, line):
    """(the fragment's layout, line, why) for ``{name: value_node}``; a ``CompileError``
    at ``line`` when the value is not a fragment layout of this tile and kernel."""
    user = annotation_value(ctx, scope, name, value_node, line)
    text = ast.unparse(value_node)
    if not isinstance(user, UserFragment):
        what = "a T.Layout (which lays out shared tiles)" if isinstance(user, UserLayout) \
            else repr(user)
        raise ctx.error(f"T.annotate_layout: expected a T.Fragment for fragment {name!r}, "
                        f"got {what} (`{text}`)", line)
    layout = fragment_digits(ctx, user, tuple(tile.shape), repr(name),
                             f"T.Fragment of {name!r} (T.annotate_layout at line {line})",
                             f"T.annotate_layout: the T.Fragment of {name!r} (`{text}`)", line)
    return layout, line, f"the T.Fragment given to {name!r} by T.annotate_layout"


def fragment_digits(ctx, user, shape, name, title, where, line):
    """The digit layout of the user's ``T.Fragment`` over ``shape`` in this kernel (its
    threads), checked; a ``CompileError`` at ``line`` (``where`` names the layout) when
    it is not one of those layouts. ``title``: the layout's name in the IR dump."""
    try:
        user.check(shape, name, ctx.threads)
        thread = user.thread_table()
        slot = user.offsets()
    except LayoutError as e:
        raise ctx.error(str(e), line) from None
    layout, problem = digit_form(thread, slot, shape, ctx.threads, title)
    if layout is None:
        raise ctx.error(
            f"{where} is not a layout "
            f"tilejit can build: {problem}. tilejit builds fragment layouts whose thread and "
            f"local index are sums, over the dimensions, of mixed-radix digits of each index "
            f"(`i % 4 * 32 + j % 32`, `i // 4 * 4 + j // 32`), element (0, ..., 0) on thread "
            f"0 (or a multiple of 32: a range of the block's threads) at local index 0, the "
            f"local indices dense", line)
    return layout


def digit_form(thread, slot, shape, threads, name=""):
    """(the digit layout placing every element at ``thread[..., rep]`` and ``slot``, "")
    or (None, why not). ``thread``: int64 of ``shape + (replicas,)``; ``slot``: of
    ``shape``."""
    origin = (0,) * len(shape)
    base = int(thread[origin + (0,)])
    if slot[origin] or base % 32:
        return None, (f"element {list(origin)} is on thread {base} at local index "
                      f"{int(slot[origin])} (a layout may start at a thread that is a "
                      f"multiple of 32, at local index 0)")
    thread = (thread - base) % threads      # the digits read the thread less the offset
    own = thread[..., 0]
    dims = []
    for k, n in enumerate(shape):
        line = tuple(slice(None) if d == k else 0 for d in range(len(shape)))
        digits = _factor(own[line], slot[line], n)
        if isinstance(digits, str):
            return None, f"along dimension {k}: {digits}"
        dims.append(digits)
    slot_digits = [d for ds in dims for d in ds if d.src == "s"]
    slots = int(np.prod([d.size for d in slot_digits])) if slot_digits else 1
    if slots != int(slot.max()) + 1:
        return None, (f"the local indices are not dense: {int(slot.max()) + 1} local "
                      f"indices for {slots} elements per thread")
    layout = merged_digits(DigitLayout(shape, tuple(dims), threads, slots, name, base))
    problem = _verify(layout, (thread + base) % threads, slot)
    return (layout, "") if problem is None else (None, problem)


def _factor(thread, slot, n):
    """The digits of one dimension (ascending place) whose sum gives ``thread[x]`` and
    ``slot[x]``, or why there are none: at each place, the step of the next index moves
    the thread or the slot (not both), and the longest run of equal steps that divides
    the rest of the extent is one digit."""
    digits, place = [], 1
    while place < n:
        dt, ds = int(thread[place]), int(slot[place])
        if (dt != 0) == (ds != 0) or dt < 0 or ds < 0:
            moved = "both" if dt and ds else ("neither" if not (dt or ds) else "backwards")
            return (f"index {place} moves {moved} of the thread ({dt:+d}) and the local "
                    f"index ({ds:+d}) from index 0")
        rest = n // place
        run = 1
        while run < rest and thread[run * place] == run * dt and slot[run * place] == run * ds:
            run += 1
        size = max(s for s in range(1, run + 1) if rest % s == 0)
        if size == 1:
            return f"no digit of index {place}"
        digits.append(Digit("t" if dt else "s", dt or ds, size, place))
        place *= size
    return tuple(digits)


def _verify(layout, thread, slot):
    """None when every (thread, slot) the user's layout places an element at (each
    replica's thread) finds that element there in ``layout``; else the first that does
    not."""
    try:
        ix = digit_indexing(layout)
    except ValueError as e:                      # thread digits that overlap
        return str(e)
    shape = layout.shape
    index = np.indices(shape, dtype=np.int64)
    for rep in range(thread.shape[-1]):
        env = {"t": thread[..., rep], "s": slot}
        for k, c in enumerate(ix.coords):
            got = np.broadcast_to(np.asarray(evaluate(c, env)), shape)
            bad = got != index[k]
            if bad.any():
                at = tuple(int(x) for x in np.argwhere(bad)[0])
                return (f"element {list(at)} (thread {int(thread[at + (rep,)])}, local index "
                        f"{int(slot[at])}) is not where digits of the thread and the local "
                        f"index put it")
    return None
