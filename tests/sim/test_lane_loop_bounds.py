"""A serial loop whose bounds differ between the block's threads (``T.serial(tx % 4)``,
``T.serial(lo[tx], hi[tx])``: each thread's own trip count) in per-thread code: the
simulator runs the longest thread's iterations, each thread only its own (it refused
such a loop as "not supported in simulation"); the GPU runs them as written."""
import pytest
import torch

import tilejit
import tilejit.language as T


def per_thread_trips(n):
    @T.prim_func
    def main(X: T.Tensor((n,), "int32"), Lo: T.Tensor((n,), "int32"),
             Hi: T.Tensor((n,), "int32"), Y: T.Tensor((n,), "int32"),
             Z: T.Tensor((n,), "int32"), W: T.Tensor((n,), "int32")):
        with T.Kernel(1, threads=n):
            tx = T.get_thread_binding()
            Y[tx] = 0
            for _k in T.serial(tx % 4):             # 0 to 3 trips
                Y[tx] = Y[tx] + X[tx]
            s = 0
            for k in T.serial(Lo[tx], Hi[tx]):      # a name summed over the own range
                s = s + k
            Z[tx] = s
            t = 0
            for k in T.serial(3):                   # the same bounds everywhere
                t = t + k * X[tx]
            W[tx] = t
    return main


def _inputs(n):
    g = torch.Generator().manual_seed(n)
    x = torch.randint(-50, 50, (n,), generator=g, dtype=torch.int32)
    lo = torch.randint(0, 6, (n,), generator=g, dtype=torch.int32)
    hi = lo + torch.randint(-2, 7, (n,), generator=g, dtype=torch.int32)
    return x, lo, hi


def _expected(x, lo, hi):
    n = x.shape[0]
    y = x * (torch.arange(n) % 4).int()
    z = torch.tensor([sum(range(int(a), int(b))) for a, b in zip(lo, hi)], dtype=torch.int32)
    return y, z, x * 3


def test_each_thread_runs_its_own_trips(ptxas):
    x, lo, hi = _inputs(64)
    got = tilejit.compile(per_thread_trips(64), out_idx=[3, 4, 5], target="sim")(x, lo, hi)
    for g, want in zip(got, _expected(x, lo, hi)):
        assert torch.equal(g, want)
    for arch in ("sm_80", "sm_90a"):
        ptxas(tilejit.compile(per_thread_trips(64), out_idx=[3, 4, 5],
                              target=f"cuda -arch={arch}").get_kernel_source(), arch)


@pytest.mark.gpu
def test_each_thread_runs_its_own_trips_on_the_gpu():
    x, lo, hi = _inputs(128)
    got = tilejit.compile(per_thread_trips(128), out_idx=[3, 4, 5])(x.cuda(), lo.cuda(),
                                                                     hi.cuda())
    sim = tilejit.compile(per_thread_trips(128), out_idx=[3, 4, 5], target="sim")(x, lo, hi)
    for g, s, want in zip(got, sim, _expected(x, lo, hi)):
        assert torch.equal(g.cpu(), want) and torch.equal(s, want)
