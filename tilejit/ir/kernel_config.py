"""What a lowering rule may ask about the kernel being compiled.

The compiler sets the ``KernelConfig`` of the specialization being lowered; rules read
it with ``current_kernel()``. Target-specific values (thread and block indices) come
from the target context's methods ``thread_index(builder)``,
``thread_index_here(builder)`` (read where used, not hoisted: ``tiles.thread_index``) and
``block_index(builder, axis)``.
"""
from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass, field

from tilejit.target import Target


@dataclass(frozen=True)
class KernelConfig:
    threads: int           # threads per block
    max_vector: int        # most elements one thread touches as one 16-byte access
    target: Target         # what the rules may ask of the hardware
    fast_math: bool = False  # math functions may use the hardware approximations
    debug: bool = False      # bounds checks and T.device_assert on the device
    tiles: object = field(default=None, compare=False)   # the TilePlan (ir/plan.py)


_CURRENT: contextvars.ContextVar[KernelConfig | None] = contextvars.ContextVar(
    "tilejit_kernel", default=None)


def current_kernel() -> KernelConfig:
    config = _CURRENT.get()
    if config is None:
        raise RuntimeError("tile operations are lowered only while compiling a kernel")
    return config


def current_kernel_or_none() -> KernelConfig | None:
    return _CURRENT.get()


@contextlib.contextmanager
def compiling(config: KernelConfig):
    token = _CURRENT.set(config)
    try:
        yield config
    finally:
        _CURRENT.reset(token)
