"""Write docs/amdgpu-report.md: each example kernel's registers and on-chip memory on
gfx942 and gfx90a (the code object's metadata note, ``tilejit/runtime/hsaco.py``) beside
its sm_90a figures (``ptxas -v``), with the kernels AMDGPU does not lower yet and why.

    python tools/amdgpu_report.py > docs/amdgpu-report.md

Compile-only: no AMD GPU is lent here, so nothing in the page was measured on one.
Needs ``ptxas`` on the PATH for the sm_90a columns (they read "n/a" without it)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests", "support")]

from ptx_examples import all_examples, example_arguments  # noqa: E402
from tilejit.errors import CompileError  # noqa: E402
from tilejit.runtime import hsaco  # noqa: E402

AMD_ARCHS = ("gfx942", "gfx90a")


def _ptxas(ptx: str) -> tuple:
    """(registers, spill bytes) of sm_90a's ``ptxas -v``; None where ptxas is missing."""
    exe = shutil.which("ptxas")
    if exe is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "k.ptx")
        with open(path, "w") as f:
            f.write(ptx)
        out = subprocess.run([exe, "-arch=sm_90a", "-v", path, "-o", path + ".cubin"],
                             capture_output=True, text=True).stderr
    regs = re.search(r"Used (\d+) registers", out)
    spills = re.search(r"(\d+) bytes spill stores", out)
    return int(regs.group(1)) if regs else 0, int(spills.group(1)) if spills else 0


def rows():
    for name, kernel, specs, constexprs, _ in all_examples():
        args = example_arguments(specs)
        cuda = kernel.compile(*args, target="cuda", arch="sm_90a", **constexprs)
        threads = cuda.compiled.launch_threads(0) or None
        nv = _ptxas(cuda.ptx)
        amd = {}
        for arch in AMD_ARCHS:
            try:
                handle = kernel.compile(*args, target="amdgpu", arch=arch, **constexprs)
            except CompileError as e:
                amd[arch] = str(e).splitlines()[0]
                continue
            info = hsaco.kernels(handle.code_object)[handle.compiled.name]
            amd[arch] = (info, handle.shared_bytes)
        label = name + ("".join(f", {k}={v}" for k, v in sorted(constexprs.items()))
                        if constexprs else "")
        yield label, cuda, threads, nv, amd


def _amd_cell(entry) -> str:
    if isinstance(entry, str):
        return "—"
    info, lds = entry
    spills = f", spills {info.vgpr_spills}/{info.sgpr_spills}" if (
        info.vgpr_spills or info.sgpr_spills) else ""
    agprs = f" (AGPR {info.agprs})" if info.agprs else ""
    return f"{info.vgprs}{agprs} / {info.sgprs}, LDS {lds} B{spills}"


def markdown() -> str:
    lines = [
        "# AMDGPU: registers and LDS of the examples, beside sm_90a",
        "",
        "Written by `python tools/amdgpu_report.py > docs/amdgpu-report.md` "
        "(`tests/codegen/test_amdgpu_report.py` checks that it is up to date). Compile-only: "
        "the AMD columns are the code object's metadata note (`.vgpr_count` (AGPRs "
        "included on gfx90a/gfx942: 512 per lane in all), `.sgpr_count`, spills), the "
        "LDS the kernel's tiles take (the dynamic array a launch sizes); the sm_90a "
        "columns are `ptxas -v` (registers of 255 per thread, spill stores) and the "
        "shared memory the plan gives. The example shapes are "
        "`tests/support/ptx_examples.py`'s. No AMD GPU ran any of these.",
        "",
        "| kernel | sm_90a registers, spill bytes, shared | gfx942 VGPR / SGPR, LDS | "
        "gfx90a VGPR / SGPR, LDS |",
        "|---|---|---|---|",
    ]
    missing, spilling = [], []
    for name, cuda, _threads, nv, amd in rows():
        nv_cell = "n/a" if nv is None else f"{nv[0]}, {nv[1]} B"
        nv_cell += f", {cuda.shared_bytes} B"
        cells = [_amd_cell(amd[a]) for a in AMD_ARCHS]
        lines.append(f"| `{name}` | {nv_cell} | {cells[0]} | {cells[1]} |")
        for arch in AMD_ARCHS:
            if isinstance(amd[arch], str):
                missing.append(f"- `{name}` on {arch}: {amd[arch]}")
            elif amd[arch][0].vgpr_spills:
                spilling.append(f"`{name}` on {arch} ({amd[arch][0].vgpr_spills} VGPRs)")
    if spilling:
        lines += ["", "VGPR spills (to scratch memory, slow on the GPU): "
                  + "; ".join(spilling) + ". SGPR spills go to VGPR lanes."]
    if missing:
        lines += ["", "## Not lowered for AMDGPU yet", ""] + missing
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(markdown())
