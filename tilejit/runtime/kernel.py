"""``@tilejit.kernel``: binding arguments, choosing the target, the specialization
cache, and the launch. A cached kernel's call runs the function ``fastlaunch`` generated
for it (``KernelFunction.__call__`` is that function once it exists); the first call of a
specialization takes the full path below.

Nothing here imports Numba: the compiler is imported when a kernel is first compiled,
so a process that finds its kernels in the disk cache never pays for it.
"""
from __future__ import annotations

import sys
import threading
from operator import attrgetter

from tilejit import syntax
from tilejit.runtime import host
from tilejit.runtime.kernel_cache import load_or_compile
from tilejit.frontend.analysis import (compile_time_shapes, kernel_outputs, live_walk,
                                        tile_copied_params, whole_shape_params)
from tilejit.frontend.explicit_sync import explicit_forms
from tilejit.frontend.host_queries import host_query_calls, host_query_values
from tilejit.frontend.rewrite import LAUNCH_CONFIG, host_tree, materialize
from tilejit.runtime.arguments import TensorArg, as_tensor_arg, launch_stream
from tilejit.runtime.fastlaunch import MISSING, fast_launcher_for, param_kinds
from tilejit.runtime.sequence import KernelSequence, is_sequence
from tilejit.frontend.source import (expected_ranks, function_def_from_file,
                                     function_namespace, integer_constexprs, parse_kernel,
                                     spelled_names, tensor_params, viewed_params,
                                     written_params)
from tilejit.frontend.tir_buffers import hoist_global_allocations, rewrite_alloc_buffers
from tilejit.frontend.validate import check_supported
from tilejit.options import compile_options, target_override
from tilejit.target import CPU, DEFAULT_CUDA_ARCH, SIM, Target

# "cpu": TileLang's CPU backends, in the simulator (target.Target.is_cpu)
_TARGETS = ("auto", "cuda", "sim", "cpu", "amdgpu")
_SIMULATED = ("sim", "cpu")


class KernelFunction:
    __test__ = False        # a kernel named test_* in a test file is not a test to collect
    def __init__(self, func, target="auto", arch=None, fast_math=False, debug=False,
                 source_tree=None, dump_dir=None, switches=None, launch_index=None):
        if target not in _TARGETS:
            raise ValueError(f"@tilejit.kernel target: expected one of {_TARGETS}, got {target!r}")
        if arch is not None and target in ("auto", "cuda"):
            Target.cuda(arch)       # a clear error for a malformed arch, before anything runs
        self.func = func
        self.target = target
        self.arch = arch
        self.fast_math = fast_math
        self.debug = debug
        self.dump_dir = dump_dir    # CompileOptions.dump_dir (the TileLang doors' pass configs)
        # CompileOptions' tma / wgmma / warp_specialize turned off by TileLang's pass configs
        self.switches = dict(switches or {})
        # which launch of a kernel of several this is (runtime/sequence.py): the launches
        # share their function's source, which the disk cache keys (kernel_cache.key_of)
        self.launch_index = launch_index
        self.source = parse_kernel(func, source_tree,
                                   inline_macros=bool(self.switches.get("safe_memory")))
        check_supported(self.source)
        self.__name__ = func.__name__
        self.__doc__ = func.__doc__
        self.__wrapped__ = func
        self.ranks = expected_ranks(self.source,
                                    lambda tree: live_walk(tree, self.source.namespace))
        self.tensor_uses = tensor_params(self.source)
        self.written = written_params(self.source)
        self.whole_copies, self.laid_out = whole_shape_params(self.source)
        self.tile_copies = tile_copied_params(self.source)  # specialized even if T.dynamic
        # addressed as a flat array: views, and tensors laid out by T.annotate_layout
        self.viewed = {**self.laid_out, **viewed_params(self.source)}
        self.integer_constexprs = integer_constexprs(self.source)
        self.outputs, self.returns = kernel_outputs(self.source)
        self.shape_entries = compile_time_shapes(self.source)
        ns = dict(self.source.namespace)
        ns[LAUNCH_CONFIG] = host.LaunchConfig
        # the host statements copied and compiled: a deep expression there (`m = 1 + 1 +
        # ...`) recurses as deep as the kernel's own passes, which run under deep_trees
        with syntax.deep_trees():
            self._host = materialize(self.source, host_tree(self.source, self.outputs), ns)
        self._cache: dict = {}
        self._built: dict = {}      # {spec: CompiledKernel} compiled by `check`, not loaded
        self._lock = threading.Lock()
        params = self.source.params
        self._nparams = len(params)
        self._const_flags = tuple(p in self.source.constexpr_params for p in params)
        # the trailing parameters that have defaults, for calls that leave them out
        first = len(params)
        while first > 0 and params[first - 1] in self.source.defaults:
            first -= 1
        self._first_default = first
        self._default_values = tuple(self.source.defaults[p] for p in params[first:])
        self._fast = None   # the generated hot path of cached launches (fastlaunch.py)
        self._call = self._call_full
        self._explicit_sync = None  # uses mbarriers, T.tma_copy or T.ws (explicit_sync)
        self._queries = None        # host-query calls of the device program
        self._env_target = target_override()

    def __repr__(self):
        return f"<tilejit.kernel {self.func.__qualname__}>"

    # -- arguments -------------------------------------------------------------------
    def _bind(self, args, kwargs) -> list:
        params = self.source.params
        if len(args) > len(params):
            raise TypeError(f"{self.__name__}() takes {len(params)} argument(s) "
                            f"({', '.join(params)}), got {len(args)}")
        values = list(args)
        for name in params[len(args):]:
            if name in kwargs:
                values.append(kwargs.pop(name))
            elif name in self.source.defaults:
                values.append(self.source.defaults[name])
            else:
                raise TypeError(f"{self.__name__}() missing argument {name!r} "
                                f"(parameters: {', '.join(params)})")
        for name in kwargs:
            if name in params[:len(args)]:
                raise TypeError(f"{self.__name__}() got two values for argument {name!r}")
            raise TypeError(f"{self.__name__}() got an unexpected argument {name!r} "
                            f"(parameters: {', '.join(params)})")
        return values

    def _target_for(self, device: int) -> str:
        target = self._env_target or self.target
        if target == "sim" and self.target == "cpu":
            target = "cpu"      # TILEJIT_TARGET=sim: a CPU target is simulated already
        if target == "auto":
            if device < 0:
                return "sim"
            return "amdgpu" if rocm_tensors() else "cuda"
        if target == "cuda" and device < 0:
            raise ValueError(f"{self.__name__}(): target 'cuda' needs the tensors on a CUDA "
                             "device; they are in host memory (use target='sim' to simulate)")
        # target 'sim' with CUDA tensors: simulated on host copies, written back
        # (sim/runner._wrap)
        if target == "amdgpu" and (device < 0 or not rocm_tensors()):
            raise ValueError(f"{self.__name__}(): target 'amdgpu' launches on the tensors' "
                             "ROCm device (a ROCm build of torch); these are not on one. "
                             "kernel.compile(..., target='amdgpu', arch='gfx942') gives the "
                             "assembly (.asm) and the HSA code object (.code_object) without "
                             "one")
        return target

    def _compile_target(self, target: str, arch: str | None, device: int) -> Target:
        """The Target of a compilation: the simulator, or CUDA for the explicit arch, the
        kernel's, or the device's."""
        if target in _SIMULATED:
            return CPU if target == "cpu" else SIM
        if target == "amdgpu":
            return Target.amdgpu(arch or self.arch or (rocm_arch(device) if device >= 0
                                                       else "gfx942"))
        arch = arch or self.arch
        if arch is None:
            # the driver (cuda.bindings) only when no arch is given: the device's is read
            from tilejit.runtime import cuda_driver
            if not cuda_driver.cuda_available():
                raise RuntimeError(
                    f"{self.__name__}: CUDA driver/device not available to take the arch "
                    "from; pass arch= (e.g. arch=\"sm_90a\") to compile for CUDA without a "
                    "device")
            arch = cuda_driver.device_arch(max(device, 0))
        return Target.cuda(arch)

    # -- the full path ---------------------------------------------------------------
    def _prepare(self, values, target=None, arch=None):
        """Classify the arguments, run the host program (grid, outputs) and describe
        the specialization: (call, launch, target, spec). An explicit ``target`` skips
        the device checks (compiling needs no device)."""
        # globals are read at the first compilation, not at decoration (SPEC: globals)
        self.source.resolve(self._host.__globals__)
        call = host.classify(self, values)
        target = target or self._target_for(call.device)
        with host.allocating_like(call.like):
            launch = host.run_host_program(self, call)
        host.add_outputs(self, call, launch)
        shapes = host.shape_constants(self, call, values)
        # tilejit.compiler only from a kernel's first call on: `import tilejit` loads none
        # of it (specialization.py itself is light: options and target)
        from tilejit.compiler.specialization import Specialization
        compile_target = self._compile_target(target, arch, call.device)
        # a CPU target's block is one thread unless T.Kernel names its threads
        launch.threads = compile_target.block_threads(self.source.threads_named,
                                                      launch.threads)
        spec = Specialization(
            params=tuple((name, key) for (name, _), key in zip(
                call.runtime, [k for k in call.key if k[0] != "const"])),
            constexprs=tuple(call.constexprs) + self._host_queries(), shape_constants=shapes,
            outputs=tuple(self.outputs), threads=launch.threads, target=compile_target,
            options=compile_options(fast_math=self.fast_math, debug=self.debug,
                                    dump_dir=self.dump_dir, **self.switches),
            min_blocks_per_sm=launch.min_blocks_per_sm, cluster=launch.cluster)
        return call, launch, target, spec

    def _host_queries(self) -> tuple:
        """The answers to the device program's host queries (``driver.get_num_sms()``
        in the body), compile-time values of the specialization (frontend/host_queries)."""
        if self._queries is None:           # read after resolve(): the globals are known
            self._queries = host_query_calls(self.source)
        return host_query_values(self.source, self._queries) if self._queries else ()

    def _compiled(self, spec, device):
        entry = self._cache.get((spec, device))
        if entry is None:
            with self._lock:
                entry = self._cache.get((spec, device))
                if entry is None:
                    # compiled ahead by `check` (tilejit.compile of a T.prim_func), or now
                    compiled = self._built.pop(spec, None) or load_or_compile(self, spec)
                    loaded = _HipLoaded if spec.target.kind == "amdgpu" else _Loaded
                    entry = compiled if spec.target.is_sim else loaded(compiled, device)
                    self._cache[(spec, device)] = entry
        return entry

    # A call goes to ``self._call``: this class's ``_call_full`` until a launch on the GPU
    # generated the kernel's hot path (fastlaunch.py), then that function itself, with the
    # kernel's own parameters, which falls back to ``_call_bound`` on anything it does not
    # know. (Python looks ``__call__`` up on the class; a property lets each kernel have
    # its own, without a wrapper's frame.)
    __call__ = property(attrgetter("_call"))

    def _call_full(self, *args, **kwargs):
        if not kwargs and self._first_default <= len(args) <= self._nparams:
            values = args + self._default_values[len(args) - self._first_default:] \
                if len(args) < self._nparams else args
        else:
            values = tuple(self._bind(args, kwargs))
        return self._call_bound(values)

    def _call_missed(self, values, extra, keywords):
        """The generated entry's way back (fastlaunch.FastLauncher.entry): ``values`` one
        per parameter, ``MISSING`` where the call gave none; ``extra`` positionals and
        unknown ``keywords`` the entry could not bind. Wrong calls get ``_bind``'s errors."""
        if extra or keywords or any(v is MISSING for v in values):
            if extra:
                self._bind(values + extra, {})        # raises: too many arguments
            given = {p: v for p, v in zip(self.source.params, values) if v is not MISSING}
            self._bind((), dict(given, **(keywords or {})))     # raises
        return self._call_bound(values)

    def _call_bound(self, values):
        """The full path of a call whose arguments are bound, one value per parameter."""
        given, values = values, host.scalar_views(self, values)
        call, launch, target, spec = self._prepare(values)
        if target in _SIMULATED:
            # the simulator's runner (and its transform) only when a kernel is simulated
            from tilejit.sim.runner import run_simulation
            if self._typed_for_simulation(spec):
                self._compiled(spec, -1)    # the GPU's checks first (SPEC: Debugging)
            run_simulation(self, values, launch, as_tensor_arg, spec, _device_allocation)
        else:
            loaded = self._compiled(spec, call.device)
            loaded.launch(launch, call.runtime, self.source.l2_window)
            if target == "cuda" and values is given:   # (a 0-d view: the full path)
                self._remember_fast(values, loaded, launch, call)
        return self._result(launch.outputs)

    def _typed_for_simulation(self, spec) -> bool:
        """Whether a simulated call compiles first (the GPU's checks, typing): not for
        mbarriers, T.tma_copy and T.ws (the simulator runs T.ws roles as coroutines, the
        GPU as warpgroups: passes/warp_roles.py), nor for a CPU target, which no GPU
        runs."""
        if self._explicit_sync is None:     # read after _prepare resolved the globals
            self._explicit_sync = bool(explicit_forms(self.source.tree, self.source.namespace))
        return not self._explicit_sync and not spec.target.is_cpu

    def _result(self, outputs):
        if self.returns is None:
            return None
        by_name = dict(zip(self.outputs, outputs))
        if isinstance(self.returns, str):
            return by_name[self.returns]
        return tuple(by_name[n] for n in self.returns)

    def _remember_fast(self, values, loaded, launch, call):
        if loaded.compiled.cooperative:     # its residency check and stream order: launch()
            return
        if self.source.l2_window is not None:   # its window over a tensor: launch()
            return
        if self._fast is None:
            self._fast = fast_launcher_for(self, values)
            if self._fast is not None:
                self._call = self._fast.entry(self)
        fast = self._fast
        if fast is None or len(values) != self._nparams:
            return
        if fast.kinds != param_kinds(self, values):
            return
        # the driver (cuda.bindings) stays off `import tilejit`; loaded by now (a launch ran)
        from tilejit.runtime import cuda_driver
        outputs = None
        if self.outputs:
            if any(getattr(getattr(as_tensor_arg(o), "dtype", None), "packed", 1) > 1
                   for o in launch.outputs):
                return      # float4 outputs: their logical shape is not the bytes'
            outputs = _OutputMaker(self, launch.outputs)
        fast.remember(values, loaded.launcher, launch.grid,
                      loaded.compiled.launch_threads(launch.threads),
                      loaded.compiled.shared_bytes, cuda_driver.stream_function(call.device),
                      outputs, loaded.maps, launch.cluster)

    def compile(self, *args, target=None, arch=None, **kwargs) -> "CompiledKernelHandle":
        """Compile for the arguments' types without launching. With ``target="cuda"``
        and an ``arch``, works without a GPU (numpy arrays supply the types)."""
        spec = self._spec_without_launch(args, kwargs, target, arch)
        return CompiledKernelHandle(self, self._compiled_for(spec),
                                    simulated=spec.target.is_sim, spec=spec)

    def _compiled_for(self, spec):
        """The kernel compiled for ``spec`` without loading it: what ``check`` built or
        a call loaded (``tilejit.compile`` then ``get_kernel_source`` compile once), else
        compiled now."""
        built = self._built.get(spec)
        if built is not None:
            return built
        for (s, _), entry in list(self._cache.items()):
            if s == spec:
                return entry if spec.target.is_sim else entry.compiled
        return load_or_compile(self, spec)

    def _spec_without_launch(self, args, kwargs, target, arch):
        """The specialization ``compile`` and ``check`` work on: for ``target`` (the
        kernel's own, or where the arguments live; CUDA when an ``arch`` is given)."""
        values = host.scalar_views(self, self._bind(args, kwargs))
        chosen = target or self._env_target or self.target
        if chosen == "auto":
            chosen = "cuda" if arch or host.classify(self, values).device >= 0 else "sim"
        return self._prepare(values, target=chosen, arch=arch)[3]

    def check(self, *args, target=None, arch=None, **kwargs) -> None:
        """Compile now for the arguments' types, raising what compiling raises (the front
        end's errors, typing's); the kernel is kept for the first call whose
        specialization is this one. ``tilejit.compile`` of a ``T.prim_func`` whose shapes
        are all static calls it, where TileLang compiles."""
        spec = self._spec_without_launch(args, kwargs, target, arch)
        if spec.target.is_sim and not self._typed_for_simulation(spec):
            # the front end alone, as a simulated call of it checks
            from tilejit.compiler.pipeline import build_device_function
            build_device_function(self.source, spec)
            return
        if not any(s == spec for s, _ in self._cache):      # not compiled for a call yet
            with self._lock:
                if spec not in self._built:
                    self._built[spec] = load_or_compile(self, spec)


class _OutputMaker:
    """Allocates a cached launch's outputs: same shapes, dtypes and device as the
    first call of its signature (they depend only on what the signature fixes)."""

    def __init__(self, kernel, outputs):
        import torch
        self.specs = [(tuple(o.shape), o.dtype, o.device) for o in outputs]
        self.empty = torch.empty
        self.result = kernel._result

    def __call__(self):
        outs = [self.empty(shape, dtype=dtype, device=device)
                for shape, dtype, device in self.specs]
        extra, tensors = [], []
        for o in outs:
            pointer, shape, strides = o.data_ptr(), o.shape, o.stride()
            extra.append(pointer)
            extra.extend(shape)
            extra.extend(strides)
            tensors.append((pointer, shape, strides))   # for TMA maps of the outputs
        return self.result(outs), tuple(extra), tensors


class CompiledKernelHandle:
    """What ``kernel.compile(...)`` returns: the device code and a callable."""

    def __init__(self, kernel: KernelFunction, compiled, simulated: bool = False,
                 spec=None):
        self.kernel = kernel
        self.compiled = compiled
        self.simulated = simulated
        self.spec = spec            # the Specialization (save() writes it)
        self.shared_bytes = compiled.shared_bytes
        self._loaded = None

    def _device_code(self, what: str) -> str:
        if self.simulated:
            name = {"ptx": "PTX", "llvm_ir": "LLVM IR"}[what]
            raise RuntimeError(
                f"{self.kernel.__name__}: this handle was compiled for the simulator "
                f"(target 'sim'), which has no {name}; for PTX and LLVM IR compile for CUDA: "
                f"{self.kernel.__name__}.compile(..., target=\"cuda\", arch=\"sm_90a\") "
                "(works without a GPU)")
        return getattr(self.compiled, what)

    def save(self, path: str) -> None:
        """Write this kernel and specialization to ``path`` (added to what the file
        holds); ``tilejit.load(path)`` launches it without compiling (runtime/aot.py)."""
        # aot imports this module (a circle at load time otherwise)
        from tilejit.runtime import aot
        aot.save(self, path)

    @property
    def asm(self) -> str:
        """The AMDGPU assembly (target 'amdgpu')."""
        return self._amdgpu("asm")

    @property
    def code_object(self) -> bytes:
        """The HSA code object, an ELF shared object HIP's hipModuleLoadData takes (target
        'amdgpu')."""
        return self._amdgpu("code_object")

    def _amdgpu(self, what):
        if not self.compiled.code_object:
            raise RuntimeError(f"{self.kernel.__name__}: .{what} is AMDGPU's; this handle was "
                               "compiled for another target (compile(..., target='amdgpu', "
                               "arch='gfx942'))")
        return getattr(self.compiled, what)

    @property
    def ptx(self) -> str:
        return self._device_code("ptx")

    @property
    def llvm_ir(self) -> str:
        return self._device_code("llvm_ir")

    def _module(self):
        if self._loaded is None:
            # the driver (cuda.bindings) only when the figures are asked for
            from tilejit.runtime import cuda_driver
            if not cuda_driver.cuda_available():
                raise RuntimeError("num_regs and spills are reported by the CUDA driver when "
                                   "it loads the kernel, and this machine has no CUDA device; "
                                   "`ptxas -v` on .ptx gives the same figures")
            self._loaded = _Loaded(self.compiled, 0)
        return self._loaded

    @property
    def num_regs(self) -> int:
        return self._module().module.num_regs

    @property
    def spills(self) -> int:
        return self._module().module.local_bytes

    def __call__(self, *args, **kwargs):
        return self.kernel(*args, **kwargs)


class _Loaded:
    """A compiled kernel loaded on one device, with its launcher."""

    def __init__(self, compiled, device: int, image: bytes | None = None):
        # the driver (cuda.bindings) only when a kernel is loaded on a device
        from tilejit.runtime import cuda_driver
        self.compiled = compiled
        # ``image``: a cubin of the kernel for this device's arch (a saved kernel's), loaded
        # instead of the PTX, which the driver would compile
        self.image = "cubin" if image else "ptx"
        self.module = cuda_driver.CudaModule(image or compiled.ptx, compiled.name,
                                             max(device, 0), compiled.shared_bytes)
        self.launcher = cuda_driver.Launcher(self.module, compiled.param_formats)
        self.device = device
        self.maps = tensor_map_maker(compiled.tensor_maps)
        # a cooperative kernel (T.sync_grid): the blocks one launch may have, per (threads,
        # shared bytes); the stream of its last launch (launches on two streams at once
        # would share the module's barrier word: the second waits for the first)
        self.resident = {}
        self.last_stream = None

    def launch(self, launch: host.LaunchConfig, runtime, l2_window=None):
        # the driver (cuda.bindings) stays off `import tilejit`; loaded by __init__ above
        from tilejit.runtime import cuda_driver
        values, torch_tensor = flat_values(runtime)
        grid = launch.grid
        if self.maps is not None:
            values += self.maps(*[(v.ptr, v.shape, v.strides) if isinstance(v, TensorArg)
                                  else None for _, v in runtime])
        stream, others = launch_stream([v for _, v in runtime if isinstance(v, TensorArg)],
                                       self.device, torch_tensor)
        if others:
            cuda_driver.wait_for(stream, others)
        block = (self.compiled.launch_threads(launch.threads), 1, 1)
        if self.compiled.cooperative:
            self._launch_cooperative(launch, block, stream, values)
            return
        if launch.cluster != (1, 1, 1):
            self.launcher.launch_cluster(grid, block, self.compiled.shared_bytes, stream,
                                         tuple(values), launch.cluster)
            return
        if l2_window is not None:       # T.annotate_l2_hit_ratio({A: r}): a window over A
            name, ratio = l2_window
            tensor = dict(runtime).get(name)
            if isinstance(tensor, TensorArg) and tensor.ptr and tensor.span_bytes:
                self.launcher.launch_l2_window(grid, block, self.compiled.shared_bytes,
                                               stream, tuple(values),
                                               (tensor.ptr, tensor.span_bytes, ratio))
                return
        self.launcher.launch(grid, block, self.compiled.shared_bytes, stream, tuple(values))

    def _launch_cooperative(self, launch, block, stream, values):
        # the driver (cuda.bindings) stays off `import tilejit`; loaded by __init__
        from tilejit.runtime import cuda_driver
        name = self.compiled.name
        if launch.cluster != (1, 1, 1):
            raise ValueError(f"kernel {name}: T.sync_grid in a kernel launched in clusters "
                             f"(cluster_dims={launch.cluster}) is not built")
        shared = self.compiled.shared_bytes
        found = self.resident.get((block[0], shared))
        if found is None:
            found = self.resident[(block[0], shared)] = self.module.resident_blocks(block[0],
                                                                                   shared)
        per_sm, sms = found
        blocks = launch.grid[0] * launch.grid[1] * launch.grid[2]
        if blocks > per_sm * sms:
            raise ValueError(
                f"kernel {name} uses T.sync_grid, so all its blocks must be resident on the "
                f"GPU at once (a cooperative launch), and device {max(self.device, 0)} holds "
                f"at most {per_sm * sms}: {per_sm} block(s) of {block[0]} threads per SM "
                f"(with {self.module.num_regs} registers a thread and {shared} bytes of "
                f"dynamic shared memory) times {sms} SMs; the launch has grid "
                f"{tuple(launch.grid)} = {blocks} blocks. Launch at most {per_sm * sms} and "
                f"loop over the work in each block")
        if self.last_stream is not None and self.last_stream != stream:
            cuda_driver.ensure_context(max(self.device, 0))  # the event calls need one
            cuda_driver.wait_for(stream, [self.last_stream])
        self.last_stream = stream
        self.launcher.launch_cluster(launch.grid, block, shared, stream, tuple(values),
                                     (1, 1, 1), cooperative=True)


class _HipLoaded:
    """A compiled AMDGPU kernel loaded on one ROCm device through HIP's module API
    (``hip_driver.py``), with its launcher."""

    def __init__(self, compiled, device: int):
        # HIP (ctypes on libamdhip64) only when an AMDGPU kernel is launched
        from tilejit.runtime import hip_driver
        self.compiled = compiled
        self.device = device
        self.module = hip_driver.HipModule(compiled.code_object, compiled.name, max(device, 0))
        self.launcher = hip_driver.HipLauncher(self.module, compiled.param_formats)

    def launch(self, launch: host.LaunchConfig, runtime, l2_window=None):
        values, torch_tensor = flat_values(runtime)
        # the current stream of the tensors' device (on ROCm torch, a hipStream_t)
        stream = 0 if torch_tensor is None else \
            sys.modules["torch"].cuda.current_stream(torch_tensor.device).cuda_stream
        self.launcher.launch(launch.grid, launch.threads, stream, tuple(values),
                             self.compiled.shared_bytes)


def flat_values(runtime) -> tuple[list, object]:
    """The launch's flat parameter values (a tensor as its pointer, shape and strides),
    and the first torch tensor among the arguments (None if there is none)."""
    values, torch_tensor = [], None
    for _, value in runtime:
        if isinstance(value, TensorArg):
            values.append(value.ptr)
            values.extend(value.shape)
            values.extend(value.strides)
            if value.is_torch and torch_tensor is None:
                torch_tensor = value.obj
        else:
            values.append(value)
            if torch_tensor is None and getattr(value, "torch", None) is not None:
                torch_tensor = value.torch      # a T.ptr argument given as a torch tensor
    return values, torch_tensor


def rocm_tensors() -> bool:
    """Whether the process's torch is a ROCm build, whose "cuda" tensors live on AMD GPUs
    (``torch.version.hip``)."""
    torch = sys.modules.get("torch")
    return torch is not None and bool(getattr(getattr(torch, "version", None), "hip", None))


def rocm_arch(device: int) -> str:
    """The gfx arch of a ROCm device, from torch (``gcnArchName``, features dropped); torch
    is loaded (``rocm_tensors``)."""
    props = sys.modules["torch"].cuda.get_device_properties(device)
    name = getattr(props, "gcnArchName", "") or "gfx942"
    return name.split(":")[0]


def tensor_map_maker(tensor_maps):
    """None, or f(*arguments) → the kernel's hidden TMA tensor-map parameters, where
    the arguments are the run-time ones in order, each tensor as (pointer, shape,
    strides) (``CompiledKernel.tensor_maps`` names each map's argument position)."""
    if not tensor_maps:
        return None
    # only for a kernel that uses TMA; MAPS is looked up here, when a kernel is loaded,
    # not at import (tests replace tensor_maps.MAPS)
    from tilejit.runtime.tensor_maps import MAPS, Box
    # per map, what this kernel already got, keyed on the argument's (pointer, shape,
    # strides) as they come: a hit is one dict lookup (the launch path of a cached
    # kernel is the hot one), a miss asks the shared cache, which encodes
    wanted = [(position, Box(dtype, size, tuple(extents), swizzle), {})
              for position, dtype, size, extents, swizzle in tensor_maps]

    def maps(*arguments):
        out = []
        for position, box, seen in wanted:
            key = arguments[position]
            found = seen.get(key)
            if found is None:
                if len(seen) >= 256:
                    seen.clear()
                found = seen[key] = MAPS.get(*key, box)
            out.append(found)
        return out
    return maps


def default_arch() -> str:
    """The arch a compile without an explicit one is for: device 0's, or
    ``target.DEFAULT_CUDA_ARCH`` on a machine without a CUDA device."""
    # the driver (cuda.bindings) only when the default arch is asked for
    from tilejit.runtime import cuda_driver
    return cuda_driver.device_arch(0) if cuda_driver.cuda_available() else DEFAULT_CUDA_ARCH


def kernel(func=None, *, target="auto", arch=None, fast_math=False, debug=False):
    """Decorate a tile kernel. See SPEC: ``@tilejit.kernel`` or
    ``@tilejit.kernel(target=..., arch=..., fast_math=..., debug=...)``."""
    def wrap(f):
        # (an option given by position, `@tilejit.kernel("cuda")`: it failed inside)
        if not callable(f) or not hasattr(f, "__code__"):
            raise TypeError(f"@tilejit.kernel takes a function; its options are keywords, "
                            f"e.g. target=\"cuda\"; got {type(f).__name__} {f!r:.80}")
        return kernel_function(f, target=target, arch=arch, fast_math=fast_math, debug=debug)
    return wrap(func) if func is not None else wrap


def kernel_function(func, source_tree=None, **options):
    """A ``KernelFunction``, or a ``KernelSequence`` for a function of several launches or
    with global scratch tensors (``runtime/sequence.py``)."""
    source_tree = _with_alloc_buffers_written(func, source_tree)
    if is_sequence(func, source_tree):
        # a sequence copies its whole tree per launch (a deep host expression recurses)
        with syntax.deep_trees():
            return KernelSequence(func, source_tree=source_tree, **options)
    return KernelFunction(func, source_tree=source_tree, **options)


def _with_alloc_buffers_written(func, source_tree):
    """The kernel's tree with TVM's ``T.alloc_buffer`` calls written as the allocations
    their scopes name and ``T.alloc_global`` moved out of a ``with T.Kernel`` block
    (``frontend/tir_buffers.py``), or ``source_tree`` as it is when it has neither
    (None: the kernel reads its own source)."""
    found = source_tree
    if found is None:       # the file's shared tree, copied only to be rewritten
        try:
            found = function_def_from_file(func, copy_tree=False)
        except (TypeError, AttributeError):
            found = None
    spelled = spelled_names(found[1]) if found is not None else set()
    if not spelled & {"alloc_buffer", "alloc_global"}:
        return source_tree
    if source_tree is None:
        found = function_def_from_file(func)
    namespace = function_namespace(func)
    if "alloc_buffer" in spelled:
        rewrite_alloc_buffers(found[0], found[1], namespace)
    hoist_global_allocations(found[0], found[1], namespace)
    return found


def _device_allocation(address: int):
    """(start, bytes) of the CUDA allocation holding ``address``, or None: how the
    simulator on a GPU machine reads a T.make_tensor of device memory (sim/views.py)."""
    # (the driver's bindings only when a simulated kernel makes a tensor at an address)
    from tilejit.runtime.cuda_driver import address_allocation
    return address_allocation(address)
