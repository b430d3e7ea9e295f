import struct
import time
import types

import numpy as np
import pytest

from tilejit.runtime import cuda_driver as cd

ADD_ONE_PTX = r"""
.version 8.0
.target sm_80
.address_size 64
.visible .entry add_one(.param .u64 p, .param .u32 n) {
  .reg .pred %p; .reg .b32 %r<6>; .reg .b64 %rd<4>; .reg .f32 %f<3>;
  ld.param.u64 %rd1, [p]; ld.param.u32 %r1, [n];
  mov.u32 %r2, %ctaid.x; mov.u32 %r3, %ntid.x; mov.u32 %r4, %tid.x;
  mad.lo.s32 %r5, %r2, %r3, %r4; setp.ge.s32 %p, %r5, %r1; @%p bra DONE;
  cvta.to.global.u64 %rd2, %rd1; mul.wide.s32 %rd3, %r5, 4; add.s64 %rd2, %rd2, %rd3;
  ld.global.f32 %f1, [%rd2]; add.f32 %f2, %f1, 0f3F800000; st.global.f32 [%rd2], %f2;
DONE: ret; }
"""

# Writes each scalar parameter into out[0..5] (u64 slots) so the host can check the layout
# the driver actually read.
STORE_PARAMS_PTX = r"""
.version 8.0
.target sm_80
.address_size 64
.visible .entry store_params(.param .u64 out, .param .u8 b, .param .f64 d, .param .u16 h,
                             .param .s32 i, .param .f32 f, .param .s64 q) {
  .reg .b64 %rd<4>; .reg .b16 %rs<3>; .reg .b32 %r<2>; .reg .f64 %fd1; .reg .f32 %f1;
  ld.param.u64 %rd1, [out]; cvta.to.global.u64 %rd1, %rd1;
  ld.param.u8 %rs1, [b]; cvt.u64.u16 %rd2, %rs1; st.global.u64 [%rd1], %rd2;
  ld.param.f64 %fd1, [d]; st.global.f64 [%rd1+8], %fd1;
  ld.param.u16 %rs2, [h]; cvt.u64.u16 %rd2, %rs2; st.global.u64 [%rd1+16], %rd2;
  ld.param.s32 %r1, [i]; cvt.s64.s32 %rd2, %r1; st.global.u64 [%rd1+24], %rd2;
  ld.param.f32 %f1, [f]; st.global.f32 [%rd1+32], %f1;
  ld.param.s64 %rd3, [q]; st.global.u64 [%rd1+40], %rd3;
  ret; }
"""

gpu = pytest.mark.gpu
needs_gpu = pytest.mark.skipif(not cd.cuda_available(), reason="no CUDA driver / device available")


# ---------------------------------------------------------------------------- CPU-only tests
def test_cuda_available_never_raises():
    assert isinstance(cd.cuda_available(), bool)
    assert cd.cuda_available() == cd.cuda_available()  # cached
    if not cd.cuda_available():
        assert cd.device_count() == 0


def test_cuda_error_message():
    e = cd.CudaError("cuModuleLoadData", 218)
    assert "cuModuleLoadData failed" in str(e) and "CUDA_ERROR_INVALID_PTX" in str(e)
    assert isinstance(e, RuntimeError) and e.code == 218


def test_layout_mixed_kinds_aligned_and_roundtrip():
    kinds = ["Q", "q", "i", "e", "d", "?", "f", "B", "h", "H", "b", "I"]
    st, offsets = cd.layout_params(kinds)
    sizes = [struct.calcsize(k) for k in kinds]
    assert offsets == [0, 8, 16, 20, 24, 32, 36, 40, 42, 44, 46, 48]
    for off, size in zip(offsets, sizes):
        assert off % size == 0
    for (o1, s1), o2 in zip(zip(offsets, sizes), offsets[1:]):
        assert o1 + s1 <= o2  # no overlap
    values = (0xDEADBEEF12345678, -(2**40), -7, 1.5, 2.25, True, -0.5,
              255, -300, 65535, -128, 2**32 - 1)
    buf = bytearray(st.size)
    st.pack_into(buf, 0, *values)
    for kind, off, v in zip(kinds, offsets, values):
        assert struct.unpack_from("<" + kind, buf, off)[0] == v


def test_layout_rejects_unknown_kind():
    with pytest.raises(ValueError):
        cd.layout_params(["Q", "z"])
    st, offsets = cd.layout_params([])
    assert st.size == 0 and offsets == []


class _FakeModule:
    function = object()
    ordinal = 0
    kernel_name = "fake"


def _fake_driver(monkeypatch, result=(0,)):
    calls = []

    def fake_launch(*args):
        calls.append(args)
        return result

    monkeypatch.setattr(cd, "_drv", types.SimpleNamespace(cuLaunchKernel=fake_launch))
    return calls


def test_launcher_params_array_points_into_buffer(monkeypatch):
    import ctypes

    calls = _fake_driver(monkeypatch)
    kinds = ["Q", "q", "i", "e", "d", "?", "f"]
    lau = cd.Launcher(_FakeModule(), kinds)
    values = (0x7F0000001000, -3, 42, 0.5, 3.0, True, 1.25)
    lau.launch((4, 2, 1), (128, 1, 1), 0, 0, values)
    (args,) = calls
    assert args[1:8] == (4, 2, 1, 128, 1, 1, 0)
    assert args[8] is None  # stream 0 -> NULL stream
    assert args[10] == 0  # extra
    ptrs = (ctypes.c_void_p * len(kinds)).from_address(args[9])
    for kind, p, v in zip(kinds, ptrs, values):
        assert struct.unpack("<" + kind, ctypes.string_at(p, struct.calcsize(kind)))[0] == v


def test_launcher_error_raises_cuda_error(monkeypatch):
    _fake_driver(monkeypatch, result=(1,))  # CUDA_ERROR_INVALID_VALUE
    lau = cd.Launcher(_FakeModule(), ["i"])
    with pytest.raises(cd.CudaError, match="cuLaunchKernel"):
        lau.launch((1, 1, 1), (1, 1, 1), 0, 0, (1,))


def test_launch_pure_python_overhead(monkeypatch):
    ok = (0,)
    monkeypatch.setattr(cd, "_drv", types.SimpleNamespace(cuLaunchKernel=lambda *a: ok))
    lau = cd.Launcher(_FakeModule(), ["Q", "Q", "i", "f"])
    grid, block, values = (128, 1, 1), (256, 1, 1), (0x7F0000001000, 0x7F0000002000, 1024, 1.0)
    launch, n = lau.launch, 20000
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n):
            launch(grid, block, 0, 0, values)
        best = min(best, (time.perf_counter() - t0) / n)
    assert best < 5e-6, f"pure-python launch overhead {best * 1e6:.2f} us"


def test_tensor_pointer_host_and_errors():
    a = np.zeros(4, dtype=np.float32)
    assert cd.tensor_pointer(a) == (a.ctypes.data, -1)
    with pytest.raises(TypeError):
        cd.tensor_pointer(object())
    assert cd.current_stream(0, False) == 0


# ---------------------------------------------------------------------------- GPU tests
@gpu
@needs_gpu
def test_device_queries():
    assert cd.device_count() >= 1
    assert cd.device_arch(0).startswith("sm_")
    lim = cd.device_limits(0)
    assert lim["max_shared_per_block"] == 48 * 1024
    assert lim["max_shared_per_block_optin"] >= lim["max_shared_per_block"]
    assert lim["num_sms"] > 0 and lim["max_threads_per_block"] >= 1024
    assert lim["max_regs_per_block"] > 0
    cd.ensure_context(0)
    cd.ensure_context(0)


@gpu
@needs_gpu
def test_add_one_launch():
    mod = cd.CudaModule(ADD_ONE_PTX, "add_one")
    assert mod.num_regs > 0 and mod.local_bytes == 0 and mod.max_threads >= 256
    n = 1000
    host = np.arange(n, dtype=np.float32)
    ptr = cd.alloc(host.nbytes)
    try:
        cd.memcpy_htod(ptr, host)
        lau = cd.Launcher(mod, ["Q", "I"])
        for _ in range(3):
            lau.launch(((n + 255) // 256, 1, 1), (256, 1, 1), 0, 0, (ptr, n))
        cd.synchronize()
        out = np.empty_like(host)
        cd.memcpy_dtoh(out, ptr)
        np.testing.assert_array_equal(out, host + 3)
    finally:
        cd.free(ptr)


@gpu
@needs_gpu
def test_mixed_params_reach_kernel():
    mod = cd.CudaModule(STORE_PARAMS_PTX, "store_params")
    ptr = cd.alloc(48)
    try:
        cd.memcpy_htod(ptr, np.zeros(6, dtype=np.uint64))
        lau = cd.Launcher(mod, ["Q", "B", "d", "H", "i", "f", "q"])
        lau.launch((1, 1, 1), (1, 1, 1), 0, 0, (ptr, 200, -2.5, 40000, -123456, 0.75, -(2**40) - 1))
        cd.synchronize()
        out = np.zeros(6, dtype=np.uint64)
        cd.memcpy_dtoh(out, ptr)
        raw = out.tobytes()
        assert struct.unpack_from("<Q", raw, 0)[0] == 200
        assert struct.unpack_from("<d", raw, 8)[0] == -2.5
        assert struct.unpack_from("<Q", raw, 16)[0] == 40000
        assert struct.unpack_from("<q", raw, 24)[0] == -123456
        assert struct.unpack_from("<f", raw, 32)[0] == 0.75
        assert struct.unpack_from("<q", raw, 40)[0] == -(2**40) - 1
    finally:
        cd.free(ptr)


@gpu
@needs_gpu
def test_zero_param_kernel():
    ptx = ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry noop() { ret; }\n"
    lau = cd.Launcher(cd.CudaModule(ptx, "noop"), [])
    assert lau._params_addr == 0  # NULL kernelParams
    lau.launch((2, 1, 1), (32, 1, 1), 0, 0, ())
    cd.synchronize()


@gpu
@needs_gpu
def test_launch_recovers_without_current_context():
    mod = cd.CudaModule(ADD_ONE_PTX, "add_one")
    host = np.zeros(64, dtype=np.float32)
    ptr = cd.alloc(host.nbytes)
    try:
        cd.memcpy_htod(ptr, host)
        lau = cd.Launcher(mod, ["Q", "I"])
        cd._check(cd._drv.cuCtxSetCurrent(None), "cuCtxSetCurrent")  # no current context
        lau.launch((1, 1, 1), (64, 1, 1), 0, 0, (ptr, 64))
        cd.synchronize()
        cd.memcpy_dtoh(host, ptr)
        assert (host == 1).all()
    finally:
        cd.free(ptr)


@gpu
@needs_gpu
def test_bad_launch_config_raises():
    lau = cd.Launcher(cd.CudaModule(ADD_ONE_PTX, "add_one"), ["Q", "I"])
    with pytest.raises(cd.CudaError, match="cuLaunchKernel"):
        lau.launch((1, 1, 1), (4096, 1, 1), 0, 0, (0, 0))  # > 1024 threads per block


@gpu
@needs_gpu
def test_bad_ptx_raises():
    with pytest.raises(cd.CudaError, match="cuModuleLoadData"):
        cd.CudaModule(".version 8.0\n.target sm_80\n.address_size 64\nnot ptx;\n", "add_one")


@gpu
@needs_gpu
def test_too_much_shared_memory_raises():
    optin = cd.device_limits(0)["max_shared_per_block_optin"]
    with pytest.raises(ValueError, match=str(optin)):
        cd.CudaModule(ADD_ONE_PTX, "add_one", dynamic_shared_bytes=optin + 1)
    # opting in above the 48 KiB default works up to the device limit
    mod = cd.CudaModule(ADD_ONE_PTX, "add_one", dynamic_shared_bytes=optin)
    assert mod.function is not None


@gpu
@needs_gpu
def test_tensor_pointer_cuda_array_interface():
    ptr = cd.alloc(16)
    try:
        obj = types.SimpleNamespace(__cuda_array_interface__={"data": (ptr, False), "shape": (4,),
                                                              "typestr": "<f4", "version": 3})
        assert cd.tensor_pointer(obj) == (ptr, 0)
    finally:
        cd.free(ptr)


@gpu
@needs_gpu
def test_launch_overhead_close_to_bare_cuLaunchKernel():
    mod = cd.CudaModule(ADD_ONE_PTX, "add_one")
    lau = cd.Launcher(mod, ["Q", "I"])
    ptr = cd.alloc(4)
    raw = cd._drv.cuLaunchKernel
    func, addr, values = mod.function, lau._params_addr, (ptr, 0)  # n=0: kernel returns at once
    lau.launch((1, 1, 1), (32, 1, 1), 0, 0, values)

    def bare():
        for _ in range(1000):
            raw(func, 1, 1, 1, 32, 1, 1, 0, 0, addr, 0)

    def ours():
        launch = lau.launch
        for _ in range(1000):
            launch((1, 1, 1), (32, 1, 1), 0, 0, values)

    best = {}
    try:
        for _ in range(10):
            for name, fn in (("bare", bare), ("ours", ours)):
                cd.synchronize()
                t0 = time.perf_counter()
                fn()
                dt = (time.perf_counter() - t0) / 1000
                best[name] = min(best.get(name, dt), dt)
        cd.synchronize()
    finally:
        cd.free(ptr)
    ratio = best["ours"] / best["bare"]
    print(f"bare {best['bare'] * 1e6:.2f} us, Launcher.launch {best['ours'] * 1e6:.2f} us, "
          f"ratio {ratio:.2f}")
    assert ratio < 1.5
