"""`T.gemm` with B in a fragment (TileLang's shared × register and register × register
forms; the SPEC's "A and B in shared memory or fragments"): the tensor cores read B from
shared memory (wgmma always; mma.sync's B layout is not a tile layout here), so B is
copied into a shared tile of its own before the gemm (it was refused: "operand B must be
a 2-d shared tile"). In simulation against float64, the PTX of sm_80 (mma.sync) and
sm_90a (wgmma) assembled, on the GPU against torch and the simulator."""
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T


def b_in_registers(M, N, K, form, transpose_B=False, steps=2):
    """C = sum over steps of A @ (2 B) (or A @ (2 B)^T), with B scaled in its fragment;
    form "sr": A in shared memory, "rr": A in a fragment too."""
    b_shape = (N, K) if transpose_B else (K, N)

    @T.prim_func
    def main(A: T.Tensor((M, K * steps), "float16"), B: T.Tensor((b_shape[0] * (
            1 if transpose_B else steps), b_shape[1] * (steps if transpose_B else 1)),
            "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((M, K), "float16")
            b = T.alloc_shared(b_shape, "float16")
            af = T.alloc_fragment((M, K), "float16")
            bf = T.alloc_fragment(b_shape, "float16")
            c = T.alloc_fragment((M, N), "float32")
            T.clear(c)
            for s in T.serial(steps):
                T.copy(A[0, s * K], a)
                if transpose_B:
                    T.copy(B[0, s * K], b)
                else:
                    T.copy(B[s * K, 0], b)
                T.copy(b, bf)
                for i, j in T.Parallel(b_shape[0], b_shape[1]):
                    bf[i, j] = bf[i, j] * 2
                if form == "sr":
                    T.gemm(a, bf, c, transpose_B=transpose_B)
                else:
                    T.copy(a, af)
                    T.gemm(af, bf, c, transpose_B=transpose_B)
            T.copy(c, C)
    return main


def _data(M, N, K, transpose_B, steps=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randint(-3, 4, (M, K * steps), generator=g).half()
    b = torch.randint(-3, 4, (N, K * steps) if transpose_B else (K * steps, N),
                      generator=g).half()
    ref = 2 * a.double() @ (b.double().T if transpose_B else b.double())
    return a, b, ref.float()


CASES = [("sr", False), ("rr", False), ("sr", True), ("rr", True)]


@pytest.mark.parametrize("form, transpose_B", CASES)
def test_b_in_registers_in_simulation(form, transpose_B):
    a, b, ref = _data(64, 64, 32, transpose_B)
    c = tilelang.compile(b_in_registers(64, 64, 32, form, transpose_B), out_idx=[2])(a, b)
    torch.testing.assert_close(c, ref, rtol=0, atol=0)


@pytest.mark.parametrize("arch, instruction", [("sm_80", "mma.sync"), ("sm_90a", "wgmma")])
@pytest.mark.parametrize("form, transpose_B", CASES)
def test_the_ptx_uses_the_tensor_cores_and_assembles(form, transpose_B, arch, instruction,
                                                     ptxas):
    ptx = tilelang.compile(b_in_registers(64, 64, 32, form, transpose_B),
                           target=f"cuda -arch={arch}").get_kernel_source()
    assert instruction in ptx
    ptxas(ptx, arch)


@pytest.mark.gpu
@pytest.mark.parametrize("form, transpose_B", CASES)
def test_b_in_registers_on_the_gpu(form, transpose_B):
    a, b, ref = _data(64, 64, 32, transpose_B, seed=1)
    kernel = tilelang.compile(b_in_registers(64, 64, 32, form, transpose_B), out_idx=[2])
    c = kernel(a.cuda(), b.cuda())
    sim = tilelang.compile(b_in_registers(64, 64, 32, form, transpose_B), out_idx=[2])(a, b)
    torch.testing.assert_close(c.cpu(), ref, rtol=0, atol=0)
    torch.testing.assert_close(c.cpu(), sim, rtol=0, atol=0)


def b_in_registers_cleared_at_run_time(M, N, K, steps=3):
    """B in a fragment and `clear_accum=s == 0` together (found by a review: the two
    rewrites nested their statements, a crash)."""
    @T.prim_func
    def main(A: T.Tensor((M, K * steps), "float16"), B: T.Tensor((K * steps, N), "float16"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((M, K), "float16")
            b = T.alloc_shared((K, N), "float16")
            bf = T.alloc_fragment((K, N), "float16")
            c = T.alloc_fragment((M, N), "float32")
            for s in T.Pipelined(steps, num_stages=2):
                T.copy(A[0, s * K], a)
                T.copy(B[s * K, 0], b)
                T.copy(b, bf)
                T.gemm(a, bf, c, clear_accum=s == 0)
            T.copy(c, C)
    return main


def test_b_in_registers_with_a_run_time_clear(ptxas):
    a, b, ref = _data(64, 64, 32, False, steps=3)
    c = tilelang.compile(b_in_registers_cleared_at_run_time(64, 64, 32), out_idx=[2])(a, b)
    torch.testing.assert_close(c, ref / 2, rtol=0, atol=0)
    for arch in ("sm_80", "sm_90a"):
        ptxas(tilelang.compile(b_in_registers_cleared_at_run_time(64, 64, 32),
                               target=f"cuda -arch={arch}").get_kernel_source(), arch)


@pytest.mark.gpu
def test_b_in_registers_with_a_run_time_clear_on_the_gpu():
    a, b, ref = _data(64, 64, 32, False, steps=3, seed=2)
    c = tilelang.compile(b_in_registers_cleared_at_run_time(64, 64, 32),
                         out_idx=[2])(a.cuda(), b.cuda())
    torch.testing.assert_close(c.cpu(), ref / 2, rtol=0, atol=0)
