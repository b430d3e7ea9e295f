"""Every example kernel CI compiles to PTX and assembles: (module, kernel, arguments,
constexprs, instructions its PTX must contain)."""
import importlib
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")
MODULES = ["vector_add", "elementwise_2d", "gemm", "gemm_epilogue", "softmax", "norms",
           "row_sum", "splitk_gemm", "flash_attention.flash_attn",
           "flash_attention.flash_attn_bwd", "flash_attention.flash_attn_varlen"]


def example_arguments(specs):
    out = []
    for spec in specs:
        if isinstance(spec, tuple):
            shape, dtype = spec
            out.append(np.zeros(shape, dtype=dtype))
        else:
            out.append(spec)
    return out


def all_examples():
    if EXAMPLES not in sys.path:
        sys.path.insert(0, EXAMPLES)
    for name in MODULES:
        module = importlib.import_module(name)
        for entry in module.PTX_EXAMPLES:
            kernel, specs, constexprs = entry[:3]
            must = entry[3] if len(entry) > 3 else ()
            yield f"{name}.{kernel.__name__}", kernel, specs, constexprs, must


def assemble_all(archs=("sm_80", "sm_90a")) -> int:
    """Compile every example kernel for each arch and assemble it with ptxas; print a
    line per kernel and arch. Returns the number of failures."""
    import shutil
    import subprocess
    import tempfile
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        print("ptxas is not on PATH: PTX generated but not assembled (skipped)")
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, kernel, specs, constexprs, _ in all_examples():
            for arch in archs:
                ptx = kernel.compile(*example_arguments(specs), target="cuda", arch=arch,
                                     **constexprs).ptx
                if ptxas is None:
                    continue
                path = os.path.join(tmp, f"{name}.{arch}.ptx")
                with open(path, "w") as f:
                    f.write(ptx)
                out = subprocess.run([ptxas, f"-arch={arch}", "-v", path, "-o", path + ".o"],
                                     capture_output=True, text=True)
                info = " ".join(line.split("info    : ")[-1] for line in out.stderr.splitlines()
                                if "Used" in line)
                status = "ok" if out.returncode == 0 else "FAILED\n" + out.stderr
                failures += out.returncode != 0
                print(f"ptxas {arch:7s} {name:32s} {status} {info}")
    return failures


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(EXAMPLES))
    sys.exit(1 if assemble_all() else 0)
