import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.dirname(os.path.abspath(__file__))
# the examples, the helpers (support/) and the seeds' programs (programs/) import by name
for _path in (os.path.join(ROOT, "examples"), os.path.join(TESTS, "support"),
              os.path.join(TESTS, "programs")):
    sys.path.insert(0, _path)


def _gpu_reason():
    try:
        from tilejit.runtime.cuda_driver import cuda_available
    except Exception as e:  # pragma: no cover
        return f"cuda driver bindings unusable: {e}"
    if not cuda_available():
        return "no CUDA device on this machine"
    try:
        import torch
    except ImportError:
        return "GPU tests compare against torch, which is not installed"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    return None


GPU_SKIP_REASON = _gpu_reason()


@pytest.fixture(scope="session", autouse=True)
def _private_disk_cache(tmp_path_factory):
    """Tests compile into a cache of their own, never the user's ~/.cache/tilejit."""
    old = os.environ.get("TILEJIT_CACHE_DIR")
    os.environ["TILEJIT_CACHE_DIR"] = str(tmp_path_factory.mktemp("tilejit-cache"))
    yield
    if old is None:
        os.environ.pop("TILEJIT_CACHE_DIR", None)
    else:
        os.environ["TILEJIT_CACHE_DIR"] = old


def pytest_collection_modifyitems(config, items):
    if GPU_SKIP_REASON is None:
        return
    skip = pytest.mark.skip(reason=GPU_SKIP_REASON)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter):
    """One line for the GPU tests skipped on this machine (instead of one line each)."""
    if GPU_SKIP_REASON is None:
        return
    skipped = terminalreporter.stats.get("skipped", [])
    gpu = sum(1 for report in skipped
              if isinstance(report.longrepr, tuple) and GPU_SKIP_REASON in report.longrepr[2])
    if gpu:
        terminalreporter.write_line(
            f"{gpu} GPU test(s) skipped: {GPU_SKIP_REASON} (they run where there is a CUDA "
            f"device; `pytest -rs` lists them)")
    others = len(skipped) - gpu
    if others:
        terminalreporter.write_line(f"{others} other test(s) skipped (`pytest -rs` lists them)")


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture
def sass(tmp_path):
    """``sass(ptx, arch)``: the SASS ptxas makes of ``ptx``, as nvdisasm prints it
    (``nvdisasm`` on the PATH or from the ``nvidia-cuda-nvdisasm`` wheel, a test
    dependency); skipped where either tool is missing."""
    import glob
    import shutil
    import subprocess
    import sysconfig
    exe = shutil.which("ptxas")
    dis = shutil.which("nvdisasm") or next(iter(glob.glob(os.path.join(
        sysconfig.get_paths()["purelib"], "nvidia", "cu*", "bin", "nvdisasm"))), None)
    if exe is None or dis is None:
        pytest.skip("ptxas or nvdisasm is missing")

    def disassemble(ptx: str, arch: str) -> str:
        path = tmp_path / f"s_{arch}.ptx"
        path.write_text(ptx)
        out = subprocess.run([exe, f"-arch={arch}", str(path), "-o", f"{path}.cubin"],
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        out = subprocess.run([dis, "-c", f"{path}.cubin"], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return out.stdout
    return disassemble


@pytest.fixture
def ptxas(tmp_path):
    """``ptxas(ptx, arch)``: assemble with CUDA's ptxas (skipped where it is not on the
    PATH); returns its ``-v`` report (registers, spills)."""
    import shutil
    import subprocess
    exe = shutil.which("ptxas")
    if exe is None:
        pytest.skip("ptxas is not on the PATH")

    def assemble(ptx: str, arch: str) -> str:
        path = tmp_path / f"k_{arch}.ptx"
        path.write_text(ptx)
        out = subprocess.run([exe, f"-arch={arch}", "-v", str(path), "-o", f"{path}.cubin"],
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return out.stderr
    return assemble
