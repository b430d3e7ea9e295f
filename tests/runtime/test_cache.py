"""The on-disk store (tilejit/runtime/disk_cache.py): digests, entries, damage, concurrency, and
function fingerprints."""
import functools
import importlib
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from tilejit.runtime import disk_cache as cache
from tilejit.runtime.disk_cache import CacheWarning, DiskCache, digest, function_fingerprint

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TILEJIT_DISABLE_CACHE", raising=False)
    return DiskCache("kernels")


def test_digest_is_deterministic_and_canonical():
    a = digest("k", (1, 2.5, None, True, b"\x00"), {"b": [1], "a": {"x": -0.0}})
    b = digest("k", (1, 2.5, None, True, b"\x00"), {"a": {"x": -0.0}, "b": [1]})
    assert a == b and len(a) == 64
    assert digest(1) != digest(True) != digest(1.0) != digest("1")
    assert digest("ab", "c") != digest("a", "bc")
    assert digest(0.0) != digest(-0.0)
    # a fresh interpreter computes the same digest (no hash randomization involved)
    code = ("from tilejit.runtime.disk_cache import digest; "
            "print(digest('k', (1, 2.5), {'a': [None]}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout.strip()
    assert out == digest("k", (1, 2.5), {"a": [None]})


@pytest.mark.parametrize("bad", [object(), {1, 2}, [1, object()], {"a": 1j}])
def test_digest_rejects_other_types(bad):
    with pytest.raises(TypeError, match="cannot serialize"):
        digest("x", bad)


def test_cache_dir_from_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("TILEJIT_DISABLE_CACHE", raising=False)
    monkeypatch.delenv("TILEJIT_CACHE_DIR", raising=False)
    assert cache.cache_dir() == os.path.join(os.path.expanduser("~"), ".cache", "tilejit")
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert cache.cache_dir() == str(tmp_path / "elsewhere")
    DiskCache("kernels").store("k1", {"x": 1})
    assert os.path.isfile(tmp_path / "elsewhere" / "kernels" / "k1.json")
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "0")
    assert cache.cache_dir() == str(tmp_path / "elsewhere")


def test_round_trip(store, tmp_path):
    payload = {"ptx": "// ptx\n" * 100, "n": 3, "formats": [["i", 8], ["q", 1]],
               "nested": {"b": None, "a": 1.5}, "unicode": "Ω"}
    assert store.load("abc") is None
    store.store("abc", payload)
    assert store.path("abc") == str(tmp_path / "kernels" / "abc.json")
    assert store.load("abc") == payload
    store.store("abc", {"n": 4})
    assert store.load("abc") == {"n": 4}
    assert os.listdir(tmp_path / "kernels") == ["abc.json"]   # no temp files left
    # keys that are not plain file names map to a file inside the namespace
    store.store("../weird/key", {"n": 5})
    assert os.path.dirname(store.path("../weird/key")) == str(tmp_path / "kernels")
    assert store.load("../weird/key") == {"n": 5}
    with pytest.raises(TypeError, match="not JSON"):
        store.store("x", {"a": object()})


def _damage(path, how):
    with open(path) as f:
        text = f.read()
    if how == "truncated":
        text = text[: len(text) // 2]
    elif how == "garbage":
        text = "\x00\x01 not json at all"
    else:  # the payload changed after the checksum was taken
        entry = json.loads(text)
        entry["payload"]["n"] = 99
        text = json.dumps(entry)
    with open(path, "w") as f:
        f.write(text)


@pytest.mark.parametrize("how", ["truncated", "garbage", "checksum"])
def test_damaged_entry_is_reported_deleted_and_missed(store, how):
    store.store("k", {"n": 1, "text": "x" * 200})
    path = store.path("k")
    _damage(path, how)
    with pytest.warns(CacheWarning, match="damaged entry .*k.json"):
        assert store.load("k") is None
    assert not os.path.exists(path)
    store.store("k", {"n": 2})
    assert store.load("k") == {"n": 2}


def test_wrong_shape_entries_are_damaged(store):
    path = store.path("k")
    for i, entry in enumerate([[1, 2], {"version": 2, "checksum": "", "payload": {}},
                               {"version": 1, "checksum": "", "payload": [1]}]):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(entry, f)
        with pytest.warns(CacheWarning):
            assert DiskCache("kernels").load("k") is None, i
        assert not os.path.exists(path)


def test_disabled_cache(store, tmp_path, monkeypatch):
    store.store("k", {"n": 1})
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    assert cache.cache_dir() is None
    assert store.load("k") is None
    store.store("k2", {"n": 2})
    monkeypatch.delenv("TILEJIT_DISABLE_CACHE")
    assert store.load("k") == {"n": 1}
    assert store.load("k2") is None


def test_unwritable_directory_warns(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(blocker / "cache"))   # makedirs fails
    with pytest.warns(CacheWarning, match="cannot write"):
        DiskCache("kernels").store("k", {"n": 1})
    assert DiskCache("kernels").load("k") is None
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))

    def full_disk(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.warns(CacheWarning, match="No space left"):
        DiskCache("kernels").store("k", {"n": 1})
    assert os.listdir(tmp_path / "kernels") == []   # the temp file is removed


_WRITER = textwrap.dedent("""
    import sys, time, warnings
    warnings.simplefilter("error")
    sys.path.insert(0, {root!r})
    from tilejit.runtime.disk_cache import DiskCache
    me, start = sys.argv[1], float(sys.argv[2])
    store = DiskCache("race")
    while time.time() < start:
        time.sleep(0.001)
    for i in range(50):
        store.store("shared", {{"writer": me, "i": i, "blob": me * 20000}})
        payload = store.load("shared")
        assert payload is not None and len(payload["blob"]) == 20000, payload
    print("done", me)
""")


def test_concurrent_stores_of_one_key(store, tmp_path):
    script = tmp_path / "writer.py"
    script.write_text(_WRITER.format(root=ROOT))
    start = time.time() + 0.7
    env = dict(os.environ, TILEJIT_CACHE_DIR=str(tmp_path))
    procs = [subprocess.Popen([sys.executable, str(script), me, str(start)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for me in "ab"]
    for proc, me in zip(procs, "ab"):
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert out.strip() == f"done {me}"
    payload = DiskCache("race").load("shared")
    assert payload["writer"] in "ab" and payload["i"] == 49
    assert os.listdir(tmp_path / "race") == ["shared.json"]


# -- function fingerprints ---------------------------------------------------------------
_MODULE = """
import numpy as np
LIMIT = {limit}

def helper(x):
    return x + {helper_offset}

def unrelated():
    return {unrelated_value}

def deep(x):
    return helper(x) * 2

def kernel_like(x):
    return deep(x) + LIMIT + np.float32(1)
"""


@pytest.fixture
def make_module(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    count = [0]

    def make(helper_offset=1, unrelated_value=1, limit=10):
        count[0] += 1
        name = f"fp_module_{count[0]}"
        (tmp_path / f"{name}.py").write_text(_MODULE.format(
            helper_offset=helper_offset, unrelated_value=unrelated_value, limit=limit))
        return importlib.import_module(name)
    yield make
    for i in range(1, count[0] + 1):
        sys.modules.pop(f"fp_module_{i}", None)


def test_fingerprint_follows_called_functions(make_module):
    base = function_fingerprint(make_module().kernel_like)
    assert function_fingerprint(make_module().kernel_like) == base
    assert function_fingerprint(make_module(unrelated_value=2).kernel_like) == base
    assert function_fingerprint(make_module(helper_offset=2).kernel_like) != base  # 2 deep
    assert function_fingerprint(make_module(limit=11).kernel_like) != base         # data


def test_fingerprint_closure_values_and_dtypes():
    import tilejit.language as T

    def make(n, dtype):
        def f(x):
            return x + n, dtype
        return f

    assert function_fingerprint(make(1, T.float16)) == function_fingerprint(make(1, T.float16))
    assert function_fingerprint(make(1, T.float16)) != function_fingerprint(make(2, T.float16))
    assert function_fingerprint(make(1, T.float16)) != function_fingerprint(make(1, T.float32))


def test_fingerprint_decorated_helpers_cycles_and_libraries():
    def make(offset):
        def inner(x):
            return x + offset

        @functools.wraps(inner)
        def wrapped(*a):
            return inner(*a)

        class Macro:   # the shape of a decorator object holding the function as .func
            def __init__(self, func):
                self.func = func

        def user(x):
            return wrapped(x)

        def user_macro(x):
            return macro(x)

        macro = Macro(inner)
        return user, user_macro

    u1, m1 = make(1)
    u2, m2 = make(2)
    assert function_fingerprint(u1) != function_fingerprint(u2)
    assert function_fingerprint(m1) != function_fingerprint(m2)

    def ping(n):
        return pong(n - 1) if n else 0

    def pong(n):
        return ping(n)

    assert len(function_fingerprint(ping)) == 64   # mutual recursion terminates
    with pytest.raises(TypeError):
        function_fingerprint(42)


def test_fingerprint_ignores_decorators(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    for name, decorator in (("fp_deco_a", "@dec(1)"), ("fp_deco_b", "@dec(2)")):
        (tmp_path / f"{name}.py").write_text(
            f"def dec(n):\n    return lambda f: f\n\n{decorator}\ndef k(x):\n    return x\n")
    a, b = importlib.import_module("fp_deco_a"), importlib.import_module("fp_deco_b")
    try:
        assert function_fingerprint(a.k) == function_fingerprint(b.k)
    finally:
        sys.modules.pop("fp_deco_a")
        sys.modules.pop("fp_deco_b")


def test_fingerprint_without_source():
    namespaces = [{}, {}, {}]
    for ns, body in zip(namespaces, ["x + 1", "x + 1", "x + 2"]):
        exec(f"def f(x):\n    return {body}\n", ns)   # no file: bytecode and constants
    a, b, c = (function_fingerprint(ns["f"]) for ns in namespaces)
    assert a == b != c
