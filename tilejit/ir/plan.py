"""The tile plan of one kernel specialization: every tile the kernel allocates, with
the layout the passes chose for it and (for shared tiles) its place in the one dynamic
shared-memory buffer, and every ``T.gemm`` with its warp partition.

The source passes build it (``passes/tile_allocation.py``, ``layout_inference.py``,
``shared_memory.py``); the typing and lowering rules read it through
``current_kernel().tiles``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from tilejit.language.dtypes import DType, float32, float64, int32, int64

SHARED, FRAGMENT, LOCAL = "shared", "fragment", "local"
# a small fragment used element by element outside T.Parallel loops is held whole by
# every thread (passes/whole_fragments.py; the simulator's per-thread code alike)
SCALAR_FRAGMENT_MAX = 16
# 32-bit registers per thread (of 255) the tiles may take before a kernel counts as
# register-starved (lowering/tiles.thread_index, passes/tma.py)
STARVED = 192


def compute_dtype(dtype: DType) -> DType:
    """The type reductions and scans combine values in: float32 for 16- and 32-bit
    floats, float64, int64 for 64-bit integers, int32 for the other integers."""
    if dtype.name == "float64":
        return float64
    if dtype.is_float or dtype.name == "bfloat16":
        return float32
    return int64 if dtype.name in ("int64", "uint64") else int32


@dataclass
class Tile:
    name: str
    kind: str                    # SHARED | FRAGMENT | LOCAL
    shape: tuple[int, ...]
    dtype: DType
    line: int
    layout: object = None        # shared: Layout | ComposedLayout; fragment: Fragment
    layout_line: int | None = None   # the use that fixed the layout (for errors)
    layout_reason: str = ""
    offset: int = 0              # shared: byte offset in the dynamic buffer
    stages: int = 1              # shared: versions kept by a software pipeline
    indexing: object = None      # fragment: FragmentIndexing of its layout
    align: int = 16              # shared: byte alignment of its offset (TMA boxes: 1024)
    user_staged: bool = False    # shared: stacked by the kernel (passes/staged_tiles.py)
    # shared: an int4 region's bytes, two elements a byte (passes/packed_staging.py): a
    # T.copy into it moves bytes, its last extent half the region's
    holds_packed: bool = False
    # ``T.reshape`` / ``T.view`` of a tile: the tile whose storage it names (never a view
    # itself: a view of a view names the first tile), else None
    view_of: str | None = None

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes of one version (stage): its elements, or the storage its layout spans
        where that is more (an injective T.Layout that grows the tile)."""
        elements = self.size
        if self.kind == SHARED:
            # only a kernel's own function layout may span more (ir/function_layout.py)
            elements = max(elements, getattr(self.layout, "storage_elements", elements))
        return elements * self.dtype.itemsize

    @property
    def stage_bytes(self) -> int:
        """Distance between two stages: one version rounded up to 128 bytes."""
        return -(-self.nbytes // 128) * 128

    @property
    def total_bytes(self) -> int:
        return self.stage_bytes * self.stages if self.stages > 1 else self.nbytes


@dataclass
class TilePlan:
    tiles: dict[str, Tile] = field(default_factory=dict)
    gemms: dict[str, object] = field(default_factory=dict)      # id -> GemmPlan
    loops: dict[str, object] = field(default_factory=dict)      # id -> (layout, indexing)
    reductions: list = field(default_factory=list)   # (src, dst, dim, line) of T.reduce_*
    slot_maps: dict = field(default_factory=dict)    # (loop id, fragment) -> slot Expr
    scratch: dict = field(default_factory=dict)      # reduction id -> shared scratch tile
    scans: list = field(default_factory=list)        # (src, dst, line) of T.cumsum / T.cummax
    scan_scratch: dict = field(default_factory=dict)  # scan id -> shared scratch tile
    shared_bytes: int = 0
    threads: int = 128
    mbarriers: int = 0               # 8-byte mbarriers of TMA pipelines (passes/tma.py)
    mbarrier_offset: int = 0         # their byte offset in the shared buffer
    tma_copies: dict = field(default_factory=dict)   # id -> TmaCopy (passes/tma.py)
    tensor_maps: list = field(default_factory=list)  # (param name, Box) per hidden map param
    proxy_fence: bool = False        # block barriers also fence the async proxy (async_proxy.py)
    grid_sync: bool = False          # T.sync_grid: a cooperative launch (passes/grid_sync.py)
    # the kernel's own block barriers (T.sync_threads, named and predicate ones: barriers.py):
    # its threads may exchange data through its tensors, which are then not noalias
    user_barriers: bool = False
    # an atomic load or store of a tensor (T.atomic_load / T.atomic_store, however the
    # kernel spells or aliases them): its tensors are not noalias (compiler/pipeline.py)
    atomic_access: bool = False
    # the lines of the inlined helpers' calls whose statements the device program kept
    # (kernel_macros.inline_call marks them; a typing error inside one names them)
    live_calls: frozenset | None = None
    tma_stored: set = field(default_factory=set)     # tiles stored by TMA (tma_store.py)
    # fragment -> (layout, line, why) of a T.Fragment in T.annotate_layout (user_fragments.py)
    user_fragments: dict = field(default_factory=dict)
    # fragments every thread holds whole because of how they are used (serial code only,
    # passes/whole_fragments.py), not because their extents do not split
    whole_by_use: frozenset = frozenset()
    # wgmma gemms whose wait comes later, at a __tj_wgmma_wait (passes/wgmma_waits.py), and,
    # while the kernel is lowered, each one's accumulator registers until that wait
    deferred_waits: set = field(default_factory=set)
    wgmma_pending: dict = field(default_factory=dict, compare=False, repr=False)
    # warp specialization (passes/warp_specialize.py): consumer threads (0: none), the
    # thread that issues TMA copies, the threads launched per block (0: the kernel's)
    ws_consumers: int = 0
    # row sums (reduction ids) after whose per-thread partials, before their shuffles, a
    # consumer warpgroup hands the turn at the exponentials over (passes/softmax_turns.py)
    turn_handovers: set = field(default_factory=set)
    # the kernel sets its warpgroups' registers itself (T.set_max_nreg): launched one block
    # per SM as a warp-specialized one is, so that setmaxnreg takes effect
    user_setmaxnreg: bool = False
    tma_issuer: int = 0
    launch_threads: int = 0
    # a kernel's own ``T.ws`` roles (passes/warp_roles.py): the threads of one role, which
    # the tiles are planned over (0: no roles)
    role_threads: int = 0
    # thread block clusters (passes/clusters.py): T.ClusterKernel's dims, and whether the
    # warp-specialized pipeline multicasts its loads (its stages released to every block
    # of the cluster, the kernel's start and end cluster barriers)
    cluster: tuple = (1, 1, 1)
    multicast: bool = False

    @property
    def cluster_blocks(self) -> int:
        return self.cluster[0] * self.cluster[1] * self.cluster[2]

    @property
    def block_threads(self) -> int:
        """The threads launched per block (a warp-specialized kernel's producer too)."""
        return self.launch_threads or self.threads

    def tile(self, name: str) -> Tile:
        return self.tiles[name]

    def storage_of(self, name: str) -> str:
        """The tile whose storage ``name`` uses: itself, or the tile it is a view of."""
        return self.tiles[name].view_of or name

    def aliases(self, name: str) -> set[str]:
        """Every tile naming the storage ``name`` uses (it, its base, the base's views)."""
        root = self.storage_of(name)
        return {n for n, t in self.tiles.items() if n == root or t.view_of == root}

    def viewed(self, name: str) -> bool:
        """Whether ``name`` is a view of a tile or has views."""
        return len(self.aliases(name)) > 1

    def register_shares(self) -> list:
        """(32-bit registers per thread, tile) of each fragment and local tile."""
        shares = []
        for t in self.tiles.values():
            if t.view_of:
                continue                 # a view's registers are its base's
            if t.kind == FRAGMENT and t.indexing is not None:
                shares.append((-(-t.indexing.slots * t.dtype.itemsize // 4), t))
            elif t.kind == LOCAL:
                shares.append((-(-t.nbytes // 4), t))
        return shares

    def register_words(self) -> int:
        """32-bit registers per thread that the fragments and local tiles take."""
        return sum(n for n, _ in self.register_shares())

    def describe(self) -> str:
        """A readable summary (``TILEJIT_DUMP_IR`` writes it)."""
        lines = [f"threads: {self.threads}", f"dynamic shared memory: {self.shared_bytes} bytes"]
        for t in self.tiles.values():
            where = f" @ byte {t.offset}" if t.kind == SHARED else ""
            if t.view_of:
                where += f" (a view of {t.view_of})"
            if t.stages > 1:
                where += f" x {t.stages} stages"
            lines.append(f"{t.kind} {t.name}{list(t.shape)} {t.dtype.name}{where} "
                         f"(line {t.line}): {t.layout}"
                         + (f"  [{t.layout_reason}]" if t.layout_reason else ""))
        if self.mbarriers:
            lines.append(f"{self.mbarriers} mbarriers @ byte {self.mbarrier_offset}")
        for cid, c in self.tma_copies.items():
            lines.append(f"TMA copy {cid}: {c}")
        for gid, (g, a, b, c, line) in self.gemms.items():
            lines.append(f"gemm {gid} (line {line}): {a} x {b} -> {c}: {g}")
        for lid, (frag, _) in self.loops.items():
            lines.append(f"fragment loop {lid}: {frag.name}")
        return "\n".join(lines) + "\n"
