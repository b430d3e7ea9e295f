"""A clear right before a gemm into the same tile becomes the gemm's ``clear_accum``
(passes/clear_folding.py): on wgmma the first k step runs with ``scale-d = 0`` and no
instruction zeroes the accumulator registers. Only the adjacent, whole-tile case folds;
the results are the same (simulation here, the device below and the FlashAttention GPU
tests, whose score gemm folds)."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T


@tilejit.kernel
def per_step_products(A, B, Out, Other, fold: T.constexpr = True, zero: T.constexpr = "clear"):
    """Out[k] = A[k] @ B[k]^T for each k, one 64x64 tile per step; C is cleared every step
    (a gemm that kept the last step's C would add it)."""
    steps = A.shape[0]
    with T.Kernel(1, threads=128) as bx:
        A_s = T.alloc_shared([64, 64], A.dtype)
        B_s = T.alloc_shared([64, 64], A.dtype)
        C = T.alloc_fragment([64, 64], T.float32)
        D = T.alloc_fragment([64, 64], T.float32)
        for k in T.serial(steps):
            T.copy(A[k, :, :], A_s)
            T.copy(B[k, :, :], B_s)
            if zero == "clear":
                T.clear(C)
            else:
                T.fill(C, 0)
            if not fold:
                T.fill(D, 1)            # a statement between: the clear stays a clear
            T.gemm(A_s, B_s, C, transpose_B=True)
            T.copy(C, Out[k, :, :])
        if not fold:
            T.copy(D, Other[:, :])


def _inputs(steps=3, lib=np):
    rng = np.random.default_rng(5)
    a, b = (rng.standard_normal((steps, 64, 64)).astype(np.float16) for _ in range(2))
    return a, b, np.zeros((steps, 64, 64), np.float32), np.zeros((64, 64), np.float32)


def _reference(a, b):
    return np.einsum("kij,klj->kil", a.astype(np.float64), b.astype(np.float64))


def _moves_before_fence(ptx):
    """The moves in the run of moves (and empty asm) right before the first wgmma.fence:
    what defines the accumulator registers the gemm reads."""
    lines = ptx[:ptx.index("wgmma.fence")].splitlines()[:-1]
    count = 0
    for line in reversed(lines):
        line = line.strip()
        if line.startswith("mov."):
            count += 1
        elif not line.startswith("//"):
            break
    return count


def _program(tmp_path, monkeypatch, **constexprs):
    monkeypatch.setenv("TILEJIT_DUMP_IR", str(tmp_path))
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    compiled = per_step_products.compile(*_inputs(), target="cuda", arch="sm_90a",
                                         **constexprs)
    (directory,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    (after,) = [p for p in directory.iterdir() if p.name.endswith("fold_clears_into_gemms.py")]
    return compiled.ptx, after.read_text()


@pytest.mark.parametrize("zero", ["clear", "fill"])
def test_an_adjacent_clear_folds_into_the_gemm(zero, tmp_path, monkeypatch, ptxas):
    ptx, program = _program(tmp_path, monkeypatch, zero=zero)
    assert "T.clear(" not in program and "T.fill(" not in program
    # the first k step has scale-d = 0 and the accumulator registers are outputs only:
    # no zeroing moves of the 32 registers a thread holds of the 64x64 tile
    assert _moves_before_fence(ptx) == 0
    ptxas(ptx, "sm_90a")


def test_a_statement_between_keeps_the_clear(tmp_path, monkeypatch, ptxas):
    ptx, program = _program(tmp_path, monkeypatch, fold=False)
    assert "T.clear(" in program
    assert _moves_before_fence(ptx) >= 32       # the zeros, into C's 32 registers
    ptxas(ptx, "sm_90a")


@pytest.mark.parametrize("fold", [True, False])
def test_the_results_in_simulation(fold):
    a, b, out, other = _inputs()
    per_step_products(a, b, out, other, fold=fold)
    np.testing.assert_allclose(out, _reference(a, b), rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("fold", [True, False])
def test_on_the_gpu(fold):
    a, b, out, other = _inputs(steps=5)
    dev = [torch.from_numpy(x).cuda() for x in (a, b, out, other)]
    per_step_products(*dev, fold=fold)
    got = dev[2].cpu().numpy()
    per_step_products(a, b, out, other, fold=fold)
    np.testing.assert_allclose(got, _reference(a, b), rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(got, out, rtol=1e-5, atol=1e-5)


def run_time_clear(M, N, K, bm=128, bn=128, bk=32, stages=3, every=0):
    """TileLang's examples' `clear_accum=k == 0`: a condition known at run time (the
    first step of the K loop; with `every`, each `every`-th step, so the product is of
    the last steps only). It is `if k == 0: T.clear(C)` before the gemm (it was refused:
    clear_accum must be known at compile time)."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_l = T.alloc_fragment((bm, bn), "float32")
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                if every:
                    T.gemm(A_s, B_s, C_l, False, False, T.GemmWarpPolicy.Square,
                           k % every == 0)
                else:
                    T.gemm(A_s, B_s, C_l, clear_accum=k == 0)
            T.copy(C_l, C[by * bm, bx * bn])
    return main


def _run_time_clear_reference(a, b, every, bk=32):
    a, b = a.double(), b.double()
    if every:
        last = (a.shape[1] // bk - 1) // every * every * bk      # the last clear's step
        a, b = a[:, last:], b[last:, :]
    return (a @ b).float()


@pytest.mark.parametrize("every", [0, 3])
def test_a_clear_accum_known_at_run_time(every, ptxas):
    a = torch.randint(-3, 4, (256, 256)).half()
    b = torch.randint(-3, 4, (256, 128)).half()
    c = tilejit.compile(run_time_clear(256, 128, 256, every=every), out_idx=[2])(a, b)
    torch.testing.assert_close(c, _run_time_clear_reference(a, b, every), rtol=0, atol=0)
    for arch in ("sm_80", "sm_90a"):
        ptxas(tilejit.compile(run_time_clear(256, 128, 256, every=every), out_idx=[2],
                              target=f"cuda -arch={arch}").get_kernel_source(), arch)


@pytest.mark.gpu
@pytest.mark.parametrize("every", [0, 3])
def test_a_clear_accum_known_at_run_time_on_the_gpu(every):
    a = torch.randint(-3, 4, (256, 256)).half()
    b = torch.randint(-3, 4, (256, 128)).half()
    c = tilejit.compile(run_time_clear(256, 128, 256, every=every), out_idx=[2])(a.cuda(),
                                                                                 b.cuda())
    torch.testing.assert_close(c.cpu(), _run_time_clear_reference(a, b, every), rtol=0,
                               atol=0)
