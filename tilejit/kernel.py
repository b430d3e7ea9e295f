"""``@tilejit.kernel``: binding arguments, choosing the target, the specialization
cache, and the launch. The hot path of a cached kernel is ``KernelFunction.__call__``."""
from __future__ import annotations

import os
import threading

from .compiler import CompiledKernel, Specialization, compile_kernel
from .errors import CompileError
from .frontend.rewrite import LAUNCH_CONFIG, host_tree, materialize
from .frontend.signature import (TensorArg, as_tensor_arg, is_compile_time_value,
                                 scalar_key)
from .frontend.source import expected_ranks, parse_kernel
from .frontend.validate import check_supported
from .language.dtypes import as_dtype
from .typing.types import GlobalTensorType, numba_type, weak_float

_TARGETS = ("auto", "cuda", "sim", "amdgpu")


class LaunchConfig:
    __slots__ = ("grid", "threads")

    def __init__(self, *grid, threads=128, prelude=None):
        from .language import Kernel
        k = Kernel(*grid, threads=threads)
        self.grid = k.grid + (1,) * (3 - len(k.grid))
        self.threads = k.threads


class KernelFunction:
    def __init__(self, func, target="auto", arch=None, fast_math=False, debug=False):
        if target not in _TARGETS:
            raise ValueError(f"@tilejit.kernel target: expected one of {_TARGETS}, got {target!r}")
        self.func = func
        self.target = target
        self.arch = arch
        self.fast_math = fast_math
        self.debug = debug
        self.source = parse_kernel(func)
        check_supported(self.source)
        self.__name__ = func.__name__
        self.__doc__ = func.__doc__
        self.__wrapped__ = func
        self._ranks = expected_ranks(self.source)
        ns = dict(self.source.namespace)
        ns[LAUNCH_CONFIG] = LaunchConfig
        self._host = materialize(self.source, host_tree(self.source), ns)
        self._cache: dict = {}
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
        self._env_target = os.environ.get("TILEJIT_TARGET")

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

    def _classify(self, values):
        """(host values, runtime (name, value), constexprs, type key, devices)."""
        host, runtime, constexprs, key = [], [], [], []
        devices = {}
        for name, value in zip(self.source.params, values):
            if name in self.source.constexpr_params or is_compile_time_value(value):
                if name not in self.source.constexpr_params and isinstance(value, tuple):
                    pass
                constexprs.append((name, _constexpr_value(name, value)))
                host.append(value)
                key.append(("const", name, _hashable(value)))
                continue
            tensor = as_tensor_arg(value)
            if tensor is not None:
                self._check_tensor(name, tensor)
                devices.setdefault(tensor.device, name)
                runtime.append((name, tensor))
                host.append(tensor)
                key.append(tensor.type_key())
            else:
                key.append(scalar_key(name, value))
                runtime.append((name, value))
                host.append(value)
        if len(devices) > 1:
            names = ", ".join(f"{n!r} on {_device_name(d)}" for d, n in devices.items())
            raise ValueError(f"{self.__name__}(): arguments live on different devices ({names});"
                             " move them to one device")
        device = next(iter(devices), -1)
        return host, runtime, tuple(constexprs), tuple(key), device

    def _check_tensor(self, name, tensor: TensorArg):
        rank = self._ranks.get(name)
        if rank is not None and rank[0] != tensor.ndim:
            raise ValueError(
                f"argument {name!r}: expected a {rank[0]}-d tensor (the kernel uses {name} "
                f"that way at line {rank[1]}), got a {tensor.ndim}-d tensor of shape "
                f"{tuple(tensor.shape)}")

    # -- targets ---------------------------------------------------------------------
    def _target_for(self, device: int, override=None) -> str:
        target = override or self._env_target or self.target
        if target == "auto":
            return "cuda" if device >= 0 else "sim"
        if target == "cuda" and device < 0:
            raise ValueError(f"{self.__name__}(): target 'cuda' needs the tensors on a CUDA "
                             "device; they are in host memory (use target='sim' to simulate)")
        if target == "sim" and device >= 0:
            raise ValueError(f"{self.__name__}(): the simulator runs on host memory; the "
                             "tensors are on a CUDA device")
        if target == "amdgpu":
            raise CompileError("target 'amdgpu' is not available yet: its code objects need a "
                               "link step this build does not have")
        return target

    def _arch(self, device: int) -> str:
        if self.arch:
            return self.arch
        from .targets import cuda_driver
        return cuda_driver.device_arch(max(device, 0))

    # -- compile ---------------------------------------------------------------------
    def _specialize(self, runtime, constexprs, threads, arch) -> Specialization:
        argtypes = []
        for name, value in runtime:
            if isinstance(value, TensorArg):
                argtypes.append(GlobalTensorType(value.dtype, value.ndim,
                                                 value.contiguous_last, value.aligned))
            else:
                kind = scalar_key(name, value)[1]
                argtypes.append(weak_float if kind == "weak_float" else
                                numba_type(as_dtype(kind)))
        return Specialization(tuple(argtypes), tuple(n for n, _ in runtime), constexprs,
                              threads, arch)

    def _compiled(self, key, runtime, constexprs, threads, arch, device):
        full_key = (key, threads, arch, device)
        entry = self._cache.get(full_key)
        if entry is None:
            with self._lock:
                entry = self._cache.get(full_key)
                if entry is None:
                    spec = self._specialize(runtime, constexprs, threads, arch)
                    compiled = compile_kernel(self.source, spec)
                    entry = _Loaded(compiled, device) if arch != "sim" else compiled
                    self._cache[full_key] = entry
        return entry

    def __call__(self, *args, **kwargs):
        if not kwargs and self._first_default <= len(args) <= self._nparams:
            values = args + self._default_values[len(args) - self._first_default:] \
                if len(args) < self._nparams else args
            fast = self._fast
            if fast is not None and fast.launch(*values):
                return None
        else:
            values = self._bind(args, kwargs)
        host, runtime, constexprs, key, device = self._classify(values)
        target = self._target_for(device)
        launch = self._host(*host)
        if target == "sim":
            from .sim.runner import run_simulation
            self._compiled(key, runtime, constexprs, launch.threads, "sim", -1)
            run_simulation(self, values, constexprs, launch)
            return None
        loaded = self._compiled(key, runtime, constexprs, launch.threads,
                                self._arch(device), device)
        loaded.launch(launch, runtime)
        self._remember_fast(values, loaded, launch, device)
        return None

    def _remember_fast(self, values, loaded, launch, device):
        from .fastlaunch import fast_launcher_for, param_kinds
        if self._fast is None:
            self._fast = fast_launcher_for(self, values)
        fast = self._fast
        if fast is None or len(values) != self._nparams or 0 in launch.grid:
            return
        if fast.kinds != param_kinds(self, values):
            return
        from .targets import cuda_driver
        fast.remember(values, loaded.launcher, launch.grid, (launch.threads, 1, 1),
                      loaded.compiled.shared_bytes, cuda_driver.stream_getter(device))

    def compile(self, *args, target=None, arch=None, **kwargs) -> "CompiledKernelHandle":
        """Compile for the arguments' types without launching. With ``target="cuda"``
        and an ``arch``, works without a GPU (numpy arrays supply the types)."""
        values = self._bind(args, kwargs)
        host, runtime, constexprs, key, device = self._classify(values)
        chosen = target or self.target
        if chosen == "auto":
            chosen = "cuda" if device >= 0 or arch else "sim"
        launch = self._host(*host)
        arch = "sim" if chosen == "sim" else (arch or self._arch(device))
        spec = self._specialize(runtime, constexprs, launch.threads, arch)
        return CompiledKernelHandle(self, compile_kernel(self.source, spec))


class CompiledKernelHandle:
    """What ``kernel.compile(...)`` returns: the device code and a callable."""

    def __init__(self, kernel: KernelFunction, compiled: CompiledKernel):
        self.kernel = kernel
        self.compiled = compiled
        self.ptx = compiled.ptx
        self.llvm_ir = compiled.llvm_ir
        self.shared_bytes = compiled.shared_bytes
        self._loaded = None

    def _module(self):
        if self._loaded is None:
            from .targets import cuda_driver
            self._loaded = _Loaded(self.compiled, 0 if cuda_driver.cuda_available() else -1)
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

    def __init__(self, compiled: CompiledKernel, device: int):
        from .targets import cuda_driver
        self.compiled = compiled
        self.module = cuda_driver.CudaModule(compiled.ptx, compiled.name, max(device, 0),
                                             compiled.shared_bytes)
        self.launcher = cuda_driver.Launcher(self.module, compiled.param_formats)
        self.device = device

    def launch(self, launch: LaunchConfig, runtime):
        from .targets import cuda_driver
        values = []
        torch_args = False
        for _, value in runtime:
            if isinstance(value, TensorArg):
                values.append(value.ptr)
                values.extend(value.shape)
                values.extend(value.strides)
                torch_args = torch_args or value.is_torch
            else:
                values.append(value)
        grid = launch.grid
        if 0 in grid:
            return
        stream = cuda_driver.current_stream(self.device, torch_args)
        self.launcher.launch(grid, (launch.threads, 1, 1), self.compiled.shared_bytes,
                             stream, tuple(values))


def _constexpr_value(name, value):
    if type(value).__module__ == "torch" and type(value).__name__ == "dtype":
        return as_dtype(value)
    if isinstance(value, (int, float, bool, str, tuple)) or hasattr(value, "bits"):
        return value
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"argument {name!r}: a T.constexpr must be an int, float, bool, str, "
                    f"tuple or dtype, got {type(value).__name__}")


def _hashable(value):
    try:
        hash(value)
        return (type(value).__name__, value)
    except TypeError:
        return (type(value).__name__, repr(value))


def _device_name(device: int) -> str:
    return "the host" if device < 0 else f"cuda:{device}"


def kernel(func=None, *, target="auto", arch=None, fast_math=False, debug=False):
    """Decorate a tile kernel. See SPEC: ``@tilejit.kernel`` or
    ``@tilejit.kernel(target=..., arch=..., fast_math=..., debug=...)``."""
    def wrap(f):
        return KernelFunction(f, target=target, arch=arch, fast_math=fast_math, debug=debug)
    return wrap(func) if func is not None else wrap
