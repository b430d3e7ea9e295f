"""frontend/references.py: what a function reads by global or closure name."""
import ast
import textwrap

import numpy as np

from tilejit.frontend.references import function_reads, is_array, outside_uses


def _uses(text):
    return outside_uses(ast.parse(textwrap.dedent(text)).body[0])


def test_outside_uses_leave_out_parameters_and_locals():
    uses = _uses('''
    @decorated(by_this)
    def f(A, n, *rest, k=DEFAULT):
        m = A.shape[0] + n
        for i in range(m):
            m += cfg.block.size * SCALE
        g = [j for j in range(3)]
        def inner(z):
            return z + helper(z)
        return T.max(m, LIMIT), A.dtype
    ''')
    assert uses == [("range", [], 5), ("cfg", ["block", "size"], 6), ("SCALE", [], 6),
                    ("helper", [], 9), ("T", ["max"], 10), ("LIMIT", [], 10)]


def test_reads_resolve_chains_as_far_as_they_go():
    import types
    cfg = types.SimpleNamespace(block=types.SimpleNamespace(size=64))

    def f(x):
        return x * cfg.block.size + cfg.block.missing + np.pi
    reads = {r.name: r for r in function_reads(f, ast.parse(textwrap.dedent('''
    def f(x):
        return x * cfg.block.size + cfg.block.missing + np.pi
    ''')).body[0])}
    assert reads["cfg.block.size"].value == 64 and reads["cfg.block.size"].kind == "closure"
    assert reads["cfg.block"].value is cfg.block       # .missing is not there
    assert reads["np.pi"].value == np.pi and reads["np.pi"].kind == "global"


def test_is_array():
    assert is_array(np.zeros(3)) and is_array(np.zeros((2, 2))[0])
    assert not is_array(np.float32(1)) and not is_array(np.ndarray)
    assert not is_array(3) and not is_array((1, 2)) and not is_array(np)


def idx():
    """A host helper of this module whose name a kernel below uses for its own variable
    (it reads a lock's method: a kernel could not compile it)."""
    import tempfile
    return tempfile.mkdtemp()


def test_a_kernels_own_name_is_not_the_modules_function():
    """Found by a user-style fuzz: a kernel variable named as a function of its module
    had the function inlined as a helper (and failed inside tempfile)."""
    import tilejit
    import tilejit.language as T

    @T.prim_func
    def scale(X: T.Tensor((100,), "float32"), Y: T.Tensor((100,), "float32")):
        with T.Kernel(2, threads=64) as bx:
            for i in T.Parallel(64):
                idx = bx * 64 + i
                if idx < 100:
                    Y[idx] = X[idx] * 2

    x = np.arange(100, dtype=np.float32)
    for target in ("sim", "cuda -arch=sm_90a"):
        kernel = tilejit.compile(scale, out_idx=[1], target=target)
    np.testing.assert_array_equal(tilejit.compile(scale, out_idx=[1])(x), x * 2)
    assert kernel.get_kernel_source()
