"""A kernel's own ``T.set_max_nreg(n, is_inc)`` / ``T.inc_max_nreg(n)`` /
``T.dec_max_nreg(n)`` (hand-written warp specialization): ``setmaxnreg`` on sm_90a with
the kernel launched one block per SM (``.minnctapersm 1``) and not warp-specialized by
the compiler; a no-op in the simulator, which checks that whole warpgroups run it; bad
register counts, partial warpgroups and other targets refused on both."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError
from tilejit.sim.threads import ThreadCodeError


@tilejit.kernel
def roles(A, B, lower: T.constexpr = 40, raise_to: T.constexpr = 232):
    with T.Kernel(1, threads=256):
        tx = T.get_thread_binding()
        if tx < 128:
            T.dec_max_nreg(lower)
            B[tx] = A[tx] * 2.0
        else:
            T.set_max_nreg(raise_to, 1)
            B[tx] = A[tx] + 1.0


def _expected(a):
    return np.where(np.arange(256) < 128, a * 2.0, a + 1.0).astype(np.float32)


def test_the_registers_move_between_warpgroups_on_sm_90a(ptxas):
    a = np.arange(256, dtype=np.float32)
    ptx = roles.compile(a, a.copy(), target="cuda", arch="sm_90a").ptx
    assert "setmaxnreg.dec.sync.aligned.u32 40;" in ptx
    assert "setmaxnreg.inc.sync.aligned.u32 232;" in ptx
    assert ".maxntid 256" in ptx and ".minnctapersm 1" in ptx
    report = ptxas(ptx, "sm_90a")
    assert "setmaxnreg" not in report                   # not ignored by ptxas


def test_simulated_it_changes_no_value():
    a = np.arange(256, dtype=np.float32)
    b = np.zeros(256, np.float32)
    tilejit.kernel(roles.func, target="sim")(a, b)
    np.testing.assert_array_equal(b, _expected(a))


@tilejit.kernel
def half_a_warpgroup(A, B):
    with T.Kernel(1, threads=256):
        tx = T.get_thread_binding()
        if tx < 64:
            T.inc_max_nreg(232)
        B[tx] = A[tx]


@pytest.mark.parametrize("lower, raise_to, message", [
    (20, 232, r"reg_count must be a multiple of 8 in \[24, 256\] known at compile time, "
              r"got 20"),
    (40, 260, r"got 260"), (44, 232, r"got 44")])
def test_bad_register_counts_are_refused_on_both_targets(lower, raise_to, message):
    a = np.zeros(256, np.float32)
    with pytest.raises(CompileError, match=message):
        roles.compile(a, a.copy(), lower=lower, raise_to=raise_to, target="cuda",
                      arch="sm_90a")
    with pytest.raises((CompileError, ValueError), match=message):
        tilejit.kernel(roles.func, target="sim")(a, a.copy(), lower=lower, raise_to=raise_to)


def test_part_of_a_warpgroup_is_reported_in_the_simulator():
    a = np.zeros(256, np.float32)
    with pytest.raises(ThreadCodeError, match="T.set_max_nreg runs in part of a warpgroup"):
        tilejit.kernel(half_a_warpgroup.func, target="sim")(a, a.copy())


def test_another_target_is_refused():
    a = np.zeros(256, np.float32)
    with pytest.raises(CompileError, match="T.dec_max_nreg: setmaxnreg needs sm_90a; the "
                                           "target is sm_80"):
        roles.compile(a, a.copy(), target="cuda", arch="sm_80")


@pytest.mark.gpu
def test_on_the_gpu():
    import torch
    a = torch.arange(256, dtype=torch.float32, device="cuda")
    b = torch.zeros(256, device="cuda")
    roles(a, b)
    np.testing.assert_array_equal(b.cpu().numpy(), _expected(a.cpu().numpy()))


def test_tilejit_compile_for_cuda_checks_it_at_once():
    @T.prim_func
    def main(A: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            if tx < 128:
                T.dec_max_nreg(40)
            A[tx] = 1.0
    with pytest.raises(CompileError, match="setmaxnreg needs sm_90a; the target is sm_80"):
        tilejit.compile(main, target="cuda -arch=sm_80")       # no device needed
    # sm_90 (what a machine without a device compiles for) says how to name sm_90a
    with pytest.raises(CompileError, match=r"the target is sm_90; name the arch \(arch="
                                           r"\"sm_90a\", .*without a CUDA device a compile "
                                           r"is for sm_90"):
        tilejit.compile(main, target="cuda -arch=sm_90")
    assert "setmaxnreg" in tilejit.compile(main, target="cuda -arch=sm_90a").get_kernel_source()


@tilejit.kernel
def annotated_roles(A, B):
    with T.Kernel(1, threads=256):
        tx = T.get_thread_binding()
        if tx >= 128:
            T.annotate_producer_reg_dealloc()
            B[tx] = A[tx] + 1.0
        else:
            T.annotate_consumer_reg_alloc(232)
            B[tx] = A[tx] * 2.0


def test_tilelangs_register_annotations_are_the_same_instructions(ptxas):
    a = np.arange(256, dtype=np.float32)
    ptx = annotated_roles.compile(a, a.copy(), target="cuda", arch="sm_90a").ptx
    assert "setmaxnreg.dec.sync.aligned.u32 24;" in ptx        # its default
    assert "setmaxnreg.inc.sync.aligned.u32 232;" in ptx
    ptxas(ptx, "sm_90a")
    b = np.zeros(256, np.float32)
    tilejit.kernel(annotated_roles.func, target="sim")(a, b)
    np.testing.assert_array_equal(b, np.where(np.arange(256) >= 128, a + 1.0, a * 2.0))


@tilejit.kernel
def one_producer(A, B, raise_to: T.constexpr = 240, lower: T.constexpr = 24,
                 threads: T.constexpr = 512):
    with T.Kernel(1, threads=threads):
        tx = T.get_thread_binding()
        if tx < 128:
            T.annotate_producer_reg_dealloc(lower)
            B[tx] = A[tx]
        else:
            T.annotate_consumer_reg_alloc(raise_to)
            B[tx] = A[tx] + 1.0


@pytest.mark.parametrize("threads, raise_to, lower, fits", [
    (512, 240, 24, 160),        # three consumer warpgroups: 128 a thread at launch
    (512, 168, 24, 160),
    (384, 232, 72, 216),        # TileLang's sparse MLA: 256 · 216 + 128 · 72 = 64,512
])
def test_requests_the_block_cannot_hold_are_refused_on_both_targets(threads, raise_to, lower,
                                                                     fits):
    """More registers asked than the block holds: setmaxnreg.inc waits for ever (a hang on
    the GPU), so it is a compile error, in the simulator too, naming the largest count
    that fits."""
    a = np.zeros(threads, np.float32)
    launch = min(255, 65536 // threads) // 8 * 8
    message = (rf"`T.annotate_consumer_reg_alloc\(raise_to\)` \(raise to {raise_to}\) asks "
               rf"more registers than the block holds: its {threads} threads are launched "
               rf"with {launch} registers each .* would wait for ever .* it can ask at most "
               rf"{fits}\n")
    with pytest.raises(CompileError, match=message) as info:
        one_producer.compile(a, a.copy(), raise_to=raise_to, lower=lower, threads=threads,
                             target="cuda", arch="sm_90a")
    assert str(info.value).endswith("    T.annotate_consumer_reg_alloc(raise_to)")
    with pytest.raises(CompileError, match=message):
        tilejit.kernel(one_producer.func, target="sim")(a, a.copy(), raise_to=raise_to,
                                                        lower=lower, threads=threads)


@pytest.mark.parametrize("threads, raise_to, lower", [(512, 160, 24), (384, 240, 24),
                                                      (384, 216, 72)])
def test_requests_that_fit_compile(threads, raise_to, lower, ptxas):
    a = np.arange(threads, dtype=np.float32)
    ptx = one_producer.compile(a, a.copy(), raise_to=raise_to, lower=lower, threads=threads,
                               target="cuda", arch="sm_90a").ptx
    assert f"setmaxnreg.inc.sync.aligned.u32 {raise_to};" in ptx
    ptxas(ptx, "sm_90a")
    b = np.zeros(threads, np.float32)
    tilejit.kernel(one_producer.func, target="sim")(a, b, raise_to=raise_to, lower=lower,
                                                    threads=threads)
    np.testing.assert_array_equal(b, np.where(np.arange(threads) < 128, a, a + 1.0))


@tilejit.kernel
def unknown_split(A, B, n):
    with T.Kernel(1, threads=512):
        tx = T.get_thread_binding()
        if tx < n:                  # which warps raise is not known before the launch
            T.annotate_consumer_reg_alloc(240)
        B[tx] = A[tx]


def test_requests_under_a_run_time_branch_are_left_unchecked(ptxas):
    a = np.zeros(512, np.float32)
    ptx = unknown_split.compile(a, a.copy(), 512, target="cuda", arch="sm_90a").ptx
    assert "setmaxnreg.inc.sync.aligned.u32 240;" in ptx


@pytest.mark.gpu
@pytest.mark.parametrize("threads, raise_to, lower", [(512, 160, 24), (384, 216, 72)])
def test_requests_that_fit_run_on_the_gpu(threads, raise_to, lower):
    """The largest counts the check lets through do not wait for ever on the GPU."""
    import torch
    a = torch.arange(threads, dtype=torch.float32, device="cuda")
    b = torch.zeros(threads, device="cuda")
    one_producer(a, b, raise_to=raise_to, lower=lower, threads=threads)
    torch.cuda.synchronize()
    ref = a.cpu().numpy()
    np.testing.assert_array_equal(b.cpu().numpy(),
                                  np.where(np.arange(threads) < 128, ref, ref + 1.0))


@tilejit.kernel
def registers_in_turns(A, B):
    """The consumers give registers back before the producer asks for more: the counts
    held at once never pass the block's 64,512 (the peaks summed would)."""
    with T.Kernel(1, threads=384):
        tx = T.get_thread_binding()
        if tx >= 256:
            T.dec_max_nreg(24)
        else:
            T.inc_max_nreg(240)
        B[tx] = A[tx]
        T.sync_threads()
        if tx < 256:
            T.dec_max_nreg(160)
        T.sync_threads()
        if tx >= 256:
            T.inc_max_nreg(160)
        B[tx] = B[tx] + 1.0


def test_registers_passed_on_in_turns_are_accepted(ptxas):
    a = np.arange(384, dtype=np.float32)
    ptx = registers_in_turns.compile(a, a.copy(), target="cuda", arch="sm_90a").ptx
    assert ptx.count("setmaxnreg") == 4
    ptxas(ptx, "sm_90a")


@tilejit.kernel
def role_by_index(A, B, dec_from: T.constexpr = 256):
    """In a kernel with T.ws roles the thread index is the block's (TileLang: ``T.ws(2)`` is
    ``if 256 <= tx < 384``): ``tx >= 256`` is warpgroup 2, whose ``dec`` leaves room for
    the others' 240 (4 × 32 × 24 + 8 × 32 × 240 = 64,512). With ``dec_from=384`` no
    thread gives any back and every warp asks for 240."""
    N, D = A.shape
    with T.Kernel(1, threads=384):
        buf = T.alloc_shared((1, D), A.dtype)
        bars = T.alloc_barrier([128])
        tx = T.get_thread_binding()
        if tx >= dec_from:
            T.dec_max_nreg(24)
        else:
            T.inc_max_nreg(240)
        with T.ws(2):
            T.tma_copy(A[0:1, 0:D], buf, barrier=bars[0])
            T.mbarrier_arrive(bars[0])
        with T.ws(0):
            T.mbarrier_wait_parity(bars[0], 0)
            T.copy(buf, B[0:1, 0:D])


def test_a_warpgroup_role_kernels_thread_index_is_the_blocks():
    a = np.zeros((1, 64), np.float32)
    ptx = role_by_index.compile(a, a.copy(), target="cuda", arch="sm_90a").ptx
    assert "setmaxnreg.dec.sync.aligned.u32 24" in ptx
    with pytest.raises(CompileError, match=r"asks more registers than the block holds: its "
                                           r"384 threads .*\(12 warps at 240\)"):
        role_by_index.compile(a, a.copy(), dec_from=384, target="cuda", arch="sm_90a")


@pytest.mark.gpu
def test_registers_passed_on_in_turns_run_on_the_gpu():
    import torch
    a = torch.arange(384, dtype=torch.float32, device="cuda")
    b = torch.zeros(384, device="cuda")
    registers_in_turns(a, b)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(b.cpu().numpy(), a.cpu().numpy() + 1.0)


@tilejit.kernel
def by_warpgroup(A, B):
    """The warpgroup's number computed from the thread index (a name derived from it):
    the producer (wg 2) lowers, the others raise to 248, more than the block holds."""
    with T.Kernel(1, threads=384):
        tx = T.get_thread_binding()
        wg = tx // 128
        if wg == 2:
            T.dec_max_nreg(24)
        else:
            T.inc_max_nreg(248)
        B[tx] = A[tx]


def test_warps_named_through_a_derived_name_are_checked():
    a = np.zeros(384, np.float32)
    with pytest.raises(CompileError, match=r"\(8 warps at 248, 4 warps at 24\)"):
        by_warpgroup.compile(a, a.copy(), target="cuda", arch="sm_90a")
