"""An atomic statement in a T.Parallel over a replicated fragment (a reduction's result,
held by several threads: flash-linear-attention's gated attention backward adds its
gate gradients so) is applied by one copy, as a store is
(``layout_inference._one_copy_stores``); one whose previous value is used stays refused.
In simulation, in PTX through ptxas, and on the GPU against torch and the simulator
(several blocks adding into one output)."""
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError


def column_sums_into(M, N, blocks, threads=128):
    @T.prim_func
    def main(A: T.Tensor((blocks * M, N), "float32"), D: T.Tensor((N,), "float32")):
        with T.Kernel(blocks, threads=threads) as bx:
            s = T.alloc_shared((M, N), "float32")
            f = T.alloc_fragment((M, N), "float32")
            r = T.alloc_fragment((N,), "float32")
            T.copy(A[bx * M, 0], s)
            T.copy(s, f)
            T.reduce_sum(f, r, dim=0)
            for j in T.Parallel(N):
                T.atomic_add(D[j], r[j])
    return main


def test_an_atomic_over_a_reductions_result_is_applied_once(ptxas):
    a = torch.randn(4 * 64, 64)
    d = torch.zeros(64)
    tilejit.compile(column_sums_into(64, 64, 4))(a, d)
    torch.testing.assert_close(d.double(), a.double().sum(0), rtol=1e-5, atol=1e-4)
    for arch in ("sm_80", "sm_90a"):
        ptx = tilejit.compile(column_sums_into(64, 64, 4), target=f"cuda -arch={arch}") \
            .get_kernel_source()
        assert "red.global.add.f32" in ptx or "atom.global.add.f32" in ptx
        ptxas(ptx, arch)


def test_an_atomic_whose_value_is_used_stays_refused():
    @T.prim_func
    def previous(A: T.Tensor((64, 64), "float32"), D: T.Tensor((64,), "float32"),
                 P: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((64, 64), "float32")
            r = T.alloc_fragment((64,), "float32")
            T.copy(A, f)
            T.reduce_sum(f, r, dim=0)
            for j in T.Parallel(64):
                P[j] = T.atomic_add(D[j], r[j], return_prev=True)
    with pytest.raises(CompileError, match=r"an atomic whose previous value is used, in a "
                                           r"T.Parallel over a replicated fragment"):
        tilejit.compile(previous, target="cuda -arch=sm_90a").get_kernel_source()


@pytest.mark.gpu
def test_gpu_an_atomic_over_a_reductions_result_is_applied_once():
    a = torch.randn(16 * 64, 128)
    kernel = tilejit.compile(column_sums_into(64, 128, 16))
    d = torch.zeros(128, device="cuda")
    kernel(a.cuda(), d)
    torch.testing.assert_close(d.cpu().double(), a.double().sum(0), rtol=1e-5, atol=1e-4)
    sim = torch.zeros(128)
    kernel(a, sim)
    torch.testing.assert_close(d.cpu(), sim, rtol=1e-5, atol=1e-4)
