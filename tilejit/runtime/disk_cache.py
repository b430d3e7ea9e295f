"""The on-disk store behind the kernel and autotuning caches: content digests, function
fingerprints, and ``DiskCache``, a directory of checksummed JSON entries written
atomically. Knows nothing of the compiler."""
from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import threading
import types
import warnings

from tilejit.frontend.source import function_def_from_file
from tilejit.options import cache_root

_FORMAT_VERSION = 1
_SKIPPED_MODULES = ("tilejit", "numpy", "torch", "numba", "builtins")
_MAX_DEPTH = 8
_SAFE_KEY = re.compile(r"[A-Za-z0-9_.-]{1,128}")


class CacheWarning(UserWarning):
    """A cache entry could not be read or written; the cache carries on without it."""


def cache_dir() -> str | None:
    """The cache root (``options.cache_root``: TILEJIT_DISABLE_CACHE, TILEJIT_CACHE_DIR),
    read on each call."""
    return cache_root()


# -- digests ---------------------------------------------------------------------------
def _encode(value, out: list) -> None:
    # Each value is a type tag plus a length or terminator, so distinct values never
    # encode alike. Lists and tuples encode alike (a tuple stored as JSON comes back a list).
    if value is None:
        out.append(b"N")
    elif isinstance(value, bool):
        out.append(b"T" if value else b"F")
    elif isinstance(value, int):
        out.append(b"i%d;" % value)
    elif isinstance(value, float):
        out.append(b"f" + float(value).hex().encode() + b";")
    elif isinstance(value, str):
        data = value.encode("utf-8", "surrogatepass")
        out.append(b"s%d:" % len(data) + data)
    elif isinstance(value, (bytes, bytearray)):
        out.append(b"b%d:" % len(value) + bytes(value))
    elif isinstance(value, (list, tuple)):
        out.append(b"l%d:" % len(value))
        for item in value:
            _encode(item, out)
    elif isinstance(value, dict):
        items = []
        for k, v in value.items():
            kb, vb = [], []
            _encode(k, kb)
            _encode(v, vb)
            items.append((b"".join(kb), b"".join(vb)))
        items.sort()
        out.append(b"d%d:" % len(items))
        for kb, vb in items:
            out.append(kb + vb)
    else:
        raise TypeError(f"tilejit cache digest: cannot serialize a {type(value).__name__} "
                        f"({value!r:.80}); expected nested tuple/list/dict of str, int, "
                        "float, bool, None or bytes")


def digest(*parts) -> str:
    """sha256 hex digest of ``parts`` under a canonical serialization (dict keys sorted).
    Raises TypeError on values other than tuple, list, dict, str, int, float, bool,
    None and bytes."""
    out: list = []
    _encode(parts, out)
    return hashlib.sha256(b"".join(out)).hexdigest()


# -- function fingerprints -------------------------------------------------------------
def _plain_data(value):
    """``value`` as digestable data if it is plain data (a tilejit dtype as its name),
    else None (not plain data)."""
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return ("data", repr(value))
    if isinstance(value, tuple):
        items = [_plain_data(v) for v in value]
        return None if any(i is None for i in items) else ("tuple", items)
    name, bits = getattr(value, "name", None), getattr(value, "bits", None)
    if isinstance(name, str) and isinstance(bits, int):
        return ("dtype", name)
    return None


def _unwrap(value):
    """The user function behind ``value`` (through ``__wrapped__``, ``.func``, a bound
    method's ``__func__``), or None."""
    for _ in range(_MAX_DEPTH):
        if isinstance(value, types.FunctionType):
            module = getattr(value, "__module__", None) or ""
            if module.split(".")[0] in _SKIPPED_MODULES:
                return None
            return value
        inner = None
        for attr in ("__wrapped__", "func", "__func__"):
            try:
                candidate = getattr(value, attr, None)
            except Exception:  # a property that fails
                candidate = None
            if candidate is not None and candidate is not value:
                inner = candidate
                break
        if inner is None:
            return None
        value = inner
    return None


def _code_signature(code: types.CodeType):
    # a frozenset's repr order follows string hashing, which varies between processes
    consts = [_code_signature(c) if isinstance(c, types.CodeType) else
              sorted(map(repr, c)) if isinstance(c, frozenset) else repr(c)
              for c in code.co_consts]
    return [code.co_code, consts, list(code.co_names)]


def _all_names(code: types.CodeType) -> set:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _all_names(const)
    return names


def _source_text(func) -> str | None:
    """The function's source without its decorators (they are not its program)."""
    import textwrap
    import inspect
    found = function_def_from_file(func)
    if found is not None:
        node = found[1]
        node.decorator_list = []
        return ast.unparse(node)
    try:
        text = inspect.getsource(func)
    except (OSError, TypeError):
        return None
    try:
        node = ast.parse(textwrap.dedent(text)).body[0]
    except (SyntaxError, IndexError):  # e.g. a lambda inside a larger expression
        return text
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.decorator_list:
        return "".join(text.splitlines(keepends=True)[node.lineno - 1:])
    return text


def _fingerprint_parts(func, depth: int, active: set) -> list:
    text = _source_text(func)
    code = func.__code__
    parts = [func.__qualname__, text if text is not None else _code_signature(code)]
    referenced = []
    globals_ = getattr(func, "__globals__", {})
    for name in sorted(_all_names(code)):
        if name in globals_:
            referenced.append(("global", name, globals_[name]))
    for name, cell in zip(code.co_freevars, func.__closure__ or ()):
        try:
            referenced.append(("closure", name, cell.cell_contents))
        except ValueError:  # an empty cell
            referenced.append(("closure", name, "<empty>"))
    for kind, name, value in referenced:
        data = _plain_data(value)
        if data is not None:
            parts.append([kind, name, data])
            continue
        target = _unwrap(value)
        if target is None:
            continue
        if target.__code__ in active:
            parts.append([kind, name, "cycle", target.__qualname__])
        elif depth >= _MAX_DEPTH:
            parts.append([kind, name, "too deep", target.__qualname__])
        else:
            active.add(target.__code__)
            parts.append([kind, name, "function",
                          _fingerprint_parts(target, depth + 1, active)])
            active.discard(target.__code__)
    return parts


def function_fingerprint(func) -> str:
    """A digest of ``func``'s source and of what it refers to by global name or closure:
    user functions (recursively, also through ``__wrapped__`` / ``.func``) and plain
    data values. Functions of tilejit, numpy, torch, numba and builtins are skipped."""
    target = _unwrap(func) if not isinstance(func, types.FunctionType) else func
    if target is None:
        raise TypeError(f"function_fingerprint: expected a Python function, got {func!r:.80}")
    return digest("tilejit-function", _fingerprint_parts(target, 0, {target.__code__}))


# -- the store -------------------------------------------------------------------------
def _payload_text(payload) -> str:
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=True)


def _checksum(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class DiskCache:
    """Entries ``<cache_dir()>/<namespace>/<key>.json``, each one JSON object
    ``{"version": 1, "checksum": sha256 of the payload's canonical JSON, "payload": {...}}``.
    Loading never raises; storing raises only for a payload that is not JSON data."""

    def __init__(self, namespace: str):
        if not isinstance(namespace, str) or not _SAFE_KEY.fullmatch(namespace):
            raise ValueError(f"DiskCache namespace: expected a plain directory name "
                             f"(letters, digits, '_', '.', '-'), got {namespace!r}")
        self.namespace = namespace
        self._warned: set = set()
        self._lock = threading.Lock()

    def __repr__(self):
        return f"DiskCache({self.namespace!r})"

    def _directory(self) -> str | None:
        root = cache_dir()
        return None if root is None else os.path.join(root, self.namespace)

    def path(self, key) -> str | None:
        """The entry's file (None when the cache is disabled). Keys that are not plain
        file names are hashed."""
        directory = self._directory()
        if directory is None:
            return None
        key = str(key)
        name = key if _SAFE_KEY.fullmatch(key) and not key.startswith(".") else digest(key)
        return os.path.join(directory, name + ".json")

    def _warn(self, key, message: str) -> None:
        with self._lock:
            if key in self._warned:
                return
            self._warned.add(key)
        warnings.warn(message, CacheWarning, stacklevel=3)

    def load(self, key: str) -> dict | None:
        """The payload stored under ``key``; None on a miss, a disabled cache, or a
        damaged entry (which is reported once per key and deleted)."""
        path = self.path(key)
        if path is None:
            return None
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as e:
            self._warn(key, f"tilejit cache: cannot read {path}: {e}; ignoring the entry")
            return None
        problem = None
        try:
            entry = json.loads(raw.decode("utf-8"))
            if not isinstance(entry, dict) or set(entry) != {"version", "checksum", "payload"}:
                problem = "not a cache entry"
            elif entry["version"] != _FORMAT_VERSION:
                problem = f"format version {entry['version']!r}, expected {_FORMAT_VERSION}"
            elif not isinstance(entry["payload"], dict):
                problem = "the payload is not an object"
            elif entry["checksum"] != _checksum(_payload_text(entry["payload"])):
                problem = "checksum mismatch"
        except (ValueError, TypeError, RecursionError) as e:  # JSONDecodeError, bad UTF-8
            problem = f"unreadable ({type(e).__name__}: {str(e)[:100]})"
        if problem is not None:
            self._warn(key, f"tilejit cache: damaged entry {path} ({problem}); "
                            "deleted, it will be rebuilt")
            try:
                os.remove(path)
            except OSError:
                pass
            return None
        return entry["payload"]

    def store(self, key: str, payload: dict) -> None:
        """Write ``payload`` (a JSON-serializable dict) under ``key`` atomically (temp
        file + ``os.replace``). A disabled cache does nothing; an OSError is reported."""
        import tempfile
        if not isinstance(payload, dict):
            raise TypeError(f"DiskCache.store: payload must be a dict, got "
                            f"{type(payload).__name__}")
        path = self.path(key)
        if path is None:
            return
        try:
            text = _payload_text(payload)
        except (TypeError, ValueError) as e:
            raise TypeError(f"DiskCache.store: payload is not JSON data: {e}") from None
        entry = (f'{{"checksum":"{_checksum(text)}","payload":{text},'
                 f'"version":{_FORMAT_VERSION}}}')
        directory = os.path.dirname(path)
        tmp = None
        try:
            os.makedirs(directory, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(entry)
            os.replace(tmp, path)
            tmp = None
        except OSError as e:
            warnings.warn(f"tilejit cache: cannot write {path}: {e}; continuing without "
                          "caching it", CacheWarning, stacklevel=2)
        finally:
            if tmp is not None:
                try:
                    os.remove(tmp)
                except OSError:
                    pass
