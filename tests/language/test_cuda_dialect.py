"""TileLang's CUDA dialect module, ``from tilelang.cuda import language as T`` (its own
language tests import it so): tilejit's language itself, so a kernel written against it
compiles and runs as one written against ``tilelang.language``."""
import pytest

import tilejit as tilelang
from tilejit.tilelang.cuda import language as T

torch = pytest.importorskip("torch")


@T.prim_func
def bitwise_not(A: T.Tensor((64,), "int32"), B: T.Tensor((64,), "int32")):
    with T.Kernel(1, threads=64):
        for i in T.Parallel(64):
            B[i] = ~A[i]


def test_a_kernel_of_the_dialect_runs_and_its_ptx_assembles(ptxas):
    a = torch.arange(-32, 32, dtype=torch.int32)
    assert torch.equal(tilelang.compile(bitwise_not, out_idx=[1])(a), ~a)
    for arch in ("sm_80", "sm_90a"):
        ptx = tilelang.compile(bitwise_not, out_idx=[1],
                               target=f"cuda -arch={arch}").get_kernel_source()
        assert "not.b32" in ptx or "xor.b32" in ptx
        ptxas(ptx, arch)


@pytest.mark.gpu
def test_on_the_gpu_against_torch():
    a = torch.arange(-32, 32, dtype=torch.int32)
    assert torch.equal(tilelang.compile(bitwise_not, out_idx=[1])(a.cuda()).cpu(), ~a)
