"""A ``T.Parallel`` over part of a fragment (issue 27): ``F[k, j]`` in a loop over ``j``,
k from an enclosing serial loop or a constant, as TileLang's GQA decode combine kernel
writes ``lse_local[k, j]``. The layout pass gives F the loop's layout for the dimensions
the loop covers and holds the fixed ones in each thread's slots
(``passes/layout_inference.py``: ``_expand``/``_restrict``); the simulator defines the
results."""
import math

import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError

ARCHS = ("sm_80", "sm_90a")


@tilejit.kernel
def combine(LSE, Out, S: T.constexpr, N: T.constexpr):
    """Row-selected writes, a reduction over the fixed dimension, row-selected reads
    (the decode combine: a log-sum-exp over S splits)."""
    with T.Kernel(T.ceildiv(LSE.shape[0], N), threads=128) as bx:
        lse = T.alloc_fragment([S, N], "float32")
        mx = T.alloc_fragment([N], "float32")
        acc = T.alloc_fragment([N], "float32")
        T.clear(acc)
        for k in T.serial(S):
            for j in T.Parallel(N):
                lse[k, j] = LSE[bx * N + j, k]
        T.reduce_max(lse, mx, dim=0, clear=True)
        for k in T.serial(S):
            for j in T.Parallel(N):
                acc[j] += T.exp2(lse[k, j] - mx[j])
        for j in T.Parallel(N):
            Out[bx * N + j] = T.log2(acc[j]) + mx[j]


@tilejit.kernel
def combine_tl(LSE, Part, Out, S: T.constexpr, D: T.constexpr):
    """TileLang's combine kernel as written (example_gqa_decode.py): a full loop writes
    the fragment, reduce_max over dim 0, then serial loops over row-selected reads."""
    with T.Kernel(LSE.shape[0], threads=128) as by:
        po = T.alloc_fragment([D], "float32")
        o = T.alloc_fragment([D], "float32")
        lse = T.alloc_fragment([S, 128], "float32")
        logsum = T.alloc_fragment([128], "float32")
        mx = T.alloc_fragment([128], "float32")
        scale = T.alloc_fragment([128], "float32")
        T.clear(logsum)
        T.clear(o)
        for k, j in T.Parallel(S, 128):
            lse[k, j] = LSE[by, k]
        T.reduce_max(lse, mx, dim=0, clear=True)
        for k in T.serial(S):
            for j in T.Parallel(128):
                logsum[j] += T.exp2(lse[k, j] - mx[j])
        for j in T.Parallel(128):
            logsum[j] = T.log2(logsum[j]) + mx[j]
        for k in T.serial(S):
            for i in T.Parallel(D):
                po[i] = Part[by, k, i]
            for j in T.Parallel(128):
                scale[j] = T.exp2(lse[k, j] - logsum[j])
            for i in T.Parallel(D):
                o[i] += po[i] * scale[i]
        for i in T.Parallel(D):
            Out[by, i] = o[i]


@tilejit.kernel
def rows_3d(X, Y, S: T.constexpr, M: T.constexpr, N: T.constexpr):
    """A 3-d fragment, loops over its last two dimensions, a reduction of the whole
    fragment along dimension 0 and a fragment indexed by a subset of a partial loop."""
    with T.Kernel(1, threads=64) as bx:
        f = T.alloc_fragment([S, M, N], "float32")
        s = T.alloc_fragment([M, N], "float32")
        r = T.alloc_fragment([M], "float32")
        for i in T.Parallel(M):
            r[i] = i * 0.5
        for k in T.serial(S):
            for i, j in T.Parallel(M, N):
                f[k, i, j] = X[k, i, j] * (k + 1) + r[i]
        T.reduce_sum(f, s, dim=0)
        for i, j in T.Parallel(M, N):
            Y[i, j] = s[i, j] + f[S - 1, i, j]


@tilejit.kernel
def constant_rows(X, Y, N: T.constexpr):
    """Constant indices: F[0, j] of a (1, N) fragment (the loop widened to (1, N)) and
    F[1, j] of a (3, N) fragment."""
    with T.Kernel(1, threads=32) as bx:
        u = T.alloc_fragment([1, N], "float32")
        g = T.alloc_fragment([3, N], "float32")
        for j in T.Parallel(N):
            u[0, j] = X[0, j]          # widened to T.Parallel(1, N)
        for j in T.Parallel(N):
            g[0, j] = X[0, j] + 1.0
            g[1, j] = X[1, j] * 2.0
            g[2, j] = X[2, j] - u[0, j]
        for j in T.Parallel(N):
            Y[j] = g[0, j] + g[1, j] + g[2, j] + u[0, j]


@tilejit.kernel
def from_reduced(X, Y, S: T.constexpr):
    """The loop's layout comes from elsewhere (a row max of a 2-d fragment, replicated
    over the threads of a row): the partial fragment takes it, expanded."""
    with T.Kernel(1, threads=128) as bx:
        x = T.alloc_fragment([64, 32], "float32")
        m = T.alloc_fragment([64], "float32")
        h = T.alloc_fragment([S, 64], "float32")
        T.copy(X, x)
        T.reduce_max(x, m, dim=1)
        for k in T.serial(S):
            for i in T.Parallel(64):
                h[k, i] = m[i] * (k + 1)
        for k, i in T.Parallel(S, 64):
            Y[k, i] = h[k, i]


@tilejit.kernel
def rows_copied(X, Y, S: T.constexpr):
    """Only loops over part of the fragment write it (no loop over its whole shape), and
    T.copy moves it to global memory in its layout."""
    with T.Kernel(1, threads=64) as bx:
        f = T.alloc_fragment([S, 256], "float16")
        for k in T.serial(S):
            for j in T.Parallel(256):
                f[k, j] = X[j] * (k + 1)
        f_last = T.alloc_fragment([256], "float16")
        for j in T.Parallel(256):
            f_last[j] = f[S - 1, j] + f[0, j]
        T.copy(f, Y[0:S, :])
        T.copy(f_last, Y[S, :])


@tilejit.kernel
def columns(X, Y, Z, S: T.constexpr):
    """Column-selected: the fixed position last, ``F[i, k]`` in a loop over i."""
    with T.Kernel(1, threads=32) as bx:
        f = T.alloc_fragment([64, S], "float32")
        t = T.alloc_fragment([64], "float32")
        for k in T.serial(S):
            for i in T.Parallel(64):
                f[i, k] = X[k, i] - k
        T.reduce_sum(f, t, dim=1)
        for i, k in T.Parallel(64, S):
            Y[i, k] = f[i, k]
        T.copy(t, Z)


def _rng(seed=0):
    return np.random.default_rng(seed)


def _combine_ref(a):
    m = a.max(1)
    return np.log2(np.exp2(a - m[:, None]).sum(1)) + m


def _combine_tl_ref(lse, part):
    m = lse.max(1)
    logsum = np.log2(np.exp2(lse - m[:, None]).sum(1)) + m
    scale = np.exp2(lse - logsum[:, None])
    return (part * scale[:, :, None]).sum(1)


def _rows_3d_ref(x):
    S, M = x.shape[0], x.shape[1]
    f = x * np.arange(1, S + 1, dtype=np.float32)[:, None, None] + \
        (np.arange(M, dtype=np.float32) * 0.5)[None, :, None]
    return f.sum(0) + f[-1]


def _constant_rows_ref(x):
    return (x[0] + 1.0) + x[1] * 2.0 + (x[2] - x[0]) + x[0]


def _from_reduced_ref(x, S):
    return x.max(1)[None, :] * np.arange(1, S + 1, dtype=np.float32)[:, None]


def _cases():
    r = _rng()
    a = r.standard_normal((256, 4)).astype(np.float32)
    lse = r.standard_normal((3, 8)).astype(np.float32)
    part = r.standard_normal((3, 8, 128)).astype(np.float32)
    x3 = r.standard_normal((3, 8, 16)).astype(np.float32)
    xc = r.standard_normal((3, 64)).astype(np.float32)
    xr = r.standard_normal((64, 32)).astype(np.float32)
    xh = r.standard_normal(256).astype(np.float16)
    want_h = np.concatenate([xh[None, :] * np.arange(1, 4, dtype=np.float16)[:, None],
                             (xh * np.float16(3) + xh)[None, :]]).astype(np.float32)
    return [
        ("combine", combine, lambda: (a, np.zeros(256, np.float32)), 1,
         {"S": 4, "N": 128}, _combine_ref(a)),
        ("combine_tl", combine_tl, lambda: (lse, part, np.zeros((3, 128), np.float32)), 2,
         {"S": 8, "D": 128}, _combine_tl_ref(lse, part)),
        ("rows_3d", rows_3d, lambda: (x3, np.zeros((8, 16), np.float32)), 1,
         {"S": 3, "M": 8, "N": 16}, _rows_3d_ref(x3)),
        ("constant_rows", constant_rows, lambda: (xc, np.zeros(64, np.float32)), 1,
         {"N": 64}, _constant_rows_ref(xc)),
        ("from_reduced", from_reduced, lambda: (xr, np.zeros((4, 64), np.float32)), 1,
         {"S": 4}, _from_reduced_ref(xr, 4)),
        ("columns", columns, lambda: (xc, np.zeros((64, 3), np.float32),
                                      np.zeros(64, np.float32)), 1, {"S": 3},
         xc.T - np.arange(3, dtype=np.float32)[None, :]),
        ("rows_copied", rows_copied, lambda: (xh, np.zeros((4, 256), np.float16)), 1,
         {"S": 3}, want_h),
    ]


CASES = _cases()
IDS = [c[0] for c in CASES]


@pytest.mark.parametrize("name,kernel,make,out,constexprs,want", CASES, ids=IDS)
def test_simulator_matches_numpy(name, kernel, make, out, constexprs, want):
    args = [a.copy() for a in make()]
    kernel(*args, **constexprs)
    np.testing.assert_allclose(np.asarray(args[out], np.float32), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name,kernel,make,out,constexprs,want", CASES, ids=IDS)
def test_ptx_assembles(name, kernel, make, out, constexprs, want, arch, ptxas):
    ptx = kernel.compile(*make(), target="cuda", arch=arch, **constexprs).ptx
    assert f".target {arch}" in ptx
    report = ptxas(ptx, arch)
    if name in ("combine", "rows_3d", "constant_rows"):
        # the serial loops unroll: every slot is a constant, nothing goes to local memory
        assert "ld.local" not in ptx and "st.local" not in ptx, name
        assert " 0 bytes spill stores" in report, report


def test_a_reduction_over_the_fixed_dimension():
    x = _rng(3).standard_normal((3, 64)).astype(np.float32)
    y, z = np.zeros((64, 3), np.float32), np.zeros(64, np.float32)
    columns(x, y, z, S=3)
    np.testing.assert_allclose(z, (x.T - np.arange(3, dtype=np.float32)).sum(1), rtol=1e-6)


def test_the_fixed_dimension_is_held_in_slots():
    """lse[k, j] lives at the loop's slot for j plus k times the loop's slot count, and
    the reduction over dimension 0 is a per-thread one (no shuffles)."""
    a = CASES[0][2]()
    ptx = combine.compile(*a, target="cuda", arch="sm_80", S=4, N=128).ptx
    assert "shfl" not in ptx
    assert "bar.sync" not in ptx


# ------------------------------------------------------------------------ conflicts

@tilejit.kernel
def two_ways(X, Y):
    with T.Kernel(1, threads=32) as bx:
        f = T.alloc_fragment([4, 32], "float32")
        for k in T.serial(4):
            for j in T.Parallel(32):
                f[k, j] = X[k, j]
        for j in T.serial(32):
            for k in T.Parallel(4):
                Y[k, j] = f[k, j]


@tilejit.kernel
def accumulator_rows(A, B, C):
    with T.Kernel(1, threads=128) as bx:
        a = T.alloc_shared([64, 32], "float16")
        b = T.alloc_shared([32, 64], "float16")
        c = T.alloc_fragment([64, 64], "float32")
        T.copy(A, a)
        T.copy(B, b)
        T.gemm(a, b, c, clear_accum=True)
        for i in T.serial(64):
            for j in T.Parallel(64):
                C[i, j] = c[i, j]


@tilejit.kernel
def varying_index(X, Y):
    with T.Kernel(1, threads=32) as bx:
        f = T.alloc_fragment([4, 32], "float32")
        for k, j in T.Parallel(4, 32):
            f[k, j] = X[k, j]
        for j in T.Parallel(32):
            r = j % 4
            Y[0, j] = f[r, j]


def test_a_fragment_indexed_in_part_two_ways_is_an_error():
    x = np.zeros((4, 32), np.float32)
    with pytest.raises(CompileError, match="fragment 'f' is indexed in part.*spreads them over"):
        two_ways.compile(x, x.copy(), target="cuda", arch="sm_80")


def test_a_gemm_accumulator_indexed_by_row_is_an_error():
    a, b = np.zeros((64, 32), np.float16), np.zeros((32, 64), np.float16)
    c = np.zeros((64, 64), np.float32)
    with pytest.raises(CompileError, match="fragment 'c' is indexed in part.*spreads them over"):
        accumulator_rows.compile(a, b, c, target="cuda", arch="sm_80")


def test_an_index_that_varies_in_the_loop_is_still_an_error():
    x = np.zeros((4, 32), np.float32)
    with pytest.raises(CompileError, match="'f'"):
        varying_index.compile(x, x.copy(), target="cuda", arch="sm_80")


# ------------------------------------------------------------------------------ GPU

def _torch_refs():
    """The same results computed by torch (float64) from each case's inputs."""
    import torch

    def combine_ref(a, _o):
        a = torch.from_numpy(a).double()
        m = a.amax(1)
        return torch.log2(torch.exp2(a - m[:, None]).sum(1)) + m

    def combine_tl_ref(lse, part, _o):
        lse, part = torch.from_numpy(lse).double(), torch.from_numpy(part).double()
        logsum = torch.logsumexp(lse * math.log(2), 1) / math.log(2)
        return (part * torch.exp2(lse - logsum[:, None])[:, :, None]).sum(1)

    def rows_3d_ref(x, _y):
        x = torch.from_numpy(x).double()
        f = x * torch.arange(1, x.shape[0] + 1).double()[:, None, None] + \
            (torch.arange(x.shape[1]).double() * 0.5)[None, :, None]
        return f.sum(0) + f[-1]

    def constant_rows_ref(x, _y):
        x = torch.from_numpy(x).double()
        return x[0] + 1.0 + x[1] * 2.0 + x[2]

    def from_reduced_ref(x, y):
        x = torch.from_numpy(x).double()
        return x.amax(1)[None, :] * torch.arange(1, y.shape[0] + 1).double()[:, None]

    def rows_copied_ref(x, y):
        x = torch.from_numpy(x)
        rows = [x * (k + 1) for k in range(y.shape[0] - 1)]
        return torch.stack(rows + [rows[-1] + rows[0]]).double()

    def columns_ref(x, _y, _z):
        return torch.from_numpy(x).double().T - torch.arange(3).double()[None, :]

    return {"columns": columns_ref, "combine": combine_ref, "combine_tl": combine_tl_ref,
            "rows_3d": rows_3d_ref, "constant_rows": constant_rows_ref,
            "from_reduced": from_reduced_ref,
            "rows_copied": rows_copied_ref}


def test_torch_references_match_numpy():
    for name, _kernel, make, _out, _constexprs, want in CASES:
        np.testing.assert_allclose(_torch_refs()[name](*make()).numpy(), want, rtol=1e-4,
                                   atol=1e-4, err_msg=name)


@pytest.mark.gpu
@pytest.mark.parametrize("name,kernel,make,out,constexprs,want", CASES, ids=IDS)
def test_gpu_matches_simulator_and_torch(name, kernel, make, out, constexprs, want):
    import torch
    args = make()
    want = _torch_refs()[name](*args).float().numpy()
    gpu = [torch.from_numpy(a.copy()).cuda() for a in args]
    kernel(*gpu, **constexprs)
    torch.cuda.synchronize()
    sim = [a.copy() for a in args]
    kernel(*sim, **constexprs)
    got = gpu[out].cpu()
    torch.testing.assert_close(got, torch.from_numpy(sim[out]), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got.float(), torch.from_numpy(want), rtol=1e-4, atol=1e-4)


def column_sums(R, C, threads):
    """vllm's mHC post: a (R, C) fragment read at a serial loop's row inside each
    iteration of a T.Parallel over (R, C), in a block wider than the loop's layout uses:
    the threads the loop leaves out hold replicas it does not read (only a fragment the
    loop writes must be held by threads that run it)."""
    @T.prim_func
    def main(B: T.Tensor((R, C), "float32"), X: T.Tensor((R, C), "float32")):
        with T.Kernel(1, threads=threads):
            b = T.alloc_fragment((R, C), "float32")
            x = T.alloc_fragment((R, C), "float32")
            T.copy(B, b)
            for o, h in T.Parallel(R, C):
                x[o, h] = 0.0
                for i in T.serial(R):
                    x[o, h] += b[i, h] * (o + 1)
            T.copy(x, X)
    return main


COLUMN_CASES = [(4, 64, 128), (4, 64, 256), (4, 128, 256), (8, 32, 256)]


@pytest.mark.parametrize("R, C, threads", COLUMN_CASES)
def test_a_row_read_inside_the_iteration_in_a_wide_block(R, C, threads, ptxas):
    import torch
    b = torch.randn(R, C)
    x = tilejit.compile(column_sums(R, C, threads), out_idx=[1])(b)
    want = b.double().sum(0, keepdim=True) * torch.arange(1, R + 1).double()[:, None]
    torch.testing.assert_close(x.double(), want, rtol=1e-5, atol=1e-5)
    for arch in ARCHS:
        ptxas(tilejit.compile(column_sums(R, C, threads), out_idx=[1],
                              target=f"cuda -arch={arch}").get_kernel_source(), arch)


@pytest.mark.gpu
@pytest.mark.parametrize("R, C, threads", COLUMN_CASES)
def test_gpu_a_row_read_inside_the_iteration_in_a_wide_block(R, C, threads):
    import torch
    b = torch.randn(R, C, generator=torch.Generator().manual_seed(R * C))
    kernel = tilejit.compile(column_sums(R, C, threads), out_idx=[1])
    x = kernel(b.cuda()).cpu()
    want = b.double().sum(0, keepdim=True) * torch.arange(1, R + 1).double()[:, None]
    torch.testing.assert_close(x.double(), want, rtol=1e-5, atol=1e-5)
    # the GPU contracts x += b * (o + 1) into an fma, the simulator rounds the product
    # first: one rounding apart in each step (an H100 run saw 1.5e-6 where a column's sum
    # cancels)
    torch.testing.assert_close(x, kernel(b), rtol=1e-5, atol=1e-5)


def mixed_rows(HC, HB, threads=128):
    """vllm's mHC post mean: a loop over one row's columns (the row a serial loop's
    outside it) reads another fragment at a serial loop's row *inside* each iteration,
    `b[i, h]` with all of the loop's indices: each thread holds every row of its columns."""
    @T.prim_func
    def main(B: T.Tensor((HC, HB), "float32"), A: T.Tensor((HC, HC), "float32"),
             X: T.Tensor((HC, HB), "float32")):
        with T.Kernel(1, threads=threads):
            b = T.alloc_fragment((HC, HB), "float32")
            a = T.alloc_fragment((HC, HC), "float32")
            x = T.alloc_fragment((HC, HB), "float32")
            T.copy(B, b)
            T.copy(A, a)
            for o in T.serial(HC):
                for h in T.Parallel(HB):
                    x[o, h] = 0.0
                    for i in T.serial(HC):
                        x[o, h] += a[i, o] * b[i, h]
            T.copy(x, X)
    return main


def test_a_row_of_a_serial_loop_inside_the_iteration(ptxas):
    import torch
    b, a = torch.randn(4, 128), torch.randn(4, 4)
    x = tilejit.compile(mixed_rows(4, 128), out_idx=[2])(b, a)
    torch.testing.assert_close(x.double(), a.double().T @ b.double(), rtol=1e-5, atol=1e-5)
    for arch in ARCHS:
        ptxas(tilejit.compile(mixed_rows(4, 128), out_idx=[2], target=f"cuda -arch={arch}")
              .get_kernel_source(), arch)


@pytest.mark.gpu
def test_gpu_a_row_of_a_serial_loop_inside_the_iteration():
    import torch
    b, a = torch.randn(4, 128), torch.randn(4, 4)
    kernel = tilejit.compile(mixed_rows(4, 128), out_idx=[2])
    x = kernel(b.cuda(), a.cuda()).cpu()
    torch.testing.assert_close(x.double(), a.double().T @ b.double(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(x, kernel(b, a), rtol=1e-6, atol=1e-6)
