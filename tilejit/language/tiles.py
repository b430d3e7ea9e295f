"""Tiles: allocation, ``T.copy``, ``T.clear``/``T.fill`` and ``T.gemm``.

Declarations: on a GPU the compiler replaces each call (``passes/tile_allocation.py``
and ``codegen/lowering/tiles.py``, ``copy.py``, ``gemm.py``); run as Python, each takes
its meaning from ``_semantics`` (the simulator's, ``sim/semantics.py``: numpy, one block
at a time, a tile a ``SimTensor`` holding the whole tile).
"""
from __future__ import annotations

import enum
import numbers

from tilejit.language._semantics import meaning


class GemmWarpPolicy(str, enum.Enum):
    """How ``T.gemm`` spreads the block's warps over the output tile: ``FullRow`` puts
    them all along M, ``FullCol`` along N, ``Square`` balances the two."""
    Square = "Square"
    FullRow = "FullRow"
    FullCol = "FullCol"

    # TileLang's enum is an IntEnum (Square 0, FullRow 1, FullCol 2): its programs convert
    # a policy with int() and pass the number as the policy
    def __int__(self):
        return _POLICY_NUMBERS[self.value]

    __index__ = __int__

    def is_square(self) -> bool:
        return self is GemmWarpPolicy.Square

    def is_full_row(self) -> bool:
        return self is GemmWarpPolicy.FullRow

    def is_full_col(self) -> bool:
        return self is GemmWarpPolicy.FullCol

    @classmethod
    def _missing_(cls, value):
        # GemmWarpPolicy(1), as TileLang's IntEnum takes the number
        if isinstance(value, int) and not isinstance(value, bool):
            for name, number in _POLICY_NUMBERS.items():
                if number == value:
                    return cls(name)
        return None


_POLICY_NUMBERS = {"Square": 0, "FullRow": 1, "FullCol": 2}


def alloc_shared(shape, dtype, scope="shared.dyn"):
    """A tile in the block's shared memory (one per block, seen by all its threads)."""
    return meaning("alloc_shared")(shape, dtype, scope)


def alloc_fragment(shape, dtype, scope="local.fragment"):
    """A block-level tile spread over the threads' registers; the compiler picks which
    thread holds which element (index it inside a ``T.Parallel`` over its shape)."""
    return meaning("alloc_fragment")(shape, dtype, scope)


def alloc_local(shape, dtype, scope="local"):
    """Each thread's own small array."""
    return meaning("alloc_local")(shape, dtype, scope)


def alloc_reducer(shape, dtype, op="sum", replication="all"):
    """A fragment a ``T.Parallel`` loop folds values into from many iterations
    (``r[i] += x``; ``r[i] = T.max(r[i], x)`` for op "max", ``T.min`` for "min"), then
    ``T.finalize_reducer(r)``: the front end gives each such loop a tile of its own and
    reduces it into ``r`` (``frontend/reducers.py``); ``replication`` is TileLang's layout
    hint, not used."""
    raise TypeError("T.alloc_reducer is rewritten by the front end: use it in a kernel's "
                    "body, not in a @T.macro called from Python or outside a kernel")


def reducer_init(reducer, init=None):
    """Open a reducer's epoch (TileLang's reducer v2): the reduction starts from the
    identity of its op (0, -inf, +inf), or as if ``init`` were one more contribution,
    combined once into every output (the front end fills the reducer with it)."""
    raise TypeError("T.reducer_init is rewritten by the front end: use it in a kernel's "
                    "body")


def reducer_update(target, value):
    """Fold ``value`` into the reducer element ``target`` (``acc[i]``, written in place)
    from a ``T.Parallel`` loop, once per logical iteration: ``acc[i] += value`` for op
    "sum", ``acc[i] = T.max(acc[i], value)`` / ``T.min`` for "max" / "min"."""
    raise TypeError("T.reducer_update is rewritten by the front end: use it in a "
                    "T.Parallel loop of a kernel's body")


def finalize_reducer(reducer, dst=None, batch=1, annotations=None):
    """Every thread's copy of ``reducer`` holds the reduced values (in tilejit they do
    once the folding loop ends: only ``batch`` is checked, an int >= 1 dividing the
    reducer's elements); with ``dst`` (reducer v2) they are copied into that fragment."""
    raise TypeError("T.finalize_reducer is rewritten by the front end: use it in a "
                    "kernel's body")


def alloc_var(dtype, *args, scope="local.var", init=None):
    """Each thread's own scalar, initialised to ``init`` (0 when not given). TileLang's
    forms: ``alloc_var(dtype, init)``, ``alloc_var(dtype, "local.var")``,
    ``alloc_var(dtype, init, scope)``, ``init=``/``scope=`` by keyword; the scope is
    "local.var" (or "local")."""
    if len(args) == 1 and isinstance(args[0], str):
        scope = args[0]
    elif len(args) == 1:
        init = args[0] if init is None else _twice("init")
    elif len(args) == 2:
        (init, scope) = args if init is None else _twice("init")
    elif args:
        raise TypeError("T.alloc_var(dtype, init, scope) takes at most three arguments")
    if scope not in ("local.var", "local"):
        raise ValueError(f"T.alloc_var: scope {scope!r}: a variable is each thread's "
                         f"register ('local.var')")
    return meaning("alloc_var")(dtype, 0 if init is None else init)


def _twice(name):
    raise TypeError(f"T.alloc_var: {name} given twice")


def Pipelined(start, stop=None, num_stages=0, order=None, stage=None, sync=None,  # noqa: N802
              group=None, annotations=None):
    """``for k in T.Pipelined(n, num_stages=s):`` a loop whose shared-memory copies for
    later iterations may overlap this iteration's compute. Same results as ``range(n)``;
    ``T.Pipelined(start, stop, ...)`` as ``range(start, stop)`` (TileLang's signature)."""
    return range(int(start)) if stop is None else range(int(start), int(stop))


def annotate_layout(layouts):
    """``T.annotate_layout({tile: layout})``: give shared tiles a layout of your choice, a
    ``T.Layout`` (``language/layout.py``) or one of tilejit's layouts. Values do not
    depend on it; a layout that is not a bijection onto the tile's elements is an error
    (a ``CompileError`` when the kernel compiles, a ``LayoutError`` when it runs as
    Python)."""
    return meaning("annotate_layout")(layouts)


def annotate_safe_value(safe_value_map):
    """``T.annotate_safe_value({A: v})``: elements outside global tensor A read as ``v``
    (not 0): element reads and the tile copies from it (``T.copy(A[...], S)`` pads S
    with v past A's edges). One value per tensor in a kernel; compiled, the copies from
    A become element loops (``passes/safe_values.py``)."""
    return meaning("annotate_safe_value")(safe_value_map)


def use_swizzle(panel_size=10, order="row", enable=True):
    """Block rasterization for L2 reuse (a scheduling hint: results never change)."""


def reshape(buffer, shape):
    """A view with another shape: the same elements in row-major order, under a new name.

    Of a global tensor (a tensor parameter of the kernel): the tensor must be contiguous
    (checked before the launch) and hold as many elements as the shape (checked in
    simulation). Of a shared tile (``V = T.reshape(S, (n,))``, assigned to a name): the
    same shared memory, reads and writes through either name alias (the compiler orders
    them with barriers); the shape must hold the tile's element count (a
    ``CompileError`` otherwise), and a tile with views is row-major (not swizzled, not
    staged by ``T.Pipelined``). Of a fragment (``s3 = T.reshape(s, (n, q, h))``): the same
    registers, each element kept in the thread and register that hold it, so the view's
    layout is the fragment's renumbered row-major; reads and writes through either name
    alias, and T.Parallel loops and reductions (``T.reduce_sum(s3, r, dim=-1)``) run over
    the view. Merging dimensions always works; a split must fall on a boundary of the
    layout's thread and register runs (else a ``CompileError`` naming the tiles, the
    shapes and the run it cuts). Of a local tile: the same per-thread array."""
    return meaning("reshape")(buffer, shape)


def view(buffer, shape=None, dtype=None):
    """``T.reshape`` that may also read the bytes as another ``dtype`` (integers and
    float16/32/64): the shape counts elements of the new dtype (and may be left out for
    a dtype of the same size). Of a global tensor, the shape must hold as many bytes as
    the tensor: the simulator checks it; the GPU reads what the shape says. Of a shared
    tile (``W = T.view(S, shape=[m, n], dtype=T.int32)``), the same bytes of shared
    memory as another dtype and shape, which must hold exactly the tile's bytes (a
    ``CompileError`` otherwise); as for ``T.reshape``, the tile is then row-major. Of a
    fragment or local tile, in its own dtype only: ``T.reshape``."""
    return meaning("view")(buffer, shape, dtype)


# what a kernel's T.view calls become (frontend/rewrite.py): the same function
view_of = view


def import_source(source=None):
    """TileLang's ``T.import_source(cuda_source)``: C++ for ``T.call_extern`` to call.
    tilejit compiles no CUDA C++ (it emits PTX from its own IR), so only ``None``, what
    TileLang's programs pass when they call no extern function, is accepted (and does
    nothing); source text is a ``CompileError`` at its line."""
    if source is not None:
        raise TypeError("T.import_source: CUDA C++ source is not supported by tilejit (it "
                        "compiles no C++; T.call_extern is not built either)")


def make_tensor(ptr, shape, dtype="float32", strides=None):
    """A global tensor of ``shape`` and ``dtype`` at the address ``ptr`` (a ``T.ptr``
    parameter, or an element of a pointer table ``T.Tensor([G], T.ptr)``): row-major, or
    with ``strides`` (in elements). Nothing checks the address on the GPU (a wrong one is
    the driver's illegal-address error); the simulator needs host memory there, inside
    this process's mappings (else a ``ValueError``), and does not take bfloat16 or float8
    (held in float32 there)."""
    return meaning("make_tensor")(ptr, shape, dtype, strides)


def sync_threads(barrier_id=None, arrive_count=None):
    """A barrier of the block: ``__syncthreads()``. tilejit inserts the barriers shared
    memory needs by itself; an explicit one orders what the analysis cannot see (per-
    thread code's own protocols). Every thread must reach it (a ``CompileError`` inside a
    branch or loop that depends on the thread index). In a warp-specialized kernel it is
    the barrier of the threads that run it.

    ``T.sync_threads(barrier_id, arrive_count)``: named barrier ``barrier_id`` (1…15;
    ``bar.sync``) of ``arrive_count`` threads (whole warps; the block's threads when left
    out), which may be reached by some threads only (``if tx < 256:``), and waits until
    ``arrive_count`` threads have arrived: those that sync there and those that
    ``T.named_barrier_arrive`` it. Barriers tilejit itself uses in the kernel (a
    warpgroup role's ``1 + k``, the consumers' 1, a thread range's 15 down) may not be
    named. The simulator checks that the threads reaching it are ``arrive_count`` whole
    warps (``ThreadCodeError``: on the GPU a hang)."""
    return meaning("sync_threads")(barrier_id, arrive_count)


def tvm_storage_sync(scope="shared"):
    """TVM's TIR barrier, as TileLang programs write it: ``T.tvm_storage_sync("shared")``
    (or ``"shared.dyn"``) is ``T.sync_threads()``, ``"warp"`` is ``T.sync_warp()``; a
    grid-wide ``"global"`` is a ``CompileError`` (``T.sync_grid()`` in a cooperative
    launch is tilejit's)."""
    raise RuntimeError("T.tvm_storage_sync is a barrier inside a kernel")


def If(cond):  # noqa: N802 - TVM's name
    """TVM's script branch, ``with T.If(cond):`` holding ``with T.Then():`` and
    ``with T.Else():`` (``frontend/tir_branches.py``): Python's ``if``/``else``."""
    raise RuntimeError("T.If is a `with` block inside a kernel")


def Then():  # noqa: N802 - TVM's name
    """The taken side of ``with T.If(cond):`` (see ``T.If``)."""
    raise RuntimeError("T.Then is a `with` block inside `with T.If(cond):`")


def Else():  # noqa: N802 - TVM's name
    """The other side of ``with T.If(cond):`` (see ``T.If``)."""
    raise RuntimeError("T.Else is a `with` block inside `with T.If(cond):`")


def func_attr(attrs):
    """TVM's ``T.func_attr({"global_symbol": ..., "tir.noalias": True})`` at the top of a
    kernel (older TileLang programs): TVM's attributes of the function, nothing tilejit
    uses; the statement is dropped."""
    if not isinstance(attrs, dict):
        raise TypeError(f"T.func_attr(attrs): expected a dict, got {type(attrs).__name__}")


def And(a, b):  # noqa: N802 - TIR's name
    """TIR's ``T.And(a, b)``: ``a and b`` (both conditions)."""
    return _logical(a, b, "and")


def Or(a, b):  # noqa: N802 - TIR's name
    """TIR's ``T.Or(a, b)``: ``a or b``."""
    return _logical(a, b, "or")


def Not(a):  # noqa: N802 - TIR's name
    """TIR's ``T.Not(a)``: ``not a``."""
    return _logical(a, None, "not")


def _logical(a, b, op):
    import numpy as np    # (outside a kernel only: the front end writes these as and/or/not)
    if op == "not":
        return np.logical_not(a)
    return (np.logical_and if op == "and" else np.logical_or)(a, b)


def loop_break():
    """TileLang's ``T.loop_break()``: Python's ``break`` of the innermost loop (the front
    end writes it so; a ``T.serial`` or ``T.Parallel`` loop, as ``break`` there)."""
    raise RuntimeError("T.loop_break() is a statement of a kernel's loop: the front end "
                       "writes it as `break`")


def sync_grid():
    """A barrier of the whole grid: every thread of every block waits here until all
    have arrived, and what any of them wrote to global memory before it is visible to
    all after it (CUDA's ``cooperative_groups::this_grid().sync()``). Every thread of the
    block must reach it, as ``T.sync_threads()`` (not inside a ``T.Parallel``, a
    ``T.Pipelined`` loop, a ``T.ws`` role or a branch that depends on the thread index),
    and every block the same number of times. A kernel that uses it is launched
    cooperatively: all its blocks must be resident on the GPU at once, and a launch with
    more blocks than fit (the occupancy the driver reports, times the SM count) is
    refused with the limit named before anything runs. The simulator runs the blocks
    concurrently, each up to the barrier in turn; a block that finishes while others wait
    there is a ``DeadlockError`` (on the GPU: a hang)."""
    return meaning("sync_grid")()


def named_barrier_arrive(barrier_id, arrive_count):
    """Arrive at named barrier ``barrier_id`` (1…15) of ``arrive_count`` threads without
    waiting (``bar.arrive``): the producer's half of a protocol whose consumers
    ``T.sync_threads(barrier_id, arrive_count)``. What the arriving threads wrote before
    is visible to the consumers after their wait. In the simulator: between a kernel's
    ``T.ws`` warpgroup roles (a role arrives as its 128 threads)."""
    return meaning("named_barrier_arrive")(barrier_id, arrive_count)


def __ldg(load_or_buffer, index=None):
    """TileLang's ``T.__ldg(x[i])`` / ``T.__ldg(x, i)``: CUDA's load through the read-only
    data cache. The front end writes it as the load ``x[i]`` (``frontend/let_bindings.py``):
    LLVM emits ``ld.global.nc`` where the tensor is read-only and not aliased. Where it is
    run as Python (the simulator's helpers) it is that load too."""
    return load_or_buffer if index is None else load_or_buffer[
        tuple(index) if isinstance(index, list) else index]


def annotate_restrict_buffers(*buffers):
    """TileLang's ``T.annotate_restrict_buffers(A, B)``: the tensor parameters named may
    alias each other (overlapping slices of one tensor), so the compiler does not take
    their accesses for independent (no ``noalias``: TileLang's ``__restrict__`` left
    out). A statement of the kernel (``frontend/restrict_annotations.py`` takes it out
    when the kernel is parsed); run on the host (a program's prologue) it does nothing."""
    return None


def annotate_min_blocks_per_sm(min_blocks):
    """TileLang's ``T.annotate_min_blocks_per_sm(K)``, a statement of the ``with T.Kernel``
    block: ``T.Kernel(..., min_blocks_per_sm=K)`` (CUDA's second launch bound,
    ``.minnctapersm``: ptxas fits K blocks on an SM). The front end moves it into the
    launch when the kernel is parsed (``frontend/restrict_annotations.py``)."""
    return None


def annotate_l2_hit_ratio(hit_ratio_map):
    """TileLang's ``T.annotate_l2_hit_ratio({A: 0.8})``, a statement of the kernel: each
    launch on the GPU sets an L2 access policy window over the tensor ``A`` (that
    fraction of its lines persisting in L2's set-aside, the rest streaming;
    ``runtime/kernel.py``). A hint: results never change. The front end takes it out
    when the kernel is parsed (``frontend/restrict_annotations.py``)."""
    return None


def no_set_max_nreg():
    """Keep a warp-specialized kernel's registers as launched: no ``setmaxnreg`` moving
    them from the producer warpgroup to the consumers (a scheduling hint: results never
    change). TileLang also spells it ``T.disable_warp_group_reg_alloc()``."""


disable_warp_group_reg_alloc = no_set_max_nreg


def set_max_nreg(reg_count, is_inc):
    """``setmaxnreg``: the registers per thread of the warpgroup that runs it become
    ``reg_count`` (a multiple of 8 in [24, 256]), raised (``is_inc`` 1) or lowered (0):
    hand-written warp specialization (sm_90a; every thread of a warpgroup runs it, and the
    kernel is then launched one block per SM). A kernel that uses it is not warp-
    specialized by the compiler (``passes/warp_specialize.py``): it manages its warpgroups
    itself."""
    return meaning("set_max_nreg")(reg_count, is_inc)


def inc_max_nreg(reg_count):
    """``T.set_max_nreg(reg_count, 1)``."""
    return meaning("set_max_nreg")(reg_count, 1)


def dec_max_nreg(reg_count):
    """``T.set_max_nreg(reg_count, 0)``."""
    return meaning("set_max_nreg")(reg_count, 0)


def annotate_producer_reg_dealloc(reg_count=24):
    """TileLang's mark of a producer warpgroup's branch: its registers lowered to
    ``reg_count`` there (``T.dec_max_nreg(reg_count)``)."""
    return meaning("set_max_nreg")(reg_count, 0)


def annotate_consumer_reg_alloc(reg_count=240):
    """TileLang's mark of a consumer warpgroup's branch: its registers raised to
    ``reg_count`` there (``T.inc_max_nreg(reg_count)``)."""
    return meaning("set_max_nreg")(reg_count, 1)


def check_max_nreg(reg_count, is_inc) -> str | None:
    """Why ``T.set_max_nreg(reg_count, is_inc)`` is wrong, or None."""
    if isinstance(reg_count, bool) or not isinstance(reg_count, int) or \
            not 24 <= reg_count <= 256 or reg_count % 8:
        return (f"T.set_max_nreg: reg_count must be a multiple of 8 in [24, 256] known at "
                f"compile time, got {reg_count!r}")
    if is_inc not in (0, 1):
        return f"T.set_max_nreg: is_inc must be 1 (raise) or 0 (lower), got {is_inc!r}"
    return None


NAMED_BARRIERS = 16      # bar.sync's ids: 0 is the block's (__syncthreads), 1…15 named


def check_named_barrier(what: str, barrier_id, arrive_count, block_threads: int) -> str | None:
    """Why a named barrier's ``barrier_id`` / ``arrive_count`` (ints, or None where not
    known before the kernel runs) are wrong in a block of ``block_threads``, or None. Id 0
    is the block's own barrier: only ``T.sync_threads(0)`` of every thread may name it.
    A numpy integer (``T.int32(1)``) counts as the int it holds."""
    barrier_id, arrive_count = (
        int(v) if isinstance(v, numbers.Integral) and not isinstance(v, bool) else v
        for v in (barrier_id, arrive_count))
    if barrier_id is not None:
        if isinstance(barrier_id, bool) or not isinstance(barrier_id, int) or \
                not 0 <= barrier_id < NAMED_BARRIERS:
            return (f"{what}: barrier_id must be an int in [1, {NAMED_BARRIERS - 1}] (named "
                    f"barriers; 0 is the block's), got {barrier_id!r}")
    if arrive_count is not None:
        if isinstance(arrive_count, bool) or not isinstance(arrive_count, int) or \
                arrive_count <= 0 or arrive_count % 32 or arrive_count > block_threads:
            return (f"{what}: arrive_count must be a multiple of 32 (a named barrier counts "
                    f"whole warps) in [32, {block_threads}] (the block's threads), got "
                    f"{arrive_count!r}")
    if barrier_id == 0 and (what.startswith("T.named_barrier_arrive") or (
            arrive_count is not None and arrive_count != block_threads)):
        return (f"{what}: barrier 0 is the block's own (T.sync_threads()), which every one "
                f"of its {block_threads} threads reaches; name a barrier in [1, "
                f"{NAMED_BARRIERS - 1}]")
    return None


# the operations the whole block does together (their elements spread over every thread,
# or a barrier): every thread must reach them, which the simulator checks as they run
# (sim/semantics.py) and the compiler under branches on the thread index
# (passes/thread_branches.py); T.Parallel loops too
BLOCK_WIDE = ("copy", "gemm", "reduce_sum", "reduce_max", "reduce_min", "reduce_abssum",
              "reduce_absmax", "reduce_bitand", "reduce_bitor", "reduce_bitxor", "cumsum",
              "cummax", "atomic_add", "atomic_max", "atomic_min", "atomic_or", "sync_threads",
              "transpose", "gemm_sp")
# the tile operations a block does together: those, and the fills (which the simulator
# lets a per-thread tile take, element by element)
TILE_OPERATIONS = BLOCK_WIDE + ("fill", "clear")

# TileLang's hints to T.copy: how to lower it, never what it computes (tilejit picks the
# instructions itself: TMA, cp.async, vector width); accepted and not used
COPY_HINTS = ("coalesced_width", "disable_tma", "eviction_policy", "prefer_instruction",
              "annotations", "loop_layout")


def copy(src, dst, *, coalesced_width=None, disable_tma=False, eviction_policy=None,
         prefer_instruction=None, annotations=None, loop_layout=None):
    """Copy a tile or region into another, converting dtype. Elements of a global region
    outside the tensor are never read (the destination gets 0) and never written.
    TileLang's lowering hints (``COPY_HINTS``) are accepted; tilejit chooses the copy's
    instructions itself."""
    return meaning("copy")(src, dst)


def transpose(src, dst, annotations=None):
    """``dst[..., j, i] = src[..., i, j]``: tiles (shared, fragment), tensors or regions
    of either, of two or more dimensions, dst's extents src's with the last two swapped
    (the leading ones a batch), converting dtype. As ``T.copy``, a tensor's elements
    outside it are never read (they read as 0) nor written."""
    return meaning("transpose")(src, dst)


def any_of(buf):
    """Whether any element of a tensor region, a shared or local tile is nonzero (true):
    ``if T.any_of(BlockMask[by, bx, k, :]):``. In a kernel, in an ``if`` test or on the
    right of an assignment; every thread reads every element (not a fragment)."""
    return meaning("any_of")(buf)


def all_of(buf):
    """Whether every element of a tensor region, a shared or local tile is nonzero
    (true); as ``any_of``."""
    return meaning("all_of")(buf)


def fill(buffer, value, annotations=None):
    """Set every element of a tile (or region) to ``value``."""
    return meaning("fill")(buffer, value)


def clear(buffer, annotations=None):
    """Set every element of a tile to 0."""
    return meaning("clear")(buffer)


def gemm(A, B, C, transpose_A=False, transpose_B=False, policy=GemmWarpPolicy.Square,
         clear_accum=False, k_pack=1, wg_wait=0, annotations=None):
    """``C += op(A) @ op(B)`` with the products accumulated in C's dtype (float32
    inputs are rounded to TensorFloat-32 first, as the tensor cores do).

    A and B are shared tiles (A may be a fragment: the operand in registers), or
    rectangular regions of 2-d shared tiles with compile-time bounds, read through the
    tile's own layout: ``T.gemm(A_shared[:, block_K:], B_shared[0:block_K, :], C)``,
    ``T.gemm(Q_shared[:, :D], KV_shared, acc, transpose_B=True)``. A region's extents
    must be the gemm's (op(A) is M x K, op(B) K x N, C M x N), else a ``CompileError``
    naming the operand, the expected and the received. On sm_90a a region runs on wgmma
    where it starts on its tile's swizzle atom (else on mma.sync). C is a whole
    fragment; a region of a fragment, or bounds that move at run time, are a
    ``CompileError``."""
    return meaning("gemm")(A, B, C, transpose_A, transpose_B, policy, clear_accum, k_pack,
                           wg_wait)


def wgmma_gemm(A, B, C, transpose_A=False, transpose_B=False, policy=GemmWarpPolicy.Square,
               clear_accum=False, annotations=None):
    """TileLang's explicit Hopper gemm, issued without waiting: in tilejit it is
    ``T.gemm`` (the front end renames it), which runs on wgmma on sm_90a wherever the
    operands allow and waits for the products where they are first needed
    (``passes/wgmma_waits.py``), so ``T.wait_wgmma(n)`` has nothing left to wait for.
    Unlike TileLang, a gemm wgmma cannot take runs on mma.sync instead of failing to
    compile."""
    return gemm(A, B, C, transpose_A, transpose_B, policy, clear_accum)


def wait_wgmma(id):
    """TileLang's wait for all but ``id`` wgmma groups: a no-op in tilejit, whose gemms
    (``T.gemm``, ``T.wgmma_gemm``) wait for their products where they are needed."""
    if isinstance(id, bool) or not isinstance(id, int) or id < 0:
        raise TypeError(f"T.wait_wgmma(id): id must be a non-negative int, got {id!r}")


def warpgroup_fence_operand(buffer_or_ptr, offset=0, num_regs=None, dtype=None):
    """TileLang's fence on a wgmma accumulator's registers (an empty inline-assembly
    statement on each, so that nvcc does not move their uses past the wgmma that writes
    them): a no-op in tilejit, whose wgmma statements name the accumulator's registers
    as their operands and wait for them where they are read (``passes/wgmma_waits.py``).
    In a kernel its first argument must name a tile or an element of one (checked, then
    the statement is dropped)."""
    if num_regs is not None and (isinstance(num_regs, bool) or not isinstance(num_regs, int)
                                 or num_regs < 1):
        raise TypeError(f"T.warpgroup_fence_operand: num_regs must be a positive int, got "
                        f"{num_regs!r}")


def let(var, value, body=None):
    """TileLang's ``T.let(v, value)`` after ``v = T.int32()``: in a kernel, the statement
    is the assignment ``v = value`` (``frontend/let_bindings.py`` rewrites it before
    anything else reads the kernel). The expression form ``T.let(v, value, body)`` is not
    built (a ``CompileError`` at its line); called as Python, outside a kernel, it
    says so."""
    raise TypeError("T.let binds a name inside a kernel (`T.let(v, value)` is `v = value` "
                    "there); its expression form T.let(v, value, body) is not built")
