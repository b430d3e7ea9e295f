"""TileLang's hand-written MMA path, ``TensorCoreIntrinEmitter``
(``language/mma_emitter.py``, ``frontend/mma_emitter_calls.py``, ``sim/mma.py``,
``codegen/lowering/mma_sync.py``): its fields and checks, the simulator against a float64
reference, each lane's registers against PTX's fragments (ISA "Matrix Fragments for
mma.m16n8k16"), the PTX (ldmatrix, mma.sync) assembled by ptxas, the errors, and GPU twins
against torch and the simulator."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit import CompileError
from tilejit.tilelang.intrinsics import TensorCoreIntrinEmitter

TORCH = {"float16": torch.float16, "bfloat16": torch.bfloat16, "int8": torch.int8,
         "float32": torch.float32, "int32": torch.int32}


def make_gemm(M, N, K, in_dtype="float16", accum="float32", block_row_warps=2,
              block_col_warps=2, warp_row_tiles=32, warp_col_tiles=32, chunk=32,
              a_transposed=False, b_transposed=True, c_2d=False, target="auto"):
    """C = A·B through the emitter: A (M, K) or, a_transposed, (K, M); B (N, K) when
    b_transposed, else (K, N)."""
    e = TensorCoreIntrinEmitter(a_dtype=in_dtype, b_dtype=in_dtype, accum_dtype=accum,
                                a_transposed=a_transposed, b_transposed=b_transposed,
                                block_row_warps=block_row_warps,
                                block_col_warps=block_col_warps,
                                warp_row_tiles=warp_row_tiles, warp_col_tiles=warp_col_tiles,
                                chunk=chunk)
    block_M, block_N, block_K = block_row_warps * warp_row_tiles, \
        block_col_warps * warp_col_tiles, chunk
    ms, ns = e.micro_size_x, e.micro_size_y
    a_shape = (block_K, block_M) if a_transposed else (block_M, block_K)
    b_shape = (block_N, block_K) if b_transposed else (block_K, block_N)
    c_shape = (block_M, block_N) if c_2d else (block_M // ms, block_N // ns, ms, ns)

    def gemm(A, B, C):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M),
                      threads=e.threads) as (bx, by):
            A_shared = T.alloc_shared(a_shape, in_dtype)
            B_shared = T.alloc_shared(b_shape, in_dtype)
            C_shared = T.alloc_shared(c_shape, accum)
            A_local = T.alloc_local((e.warp_rows * e.local_size_a), in_dtype)
            B_local = T.alloc_local((e.warp_cols * e.local_size_b), in_dtype)
            C_local = T.alloc_local((e.warp_rows * e.warp_cols * e.local_size_out), accum)
            T.clear(C_local)
            for ko in T.Pipelined(K // block_K, num_stages=2):
                if a_transposed:
                    T.copy(A[ko * block_K, by * block_M], A_shared)
                else:
                    T.copy(A[by * block_M, ko * block_K], A_shared)
                if b_transposed:
                    T.copy(B[bx * block_N, ko * block_K], B_shared)
                else:
                    T.copy(B[ko * block_K, bx * block_N], B_shared)
                for ki in T.serial(0, block_K // e.micro_size_k):
                    e.ldmatrix_a(A_local, A_shared, ki)
                    e.ldmatrix_b(B_local, B_shared, ki)
                    e.mma(A_local, B_local, C_local)
            e.stmatrix(C_local, C_shared)
            for i, j in T.Parallel(block_M, block_N):
                if c_2d:
                    C[by * block_M + i, bx * block_N + j] = C_shared[i, j]
                else:
                    C[by * block_M + i, bx * block_N + j] = C_shared[i // ms, j // ns,
                                                                     i % ms, j % ns]
    return tilejit.kernel(gemm, target=target)


def _inputs(M, N, K, dtype, a_transposed, b_transposed, device="cpu"):
    g = torch.Generator().manual_seed(M + N + K)
    if dtype == "int8":
        a = torch.randint(-128, 128, (M, K), generator=g, dtype=torch.int8)
        b = torch.randint(-128, 128, (N, K), generator=g, dtype=torch.int8)
    else:
        a = torch.randn(M, K, generator=g).to(TORCH[dtype])
        b = torch.randn(N, K, generator=g).to(TORCH[dtype])
    A = (a.T if a_transposed else a).contiguous().to(device)
    B = (b if b_transposed else b.T).contiguous().to(device)
    return a, b, A, B


def _check(c, a, b, dtype, K):
    ref = a.double() @ b.double().T
    if dtype == "int8":
        assert torch.equal(c.cpu().long(), ref.long())
        return
    err = (c.cpu().double() - ref).abs().max().item()
    assert err < 1e-5 * K * (1 + ref.abs().max().item()), err


# -- the emitter's fields and checks -------------------------------------------------------

def test_fields_tilelang_programs_read():
    e = TensorCoreIntrinEmitter(a_dtype="float16", b_dtype="float16", accum_dtype="float32",
                                b_transposed=True, block_row_warps=2, block_col_warps=2,
                                warp_row_tiles=64, warp_col_tiles=32, chunk=32)
    assert (e.micro_size_x, e.micro_size_y, e.micro_size_k) == (16, 16, 16)
    assert (e.local_size_a, e.local_size_b, e.local_size_out) == (8, 8, 8)
    assert (e.warp_rows, e.warp_cols, e.threads) == (4, 2, 128)
    assert e.mma_prefix == "m16n8k16" and e.accum_dtype_abbrv == "fp32"
    narrow = TensorCoreIntrinEmitter(warp_row_tiles=16, warp_col_tiles=24, chunk=16,
                                     accum_dtype=T.float32)
    assert (narrow.micro_size_y, narrow.n_dim, narrow.warp_cols) == (8, 8, 3)
    assert (narrow.local_size_b, narrow.local_size_out) == (4, 4)
    i8 = TensorCoreIntrinEmitter("int8", "int8", "int32", b_transposed=True,
                                 warp_row_tiles=32, warp_col_tiles=32, chunk=64)
    assert (i8.micro_size_k, i8.local_size_a, i8.local_size_b, i8.mma_prefix) == \
        (32, 16, 16, "m16n8k32")
    assert T.TensorCoreIntrinEmitter is TensorCoreIntrinEmitter
    from tilejit.tilelang.intrinsics.mma_macro_generator import TensorCoreIntrinEmitter as E
    assert E is TensorCoreIntrinEmitter


def test_thread_binding_and_store_map():
    e = TensorCoreIntrinEmitter(block_row_warps=2, block_col_warps=3, warp_row_tiles=16,
                                warp_col_tiles=16, chunk=16)
    assert e.extract_thread_binding(32 * 5 + 7) == (7, 2, 1)     # warp 5: m = 1, n = 2
    assert e.extract_thread_binding(32 * 5 + 7, is_m_first=True) == (7, 2, 1 % 2)
    from tilejit.tilelang.intrinsics import mma_store_index_map
    # PTX's c0..c3 of lane 5 (groupID 1, threadID_in_group 1), then the right half
    assert [mma_store_index_map(5, s) for s in range(8)] == [
        (1, 2), (1, 3), (9, 2), (9, 3), (1, 10), (1, 11), (9, 10), (9, 11)]


@pytest.mark.parametrize("kwargs,words", [
    (dict(warp_row_tiles=24), ["warp_row_tiles", "multiple of 16", "got 24"]),
    (dict(warp_col_tiles=12), ["warp_col_tiles", "multiple of 8", "got 12"]),
    (dict(chunk=24), ["chunk", "multiple of 16", "got 24"]),
    (dict(block_row_warps=0), ["block_row_warps", "positive int", "got 0"]),
    (dict(a_dtype="float32", b_dtype="float32"), ["a_dtype", "float16, bfloat16, int8",
                                                  "got float32"]),
    (dict(b_dtype="bfloat16"), ["b_dtype", "a_dtype (float16)", "got bfloat16"]),
    (dict(a_dtype="bfloat16", b_dtype="bfloat16", accum_dtype="float16"),
     ["accum_dtype", "float32", "got float16"]),
    (dict(accum_dtype="nope"), ["accum_dtype", "must be a dtype", "'nope'"]),
    (dict(a_transposed=1), ["a_transposed", "True or False", "got 1"]),
])
def test_static_checks_name_argument_expected_and_received(kwargs, words):
    args = dict(warp_row_tiles=32, warp_col_tiles=32, chunk=32, accum_dtype="float32")
    args.update(kwargs)
    with pytest.raises(ValueError) as info:
        TensorCoreIntrinEmitter(**args)
    for w in words:
        assert w in str(info.value), str(info.value)


def test_methods_called_as_python_say_where_they_belong():
    e = TensorCoreIntrinEmitter(warp_row_tiles=16, warp_col_tiles=16)
    with pytest.raises(TypeError, match="body of a tilejit kernel"):
        e.mma(None, None, None)


# -- the simulator ---------------------------------------------------------------------------

SIM_CASES = [
    # M, N, K, dtype, accum, options
    (64, 64, 64, "float16", "float32", {}),
    (128, 64, 32, "float16", "float32", dict(block_row_warps=2, block_col_warps=1,
                                             warp_row_tiles=64, warp_col_tiles=64)),
    (64, 64, 32, "float16", "float32", dict(a_transposed=True, b_transposed=False)),
    (64, 96, 32, "float16", "float32", dict(warp_row_tiles=32, warp_col_tiles=48,
                                            c_2d=True)),
    (64, 48, 32, "float16", "float32", dict(block_row_warps=4, block_col_warps=1,
                                            warp_row_tiles=16, warp_col_tiles=24)),
    (64, 64, 64, "bfloat16", "float32", {}),
    (64, 64, 32, "bfloat16", "float32", dict(block_row_warps=1, block_col_warps=2,
                                             a_transposed=True, b_transposed=False,
                                             warp_row_tiles=64)),
    (64, 64, 128, "int8", "int32", dict(chunk=64)),
    # int8 that ldmatrix cannot transpose: element loads into the fragments
    (64, 64, 128, "int8", "int32", dict(chunk=64, a_transposed=True)),
    (64, 64, 64, "int8", "int32", dict(chunk=32, b_transposed=False)),
    (64, 48, 64, "int8", "int32", dict(chunk=32, a_transposed=True, b_transposed=False,
                                       block_row_warps=1, block_col_warps=2,
                                       warp_row_tiles=64, warp_col_tiles=24)),
]


@pytest.mark.parametrize("M,N,K,dtype,accum,opts", SIM_CASES)
def test_simulated_gemm_matches_float64(M, N, K, dtype, accum, opts):
    kernel = make_gemm(M, N, K, dtype, accum, target="sim", **opts)
    a, b, A, B = _inputs(M, N, K, dtype, opts.get("a_transposed", False),
                         opts.get("b_transposed", True))
    c = torch.zeros(M, N, dtype=TORCH[accum])
    kernel(A, B, c)
    _check(c, a, b, dtype, K)


def test_float16_accumulator_simulated():
    M = N = K = 32
    kernel = make_gemm(M, N, K, "float16", "float16", block_row_warps=1, block_col_warps=1,
                       target="sim")
    a, b, A, B = _inputs(M, N, K, "float16", False, True)
    c = torch.zeros(M, N, dtype=torch.float16)
    kernel(A, B, c)
    torch.testing.assert_close(c.double(), a.double() @ b.double().T, rtol=2e-2, atol=2e-2)


def make_fragments(dtype="float16", b_transposed=True, warp_col_tiles=16, target="auto"):
    """One warp's A, B and C registers as each lane holds them: A_out[t], B_out[t],
    C_out[t] = the lane's A_local, B_local, C_local after one k step."""
    e = TensorCoreIntrinEmitter(a_dtype=dtype, b_dtype=dtype, accum_dtype="float32",
                                b_transposed=b_transposed, block_row_warps=1,
                                block_col_warps=1, warp_row_tiles=16,
                                warp_col_tiles=warp_col_tiles, chunk=16)
    na, nb, nc = e.local_size_a, e.warp_cols * e.local_size_b, \
        e.warp_cols * e.local_size_out
    b_shape = (warp_col_tiles, 16) if b_transposed else (16, warp_col_tiles)

    def fragments(A, B, A_out, B_out, C_out):
        with T.Kernel(1, threads=32) as bx:
            A_shared = T.alloc_shared((16, 16), dtype)
            B_shared = T.alloc_shared(b_shape, dtype)
            A_local = T.alloc_local((na,), dtype)
            B_local = T.alloc_local((nb,), dtype)
            C_local = T.alloc_local((nc,), "float32")
            T.copy(A, A_shared)
            T.copy(B, B_shared)
            T.clear(C_local)
            e.ldmatrix_a(A_local, A_shared, 0)
            e.ldmatrix_b(B_local, B_shared, 0)
            e.mma(A_local, B_local, C_local)
            tx = T.get_thread_binding()
            for s in T.serial(na):
                A_out[tx, s] = A_local[s]
            for s in T.serial(nb):
                B_out[tx, s] = B_local[s]
            for s in T.serial(nc):
                C_out[tx, s] = C_local[s]
    return tilejit.kernel(fragments, target=target), e


def _fragment_inputs(n, b_transposed):
    # distinct exactly representable values: element (r, c) of A is r * 16 + c
    a = torch.arange(256, dtype=torch.float32).reshape(16, 16).to(torch.float16)
    b = (1000 + torch.arange(16 * n, dtype=torch.float32)).reshape(n, 16).to(torch.float16)
    return a, b, (b if b_transposed else b.T).contiguous()


@pytest.mark.parametrize("b_transposed,warp_col_tiles", [(True, 16), (False, 16), (True, 8)])
def test_each_lane_holds_ptx_fragment_elements(b_transposed, warp_col_tiles):
    kernel, e = make_fragments(b_transposed=b_transposed, warp_col_tiles=warp_col_tiles,
                               target="sim")
    a, b, B = _fragment_inputs(warp_col_tiles, b_transposed)
    outs = [torch.zeros(32, n) for n in (e.local_size_a, e.local_size_b * e.warp_cols,
                                         e.local_size_out * e.warp_cols)]
    kernel(a, B, *outs)
    A_out, B_out, C_out = (o.numpy() for o in outs)
    c = (a.double() @ b.double().T).numpy()
    for t in range(32):
        g, q = t // 4, t % 4
        for i in range(8):          # a_i: row g + 8·((i >> 1) & 1), col 2q + (i & 1) + 8·(i ≥ 4)
            assert A_out[t, i] == a[g + 8 * ((i >> 1) & 1), 2 * q + (i & 1) + 8 * (i >= 4)]
        for half in range(warp_col_tiles // 8):
            for i in range(4):      # b_i: k 2q + (i & 1) + 8·(i ≥ 2), n g
                assert B_out[t, 4 * half + i] == b[8 * half + g, 2 * q + (i & 1) + 8 * (i >= 2)]
            for i in range(4):      # c_i: row g + 8·(i ≥ 2), col 2q + (i & 1)
                assert C_out[t, 4 * half + i] == c[g + 8 * (i >= 2), 8 * half + 2 * q + (i & 1)]


# -- the PTX -----------------------------------------------------------------------------------

PTX_CASES = [
    ("float16", "float32", {}, ["ldmatrix.sync.aligned.m8n8.x4.shared.b16",
                                "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"]),
    ("bfloat16", "float32", dict(a_transposed=True, b_transposed=False),
     ["ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"]),
    ("float16", "float16", dict(warp_col_tiles=24, block_col_warps=2),
     ["ldmatrix.sync.aligned.m8n8.x2.shared.b16",
      "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16"]),
    ("int8", "int32", dict(chunk=64), ["ldmatrix.sync.aligned.m8n8.x4.shared.b16",
                                       "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"]),
    # int8 A as (K, M), B as (K, N): element loads (ldmatrix's .trans moves 16-bit elements)
    ("int8", "int32", dict(chunk=64, a_transposed=True, b_transposed=False),
     ["ld.shared.b8", "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"]),
]


@pytest.mark.parametrize("dtype,accum,opts,instructions", PTX_CASES)
def test_ptx_uses_ldmatrix_and_mma_sync_and_assembles(dtype, accum, opts, instructions,
                                                      ptxas):
    M = N = 96 if opts.get("warp_col_tiles") == 24 else 128
    K = 128
    kernel = make_gemm(M, N, K, dtype, accum, **opts)
    _, _, A, B = _inputs(M, N, K, dtype, opts.get("a_transposed", False),
                         opts.get("b_transposed", True))
    c = torch.zeros(M, N, dtype=TORCH[accum])
    for arch in ("sm_80", "sm_90a"):        # sm_90a: still mma.sync, not wgmma
        compiled = kernel.compile(A, B, c, target="cuda", arch=arch)
        ptx = compiled.ptx
        for ins in instructions:
            assert ins in ptx, (arch, ins)
        assert "wgmma" not in ptx
        if dtype == "int8" and opts.get("a_transposed") and not opts.get("b_transposed"):
            assert "ldmatrix" not in ptx
        report = ptxas(ptx, arch)
        assert "0 bytes stack frame" in report, report     # the local arrays in registers


def test_stmatrix_runs_are_not_split_by_barriers():
    kernel = make_gemm(128, 128, 64)
    _, _, A, B = _inputs(128, 128, 64, "float16", False, True)
    ptx = kernel.compile(A, B, torch.zeros(128, 128), target="cuda", arch="sm_80").ptx
    # the pipeline's, before the stores to C_shared and before the copy out: not one a store
    assert ptx.count("bar.sync") <= 6, ptx.count("bar.sync")


# -- errors -----------------------------------------------------------------------------------

def test_amdgpu_is_a_compile_error_naming_the_emitter():
    kernel = make_gemm(64, 64, 32)
    _, _, A, B = _inputs(64, 64, 32, "float16", False, True)
    with pytest.raises(CompileError, match="NVIDIA-only") as info:
        kernel.compile(A, B, torch.zeros(64, 64), target="amdgpu", arch="gfx90a")
    assert "TensorCoreIntrinEmitter" in str(info.value)


def test_before_sm_80_is_a_compile_error():
    kernel = make_gemm(64, 64, 32)
    _, _, A, B = _inputs(64, 64, 32, "float16", False, True)
    with pytest.raises(CompileError, match="sm_80"):
        kernel.compile(A, B, torch.zeros(64, 64), target="cuda", arch="sm_75")


def _one_warp(body_kind):
    e = TensorCoreIntrinEmitter(accum_dtype="float32", b_transposed=True, block_row_warps=1,
                                block_col_warps=1, warp_row_tiles=16, warp_col_tiles=16,
                                chunk=16)

    c_shape = (16, 16, 1) if body_kind == "rank" else (1, 1, 16, 16)

    def bad(A, B, C):
        with T.Kernel(1, threads=32) as bx:
            A_shared = T.alloc_shared((16, 16), "float16")
            B_shared = T.alloc_shared((16, 16), "float16")
            C_shared = T.alloc_shared(c_shape, "float32")
            A_local = T.alloc_local((8,), "float16")
            B_frag = T.alloc_fragment((8,), "float16")
            B_local = T.alloc_local((8,), "float16")
            C_local = T.alloc_local((8,), "float32")
            T.copy(A, A_shared)
            T.copy(B, B_shared)
            T.clear(C_local)
            e.ldmatrix_a(A_local, A_shared, 0)
            if body_kind == "fragment":
                e.ldmatrix_b(B_frag, B_shared, 0)
            e.ldmatrix_b(B_local, B_shared, 0)
            e.mma(A_local, B_local, C_local)
            e.stmatrix(C_local, C_shared)
            for i, j in T.Parallel(16, 16):
                C[i, j] = C_shared[0, 0, i, j] if body_kind != "rank" else 0.0
    return tilejit.kernel(bad)


@pytest.mark.parametrize("kind,words", [
    ("fragment", ["ldmatrix", "T.alloc_local", "B_frag"]),
    ("rank", ["stmatrix", "C_shared is a 3-d tile"]),
])
def test_misuse_in_a_kernel_is_a_compile_error_at_its_line(kind, words):
    kernel = _one_warp(kind)
    a = torch.zeros(16, 16, dtype=torch.float16)
    with pytest.raises(CompileError) as info:
        kernel.compile(a, a, torch.zeros(16, 16), target="cuda", arch="sm_80")
    message = str(info.value)
    for w in words:
        assert w in message, message
    assert "test_mma_emitter.py" in message


def test_other_methods_in_a_kernel_are_a_compile_error():
    e = TensorCoreIntrinEmitter(warp_row_tiles=16, warp_col_tiles=16, chunk=16)

    @tilejit.kernel
    def other(A):
        with T.Kernel(1, threads=32) as bx:
            e.get_store_index_map()
            A[0] = 1.0

    with pytest.raises(CompileError, match="get_store_index_map is not built in a kernel"):
        other.compile(torch.zeros(4), target="cuda", arch="sm_80")


def test_wrong_accumulator_is_a_compile_error():
    e = TensorCoreIntrinEmitter(warp_row_tiles=16, warp_col_tiles=16, chunk=16)

    @tilejit.kernel
    def wrong(A):
        with T.Kernel(1, threads=32) as bx:
            A_local = T.alloc_local((8,), "float16")
            B_local = T.alloc_local((8,), "float16")
            C_local = T.alloc_local((8,), "int32")
            T.clear(A_local)
            T.clear(B_local)
            T.clear(C_local)
            e.mma(A_local, B_local, C_local)
            A[0] = C_local[0]

    with pytest.raises(CompileError) as info:
        wrong.compile(torch.zeros(4, dtype=torch.int32), target="cuda", arch="sm_80")
    for w in ("accumulator C_local", "float32 or float16", "got int32",
              "test_mma_emitter.py"):
        assert w in str(info.value), str(info.value)


# -- on the GPU: against torch (float64) and the simulator -------------------------------------

GPU_CASES = [
    (256, 256, 256, "float16", "float32", {}),
    (512, 256, 128, "float16", "float32", dict(block_row_warps=2, block_col_warps=2,
                                               warp_row_tiles=64, warp_col_tiles=64)),
    (256, 192, 128, "float16", "float32", dict(a_transposed=True, b_transposed=False,
                                               warp_col_tiles=48, c_2d=True)),
    (256, 256, 256, "bfloat16", "float32", {}),
    (128, 96, 64, "bfloat16", "float32", dict(block_row_warps=4, block_col_warps=2,
                                              warp_row_tiles=32, warp_col_tiles=24,
                                              a_transposed=True, b_transposed=False)),
    (128, 128, 256, "int8", "int32", dict(chunk=64)),
    (128, 128, 256, "int8", "int32", dict(chunk=64, a_transposed=True)),
    (128, 96, 128, "int8", "int32", dict(chunk=32, a_transposed=True, b_transposed=False,
                                         warp_col_tiles=48)),
]


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,K,dtype,accum,opts", GPU_CASES)
def test_gpu_gemm_matches_torch_and_simulator(M, N, K, dtype, accum, opts):
    a, b, A, B = _inputs(M, N, K, dtype, opts.get("a_transposed", False),
                         opts.get("b_transposed", True), device="cuda")
    c = torch.zeros(M, N, dtype=TORCH[accum], device="cuda")
    make_gemm(M, N, K, dtype, accum, **opts)(A, B, c)
    torch.cuda.synchronize()
    _check(c, a, b, dtype, K)
    c_sim = torch.zeros(M, N, dtype=TORCH[accum])
    make_gemm(M, N, K, dtype, accum, target="sim", **opts)(A.cpu(), B.cpu(), c_sim)
    tol = 0 if dtype == "int8" else 1e-4
    np.testing.assert_allclose(c.cpu().double().numpy(), c_sim.double().numpy(),
                               rtol=tol, atol=tol * K)


@pytest.mark.gpu
@pytest.mark.parametrize("b_transposed,warp_col_tiles", [(True, 16), (False, 16), (True, 8)])
def test_gpu_lanes_hold_what_the_simulator_says(b_transposed, warp_col_tiles):
    """A user indexing A_local, B_local, C_local by hand sees the same numbers on both."""
    a, b, B = _fragment_inputs(warp_col_tiles, b_transposed)
    gpu, e = make_fragments(b_transposed=b_transposed, warp_col_tiles=warp_col_tiles)
    sim, _ = make_fragments(b_transposed=b_transposed, warp_col_tiles=warp_col_tiles,
                            target="sim")
    sizes = (e.local_size_a, e.local_size_b * e.warp_cols, e.local_size_out * e.warp_cols)
    outs = [torch.zeros(32, n, device="cuda") for n in sizes]
    gpu(a.cuda(), B.cuda(), *outs)
    torch.cuda.synchronize()
    expected = [torch.zeros(32, n) for n in sizes]
    sim(a, B, *expected)
    for got, want in zip(outs, expected):
        assert torch.equal(got.cpu(), want)
