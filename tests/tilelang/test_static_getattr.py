"""``getattr(T, "reduce_" + op)(...)`` with ``op`` a compile-time string, as TileLang's
issue-2624 test picks its reduction: the call is the attribute it names
(frontend/rewrite._static_getattr); and unsigned reductions through it."""
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T

N = 4


def reduce_by_name(op, dtype):
    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor((1,), dtype)):
        with T.Kernel(1, threads=N):
            As = T.alloc_fragment((N,), dtype)
            Bs = T.alloc_fragment((1,), dtype)
            T.copy(A, As)
            getattr(T, "reduce_" + op)(As, Bs, dim=0)
            T.copy(Bs, B)
    return main


CASES = [("max", "uint32", 100), ("absmax", "uint64", 100), ("sum", "uint32", 160),
         ("abssum", "uint64", 160)]


@pytest.mark.parametrize("op,dtype,want", CASES)
def test_in_simulation(op, dtype, want):
    a = torch.tensor([100, 10, 20, 30], dtype=getattr(torch, dtype))
    out = tilelang.compile(reduce_by_name(op, dtype), out_idx=[1], target="sim")(a)
    assert out.tolist() == [want]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_assembles(arch, ptxas):
    ptxas(tilelang.compile(reduce_by_name("absmax", "uint32"), out_idx=[1])
          .get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
@pytest.mark.parametrize("op,dtype,want", CASES)
def test_on_gpu_against_the_simulator(op, dtype, want):
    a = torch.tensor([100, 10, 20, 30], dtype=getattr(torch, dtype))
    got = tilelang.compile(reduce_by_name(op, dtype), out_idx=[1])(a.cuda()).cpu()
    sim = tilelang.compile(reduce_by_name(op, dtype), out_idx=[1], target="sim")(a)
    assert got.tolist() == sim.tolist() == [want]
