"""What the compiler may ask about the hardware it compiles for: one ``Target`` value.

A target is a kind (``"cuda"``; ``"sim"``, the CPU simulator; later ``"amdgpu"``) and,
for a GPU, an arch (``"sm_90a"``). Every capability question a pass, a lowering rule,
the host or a TileLang door has is a property here; nothing else compares arch names.
The bottom layer of the tree: imports nothing from tilejit.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

KINDS = ("cuda", "sim", "amdgpu")
DEFAULT_CUDA_ARCH = "sm_90"     # what a compile without a device and without an arch means
# the most threads any supported SM holds (sm_80, sm_90; sm_86/sm_89 hold 1536): the
# check a launch's min_blocks_per_sm gets before any target is known
MOST_THREADS_PER_SM = 2048

_SM = re.compile(r"sm_(\d+)([a-z]?)")
# most dynamic shared memory one block may use (cudaDevAttrMaxSharedMemoryPerBlockOptin)
_SHARED_LIMIT = {80: 166912, 86: 101376, 87: 166912, 89: 101376, 90: 232448, 100: 232448,
                 120: 101376}
_THREADS_PER_SM = {86: 1536, 89: 1536, 120: 1536}


def sm_number(arch: str) -> int:
    """The compute capability in an arch name ("sm_90a" → 90); 0 for the simulator."""
    digits = "".join(ch for ch in arch if ch.isdigit())
    return int(digits) if digits else 0


@dataclass(frozen=True)
class Target:
    kind: str               # "cuda" | "sim" | "amdgpu"
    arch: str = ""          # "sm_90a", …; "" for the simulator

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"target: expected one of {KINDS}, got {self.kind!r}")
        if self.kind == "cuda" and not _SM.fullmatch(self.arch):
            raise ValueError(f"target 'cuda': expected an arch like 'sm_80' or 'sm_90a', "
                             f"got {self.arch!r}")
        if self.kind == "sim" and self.arch:
            raise ValueError(f"target 'sim' takes no arch, got {self.arch!r}")

    @classmethod
    def cuda(cls, arch: str) -> "Target":
        return cls("cuda", arch)

    @classmethod
    def sim(cls) -> "Target":
        return SIM

    def __str__(self):
        return self.arch or self.kind

    def describe(self) -> list:
        """JSON-friendly (part of the disk cache key)."""
        return [self.kind, self.arch]

    # -- what it is ---------------------------------------------------------------------
    @property
    def is_sim(self) -> bool:
        """The simulator: kernels are type-checked, not compiled to device code."""
        return self.kind == "sim"

    @property
    def is_cuda(self) -> bool:
        return self.kind == "cuda"

    @property
    def sm(self) -> int:
        """The compute capability (90 for sm_90a); 0 for the simulator."""
        return sm_number(self.arch) if self.is_cuda else 0

    # -- what it has --------------------------------------------------------------------
    @property
    def warp_size(self) -> int:
        return 64 if self.kind == "amdgpu" else 32

    @property
    def has_cp_async(self) -> bool:
        """Asynchronous global → shared copies (``cp.async``, sm_80+)."""
        return self.sm >= 80

    @property
    def has_tma(self) -> bool:
        """Hopper's tensor memory accelerator and mbarriers (sm_90+)."""
        return self.sm >= 90

    @property
    def has_wgmma(self) -> bool:
        """Warpgroup MMA (``wgmma.mma_async``): sm_90a only (the arch-specific features)."""
        return self.arch == "sm_90a"

    @property
    def has_special_function_unit(self) -> bool:
        """Float exp/exp2 on the SFU (``ex2.approx``) rather than software routines."""
        return self.is_cuda

    @property
    def shared_limit(self) -> int | None:
        """Most dynamic shared memory per block in bytes; None where nothing limits it
        (the simulator) or the arch is unknown to this table."""
        return _SHARED_LIMIT.get(self.sm) if self.is_cuda else None

    @property
    def max_threads_per_block(self) -> int:
        return 1024

    @property
    def max_threads_per_sm(self) -> int:
        return _THREADS_PER_SM.get(self.sm, MOST_THREADS_PER_SM)

    @property
    def max_registers_per_thread(self) -> int:
        return 255

    @property
    def ptx_features(self) -> str:
        """The llvmlite NVPTX feature string: the PTX ISA version to emit."""
        return "+ptx86" if self.sm >= 100 else "+ptx80"


SIM = Target("sim")
