"""A reduction of a fragment laid out by a loop whose one round is larger than the tile
(128 float32 elements, 4 per thread, in a block of 128 threads: threads 32..127 get no
element) whose result every thread reads (nano-vllm's RMSNorm: ``rstd =
T.rsqrt(sq[0] / N + eps)``). The idle threads hold copies of the result in the layout's
digit form, but their partials are the reduction's identity: the result is handed out
through shared memory (``ir/digits.idle_copies``). Found on the H100: 96 of each row's
128 outputs scaled by ``rsqrt(eps)``; the simulator was right. In simulation against
float64 torch, in PTX (the hand-out: a shared store, a barrier, a load), on the GPU."""
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T


def rmsnorm(M, N, threads, op="sum"):
    @T.prim_func
    def main(x: T.Tensor[(M, N), T.float32], y: T.Tensor[(M, N), T.float32]):
        with T.Kernel(M, threads=threads) as bx:
            x_s = T.alloc_shared((N,), "float32")
            acc = T.alloc_fragment((N,), "float32")
            T.fill(acc, 0.0)
            T.copy(x[bx, 0:N], x_s)
            for i in T.Parallel(N):
                acc[i] += x_s[i] * x_s[i]
            sq = T.alloc_fragment((1,), "float32")
            if op == "sum":
                T.reduce_sum(acc, sq, dim=0)
            else:
                T.reduce_max(acc, sq, dim=0)
            scale = T.rsqrt(sq[0] / N + 1e-6)
            out = T.alloc_shared((N,), "float32")
            for i in T.Parallel(N):
                out[i] = x_s[i] * scale
            T.copy(out, y[bx, 0:N])
    return main


def _reference(x, op="sum"):
    x64 = x.double()
    sq = (x64 * x64).sum(-1, keepdim=True) if op == "sum" else \
        (x64 * x64).amax(-1, keepdim=True)
    return (x64 * torch.rsqrt(sq / x.shape[1] + 1e-6)).float()


@pytest.mark.parametrize("N, threads, op", [(128, 128, "sum"), (128, 256, "max"),
                                            (256, 256, "sum"), (64, 128, "sum")])
def test_every_thread_reads_the_result(N, threads, op, ptxas):
    x = torch.randn(3, N)
    got = tilelang.compile(rmsnorm(3, N, threads, op), out_idx=[1], target="sim")(x)
    torch.testing.assert_close(got, _reference(x, op), rtol=1e-5, atol=1e-5)
    ptx = tilelang.compile(rmsnorm(3, N, threads, op), out_idx=[1],
                           target="cuda -arch=sm_90a").get_kernel_source()
    ptxas(ptx, "sm_90a")


def test_the_result_is_handed_out_through_shared_memory():
    ptx = tilelang.compile(rmsnorm(3, 128, 128), out_idx=[1],
                           target="cuda -arch=sm_90a").get_kernel_source()
    # between the warp's last exchange and the square root of the result
    between = ptx[ptx.rindex("shfl.sync.bfly"):ptx.index("sqrt.rn.f32")]
    assert "st.shared.b32" in between and "bar.sync" in between and "ld.shared.b32" in between


@pytest.mark.gpu
@pytest.mark.parametrize("N, threads, op", [(128, 128, "sum"), (128, 256, "max"),
                                            (256, 256, "sum"), (64, 128, "sum")])
def test_every_thread_reads_the_result_on_the_gpu(N, threads, op):
    x = torch.randn(3, N)
    got = tilelang.compile(rmsnorm(3, N, threads, op), out_idx=[1])(x.cuda()).cpu()
    sim = tilelang.compile(rmsnorm(3, N, threads, op), out_idx=[1], target="sim")(x)
    torch.testing.assert_close(got, _reference(x, op), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got, sim, rtol=1e-6, atol=1e-6)
