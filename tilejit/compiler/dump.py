"""``CompileOptions.dump_dir`` (``TILEJIT_DUMP_IR=DIR``): every stage of a compilation,
one file each, numbered in pipeline order, under DIR/<kernel>-<specialization hash>/:

    00_source.py            the kernel as written
    01_device_program.py    after the front end's rewrite (launch, constexprs, outputs)
    02_after_<pass>.py      after each source pass
    0N_numba_typed.txt      Numba's typed IR (annotated source)
    0N_llvm_lowered.ll      the lowered LLVM modules and the kernel entry
    0N_llvm_optimized.ll    after linking and the O3 pipeline
    0N_kernel.ptx           the PTX
"""
from __future__ import annotations

import ast
import hashlib
import os
import re

from tilejit.options import dump_dir_origin


def _unwritable(root: str, e: OSError) -> OSError:
    """The error of a dump directory that cannot be written: the same kind of OSError,
    naming the setting, the directory and the reason."""
    error = type(e)(e.errno, f"{dump_dir_origin(root)}={root!r}: cannot write the IR dump "
                             f"there ({e.strerror}: {e.filename!r}); set it to a writable "
                             f"directory, or unset it")
    return error


class Dumper:
    def __init__(self, directory: str | None):
        self.directory = directory
        self.root = directory
        self.count = 0

    @classmethod
    def for_kernel(cls, name: str, spec) -> "Dumper":
        root = spec.options.dump_dir
        if not root:
            return cls(None)
        tag = hashlib.sha256(repr(spec).encode()).hexdigest()[:10]
        directory = os.path.join(root, f"{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}-{tag}")
        try:
            os.makedirs(directory, exist_ok=True)
            for old in os.listdir(directory):
                os.remove(os.path.join(directory, old))
        except OSError as e:
            raise _unwritable(root, e) from None
        dumper = cls(directory)
        dumper.root = root
        return dumper

    def text(self, name: str, content) -> None:
        """Write the next file; ``content`` may be a string or a function making it
        (called only when dumping)."""
        if self.directory is None:
            return
        if callable(content):
            content = content()
        path = os.path.join(self.directory, f"{self.count:02d}_{name}")
        self.count += 1
        try:
            with open(path, "w") as f:
                f.write(content)
        except OSError as e:
            raise _unwritable(self.root, e) from None

    def ast(self, name: str):
        """A callback writing a function definition as Python source."""
        if self.directory is None:
            return None
        return lambda fdef: self.text(f"{name}.py", lambda: ast.unparse(fdef) + "\n")

    def source_pass(self, source_pass):
        """``source_pass`` wrapped to dump the program after it runs."""
        if self.directory is None:
            return source_pass

        def run(fdef, ctx):
            out = source_pass(fdef, ctx)
            self.text(f"after_{source_pass.__name__}.py", lambda: ast.unparse(out) + "\n")
            return out
        run.__name__ = source_pass.__name__
        return run
