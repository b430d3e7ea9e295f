"""tilejit's log: nothing printed by default; at DEBUG each compilation's stages and the
disk cache's hit or miss."""
import logging
import subprocess
import sys

import numpy as np

import tilejit
import tilejit.language as T


@tilejit.kernel
def scale(A, B, block: T.constexpr = 256):
    with T.Kernel(T.ceildiv(A.shape[0], block), threads=128) as bx:
        for i in T.Parallel(block):
            B[bx * block + i] = A[bx * block + i] * 2


def test_debug_reports_stages_and_the_disk_cache(caplog, monkeypatch, tmp_path):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))
    a = np.ones(1000, np.float32)
    with caplog.at_level(logging.DEBUG, logger="tilejit"):
        scale.compile(a, a.copy(), target="cuda", arch="sm_80", block=512)
        scale.compile(a, a.copy(), target="cuda", arch="sm_80", block=512)
    messages = [r.getMessage() for r in caplog.records if r.name == "tilejit"]
    assert any(m.startswith("disk cache miss: scale [block=512; threads=128; sm_80]")
               for m in messages), messages
    compiled = [m for m in messages if m.startswith("compiled scale")]
    assert compiled and all(s in compiled[0] for s in
                            ("front end and passes", "typing and lowering", "LLVM", "PTX"))
    assert any(m.startswith("disk cache hit: scale") for m in messages), messages


def test_nothing_is_printed_by_default(tmp_path):
    code = ("import numpy as np, tilejit, tilejit.language as T\n"
            "@tilejit.kernel\n"
            "def k(A):\n"
            "    with T.Kernel(1, threads=32) as bx:\n"
            "        A[0] = 1\n"
            "k.compile(np.zeros(4, np.float32), target='cuda', arch='sm_80')\n")
    script = tmp_path / "k.py"
    script.write_text(code)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         env={"TILEJIT_CACHE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin",
                              "PYTHONPATH": ":".join(sys.path)})
    assert out.returncode == 0, out.stderr
    assert out.stdout == "" and out.stderr == ""
