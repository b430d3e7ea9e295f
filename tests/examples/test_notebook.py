"""The notebook's code cells run (as a script, in the simulator)."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_quickstart_notebook_runs(tmp_path):
    nb = json.load(open(os.path.join(ROOT, "notebooks", "quickstart.ipynb")))
    code = "\n\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    script = tmp_path / "notebook.py"
    script.write_text(code)
    env = dict(os.environ, PYTHONPATH=ROOT, TILEJIT_TARGET="sim")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert ".entry vector_add_kernel" in out.stdout


def test_quickstart_notebook_cells_have_ids():
    """nbformat 4.5: every cell a unique id of 1-64 letters, digits, '-' or '_'."""
    import re
    nb = json.load(open(os.path.join(ROOT, "notebooks", "quickstart.ipynb")))
    assert (nb["nbformat"], nb["nbformat_minor"]) >= (4, 5)
    ids = [cell.get("id") for cell in nb["cells"]]
    assert all(isinstance(i, str) and re.fullmatch(r"[A-Za-z0-9_-]{1,64}", i) for i in ids), ids
    assert len(set(ids)) == len(ids), ids
