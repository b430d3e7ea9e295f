"""T.gemm with an int8 A operand held in registers (TileLang's W4A8 dequantizing GEMM:
the int4 weights dequantized into an int8 fragment multiplied by int8 activations in
shared memory, int32 accumulators). mma.sync's m16n8k32 A operand holds four
consecutive columns a register, a layout of its own (``GemmPlan.a_fragment``,
``A_OWN_LAYOUT``), which the fragment takes. Simulation against torch's integer matmul,
sm_80 and sm_90a PTX assembled, a GPU twin."""
import pytest
import torch

import tilejit
import tilejit.language as T


def dequant_gemm(M=128, N=128, K=128, block_N=64, block_M=64, block_K=64):
    """Ct = (B packed two int4 a byte, dequantized to int8) @ A^T, per block."""
    @T.prim_func
    def main(A: T.Tensor((M, K), T.int8), B: T.Tensor((N, K // 2), T.uint8),
             Ct: T.Tensor((N, M), T.int32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.int8)
            B_s = T.alloc_shared((block_N, block_K // 2), T.uint8)
            B_local = T.alloc_fragment((block_N, block_K), T.int8)
            acc = T.alloc_fragment((block_N, block_M), T.int32)
            T.clear(acc)
            for k in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[bx * block_N, k * block_K // 2], B_s)
                for i, j in T.Parallel(block_N, block_K):
                    byte = B_s[i, j // 2]
                    nib = (byte >> ((j % 2) * 4)) & 15
                    B_local[i, j] = T.cast(T.if_then_else(nib >= 8, nib - 16, nib), T.int8)
                T.gemm(B_local, A_s, acc, transpose_B=True)
            T.copy(acc, Ct[bx * block_N, by * block_M])
    return main


def _inputs(device="cpu", M=128, N=128, K=128):
    g = torch.Generator().manual_seed(5)
    A = torch.randint(-128, 128, (M, K), generator=g, dtype=torch.int8)
    B = torch.randint(0, 256, (N, K // 2), generator=g, dtype=torch.uint8)
    return A.to(device), B.to(device)


def _reference(A, B):
    b = B.cpu().to(torch.int32)
    lo, hi = b & 15, b >> 4
    q = torch.stack([lo, hi], dim=-1).reshape(B.shape[0], -1)
    q = torch.where(q >= 8, q - 16, q)
    return (q.to(torch.int64) @ A.cpu().to(torch.int64).T).to(torch.int32)


def test_int8_a_in_registers_in_simulation():
    A, B = _inputs()
    Ct = torch.zeros(128, 128, dtype=torch.int32)
    tilejit.compile(dequant_gemm(), target="sim")(A, B, Ct)
    torch.testing.assert_close(Ct, _reference(A, B), rtol=0, atol=0)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_int8_a_in_registers_compiles(arch, ptxas):
    ptx = tilejit.compile(dequant_gemm(), target=f"cuda -arch={arch}").get_kernel_source()
    assert "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32" in ptx
    ptxas(ptx, arch)


@pytest.mark.gpu
def test_int8_a_in_registers_on_the_gpu():
    A, B = _inputs("cuda")
    Ct = torch.zeros(128, 128, dtype=torch.int32, device="cuda")
    tilejit.compile(dequant_gemm(), target="cuda")(A, B, Ct)
    torch.cuda.synchronize()
    torch.testing.assert_close(Ct.cpu(), _reference(A, B), rtol=0, atol=0)
