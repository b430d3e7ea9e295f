"""``python -m tilejit``: info, the disk cache, compiling a kernel to PTX without a GPU."""
import os
import subprocess
import sys

import pytest

from tilejit.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(*args, cache):
    env = dict(os.environ, TILEJIT_CACHE_DIR=str(cache), PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-m", "tilejit", *args], capture_output=True,
                         text=True, env=env, cwd=ROOT)
    return out.returncode, out.stdout, out.stderr


def test_info_lists_versions_devices_and_the_cache(tmp_path):
    rc, out, err = _run("info", cache=tmp_path)
    assert rc == 0, err
    assert out.startswith("tilejit ") and "llvmlite" in out and "numba" in out
    assert "CUDA" in out and f"disk cache: {tmp_path}" in out


def test_compile_writes_ptx_and_the_cache_lists_and_clears_it(tmp_path):
    ptx = tmp_path / "matmul.ptx"
    rc, out, err = _run("compile", "examples/gemm.py::matmul", "--arch", "sm_90a",
                        "--signature", "float16[4096,4096] float16[4096,4096] "
                        "float32[4096,4096]", "--const", "block_K=64", "--out", str(ptx),
                        "--dump", str(tmp_path / "dump"), cache=tmp_path / "cache")
    assert rc == 0, err
    text = ptx.read_text()
    assert ".target sm_90a" in text and "wgmma.mma_async" in text
    assert any(name.endswith("kernel.ptx") for _, _, files in os.walk(tmp_path / "dump")
               for name in files)
    rc, out, _ = _run("compile", "examples/vector_add.py::vector_add", "--arch", "sm_80",
                      "--signature", "float32[1000] float32[1000] float32[1000]",
                      cache=tmp_path / "cache")
    assert rc == 0 and ".target sm_80" in out
    rc, out, _ = _run("cache", "list", cache=tmp_path / "cache")
    assert rc == 0 and "vector_add" in out
    rc, out, _ = _run("cache", "clear", cache=tmp_path / "cache")
    assert rc == 0 and "removed" in out
    rc, out, _ = _run("cache", "list", cache=tmp_path / "cache")
    assert "empty" in out


@pytest.mark.parametrize("argv,message", [
    (["compile", "examples/gemm.py", "--signature", "x"], "expected FILE::KERNEL"),
    (["compile", "nowhere.py::k", "--signature", "x"], "no such file"),
    (["compile", "examples/gemm.py::nope", "--signature", "x"], "its kernels: matmul"),
    (["compile", "examples/gemm.py::matmul", "--signature", "half[4,4]"], "unknown dtype"),
    (["compile", "examples/gemm.py::matmul", "--signature", "f[1"], "expected dtype["),
    (["compile", "examples/gemm.py::matmul", "--signature", "float16[64,64]"], "argument"),
])
def test_bad_command_lines_are_one_line_errors(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err, err
