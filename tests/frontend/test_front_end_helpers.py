"""A helper or ``@T.macro`` called as a statement whose body uses what the front end
rewrites in a kernel's own body (``T.serial``/``T.unroll`` loops, ``T.alloc_var``
variables, element atomics, ``T.floordiv``, …) is inlined as one holding tile operations
is (a device function cannot hold them: Numba does not know them). In simulation against
torch, in PTX (sm_80, sm_90a) and, in the GPU twin, on the device against the
simulator."""
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T


@T.macro
def row_sum(A, r, out):
    acc = T.alloc_var("float32")
    acc = 0.0
    for j in T.serial(16):
        acc += A[r, j]
    out[r] = acc


@T.macro
def count(C):
    T.atomic_add(C[0], 1.0)


def floor_twice(A, r, out):
    v = T.alloc_var("float32", init=0.0)
    for k in T.unroll(2):
        v += T.floordiv(A[r, k], 1.0)
    out[r] = v


def _kernel():
    @T.prim_func
    def main(A: T.Tensor((8, 16), "float32"), O: T.Tensor((8,), "float32"),
             F: T.Tensor((8,), "float32"), C: T.Tensor((1,), "float32")):
        with T.Kernel(8, threads=32) as bx:
            row_sum(A, bx, O)
            floor_twice(A, bx, F)
            count(C)
    return main


def _run(device="cpu"):
    torch.manual_seed(0)
    a = (torch.randn(8, 16) * 4).to(device)     # the same numbers on either device
    c = torch.zeros(1, device=device)
    o, f = tilelang.compile(_kernel(), out_idx=[1, 2])(a, c)
    return a, o, f, c


def test_in_simulation():
    a, o, f, c = _run()
    torch.testing.assert_close(o, a.sum(1), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(f, torch.floor(a[:, 0]) + torch.floor(a[:, 1]))
    assert c.item() == 8 * 32                # every thread of the 8 blocks


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_it_assembles(ptxas, arch):
    ptxas(tilelang.compile(_kernel(), out_idx=[1, 2], target="cuda").get_kernel_source(
        arch=arch), arch)


@pytest.mark.gpu
def test_on_the_gpu():
    a, o, f, c = _run("cuda")
    _, o_sim, f_sim, c_sim = _run()
    torch.testing.assert_close(o.cpu(), o_sim, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(f.cpu(), f_sim)
    assert c.item() == c_sim.item() == 8 * 32


def square(x):
    return x * x


def activation(x, fn=square):
    return fn(x)


def test_a_helper_as_a_default_argument_of_a_helper(ptxas):
    """``def act(x, fn=square)`` called as ``act(A[i])``: the default helper is inlined as
    one the body names (it was an internal error: Numba cannot type a function value)."""
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                B[i] = activation(A[i])
    a = torch.randn(64)
    torch.testing.assert_close(tilelang.compile(main, out_idx=[1])(a), a * a)
    ptxas(tilelang.compile(main, out_idx=[1], target="cuda").get_kernel_source(arch="sm_80"),
          "sm_80")
