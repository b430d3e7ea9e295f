"""TVM's thread all-reduce as TileLang's GEMV examples and its issue 2628 write it:
``with T.attr(T.comm_reducer(fn, [identity]), "reduce_scope", ...):
T.evaluate(T.tvm_thread_allreduce(T.uint32(1), value, cond, result, *thread_vars, ...))``
(``frontend/thread_allreduce.py`` rewrites it into shared memory and barriers).

Sums and products over several dtypes and thread shapes against torch in the same dtype,
in the simulator; the GEMV pattern; the shapes not built as CompileErrors at their line;
the PTX assembled by ptxas for sm_80 and sm_90a; the ``gpu`` twins on the device."""
import numpy as np
import pytest

import tilejit
import tilejit as tilelang
import tilejit.language as T

torch = pytest.importorskip("torch")

INT_VALS = [10, 25, 40, 30, 15, 42, 20, 20]     # sum 202 (-54 in int8)
DTYPES = ["float32", "int32", "float16", "bfloat16", "int16", "int8"]


def reduce_x(reduce_threads, dtype, reduce_op, reduce_id):
    """threads=(R,): every thread's element reduced over threadIdx.x."""
    @tilelang.jit
    def kernel(A):
        K = T.const("K")
        A: T.Tensor((K,), dtype)
        C = T.empty((K,), dtype)
        with T.Kernel(1, threads=(reduce_threads,)):
            tk = T.get_thread_binding(0)
            v = T.alloc_local((1,), dtype)
            v[0] = A[tk]
            Cr = T.alloc_local((1,), dtype)
            with T.attr(T.comm_reducer(reduce_op, [T.cast(reduce_id, dtype)]), "reduce_scope",
                        T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), v[0], True, Cr[0], tk,
                                                  dtype="handle"))
            C[tk] = Cr[0]
        return C
    return kernel


@tilelang.jit
def reduce_y(A, rows: int, reduce_threads: int, dtype: T.dtype = T.float32,
             product: bool = False):
    """threads=(N, R): row tn of A (N, R) reduced over threadIdx.y; every thread of the row
    writes the result to its own place, and a masked sum of the odd elements too."""
    A: T.Tensor((rows, reduce_threads), dtype)
    C = T.empty((rows, reduce_threads, 2), dtype)
    with T.Kernel(1, threads=(rows, reduce_threads)):
        tn = T.get_thread_binding(0)
        tk = T.get_thread_binding(1)
        r = T.alloc_local((1,), dtype)
        odd = T.alloc_local((1,), dtype)
        if product:
            with T.attr(T.comm_reducer(lambda x, y: x * y, [T.cast(1, dtype)]),
                        "reduce_scope", T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), A[tn, tk], True, r[0], tk,
                                                  dtype="handle"))
        else:
            with T.attr(T.comm_reducer(lambda x, y: x + y, [T.cast(0, dtype)]),
                        "reduce_scope", T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), A[tn, tk], True, r[0], tk,
                                                  dtype="handle"))
        with T.attr(T.comm_reducer(lambda a, b: a + b, [dtype(0)]),
                    "reduce_scope", T.reinterpret(T.uint64(0), dtype="handle")):
            T.evaluate(T.tvm_thread_allreduce(T.uint32(1), A[tn, tk], tk % 2 == 1, odd[0], tk,
                                              dtype="handle"))
        C[tn, tk, 0] = r[0]
        C[tn, tk, 1] = odd[0]
    return C


@tilelang.jit
def reduce_xy(A, dtype: T.dtype = T.float32):
    """threads=(4, 8, 2): A (2, 8, 4) reduced over x and y for each z, with T.max."""
    A: T.Tensor((2, 8, 4), dtype)
    C = T.empty((2, 8, 4), dtype)
    with T.Kernel(1, threads=(4, 8, 2)):
        tx = T.get_thread_binding(0)
        ty = T.get_thread_binding(1)
        tz = T.get_thread_binding(2)
        m = T.alloc_local((1,), dtype)
        with T.attr(T.comm_reducer(lambda x, y: T.max(x, y), [T.cast(-1e30, dtype)]),
                    "reduce_scope", T.reinterpret(T.uint64(0), dtype="handle")):
            T.evaluate(T.tvm_thread_allreduce(T.uint32(1), A[tz, ty, tx], True, m[0], tx, ty,
                                              dtype="handle"))
        C[tz, ty, tx] = m[0]
    return C


# -- TileLang's GEMV example (its all-reduce variant), imports swapped --------------------
@tilelang.jit
def gemv_allreduce(A, B, BLOCK_N: int, reduce_threads: int, dtype: T.dtype = T.float16,
                   accum_dtype: T.dtype = T.float):
    N, K = T.const("N, K")
    TILE_K = 128 // dtype.bits
    BLOCK_K = reduce_threads * TILE_K
    A: T.Tensor((K,), dtype)
    B: T.Tensor((N, K), dtype)
    C = T.empty((N,), dtype)

    with T.Kernel(T.ceildiv(N, BLOCK_N), threads=(BLOCK_N, reduce_threads)) as bn:
        tn = T.get_thread_binding(0)
        tk = T.get_thread_binding(1)
        A_local = T.alloc_local((TILE_K,), dtype)
        B_local = T.alloc_local((TILE_K,), dtype)
        C_accum = T.alloc_local((1,), accum_dtype)

        T.clear(C_accum)
        for bk in T.serial(T.ceildiv(K, BLOCK_K)):
            for k in T.vectorized(TILE_K):
                A_local[k] = A[bk * BLOCK_K + tk * TILE_K + k]
                B_local[k] = B[bn * BLOCK_N + tn, bk * BLOCK_K + tk * TILE_K + k]
            for k in T.serial(TILE_K):
                C_accum[0] += A_local[k].astype(accum_dtype) * B_local[k].astype(accum_dtype)
        C_reduced = T.alloc_local((1,), accum_dtype)
        with T.attr(
            T.comm_reducer(lambda x, y: x + y, [T.Cast(accum_dtype, 0)]),  # TVM order
            "reduce_scope",
            T.reinterpret(T.uint64(0), dtype="handle"),
        ):
            T.evaluate(
                T.tvm_thread_allreduce(
                    T.uint32(1),
                    C_accum[0],
                    True,
                    C_reduced[0],
                    tk,
                    dtype="handle",
                )
            )

        C[bn * BLOCK_N + tn] = C_reduced[0]

    return C


def tree(a, op):
    """The fold the rewrite promises, in a's dtype: widths halve, element r taking
    r + half (rounded up), i.e. for a power of two the butterfly of warp shuffles."""
    v = list(a)
    while len(v) > 1:
        half = (len(v) + 1) // 2
        v = [op(v[r], v[r + half]) if r + half < len(v) else v[r] for r in range(half)]
    return v[0]


def _check_x(dt, vals, op, identity, ref, device="cpu"):
    dtype = getattr(torch, dt)
    a = torch.tensor(vals).to(dtype).to(device)
    got = reduce_x(len(vals), dt, op, identity)(a).cpu()
    expect = ref(a.cpu()).to(dtype)
    assert (got == expect).all(), (got, expect)


@pytest.mark.parametrize("dt", DTYPES)
def test_sum_over_threadidx_x(dt):
    vals = [3.0, 8.0, 5.0, 2.0, 7.0, 6.0, 4.0, 6.0] if dt == "bfloat16" else INT_VALS
    _check_x(dt, vals, lambda x, y: x + y, 0, torch.sum)


@pytest.mark.parametrize("dt", DTYPES)
def test_product_over_threadidx_x(dt):
    vals = [3.0, 8.0, 5.0, 2.0, 7.0, 6.0, 4.0, 6.0] if dt == "bfloat16" else INT_VALS
    _check_x(dt, vals, lambda x, y: x * y, 1, lambda a: tree(a, torch.mul))


def test_bfloat16_product_rounds_as_the_butterfly_does():
    """TileLang's issue 2628: eight bfloat16 values' product is 241920, 241664 in
    bfloat16 when rounded once (torch's float accumulation) and through the butterfly;
    the sequential order gives 242688."""
    vals = [3.0, 8.0, 5.0, 2.0, 7.0, 6.0, 4.0, 6.0]
    a = torch.tensor(vals).bfloat16()
    got = reduce_x(8, "bfloat16", lambda x, y: x * y, 1)(a)
    assert (got == 241664).all(), got
    assert torch.prod(a.float()).bfloat16() == 241664


def test_a_group_not_a_power_of_two_folds_as_a_tree():
    a = torch.tensor([1.5, 3.0, 5.0, 7.0, 9.0, 11.0]).bfloat16()
    got = reduce_x(6, "bfloat16", lambda x, y: x * y, 1)(a)
    assert (got == tree(a, torch.mul)).all(), (got, tree(a, torch.mul))


def test_sum_over_a_block_of_more_than_one_warp():
    _check_x("int32", list(range(1, 101)), lambda x, y: x + y, 0, torch.sum)


@pytest.mark.parametrize("dt", ["float32", "int32", "float16", "int16", "int8"])
@pytest.mark.parametrize("rows, reduce_threads", [(4, 8), (32, 4), (3, 5)])
def test_sum_and_product_over_threadidx_y(dt, rows, reduce_threads):
    dtype = getattr(torch, dt)
    g = torch.Generator().manual_seed(rows * reduce_threads)
    a = torch.randint(-3, 4, (rows, reduce_threads), generator=g).to(dtype)
    got = reduce_y(a, rows, reduce_threads, dt)
    total = a.sum(1, dtype=dtype)
    odd = a[:, 1::2].sum(1, dtype=dtype)
    assert (got[:, :, 0] == total[:, None]).all()
    assert (got[:, :, 1] == odd[:, None]).all()
    got = reduce_y(a, rows, reduce_threads, dt, True)
    assert (got[:, :, 0] == a.prod(1, dtype=dtype)[:, None]).all()


def test_max_over_two_thread_dimensions():
    a = torch.randn(2, 8, 4)
    got = reduce_xy(a)
    assert (got == a.amax((1, 2), keepdim=True).expand(2, 8, 4)).all()


@pytest.mark.parametrize("block_n, reduce_threads", [(2, 32), (8, 16), (32, 4)])
def test_gemv_example(block_n, reduce_threads):
    g = torch.Generator().manual_seed(block_n)
    a = torch.randn(512, generator=g).half()
    b = torch.randn(256, 512, generator=g).half()
    c = gemv_allreduce(a, b, block_n, reduce_threads)
    torch.testing.assert_close(c.double(), b.double() @ a.double(), rtol=1e-2, atol=2e-2)


# -- what is not built -------------------------------------------------------------------
def two_value_reducer():
    @tilejit.kernel
    def kernel(A, C):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding(0)
            r = T.alloc_local((2,), T.float32)
            with T.attr(T.comm_reducer(lambda x0, x1, y0, y1: (x0 + y0, x1 + y1),
                                       [T.float32(0), T.float32(0)]),
                        "reduce_scope", T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), A[tx], True, r[0], tx,
                                                  dtype="handle"))
            C[tx] = r[0]
    return kernel


def two_values():
    @tilejit.kernel
    def kernel(A, C):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding(0)
            r = T.alloc_local((2,), T.float32)
            with T.attr(T.comm_reducer(lambda x, y: x + y, [T.float32(0)]),
                        "reduce_scope", T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(2), A[tx], A[tx], True, r[0], r[1],
                                                  tx, dtype="handle"))
            C[tx] = r[0]
    return kernel


def other_attr():
    @tilejit.kernel
    def kernel(A, C):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding(0)
            with T.attr(0, "pragma_unroll", 1):
                C[tx] = A[tx]
    return kernel


def stray_evaluate():
    @tilejit.kernel
    def kernel(A, C):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding(0)
            T.evaluate(A[tx])
            C[tx] = A[tx]
    return kernel


def not_a_thread_variable():
    @tilejit.kernel
    def kernel(A, C):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding(0)
            r = T.alloc_local((1,), T.float32)
            with T.attr(T.comm_reducer(lambda x, y: x + y, [T.float32(0)]),
                        "reduce_scope", T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), A[tx], True, r[0], tx + 1,
                                                  dtype="handle"))
            C[tx] = r[0]
    return kernel


@pytest.mark.parametrize("define, text, match", [
    (two_value_reducer, "T.comm_reducer(lambda x0", "only a reducer of one value"),
    (two_values, "T.evaluate(T.tvm_thread_allreduce(T.uint32(2)", "of 2 values"),
    (other_attr, "pragma_unroll", "T.attr is supported only as the thread all-reduce"),
    (not_a_thread_variable, "tx + 1", "a thread variable must be a name bound once"),
])
def test_what_is_not_built_is_an_error_at_its_line(define, text, match):
    import inspect   # (the test reads its own source lines)
    with pytest.raises(tilejit.CompileError, match=match) as info:
        define()(np.zeros(32, np.float32), np.zeros(32, np.float32))
    lines, first = inspect.getsourcelines(define)
    assert info.value.lineno == first + next(i for i, line in enumerate(lines) if text in line)


def test_an_evaluate_of_its_own_is_an_expression_statement(ptxas):
    """``T.evaluate(A[tx])`` outside the idiom (TileLang's fp4 tests): the expression,
    evaluated and dropped."""
    a = np.arange(32, dtype=np.float32)
    c = np.zeros(32, np.float32)
    kernel = stray_evaluate()
    kernel(a, c)
    assert np.array_equal(c, a)
    ptxas(kernel.compile(a, c, target="cuda", arch="sm_90a").ptx, "sm_90a")


def test_the_names_outside_a_kernel_say_what_they_are_for():
    with pytest.raises(RuntimeError, match="thread all-reduce"):
        T.comm_reducer(lambda x, y: x + y, [0])


# -- PTX and the device ------------------------------------------------------------------
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_thread_allreduce_assembles(arch, ptxas):
    a = torch.randn(512).half()
    b = torch.randn(256, 512).half()
    source = gemv_allreduce.compile(a, b, BLOCK_N=8, reduce_threads=16,
                                    arch=arch).get_kernel_source()
    assert "bar.sync" in source
    ptxas(source, arch)
    x = torch.zeros(4, 8)
    ptxas(reduce_y.compile(x, rows=4, reduce_threads=8, arch=arch).get_kernel_source(), arch)
    ptxas(reduce_xy.compile(torch.zeros(2, 8, 4), arch=arch).get_kernel_source(), arch)


@pytest.mark.gpu
@pytest.mark.parametrize("dt", DTYPES)
def test_thread_allreduce_on_gpu(dt):
    vals = [3.0, 8.0, 5.0, 2.0, 7.0, 6.0, 4.0, 6.0] if dt == "bfloat16" else INT_VALS
    _check_x(dt, vals, lambda x, y: x + y, 0, torch.sum, device="cuda")
    _check_x(dt, vals, lambda x, y: x * y, 1, lambda a: tree(a, torch.mul), device="cuda")
    if dt != "bfloat16":
        dtype = getattr(torch, dt)
        a = torch.randint(-3, 4, (32, 4)).to(dtype)
        got = reduce_y(a.cuda(), 32, 4, dt).cpu()
        assert (got == reduce_y(a, 32, 4, dt)).all()
        assert (got[:, :, 0] == a.sum(1, dtype=dtype)[:, None]).all()


@pytest.mark.gpu
def test_gemv_example_on_gpu():
    a = torch.randn(4096, device="cuda").half()
    b = torch.randn(4096, 4096, device="cuda").half()
    c = gemv_allreduce(a, b, 2, 32)
    torch.testing.assert_close(c.double(), b.double() @ a.double(), rtol=1e-2, atol=5e-2)
    x = torch.randn(2, 8, 4)
    assert (reduce_xy(x.cuda()).cpu() == reduce_xy(x)).all()


def gemv_named_by_thread_binding(N, K, reduce_threads=32, n_partition=4, binding=None):
    """TileLang's fp16 x int4 GEMV's form: the reducing threads named by
    ``T.thread_binding(0, R, thread="threadIdx.x")`` (not T.get_thread_binding)."""
    @T.prim_func
    def main(A: T.Tensor((K,), "float32"), B: T.Tensor((N, K), "float32"),
             C: T.Tensor((N,), "float32")):
        with T.Kernel(N // n_partition, threads=(reduce_threads, n_partition)) as bx:
            kr = T.thread_binding(0, binding or reduce_threads, thread="threadIdx.x")
            ni = T.thread_binding(0, n_partition, thread="threadIdx.y")
            acc = T.alloc_local((1,), "float32")
            red = T.alloc_local((1,), "float32")
            T.clear(acc)
            for ko in T.serial(K // reduce_threads):
                acc[0] += A[ko * reduce_threads + kr] * B[bx * n_partition + ni,
                                                          ko * reduce_threads + kr]
            with T.attr(T.comm_reducer(lambda x, y: x + y, [T.cast(0, "float32")]),
                        "reduce_scope", T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), acc[0], True, red[0], kr,
                                                  dtype="handle"))
            if kr == 0:
                C[bx * n_partition + ni] = red[0]
    return main


def _gemv_inputs(N=16, K=128):
    g = torch.Generator().manual_seed(3)
    return torch.randn(K, generator=g), torch.randn(N, K, generator=g)


def test_thread_variables_named_by_thread_binding(ptxas):
    a, b = _gemv_inputs()
    c = torch.zeros(16)
    tilelang.compile(gemv_named_by_thread_binding(16, 128))(a, b, c)
    torch.testing.assert_close(c.double(), b.double() @ a.double(), rtol=1e-5, atol=1e-5)
    kernel = tilelang.compile(gemv_named_by_thread_binding(16, 128), target="cuda")
    for arch in ("sm_80", "sm_90a"):
        ptx = kernel.kernel.compile(a.numpy(), b.numpy(), c.numpy(), target="cuda",
                                    arch=arch).ptx
        assert "bar.sync" in ptx or "shfl.sync" in ptx
        ptxas(ptx, arch)


@pytest.mark.gpu
def test_gpu_thread_variables_named_by_thread_binding():
    a, b = _gemv_inputs()
    c = torch.zeros(16, device="cuda")
    tilelang.compile(gemv_named_by_thread_binding(16, 128))(a.cuda(), b.cuda(), c)
    torch.cuda.synchronize()
    sim = torch.zeros(16)
    tilelang.compile(gemv_named_by_thread_binding(16, 128))(a, b, sim)
    torch.testing.assert_close(c.cpu().double(), b.double() @ a.double(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(c.cpu(), sim, rtol=1e-5, atol=1e-5)   # the sums' order


def test_a_thread_binding_narrower_than_the_launch_is_an_error():
    # the all-reduce takes every thread along the axis: a binding of 16 of T.Kernel's 32
    # would sum the other 16 threads' values in (TVM refuses it too)
    with pytest.raises(tilejit.CompileError, match=r"kr binds 16 threads along dimension 0, "
                                                   r"but T.Kernel launches 32 there"):
        tilelang.compile(gemv_named_by_thread_binding(16, 128, reduce_threads=32,
                                                      binding=16))


def async_scope_copy(n, threads=128):
    """sglang's sparse attention wraps its per-thread global-to-shared copies in TVM's
    ``with T.attr("default", "async_scope", 1):`` (cp.async where TVM can): the copies
    run as written."""
    @T.prim_func
    def main(A: T.Tensor((n,), "float16"), B: T.Tensor((n,), "float16")):
        with T.Kernel(n // threads, threads=threads) as bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((threads,), "float16")
            with T.attr("default", "async_scope", 1):
                S[tx] = A[bx * threads + tx]
            T.sync_threads()
            B[bx * threads + tx] = S[threads - 1 - tx]
    return main


def test_an_async_scope_attribute_runs_its_copies(ptxas):
    a = torch.randn(512).half()
    b = tilelang.compile(async_scope_copy(512), out_idx=[1])(a)
    assert torch.equal(b, a.view(4, 128).flip(1).reshape(-1))
    for arch in ("sm_80", "sm_90a"):
        ptxas(tilelang.compile(async_scope_copy(512), out_idx=[1], target=f"cuda -arch={arch}")
              .get_kernel_source(), arch)


@pytest.mark.gpu
def test_gpu_an_async_scope_attribute_runs_its_copies():
    a = torch.randn(4096, device="cuda").half()
    b = tilelang.compile(async_scope_copy(4096), out_idx=[1])(a)
    assert torch.equal(b.cpu(), a.cpu().view(32, 128).flip(1).reshape(-1))


def wide_allreduce(n=1024, threads=256):
    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=threads):
            tid = T.get_thread_binding(0)
            part = T.alloc_local((1,), "float32")
            total = T.alloc_local((1,), "float32")
            part[0] = 0.0
            for k in T.serial(n // threads):
                part[0] += X[k * threads + tid]
            with T.attr(T.comm_reducer(lambda x, y: x + y, [T.float32(0)]), "reduce_scope",
                        T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), part[0], True, total[0], tid,
                                                  dtype="handle"))
            if tid == 0:
                Y[0] = total[0]
    return main


def test_a_spill_of_the_allreduces_own_scratch_says_so(monkeypatch):
    """The warning names the all-reduce's per-thread copy of its group, which more threads
    make larger (it advised more threads)."""
    from tilejit.passes.registers import RegisterSpillWarning
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    x = torch.randn(1024)
    with pytest.warns(RegisterSpillWarning, match=r"T.tvm_thread_allreduce's own scratch "
                                                   r"\(256 words.*an all-reduce over fewer "
                                                   r"threads"):
        y = tilelang.compile(wide_allreduce(), out_idx=-1)(x)
    torch.testing.assert_close(y.double(), x.double().sum().reshape(1), rtol=1e-5, atol=1e-4)
