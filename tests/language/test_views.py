"""T.reshape and T.view of global tensors, as TileLang's programs take them (a flat
tensor viewed as rows, fp16 pairs read as int32 words): in simulation against numpy,
the PTX assembled by ptxas, bad inputs as clear errors, and with ``-m gpu`` against torch
and the simulator."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError


@tilejit.kernel
def rows_of_flat(A, B, rows: T.constexpr = 32, bm: T.constexpr = 8):
    """A is flat (rows * N,): viewed as (rows, N), each block copies bm rows of it into B
    through a shared tile."""
    N = B.shape[1]
    with T.Kernel(T.ceildiv(rows, bm), threads=128) as bx:
        A2 = T.reshape(A, (rows, N))
        S = T.alloc_shared((bm, N), A.dtype)
        T.copy(A2[bx * bm, 0], S)
        T.copy(S, B[bx * bm, 0])


@tilejit.kernel
def halves_as_words(A, B, bm: T.constexpr = 8):
    """Each pair of float16 of A read as one int32 (T.view with a dtype)."""
    M, N = A.shape
    with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
        W = T.view(A, (M, N // 2), dtype=T.int32)
        for i, j in T.Parallel(bm, N // 2):
            if bx * bm + i < M:
                B[bx * bm + i, j] = W[bx * bm + i, j]


@tilejit.kernel
def fill_through_a_view(A, value: T.constexpr = 3.0):
    """Writes through a view are writes to the tensor."""
    n = A.shape[0] * A.shape[1]
    with T.Kernel(1, threads=128) as bx:
        F = T.reshape(A, (n,))
        for i in T.Parallel(n):
            F[i] = value


@tilejit.kernel
def view_of_a_tile_in_place(A, B):
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((8, 8), T.float32)
        T.copy(A[0:64], T.reshape(S, (64,)))
        T.copy(S, B)


def test_reshape_of_a_flat_tensor():
    a = np.arange(32 * 64, dtype=np.float32)
    b = np.zeros((32, 64), np.float32)
    rows_of_flat(a, b)
    np.testing.assert_array_equal(b, a.reshape(32, 64))


def test_view_as_another_dtype_is_bit_exact():
    h = np.random.default_rng(0).standard_normal((20, 64)).astype(np.float16)
    w = np.zeros((20, 32), np.int32)
    halves_as_words(h, w)
    np.testing.assert_array_equal(w, h.view(np.int32))


def test_writes_through_a_view_reach_the_tensor():
    a = np.zeros((4, 16), np.float32)
    fill_through_a_view(a)
    assert (a == 3.0).all()


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_ptx(arch, ptxas):
    a, b = np.zeros(32 * 64, np.float32), np.zeros((32, 64), np.float32)
    ptxas(rows_of_flat.compile(a, b, target="cuda", arch=arch).ptx, arch)
    h, w = np.zeros((20, 64), np.float16), np.zeros((20, 32), np.int32)
    ptxas(halves_as_words.compile(h, w, target="cuda", arch=arch).ptx, arch)


def test_a_tensor_that_is_not_contiguous_is_refused_before_the_launch():
    h = np.zeros((20, 128), np.float16)[:, ::2]
    with pytest.raises(ValueError, match=r"argument 'A': the kernel views A with another "
                                         r"shape \(line \d+: `W = T.view\(A, \(M, N // 2\), "
                                         r"dtype=T.int32\)`\), which needs a contiguous"):
        halves_as_words(h, np.zeros((20, 32), np.int32))


def test_a_view_of_a_tile_written_in_the_call(ptxas):
    # the front end names it before the call (tests/frontend/test_inline_views.py)
    a, b = np.arange(64, dtype=np.float32), np.zeros((8, 8), np.float32)
    view_of_a_tile_in_place(a, b)
    np.testing.assert_array_equal(b, a.reshape(8, 8))
    ptxas(view_of_a_tile_in_place.compile(a, b, target="cuda", arch="sm_90a").ptx, "sm_90a")


def test_a_shape_with_another_element_count_is_an_error_in_simulation():
    with pytest.raises(ValueError, match=r"T.reshape: A has 2048 elements of float32; the "
                                         r"shape \(32, 65\) has 2080"):
        rows_of_flat(np.zeros(2048, np.float32), np.zeros((32, 65), np.float32))


@pytest.mark.gpu
def test_on_the_gpu_against_torch_and_the_simulator():
    import torch
    a = torch.arange(32 * 64, dtype=torch.float32)
    b = torch.zeros(32, 64, device="cuda")
    rows_of_flat(a.cuda(), b)
    torch.testing.assert_close(b.cpu(), a.reshape(32, 64), rtol=0, atol=0)
    h = torch.randn(300, 64).half()
    w = torch.zeros(300, 32, dtype=torch.int32, device="cuda")
    halves_as_words(h.cuda(), w)
    torch.testing.assert_close(w.cpu(), h.view(torch.int32), rtol=0, atol=0)
    sim = np.zeros((300, 32), np.int32)
    halves_as_words(h.numpy(), sim)
    np.testing.assert_array_equal(w.cpu().numpy(), sim)
    f = torch.zeros(4, 16, device="cuda")
    fill_through_a_view(f)
    assert (f == 3.0).all().item()


@tilejit.kernel
def rows_of_ten(A, B):
    """A view whose rows (40 bytes) do not start on 16 bytes: no 16-byte accesses."""
    with T.Kernel(1, threads=128) as bx:
        V = T.reshape(A, (32, 10))
        for i, j in T.Parallel(32, 10):
            B[i, j] = V[i, j]


@tilejit.kernel
def inline_view(A, B):
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((8, 16), T.float32)
        T.copy(T.reshape(A, (8, 16))[0, 0], S)
        T.copy(S, B[0, 0])


def test_a_views_rows_are_not_assumed_aligned(ptxas):
    a, b = np.arange(320, dtype=np.float32), np.zeros((32, 10), np.float32)
    rows_of_ten(a, b)
    np.testing.assert_array_equal(b, a.reshape(32, 10))
    ptx = rows_of_ten.compile(a, b, target="cuda", arch="sm_90a").ptx
    assert ".v4." not in ptx and ".v2." not in ptx
    ptxas(ptx, "sm_90a")


def test_a_view_written_in_place_is_checked_too():
    strided = np.zeros(256, np.float32)[::2]
    with pytest.raises(ValueError, match=r"argument 'A': the kernel views A with another "
                                         r"shape \(line \d+: `T.copy\(T.reshape\(A, "):
        inline_view(strided, np.zeros((8, 16), np.float32))
    a = np.arange(128, dtype=np.float32)
    b = np.zeros((8, 16), np.float32)
    inline_view(a, b)
    np.testing.assert_array_equal(b, a.reshape(8, 16))


def test_a_view_as_a_dtype_of_another_size_needs_its_shape():
    @tilejit.kernel
    def no_shape(A, B):
        with T.Kernel(1, threads=128) as bx:
            W = T.view(A, dtype=T.int32)
            B[0, 0] = W[0, 0]
    h, w = np.zeros((4, 8), np.float16), np.zeros((4, 4), np.int32)
    with pytest.raises(CompileError, match="another size\\) needs its shape"):
        no_shape.compile(h, w, target="cuda", arch="sm_90a")


@pytest.mark.parametrize("body, message", [
    ("T.reshape(A, [N // M, M + 1])", r"A holds 1024 float32 elements \(4096 bytes\); the "
                                      r"shape \[32, 33\] of float32 holds 1056 \(4224 bytes\)"),
    ("T.view(A, [N // M, M], dtype=T.float16)", r"the shape \[32, 32\] of float16 holds "
                                                r"1024 \(2048 bytes\)"),
    # TileLang's test: the shape built in a variable, the dtype a name bound to None
    ("T.view(A, SHAPE, dtype=NO_DTYPE)", r"the shape \[32, 33\] of float32 holds 1056"),
    (None, None),
])
def test_a_view_that_does_not_hold_the_tensor_is_an_error_when_defined(tmp_path, body,
                                                                       message):
    """TileLang raises an AssertionError as the program is defined; tilejit's is also a
    CompileError at the line. A view that holds the bytes (float32 as twice as many
    float16) is defined as usual."""
    import importlib.util
    path = tmp_path / "view_kernel.py"
    path.write_text(
        "import tilejit.language as T\n\nN, M = 1024, 32\n"
        "SHAPE, NO_DTYPE = [N // M, M + 1], None\n\n"
        "@T.prim_func\n"
        "def main(A: T.Tensor((N,), T.float32), B: T.Tensor((N // M, M), T.float32)):\n"
        "    with T.Kernel(1):\n"
        f"        V = {body or 'T.view(A, [N // M, 2 * M], dtype=T.float16)'}\n")
    spec = importlib.util.spec_from_file_location("view_kernel", path)
    module = importlib.util.module_from_spec(spec)
    if body is None:
        spec.loader.exec_module(module)
        return
    with pytest.raises(AssertionError, match=message) as info:
        spec.loader.exec_module(module)
    assert isinstance(info.value, tilejit.CompileError) and "line 9" in str(info.value)


def test_a_parameter_name_bound_again_in_the_body_is_not_checked_as_the_parameter(tmp_path):
    """The definition-time check reads a parameter's annotation only where the body never
    binds the name to something else (here a shared tile of another shape)."""
    import importlib.util
    path = tmp_path / "rebound_kernel.py"
    path.write_text(
        "import tilejit.language as T\n\n\n"
        "@T.prim_func\n"
        "def main(A: T.Tensor((1024,), T.float32), B: T.Tensor((32, 33), T.float32)):\n"
        "    with T.Kernel(1, threads=128):\n"
        "        A = T.alloc_shared((32 * 33,), T.float32)\n"
        "        V = T.reshape(A, [32, 33])\n"
        "        T.copy(V, B)\n")
    spec = importlib.util.spec_from_file_location("rebound_kernel", path)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))     # no error
