"""Python's expressions in a T.Parallel body compute per lane in the simulator as each
GPU thread's code computes them (Numba's): ``and``/``or`` give an operand's value
(``3 and 6`` is 6, ``0 or -2`` is -2), ``max``/``min``/``abs``/``bool``/``int``/
``float``/``round`` take lane arrays, ``-(x > 0)`` is an integer, and a helper's ``a if
c else b`` selects lane by lane. ``abs()`` of a float compiles (``llvm.fabs``). The
simulator against torch here and in PTX (sm_80, sm_90a); the GPU twin against the
simulator."""
import pytest
import torch

import tilejit
import tilejit.language as T


def relu_diff(x, y):
    return x - y if x > y else 0.0


def _builtins():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32"),
             C: T.Tensor((8, 64), "float32")):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                C[0, i] = max(A[i], 0.0, B[i])
                C[1, i] = min(A[i], B[i])
                C[2, i] = bool(A[i] > 0)
                C[3, i] = round(A[i] * 3)
                C[4, i] = int(A[i] * 3) + float(B[i])
                C[5, i] = -(A[i] > 0)
                C[6, i] = relu_diff(A[i], B[i])
                C[7, i] = abs(A[i]) if A[i] > 0 or B[i] > 0 else 0.0
    return main


def _and_or():
    @T.prim_func
    def main(A: T.Tensor((4,), "int32"), B: T.Tensor((4,), "int32"),
             C: T.Tensor((4,), "int32"), D: T.Tensor((4,), "int32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(4):
                C[i] = A[i] and B[i]
                D[i] = A[i] or B[i]
    return main


def _expected(a, b):
    zero = torch.zeros_like(a)
    return torch.stack([
        torch.maximum(torch.maximum(a, zero), b), torch.minimum(a, b), (a > 0).float(),
        torch.round(a * 3), torch.trunc(a * 3) + b, -(a > 0).float(),
        torch.where(a > b, a - b, zero), torch.where((a > 0) | (b > 0), a.abs(), zero)])


def _run_builtins(device="cpu"):
    torch.manual_seed(0)
    a, b = torch.randn(64).to(device), torch.randn(64).to(device)  # same on either device
    c = torch.zeros(8, 64, device=device)
    tilejit.compile(_builtins())(a, b, c)
    return a, b, c


def _run_and_or(device="cpu"):
    a = torch.tensor([0, 3, -2, 5], dtype=torch.int32, device=device)
    b = torch.tensor([7, 6, 0, 9], dtype=torch.int32, device=device)
    c, d = torch.zeros_like(a), torch.zeros_like(a)
    tilejit.compile(_and_or())(a, b, c, d)
    return c.tolist(), d.tolist()


def test_builtins_per_lane():
    a, b, c = _run_builtins()
    torch.testing.assert_close(c, _expected(a, b))


def test_and_or_give_an_operand_per_lane():
    assert _run_and_or() == ([0, 6, 0, 9], [7, 3, -2, 5])


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_they_assemble(ptxas, arch):
    ptx = tilejit.compile(_builtins(), target="cuda").get_kernel_source(arch=arch)
    assert "abs.f32" in ptx
    ptxas(ptx, arch)
    ptxas(tilejit.compile(_and_or(), target="cuda").get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
def test_on_the_gpu_as_in_the_simulator():
    a, b, c = _run_builtins("cuda")
    torch.testing.assert_close(c.cpu(), _expected(a, b).cpu())
    _, _, c_sim = _run_builtins()
    torch.testing.assert_close(c.cpu(), c_sim)
    assert _run_and_or("cuda") == _run_and_or() == ([0, 6, 0, 9], [7, 3, -2, 5])


def test_an_integer_power_is_an_error_at_the_kernels_line():
    @T.prim_func
    def main(A: T.Tensor((64,), "int32"), C: T.Tensor((64,), "int32")):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                C[i] = A[i] ** 2            # marker: integer power
    with pytest.raises(tilejit.CompileError, match=r"an integer raised to a power .* write "
                                                   r"the product \(x \* x\)") as info:
        tilejit.compile(main, target="cuda").get_kernel_source(arch="sm_80")
    assert info.value.filename == __file__
    assert "marker: integer power" in open(__file__).read().splitlines()[
        info.value.lineno - 1]


SCALE = None
EMPTY = ()
OPTIONS = (2, 3)
USE_DOUBLE = True


def scaled(x):
    s = SCALE or 2.0                    # Python values: Python's `or`, under a lane mask too
    return x * s


def picked(x):
    o = EMPTY or OPTIONS
    return x + max(o[0], o[1])


def doubled(x):
    return x * 2


def tripled(x):
    return x * 3


def chosen(x):
    f = doubled if USE_DOUBLE else tripled
    return f(x)


def _masked(helper):
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), C: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                if A[i] > 0:
                    C[i] = helper(A[i])
                else:
                    C[i] = 0.0
    return main


@pytest.mark.parametrize("helper, want", [(scaled, lambda a: a * 2),
                                          (picked, lambda a: a + 3),
                                          (chosen, lambda a: a * 2)])
def test_python_values_in_a_helper_keep_pythons_meaning(helper, want):
    """``None or 2.0``, ``() or (2, 3)``, ``max`` of Python ints and a choice between two
    functions, in a helper called under a lane mask: Python's, not the lanes' forms."""
    a = torch.randn(64)
    c = torch.zeros(64)
    tilejit.compile(_masked(helper))(a, c)
    torch.testing.assert_close(c, torch.where(a > 0, want(a), torch.zeros(64)))


def test_max_of_narrow_lanes_and_a_python_number_promotes_as_on_the_gpu():
    @T.prim_func
    def main(A: T.Tensor((4,), "int8"), C: T.Tensor((4,), "int32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(4):
                C[i] = max(A[i], 200)
    c = torch.zeros(4, dtype=torch.int32)
    tilejit.compile(main)(torch.tensor([1, -5, 100, 127], dtype=torch.int8), c)
    assert c.tolist() == [200, 200, 200, 200]


def shown(C, i, v):
    v = v + 1                           # assigns its parameter: not inlined, as before
    T.print(v)
    C[i] = v


def test_a_helper_that_cannot_be_inlined_stays_a_device_function(capfd):
    @T.prim_func
    def main(A: T.Tensor((4,), "int32"), C: T.Tensor((4,), "int32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(4):
                shown(C, i, A[i])
    c = torch.zeros(4, dtype=torch.int32)
    tilejit.compile(main)(torch.arange(4, dtype=torch.int32), c)
    assert c.tolist() == [1, 2, 3, 4]
