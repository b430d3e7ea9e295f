"""``tilejit.testing``: TileLang's ``tilelang.testing`` path: ``do_bench(fn, warmup,
rep)`` (``tuning/bench.py``), ``torch_assert_close`` (``tilelang/utils.py``),
``set_random_seed``, ``main()`` (pytest on the calling file), the performance-regression
harness ``process_func``/``regression`` (``tuning/regression.py``) and the test decorators
TileLang's tests put on GPU tests: ``requires_cuda``, ``requires_cuda_compute_version``
and its ``_ge/_gt/_eq/_lt/_le`` forms (skip unless the device's compute capability
compares so), ``requires_rocm``/``requires_cdna``/``requires_gfx950``/
``requires_cuda_or_cdna``/``requires_metal`` (tilejit launches on CUDA only: AMD and
Metal tests are skipped), ``requires_llvm`` (always there) and ``requires_package``."""
import importlib.util
import inspect
import operator
import random
import sys

from tilejit.tilelang.utils import torch_assert_close
from tilejit.tuning.bench import do_bench
from tilejit.tuning.regression import process_func, regression
from tilejit.language.compat import module_getattr

__all__ = ["do_bench", "process_func", "regression", "torch_assert_close", "set_random_seed",
           "main", "requires_cuda",
           "requires_cuda_compute_version", "requires_cuda_compute_version_ge",
           "requires_cuda_compute_version_gt", "requires_cuda_compute_version_eq",
           "requires_cuda_compute_version_lt", "requires_cuda_compute_version_le",
           "requires_rocm", "requires_cdna", "requires_gfx950", "requires_cuda_or_cdna",
           "requires_metal", "requires_llvm", "requires_package"]


def set_random_seed(seed: int = 42) -> None:
    """Seed Python's, numpy's and (when installed) torch's generators."""
    import numpy as np
    random.seed(seed)
    np.random.seed(seed)
    try:
        import torch    # only seeded where it is installed
    except ImportError:
        return
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def main():
    """Run pytest on the file that calls this (TileLang's ``if __name__ == "__main__":
    tilelang.testing.main()``); exits with pytest's status."""
    import pytest      # a test dependency: only when tests run
    caller = inspect.stack()[1].filename
    sys.exit(pytest.main([caller, *sys.argv[1:]]))


def _capability():
    """The compute capability of device 0 as (major, minor), or None without CUDA."""
    # the driver only when a decorator asks (import tilejit.testing loads none of it)
    from tilejit.runtime import cuda_driver
    if not cuda_driver.cuda_available():
        return None
    digits = cuda_driver.device_arch(0)[3:].rstrip("a")
    return int(digits[:-1]), int(digits[-1])


def _skip_unless(condition: bool, reason: str):
    import pytest
    return pytest.mark.skipif(not condition, reason=reason)


def requires_cuda(func):
    """Skip the test without a CUDA device."""
    return _skip_unless(_capability() is not None, "needs a CUDA device")(func)


_COMPARE = {"ge": operator.ge, "gt": operator.gt, "eq": operator.eq, "lt": operator.lt,
            "le": operator.le}


def requires_cuda_compute_version(major_version, minor_version=0, mode="ge"):
    """Skip the test unless device 0's compute capability compares (``mode``: ge, gt, eq,
    lt, le) with ``major_version.minor_version``."""
    if mode not in _COMPARE:
        raise ValueError(f"requires_cuda_compute_version mode: one of {list(_COMPARE)}, "
                         f"got {mode!r}")
    have = _capability()
    ok = have is not None and _COMPARE[mode](have, (major_version, minor_version))
    return _skip_unless(ok, f"needs a CUDA device of compute capability {mode} "
                            f"{major_version}.{minor_version}")


def requires_cuda_compute_version_ge(major_version, minor_version=0):
    return requires_cuda_compute_version(major_version, minor_version, "ge")


def requires_cuda_compute_version_gt(major_version, minor_version=0):
    return requires_cuda_compute_version(major_version, minor_version, "gt")


def requires_cuda_compute_version_eq(major_version, minor_version=0):
    return requires_cuda_compute_version(major_version, minor_version, "eq")


def requires_cuda_compute_version_lt(major_version, minor_version=0):
    return requires_cuda_compute_version(major_version, minor_version, "lt")


def requires_cuda_compute_version_le(major_version, minor_version=0):
    return requires_cuda_compute_version(major_version, minor_version, "le")


def _never(reason):
    def decorate(func):
        return _skip_unless(False, reason)(func)
    return decorate


requires_rocm = requires_cdna = requires_gfx950 = _never(
    "tilejit compiles for AMDGPU but does not launch there yet")
requires_metal = _never("tilejit has no Metal target")


def requires_cuda_or_cdna(func):
    """Skip the test without a CUDA device (tilejit launches on no AMD device yet)."""
    return requires_cuda(func)


def requires_llvm(func):
    """LLVM (llvmlite) is always there."""
    return func


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:     # (a TileLang module tilejit refuses by name, even to a probe)
        return False


def requires_package(*names):
    """Skip the test unless every package in ``names`` imports."""
    missing = [n for n in names if not _importable(n)]
    return _skip_unless(not missing, f"needs the package(s) {', '.join(missing)}")

# TileLang's names this module does not have: an error naming them (``compat.py``)
__getattr__ = module_getattr(
    "tilelang.testing", __name__,
    "of TileLang's testing helpers tilejit has main, do_bench, torch_assert_close, "
    "set_random_seed, the regression harness and the requires_* decorators")
