"""The program's own Python functions of compile-time values where a compile-time value
is needed (a tile's shape ``align(num_groups, threads)``, as DeepSeek's TileKernels
write it): run at compile time, as TileLang's builder runs them
(``passes/static_eval.py``), also where the front end made the function a macro because
a kernel calls it. One that fails on those values, or computes no shape, leaves the
shape unknown: a CompileError at its line. In simulation against torch, in PTX through
ptxas, on the GPU against the simulator."""
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T


def ceil_div(x, y):
    return (x + y - 1) // y


def align(x, y):
    return ceil_div(x, y) * y


@tilelang.jit
def histogram(n: int, groups: int, threads: int = 128, sized_by=align):
    @T.prim_func
    def main(idx: T.Tensor[(n,), T.int32], out: T.Tensor[(groups,), T.int32]):
        with T.Kernel(1, threads=threads):
            tx = T.get_thread_binding()
            counts = T.alloc_shared((sized_by(groups, threads),), T.int32)
            T.clear(counts)
            T.sync_threads()
            for i in T.serial(tx, n, threads):
                T.atomic_add(counts[idx[i]], 1)
            T.sync_threads()
            for g in T.serial(tx, groups, threads):
                out[g] = counts[g]
    return main


def test_a_shape_from_the_programs_function(ptxas):
    idx = torch.randint(0, 40, (1000,), dtype=torch.int32)
    out = torch.zeros(40, dtype=torch.int32)
    histogram(1000, 40)(idx, out)
    assert torch.equal(out, torch.bincount(idx, minlength=40).int())
    ptxas(histogram(1000, 40).get_kernel_source(), "sm_90a")


@pytest.mark.parametrize("sized_by", [lambda g, t: g // 0, lambda g, t: g / t])
def test_a_function_that_fails_or_gives_no_shape_leaves_it_unknown(sized_by):
    with pytest.raises(tilelang.CompileError, match=r"the shape must be positive integers "
                                                    r"known at compile time, got "
                                                    r"`\(sized_by\(groups, threads\),\)`"):
        histogram(1000, 40, sized_by=sized_by)(torch.zeros(1000, dtype=torch.int32),
                                               torch.zeros(40, dtype=torch.int32))


@pytest.mark.gpu
def test_a_shape_from_the_programs_function_on_the_gpu():
    idx = torch.randint(0, 40, (1000,), dtype=torch.int32)
    out = torch.zeros(40, dtype=torch.int32)
    out = out.cuda()
    histogram(1000, 40)(idx.cuda(), out)
    sim = torch.zeros(40, dtype=torch.int32)
    histogram(1000, 40)(idx, sim)
    assert torch.equal(out.cpu(), sim)
