"""Helpers that hold tile operations, as TileLang programs write them
(frontend/tile_helpers.py): inlined into the kernel, their ``**kwargs`` built from
compile-time values passed as keywords, their own names kept apart from the kernel's.
In simulation, the PTX for sm_80 and sm_90a through ptxas, and on the device against
torch and the simulator."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T


def _reduce(T, op, src, dst, rows, dim, scale=1):
    kwargs = {} if op == "max" else {"clear": True}
    if op == "sum":
        T.reduce_sum(src, dst, dim=dim, **kwargs)
    elif op == "max":
        T.reduce_max(src, dst, dim=dim, **kwargs)
    _scaled(dst, rows, scale)


def _scaled(x, rows, scale):
    tmp = T.alloc_fragment((rows,), T.float32)     # a name the kernel also uses
    T.copy(x, tmp)
    for i in T.Parallel(rows):
        x[i] = tmp[i] * scale


def _make(op, scale):
    @tilejit.kernel
    def rows(A, B, C):
        M, N = A.shape
        with T.Kernel(1, threads=128):
            src = T.alloc_fragment((M, N), A.dtype)
            dst = T.alloc_fragment((M,), A.dtype)
            tmp = T.alloc_fragment((M,), A.dtype)
            T.copy(A, src)
            _reduce(T, op, src, dst, M, dim=1, scale=scale)
            for i in T.Parallel(M):
                tmp[i] = dst[i] + 1
            T.copy(dst, B)
            T.copy(tmp, C)
    return rows


def _inputs(lib=np):
    a = np.random.default_rng(2).standard_normal((64, 96)).astype(np.float32)
    return a, np.zeros(64, np.float32), np.zeros(64, np.float32)


def _expected(a, op, scale):
    r = (a.astype(np.float64).sum(1) if op == "sum" else a.max(1)) * scale
    return r, r + 1


@pytest.mark.parametrize("op", ["sum", "max"])
def test_a_helper_with_tile_operations_in_simulation(op):
    a, b, c = _inputs()
    _make(op, 2.0)(a, b, c)
    want_b, want_c = _expected(a, op, 2.0)
    np.testing.assert_allclose(b, want_b, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(c, want_c, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("op", ["sum", "max"])
def test_the_helper_is_compiled_into_the_kernel(op, arch, ptxas):
    ptx = _make(op, 2.0).compile(*_inputs(), target="cuda", arch=arch).ptx
    assert ("max.f32" in ptx) == (op == "max")      # the op the compile-time `if` chose
    ptxas(ptx, arch)


def test_an_argument_may_be_an_expression():
    """`dim=0 + 1` (constants: as written) and `rows=M // 2 * 2` (bound to a name of its
    own before the body, evaluated once at the call)."""
    @tilejit.kernel
    def computed(A, B):
        M, N = A.shape
        with T.Kernel(1, threads=128):
            src = T.alloc_fragment((M, N), A.dtype)
            dst = T.alloc_fragment((M,), A.dtype)
            T.copy(A, src)
            _reduce(T, "sum", src, dst, M // 2 * 2, dim=0 + 1)
            T.copy(dst, B)
    a = np.random.default_rng(1).standard_normal((16, 32)).astype(np.float32)
    b = np.zeros(16, np.float32)
    computed(a, b)
    np.testing.assert_allclose(b, a.sum(1), rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("op", ["sum", "max"])
def test_on_the_gpu(op):
    a, b, c = _inputs()
    dev = [torch.from_numpy(x).cuda() for x in (a, b, c)]
    kernel = _make(op, 0.5)
    kernel(*dev)
    kernel(a, b, c)
    want_b, want_c = _expected(a, op, 0.5)
    np.testing.assert_allclose(dev[1].cpu().numpy(), want_b, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(dev[2].cpu().numpy(), want_c, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(dev[1].cpu().numpy(), b, rtol=1e-6, atol=1e-5)


def _counted(p):
    """A helper with a barrier, called in an expression."""
    T.sync_threads()
    return p + 1


@T.prim_func
def _barrier_helper_in_an_expression(A: T.Tensor((64,), T.float32)):
    with T.Kernel(1, threads=64):
        tx = T.get_thread_binding()
        v = _counted(tx) * 2      # hoisted (`__tj_call0 = _counted(tx)`), then inlined
        A[tx] = v


@T.prim_func
def _barrier_helper_under_an_and(A: T.Tensor((64,), T.float32)):
    with T.Kernel(1, threads=64):
        tx = T.get_thread_binding()
        v = tx > 0 and _counted(tx)     # evaluated only where tx > 0: not hoisted
        A[tx] = v


def test_a_barrier_helper_in_an_expression_is_inlined(ptxas):
    kernel = tilejit.compile(_barrier_helper_in_an_expression)
    a = torch.zeros(64)
    kernel(a)
    assert torch.equal(a, (torch.arange(64) + 1.0) * 2)
    ptx = kernel.get_kernel_source(arch="sm_90a")
    assert "bar.sync" in ptx
    ptxas(ptx, "sm_90a")


def test_a_barrier_in_a_helper_that_cannot_be_inlined_is_named():
    from tilejit.errors import CompileError
    with pytest.raises(CompileError, match=r"T.sync_threads\(\) in a helper compiled as a "
                                           r"device function") as e:
        tilejit.compile(_barrier_helper_under_an_and).get_kernel_source(arch="sm_90a")
    assert "v = tx > 0 and _counted(tx)" in str(e.value)


# -- a macro handed a fragment, with nothing but T.Parallel loops over it ---------------
@T.macro
def rescale(acc, s):
    """TileLang's flash-attention `Rescale`: an element loop over fragments, no tile op."""
    for i, j in T.Parallel(64, 64):
        acc[i, j] *= s[i]


@T.macro
def flush(C, acc, by):
    T.atomic_add(C[by * 64:(by + 1) * 64, 0:64], acc)


@tilejit.kernel
def rescaled(A, S, B, C):
    with T.Kernel(2, threads=128) as by:
        acc = T.alloc_fragment((64, 64), T.float32)
        s = T.alloc_fragment((64,), T.float32)
        T.copy(A[by * 64, 0], acc)
        T.copy(S[by * 64], s)
        rescale(acc, s)
        T.copy(acc, B[by * 64, 0])
        flush(C, acc, by)


def _rescaled_inputs(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((128, 64)).astype(np.float32),
            rng.standard_normal(128).astype(np.float32))


def test_a_macro_handed_a_fragment_is_inlined():
    a, s = _rescaled_inputs()
    b, c = np.zeros_like(a), np.ones_like(a)
    rescaled(a, s, b, c)
    np.testing.assert_array_equal(b, a * s[:, None])
    np.testing.assert_array_equal(c, 1 + a * s[:, None])


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_a_macro_handed_a_fragment_assembles(arch, ptxas):
    a, s = _rescaled_inputs()
    ptxas(rescaled.compile(a, s, a.copy(), a.copy(), target="cuda", arch=arch).ptx, arch)


@pytest.mark.gpu
def test_a_macro_handed_a_fragment_on_the_gpu():
    a, s = _rescaled_inputs(1)
    b, c = torch.zeros(128, 64, device="cuda"), torch.ones(128, 64, device="cuda")
    rescaled(torch.from_numpy(a).cuda(), torch.from_numpy(s).cuda(), b, c)
    np.testing.assert_array_equal(b.cpu().numpy(), a * s[:, None])
    np.testing.assert_allclose(c.cpu().numpy(), 1 + a * s[:, None], rtol=1e-6)


# -- defaults and places (found by a review) ----------------------------------------------
def _scaler(scale):
    @T.macro
    def scaled(frag, s=scale * 2.0):
        for i, j in T.Parallel(32, 32):
            frag[i, j] = frag[i, j] * s
    return scaled


_by_six = _scaler(3.0)
scale = 100.0           # the kernel's `scale`: not the macro's


@T.macro
def _store(frag, dst):
    T.copy(frag, dst)


@T.macro
def _add_to(dst, v):
    T.atomic_add(dst, v)


@tilejit.kernel
def defaults_and_places(A, C, D):
    with T.Kernel(2, threads=128) as bx:
        f = T.alloc_fragment((32, 32), T.float32)
        T.copy(A[bx * 32, 0], f)
        _by_six(f)
        _store(f, C[bx * 32, 0])
        for i in T.Parallel(64):
            _add_to(D[i % 4], A[bx * 32 + i // 2, i % 2])


def test_a_macros_default_is_its_own_and_a_place_is_passed_as_written():
    """The default is the value Python computed where the macro was made (6.0), not the
    expression re-read in the kernel's scope (200.0); `C[bx * 32, 0]` is a copy's
    destination by its start and `D[i % 4]` an atomic's element, as TileLang's macros
    take them."""
    a = np.random.default_rng(3).standard_normal((64, 32)).astype(np.float32)
    c, d = np.zeros_like(a), np.zeros(4, np.float32)
    defaults_and_places(a, c, d)
    np.testing.assert_allclose(c, a * 6.0, rtol=1e-6)
    want = [sum(float(a[b * 32 + i // 2, i % 2]) for b in range(2) for i in range(64)
                if i % 4 == r) for r in range(4)]
    np.testing.assert_allclose(d, want, rtol=1e-5, atol=1e-5)
    defaults_and_places.compile(a, c, d, target="cuda", arch="sm_90a")


def _lane():
    return T.get_thread_binding() % 32


def _warp(dim=0):
    return T.get_thread_binding(dim) // 32


@T.prim_func
def _thread_index_helpers_in_expressions(B: T.Tensor((128,), T.int32)):
    with T.Kernel(2, threads=128) as bx:
        tid = T.get_thread_binding()
        if _lane() == 0:
            B[tid] = -_warp()
        else:
            B[tid] = _lane() + _warp(0) * 100 + bx * 0


def _thread_index_want():
    tid = torch.arange(128, dtype=torch.int32)
    return torch.where(tid % 32 == 0, -(tid // 32), tid % 32 + (tid // 32) * 100)


def test_thread_index_helpers_in_expressions(ptxas):
    kernel = tilejit.compile(_thread_index_helpers_in_expressions)
    b = torch.zeros(128, dtype=torch.int32)
    kernel(b)
    assert torch.equal(b, _thread_index_want())
    for arch in ("sm_80", "sm_90a"):
        ptx = kernel.get_kernel_source(arch=arch)
        assert "%tid.x" in ptx
        ptxas(ptx, arch)


@pytest.mark.gpu
def test_gpu_thread_index_helpers_in_expressions():
    kernel = tilejit.compile(_thread_index_helpers_in_expressions)
    b = torch.zeros(128, dtype=torch.int32, device="cuda")
    kernel(b)
    sim = torch.zeros(128, dtype=torch.int32)
    kernel(sim)
    assert torch.equal(b.cpu(), _thread_index_want()) and torch.equal(b.cpu(), sim)


# objects of the program's own classes called in the kernel: their __call__ inlined with
# the object first (a lowering rule's epilogue object; a value transform as an object)
class _Scale:
    def __init__(self, factor):
        self.factor = factor

    def __call__(self, frag, rows, cols):
        for i, j in T.Parallel(rows, cols):
            frag[i, j] = frag[i, j] * self.factor


class _Affine:
    def __init__(self, a, b):
        self.a, self.b = a, b

    def __call__(self, x):
        return x * self.a + self.b


_scale, _affine = _Scale(3.0), _Affine(2.0, 1.0)


@T.prim_func
def called_objects(A: T.Tensor((16, 16), T.float32), B: T.Tensor((16, 16), T.float32),
                   C: T.Tensor((16, 16), T.float32)):
    with T.Kernel(1, threads=64):
        F = T.alloc_fragment((16, 16), T.float32)
        T.copy(A, F)
        _scale(F, 16, 16)
        T.copy(F, B)
        for i, j in T.Parallel(16, 16):
            C[i, j] = _affine(A[i, j])


def test_objects_called_in_the_kernel_are_inlined():
    a = torch.randn(16, 16)
    b, c = torch.zeros(16, 16), torch.zeros(16, 16)
    tilejit.compile(called_objects, target="sim")(a, b, c)
    torch.testing.assert_close(b, a * 3, rtol=0, atol=0)
    torch.testing.assert_close(c, a * 2 + 1, rtol=0, atol=0)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_objects_called_in_the_kernel_assemble(arch, ptxas):
    ptxas(tilejit.compile(called_objects).get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
def test_objects_called_in_the_kernel_on_the_gpu():
    a = torch.randn(16, 16)
    gpu = [a.cuda(), torch.zeros(16, 16).cuda(), torch.zeros(16, 16).cuda()]
    sim = [a.clone(), torch.zeros(16, 16), torch.zeros(16, 16)]
    tilejit.compile(called_objects)(*gpu)
    tilejit.compile(called_objects, target="sim")(*sim)
    for g, s in zip(gpu, sim):
        torch.testing.assert_close(g.cpu(), s, rtol=0, atol=0)
    torch.testing.assert_close(sim[1], a * 3, rtol=0, atol=0)
