"""T.gemm on AMD's MFMA (gfx90a, gfx942): the plans, the errors, and the kernels' own
AMDGPU LLVM IR run on this machine's CPU (tests/support/amdgpu_cpu.py: one thread per
work item, each wave's MFMA computed from AMD's register formulas) against numpy and the
simulator. No AMD GPU runs them here: the back end's instruction selection and the
hardware are not what this checks."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T
from amdgpu_cpu import run_kernel
from tilejit.ir.gemm_plan import GemmPlanError, plan_mfma


@tilejit.kernel
def mm(A, B, C, bM: T.constexpr = 64, bN: T.constexpr = 64, bK: T.constexpr = 32,
       ta: T.constexpr = False, tb: T.constexpr = False, threads: T.constexpr = 128,
       policy: T.constexpr = "Square"):
    M, N = C.shape
    K = A.shape[0] if ta else A.shape[1]
    with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=threads) as (bx, by):
        A_s = T.alloc_shared((bK, bM) if ta else (bM, bK), A.dtype)
        B_s = T.alloc_shared((bN, bK) if tb else (bK, bN), B.dtype)
        C_f = T.alloc_fragment((bM, bN), C.dtype)
        T.clear(C_f)
        for k in T.Pipelined(T.ceildiv(K, bK), num_stages=2):
            if ta:
                T.copy(A[k * bK, by * bM], A_s)
            else:
                T.copy(A[by * bM, k * bK], A_s)
            if tb:
                T.copy(B[bx * bN, k * bK], B_s)
            else:
                T.copy(B[k * bK, bx * bN], B_s)
            T.gemm(A_s, B_s, C_f, transpose_A=ta, transpose_B=tb, policy=policy)
        T.copy(C_f, C[by * bM, bx * bN])


@tilejit.kernel
def two_gemms(A, B, D, E, threads: T.constexpr = 128):
    """E = (A @ B) @ D with A @ B cast to A's dtype and fed to the second gemm from
    registers (FlashAttention's P @ V)."""
    M, K = A.shape
    N = B.shape[1]
    with T.Kernel(1, threads=threads) as bx:
        A_s = T.alloc_shared((M, K), A.dtype)
        B_s = T.alloc_shared((K, N), B.dtype)
        D_s = T.alloc_shared((N, N), D.dtype)
        P = T.alloc_fragment((M, N), T.float32)
        P16 = T.alloc_fragment((M, N), A.dtype)
        O = T.alloc_fragment((M, N), T.float32)
        T.copy(A[0, 0], A_s)
        T.copy(B[0, 0], B_s)
        T.copy(D[0, 0], D_s)
        T.gemm(A_s, B_s, P, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
        T.copy(P, P16)
        T.gemm(P16, D_s, O, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
        T.copy(O, E[0, 0])


def _operands(dtype, M, N, K, ta, tb, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == "int8":
        a = rng.integers(-128, 128, (M, K)).astype(np.int8)
        b = rng.integers(-128, 128, (K, N)).astype(np.int8)
    else:
        a = rng.standard_normal((M, K)).astype(np.float32)
        b = rng.standard_normal((K, N)).astype(np.float32)
        if dtype == "bfloat16":        # values bfloat16 holds exactly
            a = torch.from_numpy(a).bfloat16().float().numpy()
            b = torch.from_numpy(b).bfloat16().float().numpy()
        else:
            a, b = a.astype(dtype), b.astype(dtype)
    A = np.ascontiguousarray(a.T) if ta else a
    B = np.ascontiguousarray(b.T) if tb else b
    return a, b, A, B


def _typed(x, dtype):
    """The argument the kernel is compiled for (numpy has no bfloat16: a torch tensor)."""
    return torch.from_numpy(x).bfloat16() if dtype == "bfloat16" else x


def _bits(x, dtype):
    """The array the CPU run reads (bfloat16 as its bits)."""
    return _typed(x, dtype).view(torch.int16).numpy() if dtype == "bfloat16" else x


CASES = [   # dtype, C dtype, M, N, K, block M, N, K, transpose A, B, threads, instruction
    ("float16", "float32", 128, 128, 64, 64, 64, 32, False, False, 128, "32x32x8"),
    ("float16", "float32", 100, 120, 96, 64, 64, 32, True, True, 128, "32x32x8"),
    ("bfloat16", "float32", 128, 128, 64, 64, 64, 32, True, False, 128, "32x32x8"),
    ("float16", "float32", 64, 64, 64, 32, 32, 32, False, True, 256, "16x16x16"),
    ("int8", "int32", 128, 128, 64, 64, 64, 32, False, True, 128, None),
    ("int8", "int32", 64, 64, 128, 32, 32, 64, True, False, 256, None),
    ("float32", "float32", 64, 64, 64, 64, 64, 32, False, False, 128, "32x32x2"),
    ("float16", "float16", 64, 64, 64, 64, 64, 32, False, True, 128, "32x32x8"),
]
INT8 = {("gfx942", 128): "i32_32x32x16", ("gfx942", 256): "i32_16x16x32",
        ("gfx90a", 128): "i32_32x32x8", ("gfx90a", 256): "i32_16x16x16"}


@pytest.mark.parametrize("arch", ["gfx942", "gfx90a"])
@pytest.mark.parametrize("case", CASES, ids=["-".join(map(str, c[:5] + c[8:10])) for c in CASES])
def test_gemm_runs_on_the_cpu_as_in_the_simulator(case, arch):
    dtype, acc, M, N, K, bM, bN, bK, ta, tb, threads, instr = case
    a, b, A, B = _operands(dtype, M, N, K, ta, tb)
    C = np.zeros((M, N), acc)
    handle = mm.compile(_typed(A, dtype), _typed(B, dtype), C, bM=bM, bN=bN, bK=bK, ta=ta,
                        tb=tb, threads=threads, target="amdgpu", arch=arch)
    want = (INT8[(arch, threads)] if dtype == "int8" else
            "f32_" + instr + ("_" if arch == "gfx942" else ""))
    assert f"v_mfma_{want}" in handle.asm
    run_kernel(handle, [_bits(A, dtype), _bits(B, dtype), C],
               ((N + bN - 1) // bN, (M + bM - 1) // bM), threads)
    if dtype == "int8":
        np.testing.assert_array_equal(C, a.astype(np.int64) @ b.astype(np.int64))
        return
    # the simulator's meaning: float32 rounded to TF32, float16 C rounded every 16 of K
    sim = torch.zeros(M, N, dtype=getattr(torch, acc))
    mm(*(torch.as_tensor(_typed(x, dtype)) for x in (A, B)), sim, bM=bM, bN=bN, bK=bK,
       ta=ta, tb=tb, threads=threads)
    scale = np.abs(a.astype(np.float64) @ b.astype(np.float64)).max()
    tol = 1e-2 if acc == "float16" else 1e-5
    np.testing.assert_allclose(C.astype(np.float64), sim.double().numpy(), rtol=0,
                               atol=tol * scale)


@pytest.mark.parametrize("arch, dtype, threads", [("gfx942", "float16", 128),
                                                   ("gfx90a", "float16", 128),
                                                   ("gfx942", "bfloat16", 256)])
def test_a_operand_in_registers(arch, dtype, threads):
    """The swapped accumulator of the first gemm is the second gemm's A operand as it
    stands: no conversion through LDS (the plan's shared bytes are the three tiles), on
    32x32x8 (2 waves) and 16x16x16 (4 waves along M: 64 x 32 has no 32x32 split)."""
    rng = np.random.default_rng(3)
    n = 32 if threads == 256 else 64
    A, B, D = (rng.standard_normal(s).astype(np.float32) for s in ((64, 32), (32, n), (n, n)))
    if dtype == "bfloat16":
        A, B, D = (torch.from_numpy(x).bfloat16().float().numpy() for x in (A, B, D))
    else:
        A, B, D = (x.astype(np.float16) for x in (A, B, D))
    E = np.zeros((64, n), np.float32)
    handle = two_gemms.compile(*(_typed(x, dtype) for x in (A, B, D)), E, threads=threads,
                               target="amdgpu", arch=arch)
    assert handle.shared_bytes == 2 * (64 * 32 + 32 * n + n * n)
    assert ("16x16x16" if threads == 256 else "32x32x8") in handle.asm
    run_kernel(handle, [*(_bits(x, dtype) for x in (A, B, D)), E], (1,), threads)
    P = torch.from_numpy(A.astype(np.float32) @ B.astype(np.float32))
    P = (P.bfloat16() if dtype == "bfloat16" else P.half()).double().numpy()
    want = P @ D.astype(np.float64)
    np.testing.assert_allclose(E, want, rtol=0, atol=1e-3 * np.abs(want).max())


def test_flash_attention_runs_on_the_cpu():
    """FlashAttention (causal, a partial last tile): the two MFMA gemms, P in registers,
    the row reductions across lanes (ds_bpermute), against the simulator."""
    from flash_attention.flash_attn import flashattn
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 160, 1, 64)).astype(np.float16) for _ in range(3))
    out = np.zeros_like(q)
    handle = flashattn.compile(q, k, v, out, is_causal=True, target="amdgpu", arch="gfx942")
    run_kernel(handle, [q, k, v, out], (2, 1, 1), 128)
    sim = torch.zeros(q.shape, dtype=torch.float16)
    flashattn(*(torch.from_numpy(x) for x in (q, k, v)), sim, is_causal=True)
    np.testing.assert_allclose(out.astype(np.float32), sim.float().numpy(), rtol=0, atol=2e-3)


def test_plans():
    p = plan_mfma(128, 128, 32, ("float16", "float16", "float32"), threads=128)
    assert (p.engine, p.instr, p.kind, p.k_step) == ("mfma", "32x32x8", "f32.32x32x8f16", 8)
    assert (p.warps_m, p.warps_n, p.repeat_m, p.repeat_n) == (2, 1, 2, 4)
    assert p.c_fragment().shape == (128, 128) and p.c_fragment().slots_per_thread == 128
    assert "mfma.f32.32x32x8f16, 2x1 waves" in str(p)
    p = plan_mfma(32, 32, 32, ("bfloat16", "bfloat16", "float32"), threads=256)
    assert (p.instr, p.warps_m, p.warps_n) == ("16x16x16", 2, 2)
    assert plan_mfma(64, 64, 64, ("int8", "int8", "int32"), arch="gfx90a").kind == \
        "i32.32x32x8i8"
    assert plan_mfma(64, 64, 64, ("int8", "int8", "int32"), arch="gfx942").kind == \
        "i32.32x32x16.i8"
    # an A operand in registers needs K in whole instruction tiles of N
    assert plan_mfma(64, 64, 16, ("float16",) * 2 + ("float32",), threads=128,
                     a_in_registers=True).instr == "16x16x16"
    with pytest.raises(GemmPlanError, match="no MFMA instruction on gfx942 for A/B/C dtypes "
                                            "float16/float16/int32"):
        plan_mfma(64, 64, 64, ("float16", "float16", "int32"))
    with pytest.raises(GemmPlanError, match="whole waves of 64 threads"):
        plan_mfma(64, 64, 64, ("float16", "float16", "float32"), threads=96)
    with pytest.raises(GemmPlanError, match="does not fit MFMA on gfx942"):
        plan_mfma(16, 48, 16, ("float16", "float16", "float32"), threads=128)
    with pytest.raises(GemmPlanError, match="K a multiple of 16"):
        plan_mfma(64, 64, 8, ("float16", "float16", "float16"), threads=128)


def test_unsupported_gemm_is_a_compile_error_at_its_line():
    A = np.zeros((64, 32), np.float16)
    B = np.zeros((32, 64), np.float16)
    with pytest.raises(tilejit.CompileError, match="no MFMA instruction on gfx90a") as e:
        mm.compile(A, B, np.zeros((64, 64), np.int32), target="amdgpu", arch="gfx90a")
    assert e.value.lineno is not None
    with pytest.raises(tilejit.CompileError, match="whole waves of 64 threads"):
        mm.compile(A, B, np.zeros((64, 64), np.float32), threads=96, target="amdgpu",
                   arch="gfx942")
