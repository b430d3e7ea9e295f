"""One BLAS thread while a launch is simulated.

The simulator's matrix products are a tile's (``T.gemm`` of 64 x 512 by 512 x 64, an
mma's 16 x 16): a BLAS library that runs each on a thread per core gains little there,
and where several simulations run at once (``pytest -n``, a corpus of test files, the
simulator's own block and role threads) its spinning threads oversubscribe the cores.
Measured on this project's 2-core machine: TileLang's sparse MLA forward example, three
simulated at once, 74-85 s each with OpenBLAS's default threads, 18.5-19.6 s with one
(12.3-12.7 s alone either way). numpy's BLAS is found among the libraries the process
has loaded (OpenBLAS under its scipy-openblas or plain names, Intel's MKL); without one
whose thread count can be set, nothing changes. The count a launch found is restored
when the last simulation running in the process ends."""
from __future__ import annotations

import contextlib
import ctypes
import os
import threading

# (setter, getter) symbol names, as numpy's wheels and the common builds export them
_SYMBOLS = [(f"{prefix}_set_num_threads{suffix}", f"{prefix}_get_num_threads{suffix}")
            for prefix in ("scipy_openblas", "openblas") for suffix in ("64_", "")] + [
    ("MKL_Set_Num_Threads", "MKL_Get_Max_Threads")]

_LOCK = threading.Lock()
_found = False
_control = None         # (set, get) of the loaded BLAS, or None
_depth = 0              # simulations running in this process
_saved = None           # the thread count the first of them found


def _loaded_blas():
    """The (set, get) functions of the BLAS library this process has loaded, or None."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "/" in line}
    except OSError:             # not Linux: nothing is looked for
        return None
    for path in sorted(paths):
        name = os.path.basename(path).lower()
        if "openblas" not in name and "mkl_rt" not in name:
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for setter, getter in _SYMBOLS:
            if hasattr(lib, setter) and hasattr(lib, getter):
                set_fn, get_fn = getattr(lib, setter), getattr(lib, getter)
                set_fn.argtypes, set_fn.restype = [ctypes.c_int], None
                get_fn.argtypes, get_fn.restype = [], ctypes.c_int
                return set_fn, get_fn
    return None


def control():
    """(set, get) of the thread count of numpy's BLAS, or None (looked for once)."""
    global _found, _control
    if not _found:
        with _LOCK:
            if not _found:
                _control, _found = _loaded_blas(), True
    return _control


@contextlib.contextmanager
def one_blas_thread():
    """BLAS on one thread inside (a simulated launch), as it was after the last ends."""
    global _depth, _saved
    found = control()
    if found is None:
        yield
        return
    set_fn, get_fn = found
    with _LOCK:
        if _depth == 0:
            _saved = get_fn()
            set_fn(1)
        _depth += 1
    try:
        yield
    finally:
        with _LOCK:
            _depth -= 1
            if _depth == 0 and _saved >= 1:     # (a count the library gave back)
                set_fn(_saved)
