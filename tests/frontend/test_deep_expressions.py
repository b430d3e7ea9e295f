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
