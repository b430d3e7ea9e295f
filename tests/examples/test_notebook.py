"""The notebook's code cells run (as a script, in the simulator)."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


NOTEBOOKS = sorted(f for f in os.listdir(os.path.join(ROOT, "notebooks"))
                   if f.endswith(".ipynb"))


def _run(name, tmp_path):
    nb = json.load(open(os.path.join(ROOT, "notebooks", name)))
    code = "\n\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    script = tmp_path / "notebook.py"
    script.write_text(code)
    env = dict(os.environ, PYTHONPATH=ROOT, TILEJIT_TARGET="sim")
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
    import torch
    if not torch.cuda.is_available():
        assert "GPU cell skipped: no CUDA device" in out


def test_quickstart_notebook_cells_have_ids():
    """nbformat 4.5: every cell a unique id of 1-64 letters, digits, '-' or '_'."""
    import re
    nb = json.load(open(os.path.join(ROOT, "notebooks", "quickstart.ipynb")))
    assert (nb["nbformat"], nb["nbformat_minor"]) >= (4, 5)
    ids = [cell.get("id") for cell in nb["cells"]]
    assert all(isinstance(i, str) and re.fullmatch(r"[A-Za-z0-9_-]{1,64}", i) for i in ids), ids
    assert len(set(ids)) == len(ids), ids
