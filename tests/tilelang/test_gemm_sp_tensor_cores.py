"""``T.gemm_sp`` on Hopper's sparse tensor cores (``wgmma.mma_async.sp``): A read
compressed from shared memory, the metadata register of each thread read from the E
tile (``codegen/lowering/sparse_meta.py``), no dense copy of A. Which gemms take it
(``passes/sparse_gemms.py``): 16-bit A and B, A not transposed, the gemm a wgmma plan on
sm_90a; the others keep the expansion into a dense tile (``test_gemm_sp.py``). Checked
here: the PTX (the instruction, no expansion, ptxas), the plan, and on the GPU every
metadata width, E transposed, one and two warpgroups, partial tiles, pipelined K, against
float64 torch and the simulator."""
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit.tilelang.cuda.intrinsics.sparse_layout import get_e_factor
from tilejit.utils.sparse import compress


def sparse_matmul(M, N, K, block_M, block_N, block_K, in_dtype="float16", accum="float32",
                  meta_dtype="int16", trans_E=False, trans_B=False, threads=128,
                  num_stages=2, policy=T.GemmWarpPolicy.Square):
    ef = get_e_factor(in_dtype, meta_dtype)
    E_shape = (K // ef, M) if trans_E else (M, K // ef)
    E_tile = (block_K // ef, block_M) if trans_E else (block_M, block_K // ef)
    B_shape = (N, K) if trans_B else (K, N)
    B_tile = (block_N, block_K) if trans_B else (block_K, block_N)

    @T.prim_func
    def main(A_sparse: T.Tensor((M, K // 2), in_dtype), E: T.Tensor(E_shape, meta_dtype),
             B: T.Tensor(B_shape, in_dtype), C: T.Tensor((M, N), accum)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K // 2), in_dtype)
            E_s = T.alloc_shared(E_tile, meta_dtype)
            B_s = T.alloc_shared(B_tile, in_dtype)
            C_f = T.alloc_fragment((block_M, block_N), accum)
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A_sparse[by * block_M, k * block_K // 2], A_s)
                if trans_E:
                    T.copy(E[k * block_K // ef, by * block_M], E_s)
                else:
                    T.copy(E[by * block_M, k * block_K // ef], E_s)
                if trans_B:
                    T.copy(B[bx * block_N, k * block_K], B_s)
                else:
                    T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm_sp(A_s, E_s, B_s, C_f, transpose_E=trans_E, transpose_B=trans_B,
                          policy=policy)
            T.copy(C_f, C[by * block_M, bx * block_N])

    return main


def operands(M, N, K, in_dtype, meta_dtype, trans_E, trans_B, device, seed=0):
    g = torch.Generator().manual_seed(seed)
    dense = torch.randn(M, K, generator=g)
    drop = torch.rand(M, K // 4, 4, generator=g).argsort(-1)[..., :2]
    dense = dense.view(M, K // 4, 4).scatter(-1, drop, 0.0).view(M, K).to(getattr(torch,
                                                                                  in_dtype))
    values, meta = compress(dense, meta_dtype)
    B = torch.randn(K, N, generator=g).to(dense.dtype)
    ref = dense.double() @ B.double()
    if trans_E:
        meta = meta.T.contiguous()
    if trans_B:
        B = B.T.contiguous()
    return [x.to(device) for x in (values, meta, B)], ref


# M, N, K, (block_M, block_N, block_K), in, accum, meta, trans_E, trans_B, threads, stages
CASES = [
    (256, 256, 512, (128, 128, 64), "float16", "float32", "int16", False, False, 128, 2),
    (256, 256, 512, (128, 128, 64), "float16", "float32", "int16", False, False, 256, 3),
    (256, 512, 256, (128, 256, 64), "float16", "float32", "int16", False, False, 256, 3),
    (256, 160, 256, (128, 128, 64), "float16", "float32", "int32", False, True, 128, 2),
    (128, 128, 256, (64, 64, 32), "float16", "float32", "int8", False, False, 128, 2),
    (128, 256, 256, (128, 128, 128), "bfloat16", "float32", "int16", True, True, 256, 2),
    (128, 128, 256, (128, 64, 64), "float16", "float16", "uint16", True, False, 128, 2),
    (64, 256, 128, (64, 256, 64), "bfloat16", "float32", "uint32", False, False, 128, 1),
]
IDS = [f"{c[4]}-{c[5]}-{c[6]}{'-tE' if c[7] else ''}{'-tB' if c[8] else ''}-{c[0]}x{c[1]}"
       f"x{c[2]}-b{'x'.join(map(str, c[3]))}-t{c[9]}-s{c[10]}" for c in CASES]


def _program(case):
    M, N, K, (bM, bN, bK), ind, acc, meta, tE, tB, threads, stages = case
    return sparse_matmul(M, N, K, bM, bN, bK, ind, acc, meta, tE, tB, threads, stages)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_ptx_runs_wgmma_sp_and_no_expansion(case, ptxas):
    ptx = tilejit.compile(_program(case), out_idx=[3],
                          target="cuda -arch=sm_90a").get_kernel_source()
    assert "wgmma.mma_async.sp.sync.aligned.m64n" in ptx
    ptxas(ptx, "sm_90a")


def test_sm80_runs_mma_sp(ptxas):
    ptx = tilejit.compile(_program(CASES[0]), out_idx=[3],
                          target="cuda -arch=sm_80").get_kernel_source()
    assert "mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32" in ptx
    ptxas(ptx, "sm_80")


def test_the_ir_dump_shows_no_dense_tile_and_the_sparse_plan(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_DUMP_IR", str(tmp_path))
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    tilejit.compile(_program(CASES[1]), out_idx=[3],
                    target="cuda -arch=sm_90a").get_kernel_source()
    (directory,) = tmp_path.iterdir()
    after = (directory / "07_after_expand_sparse_gemms.py").read_text()
    assert ".gemm_sp(A_s, E_s, B_s, C_f" in after and "__tj_sp" not in after
    text = "\n".join(p.read_text() for p in directory.iterdir())
    assert "wgmma.sp.m64n128k32" in text


def test_transposed_a_keeps_the_expansion():
    """wgmma.sp is taken for K-major A only: a transposed A is expanded (and correct)."""
    from test_gemm_sp import _program as dense_program, CASES as DENSE
    ptx = tilejit.compile(dense_program(DENSE[2]), out_idx=[3],
                          target="cuda -arch=sm_90a").get_kernel_source()
    assert "wgmma.mma_async.sync" in ptx and "mma_async.sp" not in ptx


@pytest.mark.parametrize("case", CASES[:2] + CASES[3:4], ids=IDS[:2] + IDS[3:4])
def test_in_simulation(case):
    M, N, K, _, ind, acc, meta, tE, tB, _, _ = case
    args, ref = operands(M, N, K, ind, meta, tE, tB, "cpu")
    C = tilejit.compile(_program(case), out_idx=[3], target="sim")(*args)
    tol = 2e-2 if acc == "float16" else 1e-2
    torch.testing.assert_close(C.double(), ref.to(C.dtype).double(), rtol=tol, atol=tol)


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_on_the_gpu_against_torch_and_the_simulator(case):
    M, N, K, _, ind, acc, meta, tE, tB, _, _ = case
    args, ref = operands(M, N, K, ind, meta, tE, tB, "cuda")
    kernel = tilejit.compile(_program(case), out_idx=[3], target="cuda")
    assert "mma_async.sp" in kernel.get_kernel_source()
    C = kernel(*args)
    torch.cuda.synchronize()
    tol = 2e-2 if acc == "float16" else 1e-2
    torch.testing.assert_close(C.cpu().double(), ref.to(C.dtype).double(), rtol=tol, atol=tol)
    sim = tilejit.compile(_program(case), out_idx=[3], target="sim")(*(a.cpu() for a in args))
    # a float16 accumulator: each side's rounding off float64's (H200: one element of
    # 16384 0.022 from the simulator's, within 2e-2 of torch's float64 on both)
    tol = 2 * tol if acc == "float16" else tol
    torch.testing.assert_close(C.cpu().double(), sim.double(), rtol=tol, atol=tol)


# mma.sp.sync (sm_80's form, and sm_90a's with wgmma turned off): one warp per m16 tile
MMA_CASES = [CASES[0], CASES[3], CASES[4], CASES[5], CASES[6]]
MMA_IDS = [IDS[i] for i in (0, 3, 4, 5, 6)]
NO_WGMMA = {tilejit.PassConfigKey.TL_DISABLE_WGMMA: True}


@pytest.mark.parametrize("case", MMA_CASES, ids=MMA_IDS)
def test_mma_sp_ptx(case, ptxas):
    for arch, configs in (("sm_80", None), ("sm_90a", NO_WGMMA)):
        ptx = tilejit.compile(_program(case), out_idx=[3], target=f"cuda -arch={arch}",
                              pass_configs=configs).get_kernel_source()
        assert "mma.sp.sync.aligned.m16n8k32.row.col." in ptx and "wgmma" not in ptx
        ptxas(ptx, arch)


@pytest.mark.gpu
@pytest.mark.parametrize("case", MMA_CASES, ids=MMA_IDS)
def test_mma_sp_on_the_gpu_against_torch(case):
    M, N, K, _, ind, acc, meta, tE, tB, _, _ = case
    args, ref = operands(M, N, K, ind, meta, tE, tB, "cuda")
    kernel = tilejit.compile(_program(case), out_idx=[3], target="cuda", pass_configs=NO_WGMMA)
    assert "mma.sp.sync" in kernel.get_kernel_source()
    C = kernel(*args)
    torch.cuda.synchronize()
    tol = 2e-2 if acc == "float16" else 1e-2
    torch.testing.assert_close(C.cpu().double(), ref.to(C.dtype).double(), rtol=tol, atol=tol)


def test_a_row_statistic_keeps_the_sparse_plan_on_mma_sp(tmp_path, monkeypatch):
    """A row statistic linking the sparse gemm's accumulator to another gemm's makes the
    warp-row pass re-plan both FullRow: the sparse plan keeps E transposed (it reset it
    once, reading E as if row-major)."""
    monkeypatch.setenv("TILEJIT_DUMP_IR", str(tmp_path))
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")

    @T.prim_func
    def main(A_sparse: T.Tensor((64, 32), "float16"), E: T.Tensor((4, 64), "int16"),
             B: T.Tensor((64, 128), "float16"), V: T.Tensor((128, 32), "float16"),
             O: T.Tensor((64, 32), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((64, 32), "float16")
            E_s = T.alloc_shared((4, 64), "int16")
            B_s = T.alloc_shared((64, 128), "float16")
            V_s = T.alloc_shared((128, 32), "float16")
            S = T.alloc_fragment((64, 128), "float32")
            S_h = T.alloc_fragment((64, 128), "float16")
            m = T.alloc_fragment((64,), "float32")
            acc = T.alloc_fragment((64, 32), "float32")
            T.copy(A_sparse, A_s)
            T.copy(E, E_s)
            T.copy(B, B_s)
            T.copy(V, V_s)
            T.clear(S)
            T.gemm_sp(A_s, E_s, B_s, S, transpose_E=True)
            T.reduce_max(S, m, dim=1)
            T.copy(S, S_h)
            T.clear(acc)
            T.gemm(S_h, V_s, acc)
            for i, j in T.Parallel(64, 32):
                acc[i, j] = acc[i, j] * m[i]
            T.copy(acc, O)

    ptx = tilejit.compile(main, out_idx=[4], target="cuda -arch=sm_80").get_kernel_source()
    assert "mma.sp.sync.aligned.m16n8k32" in ptx
    (directory,) = tmp_path.iterdir()
    text = "\n".join(p.read_text() for p in directory.iterdir())
    assert "E^T policy=FullRow: mma.sp.m16n8k32" in text
