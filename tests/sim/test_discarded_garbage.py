"""A read of an element nothing wrote whose value the kernel throws away runs, as on the
GPU; one whose value reaches an output, an index, a branch or a print stays an
``UninitializedReadError`` (``sim/garbage.py``: the launch runs again from its arguments
with other garbage there, and must end alike). The GPU twins run the passing kernels on
the device beside torch and the simulator."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit.sim import garbage
from tilejit.sim.runtime import UninitializedReadError


@pytest.fixture
def reruns(monkeypatch):
    """How many launches went on to the reruns (the strict run read garbage)."""
    calls = []
    original = garbage.rerun

    def counted(*args):
        calls.append(args[0])
        return original(*args)

    monkeypatch.setattr(garbage, "rerun", counted)
    return calls


@tilejit.kernel
def diagonal_select(A, B, n: T.constexpr = 32):
    """Only the diagonal of S is written, every element read, and the diagonal's kept
    (fla's RWKV6 intra-chunk kernel computes a diagonal value on every lane so)."""
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((n, n), T.float32)
        for i, j in T.Parallel(n, n):
            if i == j:
                S[i, j] = A[i]
        F = T.alloc_fragment((n, n), T.float32)
        for i, j in T.Parallel(n, n):
            d = S[i, j] * 2.0
            F[i, j] = T.if_then_else(i == j, d, 0.0) * 0.5
        T.copy(F, B)


@tilejit.kernel
def partial_rows_gemm(A, B, C, rows: T.constexpr):
    """A tile whose rows past ``rows`` nothing loads, multiplied whole; only the loaded
    rows of the product are stored (a decode kernel's partial head groups)."""
    with T.Kernel(1, threads=128) as bx:
        As = T.alloc_shared((64, 32), T.float16)
        Bs = T.alloc_shared((32, 64), T.float16)
        Cf = T.alloc_fragment((64, 64), T.float32)
        for i, k in T.Parallel(64, 32):
            if i < rows:
                As[i, k] = A[i, k]
        T.copy(B, Bs)
        T.clear(Cf)
        T.gemm(As, Bs, Cf)
        for i, j in T.Parallel(64, 64):
            if i < rows:
                C[i, j] = Cf[i, j]


@tilejit.kernel
def bump_in_place(A, n: T.constexpr = 64):
    """An argument the kernel reads and writes, beside a discarded garbage read: the
    reruns start from the arguments as they were, so A is bumped once."""
    with T.Kernel(1, threads=64) as bx:
        S = T.alloc_shared((n,), T.float32)
        for i in T.Parallel(n):
            s = S[i]
            A[i] = A[i] + 1.0 + T.if_then_else(i < 0, s, 0.0)


@tilejit.kernel
def times_zero(A, B, n: T.constexpr = 64):
    with T.Kernel(1, threads=64) as bx:
        S = T.alloc_shared((n,), T.float32)
        for i in T.Parallel(n):
            if i < n - 1:
                S[i] = A[i]
        for i in T.Parallel(n):
            B[i] = S[i] * 0.0     # NaN * 0 is NaN: the garbage reaches B


@tilejit.kernel
def gather_through_garbage(A, J, B, n: T.constexpr = 64):
    with T.Kernel(1, threads=64) as bx:
        S = T.alloc_shared((n,), T.int32)
        for i in T.Parallel(n):
            if i < n // 2:
                S[i] = J[i]
        for i in T.Parallel(n):
            B[i] = A[S[i]]


@tilejit.kernel
def discard_then_overrun(A, B, n: T.constexpr = 32):
    """A discarded read (diagonal_select's), then a store past the end of B whatever the
    garbage held: the program's own error."""
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((n, n), T.float32)
        for i, j in T.Parallel(n, n):
            if i == j:
                S[i, j] = A[i]
        for i, j in T.Parallel(n, n):
            d = S[i, j] * 2.0
            B[i, j] = T.if_then_else(i == j, d, 0.0)
        for i in T.Parallel(n):
            B[i, n + i] = A[i]


@tilejit.kernel
def branch_on_garbage(A, B, n: T.constexpr = 64):
    with T.Kernel(1, threads=64) as bx:
        S = T.alloc_shared((n,), T.float32)
        for i in T.Parallel(n):
            if i > 0:
                S[i] = A[i]
        for i in T.Parallel(n):
            if S[i] > 0:
                B[i] = 1.0
            else:
                B[i] = 2.0


@tilejit.kernel
def prints_around_a_discarded_read(A, B, n: T.constexpr = 8):
    with T.Kernel(1, threads=32) as bx:
        S = T.alloc_shared((n,), T.float32)
        T.print(A[1], msg="before ")
        for i in T.Parallel(n):
            s = S[i]
            B[i] = T.if_then_else(i < 0, s, A[i])
        T.print(A[2], msg="after ")


def role_handoff(discard: bool):
    """Warpgroup roles (the simulator runs each in a thread of its own): the producer
    writes all of S but its last element; the consumer reads it whole and keeps it or
    not."""
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=256):
            S = T.alloc_shared((64,), "float32")
            bar = T.alloc_barrier([128])
            with T.ws(1):
                for i in T.Parallel(64):
                    if i < 63:
                        S[i] = A[i]
                T.mbarrier_arrive(bar)
            with T.ws(0):
                T.mbarrier_wait_parity(bar, 0)
                for i in T.Parallel(64):
                    s = S[i]
                    B[i] = T.if_then_else(i < 63, s, -1.0) if discard else s
    return main


def test_the_reruns_run_warpgroup_roles_too(reruns):
    a = torch.randn(64)
    b = tilejit.compile(role_handoff(True), out_idx=[1], target="sim")(a)
    assert torch.equal(b[:63], a[:63]) and b[63].item() == -1.0 and len(reruns) == 1
    with pytest.raises(UninitializedReadError, match=r"(?s)S\[63\] is read before it is "
                                                     r"written.*other values to B"):
        tilejit.compile(role_handoff(False), out_idx=[1], target="sim")(a)


def test_a_discarded_arm_of_if_then_else_runs(reruns):
    a = np.arange(1, 33, dtype=np.float32)
    b = np.full((32, 32), 7.0, np.float32)
    diagonal_select(a, b)
    np.testing.assert_array_equal(b, np.diag(a))
    assert len(reruns) == 1 and "S[0, 1] is read before it is written" in str(reruns[0])


def test_rows_of_a_gemm_nobody_stores_may_be_garbage(reruns):
    g = np.random.default_rng(0)
    a = g.standard_normal((64, 32)).astype(np.float16)
    b = g.standard_normal((32, 64)).astype(np.float16)
    c = np.zeros((64, 64), np.float32)
    partial_rows_gemm(a, b, c, rows=40)
    want = a[:40].astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c[:40], want, rtol=1e-3, atol=1e-3)
    assert not c[40:].any()
    assert len(reruns) == 1


def test_the_reruns_start_from_the_arguments_as_they_were(reruns):
    a = np.arange(64, dtype=np.float32)
    bump_in_place(a)
    np.testing.assert_array_equal(a, np.arange(64, dtype=np.float32) + 1)
    assert len(reruns) == 1
    t = torch.arange(64, dtype=torch.float32)
    bump_in_place(t)
    assert t.tolist() == [float(i + 1) for i in range(64)]


def test_garbage_reaching_an_output_is_an_error():
    a = np.arange(64, dtype=np.float32)
    b = np.zeros(64, np.float32)
    with pytest.raises(UninitializedReadError) as info:
        times_zero(a, b)
    msg = str(info.value)
    assert "S[63] is read before it is written (shared tile S" in msg, msg
    assert __file__ in msg and "B[i] = S[i] * 0.0" in msg, msg
    assert "The value matters: run again with other garbage there, the launch wrote " \
           "other values to B." in msg, msg


def test_garbage_used_as_an_index_is_an_error():
    a = np.arange(64, dtype=np.float32)
    j = np.arange(64, dtype=np.int32)[::-1].copy()
    with pytest.raises(UninitializedReadError, match=r"(?s)S\[32\] is read before it is "
                                                     r"written.*The value matters: run "
                                                     r"again with garbage there, the launch "
                                                     r"stopped: IndexError"):
        gather_through_garbage(a, j, np.zeros(64, np.float32))


def test_an_error_every_garbage_run_meets_is_the_programs_own():
    """Three runs with different garbage stop alike: that error, not "the value
    matters", with a note of the read before it."""
    a = np.arange(1, 33, dtype=np.float32)
    with pytest.raises(IndexError) as info:
        discard_then_overrun(a, np.zeros((32, 32), np.float32))
    msg = str(info.value) + "".join(getattr(info.value, "__notes__", []))
    assert "The value matters" not in msg, msg
    assert "read memory nothing wrote: S[0, 1] is read before it is written" in msg, msg
    assert "it stopped so each time: this error is not that value's" in msg, msg


def test_garbage_deciding_a_branch_is_an_error():
    with pytest.raises(UninitializedReadError, match=r"(?s)S\[0\] is read before.*"
                                                     r"other values to B"):
        branch_on_garbage(np.ones(64, np.float32), np.zeros(64, np.float32))


def test_each_print_is_made_once(capfd, reruns):
    a = np.arange(8, dtype=np.float32)
    b = np.zeros(8, np.float32)
    prints_around_a_discarded_read(a, b)
    out = capfd.readouterr().out
    assert out.count("before ") == 1 and out.count("after ") == 1, out
    assert out.index("before ") < out.index("after ")
    np.testing.assert_array_equal(b, a)
    assert len(reruns) == 1


def test_a_launch_reading_no_garbage_runs_once(reruns):
    g = np.random.default_rng(1)
    a = g.standard_normal((64, 32)).astype(np.float16)
    b = g.standard_normal((32, 64)).astype(np.float16)
    c = np.zeros((64, 64), np.float32)
    partial_rows_gemm(a, b, c, rows=64)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-3,
                               atol=1e-3)
    assert reruns == []


def test_fills_differ_in_every_element_kind():
    for storage in (np.float16, np.float32, np.int8, np.int32, np.uint8, np.bool_):
        fills = [garbage.garbage((256,), storage, k) for k in range(garbage.VARIANTS)]
        for x in fills[1:]:
            assert not np.array_equal(fills[0], x, equal_nan=True), storage
        assert not np.array_equal(fills[1], fills[2]), storage


@pytest.mark.gpu
def test_discarded_garbage_on_the_gpu():
    """The same kernels on the device: what the simulator accepted is what the GPU
    computes whatever its memory held."""
    a = torch.arange(1, 33, dtype=torch.float32)
    b = torch.full((32, 32), 7.0, device="cuda")
    diagonal_select(a.cuda(), b)
    sim = torch.full((32, 32), 7.0)
    diagonal_select(a, sim)
    torch.testing.assert_close(b.cpu().double(), torch.diag(a.double()), rtol=0, atol=0)
    torch.testing.assert_close(b.cpu(), sim, rtol=0, atol=0)

    g = torch.Generator().manual_seed(0)
    A = torch.randn(64, 32, generator=g).half()
    B = torch.randn(32, 64, generator=g).half()
    C = torch.zeros(64, 64, device="cuda")
    partial_rows_gemm(A.cuda(), B.cuda(), C, rows=40)
    C_sim = torch.zeros(64, 64)
    partial_rows_gemm(A, B, C_sim, rows=40)
    ref = A[:40].double() @ B.double()
    torch.testing.assert_close(C[:40].cpu().double(), ref, rtol=1e-3, atol=1e-3)
    assert not C[40:].any()
    torch.testing.assert_close(C.cpu(), C_sim, rtol=1e-5, atol=1e-5)

    x = torch.arange(64, dtype=torch.float32, device="cuda")
    bump_in_place(x)
    assert x.cpu().tolist() == [float(i + 1) for i in range(64)]

    a = torch.randn(64)
    b = tilejit.compile(role_handoff(True), out_idx=[1])(a.cuda())
    assert torch.equal(b[:63].cpu(), a[:63]) and b[63].item() == -1.0


# -- a review's findings ------------------------------------------------------------------
def garbage_trip_count(n=32):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32):
            C = T.alloc_shared((1,), "int32")
            acc = T.alloc_fragment((n,), "float32")
            T.clear(acc)
            for _k in T.serial(C[0]):
                for i in T.Parallel(n):
                    acc[i] += A[i]
            T.copy(acc, B)
    return main


def test_a_garbage_trip_count_is_reported_not_run_for_ever():
    """(random integers over the whole int32 range ran a loop a billion times)"""
    with pytest.raises(UninitializedReadError, match=r"(?s)C\[0\] is read before.*The value "
                                                     r"matters"):
        tilejit.compile(garbage_trip_count(), out_idx=[1], target="sim")(torch.ones(32))


def half_written_output(n=64):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=64):
            S = T.alloc_shared((n,), "float32")
            for i in T.Parallel(n):
                s = S[i]
                if i < n // 2:
                    B[i] = T.if_then_else(i < 0, s, A[i])
    return main


def test_an_output_left_partly_unwritten_is_not_the_garbage_reads(reruns):
    """An out_idx output (torch.empty's memory) whose second half the kernel never writes:
    each rerun fills that half with its own garbage, which is not the discarded read's
    doing (the comparison leaves those elements out)."""
    a = torch.randn(64)
    b = tilejit.compile(half_written_output(), out_idx=[1], target="sim")(a)
    assert torch.equal(b[:32], a[:32]) and len(reruns) == 1


def test_arguments_that_need_grad_are_restored(reruns):
    """(the restore copied into a leaf tensor that requires grad: a RuntimeError)"""
    out = torch.zeros(64, requires_grad=True)
    bump_in_place(out)
    assert out.detach().tolist() == [1.0] * 64 and out.requires_grad and len(reruns) == 1


@tilejit.kernel
def branch_on_a_garbage_flag(A, B, n: T.constexpr = 64):
    with T.Kernel(1, threads=64) as bx:
        F = T.alloc_shared((1,), T.bool)
        for i in T.Parallel(n):
            if F[0]:
                B[i] = A[i]
            else:
                B[i] = -A[i]


def test_a_branch_on_an_unwritten_flag_is_an_error():
    """(the three fills gave True for a one-element flag: accepted)"""
    with pytest.raises(UninitializedReadError, match=r"(?s)F\[0\] is read before.*other "
                                                     r"values to B"):
        branch_on_a_garbage_flag(np.ones(64, np.float32), np.zeros(64, np.float32))


def test_a_launch_too_large_to_keep_stays_strict(monkeypatch, reruns):
    monkeypatch.setattr(garbage, "SNAPSHOT_MAX_BYTES", 64)
    a = np.arange(64, dtype=np.float32)
    with pytest.raises(UninitializedReadError, match=r"S\[0\] is read before it is written"):
        bump_in_place(a)
    assert len(reruns) == 1
