"""A fragment a T.Parallel reads at a subset of its indices (a broadcast, ``a[ii]`` in a
loop over (ii, j)) whose layout that read would make conflicts with another derivation
(a column reduction's result tied to it by a later loop): the loop reads it from a
shared copy, a layout conversion the IR dump marks (layout_inference.infer_layouts,
layout_conversion.read_through_shared). A chunked gated-delta-rule kernel's triangular
solve stopped at "needs two different layouts" before."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T


@tilejit.kernel
def forward_step(A, x, y, N: T.constexpr = 16):
    with T.Kernel(1, threads=128):
        a = T.alloc_fragment((N,), "float32")
        prod = T.alloc_fragment((N, N), "float32")
        red = T.alloc_fragment((N,), "float32")
        T.copy(x, a)
        for ii, j in T.Parallel(N, N):
            prod[ii, j] = A[ii, j] * a[ii]
        T.reduce_sum(prod, red, dim=0)
        for j in T.Parallel(N):
            a[j] = a[j] + red[j]
        T.copy(a, y)


def _inputs(n=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, n, generator=g), torch.randn(n, generator=g)


def test_simulated_matches_float64():
    A, x = _inputs()
    y = torch.empty(16)
    forward_step(A, x, y)
    want = x.double() + x.double() @ A.double()
    np.testing.assert_allclose(y.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_compiles_with_a_shared_read_and_assembles(arch, ptxas):
    A, x = _inputs()
    k = forward_step.compile(A, x, torch.empty(16), target="cuda", arch=arch)
    for instruction in ("st.shared", "ld.shared", "bar.sync"):
        assert instruction in k.ptx, instruction
    ptxas(k.ptx, arch)


def test_the_ir_dump_marks_the_conversion(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_DUMP_IR", str(tmp_path))
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    A, x = _inputs()
    tilejit.kernel(forward_step.func).compile(A, x, torch.empty(16), target="cuda",
                                               arch="sm_80")
    (directory,) = tmp_path.iterdir()
    (path,) = [p for p in directory.iterdir() if p.name.endswith("_after_infer_layouts.py")]
    text = path.read_text()
    marker = [line.strip() for line in text.splitlines() if "__tj_convert_layout(" in line]
    assert len(marker) == 1, marker
    assert marker[0].startswith("__tj_convert_layout('a', 'the T.Parallel at line ")
    assert "read from shared memory" in marker[0] and "needs two different layouts" in marker[0]


def test_a_conflict_no_read_can_resolve_stays_an_error():
    """Two fragments a loop writes with the same indices, given conflicting layouts by a
    row and a column reduction: no broadcast read to move, the error as before."""
    @tilejit.kernel
    def both_written(A, y, N: T.constexpr = 16):
        with T.Kernel(1, threads=128):
            p = T.alloc_fragment((N, N), "float32")
            rows = T.alloc_fragment((N,), "float32")
            cols = T.alloc_fragment((N,), "float32")
            T.copy(A, p)
            T.reduce_sum(p, rows, dim=1)
            T.reduce_sum(p, cols, dim=0)
            for j in T.Parallel(N):
                rows[j] = rows[j] + cols[j]
            T.copy(rows, y)
    with pytest.raises(tilejit.CompileError, match="needs two different layouts"):
        both_written.compile(torch.zeros(16, 16), torch.empty(16), target="cuda",
                             arch="sm_90a")


@pytest.mark.gpu
def test_on_gpu_against_float64_and_the_simulator():
    A, x = _inputs(seed=3)
    y = torch.empty(16, device="cuda")
    forward_step(A.cuda(), x.cuda(), y)
    sim = torch.empty(16)
    forward_step(A, x, sim)
    want = x.double() + x.double() @ A.double()
    np.testing.assert_allclose(y.cpu().numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(y.cpu(), sim, rtol=1e-5, atol=1e-5)
