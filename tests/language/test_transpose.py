"""``T.transpose(src, dst)``: dst[..., j, i] = src[..., i, j] of tiles, tensors or regions
of either, as TileLang's shared-memory transpose test and its CPU tests write it
(passes/transposes.py; fragments through fragment_transposes.py): the leading dimensions
a batch, a tensor's elements outside it neither read (0) nor written."""
import numpy as np
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T
from tilejit.errors import CompileError


def transposed_copy(M, N, block_M, block_N, dtype="float16", through="shared"):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((N, M), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            tile = T.alloc_shared((block_M, block_N), dtype)
            if through == "shared":
                tile_T = T.alloc_shared((block_N, block_M), dtype)
            else:
                tile_T = T.alloc_fragment((block_N, block_M), "float32")
            T.copy(A[by * block_M:(by + 1) * block_M, bx * block_N:(bx + 1) * block_N], tile)
            T.transpose(tile, tile_T)
            T.copy(tile_T, B[bx * block_N:(bx + 1) * block_N, by * block_M:(by + 1) * block_M])
    return main


CASES = [(128, 128, 128, 128, "float16", "shared"), (256, 128, 64, 32, "float16", "shared"),
         (64, 96, 32, 64, "float32", "shared"), (128, 64, 64, 32, "float16", "fragment")]
IDS = ["single-tile", "tiles", "float32", "into-a-fragment"]


@pytest.mark.parametrize("M,N,bm,bn,dtype,through", CASES, ids=IDS)
def test_simulator(M, N, bm, bn, dtype, through):
    a = torch.randn(M, N).to(getattr(torch, dtype))
    b = tilelang.compile(transposed_copy(M, N, bm, bn, dtype, through), out_idx=[1],
                         target="sim")(a)
    assert torch.equal(b, a.T)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("M,N,bm,bn,dtype,through", CASES, ids=IDS)
def test_ptx_assembles(M, N, bm, bn, dtype, through, arch, ptxas):
    kernel = tilelang.compile(transposed_copy(M, N, bm, bn, dtype, through), out_idx=[1])
    ptxas(kernel.get_kernel_source(arch=arch), arch)


def test_shapes_that_do_not_transpose_are_an_error_on_both_targets():
    @T.prim_func
    def main(A: T.Tensor((64, 32), "float32"), B: T.Tensor((64, 32), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((64, 32), "float32")
            S2 = T.alloc_shared((64, 32), "float32")
            T.copy(A, S)
            T.transpose(S, S2)
            T.copy(S2, B)
    with pytest.raises(CompileError, match=r"T.transpose: dst `S2` has extents \(64, 32\); "
                       r"src's \(64, 32\) with the last two swapped are \(32, 64\)"):
        tilelang.compile(main, out_idx=[1]).get_kernel_source(arch="sm_90a")
    with pytest.raises((CompileError, ValueError), match="T.transpose"):
        tilelang.compile(main, out_idx=[1], target="sim")(torch.zeros(64, 32))


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,bm,bn,dtype,through", CASES, ids=IDS)
def test_gpu_matches_simulator_and_torch(M, N, bm, bn, dtype, through):
    a = torch.randn(M, N).to(getattr(torch, dtype))
    program = transposed_copy(M, N, bm, bn, dtype, through)
    b = tilelang.compile(program, out_idx=[1])(a.cuda())
    b_sim = tilelang.compile(program, out_idx=[1], target="sim")(a)
    assert torch.equal(b.cpu(), b_sim) and torch.equal(b_sim, a.T)
    np.testing.assert_array_equal(b.cpu().float().numpy(), a.T.float().numpy())


def batched(src_shape, src_region, dst_shape, dst_region, fill=None, dtype="float32"):
    """A kernel transposing a region of a global tensor into a region of another (the whole
    tensors when the regions are None), ``dst`` first filled with ``fill``."""
    whole = src_region is None
    (a0, b0), (a1, b1), (a2, b2) = src_region or ((0, 0),) * 3
    (c0, d0), (c1, d1), (c2, d2) = dst_region or ((0, 0),) * 3

    @T.prim_func
    def main(src: T.Tensor(src_shape, dtype), dst: T.Tensor(dst_shape, dtype)):
        with T.Kernel(1, threads=128):
            if fill is not None:
                T.fill(dst, fill)
            if whole:
                T.transpose(src, dst)
            else:
                T.transpose(src[a0:b0, a1:b1, a2:b2], dst[c0:d0, c1:d1, c2:d2])
    return main


def _expected(a, dst_shape, src_region, dst_region, fill):
    """numpy's answer: each element of the source region inside ``a`` (else 0) into its
    transposed place in the destination region, where that is inside the destination."""
    out = np.full(dst_shape, 0.0 if fill is None else fill, np.float32)
    s_box = src_region or [(0, n) for n in a.shape]
    d_box = dst_region or [(0, n) for n in dst_shape]
    for idx in np.ndindex(*[b - a_ for a_, b in s_box]):
        src = tuple(a_ + i for (a_, _), i in zip(s_box, idx))
        rel = idx[:-2] + (idx[-1], idx[-2])
        dst = tuple(a_ + i for (a_, _), i in zip(d_box, rel))
        if all(0 <= i < n for i, n in zip(dst, dst_shape)):
            inside = all(0 <= i < n for i, n in zip(src, a.shape))
            out[dst] = a[src] if inside else 0.0
    return out


BATCHED = [((2, 3, 4), None, (2, 4, 3), None, None),
           ((2, 3, 4, 5), None, (2, 3, 5, 4), None, None),
           ((2, 3, 4), [(0, 2), (0, 3), (0, 4)], (2, 4, 3), [(0, 2), (0, 4), (1, 4)], -1.0),
           ((2, 3, 1), [(0, 2), (0, 3), (1, 2)], (2, 1, 3), [(0, 2), (0, 1), (0, 3)], 5.0),
           ((4, 16, 8), [(1, 3), (4, 12), (0, 8)], (2, 8, 8), [(0, 2), (0, 8), (0, 8)], 0.0)]
BATCHED_IDS = ["3d", "4d", "dst-past-its-edge", "src-past-its-edge", "inner-regions"]


@pytest.mark.parametrize("src_shape,src_region,dst_shape,dst_region,fill", BATCHED,
                         ids=BATCHED_IDS)
def test_tensor_regions_in_the_simulator(src_shape, src_region, dst_shape, dst_region, fill):
    a = torch.arange(int(np.prod(src_shape)), dtype=torch.float32).reshape(src_shape)
    kernel = tilelang.compile(batched(src_shape, src_region, dst_shape, dst_region, fill),
                              out_idx=[1], target="sim")
    want = _expected(a.numpy(), dst_shape, src_region, dst_region, fill)
    np.testing.assert_array_equal(kernel(a).numpy(), want)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("src_shape,src_region,dst_shape,dst_region,fill", BATCHED,
                         ids=BATCHED_IDS)
def test_tensor_regions_assemble(src_shape, src_region, dst_shape, dst_region, fill, arch,
                                 ptxas):
    kernel = tilelang.compile(batched(src_shape, src_region, dst_shape, dst_region, fill),
                              out_idx=[1])
    ptxas(kernel.get_kernel_source(arch=arch), arch)


def test_a_region_at_a_block_offset_on_both_targets(ptxas):
    """Regions whose starts are run-time values (the block's) and whose extents are
    compile-time: B's tiles are A's transposed, the last block's clipped at the edges."""
    M, N, bm, bn = 100, 72, 32, 32

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((N, M), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            T.transpose(A[by * bm:by * bm + bm, bx * bn:bx * bn + bn],
                        B[bx * bn:bx * bn + bn, by * bm:by * bm + bm])
    a = torch.randn(M, N)
    out = tilelang.compile(main, out_idx=[1], target="sim")(a)
    assert torch.equal(out, a.T)
    ptxas(tilelang.compile(main, out_idx=[1]).get_kernel_source(arch="sm_90a"), "sm_90a")


def test_operands_that_do_not_transpose_are_errors_on_both_targets():
    @T.prim_func
    def flat(A: T.Tensor((8, 4), "float32"), B: T.Tensor((4, 8), "float32")):
        with T.Kernel(1, threads=128):
            T.transpose(A[0, 0:4], B[0:4, 0])
    with pytest.raises(CompileError, match=r"T.transpose: src `A\[0, :4\]` has 1 sliced"):
        tilelang.compile(flat, out_idx=[1]).get_kernel_source(arch="sm_90a")
    with pytest.raises(CompileError, match=r"T.transpose: src `A\[0, :4\]` has 1 sliced"):
        tilelang.compile(flat, out_idx=[1], target="sim")(torch.zeros(8, 4))
    # a CPU target (no GPU front end: the simulator alone) refuses it too
    with pytest.raises(ValueError, match="T.transpose: src must be a tile, a tensor or a "
                                         "region of two or more sliced dimensions"):
        tilelang.compile(flat, out_idx=[1], target="c")(torch.zeros(8, 4))

    @T.prim_func
    def batch_differs(A: T.Tensor((2, 3, 4), "float32"), B: T.Tensor((3, 4, 3), "float32")):
        with T.Kernel(1, threads=128):
            T.transpose(A, B)
    with pytest.raises(CompileError, match=r"dst `B` has extents \(3, 4, 3\); src's "
                                           r"\(2, 3, 4\) with the last two swapped are "
                                           r"\(2, 4, 3\)"):
        tilelang.compile(batch_differs, out_idx=[1]).get_kernel_source(arch="sm_90a")
    with pytest.raises(ValueError, match=r"dst 'B' has extents \(3, 4, 3\)"):
        tilelang.compile(batch_differs, out_idx=[1], target="c")(torch.zeros(2, 3, 4))


@pytest.mark.gpu
@pytest.mark.parametrize("src_shape,src_region,dst_shape,dst_region,fill", BATCHED,
                         ids=BATCHED_IDS)
def test_gpu_tensor_regions_match_the_simulator(src_shape, src_region, dst_shape, dst_region,
                                                 fill):
    a = torch.arange(int(np.prod(src_shape)), dtype=torch.float32).reshape(src_shape)
    program = batched(src_shape, src_region, dst_shape, dst_region, fill)
    got = tilelang.compile(program, out_idx=[1])(a.cuda()).cpu()
    sim = tilelang.compile(program, out_idx=[1], target="sim")(a)
    want = _expected(a.numpy(), dst_shape, src_region, dst_region, fill)
    np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal(sim.numpy(), want)
