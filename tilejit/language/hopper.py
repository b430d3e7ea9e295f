"""Hopper's explicit forms, as TileLang spells them: persistent tile loops
(``T.Persistent``, ``T.PersistentTileScheduler``), mbarriers (``T.alloc_barrier``,
``T.mbarrier_wait_parity``, ``T.mbarrier_arrive``), ``T.tma_copy`` and warpgroup roles
(``with T.ws(k):``).

Declarations. The front end rewrites the persistent forms into plain loops
(``frontend/persistent.py``), which compile for the GPU and the simulator alike; the
decode of a linear tile index into domain coordinates lives here (``persistent_coord``,
``scheduler_coord``) as the definition the rewrite follows. The mbarrier, TMA and role
forms take their meaning from the simulator (``sim/roles.py``); the GPU does not lower
them yet (``frontend/explicit_sync.py`` refuses them with the line).
"""
from __future__ import annotations

import inspect

from tilejit.language._semantics import meaning

WARPGROUP_THREADS = 128        # one T.ws role: warps 4k … 4k+3
MAX_ARRIVALS = (1 << 20) - 1    # PTX: an mbarrier's expected count is at most 2^20 - 1


# -- persistent tile loops -----------------------------------------------------------

def persistent_coord(tile: int, domain, group_size: int = 8) -> tuple:
    """The domain coordinates of linear tile ``tile`` under ``T.Persistent``'s order.

    One extent: the tile itself. Two extents (D0, D1): the tiles are taken panel by
    panel, a panel being ``group_size`` consecutive values of the first coordinate (the
    last panel may be narrower); inside a panel the first coordinate runs fastest, so
    the blocks of one wave work on a few rows of the first coordinate and few columns
    of the second (for a GEMM: a few A row-blocks and B column-blocks, which stay in L2)::

        panel = tile // (group_size * D1)        first = panel * group_size
        rows  = min(group_size, D0 - first)      r     = tile - panel * group_size * D1
        (first + r % rows, r // rows)

    A bijection of [0, D0·D1) onto the domain: panel p holds rows·D1 tiles and r covers
    them once.
    """
    if len(domain) == 1:
        return (tile,)
    d0, d1 = domain[0], 1
    for d in domain[1:]:
        d1 *= d
    panel = tile // (group_size * d1)
    first = panel * group_size
    rows = min(group_size, d0 - first)
    r = tile - panel * group_size * d1
    rest = r // rows
    coords = [first + r % rows]
    for k in range(1, len(domain)):        # more than two extents: the rest row-major
        inner = 1
        for d in domain[k + 1:]:
            inner *= d
        coords.append(rest // inner % domain[k] if k > 1 else rest // inner)
    return tuple(coords)


def Persistent(domain, wave_size, index, group_size=8):  # noqa: N802 - TileLang's name
    """``for bx, by in T.Persistent([mb, nb], wave_size, index, group_size=8):`` the
    tiles of a domain, taken by ``wave_size`` resident blocks: block ``index`` (in
    ``[0, wave_size)``) gets linear tiles ``index``, ``index + wave_size``, … below
    ``mb·nb``, each decoded by ``persistent_coord`` (panels of ``group_size`` rows of
    the first coordinate, for L2 locality). Each tile is visited by exactly one block;
    a block runs ``ceildiv(mb·nb, wave_size)`` waves, the last guarded.

    In a kernel the front end rewrites the loop (``frontend/persistent.py``); run as
    Python it yields block ``index``'s tiles."""
    domain = _domain(domain)
    total = 1
    for d in domain:
        total *= d
    wave_size, index, group_size = int(wave_size), int(index), int(group_size)
    if wave_size < 1 or group_size < 1:
        raise ValueError(f"T.Persistent: wave_size and group_size must be positive, got "
                         f"{wave_size} and {group_size}")
    for tile in range(index, total, wave_size):
        coord = persistent_coord(tile, domain, group_size)
        yield coord[0] if len(domain) == 1 else coord


def _domain(domain):
    domain = tuple(int(d) for d in (domain if isinstance(domain, (tuple, list))
                                    else (domain,)))
    if not domain:
        raise ValueError("T.Persistent: the domain needs at least one extent")
    return domain


def scheduler_coord(tile: int, primary: int, secondary: int, swizzle: int,
                    column_major: bool) -> tuple:
    """(m, n) of linear tile ``tile`` for ``T.PersistentTileScheduler``: panels of
    ``swizzle`` values of the secondary axis (N when ``column_major``), the primary axis
    swept in full inside a panel, one panel after another (the last may be narrower)::

        group = tile // (primary * swizzle)      base = group * swizzle
        width = max(1, min(swizzle, secondary - base))
        in_group = tile - group * primary * swizzle
        fast = in_group // width                 slow = base + in_group % width

    (m, n) = (fast, slow) when ``column_major`` (M fastest), else (slow, fast)."""
    group = tile // (primary * swizzle)
    base = group * swizzle
    width = max(1, min(swizzle, secondary - base))
    in_group = tile - group * primary * swizzle
    fast, slow = in_group // width, base + in_group % width
    return (fast, slow) if column_major else (slow, fast)


def scheduler_signature(num_m_tiles, num_n_tiles, num_workers=None, swizzle_size=1,
                        column_major=True, cluster_size=1, stateful=True, name=None):
    """``T.PersistentTileScheduler``'s parameters, as TileLang has them now (its earlier
    form put a name prefix first; that string is dropped before binding)."""


class PersistentTileScheduler:
    """TileLang's persistent tile scheduler over an ``num_m_tiles × num_n_tiles`` grid:

        sched = T.PersistentTileScheduler(m_blocks, n_blocks, swizzle_size=8)
        sched.init(block_id)
        while sched.valid():
            bx, by = sched.m_idx, sched.n_idx
            ...
            sched.next_tile()

    (TileLang's earlier form, ``("sched", m_blocks, …)`` with ``sched.m_idx[0]``, is
    accepted alike.)

    Worker ``w`` takes linear tiles ``w, w + num_workers, …``, decoded by
    ``scheduler_coord``; ``sched.coord(t)`` is that decode, ``sched.current_iter[0]``
    the number of tiles this worker has passed, ``sched.linear_idx[0]`` its linear tile.
    ``num_workers`` defaults to the blocks the kernel launches along x (one per SM when
    the grid is ``driver.get_num_sms()``) divided by ``cluster_size``; ``cluster_size``
    groups M into clusters of rows, ``m_idx`` being the cluster row (add the block's
    rank in its cluster). In a kernel the front end rewrites the object into scalar
    variables (``frontend/persistent.py``); run as Python it is this class."""

    def __init__(self, *args, **kwargs):
        # TileLang's earlier form put a name prefix first
        self._legacy = bool(args) and isinstance(args[0], str)
        if self._legacy:
            kwargs.setdefault("name", args[0])
            args = args[1:]
        p = inspect.signature(scheduler_signature).bind(*args, **kwargs)
        p.apply_defaults()
        (num_m_tiles, num_n_tiles, num_workers, swizzle_size, column_major, cluster_size,
         name) = (p.arguments[k] for k in ("num_m_tiles", "num_n_tiles", "num_workers",
                                           "swizzle_size", "column_major", "cluster_size",
                                           "name"))
        if num_workers is None:
            raise ValueError("T.PersistentTileScheduler: outside a kernel num_workers must be "
                             "given (in a kernel it defaults to the grid's x extent)")
        self.name = name
        m_tiles = -(-int(num_m_tiles) // int(cluster_size))
        self.primary, self.secondary = ((m_tiles, int(num_n_tiles)) if column_major
                                        else (int(num_n_tiles), m_tiles))
        self.total = m_tiles * int(num_n_tiles)
        self.num_workers = int(num_workers)
        self.swizzle_size = int(swizzle_size)
        self.column_major = bool(column_major)
        self._m, self._n, self._linear, self._iter = [0], [0], [0], [0]

    # the state: TileLang's properties (sched.m_idx), or in the earlier form one-element
    # arrays (sched.m_idx[0])
    m_idx = property(lambda self: self._m if self._legacy else self._m[0])
    n_idx = property(lambda self: self._n if self._legacy else self._n[0])
    linear_idx = property(lambda self: self._linear if self._legacy else self._linear[0])
    current_iter = property(lambda self: self._iter if self._legacy else self._iter[0])

    def coord(self, tile_id):
        return scheduler_coord(tile_id, self.primary, self.secondary, self.swizzle_size,
                               self.column_major)

    def init(self, worker_id):
        self._iter[0] = 0
        self._linear[0] = worker_id
        self._m[0], self._n[0] = self.coord(worker_id)

    def next_tile(self, step=None):
        self._iter[0] += 1
        self._linear[0] += self.num_workers if step is None else int(step)
        self._m[0], self._n[0] = self.coord(self._linear[0])

    def valid(self):
        return self._linear[0] < self.total


# -- mbarriers, TMA, warpgroup roles --------------------------------------------------

def alloc_barrier(arrive_count):
    """Shared-memory mbarriers: ``T.alloc_barrier(128)`` one, ``T.alloc_barrier([128] *
    4)`` one per entry (index it: ``mbars[i]``). A barrier's phase completes when its
    count of threads have arrived (``T.mbarrier_arrive``) and the bytes of the
    ``T.tma_copy`` loads issued on it have landed; then the next phase starts."""
    return meaning("alloc_barrier")(arrive_count)


def mbarrier_wait_parity(mbarrier, parity):
    """Wait until the phase of ``mbarrier`` with parity ``parity`` (0 or 1) has
    completed: with the barrier in phase p (p phases completed), waiting on parity
    ``(p - 1) & 1`` returns at once, on ``p & 1`` blocks until phase p completes."""
    return meaning("mbarrier_wait_parity")(mbarrier, parity)


def mbarrier_arrive(mbarrier, cta_id=None):
    """Each thread that runs it arrives on ``mbarrier`` (``cta_id``, a peer CTA of a
    cluster, is not supported)."""
    return meaning("mbarrier_arrive")(mbarrier, cta_id)


# TileLang's sugar for the two (its ``T.barrier_wait`` / ``T.barrier_arrive``)
barrier_wait = mbarrier_wait_parity
barrier_arrive = mbarrier_arrive


def tma_copy(src, dst, *, barrier=None, eviction_policy=None, annotations=None):
    """A TMA copy with user-managed synchronization. A load (global → shared) issues the
    copy with its bytes expected on ``barrier`` (required) and does not wait: wait for
    the barrier's phase with ``T.mbarrier_wait_parity`` before reading ``dst``. Elements
    outside the tensor land as 0. A store (a shared tile → a tensor region, no
    ``barrier``) is ``T.copy(src, dst)`` (``frontend/tma_store_forms.py``): a TMA store
    where it qualifies, its completion waited for by the compiler."""
    return meaning("tma_copy")(src, dst, barrier)


def tma_store_arrive():
    """TileLang's commit of the TMA stores issued (``T.tma_copy`` of a shared tile to a
    tensor): the compiler commits and waits for its stores itself; a statement with
    nothing left to do (taken out when the kernel is parsed)."""
    return None


def tma_store_wait(count=0, read=True):
    """TileLang's wait until at most ``count`` groups of the TMA stores issued are in
    flight (``read``: until they have read their shared tiles): the compiler waits where
    a stored tile is written again and before the kernel ends, which covers every count;
    a statement with nothing left to do (taken out when the kernel is parsed)."""
    return None


def fence_proxy_async():
    """``fence.proxy.async.shared::cta``: this thread's writes to shared memory through
    ordinary stores are ordered before the async proxy's reads of it (a wgmma or TMA
    store issued after an arrival another role waits on). The compiler puts the fence
    where it sees the dependence itself; one written by the kernel is kept (the
    simulator, with no proxies, does nothing)."""
    return meaning("fence_proxy_async")()


def pdl_trigger():
    """TileLang's programmatic dependent launch, this block's side: the next kernel of
    the stream may start (``griddepcontrol.launch_dependents``, sm_90+). tilejit
    launches without the launch attribute that lets it start early, so the next kernel
    still starts after this one ends: the statement changes no result (and is nothing
    on sm_80, on AMDGPU and in the simulator)."""
    return meaning("pdl_trigger")()


def pdl_sync():
    """TileLang's programmatic dependent launch, the dependent kernel's side: wait until
    the kernels this one depends on have completed and their writes are visible
    (``griddepcontrol.wait``, sm_90+). Without the early-launch attribute (tilejit's
    launches) they have completed when this kernel starts: nothing to wait for (and
    nothing on sm_80, on AMDGPU and in the simulator)."""
    return meaning("pdl_sync")()


def ws(*warp_group_idx, role_threads=WARPGROUP_THREADS):
    """``with T.ws(k):`` the block runs only in warpgroup role k, the threads ``128k …
    128k+127`` (warps 4k … 4k+3); one index (a role of two warpgroups, TileLang's
    ``T.ws(j, k)``, is a ``CompileError`` naming it: write a role per warpgroup). Roles
    run concurrently and synchronize through mbarriers. Only meaningful as a ``with``
    statement of a kernel body. ``role_threads`` (tilejit's, 32 or 64; the front end's
    roles of branches on the thread index narrower than a warpgroup,
    ``frontend/thread_roles.py``): role k is the threads ``role_threads · k …``."""
    return meaning("ws")(*warp_group_idx)


WarpSpecialize = ws
