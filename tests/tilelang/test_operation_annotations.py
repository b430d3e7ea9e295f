"""TileLang's ``annotations=`` keyword of the tile operations (per-operation hints to its
lowering: T.fill, T.clear, T.gemm, T.atomic_add / max / min, T.finalize_reducer; the
reductions' and scans' are in test_reductions.py) is accepted and does not change the
result, and ``T.fill`` takes TileLang's parameter names (``buffer=``, ``value=``). In
simulation and PTX (sm_80 and sm_90a); the GPU twin runs it on the device against the
simulator."""
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T


def _annotated():
    @T.prim_func
    def main(A: T.Tensor((64, 32), T.float16), B: T.Tensor((32, 64), T.float16),
             C: T.Tensor((64, 64), T.float32), S: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((64, 32), T.float16)
            b = T.alloc_shared((32, 64), T.float16)
            c = T.alloc_fragment((64, 64), T.float32)
            r = T.alloc_reducer((64,), T.float32, op="max")
            T.copy(A, a)
            T.copy(B, b)
            T.clear(c, annotations={"hint": 1})
            T.fill(buffer=c, value=0.0, annotations={"hint": 1})
            T.gemm(a, b, c, annotations={"hint": 2})
            T.copy(c, C)
            T.reducer_init(r)
            for i, j in T.Parallel(64, 64):
                T.reducer_update(r[i], c[i, j])
                T.atomic_add(S[i], c[i, j], annotations={"hint": 3})
            out = T.alloc_fragment((64,), T.float32)
            T.finalize_reducer(r, out, annotations={"hint": 4})
            T.copy(out, S[64:128])
            T.atomic_max(S[0], -1e9, annotations={"hint": 5})
    return main


def _run(device="cpu"):
    torch.manual_seed(0)
    a = torch.randn(64, 32, dtype=torch.float16).to(device)    # the same numbers on
    b = torch.randn(32, 64, dtype=torch.float16).to(device)    # either device
    s = torch.zeros(128, device=device)
    c = tilelang.compile(_annotated(), out_idx=[2])(a, b, s)
    return a, b, c, s


def test_annotations_are_accepted_and_change_nothing():
    a, b, c, s = _run()
    ref = a.double() @ b.double()
    torch.testing.assert_close(c.double(), ref, atol=1e-3, rtol=1e-3)
    torch.testing.assert_close(s[:64].double(), ref.sum(1), atol=1e-2, rtol=1e-3)
    torch.testing.assert_close(s[64:].double(), ref.max(1).values, atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_annotated_kernel_assembles(ptxas, arch):
    ptx = tilelang.compile(_annotated(), out_idx=[2], target="cuda").get_kernel_source(
        arch=arch)
    ptxas(ptx, arch)


@pytest.mark.gpu
def test_annotated_kernel_on_the_gpu():
    a, b, c, s = _run("cuda")
    _, _, c_sim, s_sim = _run()
    ref = a.double() @ b.double()
    torch.testing.assert_close(c.double(), ref, atol=1e-3, rtol=1e-3)
    torch.testing.assert_close(c.cpu(), c_sim, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(s.cpu(), s_sim, atol=1e-2, rtol=1e-4)
