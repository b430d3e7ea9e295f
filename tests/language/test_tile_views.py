"""T.reshape and T.view of shared tiles, written as TileLang programs write them: one
shared buffer under two names (flat and 2-D, float16 pairs read as int32 words, float32
read as float16 halves), reads and writes through either name aliasing, in simulation
against numpy, the PTX assembled by ptxas, bad views as clear errors (in simulation
too), and with ``-m gpu`` against torch and the simulator. Views of fragments:
``test_fragment_views.py``."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError


@tilejit.kernel
def flat_in_rows_out(A, B, rows: T.constexpr = 8, cols: T.constexpr = 16):
    """A flat (rows * cols,) tensor copied into the flat name of a tile, then out of its
    2-D name: the write through the view and the read through the base need a barrier."""
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((rows, cols), T.float32)
        flat = T.reshape(S, (rows * cols,))
        T.copy(A[0:rows * cols], flat)
        T.copy(S, B[0:rows, 0:cols])


@tilejit.kernel
def scaled_through_view(A, B):
    """Elements written through the 2-D name by a T.Parallel, read back through the flat
    tile by another T.Parallel (a view of a view's base: the same bytes)."""
    with T.Kernel(1, threads=128) as bx:
        flat = T.alloc_shared((256,), T.float32)
        rows = T.reshape(flat, (16, 16))
        T.copy(A[0:256], flat)
        for i, j in T.Parallel(16, 16):
            rows[i, j] = rows[i, j] * 2.0 + j
        for k in T.Parallel(256):
            B[k] = flat[k]


@tilejit.kernel
def halves_as_words(A, B):
    """A float16 tile read as int32 words: T.view(S, shape, dtype) of the same bytes."""
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((16, 32), T.float16)
        W = T.view(S, (16, 16), dtype=T.int32)
        T.copy(A[0:16, 0:32], S)
        T.copy(W, B[0:16, 0:16])


@tilejit.kernel
def words_as_halves(A, B):
    """int32 words written through a view of a float16 tile, read as float16."""
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((8, 64), T.float16)
        W = T.view(S, shape=[8, 32], dtype="int32")
        T.copy(A[0:8, 0:32], W)
        T.copy(S, B[0:8, 0:64])


@tilejit.kernel
def gemm_on_a_view(A, B, C):
    """A tile loaded flat and read by T.gemm through its 2-D view: the tile is row-major
    (no swizzle), the gemm reads it as it is."""
    with T.Kernel(1, threads=128) as bx:
        A_flat = T.alloc_shared((64 * 32,), T.float16)
        A_s = T.reshape(A_flat, (64, 32))
        B_s = T.alloc_shared((32, 64), T.float16)
        C_f = T.alloc_fragment((64, 64), T.float32)
        T.copy(A[0:64 * 32], A_flat)
        T.copy(B[0:32, 0:64], B_s)
        T.clear(C_f)
        T.gemm(A_s, B_s, C_f)
        T.copy(C_f, C[0:64, 0:64])


def _gemm_inputs(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(64 * 32).astype(np.float16),
            rng.standard_normal((32, 64)).astype(np.float16))


def test_a_flat_view_of_a_shared_tile_aliases_it():
    a = np.arange(128, dtype=np.float32)
    b = np.zeros((8, 16), np.float32)
    flat_in_rows_out(a, b)
    np.testing.assert_array_equal(b, a.reshape(8, 16))


def test_writes_through_a_view_are_writes_to_the_tile():
    a = np.random.default_rng(1).standard_normal(256).astype(np.float32)
    b = np.zeros(256, np.float32)
    scaled_through_view(a, b)
    np.testing.assert_allclose(b, (a.reshape(16, 16) * 2 + np.arange(16)).reshape(-1),
                               rtol=1e-6)


def test_a_view_as_another_dtype_reads_the_same_bytes():
    h = np.random.default_rng(2).standard_normal((16, 32)).astype(np.float16)
    w = np.zeros((16, 16), np.int32)
    halves_as_words(h, w)
    np.testing.assert_array_equal(w, h.view(np.int32))
    words = np.random.default_rng(3).integers(-2**31, 2**31, (8, 32), dtype=np.int64)
    words = words.astype(np.int32)
    out = np.zeros((8, 64), np.float16)
    words_as_halves(words, out)
    np.testing.assert_array_equal(out.view(np.int32), words)


def test_a_gemm_reads_a_view():
    a, b = _gemm_inputs()
    c = np.zeros((64, 64), np.float32)
    gemm_on_a_view(a, b, c)
    ref = a.reshape(64, 32).astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c, ref, rtol=1e-3, atol=1e-3)


def test_a_view_takes_no_bytes_of_its_own_and_keeps_the_tile_row_major():
    a, b = _gemm_inputs()
    c = np.zeros((64, 64), np.float32)
    for arch in ("sm_80", "sm_90a"):
        k = gemm_on_a_view.compile(a, b, c, target="cuda", arch=arch)
        # A_flat (4 KB) and B_s (4 KB); the view A_s adds nothing
        assert k.shared_bytes == 2 * 64 * 32 * 2
    k = flat_in_rows_out.compile(np.zeros(128, np.float32), np.zeros((8, 16), np.float32),
                                 target="cuda", arch="sm_80")
    assert k.shared_bytes == 8 * 16 * 4
    # the copy in through the flat name and the copy out through the 2-D name: a barrier
    assert "bar.sync" in k.ptx


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_ptx_of_views_assembles(arch, ptxas):
    ptxas(flat_in_rows_out.compile(np.zeros(128, np.float32), np.zeros((8, 16), np.float32),
                                   target="cuda", arch=arch).ptx, arch)
    ptxas(halves_as_words.compile(np.zeros((16, 32), np.float16), np.zeros((16, 16), np.int32),
                                  target="cuda", arch=arch).ptx, arch)
    a, b = _gemm_inputs()
    ptx = gemm_on_a_view.compile(a, b, np.zeros((64, 64), np.float32), target="cuda",
                                 arch=arch).ptx
    assert "mma" in ptx
    ptxas(ptx, arch)


# --- errors: the same at compilation and in simulation -------------------------------


@tilejit.kernel
def wrong_count(A, B):
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((8, 16), T.float32)
        V = T.reshape(S, (8, 15))
        T.copy(A[0:8, 0:15], V)
        T.copy(S, B[0:8, 0:16])


@tilejit.kernel
def wrong_bytes(A, B):
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((8, 16), T.float16)
        W = T.view(S, (8, 16), dtype=T.int32)
        T.copy(A[0:8, 0:16], S)
        T.copy(W, B[0:8, 0:16])


@tilejit.kernel
def bf16_bits(A, B):
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((8, 16), T.bfloat16)
        W = T.view(S, (8, 8), dtype=T.int32)
        T.copy(A[0:8, 0:16], S)
        T.copy(W, B[0:8, 0:8])


@tilejit.kernel
def fragment_reshape(A, B):
    with T.Kernel(1, threads=128) as bx:
        s = T.alloc_fragment((16, 64), T.float32)
        m = T.alloc_fragment((16, 8), T.float32)
        T.copy(A[0:16, 0:64], s)
        s3 = T.reshape(s, (16, 8, 8))
        T.reduce_max(s3, m, dim=-1)
        T.copy(m, B[0:16, 0:8])


@tilejit.kernel
def swizzled_and_viewed(A, B):
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((64, 64), T.float16)
        T.annotate_layout({S: tilejit.layout.make_swizzled_layout(S)})
        V = T.reshape(S, (64 * 64,))
        T.copy(A[0:64, 0:64], S)
        T.copy(V, B[0:64 * 64])


@tilejit.kernel
def pipelined_and_viewed(A, B, C):
    with T.Kernel(1, threads=128) as bx:
        A_s = T.alloc_shared((64, 32), T.float16)
        A_flat = T.reshape(A_s, (64 * 32,))
        B_s = T.alloc_shared((32, 64), T.float16)
        C_f = T.alloc_fragment((64, 64), T.float32)
        T.clear(C_f)
        for k in T.Pipelined(4, num_stages=2):
            T.copy(A[0:64, k * 32], A_s)
            T.copy(B[k * 32, 0:64], B_s)
            T.gemm(A_s, B_s, C_f)
            C[0, k] = A_flat[k]
        T.copy(C_f, C[0:64, 0:64])


_LINE = r"\n  File \".*test_tile_views.py\", line \d+\n    "


@pytest.mark.parametrize("target", ["cuda", "sim"])
def test_a_shape_of_another_size_names_expected_and_received(target):
    a, b = np.zeros((8, 16), np.float32), np.zeros((8, 16), np.float32)
    run = (lambda: wrong_count.compile(a, b, target="cuda", arch="sm_90a")) \
        if target == "cuda" else (lambda: wrong_count(a, b))
    with pytest.raises(CompileError, match=r"T.reshape: argument `shape`: expected a shape "
                                           r"holding the 128 elements of S \(float32\[8, 16\]\), "
                                           r"got \(8, 15\), which holds 120 elements"
                                           + _LINE + r"V = T.reshape\(S, \(8, 15\)\)"):
        run()


def test_a_view_as_another_dtype_must_hold_the_same_bytes():
    a, b = np.zeros((8, 16), np.float16), np.zeros((8, 16), np.int32)
    for run in (lambda: wrong_bytes(a, b),
                lambda: wrong_bytes.compile(a, b, target="cuda", arch="sm_80")):
        with pytest.raises(CompileError, match=r"T.view: argument `shape`: expected a shape "
                                               r"holding the 256 bytes of S \(float16\[8, 16\]\)"
                                               r", got \(8, 16\), which holds 512 bytes "
                                               r"\(128 x int32\)"):
            run()


def test_bfloat16_bits_viewed_as_int32_in_the_simulator(ptxas):
    """The simulator holds bfloat16 in float32 and reinterprets its bits through a view
    (sim/runtime._reinterpreted): each int32 is two bfloat16's bits, the first the low
    half, as the GPU's little-endian bytes."""
    import torch
    a, b = torch.randn(8, 16).bfloat16(), torch.zeros(8, 8, dtype=torch.int32)
    ptxas(bf16_bits.compile(a, b, target="cuda", arch="sm_90a").ptx, "sm_90a")
    bf16_bits(a, b)
    assert torch.equal(b, a.view(torch.int32))


@tilejit.kernel
def float8_bits(A, B):
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((4, 64), T.int32)
        E = T.view(S, (4, 256), dtype=T.float8_e4m3)
        T.copy(A[0:4, 0:64], S)
        T.copy(E, B[0:4, 0:256])


def test_int32_bits_viewed_as_float8_in_the_simulator():
    import torch
    raw = torch.randint(0, 127, (4, 256), dtype=torch.uint8)   # finite e4m3 codes
    a, b = raw.view(torch.int32), torch.zeros(4, 256, dtype=torch.float8_e4m3fn)
    float8_bits(a, b)
    assert torch.equal(b.view(torch.uint8), raw)


@T.prim_func
def scratch_reuse(Q: T.Tensor((64, 64), "bfloat16"), K: T.Tensor((64, 64), "bfloat16"),
                  Out: T.Tensor((64, 64), "float32")):
    """DeepSeek's sparse MLA backward reuses its bfloat16 K tile, once a gemm has read it,
    as float32 scratch for half the accumulator's rows at a time
    (``T.view(KV_shared, shape=[BS // 2, D], dtype=accum_dtype)``)."""
    with T.Kernel(1, threads=128) as bx:
        Q_s = T.alloc_shared((64, 64), "bfloat16")
        K_s = T.alloc_shared((64, 64), "bfloat16")
        acc = T.alloc_fragment((64, 64), "float32")
        scratch = T.view(K_s, shape=[32, 64], dtype="float32")
        T.copy(Q, Q_s)
        T.copy(K, K_s)
        T.clear(acc)
        T.gemm(Q_s, K_s, acc, transpose_B=True)
        for s in range(2):
            for i, j in T.Parallel(64, 64):
                if i < 32:
                    scratch[i, j] = acc[i + s * 32, j]
            for i, j in T.Parallel(32, 64):
                T.atomic_add(Out[s * 32 + i, j], scratch[i, j])


def _scratch_inputs(device="cpu"):
    import torch
    g = torch.Generator().manual_seed(4)
    q = torch.randn(64, 64, generator=g).bfloat16()
    k = torch.randn(64, 64, generator=g).bfloat16()
    return q.to(device), k.to(device), (q.double() @ k.double().T).float()


def test_a_bfloat16_tile_reused_as_float32_scratch():
    import torch
    q, k, ref = _scratch_inputs()
    out = torch.zeros(64, 64)
    tilejit.compile(scratch_reuse, target="sim")(q, k, out)
    torch.testing.assert_close(out, ref, rtol=1e-2, atol=1e-2)
    for arch in ("sm_80", "sm_90a"):
        tilejit.compile(scratch_reuse, target=f"cuda -arch={arch}").get_kernel_source()


@pytest.mark.gpu
def test_bfloat16_views_on_the_gpu():
    import torch
    q, k, ref = _scratch_inputs("cuda")
    out = torch.zeros(64, 64, device="cuda")
    tilejit.compile(scratch_reuse, target="cuda")(q, k, out)
    torch.cuda.synchronize()
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-2, atol=1e-2)
    a = torch.randn(8, 16, device="cuda").bfloat16()
    b = torch.zeros(8, 8, dtype=torch.int32, device="cuda")
    bf16_bits(a, b)
    torch.cuda.synchronize()
    assert torch.equal(b, a.view(torch.int32))
    sim = torch.zeros(8, 8, dtype=torch.int32)
    bf16_bits(a.cpu(), sim)
    assert torch.equal(b.cpu(), sim)            # the simulator reads the same bits


def test_a_view_of_a_fragment_shares_its_registers():
    """Views of fragments are built (tests/language/test_fragment_views.py has more)."""
    a = np.random.default_rng(5).standard_normal((16, 64)).astype(np.float32)
    b = np.zeros((16, 8), np.float32)
    fragment_reshape(a, b)
    np.testing.assert_array_equal(b, a.reshape(16, 8, 8).max(-1))
    assert "shfl.sync.bfly" in fragment_reshape.compile(a, b, target="cuda", arch="sm_90a").ptx


def test_a_view_of_a_tile_with_an_annotated_swizzle_reads_through_it(ptxas):
    """The view reads each element where the swizzle puts it (tests/language/
    test_views_of_laid_out_tiles.py); it was refused."""
    a = np.random.default_rng(6).standard_normal((64, 64)).astype(np.float16)
    b = np.zeros(64 * 64, np.float16)
    swizzled_and_viewed(a, b)
    np.testing.assert_array_equal(b, a.reshape(-1))
    ptxas(swizzled_and_viewed.compile(a, b, target="cuda", arch="sm_90a").ptx, "sm_90a")


@tilejit.kernel
def widened(A, B):
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((64, 64), T.float16)
        T.annotate_layout({S: tilejit.layout.make_swizzled_layout(S)})
        V = T.view(S, (64, 32), T.int32)
        T.copy(A[0:64, 0:64], S)
        T.copy(V, B[0:64, 0:32])


def test_a_view_in_another_dtype_keeps_row_major_against_an_annotated_swizzle(ptxas, caplog):
    """A view that changes the element size renumbers bytes, not elements: the annotated
    swizzle is set aside (logged), the tile row-major, the bits read as written
    (TileLang's reinterpreting-view tests)."""
    a = np.random.default_rng(7).standard_normal((64, 64)).astype(np.float16)
    b = np.zeros((64, 32), np.int32)
    widened(a, b)
    np.testing.assert_array_equal(b, a.view(np.int32))
    with caplog.at_level("WARNING", logger="tilejit"):
        ptx = widened.compile(a, b, target="cuda", arch="sm_90a").ptx
    assert "T.annotate_layout of 'S' set aside" in caplog.text
    ptxas(ptx, "sm_90a")


@pytest.mark.gpu
def test_gpu_view_in_another_dtype_against_an_annotated_swizzle():
    import torch
    a = torch.randn(64, 64).half()
    b = torch.zeros(64, 32, dtype=torch.int32, device="cuda")
    widened(a.cuda(), b)
    torch.cuda.synchronize()
    assert torch.equal(b.cpu(), a.view(torch.int32))


def test_a_view_of_a_pipelined_tile_is_an_error():
    a, b = np.zeros((64, 128), np.float16), np.zeros((128, 64), np.float16)
    c = np.zeros((64, 64), np.float32)
    with pytest.raises(CompileError, match=r"'A_s' is staged by T.Pipelined \(2 versions\) "
                                           r"and has views"):
        pipelined_and_viewed.compile(a, b, c, target="cuda", arch="sm_80")
    with pytest.raises(CompileError, match=r"staged by T.Pipelined"):
        pipelined_and_viewed(a, b, c)


@pytest.mark.gpu
def test_on_the_gpu_against_torch_and_the_simulator():
    import torch
    a = torch.arange(128, dtype=torch.float32)
    b = torch.zeros(8, 16, device="cuda")
    flat_in_rows_out(a.cuda(), b)
    torch.testing.assert_close(b.cpu(), a.reshape(8, 16), rtol=0, atol=0)

    x = torch.randn(256)
    y = torch.zeros(256, device="cuda")
    scaled_through_view(x.cuda(), y)
    sim = np.zeros(256, np.float32)
    scaled_through_view(x.numpy(), sim)
    torch.testing.assert_close(y.cpu(), (x.reshape(16, 16) * 2 + torch.arange(16)).reshape(-1))
    np.testing.assert_allclose(y.cpu().numpy(), sim, rtol=1e-6)

    h = torch.randn(16, 32).half()
    w = torch.zeros(16, 16, dtype=torch.int32, device="cuda")
    halves_as_words(h.cuda(), w)
    torch.testing.assert_close(w.cpu(), h.view(torch.int32), rtol=0, atol=0)

    words = torch.randint(-2**31, 2**31 - 1, (8, 32), dtype=torch.int32)
    out = torch.zeros(8, 64, dtype=torch.float16, device="cuda")
    words_as_halves(words.cuda(), out)
    torch.testing.assert_close(out.cpu().view(torch.int32), words, rtol=0, atol=0)

    an, bn = _gemm_inputs()
    c = torch.zeros(64, 64, device="cuda")
    gemm_on_a_view(torch.from_numpy(an).cuda(), torch.from_numpy(bn).cuda(), c)
    ref = torch.from_numpy(an).reshape(64, 32).float() @ torch.from_numpy(bn).float()
    torch.testing.assert_close(c.cpu(), ref, rtol=1e-3, atol=1e-3)
    sim_c = np.zeros((64, 64), np.float32)
    gemm_on_a_view(an, bn, sim_c)
    np.testing.assert_allclose(c.cpu().numpy(), sim_c, rtol=1e-3, atol=1e-3)


@tilejit.kernel
def int32_written_bf16_read(A, B):
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((8, 16), T.float32)
        Vi = T.view(S, (8, 16), dtype=T.int32)        # memory shared with S
        Vb = T.view(S, (8, 32), dtype=T.bfloat16)     # an overlay in the simulator
        T.copy(A[0:8, 0:16], Vi)
        T.copy(Vb, B[0:8, 0:32])


def test_a_write_through_a_same_size_view_reaches_the_overlays():
    import torch
    x = torch.randn(8, 32).bfloat16()
    b = torch.zeros(8, 32, dtype=torch.bfloat16)
    int32_written_bf16_read(x.view(torch.int32), b)
    assert torch.equal(b, x)
