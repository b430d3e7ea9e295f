"""Warp specialization written by hand, as TileLang's FlashMLA, MLA-decode and sparse-MLA
kernels write it: branches on the thread index taken by one warpgroup each
(``frontend/thread_roles.py``: they become ``T.ws`` roles, each with its own
fragments), a producer warpgroup gathering rows with its threads' own ``T.ptx_cp_async``
and ``T.cp_async_barrier_noinc`` (``language/cp_async.py``), consumers running gemms on
a region of one stage of the ring (``KV_s[s, :, :D // 2]``). The thread index the kernel
reads is the block's, inside a role too. Simulation against float64 torch, the sm_90a
PTX assembled by ptxas, GPU twins."""
import re

import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError
from tilejit.sim.runtime import UninitializedReadError


def gather_gemm(M=64, D=64, NI=4, BI=32, S=200, stages=2, producer_first=False):
    """C = A @ KV[Idx]: the producer (threads 256…383) gathers BI rows of KV a step into a
    ring of ``stages`` tiles, 8 threads a row, 8 elements each; consumer 0 (threads 0…127)
    multiplies them into C's left half, consumer 1 (128…255) into its right half."""

    @T.prim_func
    def main(A: T.Tensor((M, NI * BI), T.float16), KV: T.Tensor((S, D), T.float16),
             Idx: T.Tensor((NI * BI,), T.int32), C: T.Tensor((M, D), T.float32)):
        with T.Kernel(1, threads=384) as _:
            A_l = T.alloc_shared((M, BI), T.float16)
            A_r = T.alloc_shared((M, BI), T.float16)
            KV_s = T.alloc_shared((stages, BI, D), T.float16)
            acc_l = T.alloc_fragment((M, D // 2), T.float32)
            acc_r = T.alloc_fragment((M, D // 2), T.float32)
            ready = T.alloc_barrier(arrive_count=[128] * stages)
            free = T.alloc_barrier(arrive_count=[256] * stages)
            row = T.alloc_var(T.int32)
            tx = T.get_thread_binding()
            if producer_first and tx >= 256:
                for i in T.serial(NI):
                    T.barrier_wait(free[i % stages], ((i // stages) & 1) ^ 1)
                    for r in T.serial(BI // 16):
                        row = Idx[i * BI + r * 16 + (tx - 256) // 8]
                        T.ptx_cp_async(
                            T.access_ptr(KV_s[i % stages, r * 16 + (tx - 256) // 8,
                                              (tx - 256) % 8 * 8], "w", 8),
                            T.access_ptr(KV[row, (tx - 256) % 8 * 8], "r", 8), 8)
                    T.cp_async_barrier_noinc(ready[i % stages])
            elif tx < 128:
                T.clear(acc_l)
                for i in T.serial(NI):
                    T.copy(A[:, i * BI:(i + 1) * BI], A_l)
                    T.barrier_wait(ready[i % stages], (i // stages) & 1)
                    T.gemm(A_l, KV_s[i % stages, :, :D // 2], acc_l)
                    T.barrier_arrive(free[i % stages])
                T.copy(acc_l, C[:, :D // 2])
            elif tx >= 128 and tx < 256:
                T.clear(acc_r)
                for i in T.serial(NI):
                    T.copy(A[:, i * BI:(i + 1) * BI], A_r)
                    T.barrier_wait(ready[i % stages], (i // stages) & 1)
                    T.gemm(A_r, KV_s[i % stages, :, D // 2:], acc_r)
                    T.barrier_arrive(free[i % stages])
                T.copy(acc_r, C[:, D // 2:])
            elif tx >= 256:
                for i in T.serial(NI):
                    T.barrier_wait(free[i % stages], ((i // stages) & 1) ^ 1)
                    for r in T.serial(BI // 16):
                        row = Idx[i * BI + r * 16 + (tx - 256) // 8]
                        T.ptx_cp_async(
                            T.access_ptr(KV_s[i % stages, r * 16 + (tx - 256) // 8,
                                              (tx - 256) % 8 * 8], "w", 8),
                            T.access_ptr(KV[row, (tx - 256) % 8 * 8], "r", 8), 8)
                    T.cp_async_barrier_noinc(ready[i % stages])

    return main


def _inputs(device="cpu"):
    g = torch.Generator().manual_seed(0)
    A = torch.randn(64, 128, generator=g).to(torch.float16)
    KV = torch.randn(200, 64, generator=g).to(torch.float16)
    Idx = torch.randint(0, 200, (128,), generator=g, dtype=torch.int32)
    return [t.to(device) for t in (A, KV, Idx)]


def _reference(A, KV, Idx):
    return (A.double() @ KV[Idx.long()].double()).float()


@pytest.mark.parametrize("producer_first", [False, True])
def test_the_roles_gather_and_multiply_in_simulation(producer_first):
    A, KV, Idx = _inputs()
    C = torch.empty(64, 64)
    tilejit.compile(gather_gemm(producer_first=producer_first), target="sim")(A, KV, Idx, C)
    torch.testing.assert_close(C, _reference(A, KV, Idx), rtol=1e-4, atol=1e-4)


def test_the_roles_compile_for_sm_90a(ptxas):
    ptx = tilejit.compile(gather_gemm(), target="cuda -arch=sm_90a").get_kernel_source()
    assert ptx.count("cp.async.cg.shared.global") >= 1
    assert "cp.async.mbarrier.arrive.noinc.shared::cta.b64" in ptx
    assert "mbarrier.try_wait.parity" in ptx
    assert ".maxntid 384" in ptx
    ptxas(ptx, "sm_90a")


@pytest.mark.gpu
@pytest.mark.parametrize("producer_first", [False, True])
def test_the_roles_on_the_gpu_against_torch_and_the_simulator(producer_first):
    A, KV, Idx = _inputs("cuda")
    C = torch.empty(64, 64, device="cuda")
    program = gather_gemm(producer_first=producer_first)
    tilejit.compile(program, target="cuda")(A, KV, Idx, C)
    torch.cuda.synchronize()
    torch.testing.assert_close(C, _reference(A, KV, Idx), rtol=1e-3, atol=1e-3)
    sim = torch.empty(64, 64)
    tilejit.compile(program, target="sim")(A.cpu(), KV.cpu(), Idx.cpu(), sim)
    torch.testing.assert_close(C.cpu(), sim, rtol=1e-3, atol=1e-3)


# -- the thread index inside a T.ws role is the block's ----------------------------------

def role_indices():
    @T.prim_func
    def main(B: T.Tensor((384,), T.int32)):
        with T.Kernel(1, threads=384) as _:
            tx = T.get_thread_binding()
            with T.ws(1):
                B[tx] = tx * 10
            with T.ws(0):
                B[tx] = -tx
            with T.ws(2):
                B[tx] = -tx
    return main


def test_a_roles_thread_index_is_the_blocks():
    b = torch.zeros(384, dtype=torch.int32)
    tilejit.compile(role_indices(), target="sim")(b)
    t = torch.arange(384, dtype=torch.int32)
    torch.testing.assert_close(b, torch.where((t >= 128) & (t < 256), t * 10, -t))


@pytest.mark.gpu
def test_a_roles_thread_index_is_the_blocks_on_the_gpu():
    b = torch.zeros(384, dtype=torch.int32, device="cuda")
    tilejit.compile(role_indices(), target="cuda")(b)
    torch.cuda.synchronize()
    t = torch.arange(384, dtype=torch.int32, device="cuda")
    torch.testing.assert_close(b, torch.where((t >= 128) & (t < 256), t * 10, -t))


# -- a thread's copies through commit groups -----------------------------------------------

def grouped_copy(n=16, predicate_rows=128):
    @T.prim_func
    def main(A: T.Tensor((128, 64), T.float16), B: T.Tensor((128, 64), T.float16)):
        with T.Kernel(1, threads=128) as _:
            S = T.alloc_shared((128, 64), T.float16)
            tx = T.get_thread_binding()
            for c in T.serial(64 // n):
                T.ptx_cp_async(T.access_ptr(S[tx, c * n], "w", n),
                               T.access_ptr(A[tx, c * n], "r", n), n,
                               predicate=tx < predicate_rows)
            T.ptx_commit_group()
            T.ptx_wait_group(0)
            T.sync_threads()
            T.copy(S, B)
    return main


@pytest.mark.parametrize("n", [2, 4, 8])
def test_commit_and_wait_group_in_simulation(n):
    A = torch.randn(128, 64).to(torch.float16)
    B = torch.zeros(128, 64, dtype=torch.float16)
    tilejit.compile(grouped_copy(n), target="sim")(A, B)
    torch.testing.assert_close(B, A, rtol=0, atol=0)


def test_a_false_predicate_writes_zeros():
    A = torch.randn(128, 64).to(torch.float16)
    B = torch.ones(128, 64, dtype=torch.float16)
    tilejit.compile(grouped_copy(8, predicate_rows=100), target="sim")(A, B)
    expected = A.clone()
    expected[100:] = 0
    torch.testing.assert_close(B, expected, rtol=0, atol=0)


def test_commit_and_wait_group_compile(ptxas):
    for arch in ("sm_80", "sm_90a"):
        ptx = tilejit.compile(grouped_copy(8, 100), target=f"cuda -arch={arch}") \
            .get_kernel_source()
        assert "cp.async.cg.shared.global" in ptx          # 16 bytes: L2 only
        assert "cp.async.commit_group;" in ptx
        assert re.search(r"cp\.async\.wait_group\s+0;", ptx)
        ptxas(ptx, arch)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [2, 4, 8])
def test_commit_and_wait_group_on_the_gpu(n):
    A = torch.randn(128, 64, device="cuda").to(torch.float16)
    B = torch.zeros(128, 64, dtype=torch.float16, device="cuda")
    tilejit.compile(grouped_copy(n, predicate_rows=100), target="cuda")(A, B)
    torch.cuda.synchronize()
    expected = A.clone()
    expected[100:] = 0
    torch.testing.assert_close(B, expected, rtol=0, atol=0)


def unwaited(wait=True):
    @T.prim_func
    def main(A: T.Tensor((128, 64), T.float16), B: T.Tensor((128, 64), T.float16)):
        with T.Kernel(1, threads=128) as _:
            S = T.alloc_shared((128, 64), T.float16)
            tx = T.get_thread_binding()
            T.ptx_cp_async(T.access_ptr(S[tx, 0], "w", 8), T.access_ptr(A[tx, 0], "r", 8), 8)
            if wait:
                T.ptx_commit_group()
                T.ptx_wait_group(0)
            T.sync_threads()
            T.copy(S[:, 0:8], B[:, 0:8])
    return main


def test_a_copy_read_before_it_is_waited_for_is_reported():
    A = torch.randn(128, 64).to(torch.float16)
    B = torch.zeros(128, 64, dtype=torch.float16)
    with pytest.raises(UninitializedReadError, match=r"S\[0, 0\] is read before it is "
                                                     r"written"):
        tilejit.compile(unwaited(wait=False), target="sim")(A, B)
    tilejit.compile(unwaited(), target="sim")(A, B)
    torch.testing.assert_close(B[:, :8], A[:, :8], rtol=0, atol=0)


# -- what is refused, and where ------------------------------------------------------------

def bad_copy(n=6, column=0):
    @T.prim_func
    def main(A: T.Tensor((128, 64), T.float16), B: T.Tensor((128, 64), T.float16)):
        with T.Kernel(1, threads=128) as _:
            S = T.alloc_shared((128, 64), T.float16)
            tx = T.get_thread_binding()
            T.ptx_cp_async(T.access_ptr(S[tx, column], "w", n),
                           T.access_ptr(A[tx, column], "r", n), n)
            T.ptx_commit_group()
            T.ptx_wait_group(0)
            T.sync_threads()
            T.copy(S, B)
    return main


def test_a_copy_of_other_than_4_8_or_16_bytes_is_refused_on_both():
    """The simulator compiles for the GPU first: the compiler's check speaks for both."""
    a = torch.zeros(128, 64, dtype=torch.float16)
    for target in ("sim", "cuda -arch=sm_90a"):
        with pytest.raises(CompileError, match=r"6 elements of float16 are 12 bytes; "
                                               r"cp.async copies 4, 8 or 16"):
            kernel = tilejit.compile(bad_copy(6), target=target)
            kernel(a, a.clone()) if target == "sim" else kernel.get_kernel_source()


def test_a_misaligned_or_overrunning_copy_is_reported_in_simulation():
    a = torch.zeros(128, 64, dtype=torch.float16)
    with pytest.raises(ValueError, match=r"at byte 4 of it, not a multiple of the copy's 16"):
        tilejit.compile(bad_copy(8, column=2), target="sim")(a, a.clone())
    with pytest.raises(IndexError, match=r"leave its shape \(128, 64\)"):
        tilejit.compile(bad_copy(8, column=60), target="sim")(a, a.clone())


def stray_access_ptr():
    @T.prim_func
    def main(A: T.Tensor((128, 64), T.float16)):
        with T.Kernel(1, threads=128) as _:
            S = T.alloc_shared((128, 64), T.float16)
            p = T.access_ptr(S[0, 0], "w", 8)  # noqa: F841
    return main


def test_access_ptr_is_an_operand_of_ptx_cp_async_only():
    a = torch.zeros(128, 64, dtype=torch.float16)
    with pytest.raises(CompileError, match=r"T.access_ptr\(A\[i, j\], mode, ...\) is "
                                           r"supported as an operand of T.ptx_cp_async only"):
        tilejit.compile(stray_access_ptr(), target="sim")(a)


def half_warpgroup(split=64):
    @T.prim_func
    def main(A: T.Tensor((64, 64), T.float16), C: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=256) as _:
            S = T.alloc_shared((64, 64), T.float16)
            acc = T.alloc_fragment((64, 64), T.float32)
            tx = T.get_thread_binding()
            T.copy(A, S)
            if tx < split:
                T.clear(acc)
                T.gemm(S, S, acc)
                T.copy(acc, C)
    return main


def shared_fragment():
    """A fragment one branch writes and the code after the chain reads: each role would
    hold its own copy, and role 1's is never written; the kernel keeps its branch (and
    its error)."""
    @T.prim_func
    def main(A: T.Tensor((64, 64), T.float16), C: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=256) as _:
            S = T.alloc_shared((64, 64), T.float16)
            acc = T.alloc_fragment((64, 64), T.float32)
            tx = T.get_thread_binding()
            T.copy(A, S)
            if tx < 128:
                T.clear(acc)
                T.gemm(S, S, acc)
            T.copy(acc, C)
    return main


def test_a_fragment_read_after_the_chain_keeps_the_branch_and_its_error():
    with pytest.raises(CompileError, match=r"inside a branch that depends on the thread index"):
        tilejit.compile(shared_fragment(), target="cuda -arch=sm_90a").get_kernel_source()


def test_a_branch_of_whole_warps_is_a_role_and_one_of_part_of_a_warp_an_error(ptxas):
    """``if tx < 64`` in a block of 256: a role of 64 threads (plan.role_threads 64);
    ``if tx < 48`` splits a warp: the branch keeps its error."""
    eye = torch.eye(64, dtype=torch.float16)
    c = torch.zeros(64, 64)
    tilejit.compile(half_warpgroup(64), target="sim")(eye, c)
    torch.testing.assert_close(c, torch.eye(64))
    for arch in ("sm_80", "sm_90a"):     # roles of named barriers only: no Hopper needed
        ptx = tilejit.compile(half_warpgroup(64), target=f"cuda -arch={arch}")
        ptxas(ptx.get_kernel_source(), arch)
    with pytest.raises(CompileError, match=r"inside a branch that depends on the thread index"):
        tilejit.compile(half_warpgroup(48), target="cuda -arch=sm_90a").get_kernel_source()


# -- roles narrower than a warpgroup (DeepSeek's mHC: a warp, and the other two) ----------

def warp_and_two():
    """Threads 0…31 normalize rows of a 4x4 tile with reductions (fragments of their
    own); threads 32…95 scale a row of 256 (a role of 32: the branch's first warp does
    it); the front end plans the tiles over one warp (``plan.role_threads`` 32)."""
    @T.prim_func
    def main(M: T.Tensor((4, 4), T.float32), X: T.Tensor((4, 256), T.float32),
             P: T.Tensor((4, 4), T.float32), Y: T.Tensor((256,), T.float32)):
        with T.Kernel(1, threads=96) as _:
            w = T.alloc_shared((4,), T.float32)
            T.copy(M[0, :], w)
            if T.get_thread_binding() < 32:
                cm = T.alloc_fragment((4, 4), T.float32)
                total = T.alloc_fragment((4,), T.float32)
                T.copy(M, cm)
                T.reduce_sum(cm, total, dim=1)
                for i, j in T.Parallel(4, 4):
                    P[i, j] = cm[i, j] / total[i]
            else:
                xs = T.alloc_shared((4, 256), T.float32)
                y = T.alloc_fragment((256,), T.float32)
                T.copy(X, xs)
                T.clear(y)
                for r in T.serial(4):
                    for j in T.Parallel(256):
                        y[j] += w[r] * xs[r, j]
                T.copy(y, Y)
    return main


def test_roles_of_a_warp_and_two_in_simulation_and_ptx(ptxas):
    g = torch.Generator().manual_seed(4)
    M = torch.rand(4, 4, generator=g) + 0.5
    X = torch.randn(4, 256, generator=g)
    P, Y = torch.zeros(4, 4), torch.zeros(256)
    tilejit.compile(warp_and_two(), target="sim")(M, X, P, Y)
    torch.testing.assert_close(P, (M.double() / M.double().sum(1, keepdim=True)).float())
    torch.testing.assert_close(Y, (M[0].double() @ X.double()).float(), rtol=1e-5,
                               atol=1e-5)
    for arch in ("sm_80", "sm_90a"):
        ptxas(tilejit.compile(warp_and_two(), target=f"cuda -arch={arch}").get_kernel_source(),
              arch)


@pytest.mark.gpu
def test_roles_of_a_warp_and_two_on_the_gpu():
    g = torch.Generator().manual_seed(4)
    M = (torch.rand(4, 4, generator=g) + 0.5).cuda()
    X = torch.randn(4, 256, generator=g).cuda()
    P, Y = torch.zeros(4, 4, device="cuda"), torch.zeros(256, device="cuda")
    tilejit.compile(warp_and_two(), target="cuda")(M, X, P, Y)
    torch.cuda.synchronize()
    torch.testing.assert_close(P, (M.double() / M.double().sum(1, keepdim=True)).float())
    torch.testing.assert_close(Y, (M[0].double() @ X.double()).float(), rtol=1e-5,
                               atol=1e-5)


def wide_branch_reads_a_derived_index():
    """The else branch (96 threads, wider than the role size 32) reads ``j = tx - 32``:
    run in its first 32 threads only it would leave 64 elements unwritten; per-thread
    code, it is run by each of its three roles, every thread for itself."""
    @T.prim_func
    def main(A: T.Tensor((32, 32), T.float32), O: T.Tensor((32, 32), T.float32),
             P: T.Tensor((96,), T.float32)):
        with T.Kernel(1, threads=128) as _:
            f = T.alloc_fragment((32, 32), T.float32)
            tx = T.get_thread_binding()
            j = tx - 32
            if tx < 32:
                T.copy(A, f)
                T.copy(f, O)
            else:
                P[j] = 1.0
    return main


def test_a_wide_branch_reading_the_thread_index_runs_in_every_role_of_its_threads():
    a = torch.randn(32, 32)
    o, p = torch.zeros(32, 32), torch.zeros(96)
    tilejit.compile(wide_branch_reads_a_derived_index(), target="sim")(a, o, p)
    assert torch.equal(o, a) and torch.equal(p, torch.ones(96))       # all 96 written


def wide_branch_with_a_tile_operation():
    """The else branch (96 threads) copies a shared tile: the block's operation, which
    three roles would each do: it stays a branch, and the fragment its error."""
    @T.prim_func
    def main(A: T.Tensor((32, 32), T.float32), O: T.Tensor((32, 32), T.float32),
             P: T.Tensor((32,), T.float32)):
        with T.Kernel(1, threads=128) as _:
            f = T.alloc_fragment((32, 32), T.float32)
            s = T.alloc_shared((32,), T.float32)
            tx = T.get_thread_binding()
            if tx < 32:
                T.copy(A, f)
                T.copy(f, O)
            else:
                T.fill(s, 1.0)
                P[tx % 32] = s[tx % 32]
    return main


def test_a_wide_branch_with_a_tile_operation_is_not_split_into_roles():
    with pytest.raises(CompileError, match=r"inside a branch that depends on the thread index"):
        tilejit.compile(wide_branch_with_a_tile_operation(),
                        target="cuda -arch=sm_80").get_kernel_source()


def warp_and_the_rest(rows=4, cols=8, first=0):
    """Warp ``first // 32`` does the block's tile work on its fragments (an exp, a row
    sum); the other 96 threads, one branch, each store their own value: roles of 32, the
    wide branch of per-thread code run by each of its three roles (a vLLM DeepSeek mHC
    finalize splits its block so). With the tile work in warp 1 the other threads are
    two ranges apart, 0…31 and 64…127, each run by its own roles."""
    @T.prim_func
    def main(x: T.Tensor((rows, cols), "float32"), rs: T.Tensor((rows,), "float32"),
             z: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            if tx >= first and tx < first + 32:
                e = T.alloc_fragment((rows, cols), "float32")
                s = T.alloc_fragment((rows,), "float32")
                for i, j in T.Parallel(rows, cols):
                    e[i, j] = T.exp(x[i, j])
                T.reduce_sum(e, s, dim=1)
                for i in T.Parallel(rows):
                    rs[i] = s[i]
            else:
                z[tx] = T.cast(tx, "float32") * 2.0
    return main


def _rest_of_the_warps(first):
    want = torch.arange(128, dtype=torch.float32) * 2
    want[first:first + 32] = 0
    return want


@pytest.mark.parametrize("first", [0, 32])
def test_a_warps_tile_work_beside_the_other_threads_own_code(first):
    x = torch.randn(4, 8)
    rs, z = torch.zeros(4), torch.zeros(128)
    tilejit.compile(warp_and_the_rest(first=first), target="sim")(x, rs, z)
    torch.testing.assert_close(rs, x.double().exp().sum(1).float())
    torch.testing.assert_close(z, _rest_of_the_warps(first))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("first", [0, 32])
def test_a_warps_tile_work_assembles(first, arch, ptxas):
    ptxas(tilejit.compile(warp_and_the_rest(first=first)).get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
@pytest.mark.parametrize("first", [0, 32])
def test_a_warps_tile_work_on_the_gpu_against_torch_and_the_simulator(first):
    x = torch.randn(4, 8)
    rs, z = torch.zeros(4, device="cuda"), torch.zeros(128, device="cuda")
    tilejit.compile(warp_and_the_rest(first=first))(x.cuda(), rs, z)
    sim_rs, sim_z = torch.zeros(4), torch.zeros(128)
    tilejit.compile(warp_and_the_rest(first=first), target="sim")(x, sim_rs, sim_z)
    torch.testing.assert_close(z.cpu(), _rest_of_the_warps(first))
    torch.testing.assert_close(rs.cpu(), x.double().exp().sum(1).float())
    torch.testing.assert_close(rs.cpu(), sim_rs)
    assert torch.equal(z.cpu(), sim_z)


def handoff_through_named_barriers():
    """TileLang's issue-2188 form: warp 0 writes a shared slot and arrives at barrier 10
    without waiting, then waits at 11; warp 1 waits at 10, reads the slot, arrives at 11.
    The branches become roles of 32, between which the simulator orders arrivals."""
    @T.prim_func
    def kernel(inp: T.Tensor((1,), T.int32), out: T.Tensor((1,), T.int32)):
        with T.Kernel(1, threads=64) as _:
            tx = T.get_thread_binding()
            slot = T.alloc_shared((1,), T.int32)
            ready_barrier = 10
            empty_barrier = 11
            if tx < 32:
                if tx == 0:
                    slot[0] = inp[0] + 1
                T.named_barrier_arrive(ready_barrier, 64)
                T.sync_threads(empty_barrier, 64)
            else:
                T.sync_threads(ready_barrier, 64)
                if tx == 32:
                    out[0] = slot[0]
                T.named_barrier_arrive(empty_barrier, 64)
    return kernel


def test_a_handoff_through_named_barriers_in_simulation():
    out = tilejit.compile(handoff_through_named_barriers(), out_idx=[1], target="sim")(
        torch.tensor([41], dtype=torch.int32))
    assert out.item() == 42


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_a_handoff_through_named_barriers_assembles(arch, ptxas):
    ptx = tilejit.compile(handoff_through_named_barriers(), out_idx=[1]).get_kernel_source(
        arch=arch)
    assert sum("barrier.arrive" in ln for ln in ptx.splitlines()) == 2
    ptxas(ptx, arch)


@pytest.mark.gpu
def test_a_handoff_through_named_barriers_on_the_gpu():
    out = tilejit.compile(handoff_through_named_barriers(), out_idx=[1])(
        torch.tensor([41], dtype=torch.int32, device="cuda"))
    assert out.item() == 42
