"""Attribute chains through objects (issue 23): ``cfg.BLOCK`` on a SimpleNamespace, a
dataclass or a class is folded to its value before typing (frontend/attribute_chains.py),
in the kernel's body, its host prologue and the @T.macro helpers it calls; the disk
cache keys the value, in this process and in a new one; what cannot be folded is a
CompileError naming the chain, its type and what to do."""
import importlib
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tilejit
from tilejit.runtime import kernel_cache

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

F32 = {2.0: "0f40000000", 3.0: "0f40400000", 5.0: "0f40A00000", 7.0: "0f40E00000",
       0.25: "0f3E800000", 0.75: "0f3F400000"}


@pytest.fixture
def make_module(tmp_path, monkeypatch):
    """Write a module file and import it (kernels need a source file)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    names = []

    def make(text, name=None):
        name = name or f"attribute_chains_mod_{len(names)}"
        names.append(name)
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(text))
        return importlib.import_module(name)
    yield make
    for name in names:
        sys.modules.pop(name, None)


# the issue's reproducer, and the same chains in the prologue and in macros
ISSUE = '''
import types
import tilejit
import tilejit.language as T

cfg = types.SimpleNamespace(SCALE=3.0, BLOCK=32)

class C:
    SCALE = 7.0

@tilejit.kernel
def k(A, B):
    with T.Kernel(1, threads=32) as bx:
        for i in T.Parallel(cfg.BLOCK):
            B[i] = A[i] * cfg.SCALE * C.SCALE
'''

EVERYWHERE = '''
import dataclasses
import enum
import types
import numpy as np
import torch
import tilejit
import tilejit.language as T

class Mode(enum.IntEnum):
    ONE = 1
    TWO = 2

@dataclasses.dataclass
class Config:
    block: int = 64
    scale: float = 5.0
    dtype: object = T.float32
    np_dtype: object = np.float32
    torch_dtype: object = torch.float32
    offset: object = np.float32(0.25)
    shape: tuple = (64,)
    pair: list = dataclasses.field(default_factory=lambda: [2, 3])

cfg = Config()

class Nested:
    mode = Mode.TWO
    inner = types.SimpleNamespace(deep=types.SimpleNamespace(bias=0.75))

@T.macro
def scaled(v):
    return v * cfg.scale + Nested.inner.deep.bias

@T.macro
def shifted(v):
    return scaled(v) + cfg.offset

def helper(v):                      # a plain helper: inlined as a macro
    return v - cfg.pair[1]

def make():
    local = types.SimpleNamespace(extra=1.0)

    @tilejit.kernel
    def k(A, B):
        n = cfg.block * 1                       # the host prologue
        half = cfg.shape[0] // 2
        with T.Kernel(T.ceildiv(A.shape[0], cfg.block), threads=64) as bx:
            S = T.alloc_shared(cfg.shape, cfg.dtype)
            F = T.alloc_fragment((n,), cfg.np_dtype)
            for i in T.Parallel(cfg.block):
                S[i] = shifted(A[bx * cfg.block + i]) + local.extra + Nested.mode
            for i in T.Parallel(n):
                F[i] = T.cast(S[i], cfg.torch_dtype)
            for i in T.Parallel(half * 2):
                B[bx * cfg.block + i] = helper(F[i])
    return k

k = make()
'''


def test_the_issue_reproducer(make_module):
    mod = make_module(ISSUE)
    a = np.arange(32, dtype=np.float32)
    b = np.zeros_like(a)
    mod.k(a, b)                                     # the simulator
    np.testing.assert_array_equal(b, a * 3 * 7)
    ptx = mod.k.compile(a, b, target="cuda", arch="sm_90a").ptx
    assert F32[3.0] in ptx and F32[7.0] in ptx


def test_chains_in_the_body_prologue_macros_and_helpers(make_module):
    mod = make_module(EVERYWHERE)
    a = np.arange(128, dtype=np.float32)
    b = np.zeros_like(a)
    mod.k(a, b)
    expected = a * 5.0 + 0.75 + 0.25 + 1.0 + 2 - 3
    np.testing.assert_allclose(b, expected, rtol=1e-6)
    ptx = mod.k.compile(a, b, target="cuda", arch="sm_90a").ptx
    assert F32[5.0] in ptx                          # read through the macros' chains


MODULE_CHAINS = '''
import tilejit
import tilejit.language as T
import {other}

@tilejit.kernel
def k(A, B):
    with T.Kernel(1, threads=32) as bx:
        for i in T.Parallel({other}.BLOCK):            # an int through a module: a constant
            B[i] = {other}.helper(A[i]) + {other}.add_bias(A[i])
'''

OTHER = '''
import types
import tilejit.language as T

BLOCK = 32
cfg = types.SimpleNamespace(factor=3.0, bias=0.25)

def helper(v):
    return v * cfg.factor

@T.macro
def add_bias(v):
    return v + cfg.bias
'''


def test_chains_through_modules_to_constants_and_helpers(make_module):
    make_module(OTHER, name="attribute_chains_other")
    mod = make_module(MODULE_CHAINS.format(other="attribute_chains_other"))
    a = np.arange(32, dtype=np.float32)
    b = np.zeros_like(a)
    mod.k(a, b)
    np.testing.assert_array_equal(b, a * 3 + a + 0.25)
    ptx = mod.k.compile(a, b, target="cuda", arch="sm_90a").ptx
    assert F32[3.0] in ptx and F32[0.25] in ptx


# -- the value is in the disk cache's key ----------------------------------------------
def test_a_changed_value_compiles_new_code_under_a_new_key(make_module, tmp_path,
                                                           monkeypatch):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TILEJIT_DISABLE_CACHE", raising=False)
    mod = make_module(ISSUE)
    a = np.arange(32, dtype=np.float32)
    spec = mod.k._prepare([a, a.copy()], target="cuda", arch="sm_90a")[3]
    first_key = kernel_cache.key_of(mod.k, spec)
    first = mod.k.compile(a, a.copy(), target="cuda", arch="sm_90a").ptx
    mod.cfg.SCALE = 5.0
    fresh = tilejit.kernel(mod.k.func)
    spec = fresh._prepare([a, a.copy()], target="cuda", arch="sm_90a")[3]
    assert kernel_cache.key_of(fresh, spec) != first_key
    second = fresh.compile(a, a.copy(), target="cuda", arch="sm_90a").ptx
    assert F32[3.0] in first and F32[5.0] not in first
    assert F32[5.0] in second and F32[3.0] not in second
    assert len(list((tmp_path / "cache" / "kernels").iterdir())) == 2
    b = np.zeros_like(a)
    fresh(a, b)
    np.testing.assert_array_equal(b, a * 5 * 7)


PROCESS = '''
import json, sys, types
import numpy as np
import tilejit
import tilejit.language as T

cfg = types.SimpleNamespace(SCALE=float(sys.argv[1]), BLOCK=32)

@T.macro
def scale(v):
    return v * cfg.SCALE

@tilejit.kernel
def k(A, B):
    with T.Kernel(1, threads=32) as bx:
        for i in T.Parallel(cfg.BLOCK):
            B[i] = scale(A[i])

a = np.arange(32, dtype=np.float32)
b = np.zeros_like(a)
ptx = k.compile(a, b, target="cuda", arch="sm_90a").ptx
k(a, b)
print(json.dumps({"numba": "numba" in sys.modules, "ptx": ptx, "b1": float(b[1])}))
'''


def _run(path, cache, *args):
    env = dict(os.environ, PYTHONPATH=ROOT, TILEJIT_CACHE_DIR=str(cache))
    env.pop("TILEJIT_DISABLE_CACHE", None)
    out = subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_changed_value_is_a_miss_in_a_new_process(tmp_path):
    path = tmp_path / "chains_process_mod.py"
    path.write_text(PROCESS)
    cache = tmp_path / "cache"
    three = _run(path, cache, "3")
    assert F32[3.0] in three["ptx"] and three["b1"] == 3.0
    five = _run(path, cache, "5")                  # same source, another value: a miss
    assert F32[5.0] in five["ptx"] and F32[3.0] not in five["ptx"] and five["b1"] == 5.0
    again = _run(path, cache, "5")                 # and the new entry is a hit
    assert again["ptx"] == five["ptx"]
    assert len(list((cache / "kernels").iterdir())) == 2


# -- what cannot be folded -------------------------------------------------------------
ERRORS = '''
import types
import numpy as np
import tilejit
import tilejit.language as T

class Model:
    def __init__(self):
        self.scale = 2.0
        self.handle = object()
        self.weights = np.ones(4, dtype=np.float32)

    def apply(self, v):
        return v * self.scale

model = Model()

@tilejit.kernel
def calls_a_method(A, B):
    with T.Kernel(1, threads=32) as bx:
        for i in T.Parallel(32):
            B[i] = model.apply(A[i])

@tilejit.kernel
def reads_an_object(A, B):
    with T.Kernel(1, threads=32) as bx:
        for i in T.Parallel(32):
            B[i] = A[i] + model.handle

@tilejit.kernel
def reads_a_missing_attribute(A, B):
    with T.Kernel(1, threads=32) as bx:
        for i in T.Parallel(32):
            B[i] = A[i] * model.scael

@T.macro
def through_macro(v):
    return v * model.handle

@tilejit.kernel
def reads_an_object_in_a_macro(A, B):
    with T.Kernel(1, threads=32) as bx:
        for i in T.Parallel(32):
            B[i] = through_macro(A[i])

@tilejit.kernel
def reads_an_array(A, B):
    with T.Kernel(1, threads=32) as bx:
        for i in T.Parallel(32):
            B[i] = A[i] * model.weights[0]
'''


def _line(text, source_line):
    return textwrap.dedent(text).splitlines().index(source_line) + 1


@pytest.mark.filterwarnings("ignore::tilejit.runtime.disk_cache.CacheWarning")
@pytest.mark.parametrize("target", ["sim", "cuda"])
def test_what_cannot_be_folded_is_a_compile_error(make_module, target):
    mod = make_module(ERRORS)
    a = np.arange(32, dtype=np.float32)
    arch = "sm_90a" if target == "cuda" else None

    def error(kernel):
        with pytest.raises(tilejit.CompileError) as e:
            kernel.compile(a, a.copy(), target=target, arch=arch)
        assert e.value.filename == mod.__file__
        return e.value

    e = error(mod.calls_a_method)
    assert e.lineno == _line(ERRORS, "            B[i] = model.apply(A[i])")
    assert e.bare_message.startswith("`model.apply` is a method of ")
    assert "Model (read through model, an instance of " in e.bare_message
    assert "a kernel cannot call an object's method: call a @T.macro" in e.bare_message

    e = error(mod.reads_an_object)
    assert e.bare_message.startswith("`model.handle` is an object (read through model")
    assert "pass the value as an argument instead" in e.bare_message
    assert "a T.constexpr parameter for a compile-time value" in e.bare_message

    e = error(mod.reads_a_missing_attribute)
    assert "`model` (an instance of " in e.bare_message
    assert "has no attribute 'scael'" in e.bare_message
    assert e.lineno == _line(ERRORS, "            B[i] = A[i] * model.scael")

    e = error(mod.reads_an_object_in_a_macro)
    assert e.bare_message.startswith("`model.handle` is an object")
    assert e.lineno == _line(ERRORS, "    return v * model.handle")

    e = error(mod.reads_an_array)
    assert "reads the global model.weights, a numpy.ndarray" in e.bare_message
