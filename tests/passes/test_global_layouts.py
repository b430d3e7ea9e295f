"""``T.annotate_layout`` on a global tensor, as TileLang's FlashAttention backward lays
out its dQ accumulator (passes/global_layouts.py; sim/runtime.lay_out_global): the host
sees the elements where the layout puts them, every kernel annotating the tensor alike
sees them in logical order; and T.copy between two tensors' regions."""
import numpy as np
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T
from tilejit.errors import CompileError
from tilejit.language.layout import LayoutError

BLOCK = 32


def dq_layout(dQ):
    # TileLang's make_dq_layout in two dimensions: the 8x8 MMA fragment's elements together
    return T.Layout(dQ.shape, lambda l, d: [l // 8, d // 8, d % 2, 4 * (l % 8) + (d % 8) // 2])


def accumulate(L, D):
    """dQ += 2 X through the layout: once by element atomics, once by a region's."""
    @T.prim_func
    def main(dQ: T.Tensor((L, D), "float32"), X: T.Tensor((L, D), "float32")):
        with T.Kernel(T.ceildiv(L, BLOCK), threads=128) as bx:
            f = T.alloc_fragment((BLOCK, D), "float32")
            T.annotate_layout({dQ: dq_layout(dQ)})
            T.copy(X[bx * BLOCK:(bx + 1) * BLOCK, :], f)
            for i, j in T.Parallel(BLOCK, D):
                T.atomic_add(dQ[bx * BLOCK + i, j], f[i, j])
            T.atomic_add(dQ[bx * BLOCK:(bx + 1) * BLOCK, :], f)
    return main


def postprocess(L, D):
    """Y = dQ in logical order, as float16 (TileLang's flashattn_bwd_postprocess)."""
    @T.prim_func
    def main(dQ: T.Tensor((L, D), "float32"), Y: T.Tensor((L, D), "float16")):
        with T.Kernel(T.ceildiv(L, BLOCK), threads=128) as bx:
            T.annotate_layout({dQ: dq_layout(dQ)})
            T.copy(dQ[bx * BLOCK:(bx + 1) * BLOCK, :], Y[bx * BLOCK:(bx + 1) * BLOCK, :])
    return main


def scale_into_shared(L, D):
    """Y = 3 * dQ read through the layout into a shared tile and a fragment."""
    @T.prim_func
    def main(dQ: T.Tensor((L, D), "float32"), Y: T.Tensor((L, D), "float32")):
        with T.Kernel(T.ceildiv(L, BLOCK), threads=128) as bx:
            s = T.alloc_shared((BLOCK, D), "float32")
            f = T.alloc_fragment((BLOCK, D), "float32")
            T.annotate_layout({dQ: dq_layout(dQ)})
            T.copy(dQ[bx * BLOCK:(bx + 1) * BLOCK, :], s)
            T.copy(s, f)
            for i, j in T.Parallel(BLOCK, D):
                f[i, j] = f[i, j] * 3
            T.copy(f, Y[bx * BLOCK:(bx + 1) * BLOCK, :])
    return main


def physical(dQ, L, D):
    """The tensor's elements in logical order, read at the layout's flat positions."""
    offsets = torch.from_numpy(dq_layout(dQ).offsets())
    return dQ.reshape(-1)[offsets]


def test_the_host_sees_the_layout_and_the_postprocess_reads_it_back():
    L, D = 64, 32
    x = torch.randn(L, D)
    dq = torch.zeros(L, D)
    tilelang.compile(accumulate(L, D), target="sim")(dq, x)
    torch.testing.assert_close(physical(dq, L, D), 2 * x)
    assert not torch.allclose(dq, 2 * x)            # the host order is not the logical one
    y = torch.empty(L, D, dtype=torch.float16)
    tilelang.compile(postprocess(L, D), target="sim")(dq, y)
    torch.testing.assert_close(y, (2 * x).half())


def test_a_read_into_shared_memory_goes_through_the_layout():
    L, D = 64, 32
    x = torch.randn(L, D)
    dq = torch.zeros(L, D)
    dq.reshape(-1)[torch.from_numpy(dq_layout(dq).offsets())] = x
    y = torch.empty(L, D)
    tilelang.compile(scale_into_shared(L, D), target="sim")(dq, y)
    torch.testing.assert_close(y, 3 * x)


def test_a_tensor_with_a_tail_block_keeps_every_write_inside():
    # 40 rows: the last block runs past the edge; nothing outside may land in the tensor
    L, D = 40, 16
    x = torch.randn(L, D)
    dq = torch.zeros(L, D)
    tilelang.compile(accumulate(L, D), target="sim")(dq, x)
    torch.testing.assert_close(physical(dq, L, D), 2 * x)


def test_a_layout_that_is_not_a_bijection_is_refused_on_both_targets():
    def bad(dQ):
        return T.Layout(dQ.shape, lambda l, d: [l // 2, d])

    @T.prim_func
    def main(dQ: T.Tensor((16, 8), "float32"), X: T.Tensor((16, 8), "float32")):
        with T.Kernel(1, threads=128):
            T.annotate_layout({dQ: bad(dQ)})
            for i, j in T.Parallel(16, 8):
                dQ[i, j] = X[i, j]

    with pytest.raises(CompileError, match="not a bijection"):
        tilelang.compile(main).get_kernel_source(arch="sm_90a")
    with pytest.raises((CompileError, LayoutError), match="not a bijection"):
        tilelang.compile(main, target="sim")(torch.zeros(16, 8), torch.zeros(16, 8))


def test_a_tensor_that_is_not_contiguous_is_refused_at_the_call():
    L, D = 64, 32
    dq = torch.zeros(D, L).t()
    with pytest.raises(ValueError, match="argument 'dQ'.*contiguous"):
        tilelang.compile(accumulate(L, D), target="sim")(dq, torch.zeros(L, D))


def test_a_laid_out_tensor_in_another_tile_operation_is_a_compile_error():
    @T.prim_func
    def main(dQ: T.Tensor((16, 8), "float32")):
        with T.Kernel(1, threads=128):
            T.annotate_layout({dQ: dq_layout(dQ)})
            T.fill(dQ[0:16, 0:8], 1.0)

    with pytest.raises(CompileError, match="supported in T.copy and T.atomic_add"):
        tilelang.compile(main).get_kernel_source(arch="sm_90a")


def region_to_region(L, D):
    @T.prim_func
    def main(A: T.Tensor((L, D), "float32"), B: T.Tensor((L, D), "float16")):
        with T.Kernel(T.ceildiv(L, BLOCK), threads=128) as bx:
            T.copy(A[bx * BLOCK:(bx + 1) * BLOCK, :], B[bx * BLOCK:(bx + 1) * BLOCK, :])
    return main


def test_a_copy_between_two_tensors_regions_runs_to_their_edges():
    a = torch.randn(40, 24)
    b = torch.zeros(40, 24, dtype=torch.float16)
    tilelang.compile(region_to_region(40, 24), target="sim")(a, b)
    torch.testing.assert_close(b, a.half())


def into_a_padded_tensor(M, N, PM, PN, bm=32, bn=32):
    """TileLang's copy test of a source smaller than the padded destination: the
    elements past the source's edge read 0 and are stored (a tile copy pads with 0);
    the destination's own edge clips."""
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((PM, PN), "float16")):
        with T.Kernel(T.ceildiv(PN, bn), T.ceildiv(PM, bm), threads=128) as (bx, by):
            T.copy(A[by * bm:(by + 1) * bm, bx * bn:(bx + 1) * bn],
                   B[by * bm:(by + 1) * bm, bx * bn:(bx + 1) * bn])
    return main


def _padded(a, pm, pn):
    out = torch.zeros(pm, pn, dtype=torch.float16)
    out[:a.shape[0], :a.shape[1]] = a.half()
    return out


def test_elements_past_the_sources_edge_are_stored_as_zero():
    """Found by TileLang's copy test on the H200: the element loop stored only where
    both tensors held the element, leaving the padding as it was, where the simulator
    (and TileLang) store 0 there."""
    a = torch.randn(70, 75)
    b = torch.full((96, 80), 7.0, dtype=torch.float16)
    tilelang.compile(into_a_padded_tensor(70, 75, 96, 80), target="sim")(a, b)
    torch.testing.assert_close(b, _padded(a, 96, 80), rtol=0, atol=0)


@pytest.mark.gpu
def test_elements_past_the_sources_edge_on_the_gpu():
    a = torch.randn(70, 75)
    b = torch.full((96, 80), 7.0, dtype=torch.float16, device="cuda")
    tilelang.compile(into_a_padded_tensor(70, 75, 96, 80))(a.cuda(), b)
    sim = torch.full((96, 80), 7.0, dtype=torch.float16)
    tilelang.compile(into_a_padded_tensor(70, 75, 96, 80), target="sim")(a, sim)
    torch.testing.assert_close(b.cpu(), _padded(a, 96, 80), rtol=0, atol=0)
    torch.testing.assert_close(b.cpu(), sim, rtol=0, atol=0)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("program", [accumulate, postprocess, scale_into_shared,
                                     region_to_region, into_a_padded_tensor])
def test_the_ptx_assembles(program, arch, ptxas):
    args = (70, 75, 96, 80) if program is into_a_padded_tensor else (64, 32)
    ptx = tilelang.compile(program(*args)).get_kernel_source(arch=arch)
    if program is accumulate:
        assert "red.global.add.f32" in ptx or "atom.global.add.f32" in ptx
    ptxas(ptx, arch)


@pytest.mark.gpu
@pytest.mark.parametrize("L", [64, 40])
def test_on_gpu_against_torch_and_simulator(L):
    D = 32
    x = torch.randn(L, D)
    got = {}
    for target in ("cuda", "sim"):
        dev = "cuda" if target == "cuda" else "cpu"
        dq = torch.zeros(L, D, device=dev)
        tilelang.compile(accumulate(L, D), target=target)(dq, x.to(dev))
        y = torch.empty(L, D, dtype=torch.float16, device=dev)
        tilelang.compile(postprocess(L, D), target=target)(dq, y)
        z = torch.empty(L, D, device=dev)
        tilelang.compile(scale_into_shared(L, D), target=target)(dq, z)
        got[target] = (dq.cpu(), y.cpu(), z.cpu())
    ref = 2 * x.double()
    torch.testing.assert_close(physical(got["cuda"][0], L, D).double(), ref)
    torch.testing.assert_close(got["cuda"][1].double(), ref.half().double())
    torch.testing.assert_close(got["cuda"][2].double(), 3 * ref)
    for a, b in zip(got["cuda"], got["sim"]):
        torch.testing.assert_close(a, b)
    np.testing.assert_array_equal(got["cuda"][0].numpy(), got["sim"][0].numpy())


def test_an_access_before_the_annotation_is_a_compile_error():
    @T.prim_func
    def main(G: T.Tensor((16, 16), "float32"), Y: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=128):
            for i, j in T.Parallel(16, 16):
                Y[i, j] = G[i, j]
            T.annotate_layout({G: T.Layout(G.shape, lambda i, j: [j, i])})
    with pytest.raises(CompileError, match="'G' is accessed at line .* before its "
                                           "T.annotate_layout"):
        tilelang.compile(main).get_kernel_source(arch="sm_90a")


def test_an_annotation_inside_a_branch_is_a_compile_error():
    @T.prim_func
    def main(G: T.Tensor((16, 16), "float32"), flag: T.int32):
        with T.Kernel(1, threads=128):
            if flag > 0:
                T.annotate_layout({G: T.Layout(G.shape, lambda i, j: [j, i])})
            for i, j in T.Parallel(16, 16):
                G[i, j] = 1.0
    with pytest.raises(CompileError, match="must be a statement of the kernel's body"):
        tilelang.compile(main).get_kernel_source(arch="sm_90a")


def test_a_tensor_to_tensor_copy_by_keyword():
    a = torch.randn(40, 24)
    b = torch.zeros(40, 24, dtype=torch.float16)

    @T.prim_func
    def main(A: T.Tensor((40, 24), "float32"), B: T.Tensor((40, 24), "float16")):
        with T.Kernel(2, threads=128) as bx:
            T.copy(A[bx * 32:(bx + 1) * 32, :], dst=B[bx * 32:(bx + 1) * 32, :])
    tilelang.compile(main, target="sim")(a, b)
    torch.testing.assert_close(b, a.half())
    assert ".entry" in tilelang.compile(main).get_kernel_source(arch="sm_90a")


def dynamic_copies(form):
    """A copy between two tensors whose extents are known at run time (T.dynamic rows):
    a region of each, or the whole of each (they were refused: the extents must be known
    at compile time); the element loop runs over the run-time extents."""
    n = T.dynamic("n")

    @T.prim_func
    def main(A: T.Tensor((n, 8), "float32"), B: T.Tensor((n, 8), "float16")):
        with T.Kernel(1, threads=32):
            if form == "region":
                T.copy(A[0:n, 0:8], B[0:n, 0:8])
            else:
                T.copy(A, B)
    return main


@pytest.mark.parametrize("form", ["region", "whole"])
def test_a_copy_of_run_time_extents_between_tensors(form, ptxas):
    for rows in (1, 5, 77):
        a = torch.randn(rows, 8)
        b = torch.zeros(rows, 8, dtype=torch.float16)
        tilelang.compile(dynamic_copies(form), target="sim")(a, b)
        torch.testing.assert_close(b, a.half(), rtol=0, atol=0)
    for arch in ("sm_80", "sm_90a"):
        ptxas(tilelang.compile(dynamic_copies(form)).get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
@pytest.mark.parametrize("form", ["region", "whole"])
def test_a_copy_of_run_time_extents_on_the_gpu(form):
    kernel = tilelang.compile(dynamic_copies(form))
    for rows in (1, 77, 1000):
        a = torch.randn(rows, 8)
        b = torch.zeros(rows, 8, dtype=torch.float16, device="cuda")
        kernel(a.cuda(), b)
        torch.testing.assert_close(b.cpu(), a.half(), rtol=0, atol=0)


def run_time_prefix(form):
    """`T.copy(A[0:n], s[0:n])`: a run-time length into a shared tile's prefix (a varlen
    load; it was refused: neither operand says how large the copy is), and back."""
    n = T.dynamic("n")

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            s = T.alloc_shared((64,), "float32")
            T.fill(s, -1)
            if form == "in":
                T.copy(A[0:n], s[0:n])
                T.copy(s, B)
            else:
                for i in T.Parallel(64):
                    s[i] = B[i] * 2.0
                T.copy(s[0:n], A[0:n])
    return main


@pytest.mark.parametrize("form", ["in", "out"])
def test_a_run_time_length_into_and_out_of_a_shared_prefix(form, ptxas):
    for length in (1, 17, 64):
        a = torch.randn(length)
        b = torch.randn(64)
        a0, b0 = a.clone(), b.clone()
        tilelang.compile(run_time_prefix(form), target="sim")(a, b)
        if form == "in":
            want = torch.full((64,), -1.0)
            want[:length] = a0
            torch.testing.assert_close(b, want, rtol=0, atol=0)
        else:
            torch.testing.assert_close(a, 2 * b0[:length], rtol=0, atol=0)
    for arch in ("sm_80", "sm_90a"):
        ptxas(tilelang.compile(run_time_prefix(form)).get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
@pytest.mark.parametrize("form", ["in", "out"])
def test_a_run_time_length_and_a_shared_prefix_on_the_gpu(form):
    kernel = tilelang.compile(run_time_prefix(form))
    for length in (1, 17, 64):
        a = torch.randn(length)
        b = torch.randn(64)
        sa, sb = a.clone(), b.clone()
        ga, gb = a.cuda(), b.cuda()
        kernel(ga, gb)
        tilelang.compile(run_time_prefix(form), target="sim")(sa, sb)
        torch.testing.assert_close((ga.cpu(), gb.cpu()), (sa, sb), rtol=0, atol=0)
