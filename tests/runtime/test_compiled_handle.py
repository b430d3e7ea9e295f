"""What ``kernel.compile(...)`` says where it cannot give device code: a simulator
handle's .ptx/.llvm_ir, and a CUDA compile without an arch on a machine without a GPU."""
import numpy as np
import pytest

from tilejit.runtime.cuda_driver import cuda_available
from vector_add import vector_add


def arrays():
    a = np.ones(100, dtype=np.float32)
    return a, a.copy(), np.empty_like(a)


def test_simulator_handle_has_no_ptx():
    handle = vector_add.compile(*arrays(), target="sim")
    assert handle.simulated
    for attribute in ("ptx", "llvm_ir"):
        with pytest.raises(RuntimeError, match="compiled for the simulator") as info:
            getattr(handle, attribute)
        assert 'target="cuda", arch="sm_90a"' in str(info.value)
    a, b, c = arrays()
    handle(a, b, c)                     # the handle still runs
    np.testing.assert_array_equal(c, a + b)


def test_cuda_handle_without_a_gpu_has_ptx():
    handle = vector_add.compile(*arrays(), target="cuda", arch="sm_90a")
    assert not handle.simulated
    assert ".entry vector_add_kernel" in handle.ptx and "nvptx" in handle.llvm_ir


@pytest.mark.skipif(cuda_available(), reason="needs a machine without a CUDA device")
def test_cuda_compile_without_arch_or_device_says_pass_arch():
    with pytest.raises(RuntimeError, match="CUDA driver/device not available") as info:
        vector_add.compile(*arrays(), target="cuda")
    assert 'arch="sm_90a"' in str(info.value)
