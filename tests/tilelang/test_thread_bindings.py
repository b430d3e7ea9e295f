"""Per-thread code as TileLang's users write it: ``T.get_thread_binding(dim)``, the
``T.thread_binding`` expression and loop, ``T.get_thread_extent`` and the block
bindings, inside ``with T.Kernel(...)`` with ``threads=`` a number or ``(x, y)``.

In the simulator such a kernel's block runs lane-wise, one lane per thread
(``tilejit/sim/threads.py``); these programs (TileLang's GEMV examples among them) are
checked against torch there, their PTX assembled by ptxas for sm_80 and sm_90a, and what
the simulator cannot run lane-wise is a clear ``ThreadCodeError``. The ``gpu`` twins run
them on the device."""
import numpy as np
import pytest

import tilejit
import tilejit as tilelang
import tilejit.language as T
from tilejit.sim.threads import ThreadCodeError

torch = pytest.importorskip("torch")


# -- TileLang's GEMV examples, imports swapped --------------------------------------------
@tilelang.jit
def naive_gemv(A, B, BLOCK_N: int, BLOCK_K: int, dtype: T.dtype = T.float16,
               accum_dtype: T.dtype = T.float):
    N, K = T.const("N, K")
    A: T.Tensor((K,), dtype)
    B: T.Tensor((N, K), dtype)
    C = T.empty((N,), dtype)

    with T.Kernel(T.ceildiv(N, BLOCK_N)) as bn:
        tn = T.get_thread_binding(0)  # tn = threadIdx.x
        A_shared = T.alloc_shared((BLOCK_K,), dtype)
        B_shared = T.alloc_shared((BLOCK_N, BLOCK_K), dtype)
        C_reg = T.alloc_local((1,), accum_dtype)
        T.clear(C_reg)
        for bk in T.serial(T.ceildiv(K, BLOCK_K)):
            for tk in T.serial(BLOCK_K):
                A_shared[tk] = A[bk * BLOCK_K + tk]
                B_shared[tn, tk] = B[bn * BLOCK_N + tn, bk * BLOCK_K + tk]
            for tk in T.serial(BLOCK_K):
                C_reg[0] += A_shared[tk].astype(accum_dtype) * B_shared[tn, tk].astype(accum_dtype)
        C[bn * BLOCK_N + tn] = C_reg[0]
    return C


@tilelang.jit
def splitk_gemv(A, B, BLOCK_N: int, BLOCK_K: int, reduce_threads: int,
                dtype: T.dtype = T.float16, accum_dtype: T.dtype = T.float):
    N, K = T.const("N, K")
    TILE_K = T.ceildiv(BLOCK_K, reduce_threads)
    A: T.Tensor((K,), dtype)
    B: T.Tensor((N, K), dtype)
    C = T.empty((N,), dtype)

    with T.Kernel(T.ceildiv(N, BLOCK_N), threads=(BLOCK_N, reduce_threads)) as bn:
        tn = T.get_thread_binding(0)
        tk = T.get_thread_binding(1)
        A_local = T.alloc_local((TILE_K,), dtype)
        B_local = T.alloc_local((TILE_K,), dtype)
        C_shared = T.alloc_shared((BLOCK_N,), accum_dtype)
        C_accum = T.alloc_local((1,), accum_dtype)
        if tk == 0:
            C_shared[tn] = 0
        T.clear(C_accum)
        for bk in T.serial(T.ceildiv(K, BLOCK_K)):
            for k in T.serial(TILE_K):
                A_local[k] = A[bk * BLOCK_K + tk * TILE_K + k]
                B_local[k] = B[bn * BLOCK_N + tn, bk * BLOCK_K + tk * TILE_K + k]
            for k in T.serial(TILE_K):
                C_accum[0] += A_local[k].astype(accum_dtype) * B_local[k].astype(accum_dtype)
        T.atomic_add(C_shared[tn], C_accum[0])
        C[bn * BLOCK_N + tn] = C_shared[tn]
    return C


def _gemv_inputs(n, k, device="cpu", seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(k, generator=g).half().to(device)
    b = torch.randn(n, k, generator=g).half().to(device)
    return a, b, (b.double() @ a.double())


def _close(c, ref):
    torch.testing.assert_close(c.double().cpu(), ref.cpu(), rtol=1e-2, atol=2e-2)


@pytest.mark.parametrize("n, k", [(256, 256), (128, 384)])
def test_naive_gemv(n, k):
    a, b, ref = _gemv_inputs(n, k)
    _close(naive_gemv(a, b, 128, 128), ref)


@pytest.mark.parametrize("block_n, block_k, reduce_threads", [(32, 32, 4), (64, 64, 2)])
def test_splitk_gemv_on_a_two_dimensional_block(block_n, block_k, reduce_threads):
    a, b, ref = _gemv_inputs(256, 512, seed=1)
    _close(splitk_gemv(a, b, block_n, block_k, reduce_threads), ref)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_gemv_kernels_assemble(arch, ptxas):
    a, b, _ = _gemv_inputs(256, 512)
    for ptx in (naive_gemv.compile(a, b, BLOCK_N=128, BLOCK_K=128, arch=arch),
                splitk_gemv.compile(a, b, BLOCK_N=32, BLOCK_K=32, reduce_threads=4,
                                    arch=arch)):
        source = ptx.get_kernel_source()
        assert "%tid.x" in source
        ptxas(source, arch)


# -- the bindings one by one ----------------------------------------------------------------
@tilejit.kernel
def thread_grid(Out, tx: T.constexpr = 8, ty: T.constexpr = 4):
    """Every thread writes its (x, y, z) index, the extents and its block's index."""
    with T.Kernel(3, threads=(tx, ty, 2)) as bx:
        x, y, z = T.get_thread_bindings()
        flat = (z * T.get_thread_extent(1) + y) * T.get_thread_extent(0) + x
        Out[T.get_block_binding(0), flat, 0] = x
        Out[T.get_block_binding(), flat, 1] = y
        Out[bx, flat, 2] = T.get_thread_binding(2)
        Out[bx, flat, 3] = T.get_thread_extent(0) * 100 + T.get_thread_extent(1) * 10 + \
            T.get_thread_extent(2)
        Out[bx, flat, 4] = T.get_block_extent(0)


def test_thread_and_block_bindings():
    out = np.full((3, 64, 5), -1, np.int32)
    thread_grid(out)
    t = np.arange(64)
    for b in range(3):
        np.testing.assert_array_equal(out[b, :, 0], t % 8)
        np.testing.assert_array_equal(out[b, :, 1], t // 8 % 4)
        np.testing.assert_array_equal(out[b, :, 2], t // 32)
        assert (out[b, :, 3] == 842).all() and (out[b, :, 4] == 3).all()


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_thread_and_block_bindings_assemble(arch, ptxas):
    out = np.zeros((3, 64, 5), np.int32)
    ptxas(thread_grid.compile(out, target="cuda", arch=arch).ptx, arch)


@tilejit.kernel
def binding_forms(A, Out, n, threads: T.constexpr = 128):
    """TileLang's T.thread_binding as an expression and as a loop, and a branch on the
    thread index around element stores."""
    with T.Kernel(T.ceildiv(n, threads), threads=threads) as bx:
        tx = T.thread_binding(0, threads, thread="threadIdx.x")
        i = bx * threads + tx
        if i < n:
            Out[i, 0] = A[i] + 1.0
        for t in T.thread_binding(0, 32, thread="threadIdx.x"):   # the first warp only
            if bx * threads + t < n:
                Out[bx * threads + t, 1] = A[bx * threads + t] * 2.0
        if T.get_thread_binding() >= 32:
            if i < n:
                Out[i, 1] = -A[i]
        else:
            Out[tx, 2] = 7.0        # rows 0 … 31, by the first warp of every block


def test_thread_binding_expression_and_loop():
    n = 300
    a = np.arange(n, dtype=np.float32)
    out = np.zeros((n, 3), np.float32)
    binding_forms(a, out, n)
    np.testing.assert_array_equal(out[:, 0], a + 1)
    lane = np.arange(n) % 128
    np.testing.assert_array_equal(out[:, 1], np.where(lane < 32, a * 2, -a))
    np.testing.assert_array_equal(out[:128, 2], np.where(np.arange(128) >= 32, 0, 7))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_thread_binding_forms_assemble(arch, ptxas):
    a = np.zeros(300, np.float32)
    out = np.zeros((300, 3), np.float32)
    ptxas(binding_forms.compile(a, out, 300, target="cuda", arch=arch).ptx, arch)


@tilejit.kernel
def warp_sums(X, Out, block: T.constexpr = 128):
    """Tile operations and per-thread code in one kernel: a tile copied to shared memory
    by the block, then each thread sums its own row of it (a per-thread accumulator and
    a T.alloc_var), and thread 0 counts the rows with an atomic."""
    M, N = X.shape
    with T.Kernel(T.ceildiv(M, block), threads=block) as bx:
        tx = T.get_thread_binding()
        S = T.alloc_shared((block, 16), T.float32)
        acc = T.alloc_local((1,), T.float32)
        T.copy(X[bx * block, 0], S)
        T.clear(acc)
        count = T.alloc_var(T.int32)
        for j in T.serial(16):
            acc[0] += S[tx, j]
            if S[tx, j] > 0:
                count += 1
        if bx * block + tx < M:
            Out[bx * block + tx, 0] = acc[0]
            Out[bx * block + tx, 1] = count
            T.atomic_add(Out[M, 0], 1.0)       # every thread adds: TileLang's meaning


def test_tile_operations_and_per_thread_code():
    x = np.random.default_rng(3).standard_normal((200, 16)).astype(np.float32)
    out = np.zeros((201, 2), np.float32)
    warp_sums(x, out)
    np.testing.assert_allclose(out[:200, 0], x.sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(out[:200, 1], (x > 0).sum(1))
    assert out[200, 0] == 200


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_tile_operations_and_per_thread_code_assemble(arch, ptxas):
    x = np.zeros((200, 16), np.float32)
    out = np.zeros((201, 2), np.float32)
    ptx = warp_sums.compile(x, out, target="cuda", arch=arch).ptx
    assert "atom.global.add.f32" in ptx or "red.global.add.f32" in ptx
    ptxas(ptx, arch)


# -- what the simulator cannot run lane-wise ----------------------------------------------------
@tilejit.kernel
def copy_in_a_branch(X, Out):
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((128,), T.float32)
        if T.get_thread_binding() % 2 == 0:       # not a range of threads
            T.copy(X[0:128], S)
        T.copy(S, Out[0:128])


@tilejit.kernel
def thread_dependent_trip_count(X, Out):
    with T.Kernel(1, threads=128) as bx:
        tx = T.get_thread_binding()
        acc = T.alloc_var(T.float32)
        for k in T.serial(tx):
            acc += X[k]
        Out[tx] = acc


@tilejit.kernel
def thread_region_into_shared(X, Out):
    with T.Kernel(1, threads=32) as bx:
        tx = T.get_thread_binding()
        S = T.alloc_shared((4,), T.float32)
        T.copy(X[tx * 4:tx * 4 + 4], S)           # each thread its own region: one tile
        Out[tx] = S[0]


def test_a_thread_dependent_trip_count_runs_lane_wise():
    """(each thread its own trips, the longest thread's iterations masked: it was refused
    as "a loop bound differs between the block's threads")"""
    x = np.arange(128, dtype=np.float32)
    out = np.zeros(128, np.float32)
    thread_dependent_trip_count(x, out)
    np.testing.assert_array_equal(out, np.concatenate([[0], np.cumsum(x)[:-1]]))


@pytest.mark.parametrize("kernel, match", [
    (thread_region_into_shared, "a tile operation's region start differs"),
])
def test_what_the_simulator_cannot_run_lane_wise(kernel, match):
    # (a T.copy under `if T.get_thread_binding() < 32`, a range, is done by those
    # threads: tests/passes/test_thread_ranges.py)
    x = np.ones(128, np.float32)
    out = np.zeros(128, np.float32)
    with pytest.raises(ThreadCodeError, match=match):
        kernel(x, out)


# -- a thread's own copies: T.copy to or from its T.alloc_local tile -------------------------
@T.prim_func
def own_copies(X: T.Tensor((4, 64), "float32"), Y: T.Tensor((4, 64), "float32"),
               First: T.Tensor((32,), "float32")):
    # TileLang's 2:4 compressor's form: each thread copies its own slice of a row into
    # its local tile (bounds from its thread index), works on it, and copies it back
    with T.Kernel(1, threads=(4, 8)) as bx:
        tm = T.get_thread_binding(0)
        tn = T.get_thread_binding(1)
        own = T.alloc_local([8], "float32")
        head = T.alloc_local([2], "float32")
        T.copy(X[tm, tn * 8:tn * 8 + 8], own)
        for i in T.serial(8):
            own[i] = own[i] * 2 + tm
        T.copy(own, Y[tm, tn * 8:(tn + 1) * 8])
        T.copy(X[0, 0:2], head)                   # the same region in every thread
        if tn % 2 == 0:                           # only some threads copy
            T.copy(head[0:1], First[tn * 4 + tm:tn * 4 + tm + 1])


def _own_copies_expected(X):
    Y = X * 2 + torch.arange(4, dtype=X.dtype, device=X.device)[:, None]
    first = torch.zeros(32, dtype=X.dtype, device=X.device)
    for tn in range(0, 8, 2):
        first[tn * 4:tn * 4 + 4] = X[0, 0]
    return Y, first


def test_a_threads_own_copies_run_lane_by_lane():
    X = torch.randn(4, 64)
    Y, first = torch.zeros(4, 64), torch.zeros(32)
    tilejit.compile(own_copies, target="sim")(X, Y, first)
    want_y, want_first = _own_copies_expected(X)
    torch.testing.assert_close(Y, want_y)
    torch.testing.assert_close(first, want_first)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_a_threads_own_copies_assemble(arch, ptxas):
    ptxas(tilejit.compile(own_copies, target=f"cuda -arch={arch}").get_kernel_source(), arch)


@pytest.mark.gpu
def test_a_threads_own_copies_on_the_gpu():
    X = torch.randn(4, 64, device="cuda")
    Y, first = torch.zeros(4, 64, device="cuda"), torch.zeros(32, device="cuda")
    tilejit.compile(own_copies, target="cuda")(X, Y, first)
    torch.cuda.synchronize()
    want_y, want_first = _own_copies_expected(X)
    torch.testing.assert_close(Y, want_y)
    torch.testing.assert_close(first, want_first)


def test_a_tile_operation_under_threads_that_are_not_a_range_is_refused():
    x = np.ones(128, np.float32)
    with pytest.raises(tilejit.CompileError, match=r"T.copy inside a branch that depends on "
                       r"the thread index \(`if T.get_thread_binding\(\) % 2 == 0`: "
                       r"threads 64 of them"):
        copy_in_a_branch(x, np.zeros(128, np.float32))


def test_a_uniform_loop_bound_computed_from_the_thread_index_runs():
    @tilejit.kernel
    def k(X, Out):
        with T.Kernel(1, threads=64) as bx:
            tx = T.get_thread_binding()
            acc = T.alloc_var(T.float32)
            for j in T.serial(tx - tx + 4):          # the same in every thread
                acc += X[j]
            Out[tx] = acc
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(64, np.float32)
    k(x, out)
    assert (out == 6).all()


def test_bindings_outside_a_kernel_and_bad_arguments():
    with pytest.raises(RuntimeError, match="only meaningful in the body of a `with T.Kernel"):
        T.get_thread_binding()

    @tilejit.kernel
    def bad(Out):
        with T.Kernel(1, threads=32) as bx:
            Out[0] = T.get_thread_binding(3)
    with pytest.raises(tilejit.CompileError, match="dimension must be 0, 1 or 2"):
        bad(np.zeros(1, np.int32))

    @tilejit.kernel
    def bad_axis(Out):
        with T.Kernel(1, threads=32) as bx:
            Out[0] = T.thread_binding(0, 32, thread="vthread")
    with pytest.raises(tilejit.CompileError, match="threadIdx.x"):
        bad_axis(np.zeros(1, np.int32))

    @tilejit.kernel
    def threads_by_name(Out, threads: T.constexpr = (32, 2)):
        with T.Kernel(1, threads=threads) as bx:
            Out[0] = T.get_thread_binding(1)
    with pytest.raises(tilejit.CompileError, match=r"threads= written as a tuple"):
        threads_by_name(np.zeros(1, np.int32))


# -- on the device -------------------------------------------------------------------------
@pytest.mark.gpu
def test_thread_bindings_on_gpu():
    a, b, ref = _gemv_inputs(4096, 4096, device="cuda")
    _close(naive_gemv(a, b, 128, 128), ref)
    _close(splitk_gemv(a, b, 32, 32, 4), ref)
    out = torch.full((3, 64, 5), -1, dtype=torch.int32, device="cuda")
    thread_grid(out)
    expect = np.full((3, 64, 5), -1, np.int32)
    thread_grid(expect)
    np.testing.assert_array_equal(out.cpu().numpy(), expect)
    n = 1000
    x = torch.arange(n, dtype=torch.float32, device="cuda")
    out = torch.zeros(n, 3, device="cuda")
    binding_forms(x, out, n)
    sim = np.zeros((n, 3), np.float32)
    binding_forms(x.cpu().numpy(), sim, n)
    np.testing.assert_array_equal(out.cpu().numpy(), sim)
    xs = torch.randn(1000, 16, device="cuda")
    out = torch.zeros(1001, 2, device="cuda")
    warp_sums(xs, out)
    torch.testing.assert_close(out[:1000, 0], xs.sum(1), rtol=1e-5, atol=1e-5)
    assert out[1000, 0].item() == 1000


# a review's findings: only copies that touch nothing of the block's are a thread's own
@T.prim_func
def own_tile_into_shared_in_a_branch(X: T.Tensor((512,), "float32"),
                                     Out: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        tx = T.get_thread_binding()
        S = T.alloc_shared((128,), "float32")
        L = T.alloc_local((4,), "float32")
        T.clear(S)
        if tx < 32:
            T.copy(X[tx * 4:tx * 4 + 4], L)
            T.copy(L, S[tx * 4:tx * 4 + 4])     # a block tile: its barrier is everyone's
        Out[tx] = S[tx]


@T.prim_func
def fill_of_shared_from_an_own_value(Out: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        tx = T.get_thread_binding()
        S = T.alloc_shared((128,), "float32")
        L = T.alloc_local((1,), "float32")
        L[0] = 3.0
        T.clear(S)
        if tx < 64:
            T.fill(S, L[0])                     # S is the block's: the range fills it
        Out[tx] = S[tx]


@pytest.mark.parametrize("target", ["sim", "cuda -arch=sm_90a"])
def test_a_copy_between_an_own_tile_and_a_shared_one_in_a_branch_is_refused(target):
    with pytest.raises(tilejit.CompileError, match=r"T.copy inside a branch that depends on "
                                                   r"the thread index \(`if tx < 32`"):
        kernel = tilejit.compile(own_tile_into_shared_in_a_branch, target=target)
        kernel.get_kernel_source() if target != "sim" else kernel(torch.zeros(512),
                                                                  torch.zeros(128))


def test_a_fill_of_a_shared_tile_with_an_own_value_is_done_by_the_range():
    out = torch.zeros(128)
    tilejit.compile(fill_of_shared_from_an_own_value, target="sim")(out)
    torch.testing.assert_close(out, torch.full((128,), 3.0))
    tilejit.compile(fill_of_shared_from_an_own_value,
                    target="cuda -arch=sm_90a").get_kernel_source()


@pytest.mark.gpu
def test_a_fill_of_a_shared_tile_with_an_own_value_on_the_gpu():
    out = torch.zeros(128, device="cuda")
    tilejit.compile(fill_of_shared_from_an_own_value, target="cuda")(out)
    torch.cuda.synchronize()
    torch.testing.assert_close(out.cpu(), torch.full((128,), 3.0))


@T.prim_func
def own_reads_of_shared(Out: T.Tensor((512,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        tx = T.get_thread_binding()
        S = T.alloc_shared((512,), "float32")
        L = T.alloc_local((4,), "float32")
        for i in T.Parallel(512):
            S[i] = i
        T.copy(S[tx * 4:tx * 4 + 4], L)         # each thread reads its own region
        for j in T.serial(4):
            Out[tx * 4 + j] = L[j] * 2


def test_a_threads_own_copy_from_shared_runs_lane_by_lane():
    out = torch.zeros(512)
    tilejit.compile(own_reads_of_shared, target="sim")(out)
    torch.testing.assert_close(out, torch.arange(512.0) * 2)
    tilejit.compile(own_reads_of_shared, target="cuda -arch=sm_90a").get_kernel_source()


def offsets_by_binding(nthreads):
    """``threads=threads``, a number of the program's: the block is (n, 1, 1), so the
    y and z thread indices are 0, as TileLang takes it (a debugger's examples)."""
    threads = nthreads

    @T.prim_func
    def main(X: T.Tensor((nthreads,), "int32"), Y: T.Tensor((nthreads,), "int32")):
        with T.Kernel(1, threads=threads):
            tx = T.get_thread_binding(0) + T.get_thread_binding(1) * 16 + \
                T.get_thread_binding(2) * 7
            Y[tx] = X[tx] + 1
    return main


def test_threads_by_a_name_of_a_number_has_y_and_z_zero(ptxas):
    x = torch.arange(64, dtype=torch.int32)
    y = tilejit.compile(offsets_by_binding(64), out_idx=[1], target="sim")(x)
    assert torch.equal(y, x + 1)
    for arch in ("sm_80", "sm_90a"):
        ptx = tilejit.compile(offsets_by_binding(64), out_idx=[1],
                              target=f"cuda -arch={arch}").get_kernel_source()
        assert "%tid.y" not in ptx and "%tid.z" not in ptx
        ptxas(ptx, arch)


@pytest.mark.gpu
def test_threads_by_a_name_of_a_number_on_the_gpu():
    x = torch.arange(96, dtype=torch.int32)
    y = tilejit.compile(offsets_by_binding(96), out_idx=[1])(x.cuda())
    sim = tilejit.compile(offsets_by_binding(96), out_idx=[1], target="sim")(x)
    assert torch.equal(y.cpu(), x + 1) and torch.equal(sim, x + 1)
