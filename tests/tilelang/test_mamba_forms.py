"""Three forms of a Mamba3 MIMO kernel and an FP8 swapped-operand GEMM epilogue:
``T.copy`` of one element into a ``T.alloc_var`` (frontend/scalar_copies.py), ``None``
for a tensor read only under ``if <run-time test> and <False flag>`` (the branch is
settled, frontend/source.static_truth), and a fragment written at the loop's indices
in another order, ``acc_T[j, i] += c[i, j]`` (passes/fragment_transposes.py iterates
the loop in the written fragment's order)."""
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T


@tilelang.jit(out_idx=[-1])
def scale_rows(H=4, P=64):
    @T.prim_func
    def main(X: T.Tensor((H, P), "float32"), D: T.Tensor((H,), "float32"),
             Y: T.Tensor((H, P), "float32")):
        with T.Kernel(H, threads=64) as i_h:
            d_var = T.alloc_var(T.float32)
            T.copy(D[i_h], d_var)
            for p in T.Parallel(P):
                Y[i_h, p] = X[i_h, p] * d_var
            if i_h == 0:
                T.copy(d_var, Y[0, 0])
    return main


@tilelang.jit
def maybe_store(N=256, store_extra=False):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32"),
             Extra: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(N):
                Y[i] = X[i] * 2.0
            for j in T.serial(4):
                if j == 3 and store_extra:
                    for i in T.Parallel(N):
                        Extra[i] = X[i]
    return main


@tilelang.jit(out_idx=[-1])
def gemm_swapped(M=64, N=64, K=32):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"),
             C: T.Tensor((N, M), "float32")):
        with T.Kernel(1, threads=128):
            a_s = T.alloc_shared((M, K), "float16")
            b_s = T.alloc_shared((N, K), "float16")
            c = T.alloc_fragment((M, N), "float32")
            acc_T = T.alloc_fragment((N, M), "float32")
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.clear(acc_T)
            T.gemm(a_s, b_s, c, transpose_B=True, clear_accum=True)
            for i, j in T.Parallel(M, N):
                acc_T[j, i] += c[i, j] * 2
            T.copy(acc_T, C)
    return main


def _gemm_inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(64, 32, generator=g).half(), torch.randn(64, 32, generator=g).half())


def test_one_element_copied_into_and_out_of_a_variable():
    x, d = torch.randn(4, 64), torch.randn(4)
    want = x * d[:, None]
    want[0, 0] = d[0]
    torch.testing.assert_close(scale_rows()(x, d), want)


def test_none_for_a_tensor_only_a_false_and_reads():
    x, y = torch.randn(256), torch.empty(256)
    maybe_store()(x, y, None)
    torch.testing.assert_close(y, x * 2)
    with pytest.raises(TypeError, match="argument 'Extra': expected a tensor, got NoneType"):
        maybe_store(store_extra=True)(x, y, None)


def test_a_fragment_written_transposed_in_its_loop():
    a, b = _gemm_inputs()
    got = gemm_swapped()(a, b)
    torch.testing.assert_close(got.double(), 2 * (a.double() @ b.double().T).T, rtol=1e-3,
                               atol=1e-3)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_assembles(arch, ptxas):
    for kernel in (scale_rows(), maybe_store(), gemm_swapped()):
        ptxas(kernel.get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
def test_on_gpu_against_torch_and_the_simulator():
    x, d = torch.randn(4, 64), torch.randn(4)
    torch.testing.assert_close(scale_rows()(x.cuda(), d.cuda()).cpu(), scale_rows()(x, d))
    y = torch.empty(256, device="cuda")
    maybe_store()(x.reshape(-1).cuda(), y, None)
    torch.testing.assert_close(y.cpu(), x.reshape(-1) * 2)
    a, b = _gemm_inputs(1)
    got = gemm_swapped()(a.cuda(), b.cuda()).cpu()
    torch.testing.assert_close(got.double(), 2 * (a.double() @ b.double().T).T, rtol=1e-3,
                               atol=1e-3)
    torch.testing.assert_close(got, gemm_swapped()(a, b), rtol=1e-4, atol=1e-4)
