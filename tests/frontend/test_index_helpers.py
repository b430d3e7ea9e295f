"""An index a plain Python helper builds: ``y[coords(r, c)]`` with ``coords`` returning a
tuple (by one ``return`` of its parameters' expressions, or by Python over a
compile-time shape: a graph compiler's N-d layer norm), and a macro holding the
launch called as ``body(*ops)`` from a helper that was handed the tuple of tensors
(frontend/index_helpers.py, kernel_macros.inline_call)."""
import pytest

import tilejit as tilelang
import tilejit.language as T

torch = pytest.importorskip("torch")

SHAPE = (2, 3, 40)


def split(r, c):
    return (r // 3, r % 3, c)


def row_coordinates(row, channel, shape):
    """The N-d index of element ``channel`` of flat row ``row`` (Python over the shape)."""
    coords = []
    for extent in reversed(shape[:-1]):
        coords.append(row % extent)
        row = row // extent
    return tuple(reversed(coords)) + (channel,)


@T.macro
def twice(x, y):
    with T.Kernel(6, threads=64) as r:
        c = T.get_thread_binding()
        if c < SHAPE[-1]:
            y[split(r, c)] = x[split(r, c)] * 2.0


def emit(ops):
    twice(*ops)


def direct():
    @T.prim_func
    def main(x: T.Tensor(SHAPE, "float32"), y: T.Tensor(SHAPE, "float32")):
        twice(x, y)
    return main


def through_a_helper():
    @T.prim_func
    def main(x: T.Tensor(SHAPE, "float32"), y: T.Tensor(SHAPE, "float32")):
        emit((x, y))
    return main


def traced(shape=SHAPE):
    @T.prim_func
    def main(x: T.Tensor(shape, "float32"), y: T.Tensor(shape, "float32")):
        with T.Kernel(2 * 3, threads=64) as row:
            c = T.get_thread_binding()
            if c < shape[-1]:
                where = row_coordinates(row, c, shape)
                y[where] = x[where] + x[row_coordinates(row, 0, shape)]
    return main


@pytest.mark.parametrize("make", [direct, through_a_helper], ids=["direct", "star_args"])
def test_a_helpers_tuple_is_the_index(make):
    x = torch.randn(SHAPE)
    y = torch.zeros(SHAPE)
    tilelang.compile(make(), target="sim")(x, y)
    torch.testing.assert_close(y, 2 * x)


def test_a_helper_run_over_a_compile_time_shape_gives_the_index():
    x = torch.randn(SHAPE)
    y = torch.zeros(SHAPE)
    tilelang.compile(traced(), target="sim")(x, y)
    torch.testing.assert_close(y, x + x[..., :1])


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_assembles(arch, ptxas):
    ptxas(tilelang.compile(traced()).get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
def test_on_the_gpu_against_torch_and_the_simulator():
    x = torch.randn(SHAPE, device="cuda")
    for make in (direct, through_a_helper, traced):
        y = torch.zeros(SHAPE, device="cuda")
        tilelang.compile(make())(x, y)
        sim = torch.zeros(SHAPE)
        tilelang.compile(make(), target="sim")(x.cpu(), sim)
        torch.testing.assert_close(y.cpu(), sim)
