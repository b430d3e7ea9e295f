"""docs/amdgpu-report.md is tools/amdgpu_report.py's output for the current compiler
(every example compiled for gfx942, gfx90a and sm_90a: about a minute)."""
import os
import shutil
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="the sm_90a columns need ptxas")
def test_the_report_is_up_to_date():
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    try:
        import amdgpu_report
    finally:
        sys.path.remove(os.path.join(ROOT, "tools"))
    with open(os.path.join(ROOT, "docs", "amdgpu-report.md")) as f:
        assert f.read() == amdgpu_report.markdown(), \
            "regenerate: python tools/amdgpu_report.py > docs/amdgpu-report.md"
