"""Tiles in simulation: T.copy between global, shared, fragment and local tiles (dtype
conversion, regions of every form, partial tiles at the tensor's edges), T.clear/T.fill,
T.alloc_var/T.alloc_local, and T.Parallel over fragments and shared tiles. Every result
is checked against a numpy/torch reference computed independently. Each kernel's PTX is
also generated for sm_80 and sm_90a and assembled with ptxas; with ``-m gpu`` the
important kernels run on the device against torch and against the simulator."""
import shutil
import subprocess

import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T

PTXAS = shutil.which("ptxas")
ARCHS = ["sm_80", "sm_90a"]


# ----------------------------------------------------------------------------- kernels

@tilejit.kernel
def roundtrip(A, B, bm: T.constexpr = 64, bn: T.constexpr = 64):
    """global -> shared (A's dtype) -> fragment (B's dtype) -> global."""
    M, N = A.shape
    with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
        S = T.alloc_shared((bm, bn), A.dtype)
        F = T.alloc_fragment((bm, bn), B.dtype)
        T.copy(A[by * bm, bx * bn], S)
        T.copy(S, F)
        T.copy(F, B[by * bm, bx * bn])


@tilejit.kernel
def via_shared(A, B, bm: T.constexpr = 64, bn: T.constexpr = 64):
    """global -> shared (B's dtype) -> global, start-index regions on both sides."""
    M, N = A.shape
    with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
        S = T.alloc_shared((bm, bn), B.dtype)
        T.copy(A[by * bm, bx * bn], S)
        T.copy(S, B[by * bm, bx * bn])


@tilejit.kernel
def tile_sum(A, Out, bm: T.constexpr = 64, bn: T.constexpr = 64):
    """Each block sums its (possibly overhanging) tile with a per-thread accumulator."""
    M, N = A.shape
    with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
        S = T.alloc_shared((bm, bn), T.float32)
        acc = T.alloc_var(T.float32)
        T.copy(A[by * bm, bx * bn], S)
        for i in T.serial(bm):
            for j in T.serial(bn):
                acc += S[i, j]
        Out[by, bx] = acc


@tilejit.kernel
def slices(A, B, bm: T.constexpr = 64, bn: T.constexpr = 64):
    """Slice regions on both sides, through a fragment."""
    M, N = A.shape
    with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
        S = T.alloc_shared((bm, bn), A.dtype)
        F = T.alloc_fragment((bm, bn), T.float32)
        T.copy(A[by * bm:(by + 1) * bm, bx * bn:(bx + 1) * bn], S)
        T.copy(S, F)
        T.copy(F, B[by * bm:(by + 1) * bm, bx * bn:(bx + 1) * bn])


@tilejit.kernel
def heads(Q, O, block: T.constexpr = 64):
    """A (batch, seq, heads, dim) tensor: a 2-d tile per (batch, seq block, head),
    doubled in shared memory and written back to the same region of O."""
    S = Q.shape[1]
    D = Q.shape[3]
    with T.Kernel(T.ceildiv(S, block), Q.shape[2], Q.shape[0], threads=128) as (i, h, b):
        Q_s = T.alloc_shared((block, D), Q.dtype)
        T.copy(Q[b, i * block:(i + 1) * block, h, :], Q_s)
        for r, c in T.Parallel(block, D):
            Q_s[r, c] = Q_s[r, c] * 2.0
        T.copy(Q_s, O[b, i * block:(i + 1) * block, h, :])


@tilejit.kernel
def swap_halves(A, B, bm: T.constexpr = 64, bn: T.constexpr = 64):
    """Regions of a shared tile copied to global: the two halves of each row block swap."""
    M, N = A.shape
    half = bm // 2
    with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
        S = T.alloc_shared((bm, bn), A.dtype)
        T.copy(A[by * bm, bx * bn], S)
        T.copy(S[half:bm, 0:bn], B[by * bm, bx * bn])
        T.copy(S[0:half, 0:bn], B[by * bm + half, bx * bn])


@tilejit.kernel
def fills(Out, value: T.constexpr = 3.0, bm: T.constexpr = 32, bn: T.constexpr = 32):
    """T.fill / T.clear on shared, fragment and local tiles."""
    M, N = Out.shape
    with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
        S = T.alloc_shared((bm, bn), T.float32)
        Z = T.alloc_shared((bm, bn), T.float32)
        F = T.alloc_fragment((bm, bn), T.float32)
        L = T.alloc_local((4,), T.float32)
        T.fill(S, value)
        T.fill(Z, 100.0)
        T.clear(Z)
        T.fill(F, -1.0)
        T.clear(L)
        L[1] = 0.25
        for i, j in T.Parallel(bm, bn):
            F[i, j] = F[i, j] + S[i, j] + Z[i, j] + L[0] + L[1]
        T.copy(F, Out[by * bm, bx * bn])


@tilejit.kernel
def fill_local_copy(Out, n: T.constexpr = 8):
    """A local tile filled, then copied to global (every thread writes the same values)."""
    with T.Kernel(1, threads=128) as bx:
        L = T.alloc_local((n,), Out.dtype)
        T.fill(L, 1.5)
        for k in T.serial(n):
            L[k] = L[k] + k
        T.copy(L, Out[0])


@tilejit.kernel
def row_dot(A, w, Out, bm: T.constexpr = 32, n: T.constexpr = 8):
    """Per-row weighted sums: the weights in a per-thread local array, a T.alloc_var
    accumulator in a serial loop."""
    M = A.shape[0]
    with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
        W = T.alloc_local((n,), T.float32)
        for k in T.serial(n):
            W[k] = w[k]
        for i in T.Parallel(bm):
            row = bx * bm + i
            if row < M:
                acc = T.alloc_var(T.float32)
                for k in T.serial(n):
                    acc += A[row, k] * W[k]
                Out[row] = acc


@tilejit.kernel
def epilogue(A, bias, Out, scale, bm: T.constexpr = 64, bn: T.constexpr = 64):
    """A fragment loaded from global, an elementwise epilogue in T.Parallel, stored with a
    dtype conversion."""
    M, N = A.shape
    with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
        F = T.alloc_fragment((bm, bn), T.float32)
        T.copy(A[by * bm, bx * bn], F)
        for i, j in T.Parallel(bm, bn):
            F[i, j] = T.max(F[i, j] * scale + bias[bx * bn + j] if bx * bn + j < N else 0.0,
                            0.0)
        T.copy(F, Out[by * bm, bx * bn])


@tilejit.kernel
def two_loops(A, Out, bm: T.constexpr = 64, bn: T.constexpr = 64):
    """A fragment written in one T.Parallel and read in another; a shared tile updated
    in a T.Parallel between them."""
    M, N = A.shape
    with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
        S = T.alloc_shared((bm, bn), T.float32)
        F = T.alloc_fragment((bm, bn), T.float32)
        G = T.alloc_fragment((bm, bn), Out.dtype)
        T.copy(A[by * bm, bx * bn], S)
        for i, j in T.Parallel(bm, bn):
            F[i, j] = S[i, j] * S[i, j]
        for i, j in T.Parallel(bm, bn):
            S[i, j] = S[i, j] + 1.0
        for i, j in T.Parallel(bm, bn):
            G[i, j] = F[i, j] - S[bm - 1 - i, j]
        T.copy(G, Out[by * bm, bx * bn])


roundtrip_sim = tilejit.kernel(roundtrip.func, target="sim")
slices_sim = tilejit.kernel(slices.func, target="sim")
heads_sim = tilejit.kernel(heads.func, target="sim")
swap_halves_sim = tilejit.kernel(swap_halves.func, target="sim")
tile_sum_sim = tilejit.kernel(tile_sum.func, target="sim")
fills_sim = tilejit.kernel(fills.func, target="sim")
epilogue_sim = tilejit.kernel(epilogue.func, target="sim")
two_loops_sim = tilejit.kernel(two_loops.func, target="sim")


# ----------------------------------------------------------------------------- references

def _tile_sums(a: np.ndarray, bm, bn):
    M, N = a.shape
    gm, gn = -(-M // bm), -(-N // bn)
    out = np.zeros((gm, gn), np.float64)
    for i in range(gm):
        for j in range(gn):
            out[i, j] = a[i * bm:(i + 1) * bm, j * bn:(j + 1) * bn].astype(np.float64).sum()
    return out


def _swap_ref(a: np.ndarray, bm):
    """Each block of bm rows: the lower half first, then the upper half; rows past the
    tensor read as 0 and rows that land past it are dropped."""
    M, N = a.shape
    half = bm // 2
    padded = np.zeros((-(-M // bm) * bm, N), a.dtype)
    padded[:M] = a
    out = np.empty_like(padded)
    for r0 in range(0, padded.shape[0], bm):
        out[r0:r0 + half] = padded[r0 + half:r0 + bm]
        out[r0 + half:r0 + bm] = padded[r0:r0 + half]
    return out[:M]


# ----------------------------------------------------------------------------- simulated

ROUNDTRIP_CASES = [
    # (shape, src dtype, dst dtype)
    ((100, 130), torch.float16, torch.float32),
    ((128, 128), torch.float16, torch.float32),
    ((100, 130), torch.float32, torch.bfloat16),
    ((70, 64), torch.int32, torch.float32),
    ((64, 200), torch.float32, torch.float16),
]


def _rand(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype in (torch.int32, torch.int8):
        return torch.randint(-1000, 1000, shape, generator=g, dtype=torch.int32).to(dtype)
    return (torch.randn(shape, generator=g) * 4).to(dtype)


@pytest.mark.parametrize("shape,src,dst", ROUNDTRIP_CASES)
def test_roundtrip_converts_dtype(shape, src, dst):
    a = _rand(shape, src)
    b = torch.full(shape, 12345, dtype=dst)
    roundtrip(a, b)
    torch.testing.assert_close(b, a.to(dst), rtol=0, atol=0)


def test_roundtrip_numpy_int32_to_float32():
    a = np.arange(100 * 130, dtype=np.int32).reshape(100, 130) - 5000
    b = np.full((100, 130), -1, np.float32)
    roundtrip(a, b)
    np.testing.assert_array_equal(b, a.astype(np.float32))


@pytest.mark.parametrize("src,dst", [(torch.float32, torch.bfloat16),
                                     (torch.bfloat16, torch.float32),
                                     (torch.float16, torch.float32)])
def test_copy_through_shared_converts_dtype(src, dst):
    a = _rand((96, 80), src, seed=3)
    b = torch.zeros(96, 80, dtype=dst)
    via_shared(a, b)
    torch.testing.assert_close(b, a.to(dst), rtol=0, atol=0)


def test_edge_tiles_never_write_outside_the_tensor():
    a = _rand((100, 130), torch.float32, seed=1)
    big = torch.full((128, 192), -7.0)
    b = big[:100, :130]                 # a view: the rest of `big` must stay untouched
    roundtrip(a, b)
    torch.testing.assert_close(b, a, rtol=0, atol=0)
    assert torch.all(big[100:, :] == -7.0) and torch.all(big[:, 130:] == -7.0)


def test_edge_tiles_read_zero_outside_the_tensor():
    a = _rand((100, 130), torch.float32, seed=2)
    # the last row and column of blocks hang over the edge: only the inside counts
    out = torch.full((2, 3), float("nan"))
    tile_sum(a, out)
    np.testing.assert_allclose(out.numpy(), _tile_sums(a.numpy(), 64, 64), rtol=1e-5, atol=1e-3)


def test_edge_tile_sum_of_ones_counts_inside_elements():
    a = np.ones((100, 130), np.float32)
    out = np.zeros((2, 3), np.float32)
    tile_sum(a, out)
    expect = np.array([[64 * 64, 64 * 64, 64 * 2], [36 * 64, 36 * 64, 36 * 2]], np.float32)
    np.testing.assert_array_equal(out, expect)


@pytest.mark.parametrize("shape", [(128, 128), (100, 130)])
def test_slice_regions(shape):
    a = _rand(shape, torch.float16, seed=4)
    b = torch.full(shape, 99.0)
    slices(a, b)
    torch.testing.assert_close(b, a.float(), rtol=0, atol=0)


@pytest.mark.parametrize("shape", [(2, 128, 3, 32), (1, 100, 2, 16)])
def test_3d_region_with_point_dimensions(shape):
    q = _rand(shape, torch.float16, seed=5)
    o = torch.full(shape, 11.0, dtype=torch.float16)
    heads(q, o)
    torch.testing.assert_close(o, q * 2, rtol=0, atol=0)


def test_3d_region_leaves_other_heads_alone():
    q = _rand((2, 64, 4, 16), torch.float32, seed=6)
    o_full = torch.full((2, 64, 4, 16), 5.0)
    heads(q, o_full)
    torch.testing.assert_close(o_full, q * 2, rtol=0, atol=0)
    # a view onto heads 1 and 3 only: heads 0 and 2 are never written
    o_full = torch.full((2, 64, 4, 16), 5.0)
    heads(q[:, :, 1::2, :], o_full[:, :, 1::2, :])
    torch.testing.assert_close(o_full[:, :, 1::2, :], q[:, :, 1::2, :] * 2, rtol=0, atol=0)
    assert torch.all(o_full[:, :, 0::2, :] == 5.0)



@pytest.mark.parametrize("shape", [(128, 64), (100, 70)])
def test_shared_tile_regions_to_global(shape):
    a = _rand(shape, torch.float32, seed=7)
    b = torch.full(shape, -3.0)
    swap_halves(a, b)
    np.testing.assert_array_equal(b.numpy(), _swap_ref(a.numpy(), 64))


@pytest.mark.parametrize("value", [3.0, -0.5])
def test_fill_and_clear_on_every_tile_kind(value):
    out = torch.zeros(64, 96)
    fills(out, value=value)
    # F = -1 + S (value) + Z (cleared) + L[0] (cleared) + L[1] (0.25)
    torch.testing.assert_close(out, torch.full((64, 96), -1.0 + value + 0.25), rtol=0, atol=0)


def test_fill_local_then_copy_to_global():
    out = np.zeros(8, np.float32)
    fill_local_copy(out)
    np.testing.assert_array_equal(out, 1.5 + np.arange(8, dtype=np.float32))


def test_alloc_var_and_alloc_local_per_thread():
    a = _rand((70, 8), torch.float32, seed=8)
    w = torch.linspace(-1, 1, 8)
    out = torch.full((70,), float("nan"))
    row_dot(a, w, out)
    torch.testing.assert_close(out, (a.double() @ w.double()).float(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,dtype", [((128, 128), torch.float16), ((100, 130), torch.bfloat16)])
def test_parallel_epilogue_on_fragment(shape, dtype):
    a = _rand(shape, torch.float32, seed=9)
    bias = _rand((shape[1],), torch.float32, seed=10)
    out = torch.zeros(shape, dtype=dtype)
    epilogue(a, bias, out, 0.5)
    ref = torch.relu(a * 0.5 + bias).to(dtype)
    torch.testing.assert_close(out, ref, rtol=0, atol=0)


@pytest.mark.parametrize("shape", [(128, 64), (64, 64)])
def test_fragment_shared_across_parallel_loops(shape):
    a = _rand(shape, torch.float32, seed=11)
    out = torch.zeros(shape)
    two_loops(a, out)
    ref = torch.empty(shape)
    for r0 in range(0, shape[0], 64):
        blk = a[r0:r0 + 64]
        ref[r0:r0 + 64] = blk * blk - (blk + 1).flip(0)
    torch.testing.assert_close(out, ref, rtol=1e-6, atol=1e-6)


@tilejit.kernel
def tile_from_shape(Q, O):
    D = Q.shape[1]                       # needed at compile time only by the tile's shape
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((64, D), Q.dtype)
        T.copy(Q[0, 0], S)
        T.copy(S, O[0, 0])


@tilejit.kernel
def tile_from_unpacked_shape(Q, O):
    M, D = Q.shape                       # only D is compile-time (T.Parallel and the tile)
    with T.Kernel(T.ceildiv(M, 64), threads=128) as bx:
        S = T.alloc_shared((64, D), Q.dtype)
        T.copy(Q[bx * 64, 0], S)
        for i, j in T.Parallel(64, D):
            S[i, j] = S[i, j] * 2.0
        T.copy(S, O[bx * 64, 0])


def test_tile_shape_from_a_shape_entry_specializes():
    q = _rand((64, 32), torch.float32, seed=12)
    o = torch.zeros(64, 32)
    tile_from_shape(q, o)
    torch.testing.assert_close(o, q, rtol=0, atol=0)


def test_tile_shape_from_a_tuple_unpacked_shape_entry():
    q = _rand((128, 32), torch.float32, seed=13)
    o = torch.zeros(128, 32)
    tile_from_unpacked_shape(q, o)
    torch.testing.assert_close(o, q * 2, rtol=0, atol=0)


# ----------------------------------------------------------------------------- PTX

def _assemble(ptx: str, arch: str, tmp_path) -> str:
    path = tmp_path / f"k_{arch}.ptx"
    path.write_text(ptx)
    out = subprocess.run([PTXAS, f"-arch={arch}", "-v", str(path), "-o", str(path) + ".cubin"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stderr


def _f16(*shape):
    return np.zeros(shape, np.float16)


def _f32(*shape):
    return np.zeros(shape, np.float32)


# (name, kernel, arguments, constexprs, instructions the PTX must contain, must not)
PTX_CASES = [
    ("roundtrip_f16_aligned", roundtrip, (_f16(128, 128), _f32(128, 128)), {},
     ["ld.global.nc.v4", "st.shared.v4", "bar.sync"], []),
    ("roundtrip_edge", roundtrip, (_f16(100, 130), _f32(100, 130)), {},
     ["bar.sync", "st.shared"], []),
    ("roundtrip_int_to_float", roundtrip,
     (np.zeros((64, 64), np.int32), _f32(64, 64)), {}, ["cvt.rn.f32.s32", "bar.sync"], []),
    ("via_shared_bf16", via_shared, (_f32(128, 128), np.zeros((128, 128), np.uint16)), {},
     ["bar.sync"], []),
    ("tile_sum", tile_sum, (_f32(100, 130), _f32(2, 3)), {}, ["bar.sync", "ld.shared"], []),
    ("slices", slices, (_f16(128, 128), _f32(128, 128)), {},
     ["ld.global.nc.v4", "bar.sync"], []),
    ("heads", heads, (_f16(2, 128, 3, 32), _f16(2, 128, 3, 32)), {}, ["bar.sync"], []),
    ("swap_halves", swap_halves, (_f32(128, 64), _f32(128, 64)), {},
     ["bar.sync", "ld.shared"], []),
    ("fills", fills, (_f32(64, 96),), {}, ["bar.sync", "st.shared"], []),
    ("fill_local_copy", fill_local_copy, (_f32(8),), {}, ["st.global"], ["bar.sync"]),
    ("row_dot", row_dot, (_f32(70, 8), _f32(8), _f32(70)), {},
     ["fma.rn.f32"], ["bar.sync"]),             # x * w + acc: one fma (contracted)
    ("epilogue", epilogue, (_f32(128, 128), _f32(128), _f16(128, 128), 0.5), {},
     ["max.f32", "cvt.rn.f16x2.f32"], ["bar.sync", ".shared"]),
    ("two_loops", two_loops, (_f32(128, 64), _f32(128, 64)), {}, ["bar.sync"], []),
]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name,kernel,args,constexprs,must,must_not", PTX_CASES,
                         ids=[c[0] if isinstance(c, tuple) else c.id for c in PTX_CASES])
def test_tile_kernels_ptx_assembles(name, kernel, args, constexprs, must, must_not, arch,
                                    tmp_path):
    compiled = kernel.compile(*args, target="cuda", arch=arch, **constexprs)
    ptx = compiled.ptx
    assert f".target {arch}" in ptx
    for instruction in must:
        assert instruction in ptx, f"{name}: expected {instruction} in its PTX"
    for instruction in must_not:
        assert instruction not in ptx, f"{name}: did not expect {instruction} in its PTX"
    if PTXAS is None:
        pytest.skip("ptxas is not on PATH: PTX generated and checked, not assembled")
    _assemble(ptx, arch, tmp_path)


def test_misaligned_rows_do_not_use_vector_global_loads():
    # 130 float16 columns: rows are 260 bytes apart, not 16-byte aligned
    ptx = roundtrip.compile(_f16(100, 130), _f32(100, 130), target="cuda", arch="sm_90").ptx
    assert "ld.global.nc.v4" not in ptx
    assert "ld.global.nc.b16" in ptx or "ld.global.nc.u16" in ptx


def test_shared_bytes_of_tile_kernels():
    assert roundtrip.compile(_f16(128, 128), _f32(128, 128), target="cuda",
                             arch="sm_90").shared_bytes == 64 * 64 * 2
    assert epilogue.compile(_f32(128, 128), _f32(128), _f16(128, 128), 0.5, target="cuda",
                            arch="sm_90").shared_bytes == 0


# ----------------------------------------------------------------------------- GPU

def _gpu_check(fn_gpu, fn_sim, make_args, out_index, rtol=0.0, atol=0.0, **kw):
    """Run on the device and in the simulator; compare both to each other."""
    args = make_args()
    gpu_args = [a.cuda() if isinstance(a, torch.Tensor) else a for a in args]
    fn_gpu(*gpu_args, **kw)
    torch.cuda.synchronize()
    sim_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    fn_sim(*sim_args, **kw)
    torch.testing.assert_close(gpu_args[out_index].cpu(), sim_args[out_index],
                               rtol=rtol, atol=atol)
    return gpu_args[out_index].cpu()


@pytest.mark.gpu
@pytest.mark.parametrize("shape,src,dst", ROUNDTRIP_CASES + [((1000, 777), torch.float16,
                                                               torch.float32)])
def test_gpu_roundtrip(shape, src, dst):
    a = _rand(shape, src)
    got = _gpu_check(roundtrip, roundtrip_sim,
                     lambda: [a, torch.full(shape, 12345, dtype=dst)], 1)
    torch.testing.assert_close(got, a.to(dst), rtol=0, atol=0)


@pytest.mark.gpu
def test_gpu_edge_tiles_never_write_outside():
    a = _rand((100, 130), torch.float32, seed=1).cuda()
    big = torch.full((128, 192), -7.0, device="cuda")
    roundtrip(a, big[:100, :130])
    torch.cuda.synchronize()
    torch.testing.assert_close(big[:100, :130], a, rtol=0, atol=0)
    assert torch.all(big[100:, :] == -7.0) and torch.all(big[:, 130:] == -7.0)


@pytest.mark.gpu
def test_gpu_tile_sum():
    a = _rand((100, 130), torch.float32, seed=2)
    got = _gpu_check(tile_sum, tile_sum_sim, lambda: [a, torch.zeros(2, 3)], 1,
                     rtol=1e-5, atol=1e-3)
    np.testing.assert_allclose(got.numpy(), _tile_sums(a.numpy(), 64, 64), rtol=1e-5, atol=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(512, 256), (100, 130)])
def test_gpu_slices(shape):
    a = _rand(shape, torch.float16, seed=4)
    got = _gpu_check(slices, slices_sim, lambda: [a, torch.full(shape, 99.0)], 1)
    torch.testing.assert_close(got, a.float(), rtol=0, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(2, 256, 4, 64), (1, 100, 3, 32)])
def test_gpu_3d_regions(shape):
    q = _rand(shape, torch.float16, seed=5)
    got = _gpu_check(heads, heads_sim,
                     lambda: [q, torch.full(shape, 11.0, dtype=torch.float16)], 1)
    torch.testing.assert_close(got, q * 2, rtol=0, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(256, 128), (100, 70)])
def test_gpu_shared_regions_to_global(shape):
    a = _rand(shape, torch.float32, seed=7)
    got = _gpu_check(swap_halves, swap_halves_sim, lambda: [a, torch.full(shape, -3.0)], 1)
    np.testing.assert_array_equal(got.numpy(), _swap_ref(a.numpy(), 64))


@pytest.mark.gpu
def test_gpu_fills():
    got = _gpu_check(fills, fills_sim, lambda: [torch.zeros(64, 96)], 0, value=3.0)
    torch.testing.assert_close(got, torch.full((64, 96), 2.25), rtol=0, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("shape,dtype", [((512, 256), torch.float16), ((100, 130), torch.bfloat16)])
def test_gpu_epilogue(shape, dtype):
    a = _rand(shape, torch.float32, seed=9)
    bias = _rand((shape[1],), torch.float32, seed=10)
    got = _gpu_check(epilogue, epilogue_sim,
                     lambda: [a, bias, torch.zeros(shape, dtype=dtype), 0.5], 2)
    torch.testing.assert_close(got, torch.relu(a * 0.5 + bias).to(dtype), rtol=0, atol=0)


@pytest.mark.gpu
def test_gpu_two_parallel_loops():
    a = _rand((256, 128), torch.float32, seed=11)
    got = _gpu_check(two_loops, two_loops_sim, lambda: [a, torch.zeros(256, 128)], 1,
                     rtol=1e-6, atol=1e-6)
    ref = torch.empty(256, 128)
    for r0 in range(0, 256, 64):
        blk = a[r0:r0 + 64]
        ref[r0:r0 + 64] = blk * blk - (blk + 1).flip(0)
    torch.testing.assert_close(got, ref, rtol=1e-6, atol=1e-6)
