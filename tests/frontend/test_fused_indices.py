"""A one-index T.Parallel reading its index split in two (``F[i // c, i % c]``) runs as
the two-index loop it walks (frontend/fused_indices.py): in simulation against torch,
PTX assembled by ptxas, with ``-m gpu`` against the simulator; where ``c`` does not
divide the extent the loop stays and the fragment's index is refused as before."""
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T


def flatten(bm, bn, extent=None):
    extent = extent or bm * bn

    @T.prim_func
    def main(A: T.Tensor((bm, bn), "float32"), B: T.Tensor((extent,), "float32")):
        with T.Kernel(1, threads=128):
            A_local = T.alloc_fragment((bm, bn), "float32")
            B_local = T.alloc_fragment((extent,), "float32")
            T.copy(A, A_local)
            for i in T.Parallel(extent):
                B_local[i] = A_local[i // bn, i % bn] * 2 + i
            T.copy(B_local, B)
    return main


@pytest.mark.parametrize("bm, bn", [(32, 32), (16, 64), (64, 8)])
def test_in_simulation(bm, bn, ptxas):
    a = torch.randn(bm, bn)
    kernel = tilelang.compile(flatten(bm, bn), out_idx=[1])
    torch.testing.assert_close(kernel(a), a.reshape(-1) * 2 + torch.arange(bm * bn))
    for arch in ("sm_80", "sm_90a"):
        ptxas(kernel.get_kernel_source(arch=arch), arch)


def test_a_split_that_does_not_divide_the_extent_stays():
    with pytest.raises(tilelang.CompileError, match="not the T.Parallel's own"):
        tilelang.compile(flatten(32, 32, extent=1000), out_idx=[1])


def sum_of_squares(dk, dv):
    """TileLang's gated-delta-rule backward: a flat fragment whose shape is one extent
    (``(dv * dk)``, no tuple) written at ``i`` from shared memory read at ``i // dv, i % dv``."""
    @T.prim_func
    def main(A: T.Tensor((dk, dv), "float32"), B: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((dk, dv), "float32")
            F = T.alloc_fragment((dv * dk), "float32")
            S = T.alloc_fragment((1,), "float32")
            T.copy(A, A_s)
            T.clear(S)
            for i in T.Parallel(dk * dv):
                F[i] = A_s[i // dv, i % dv] * A_s[i // dv, i % dv]
            T.reduce_sum(F, S, dim=-1, clear=False)
            B[0] = S[0]
    return main


def test_a_flat_fragment_of_one_extent(ptxas):
    a = torch.randn(64, 32, dtype=torch.float32)
    kernel = tilelang.compile(sum_of_squares(64, 32), out_idx=[1])
    torch.testing.assert_close(kernel(a), (a.double() ** 2).sum().float().reshape(1))
    for arch in ("sm_80", "sm_90a"):
        ptxas(kernel.get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
def test_gpu_flat_fragment_of_one_extent():
    a = torch.randn(64, 32)
    kernel = tilelang.compile(sum_of_squares(64, 32), out_idx=[1])
    torch.testing.assert_close(kernel(a.cuda()).cpu(), kernel(a), rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(kernel(a.cuda()).cpu().double(),
                               (a.double() ** 2).sum().reshape(1), rtol=1e-5, atol=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("bm, bn", [(32, 32), (16, 64)])
def test_gpu_matches_the_simulator(bm, bn):
    a = torch.randn(bm, bn)
    kernel = tilelang.compile(flatten(bm, bn), out_idx=[1])
    torch.testing.assert_close(kernel(a.cuda()).cpu(), kernel(a))


def two_index(M, N, bm, bk, vec=32):
    """TileLang's fused-replicate layout test, with the fragment written first: a
    fragment of bm * bk / vec rows of vec, read in a T.Parallel over (bm, bk) at
    ``[idx // vec, idx % vec]`` with ``idx = i * bk + j``."""
    @T.prim_func
    def main(a: T.Tensor((M, N), "bfloat16"), out: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, bm), T.ceildiv(N, bk), threads=128) as (pm, pn):
            f = T.alloc_fragment((bm * bk // vec, vec), "float32")
            for r, v in T.Parallel(bm * bk // vec, vec):
                f[r, v] = a[pm * bm + (r * vec + v) // bk, pn * bk + (r * vec + v) % bk]
            for i, j in T.Parallel(bm, bk):
                idx = i * bk + j
                out[pm * bm + i, pn * bk + j] = f[idx // vec, idx % vec] * 2.0 + i - j
    return main


def _two_index_want(a):
    i = torch.arange(a.shape[0])[:, None] % 32
    j = torch.arange(a.shape[1])[None, :] % 64
    return a.double() * 2 + i - j


@pytest.mark.parametrize("vec", [32, 16, 128])
def test_two_index_loop_reading_a_fused_index(vec, ptxas):
    a = torch.randn(64, 128).bfloat16()
    kernel = tilelang.compile(two_index(64, 128, 32, 64, vec), out_idx=[1])
    # float32 arithmetic, as on the GPU (an index with a float32 is float32): 1 ulp
    torch.testing.assert_close(kernel(a).double(), _two_index_want(a), rtol=1e-6, atol=1e-6)
    for arch in ("sm_80", "sm_90a"):
        ptxas(kernel.get_kernel_source(arch=arch), arch)


def test_two_index_loop_whose_fused_split_does_not_divide_stays():
    with pytest.raises(tilelang.CompileError, match="not the T.Parallel's own"):
        tilelang.compile(two_index(64, 128, 32, 64, vec=24), out_idx=[1])


@pytest.mark.gpu
@pytest.mark.parametrize("vec", [32, 128])
def test_gpu_two_index_loop_reading_a_fused_index(vec):
    a = torch.randn(64, 128).bfloat16()
    kernel = tilelang.compile(two_index(64, 128, 32, 64, vec), out_idx=[1])
    gpu = kernel(a.cuda()).cpu()
    torch.testing.assert_close(gpu.double(), _two_index_want(a), rtol=1e-6, atol=1e-6)
    assert torch.equal(gpu, kernel(a))


SPLIT = 32


def rebound_split(M, N, two_index):
    """The split's divisor a name the kernel binds (``SPLIT = 16``) where the module has
    ``SPLIT = 32``: the kernel's value, the module's is not compile-time here."""
    @T.prim_func
    def main(a: T.Tensor((64, 64), "float32"), out: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((64, 64), "float32")
            T.copy(a, s)
            SPLIT = 16
            if two_index:
                for i, j in T.Parallel(M, N):
                    idx = i * N + j
                    out[i, j] = s[idx // SPLIT, idx % SPLIT] + i
            else:
                for k in T.Parallel(M * N):
                    out[k // N, k % N] = s[k // SPLIT, k % SPLIT] + k // N
    return main


def _rebound_want(a, M, N):
    return a.double()[:, :16].reshape(-1)[:M * N].reshape(M, N) + \
        torch.arange(M, dtype=torch.float64)[:, None]


@pytest.mark.parametrize("two_index", [True, False])
def test_a_divisor_the_kernel_binds_is_its_own(two_index, ptxas):
    a = torch.randn(64, 64)
    kernel = tilelang.compile(rebound_split(4, 32, two_index), out_idx=[1])
    torch.testing.assert_close(kernel(a).double(), _rebound_want(a, 4, 32))
    for arch in ("sm_80", "sm_90a"):
        ptxas(kernel.get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
@pytest.mark.parametrize("two_index", [True, False])
def test_gpu_a_divisor_the_kernel_binds_is_its_own(two_index):
    a = torch.randn(64, 64)
    kernel = tilelang.compile(rebound_split(4, 32, two_index), out_idx=[1])
    gpu = kernel(a.cuda()).cpu()
    torch.testing.assert_close(gpu.double(), _rebound_want(a, 4, 32))
    assert torch.equal(gpu, kernel(a))


def split_beside_a_fragment(M, N, c, tile):
    """A shared tile (``tile="shared"``) or the output tensor (``"global"``) indexed at
    ``[idx // c, idx % c]`` beside a fragment indexed at ``[i, j]``: a loop over (M, N) as
    written, no rewrite (the fragment is laid out over it)."""
    R = M * N // c
    shape = (M, N) if tile == "shared" else (R, c)

    @T.prim_func
    def main(a: T.Tensor((R, c), "float32"), b: T.Tensor((M, N), "float32"),
             out: T.Tensor(shape, "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((R, c), "float32")
            g = T.alloc_fragment((M, N), "float32")
            T.copy(a, s)
            T.copy(b, g)
            if tile == "shared":
                for i, j in T.Parallel(M, N):
                    idx = i * N + j
                    g[i, j] = g[i, j] * 2.0 + s[idx // c, idx % c]
                T.copy(g, out)
            else:
                for i, j in T.Parallel(M, N):
                    idx = i * N + j
                    out[idx // c, idx % c] = g[i, j] * 2.0 + a[idx // c, idx % c]
    return main


@pytest.mark.parametrize("tile", ["shared", "global"])
def test_a_split_tile_beside_a_fragment_at_i_j_stays(tile, ptxas):
    a, b = torch.randn(12, 32), torch.randn(16, 24)
    kernel = tilelang.compile(split_beside_a_fragment(16, 24, 32, tile), out_idx=[2])
    want = b.double() * 2 + a.double().reshape(16, 24)
    if tile == "global":
        want = want.reshape(12, 32)
    torch.testing.assert_close(kernel(a, b).double(), want)
    for arch in ("sm_80", "sm_90a"):
        ptxas(kernel.get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
@pytest.mark.parametrize("tile", ["shared", "global"])
def test_gpu_a_split_tile_beside_a_fragment_at_i_j_stays(tile):
    a, b = torch.randn(12, 32), torch.randn(16, 24)
    kernel = tilelang.compile(split_beside_a_fragment(16, 24, 32, tile), out_idx=[2])
    gpu = kernel(a.cuda(), b.cuda()).cpu()
    torch.testing.assert_close(gpu, kernel(a, b))


def two_fragments(M, N, c):
    R = M * N // c

    @T.prim_func
    def main(a: T.Tensor((R, c), "float32"), b: T.Tensor((M, N), "float32"),
             out: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((R, c), "float32")
            g = T.alloc_fragment((M, N), "float32")
            T.copy(a, f)
            T.copy(b, g)
            for i, j in T.Parallel(M, N):
                idx = i * N + j
                out[i, j] = f[idx // c, idx % c] + g[i, j]
    return main


def test_a_second_fragment_at_i_j_is_refused_in_the_loop_as_written():
    with pytest.raises(tilelang.CompileError, match=r"T.Parallel\(16, 24\) over i, j") as e:
        tilelang.compile(two_fragments(16, 24, 32), out_idx=[2])
    assert "test_fused_indices.py" in str(e.value)
