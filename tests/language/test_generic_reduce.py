"""TileLang's generic reduction, ``T.reduce(buffer, out, reduce_type, dim, clear)``, as
its users write it (the kind a string, the arguments positional or by keyword): the
same program as the ``T.reduce_<kind>`` it names, in the simulator against numpy and on
the GPU path (the same PTX, assembled for sm_80 and sm_90a); a kind that is not a known
string, or a missing argument, is a CompileError at the call's line."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError

OPS = {"sum": lambda x: x.sum(1), "max": lambda x: x.max(1), "min": lambda x: x.min(1),
       "abssum": lambda x: np.abs(x).sum(1), "absmax": lambda x: np.abs(x).max(1)}
KIND = "absmax"          # a module constant naming the kind, as a TileLang program may


def _line(text):
    return next(n for n, src in enumerate(open(__file__), 1) if text in src)


def _program(kind):
    @tilejit.kernel
    def rows(X, Out):
        M, N = X.shape
        with T.Kernel(T.ceildiv(M, 16), threads=128) as bx:
            x = T.alloc_fragment((16, N), "float32")
            r = T.alloc_fragment((16,), "float32")
            T.copy(X[bx * 16, 0], x)
            T.reduce(x, r, kind, 1, True)
            T.copy(r, Out[bx * 16:(bx + 1) * 16])
    return rows


@tilejit.kernel
def by_keyword(X, Out):
    M, N = X.shape
    with T.Kernel(T.ceildiv(M, 16), threads=128) as bx:
        x = T.alloc_fragment((16, N), "float32")
        r = T.alloc_fragment((16,), "float32")
        T.copy(X[bx * 16, 0], x)
        T.fill(r, 1.0)
        T.reduce(x, out=r, reduce_type="sum", dim=1, clear=False)
        T.copy(r, Out[bx * 16:(bx + 1) * 16])


@tilejit.kernel
def module_constant(X, Out):
    M, N = X.shape
    with T.Kernel(T.ceildiv(M, 16), threads=128) as bx:
        x = T.alloc_fragment((16, N), "float32")
        r = T.alloc_fragment((16,), "float32")
        T.copy(X[bx * 16, 0], x)
        T.reduce(x, r, KIND, 1, True)
        T.copy(r, Out[bx * 16:(bx + 1) * 16])


@tilejit.kernel
def named(X, Out):
    M, N = X.shape
    with T.Kernel(T.ceildiv(M, 16), threads=128) as bx:
        x = T.alloc_fragment((16, N), "float32")
        r = T.alloc_fragment((16,), "float32")
        T.copy(X[bx * 16, 0], x)
        T.reduce_absmax(x, r, dim=1, clear=True)
        T.copy(r, Out[bx * 16:(bx + 1) * 16])


def _data():
    rng = np.random.default_rng(3)
    return rng.standard_normal((64, 96)).astype(np.float32)


@pytest.mark.parametrize("kind", list(OPS))
def test_each_kind_in_the_simulator(kind):
    x = _data()
    out = np.zeros(64, np.float32)
    tilejit.kernel(_program(kind).func, target="sim")(x, out)
    np.testing.assert_allclose(out, OPS[kind](x.astype(np.float64)), rtol=1e-5, atol=1e-5)


def test_keywords_and_clear_false_in_the_simulator():
    x = _data()
    out = np.zeros(64, np.float32)
    tilejit.kernel(by_keyword.func, target="sim")(x, out)
    np.testing.assert_allclose(out, 1.0 + x.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_same_ptx_as_the_reduction_it_names(arch, ptxas):
    x = _data()
    out = np.zeros(64, np.float32)
    a = module_constant.compile(x, out, target="cuda", arch=arch).ptx
    b = named.compile(x, out, target="cuda", arch=arch).ptx
    assert a.replace("module_constant", "named") == b
    ptxas(a, arch)


@pytest.mark.parametrize("kind, message", [
    ("'mean'", r"reduce_type must be one of sum, max, min, abssum, absmax, bitand, bitor, "
               r"bitxor written as a string, got `'mean'`\n"),
    # a T.constexpr parameter, even one a module name spells too (the module's would win)
    ("op", r"got `op` \(op: the kernel's own, not known when it is parsed"),
    ("KIND", r"got `KIND` \(KIND: the kernel's own")])
def test_a_kind_that_is_not_a_known_string_is_an_error_at_its_line(kind, message, tmp_path):
    source = tmp_path / "k.py"
    source.write_text(f'''import tilejit
import tilejit.language as T


op = "sum"


@tilejit.kernel
def k(X, Out, op: T.constexpr = op):
    KIND = "max"
    with T.Kernel(1, threads=128):
        x = T.alloc_fragment((16, 16), "float32")
        r = T.alloc_fragment((16,), "float32")
        T.copy(X[0, 0], x)
        T.reduce(x, r, {kind}, 1, True)   # the call
        T.copy(r, Out[0:16])
''')
    import importlib.util
    spec = importlib.util.spec_from_file_location("k_generic_reduce", source)
    module = importlib.util.module_from_spec(spec)
    with pytest.raises(CompileError, match=message) as info:
        spec.loader.exec_module(module)
        module.k(np.zeros((16, 16), np.float32), np.zeros(16, np.float32))
    assert "line 15" in str(info.value)


def test_a_missing_argument_is_an_error():
    def rows(X, Out):
        with T.Kernel(1, threads=128):
            x = T.alloc_fragment((16, 16), "float32")
            r = T.alloc_fragment((16,), "float32")
            T.reduce(x, r, "sum", 1)
    with pytest.raises(CompileError, match=r"T.reduce\(buffer, out, reduce_type, dim, clear\) "
                                           r"takes these five arguments; clear missing"):
        tilejit.kernel(rows)


def test_outside_a_kernel_it_says_what_it_is():
    with pytest.raises(RuntimeError, match="T.reduce is a statement of a kernel"):
        T.reduce(None, None, "sum", 1, True)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", list(OPS))
def test_each_kind_on_the_gpu_against_numpy_and_the_simulator(kind):
    import torch
    x = _data()
    out = torch.zeros(64, device="cuda")
    _program(kind)(torch.from_numpy(x).cuda(), out)
    torch.cuda.synchronize()
    np.testing.assert_allclose(out.cpu().numpy(), OPS[kind](x.astype(np.float64)),
                               rtol=1e-5, atol=1e-5)
    sim = np.zeros(64, np.float32)
    tilejit.kernel(_program(kind).func, target="sim")(x, sim)
    # max and min are exact; a sum's order across the threads is the GPU's own
    exact = kind in ("max", "min", "absmax")
    np.testing.assert_allclose(out.cpu().numpy(), sim, rtol=0 if exact else 1e-5,
                               atol=0 if exact else 1e-5)
