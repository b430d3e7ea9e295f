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
