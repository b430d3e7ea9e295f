"""Arrays from other libraries: DLPack capsules read without torch (runtime/dlpack.py),
``__cuda_array_interface__`` streams, and the stream a launch without torch tensors uses
(``arguments.launch_stream``); on the GPU, a kernel on a DLPack view and on a CAI array
whose producer works on another stream."""
import ctypes
import os
import subprocess
import sys
import textwrap
import types

import pytest

from tilejit.runtime import dlpack
from tilejit.runtime.arguments import TensorArg, as_tensor_arg, launch_stream

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


_new_capsule = ctypes.pythonapi.PyCapsule_New
_new_capsule.restype = ctypes.py_object
_new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class FakeCudaDLPack:
    """A DLPack capsule describing device memory (nothing is read through it here)."""

    def __init__(self, ptr, shape, strides, code=2, bits=32, device_id=0, offset=0):
        n = len(shape)
        self.shape = (ctypes.c_int64 * n)(*shape)
        self.strides = (ctypes.c_int64 * n)(*strides) if strides is not None else None
        self.tensor = dlpack._DLTensor(ptr, dlpack._Device(dlpack.KDL_CUDA, device_id), n,
                                       dlpack._DataType(code, bits, 1),
                                       ctypes.cast(self.shape, ctypes.POINTER(ctypes.c_int64)),
                                       ctypes.cast(self.strides, ctypes.POINTER(ctypes.c_int64))
                                       if self.strides is not None else None, offset)
        self.streams = []

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        return _new_capsule(ctypes.addressof(self.tensor), b"dltensor", None)

    def __dlpack_device__(self):
        return (dlpack.KDL_CUDA, self.tensor.device.device_id)


def test_a_device_capsule_is_read_without_torch():
    fake = FakeCudaDLPack(0x7F0000001000, (3, 5), (8, 1), code=2, bits=16, device_id=1,
                          offset=64)
    arg = as_tensor_arg(fake)
    assert (arg.ptr, arg.shape, arg.strides, arg.device) == (0x7F0000001040, (3, 5), (8, 1), 1)
    assert arg.dtype == "float16" and not arg.is_torch
    assert fake.streams == [dlpack.LEGACY_DEFAULT_STREAM]     # asked for on our stream
    assert arg.stream == dlpack.LEGACY_DEFAULT_STREAM
    compact = as_tensor_arg(FakeCudaDLPack(4096, (2, 3, 4), None, code=4, bits=16))
    assert compact.strides == (12, 4, 1) and compact.dtype == "bfloat16"
    assert as_tensor_arg(FakeCudaDLPack(4096, (8,), (1,), code=10, bits=8)).dtype == \
        "float8_e4m3"


def test_an_unknown_dlpack_dtype_is_a_clear_error():
    with pytest.raises(TypeError, match="DLPack dtype code 5"):        # complex
        as_tensor_arg(FakeCudaDLPack(4096, (8,), (1,), code=5, bits=64))


def test_a_host_dlpack_array_runs_in_the_simulator_without_torch(tmp_path):
    script = tmp_path / "no_torch.py"
    script.write_text(textwrap.dedent("""
        import sys
        sys.modules["torch"] = None          # importing torch fails
        import numpy as np
        import tilejit, tilejit.language as T


        class HostDLPack:
            def __init__(self, array):
                self.array = array

            def __dlpack__(self, stream=None):
                return self.array.__dlpack__()

            def __dlpack_device__(self):
                return self.array.__dlpack_device__()


        @tilejit.kernel
        def twice(A, B):
            with T.Kernel(1, threads=128) as bx:
                for i in T.Parallel(A.shape[0]):
                    B[i] = A[i] * 2


        a = np.arange(100, dtype=np.float32)
        b = np.zeros(100, np.float32)
        twice(HostDLPack(a), HostDLPack(b))
        assert np.array_equal(b, 2 * a)
        print("ok")
    """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=ROOT))
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def _arg(stream=None, is_torch=False):
    return TensorArg(None, 0, (4,), (1,), None, 0, is_torch, stream)


def test_the_launch_stream_without_torch():
    assert launch_stream([_arg(), _arg()], 0, None) == (0, [])
    assert launch_stream([_arg(1), _arg()], 0, None) == (0, [])      # 1: legacy default
    assert launch_stream([_arg(), _arg(0xABC)], 0, None) == (0xABC, [])
    assert launch_stream([_arg(0xABC), _arg(2), _arg(0xABC)], 0, None) == (0xABC, [2])


def test_a_cai_stream_must_be_none_or_a_nonzero_int(monkeypatch):
    from tilejit.runtime import cuda_driver
    monkeypatch.setattr(cuda_driver, "tensor_pointer", lambda x: (4096, 0))
    iface = {"data": (4096, False), "shape": (4,), "typestr": "<f4", "version": 3}
    ok = types.SimpleNamespace(__cuda_array_interface__={**iface, "stream": 7})
    assert as_tensor_arg(ok).stream == 7
    for bad in (0, "7", True):
        obj = types.SimpleNamespace(__cuda_array_interface__={**iface, "stream": bad})
        with pytest.raises(ValueError, match=r"\['stream'\] must be None or a nonzero int"):
            as_tensor_arg(obj)


class TorchViaDLPack:
    """A CUDA torch tensor seen only through DLPack, as a JAX or CuPy array would be."""

    def __init__(self, tensor):
        self.tensor = tensor

    def __dlpack__(self, stream=None):
        return self.tensor.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()


class TorchViaCAI:
    """A CUDA torch tensor seen through ``__cuda_array_interface__`` naming a stream."""

    def __init__(self, tensor, stream):
        self.tensor = tensor
        iface = dict(tensor.__cuda_array_interface__)
        iface["stream"] = stream
        self.__cuda_array_interface__ = iface


@pytest.mark.gpu
def test_dlpack_and_cai_arrays_on_gpu():
    import torch

    import tilejit
    import tilejit.language as T

    @tilejit.kernel
    def add_one(A, B):
        with T.Kernel(T.ceildiv(A.shape[0], 256), threads=256) as bx:
            for i in T.Parallel(256):
                if bx * 256 + i < A.shape[0]:
                    B[bx * 256 + i] = A[bx * 256 + i] + 1

    a = torch.arange(1000, dtype=torch.float32, device="cuda")
    b = torch.zeros(1000, device="cuda")
    add_one(TorchViaDLPack(a), TorchViaDLPack(b))
    torch.cuda.synchronize()
    assert torch.equal(b, a + 1)
    # the producer works on a side stream: the launch goes there, after its work
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        a2 = torch.full((1 << 22,), 3.0, device="cuda")
        b2 = torch.zeros(1 << 22, device="cuda")
        torch.cuda._sleep(1_000_000)                  # keep the side stream busy
        a2.fill_(5.0)
    add_one(TorchViaCAI(a2, side.cuda_stream), TorchViaCAI(b2, side.cuda_stream))
    side.synchronize()
    assert torch.all(b2 == 6.0)
