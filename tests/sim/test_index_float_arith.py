"""A T.Parallel index (an integer) times a float32 value is float32, in the simulator as
in the compiled kernel (``codegen/typing/context.harmonize``; TileLang's int32 * float32):
numpy would widen it to float64, and ``T.cos`` of that was refused (a RoPE kernel's
``T.cos(seq_idx * freq)``). A float16 value computes in float32 and gives float16."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T


def rope_angles(N=16, D=8):
    @T.prim_func
    def main(F: T.Tensor((D,), "float32"), H: T.Tensor((N, D), "float16"),
             C: T.Tensor((N, D), "float32"), S: T.Tensor((N, D), "float32"),
             P: T.Tensor((N, D), "float16")):
        with T.Kernel(1, threads=32):
            for s, d in T.Parallel(N, D):
                C[s, d] = T.cos(s * F[d])
                S[s, d] = T.sin((s + 1) * F[d] - d)
                P[s, d] = d * H[s, d]
    return main


def _expected(f, h):
    s = torch.arange(16, dtype=torch.float32)[:, None]
    d = torch.arange(8, dtype=torch.float32)[None, :]
    return (torch.cos(s * f), torch.sin((s + 1) * f - d),
            (d * h.float()).half())


def test_an_index_times_a_float32_is_float32():
    f, h = torch.rand(8), torch.randn(16, 8).half()
    c, s, p = tilejit.compile(rope_angles(), out_idx=[2, 3, 4])(f, h)
    want = _expected(f, h)
    torch.testing.assert_close(c, want[0], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(s, want[1], rtol=1e-6, atol=1e-6)
    assert torch.equal(p, want[2])


def test_the_simulators_arithmetic_keeps_the_floats_type():
    from tilejit.sim.runtime import arith
    i = np.arange(4, dtype=np.int64)
    assert arith(i, np.float32(0.5), "mul").dtype == np.float32
    assert arith(np.float16(3.0), i, "add").dtype == np.float16
    assert arith(i, np.ones(4, np.float64), "sub").dtype == np.float64
    assert arith(i, 0.5, "mul").dtype == np.float32          # a float literal: float32


@pytest.mark.gpu
def test_gpu_an_index_times_a_float32_is_float32():
    f, h = torch.rand(8), torch.randn(16, 8).half()
    kernel = tilejit.compile(rope_angles(), out_idx=[2, 3, 4])
    gpu = [t.cpu() for t in kernel(f.cuda(), h.cuda())]
    sim = kernel(f, h)
    for g, m in zip(gpu, sim):
        torch.testing.assert_close(g.float(), m.float(), rtol=1e-6, atol=1e-6)
