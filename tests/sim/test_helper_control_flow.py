"""Helpers whose control flow the simulator's lane masks cannot follow, and assignments
under masks (found by review): a helper with ``break``/``continue``, a ``return`` in a
loop, a ``while``, or a loop bound read from a lane value runs one lane at a time (a
T.Parallel calling it one iteration at a time); a helper that returns nothing and
branches runs masked; chained, nested-tuple and annotated assignments under a mask
blend each name; ``a if c else b`` of tuples selects item by item; a helper indexing a
global tuple at a lane value, and one called through a module or an object, are
simulated; a helper reads its globals as they are when a kernel is built (as the GPU's
compilation does); ``return``/``break`` in a T.Parallel of a macro is a CompileError, as
in the kernel's own body. In simulation against per-element Python, in PTX (sm_80,
sm_90a) and, in the GPU twin, on the device against the simulator."""
import types

import pytest
import torch

import tilejit
import tilejit.language as T


def prefix_sum(x):                  # break: the sum of k for k < x
    s = 0
    for k in range(8):
        if k >= x:
            break
        s += k
    return s


def odd_sum(x):                     # continue
    s = 0
    for k in range(8):
        if k % 2 == 0 or k > x:
            continue
        s += k
    return s


def first_at_least(x):              # a return in a loop
    for k in range(8):
        if k >= x:
            return k * 10
    return 99


def ceil_sqrt(x):                   # a while over a lane value
    n = 0
    while n * n < x:
        n += 1
    return n


def triangle(n):                    # a loop bound read from a lane value
    s = 0
    for k in range(n):
        s += k
    return s


LUT = (1, 2, 4, 8, 16, 32, 64, 128)


def lookup(k):                      # a global tuple at a lane value
    return LUT[k]


def clamp_sign(x):
    if x < 3:
        return x * 0
    return x


ops = types.SimpleNamespace(triangle=triangle, clamp_sign=clamp_sign)


def _python(fn, x):
    return [fn(v) for v in x]


HELPERS = {"prefix_sum": prefix_sum, "odd_sum": odd_sum, "first_at_least": first_at_least,
           "ceil_sqrt": ceil_sqrt, "triangle": triangle, "lookup": lookup}


def applied(name):
    helper = HELPERS[name]

    @T.prim_func
    def main(A: T.Tensor((8,), "int32"), B: T.Tensor((8,), "int32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(8):
                B[i] = helper(A[i])
    return main


def store_positive(C, i, v):        # returns nothing, branches
    if v > 2:
        C[i] = v * 3


@T.prim_func
def stores_and_attributes(A: T.Tensor((8,), "int32"), B: T.Tensor((8,), "int32"),
                          C: T.Tensor((8,), "int32"), D: T.Tensor((8,), "int32")):
    with T.Kernel(1, threads=32):
        for i in T.Parallel(8):
            B[i] = -1
            store_positive(B, i, A[i])
            C[i] = ops.triangle(A[i])
            D[i] = ops.clamp_sign(A[i])


@T.prim_func
def masked_assignments(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32"),
                       C: T.Tensor((8,), "float32"), D: T.Tensor((8,), "float32")):
    with T.Kernel(1, threads=32):
        for i in T.Parallel(8):
            p = -1.0
            q = -1.0
            u = -5.0
            r = 0.0
            z = 0.0
            if A[i] > 0:
                p = q = A[i]
                u: T.float32 = A[i] * 2.0
                (r, z), w = (A[i], 3.0), 1.0
            s, t = (A[i], 1.0) if A[i] < 0 else (-A[i], 2.0)
            B[i] = p + q
            C[i] = u + r * z
            D[i] = s * t


@T.prim_func
def per_thread(B: T.Tensor((32,), "int32")):
    with T.Kernel(1, threads=32):
        tx = T.get_thread_binding()
        B[tx] = prefix_sum(tx % 9) + ceil_sqrt(tx)


def _run(device="cpu"):
    x = torch.arange(8, dtype=torch.int32)
    out = {}
    for name in HELPERS:
        b = torch.zeros(8, dtype=torch.int32).to(device)
        tilejit.compile(applied(name))(x.to(device), b)
        out[name] = b.cpu().tolist()
    bcd = [torch.zeros(8, dtype=torch.int32).to(device) for _ in range(3)]
    tilejit.compile(stores_and_attributes)(x.to(device), *bcd)
    out["stores"] = [t.cpu().tolist() for t in bcd]
    f = torch.tensor([-2.0, -1.0, 1.0, 2.0, 0.0, 3.0, -4.0, 5.0])
    bcd = [torch.zeros(8).to(device) for _ in range(3)]
    tilejit.compile(masked_assignments)(f.to(device), *bcd)
    out["masked"] = [t.cpu().tolist() for t in bcd]
    b = torch.zeros(32, dtype=torch.int32).to(device)
    tilejit.compile(per_thread)(b)          # lanes are threads here (per-thread code)
    out["per_thread"] = b.cpu().tolist()
    return out


def _expected():
    x = list(range(8))
    out = {name: _python(fn, x) for name, fn in HELPERS.items()}
    out["stores"] = [[v * 3 if v > 2 else -1 for v in x], _python(triangle, x),
                     _python(clamp_sign, x)]
    f = [-2.0, -1.0, 1.0, 2.0, 0.0, 3.0, -4.0, 5.0]
    out["masked"] = [[2 * v if v > 0 else -2.0 for v in f],
                     [2 * v + 3 * v if v > 0 else -5.0 for v in f],
                     [v * 1.0 if v < 0 else -v * 2.0 for v in f]]
    out["per_thread"] = [prefix_sum(t % 9) + ceil_sqrt(t) for t in range(32)]
    return out


def test_in_simulation():
    assert _run() == _expected()


def test_a_helpers_globals_are_read_when_a_kernel_is_built():
    global LUT
    saved = LUT
    try:
        x = torch.arange(8, dtype=torch.int32)
        b = torch.zeros(8, dtype=torch.int32)
        tilejit.compile(applied("lookup"))(x, b)
        assert b.tolist() == list(saved)
        LUT = tuple(v + 1000 for v in saved)
        tilejit.compile(applied("lookup"))(x, b)
        assert b.tolist() == list(LUT)
    finally:
        LUT = saved


@T.macro
def fill_until(B, A):
    for i in T.Parallel(8):
        if A[i] > 3:
            return                  # RETURN-IN-MACRO
        B[i] = 1.0


def leave_early(B, A):
    for i in T.Parallel(8):
        if A[i] > 3:
            break                   # BREAK-IN-HELPER
        B[i] = 1.0


@pytest.mark.parametrize("helper, mark, what", [(fill_until, "RETURN-IN-MACRO", "return"),
                                                (leave_early, "BREAK-IN-HELPER", "break")])
def test_leaving_a_parallel_loop_of_a_helper_is_an_error(helper, mark, what):
    @T.prim_func
    def main(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32):
            helper(B, A)
    with pytest.raises(tilejit.CompileError, match=f"{what} inside a T.Parallel loop") as e:
        tilejit.compile(main)(torch.zeros(8), torch.zeros(8))
    assert mark in str(e.value)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_they_assemble(ptxas, arch):
    for f in [applied(name) for name in HELPERS] + [stores_and_attributes,
                                                    masked_assignments, per_thread]:
        ptxas(tilejit.compile(f, target="cuda").get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
def test_on_the_gpu_as_in_the_simulator():
    gpu = _run("cuda")
    assert gpu == _expected()
    assert gpu == _run()


def test_an_index_that_is_a_tensor_parameter_is_an_error():
    @T.prim_func
    def bare(A: T.Tensor((8,), "float32"), I: T.Tensor((8,), "int32"),
             B: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(8):
                B[i] = A[I]

    @T.prim_func
    def summed(A: T.Tensor((8,), "float32"), I: T.Tensor((8,), "int32"),
               B: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(8):
                B[i] = A[I + 1]
    for f in (bare, summed):
        with pytest.raises(tilejit.CompileError, match=r"indexes with `I`, a tensor or tile"):
            tilejit.compile(f)(torch.zeros(8), torch.zeros(8, dtype=torch.int32),
                               torch.zeros(8))


def count_positive(C, x):
    if x > 0:
        T.atomic_add(C[0], 1)
        return x
    return x * 0


def test_an_element_atomic_in_a_helper_with_an_early_return_is_inlined():
    """(Before the early returns were restructured, tail_returns.py, this helper could
    not be inlined, and a device function cannot hold an element atomic: an error.)"""
    @T.prim_func
    def main(A: T.Tensor((8,), "float32"), C: T.Tensor((1,), "int32"),
             B: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(8):
                B[i] = count_positive(C, A[i])
    a = torch.tensor([1.0, -2.0, 3.0, 0.0, -1.0, 5.0, 2.0, -3.0])
    c, b = torch.zeros(1, dtype=torch.int32), torch.zeros(8)
    tilejit.compile(main)(a, c, b)
    torch.testing.assert_close(b, torch.where(a > 0, a, a * 0))
    assert c.item() == 4
    ptx = tilejit.compile(main, target="cuda").get_kernel_source(arch="sm_90a")
    assert "atom.global.add" in ptx or "red.global.add" in ptx


def first_positive(C, x):
    for k in T.serial(4):
        if x > k:
            T.atomic_add(C[0], 1)
            return x
    return x * 0


def test_a_return_inside_a_loop_of_a_helper_to_inline_says_why():
    @T.prim_func
    def main(A: T.Tensor((8,), "float32"), C: T.Tensor((1,), "int32"),
             B: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(8):
                B[i] = first_positive(C, A[i])
    with pytest.raises(tilejit.CompileError, match=r"first_positive\(\), called here: a "
                                                   r"`return` inside a loop or `with`"):
        tilejit.compile(main, target="cuda").get_kernel_source(arch="sm_90a")


# -- found by review of the above: a loop bound one value for every lane stays lane-wise -----
def row_total(A, r, n):
    s = 0.0
    for k in range(n):              # n: one value for every lane (16)
        s += A[r, k]
    return s


def through(A, i):
    return row_total(A, i, 16)


def halved(x, n):
    s = x
    for _ in range(n):
        s = s * 0.5
    return s


def first_half(x):                  # an int `return 0` beside a float one
    for k in range(4):
        if x > k:
            return x * 0.5
    return 0


def pick(x, k):                     # a tuple of lane values at a lane index
    vals = (x, x * 2.0, x * 3.0)
    return vals[k]


@T.prim_func
def uniform_bounds(A: T.Tensor((32, 16), "float32"), B: T.Tensor((32,), "float32"),
                   C: T.Tensor((32,), "float32"), D: T.Tensor((32, 16), "float32")):
    with T.Kernel(1, threads=32):
        for i in T.Parallel(32):
            B[i] = through(A, i)
        for i, j in T.Parallel(32, 16):
            D[i, j] = halved(A[i, j], 2)
        tx = T.get_thread_binding()
        C[tx] = row_total(A, tx, 16)


@T.prim_func
def mixed_returns(A: T.Tensor((32,), "float32"), K: T.Tensor((32,), "int32"),
                  B: T.Tensor((32,), "float32"), C: T.Tensor((32,), "float32")):
    with T.Kernel(1, threads=32):
        for i in T.Parallel(32):
            C[i] = pick(A[i], K[i])
        tx = T.get_thread_binding()
        B[tx] = first_half(A[tx])


def _run_uniform(device="cpu"):
    a = torch.randn(32, 16)
    b, c, d = torch.zeros(32), torch.zeros(32), torch.zeros(32, 16)
    outs = [t.to(device) for t in (b, c, d)]
    tilejit.compile(uniform_bounds)(a.to(device), *outs)
    x = torch.arange(32) * 0.5
    k = torch.arange(32, dtype=torch.int32) % 3
    bc = [torch.zeros(32).to(device) for _ in range(2)]
    tilejit.compile(mixed_returns)(x.to(device), k.to(device), *bc)
    return a, x, k, [t.cpu() for t in outs + bc]


def test_uniform_loop_bounds_and_mixed_returns():
    a, x, k, (b, c, d, half, picked) = _run_uniform()
    torch.testing.assert_close(b, a.sum(1), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(c, a.sum(1), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(d, a / 4)
    assert half.tolist() == [first_half(v) for v in x.tolist()]
    assert picked.tolist() == (x * (k + 1)).tolist()


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_uniform_bounds_and_mixed_returns_assemble(ptxas, arch):
    for f in (uniform_bounds, mixed_returns):
        ptxas(tilejit.compile(f, target="cuda").get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
def test_uniform_loop_bounds_and_mixed_returns_on_the_gpu():
    torch.manual_seed(0)
    *_, gpu = _run_uniform("cuda")
    torch.manual_seed(0)
    *_, sim = _run_uniform()
    for g, s in zip(gpu, sim):
        torch.testing.assert_close(g, s, atol=1e-5, rtol=1e-5)
