"""A T.Parallel storing into a fragment with only some of its indices accumulates along
the others (``frontend/accumulating_loops.py``): ``dot[i] += P_s[i, k] * Q_s[i, k]`` in
``T.Parallel(M, K)`` (a KernelBench TileLang cosine loss) is a serial loop over k around
a T.Parallel over i, for the simulator and the GPU alike; checked against float64 torch,
in PTX through ptxas, and on the GPU against torch and the simulator. A loop that also
indexes a fragment with all its indices keeps the refusal."""
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError


def row_dots(M, K, bm=32, bk=64, threads=128):
    @T.prim_func
    def main(P: T.Tensor((M, K), "float32"), Q: T.Tensor((M, K), "float32"),
             O: T.Tensor((M,), "float32"), N: T.Tensor((M,), "float32")):
        with T.Kernel(M // bm, threads=threads) as bx:
            ps = T.alloc_shared((bm, bk), "float32")
            qs = T.alloc_shared((bm, bk), "float32")
            dot = T.alloc_fragment((bm,), "float32")
            norm = T.alloc_fragment((bm,), "float32")
            T.clear(dot)
            T.clear(norm)
            for kk in T.serial(K // bk):
                T.copy(P[bx * bm, kk * bk], ps)
                T.copy(Q[bx * bm, kk * bk], qs)
                for i, k in T.Parallel(bm, bk):
                    dot[i] += ps[i, k] * qs[i, k]
                    norm[i] = T.max(norm[i], T.abs(ps[i, k]))     # not only sums
            T.copy(dot, O[bx * bm])
            T.copy(norm, N[bx * bm])
    return main


def _check(p, q, o, n):
    torch.testing.assert_close(o.double(), (p.double() * q.double()).sum(1), rtol=1e-5,
                               atol=1e-4)
    torch.testing.assert_close(n, p.abs().amax(1), rtol=0, atol=0)


def test_a_store_with_some_of_the_indices_accumulates_along_the_others(ptxas):
    p, q = torch.randn(64, 256), torch.randn(64, 256)
    kernel = tilejit.compile(row_dots(64, 256), out_idx=[2, 3])
    _check(p, q, *kernel(p, q))
    for arch in ("sm_80", "sm_90a"):
        ptxas(tilejit.compile(row_dots(64, 256), out_idx=[2, 3], target=f"cuda -arch={arch}")
              .get_kernel_source(), arch)


def test_a_loop_that_also_indexes_a_fragment_whole_keeps_the_refusal():
    @T.prim_func
    def both(P: T.Tensor((32, 64), "float32"), O: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=128):
            pf = T.alloc_fragment((32, 64), "float32")
            dot = T.alloc_fragment((32,), "float32")
            T.copy(P, pf)
            T.clear(dot)
            for i, k in T.Parallel(32, 64):
                dot[i] += pf[i, k]
            T.copy(dot, O)
    with pytest.raises(CompileError, match=r"fragment 'dot' is indexed with only some of the "
                                           r"loop's indices; it can be read there, but written "
                                           r"only in a T.Parallel over its own shape"):
        tilejit.compile(both, out_idx=[1], target="cuda -arch=sm_90a").get_kernel_source()


@pytest.mark.gpu
def test_gpu_a_store_with_some_of_the_indices_accumulates_along_the_others():
    p, q = torch.randn(256, 512), torch.randn(256, 512)
    kernel = tilejit.compile(row_dots(256, 512), out_idx=[2, 3])
    o, n = kernel(p.cuda(), q.cuda())
    _check(p, q, o.cpu(), n.cpu())
    so, sn = kernel(p, q)
    torch.testing.assert_close(o.cpu(), so, rtol=1e-5, atol=1e-5)
    assert torch.equal(n.cpu(), sn)
