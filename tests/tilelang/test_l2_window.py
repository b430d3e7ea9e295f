"""TileLang's ``T.annotate_l2_hit_ratio({B: r})``: each GPU launch sets an L2 access
policy window over B (``cuLaunchKernelEx`` with the window attribute; the context's
persisting set-aside raised towards B's bytes); a hint, so the results are the
simulator's. Misuse is an error at its line when the kernel is defined."""
import numpy as np
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T


@tilelang.jit(out_idx=[-1])
def add_with_l2(M, N, block_size=256, ratio=0.8, dtype=T.float32):
    @T.prim_func
    def kernel(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype),
               C: T.Tensor((M, N), dtype)):
        with T.Kernel(M * N // block_size, threads=block_size) as bx:
            T.annotate_l2_hit_ratio({B: ratio})
            for i in T.serial(block_size):
                idx = bx * block_size + i
                C[idx // N, idx % N] = A[idx // N, idx % N] + B[idx // N, idx % N]
    return kernel


def test_the_hint_changes_no_result(ptxas):
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    kernel = add_with_l2(64, 64)
    torch.testing.assert_close(kernel(a, b), a + b)
    ptx = kernel.get_kernel_source()
    ptxas(ptx, ptx.split(".target ")[1].split()[0])
    assert kernel.kernel.source.l2_window == ("B", 0.8)


def _source(body):
    return ("import tilejit, tilejit.language as T\n"
            "@tilejit.kernel\n"
            "def k(A, B, n: T.constexpr = 2):\n"
            "    with T.Kernel(1, threads=32) as bx:\n"
            f"        {body}\n"
            "        A[0] = B[0]\n")


@pytest.mark.parametrize("body, message", [
    ("T.annotate_l2_hit_ratio({A: 0.5, B: 0.5})", "a dict of one tensor parameter"),
    ("T.annotate_l2_hit_ratio({n: 0.5})", "expected a tensor parameter of the kernel"),
    ("T.annotate_l2_hit_ratio({B: 1.5})", r"a number in \(0, 1\].*= 1.5"),
    ("if bx == 0:\n            T.annotate_l2_hit_ratio({B: 0.5})", "not under an `if`"),
])
def test_misuse_is_an_error_at_its_line(body, message, tmp_path):
    path = tmp_path / "bad.py"
    path.write_text(_source(body))
    with pytest.raises(tilelang.CompileError, match=message) as e:
        exec(compile(path.read_text(), str(path), "exec"), {})
    assert e.value.lineno >= 5


@pytest.mark.gpu
def test_the_window_on_the_gpu():
    from cuda.bindings import driver
    a, b = torch.randn(1024, 1024, device="cuda"), torch.randn(1024, 1024, device="cuda")
    kernel = add_with_l2(1024, 1024)
    for _ in range(3):          # the window's launch each time (no fast path around it)
        c = kernel(a, b)
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a + b)
    sim = add_with_l2(64, 64)(a[:64, :64].cpu(), b[:64, :64].cpu())
    torch.testing.assert_close(add_with_l2(64, 64)(a[:64, :64].contiguous(),
                                                   b[:64, :64].contiguous()).cpu(), sim)
    err, limit = driver.cuCtxGetLimit(driver.CUlimit.CU_LIMIT_PERSISTING_L2_CACHE_SIZE)
    assert not err and limit > 0       # the set-aside raised for B's 4 MiB (capped)
    assert np.isfinite(c.cpu().numpy()).all()
