"""Eager-style programs that build their tensors' shapes before annotating them, as
TileLang's examples do (DeepGEMM's `A_shape = (M, K)`, the grouped GEMM's
`B_shape = [...] if not trans_b else [...]`, the convolution's `KH, KW = K, K`), and
that use a symbol before the annotation that binds it."""
import numpy as np
import pytest

import tilejit
import tilejit as tilelang
import tilejit.language as T
from tilejit.errors import CompileError

torch = pytest.importorskip("torch")


@tilelang.jit
def scaled(A, S, trans, block=32, dtype=T.float32):
    M, K = T.const("M, K")
    KA, KB = K, K
    col_tiles = T.ceildiv(K, block)                 # a symbol before its annotation
    A_shape = (M, KA) if not trans else (KB, M)
    S_shape = (T.ceildiv(K, block),)                # arithmetic on a symbol
    A: T.Tensor(A_shape, dtype)
    S: T.Tensor(S_shape, T.float32)
    out = T.empty((M, K), dtype)
    with T.Kernel(T.ceildiv(M, block), col_tiles, threads=128) as (bx, by):
        for i, j in T.Parallel(block, block):
            r, c = bx * block + i, by * block + j
            if r < M and c < K:
                if trans:
                    out[r, c] = A[c, r] * S[by]
                else:
                    out[r, c] = A[r, c] * S[by]
    return out


@tilelang.jit
def rows_only_when_wide(A, wide):
    M, N = T.const("M, N")
    A: T.Tensor((M, N) if wide else (M, 4), T.float32)
    out = T.empty((M,), T.float32)
    with T.Kernel(1, threads=32) as bx:
        for i in T.serial(M):
            out[i] = A[i, 0]
    return out


def _inputs(rng, m=70, k=100, block=32):
    a = rng.standard_normal((m, k)).astype(np.float32)
    s = rng.standard_normal(-(-k // block)).astype(np.float32)
    return a, s, a.astype(np.float64) * np.repeat(s.astype(np.float64), block)[:k]


@pytest.mark.parametrize("trans", [False, True])
def test_shapes_built_in_variables_and_a_conditional_shape(trans):
    a, s, ref = _inputs(np.random.default_rng(0))
    out = scaled(np.ascontiguousarray(a.T) if trans else a, s, trans)
    assert out.shape == (70, 100)
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)


def test_an_extent_computed_from_a_symbol_is_checked_at_the_call():
    a, _, _ = _inputs(np.random.default_rng(1))
    with pytest.raises(ValueError, match=r"argument 'S': shape\[0\] must be "
                                         r"T.ceildiv\(K, block\) = 4 \(line \d+\), got 5"):
        scaled(a, np.zeros(5, np.float32), False)


def test_a_symbol_bound_by_an_alias_is_one_size():
    a, s, _ = _inputs(np.random.default_rng(2))
    with pytest.raises(ValueError, match=r"argument 'A': expected a 2-d tensor"):
        scaled(a[0], s, False)
    square = np.zeros((100, 100), np.float32)
    out = scaled(square, np.ones(4, np.float32), True)          # (KB, M) = (100, 100)
    assert out.shape == (100, 100)


def test_a_symbol_no_annotation_binds_for_these_values_is_an_error():
    a = np.ones((8, 4), np.float32)
    np.testing.assert_array_equal(rows_only_when_wide(np.ones((8, 6), np.float32), True),
                                  np.ones(8, np.float32))
    with pytest.raises(CompileError, match=r"symbol\(s\) N are not the extent of any "
                                           r"annotated tensor for these compile-time values"):
        rows_only_when_wide(a, False)


@pytest.mark.gpu
@pytest.mark.parametrize("trans", [False, True])
def test_on_the_gpu_against_torch_and_the_simulator(trans):
    a, s, ref = _inputs(np.random.default_rng(3), m=300, k=200)
    host = np.ascontiguousarray(a.T) if trans else a
    got = scaled(torch.from_numpy(host).cuda(), torch.from_numpy(s).cuda(), trans)
    sim = scaled(host, s, trans)
    np.testing.assert_allclose(got.cpu().numpy(), ref, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got.cpu().numpy(), sim, rtol=0, atol=0)


@tilelang.jit
def one_declaration_per_symbol(A, B):
    """``m, n = T.dynamic("m"), T.dynamic("n")``: a tuple of declarations, one each (and
    of T.const, mixed with a dynamic one)."""
    m, n = T.dynamic("m"), T.dynamic("n")
    K, d = T.const("K"), T.dynamic("d")
    A: T.Tensor[[m, n], T.float32]
    B: T.Tensor[[K, d], T.float32]
    C = T.empty((m, n), T.float32)
    with T.Kernel(T.ceildiv(m, 32), threads=32) as bx:
        for i, j in T.Parallel(32, 4):
            if bx * 32 + i < m and j < n:
                C[bx * 32 + i, j] = A[bx * 32 + i, j] + B[K - 1, d - 1]
    return C


@pytest.mark.parametrize("rows", [40, 64])
def test_a_tuple_of_symbol_declarations(rows):
    a, b = torch.randn(rows, 4), torch.randn(3, 5)
    torch.testing.assert_close(one_declaration_per_symbol(a, b), a + b[2, 4])


@pytest.mark.gpu
def test_gpu_a_tuple_of_symbol_declarations():
    a, b = torch.randn(40, 4, device="cuda"), torch.randn(3, 5, device="cuda")
    torch.testing.assert_close(one_declaration_per_symbol(a, b), a + b[2, 4])
    torch.testing.assert_close(one_declaration_per_symbol(a.cpu(), b.cpu()),
                               (a + b[2, 4]).cpu())


# -- a T.const symbol only an output's shape holds ----------------------------------------
@tilelang.jit
def unpack_nibbles(B, block: int = 16):
    """N sizes the output; the input holds N // 2 bytes a row: no tensor passed gives N,
    so the call (or .compile()) gives it by keyword, as TileLang takes it."""
    M, N = T.const("M, N")
    B: T.Tensor((M, N // 2), T.uint8)
    C = T.empty((M, N), T.float32)
    with T.Kernel(M, threads=32) as bx:
        for j in T.Parallel(N // 2):
            C[bx, 2 * j] = T.cast(B[bx, j] & 0x0F, T.float32)
            C[bx, 2 * j + 1] = T.cast(B[bx, j] >> 4, T.float32)
    return C


def _nibbles(b):
    b = torch.as_tensor(b)
    return torch.stack([b & 0xF, b >> 4], -1).reshape(b.shape[0], -1).double()


def test_a_symbol_only_an_output_holds_is_given_by_keyword():
    b = torch.randint(0, 256, (4, 8), dtype=torch.uint8)
    kernel = unpack_nibbles.compile(M=4, N=16, block=16)
    torch.testing.assert_close(kernel(b).double(), _nibbles(b), rtol=0, atol=0)
    torch.testing.assert_close(unpack_nibbles(b, N=16).double(), _nibbles(b), rtol=0, atol=0)


def test_a_symbol_only_an_output_holds_must_be_given():
    b = torch.randint(0, 256, (4, 8), dtype=torch.uint8)
    with pytest.raises(TypeError, match=r"unpack_nibbles: give the size of symbol N \(a "
                                        r"T.const no input tensor's shape gives\) as a "
                                        r"keyword: unpack_nibbles\(\.\.\., N=\.\.\.\)"):
        unpack_nibbles(b)
    with pytest.raises(TypeError, match=r"unpack_nibbles.compile\(\.\.\., N=\.\.\.\)"):
        unpack_nibbles.compile(M=4, block=16)
    with pytest.raises(TypeError, match=r"argument 'N': T.constexpr N must be an int \(the "
                                        r"kernel uses it in an extent at line \d+\), got "
                                        r"the float 16.0"):
        unpack_nibbles(b, N=16.0)
    with pytest.raises(ValueError, match=r"argument 'B': shape\[1\] must be N // 2 = 5 "
                                         r"\(line \d+\), got 8"):
        unpack_nibbles(b, N=10)


@tilelang.jit
def unpack_renamed(B, block: int = 16):
    """The symbols bound to other names than they declare (a notebook's ``M_, K_, N_ =
    T.const("M, K, N")``): TileLang keys their sizes by the declared names."""
    M_, N_ = T.const("M, N")
    B: T.Tensor((M_, N_ // 2), T.uint8)
    C = T.empty((M_, N_), T.float32)
    with T.Kernel(M_, threads=32) as bx:
        for j in T.Parallel(N_ // 2):
            C[bx, 2 * j] = T.cast(B[bx, j] & 0x0F, T.float32)
            C[bx, 2 * j + 1] = T.cast(B[bx, j] >> 4, T.float32)
    return C


def test_symbol_sizes_by_their_declared_names():
    b = torch.randint(0, 256, (4, 8), dtype=torch.uint8)
    torch.testing.assert_close(unpack_renamed.compile(M=4, N=16)(b).double(), _nibbles(b),
                               rtol=0, atol=0)
    torch.testing.assert_close(unpack_renamed(b, N=16).double(), _nibbles(b), rtol=0, atol=0)
    # the program's own names too (tilejit's before)
    torch.testing.assert_close(unpack_renamed(b, N_=16).double(), _nibbles(b), rtol=0, atol=0)
    with pytest.raises(TypeError, match=r"unpack_renamed\(\) got two values for symbol N_ "
                                        r"\('N' and 'N_'\)"):
        unpack_renamed(b, N=16, N_=16)
    with pytest.raises(TypeError, match=r"unexpected argument 'K'"):
        unpack_renamed(b, N=16, K=3)


@pytest.mark.gpu
def test_gpu_a_symbol_only_an_output_holds():
    b = torch.randint(0, 256, (64, 32), dtype=torch.uint8)
    got = unpack_nibbles(b.cuda(), N=64)
    sim = unpack_nibbles.compile(M=64, N=64, target="sim")(b)
    torch.testing.assert_close(got.cpu().double(), _nibbles(b), rtol=0, atol=0)
    torch.testing.assert_close(got.cpu(), sim, rtol=0, atol=0)


@pytest.mark.gpu
def test_gpu_symbol_sizes_by_their_declared_names():
    b = torch.randint(0, 256, (64, 32), dtype=torch.uint8)
    got = unpack_renamed(b.cuda(), N=64)
    sim = unpack_renamed.compile(M=64, N=64, target="sim")(b)
    torch.testing.assert_close(got.cpu().double(), _nibbles(b), rtol=0, atol=0)
    torch.testing.assert_close(got.cpu(), sim, rtol=0, atol=0)


def bare_shapes(M, N):
    """A tensor's whole shape passed on: ``T.alloc_shared(A.shape, ...)``,
    ``T.alloc_fragment(shape=B.shape, ...)``, ``T.Parallel(*A.shape)``."""
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared(A.shape, A.dtype)
            f = T.alloc_fragment(shape=B.shape, dtype="float32")
            T.copy(A, s)
            T.copy(s, f)
            for i, j in T.Parallel(*A.shape):
                f[i, j] = f[i, j] * 2 + i
            T.copy(f, B)
    return main


@tilejit.kernel
def _native_bare_shape(X, Y):
    with T.Kernel(1, threads=64):
        t = T.alloc_shared(X.shape, "float32")
        u = T.alloc_shared(X.shape[-1:], "float32")      # a slice of the shape
        T.copy(X, u)
        T.copy(u, t)
        for i in T.Parallel(*X.shape):
            Y[i] = t[i] + 1


def _bare_expected(a):
    return a * 2 + torch.arange(a.shape[0], dtype=a.dtype)[:, None]


def test_a_bare_tensor_shape_is_its_entries(ptxas):
    a = torch.randn(16, 32)
    kernel = tilelang.compile(bare_shapes(16, 32))
    b = torch.zeros(16, 32)
    kernel(a, b)
    torch.testing.assert_close(b, _bare_expected(a))
    for arch in ("sm_80", "sm_90a"):
        ptxas(tilelang.compile(bare_shapes(16, 32), target=f"cuda -arch={arch}")
              .get_kernel_source(), arch)
    x, y = torch.randn(48), torch.zeros(48)
    _native_bare_shape(x, y)
    torch.testing.assert_close(y, x + 1)
    ptxas(_native_bare_shape.compile(x, y, target="cuda", arch="sm_90a").ptx, "sm_90a")


@pytest.mark.gpu
def test_gpu_a_bare_tensor_shape_is_its_entries():
    a = torch.randn(16, 32, device="cuda")
    b = torch.zeros(16, 32, device="cuda")
    tilelang.compile(bare_shapes(16, 32))(a, b)
    sim = torch.zeros(16, 32)
    tilelang.compile(bare_shapes(16, 32))(a.cpu(), sim)
    torch.testing.assert_close(b.cpu(), _bare_expected(a.cpu()))
    torch.testing.assert_close(b.cpu(), sim)
    for n in (48, 64):      # one compile per shape: the entries are compile-time
        x, y = torch.randn(n, device="cuda"), torch.zeros(n, device="cuda")
        _native_bare_shape(x, y)
        torch.testing.assert_close(y, x + 1)
