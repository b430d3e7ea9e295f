"""``tilejit.testing``'s decorators for TileLang's GPU tests: on this machine (no CUDA
device) the CUDA ones skip, AMD and Metal ones always skip, ``requires_llvm`` and an
installed package do not."""
import pytest

import tilejit.testing as testing
from tilejit.runtime import cuda_driver


def _skips(decorated) -> bool:
    marks = [m for m in getattr(decorated, "pytestmark", []) if m.name == "skipif"]
    return any(m.args[0] for m in marks)


class _Fresh:
    """A new test function each time it is read (marks accumulate on a function)."""

    def __get__(self, obj, owner):
        def test():
            pass
        return test


class _T:
    test = _Fresh()


def test_cuda_decorators_follow_the_device():
    have = cuda_driver.cuda_available()
    assert _skips(testing.requires_cuda(_T.test)) == (not have)
    for mode in ("ge", "gt", "eq", "lt", "le"):
        decorate = getattr(testing, f"requires_cuda_compute_version_{mode}")(8, 0)
        assert isinstance(_skips(decorate(_T.test)), bool)
    if not have:
        assert _skips(testing.requires_cuda_compute_version_ge(1, 0)(_T.test))


def test_amd_metal_skip_llvm_and_installed_packages_run():
    for decorate in (testing.requires_rocm, testing.requires_cdna, testing.requires_gfx950,
                     testing.requires_metal):
        assert _skips(decorate(_T.test))
    f = _T.test
    assert testing.requires_llvm(f) is f
    assert not _skips(testing.requires_package("numpy")(_T.test))
    assert _skips(testing.requires_package("no_such_package_here")(_T.test))


def test_a_bad_mode_is_an_error():
    with pytest.raises(ValueError, match="mode"):
        testing.requires_cuda_compute_version(9, 0, mode="bogus")
