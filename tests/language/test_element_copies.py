"""`T.copy` of one element into another (`T.copy(indices[pid], idx[0])`, TileLang's
gather into a thread's local, its issue 2689): an element statement, converted to the
destination's dtype as a tile copy converts, inside a `T.Parallel` or outside one (it
was refused outside: "neither operand says how large the copy is"). In simulation
against torch, the PTX assembled, on the GPU against torch and the simulator."""
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T


def gather(n, index_dtype):
    @T.prim_func
    def main(indices: T.Tensor((n,), index_dtype), out: T.Tensor((n,), T.int32)):
        with T.Kernel(n, threads=1) as pid:
            idx = T.alloc_local([1], T.int32)
            T.copy(indices[pid], idx[0])
            out[pid] = idx[0]
    return main


def scatter_add(n):
    """TileLang's compile-only test, run: an element copied into a local, then used as
    an index."""
    @T.prim_func
    def main(indices: T.Tensor((n,), T.int32), x: T.Tensor((n,), T.float32)):
        with T.Kernel(n, threads=32) as pid:
            idx = T.alloc_local([1], T.int32)
            T.copy(indices[pid], idx[0])
            x[idx[0]] = x[idx[0]] + 1
    return main


def to_int(n):
    """float → int32 in a T.Parallel and outside one: converted toward zero."""
    @T.prim_func
    def main(F: T.Tensor((n,), T.float32), A: T.Tensor((n,), T.int32),
             B: T.Tensor((1,), T.int32)):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(n):
                T.copy(F[i], A[i])
            T.copy(F[3], B[0])
    return main


@pytest.mark.parametrize("index_dtype", [T.int64, T.int32, T.int16])
def test_an_element_copied_outside_a_parallel(index_dtype):
    indices = torch.randint(0, 30000, (64,), dtype=index_dtype.as_torch())
    out = tilelang.compile(gather(64, index_dtype), out_idx=[1])(indices)
    torch.testing.assert_close(out, indices.to(torch.int32))
    perm = torch.randperm(64, dtype=torch.int32)
    x = torch.zeros(64)
    tilelang.compile(scatter_add(64))(perm, x)
    torch.testing.assert_close(x, torch.ones(64))


def test_an_element_copy_converts_to_the_destinations_dtype():
    f = torch.randn(128) * 50
    a, b = tilelang.compile(to_int(128), out_idx=[1, 2])(f)
    torch.testing.assert_close(a, f.to(torch.int32))
    assert b.item() == int(f[3].item())


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_assembles(arch, ptxas):
    for program in (gather(64, T.int64), scatter_add(64), to_int(128)):
        ptxas(tilelang.compile(program, target=f"cuda -arch={arch}").get_kernel_source(), arch)


@pytest.mark.gpu
def test_element_copies_on_the_gpu():
    indices = torch.randint(0, 30000, (64,), dtype=torch.int64)
    out = tilelang.compile(gather(64, T.int64), out_idx=[1])(indices.cuda())
    torch.testing.assert_close(out.cpu(), indices.to(torch.int32))
    f = torch.randn(128) * 50
    a, b = tilelang.compile(to_int(128), out_idx=[1, 2])(f.cuda())
    sa, sb = tilelang.compile(to_int(128), out_idx=[1, 2])(f)
    torch.testing.assert_close(a.cpu(), f.to(torch.int32))
    torch.testing.assert_close((a.cpu(), b.cpu()), (sa, sb))
