"""mbarriers, T.tma_copy and T.ws roles in the simulator (sim/roles.py): producer and
consumer roles run to completion, a wait that can never complete is a DeadlockError
naming the kernel's line (never a hang), TMA data lands when its barrier's phase
completes, misuse names the argument; on the GPU (sm_90a) the same kernels against the
simulator, and an error at the line before Hopper."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError
from tilejit.sim.roles import DeadlockError


def _line(text):
    return next(n for n, src in enumerate(open(__file__), 1) if text in src)


@tilejit.kernel
def ws_copy(A, B, stages: T.constexpr, wrong_parity: T.constexpr,
            early_release: T.constexpr = 0):
    """Role 1 loads rows of A into a ring of shared stages, role 0 doubles them into B;
    with early_release the consumer frees its stage before reading it (a race:
    tests/sim/test_races.py)."""
    N, D = A.shape
    with T.Kernel(1, threads=256) as bx:
        buf = T.alloc_shared((stages, 1, D), A.dtype)
        out = T.alloc_fragment((1, D), A.dtype)
        bars = T.alloc_barrier([128] * (2 * stages))       # full 0..s-1, empty s..2s-1
        for k in T.serial(N):
            with T.ws(1):
                T.mbarrier_wait_parity(bars[k % stages + stages],
                                       ((k // stages) & 1) ^ 1 ^ wrong_parity)  # producer
                T.tma_copy(A[k:k + 1, 0:D], buf[k % stages, :, :], barrier=bars[k % stages])
                T.mbarrier_arrive(bars[k % stages])
            with T.ws(0):
                T.mbarrier_wait_parity(bars[k % stages], (k // stages) & 1)  # consumer
                if early_release:
                    T.mbarrier_arrive(bars[k % stages + stages])
                T.copy(buf[k % stages, :, :], out)
                for i, j in T.Parallel(1, D):
                    out[i, j] = out[i, j] * 2
                T.copy(out, B[k:k + 1, 0:D])
                if not early_release:
                    T.mbarrier_arrive(bars[k % stages + stages])


@pytest.mark.parametrize("stages", [1, 2, 3])
def test_a_producer_and_a_consumer_role_run_to_completion(stages):
    a = np.arange(7 * 16, dtype=np.float32).reshape(7, 16)
    b = np.zeros_like(a)
    ws_copy(a, b, stages, 0)
    np.testing.assert_array_equal(b, 2 * a)


def test_a_wrong_parity_is_a_deadlock_naming_the_line():
    a = np.ones((5, 16), np.float32)
    with pytest.raises(DeadlockError) as info:
        ws_copy(a, np.zeros_like(a), 2, 1)
    message = str(info.value)
    assert "deadlock in ws_copy, block (0, 0, 0)" in message
    assert ("role 0 (threads 0-127) waits for the phase of parity 0 of bars[0] (phase 0: 0 "
            f'of 128 arrivals)\n  File "{__file__}", line {_line("# consumer")}') in message
    assert ("role 1 (threads 128-255) waits for the phase of parity 0 of bars[2] (phase 0: 0 "
            f'of 128 arrivals)\n  File "{__file__}", line {_line("# producer") - 1}') in message


@tilejit.kernel
def single_role(A, B, parity: T.constexpr):
    with T.Kernel(1, threads=128) as bx:
        s = T.alloc_shared((4, 8), A.dtype)
        bar = T.alloc_barrier(128)
        T.tma_copy(A[0:4, 0:8], s, barrier=bar)
        T.mbarrier_arrive(bar)
        T.mbarrier_wait_parity(bar, parity)     # single-role wait
        T.copy(s, B[0:4, 0:8])


def test_without_roles_a_barrier_is_the_whole_blocks():
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    b = np.zeros_like(a)
    single_role(a, b, 0)
    np.testing.assert_array_equal(b, a)
    with pytest.raises(DeadlockError, match=r"waits for the phase of parity 1 of bar \(phase "
                                            r"1: 0 of 128 arrivals\).*no T.ws roles") as info:
        single_role(a, b, 1)
    assert f"line {_line('# single-role wait')}" in str(info.value)


@tilejit.kernel
def read_before_wait(A, B):
    with T.Kernel(1, threads=128) as bx:
        s = T.alloc_shared((4, 8), A.dtype)
        bar = T.alloc_barrier(128)
        T.tma_copy(A[0:4, 0:8], s, barrier=bar)
        T.copy(s, B[0:4, 0:8])                  # read before the phase completes


def test_tma_data_lands_when_the_phase_completes():
    a = np.ones((4, 8), np.float32)
    from tilejit.sim.runtime import UninitializedReadError
    with pytest.raises(UninitializedReadError, match=r"s\[0, 0\] is read before it is written"):
        read_before_wait(a, np.zeros_like(a))


@tilejit.kernel
def over_arrival(A):
    with T.Kernel(1, threads=256) as bx:
        bar = T.alloc_barrier(1)
        with T.ws(0):
            T.mbarrier_arrive(bar)


@tilejit.kernel
def no_barrier(A):
    with T.Kernel(1, threads=128) as bx:
        s = T.alloc_shared((4, 8), A.dtype)
        T.tma_copy(A[0:4, 0:8], s)


@tilejit.kernel
def role_out_of_range(A):
    with T.Kernel(1, threads=256) as bx:
        with T.ws(2):
            A[0, 0] = 1.0


@tilejit.kernel
def roles_need_warpgroups(A):
    with T.Kernel(1, threads=160) as bx:
        with T.ws(0):
            A[0, 0] = 1.0


@tilejit.kernel
def bad_parity(A):
    with T.Kernel(1, threads=128) as bx:
        bar = T.alloc_barrier(128)
        T.mbarrier_wait_parity(bar, 2)


@pytest.mark.parametrize("kernel,error,message", [
    (over_arrival, RuntimeError, r"T.mbarrier_arrive: bar expects 1 arrivals per phase; "
                                 r"warpgroup role 0 \(threads 0-127\) arrive at once"),
    (no_barrier, TypeError, r"T.tma_copy: barrier: a load \(global → shared\) needs the "
                            r"mbarrier its bytes arrive on \(barrier=mbars\[i\]\), got None"),
    (role_out_of_range, ValueError, r"T.ws: expected warpgroup indices in \[0, 2\) .*got 2"),
    (roles_need_warpgroups, ValueError, r"threads a multiple of 128, got threads=160"),
    (bad_parity, ValueError, r"T.mbarrier_wait_parity: parity: expected 0 or 1, got 2"),
])
def test_misuse_names_the_argument(kernel, error, message):
    with pytest.raises(error, match=message):
        kernel(np.zeros((4, 8), np.float32))


def test_the_gpu_lowers_them(ptxas):
    """sm_90a: the roles as branches on the warpgroup, the ring's waits, the producer's
    loads issued by its first thread alone (a role of waits, copies and arrivals), the
    consumer's arrivals once per warp."""
    a = np.zeros((5, 16), np.float32)
    ptx = ws_copy.compile(a, a, 2, 0, target="cuda", arch="sm_90a").ptx
    for must in ("mbarrier.init.shared::cta.b64", "mbarrier.try_wait.parity",
                 "mbarrier.expect_tx", "cp.async.bulk.tensor.2d", "bar.warp.sync"):
        assert must in ptx, must
    ptxas(ptx, "sm_90a")


def test_before_hopper_they_are_an_error_at_the_line():
    a = np.zeros((5, 16), np.float32)
    with pytest.raises(CompileError, match=r"T.alloc_barrier needs Hopper's TMA and mbarrier "
                                           r"waits \(sm_90 or newer\); the target is sm_80") \
            as info:
        ws_copy.compile(a, a, 2, 0, target="cuda", arch="sm_80")
    assert info.value.lineno == _line("bars = T.alloc_barrier([128] * (2 * stages))")
    assert info.value.filename == __file__


@tilejit.kernel
def three_roles(A, B, C):
    """One producer (role 2) feeding two consumers (roles 0 and 1) through a ring of two
    stages; role 1 reads the stage element by element."""
    N, D = A.shape
    with T.Kernel(1, threads=384) as bx:
        buf = T.alloc_shared((2, 1, D), A.dtype)
        bars = T.alloc_barrier([128, 128, 256, 256])   # full 0-1, empty 2-3 (both roles)
        for k in T.serial(N):
            with T.ws(2):
                T.mbarrier_wait_parity(bars[k % 2 + 2], ((k // 2) & 1) ^ 1)
                T.tma_copy(A[k:k + 1, 0:D], buf[k % 2, :, :], barrier=bars[k % 2])
                T.mbarrier_arrive(bars[k % 2])
            with T.ws(0):
                T.mbarrier_wait_parity(bars[k % 2], (k // 2) & 1)
                T.copy(buf[k % 2, :, :], B[k:k + 1, 0:D])
                T.mbarrier_arrive(bars[k % 2 + 2])
            with T.ws(1):
                T.mbarrier_wait_parity(bars[k % 2], (k // 2) & 1)
                for i, j in T.Parallel(1, D):
                    C[k + i, j] = buf[k % 2, i, j] * 3
                T.mbarrier_arrive(bars[k % 2 + 2])


def test_three_roles_in_simulation_and_for_hopper(ptxas):
    a = np.arange(5 * 16, dtype=np.float32).reshape(5, 16)
    b, c = np.zeros_like(a), np.zeros_like(a)
    three_roles(a, b, c)
    np.testing.assert_array_equal(b, a)
    np.testing.assert_array_equal(c, 3 * a)
    ptxas(three_roles.compile(a, b, c, target="cuda", arch="sm_90a").ptx, "sm_90a")


@pytest.mark.gpu
def test_three_roles_on_gpu():
    a = torch.randn(9, 64)
    b, c = torch.zeros(9, 64, device="cuda"), torch.zeros(9, 64, device="cuda")
    three_roles(a.cuda(), b, c)
    assert torch.equal(b.cpu(), a) and torch.equal(c.cpu(), 3 * a)


@pytest.mark.gpu
@pytest.mark.parametrize("stages", [1, 2, 3])
def test_roles_on_gpu_against_the_simulator(stages):
    a = torch.randn(37, 64, dtype=torch.float32)
    b = torch.zeros(37, 64, device="cuda")
    ws_copy(a.cuda(), b, stages, 0)
    b_sim = torch.zeros(37, 64)
    ws_copy(a, b_sim, stages, 0)
    assert torch.equal(b.cpu(), b_sim) and torch.equal(b_sim, 2 * a)


@pytest.mark.gpu
def test_warp_specialized_gemm_on_gpu():
    a = torch.randn(200, 96, dtype=torch.float16)
    b = torch.randn(96, 136, dtype=torch.float16)
    c = torch.zeros(200, 136, device="cuda")
    ws_gemm(a.cuda(), b.cuda(), c, 64)
    torch.testing.assert_close(c.cpu().double(), a.double() @ b.double(), atol=1e-3, rtol=1e-3)
    c_sim = torch.zeros(200, 136)
    ws_gemm(a, b, c_sim, 64)
    torch.testing.assert_close(c.cpu(), c_sim, atol=1e-3, rtol=1e-3)


def test_a_with_block_other_than_t_ws_is_still_refused(tmp_path):
    path = tmp_path / "k.py"
    path.write_text("import tilejit\nimport tilejit.language as T\n\n@tilejit.kernel\n"
                    "def k(A):\n    with T.Kernel(1) as bx:\n        with open('x'):\n"
                    "            A[0] = 1\n")
    import importlib.util
    spec = importlib.util.spec_from_file_location("k_with", path)
    with pytest.raises(CompileError, match=r"a `with` block other than `with T.Kernel\(...\)` "
                                           r"and `with T.ws\(...\)`"):
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


@tilejit.kernel
def ws_gemm(A, B, C, block: T.constexpr):
    """A stage of a multi-buffered shared tile as T.gemm's operands, in roles."""
    M, K = A.shape
    N = B.shape[1]
    with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=256) as (bx, by):
        A_s = T.alloc_shared((2, block, 32), A.dtype)
        B_s = T.alloc_shared((2, 32, block), B.dtype)
        acc = T.alloc_fragment((block, block), T.float32)
        bars = T.alloc_barrier([128] * 4)
        T.clear(acc)
        for k in T.serial(T.ceildiv(K, 32)):
            with T.ws(1):
                T.mbarrier_wait_parity(bars[k % 2 + 2], ((k // 2) & 1) ^ 1)
                T.tma_copy(A[by * block:(by + 1) * block, k * 32:(k + 1) * 32], A_s[k % 2, :, :],
                           barrier=bars[k % 2])
                T.tma_copy(B[k * 32:(k + 1) * 32, bx * block:(bx + 1) * block], B_s[k % 2, :, :],
                           barrier=bars[k % 2])
                T.mbarrier_arrive(bars[k % 2])
            with T.ws(0):
                T.mbarrier_wait_parity(bars[k % 2], (k // 2) & 1)
                T.gemm(A_s[k % 2, :, :], B_s[k % 2, :, :], acc)
                T.mbarrier_arrive(bars[k % 2 + 2])
        with T.ws(0):
            T.copy(acc, C[by * block, bx * block])


def test_a_warp_specialized_gemm_with_ragged_edges():
    a = torch.randn(100, 70, dtype=torch.float16)
    b = torch.randn(70, 90, dtype=torch.float16)
    c = torch.zeros(100, 90, dtype=torch.float32)
    ws_gemm(a, b, c, 32)
    torch.testing.assert_close(c.double(), a.double() @ b.double(), atol=1e-3, rtol=1e-3)


@tilejit.kernel
def ws_cluster_ranks(R):
    with T.ClusterKernel(4, threads=256, cluster_dims=2) as bx:
        with T.ws(1):
            R[bx] = T.block_rank_in_cluster()


def test_a_role_knows_its_blocks_cluster():
    """A role runs on a thread of its own, which takes the launch's cluster (and its safe
    memory access, laid-out tensors, multicasts) from the block's: its rank was 0."""
    r = torch.full((4,), -1, dtype=torch.int32)
    ws_cluster_ranks(r)
    assert r.tolist() == [0, 1, 0, 1]
