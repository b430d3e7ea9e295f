"""What a kernel reads by global or closure name (issue 23, item 5): read at its first
compilation, not at decoration; in the disk cache's key by value (numpy scalars
included); arrays rejected with a CompileError naming them, in any order."""
import importlib
import json
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.runtime import kernel_cache
from tilejit.runtime.disk_cache import CacheWarning, Unkeyable, function_fingerprint
from tilejit.runtime.kernel_cache import GlobalChangedWarning

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_script(path, cache_dir, *args):
    env = dict(os.environ, PYTHONPATH=ROOT, TILEJIT_CACHE_DIR=str(cache_dir))
    env.pop("TILEJIT_DISABLE_CACHE", None)
    out = subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture
def make_module(tmp_path, monkeypatch):
    """Write a module file and import it (kernels need a source file)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    names = []

    def make(text):
        name = f"kernel_globals_mod_{len(names)}"
        names.append(name)
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(text))
        return importlib.import_module(name)
    yield make
    for name in names:
        sys.modules.pop(name, None)


# -- the stale-cache reproducer: a numpy scalar global, two processes ------------------
SCALED = '''
import json, sys
import numpy as np
import tilejit
import tilejit.language as T

SCALE = np.float32(float(sys.argv[1]))

@tilejit.kernel
def scaled(X, Y):
    N = X.shape[0]
    with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
        for i in T.Parallel(128):
            idx = bx * 128 + i
            if idx < N:
                Y[idx] = X[idx] * SCALE

x = np.arange(256, dtype=np.float32)
y = np.zeros_like(x)
ptx = scaled.compile(x, y, target="cuda", arch="sm_90a").ptx
scaled(x, y)                                   # the simulator, for comparison
print(json.dumps({"numba": "numba" in sys.modules, "ptx": ptx, "y1": float(y[1])}))
'''


def test_numpy_scalar_global_is_in_the_disk_key(tmp_path):
    path = tmp_path / "scaled_mod.py"
    path.write_text(SCALED)
    cache = tmp_path / "cache"
    three = run_script(path, cache, "3")
    assert "0f40400000" in three["ptx"] and three["y1"] == 3.0
    five = run_script(path, cache, "5")           # same source, another value: a miss
    assert "0f40A00000" in five["ptx"] and "0f40400000" not in five["ptx"]
    assert five["y1"] == 5.0
    again = run_script(path, cache, "5")          # and the new entry is a hit
    assert again["ptx"] == five["ptx"]
    assert len(list((cache / "kernels").iterdir())) == 2


# -- globals resolved at the first compilation -----------------------------------------
BELOW = '''
import numpy as np
import tilejit
import tilejit.language as T

@tilejit.kernel
def k(X, Y):
    N = X.shape[0]
    with T.Kernel(T.ceildiv(N, BLOCK), threads=128) as bx:
        for i in T.Parallel(BLOCK):
            idx = bx * BLOCK + i
            if idx < N:
                Y[idx] = twice(X[idx]) + OFFSET

@T.macro
def twice(v):
    return v * 2

BLOCK = 128
OFFSET = np.float32(0.5)
'''


def test_helpers_and_constants_defined_below_the_kernel(make_module):
    mod = make_module(BELOW)
    x = np.arange(300, dtype=np.float32)
    y = np.zeros_like(x)
    mod.k(x, y)                                    # the simulator
    np.testing.assert_array_equal(y, x * 2 + 0.5)
    ptx = mod.k.compile(x, y, target="cuda", arch="sm_90a").ptx
    assert "0f3F000000" in ptx                     # 0.5, from below the kernel


def test_a_global_changed_before_the_first_call_is_seen(make_module):
    mod = make_module(BELOW)
    mod.OFFSET = np.float32(7)                     # after decoration, before compiling
    x = np.arange(300, dtype=np.float32)
    y = np.zeros_like(x)
    mod.k(x, y)
    np.testing.assert_array_equal(y, x * 2 + 7)
    assert "0f40E00000" in mod.k.compile(x, y, target="cuda", arch="sm_90a").ptx


def test_a_global_changed_after_the_first_compilation_is_kept_and_reported(make_module):
    mod = make_module(BELOW)
    x = np.arange(300, dtype=np.float32)
    y = np.zeros_like(x)
    mod.k(x, y)
    mod.OFFSET = np.float32(7)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mod.k(x, y)                    # a cached specialization: nothing reads globals
    np.testing.assert_array_equal(y, x * 2 + 0.5)
    with pytest.warns(GlobalChangedWarning, match="OFFSET"):
        ptx = mod.k.compile(x, y, target="cuda", arch="sm_90a").ptx   # a new one
    assert "0f3F000000" in ptx and "0f40E00000" not in ptx           # still 0.5
    with warnings.catch_warnings():
        warnings.simplefilter("error")                               # said once
        mod.k.compile(x, y, target="cuda", arch="sm_80")
    fresh = tilejit.kernel(mod.k.func)             # decorated again: the new value
    fresh(x, y)
    np.testing.assert_array_equal(y, x * 2 + 7)


def test_the_key_follows_the_resolved_values(make_module):
    mod = make_module(BELOW)
    x = np.arange(300, dtype=np.float32)
    mod.k.compile(x, x.copy(), target="cuda", arch="sm_90a")
    spec = mod.k._prepare([x, x.copy()], target="cuda", arch="sm_90a")[3]
    before = kernel_cache.key_of(mod.k, spec)
    mod.OFFSET = np.float32(7)                     # the kernel keeps 0.5: so does its key
    with pytest.warns(GlobalChangedWarning):
        kernel_cache.load_or_compile(mod.k, spec)
    assert kernel_cache.key_of(mod.k, spec) == before


# -- numpy scalars of several dtypes ---------------------------------------------------
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int32", "int64",
                                   "uint8"])
def test_numpy_scalar_globals(dtype):
    def make(value):
        S = getattr(np, dtype)(value)

        @tilejit.kernel
        def k(X, Y):
            N = X.shape[0]
            with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
                for i in T.Parallel(128):
                    idx = bx * 128 + i
                    if idx < N:
                        Y[idx] = X[idx] * S
        return k

    x = np.arange(200, dtype=np.float32)
    ptx = {}
    for value, hexed in ((3, "0f40400000"), (5, "0f40A00000")):
        k = make(value)
        y = np.zeros_like(x)
        k(x, y)
        np.testing.assert_array_equal(y, x * value)
        ptx[value] = k.compile(x, y, target="cuda", arch="sm_90a").ptx
        assert hexed in ptx[value]
    fingerprints = {function_fingerprint(make(v).func) for v in (3, 5)}
    assert len(fingerprints) == 2


def test_fingerprint_tells_numpy_scalars_apart_by_dtype_and_value():
    def make(value):
        def f(x):
            return x * value
        return f

    values = [3, 3.0, True, np.float16(3), np.float32(3), np.float64(3), np.int32(3),
              np.int64(3), np.uint8(3), np.bool_(True), np.float32(5), np.float32(-0.0),
              np.float32(0.0)]
    prints = [function_fingerprint(make(v)) for v in values]
    assert len(set(prints)) == len(values)
    assert function_fingerprint(make(np.float32(3))) == prints[4]


def test_fingerprint_of_a_bound_method_holds_its_object():
    """A kernel that reads ``emitter.ldmatrix_b`` (a closure's TensorCoreIntrinEmitter)
    depends on the emitter's fields, not only on the method's code: two emitters that
    differ in ``b_transposed`` had one disk-cache key, and on the H200 the second kernel
    loaded the first one's PTX (2026-12-03: its B registers came from a non-transposed
    ldmatrix)."""
    class Config:
        def __init__(self, flag):
            self.flag = flag

        def scale(self, x):
            return x * 2 if self.flag else x

    def make(config):
        def f(x):
            return config.scale(x)
        return f

    prints = [function_fingerprint(make(Config(flag))) for flag in (True, False, True)]
    assert prints[0] != prints[1] and prints[0] == prints[2]


# -- arrays are not constants ----------------------------------------------------------
ARRAYS = '''
import json, sys
import numpy as np
import tilejit
import tilejit.language as T

W = np.arange(128, dtype=np.float32)

@tilejit.kernel
def bad(X, Y):
    N = X.shape[0]
    with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
        for i in T.Parallel(128):
            Y[bx * 128 + i] = X[bx * 128 + i] + not_defined_anywhere

@tilejit.kernel
def reads_array(X, Y):
    N = X.shape[0]
    with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
        for i in T.Parallel(128):
            idx = bx * 128 + i
            if idx < N:
                Y[idx] = X[idx] * W[i]

x = np.arange(256, dtype=np.float32)
out = []
for name in sys.argv[1:]:
    kernel = {"bad": bad, "array": reads_array}[name]
    for target, arch in (("cuda", "sm_90a"), ("sim", None)):
        try:
            kernel.compile(x, x.copy(), target=target, arch=arch)
            out.append([name, "compiled"])
        except tilejit.CompileError as e:
            out.append([name, e.bare_message, e.filename, e.lineno])
print(json.dumps(out))
'''


@pytest.mark.parametrize("order", [["array", "bad", "array"], ["bad", "array"]])
def test_array_global_is_rejected_in_either_order(tmp_path, order):
    path = tmp_path / "arrays_mod.py"
    path.write_text(ARRAYS)
    out = run_script(path, tmp_path / "cache", *order)
    line = ARRAYS.splitlines().index("                Y[idx] = X[idx] * W[i]") + 1
    for result in out:
        if result[0] == "bad":
            assert "not_defined_anywhere" in result[1]
        else:
            assert result[1] != "compiled", out
            message, filename, lineno = result[1:]
            assert "kernel reads_array reads the global W, a numpy.ndarray" in message
            assert "float32, shape (128,)" in message and "as an argument" in message
            assert filename == str(path) and lineno == line
    assert len(out) == 2 * len(order)


MACRO_ARRAY = '''
import numpy as np
import tilejit
import tilejit.language as T

TABLE = np.ones(4, dtype=np.float32)

class Config:
    pass

cfg = Config()
cfg.weights = np.ones(4, dtype=np.float32)

@T.macro
def lookup(v):
    return v * TABLE[0]

@tilejit.kernel
def through_macro(X, Y):
    N = X.shape[0]
    with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
        for i in T.Parallel(128):
            Y[bx * 128 + i] = lookup(X[bx * 128 + i])

@tilejit.kernel
def through_attribute(X, Y):
    N = X.shape[0]
    with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
        for i in T.Parallel(128):
            Y[bx * 128 + i] = X[bx * 128 + i] * cfg.weights[0]
'''


def test_array_read_by_a_macro_or_an_attribute_is_rejected(make_module):
    mod = make_module(MACRO_ARRAY)
    x = np.arange(256, dtype=np.float32)
    with pytest.raises(tilejit.CompileError, match="lookup .called by kernel through_macro"
                       r".* reads the global TABLE, a numpy.ndarray") as e:
        mod.through_macro(x, x.copy())
    assert e.value.filename == mod.__file__
    assert e.value.lineno == MACRO_ARRAY.splitlines().index("    return v * TABLE[0]") + 1
    with pytest.raises(tilejit.CompileError, match="reads the global cfg.weights, a numpy"):
        mod.through_attribute.compile(x, x.copy(), target="cuda", arch="sm_90a")


def test_array_in_a_closure_is_rejected():
    table = np.ones(8)

    @tilejit.kernel
    def k(X):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(8):
                X[i] = table[i]

    with pytest.raises(tilejit.CompileError, match="reads the closure table, a numpy"):
        k(np.zeros(8))


# -- what the key holds ----------------------------------------------------------------
CHAINS = '''
import types
import tilejit.language as T

cfg = types.SimpleNamespace(block={block})
OP = T.{op}

def f(x):
    return OP(x, cfg.block)
'''


def test_fingerprint_covers_attribute_chains_and_library_functions(make_module):
    base = function_fingerprint(make_module(CHAINS.format(block=128, op="max")).f)
    assert function_fingerprint(make_module(CHAINS.format(block=128, op="max")).f) == base
    assert function_fingerprint(make_module(CHAINS.format(block=64, op="max")).f) != base
    assert function_fingerprint(make_module(CHAINS.format(block=128, op="min")).f) != base


class _Slots:
    __slots__ = ("n",)

    def __init__(self, n):
        self.n = n


def test_an_object_without_attributes_to_digest_is_unkeyable():
    def make(obj):
        def f(x):
            return x, obj, obj.n
        return f

    with pytest.raises(Unkeyable, match="obj"):
        function_fingerprint(make(_Slots(1)), strict=True)
    lenient = {function_fingerprint(make(_Slots(n))) for n in (1, 2)}
    assert len(lenient) == 2                       # obj.n is still read by value


def test_unkeyable_kernel_compiles_uncached(monkeypatch, tmp_path):
    def unkeyable(func, namespace=None, strict=False):
        raise Unkeyable("CFG", _Slots(1))
    monkeypatch.setattr(kernel_cache, "function_fingerprint", unkeyable)
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))

    @tilejit.kernel
    def k(X, Y):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(8):
                Y[i] = X[i] * 2
    x = np.arange(8, dtype=np.float32)
    with pytest.warns(CacheWarning, match="reads CFG, a .*_Slots"):
        ptx = k.compile(x, x.copy(), target="cuda", arch="sm_90a").ptx
    assert ".entry" in ptx
    assert not (tmp_path / "kernels").exists()     # nothing stored under a wrong key


def test_a_changed_attribute_chain_is_read_by_the_next_specialization():
    """An attribute read through a global (cfg.SCALE) is read when each specialization is
    compiled: the warning says the compiled ones keep the old value, the new one reads
    the new (a plain global would be kept: see above)."""
    import types
    cfg = types.SimpleNamespace(SCALE=3.0)

    @tilejit.kernel
    def k(X, Y):
        N = X.shape[0]
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                j = bx * 128 + i
                if j < N:
                    Y[j] = X[j] * cfg.SCALE

    x = np.ones(300, np.float32)
    assert "0f40400000" in k.compile(x, x.copy(), target="cuda", arch="sm_90a").ptx
    cfg.SCALE = 5.0
    with pytest.warns(GlobalChangedWarning, match="cfg.SCALE, changed since its first "
                      "compilation: the specializations compiled before keep the old value"):
        ptx = k.compile(x, x.copy(), target="cuda", arch="sm_80").ptx
    assert "0f40A00000" in ptx
