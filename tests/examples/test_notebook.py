"""The notebooks' code cells run top to bottom (as a script): where there is no CUDA
device in the simulator, the GPU cells skipped with a note they print; where there is
one, every cell (``pytest -m gpu`` runs the GPU variant, which checks the benchmark)."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


NOTEBOOKS = sorted(f for f in os.listdir(os.path.join(ROOT, "notebooks"))
                   if f.endswith(".ipynb"))


def _cuda() -> bool:
    """What the notebooks' GPU cells ask (torch sees a CUDA device)."""
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def _run(name, tmp_path):
    nb = json.load(open(os.path.join(ROOT, "notebooks", name)))
    code = "\n\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    script = tmp_path / "notebook.py"
    script.write_text(code)
    env = dict(os.environ, PYTHONPATH=ROOT)
    if _cuda():
        # the GPU cells launch on CUDA tensors: TILEJIT_TARGET=sim would put them in the
        # simulator (or fail them); numpy arrays go to the simulator without it
        env.pop("TILEJIT_TARGET", None)
    else:
        env["TILEJIT_TARGET"] = "sim"
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_notebook_runs_top_to_bottom(name, tmp_path):
    _run(name, tmp_path)


def test_quickstart_shows_ptx_a_layout_plot_and_says_when_gpu_cells_skip(tmp_path):
    out = _run("quickstart.ipynb", tmp_path)
    assert ".entry vector_add_kernel" in out
    assert "layout plot written to" in out and (tmp_path / "mma_a_fragment.png").exists()
    if not _cuda():
        assert "GPU cell skipped: no CUDA device" in out


@pytest.mark.gpu
def test_quickstart_runs_every_cell_on_the_gpu(tmp_path):
    """Every cell, the benchmark too: its plot written and its rows printed."""
    out = _run("quickstart.ipynb", tmp_path)
    assert "GPU cell skipped" not in out
    assert ".entry vector_add_kernel" in out
    assert (tmp_path / "mma_a_fragment.png").exists()
    assert "benchmark plot written to" in out
    assert (tmp_path / "vector_add_bandwidth.png").stat().st_size > 0
    rows = [line for line in out.splitlines() if " elements: tilejit " in line]
    assert len(rows) == 6, out


def test_quickstart_notebook_cells_have_ids():
    """nbformat 4.5: every cell a unique id of 1-64 letters, digits, '-' or '_'."""
    import re
    nb = json.load(open(os.path.join(ROOT, "notebooks", "quickstart.ipynb")))
    assert (nb["nbformat"], nb["nbformat_minor"]) >= (4, 5)
    ids = [cell.get("id") for cell in nb["cells"]]
    assert all(isinstance(i, str) and re.fullmatch(r"[A-Za-z0-9_-]{1,64}", i) for i in ids), ids
    assert len(set(ids)) == len(ids), ids
