"""README's first python block runs as written (as a script, in the simulator)."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def first_python_block():
    text = open(os.path.join(ROOT, "README.md")).read()
    match = re.search(r"^```python\n(.*?)^```", text, re.S | re.M)
    assert match, "README.md has no ```python block"
    return match.group(1)


def test_readme_first_snippet_runs(tmp_path):
    script = tmp_path / "readme_snippet.py"
    script.write_text(first_python_block())
    env = dict(os.environ, PYTHONPATH=ROOT, TILEJIT_TARGET="sim",
               TILEJIT_CACHE_DIR=str(tmp_path / "cache"))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "vector_add: passed" in out.stdout
