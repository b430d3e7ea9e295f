"""TileLang's user layouts: ``T.Layout(shape, forward_fn)`` in ``T.annotate_layout`` for
shared tiles, and the swizzle helpers (``tilelang.layout``'s bank swizzles,
``T.get_swizzle_layout``, ``T.make_mma_swizzle_layout``, the seeds' ``make_swizzle_layout``).

Values never depend on the layout (the simulator is the definition); a layout equal to
one tilejit knows gives the same PTX as tilejit's own choice (ldmatrix, TMA, wgmma), any
other bijection is addressed through its function (mma.sync on sm_90a too); a layout
that is not a bijection onto the tile, or has the wrong arity, is an error in the
compiler and the simulator before anything runs. GPU twins (``-m gpu``) compare with
torch in float64 and with the simulator."""
import types

import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit import DataType
from tilejit.ir.function_layout import FunctionLayout
from tilejit.ir.smem_layouts import canonical_layout
from tilejit.language.layout import LayoutError
from tilejit.layouts import make_swizzled_layout as tilejit_swizzle
from tilejit.tilelang.layout import (Fragment, make_full_bank_swizzled_layout,
                                     make_half_bank_swizzled_layout, make_linear_layout,
                                     make_quarter_bank_swizzled_layout, make_swizzled_layout)

get_swizzle_layout = T.get_swizzle_layout


# the seeds' listing (000, "布局代数与 swizzle 深入"), as written
def make_swizzle_layout(shared_buf):
    dtype = shared_buf.dtype
    shape = shared_buf.shape

    can_swizzle = shape[-1] * DataType(dtype).bits == 512
    if not can_swizzle:
        return T.Layout(shape, lambda *args: args)

    def transform_func(i, j):
        return list(get_swizzle_layout(i, j, shape[-1], dtype))

    return T.Layout(shape, transform_func)


def rotated(buf):
    """A bijection no tilejit layout equals: each row's elements rotated by the row
    within 8-element vectors, vectors outermost."""
    rows, cols = buf.shape
    return T.Layout((rows, cols), lambda i, j: [j // 8, i, (j % 8 + i) % 8])


def reversed_rows(buf):
    rows, cols = buf.shape
    return T.Layout((rows, cols), lambda i, j: (rows - 1 - i) * cols + j)


LAYOUTS = {
    "none": None,
    "seed": make_swizzle_layout,
    "mma": T.make_mma_swizzle_layout,
    "swizzled": make_swizzled_layout,
    "full": make_full_bank_swizzled_layout,
    "half": make_half_bank_swizzled_layout,
    "quarter": make_quarter_bank_swizzled_layout,
    "linear": make_linear_layout,
    "rotated": rotated,
    "reversed": reversed_rows,
}


@tilejit.kernel
def gemm(A, B, C, block_M: T.constexpr = 64, block_N: T.constexpr = 64,
         block_K: T.constexpr = 32, layout: T.constexpr = "none", stages: T.constexpr = 2):
    M, K = A.shape
    N = B.shape[0]
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        A_s = T.alloc_shared((block_M, block_K), A.dtype)
        B_s = T.alloc_shared((block_N, block_K), B.dtype)
        C_f = T.alloc_fragment((block_M, block_N), T.float32)
        if layout != "none":
            T.annotate_layout({A_s: LAYOUTS[layout](A_s), B_s: LAYOUTS[layout](B_s)})
        T.clear(C_f)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=stages):
            T.copy(A[by * block_M, k * block_K], A_s)
            T.copy(B[bx * block_N, k * block_K], B_s)
            T.gemm(A_s, B_s, C_f, transpose_B=True)
        T.copy(C_f, C[by * block_M, bx * block_N])


@tilejit.kernel
def seed_gemm(A, B, C, block_M: T.constexpr = 64, block_N: T.constexpr = 64,
              block_K: T.constexpr = 32):
    """The seeds' usage: ``T.annotate_layout`` of A_shared and B_shared."""
    M, K = A.shape
    N = B.shape[0]
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        A_shared = T.alloc_shared((block_M, block_K), A.dtype)
        B_shared = T.alloc_shared((block_N, block_K), B.dtype)
        C_local = T.alloc_fragment((block_M, block_N), T.float32)
        T.annotate_layout({
            A_shared: make_swizzle_layout(A_shared),
            B_shared: make_swizzle_layout(B_shared),
        })
        T.clear(C_local)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
            T.copy(A[by * block_M, k * block_K], A_shared)
            T.copy(B[bx * block_N, k * block_K], B_shared)
            T.gemm(A_shared, B_shared, C_local, transpose_B=True)
        T.copy(C_local, C[by * block_M, bx * block_N])


@tilejit.kernel
def through_shared(X, Y, block: T.constexpr = 32, layout: T.constexpr = "rotated"):
    """Copy in, element reads and writes in a T.Parallel, copy out, of a tile with a
    user layout: Y = 2·X."""
    M, N = X.shape
    with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
        S = T.alloc_shared((block, block), X.dtype)
        T.annotate_layout({S: LAYOUTS[layout](S)})
        T.copy(X[by * block, bx * block], S)
        for i, j in T.Parallel(block, block):
            S[i, j] = S[i, j] * 2
        T.copy(S, Y[by * block, bx * block])


@tilejit.kernel
def annotated(X, Y, which: T.constexpr = "duplicate"):
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((16, 16), X.dtype)
        T.annotate_layout({S: BAD[which]})
        T.copy(X, S)
        T.copy(S, Y)


BAD = {
    "duplicate": T.Layout((16, 16), lambda i, j: i * 16 + j % 8),
    "out_of_range": T.Layout((16, 16), lambda i, j: i * 17 + j),
    "negative": T.Layout((16, 16), lambda i, j: [i - 1, j]),
    "wrong_shape": T.Layout((16, 8), lambda i, j: i * 8 + j),
    "unsigned": T.Layout((16, 16), lambda i, j: i * 16 + (j - i) % 16),
    "not_a_layout": 42,
}


def _inputs(M, N, K, device="cpu"):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(M, K, generator=g, dtype=torch.float64)
    b = torch.randn(N, K, generator=g, dtype=torch.float64)
    return a, b, a.half().to(device), b.half().to(device)


def _reference(A, B):
    return A.double().cpu() @ B.double().cpu().T


# -- the layouts themselves -----------------------------------------------------------

@pytest.mark.parametrize("rows,cols,dtype", [(64, 64, "float16"), (64, 32, "float16"),
                                             (32, 16, "float16"), (64, 128, "int8"),
                                             (16, 32, "float32"), (128, 64, "bfloat16")])
def test_bank_swizzles_are_tilejits_swizzles(rows, cols, dtype):
    buf = types.SimpleNamespace(shape=(rows, cols), dtype=dtype)
    itemsize = T.dtype(dtype).itemsize
    for atom, make in ((128, make_full_bank_swizzled_layout),
                       (64, make_half_bank_swizzled_layout),
                       (32, make_quarter_bank_swizzled_layout)):
        if cols * itemsize % atom:
            with pytest.raises(LayoutError, match=f"{make.__name__}: expected a multiple"):
                make(buf)
            continue
        layout = make(buf)
        layout.check((rows, cols))
        assert canonical_layout(tilejit_swizzle((rows, cols), itemsize), (rows, cols),
                                itemsize) is not None
        assert canonical_layout(FunctionLayout(layout), (rows, cols),
                                itemsize) == (atom, atom // itemsize)
        assert make(rows, cols, T.dtype(dtype).bits).is_equal(layout)
    # make_swizzled_layout: the widest of 128 and 64 bytes, as tilejit's own choice;
    # 32-byte rows (which TileLang pads) row-major, or the 32-byte swizzle on Hopper's
    # choice (allow_pad=False), as tilejit's
    widest = make_swizzled_layout(buf, allow_pad=cols * itemsize % 64 == 0)
    np.testing.assert_array_equal(widest.offsets(),
                                  tilejit_swizzle((rows, cols), itemsize).offset_table(
                                      (rows, cols)))
    if cols * itemsize == 32:
        np.testing.assert_array_equal(make_swizzled_layout(buf).offsets(),
                                      np.arange(rows * cols).reshape(rows, cols))


def test_get_swizzle_layout_matches_on_ints_and_arrays():
    i, j = np.indices((16, 64))
    atom, row, col = get_swizzle_layout(i, j, 64, "float16")
    assert (atom == 0).all() and (row == i).all()
    # 128-byte rows: the 16-byte vector index XOR the row mod 8, elements kept in order
    assert ((col // 8) == ((j // 8) ^ (i % 8))).all() and ((col % 8) == (j % 8)).all()
    assert get_swizzle_layout(3, 17, 64, "float16") == (0, 3, ((17 // 8) ^ 3) * 8 + 1)
    _, _, col = get_swizzle_layout(i, j, 64, "float16", swizzle_bytes=64)
    assert ((col // 8) == (((j // 8) % 4) ^ ((i % 8) // 2))).all()
    with pytest.raises(LayoutError, match=r"row_size: expected rows of a multiple of 32 "
                                          r"bytes, got 8 elements of 16 bits \(16 bytes\)"):
        get_swizzle_layout(0, 0, 8, "float16")


def test_seed_listing_is_the_identity_or_the_64_byte_swizzle():
    narrow = make_swizzle_layout(types.SimpleNamespace(shape=(64, 64), dtype="float16"))
    np.testing.assert_array_equal(narrow.offsets(), np.arange(64 * 64).reshape(64, 64))
    half = make_swizzle_layout(types.SimpleNamespace(shape=(64, 32), dtype="float16"))
    assert half.get_output_shape() == (1, 64, 32)
    np.testing.assert_array_equal(half.offsets(),
                                  tilejit_swizzle((64, 32), 2).offset_table((64, 32)))


def test_layout_errors_name_the_argument_expected_and_received():
    with pytest.raises(LayoutError, match=r"T.Layout forward_fn: expected a function of 2 "
                                          r"indices \(one per dimension of shape \[4, 4\]\), "
                                          r"got <lambda> taking 3"):
        T.Layout((4, 4), lambda i, j, k: i)
    with pytest.raises(LayoutError, match=r"T.Layout shape: expected a non-empty list of "
                                          r"positive extents, got \(4, 0\)"):
        T.Layout((4, 0), lambda i, j: i)
    with pytest.raises(LayoutError, match=r"not a bijection: indices \[0, 0\] and \[0, 2\] "
                                          r"both map to physical index 0; expected each of "
                                          r"the 16 elements at its own index in \[0, 16\)"):
        T.Layout((4, 4), lambda i, j: i * 4 + j % 2).check()
    with pytest.raises(LayoutError, match=r"out of range: index \[1, 0\] maps to 16 .*"
                                          r"expected a value in \[0, 16\)"):
        T.Layout((4, 4), lambda i, j: i * 16 + j).check()
    with pytest.raises(LayoutError, match=r"out of range: output 0 at index \[0, 0\] is -1, "
                                          r"expected a value >= 0"):
        T.Layout((4, 4), lambda i, j: [i - 1, j]).check()
    with pytest.raises(LayoutError, match=r"has input shape \[4, 4\], expected the tile's "
                                          r"shape \[4, 8\]"):
        T.Layout((4, 4), lambda i, j: [i, j]).check((4, 8))
    # T.Fragment is built (tests/language/test_user_fragments.py): the same module's name
    assert Fragment is T.Fragment


def test_the_simulators_annotate_layout_checks_the_layout():
    tile = type("Tile", (), {"name": "S", "shape": (16, 16)})()
    T.annotate_layout({tile: T.Layout((16, 16), lambda i, j: [j, i])})
    with pytest.raises(LayoutError, match=r"for 'S': not a bijection"):
        T.annotate_layout({tile: BAD["duplicate"]})


# -- GEMM in simulation and in PTX ------------------------------------------------------

@pytest.mark.parametrize("layout,block_K", [
    ("seed", 32), ("mma", 32), ("mma", 64), ("swizzled", 64), ("full", 64), ("half", 32),
    ("quarter", 32), ("linear", 32), ("rotated", 32), ("reversed", 32)])
def test_gemm_with_annotated_layouts_simulated(layout, block_K):
    a, b, A, B = _inputs(128, 64, 160)
    c = torch.zeros(128, 64)
    gemm(A, B, c, block_K=block_K, layout=layout)
    ref = _reference(A, B)
    np.testing.assert_allclose(c.double().numpy(), ref.numpy(), rtol=1e-3, atol=1e-3)
    plain = torch.zeros(128, 64)
    gemm(A, B, plain, block_K=block_K)
    assert torch.equal(c, plain)        # the layout changes no value


def test_seed_gemm_simulated():
    a, b, A, B = _inputs(192, 128, 96)
    c = torch.zeros(192, 128)
    seed_gemm(A, B, c)
    np.testing.assert_allclose(c.double().numpy(), _reference(A, B).numpy(), rtol=1e-3,
                               atol=1e-3)


@pytest.mark.parametrize("layout", ["rotated", "reversed", "half", "linear"])
def test_copies_through_an_annotated_tile_simulated(layout):
    x = torch.randn(64, 96).half()
    y = torch.zeros(64, 96).half()
    through_shared(x, y, layout=layout)
    assert torch.equal(y, x * 2)


def _ptx(kernel, arch, *args, **kw):
    return kernel.compile(*args, target="cuda", arch=arch, **kw).ptx


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_recognized_swizzles_give_tilejits_own_ptx(arch, ptxas):
    a, b, A, B = _inputs(256, 256, 256)
    c = torch.zeros(256, 256)
    for block_K, layouts in ((32, ("seed", "mma", "half", "swizzled")),
                             (64, ("mma", "full", "swizzled"))):
        own = _ptx(gemm, arch, A, B, c, block_K=block_K)
        for layout in layouts:
            assert _ptx(gemm, arch, A, B, c, block_K=block_K, layout=layout) == own, layout
        ptxas(own, arch)
        assert ("wgmma.mma_async" in own) == (arch == "sm_90a")
    seed = _ptx(seed_gemm, arch, A, B, c, block_K=32).replace("seed_gemm", "gemm")
    assert seed == _ptx(gemm, arch, A, B, c, block_K=32)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_other_layouts_run_on_mma_sync_through_their_function(arch, ptxas):
    a, b, A, B = _inputs(256, 256, 256)
    c = torch.zeros(256, 256)
    for layout in ("rotated", "reversed"):
        ptx = _ptx(gemm, arch, A, B, c, block_K=64, layout=layout)
        assert "mma.sync.aligned" in ptx and "wgmma" not in ptx, layout
        ptxas(ptx, arch)
    # the 32-byte swizzle of 128-byte rows is not tilejit's choice but one it knows:
    # wgmma's descriptors read it
    ptx = _ptx(gemm, arch, A, B, c, block_K=64, layout="quarter")
    assert ("wgmma.mma_async" in ptx) == (arch == "sm_90a")
    ptxas(ptx, arch)
    ptx = _ptx(through_shared, arch, torch.zeros(64, 96).half(), torch.zeros(64, 96).half())
    ptxas(ptx, arch)


# -- errors before anything runs --------------------------------------------------------

@pytest.mark.parametrize("which,message", [
    ("duplicate", r"shared buffer `S` \(forward_fn <lambda>\) must be injective: indices "
                  r"\[0, 0\] and \[0, 8\] both map to physical coordinates 0"),
    ("negative", r"physical index out of range: output 0 at index \[0, 0\] is -1"),
    ("wrong_shape", r"the layout of 'S' has input shape \[16, 8\], expected the tile's "
                    r"shape \[16, 16\]"),
    ("unsigned", r"the layout of 'S' cannot be computed on the GPU: an intermediate value "
                 r"\(sub\) is negative at index \[1, 0\]"),
    ("not_a_layout", r"expected a T.Layout for 'S', got 42"),
])
@pytest.mark.parametrize("target", ["sim", "cuda"])
def test_bad_layouts_are_compile_errors(which, message, target):
    # (an injective layout past the tile's size, i * 17 + j, grows the tile's storage:
    # tests/language/test_injective_layouts.py)
    x = torch.zeros(16, 16)
    with pytest.raises(tilejit.CompileError, match=message):
        if target == "sim":
            annotated(x, torch.zeros(16, 16), which=which)
        else:
            annotated.compile(x, torch.zeros(16, 16), target="cuda", arch="sm_80",
                              which=which)


def test_tilelang_layout_module_names():
    assert tilejit.layout.make_swizzled_layout is make_swizzled_layout
    assert tilejit.Layout is T.Layout
    assert DataType("float16").bits == 16
    with pytest.raises(AttributeError, match="make_volta_swizzled_layout .* not supported"):
        tilejit.layout.make_volta_swizzled_layout  # noqa: B018


# -- on the GPU -------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("layout,block_K", [
    ("seed", 32), ("mma", 64), ("full", 64), ("half", 32), ("quarter", 32),
    ("rotated", 32), ("rotated", 64), ("reversed", 64), ("linear", 32)])
@pytest.mark.parametrize("stages", [1, 3])
def test_gemm_with_annotated_layouts_gpu(layout, block_K, stages):
    a, b, A, B = _inputs(512, 384, 640, device="cuda")
    c = torch.zeros(512, 384, device="cuda")
    gemm(A, B, c, block_K=block_K, layout=layout, stages=stages)
    torch.cuda.synchronize()
    ref = _reference(A, B)
    np.testing.assert_allclose(c.double().cpu().numpy(), ref.numpy(), rtol=1e-2, atol=1e-2)
    c_sim = torch.zeros(512, 384)
    gemm(A.cpu(), B.cpu(), c_sim, block_K=block_K, layout=layout, stages=stages)
    np.testing.assert_allclose(c.cpu().numpy(), c_sim.numpy(), rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
def test_seed_gemm_gpu():
    a, b, A, B = _inputs(384, 256, 320, device="cuda")
    c = torch.zeros(384, 256, device="cuda")
    seed_gemm(A, B, c)
    torch.cuda.synchronize()
    np.testing.assert_allclose(c.double().cpu().numpy(), _reference(A, B).numpy(),
                               rtol=1e-2, atol=1e-2)
    c_sim = torch.zeros(384, 256)
    seed_gemm(A.cpu(), B.cpu(), c_sim)
    np.testing.assert_allclose(c.cpu().numpy(), c_sim.numpy(), rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["rotated", "reversed", "half", "quarter", "linear"])
def test_copies_through_an_annotated_tile_gpu(layout):
    x = torch.randn(96, 160, device="cuda").half()
    y = torch.zeros(96, 160, device="cuda").half()
    through_shared(x, y, layout=layout)
    torch.cuda.synchronize()
    assert torch.equal(y, x * 2)
    y_sim = torch.zeros(96, 160).half()
    through_shared(x.cpu(), y_sim, layout=layout)
    assert torch.equal(y.cpu(), y_sim)
