"""A T.Parallel over extents known only at run time (TileLang's `T.Parallel(span)` with
`span = T.min(valid_len, max_len)`): the block's threads share it as an element loop,
with block barriers around it, on the GPU; the simulator iterates the extents it is
given."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError
from kernel_files import kernel_module


def valid_prefix(max_len=512, threads=128):
    @T.prim_func
    def main(A: T.Tensor((max_len,), "float32"), B: T.Tensor((max_len,), "float32"),
             valid_len: T.int32):
        with T.Kernel(1, threads=threads) as _:
            for i in T.Parallel(max_len):
                B[i] = 0.0
            span = T.min(valid_len, max_len)
            for i in T.Parallel(span):
                B[i] = A[i] - 1.0
    return main


def _expected(a, valid_len):
    out = np.zeros_like(a)
    n = max(0, min(valid_len, a.size))
    out[:n] = a[:n] - 1
    return out


@pytest.mark.parametrize("valid_len", [0, 13, 200, 600, -3])
def test_a_run_time_extent_in_simulation(valid_len):
    a = np.random.default_rng(0).random(512, dtype=np.float32)
    b = np.full(512, 7.0, np.float32)
    tilejit.compile(valid_prefix(), target="sim")(a, b, valid_len)
    np.testing.assert_array_equal(b, _expected(a, valid_len))


def test_the_gpus_element_loop_and_its_barriers(ptxas):
    ptx = tilejit.compile(valid_prefix(), target="cuda -arch=sm_90a").get_kernel_source()
    assert ptx.count("bar.sync") >= 2          # before and after the shared loop
    ptxas(ptx, "sm_90a")
    ptxas(tilejit.compile(valid_prefix(), target="cuda -arch=sm_80").get_kernel_source(),
          "sm_80")


@tilejit.kernel
def two_extents(A, B, m, n):
    """Two run-time extents over a shared tile: row-major, the tile's hazards ordered."""
    with T.Kernel(1, threads=64):
        S = T.alloc_shared((8, 16), "float32")
        for i, j in T.Parallel(m, n):
            S[i, j] = A[i, j] * 2.0
        for i, j in T.Parallel(m, n):
            B[i, j] = S[i, j] + 1.0


def test_several_run_time_extents(ptxas):
    a = np.random.default_rng(1).random((8, 16), dtype=np.float32)
    b = np.zeros((8, 16), np.float32)
    tilejit.kernel(two_extents.func, target="sim")(a, b, 5, 7)
    expected = np.zeros((8, 16), np.float32)
    expected[:5, :7] = a[:5, :7] * 2 + 1
    np.testing.assert_array_equal(b, expected)
    ptxas(two_extents.compile(a, b, 5, 7, target="cuda", arch="sm_90a").ptx, "sm_90a")


def _module(tmp_path, body):
    return kernel_module(tmp_path, "dynamic_kernel",
                         "import tilejit\nimport tilejit.language as T\n\n\n@tilejit.kernel\n"
                         "def k(A, n):\n    with T.Kernel(1, threads=64):\n"
                         + "".join(f"        {line}\n" for line in body.splitlines())).k


@pytest.mark.parametrize("body, message", [
    ("F = T.alloc_fragment((64,), 'float32')\nfor i in T.Parallel(n):\n    F[i] = A[i]\n"
     "for i in T.Parallel(64):\n    A[i] = F[i]",
     r"a T.Parallel over extents known only at run time indexes fragment 'F'"),
    ("tx = T.get_thread_binding()\nif tx < 32:\n    for i in T.Parallel(n):\n"
     "        A[i] = 0.0",
     r"T.Parallel"),
])
def test_what_it_cannot_share_is_a_compile_error(tmp_path, body, message):
    k = _module(tmp_path, body)
    with pytest.raises(CompileError, match=message):
        k.compile(np.zeros(64, np.float32), 10, target="cuda", arch="sm_90a")


@pytest.mark.gpu
@pytest.mark.parametrize("valid_len", [0, 13, 200, 600])
def test_a_run_time_extent_on_the_gpu(valid_len):
    import torch
    a = torch.rand(512, device="cuda")
    b = torch.full((512,), 7.0, device="cuda")
    tilejit.compile(valid_prefix())(a, b, valid_len)
    np.testing.assert_array_equal(b.cpu().numpy(), _expected(a.cpu().numpy(), valid_len))


def test_negative_extents_make_no_iterations(ptxas):
    a = np.ones((8, 16), np.float32)
    b = np.zeros((8, 16), np.float32)
    tilejit.kernel(two_extents.func, target="sim")(a, b, -2, -3)
    assert not b.any()
    ptx = two_extents.compile(a, b, -2, -3, target="cuda", arch="sm_90a").ptx
    assert "max.s64" in ptx or "max.s32" in ptx


def test_a_branch_on_a_value_read_at_the_thread_index_is_not_every_threads(tmp_path):
    """The branch's condition comes from the thread index through a load: the barriers
    around the loop would hang, so it is refused."""
    k = _module(tmp_path, "tx = T.get_thread_binding()\nv = A[tx]\nif v > 0:\n"
                          "    for i in T.Parallel(n):\n        A[i] = 0.0")
    with pytest.raises(CompileError, match=r"where not every thread reaches it"):
        k.compile(np.zeros(64, np.float32), 10, target="cuda", arch="sm_90a")


@pytest.mark.parametrize("body", [
    "for i in T.Parallel(8):\n    for j in T.Parallel(n):\n        A[i * 8 + j] = 1.0",
    "for i in T.Parallel(n):\n    for j in T.Parallel(n):\n        A[i * 8 + j] = 1.0",
])
def test_nested_loops_of_run_time_extents_are_one_loop(tmp_path, body, ptxas):
    """Perfectly nested T.Parallel loops are one loop over the rectangle
    (frontend/parallel_nests.py), here one of run-time extents: every thread reaches its
    barriers (a nest used to put them inside the outer loop, and was refused)."""
    k = _module(tmp_path, body)
    a = np.zeros(64, np.float32)
    tilejit.kernel(k.func, target="sim")(a, 5)
    expected = np.zeros((8, 8), np.float32)
    expected[:8 if "(8)" in body else 5, :5] = 1.0
    np.testing.assert_array_equal(a, expected.ravel())
    ptx = k.compile(a, 5, target="cuda", arch="sm_90a").ptx
    assert ptx.count("bar.sync") == 2
    ptxas(ptx, "sm_90a")


@pytest.mark.parametrize("body, message", [
    ("tx = T.get_thread_binding()\nif tx >= 32:\n    return\nfor i in T.Parallel(n):\n"
     "    A[i] = 1.0", r"where not every thread reaches it"),
    ("acc = T.alloc_var('float32')\nacc = 0.0\nfor i in T.Parallel(n):\n    acc += A[i]\n"
     "A[0] = acc", r"carries acc from one iteration to the next"),
])
def test_loops_not_every_thread_reaches_or_that_fold_are_refused(tmp_path, body, message):
    """Found by a review: a run-time T.Parallel after a thread-dependent return would
    put block barriers where some threads never arrive;
    a fold into a thread's variable would leave a partial sum in each thread."""
    k = _module(tmp_path, body)
    with pytest.raises(CompileError, match=message):
        k.compile(np.zeros(64, np.float32), 10, target="cuda", arch="sm_90a")


M = 64


@tilejit.kernel
def static_min(A):
    with T.Kernel(1, threads=64):
        for i in T.Parallel(T.min(M, 128)):
            A[i] = 1.0


def test_an_extent_of_constants_is_laid_out_as_a_literal(ptxas):
    a = np.zeros(64, np.float32)
    ptx = static_min.compile(a, target="cuda", arch="sm_90a").ptx
    assert "bar.sync" not in ptx               # laid out: not the shared element loop
    tilejit.kernel(static_min.func, target="sim")(a)
    assert (a == 1).all()


def dynamic_rows(N=64, form=0):
    """A tensor of T.dynamic rows, a T.Parallel over them: one kernel for every row
    count, the extent read at run time (TileLang's loops over a dynamic extent). Form 1
    reads a fragment indexed by the compile-time index only, form 2 stores one value
    into it from every row: the rows run one after another around a laid-out loop over
    the columns. Form 3 indexes the fragment by the row: refused. Form 4 accumulates
    over the rows in it: the rows in turn around a loop over the columns
    (``frontend/accumulating_loops.py``), as the thread holding f[j] runs them."""
    rows = T.dynamic("rows")

    @T.prim_func
    def main(X: T.Tensor((rows, N), "float32"), W: T.Tensor((N,), "float32"),
             Y: T.Tensor((rows, N), "float32")):
        with T.Kernel(1, threads=64):
            f = T.alloc_fragment((N,), "float32")
            T.copy(W, f)
            if form == 0:
                for i, j in T.Parallel(rows, N):
                    Y[i, j] = X[i, j] * 2.0
            elif form == 1:
                for i in T.Parallel(rows):
                    for j in T.Parallel(N):
                        Y[i, j] = X[i, j] * f[j]
            elif form == 2:
                for i, j in T.Parallel(rows, N):  # noqa: B007 - each row stores it
                    f[j] = 3.0
                for i, j in T.Parallel(rows, N):
                    Y[i, j] = X[i, j] + f[j]
            elif form == 3:
                for i in T.Parallel(rows):
                    f[i] = X[i, 0]                  # indexed by the run-time index
            else:
                for i, j in T.Parallel(rows, N):
                    f[j] += X[i, j]                 # carried from row to row
                for j in T.Parallel(N):
                    Y[0, j] = f[j]
    return main


def _rows_expected(x, w, form):
    x64 = x.astype(np.float64)
    if form == 4:
        y = np.zeros_like(x64)
        y[0] = w + x64.sum(0)
        return y
    return {0: x64 * 2, 1: x64 * w, 2: x64 + 3}[form]


@pytest.mark.parametrize("form", [0, 1, 2, 4])
def test_a_dynamic_extent_of_a_prim_func_is_read_at_run_time(form, ptxas):
    rng = np.random.default_rng(form)
    w = rng.random(64, dtype=np.float32)
    kernel = tilejit.compile(dynamic_rows(form=form), target="sim")
    for rows in (1, 5, 37):
        x = rng.random((rows, 64), dtype=np.float32)
        y = np.zeros_like(x)
        kernel(x, w, y)
        np.testing.assert_allclose(y, _rows_expected(x, w, form),
                                   rtol=1e-5 if form == 4 else 1e-6)
    for arch in ("sm_80", "sm_90a"):
        ptxas(tilejit.compile(dynamic_rows(form=form),
                              target=f"cuda -arch={arch}").get_kernel_source(), arch)


@pytest.mark.parametrize("form, message", [
    (3, r"T.Parallel\(rows\)`: a T.Parallel over extents known only at run time indexes "
        r"fragment 'f'")])
@pytest.mark.parametrize("target", ["sim", "cuda -arch=sm_90a"])
def test_a_fragment_a_dynamic_extent_reaches_is_refused(form, message, target):
    """As TileLang refuses it, with a ValueError, when the program is compiled."""
    with pytest.raises(CompileError, match=message) as info:
        tilejit.compile(dynamic_rows(form=form), target=target)
    assert isinstance(info.value, ValueError)


@pytest.mark.gpu
@pytest.mark.parametrize("form", [0, 1, 2, 4])
def test_a_dynamic_extent_of_a_prim_func_on_the_gpu(form):
    import torch
    rng = np.random.default_rng(10 + form)
    w = rng.random(64, dtype=np.float32)
    kernel = tilejit.compile(dynamic_rows(form=form))
    for rows in (1, 37, 300):
        x = rng.random((rows, 64), dtype=np.float32)
        y = torch.zeros(rows, 64, device="cuda")
        kernel(torch.from_numpy(x).cuda(), torch.from_numpy(w).cuda(), y)
        sim = np.zeros_like(x)
        tilejit.compile(dynamic_rows(form=form), target="sim")(x, w, sim)
        np.testing.assert_allclose(y.cpu().numpy(), _rows_expected(x, w, form),
                                   rtol=1e-5 if form == 4 else 1e-6)   # (sums of 300)
        np.testing.assert_array_equal(y.cpu().numpy(), sim)


def split_refused(form, N=64):
    """Bodies whose leading iterations would leave other values when run one after
    another than all at once (found by a review): a store through a name read from the
    fragment, a read of the fragment before its store, a store under a branch on the
    row. Not split: refused as a run-time loop over a fragment."""
    rows = T.dynamic("rows")

    @T.prim_func
    def main(X: T.Tensor((rows, N), "float32"), Y: T.Tensor((rows, N), "float32")):
        with T.Kernel(1, threads=64):
            f = T.alloc_fragment((N,), "float32")
            for j in T.Parallel(N):
                f[j] = 1.0
            if form == 0:
                for i, j in T.Parallel(rows, N):  # noqa: B007 - every row
                    t = f[j] * 2.0
                    f[j] = t
            elif form == 1:
                for i, j in T.Parallel(rows, N):
                    Y[i, j] = X[i, j] + f[j]
                    f[j] = 3.0
            else:
                for i, j in T.Parallel(rows, N):
                    if i % 2 == 0:
                        f[j] = 5.0
                    else:
                        f[j] = 7.0
            for j in T.Parallel(N):
                Y[0, j] = f[j]
    return main


@pytest.mark.parametrize("form", [0, 1, 2])
@pytest.mark.parametrize("target", ["sim", "cuda -arch=sm_90a"])
def test_a_split_that_would_change_the_values_is_not_made(form, target):
    with pytest.raises(CompileError, match=r"T.Parallel over extents known only at run "
                                           r"time indexes fragment 'f'"):
        tilejit.compile(split_refused(form), target=target)


def test_a_loop_of_no_iterations_runs_no_statement():
    """A run-time T.Parallel of 0 iterations whose body stores at a fixed index: nothing
    is stored (the simulator ran such statements once)."""
    @T.prim_func
    def main(F: T.Tensor((4,), "float32"), n: T.int32):
        with T.Kernel(1, threads=32):
            for _i in T.Parallel(T.min(n, 4)):
                F[0] = 5.0
    f = np.zeros(4, np.float32)
    tilejit.compile(main, target="sim")(f, 0)
    assert not f.any()
    tilejit.compile(main, target="sim")(f, 2)
    assert f[0] == 5.0


def named_twice(N=64, BK=64):
    """A name each T.Parallel body binds for itself (`n`), one of them over a run-time
    extent: the loops' own names, not the thread's (a quantized GEMM's staging loops)."""
    @T.prim_func
    def main(X: T.Tensor((N, BK), "float32"), Y: T.Tensor((N, BK), "float32"),
             size: T.int32):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((N, BK), "float32")
            T.clear(S)
            for i, j in T.Parallel(N, size):
                n = bx * N + i
                S[i, j] = X[n, j]
            for i, j in T.Parallel(N, BK):
                n = bx * N + i
                Y[n, j] = S[i, j]
    return main


def _named_twice_expected(x, size):
    out = x.copy()
    out[:, size:] = 0
    return out


def test_a_name_two_parallel_bodies_bind(ptxas):
    x = np.random.default_rng(1).random((64, 64), dtype=np.float32)
    y = np.full((64, 64), 7.0, np.float32)
    tilejit.compile(named_twice(), target="sim")(x, y, 40)
    np.testing.assert_array_equal(y, _named_twice_expected(x, 40))
    for arch in ("sm_80", "sm_90a"):
        ptxas(tilejit.compile(named_twice(), target=f"cuda -arch={arch}").get_kernel_source(),
              arch)


@pytest.mark.gpu
def test_a_name_two_parallel_bodies_bind_on_the_gpu():
    import torch
    x = torch.rand(64, 64)
    y = torch.full((64, 64), 7.0, device="cuda")
    tilejit.compile(named_twice())(x.cuda(), y, 40)
    np.testing.assert_array_equal(y.cpu().numpy(), _named_twice_expected(x.numpy(), 40))
