"""The on-disk store behind the kernel and autotuning caches: content digests, function
fingerprints, and ``DiskCache``, a directory of checksummed JSON entries written
atomically. Knows nothing of the compiler."""
from __future__ import annotations

import ast
import copy
import enum
import hashlib
import json
import os
import re
import threading
import types
import warnings

import numpy as np

from tilejit.frontend.references import code_uses, function_reads, outside_uses, user_function
from tilejit.frontend.source import function_def_from_file
from tilejit.options import cache_root

_FORMAT_VERSION = 1
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
class Unkeyable(TypeError):
    """A function reads a value the fingerprint cannot hold by value (an object of a
    class it does not know): ``function_fingerprint(..., strict=True)`` raises it."""

    def __init__(self, name: str, value):
        self.name = name
        self.type_name = f"{type(value).__module__}.{type(value).__qualname__}"
        super().__init__(f"{name} (a {self.type_name}) cannot be digested by value")


def _named(value):
    """(module, qualified name) of a class or a named library function, else None."""
    name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
    if not isinstance(name, str) or not callable(value):
        return None
    module = getattr(value, "__module__", None) or type(value).__module__
    return [str(module), name]


def _value_data(value, name: str, strict: bool, function_data, depth: int = 0):
    """``value`` as digestable data, by value: numbers (numpy scalars by dtype and
    bytes), strings, None, tuples, lists, dicts and sets of them, numpy arrays (dtype,
    shape and a digest of the bytes), dtypes, enum members, modules, classes and library
    functions by name, user functions as ``function_data(f)`` gives them, bound methods
    by their object and their function, and other
    objects by class and attributes (``vars``). Anything else (or nested too deep)
    raises Unkeyable when ``strict``, else stands for its type."""
    def inner(v):
        return _value_data(v, name, strict, function_data, depth + 1)

    if depth > _MAX_DEPTH:
        if strict:
            raise Unkeyable(name, value)
        return ["too deep"]
    if isinstance(value, types.MethodType):
        # a bound method read through an attribute chain (``emitter.mma``): what it
        # does depends on its object too, not only on its function's code
        return ["method", inner(value.__self__), inner(value.__func__)]
    target = user_function(value)
    if target is not None:
        return function_data(target)
    if isinstance(value, np.generic):         # before float: np.float64 is one
        return ["numpy", value.dtype.str, value.tobytes().hex()]
    if isinstance(value, np.ndarray):
        data = np.ascontiguousarray(value)
        raw = repr(data.tolist()).encode() if data.dtype.hasobject else data.tobytes()
        return ["ndarray", data.dtype.str, list(data.shape), hashlib.sha256(raw).hexdigest()]
    if isinstance(value, np.dtype):
        return ["np.dtype", value.str]
    if isinstance(value, enum.Enum):
        return ["enum", _named(type(value)), value.name, inner(value.value)]
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return ["data", type(value).__name__, repr(value)]
    if isinstance(value, (tuple, list)):
        return ["sequence", type(value).__qualname__, [inner(v) for v in value]]
    if isinstance(value, dict):
        items = sorted((digest(k), k, inner(v)) for k, v in
                       ((inner(k), v) for k, v in value.items()))
        return ["dict", [[k, v] for _, k, v in items]]
    if isinstance(value, (set, frozenset)):
        return ["set", sorted(digest(inner(v)) for v in value)]
    dtype_name, bits = getattr(value, "name", None), getattr(value, "bits", None)
    if isinstance(dtype_name, str) and isinstance(bits, int):     # a tilejit dtype
        return ["dtype", dtype_name]
    if isinstance(value, types.ModuleType):
        return ["module", value.__name__]
    if type(value).__module__.split(".")[0] == "torch" and type(value).__name__ == "dtype":
        return ["torch.dtype", str(value)]
    named = _named(value)
    if named is not None:
        return ["named"] + named
    keyed = getattr(type(value), "__tj_key__", None)
    if keyed is not None:                     # a T.Layout / T.Fragment: by its values
        try:
            data = keyed(value)
        except Exception:                     # a layout the compile will refuse
            if strict:
                raise Unkeyable(name, value) from None
            return ["object", _named(type(value))]
        return ["keyed", _named(type(value)), inner(data)]
    attributes = getattr(value, "__dict__", None)
    if isinstance(attributes, dict):          # e.g. a config object, T.const's symbols
        return ["object", _named(type(value)), inner(attributes)]
    if strict:
        raise Unkeyable(name, value)
    return ["object", _named(type(value))]


def _code_signature(code: types.CodeType):
    # a frozenset's repr order follows string hashing, which varies between processes
    consts = [_code_signature(c) if isinstance(c, types.CodeType) else
              sorted(map(repr, c)) if isinstance(c, frozenset) else repr(c)
              for c in code.co_consts]
    return [code.co_code, consts, list(code.co_names)]


def _source_text(func, found) -> str | None:
    """The function's source without its decorators (they are not its program);
    ``found`` is ``function_def_from_file(func)``."""
    import textwrap
    import inspect
    if found is not None:
        node = copy.copy(found[1])
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


_ANALYSED: dict = {}


def _analysis(func):
    """(the function's program: its source text or code signature, ``outside_uses``),
    once per code object (parsing and unparsing a large kernel takes milliseconds, and a
    kernel's fingerprint is taken for each specialization)."""
    code = func.__code__
    key = (code.co_filename, code)
    found = _ANALYSED.get(key)
    if found is None:
        tree = function_def_from_file(func, copy_tree=False)
        text = _source_text(func, tree)
        found = (text if text is not None else _code_signature(code),
                 outside_uses(tree[1]) if tree is not None else code_uses(code))
        if len(_ANALYSED) >= 1024:
            _ANALYSED.clear()
        _ANALYSED[key] = found
    return found


def _fingerprint_parts(func, depth: int, active: set, namespace, strict: bool) -> list:
    program, uses = _analysis(func)
    parts = [func.__qualname__, program]

    def function_data(target):
        if target.__code__ in active:
            return ["cycle", target.__qualname__]
        if depth >= _MAX_DEPTH:
            return ["too deep", target.__qualname__]
        active.add(target.__code__)
        try:
            return ["function", _fingerprint_parts(target, depth + 1, active, None, strict)]
        finally:
            active.discard(target.__code__)

    for read in function_reads(func, namespace=namespace, uses=uses):
        parts.append([read.kind, read.name,
                      _value_data(read.value, read.name, strict, function_data)])
    # default values are computed where the function is defined, not read by its code
    # (`def make(factor=scale)` in a program's factory): they are part of what it does.
    # Keyed leniently (a value of a class it cannot digest stands for its type): a
    # default such as torch.device("cuda") keeps the kernel cached
    for what in ("__defaults__", "__kwdefaults__"):
        value = getattr(func, what, None)
        if value:
            parts.append([what, _value_data(value, f"{func.__qualname__}.{what}", False,
                                            function_data)])
    return parts


def function_fingerprint(func, namespace: dict | None = None, strict: bool = False) -> str:
    """A digest of ``func``'s source and of every value it reads by global or closure
    name, or through an attribute chain rooted at one (``cfg.BLOCK``): by value (see
    ``_value_data``: numpy scalars and arrays included), user functions recursively
    (also through ``__wrapped__`` / ``.func``, so ``@T.macro`` callees), library
    functions and classes by name. ``namespace``: where ``func``'s own names are read
    (a kernel's resolved globals; default: its globals and closure now). ``strict``:
    raise Unkeyable for a value of a class it cannot digest, instead of keying its type."""
    target = user_function(func) if not isinstance(func, types.FunctionType) else func
    if target is None:
        raise TypeError(f"function_fingerprint: expected a Python function, got {func!r:.80}")
    return digest("tilejit-function",
                  _fingerprint_parts(target, 0, {target.__code__}, namespace, strict))


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
