"""Atomics: T.atomic_add / atomic_max / atomic_min on global and shared elements and on
global regions, in simulation (against float64/numpy references), in PTX (assembled with
ptxas for sm_80 and sm_90a, `atom.`/`red.` instructions present) and, with ``-m gpu``,
on the device against torch and against a simulator copy of the same kernel."""
import shutil
import subprocess

import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T

PTXAS = shutil.which("ptxas")
ARCHS = ["sm_80", "sm_90a"]


# ----------------------------------------------------------------------------- kernels

@tilejit.kernel
def total(A, Out, block: T.constexpr = 128):
    """Every element of A added into Out[0, 0] (many blocks, one element)."""
    N = A.shape[0]
    with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
        for i in T.Parallel(block):
            if bx * block + i < N:
                T.atomic_add(Out[0, 0], A[bx * block + i])


@tilejit.kernel
def histogram(X, H, block: T.constexpr = 256):
    N = X.shape[0]
    with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
        for i in T.Parallel(block):
            if bx * block + i < N:
                T.atomic_add(H[X[bx * block + i]], 1)


@tilejit.kernel
def extremes(A, Mx, Mn, block: T.constexpr = 128):
    N = A.shape[0]
    with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
        for i in T.Parallel(block):
            if bx * block + i < N:
                T.atomic_max(Mx[0], A[bx * block + i])
                T.atomic_min(Mn[0], A[bx * block + i])


@tilejit.kernel
def tickets(Counter, Out, block: T.constexpr = 128):
    """Each element takes a ticket: the counter's value before its own increment."""
    N = Out.shape[0]
    with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
        for i in T.Parallel(block):
            if bx * block + i < N:
                Out[bx * block + i] = T.atomic_add(Counter[0], 1, return_prev=True)


@tilejit.kernel
def column_sums(A, S, bm: T.constexpr = 32):
    """S[j] += A[i, j] for every row: blocks of rows collide on every column."""
    M, N = A.shape
    with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
        for i, j in T.Parallel(bm, N):
            if bx * bm + i < M:
                T.atomic_add(S[j], A[bx * bm + i, j])


@tilejit.kernel
def add_weak_literal(H, block: T.constexpr = 128):
    """A Python float literal added to a float16/bfloat16 element stays in its dtype."""
    with T.Kernel(4, threads=128) as bx:
        for i in T.Parallel(block):
            T.atomic_add(H[i % 8], 0.5)


@tilejit.kernel
def shared_histogram(X, H, block: T.constexpr = 256, bins: T.constexpr = 16):
    """A per-block histogram in shared memory, copied out: row bx of H."""
    N = X.shape[0]
    with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
        S = T.alloc_shared((bins,), T.int32)
        T.clear(S)
        for i in T.Parallel(block):
            if bx * block + i < N:
                T.atomic_add(S[X[bx * block + i] % bins], 1)
        T.copy(S, H[bx, 0:bins])


@tilejit.kernel
def block_counter(Count, A):
    """Outside a T.Parallel every thread of the block performs the atomic (TileLang runs a
    block's statement in each thread: its atomic tests expect nthreads adds)."""
    N = A.shape[0]
    with T.Kernel(N, threads=128) as bx:
        T.atomic_add(Count[0], A[bx])


@tilejit.kernel
def split_k(A, B, C, bm: T.constexpr = 32, bn: T.constexpr = 32, splits: T.constexpr = 4):
    """C += A[:, part] @ B[part, :]: each split adds its partial tile (region form)."""
    M, K = A.shape
    N = B.shape[1]
    with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), splits, threads=128) as (bx, by, bz):
        F = T.alloc_fragment((bm, bn), T.float32)
        T.clear(F)
        kk = K // splits
        for i, j in T.Parallel(bm, bn):
            for k in T.serial(kk):
                r = by * bm + i
                c = bx * bn + j
                if r < M and c < N:
                    F[i, j] += A[r, bz * kk + k] * B[bz * kk + k, c]
        T.atomic_add(C[by * bm:(by + 1) * bm, bx * bn:(bx + 1) * bn], F)


@tilejit.kernel
def split_k_gemm(A, B, C, bm: T.constexpr = 64, bn: T.constexpr = 64, bk: T.constexpr = 32,
                 splits: T.constexpr = 4):
    """TileLang's split-K GEMM: each split's tensor-core partial tile added at its corner
    (``T.atomic_add(C[by * bm, bx * bn], C_f)``: the region takes the tile's shape)."""
    M, K = A.shape
    N = B.shape[1]
    part = K // splits
    with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), splits, threads=128) as (bx, by, bz):
        A_s = T.alloc_shared((bm, bk), A.dtype)
        B_s = T.alloc_shared((bk, bn), B.dtype)
        C_f = T.alloc_fragment((bm, bn), T.float32)
        T.clear(C_f)
        for k in T.Pipelined(T.ceildiv(part, bk), num_stages=2):
            T.copy(A[by * bm, bz * part + k * bk], A_s)
            T.copy(B[bz * part + k * bk, bx * bn], B_s)
            T.gemm(A_s, B_s, C_f)
        T.atomic_add(C[by * bm, bx * bn], C_f)


@tilejit.kernel
def shared_region_max(A, Out, bm: T.constexpr = 16, bn: T.constexpr = 64):
    """Every block's tile max-combined into Out (region form, a shared value)."""
    M, N = A.shape
    with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
        S = T.alloc_shared((bm, bn), T.float32)
        T.copy(A[bx * bm, 0], S)
        T.atomic_max(Out[0:bm, 0:bn], S)


total_sim = tilejit.kernel(total.func, target="sim")
histogram_sim = tilejit.kernel(histogram.func, target="sim")
extremes_sim = tilejit.kernel(extremes.func, target="sim")
tickets_sim = tilejit.kernel(tickets.func, target="sim")
column_sums_sim = tilejit.kernel(column_sums.func, target="sim")
shared_histogram_sim = tilejit.kernel(shared_histogram.func, target="sim")
split_k_sim = tilejit.kernel(split_k.func, target="sim")
split_k_gemm_sim = tilejit.kernel(split_k_gemm.func, target="sim")
block_counter_sim = tilejit.kernel(block_counter.func, target="sim")


# ----------------------------------------------------------------------------- simulated

def _ints(n, lo, hi, seed=0, dtype=torch.int32):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(lo, hi, (n,), generator=g, dtype=torch.int64).to(dtype)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.float32, torch.float64])
def test_many_blocks_into_one_element_exact(dtype):
    a = _ints(5000, -1000, 1000, dtype=dtype)        # integer-valued: float32 sums exact
    out = torch.zeros(1, 1, dtype=dtype)
    total(a, out)
    assert out.item() == a.to(torch.float64).sum().item()


def test_histogram():
    x = _ints(10_000, 0, 37, seed=1)
    h = torch.zeros(37, dtype=torch.int32)
    histogram(x, h)
    np.testing.assert_array_equal(h.numpy(), np.bincount(x.numpy(), minlength=37))


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.float32, torch.float64])
def test_max_min_with_negative_values(dtype):
    a = _ints(3000, -10_000, -5, seed=2, dtype=dtype)       # all negative
    mx = torch.full((1,), -20_000, dtype=dtype)
    mn = torch.zeros(1, dtype=dtype)
    extremes(a, mx, mn)
    assert mx.item() == a.max().item() and mn.item() == a.min().item()


def test_max_min_unsigned():
    a = torch.from_numpy(np.random.default_rng(3).integers(0, 2**32, 999, dtype=np.uint64)
                         .astype(np.uint32).view(np.int32).copy())
    mx = np.zeros(1, np.uint32)
    mn = np.full(1, 2**32 - 1, np.uint32)
    extremes(a.numpy().view(np.uint32), mx, mn)
    assert mx[0] == a.numpy().view(np.uint32).max() and mn[0] == a.numpy().view(np.uint32).min()


def test_float_max_ignores_nan():
    a = torch.tensor([1.0, float("nan"), -3.0, 7.5, float("nan")])
    mx = torch.full((1,), float("nan"))        # a NaN in memory is replaced
    mn = torch.zeros(1)
    extremes(a, mx, mn)
    assert mx.item() == 7.5 and mn.item() == -3.0


def test_return_prev_gives_every_ticket_once():
    counter = torch.zeros(1, dtype=torch.int32)
    out = torch.full((1000,), -1, dtype=torch.int32)
    tickets(counter, out)
    assert counter.item() == 1000
    np.testing.assert_array_equal(np.sort(out.numpy()), np.arange(1000))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_adds(dtype):
    a = _ints(64 * 48, -4, 5, seed=4, dtype=dtype).reshape(64 * 3, 16)   # small ints: exact
    s = torch.zeros(16, dtype=dtype)
    column_sums(a, s)
    torch.testing.assert_close(s.to(torch.float64), a.to(torch.float64).sum(0), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_weak_literal_stays_in_the_element_dtype(dtype):
    h = torch.zeros(8, dtype=dtype)
    add_weak_literal(h)
    torch.testing.assert_close(h, torch.full((8,), 32.0, dtype=dtype), rtol=0, atol=0)
    ptx = add_weak_literal.compile(h, target="cuda", arch="sm_90a").ptx
    suffix = "f16" if dtype == torch.float16 else "bf16"
    assert f"atom.global.add.noftz.{suffix}" in ptx or f"red.global.add.noftz.{suffix}" in ptx


def test_shared_memory_atomics_then_copy_out():
    x = _ints(1000, 0, 1000, seed=5)
    h = torch.zeros(4, 16, dtype=torch.int32)
    shared_histogram(x, h)
    ref = np.stack([np.bincount(x.numpy()[b * 256:(b + 1) * 256] % 16, minlength=16)
                    for b in range(4)])
    np.testing.assert_array_equal(h.numpy(), ref)


def test_block_level_atomic_runs_in_every_thread():
    a = _ints(50, -9, 10, seed=6)
    c = torch.zeros(1, dtype=torch.int32)
    block_counter(c, a)
    assert c.item() == 128 * a.sum().item()
    ptx = block_counter.compile(c, a, target="cuda", arch="sm_80").ptx
    assert "tid.x" not in ptx           # no thread singled out


@tilejit.kernel
def block_previous(A, B, P):
    """``P[tx] = T.atomic_add(B[0], A[0], return_prev=True)`` at the block's level (no
    T.Parallel): each thread its own previous value, all of them together every value
    from B[0] before to before the last add."""
    with T.Kernel(1, threads=64) as bx:
        tx = T.get_thread_binding()
        P[tx] = T.atomic_add(B[0], A[0], return_prev=True)


@tilejit.kernel
def block_previous_untouched(A, B, Q):
    """The same without the thread index: every thread adds (B ends 64 higher); the
    previous values are each thread's, stored by none."""
    with T.Kernel(1, threads=64) as bx:
        prev = T.atomic_add(B[0], A[0], return_prev=True)
        Q[0] = T.max(Q[0], 0)


RETURN_PREV = True


@tilejit.kernel
def first_arrival(Count, Flag, rp: T.constexpr = True):
    """return_prev given by a global or a constexpr: each thread its own previous value
    (the thread that found 0 sets the flag)."""
    with T.Kernel(1, threads=32) as bx:
        p = T.atomic_add(Count[0], 1, return_prev=RETURN_PREV and rp)
        if p == 0:
            Flag[0] = 7


def test_return_prev_by_a_compile_time_name_is_each_threads_too():
    count, flag = torch.zeros(1, dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
    tilejit.kernel(first_arrival.func, target="sim")(count, flag)
    assert count.item() == 32 and flag.item() == 7


def test_block_level_return_prev_gives_each_thread_its_own():
    a, b, p = torch.ones(1, dtype=torch.int32), torch.full((1,), 5, dtype=torch.int32), \
        torch.zeros(64, dtype=torch.int32)
    tilejit.kernel(block_previous.func, target="sim")(a, b, p)
    assert b.item() == 69 and sorted(p.tolist()) == list(range(5, 69))
    b2, q = torch.zeros(1, dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
    tilejit.kernel(block_previous_untouched.func, target="sim")(a, b2, q)
    assert b2.item() == 64


@pytest.mark.parametrize("M,N,K", [(64, 64, 64), (50, 70, 32)])
def test_region_form_split_k(M, N, K):
    g = torch.Generator().manual_seed(7)
    a = torch.randint(-3, 4, (M, K), generator=g).float()
    b = torch.randint(-3, 4, (K, N), generator=g).float()
    c = torch.ones(M, N)
    split_k(a, b, c)
    ref = 1 + a.double() @ b.double()
    torch.testing.assert_close(c.double(), ref, rtol=0, atol=0)


def _gemm_operands(M, N, K, seed=9):
    g = torch.Generator().manual_seed(seed)
    a = torch.randint(-3, 4, (M, K), generator=g).half()
    b = torch.randint(-3, 4, (K, N), generator=g).half()
    return a, b


def test_corner_form_with_a_tile_value_is_a_region_of_its_shape():
    a, b = _gemm_operands(100, 90, 256)            # partial blocks at the bottom and right
    c = torch.full((100, 90), 2.0)
    split_k_gemm(a, b, c)
    torch.testing.assert_close(c.double(), 2 + a.double() @ b.double(), rtol=0, atol=0)


def test_region_form_shared_value_max():
    g = torch.Generator().manual_seed(8)
    a = torch.randn(70, 64, generator=g)
    out = torch.full((16, 64), -1e30)
    shared_region_max(a, out)
    padded = torch.cat([a, torch.full((10, 64), -1e30)]).reshape(5, 16, 64)
    # rows past the tensor's end are copied as 0 into the shared tile
    padded[4, 6:] = 0.0
    torch.testing.assert_close(out, padded.amax(0), rtol=0, atol=0)


# ----------------------------------------------------------------------------- errors

def _compile_error(fn, *args, match):
    with pytest.raises(tilejit.CompileError, match=match) as e:
        fn.compile(*args, target="cuda", arch="sm_90")
    return str(e.value)


def test_unsupported_forms_are_compile_errors():
    @tilejit.kernel
    def on_fragment(A):
        with T.Kernel(1, threads=128) as bx:
            F = T.alloc_fragment((128,), T.float32)
            T.clear(F)
            T.atomic_add(F[0], 1.0)
            T.copy(F, A[0:128])

    @tilejit.kernel
    def on_int8(A):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(128):
                T.atomic_add(A[i], 1)

    @tilejit.kernel
    def runtime_flag(A, flag):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(128):
                T.atomic_add(A[i % 2], 1, return_prev=flag > 0)

    @tilejit.kernel
    def region_prev(A):
        with T.Kernel(1, threads=128) as bx:
            F = T.alloc_fragment((128,), T.float32)
            T.clear(F)
            T.atomic_add(A[0:128], F, return_prev=True)

    f32 = torch.zeros(128)
    _compile_error(on_fragment, f32, match="private to each thread")
    _compile_error(on_int8, torch.zeros(128, dtype=torch.int8), match="atomics support")
    _compile_error(runtime_flag, f32, 1, match="compile-time True or False")
    _compile_error(region_prev, f32, match="needs an element destination")


@tilejit.kernel
def into_every_element(A, X, value: T.constexpr = 1.0, threads: T.constexpr = 128):
    """TileLang's tile-level forms: a number into every element of a region or of a whole
    tensor, a thread's local tile, a global region (each element combined once)."""
    with T.Kernel(1, threads=threads) as bx:
        x_local = T.alloc_local((64,), A.dtype)
        T.copy(X[0:64], x_local)
        T.atomic_add(A[0:64], value)
        T.atomic_add(A, value)
        T.atomic_add(A[64:128], x_local)
        T.atomic_max(A[128:192], X[0:64])


def _every_element_ref(A, X, value=1.0):
    out = A.clone().double() + value
    out[:64] += value
    out[64:128] += X[:64].double()
    out[128:192] = torch.maximum(out[128:192], X[:64].double())
    return out


@pytest.mark.parametrize("threads", [128, 32])
def test_numbers_local_tiles_and_tensors_into_regions(threads):
    A, X = torch.randn(200), torch.randn(64)
    ref = _every_element_ref(A, X)
    into_every_element(A, X, threads=threads)
    torch.testing.assert_close(A.double(), ref, rtol=1e-6, atol=1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("threads", [128, 32])
def test_gpu_numbers_local_tiles_and_tensors_into_regions(threads):
    A, X = torch.randn(200, device="cuda"), torch.randn(64, device="cuda")
    ref = _every_element_ref(A.cpu(), X.cpu())
    into_every_element(A, X, threads=threads)
    torch.testing.assert_close(A.cpu().double(), ref, rtol=1e-6, atol=1e-6)


# ----------------------------------------------------------------------------- PTX

def _f32(*shape):
    return torch.zeros(*shape)


PTX_CASES = [
    ("total_i32", total, (torch.zeros(1000, dtype=torch.int32),
                          torch.zeros(1, 1, dtype=torch.int32)), ["add.u32"]),
    ("total_f64", total, (torch.zeros(1000, dtype=torch.float64),
                          torch.zeros(1, 1, dtype=torch.float64)), ["add.f64"]),
    ("extremes_f32", extremes, (_f32(1000), _f32(1), _f32(1)), [".cas.b32"]),
    ("extremes_i64", extremes, tuple(torch.zeros(n, dtype=torch.int64) for n in (999, 1, 1)),
     ["max.s64", "min.s64"]),
    ("tickets", tickets, (torch.zeros(1, dtype=torch.int32),
                          torch.zeros(1000, dtype=torch.int32)), ["atom.global.add.u32"]),
    ("column_sums_f16", column_sums, (torch.zeros(96, 16, dtype=torch.float16),
                                      torch.zeros(16, dtype=torch.float16)), ["add.noftz.f16"]),
    ("column_sums_bf16", column_sums, (torch.zeros(96, 16, dtype=torch.bfloat16),
                                       torch.zeros(16, dtype=torch.bfloat16)), []),
    ("shared_histogram", shared_histogram, (torch.zeros(1000, dtype=torch.int32),
                                            torch.zeros(4, 16, dtype=torch.int32)),
     ["atom.shared.add", "bar.sync"]),
    ("split_k", split_k, (_f32(64, 64), _f32(64, 64), _f32(64, 64)), ["add.f32"]),
    ("shared_region_max", shared_region_max, (_f32(70, 64), _f32(16, 64)), [".cas.b32"]),
    ("split_k_gemm", split_k_gemm, (torch.zeros(128, 256, dtype=torch.float16),
                                    torch.zeros(256, 128, dtype=torch.float16), _f32(128, 128)),
     ["add.f32"]),
]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name,kernel,args,must", PTX_CASES, ids=[c[0] for c in PTX_CASES])
def test_atomic_kernels_ptx_assembles(name, kernel, args, must, arch, tmp_path):
    ptx = kernel.compile(*args, target="cuda", arch=arch).ptx
    assert "atom." in ptx or "red." in ptx
    for instruction in must:
        assert instruction in ptx, f"{name}: expected {instruction} in its PTX"
    if name == "column_sums_bf16":
        # bf16 atomic add is native from sm_90; on sm_80 LLVM emits a CAS loop
        assert ("add.noftz.bf16" in ptx) == (arch == "sm_90a")
    if PTXAS is None:
        pytest.skip("ptxas is not on PATH: PTX generated and checked, not assembled")
    path = tmp_path / f"{name}.ptx"
    path.write_text(ptx)
    r = subprocess.run([PTXAS, f"-arch={arch}", str(path), "-o", str(tmp_path / "k.cubin")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("arch", ARCHS)
def test_region_adds_of_float32_are_vector_reductions_on_hopper(arch):
    """A float32 fragment added into a contiguous region: runs of consecutive slots as
    one red.global.add.v2/v4.f32 each where the region lies inside the tensor (sm_90+),
    element by element at the edges and on sm_80."""
    a, b = _gemm_operands(128, 128, 256)
    ptx = split_k_gemm.compile(a, b, _f32(128, 128), target="cuda", arch=arch).ptx
    vector = [line for line in ptx.splitlines() if "red.global.add.v" in line]
    assert bool(vector) == (arch == "sm_90a")
    assert "add.f32" in ptx.replace("red.global.add.v", "")     # the edges' scalar adds


def test_shared_atomics_are_fenced_by_barriers():
    ptx = shared_histogram.compile(torch.zeros(1000, dtype=torch.int32),
                                   torch.zeros(4, 16, dtype=torch.int32), target="cuda",
                                   arch="sm_90a").ptx
    body = ptx[ptx.index("atom.shared"):]
    head = ptx[:ptx.index("atom.shared")]
    assert "bar.sync" in head and "bar.sync" in body     # after the clear, before the copy


# ----------------------------------------------------------------------------- GPU

def _gpu_check(fn_gpu, fn_sim, make_args, out_indices, rtol=0.0, atol=0.0):
    args = make_args()
    gpu_args = [a.cuda() if isinstance(a, torch.Tensor) else a for a in args]
    fn_gpu(*gpu_args)
    torch.cuda.synchronize()
    sim_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    fn_sim(*sim_args)
    out = []
    for k in out_indices:
        torch.testing.assert_close(gpu_args[k].cpu(), sim_args[k], rtol=rtol, atol=atol)
        out.append(gpu_args[k].cpu())
    return out


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.float32, torch.float64])
def test_gpu_many_blocks_into_one_element(dtype):
    a = _ints(100_000, -1000, 1000, dtype=dtype)
    (got,) = _gpu_check(total, total_sim, lambda: [a, torch.zeros(1, 1, dtype=dtype)], [1])
    assert got.item() == a.to(torch.float64).sum().item()


@pytest.mark.gpu
def test_gpu_histogram():
    x = _ints(200_000, 0, 100, seed=1)
    (got,) = _gpu_check(histogram, histogram_sim,
                        lambda: [x, torch.zeros(100, dtype=torch.int32)], [1])
    torch.testing.assert_close(got, torch.bincount(x, minlength=100).to(torch.int32))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.float32, torch.float64])
def test_gpu_max_min(dtype):
    a = _ints(50_000, -100_000, 100_000, seed=2, dtype=dtype)
    mx, mn = _gpu_check(extremes, extremes_sim,
                        lambda: [a, torch.full((1,), -10**6, dtype=dtype),
                                 torch.full((1,), 10**6, dtype=dtype)], [1, 2])
    assert mx.item() == a.max().item() and mn.item() == a.min().item()


@pytest.mark.gpu
def test_gpu_float_max_ignores_nan():
    a = torch.randn(10_000)
    a[::7] = float("nan")
    mx, mn = _gpu_check(extremes, extremes_sim,
                        lambda: [a, torch.full((1,), float("nan")), torch.zeros(1)], [1, 2])
    assert mx.item() == a.nan_to_num(-1e9).max().item()


@pytest.mark.gpu
def test_gpu_return_prev_tickets():
    counter = torch.zeros(1, dtype=torch.int32, device="cuda")
    out = torch.full((100_000,), -1, dtype=torch.int32, device="cuda")
    tickets(counter, out)
    torch.cuda.synchronize()
    assert counter.item() == 100_000
    torch.testing.assert_close(out.sort().values.cpu(), torch.arange(100_000, dtype=torch.int32))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_gpu_half_adds(dtype):
    a = _ints(96 * 16, -4, 5, seed=4, dtype=dtype).reshape(96, 16)
    (got,) = _gpu_check(column_sums, column_sums_sim,
                        lambda: [a, torch.zeros(16, dtype=dtype)], [1])
    torch.testing.assert_close(got.double(), a.double().sum(0), rtol=0, atol=0)


@pytest.mark.gpu
def test_gpu_shared_histogram():
    x = _ints(100_000, 0, 1000, seed=5)
    blocks = -(-100_000 // 256)
    (got,) = _gpu_check(shared_histogram, shared_histogram_sim,
                        lambda: [x, torch.zeros(blocks, 16, dtype=torch.int32)], [1])
    assert got.sum().item() == 100_000


@pytest.mark.gpu
def test_gpu_block_counter():
    a = _ints(5000, -9, 10, seed=6)
    (got,) = _gpu_check(block_counter, block_counter_sim,
                        lambda: [torch.zeros(1, dtype=torch.int32), a], [0])
    assert got.item() == 128 * a.sum().item()


@pytest.mark.gpu
def test_gpu_block_level_return_prev():
    a, b, p = (torch.ones(1, dtype=torch.int32, device="cuda"),
               torch.full((1,), 5, dtype=torch.int32, device="cuda"),
               torch.zeros(64, dtype=torch.int32, device="cuda"))
    block_previous(a, b, p)
    assert b.item() == 69 and sorted(p.cpu().tolist()) == list(range(5, 69))


@pytest.mark.gpu
def test_gpu_split_k():
    g = torch.Generator().manual_seed(7)
    a = torch.randint(-3, 4, (200, 256), generator=g).float()
    b = torch.randint(-3, 4, (256, 150), generator=g).float()
    (got,) = _gpu_check(split_k, split_k_sim, lambda: [a, b, torch.zeros(200, 150)], [2])
    torch.testing.assert_close(got.double(), a.double() @ b.double(), rtol=0, atol=0)


@pytest.mark.gpu
def test_gpu_split_k_gemm_corner_form():
    a, b = _gemm_operands(300, 200, 512, seed=10)
    (got,) = _gpu_check(split_k_gemm, split_k_gemm_sim,
                        lambda: [a, b, torch.zeros(300, 200)], [2])
    torch.testing.assert_close(got.double(), a.double() @ b.double(), rtol=0, atol=0)


@tilejit.kernel
def every_thread_counts(S, P):
    """Per-thread code: an atomic at an address and with a value every thread shares is
    every thread's (the GPU's threads each run it); the simulator ran it once (found by
    a user-style fuzz)."""
    with T.Kernel(1, threads=64):
        tx = T.get_thread_binding(0)
        for j in T.serial(4):
            T.atomic_add(S[j], 1.0)
        P[tx] = T.atomic_add(S[4], 1.0, return_prev=True)


@tilejit.kernel
def every_iteration_counts(S, P):
    """An element atomic at one address inside a T.Parallel: each iteration's (the GPU's
    threads run one per iteration); the simulator's vectorized loop ran it once (found
    by a review)."""
    with T.Kernel(1, threads=64):
        for i in T.Parallel(64):
            T.atomic_add(S[0], 1.0)
            P[i] = T.atomic_add(S[1], 1.0, return_prev=True)


_ONE_ADDRESS = [(every_thread_counts, 5), (every_iteration_counts, 2)]


@pytest.mark.parametrize("kernel, counters", _ONE_ADDRESS)
def test_an_atomic_at_one_address_is_each_threads_or_iterations(kernel, counters):
    s = np.zeros(counters, np.float32)
    p = np.zeros(64, np.float32)
    kernel(s, p)
    np.testing.assert_array_equal(s, [64] * counters)
    np.testing.assert_array_equal(np.sort(p), np.arange(64))


@pytest.mark.gpu
@pytest.mark.parametrize("kernel, counters", _ONE_ADDRESS)
def test_an_atomic_at_one_address_on_the_gpu(kernel, counters):
    import torch
    s = torch.zeros(counters, device="cuda")
    p = torch.zeros(64, device="cuda")
    kernel(s, p)
    torch.cuda.synchronize()
    assert s.tolist() == [64.0] * counters
    assert sorted(p.tolist()) == list(range(64))


def _one_thread_return_prev(op_name, val):
    atom = getattr(T, op_name)

    @T.prim_func
    def main(Dst: T.Tensor((1,), "float32"), Prev: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=1):
            Prev[0] = atom(Dst[0], val, return_prev=True)
    return main


@pytest.mark.parametrize("op_name, val, after", [("atomic_max", 5.0, 5.0),
                                                 ("atomic_min", 1.0, 1.0),
                                                 ("atomic_add", 2.0, 5.0)])
def test_return_prev_outside_a_parallel_in_a_block_of_one_thread(op_name, val, after, ptxas):
    """TileLang's test of `Prev[0] = T.atomic_max(Dst[0], v, return_prev=True)` in a block
    of one thread: its one thread performs the atomic and has the previous value (it was
    refused as having no per-thread previous value)."""
    import tilejit as tilelang
    dst, prev = np.array([3.0], np.float32), np.zeros(1, np.float32)
    tilelang.compile(_one_thread_return_prev(op_name, val))(dst, prev)
    assert prev[0] == 3.0 and dst[0] == after
    ptxas(tilelang.compile(_one_thread_return_prev(op_name, val),
                           target="cuda -arch=sm_90a").get_kernel_source(), "sm_90a")


@pytest.mark.gpu
@pytest.mark.parametrize("op_name, val, after", [("atomic_max", 5.0, 5.0),
                                                 ("atomic_add", 2.0, 5.0)])
def test_return_prev_in_a_block_of_one_thread_on_the_gpu(op_name, val, after):
    import torch
    import tilejit as tilelang
    dst, prev = torch.tensor([3.0], device="cuda"), torch.zeros(1, device="cuda")
    tilelang.compile(_one_thread_return_prev(op_name, val))(dst, prev)
    assert prev.item() == 3.0 and dst.item() == after


# a region atomic of whole tensors (TileLang's CPU/LLVM atomic tests: T.atomic_add(B, A)):
# their extents are their shapes, which the kernel is specialized on
def _whole_tensor_atomic(op, M, N, dtype, sliced=False):
    import tilejit as tl
    emit = {"add": T.atomic_add, "max": T.atomic_max, "min": T.atomic_min}[op]

    @T.prim_func
    def whole(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(1, threads=128):
            emit(B, A)

    @T.prim_func
    def into_rows(A: T.Tensor((M - 2, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(1, threads=128):
            emit(B[1:M - 1, :], A)
    return tl, (into_rows if sliced else whole)


def _whole_tensor_ref(op, a, b, sliced):
    want = b.clone()
    rows = slice(1, b.shape[0] - 1) if sliced else slice(None)
    fn = {"add": torch.add, "max": torch.maximum, "min": torch.minimum}[op]
    want[rows] = fn(want[rows], a)
    return want


WHOLE = [("add", False, "float32"), ("add", True, "float32"), ("max", False, "float32"),
         ("min", False, "int32"), ("add", False, "int32")]


@pytest.mark.parametrize("op,sliced,dtype", WHOLE)
def test_region_atomic_of_whole_tensors(op, sliced, dtype):
    tl, program = _whole_tensor_atomic(op, 8, 24, dtype, sliced)
    a = _ints(24 * (6 if sliced else 8), -40, 40).reshape(-1, 24).to(getattr(torch, dtype))
    b = _ints(8 * 24, -40, 40, seed=3).reshape(8, 24).to(getattr(torch, dtype))
    want = _whole_tensor_ref(op, a, b, sliced)
    tl.compile(program, target="sim")(a, b)
    assert torch.equal(b, want)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("op,sliced,dtype", WHOLE)
def test_region_atomic_of_whole_tensors_assembles(op, sliced, dtype, arch, tmp_path):
    tl, program = _whole_tensor_atomic(op, 8, 24, dtype, sliced)
    ptx = tl.compile(program).get_kernel_source(arch=arch)
    assert "atom." in ptx or "red." in ptx
    if PTXAS:
        path = tmp_path / "k.ptx"
        path.write_text(ptx)
        subprocess.run([PTXAS, f"-arch={arch}", str(path), "-o", str(tmp_path / "k.cubin")],
                       check=True)


@pytest.mark.gpu
@pytest.mark.parametrize("op,sliced,dtype", WHOLE)
def test_gpu_region_atomic_of_whole_tensors(op, sliced, dtype):
    tl, program = _whole_tensor_atomic(op, 8, 24, dtype, sliced)
    a = _ints(24 * (6 if sliced else 8), -40, 40).reshape(-1, 24).to(getattr(torch, dtype))
    b = _ints(8 * 24, -40, 40, seed=3).reshape(8, 24).to(getattr(torch, dtype))
    want = _whole_tensor_ref(op, a, b, sliced)
    b_gpu, b_sim = b.cuda(), b.clone()
    tl.compile(program)(a.cuda(), b_gpu)
    tl.compile(program, target="sim")(a, b_sim)
    assert torch.equal(b_gpu.cpu(), want) and torch.equal(b_sim, want)


def _counted(M=40, N=16, bm=16, open_slice=True):
    import tilejit as tl

    @T.prim_func
    def main(Cnt: T.Tensor((M, N), "int32")):
        with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
            if open_slice:
                T.atomic_add(Cnt[bx * bm:(bx + 1) * bm, :], 1)    # `:`: to the edge
            else:
                T.atomic_add(Cnt[bx * bm:(bx + 1) * bm, 0:N], 1)
    return tl, main


@pytest.mark.parametrize("open_slice", [True, False])
def test_a_number_into_a_region_open_to_the_tensors_edge(open_slice, tmp_path):
    tl, program = _counted(open_slice=open_slice)
    c = torch.zeros(40, 16, dtype=torch.int32)
    tl.compile(program, target="sim")(c)
    assert (c == 1).all()
    ptx = tl.compile(program).get_kernel_source(arch="sm_90a")
    if PTXAS:
        path = tmp_path / "k.ptx"
        path.write_text(ptx)
        subprocess.run([PTXAS, "-arch=sm_90a", str(path), "-o", str(tmp_path / "k.cubin")],
                       check=True)


@pytest.mark.gpu
def test_gpu_a_number_into_a_region_open_to_the_tensors_edge():
    tl, program = _counted()
    c = torch.zeros(40, 16, dtype=torch.int32, device="cuda")
    tl.compile(program)(c)
    assert (c.cpu() == 1).all()


@tilejit.kernel
def binned(Bins, Keys, Vals, Prev, block: T.constexpr = 256):
    """Many lanes into few elements, each lane's previous value kept (a histogram's
    ticket): the simulator adds an integer type's lanes at once, in lane order."""
    N = Keys.shape[0]
    with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
        for i in T.Parallel(block):
            if bx * block + i < N:
                Prev[bx * block + i] = T.atomic_add(Bins[Keys[bx * block + i]],
                                                    Vals[bx * block + i], return_prev=True)


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.uint64])
def test_integer_adds_of_many_lanes_into_few_elements_in_lane_order(dtype):
    """Each lane sees its element plus the values of the lanes before it (lane order,
    block after block), wrapping in the element's type (two bins start near its
    greatest value); a per-lane reference."""
    rng = np.random.default_rng(7)
    n, bins = 1000, 5
    keys = rng.integers(0, bins, n).astype(np.int32)
    info = np.iinfo(dtype)
    vals = rng.integers(0 if info.min == 0 else -100, 100, n).astype(dtype)
    start = np.array([0, 3, 9, info.max - 40, info.max - 2000], dtype=dtype)
    got_bins, prev = start.copy(), np.zeros(n, dtype)
    binned(got_bins, keys, vals, prev)
    want_bins, want_prev = start.copy(), np.zeros(n, dtype)
    with np.errstate(over="ignore"):
        for k in range(n):
            want_prev[k] = want_bins[keys[k]]
            want_bins[keys[k]] = want_bins[keys[k]] + vals[k]
    np.testing.assert_array_equal(prev, want_prev)
    np.testing.assert_array_equal(got_bins, want_bins)


@tilejit.kernel
def binned_no_prev(Bins, Keys, Vals, op: T.constexpr, block: T.constexpr = 256):
    """Many lanes into few elements, no lane's previous value wanted (a histogram): the
    simulator combines them in place, lane after lane (``semantics._apply``)."""
    N = Keys.shape[0]
    with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
        for i in T.Parallel(block):
            if bx * block + i < N:
                if op == "add":
                    T.atomic_add(Bins[Keys[bx * block + i]], Vals[bx * block + i])
                else:
                    T.atomic_max(Bins[Keys[bx * block + i]], Vals[bx * block + i])


@pytest.mark.parametrize("dtype, op", [(np.int32, "add"), (np.uint32, "add"),
                                       (np.float32, "add"), (np.float16, "add"),
                                       ("bfloat16", "add"), (np.float32, "max"),
                                       (np.int64, "max")])
def test_lanes_into_few_elements_without_previous_values_in_lane_order(dtype, op):
    """The values combine into each element in lane order, block after block: float sums
    bit for bit as a per-lane loop gives them (rounded to float16 at each add, and to
    bfloat16, which the simulator holds in float32, at each store), integers wrapping,
    a NaN value ignored by max."""
    from tilejit.language.numerics import round_to_bfloat16
    rng = np.random.default_rng(11)
    n, bins = 1000, 5
    keys = rng.integers(0, bins, n).astype(np.int32)
    held = np.float32 if dtype == "bfloat16" else dtype
    if np.issubdtype(held, np.integer):
        info = np.iinfo(held)
        vals = rng.integers(0 if info.min == 0 else -100, 100, n).astype(held)
        start = np.array([0, 3, 9, info.max - 40, info.max - 2000], dtype=held)
    else:
        vals = (rng.standard_normal(n) * 1000).astype(held)
        if op == "max":
            vals[::7] = np.nan
        start = np.array([0, 0.5, -3, 1e4, 7], dtype=held)
    rnd = round_to_bfloat16 if dtype == "bfloat16" else (lambda x: x)
    vals, start = rnd(vals).astype(held), rnd(start).astype(held)
    want = start.copy()
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(n):
            v = want[keys[k]]
            want[keys[k]] = rnd(v + vals[k] if op == "add" else
                                (v if np.isnan(vals[k]) else max(v, vals[k])))
    if dtype == "bfloat16":
        import torch
        got = torch.from_numpy(start).to(torch.bfloat16)
        binned_no_prev(got, keys, torch.from_numpy(vals).to(torch.bfloat16), op)
        got = got.float().numpy()
    else:
        got = start.copy()
        binned_no_prev(got, keys, vals, op)
    np.testing.assert_array_equal(got, want)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype, op", [(torch.int32, "add"), (torch.float32, "add"),
                                       (torch.float32, "max"), (torch.int64, "max")])
def test_gpu_lanes_into_few_elements_without_previous_values(dtype, op):
    """On the GPU against the simulator: integers and max exactly, float sums (whose
    order the GPU does not fix) to rounding."""
    g = torch.Generator().manual_seed(5)
    keys = torch.randint(0, 5, (1000,), generator=g, dtype=torch.int32)
    vals = (torch.randint(-100, 100, (1000,), generator=g) if not dtype.is_floating_point
            else torch.randn(1000, generator=g) * 1000).to(dtype)
    sim = torch.zeros(5, dtype=dtype)
    binned_no_prev(sim, keys, vals, op)
    gpu = torch.zeros(5, dtype=dtype, device="cuda")
    binned_no_prev(gpu, keys.cuda(), vals.cuda(), op)
    torch.cuda.synchronize()
    if dtype == torch.float32 and op == "add":
        torch.testing.assert_close(gpu.cpu(), sim, rtol=1e-5, atol=1e-2)
    else:
        assert torch.equal(gpu.cpu(), sim)
