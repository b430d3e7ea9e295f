"""What one compiled kernel depends on besides its source, as plain Python values:
hashable (the in-memory cache key), serializable (part of the disk cache key), and
convertible to Numba types by the compiler."""
from __future__ import annotations

from dataclasses import dataclass

from tilejit.options import CompileOptions
from tilejit.target import Target


@dataclass(frozen=True)
class Specialization:
    params: tuple            # ((name, ("tensor", dtype, ndim, contiguous, aligned)
    #                          | ("scalar", kind)), …): the kernel's run-time parameters
    constexprs: tuple        # ((name, value), …)
    shape_constants: tuple   # ((param, dim, value), …): shape entries fixed at compile time
    outputs: tuple           # names of the T.empty outputs (the last tensor parameters)
    threads: int
    target: Target           # Target.cuda("sm_90a"), …; the simulator type-checks only
    options: CompileOptions = CompileOptions()
    min_blocks_per_sm: int | None = None
    cluster: tuple = (1, 1, 1)   # T.ClusterKernel's cluster_dims

    @property
    def runtime_params(self) -> tuple:
        return tuple(name for name, _ in self.params)

    def summary(self) -> str:
        """One readable line: the constexprs, the threads, the target (logs, the CLI)."""
        values = ", ".join(f"{n}={_plain(v)}" for n, v in self.constexprs)
        cluster = f"; cluster={self.cluster}" if self.cluster != (1, 1, 1) else ""
        return f"{values + '; ' if values else ''}threads={self.threads}{cluster}; {self.target}"

    def describe(self) -> list:
        """A JSON-friendly description (the disk cache key hashes it)."""
        return [list(map(_plain, self.params)), [[n, _plain(v)] for n, v in self.constexprs],
                [list(c) for c in self.shape_constants], list(self.outputs), self.threads,
                self.target.describe(), self.options.key(), self.min_blocks_per_sm] + (
            [list(self.cluster)] if self.cluster != (1, 1, 1) else [])


def _plain(value):
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    name = getattr(value, "name", None)
    if name is not None and hasattr(value, "bits"):
        return f"dtype:{name}"
    return repr(value)
