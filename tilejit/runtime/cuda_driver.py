"""Thin, low-overhead wrapper over ``cuda.bindings.driver``: load PTX, launch kernels.

No nvcc / NVRTC: PTX is JIT-compiled by the driver (cuModuleLoadData). torch is optional
and never imported at module import time.
"""
from __future__ import annotations

import ctypes
import struct
import sys

try:  # importing the bindings does not load libcuda; that happens on the first driver call
    from cuda.bindings import driver as _drv
except Exception:  # pragma: no cover - depends on the environment
    _drv = None

__all__ = [
    "CudaError", "cuda_available", "device_count", "device_arch", "device_limits",
    "ensure_context", "CudaModule", "Launcher", "layout_params", "tensor_pointer",
    "current_stream", "synchronize", "alloc", "free", "memcpy_htod", "memcpy_dtoh",
]

_DEFAULT_SHARED_LIMIT = 48 * 1024  # above this, dynamic smem needs an explicit per-function opt-in


class CudaError(RuntimeError):
    """A driver call failed; ``call`` is the call's name, ``code`` the CUresult value."""

    def __init__(self, call: str, code: int, detail: str = ""):
        self.call, self.code = call, int(code)
        msg = f"{call} failed: {_error_name(code)}"
        super().__init__(f"{msg} ({detail})" if detail else msg)


def _error_name(code) -> str:
    try:
        err, name = _drv.cuGetErrorName(_drv.CUresult(int(code)))
        if not err and name:
            return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:
        pass
    try:
        return _drv.CUresult(int(code)).name
    except Exception:
        return f"CUresult {int(code)}"


def _check(result, what: str):
    """Raise CudaError if ``result[0]`` (the CUresult) is non-zero; return the remaining outputs."""
    if result[0]:
        raise CudaError(what, result[0])
    if len(result) == 2:
        return result[1]
    return result[1:] if len(result) > 2 else None


# ---------------------------------------------------------------------------- devices / contexts
_available: bool | None = None
_arch_cache: dict[int, str] = {}
_limits_cache: dict[int, dict] = {}
_primary: dict[int, tuple] = {}  # ordinal -> (CUcontext, int handle)


def cuda_available() -> bool:
    """True if the driver loads, cuInit(0) succeeds and at least one device exists. Never raises."""
    global _available
    if _available is None:
        try:
            _available = (_drv is not None and not _drv.cuInit(0)[0]
                          and _check(_drv.cuDeviceGetCount(), "cuDeviceGetCount") > 0)
        except Exception:  # ImportError, pathfinder's DynamicLibNotFoundError, CudaError, ...
            _available = False
    return _available


def _require() -> None:
    if not cuda_available():
        raise RuntimeError("CUDA driver/device not available")


def device_count() -> int:
    return _check(_drv.cuDeviceGetCount(), "cuDeviceGetCount") if cuda_available() else 0


def _device(ordinal: int):
    _require()
    return _check(_drv.cuDeviceGet(ordinal), "cuDeviceGet")


def _attr(dev, name: str) -> int:
    attr = getattr(_drv.CUdevice_attribute, "CU_DEVICE_ATTRIBUTE_" + name)
    return _check(_drv.cuDeviceGetAttribute(attr, dev), "cuDeviceGetAttribute")


# devices whose own arch-specific features (wgmma, setmaxnreg) a default compile uses
_ARCH_SPECIFIC = {"sm_90": "sm_90a"}


def device_arch(ordinal: int = 0) -> str:
    """The arch a kernel is compiled for by default on device ``ordinal``: ``"sm_90a"``
    for an H100/H200 (compute capability 9.0; code for it runs only on such a device,
    which is the one asked about), ``"sm_80"`` for an A100."""
    if ordinal not in _arch_cache:
        dev = _device(ordinal)
        major = _attr(dev, "COMPUTE_CAPABILITY_MAJOR")
        arch = f"sm_{major}{_attr(dev, 'COMPUTE_CAPABILITY_MINOR')}"
        _arch_cache[ordinal] = _ARCH_SPECIFIC.get(arch, arch)
    return _arch_cache[ordinal]


def device_limits(ordinal: int = 0) -> dict:
    if ordinal not in _limits_cache:
        dev = _device(ordinal)
        _limits_cache[ordinal] = {
            "max_threads_per_block": _attr(dev, "MAX_THREADS_PER_BLOCK"),
            "max_shared_per_block": _attr(dev, "MAX_SHARED_MEMORY_PER_BLOCK"),  # 48 KiB default
            "max_shared_per_block_optin": _attr(dev, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
            "num_sms": _attr(dev, "MULTIPROCESSOR_COUNT"),
            "max_regs_per_block": _attr(dev, "MAX_REGISTERS_PER_BLOCK"),
        }
    return dict(_limits_cache[ordinal])


def driver_version() -> tuple[int, int] | None:
    """The installed CUDA driver's version as (major, minor), from ``cuDriverGetVersion``
    (12080 is 12.8: the newest CUDA the driver supports); None when there is no driver
    (or no bindings). Needs no device and no ``cuInit``. Never raises."""
    if _drv is None:
        return None
    try:
        version = _check(_drv.cuDriverGetVersion(), "cuDriverGetVersion")
    except Exception:   # pathfinder's DynamicLibNotFoundError (no libcuda), CudaError, ...
        return None
    return int(version) // 1000, int(version) % 1000 // 10


def device_name(ordinal: int = 0) -> str:
    """The device's name as the driver reports it (``cuDeviceGetName``)."""
    name = _check(_drv.cuDeviceGetName(256, _device(ordinal)), "cuDeviceGetName")
    if isinstance(name, bytes):
        name = name.split(b"\0", 1)[0].decode(errors="replace")
    return str(name).strip()


def ensure_context(ordinal: int = 0):
    """Retain the device's primary context (the one the CUDA runtime / torch use) and make it
    current on this thread if it is not. The retain is cached (never released: process lifetime);
    an already-current context costs one cuCtxGetCurrent."""
    entry = _primary.get(ordinal)
    if entry is None:
        ctx = _check(_drv.cuDevicePrimaryCtxRetain(_device(ordinal)), "cuDevicePrimaryCtxRetain")
        entry = _primary[ordinal] = (ctx, int(ctx))
    cur = _check(_drv.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if cur is None or int(cur) != entry[1]:
        _check(_drv.cuCtxSetCurrent(entry[0]), "cuCtxSetCurrent")
    return entry[0]


def synchronize(ordinal: int = 0) -> None:
    ensure_context(ordinal)
    _check(_drv.cuCtxSynchronize(), "cuCtxSynchronize")


# ---------------------------------------------------------------------------- modules
class CudaModule:
    """A PTX module (or a cubin from ``link_cubin``) loaded into the primary context of
    device ``ordinal``, with one kernel."""

    def __init__(self, ptx: str | bytes, kernel_name: str, ordinal: int = 0,
                 dynamic_shared_bytes: int = 0):
        self.ordinal = ordinal
        self.kernel_name = kernel_name
        self._module = None
        ensure_context(ordinal)
        optin = device_limits(ordinal)["max_shared_per_block_optin"]
        if dynamic_shared_bytes > optin:
            raise ValueError(f"kernel {kernel_name!r} needs {dynamic_shared_bytes} bytes of "
                             f"dynamic shared memory; device {ordinal} allows at most {optin} "
                             "per block")
        # the driver reads PTX as a NUL-terminated C string; a cubin (ELF) as it is
        image = ptx if is_cubin(ptx) else (
            (ptx.encode() if isinstance(ptx, str) else bytes(ptx)).rstrip(b"\0") + b"\0")
        err, module = _drv.cuModuleLoadData(image)
        if err:
            raise CudaError("cuModuleLoadData", err, _jit_error_log(image))
        self._module = module
        self.function = _check(_drv.cuModuleGetFunction(module, kernel_name.encode()),
                               "cuModuleGetFunction")
        fa = _drv.CUfunction_attribute
        get = self._func_attr
        self.num_regs = get(fa.CU_FUNC_ATTRIBUTE_NUM_REGS)
        self.local_bytes = get(fa.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)
        self.max_threads = get(fa.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
        static_shared = get(fa.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)
        if static_shared + dynamic_shared_bytes > optin:  # static + dynamic share one limit
            raise ValueError(f"kernel {kernel_name!r} needs {static_shared} static + "
                             f"{dynamic_shared_bytes} dynamic bytes of shared memory; device "
                             f"{ordinal} allows at most {optin} per block")
        if dynamic_shared_bytes > _DEFAULT_SHARED_LIMIT:
            attr = fa.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            _check(_drv.cuFuncSetAttribute(self.function, attr, dynamic_shared_bytes),
                   "cuFuncSetAttribute")

    def resident_blocks(self, threads: int, dynamic_shared_bytes: int) -> tuple[int, int]:
        """(blocks of ``threads`` that one SM holds at once with this kernel's registers
        and shared memory, the device's SM count): what a cooperative launch may have."""
        per_sm = _check(_drv.cuOccupancyMaxActiveBlocksPerMultiprocessor(
            self.function, threads, dynamic_shared_bytes),
            "cuOccupancyMaxActiveBlocksPerMultiprocessor")
        return int(per_sm), device_limits(self.ordinal)["num_sms"]

    def _func_attr(self, attr) -> int:
        return _check(_drv.cuFuncGetAttribute(attr, self.function), "cuFuncGetAttribute")

    def __del__(self):
        module, self._module = getattr(self, "_module", None), None
        if module is not None and _drv is not None:
            try:
                _drv.cuModuleUnload(module)
            except Exception:  # interpreter shutdown / driver already torn down
                pass


def is_cubin(image) -> bool:
    """Whether ``image`` is a cubin (an ELF image), not PTX text."""
    return isinstance(image, (bytes, bytearray)) and bytes(image[:4]) == b"\x7fELF"


def link_cubin(ptx: str, ordinal: int = 0) -> bytes:
    """The driver's JIT of ``ptx`` for device ``ordinal``: a cubin that a device of the
    same arch loads without compiling (cuLinkCreate, cuLinkAddData, cuLinkComplete)."""
    ensure_context(ordinal)
    state = _check(_drv.cuLinkCreate(0, [], []), "cuLinkCreate")
    try:
        text = ptx.encode().rstrip(b"\0") + b"\0"
        err, = _drv.cuLinkAddData(state, _drv.CUjitInputType.CU_JIT_INPUT_PTX, text,
                                  len(text), b"kernel.ptx", 0, [], [])
        if err:
            raise CudaError("cuLinkAddData", err, _jit_error_log(text))
        err, out, size = _drv.cuLinkComplete(state)
        if err:
            raise CudaError("cuLinkComplete", err)
        address = out.getPtr() if hasattr(out, "getPtr") else int(out)
        return ctypes.string_at(address, size)     # copied before the state is destroyed
    finally:
        _drv.cuLinkDestroy(state)


def _jit_error_log(image: bytes) -> str:
    """Re-run the load with an error-log buffer to recover ptxas' message (best effort)."""
    try:
        log = bytearray(8192)
        opt = _drv.CUjit_option
        opts = [opt.CU_JIT_ERROR_LOG_BUFFER, opt.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES]
        err, module = _drv.cuModuleLoadDataEx(image, 2, opts, [log, len(log)])
        if not err:
            _drv.cuModuleUnload(module)
        return bytes(log).split(b"\0", 1)[0].decode(errors="replace").strip()
    except Exception:
        return ""


# ---------------------------------------------------------------------------- launching
_PARAM_SIZES = {"Q": 8, "q": 8, "d": 8, "i": 4, "I": 4, "f": 4,
                "h": 2, "H": 2, "e": 2, "b": 1, "B": 1, "?": 1, "T": 128}
# kinds that are not one struct character: a TMA tensor map, 128 bytes aligned to 64
_PARAM_FORMATS = {"T": ("128s", 64)}


def layout_params(param_kinds) -> tuple[struct.Struct, list[int]]:
    """One little-endian Struct with 'x' padding so every parameter sits at its natural alignment,
    plus the byte offset of each parameter."""
    fmt, offsets, pos = ["<"], [], 0
    for kind in param_kinds:
        size = _PARAM_SIZES.get(kind)
        if size is None:
            raise ValueError(f"unknown kernel parameter kind {kind!r}; "
                             f"expected one of {''.join(_PARAM_SIZES)}")
        code, align = _PARAM_FORMATS.get(kind, (kind, size))
        pad = -pos % align
        if pad:
            fmt.append(f"{pad}x")
        pos += pad
        offsets.append(pos)
        fmt.append(code)
        pos += size
    return struct.Struct("".join(fmt)), offsets


class Launcher:
    """Launches ``module.function`` with parameters packed into one persistent buffer.

    Not thread-safe by design: the parameter buffer is shared. Sequential reuse is safe because
    cuLaunchKernel copies the parameter values when it is called (not when the kernel runs).
    """

    __slots__ = ("module", "param_kinds", "offsets", "_struct", "_pack", "_buf", "_view", "_ptrs",
                 "_params_addr", "_func", "_cu_launch", "_ordinal", "_cluster_launches")

    def __init__(self, module: CudaModule, param_kinds):
        self.module = module
        self.param_kinds = list(param_kinds)
        self._struct, self.offsets = layout_params(self.param_kinds)
        # 64-byte aligned (a tensor map's alignment): every parameter is naturally aligned
        # in host memory
        self._buf = ctypes.create_string_buffer(max(self._struct.size, 8) + 64)
        shift = -ctypes.addressof(self._buf) % 64
        self._view = memoryview(self._buf).cast("B")[shift:]
        self._pack = self._struct.pack_into
        base = ctypes.addressof(self._buf) + shift
        n = len(self.offsets)
        # kernelParams = void*[n], entry i -> parameter i. cuda.bindings takes a plain int as an
        # already-built void** (no per-call marshalling); the driver copies the values at launch.
        self._ptrs = (ctypes.c_void_p * max(n, 1))(*[base + off for off in self.offsets])
        self._params_addr = ctypes.addressof(self._ptrs) if n else 0
        self._func = module.function
        self._ordinal = module.ordinal
        self._cu_launch = _drv.cuLaunchKernel
        self._cluster_launches = {}

    def parts(self):
        """(pack_into, buffer view, launch, function, kernelParams address): what a
        generated launch path (``tilejit/runtime/fastlaunch.py``) calls directly.
        ``launch`` takes cuLaunchKernel's eleven arguments (the stream an int handle, 0
        for the legacy default stream) and returns the CUresult as a 1-tuple, as
        cuda.bindings does. (cuda.bindings' own function: a ctypes call of libcuda's
        cuLaunchKernel with ready-made pointer objects measured 5.74 µs a call on the
        H200's host against the bindings' 4.83, 2026-12-03.)"""
        return self._pack, self._view, self._cu_launch, self._func, self._params_addr

    def launch(self, grid, block, shared_bytes, stream, values) -> None:
        """Hot path. ``stream`` is an int handle (0 = legacy default stream) or a CUstream."""
        self._pack(self._view, 0, *values)
        gx, gy, gz = grid
        bx, by, bz = block
        # stream 0 goes as None (the bindings' cheapest path to a NULL CUstream); `extra` is typed
        # void_ptr in cuda.bindings 13.x, so it must be the int 0 (None raises TypeError).
        err, = self._cu_launch(self._func, gx, gy, gz, bx, by, bz, shared_bytes, stream or None,
                               self._params_addr, 0)
        if err:  # CUresult is an int subclass and CUDA_SUCCESS == 0: no enum lookup needed
            self._on_error(err, grid, block, shared_bytes, stream)

    def launch_cluster(self, grid, block, shared_bytes, stream, values, cluster,
                       cooperative=False) -> None:
        """A launch in thread block clusters of ``cluster`` (3 dims; ``T.ClusterKernel``),
        or a cooperative one (``T.sync_grid``: the driver runs every block at once or
        refuses the launch)."""
        self._pack(self._view, 0, *values)
        gx, gy, gz = grid
        bx, by, bz = block
        self.cluster_launch(cluster, cooperative)(self._func, gx, gy, gz, bx, by, bz,
                                                  shared_bytes, stream, self._params_addr, 0)

    def launch_l2_window(self, grid, block, shared_bytes, stream, values, window) -> None:
        """A launch whose L2 access policy window is ``window`` = (address, bytes, hit
        ratio): that fraction of the lines it touches in the range persist in L2's
        set-aside (``T.annotate_l2_hit_ratio``), the rest stream; the window holds for
        this launch only. The set-aside is raised to the window's bytes, at most the
        device's (``persisting_l2``), and the window cut to the device's largest."""
        self._pack(self._view, 0, *values)
        address, size, ratio = window
        set_aside, largest = persisting_l2(self._ordinal, size)
        config = _drv.CUlaunchConfig()
        config.gridDimX, config.gridDimY, config.gridDimZ = grid
        config.blockDimX, config.blockDimY, config.blockDimZ = block
        config.sharedMemBytes = shared_bytes
        config.hStream = stream or 0
        attribute = _drv.CUlaunchAttribute()
        attribute.id = _drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW
        policy = attribute.value.accessPolicyWindow
        policy.base_ptr = int(address)
        policy.num_bytes = min(int(size), largest)
        policy.hitRatio = float(ratio)
        policy.hitProp = _drv.CUaccessProperty.CU_ACCESS_PROPERTY_PERSISTING
        policy.missProp = _drv.CUaccessProperty.CU_ACCESS_PROPERTY_STREAMING
        config.attrs = [attribute]
        config.numAttrs = 1
        err, = _drv.cuLaunchKernelEx(config, self._func, self._params_addr, 0)
        if err:
            raise CudaError("cuLaunchKernelEx", err,
                            f"kernel {getattr(self.module, 'kernel_name', '?')}, grid="
                            f"{tuple(grid)}, block={tuple(block)}, L2 window of "
                            f"{policy.num_bytes} bytes (hit ratio {ratio}; set-aside "
                            f"{set_aside} bytes)")

    def configured_launch(self, grid, block, shared_bytes, stream):
        """(``cuLaunchKernelEx``, a launch configuration of this geometry on ``stream``):
        the monomorphic fast path's launch, four arguments where ``cuLaunchKernel`` takes
        eleven (the driver's cost is the same; the bindings convert fewer arguments)."""
        config = _drv.CUlaunchConfig()
        config.gridDimX, config.gridDimY, config.gridDimZ = grid
        config.blockDimX, config.blockDimY, config.blockDimZ = block
        config.sharedMemBytes = shared_bytes
        config.hStream = stream or 0
        config.numAttrs = 0
        return _drv.cuLaunchKernelEx, config

    def cluster_launch(self, cluster, cooperative=False):
        """A function taking ``cuLaunchKernel``'s arguments that launches in clusters of
        ``cluster`` (and cooperatively: ``T.sync_grid``): ``cuLaunchKernelEx`` with the
        cluster-dimension (and cooperative) attribute, its configuration built once per
        geometry (the fast path calls it as it calls ``cuLaunchKernel``). It raises on an
        error rather than returning it."""
        key = (tuple(cluster), cooperative)
        found = self._cluster_launches.get(key)
        if found is None:
            found = self._cluster_launches[key] = _cluster_launcher(self, *key)
        return found

    def _on_error(self, err, grid, block, shared_bytes, stream) -> None:
        # No context / another device's context current on this thread: fix it and retry once.
        # A launch that failed with these codes was never enqueued, so the retry cannot double-run.
        if int(err) in (201, 400, 709):  # INVALID_CONTEXT, INVALID_HANDLE, CONTEXT_IS_DESTROYED
            ensure_context(self._ordinal)
            gx, gy, gz = grid
            bx, by, bz = block
            err, = self._cu_launch(self._func, gx, gy, gz, bx, by, bz, shared_bytes, stream or None,
                                   self._params_addr, 0)
            if not err:
                return
        raise CudaError("cuLaunchKernel", err,
                        f"kernel {getattr(self.module, 'kernel_name', '?')}, grid={tuple(grid)}, "
                        f"block={tuple(block)}, shared={shared_bytes}")


def _cluster_launcher(launcher, cluster, cooperative=False):
    configs = {}

    def launch(func, gx, gy, gz, bx, by, bz, shared_bytes, stream, params, extra):
        config = configs.get((gx, gy, gz, bx, by, bz, shared_bytes))
        if config is None:
            config = _drv.CUlaunchConfig()
            config.gridDimX, config.gridDimY, config.gridDimZ = gx, gy, gz
            config.blockDimX, config.blockDimY, config.blockDimZ = bx, by, bz
            config.sharedMemBytes = shared_bytes
            attributes = []
            if cluster != (1, 1, 1):
                attribute = _drv.CUlaunchAttribute()
                attribute.id = _drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
                dims = attribute.value.clusterDim
                dims.x, dims.y, dims.z = cluster
                attributes.append(attribute)
            if cooperative:
                attribute = _drv.CUlaunchAttribute()
                attribute.id = _drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_COOPERATIVE
                attribute.value.cooperative = 1
                attributes.append(attribute)
            config.attrs = attributes
            config.numAttrs = len(attributes)
            configs[(gx, gy, gz, bx, by, bz, shared_bytes)] = config
        config.hStream = stream or 0
        err, = _drv.cuLaunchKernelEx(config, func, params, extra)
        if err and int(err) in (201, 400, 709):     # no or another context: as launch()
            ensure_context(launcher._ordinal)
            err, = _drv.cuLaunchKernelEx(config, func, params, extra)
        if err:
            raise CudaError("cuLaunchKernelEx", err,
                            f"kernel {getattr(launcher.module, 'kernel_name', '?')}, grid="
                            f"{(gx, gy, gz)}, block={(bx, by, bz)}, cluster={cluster}, "
                            f"cooperative={cooperative}, shared={shared_bytes}")
        return (err,)
    return launch


# ---------------------------------------------------------------------------- arguments / memory
def tensor_pointer(x) -> tuple[int, int]:
    """(address, device ordinal) of an array-like; ordinal is -1 for host memory."""
    if type(x).__module__.startswith("torch") and hasattr(x, "data_ptr"):
        return (x.data_ptr(), x.device.index or 0) if x.is_cuda else (x.data_ptr(), -1)
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is not None:
        ptr = int(cai["data"][0])
        if ptr == 0:  # empty allocation: no pointer attributes to query
            return 0, 0
        attr = _drv.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
        return ptr, int(_check(_drv.cuPointerGetAttribute(attr, ptr), "cuPointerGetAttribute"))
    np = sys.modules.get("numpy")
    if np is not None and isinstance(x, np.ndarray):
        return int(x.ctypes.data), -1
    if hasattr(x, "__dlpack_device__"):
        dev_type, dev_id = x.__dlpack_device__()
        try:
            import torch
        except ImportError:
            raise TypeError(f"{type(x).__name__}: reading a DLPack pointer needs torch") from None
        ptr = torch.from_dlpack(x).data_ptr()
        # DLDeviceType: 2 = kDLCUDA, 13 = kDLCUDAManaged; 1 = kDLCPU, 3 = kDLCUDAHost (pinned)
        return ptr, (int(dev_id) if int(dev_type) in (2, 13) else -1)
    raise TypeError(f"cannot get a device pointer from {type(x).__name__}")


_PERSISTING = {}    # device ordinal -> [largest set-aside, largest window, set-aside now]


def persisting_l2(ordinal: int, size: int) -> tuple[int, int]:
    """(the bytes of L2 set aside for persisting accesses in the current context, the
    device's largest access policy window), the set-aside first raised towards ``size``
    (at most the device's largest; never lowered: a set-aside that persisting lines do not
    use is L2 for the others). The driver is asked once per device, and again only when
    a launch wants more than was set aside."""
    found = _PERSISTING.get(ordinal)
    limit = _drv.CUlimit.CU_LIMIT_PERSISTING_L2_CACHE_SIZE
    if found is None:
        dev = _check(_drv.cuDeviceGet(ordinal), "cuDeviceGet")
        attrs = _drv.CUdevice_attribute
        most = _check(_drv.cuDeviceGetAttribute(
            attrs.CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE, dev), "cuDeviceGetAttribute")
        window = _check(_drv.cuDeviceGetAttribute(
            attrs.CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE, dev), "cuDeviceGetAttribute")
        now = _check(_drv.cuCtxGetLimit(limit), "cuCtxGetLimit")
        found = _PERSISTING[ordinal] = [int(most), int(window), int(now)]
    most, window, now = found
    want = min(int(size), most)
    if now < want:
        _check(_drv.cuCtxSetLimit(limit, want), "cuCtxSetLimit")
        found[2] = now = want
    return now, window


def address_device(address: int) -> int:
    """The device ordinal of memory the driver allocated at ``address``, or -1 when the
    driver does not know the address (host memory, or no CUDA at all). Never raises."""
    if not address or not cuda_available():
        return -1
    try:
        _ensure_any_context()       # the query needs a current context (any, with UVA)
        attr = _drv.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
        err, ordinal = _drv.cuPointerGetAttribute(attr, address)
        if err:
            return -1
        kind = _drv.CUpointer_attribute.CU_POINTER_ATTRIBUTE_MEMORY_TYPE
        err, memory = _drv.cuPointerGetAttribute(kind, address)
        if err or int(memory) != int(_drv.CUmemorytype.CU_MEMORYTYPE_DEVICE):
            return -1
        return int(ordinal)
    except Exception:       # noqa: BLE001 - an address the driver cannot classify: host
        return -1


def address_allocation(address: int) -> tuple[int, int] | None:
    """(start, bytes) of the device allocation the driver made that holds ``address``, or
    None when it is not device memory (``address_device``). Never raises."""
    if address_device(address) < 0:
        return None
    try:
        attrs = _drv.CUpointer_attribute
        err, start = _drv.cuPointerGetAttribute(
            attrs.CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, address)
        if err:
            return None
        err, size = _drv.cuPointerGetAttribute(attrs.CU_POINTER_ATTRIBUTE_RANGE_SIZE, address)
        return None if err else (int(start), int(size))
    except Exception:       # noqa: BLE001 - as address_device
        return None


def current_stream(ordinal: int, tensors_are_torch: bool) -> int:
    """torch's current stream on ``ordinal`` for torch arguments, else 0 (legacy default stream)."""
    if tensors_are_torch:
        torch = sys.modules.get("torch")
        if torch is not None:
            return torch.cuda.current_stream(ordinal).cuda_stream
    return 0


def wait_for(stream: int, others) -> None:
    """Work later queued on ``stream`` waits for what is queued on each of ``others`` now
    (an event recorded there; no host wait)."""
    for other in others:
        event = _check(_drv.cuEventCreate(_drv.CUevent_flags.CU_EVENT_DISABLE_TIMING),
                       "cuEventCreate")
        _check(_drv.cuEventRecord(event, other), "cuEventRecord")
        _check(_drv.cuStreamWaitEvent(stream, event, 0), "cuStreamWaitEvent")
        _check(_drv.cuEventDestroy(event), "cuEventDestroy")


def alloc(nbytes: int, ordinal: int = 0) -> int:
    """cuMemAlloc in device ``ordinal``'s primary context; returns the device address as an int."""
    ensure_context(ordinal)
    return int(_check(_drv.cuMemAlloc(max(int(nbytes), 1)), "cuMemAlloc"))


def _ensure_any_context() -> None:
    # with unified addressing any current context can copy to/from any device pointer
    if not int(_check(_drv.cuCtxGetCurrent(), "cuCtxGetCurrent") or 0):
        ensure_context(0)


def free(ptr: int) -> None:
    _ensure_any_context()
    _check(_drv.cuMemFree(ptr), "cuMemFree")


def memcpy_htod(ptr: int, array) -> None:
    """Synchronous copy of a C-contiguous numpy array to device address ``ptr``."""
    if not array.flags["C_CONTIGUOUS"]:
        raise ValueError("memcpy_htod needs a C-contiguous array")
    _ensure_any_context()
    _check(_drv.cuMemcpyHtoD(ptr, array.ctypes.data, array.nbytes), "cuMemcpyHtoD")


def memcpy_dtoh(array, ptr: int) -> None:
    """Synchronous copy from device address ``ptr`` into a writable C-contiguous numpy array."""
    if not (array.flags["C_CONTIGUOUS"] and array.flags["WRITEABLE"]):
        raise ValueError("memcpy_dtoh needs a writable C-contiguous array")
    _ensure_any_context()
    _check(_drv.cuMemcpyDtoH(array.ctypes.data, ptr, array.nbytes), "cuMemcpyDtoH")


def stream_getter(ordinal: int):
    """A function returning the handle of the stream a launch on ``ordinal`` goes to
    (torch's current stream when torch is loaded, else the legacy default stream 0),
    as cheap as the installed torch allows."""
    fn, arg = stream_function(ordinal)
    return lambda: fn(arg)


def stream_function(ordinal: int):
    """(f, arg) with f(arg) the stream handle ``stream_getter`` describes, without an
    extra Python frame when torch exposes its raw-stream query."""
    torch = sys.modules.get("torch")
    if torch is None:
        return (lambda _: 0), ordinal
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw, ordinal
    return (lambda o: torch.cuda.current_stream(o).cuda_stream), ordinal
