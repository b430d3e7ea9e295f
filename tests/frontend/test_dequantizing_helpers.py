"""Plain helpers as TileLang's dequantizing GEMMs write them
(``examples/dequantize_gemm/quantize/quantization.py``): an ``assert`` whose message is
an f-string (left out on the device, where Numba cannot format it; the condition stays)
and ``.astype`` on a value computed from a loop index (a Python int in the simulator, a
typed integer on the GPU: ``T.cast`` there). In the simulator, in PTX assembled by ptxas,
and on the GPU against torch and the simulator."""
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T


def unpack_checked(val, pos, dtype):
    assert val.dtype == "int8", f"{val.dtype} != int8"
    return ((val >> (pos * 4).astype(T.int8)) & 15).astype(dtype)


@tilelang.jit(out_idx=[1])
def dequant(N, dtype=T.float16):
    @T.prim_func
    def main(B: T.Tensor((N // 2,), T.int8), C: T.Tensor((N,), dtype)):
        with T.Kernel(1, threads=32) as bx:
            for i in T.serial(N):
                C[i] = unpack_checked(B[i // 2], i % 2, dtype)
    return main


def _reference(b):
    return torch.stack((b & 15, (b >> 4) & 15), -1).reshape(-1).double()


@pytest.mark.parametrize("dtype", [T.float16, T.float32])
def test_the_helpers_in_the_simulator_and_ptx(dtype, ptxas):
    b = torch.randint(0, 127, (32,), dtype=torch.int8)
    kernel = dequant(64, dtype)
    torch.testing.assert_close(kernel(b).double(), _reference(b))
    for arch in ("sm_80", "sm_90a"):
        ptx = tilelang.compile(dequant.factory(64, dtype), out_idx=[1],
                               target=f"cuda -arch={arch}").get_kernel_source()
        ptxas(ptx, arch)


@pytest.mark.gpu
def test_the_helpers_on_the_gpu():
    b = torch.randint(0, 127, (32,), dtype=torch.int8)
    gpu = dequant(64)(b.cuda())
    torch.testing.assert_close(gpu.cpu().double(), _reference(b))
    torch.testing.assert_close(gpu.cpu(), dequant(64)(b))
