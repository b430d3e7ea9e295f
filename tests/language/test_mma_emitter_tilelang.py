"""TileLang's hand-written MMA programs as TileLang writes them: the emitter GEMM with
``T.annotate_layout`` of ``make_swizzle_layout`` (TileLang's examples/gemm/
example_gemm_intrinsics.py, and that example itself, read from a TileLang mirror when there
is one), ``tilelang.intrinsics`` / ``tilelang.cuda.intrinsics`` and their helpers, and the
emitter built in the kernel's prologue (``frontend/mma_emitter_calls.py``): simulation
against float64, PTX assembled by ptxas, errors, GPU twins."""
import importlib
import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit import CompileError
from tilejit.tilelang.cuda.intrinsics import get_swizzle_layout
from tilejit.tilelang.cuda.intrinsics.macro.mma_macro_generator import TensorCoreIntrinEmitter
from tilejit.tilelang.tvm import DataType

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# a git mirror of TileLang (a bare repository or a checkout), named by the environment
MIRROR = os.environ.get("TILELANG_MIRROR", "")
EXAMPLE = "examples/gemm/example_gemm_intrinsics.py"
TORCH = {"float16": torch.float16, "int8": torch.int8, "float32": torch.float32,
         "int32": torch.int32}


def make_swizzle_layout(shared_buf):
    """As TileLang's example writes it."""
    dtype = shared_buf.dtype
    shape = shared_buf.shape
    can_swizzle = shape[-1] * DataType(dtype).bits == 512
    if not can_swizzle:
        return T.Layout(shape, lambda *args: args)

    def transform_func(i, j):
        return list(get_swizzle_layout(i, j, shape[-1], dtype))
    return T.Layout(shape, transform_func)


def make_swizzled_gemm(M, N, K, in_dtype="float16", accum="float32", chunk=32,
                       swizzle=True, target="auto"):
    """TileLang's example_gemm_intrinsics kernel (warps 2 x 2 of 32 x 32 tiles here)."""
    e = TensorCoreIntrinEmitter(a_dtype=in_dtype, b_dtype=in_dtype, accum_dtype=accum,
                                a_transposed=False, b_transposed=True, block_row_warps=2,
                                block_col_warps=2, warp_row_tiles=32, warp_col_tiles=32,
                                chunk=chunk)
    block_M, block_N, block_K = 64, 64, chunk
    ms, ns, mk = e.micro_size_x, e.micro_size_y, e.micro_size_k

    def gemm(A, B, C):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M),
                      threads=e.threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype, scope="shared.dyn")
            B_shared = T.alloc_shared((block_N, block_K), in_dtype, scope="shared.dyn")
            C_shared = T.alloc_shared((block_M // ms, block_N // ns, ms, ns), accum)
            A_local = T.alloc_local((e.warp_rows * e.local_size_a), in_dtype)
            B_local = T.alloc_local((e.warp_cols * e.local_size_b), in_dtype)
            C_local = T.alloc_local((e.warp_rows * e.warp_cols * e.local_size_out), accum)
            if swizzle:
                T.annotate_layout({
                    A_shared: make_swizzle_layout(A_shared),
                    B_shared: make_swizzle_layout(B_shared),
                })
            T.use_swizzle(panel_size=10)
            T.clear(C_local)
            for ko in T.Pipelined(K // block_K, num_stages=2):
                for i, k in T.Parallel(block_M, block_K):
                    A_shared[i, k] = A[by * block_M + i, ko * block_K + k]
                for j, k in T.Parallel(block_N, block_K):
                    B_shared[j, k] = B[bx * block_N + j, ko * block_K + k]
                for ki in T.serial(0, block_K // mk):
                    e.ldmatrix_a(A_local, A_shared, ki)
                    e.ldmatrix_b(B_local, B_shared, ki)
                    e.mma(A_local, B_local, C_local)
            e.stmatrix(C_local, C_shared)
            for i, j in T.Parallel(block_M, block_N):
                C[by * block_M + i, bx * block_N + j] = C_shared[i // ms, j // ns,
                                                                 i % ms, j % ns]
    return tilejit.kernel(gemm, target=target)


def _inputs(M, N, K, dtype, device="cpu"):
    g = torch.Generator().manual_seed(M * 7 + N + K)
    if dtype == "int8":
        a = torch.randint(-128, 128, (M, K), generator=g, dtype=torch.int8)
        b = torch.randint(-128, 128, (N, K), generator=g, dtype=torch.int8)
    else:
        a = torch.randn(M, K, generator=g).to(TORCH[dtype])
        b = torch.randn(N, K, generator=g).to(TORCH[dtype])
    return a.to(device), b.to(device)


def _check(c, a, b, K):
    ref = a.cpu().double() @ b.cpu().double().T
    got = c.cpu().double()
    if a.dtype == torch.int8:
        assert torch.equal(got, ref)
    else:
        tol = 1e-2 if c.dtype == torch.float16 else 1e-4
        np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=tol, atol=tol * K)


# -- the emitter GEMM with TileLang's swizzle annotation -------------------------------------

@pytest.mark.parametrize("dtype,accum,chunk", [("float16", "float32", 32),
                                               ("int8", "int32", 64)])
def test_swizzled_emitter_gemm_simulated_matches_float64(dtype, accum, chunk):
    M, N, K = 128, 64, 2 * chunk
    a, b = _inputs(M, N, K, dtype)
    c = torch.zeros(M, N, dtype=TORCH[accum])
    make_swizzled_gemm(M, N, K, dtype, accum, chunk, target="sim")(a, b, c)
    _check(c, a, b, K)


def test_the_swizzle_is_tilelang_s_64_byte_one():
    class Buf:
        shape, dtype = (64, 32), "float16"
    layout = make_swizzle_layout(Buf())
    layout.check((64, 32))
    # rows of 32 halves (64 bytes): vector c of row r lands at c ^ (r % 8 // 2)
    assert [layout.offset(r, 8) // 8 % 4 for r in range(8)] == [1, 1, 0, 0, 3, 3, 2, 2]


@pytest.mark.parametrize("dtype,accum,chunk", [("float16", "float32", 32),
                                               ("int8", "int32", 64)])
def test_swizzled_emitter_gemm_ptx_assembles(dtype, accum, chunk, ptxas):
    M, N, K = 128, 128, 2 * chunk
    a, b = _inputs(M, N, K, dtype)
    c = torch.zeros(M, N, dtype=TORCH[accum])
    kernel = make_swizzled_gemm(M, N, K, dtype, accum, chunk)
    plain = make_swizzled_gemm(M, N, K, dtype, accum, chunk, swizzle=False)
    for arch in ("sm_80", "sm_90a"):
        ptx = kernel.compile(a, b, c, target="cuda", arch=arch).ptx
        assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx
        assert "mma.sync.aligned.m16n8k" in ptx
        assert ptx != plain.compile(a, b, c, target="cuda", arch=arch).ptx  # swizzled
        assert "0 bytes stack frame" in ptxas(ptx, arch)


# -- TileLang's example, its imports swapped -----------------------------------------------

def _tilelang_example(tmp_path):
    """TileLang's example_gemm_intrinsics.py with only its imports made tilejit's (as
    tools/tilelang_corpus.py rewrites them), imported from ``tmp_path``; skipped without
    a TileLang mirror (nothing of TileLang is stored here)."""
    if not MIRROR or not os.path.isdir(MIRROR):
        pytest.skip("no TileLang mirror (set TILELANG_MIRROR to one)")
    out = subprocess.run(["git", "-C", MIRROR, "show", f"HEAD:{EXAMPLE}"],
                         capture_output=True, text=True)
    if out.returncode:
        pytest.skip(f"the TileLang mirror has no {EXAMPLE}: {out.stderr.strip()}")
    spec = importlib.util.spec_from_file_location(
        "tilelang_corpus", os.path.join(ROOT, "tools", "tilelang_corpus.py"))
    corpus = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(corpus)
    source = corpus.rewrite_imports(out.stdout)
    changed = [(x, y) for x, y in zip(out.stdout.splitlines(), source.splitlines()) if x != y]
    assert changed and all("import" in x for x, _ in changed)       # imports only
    path = tmp_path / "tl_example_gemm_intrinsics.py"
    path.write_text(source)
    sys.path.insert(0, str(tmp_path))
    try:
        return importlib.import_module(path.stem)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop(path.stem, None)


@pytest.mark.parametrize("dtype,out_dtype,accum", [("float16", "float32", "float32"),
                                                   ("float16", "float16", "float32"),
                                                   ("int8", "int32", "int32")])
def test_tilelang_example_runs_simulated(tmp_path, dtype, out_dtype, accum):
    ex = _tilelang_example(tmp_path)
    M, N, K = 128, 128, 64
    a, b = _inputs(M, N, K, dtype)
    kernel = ex.tl_matmul.compile(M=M, N=N, K=K, in_dtype=getattr(T, dtype),
                                  out_dtype=getattr(T, out_dtype),
                                  accum_dtype=getattr(T, accum), target="sim")
    c = kernel(a, b)
    assert c.dtype == TORCH[out_dtype]
    _check(c, a, b, K)


def test_tilelang_example_ptx_assembles(tmp_path, ptxas):
    ex = _tilelang_example(tmp_path)
    for arch in ("sm_80", "sm_90a"):
        kernel = ex.tl_matmul.compile(M=256, N=256, K=128, in_dtype=T.float16,
                                      out_dtype=T.float16, accum_dtype=T.float32, arch=arch)
        ptx = kernel.get_kernel_source()
        assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx
        assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in ptx
        assert "0 bytes stack frame" in ptxas(ptx, arch)


# -- tilelang.intrinsics and tilelang.cuda.intrinsics --------------------------------------

def test_intrinsics_modules_export_tilelang_s_names():
    import tilejit.tilelang.intrinsics as old
    import tilejit.tilelang.intrinsics.utils as old_utils
    new = importlib.import_module("tilejit.tilelang.cuda.intrinsics")
    utils = importlib.import_module("tilejit.tilelang.cuda.intrinsics.layout.utils")
    mma_layout = importlib.import_module("tilejit.tilelang.cuda.intrinsics.layout.mma_layout")
    for module in (old, new):
        for name in ("TensorCoreIntrinEmitter", "get_swizzle_layout", "make_mma_swizzle_layout",
                     "get_ldmatrix_offset", "mma_store_index_map", "get_mma_micro_size"):
            assert getattr(module, name) is getattr(utils, name, None) or name == \
                "TensorCoreIntrinEmitter", name
    assert new.TensorCoreIntrinEmitter is old.TensorCoreIntrinEmitter
    assert old_utils.get_ldmatrix_offset is new.get_ldmatrix_offset
    assert mma_layout.get_swizzle_layout is T.get_swizzle_layout
    cuda = importlib.import_module("tilejit.tilelang.cuda")
    assert cuda.intrinsics is new
    with pytest.raises(tilejit.language.compat.NotSupportedError, match="tilelang.cuda.gemm"):
        cuda.gemm    # noqa: B018
    assert get_swizzle_layout(3, 9, 32, "float16") == (0, 3, (1 ^ 1) * 8 + 1)   # 3-tuple
    assert DataType("int8").bits == 8


@pytest.mark.parametrize("dtype,matrix,transposed,shape", [
    ("float16", "A", False, (16, 16)), ("float16", "B", True, (16, 16)),
    ("float16", "A", True, (16, 16)), ("int8", "A", False, (16, 32)),
    ("int8", "B", True, (16, 32)), ("float32", "A", False, (16, 8)),
    ("float32", "B", True, (16, 8))])
def test_get_ldmatrix_offset_covers_the_tile_once(dtype, matrix, transposed, shape):
    """Every element of the operand's 16 x (16 bytes x 2) tile read by exactly one (lane,
    element) of ldmatrix.x4, as TileLang's index maps say."""
    from tilejit.tilelang.intrinsics import get_ldmatrix_offset
    per_lane = shape[0] * shape[1] // 32
    lanes, local = np.meshgrid(np.arange(32), np.arange(per_lane), indexing="ij")
    r, c = get_ldmatrix_offset(matrix, lanes, local, shape[1], dtype, transposed)
    hits = np.zeros(shape, dtype=int)
    np.add.at(hits, (r, c), 1)
    assert (hits == 1).all()
    # ints give what the arrays give
    assert get_ldmatrix_offset(matrix, 17, 3, shape[1], dtype, transposed) == (
        r[17, 3], c[17, 3])


def test_get_ldmatrix_offset_errors_name_the_argument():
    from tilejit.tilelang.intrinsics import get_ldmatrix_offset
    with pytest.raises(ValueError, match="matrix: must be 'A' or 'B', got 'C'"):
        get_ldmatrix_offset("C", 0, 0, 16)
    with pytest.raises(ValueError, match="without .trans only.*transposed=True"):
        get_ldmatrix_offset("A", 0, 0, 32, "int8", True)


# -- the emitter built in the kernel's prologue ------------------------------------------

def make_prologue_gemm(M, N, K, runtime_chunk=False, assign_twice=False):
    """TileLang's eager-style examples: the emitter built before ``with T.Kernel``."""
    @tilejit.kernel
    def gemm(A, B, C, in_dtype: T.constexpr = "float16", accum_dtype: T.constexpr = "float32",
             warps: T.constexpr = 2, scalar=32):
        micro_size_x = micro_size_y = micro_size_k = 16
        if in_dtype == T.int8:
            micro_size_k = 32
        chunk = 2 * micro_size_k
        block_M = block_N = warps * 32
        mma_emitter = TensorCoreIntrinEmitter(
            a_dtype=in_dtype, b_dtype=in_dtype, accum_dtype=accum_dtype, b_transposed=True,
            block_row_warps=warps, block_col_warps=warps, warp_row_tiles=32,
            warp_col_tiles=32, chunk=scalar if runtime_chunk else chunk)
        if assign_twice:
            mma_emitter = mma_emitter
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M),
                      threads=mma_emitter.threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, chunk), in_dtype)
            B_shared = T.alloc_shared((block_N, chunk), in_dtype)
            C_shared = T.alloc_shared((block_M // micro_size_x, block_N // micro_size_y,
                                       micro_size_x, micro_size_y), accum_dtype)
            A_local = T.alloc_local((mma_emitter.warp_rows * mma_emitter.local_size_a),
                                    in_dtype)
            B_local = T.alloc_local((mma_emitter.warp_cols * mma_emitter.local_size_b),
                                    in_dtype)
            C_local = T.alloc_local((mma_emitter.warp_rows * mma_emitter.warp_cols *
                                     mma_emitter.local_size_out), accum_dtype)
            T.clear(C_local)
            for ko in T.Pipelined(K // chunk, num_stages=2):
                T.copy(A[by * block_M, ko * chunk], A_shared)
                T.copy(B[bx * block_N, ko * chunk], B_shared)
                for ki in T.serial(0, chunk // mma_emitter.micro_size_k):
                    mma_emitter.ldmatrix_a(A_local, A_shared, ki)
                    mma_emitter.ldmatrix_b(B_local, B_shared, ki)
                    mma_emitter.mma(A_local, B_local, C_local)
            mma_emitter.stmatrix(C_local, C_shared)
            for i, j in T.Parallel(block_M, block_N):
                C[by * block_M + i, bx * block_N + j] = C_shared[
                    i // micro_size_x, j // micro_size_y, i % micro_size_x, j % micro_size_y]
    return gemm


@pytest.mark.parametrize("dtype,accum,warps", [("float16", "float32", 2),
                                               ("int8", "int32", 2), ("float16", "float32", 1)])
def test_emitter_built_in_the_prologue_simulated(dtype, accum, warps):
    M, N, K = 128, 128, 128
    a, b = _inputs(M, N, K, dtype)
    c = torch.zeros(M, N, dtype=TORCH[accum])
    make_prologue_gemm(M, N, K)(a, b, c, in_dtype=dtype, accum_dtype=accum, warps=warps)
    _check(c, a, b, K)


def test_emitter_built_in_the_prologue_compiles_as_one_built_outside(ptxas):
    """The same instructions as the emitter GEMM whose emitter is a global."""
    M = N = K = 128
    a, b = _inputs(M, N, K, "float16")
    c = torch.zeros(M, N)
    kernel = make_prologue_gemm(M, N, K)
    for arch in ("sm_80", "sm_90a"):
        ptx = kernel.compile(a, b, c, target="cuda", arch=arch).ptx
        assert ptx.count("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") >= 8
        assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx
        assert "0 bytes stack frame" in ptxas(ptx, arch)


def test_emitter_with_a_runtime_argument_is_a_compile_error_at_its_line():
    M = N = K = 128
    a, b = _inputs(M, N, K, "float16")
    kernel = make_prologue_gemm(M, N, K, runtime_chunk=True)
    with pytest.raises(CompileError) as info:
        kernel.compile(a, b, torch.zeros(M, N), target="cuda", arch="sm_80")
    msg = str(info.value)
    assert "create the emitter outside the kernel" in msg and "`scalar`" in msg, msg
    assert info.value.lineno is not None and "mma_emitter = TensorCoreIntrinEmitter" in \
        open(info.value.filename).read().splitlines()[info.value.lineno - 1]
    with pytest.raises(CompileError, match="create the emitter outside the kernel"):
        kernel(a, b, torch.zeros(M, N))         # the simulator


def test_emitter_assigned_twice_is_a_compile_error():
    M = N = K = 128
    a, b = _inputs(M, N, K, "float16")
    with pytest.raises(CompileError, match="assigned to one name, once"):
        make_prologue_gemm(M, N, K, assign_twice=True).compile(
            a, b, torch.zeros(M, N), target="cuda", arch="sm_80")


def test_emitter_s_own_checks_in_the_prologue_are_tilelang_s_value_error():
    M = N = K = 128
    a, b = _inputs(M, N, K, "float16")
    # the host program runs the prologue first, as TileLang's does
    with pytest.raises(ValueError, match="accum_dtype for float16 operands"):
        make_prologue_gemm(M, N, K).compile(a, b, torch.zeros(M, N, dtype=torch.int32),
                                            accum_dtype="int32", target="cuda", arch="sm_80")


# -- on the GPU ----------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("dtype,accum,chunk", [("float16", "float32", 32),
                                               ("int8", "int32", 64)])
def test_gpu_swizzled_emitter_gemm(dtype, accum, chunk):
    M, N, K = 256, 192, 4 * chunk
    a, b = _inputs(M, N, K, dtype, device="cuda")
    c = torch.zeros(M, N, dtype=TORCH[accum], device="cuda")
    make_swizzled_gemm(M, N, K, dtype, accum, chunk)(a, b, c)
    torch.cuda.synchronize()
    _check(c, a, b, K)


@pytest.mark.gpu
def test_gpu_tilelang_example(tmp_path):
    ex = _tilelang_example(tmp_path)
    M, N, K = 512, 512, 256
    a, b = _inputs(M, N, K, "float16", device="cuda")
    c = ex.tl_matmul(a, b, in_dtype=T.float16, out_dtype=T.float32, accum_dtype=T.float32)
    torch.cuda.synchronize()
    _check(c, a, b, K)


@pytest.mark.gpu
def test_gpu_emitter_built_in_the_prologue():
    M, N, K = 256, 256, 256
    a, b = _inputs(M, N, K, "int8", device="cuda")
    c = torch.zeros(M, N, dtype=torch.int32, device="cuda")
    make_prologue_gemm(M, N, K)(a, b, c, in_dtype="int8", accum_dtype="int32")
    torch.cuda.synchronize()
    _check(c, a, b, K)
