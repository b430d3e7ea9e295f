"""Compile options as one value, and the only module that reads tilejit's environment.

``CompileOptions`` holds every switch that changes what a compilation produces or
where its stages are written. ``compile_options(...)`` builds it once per compile from
the explicit values a kernel was given and, for what was not given, the environment:

    TILEJIT_TMA=0          sm_90+ pipelines keep cp.async instead of TMA
    TILEJIT_WGMMA=0        sm_90a gemms keep mma.sync instead of wgmma.mma_async
    TILEJIT_WS=0           sm_90a TMA pipelines are not warp-specialized
    TILEJIT_TURNS=0        warp-specialized attention's consumer warpgroups do not take
                           turns at their exponentials (passes/softmax_turns.py)
    TILEJIT_DUMP_IR=DIR    every compiler stage, one file each (compiler/dump.py); a dump
                           bypasses the disk cache so each first compilation is written

The disk cache's key is ``CompileOptions.key()``: every field that changes the code, so
an option added here cannot be forgotten in the key. The run-time settings read here
too: ``TILEJIT_TARGET`` (``sim`` forces the simulator), ``TILEJIT_DISABLE_CACHE`` and
``TILEJIT_CACHE_DIR`` (runtime/disk_cache.py), ``TILEJIT_HIP_LIBRARY`` (the HIP runtime
a ROCm launch loads); ``disable_cache()`` / ``enable_cache()``
(TileLang's ``tilelang.disable_cache()``) make that choice for the process, as a value.
Imports nothing from tilejit.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field

_FALSE = ("", "0", "false", "no", "off")


@dataclass(frozen=True)
class CompileOptions:
    fast_math: bool = False     # hardware approximations for math and float division
    debug: bool = False         # device bounds checks and T.device_assert
    tma: bool = True            # sm_90+: pipelined copies through TMA where they qualify
    wgmma: bool = True          # sm_90a: T.gemm on wgmma.mma_async where it qualifies
    warp_specialize: bool = True  # sm_90a: TMA pipelines feeding wgmma get a producer warp
    softmax_turns: bool = True  # sm_90a: consumer warpgroups take turns at their exp2s
    # TileLang's safe memory access (its doors' default): a global tensor's element read
    # outside the tensor gives 0 and such a write is dropped, where tilejit's own door
    # reports it (passes/safe_memory.py)
    safe_memory: bool = False
    # the block barriers that order shared memory (passes/barriers.py); TileLang's
    # TL_DISABLE_THREAD_STORAGE_SYNC turns them off: the kernel's own barriers only
    thread_sync: bool = True
    # a pipelined int4 copy staged as bytes (passes/packed_staging.py): None where the
    # target has cp.async, True on every target (the AMDGPU IR the tests run on the CPU)
    packed_staging: bool | None = None
    # where to write every stage (None: nowhere); not part of what is compiled
    dump_dir: str | None = field(default=None, compare=False, repr=False,
                                 metadata={"key": False})

    def key(self) -> list:
        """[[name, value], …] of every field that changes the generated code."""
        return [[f.name, getattr(self, f.name)] for f in dataclasses.fields(self)
                if f.metadata.get("key", True)]

    def replace(self, **changes) -> "CompileOptions":
        return dataclasses.replace(self, **changes)


def _switch(name: str) -> bool:
    """An on/off environment variable that is on unless set to a false value."""
    value = os.environ.get(name, "").strip().lower()
    return value == "" or value not in _FALSE


def compile_options(*, fast_math: bool = False, debug: bool = False, tma: bool | None = None,
                    wgmma: bool | None = None, warp_specialize: bool | None = None,
                    softmax_turns: bool | None = None, dump_dir: str | None = None,
                    safe_memory: bool = False, thread_sync: bool = True,
                    packed_staging: bool | None = None) -> CompileOptions:
    """The options of one compilation: the explicit values, the environment for the rest."""
    tma = _switch("TILEJIT_TMA") if tma is None else bool(tma)
    wgmma = _switch("TILEJIT_WGMMA") if wgmma is None else bool(wgmma)
    if warp_specialize is None:
        warp_specialize = _switch("TILEJIT_WS")
    if softmax_turns is None:
        softmax_turns = _switch("TILEJIT_TURNS")
    if dump_dir is None:
        dump_dir = os.environ.get("TILEJIT_DUMP_IR") or None
    return CompileOptions(fast_math=bool(fast_math), debug=bool(debug), tma=tma, wgmma=wgmma,
                          warp_specialize=bool(warp_specialize),
                          softmax_turns=bool(softmax_turns), dump_dir=dump_dir,
                          safe_memory=bool(safe_memory), thread_sync=bool(thread_sync),
                          packed_staging=packed_staging)


def dump_dir_origin(dump_dir: str) -> str:
    """Where an IR dump directory came from, for messages: the environment variable
    when it holds this directory, else the kernel's own setting."""
    if os.environ.get("TILEJIT_DUMP_IR") == dump_dir:
        return "TILEJIT_DUMP_IR"
    return "the kernel's IR dump directory (TileLang's TL_DUMP_IR_DIR pass config)"


def target_override() -> str | None:
    """``TILEJIT_TARGET`` ("sim" runs every kernel in the simulator; "cuda", "auto"), or
    None; anything else is a ValueError naming the variable."""
    value = os.environ.get("TILEJIT_TARGET", "").strip()
    if not value:
        return None
    if value not in ("sim", "cuda", "auto"):
        raise ValueError(f"TILEJIT_TARGET: expected 'sim', 'cuda' or 'auto', got {value!r}")
    return value


# TileLang's ``tilelang.disable_cache()`` / ``enable_cache()``: a process-wide choice
# that, once made, wins over TILEJIT_DISABLE_CACHE (None: the environment decides)
_cache_choice: list = [None]


def disable_cache() -> None:
    """Compile without the disk cache in this process (``tilelang.disable_cache()``)."""
    _cache_choice[0] = False


def enable_cache() -> None:
    """Use the disk cache in this process, whatever ``TILEJIT_DISABLE_CACHE`` says."""
    _cache_choice[0] = True


def is_cache_enabled() -> bool:
    """Whether compilations read and write the disk cache."""
    return cache_root() is not None


def hip_library() -> str:
    """The HIP runtime library a launch on ROCm loads (``runtime/hip_driver.py``):
    ``TILEJIT_HIP_LIBRARY``, else ``libamdhip64.so`` from the loader's search path."""
    return os.environ.get("TILEJIT_HIP_LIBRARY") or "libamdhip64.so"


def cache_root() -> str | None:
    """The disk cache's root: None after ``disable_cache()``, or when
    ``TILEJIT_DISABLE_CACHE`` is set (other than "", "0", "false", "no", "off") and
    ``enable_cache()`` was not called; else ``TILEJIT_CACHE_DIR`` or
    ``~/.cache/tilejit``."""
    if _cache_choice[0] is False:
        return None
    disabled = os.environ.get("TILEJIT_DISABLE_CACHE", "").strip().lower()
    if disabled not in _FALSE and _cache_choice[0] is not True:
        return None
    root = os.environ.get("TILEJIT_CACHE_DIR")
    if root:
        return os.path.abspath(os.path.expanduser(root))
    return os.path.join(os.path.expanduser("~"), ".cache", "tilejit")
