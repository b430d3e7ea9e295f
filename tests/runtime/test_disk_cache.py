"""The disk cache of compiled kernels, across processes: hit, miss, invalidation by an
edited @T.macro callee, a corrupted entry recompiled, two processes at once."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np

import tilejit
import tilejit.language as T

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

KERNEL_FILE = '''
import numpy as np
import sys, json, time
import tilejit
import tilejit.language as T

@T.macro
def combine(x, y):
    return {expr}

@tilejit.kernel
def k(X, Y, Z):
    N = X.shape[0]
    with T.Kernel(T.ceildiv(N, 256), threads=128) as bx:
        for i in T.Parallel(256):
            idx = bx * 256 + i
            if idx < N:
                Z[idx] = combine(X[idx], Y[idx])

x = np.arange(1000, dtype=np.float32)
h = k.compile(x, x, x.copy(), target="cuda", arch="sm_90")
has_mul = "mul.f32" in h.ptx or "mul.rn.f32" in h.ptx
print(json.dumps({{"numba": "numba" in sys.modules, "ptx_has_mul": has_mul}}))
'''


def run_kernel_file(tmp_path, expr, cache_dir):
    path = tmp_path / "kernel_mod.py"
    path.write_text(textwrap.dedent(KERNEL_FILE.format(expr=expr)))
    env = dict(os.environ, PYTHONPATH=ROOT, TILEJIT_CACHE_DIR=str(cache_dir))
    env.pop("TILEJIT_DISABLE_CACHE", None)
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


def entries(cache_dir):
    d = cache_dir / "kernels"
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


def test_hit_miss_and_macro_invalidation(tmp_path):
    cache = tmp_path / "cache"
    first, _ = run_kernel_file(tmp_path, "x + y", cache)
    assert first["numba"] and not first["ptx_has_mul"]        # miss: compiled
    assert len(entries(cache)) == 1
    again, _ = run_kernel_file(tmp_path, "x + y", cache)
    assert not again["numba"]                                 # hit: Numba never loaded
    assert len(entries(cache)) == 1
    edited, _ = run_kernel_file(tmp_path, "x * y", cache)     # only the macro changed
    assert edited["numba"] and edited["ptx_has_mul"]
    assert len(entries(cache)) == 2


def test_corrupted_entry_is_recompiled(tmp_path):
    cache = tmp_path / "cache"
    run_kernel_file(tmp_path, "x - y", cache)
    (name,) = entries(cache)
    path = cache / "kernels" / name
    text = path.read_text()
    path.write_text(text[: len(text) // 2])                  # truncated
    result, stderr = run_kernel_file(tmp_path, "x - y", cache)
    assert result["numba"]                                    # recompiled, not loaded
    assert "tilejit" in stderr.lower() or "cache" in stderr.lower()
    result, _ = run_kernel_file(tmp_path, "x - y", cache)     # and stored again
    assert not result["numba"]


def test_two_processes_compiling_at_once(tmp_path):
    cache = tmp_path / "cache"
    path = tmp_path / "kernel_mod.py"
    path.write_text(textwrap.dedent(KERNEL_FILE.format(expr="x + 2 * y")))
    env = dict(os.environ, PYTHONPATH=ROOT, TILEJIT_CACHE_DIR=str(cache))
    procs = [subprocess.Popen([sys.executable, str(path)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    assert len(entries(cache)) == 1
    result, _ = run_kernel_file(tmp_path, "x + 2 * y", cache)
    assert not result["numba"]


@T.macro
def _scaled(x, s):
    return x * s


@tilejit.kernel
def uses_macro(X, Y, s):
    N = X.shape[0]
    with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
        for i in T.Parallel(128):
            idx = bx * 128 + i
            if idx < N:
                Y[idx] = _scaled(X[idx], s) + 1


def test_macro_in_simulation_and_inlined_in_ptx():
    x = np.arange(300, dtype=np.float32)
    y = np.zeros_like(x)
    uses_macro(x, y, 3.0)
    np.testing.assert_array_equal(y, x * 3 + 1)
    ptx = uses_macro.compile(x, y, 3.0, target="cuda", arch="sm_90").ptx
    assert "call" not in ptx.split(".entry")[1]


def test_tilelangs_cache_switches_win_over_the_environment(monkeypatch):
    """``tilelang.disable_cache()`` / ``enable_cache()`` (TileLang's spelling): a choice
    for the process that wins over TILEJIT_DISABLE_CACHE."""
    import tilejit
    from tilejit import options
    monkeypatch.setattr(options, "_cache_choice", [None])
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    assert not tilejit.is_cache_enabled()
    tilejit.enable_cache()
    assert tilejit.is_cache_enabled() and options.cache_root() is not None
    monkeypatch.delenv("TILEJIT_DISABLE_CACHE")
    tilejit.disable_cache()
    assert not tilejit.is_cache_enabled() and options.cache_root() is None
