"""A deep expression (a sum of 400 terms: a left-leaning tree 400 deep, as generated code
writes one) compiles and simulates: the compile's recursive walks run with Python's
recursion limit raised (``syntax.deep_trees``), and the limit is the caller's again
after."""
import importlib
import sys

import numpy as np
import pytest

import tilejit as tilelang


@pytest.fixture
def deep_sum(tmp_path, monkeypatch):
    terms = " + ".join(f"A[{k % 64}] * {k + 1}.0" for k in range(400))
    (tmp_path / "deep_sum_program.py").write_text(
        "import tilejit.language as T\n"
        "@T.prim_func\n"
        "def main(A: T.Tensor((64,), 'float32'), C: T.Tensor((1,), 'float32')):\n"
        "    with T.Kernel(1, threads=32) as bx:\n"
        f"        C[0] = {terms}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("deep_sum_program", None)
    return importlib.import_module("deep_sum_program").main


def test_a_deep_sum_simulates(deep_sum):
    limit = sys.getrecursionlimit()
    a = np.arange(64, dtype=np.float32) / 64
    c = np.zeros(1, np.float32)
    tilelang.compile(deep_sum, target="sim")(a, c)
    expect = sum(float(a[k % 64]) * (k + 1) for k in range(400))
    np.testing.assert_allclose(c[0], expect, rtol=1e-5)
    assert sys.getrecursionlimit() == limit


def test_a_deep_sum_compiles(deep_sum, ptxas):
    ptx = tilelang.compile(deep_sum, target="cuda -arch=sm_90a").get_kernel_source()
    ptxas(ptx, "sm_90a")


def _module(tmp_path, monkeypatch, name, source):
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop(name, None)
    return importlib.import_module(name)


@pytest.mark.parametrize("launches", [1, 2])
def test_a_deep_expression_before_the_kernel_runs_on_the_host(tmp_path, monkeypatch,
                                                               launches):
    """`m = 1 + 1 + ...` (1000 terms) before `with T.Kernel`: the host program's copy and
    compile of it run with the limit raised too (a RecursionError in copy.deepcopy, from
    host_tree, or in a kernel of several launches, from its per-launch copies)."""
    second = ("    with T.Kernel(1, threads=32) as bx:\n"
              "        for i in T.Parallel(8):\n"
              "            C[i] = C[i] + 1\n") if launches == 2 else ""
    module = _module(tmp_path, monkeypatch, f"deep_host_{launches}", (
        "import tilejit, tilejit.language as T\n"
        "@tilejit.kernel\n"
        "def main(A, C):\n"
        f"    m = {' + '.join(['1'] * 1000)}\n"
        "    with T.Kernel(1, threads=32) as bx:\n"
        "        for i in T.Parallel(8):\n"
        "            C[i] = A[i] * m\n" + second))
    limit = sys.getrecursionlimit()
    a = np.ones(8, np.float32)
    c = np.zeros(8, np.float32)
    module.main(a, c)
    np.testing.assert_array_equal(c, np.full(8, 1000.0 + (launches == 2), np.float32))
    assert sys.getrecursionlimit() == limit
