"""TileLang's ``T.cast(value, dtype, round="", sat=True, rbits=None)``: ``round`` "" or
"rn" is the conversion tilejit makes (to nearest even); "rz", "rp", "rm", which TileLang
reserves (its CUDA backend rounds to nearest), round to nearest with a warning at the
kernel's line; ``sat`` (a bool) changes only stochastic rounding's conversions in
TileLang's CUDA backend, so it is taken; stochastic rounding (``round="rs"`` with
``rbits``) is refused by name; bad options are TileLang's ValueErrors, in a kernel a
CompileError at its line. In simulation against torch, in PTX through ptxas, on the GPU
against the simulator."""
import pytest
import torch

import tilejit
import tilejit.language as T
from kernel_files import kernel_module


@tilejit.jit
def rms_scaled(X, W, eps: float = 1e-6):
    M, N = T.const("M N")
    X: T.Tensor[[M, N], T.float16]
    W: T.Tensor[[N], T.float16]
    Y = T.empty([M, N], T.float16)
    with T.Kernel(M, threads=128) as bx:
        row = T.alloc_fragment((N,), T.float32)
        total = T.alloc_fragment((1,), T.float32)
        for j in T.Parallel(N):
            row[j] = T.cast(X[bx, j], "float32", sat=False)
        for j in T.Parallel(N):
            row[j] = row[j] * row[j]
        T.reduce_sum(row, total, dim=0)
        for j in T.Parallel(N):
            Y[bx, j] = T.cast(T.cast(X[bx, j], T.float32, "rn") * T.rsqrt(total[0] / N + eps)
                              * T.cast(W[j], "float32", round="", sat=True),
                              T.float16, sat=False)
    return Y


def _reference(x, w, eps=1e-6):
    x64 = x.double()
    return (x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps) * w.double()).half()


def test_the_options_tilejit_makes_are_taken(ptxas):
    x, w = torch.randn(4, 256).half(), torch.randn(256).half()
    torch.testing.assert_close(rms_scaled(x, w), _reference(x, w), atol=2e-3, rtol=2e-3)
    ptxas(rms_scaled.get_kernel_source(M=4, N=256, arch="sm_90a"), "sm_90a")


@pytest.mark.parametrize("options, message", [
    ("round='rs', rbits=7", r"T.cast\(round='rs', rbits=...\) \(stochastic rounding\) is not "
                            r"supported by tilejit"),
    ("round='rs'", r"rbits is required when round='rs'"),
    ("round='rn', rbits=7", r"rbits is only valid with round='rs'"),
    ("round='up'", r"Invalid round 'up'. Must be one of"),
    ("sat=1", r"Invalid sat 1. Must be a bool"),
    ("flag=True", r"T.cast\(\): unknown or repeated keyword flag="),
])
def test_other_options_are_refused_at_their_line(options, message, tmp_path):
    module = kernel_module(tmp_path, "cast_case", (
        "import tilejit.language as T\n"
        "@T.prim_func\n"
        "def main(A: T.Tensor((64,), 'float32'), B: T.Tensor((64,), 'float16')):\n"
        "    with T.Kernel(1, threads=64):\n"
        "        for i in T.Parallel(64):\n"
        f"            B[i] = T.cast(A[i], 'float16', {options})\n"))
    with pytest.raises(tilejit.CompileError, match=message) as info:
        tilejit.compile(module.main, target="sim")(torch.zeros(64), torch.zeros(64).half())
    assert "line 6" in str(info.value) and "T.cast(A[i], 'float16'" in str(info.value)


def test_outside_a_kernel():
    assert T.cast(1.5, "float16", sat=False) == 1.5
    with pytest.raises(ValueError, match=r"Invalid round 'x'"):
        T.cast(1.5, "float16", round="x")


@pytest.mark.parametrize("mode", ["rz", "rp", "rm"])
def test_a_reserved_mode_rounds_to_nearest_with_a_warning(mode, tmp_path):
    """TileLang reserves them: its CUDA backend rounds to nearest even, as tilejit does."""
    with pytest.warns(UserWarning, match=f"T.cast\\(round='{mode}'\\): TileLang reserves"):
        assert T.cast(1.5, "float16", round=mode) == 1.5
    module = kernel_module(tmp_path, "cast_mode", (
        "import tilejit.language as T\n"
        "@T.prim_func\n"
        "def main(A: T.Tensor((64,), 'float32'), B: T.Tensor((64,), 'float16')):\n"
        "    with T.Kernel(1, threads=64):\n"
        "        for i in T.Parallel(64):\n"
        f"            B[i] = T.cast(A[i], 'float16', round='{mode}')\n"))
    a = torch.randn(64)
    with pytest.warns(UserWarning, match="TileLang reserves") as caught:
        b = tilejit.compile(module.main, out_idx=[1], target="sim")(a)
    assert torch.equal(b, a.half())
    assert any(w.filename.endswith("cast_mode.py") and w.lineno == 6 for w in caught)


@pytest.mark.gpu
def test_the_options_on_the_gpu():
    x, w = torch.randn(4, 256).half(), torch.randn(256).half()
    got = rms_scaled(x.cuda(), w.cuda()).cpu()
    assert torch.equal(got, rms_scaled(x, w))
