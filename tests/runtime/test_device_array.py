"""tilejit's own device arrays (runtime/device_array.py): the T.empty outputs of kernels
called with CUDA arrays that are not torch tensors, handed on by
__cuda_array_interface__ and DLPack. The allocation is faked on the CPU; with ``-m gpu``
a process without torch runs a kernel on them."""
import os
import subprocess
import sys

import pytest

from tilejit.runtime import cuda_driver, dlpack
from tilejit.runtime.device_array import DeviceArray, _EXPORTED, _ManagedTensor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ADDRESS = 0x7f0000002000


@pytest.fixture
def fake_memory(monkeypatch):
    freed = []
    monkeypatch.setattr(cuda_driver, "alloc", lambda n, ordinal=0: ADDRESS)
    monkeypatch.setattr(cuda_driver, "free", freed.append)
    return freed


@pytest.mark.parametrize("dtype, code, bits", [("float32", 2, 32), ("bfloat16", 4, 16),
                                               ("int8", 0, 8), ("uint16", 1, 16),
                                               ("bool", 6, 8), ("float8_e4m3", 10, 8)])
def test_the_dlpack_capsule_describes_the_array(fake_memory, dtype, code, bits):
    a = DeviceArray((5, 7), dtype, device=0)
    assert a.__dlpack_device__() == (dlpack.KDL_CUDA, 0)
    view = dlpack.DLPackView(a.__dlpack__(stream=1))
    assert (view.ptr, view.shape, view.strides) == (ADDRESS, (5, 7), (7, 1))
    assert view.dtype.name == dtype and view.on_gpu
    tensor = dlpack._DLTensor.from_address(
        dlpack._get_pointer(view.capsule, b"dltensor"))
    assert (tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes) == (code, bits, 1)


def test_the_consumer_s_deleter_lets_the_array_go(fake_memory):
    a = DeviceArray((16,), "float32")
    capsule = a.__dlpack__()
    address = dlpack._get_pointer(capsule, b"dltensor")
    assert address in _EXPORTED
    del a
    assert fake_memory == []                  # the capsule keeps the memory alive
    managed = _ManagedTensor.from_address(address)
    managed.deleter(address)                  # what a consumer does when it lets go
    assert address not in _EXPORTED and fake_memory == [ADDRESS]


def test_bfloat16_has_no_cuda_array_interface(fake_memory):
    with pytest.raises(AttributeError, match="cannot describe bfloat16.*use __dlpack__"):
        _ = DeviceArray((4,), "bfloat16").__cuda_array_interface__
    assert not hasattr(DeviceArray((4,), "bfloat16"), "__cuda_array_interface__")


def test_bad_shapes_and_copies_are_clear_errors(fake_memory):
    with pytest.raises(ValueError, match="negative extent"):
        DeviceArray((2, -1), "float32")
    with pytest.raises(BufferError, match="copy=True"):
        DeviceArray((2,), "float32").__dlpack__(copy=True)


@pytest.mark.gpu
def test_a_kernel_with_t_empty_outputs_on_device_arrays_without_torch(tmp_path):
    """Inputs copied from numpy to DeviceArrays, a kernel whose output is T.empty: the
    output is a DeviceArray with the right values, and torch was never imported."""
    code = """
import sys
import numpy as np
import tilejit
import tilejit.language as T
from tilejit.runtime.device_array import DeviceArray

@tilejit.kernel
def scale_add(X, Y, block: T.constexpr = 256):
    N = X.shape[0]
    Z = T.empty((N,), X.dtype)
    with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
        for i in T.Parallel(block):
            j = bx * block + i
            if j < N:
                Z[j] = X[j] * 2.0 + Y[j]
    return Z

x = np.random.default_rng(0).standard_normal(10_001).astype(np.float32)
y = np.random.default_rng(1).standard_normal(10_001).astype(np.float32)
z = scale_add(DeviceArray.from_numpy(x), DeviceArray.from_numpy(y))
assert isinstance(z, DeviceArray), type(z)
np.testing.assert_allclose(z.numpy(), x * 2 + y, rtol=1e-6)
assert "torch" not in sys.modules
print("ok")
"""
    script = tmp_path / "no_torch.py"         # a kernel's source is read from its file
    script.write_text(code)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=ROOT))
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


@pytest.mark.gpu
def test_torch_takes_a_device_array_by_dlpack_and_by_the_interface():
    import torch
    from tilejit.runtime.arguments import TensorArg
    from tilejit.runtime import host
    from tilejit.language.dtypes import float32
    src = torch.arange(12, dtype=torch.float32, device="cuda")
    like = TensorArg(object(), src.data_ptr(), (12,), (1,), float32, 0, False)
    with host.allocating_like(like):
        out = host.allocate_output((3, 4), "float32")
    by_dlpack = torch.from_dlpack(out)
    by_dlpack.copy_(src.view(3, 4))
    by_interface = torch.as_tensor(out, device="cuda")
    assert by_interface.data_ptr() == by_dlpack.data_ptr() == out.ptr
    torch.testing.assert_close(by_interface, src.view(3, 4))
    del out                                    # torch's tensors keep the memory alive
    torch.testing.assert_close(by_dlpack.sum().item(), 66.0)
