"""The compiler pipeline: one function, read top to bottom.

    kernel source ──frontend──▶ device program ──source passes──▶ device function
        ──Numba typing + lowering──▶ LLVM IR ──entry + link + optimize──▶ LLVM module
        ──NVPTX target machine──▶ PTX

Each step lives in its own module. ``CompileOptions.dump_dir`` (``TILEJIT_DUMP_IR=DIR``)
writes the program before and after every step (``dump.py``);
``runtime/kernel_cache.load_or_compile`` puts the disk cache in front of this module.
This module and ``codegen/`` are the only ones that import Numba and llvmlite.
"""
from __future__ import annotations

import ast
import contextlib
import copy
import gc
import linecache
import os
import re
import threading

from numba.core import compiler, errors as numba_errors, types
from numba.core.compiler_lock import global_compiler_lock
from numba.core.target_extension import target_override

from tilejit import syntax
from tilejit.compiler.artifact import CompiledKernel
from tilejit.compiler.dump import Dumper
from tilejit.errors import CompileError, with_call_sites
from tilejit.frontend.explicit_sync import uses_warp_roles
from tilejit.frontend.helpers import (binding, helper_problem, helpers_as_macros,
                                      recursive_helper)
from tilejit.frontend.rewrite import device_tree, materialize, shape_constant_name
from tilejit.frontend.source import KernelSource
from tilejit.frontend.thread_bindings import rewrite_thread_bindings
from tilejit.frontend.thread_roles import role_threads_of, thread_role_size
from tilejit import language
from tilejit.language.compat import NotSupportedError
from tilejit.language.dtypes import as_dtype
from tilejit.ir import markers
from tilejit.log import Stages
from tilejit.ir.kernel_config import KernelConfig, compiling
from tilejit.passes import (async_proxy, barriers, clear_folding, clusters, divisors,
                            dynamic_parallel,
                            epilogue_staging, fragment_regions, fragment_transposes,
                            transposes,
                            global_copies, global_layouts, grid_sync,
                            layout_conversion,
                            layout_inference, packed_staging, packed_tensors,
                            parallel_guards,
                            parallel_order, pipeline,
                            rasterization,
                            registers, safe_memory, safe_values, shared_memory,
                            shifted_fragments, softmax_turns, sparse_gemms,
                            split_indices,
                            thread_branches, tile_names,
                            tile_allocation, tma, tma_store, warp_roles, warp_specialize,
                            wgmma_waits)
from tilejit.passes.context import PassContext
from tilejit.compiler.specialization import Specialization
from tilejit.codegen import amdgpu, nvptx
from tilejit.codegen.numba_pipeline import TilejitCompiler
from tilejit.codegen.numba_target import (TARGET_NAME, descriptor, new_flags,
                                          target_context_for)
from tilejit.codegen.typing.types import (BFloat16, GlobalTensorType, TensorMapType, WeakFloat,
                                          numba_type, tensor_map, weak_float)


SOURCE_PASSES = (
    tile_names.rename_reallocated_tiles,     # a name allocated again: a tile of its own
    clusters.lower_cluster_forms,            # T.block_rank_in_cluster, T.copy_cluster
    thread_branches.check_thread_branches,   # no tile op under `if tx < 128` (a check)
    grid_sync.check_grid_syncs,              # T.sync_grid: checked; a cooperative launch
    global_copies.expand_global_copies,      # T.copy(global, global) → an element loop
    sparse_gemms.expand_sparse_gemms,        # T.gemm_sp → A expanded in shared; T.gemm
    parallel_order.order_parallel_loops,     # for h, i in T.Parallel(H, N): F[i, h] → (N, H)
    split_indices.split_fragment_indices,    # F[i, X * n + j] → a view's F_s[i, X, j]
    tile_allocation.allocate_tiles,          # tiles into the plan; regions, gemm forms
    registers.check_register_floor,          # no fragment past the spill limit, early
    safe_values.expand_safe_value_copies,    # T.annotate_safe_value: copies from A → loops
    transposes.expand_transposes,            # T.transpose(S, S_t) → an element loop
    safe_memory.guard_global_accesses,       # TileLang's doors: reads/writes outside masked
    global_layouts.lay_out_global_tensors,   # T.annotate_layout of a tensor: flat accesses
    fragment_regions.expand_fragment_region_copies,  # T.copy(F[a:b, :], S) → a loop
    packed_tensors.check_packed_tensors,     # no other tile op on a float4_e2m1fn tensor
    dynamic_parallel.expand_dynamic_parallel_loops,  # T.Parallel(span): an element loop
    fragment_transposes.transpose_fragments,  # F_t[j, i] = F[i, j]: through shared memory
    shifted_fragments.shift_fragment_loops,  # a read of F[i + off, j]: the loop over F's rows
    clear_folding.fold_clears_into_gemms,    # T.clear(C); T.gemm(.., C) → a gemm that clears
    warp_roles.lower_warp_roles,             # T.ws roles, mbarriers, T.tma_copy (sm_90+)
    divisors.check_divisors,                 # no integer // or % by a compile-time 0
    packed_staging.stage_packed_copies,      # T.Pipelined's int4 copies: bytes, unpacked
    pipeline.pipeline_loops,                 # T.Pipelined: staged tiles, async copies
    rasterization.rasterize_blocks,          # T.use_swizzle: block order for L2 reuse
    layout_inference.choose_operand_layouts,  # shared layouts, gemm engines (fixed layouts)
    layout_conversion.convert_fragment_layouts,  # fixed layouts that meet: through shared
    layout_inference.infer_layouts,          # fragment layouts; fragment loops
    registers.check_registers,               # fragments and local tiles fit a thread
    tma.use_tma,                             # sm_90+: pipelines whose copies TMA can do
    warp_specialize.specialize_warps,        # sm_90a: a producer warpgroup for wgmma's TMA
    softmax_turns.take_turns,                # sm_90a: consumers take turns at their exp2s
    epilogue_staging.stage_epilogues,        # sm_90a: wgmma accumulators out through shared
    tma_store.use_tma_stores,                # sm_90+: whole shared tiles stored by TMA
    async_proxy.fence_generic_writes,        # sm_90a: generic writes before wgmma's reads
    shared_memory.plan_shared_memory,        # offsets in the dynamic shared buffer
    barriers.insert_barriers,                # block barriers for shared-memory hazards
    wgmma_waits.defer_wgmma_waits,           # sm_90a: wgmma waits where the results are needed
    parallel_guards.version_parallel_guards,  # 16-byte groups for guarded T.Parallel
)


def compile_kernel(ks: KernelSource, spec: Specialization) -> CompiledKernel:
    with _cyclic_gc_paused(), syntax.deep_trees():
        try:
            return _compile_kernel(ks, spec)
        except CompileError as e:     # inside an inlined helper: the calls that led there
            if not ks.inlined:
                raise
            live = getattr(e, "live_calls", None)
            inlined = {c for c in ks.inlined if live is None or c[3] in live}
            raise with_call_sites(e, ks.filename, (ks.tree.lineno, ks.tree.end_lineno),
                                  inlined or ks.inlined) from e.__cause__


_GC_PAUSE = threading.Lock()
_gc_pauses = [0, False]      # compilations under way; whether the collector was enabled


@contextlib.contextmanager
def _cyclic_gc_paused():
    """The cyclic garbage collector off while a kernel compiles. A compilation allocates
    a few hundred thousand short-lived objects (Numba's IR, llvmlite's instructions),
    which start collections of the oldest generation, and each walks the whole heap
    (Numba, llvmlite and torch: 300–400 thousand objects, ~100 ms on the CPU machine):
    2–3 of them were 20–30 % of a cold compile. Reference counting still frees what it
    can; the cycles left are collected after. Nested and concurrent compilations share
    one pause; the collector's state before the first is restored after the last."""
    with _GC_PAUSE:
        if _gc_pauses[0] == 0:
            _gc_pauses[1] = gc.isenabled()
            gc.disable()
        _gc_pauses[0] += 1
    try:
        yield
    finally:
        with _GC_PAUSE:
            _gc_pauses[0] -= 1
            if _gc_pauses[0] == 0 and _gc_pauses[1]:
                gc.enable()


def _compile_kernel(ks: KernelSource, spec: Specialization) -> CompiledKernel:
    name = _entry_name(ks, spec)
    stages = Stages(f"{ks.tree.name} [{spec.summary()}]")  # DEBUG log (tilejit/log.py)
    dump = Dumper.for_kernel(name, spec)
    dump.text("source.py", lambda: _source_text(ks))
    with stages.stage("front end and passes"):
        device_fn, tiles = build_device_function(ks, spec, dump)
    argtypes = numba_argtypes(spec) + (tensor_map,) * len(tiles.tensor_maps)
    dump.text("tile_plan.txt", tiles.describe)
    config = KernelConfig(threads=tiles.role_threads or spec.threads,
                          max_vector=_max_vector(argtypes), fast_math=spec.options.fast_math,
                          debug=spec.options.debug, tiles=tiles, target=spec.target)
    with compiling(config), stages.stage("typing and lowering"):
        try:
            cres = type_and_lower(ks, device_fn, argtypes, spec.target)
        except CompileError as e:
            e.live_calls = tiles.live_calls     # (compile_kernel names the calls)
            raise
    dump.text("numba_typed.txt", _typed_ir_text(cres))
    kernel = CompiledKernel(name, shared_bytes=tiles.shared_bytes,
                            block_threads=tiles.launch_threads, cooperative=tiles.grid_sync)
    if spec.target.is_sim:
        stages.report(" for the simulator")
        return kernel
    context = cres.target_context
    # the arguments whose tensors are not noalias (codegen/entry.py): every one in a kernel
    # whose threads may exchange values through its tensors across its own barriers
    # (T.sync_grid among them) or that loads or stores atomically (an atomic is there to
    # see other threads' writes), else those the kernel says may alias
    # (T.annotate_restrict_buffers)
    names = [param for param, _ in spec.params]
    aliased = frozenset(i for i in range(len(argtypes)) if tiles.user_barriers or
                        tiles.atomic_access or (i < len(names) and names[i] in ks.aliased))
    if spec.target.kind == "amdgpu":
        return _finish_amdgpu(kernel, context, cres, argtypes, name, spec, dump, stages,
                              aliased)
    # a warp-specialized kernel launches its producer warpgroup too, one block per SM
    # with capped registers at entry (setmaxnreg: passes/warp_specialize.py)
    threads = tiles.launch_threads or spec.threads
    min_blocks = 1 if tiles.launch_threads or tiles.user_setmaxnreg else spec.min_blocks_per_sm
    entry_ir = nvptx.build_entry(context, cres.fndesc, argtypes, name, threads, min_blocks,
                                 _shape_constants_by_position(spec),
                                 tiles.shared_bytes if spec.options.debug else 0,
                                 aliased=aliased)
    modules = [str(m) for m in cres.library.all_modules()] + [entry_ir]
    dump.text("llvm_lowered.ll", lambda: "\n".join(modules))
    with stages.stage("LLVM link and O3"):
        module = nvptx.link_and_optimize(modules, name, spec.target,
                                         fast_math=spec.options.fast_math)
    kernel.llvm_ir = str(module)
    dump.text("llvm_optimized.ll", kernel.llvm_ir)
    with stages.stage("PTX"):
        kernel.ptx = nvptx.emit_ptx(module, spec.target)
    dump.text("kernel.ptx", kernel.ptx)
    kernel.param_formats = param_formats(argtypes)
    position = {name: i for i, (name, _) in enumerate(spec.params)}
    kernel.tensor_maps = [(position[name], box.dtype, box.itemsize, list(box.extents), box.swizzle)
                          for name, box in tiles.tensor_maps]
    stages.report()
    return kernel


def _finish_amdgpu(kernel, context, cres, argtypes, name, spec, dump, stages, aliased):
    """The AMDGPU entry, the linked and optimized module, its assembly and the HSA code
    object (``codegen/amdgpu.py``)."""
    entry_ir = amdgpu.build_entry(context, cres.fndesc, argtypes, name, spec.threads,
                                  _shape_constants_by_position(spec),
                                  kernel.shared_bytes if spec.options.debug else 0,
                                  aliased=aliased)
    modules = [str(m) for m in cres.library.all_modules()] + [entry_ir]
    dump.text("llvm_lowered.ll", lambda: "\n".join(modules))
    with stages.stage("LLVM link and O3"):
        module = amdgpu.link_and_optimize(modules, name, spec.target)
    kernel.llvm_ir = str(module)
    dump.text("llvm_optimized.ll", kernel.llvm_ir)
    with stages.stage("assembly and code object"):
        kernel.asm = amdgpu.emit_assembly(module, spec.target)
        kernel.code_object = amdgpu.code_object(module, spec.target)
    dump.text("kernel.s", kernel.asm)
    kernel.param_formats = param_formats(argtypes)
    stages.report()
    return kernel


def build_device_function(ks: KernelSource, spec: Specialization, dump=None):
    # a list of numbers the kernel reads from its globals or closure (a shape built on
    # the host, as TileLang programs pass one to T.view) is a constant tuple in the
    # device program: the device cannot change the host's list
    namespace = {name: _frozen_list(value) for name, value in ks.namespace.items()}
    # (a function given for a compile-time parameter: the function, a helper it calls)
    namespace.update({name: binding(value) for name, value in spec.constexprs})
    namespace.update(markers.NAMESPACE)      # the names the front end and the passes insert
    namespace[markers.LANGUAGE] = language
    # plain helpers the kernel calls are inlined (frontend/helpers.py)
    # (a name the kernel assigns is its own, as in Python, whatever the module binds it to)
    names = [n for n in syntax.walk(ks.tree) if isinstance(n, ast.Name)]
    local = {n.id for n in names if isinstance(n.ctx, ast.Store)}
    helpers_as_macros(namespace, {n.id for n in names} - local)
    for param, dim, value in spec.shape_constants:
        namespace[shape_constant_name(param, dim)] = value
    dropped = {name for name, _ in spec.constexprs}
    entries = [(p, d) for p, d, _ in spec.shape_constants]
    ranks = {name: ty.ndim for (name, _), ty in zip(spec.params, numba_argtypes(spec))
             if isinstance(ty, GlobalTensorType)}
    whole = {p: r for p, r in ranks.items() if all((p, d) in entries for d in range(r))}
    threads = _role_threads(ks, spec, namespace) or spec.threads   # T.ws: one warpgroup's
    ctx = PassContext(namespace, ks.filename, threads, _param_dtypes(spec),
                      target=spec.target, options=spec.options,
                      params={name: ty for (name, _), ty in zip(spec.params, numba_argtypes(spec))
                              if isinstance(ty, GlobalTensorType)})
    if threads != spec.threads:
        ctx.plan.role_threads, ctx.plan.launch_threads = threads, spec.threads
    ctx.plan.cluster = spec.cluster
    # an inlined macro's own names, renamed apart from the kernel's (kernel_macros.
    # rename_locals), are shown in messages as the source spells them
    ctx.shown_names.update({n.id: n.tj_name for n in syntax.walk(ks.tree)
                            if isinstance(n, ast.Name) and getattr(n, "tj_name", n.id) != n.id})
    passes = [_bind(p, ctx) for p in SOURCE_PASSES]
    if dump is not None:
        passes = [dump.source_pass(_named(p, q)) for p, q in zip(passes, SOURCE_PASSES)]
    tree = device_tree(ks, drop_params=dropped, passes=passes, outputs=spec.outputs,
                       shape_entries=entries, on_rewritten=dump and dump.ast("device_program"),
                       namespace=namespace, whole_shapes=whole)
    ctx.plan.atomic_access = any(isinstance(n, ast.Name) and n.id in _ATOMIC_ACCESSES
                                 for n in syntax.walk(tree))
    if ks.inlined:      # the helpers' calls this program holds (errors name them)
        ctx.plan.live_calls = frozenset(getattr(n, "tj_call", None)
                                        for n in syntax.walk(tree)) - {None}
    return materialize(ks, tree, namespace), ctx.plan


# the markers of an atomic load or store of an element (frontend/rewrite.py): a tensor
# only read by atomic loads was read-only and noalias, and NVPTX's selection of its
# atomic load as a read-only-cache load aborted in an LLVM assertion
_ATOMIC_ACCESSES = frozenset((markers.ATOMIC_LOAD, markers.ATOMIC_STORE))


def _frozen_list(value):
    if isinstance(value, list) and all(
            isinstance(v, (int, float, bool)) and not isinstance(v, type) for v in value):
        return tuple(value)
    return value


def _role_threads(ks: KernelSource, spec: Specialization, namespace) -> int:
    """The threads of one role when the kernel splits its block with ``T.ws`` (a
    warpgroup), or with branches on the thread index that the front end makes roles of
    (``frontend/thread_roles.py``: a warpgroup, or 64 or 32 threads): its tiles are
    planned over one role (``passes/warp_roles.py``); else 0."""
    try:
        size = role_threads_of(ks.tree, ks.namespace) if uses_warp_roles(
            ks.tree, ks.namespace) else thread_role_size(
                rewrite_thread_bindings(copy.deepcopy(ks.tree), ks), ks, namespace)
    except TypeError as e:
        raise ks.error(str(e), ks.launch) from None
    if not size:
        return 0
    if spec.threads % size:
        raise ks.error(f"a kernel with T.ws roles runs whole warpgroups: threads must be a "
                       f"multiple of {size}, got {spec.threads}", ks.launch)
    return size


def _bind(source_pass, ctx):
    """A source pass as ``device_tree`` calls it, with this compilation's context."""
    return lambda fdef, _namespace: source_pass(fdef, ctx)


def _named(fn, like):
    fn.__name__ = like.__name__
    return fn


def _shape_constants_by_position(spec: Specialization) -> dict:
    """{argument position: {dim: value}} of the shape entries compiled in."""
    position = {name: i for i, (name, _) in enumerate(spec.params)}
    out = {}
    for param, dim, value in spec.shape_constants:
        out.setdefault(position[param], {})[dim] = value
    return out


def _param_dtypes(spec: Specialization) -> dict:
    return {name: as_dtype(desc[1]) for name, desc in spec.params if desc[0] == "tensor"}


def numba_argtypes(spec: Specialization) -> tuple:
    known: dict = {}       # the shape entries compiled in, by parameter
    for param, dim, value in spec.shape_constants:
        known.setdefault(param, {})[dim] = value
    out = []
    for name, desc in spec.params:
        if desc[0] == "tensor":
            _, dtype, ndim, contiguous, aligned = desc
            dims = known.get(name, {})
            out.append(GlobalTensorType(as_dtype(dtype), ndim, contiguous, aligned,
                                        tuple(dims.get(d) for d in range(ndim))))
        elif desc[1] == "weak_float":
            out.append(weak_float)
        else:
            out.append(numba_type(as_dtype(desc[1])))
    return tuple(out)


@global_compiler_lock
def type_and_lower(ks: KernelSource, device_fn, argtypes, target=None):
    typing_context = descriptor.typing_context
    target_context = target_context_for(target) if target is not None else \
        descriptor.target_context
    try:
        with target_override(TARGET_NAME):
            target_context.refresh()
            return compiler.compile_extra(typing_context, target_context, device_fn,
                                          args=tuple(argtypes), return_type=None,
                                          flags=new_flags(), locals={},
                                          pipeline_class=TilejitCompiler)
    except numba_errors.NumbaError as e:
        # a helper holding what kernel code cannot (print(), try/except) is the cause
        # Numba meets as a typing error of its own ("Cannot cast Literal[str]")
        raise helper_problem(device_fn) or recursive_helper(device_fn) or \
            _compile_error(ks, e) from None
    except numba_errors.UnsupportedBytecodeError as e:
        # Python the kernel's code cannot hold, most often in a helper it calls (compiled
        # inline: frontend/helpers.py); Numba names the place
        where = re.search(r"Raised from (.+) \((\d+)\)", str(e))
        raise CompileError(f"unsupported in a kernel or a helper it calls: {e}; a helper is "
                           f"compiled inline as kernel code, so its tile operations (T.copy, "
                           f"T.gemm, T.reduce_*) and Python-only forms (**kwargs, dict "
                           f"merges) must be written in the kernel itself",
                           where.group(1) if where else ks.filename,
                           int(where.group(2)) if where else ks.tree.lineno) from None
    except CompileError:
        raise
    except NotSupportedError as e:
        # a TileLang name tilejit does not have, met where Numba types a helper or macro
        # the kernel calls (the front end checks the kernel's own body)
        filename, line = _numba_location(e.__traceback__) or (ks.filename, ks.tree.lineno)
        raise CompileError(str(e), filename, line) from None
    except Exception as e:  # a fault of the compiler, not of the kernel …
        # … unless a helper the kernel calls holds what kernel code cannot (try/except)
        problem = helper_problem(device_fn) or recursive_helper(device_fn)
        if problem is not None:
            raise problem from None
        raise CompileError(f"internal compiler error while compiling {ks.tree.name}: "
                           f"{type(e).__name__}: {e}; please report it", ks.filename,
                           ks.tree.lineno) from e


def _numba_location(tb):
    """(file, line) of the statement Numba was typing when ``tb`` was raised: the ``loc``
    of the innermost typing constraint on the stack; None where there is none."""
    found = None
    while tb is not None:
        loc = getattr(tb.tb_frame.f_locals.get("self"), "loc", None)
        if getattr(loc, "line", None) and getattr(loc, "filename", None):
            found = (loc.filename, loc.line)
        tb = tb.tb_next
    return found


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _compile_error(ks: KernelSource, e: Exception) -> CompileError:
    text = _ANSI.sub("", str(e))
    loc = getattr(e, "loc", None)
    lineno = getattr(loc, "line", None)
    filename = getattr(loc, "filename", None) or ks.filename
    # keep Numba's explanation, drop its banners and the repeated source excerpt
    source_lines = {ln.strip() for ln in linecache.getlines(ks.filename)} - {""}
    keep = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped in source_lines or stripped.startswith("Failed in nopython mode"):
            continue
        if stripped.startswith(("During:", "File \"", "^", "<source", "This error may")):
            continue
        if stripped.startswith(("- Resolution failure", "- Of which")):
            continue
        if re.match(r"^\d+\s*\|", stripped) or stripped.startswith(">"):
            continue
        if stripped:
            keep.append(stripped)
    message = "\n".join(_specific_errors(keep) or keep[:12]) or type(e).__name__
    bind = re.search(r"Cannot bind 'args=\((.*)\) kws=(\{.*\})' to signature '(\(.*\))' "
                     r"due to \"TypeError: (.*)\"", message)
    if bind:        # a helper or macro called with arguments its signature does not take
        message = (f"a helper called with arguments its signature {bind.group(3)} does not "
                   f"take: {bind.group(4)} (given {bind.group(1).rstrip(',') or 'none'}"
                   + (f", keywords {bind.group(2)}" if bind.group(2) != "{}" else "") + ")")
    message = _untyped_function_hint(_name_parallel_extent(message, ks, lineno), ks)
    if filename.startswith(_NUMBA_DIR):
        # an implementation of Numba's own (compiled inside the kernel's statement): the
        # kernel's line that asked for it is the place to name
        filename, lineno = _kernel_location(e.__traceback__) or (ks.filename, ks.tree.lineno)
        if re.search(r"Module\(<module 'math'", message) and "pow" in message:
            return CompileError(
                "an integer raised to a power (`**` or pow() of an integer, or of a float "
                "by an integer exponent) is not built in a kernel (Numba's integer power "
                "falls back to Python's math.pow); write the product (x * x) or use "
                "T.pow on floats", filename, lineno)
    return CompileError(_python_math_hint(message), filename, lineno)


_NUMBA_DIR = os.path.dirname(os.path.abspath(numba_errors.__file__)).rsplit(os.sep, 1)[0]


def _kernel_location(tb):
    """(file, line) of the innermost statement being typed or lowered that is not in
    Numba's own files (the kernel's or its helper's); None where there is none."""
    found = None
    while tb is not None:
        loc = getattr(tb.tb_frame.f_locals.get("self"), "loc", None)
        name = getattr(loc, "filename", None)
        if getattr(loc, "line", None) and name and not name.startswith(_NUMBA_DIR):
            found = (name, loc.line)
        tb = tb.tb_next
    return found


def _python_math_hint(message: str) -> str:
    """Numba's "Unknown attribute 'sqrt' of type Module(<module 'math' ...>)": Python's
    math of a kernel value, which the front end folds only from compile-time values."""
    found = re.search(r"Unknown attribute '(\w+)' of type Module\(<module 'math'", message)
    if found is None:
        return message
    name = found.group(1)
    return (f"math.{name} of a value of the kernel: Python's math module computes at "
            f"compile time only, from compile-time values (constants, constexpr "
            f"parameters, the program's globals and closure); in the kernel use "
            f"T.{name} (or compute it before `with T.Kernel`)")


_SPECIFIC = "Rejected as the implementation raised a specific error:"


def _specific_errors(lines: list[str]) -> list[str]:
    """The reasons a tilejit template gave (``TypingError: ...`` after Numba's
    "Rejected as the implementation raised a specific error"), without Numba's list of
    the candidates it tried; [] when there are none. A template that prefers literal
    arguments is tried again with them widened (``True`` to ``bool``), and that try's
    complaint ("... got a run-time bool") is not the reason where the first try gave
    one."""
    out = []
    for before, line in zip(lines, lines[1:]):
        if before == _SPECIFIC and line.startswith("TypingError: "):
            reason = line[len("TypingError: "):]
            if reason not in out:
                out.append(reason)
    literal = [r for r in out if "must be a compile-time" not in r or "got a run-time" not in r]
    return literal or out


def _name_parallel_extent(message: str, ks: KernelSource, lineno) -> str:
    """"T.Parallel extent 1 must be ..." with the extent as written: "T.Parallel extent
    1 (`m`) must be ..."."""
    found = re.match(r"T\.Parallel extent (\d+) ", message)
    if found is None or lineno is None:
        return message
    position = int(found.group(1))
    for node in syntax.walk(ks.tree):
        if isinstance(node, ast.Call) and node.lineno == lineno and \
                ast.unparse(node.func).split(".")[-1] == "Parallel" and \
                position < len(node.args):
            return message.replace(found.group(0), f"{found.group(0)}(`"
                                   f"{ast.unparse(node.args[position])}`) ", 1)
    return message


def _untyped_function_hint(message: str, ks: KernelSource) -> str:
    """A Python function the kernel cannot call: the helpers of the user's are inlined
    (frontend/helpers.py), so this is a library's (tilejit's, numpy's, torch's, …) that
    is no kernel function; say so."""
    found = re.search(r"Untyped global name '([^']+)': Cannot determine Numba type of "
                      r"<class 'function'>", message)
    if found is None:
        return message
    name = found.group(1)
    module = getattr(ks.namespace.get(name), "__module__", None)
    owner = f"a function of {module}" if module else "a library's function"
    return (f"{name} is {owner}, which a kernel cannot call: kernel code calls the tile "
            f"language (T.*), math functions and helper functions of your own (plain "
            f"functions and @T.macro, inlined); call it on the host before the kernel and "
            f"pass the result as an argument\n{message}")


def param_formats(argtypes) -> list[str]:
    """struct format characters of the flat kernel parameters (``Launcher``'s input)."""
    formats = []
    for ty in argtypes:
        if isinstance(ty, GlobalTensorType):
            formats += ["Q"] + ["q"] * (2 * ty.ndim)
        elif isinstance(ty, TensorMapType):
            formats.append("T")
        elif isinstance(ty, WeakFloat) or ty == types.float64:
            formats.append("d")
        elif ty == types.float32:
            formats.append("f")
        elif ty == types.float16:
            formats.append("e")
        elif isinstance(ty, BFloat16):
            formats.append("H")
        elif ty == types.boolean:
            formats.append("?")
        elif isinstance(ty, types.Integer):
            formats.append({(8, True): "b", (8, False): "B", (16, True): "h",
                            (16, False): "H", (32, True): "i", (32, False): "I",
                            (64, True): "q", (64, False): "Q"}[(ty.bitwidth, ty.signed)])
        else:
            raise CompileError(f"cannot pass a {ty} as a kernel parameter")
    return formats


def _max_vector(argtypes) -> int:
    sizes = [t.dtype.itemsize for t in argtypes
             if isinstance(t, GlobalTensorType) and t.aligned]
    return max(1, 16 // min(sizes)) if sizes else 1


def _entry_name(ks: KernelSource, spec: Specialization) -> str:
    base = re.sub(r"\W", "_", ks.tree.name)
    return f"{base}_kernel"


def _source_text(ks: KernelSource) -> str:
    return f"# {ks.filename}:{ks.tree.lineno}\n" + ast.unparse(ks.tree) + "\n"


def _typed_ir_text(cres):
    def text():
        try:
            return str(cres.type_annotation)
        except Exception as e:  # the annotation is a debugging aid only
            return f"(typed IR unavailable: {e})"
    return text
