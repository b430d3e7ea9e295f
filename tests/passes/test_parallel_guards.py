"""The parallel-guard pass: which T.Parallel bodies it versions, and that versioned
kernels compute what the simulator computes."""
import ast
import textwrap

import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.passes.context import PassContext
from tilejit.ir.markers import GROUPS
from tilejit.passes.parallel_guards import version_parallel_guards


def versioned(src: str) -> bool:
    fdef = ast.parse(textwrap.dedent(src)).body[0]
    out = version_parallel_guards(fdef, PassContext({"T": T}))
    return GROUPS in ast.unparse(out)


def test_seed_idiom_is_versioned():
    assert versioned("""
    def k(A, B, C, N, bx):
        for i in T.Parallel(256):
            idx = bx * 256 + i
            if idx < N:
                C[idx] = A[idx] + B[idx]
    """)


def test_2d_conjunction_is_versioned():
    assert versioned("""
    def k(X, Y, M, N, bx, by):
        for i, j in T.Parallel(16, 64):
            r = by * 16 + i
            c = bx * 64 + j
            if r < M and c < N and 0 <= c:
                Y[r, c] = X[r, c]
    """)


@pytest.mark.parametrize("body", [
    # data-dependent guard: the lanes passing it need not be an interval
    "idx = bx * 256 + i\nif A[idx] > 0:\n    C[idx] = 1",
    # not affine in the lane
    "idx = bx * 256 + i\nif idx * idx < N:\n    C[idx] = 1",
    "idx = (bx * 256 + i) % 7\nif idx < N:\n    C[idx] = 1",
    # an else branch, or statements after the if
    "idx = bx * 256 + i\nif idx < N:\n    C[idx] = 1\nelse:\n    C[0] = 2",
    "if i < N:\n    C[i] = 1\nC[0] = 2",
    # != is not an interval
    "if i != N:\n    C[i] = 1",
])
def test_other_bodies_are_left_alone(body):
    assert not versioned(_parallel_body("A, C, N, bx", body))


def _parallel_body(params: str, body: str) -> str:
    """A kernel's source: ``body`` inside ``for i in T.Parallel(256)``."""
    return (f"def k({params}):\n    for i in T.Parallel(256):\n"
            + textwrap.indent(body, " " * 8) + "\n")


def fast_path(src: str, params=("A", "B", "C")) -> str | None:
    """The fast path (the lanes under ``if __tj_full``) the pass gives the kernel's first
    T.Parallel, the tensors ``params`` global; None where it leaves no check."""
    fdef = ast.parse(textwrap.dedent(src)).body[0]
    out = version_parallel_guards(fdef, PassContext({"T": T}, params=dict.fromkeys(params)))
    for n in ast.walk(out):
        if isinstance(n, ast.If) and ast.unparse(n.test) == "__tj_full":
            return ast.unparse(n.body[0])
    return None


def test_guarded_reads_of_an_element_wise_map_are_versioned():
    """Safe memory's reads (``A[i] if 0 <= i < n else 0``) in a map whose write needed no
    guard: the fast path reads plainly; the group's ends check the read's test."""
    fast = fast_path("""
    def k(A, C, n, bx):
        for i in T.Parallel(256):
            r = bx * 256 + i
            C[r] = (A[r + 1] if 0 <= r + 1 < n else __tj_cast(0, 'float16')) * 2
    """)
    assert fast is not None and "C[r] = A[r + 1] * 2" in fast, fast


def test_guarded_reads_under_a_write_guard_are_versioned():
    fast = fast_path("""
    def k(A, C, n, bx):
        for i in T.Parallel(256):
            r = bx * 256 + i
            if 0 <= r < n:
                C[r] = A[r] if 0 <= r < n else 0
    """)
    assert fast is not None and "C[r] = A[r]" in fast and " if " not in fast, fast


@pytest.mark.parametrize("body", [
    # the test's name is assigned again after the read: at the group's ends it would mean
    # another thing
    "r = bx * 256 + i\nx = A[r] if r < n else 0\nr = r + 9\nC[r] = x",
    # a data-dependent test
    "r = bx * 256 + i\nC[r] = A[r] if A[r] > 0 else 0",
    # not an interval in the lane
    "r = bx * 256 + i\nC[r] = A[r] if r % 3 < 1 else 0",
])
def test_other_conditional_reads_keep_their_guards(body):
    assert fast_path(_parallel_body("A, C, n, bx", body)) is None


@tilejit.kernel
def window(A, C, lo, hi, block: T.constexpr = 512):
    N = A.shape[0]
    with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
        for i in T.Parallel(block):
            idx = bx * block + i
            if idx >= lo and idx < hi and idx < N:
                C[idx] = A[idx] * 2.0


def test_versioned_kernel_ptx_has_both_paths():
    a = np.zeros(4096, np.float32)
    ptx = window.compile(a, a.copy(), 3, 4000, target="cuda", arch="sm_90").ptx
    assert "ld.global.nc.v4.b32" in ptx and "ld.global.nc.b32" in ptx


@pytest.mark.parametrize("lo,hi", [(0, 5000), (3, 4001), (1000, 1001), (7, 7)])
def test_window_in_simulation(lo, hi):
    a = np.arange(3001, dtype=np.float32)
    c = np.full_like(a, -1)
    window(a, c, lo, hi)
    ref = np.where((np.arange(3001) >= lo) & (np.arange(3001) < hi), a * 2, -1)
    np.testing.assert_array_equal(c, ref)


@pytest.mark.gpu
@pytest.mark.parametrize("lo,hi", [(0, 5000), (3, 4001), (1000, 1001), (7, 7), (13, 2998)])
def test_window_on_gpu_matches_simulator(lo, hi):
    import torch
    a = torch.arange(3001, dtype=torch.float32, device="cuda")
    c = torch.full_like(a, -1)
    window(a, c, lo, hi)
    torch.cuda.synchronize()
    sim = torch.full((3001,), -1.0)
    window(a.cpu(), sim, lo, hi)
    torch.testing.assert_close(c.cpu(), sim, rtol=0, atol=0)


@tilejit.kernel
def add_tiles(A, B, C, bm: T.constexpr = 64, bn: T.constexpr = 256):
    """An element-wise map with no guard, each thread many groups of 8 halves."""
    M, N = A.shape
    with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
        for i, j in T.Parallel(bm, bn):
            C[by * bm + i, bx * bn + j] = A[by * bm + i, bx * bn + j] + B[by * bm + i, bx * bn + j]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_an_unguarded_element_wise_map_moves_16_bytes(arch, ptxas):
    """Its groups' lanes run straight-line: one 16-byte load of each input and one 16-byte
    store per group (LLVM had kept a rolled loop of 2-byte accesses)."""
    a = np.zeros((128, 512), np.float16)
    ptx = add_tiles.compile(a, a, a, target="cuda", arch=arch).ptx
    ptxas(ptx, arch)
    assert ptx.count("ld.global.nc.v4.b32") == 2 and ptx.count("st.global.v4.b32") == 1
    assert "ld.global.nc.b16" not in ptx


def test_an_unguarded_element_wise_map_in_simulation():
    g = np.random.default_rng(0)
    a, b = (g.standard_normal((128, 512)).astype(np.float16) for _ in range(2))
    c = np.zeros_like(a)
    add_tiles(a, b, c)
    np.testing.assert_array_equal(c, a + b)


@pytest.mark.gpu
def test_an_unguarded_element_wise_map_on_gpu_matches_torch_and_simulator():
    import torch
    a, b = (torch.randn(128, 512, dtype=torch.float16) for _ in range(2))
    c = torch.zeros(128, 512, dtype=torch.float16, device="cuda")
    add_tiles(a.cuda(), b.cuda(), c)
    sim = torch.zeros(128, 512, dtype=torch.float16)
    add_tiles(a, b, sim)
    torch.testing.assert_close(c.cpu(), (a.double() + b.double()).half(), rtol=0, atol=0)
    assert torch.equal(c.cpu(), sim)
