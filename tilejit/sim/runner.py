"""Run one launch in the simulator: every block in turn, on numpy views of the
arguments (bfloat16 and float8 ones on float32 copies, written back after); a kernel with
``with T.ws`` roles runs each block as its warpgroup roles (``roles.py``). Threads may
simulate at once: where a launch is (``runtime.STATE``) is each thread's own."""
from __future__ import annotations

import ast
import contextvars
import itertools
import threading

import numpy as np

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.explicit_sync import uses_warp_roles
from tilejit.frontend.mma_emitter_calls import builds_emitter_in_prologue
from tilejit.frontend.random_draws import uses_random_draws
from tilejit.frontend.rewrite import BLOCK_INDEX, device_tree, materialize
from tilejit.frontend.source import resolve_static
from tilejit.frontend.thread_roles import roles_depend_on_constexprs, role_threads_of
from tilejit.frontend.static_comprehensions import over_constexprs
from tilejit.ir.markers import (ATOMICS, BITS_AS, BITS_LOAD, BITS_STORE, DP4A_MESSAGE,
                                DP4A_OPERANDS, GRID_DIM, LDMATRIX,
                                MMA_SYNC, REGION, RNG_AT, RNG_INIT, RNG_NEXT, RNG_SKIP,
                                THREAD_INDEX, WARP_SIZE, CP_ASYNC)
from tilejit.errors import CompileError
from tilejit.frontend.helpers import binding
from tilejit.language.numerics import packed_codes, packed_values
from tilejit.frontend.gemm_operands import check_static_bounds
from tilejit.frontend.tile_operands import rewrite_regions
from tilejit.sim import (async_copies, bit_moves, garbage, mma, random, runtime, threads,
                         views)
from tilejit.sim.blas_threads import one_blas_thread
from tilejit.sim.block_races import BLOCK_RACES_MAX, BlockRaces
from tilejit.sim.cluster import check_multicasts_complete
from tilejit.sim.grid import GridTurns
from tilejit.sim.helpers import AttributeHelpers, bind_attribute_helpers, simulated_helpers
from tilejit.sim.roles import run_block_roles
from tilejit.sim.semantics import SIM_ELEMENT, own_fragment, region
from tilejit.sim.transform import (OWN_FRAGMENT, SIM, THREADS, simulator_tree,
                                   uses_thread_index)


_BUILDING = threading.Lock()        # one thread builds a kernel's simulated program
_LAUNCHES = itertools.count(1)      # the simulated launches begun in this process
_launches_begun = 0


def simulated_launches() -> int:
    """How many launches the simulator has begun in this process: ``do_bench`` calls a
    function once more only when that call ran no simulated kernel (a simulated launch's
    time measures the simulator, not a GPU, and repeating it says nothing more)."""
    return _launches_begun


def simulator_function(kernel, constexprs=None):
    """The kernel's simulated program, built once; once per set of ``constexprs`` for a
    kernel that builds a ``TensorCoreIntrinEmitter`` in its prologue (the emitter's code,
    expanded in the front end, depends on them)."""
    fn = getattr(kernel, "_sim_fn", None)
    if fn is not None:
        return fn
    per_spec = getattr(kernel, "_sim_fns", None)
    key = None
    if per_spec is not None:
        key = _constexpr_key(constexprs)
        fn = per_spec.get(key)
        if fn is not None:
            return fn
    with _BUILDING, syntax.deep_trees():
        fn = getattr(kernel, "_sim_fn", None)
        if fn is not None:
            return fn
        ks = kernel.source
        constants = None
        if builds_emitter_in_prologue(ks.tree, ks.namespace) or uses_random_draws(ks) or \
                roles_depend_on_constexprs(ks) or over_constexprs(ks):
            # built for the constexprs' values (an emitter's; a draw's bit= and dist=;
            # the block's size, which decides its warpgroup roles; a comprehension's
            # sequence)
            per_spec = kernel.__dict__.setdefault("_sim_fns", {})
            key = _constexpr_key(constexprs)
            if key in per_spec:
                return per_spec[key]
            constants = dict(constexprs or {})
        namespace = dict(ks.namespace)
        # helpers and macros the kernel names: integer operators in the GPU's types
        built = {}
        simulated_helpers(namespace, {n.id for n in ast.walk(ks.tree)
                                      if isinstance(n, ast.Name)}, built)
        namespace[SIM] = runtime
        namespace[OWN_FRAGMENT] = own_fragment     # transform._own_fragments
        namespace[BLOCK_INDEX] = runtime.block_index
        namespace[GRID_DIM] = runtime.grid_dim
        namespace[THREAD_INDEX] = threads.thread_index
        namespace[CP_ASYNC] = async_copies.cp_async
        namespace[WARP_SIZE] = _warp_size
        namespace[DP4A_OPERANDS] = _dp4a_operands
        namespace[THREADS] = threads
        namespace[REGION] = region
        namespace[LDMATRIX] = mma.ldmatrix          # TensorCoreIntrinEmitter's code
        namespace[MMA_SYNC] = mma.mma_sync
        namespace.update({RNG_INIT: random.rng_init, RNG_NEXT: random.rng_next,
                          RNG_AT: random.rng_at, RNG_SKIP: random.rng_skip})
        namespace.update({name: SIM_ELEMENT[fn.__name__[7:]] for fn, name in ATOMICS.items()})
        namespace.update({BITS_LOAD: bit_moves.bits_load, BITS_STORE: bit_moves.bits_store,
                          BITS_AS: bit_moves.bits_as})
        def regions(fdef, ns):
            # a T.gemm region's bounds are compile-time values, as the compiler requires
            check_static_bounds(fdef, ns, ks.constexpr_params,
                                lambda m, n: CompileError(m, ks.filename, n.lineno))
            return rewrite_regions(fdef, ns)
        tree = device_tree(ks, simulator=True, outputs=kernel.outputs, passes=(regions,),
                           constants=constants)
        per_thread = uses_thread_index(tree)
        # T.ws roles, as written or made of warpgroup branches (frontend/thread_roles.py)
        warp_roles = uses_warp_roles(tree, ks.namespace)
        role_threads = role_threads_of(tree, ks.namespace)
        simulated = simulator_tree(tree, ks.namespace, ks.constexpr_params)
        # helpers called through a module or an object (`ops.relu(x)`) simulated too
        attributes = AttributeHelpers(ks.namespace)
        simulated = attributes.visit(simulated)
        bind_attribute_helpers(namespace, attributes.chains, built)
        fn = materialize(ks, simulated, namespace)
        fn.warp_roles, fn.role_threads = warp_roles, role_threads
        grid_syncs = [n for n in ast.walk(ks.tree) if isinstance(n, ast.Call)
                      and resolve_static(n.func, ks.namespace) is T.sync_grid]
        fn.grid_sync = bool(grid_syncs)          # the blocks in turns: sim/grid.py
        if fn.grid_sync and fn.warp_roles:       # (passes/grid_sync.py's check, which the
            # GPU's checks skip for a kernel with T.ws roles in simulation)
            raise CompileError("T.sync_grid() in a kernel with T.ws warpgroup roles is not "
                               "built: each role runs the program by itself", ks.filename,
                               grid_syncs[0].lineno)
        fn.per_thread = per_thread       # reads its thread index: lane-wise (threads.py)
        if constants is not None:
            per_spec[key] = fn
        else:
            kernel._sim_fn = fn
    return fn


def _constexpr_key(constexprs):
    items = tuple(sorted((constexprs or {}).items()))
    try:
        hash(items)
    except TypeError:       # an unhashable value: by its text
        items = repr(items)
    return items


class _PackedBytes:
    """A packed tensor's bytes (float4_e2m1fn or int4, two a byte): the simulator works on
    its values (float32 or int8, logical shape) and writes their codes back."""

    def __init__(self, storage, dtype):
        self.storage, self.dtype = storage, dtype

    def host_bytes(self) -> np.ndarray:
        x = self.storage
        if isinstance(x, np.ndarray):
            return x.view(np.uint8)
        import torch
        return x.detach().view(torch.uint8).cpu().numpy()

    def write(self, data) -> None:
        codes = packed_codes(data, self.dtype)
        packed = (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)
        x = self.storage
        if isinstance(x, np.ndarray):
            x.view(np.uint8)[...] = packed
            return
        import torch
        x.view(torch.uint8).copy_(torch.from_numpy(packed))


def _wrap_packed(name, tensor):
    storage = tensor.obj.storage if hasattr(tensor.obj, "storage") else tensor.obj
    where = _PackedBytes(storage, tensor.dtype)
    raw = where.host_bytes()
    codes = np.empty(raw.shape[:-1] + (raw.shape[-1] * 2,), np.uint8)
    codes[..., 0::2], codes[..., 1::2] = raw & 0xF, raw >> 4
    data = packed_values(codes, tensor.dtype)
    return runtime.SimTensor(data, tensor.dtype, name, gpu_strides=tuple(tensor.strides)), \
        (where, data)


def _wrap(name, value, classify):
    tensor = classify(value)
    if tensor is None:
        return value, None
    wrapped, back = _wrapped(name, value, tensor)
    wrapped.gpu_address = tensor.ptr
    return wrapped, back


def _wrapped(name, value, tensor):
    if tensor.dtype.packed > 1:            # float4_e2m1fn, int4: values, codes written back
        return _wrap_packed(name, tensor)
    if tensor.is_torch:
        obj = value
        strides = tuple(tensor.strides)     # the argument's, which the GPU reads
        if obj.device.type != "cpu":       # a GPU tensor (TILEJIT_TARGET=sim on a GPU
            # machine): simulated on a host copy, written back after the launch
            host = obj.detach().float() if tensor.dtype.held_in_float32 else obj.detach()
            data = host.cpu().numpy()
            return runtime.SimTensor(data, tensor.dtype, name, gpu_strides=strides), \
                (obj, data)
        if tensor.dtype.held_in_float32:   # numpy has no such type: a float32 copy
            data = obj.detach().float().numpy()
            return runtime.SimTensor(data, tensor.dtype, name, gpu_strides=strides), \
                (obj, data)
        data = obj.detach().numpy()        # shares memory with the CPU tensor
        return runtime.SimTensor(data, tensor.dtype, name), None
    array = tensor.obj if isinstance(tensor.obj, np.ndarray) else value   # a DLPack view
    if tensor.dtype.held_in_float32:       # an ml_dtypes array: a float32 copy
        data = np.asarray(array).astype(np.float32)
        return runtime.SimTensor(data, tensor.dtype, name,
                                 gpu_strides=tuple(tensor.strides)), (array, data)
    return runtime.SimTensor(array, tensor.dtype, name), None


# the data pointers of arguments the caller allocated uninitialized for this launch
# (TileLang's out_idx outputs, torch.empty's memory: tilelang/classic.py), which the
# simulator tracks as it tracks T.empty's outputs
FRESH_OUTPUTS: contextvars.ContextVar = contextvars.ContextVar("fresh_outputs", default=())


def _fresh(value) -> bool:
    pointers = FRESH_OUTPUTS.get()
    data_ptr = getattr(value, "data_ptr", None)
    return bool(pointers) and callable(data_ptr) and value.numel() > 0 and \
        data_ptr() in pointers


def run_simulation(kernel, values, launch, classify, spec=None, device_allocation=None):
    """Run every block of the launch on numpy, with numpy's BLAS on one thread
    (``blas_threads.py``). ``classify`` is the runtime's description of an argument (a
    ``TensorArg`` for an array, None for a scalar); ``device_allocation(address)``: the
    (start, bytes) of the device allocation holding an address, or None (a
    T.make_tensor of device memory, views.DeviceMemory)."""
    with one_blas_thread():
        names = list(kernel.source.params) + list(kernel.outputs)
        saved = garbage.snapshot([(name, t) for name, t in (
            (name, classify(v)) for name, v in zip(names, list(values) + list(launch.outputs)))
            if t is not None])
        strict = garbage.Prints()
        token = garbage.RUN.set(strict)
        try:
            _run_simulation(kernel, values, launch, classify, spec, device_allocation)
            return
        except runtime.UninitializedReadError as e:
            if not getattr(e, "garbage_may_pass", False):
                raise
            error = e
        finally:
            garbage.RUN.reset(token)
        # read memory nothing wrote: run again with garbage there (does its value matter?)
        garbage.rerun(error, saved, strict.printed, lambda: _run_simulation(
            kernel, values, launch, classify, spec, device_allocation))


def _run_simulation(kernel, values, launch, classify, spec, device_allocation):
    # compile-time values as the compiler sees them (a list as a FrozenList)
    global _launches_begun
    _launches_begun = next(_LAUNCHES)
    constexprs = {name: binding(value) for name, value in spec.constexprs} \
        if spec is not None else {}
    fn = simulator_function(kernel, constexprs)
    args, writebacks = [], []
    names = list(kernel.source.params) + list(kernel.outputs)
    values = [constexprs.get(name, value) for name, value in zip(names, values)]
    outputs, fresh = set(kernel.outputs), set()
    for name, value in zip(names, list(values) + list(launch.outputs)):
        wrapped, writeback = _wrap(name, value, classify)
        if (name in outputs or _fresh(value)) and isinstance(wrapped, runtime.SimTensor):
            fresh.add(name)
            # T.empty's memory (torch.empty's) holds garbage until the kernel writes it:
            # a read or an atomic before that is an error, as for a tile
            wrapped.unwritten = np.ones(wrapped.data.shape, dtype=bool)
            garbage.pour(wrapped)
        args.append(wrapped)
        if writeback is not None:
            # with the bytes it had: a copy the kernel left alone is not written back, so
            # it cannot overwrite what another argument viewing the same memory wrote
            # (T.annotate_restrict_buffers: aliased tensors)
            writebacks.append((*writeback, writeback[1].tobytes()))
    gx, gy, gz = launch.grid
    if gx * gy * gz > 1 and not fn.grid_sync:
        # which block wrote each element of a global tensor: races between the blocks
        for a in args:
            if isinstance(a, runtime.SimTensor) and a.kind is None and \
                    a.data.flags.writeable and a.data.size <= BLOCK_RACES_MAX:
                a.blocks = BlockRaces(a.data, fresh=a.unwritten is not None)
                if a.unwritten is None:
                    a.unwritten = np.zeros(a.data.shape, dtype=bool)
    roles = getattr(fn, "warp_roles", False)    # T.ws: each block as warpgroup roles
    state = runtime.STATE           # this thread's
    outer = (state.block, state.mask, state.grid, state.threads, state.role_threads,
             state.lanes, state.in_parallel, state.cluster, state.multicasts,
             state.safe_memory, state.tensor_cores)
    state.grid, state.threads = tuple(launch.grid), launch.threads
    state.cluster, state.multicasts = launch.cluster, {}
    state.safe_memory = bool(spec is not None and spec.options.safe_memory)
    state.tensor_cores = spec is None or spec.target.has_tensor_cores
    state.role_threads = launch.threads     # an mbarrier arrival without T.ws roles
    state.lanes = launch.threads if fn.per_thread else 0
    state.in_parallel = 0
    state.laid_out = {}
    state.block_acquired, state.cluster_waited = set(), set()
    done, device_memory = False, views.open_device_memory(device_allocation)
    try:
        blocks = [(bx, by, bz) for bz, by, bx in itertools.product(range(gz), range(gy),
                                                                     range(gx))]
        if fn.grid_sync:            # the blocks concurrently, in turns between grid barriers
            GridTurns(blocks, kernel.__name__, {
                name: getattr(state, name) for name in (
                    "grid", "threads", "cluster", "multicasts", "safe_memory", "role_threads",
                    "lanes", "in_parallel", "laid_out")}).run(lambda: fn(*args))
            blocks = []
        with np.errstate(all="ignore"):
            for bx, by, bz in blocks:
                state.block = (bx, by, bz)
                state.mask = None
                state.named_users = {}
                async_copies.reset()
                if roles:
                    run_block_roles(fn, args, state.block, state.grid, launch.threads)
                else:
                    fn(*args)
        check_multicasts_complete(state.multicasts)
        done = True
    except ValueError as e:
        # a write the source does not show (through a macro) to a read-only array
        readonly = [n for n, a in zip(names, args) if isinstance(a, runtime.SimTensor)
                    and not a.data.flags.writeable]
        if "read-only" not in str(e) or not readonly:
            raise
        raise ValueError(f"{kernel.__name__}(): the kernel writes a read-only array: "
                         f"argument {' or '.join(map(repr, readonly))} ({e})") from e
    finally:
        runtime.restore_laid_out(write_back=done)
        views.close_device_memory(device_memory, write_back=done)
        (state.block, state.mask, state.grid, state.threads, state.role_threads,
         state.lanes, state.in_parallel, state.cluster, state.multicasts,
         state.safe_memory, state.tensor_cores) = outer
    for obj, data, before in writebacks:
        if data.tobytes() == before:
            continue
        if isinstance(obj, _PackedBytes):
            obj.write(data)
            continue
        if isinstance(obj, np.ndarray):
            obj[...] = data.astype(obj.dtype)   # values already of the type: exact
            continue
        import torch
        obj.copy_(torch.from_numpy(data).to(obj.dtype))
    # the outputs' elements the launch left unwritten (each rerun's garbage: garbage.py)
    return {name: a.unwritten.copy() for name, a in zip(names, args)
            if name in fresh and a.unwritten is not None}


def _warp_size():
    """The simulator's warp: 32 threads, as its warp shuffles and votes have."""
    return 32


def _dp4a_operands(a, b, c):
    """T.dp4a's operands, checked as the compiler's typing checks them."""
    got = [np.asarray(x).dtype for x in (a, b, c)]
    if got != [np.dtype(np.int8), np.dtype(np.int8), np.dtype(np.int32)]:
        frame = runtime.kernel_frame(1)
        raise CompileError(DP4A_MESSAGE.format(*got),
                           frame.f_code.co_filename if frame is not None else None,
                           frame.f_lineno if frame is not None else None)
