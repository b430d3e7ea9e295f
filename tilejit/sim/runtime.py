"""What simulated kernels run on.

A ``T.Parallel`` body runs once for the whole tile: its indices are numpy arrays of
the tile's shape, every value computed from them is an array, and ``if``/``else`` and
conditional expressions execute under a mask of the lanes they apply to (as a GPU's
predicated threads do). Tensor reads and writes check bounds on the active lanes only
and name the kernel's file and line when they fail. Indices are 64-bit, as in the PTX.

A tile remembers which of its elements have been written: reading one that nothing wrote
(on an active lane) raises ``UninitializedReadError`` naming the tile and the kernel's
line, where the GPU would read whatever its registers or shared memory held.

Where a launch is (its block, the lane mask) is kept per thread: several threads may
simulate kernels at once.
"""
from __future__ import annotations

import dis
import linecache
import operator
import os
import sys
import threading

import numpy as np

from tilejit.errors import CompileError
from tilejit.language import numerics
from tilejit.language.dtypes import DType
from tilejit.sim import garbage


class _State(threading.local):
    """The running launch's place, one per thread (``threading.local``)."""

    def __init__(self):
        self.block = (0, 0, 0)
        self.mask = None          # boolean array over the current T.Parallel tile
        self.helper_masks = []    # the masks simulated helpers were called under
        self.grid = (1, 1, 1)
        self.cluster = (1, 1, 1)  # T.ClusterKernel's cluster_dims
        self.multicasts = {}      # T.copy_cluster's regions (sim/cluster.py)
        self.safe_memory = False  # TileLang's masking of global accesses outside a tensor
        self.tensor_cores = True  # T.gemm as tensor cores multiply (not on a CPU target)
        self.laid_out = {}        # tensors T.annotate_layout lays out: lay_out_global
        self.threads = 0          # the block's threads
        # warpgroup roles (sim/roles.py): the block's BlockRoles when the kernel has T.ws
        # roles, this thread's role, how many threads one arrival stands for (a role's
        # 128, or the whole block without roles), and the shared allocations it made
        self.roles = None
        self.role = 0
        self.role_threads = 0
        self.shared_seq = 0
        # per-thread code (sim/threads.py): the block's threads when the kernel reads its
        # thread index (the block then runs lane-wise, one lane per thread), else 0; and
        # how many T.Parallel loops are running
        self.lanes = 0
        self.in_parallel = 0
        # a T.Parallel of one iteration per thread (``own_threads``): its iterations' flat
        # indices, the thread each runs on (threads.thread_index); else None
        self.iteration_threads = None
        # a T.Parallel with loop_layout= (passes/loop_layouts.py): each iteration's local
        # index on its thread (the iterations at one local index meet in a warp
        # primitive, sim/warp.py), and the (thread, local index) pairs no iteration has
        self.iteration_slots = None
        self.iteration_holes = None
        # TMA bytes landing when an mbarrier phase completes: their race checks were made
        # when the load was issued, by its issuer (sim/races.py)
        self.quiet_races = False
        self.role_depth = 0       # inside how many `with T.ws` bodies (role_body)
        self.cp_async = None      # this thread's cp.async copies in flight (async_copies.py)
        self.parallel = None      # the T.Parallel loop running (races.ParallelLoop)
        self.thread_region = False  # in a per-thread branch's one step (threads.region)
        # a T.Parallel a range of the block's threads runs by itself (under `if tx < 128`,
        # threads.py): it may not reach a fragment, which the whole block holds
        self.range_loop = False
        # named barriers in per-thread code: the threads that last synced on each id
        # since the block's last barrier of all its threads (sim/named_barriers.py)
        self.named_users = {}
        # T.sync_grid (sim/grid.py): the launch's GridTurns and this block's place in it
        self.grid_turns = None
        self.grid_block = 0
        # the blocks of the launch that made an acquiring access (block_races.py)
        self.block_acquired = set()
        # ... and those past a barrier of their cluster (T.cluster_wait, T.cluster_sync)
        self.cluster_waited = set()
        # a buffer's print reading its elements (``peeking``), and whether one it read
        # was never written
        self.peeking = False
        self.peeked = False


STATE = _State()


def _within(index, extent: int) -> bool:
    """Whether every value of ``index`` (an int or an index array) is in [0, extent)."""
    if isinstance(index, (int, np.integer)):
        return 0 <= index < extent
    values = np.asarray(index)
    if values.size == 0:
        return True
    if values.strides and 0 in values.strides:     # a broadcast: its distinct values
        values = values[tuple(slice(0, 1) if st == 0 else slice(None)
                              for st in values.strides)]
    return bool(values.min() >= 0) and bool(values.max() < extent)


class UninitializedReadError(RuntimeError):
    """A tile element read before anything wrote it (on the GPU: whatever the register
    or the shared memory held)."""


def lay_out_global(tensor: SimTensor, layout) -> None:
    """``T.annotate_layout({G: layout})`` of a global tensor (``passes/global_layouts.py``
    on the GPU): element ``G[i]`` lives at the flat position ``layout``'s function gives.
    The launch works on the elements gathered in logical order; ``restore_laid_out``
    scatters them back to their places when it ends. Every block must give the tensor
    the same layout."""
    entry = STATE.laid_out.get(id(tensor))
    if entry is not None:
        if entry[1] is not layout and not layout.is_equal(entry[1]):
            raise ValueError(f"T.annotate_layout: tensor {tensor.name!r} is given two "
                             f"different layouts in one launch")
        return
    physical = tensor.data
    tensor.blocks = None            # (its elements move: not checked for block races)
    where = np.unravel_index(layout.offsets(), physical.shape)
    tensor.data = physical[where]
    STATE.laid_out[id(tensor)] = (tensor, layout, physical, where)


def restore_laid_out(write_back: bool) -> None:
    """The end of a launch: each laid-out tensor's elements back at their places."""
    for tensor, _layout, physical, where in STATE.laid_out.values():
        if write_back:
            physical[where] = tensor.data
        tensor.data = physical
    STATE.laid_out = {}


def block_index(axis):
    return STATE.block[axis]


def grid_dim(axis):
    return STATE.grid[axis]


def in_role(ids) -> bool:
    """``with T.ws(*ids):`` runs in this thread's warpgroup role (``sim/roles.py``)."""
    return STATE.roles.in_role(ids)


class role_body:     # noqa: N801 - used as `with __tj_sim.role_body():`
    """Inside a ``with T.ws`` body: where shared-tile accesses are checked for races
    between roles (``sim/races.py``); the block's own statements are ordered by the
    compiler's barriers."""

    def __enter__(self):
        STATE.role_depth += 1

    def __exit__(self, *exc):
        STATE.role_depth -= 1
        return False


def shared_object(make, what: str):
    """A block's shared object (a shared tile, mbarriers): ``make()``, or with warpgroup
    roles the one the first role to reach this allocation made."""
    roles = STATE.roles
    return make() if roles is None else roles.shared(make, what)


def parallel_vectorized(*extents, own_threads=False, loop_layout=None):
    """One iteration whose indices are whole-tile index arrays. ``own_threads``: the
    body indexes no fragment, so the GPU runs iteration k on thread k when there are as
    many iterations as threads (``codegen/lowering/parallel.py``). ``loop_layout``: the
    loop's T.Fragment, which says the thread and local index of each iteration."""
    if STATE.lanes:
        yield from _block_loop(parallel_vectorized, extents, own_threads, loop_layout)
        return
    # an extent known at run time may be 0 or below: no iterations, as on the GPU
    extents = tuple(max(0, int(e)) for e in extents)
    if 0 in extents:
        return          # (the body's statements at fixed indices would still run once)
    # open-mesh indices (each of shape 1 in every other dimension): an expression of
    # some of the loop's indices is computed over those only, and broadcast to the loop's
    # shape where it meets the others or is stored (an index of the rows alone gathers
    # one value per row, not one per element)
    grids = np.indices(extents, dtype=np.int64, sparse=True)
    outer, STATE.parallel = STATE.parallel, _parallel_loop(extents)
    outer_threads = _iteration_map()
    if loop_layout is not None:
        _laid_out(loop_layout, extents, STATE.threads)
    elif own_threads and STATE.threads and int(np.prod(extents)) == STATE.threads:
        # iteration k on thread k: a warp primitive in the body runs across the
        # iterations (sim/warp.py), as it runs across the GPU's lanes
        STATE.iteration_threads = np.arange(STATE.threads, dtype=np.int64).reshape(extents)
    try:
        yield grids[0] if len(extents) == 1 else tuple(grids)
    finally:
        STATE.parallel = outer
        _restore_iteration_map(outer_threads)


def _iteration_map():
    return STATE.iteration_threads, STATE.iteration_slots, STATE.iteration_holes


def _restore_iteration_map(saved):
    STATE.iteration_threads, STATE.iteration_slots, STATE.iteration_holes = saved


def _laid_out(layout, extents, threads):
    """The iterations' threads and local indices under ``loop_layout`` (one copy each:
    a replicated layout runs an iteration on several threads, and which of them a warp
    primitive or the thread index stands for is left unsimulated, ``threads.py``)."""
    thread = np.asarray(layout.thread_table())
    slot = np.asarray(layout.offsets())
    if thread.shape[:-1] != tuple(extents) or layout.get_replicate_size() > 1:
        # (no one thread per iteration: a warp primitive or the thread index read in
        # the body is the simulator's clear error, not an outer loop's map)
        _restore_iteration_map((None, None, None))
        return
    thread = thread[..., 0]
    STATE.iteration_threads = thread
    STATE.iteration_slots = slot
    holes = np.ones((max(threads, int(thread.max()) + 1), int(slot.max()) + 1), bool)
    holes[thread, slot] = False
    STATE.iteration_holes = holes


def parallel_scalar(*extents, own_threads=False, loop_layout=None):
    """Every iteration, in row-major order, with Python int indices."""
    if STATE.lanes:
        yield from _block_loop(parallel_scalar, extents, own_threads, loop_layout)
        return
    extents = tuple(max(0, int(e)) for e in extents)
    outer, loop = STATE.parallel, _parallel_loop(extents)
    STATE.parallel = loop
    try:
        for lane, flat in enumerate(np.ndindex(*extents)):
            loop.lane = lane
            yield flat[0] if len(extents) == 1 else flat
    finally:
        STATE.parallel = outer


def _iteration_races():
    from tilejit.sim.races import IterationRaces    # races.py imports this module
    return IterationRaces()


def _parallel_loop(extents):
    from tilejit.sim.races import ParallelLoop     # races.py imports this module
    return ParallelLoop(extents)


def _block_loop(loop, extents, own_threads=False, loop_layout=None):
    """A T.Parallel in a kernel with per-thread code (``threads.py``): the block's loop,
    which every thread must reach, its body under no thread mask. With one iteration per
    thread of the whole block and no fragment in its body, iteration k runs on thread k,
    as the GPU's schedule gives it: the thread index read there is k."""
    from tilejit.sim.threads import block_wide, uniform   # threads.py imports this module
    block_wide("Parallel")
    extents = [uniform(e, "a T.Parallel extent") for e in extents]
    lanes, mask, ranged = STATE.lanes, STATE.mask, STATE.range_loop
    partial = mask is not None and np.ndim(mask) > 0 and not np.all(mask)
    outer_threads = _iteration_map()
    if loop_layout is not None:
        _laid_out(loop_layout, [max(0, int(e)) for e in extents], lanes)
    elif own_threads and not partial and int(np.prod(extents)) == lanes:
        STATE.iteration_threads = np.arange(lanes, dtype=np.int64).reshape(extents)
    STATE.lanes, STATE.mask = 0, None
    STATE.range_loop = ranged or bool(partial)
    STATE.in_parallel += 1
    try:
        yield from loop(*extents)
    finally:
        STATE.lanes, STATE.mask, STATE.range_loop = lanes, mask, ranged
        STATE.in_parallel -= 1
        _restore_iteration_map(outer_threads)


class where:
    """``with where(cond):`` narrows the active lanes to those where ``cond`` holds;
    ``negate=True`` is the ``else`` branch."""

    def __init__(self, cond, negate=False):
        self.cond = cond
        self.negate = negate

    def __enter__(self):
        self.outer = STATE.mask
        if not _lanes(self.cond):
            # one value of the program (a flag, a tuple, a number): Python's truth; the
            # branch it selects keeps the mask it was entered with, the same object (so a
            # helper's names assigned there stay one value: ``blend``)
            if bool(self.cond) != bool(self.negate):
                return STATE.mask
            STATE.mask = np.asarray(False) if self.outer is None else \
                np.zeros_like(self.outer, dtype=bool)
            return STATE.mask
        cond = np.asarray(self.cond, dtype=bool)
        if self.negate:
            cond = ~cond
        STATE.mask = cond if self.outer is None else (self.outer & cond)
        return STATE.mask

    def __exit__(self, *exc):
        STATE.mask = self.outer
        return False


def may_run(cond, negate=False) -> bool:
    """False when a branch's condition is one value (not lanes: a number, a flag, a tuple
    of the program's) that excludes it, or lanes of which no active one takes it (no
    thread runs the branch: an mbarrier wait there is no one's)."""
    if not _lanes(cond):
        return bool(cond) != bool(negate)
    taken = np.asarray(cond, dtype=bool)
    if negate:
        taken = ~taken
    mask = STATE.mask
    return bool(np.any(taken if mask is None else taken & mask))


def any_active() -> bool:
    return STATE.mask is None or bool(np.any(STATE.mask))


def raise_where_active(exc):
    """A helper's ``raise`` under a mask: raised where some lane reaches it."""
    if any_active():
        raise exc if exc is not None else RuntimeError("re-raise in a kernel helper")


def assert_where_active(cond, msg=""):
    """A helper's ``assert cond, msg`` under a mask: fails where an active lane's
    ``cond`` is false."""
    if not _lanes(cond):
        bad = not cond
        if bad and any_active():
            raise AssertionError(msg) if msg != "" else AssertionError()
        return
    bad = np.logical_not(np.asarray(cond, dtype=bool))
    if STATE.mask is not None:
        bad = bad & STATE.mask
    if np.any(bad):
        raise AssertionError(msg) if msg != "" else AssertionError()


class peeking:     # noqa: N801 - used as `with __tj_sim.peeking():`
    """A buffer's print: its elements read without the check that they were written
    (``STATE.peeked`` says whether one was not); T.print_at marks such a line."""

    def __enter__(self):
        STATE.peeking, STATE.peeked = True, False

    def __exit__(self, *exc):
        STATE.peeking = STATE.peeked = False
        return False


class helper_scope:     # noqa: N801 - used as `with __tj_sim.helper_scope():`
    """A simulated helper's body: the mask it was called under is every lane to it (its
    own names are its own: a lane the caller left out never reads them), so a name it
    assigns under one-value branches stays one value."""

    def __enter__(self):
        STATE.helper_masks.append(STATE.mask)

    def __exit__(self, *exc):
        STATE.helper_masks.pop()
        return False


def blend(old, new):
    """A name assigned under a mask keeps its old value on inactive lanes (a tuple, each
    of its items)."""
    mask = STATE.mask
    entry = STATE.helper_masks
    if mask is None or old is None or (entry and mask is entry[-1]):
        return new
    if isinstance(new, tuple) and isinstance(old, tuple) and len(new) == len(old):
        return tuple(blend(o, n) for o, n in zip(old, new))
    if isinstance(new, tuple) and isinstance(old, tuple) and np.ndim(mask) > 0:
        # (a helper's list appended to under `if x > 0:`, static_sequences.py)
        raise TypeError(f"a tuple (or a helper's list) gets another length under a branch "
                        f"on a thread's value ({len(old)} items, then {len(new)}): kernel "
                        f"code fixes a sequence's length when it compiles (the GPU's "
                        f"compile refuses it); give it one length on every path"
                        f"{_caller_location(2)}")
    if np.ndim(mask) == 0:
        return new if bool(mask) else old
    try:
        return np.where(mask, new, old)
    except ValueError:
        if not np.ndim(old) or _broadcasts(np.shape(old), np.shape(mask)):
            raise
        # the old value is a T.Parallel's (one per iteration, not the threads' lanes): a
        # name its body bound, out of scope with it, as TileLang's let: no old value
        return new


def _broadcasts(a, b) -> bool:
    try:
        np.broadcast_shapes(a, b)
    except ValueError:
        return False
    return True


def item(obj, index):
    """``obj[index]``; a tuple or list indexed by the loop's index arrays reads as an
    array (each lane its element)."""
    if isinstance(obj, (tuple, list)) and isinstance(index, np.ndarray):
        if any(isinstance(v, np.ndarray) and v.ndim > 0 for v in obj):
            # items that are lane values themselves (`(x, 2 * x)[k]`): each lane its
            # item's own lane
            *items, at = np.broadcast_arrays(*obj, index)
            bad = at[(at < -len(items)) | (at >= len(items))]
            if bad.size:
                raise IndexError(f"tuple index out of range (the tuple has {len(items)} "
                                 f"items, an index is {int(bad.flat[0])})")
            return np.take_along_axis(np.stack(items), (at % len(items))[None], 0)[0]
        return np.asarray(obj)[index]
    return obj[index]


def ifexp(cond, then_fn, else_fn):
    """``a if c else b``: each side evaluated under its mask, then selected; a condition
    that is not lanes (one value for every lane) picks its side, as Python."""
    if not _lanes(cond):
        return then_fn() if cond else else_fn()
    with where(cond):
        a = then_fn() if any_active() else 0
    with where(cond, negate=True):
        b = else_fn() if any_active() else 0
    if isinstance(a, tuple) or isinstance(b, tuple):    # `(x, 1.0) if c else (-x, 2.0)`
        a = a if isinstance(a, tuple) else (a,) * len(b)
        b = b if isinstance(b, tuple) else (b,) * len(a)
        return tuple(np.where(cond, *numerics.wide_literal(x, y)) for x, y in zip(a, b))
    # (a Python int the other side's integer type cannot hold: int64, or float64 beside
    # a uint64, as the compiler's typing meets them, where numpy wrapped it)
    return np.where(cond, *numerics.wide_literal(a, b))


def shift(a, n, left: bool, a_static: bool = True):
    """``a << n`` (``left``) or ``a >> n`` as the GPU computes it: integers narrower than
    32 bits promoted to int32 and the shift in the left operand's type whatever the
    count's (a Python int on the left takes the count's type), a count at or past the
    width (or negative) giving 0, or the sign for a signed right shift (64-bit operands
    too: ``uint64 >> int32``, which numpy refuses); anything not an integer as
    Python/numpy shift it. ``a_static``: a Python int
    on the left is a literal on the GPU (else an int64 variable, a 64-bit shift)."""
    a_np, n_np = isinstance(a, (np.ndarray, np.generic)), isinstance(n, (np.ndarray,
                                                                         np.generic))
    if not a_np and not n_np:
        return a << n if left else a >> n
    if not a_np and not a_static and type(a) is int and _INT64.min <= a <= _INT64.max:
        a, a_np = np.int64(a), True         # an int64 variable on the GPU: a 64-bit shift
    base = np.asarray(a).dtype if a_np else np.asarray(n).dtype
    if base.kind == "b":        # a boolean shifted: Numba's 64 bits (_wide_type)
        base = _wide_type(["bool", _bitwise_kind(n, n_np)], [a, n])
    if base.kind not in "iu" or np.asarray(n).dtype.kind not in "iub" or (
            not a_np and not isinstance(a, (int, np.integer))):
        return a << n if left else a >> n
    ty = base if base.itemsize >= 4 else np.dtype(np.int32)
    width = ty.itemsize * 8
    with np.errstate(over="ignore"):
        av = np.asarray(a).astype(ty)
        count = np.asarray(n).astype(np.int64)
    big = (count >= width) | (count < 0)
    safe = np.where(big, 0, count).astype(ty)
    if left:
        out = np.where(big, ty.type(0), np.left_shift(av, safe))
    else:
        fill = np.where(av < 0, ty.type(-1), ty.type(0)) if ty.kind == "i" else ty.type(0)
        out = np.where(big, fill, np.right_shift(av, safe))
    out = out.astype(ty)
    return out if np.ndim(out) else out[()]


_BITWISE = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}


def bitwise(a, b, op: str, a_static: bool = True, b_static: bool = True):
    """``a & b``, ``a | b``, ``a ^ b`` (``op``: "and", "or", "xor") in the GPU's types
    (``codegen/typing/context._c_bitwise``, then Numba's rule):

    - integers narrower than 32 bits promote to int32; two operands of one promoted type
      of at most 32 bits compute in it (``uint8 & 0x1F0`` is int32, where numpy raises
      OverflowError), a Python int taking the other operand's type where it fits;
    - otherwise 64 bits: uint64 where every operand is unsigned (booleans count as
      unsigned, a Python int as int64, or uint64 at 2**63 and above), else int64
      (``uint8 & uint32`` is uint64, ``int32 | uint64`` int64);
    - booleans with booleans, Python ints with Python ints, and anything not an integer
      as Python and numpy combine them.

    A Python int is the GPU's literal where ``a_static``/``b_static`` says so (the
    transform knows: a constant, a constexpr), else an int64 variable (a ``T.serial``
    index, a block index)."""
    a_np, b_np = isinstance(a, (np.ndarray, np.generic)), isinstance(b, (np.ndarray,
                                                                         np.generic))
    if not a_np and not b_np:
        return _python_bitwise(a, b, op)
    kinds = [_bitwise_kind(a, a_np, a_static), _bitwise_kind(b, b_np, b_static)]
    if None in kinds or all(k == "bool" for k in kinds):
        return _python_bitwise(a, b, op)
    ty = _bitwise_type(kinds, [a, b])
    with np.errstate(over="ignore"):
        out = _BITWISE[op](_as(a, a_np, ty), _as(b, b_np, ty))
    return out if np.ndim(out) else out[()]


def _bitwise_kind(x, is_np, static=True):
    """"bool", an integer dtype, "literal" (a Python int the GPU types as a literal), or
    None (anything else); a Python int that is not ``static`` is an int64 variable."""
    if is_np:
        dt = np.asarray(x).dtype
        return "bool" if dt.kind == "b" else dt if dt.kind in "iu" else None
    if isinstance(x, bool):
        return "bool"
    if type(x) is not int:
        return None
    if static or not _INT64.min <= x <= _INT64.max:
        return "literal"
    return np.dtype(np.int64)


_INT64 = np.iinfo(np.int64)


def _bitwise_type(kinds, values):
    ints = [k for k in kinds if isinstance(k, np.dtype)]
    literals = [v for k, v in zip(kinds, values) if k == "literal"]
    if "bool" not in kinds and ints:
        promoted = {k if k.itemsize >= 4 else np.dtype(np.int32) for k in ints}
        if len(promoted) == 1:
            ty = promoted.pop()
            info = np.iinfo(ty)
            if ty.itemsize <= 4 and all(info.min <= v <= info.max for v in literals):
                return ty
    return _wide_type(kinds, values)


def _wide_type(kinds, values):
    """Numba's rule: 64 bits, unsigned only where every operand is (a boolean counts as
    unsigned; a Python int does where it fits the unsigned operand's type, else it is
    int64 unless it is 2**63 or more)."""
    ints = [k for k in kinds if isinstance(k, np.dtype)]
    literals = [v for k, v in zip(kinds, values) if k == "literal"]
    if not ints:
        return np.dtype(np.int64)           # a boolean with a Python int
    fits = min(np.iinfo(k).max for k in ints)
    unsigned = all(k.kind == "u" for k in ints) and all(
        0 <= v <= fits or v > np.iinfo(np.int64).max for v in literals)
    return np.dtype(np.uint64) if unsigned else np.dtype(np.int64)


def _arith_type(kinds, values):
    """``+ - *``'s type: C's uint32, wrapping, for unsigned integers of at most 32 bits
    among which a uint32 (no boolean; Python ints in its range), as the compiler's typing
    gives it
    (``codegen/typing/context._unsigned_32``); else ``_wide_type``."""
    ints = [k for k in kinds if isinstance(k, np.dtype)]
    literals = [v for k, v in zip(kinds, values) if k == "literal"]
    if len(ints) + len(literals) == len(kinds) and np.dtype(np.uint32) in ints and all(
            k.kind == "u" and k.itemsize <= 4 for k in ints) and all(
            0 <= v <= 0xFFFFFFFF for v in literals):
        return np.dtype(np.uint32)
    return _wide_type(kinds, values)


def _as(x, is_np, ty):
    """``x`` in ``ty``, wrapped as the GPU's conversion wraps it."""
    return np.asarray(x).astype(ty) if is_np else np.array(x).astype(ty)[()]


def arith(a, b, op: str, a_static: bool = True, b_static: bool = True):
    """``a + b``, ``a - b``, ``a * b`` (``op``: "add", "sub", "mul") in the GPU's types
    where an operand is a numpy integer or boolean (as the compiler's typing gives it,
    ``_arith_type``): Numba's 64 bits, uint64 only where every operand is unsigned, but
    C's uint32 among unsigned 32-bit integers with a uint32; wrapping as the GPU wraps.
    ``int8 + int8`` is int64 there, where numpy wraps in int8 (100 + 100 = -56) and
    raises OverflowError for ``int8 + 300``. Anything else (Python numbers,
    floats, objects) as Python and numpy combine it. A Python int is a literal or an
    int64 variable as ``a_static``/``b_static`` say (``bitwise``)."""
    a_np, b_np = isinstance(a, (np.ndarray, np.generic)), isinstance(b, (np.ndarray,
                                                                         np.generic))
    if not a_np and not b_np:
        return _ARITH_PY[op](a, b)
    if _int64_operand(a, a_np) and _int64_operand(b, b_np):
        # (the common case, a thread's int64 index and a literal: _arith_type's int64)
        with np.errstate(over="ignore"):
            out = _ARITH_NP[op](a, b, dtype=np.int64)
        return out if np.ndim(out) else out[()]
    kinds = [_bitwise_kind(a, a_np, a_static), _bitwise_kind(b, b_np, b_static)]
    if None in kinds:
        mixed = _integer_with_float(a, a_np, b, b_np)
        if mixed is not None:
            # a typed integer (a thread's index, an int tile's element) with a float: in
            # the float's type, as the compiler's typing gives it (codegen/typing/
            # context.harmonize; TileLang's int32 * float32 is float32), where numpy
            # would widen to float64; a half float computes in float32
            compute, out = mixed
            with np.errstate(all="ignore"):
                r = _ARITH_NP[op](np.asarray(a, dtype=compute), np.asarray(b, dtype=compute))
            r = r.astype(out, copy=False)
            return r if np.ndim(r) else r[()]
        return _ARITH_PY[op](a, b)
    ty = _arith_type(kinds, [a, b])
    with np.errstate(over="ignore"):
        out = _ARITH_NP[op](_as(a, a_np, ty), _as(b, b_np, ty))
    return out if np.ndim(out) else out[()]


def divide(a, b, op: str):
    """``a // b``, ``a % b`` (``op``: "floordiv", "mod"): as numpy computes them, but a
    Python int that does not fit the other operand's integer type (``x // -3`` of a
    uint8 x) widens the two to int64, as the compiler's typing does (Numba's rule where
    ``harmonize`` gives none), where numpy raises OverflowError."""
    if isinstance(a, (np.ndarray, np.generic)) or isinstance(b, (np.ndarray, np.generic)):
        a, b = numerics.wide_literal(a, b)      # (Python numbers: as Python divides them)
    return a // b if op == "floordiv" else a % b


def _integer_with_float(a, a_np, b, b_np):
    """(compute dtype, result dtype) where one operand is a numpy integer or boolean and
    the other a numpy float (float16, float32, float64) or a Python float (a literal:
    float32, harmonize's weak float with a typed integer); else None."""
    pair = [(a, a_np), (b, b_np)]
    floats = [x.dtype for x, is_np in pair if is_np and x.dtype.kind == "f"]
    ints = [x for x, is_np in pair if is_np and x.dtype.kind in "iub"]
    if len(ints) == 1 and not floats and any(type(x) is float for x, _ in pair):
        floats = [np.dtype(np.float32)]     # a float literal with a typed integer: float32
    if len(floats) != 1 or len(ints) != 1:
        return None
    out = floats[0]
    return (np.dtype(np.float32) if out.itemsize < 4 else out), out


def _int64_operand(x, is_np) -> bool:
    """An int64 numpy value, or a Python int (not a bool) in int64's range: with another
    such, ``arith``'s type is int64 whatever the literal (``_wide_type``)."""
    if is_np:
        return x.dtype == _INT64_DTYPE
    return type(x) is int and _INT64.min <= x <= _INT64.max


_INT64_DTYPE = np.dtype(np.int64)
_ARITH_NP = {"add": np.add, "sub": np.subtract, "mul": np.multiply}
_ARITH_PY = {"add": operator.add, "sub": operator.sub, "mul": operator.mul}


def _python_bitwise(a, b, op):
    return a & b if op == "and" else a | b if op == "or" else a ^ b


def _lanes(x) -> bool:
    """Whether ``x`` is lane data (an array of lanes), not a Python value of the program
    (a flag, None, a tuple, a function) that Python's own meaning applies to."""
    return isinstance(x, np.ndarray) and x.ndim > 0


def logical_and(a, b_fn):
    """``a and b`` lane-wise, as Python (and the GPU's code, Numba's) gives it: ``b``
    where ``a`` is true, else ``a`` itself (``3 and 6`` is 6, ``0 and 6`` is 0); ``b``
    (``b_fn()``) evaluated where ``a`` holds only. A value that is not lanes: Python's."""
    if not _lanes(a):
        return b_fn() if a else a
    truth = np.not_equal(a, 0)
    with where(truth):
        if not any_active():
            return a
        b = b_fn()
    return np.where(truth, b, a)


def logical_or(a, b_fn):
    """``a or b`` lane-wise, as Python gives it: ``a`` where it is true, else ``b``
    (``3 or 6`` is 3, ``0 or 6`` is 6); ``b`` evaluated where ``a`` does not hold
    only."""
    if not _lanes(a):
        return a if a else b_fn()
    truth = np.not_equal(a, 0)
    with where(truth, negate=True):
        if not any_active():
            return a
        b = b_fn()
    return np.where(truth, a, b)


def logical_not(a):
    return np.logical_not(a) if _lanes(a) or isinstance(a, np.generic) else not a


def negative(a):
    """``-a``: a bool (a comparison's lanes) negated as an integer, as the GPU's code
    (Numba) does (``-(x > 0)`` is -1 or 0), not numpy's refusal."""
    if isinstance(a, (np.ndarray, np.bool_)) and a.dtype == np.bool_:
        return -np.asarray(a, dtype=np.int64)
    return -a


def _typed(x):
    """A Python number as Numba types it (int64, float64), so that lanes of a narrower
    type meeting it promote as on the GPU (``max(int8 lanes, 200)`` is 200)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return x
    return np.int64(x) if isinstance(x, int) else np.float64(x)


def _lane_extreme(greater):
    def pick(*args):
        args = [_typed(a) for a in args]
        acc = args[0]
        for x in args[1:]:          # Python's (and Numba's): a later value wins only if
            acc = np.where(greater(x, acc), x, acc)     # strictly beyond, NaN never
        return acc
    return pick


def _lane_int(x):
    x = np.asarray(x)
    return (np.trunc(x) if x.dtype.kind == "f" else x).astype(np.int64)


def _lane_round(x, ndigits=None):
    return np.rint(x).astype(np.int64) if ndigits is None else np.round(x, ndigits)


# Python's builtins the GPU's code computes per value (Numba's): their lane-wise forms
_LANE_BUILTINS = {max: _lane_extreme(np.greater), min: _lane_extreme(np.less),
                  abs: np.abs, bool: lambda x: np.not_equal(x, 0), int: _lane_int,
                  float: lambda x: np.asarray(x, dtype=np.float64), round: _lane_round}


def builtin(fn, *args, **kwargs):
    """``fn(*args)`` in a lane-wise body: one of Python's builtins above on lane arrays
    computes lane by lane (``max(A[i], 0.0)``), as each GPU thread's code does; anything
    else, or scalars, as written."""
    lane = _LANE_BUILTINS.get(fn) if isinstance(fn, (type(abs), type)) else None
    if lane is None or kwargs or len(args) == 1 and fn in (max, min) or \
            not any(map(_lanes, args)):
        return fn(*args, **kwargs)
    return lane(*args)


# the simulator's and the language's own files: a kernel's frame is the first outside them
_INTERNAL = (os.path.dirname(os.path.abspath(__file__)) + os.sep,
             os.path.dirname(os.path.abspath(numerics.__file__)) + os.sep)


def kernel_frame(depth=1):
    """The innermost frame outside the simulator and the language (the kernel's, or its
    macro's), from ``depth`` frames up; None if there is none."""
    frame = sys._getframe(depth + 1)
    while frame is not None and frame.f_code.co_filename.startswith(_INTERNAL):
        frame = frame.f_back
    return frame


def _caller_location(depth=2) -> str:
    frame = kernel_frame(depth)
    if frame is None:
        return ""
    return format_location(frame.f_code.co_filename, frame.f_lineno)


def format_location(filename: str, lineno: int) -> str:
    """A kernel's line as errors quote it: file, line and source text."""
    text = linecache.getline(filename, lineno).strip()
    return f'\n  File "{filename}", line {lineno}\n    {text}'


_STORE = ("STORE_FAST", "STORE_NAME", "STORE_DEREF", "STORE_GLOBAL")
_ASSIGNED: dict = {}            # (code, offset of a call) -> the name its result goes to


def assigned_name(frame) -> str | None:
    """The name the call running in ``frame`` is assigned to (``acc_s`` in
    ``acc_s = T.alloc_fragment(...)``), or None (a tuple target, an expression)."""
    key = (frame.f_code, frame.f_lasti)
    if key not in _ASSIGNED:
        name = None
        for ins in dis.get_instructions(frame.f_code):
            if ins.offset > frame.f_lasti:      # the instruction after the call
                name = ins.argval if ins.opname in _STORE else None
                break
        _ASSIGNED[key] = name
    return _ASSIGNED[key]


# the 8-bit floats whose bits ml_dtypes gives (numerics.ml_dtype)
_FLOAT8 = ("float8_e4m3", "float8_e4m3fn", "float8_e5m2")


def _bits(values, dtype):
    """The bytes of ``values`` (held as the simulator holds ``dtype``) as the GPU stores
    them, or None where the simulator does not know the type's bits."""
    values = np.ascontiguousarray(values)
    if dtype.name == "bfloat16":
        return (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16).view(
            np.uint8)
    if dtype.name in _FLOAT8:
        return values.astype(numerics.ml_dtype(dtype)).view(np.uint8)
    if dtype.held_in_float32:
        return None
    return values.astype(dtype.numpy, copy=False).view(np.uint8)


def _from_bits(raw, dtype):
    """``_bits``'s inverse: the values (as the simulator holds them) of these bytes."""
    if dtype.name == "bfloat16":
        return (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    if dtype.name in _FLOAT8:
        return raw.view(numerics.ml_dtype(dtype)).astype(np.float32)
    return raw.view(dtype.numpy)


def _reinterpreted(reader, writer, flat, mine) -> bool:
    """The bits ``writer`` wrote at its elements ``flat`` copied into ``reader`` (a tile
    over the same bytes in another dtype), whose elements ``mine`` they touch; an element
    of ``reader`` is written once all its bytes are. False where either type's bits are
    not known here."""
    written = _bits(writer.data.reshape(-1), writer.dtype)
    held = _bits(reader.data.reshape(-1), reader.dtype)
    if written is None or held is None:
        return False
    a, b = writer.dtype.itemsize, reader.dtype.itemsize
    touched = (flat[:, None] * a + np.arange(a)).reshape(-1)
    held = held.copy()
    held[touched] = written[touched]
    reader.data.reshape(-1)[mine] = _from_bits(held, reader.dtype)[mine]
    # the bytes written so far through the writer: its written elements and these
    done = np.ones(writer.data.size, dtype=bool) if writer.unwritten is None else \
        ~writer.unwritten.reshape(-1)
    done[flat] = True
    whole = np.repeat(done, a).reshape(-1, b).all(axis=1)
    if reader.unwritten is None:
        reader.unwritten = np.zeros(reader.data.shape, dtype=bool)
    reader.unwritten.reshape(-1)[mine] = ~whole[mine]
    if reader.stale is not None:
        reader.stale[0].reshape(-1)[mine] = False
    return True


class SimTensor:
    """A global tensor or a tile in simulation: a numpy array (bfloat16 and float8
    held in float32). A tile (``kind`` "fragment", "shared" or "local") also has ``unwritten``:
    True where no element has been written yet, None once all have been (and always for
    a global tensor). A shared tile of a kernel with warpgroup roles has ``races``, the
    record its accesses are checked against (``sim/races.py``); its ``unwritten`` stays an
    array, so that every access reaches ``wrote``/``check_written``."""

    __slots__ = ("data", "dtype", "name", "kind", "unwritten", "races", "iterations",
                 "safe_value", "gpu_strides", "overlaid", "stale", "blocks", "gpu_address")

    def __init__(self, data: np.ndarray, dtype: DType, name: str, kind: str | None = None,
                 gpu_strides: tuple | None = None):
        self.data, self.dtype, self.name, self.kind = data, dtype, name, kind
        # a tensor simulated on a copy (bfloat16 and float8 in float32, float4 decoded):
        # the strides the GPU reads (``X.strides``), the argument's, not the copy's
        self.gpu_strides = gpu_strides
        # the address the GPU reads a tensor argument at (its alignment counts for the
        # explicit wide accesses, sim/bit_moves.py); None: the data's own
        self.gpu_address = None
        self.unwritten = None if kind is None else np.ones(data.shape, dtype=bool)
        self.races = None
        self.iterations = _iteration_races() if kind in ("shared", None) else None
        # a global tensor's T.annotate_safe_value: what its elements outside it read as
        self.safe_value = None
        # shared tiles over the same bytes in another dtype whose bits the simulator does
        # not share (bfloat16 and float8 are held in float32: ``views.overlay``), and the
        # elements whose bytes one of them wrote last: (mask, that tile)
        self.overlaid = ()
        self.stale = None
        # a global tensor of a launch of several blocks: which block wrote each element
        # (``block_races.py``); its ``unwritten`` is then an array, so every access is seen
        self.blocks = None

    def outside(self):
        """What an element outside this global tensor reads as: its
        ``T.annotate_safe_value``, else 0 (TileLang's safe memory access)."""
        if self.safe_value is None:
            return self.data.dtype.type(0)
        return _to_storage(self.safe_value, self.dtype, self.data.dtype)

    def wrote(self, idx=None):
        """Elements ``idx`` (a tuple of index arrays or ints; None: all) are written."""
        for other in getattr(self, "overlaid", ()):
            other.clobbered(self, idx)
        if getattr(self, "stale", None) is not None:
            self.stale[0][... if idx is None else idx] = False
        blocks = getattr(self, "blocks", None)
        if blocks is not None:
            blocks.write(self, idx)
            if blocks.fresh:
                self.unwritten[... if idx is None else idx] = False
            return
        if self.races is not None:
            self.races.write(idx)
            self.unwritten[... if idx is None else idx] = False
            return
        unwritten = self.unwritten
        if unwritten is None:
            return
        if idx is None:
            unwritten[...] = False     # in place: a view of the tile (T.reshape) shares it
            self.unwritten = None
            return
        unwritten[idx] = False
        if self.kind is not None and not unwritten.any():
            self.unwritten = None       # (a T.empty output keeps its record: it is large)

    def clobbered(self, writer, idx):
        """``writer`` (a tile over the same bytes in another dtype) wrote its elements
        ``idx``: the elements of this tile those bytes hold take the bits written
        (``_reinterpreted``: bfloat16 and the float8s through their bits); an element
        whose bytes are not all written yet reads as unwritten. Where a dtype's bits are
        not known here (float4, e8m0) such an element reads as written in another dtype
        (``check_written``)."""
        flat = np.arange(writer.data.size) if idx is None else np.ravel_multi_index(
            tuple(np.asarray(i).reshape(-1) for i in np.broadcast_arrays(*idx)),
            writer.data.shape)
        a, b = writer.dtype.itemsize, self.dtype.itemsize
        mine = ((flat * a // b)[:, None] + np.arange(max(1, a // b))).reshape(-1)
        if _reinterpreted(self, writer, flat, mine):
            return
        if self.unwritten is None:
            self.unwritten = np.zeros(self.data.shape, dtype=bool)
        self.unwritten.reshape(-1)[mine] = True
        if self.stale is None:
            self.stale = (np.zeros(self.data.shape, dtype=bool), writer)
        self.stale[0].reshape(-1)[mine] = True

    def check_written(self, idx=None, active=None):
        """Reading elements ``idx`` (a tuple of index arrays or ints; None: all) on the
        lanes where ``active`` holds (None: all): ``UninitializedReadError`` naming the
        first element nothing has written and the kernel's line."""
        if STATE.peeking:
            unwritten = self.unwritten
            if unwritten is not None:
                bad = unwritten if idx is None else unwritten[idx]
                STATE.peeked |= bool(np.any(bad if active is None else bad & active))
            return
        if self.races is not None:
            self.races.read(idx, active)
        blocks = getattr(self, "blocks", None)
        if blocks is not None:
            blocks.read(self, idx, active)
            if not blocks.fresh:
                return          # its ``unwritten`` is all False
        unwritten = self.unwritten
        if unwritten is None:
            return
        bad = unwritten if idx is None else unwritten[idx]
        if active is not None:
            bad = bad & active
        if not bad.any():
            return
        stale = getattr(self, "stale", None)
        if garbage.variant() is not None:
            # a rerun with garbage in what nothing wrote (sim/garbage.py): only bytes
            # written in another dtype are still an error here
            if stale is None:
                return
            bad = bad & (stale[0] if idx is None else stale[0][idx])
            if not bad.any():
                return
        if idx is None:
            first = tuple(int(i) for i in np.argwhere(bad)[0])
        elif np.ndim(bad) == 0:
            first = tuple(int(i) for i in idx)
        else:
            pos = tuple(np.argwhere(bad)[0])
            first = tuple(int(np.broadcast_to(i, np.shape(bad))[pos]) for i in idx)
        what = self.name if self.name == f"{self.kind} tile" else \
            f"{self.kind} tile {self.name}" if self.kind is not None else \
            f"output {self.name}, allocated uninitialized (T.empty, out_idx: torch.empty)"
        if stale is not None and stale[0][first]:
            raise UninitializedReadError(
                f"{self.name}[{', '.join(map(str, first))}] ({self.dtype.name}) is read after "
                f"its bytes were written as {stale[1].dtype.name} through a view of the same "
                f"shared memory: the simulator holds {self.dtype.name} and "
                f"{stale[1].dtype.name} apart and does not reinterpret one's bits as the "
                f"other's (not supported in simulation; a view reused as scratch, written "
                f"before it is read, runs){_caller_location(2)}")
        element, shape, whose = self._element(first)
        err = UninitializedReadError(
            f"{element} is read before it is written "
            f"({whose}{what}, shape {shape}; on the GPU an element nothing wrote "
            f"holds garbage){_caller_location(2)}")
        err.garbage_may_pass = True     # unless its value matters (sim/garbage.py)
        raise err

    @property
    def shape(self):
        return self.data.shape

    @property
    def strides(self):
        if self.gpu_strides is not None:
            return self.gpu_strides
        return tuple(s // self.data.itemsize for s in self.data.strides)

    @property
    def ndim(self):
        return self.data.ndim

    def _indices(self, index):
        idx = index if isinstance(index, tuple) else (index,)
        if len(idx) != self.data.ndim:
            raise IndexError(f"{self.name}: a {self.data.ndim}-d tensor indexed with "
                             f"{len(idx)} index(es){_caller_location(3)}")
        return idx

    def _check(self, idx, active):
        if STATE.range_loop and self.kind in ("fragment", "local"):
            from tilejit.sim.threads import ThreadCodeError  # threads.py imports this module
            raise ThreadCodeError(
                f"T.Parallel inside a branch that depends on the thread index reaches the "
                f"{self.kind} {self.name}: a range of threads does a T.Parallel on shared "
                f"tiles and tensors by itself, not on a {self.kind}, which the whole block "
                f"holds{_caller_location(3)}")
        if all(_within(i, n) for i, n in zip(idx, self.data.shape)):
            return          # (every index inside, whichever lanes are active)
        shape = np.broadcast_shapes(*(np.shape(i) for i in idx),
                                    np.shape(active) if active is not None else ())
        bad = np.zeros(shape, dtype=bool)
        for i, n in zip(idx, self.data.shape):
            bad |= (np.asarray(i) < 0) | (np.asarray(i) >= n)
        if active is not None:
            bad &= active
        if bad.any():
            pos = tuple(np.argwhere(bad)[0]) if bad.ndim else ()
            first = tuple(int(np.broadcast_to(i, shape)[pos]) for i in idx)
            raise IndexError(self._out_of_bounds(first) + _caller_location(3))

    def _out_of_bounds(self, first) -> str:
        element, shape, whose = self._element(first)
        return f"{element} is out of bounds for shape {shape}" + (
            f" ({whose}T.alloc_local tile; on the GPU an access outside a local array is "
            f"undefined)" if whose else "")

    def _element(self, first) -> tuple:
        """How a message names element ``first`` of ``data``: ``name[i, j]``, the shape,
        and whose copy it is ("" here: one copy)."""
        return f"{self.name}[{', '.join(map(str, first))}]", tuple(self.data.shape), ""

    def _mask(self, idx, write=False):
        """The lanes that access the tensor: the T.Parallel mask, and with TileLang's
        safe memory access (``CompileOptions.safe_memory``) only the elements inside a
        global tensor (``passes/safe_memory.py``): the others read 0 (or the tensor's
        ``T.annotate_safe_value``, also without safe memory access) and write nothing."""
        mask = STATE.mask
        if self.kind is not None or not (STATE.safe_memory or (
                self.safe_value is not None and not write)):
            return mask
        if all(_within(i, n) for i, n in zip(idx, self.data.shape)):
            return mask         # (every index inside: the lanes as they are)
        inside = True
        for i, n in zip(idx, self.data.shape):
            inside = inside & (np.asarray(i) >= 0) & (np.asarray(i) < n)
        return inside if mask is None else mask & inside

    def __getitem__(self, index):
        idx = self._indices(index)
        mask = self._mask(idx)
        if all(np.ndim(i) == 0 for i in idx) and (mask is None or np.ndim(mask) == 0):
            if mask is not None and not bool(mask):
                return self.outside() if self.kind is None else self.data.dtype.type(0)
            self._check(idx, None)
            key = tuple(int(i) for i in idx)
            if self.iterations is not None and STATE.parallel is not None:
                self.iterations.access(self, key, None, write=False)
            if self.unwritten is not None:
                self.check_written(key)
            return self.data[key]
        # the index arrays and the mask as they come (a T.Parallel's open-mesh indices,
        # or an expression of some of them): numpy broadcasts them where they meet
        active = mask
        self._check(idx, active)
        if self.iterations is not None and STATE.parallel is not None:
            self.iterations.access(self, idx, active, write=False)
        if active is None:
            if self.unwritten is not None:
                self.check_written(idx)
            return self.data[idx]
        safe = tuple(np.where(active, i, 0) for i in idx)
        if self.unwritten is not None:
            self.check_written(safe, active)
        return np.where(active, self.data[safe],
                        self.outside() if self.kind is None else self.data.dtype.type(0))

    def __setitem__(self, index, value):
        idx = self._indices(index)
        mask = self._mask(idx, write=True)
        if self.dtype.is_int:
            _check_float_to_int_store(self, value)
        value = _to_storage(value, self.dtype, self.data.dtype)
        if all(np.ndim(i) == 0 for i in idx) and np.ndim(value) == 0 and (
                mask is None or np.ndim(mask) == 0):
            if mask is not None and not bool(mask):
                return
            self._check(idx, None)
            key = tuple(int(i) for i in idx)
            if self.iterations is not None and STATE.parallel is not None:
                self.iterations.access(self, key, None, write=True, values=value)
            self.data[key] = value
            if self.unwritten is not None or self.overlaid:
                self.wrote(key)         # (overlays: their bytes change even once all written)
            return
        arrays = np.broadcast_arrays(*idx, value, *(() if mask is None else (mask,)))
        idx_b, value_b = arrays[:len(idx)], arrays[len(idx)]
        active = None if mask is None else arrays[-1]
        self._check(idx, active)
        if self.iterations is not None and STATE.parallel is not None:
            # the indices as they come: their shapes tell the race check whether two
            # iterations can meet at one element (races.one_to_one)
            self.iterations.access(self, tuple(idx), active, write=True, values=value)
        if active is None:
            key = tuple(idx_b)
            self.data[key] = value_b
        else:
            key = tuple(i[active] for i in idx_b)
            self.data[key] = value_b[active]
        if self.unwritten is not None or self.overlaid:
            self.wrote(key)


# what an element store's error calls the tensor or tile (the compiler's words too)
_STORE_WHAT = {None: "tensor", "shared": "shared tile", "fragment": "fragment",
               "local": "local tile"}


def float_to_int_message(target: str | None, what: str, dtype: str, value_dtype: str) -> str:
    """Word for word ``codegen/typing/templates.float_to_int_message`` (the simulator does
    not import the compiler)."""
    article = "an" if dtype[0] in "aeio" else "a"      # a uint8
    into = f"{target!r}, {article} {dtype} {what}" if target else f"{article} {dtype} {what}"
    return (f"cannot store a {value_dtype} value into {into}: a float is not converted to an "
            f"integer implicitly; write T.cast(value, \"{dtype}\") to convert it (toward zero)")


def _check_float_to_int_store(tensor: SimTensor, value) -> None:
    """A typed float stored into an integer element: the compiler's ``CompileError``
    (``codegen/typing/templates.check_float_to_int_store``), which a simulated kernel
    meets first in typing; this is what catches it in a kernel the simulator runs untyped
    (mbarriers, T.tma_copy, T.ws). A typed float here is a float16 or float32 numpy value
    (bfloat16 and float8 are held in float32); a Python float is weak and converts, and so
    does a float64 array, which in simulation is also what lanes of weak floats under a
    mask become (``blend``, ``ifexp``), which the compiler accepts."""
    dtype = getattr(value, "dtype", None)
    if not isinstance(value, (np.ndarray, np.generic)) or dtype.kind != "f" or \
            dtype.itemsize >= 8:
        return
    frame = kernel_frame(2)
    name = None if tensor.name == f"{tensor.kind} tile" else tensor.name
    raise CompileError(
        float_to_int_message(name, _STORE_WHAT.get(tensor.kind, "tensor"), tensor.dtype.name,
                             dtype.name),
        frame.f_code.co_filename if frame is not None else None,
        frame.f_lineno if frame is not None else None)


def _to_storage(value, dtype: DType, storage: np.dtype):
    if dtype.held_in_float32:       # bfloat16, float8: rounded to the type
        return numerics.cast(np.asarray(value, dtype=np.float32), dtype)
    if dtype.is_packed_int:         # its low four bits, as the GPU stores its half byte
        return numerics.cast(np.asarray(value), dtype)
    if dtype.is_int and np.asarray(value).dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            return np.trunc(value).astype(storage)
    return np.asarray(value).astype(storage, copy=False)
