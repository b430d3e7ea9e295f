"""Launching on ROCm (runtime/hip_driver.py, runtime/hsaco.py), checked without an AMD
GPU: the code object's metadata read back against what the compiler planned, and
launches through HIP's module API into a fake libamdhip64 (tests/support/fake_hip.py)
that unpacks the kernarg buffer at the metadata's offsets and runs the kernel's LLVM IR
on the CPU: the results must be the simulator's. What a real ROCm device adds (the
back end's code, the hardware) is not checked here."""
import struct

import numpy as np
import pytest

import tilejit
from fake_hip import FakeHip
from kernels import gemm
from ptx_examples import all_examples, example_arguments
from tilejit.runtime import hip_driver, hsaco, host
from tilejit.runtime.arguments import as_tensor_arg
from tilejit.runtime.kernel import _HipLoaded

EXAMPLES = {name: (kernel, specs, constexprs) for name, kernel, specs, constexprs, _
            in all_examples()}
CHECKED = ["vector_add.vector_add", "softmax.softmax", "norms.rms_norm", "gemm.matmul",
           "flash_attention.flash_attn.flashattn"]


@pytest.fixture
def fake():
    lib = FakeHip()
    hip_driver.use_library(lib)
    yield lib
    hip_driver.use_library(None)


@pytest.mark.parametrize("name", CHECKED)
def test_the_metadata_matches_the_plan(name):
    kernel, specs, constexprs = EXAMPLES[name]
    handle = kernel.compile(*example_arguments(specs), target="amdgpu", arch="gfx942",
                            **constexprs)
    info = hsaco.kernels(handle.code_object)[handle.compiled.name]
    assert info.wavefront == 64 and info.vgprs > 0 and info.sgprs > 0
    # the tiles are one dynamic LDS array the launch sizes (hipModuleLaunchKernel's
    # sharedMemBytes); nothing static
    assert info.lds_bytes == 0
    assert ("@__tj_smem = external" in handle.llvm_ir) == (handle.shared_bytes > 0)
    formats = handle.compiled.param_formats
    assert [a.size for a in info.explicit_args] == [struct.calcsize("<" + f) for f in formats]
    assert [a.kind == "global_buffer" for a in info.explicit_args] == \
        [f == "Q" for f in formats]
    offsets = [a.offset for a in info.explicit_args]
    assert offsets == sorted(offsets) and info.kernarg_size >= offsets[-1] + 4
    # the metadata's note and the assembly's .amdgpu_metadata agree
    assert f".vgpr_count:     {info.vgprs}" in handle.asm
    assert f".group_segment_fixed_size: {info.lds_bytes}" in handle.asm


def test_a_file_that_is_not_a_code_object():
    with pytest.raises(hsaco.CodeObjectError, match="not a 64-bit"):
        hsaco.kernels(b"not an ELF file")


def _launch(kernel, args, fake, **constexprs):
    """kernel(*args) the way KernelFunction launches on ROCm, device memory being the
    numpy arrays' host memory: the host program (grid, threads), the compile, the HIP
    module and launcher, the flat values."""
    handle = kernel.compile(*args, target="amdgpu", arch="gfx942", **constexprs)
    fake.register(handle)
    values = kernel._bind(list(args), dict(constexprs))
    call = host.classify(kernel, values)
    with host.allocating_like(call.like):
        launch = host.run_host_program(kernel, call)
    _HipLoaded(handle.compiled, 0).launch(launch, call.runtime)
    return launch


def test_vector_add_through_hip(fake):
    from vector_add import vector_add
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(5000).astype(np.float32) for _ in range(2))
    c = np.zeros_like(a)
    launch = _launch(vector_add, (a, b, c), fake)
    np.testing.assert_array_equal(c, a + b)
    kinds = [call[0] for call in fake.calls]
    assert kinds == ["hipSetDevice", "hipModuleLoadData", "hipModuleGetFunction",
                     "hipModuleLaunchKernel"]
    assert fake.calls[-1][2] == launch.grid and fake.calls[-1][3] == launch.threads
    assert fake.calls[-1][4] == vector_add.compile(a, b, c, target="amdgpu",
                                                   arch="gfx942").shared_bytes


def test_softmax_through_hip_matches_the_simulator(fake):
    from softmax import softmax
    x = np.random.default_rng(1).standard_normal((37, 256)).astype(np.float16)
    y, y_sim = np.zeros_like(x), np.zeros_like(x)
    _launch(softmax, (x, y), fake, block_M=4)
    tilejit.kernel(softmax.func, target="sim")(x, y_sim, block_M=4)
    np.testing.assert_allclose(y.astype(np.float32), y_sim.astype(np.float32), atol=2e-3)


def test_a_gemm_on_mfma_through_hip(fake):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((96, 64)).astype(np.float16)
    b = rng.standard_normal((64, 80)).astype(np.float16)
    c = np.zeros((96, 80), np.float32)
    _launch(gemm, (a, b, c), fake, block_M=64, block_N=64, block_K=32, threads=256, panel=0)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, want, rtol=0, atol=1e-3 * np.abs(want).max())


def test_hip_errors_name_the_call(fake):
    from vector_add import vector_add
    a = np.zeros(256, np.float32)
    handle = vector_add.compile(a, a.copy(), a.copy(), target="amdgpu", arch="gfx942")
    with pytest.raises(hip_driver.HipError, match=r"hipSetDevice failed: hipError 101 "
                                                  r"\(hipErrorInvalidDevice\)"):
        hip_driver.HipModule(handle.code_object, handle.compiled.name, device=3)
    with pytest.raises(ValueError, match="no kernel 'other'"):
        hip_driver.HipModule(handle.code_object, "other")
    module = hip_driver.HipModule(handle.code_object, handle.compiled.name)
    with pytest.raises(ValueError, match="3 parameters, the code object's metadata lists 9"):
        hip_driver.HipLauncher(module, ["Q"] * 3)
    launcher = hip_driver.HipLauncher(module, handle.compiled.param_formats)
    with pytest.raises(ValueError, match="2048 threads per block, compiled for at most"):
        launcher.launch((1, 1, 1), 2048, 0, [0] * 9)


def test_a_missing_runtime_is_a_clear_error(monkeypatch):
    hip_driver.use_library(None)
    monkeypatch.setenv("TILEJIT_HIP_LIBRARY", "libno_such_hip_runtime.so")
    assert not hip_driver.hip_available()
    with pytest.raises(RuntimeError, match="needs ROCm's HIP runtime"):
        hip_driver.library()
    hip_driver.use_library(None)


def test_rocm_tensors_choose_the_amdgpu_target(monkeypatch):
    """A ROCm build of torch (torch.version.hip) puts "cuda" tensors on AMD GPUs: the
    automatic target is then amdgpu."""
    import torch
    from vector_add import vector_add
    monkeypatch.setattr(torch.version, "hip", "6.2.0", raising=False)
    assert vector_add._target_for(0) == "amdgpu"
    assert vector_add._target_for(-1) == "sim"
    monkeypatch.setattr(torch.version, "hip", None, raising=False)
    assert vector_add._target_for(0) == "cuda"
    assert as_tensor_arg(np.zeros(4, np.float32)).device == -1
