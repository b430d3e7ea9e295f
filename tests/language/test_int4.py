"""int4 (TileLang's T.int4, 4-bit two's complement, -8 … 7): a tensor holds it two a byte
(element 2k in the low four bits, in int8 or uint8 bytes, as TileLang's programs pack
it), a tile one a byte as int8, and T.gemm of int4 tiles multiplies on int8 tensor cores.
The expected values come from the format's definition here (and torch's integer matmul),
not from tilejit's tables."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError
from tilejit.runtime.arguments import PackedTensor
from kernel_files import kernel_module


def wrap4(x):
    """An integer's value as int4: its low four bits, two's complement."""
    x = np.asarray(x, np.int64)
    return ((x & 15) ^ 8) - 8


def pack(values) -> np.ndarray:
    """int4 values (the last extent even) → their bytes, element 2k in the low half."""
    v = np.asarray(values, np.int64) & 15
    return (v[..., 0::2] | (v[..., 1::2] << 4)).astype(np.uint8)


def unpack(raw) -> np.ndarray:
    raw = np.asarray(raw).view(np.uint8).astype(np.int64)
    return wrap4(np.stack([raw & 15, raw >> 4], -1).reshape(raw.shape[:-1] + (-1,)))


def test_the_dtype():
    from tilejit.language.dtypes import resolve_torch_storage_dtype
    assert T.int4 == "int4" and T.dtype("int4") is T.int4 and T.as_dtype("int4") is T.int4
    assert (T.int4.bits, T.int4.packed, T.int4.held) == (4, 2, True)
    assert T.int4.in_tiles is T.int8 and T.int8.in_tiles is T.int8
    assert resolve_torch_storage_dtype(T.int4) == T.int8
    assert resolve_torch_storage_dtype("int4") == T.int8


def test_casts_to_int4_keep_the_low_four_bits_signed():
    from tilejit.language.numerics import cast, packed_codes, packed_values
    x = np.arange(-300, 300)
    np.testing.assert_array_equal(cast(x, T.int4), wrap4(x))
    np.testing.assert_array_equal(cast(np.float32([7.9, -8.7, 8.0, -9.5]), T.int4),
                                  [7, -8, -8, 7])        # toward zero, then wrapped
    assert cast(np.int32(9), T.int4) == -7
    codes = np.arange(16, dtype=np.uint8)
    np.testing.assert_array_equal(packed_values(codes, T.int4), wrap4(codes))
    np.testing.assert_array_equal(packed_codes(packed_values(codes, T.int4), T.int4), codes)


_PROGRAMS = '''
import tilejit
import tilejit.language as T


def affine(M, N):
    @T.prim_func
    def main(A: T.Tensor((M, N), T.int4), C: T.Tensor((M, N), T.int4)):
        with T.Kernel(M, threads=32) as bx:
            for j in T.Parallel(N):
                C[bx, j] = T.cast(A[bx, j] * 3 + 1, T.int4)
    return main


def stored_unwrapped(M, N):
    """A value outside -8 … 7 written to an int4 element: its low four bits are kept."""
    @T.prim_func
    def main(A: T.Tensor((M, N), T.int4), C: T.Tensor((M, N), T.int4)):
        with T.Kernel(M, threads=32) as bx:
            for j in T.Parallel(N):
                C[bx, j] = A[bx, j] * 5
    return main


def through_shared(M, N):
    @T.prim_func
    def main(A: T.Tensor((M, N), T.int4), C: T.Tensor((M, N), T.int32)):
        with T.Kernel(M, threads=32) as bx:
            S = T.alloc_shared((N,), T.int4)
            T.copy(A[bx, :], S)
            for j in T.Parallel(N):
                C[bx, j] = S[j] * 100
    return main


def round_trip(M, N, col0):
    """Rows of A through a shared tile, times 3, into C at the same place: T.copy both
    ways, from column col0 (odd: the chunks are not whole bytes), clipped at the
    tensors' edges."""
    @T.prim_func
    def main(A: T.Tensor((M, N), T.int4), C: T.Tensor((M, N), T.int4)):
        with T.Kernel(T.ceildiv(M, 16), threads=64) as bx:
            S = T.alloc_shared((16, 64), T.int4)
            T.copy(A[bx * 16, col0], S)
            for i, j in T.Parallel(16, 64):
                S[i, j] = T.cast(S[i, j] * 3, T.int4)
            T.copy(S, C[bx * 16, col0])
    return main


def w4a16(M, N, K, block=64):
    """Activations in float16, weights int4 with a scale per output row: the weights'
    tile dequantized in shared memory, then a float16 gemm (a W4A16 linear layer)."""
    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((N, K), T.int4),
             scale: T.Tensor((N,), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block, block), T.float16)
            B_int4 = T.alloc_shared((block, block), T.int4)
            B_shared = T.alloc_shared((block, block), T.float16)
            C_local = T.alloc_fragment((block, block), T.float32)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block), num_stages=2):
                T.copy(A[by * block, ko * block], A_shared)
                T.copy(B[bx * block, ko * block], B_int4)
                for i, j in T.Parallel(block, block):
                    B_shared[i, j] = T.cast(B_int4[i, j], T.float16) * scale[bx * block + i]
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            T.copy(C_local, C[by * block, bx * block])
    return main


def matmul_nt_int4(M, N, K, block_M, block_N, block_K, threads=128, num_stages=3):
    """TileLang's int4 GEMM example's program: int4 operands, int32 accumulator."""
    @T.prim_func
    def main(A: T.Tensor((M, K), T.int4), B: T.Tensor((N, K), T.int4),
             C: T.Tensor((M, N), T.int32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), T.int4)
            B_shared = T.alloc_shared((block_N, block_K), T.int4)
            C_local = T.alloc_fragment((block_M, block_N), T.int32)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[bx * block_N, ko * block_K], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            T.copy(C_local, C[by * block_M, bx * block_N])
    return main
'''


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    return kernel_module(tmp_path_factory.mktemp("int4"), "int4_programs", _PROGRAMS)


def _sim(program):
    return tilejit.compile(program, out_idx=-1, target="sim")


def _values(shape, seed=0):
    return np.random.default_rng(seed).integers(-8, 8, shape)


def test_elements_are_read_and_written_in_their_half_byte(programs):
    torch = pytest.importorskip("torch")
    a = _values((4, 64))
    c = _sim(programs.affine(4, 64))(torch.from_numpy(pack(a).view(np.int8)))
    d = _sim(programs.stored_unwrapped(4, 64))(torch.from_numpy(pack(a)))      # uint8 bytes
    w = _sim(programs.through_shared(4, 64))(torch.from_numpy(pack(a).view(np.int8)))
    assert c.dtype == torch.int8 and c.shape == (4, 32)     # T.empty of int4: its bytes
    np.testing.assert_array_equal(unpack(c.numpy()), wrap4(a * 3 + 1))
    np.testing.assert_array_equal(unpack(d.numpy()), wrap4(a * 5))
    np.testing.assert_array_equal(w.numpy(), a * 100)


ROUND_TRIPS = [(32, 64, 0), (40, 72, 16), (24, 70, 1)]    # whole; clipped; odd start


def _round_trip_expected(a, col0):
    want = np.zeros_like(a)
    want[:, col0:col0 + 64] = wrap4(a[:, col0:col0 + 64] * 3)
    return want


@pytest.mark.parametrize("M, N, col0", ROUND_TRIPS)
def test_tile_copies_both_ways(programs, M, N, col0):
    torch = pytest.importorskip("torch")
    a = _values((M, N), 6)
    c = torch.zeros((M, N // 2), dtype=torch.int8)
    tilejit.compile(programs.round_trip(M, N, col0), target="sim")(
        torch.from_numpy(pack(a).view(np.int8)), c)
    np.testing.assert_array_equal(unpack(c.numpy()), _round_trip_expected(a, col0))


def test_tile_copies_move_whole_words(programs, ptxas):
    """16 elements a chunk: 8 bytes of the tensor (one load or store), 16 of the tile;
    the nibbles unpacked by word arithmetic and byte permutes, no element loop."""
    for arch in ("sm_80", "sm_90a"):
        ptx = tilejit.compile(programs.round_trip(32, 64, 0), target=f"cuda -arch={arch}"
                              ).get_kernel_source(arch=arch)
        assert "ld.global.v2.b32" in ptx and "st.global.v2.b32" in ptx
        assert "st.shared.v4.b32" in ptx and "ld.shared.v4.b32" in ptx and "prmt.b32" in ptx
        ptxas(ptx, arch)


@pytest.mark.parametrize("M, N, K", [(64, 64, 128), (80, 48, 192)])   # the second: edges
def test_tilelangs_int4_gemm_example(programs, M, N, K):
    torch = pytest.importorskip("torch")
    a, b = _values((M, K), 1), _values((N, K), 2)
    c = _sim(programs.matmul_nt_int4(M, N, K, 64, 64, 64))(
        torch.from_numpy(pack(a).view(np.int8)), torch.from_numpy(pack(b).view(np.int8)))
    np.testing.assert_array_equal(c.numpy(), a @ b.T)


def test_numpy_integers_for_the_schedule_stage_the_copies(programs):
    kernel = tilejit.compile(programs.matmul_nt_int4(1024, 1024, 1024, np.int64(128), 128,
                                                     np.int64(64), num_stages=np.int64(3)),
                             out_idx=-1, target="cuda -arch=sm_90a")
    assert "cp.async.cg.shared.global" in kernel.get_kernel_source(arch="sm_90a")


@pytest.mark.parametrize("arch, mma", [("sm_90a", "wgmma.mma_async.sync.aligned.m64n128k32"
                                                  ".s32.s8.s8"),
                                       ("sm_80", "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8")])
def test_the_gemm_runs_on_int8_tensor_cores(programs, ptxas, arch, mma):
    kernel = tilejit.compile(programs.matmul_nt_int4(1024, 1024, 1024, 128, 128, 64),
                             out_idx=-1, target=f"cuda -arch={arch}")
    ptx = kernel.get_kernel_source(arch=arch)
    assert mma in ptx
    ptxas(ptx, arch)


def test_the_element_kernels_assemble(programs, ptxas):
    for make in (programs.affine, programs.stored_unwrapped, programs.through_shared):
        for arch in ("sm_80", "sm_90a"):
            ptx = tilejit.compile(make(4, 64), out_idx=-1, target=f"cuda -arch={arch}"
                                  ).get_kernel_source(arch=arch)
            ptxas(ptx, arch)


def test_tile_operations_on_an_int4_tensor_are_refused(tmp_path):
    m = kernel_module(tmp_path, "int4_refused", '''
import tilejit
import tilejit.language as T


@tilejit.kernel
def k(A, C):
    with T.Kernel(1, threads=128):
        B = T.alloc_shared((64, 64), T.int4)
        F = T.alloc_fragment((64, 64), T.int32)
        T.clear(F)
        T.fill(A, 0)
        T.copy(F, C)
''')
    a = PackedTensor(np.zeros((64, 32), np.uint8), T.int4)
    with pytest.raises(CompileError, match=r"T.fill on A, an int4 tensor: its elements are "
                                           r"held two a byte.*as a value\)"):
        m.k.compile(a, np.zeros((64, 64), np.int32), target="cuda", arch="sm_90a")


def test_reinterpret_as_int4_is_refused(tmp_path):
    m = kernel_module(tmp_path, "int4_bits", '''
import tilejit
import tilejit.language as T


@tilejit.kernel
def k(B, Y):
    with T.Kernel(1, threads=32):
        for j in T.Parallel(32):
            Y[j] = T.reinterpret(B[j], T.int4)
''')
    b, y = np.zeros(32, np.int8), np.zeros(32, np.int8)
    with pytest.raises(CompileError, match="an int4 value is four bits"):
        m.k.compile(b, y, target="cuda", arch="sm_90a")
    with pytest.raises(CompileError, match="an int4 value is four bits"):
        tilejit.kernel(m.k.func, target="sim")(b, y)


@pytest.mark.gpu
def test_int4_on_the_gpu_against_torch_and_the_simulator(programs):
    import torch
    a = _values((4, 64), 3)
    dev = torch.from_numpy(pack(a).view(np.int8)).cuda()
    for make, want in [(programs.affine, None), (programs.stored_unwrapped, None),
                       (programs.through_shared, a * 100)]:
        got = tilejit.compile(make(4, 64), out_idx=-1)(dev).cpu()
        assert torch.equal(got, _sim(make(4, 64))(dev.cpu()))
        if want is not None:
            np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal(unpack(tilejit.compile(programs.affine(4, 64), out_idx=-1)(
        dev).cpu().numpy()), wrap4(a * 3 + 1))
    for M, N, col0 in ROUND_TRIPS:
        x = _values((M, N), 7)
        c = torch.zeros((M, N // 2), dtype=torch.int8, device="cuda")
        tilejit.compile(programs.round_trip(M, N, col0))(
            torch.from_numpy(pack(x).view(np.int8)).cuda(), c)
        np.testing.assert_array_equal(unpack(c.cpu().numpy()), _round_trip_expected(x, col0))
    for M, N, K in [(1024, 1024, 1024), (80, 48, 192)]:
        x, y = _values((M, K), 4), _values((N, K), 5)
        kernel = tilejit.compile(programs.matmul_nt_int4(M, N, K, 128 if M > 100 else 64,
                                                         128 if N > 100 else 64, 64), out_idx=-1)
        xa, ya = (torch.from_numpy(pack(v).view(np.int8)).cuda() for v in (x, y))
        got = kernel(xa, ya).cpu()
        want = torch.from_numpy(x).cuda().double() @ torch.from_numpy(y).cuda().double().T
        assert torch.equal(got.double(), want.cpu())
        if M < 100:
            sim = _sim(programs.matmul_nt_int4(M, N, K, 64, 64, 64))(xa.cpu(), ya.cpu())
            assert torch.equal(got, sim)


def test_a_view_as_another_dtype_is_refused_on_both_targets(tmp_path):
    m = kernel_module(tmp_path, "int4_view", '''
import tilejit
import tilejit.language as T


def bytes_of(M, N):
    @T.prim_func
    def main(A: T.Tensor((M, N), T.int4), C: T.Tensor((M, N // 2), T.int8)):
        with T.Kernel(1, threads=32):
            V = T.view(A, (M, N // 2), T.int8)
            for i, j in T.Parallel(M, N // 2):
                C[i, j] = V[i, j]
    return main
''')
    for target in ("sim", "cuda -arch=sm_90a"):
        with pytest.raises(CompileError, match=r"T.view: a view of the tensor \(an int4 tensor, "
                                               r"two elements a byte\) as int8 is not supported"):
            tilejit.compile(m.bytes_of(4, 32), out_idx=-1, target=target)


_GPU_PATH = '''
import tilejit
import tilejit.language as T


@tilejit.kernel
def round_trip(A, C, col0: T.constexpr):
    M, N = A.shape
    with T.Kernel(T.ceildiv(M, 16), threads=64) as bx:
        S = T.alloc_shared((16, 64), T.int4)
        T.copy(A[bx * 16, col0], S)
        for i, j in T.Parallel(16, 64):
            S[i, j] = T.cast(S[i, j] * 3, T.int4)
        T.copy(S, C[bx * 16, col0])


@tilejit.kernel
def column(A, C, D, j0: T.constexpr):
    """A column of A into a tile and back into a column of C; D: the tile as int32."""
    with T.Kernel(1, threads=32):
        S = T.alloc_shared((32,), T.int4)
        T.copy(A[0:32, j0], S)
        for i in T.Parallel(32):
            D[i] = S[i]
        T.copy(S, C[0:32, j0])


@tilejit.kernel
def pinned_last(A, D, k: T.constexpr):
    with T.Kernel(1, threads=32):
        S = T.alloc_shared((16, 16), T.int4)
        T.copy(A[0:16, 0:16, k], S)
        for i, j in T.Parallel(16, 16):
            D[i, j] = S[i, j]


@tilejit.kernel
def other_tiles(A, F, U, C):
    """An int4 tensor into a float8 and a uint8 tile, and the uint8 tile back."""
    with T.Kernel(1, threads=32):
        S8 = T.alloc_shared((16, 32), T.float8_e4m3)
        SU = T.alloc_shared((16, 32), T.uint8)
        T.copy(A[0, 0], S8)
        T.copy(A[0, 0], SU)
        for i, j in T.Parallel(16, 32):
            F[i, j] = S8[i, j]
            U[i, j] = SU[i, j]
        T.copy(SU, C[0, 0])


@tilejit.kernel
def pipelined_sums(A, C):
    """C[i, j] = the sum over k-blocks of A[i, 64 kb + j]: a pipeline of int4 copies."""
    M, K = A.shape
    with T.Kernel(T.ceildiv(M, 16), threads=64) as bx:
        S = T.alloc_shared((16, 64), T.int4)
        F = T.alloc_fragment((16, 64), T.int32)
        T.clear(F)
        for ko in T.Pipelined(T.ceildiv(K, 64), num_stages=3):
            T.copy(A[bx * 16, ko * 64], S)
            for i, j in T.Parallel(16, 64):
                F[i, j] += S[i, j]
        T.copy(F, C[bx * 16, 0])


@tilejit.kernel
def indirect_sums(A, I, C):
    """pipelined_sums over the k-blocks I lists: the copy reads what the body computes,
    so it is no producer and is not staged."""
    M, K = A.shape
    with T.Kernel(T.ceildiv(M, 16), threads=64) as bx:
        S = T.alloc_shared((16, 64), T.int4)
        F = T.alloc_fragment((16, 64), T.int32)
        T.clear(F)
        for ko in T.Pipelined(I.shape[0], num_stages=2):
            kb = I[ko]
            T.copy(A[bx * 16, kb * 64], S)
            for i, j in T.Parallel(16, 64):
                F[i, j] += S[i, j]
        T.copy(F, C[bx * 16, 0])


@tilejit.kernel
def scheduled_sums(A, C):
    """pipelined_sums with its schedule given per statement (not staged: the lists count
    the body's statements)."""
    M, K = A.shape
    with T.Kernel(T.ceildiv(M, 16), threads=64) as bx:
        S = T.alloc_shared((16, 64), T.int4)
        F = T.alloc_fragment((16, 64), T.int32)
        T.clear(F)
        for ko in T.Pipelined(T.ceildiv(K, 64), num_stages=2, order=[0, 1], stage=[0, 1]):
            T.copy(A[bx * 16, ko * 64], S)
            for i, j in T.Parallel(16, 64):
                F[i, j] += S[i, j]
        T.copy(F, C[bx * 16, 0])


@tilejit.kernel
def gemm_nt(A, B, C):
    """TileLang's int4 GEMM example's program (64³ tiles, 3 stages), as a kernel."""
    M, K = A.shape
    N = B.shape[0]
    with T.Kernel(T.ceildiv(N, 64), T.ceildiv(M, 64), threads=128) as (bx, by):
        A_shared = T.alloc_shared((64, 64), T.int4)
        B_shared = T.alloc_shared((64, 64), T.int4)
        C_local = T.alloc_fragment((64, 64), T.int32)
        T.clear(C_local)
        for ko in T.Pipelined(T.ceildiv(K, 64), num_stages=3):
            T.copy(A[by * 64, ko * 64], A_shared)
            T.copy(B[bx * 64, ko * 64], B_shared)
            T.gemm(A_shared, B_shared, C_local, transpose_B=True)
        T.copy(C_local, C[by * 64, bx * 64])


@tilejit.kernel
def read_back(A, C, D):
    """Values past -8 … 7 stored into int4 elements, read back in the same kernel."""
    with T.Kernel(1, threads=32):
        for i in T.Parallel(32):
            C[i] = A[i]
        T.sync_threads()
        for i in T.Parallel(32):
            D[i] = C[i]
'''


def _on_both(kernel, make, grid, threads, **constexprs):
    """The kernel's GPU code (the AMDGPU lowering, whose copies are the NVPTX one's, run on
    this CPU; its pipelined int4 copies staged as on a target with cp.async, the byte
    copies synchronous) and the simulator, each on fresh arguments from ``make()``."""
    from amdgpu_cpu import run_kernel
    from tilejit.runtime.kernel import kernel_function
    gpu, sim = make(), make()
    staged = kernel_function(kernel.func, switches={"packed_staging": True})
    run_kernel(staged.compile(*gpu, target="amdgpu", arch="gfx942", **constexprs), gpu,
               grid, threads)
    tilejit.kernel(kernel.func, target="sim")(*sim, **constexprs)
    return gpu, sim


def _host(x):
    return unpack(x.storage) if isinstance(x, PackedTensor) else x


@pytest.fixture(scope="module")
def gpu_path(tmp_path_factory):
    return kernel_module(tmp_path_factory.mktemp("int4_gpu_path"), "int4_gpu_path", _GPU_PATH)


@pytest.mark.parametrize("M, N, col0", ROUND_TRIPS)
def test_the_gpu_paths_copies_run_on_this_cpu(gpu_path, M, N, col0):
    a = _values((M, N), 8)
    gpu, sim = _on_both(gpu_path.round_trip, lambda: [
        PackedTensor(pack(a), T.int4), PackedTensor(np.zeros((M, N // 2), np.uint8), T.int4)],
        (-(-M // 16),), 64, col0=col0)
    np.testing.assert_array_equal(_host(gpu[1]), _round_trip_expected(a, col0))
    np.testing.assert_array_equal(_host(gpu[1]), _host(sim[1]))


def test_columns_and_pinned_dimensions_move_element_by_element(gpu_path):
    """A copy along a column (or with the last index pinned) is not 16 consecutive
    elements: element by element, the rest of each row untouched."""
    a, c0 = _values((32, 32), 9), _values((32, 32), 10)
    gpu, sim = _on_both(gpu_path.column, lambda: [
        PackedTensor(pack(a), T.int4), PackedTensor(pack(c0), T.int4),
        np.zeros(32, np.int32)], (1,), 32, j0=3)
    want = c0.copy()
    want[:, 3] = a[:, 3]
    for out in (gpu, sim):
        np.testing.assert_array_equal(out[2], a[:, 3])
        np.testing.assert_array_equal(_host(out[1]), want)
    b = _values((16, 16, 16), 11)
    for k in (0, 5):
        gpu, sim = _on_both(gpu_path.pinned_last, lambda: [
            PackedTensor(pack(b), T.int4), np.zeros((16, 16), np.int32)], (1,), 32, k=k)
        np.testing.assert_array_equal(gpu[1], b[:, :, k])
        np.testing.assert_array_equal(sim[1], b[:, :, k])


def test_tiles_of_other_dtypes_convert(gpu_path):
    a = _values((16, 32), 12)
    gpu, sim = _on_both(gpu_path.other_tiles, lambda: [
        PackedTensor(pack(a), T.int4), np.zeros((16, 32), np.float32),
        np.zeros((16, 32), np.int32), PackedTensor(np.zeros((16, 16), np.uint8), T.int4)],
        (1,), 32)
    for out in (gpu, sim):
        np.testing.assert_array_equal(out[1], a)                 # float8 holds -8 … 7
        np.testing.assert_array_equal(out[2], a & 0xFF)          # uint8: 248 … 255 for < 0
        np.testing.assert_array_equal(_host(out[3]), a)


def test_a_stored_element_reads_back_as_its_four_bits(gpu_path):
    a = np.arange(-48, 80, 4, dtype=np.int32)
    gpu, sim = _on_both(gpu_path.read_back, lambda: [
        a.copy(), PackedTensor(np.zeros(16, np.uint8), T.int4), np.zeros(32, np.int32)],
        (1,), 32)
    for out in (gpu, sim):
        np.testing.assert_array_equal(out[2], wrap4(a))


@pytest.mark.parametrize("M, K", [(32, 256), (40, 200), (24, 272)])   # edges; rows of
# 136 bytes, every other one off 16-byte alignment (its chunks byte by byte)
def test_a_pipeline_stages_the_bytes_and_unpacks_them(gpu_path, ptxas, M, K):
    """In a T.Pipelined loop the copy is the region's bytes, run ahead (cp.async where
    the target has it), and an unpack before the compute (passes/packed_staging.py)."""
    a = _values((M, K), 13)
    gpu, sim = _on_both(gpu_path.pipelined_sums, lambda: [
        PackedTensor(pack(a), T.int4), np.zeros((M, 64), np.int32)], (-(-M // 16),), 64)
    padded = np.zeros((M, -(-K // 64) * 64), np.int64)
    padded[:, :K] = a
    want = padded.reshape(M, -1, 64).sum(1)
    np.testing.assert_array_equal(gpu[1], want)
    np.testing.assert_array_equal(sim[1], want)
    args = [PackedTensor(pack(a), T.int4), np.zeros((M, 64), np.int32)]
    for arch in ("sm_80", "sm_90a"):
        ptx = gpu_path.pipelined_sums.compile(*args, target="cuda", arch=arch).ptx
        assert "cp.async.cg.shared.global" in ptx and "prmt.b32" in ptx
        ptxas(ptx, arch)


def test_a_copy_of_what_the_body_computes_is_not_staged(gpu_path):
    a, blocks = _values((32, 256), 19), np.array([3, 0, 2], np.int32)
    gpu, sim = _on_both(gpu_path.indirect_sums, lambda: [
        PackedTensor(pack(a), T.int4), blocks.copy(), np.zeros((32, 64), np.int32)], (2,), 64)
    want = a.reshape(32, -1, 64)[:, blocks].sum(1)
    np.testing.assert_array_equal(gpu[2], want)
    np.testing.assert_array_equal(sim[2], want)
    ptx = gpu_path.indirect_sums.compile(PackedTensor(pack(a), T.int4), blocks,
                                         np.zeros((32, 64), np.int32), target="cuda",
                                         arch="sm_90a").ptx
    assert "cp.async.cg" not in ptx and "ld.global.v2.b32" in ptx    # the unpacking copy


def test_a_schedule_given_per_statement_keeps_the_unpacking_copy(gpu_path, ptxas):
    a = _values((32, 256), 18)
    gpu, sim = _on_both(gpu_path.scheduled_sums, lambda: [
        PackedTensor(pack(a), T.int4), np.zeros((32, 64), np.int32)], (2,), 64)
    want = a.reshape(32, -1, 64).sum(1)
    np.testing.assert_array_equal(gpu[1], want)
    np.testing.assert_array_equal(sim[1], want)
    ptx = gpu_path.scheduled_sums.compile(PackedTensor(pack(a), T.int4),
                                          np.zeros((32, 64), np.int32), target="cuda",
                                          arch="sm_90a").ptx
    ptxas(ptx, "sm_90a")


def test_the_pipelined_gemm_runs_on_this_cpu(gpu_path):
    a, b = _values((80, 192), 14), _values((48, 192), 15)
    gpu, sim = _on_both(gpu_path.gemm_nt, lambda: [
        PackedTensor(pack(a), T.int4), PackedTensor(pack(b), T.int4),
        np.zeros((80, 48), np.int32)], (1, 2), 128)
    np.testing.assert_array_equal(gpu[2], a @ b.T)
    np.testing.assert_array_equal(sim[2], a @ b.T)


@pytest.mark.parametrize("argument, error, message", [
    (lambda torch: torch.zeros(4, 4, dtype=torch.int32), TypeError,
     r"expected dtype int4, got int32 \(an int4 tensor is passed as its bytes: an int8 or "
     r"uint8 tensor of half the last extent"),
    (lambda torch: torch.zeros(4, 8, dtype=torch.int8), ValueError,
     r"shape\[1\] must be 8, got 16 \(an int4 tensor is passed as its bytes"),
    (lambda torch: torch.zeros(4, 8, dtype=torch.int8)[:, ::2], ValueError,
     r"an int4 tensor is held 2 elements a byte: its bytes' last dimension must be "
     r"contiguous"),
])
def test_bad_arguments_say_how_int4_is_passed(programs, argument, error, message):
    torch = pytest.importorskip("torch")
    with pytest.raises(error, match=message):
        _sim(programs.through_shared(4, 8))(argument(torch))


def _w4a16_inputs(M, N, K, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = _values((N, K), seed)
    scale = rng.uniform(0.01, 0.1, N).astype(np.float16)
    want = a.astype(np.float64) @ (b * scale.astype(np.float64)[:, None]).T
    return a, b, scale, want


def test_int4_weights_dequantized_for_a_float16_gemm(programs, ptxas):
    torch = pytest.importorskip("torch")
    for arch, mma in (("sm_90a", "wgmma.mma_async"), ("sm_80", "mma.sync.aligned.m16n8k16")):
        ptx = tilejit.compile(programs.w4a16(256, 512, 1024), target=f"cuda -arch={arch}"
                              ).get_kernel_source(arch=arch)
        assert mma in ptx and "cp.async.cg.shared.global" in ptx and "prmt.b32" in ptx
        ptxas(ptx, arch)
    M, N, K = 64, 128, 192
    a, b, scale, want = _w4a16_inputs(M, N, K, 16)
    c = torch.zeros(M, N)
    tilejit.compile(programs.w4a16(M, N, K), target="sim")(
        torch.from_numpy(a), torch.from_numpy(pack(b).view(np.int8)), torch.from_numpy(scale), c)
    np.testing.assert_allclose(c.numpy(), want, rtol=1e-2, atol=2e-2)


@pytest.mark.gpu
def test_int4_weights_dequantized_on_the_gpu(programs):
    import torch
    for M, N, K in [(256, 512, 1024), (64, 128, 192)]:
        a, b, scale, want = _w4a16_inputs(M, N, K, 17)
        args = [torch.from_numpy(a), torch.from_numpy(pack(b).view(np.int8)),
                torch.from_numpy(scale)]
        c = torch.zeros(M, N, device="cuda")
        tilejit.compile(programs.w4a16(M, N, K))(*(x.cuda() for x in args), c)
        np.testing.assert_allclose(c.cpu().numpy(), want, rtol=1e-2, atol=5e-2)
        if M == 64:                 # and as the simulator computes it (fp32 sums' order)
            sim = torch.zeros(M, N)
            _sim_run(programs.w4a16(M, N, K), *args, sim)
            torch.testing.assert_close(c.cpu(), sim, rtol=1e-5, atol=1e-4)


def _sim_run(program, *args):
    tilejit.compile(program, target="sim")(*args)


# -- uint4 (0 … 15: GPTQ's and AWQ's weights), the same machinery zero-extended ----------

_UINT4 = '''
import tilejit
import tilejit.language as T


@tilejit.kernel
def round_trip(A, C, D, col0: T.constexpr):
    """Rows of A through a uint4 tile (uint8) into C, times 3 (wrapping at four bits);
    D: the tile's values as int32."""
    M, N = A.shape
    with T.Kernel(T.ceildiv(M, 16), threads=64) as bx:
        S = T.alloc_shared((16, 64), "uint4")
        T.copy(A[bx * 16, col0], S)
        for i, j in T.Parallel(16, 64):
            D[bx * 16 + i, j] = S[i, j]
            S[i, j] = T.cast(S[i, j] * 3, "uint4")
        T.copy(S, C[bx * 16, col0])


@tilejit.kernel
def pipelined_sums(A, C):
    M, K = A.shape
    with T.Kernel(T.ceildiv(M, 16), threads=64) as bx:
        S = T.alloc_shared((16, 64), "uint4")
        F = T.alloc_fragment((16, 64), T.int32)
        T.clear(F)
        for ko in T.Pipelined(T.ceildiv(K, 64), num_stages=3):
            T.copy(A[bx * 16, ko * 64], S)
            for i, j in T.Parallel(16, 64):
                F[i, j] += S[i, j]
        T.copy(F, C[bx * 16, 0])
'''


@pytest.fixture(scope="module")
def uint4_path(tmp_path_factory):
    return kernel_module(tmp_path_factory.mktemp("uint4"), "uint4_path", _UINT4)


def _unsigned(raw):
    raw = np.asarray(raw).view(np.uint8).astype(np.int64)
    return np.stack([raw & 15, raw >> 4], -1).reshape(raw.shape[:-1] + (-1,))


def test_uint4_is_zero_extended():
    from tilejit.language.numerics import cast
    assert T.dtype("uint4") == "uint4" and T.dtype("uint4").in_tiles is T.uint8
    np.testing.assert_array_equal(cast(np.arange(-40, 40), T.dtype("uint4")),
                                  np.arange(-40, 40) & 15)


@pytest.mark.parametrize("M, N, col0", ROUND_TRIPS)
def test_uint4_copies_on_this_cpu_and_in_the_simulator(uint4_path, M, N, col0):
    a = np.random.default_rng(20).integers(0, 16, (M, N))
    u4 = T.dtype("uint4")
    gpu, sim = _on_both(uint4_path.round_trip, lambda: [
        PackedTensor(pack(a), u4), PackedTensor(np.zeros((M, N // 2), np.uint8), u4),
        np.zeros((-(-M // 16) * 16, 64), np.int32)], (-(-M // 16),), 64, col0=col0)
    want = np.zeros_like(a)
    want[:, col0:col0 + 64] = (a[:, col0:col0 + 64] * 3) & 15
    for out in (gpu, sim):
        np.testing.assert_array_equal(_unsigned(out[1].storage), want)
        seen = np.zeros((out[2].shape[0], 64), np.int64)
        seen[:M, :min(64, N - col0)] = a[:, col0:col0 + 64]
        np.testing.assert_array_equal(out[2], seen)


def test_a_uint4_pipeline_is_staged_unsigned(uint4_path, ptxas):
    a = np.random.default_rng(21).integers(0, 16, (40, 200))
    u4 = T.dtype("uint4")
    gpu, sim = _on_both(uint4_path.pipelined_sums, lambda: [
        PackedTensor(pack(a), u4), np.zeros((40, 64), np.int32)], (3,), 64)
    padded = np.zeros((40, 256), np.int64)
    padded[:, :200] = a
    want = padded.reshape(40, -1, 64).sum(1)
    np.testing.assert_array_equal(gpu[1], want)
    np.testing.assert_array_equal(sim[1], want)
    ptx = uint4_path.pipelined_sums.compile(PackedTensor(pack(a), u4),
                                            np.zeros((40, 64), np.int32), target="cuda",
                                            arch="sm_90a").ptx
    assert "cp.async.cg.shared.global" in ptx
    ptxas(ptx, "sm_90a")


@pytest.mark.gpu
def test_uint4_on_the_gpu_against_the_simulator(uint4_path):
    import torch
    u4 = T.dtype("uint4")
    for M, N, col0 in ROUND_TRIPS:
        a = np.random.default_rng(22).integers(0, 16, (M, N))
        bytes_ = torch.from_numpy(pack(a))
        got_c = torch.zeros((M, N // 2), dtype=torch.uint8, device="cuda")
        got_d = torch.zeros((-(-M // 16) * 16, 64), dtype=torch.int32, device="cuda")
        uint4_path.round_trip(PackedTensor(bytes_.cuda(), u4), PackedTensor(got_c, u4), got_d,
                              col0=col0)
        sim_c, sim_d = np.zeros((M, N // 2), np.uint8), np.zeros(tuple(got_d.shape), np.int32)
        tilejit.kernel(uint4_path.round_trip.func, target="sim")(
            PackedTensor(bytes_.numpy(), u4), PackedTensor(sim_c, u4), sim_d, col0=col0)
        np.testing.assert_array_equal(got_c.cpu().numpy(), sim_c)
        np.testing.assert_array_equal(got_d.cpu().numpy(), sim_d)
    a = np.random.default_rng(23).integers(0, 16, (40, 200))
    c = torch.zeros((40, 64), dtype=torch.int32, device="cuda")
    uint4_path.pipelined_sums(PackedTensor(torch.from_numpy(pack(a)).cuda(), u4), c)
    padded = np.zeros((40, 256), np.int64)
    padded[:, :200] = a
    np.testing.assert_array_equal(c.cpu().numpy(), padded.reshape(40, -1, 64).sum(1))
