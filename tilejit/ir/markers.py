"""Every name the front end or a pass inserts into the device program, declared once.

A marker is declared by one line here, ``TILE = _declare("__tj_tile", "tile", doc)``:
``TILE`` is the name (a plain ``str``: a pass builds ``ast.Name(TILE, ast.Load())`` and
tests ``node.func.id == TILE``), and ``stub(TILE)`` the function it stands for, whose
``__name__`` is the second argument (it shows in Numba's typed IR; Numba also wants it
reachable as ``markers.tile``, so ``_declare`` binds it there). Numba types the stub
(``codegen/typing``) and lowers it (``codegen/lowering``); called in Python, it raises.
``compiler/pipeline.py`` binds ``NAMESPACE`` (name → stub, every marker but ``CAST``)
into the device program's globals before the passes run.

To add one:

1. declare it here: ``FOO = _declare("__tj_foo", "foo", "(args) -> what it does")``;
2. insert it in the pass: ``ast.Call(ast.Name(FOO, ast.Load()), args, [])``;
3. type it, ``@infer_global(markers.stub(markers.FOO))`` in ``codegen/typing/``, and
   lower it, ``@lower(markers.stub(markers.FOO), ...)`` in ``codegen/lowering/``.

Nothing else names it; a pass that needs another pass's marker imports it from here.

The names are plain ``str`` on purpose: ``compile()`` rejects any other type as an AST
identifier, and a dict with a key of a ``str`` subclass (a simulator namespace) loses
CPython's fast path for global lookups.

Generated variables (``__tj_n1``, ``__tj_s0``, ``__tj_ph0``, ``__tj_map_A_0``) are not
markers: the pass that makes them keeps their prefix and numbers them per compilation
(its own count, or ``PassContext.number``), never with a process-wide counter, so a
kernel compiles to the same program whatever the process compiled before.
"""
from __future__ import annotations

from tilejit import language as T

NAMESPACE: dict[str, object] = {}      # name -> stub: what the pipeline binds


def stub(name: str):
    """The function a marker stands for (what Numba types and lowers)."""
    return NAMESPACE[name]


def _device_only(name, doc):
    def stub(*args):
        raise RuntimeError(f"{name} is only meaningful inside a compiled kernel")
    stub.__name__ = stub.__qualname__ = name
    stub.__doc__ = doc
    return stub


def _declare(name: str, stub_name: str, doc: str) -> str:
    # Numba's typing registry wants the stub reachable as ``markers.<stub_name>``
    globals()[stub_name] = NAMESPACE[name] = _device_only(stub_name, doc)
    return name


# -- the front end (frontend/rewrite.py) ----------------------------------------------
BLOCK_INDEX = _declare("__tj_block_index", "block_index",
                       "The block's index along grid axis 0, 1 or 2 (``blockIdx.x/y/z``).")
THREAD_INDEX = _declare("__tj_thread_index", "thread_index",
                        "() -> this thread's index in the block (``threadIdx.x`` of the flat "
                        "block): T.get_thread_binding and T.thread_binding "
                        "(frontend/thread_bindings.py).")
WARP_SIZE = _declare("__tj_warp_size", "warp_size",
                     "() -> the target's warp size (32; 64 on AMDGPU; the simulator's 32): "
                     "T.get_lane_idx and the warp indices (frontend/thread_bindings.py).")
GRID_DIM = _declare("__tj_grid_dim", "grid_dim",
                    "The grid's extent along axis 0, 1 or 2 (``gridDim.x/y/z``): the "
                    "workers of T.PersistentTileScheduler (frontend/persistent.py).")
DP4A_OPERANDS = _declare("__tj_dp4a_operands", "dp4a_operands",
                         "(a, b, c): T.dp4a's operands checked: int8 A and B, an int32 "
                         "accumulator (frontend/rewrite._dp4a_loop)")
DP4A_MESSAGE = ("T.dp4a requires int8 A and B and an int32 accumulator C (dp4a: four "
                "int8 products summed into int32), got {} and {} into {}")
# T.Cast(dtype, value) and T.alloc_var → __tj_cast(value, dtype): T.cast itself, which
# ``frontend.rewrite.materialize`` binds after the passes (the simulator's program too)
CAST = "__tj_cast"
# tilejit.language under a name of its own, for tile operations the front end writes
# (frontend/reducers.py): bound like CAST, and in the passes' namespace
LANGUAGE = "__tj_language"

# -- TensorCoreIntrinEmitter's methods (frontend/mma_emitter_calls.py) ---------------
# the simulator binds its own meanings (sim/mma.py)
LDMATRIX = _declare("__tj_ldmatrix", "ldmatrix",
                    "(local, offset, shared, row, col, count, trans): ldmatrix.x<count> of "
                    "the warp, this lane's row address shared[row, col], its registers into "
                    "local[offset ...]")
MMA_SYNC = _declare("__tj_mma_sync", "mma_sync",
                    "(C local, offset, A local, offset, B local, offset): one mma.sync "
                    "m16n8k16 (k32 for int8) of the warp on registers held in local arrays")
# a statement attribute: consecutive statements with the same value store disjoint
# elements of the same tiles, each element by one thread (TensorCoreIntrinEmitter's
# stmatrix), so passes/barriers.py puts no barrier between them
DISJOINT_STORES_ATTR = "_tj_disjoint_stores"

# -- tiles (passes/tile_allocation.py) ------------------------------------------------
TILE = _declare("__tj_tile", "tile", 'tile("X"): the tile the plan calls X')
REGION = _declare("__tj_region", "region", "region(tensor, kinds, starts, ends)")
GEMM = _declare("__tj_gemm", "gemm", 'gemm(A, B, C, "g0")')
REDUCE = _declare("__tj_reduce", "reduce", "reduce(src, dst, op, dim, clear)")
CUMSUM = _declare("__tj_cumsum", "cumsum",
                  'cumsum(src, dst, dim, reverse, scan id, "sum" | "max"): T.cumsum, T.cummax')
# element atomics: T.atomic_add(C[i, j], v, mo, rp)
#   → __tj_atomic_add(C, (i, j), v, rp, per_lane, mo)   (mo: None or a memory order string)
ATOMIC_ADD = _declare("__tj_atomic_add", "atomic_add",
                      "(tensor, index, value, return_prev, per_lane, memory_order): an "
                      "element atomic")
ATOMIC_MAX = _declare("__tj_atomic_max", "atomic_max", "as atomic_add, the maximum")
ATOMIC_MIN = _declare("__tj_atomic_min", "atomic_min", "as atomic_add, the minimum")
ATOMIC_OR = _declare("__tj_atomic_or", "atomic_or", "as atomic_add, the bitwise or")
# T.atomic_load(F[i], mo) → __tj_atomic_load(F, (i,), 0, True, True, mo) (every thread
# reads); T.atomic_store(F[i], v, mo) → __tj_atomic_store(F, (i,), v, False, per_lane, mo)
ATOMIC_LOAD = _declare("__tj_atomic_load", "atomic_load", "as atomic_add: the element read")
ATOMIC_STORE = _declare("__tj_atomic_store", "atomic_store",
                        "as atomic_add: the element written")
# T.ldg128(X[i:i + 4], pred) → __tj_bits_load(X, (i,), 4, pred, "global"): the words at
# the element's address (a uint32 for one, else a tuple); T.stg128(Y[j:j + 4], v, pred) →
# __tj_bits_store(Y, (j,), v, 4, pred, "global"); T.reinterpret(v, T.float32x4) of words
# → __tj_bits_as(v, "float32", 4): their bits as a tuple of that dtype
BITS_LOAD = _declare("__tj_bits_load", "bits_load",
                     "(buffer, index, words, pred, memory) -> uint32 or a tuple of words")
BITS_STORE = _declare("__tj_bits_store", "bits_store",
                      "(buffer, index, value, words, pred, memory): the words stored")
BITS_AS = _declare("__tj_bits_as", "bits_as",
                   "(words, dtype name, lanes) -> a tuple of lanes elements of those bits")
ATOMICS = {T.atomic_add: ATOMIC_ADD, T.atomic_max: ATOMIC_MAX, T.atomic_min: ATOMIC_MIN,
           T.atomic_or: ATOMIC_OR, T.atomic_load: ATOMIC_LOAD, T.atomic_store: ATOMIC_STORE}

# -- fragment loops (passes/layout_inference.py) --------------------------------------
FRAG_LOOP = _declare("__tj_frag_loop", "frag_loop", "The slots of this thread (a loop).")
FRAG_INDEX = _declare("__tj_frag_index", "frag_index", "(lid, slot) -> tile coordinates")
FRAG_VALID = _declare("__tj_frag_valid", "frag_valid",
                      "(lid, slot) -> whether the slot holds one")
FRAG_WRITER = _declare("__tj_frag_writer", "frag_writer",
                       "(lid) -> whether this thread is the copy of the loop's replicated "
                       "iterations that stores to memory")
FRAG_GET = _declare("__tj_frag_get", "frag_get", "(F, slot) -> value")
FRAG_SET = _declare("__tj_frag_set", "frag_set", "(F, slot, value)")
FRAG_SLOT = _declare("__tj_frag_slot", "frag_slot",
                     "(loop id, fragment, loop slot) -> its slot")

# -- layout conversions (passes/layout_conversion.py) ---------------------------------
CONVERT_LAYOUT = _declare("__tj_convert_layout", "convert_layout",
                          '("src", "dst", "scratch", "src layout -> dst layout"): where a '
                          "fragment's data moves to another fragment's layout through a "
                          "shared scratch tile (the copies that follow it); no code")

# -- block barriers (passes/barriers.py) ----------------------------------------------
SYNC = _declare("__tj_sync", "sync_threads", "A block barrier.")
# set on a T.sync_threads() call the front end writes itself (thread_allreduce.py): not
# one of the kernel's own barriers (barriers.py: its tensors stay noalias)
INTERNAL_BARRIER_ATTR = "_tj_internal_barrier"
GRID_SYNC = _declare("__tj_grid_sync", "grid_sync",
                      "The grid barrier's arrival and wait, by thread 0 of each block, between "
                      "two block barriers (T.sync_grid: passes/barriers.py)")

# -- cp.async pipelines (passes/pipeline.py) ------------------------------------------
STAGE = _declare("__tj_stage", "stage", "stage(tile, index): one version of a tile")
COPY_ASYNC = _declare("__tj_copy_async", "copy_async", "copy_async(src, dst): cp.async copy")
UNPACK_INT4 = _declare("__tj_unpack_int4", "unpack_int4",
                      "(bytes tile, tile): an int4 region's bytes, staged by a pipeline, "
                      "unpacked one value a byte (passes/packed_staging.py)")
COMMIT = _declare("__tj_cp_commit", "cp_commit", "Close this thread's group of async copies.")
WAIT = _declare("__tj_cp_wait", "cp_wait", "cp_wait(n): at most n groups still pending")

# -- TMA pipelines (passes/tma.py) ----------------------------------------------------
TMA_INIT = _declare("__tj_tma_init", "tma_init",
                    "(first mbarrier, count, arrivals): thread 0 initializes them")
TMA_LOAD = _declare("__tj_tma_load", "tma_load", "(src, dst stage, mbarrier, map, copy id)")
TMA_WAIT = _declare("__tj_tma_wait", "tma_wait", "(mbarrier, parity, thread 0 only): phase done")
TMA_FENCE = _declare("__tj_tma_fence", "tma_fence",
                     "Generic-proxy shared writes → the async proxy.")

# -- TMA stores (passes/tma_store.py) -------------------------------------------------
TMA_STORE = _declare("__tj_tma_store", "tma_store",
                     "(src tile, dst region, map, copy id): thread 0 stores the tile by TMA")
TMA_STORE_WAIT = _declare("__tj_tma_store_wait", "tma_store_wait",
                          "Thread 0 waits until TMA has read the tiles it stores.")

# -- wgmma waits after the statements that do not need them (passes/wgmma_waits.py) --
WGMMA_WAIT = _declare("__tj_wgmma_wait", "wgmma_wait",
                      "(gemm id, ...): wait for the deferred wgmma gemms and hand their "
                      "accumulators back")

# -- warp specialization (passes/warp_specialize.py) ----------------------------------
# the ``if`` that splits a warp-specialized kernel's roles carries this attribute: its
# producer branch is ordered by mbarriers (barriers.py), and its consumers' statements are
# the block's timeline for shared-memory lifetimes (shared_memory.py)
WS_ATTR = "_tj_ws"
WS_PRODUCER = _declare("__tj_ws_producer", "ws_producer",
                       "() -> whether this thread is in the producer warpgroup")
WS_LEADER = _declare("__tj_ws_leader", "ws_leader",
                     "() -> whether this thread issues the producer's copies")
SETMAXNREG = _declare("__tj_setmaxnreg", "setmaxnreg",
                      "(increase, registers): this warpgroup's register budget")
MBAR_ARRIVE = _declare("__tj_mbar_arrive", "mbar_arrive",
                       "(mbarrier): lane 0 of each warp arrives (the warp is done with it)")
SYNC_CONSUMERS = _declare("__tj_sync_consumers", "sync_consumers",
                          "A barrier of the consumer warpgroups only (named barrier 1).")
# the consumer warpgroups' turns at their exponentials (passes/softmax_turns.py)
TURN = _declare("__tj_turn", "turn",
                "(step): one of TURN_START / TURN_WAIT / TURN_FINISH of the consumer "
                "warpgroups' turns (named barriers 2 + warpgroup)")
TURN_START, TURN_WAIT, TURN_FINISH = range(3)

SYNC_RANGE = _declare("__tj_sync_range", "sync_range",
                      "(barrier, threads): a named barrier of the threads of a range, which a "
                      "branch's tile operations share (passes/thread_ranges.py)")

SYNC_NAMED = _declare("__tj_sync_named", "sync_named",
                      "(barrier, threads): the kernel's T.sync_threads(barrier_id, "
                      "arrive_count), a named barrier some threads may reach alone")
ARRIVE_NAMED = _declare("__tj_arrive_named", "arrive_named",
                        "(barrier, threads): T.named_barrier_arrive, an arrival that does "
                        "not wait")

# -- thread block clusters (passes/clusters.py) ---------------------------------------
CLUSTER_RANK = _declare("__tj_cluster_rank", "cluster_rank",
                        "() -> this block's rank in its cluster (T.block_rank_in_cluster)")
CLUSTER_SYNC = _declare("__tj_cluster_sync", "cluster_sync",
                        "A barrier of every thread of every block of the cluster.")
CLUSTER_ARRIVE = _declare("__tj_cluster_arrive", "cluster_arrive",
                          "(relaxed): this thread arrives at the cluster barrier")
CLUSTER_WAIT = _declare("__tj_cluster_wait", "cluster_wait",
                        "This thread waits for the cluster barrier's arrivals.")
MULTICAST_ATTR = "_tj_multicast"    # a T.copy_cluster's mask, on its T.copy call

# -- the kernel's own warpgroup roles (passes/warp_roles.py) --------------------------
# the ``if`` a ``with T.ws(k):`` becomes carries ``ROLE_ATTR = k``: its body's barriers are
# the role's named barrier, and nothing in it orders another role's accesses (mbarriers do)
ROLE_ATTR = "_tj_role"
WS_ROLE = _declare("__tj_ws_role", "ws_role", "() -> this thread's warpgroup: tid / 128")
SYNC_ROLE = _declare("__tj_sync_role", "sync_role",
                     "(role): named barrier 1 + role, over the role's 128 threads")
MBAR_ARRIVE_ALL = _declare("__tj_mbar_arrive_all", "mbar_arrive_all",
                           "(mbarrier, arrivals): T.mbarrier_arrive; arrivals 1: each thread "
                           "arrives; 32: the warp's lane 0 for all; 128: the thread for its "
                           "role")
ROLE_LEADER = _declare("__tj_role_leader", "role_leader",
                       "() -> whether this thread is its warpgroup role's first")
TMA_COPY = _declare("__tj_tma_copy", "tma_copy",
                    "(src region, dst, mbarrier): T.tma_copy until passes/tma.py plans it")
TMA_EXPECT_LOAD = _declare("__tj_tma_expect_load", "tma_expect_load",
                           "(src, dst, mbarrier, map, copy id): the role's first thread "
                           "expects the bytes (no arrival) and issues the boxes")

# -- block rasterization (passes/rasterization.py) ------------------------------------
SWIZZLE_BLOCKS = _declare("__tj_swizzle_blocks", "swizzle_blocks",
                          "(panel, row order) -> (bx, by) rasterized")

# -- guarded T.Parallel (passes/parallel_guards.py) -----------------------------------
GROUPS = _declare("__tj_parallel_groups", "parallel_groups",
                  "The vector groups of a T.Parallel this thread runs.")
LANES = _declare("__tj_group_lanes", "group_lanes", "Lanes 0 … vec-1 of a vector group.")
LANES_REVERSED = _declare("__tj_group_lanes_reversed", "group_lanes_reversed",
                          "Lanes vec-1 … 0 of a vector group.")
ENDS = _declare("__tj_group_ends", "group_ends", "Lanes 0 and vec-1 of a vector group.")
LANE_INDEX = _declare("__tj_lane_index", "lane_index",
                      "(group, lane, *extents): the T.Parallel indices of a group's lane")

# -- random streams (frontend/random_draws.py; ir/random_state.py) ---------------------
# (each ends with the kernel's generator, a literal: ir/random_state.PHILOX, ...)
RNG_INIT = _declare("__tj_rng_init", "rng_init",
                    "(state, seed, seq, off, gen): curand_init into the thread's state")
RNG_NEXT = _declare("__tj_rng_next", "rng_next",
                    "(state, kind, gen) -> the thread's next draw of that kind, in order")
RNG_AT = _declare("__tj_rng_at", "rng_at",
                  "(state, kind, word, gen) -> the draw at the state's position + word, "
                  "the state unchanged (a T.Parallel iteration's)")
RNG_SKIP = _declare("__tj_rng_skip", "rng_skip",
                    "(state, words, gen): the state's position moves on (after a "
                    "T.Parallel)")

# -- a thread's own asynchronous copies (frontend/async_copies.py) ----------------------
CP_ASYNC = _declare("__tj_cp_async", "cp_async",
                    "(dst, dst index, src, src index, elements, predicate): T.ptx_cp_async "
                    "of the elements from src's row at the index to dst's")
