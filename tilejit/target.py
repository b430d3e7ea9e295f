"""What the compiler may ask about the hardware it compiles for: one ``Target`` value.

A target is a kind (``"cuda"``; ``"sim"``, the CPU simulator; ``"cpu"``, TileLang's CPU
backends as the simulator runs them; ``"amdgpu"``) and, for a GPU, an arch (``"sm_90a"``).
Every capability question a pass, a lowering rule, the host or a TileLang door has is a
property here; nothing else compares arch names.
The bottom layer of the tree: imports nothing from tilejit.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

KINDS = ("cuda", "sim", "cpu", "amdgpu")
DEFAULT_CUDA_ARCH = "sm_90"     # what a compile without a device and without an arch means
# the most threads any supported SM holds (sm_80, sm_90; sm_86/sm_89 hold 1536): the
# check a launch's min_blocks_per_sm gets before any target is known
MOST_THREADS_PER_SM = 2048

# every arch both llvmlite's NVPTX back end (LLVM 22) and CUDA 13 accept, with the PTX
# ISA version the arch needs at least (an older one makes LLVM abort the process, not
# raise). CUDA 13 dropped sm_70/72 and renamed sm_101 to sm_110, which LLVM 22 cannot
# emit (it needs PTX 9.0).
# (sm_89 and sm_90 take 8.4, the first with mma.sync on float8; sm_90a takes 8.2, the
# first with the sparse wgmma.mma_async.sp (T.gemm_sp; 8.1 brought vector reductions,
# red.global.add.v4.f32), which drivers from 535 load, and runs float8 on wgmma. Its PTX
# is otherwise the same as 8.0's, .version aside)
_PTX_VERSION = {**{a: "+ptx80" for a in ("sm_75", "sm_80", "sm_86", "sm_87")},
                "sm_90a": "+ptx82",
                **{a: "+ptx84" for a in ("sm_89", "sm_90")},
                **{a: "+ptx86" for a in ("sm_100", "sm_100a")},
                **{a: "+ptx87" for a in ("sm_120", "sm_120a")},
                **{a: "+ptx88" for a in ("sm_103", "sm_103a", "sm_121", "sm_121a")}}
# most dynamic shared memory one block may use (cudaDevAttrMaxSharedMemoryPerBlockOptin)
_SHARED_LIMIT = {80: 166912, 86: 101376, 87: 166912, 89: 101376, 90: 232448, 100: 232448,
                 120: 101376}
_THREADS_PER_SM = {86: 1536, 89: 1536, 120: 1536}


def sm_number(arch: str) -> int:
    """The compute capability in an arch name ("sm_90a" → 90); 0 for the simulator."""
    digits = "".join(ch for ch in arch if ch.isdigit())
    return int(digits) if digits else 0


def check_arch(arch) -> str:
    """``arch`` if it names a CUDA arch the back end can emit, else a ValueError saying
    what was expected, with the likely spelling ("SM_90", "90", "compute_90" → "sm_90")."""
    if isinstance(arch, str) and arch in _PTX_VERSION:
        return arch
    text = str(arch).strip().lower().replace(".", "")
    digits = re.fullmatch(r"(?:sm_?|compute_?)?(\d+)([af]?)", text)
    hint = ""
    if digits and f"sm_{digits[1]}{digits[2]}" in _PTX_VERSION:
        hint = f" (did you mean {'sm_' + digits[1] + digits[2]!r}?)"
    elif digits:            # sm_110, SM_110, 110, compute_110
        hint = (f" ({_unemitted_hint(f'sm_{digits[1]}{digits[2]}')})" if int(digits[1]) >= 75
                else " (tilejit compiles for sm_75 and newer, as CUDA 13 does)")
    raise ValueError(f"arch: expected a CUDA arch such as 'sm_80', 'sm_90a' or 'sm_120', got "
                     f"{arch!r}{hint}; known: {', '.join(_PTX_VERSION)}")


def _unemitted_hint(arch: str) -> str:
    """Why a well-formed arch of sm_75 or newer is not accepted, with the archs the back
    end emits nearest to it and the one to pass instead: the nearest older one without a
    suffix, whose PTX the CUDA driver compiles for any newer GPU."""
    number = sm_number(arch)
    suffix = arch[len(f"sm_{number}"):]

    def named(n):
        return sorted(a for a in _PTX_VERSION if sm_number(a) == n)   # sm_90, sm_90a
    if named(number):       # sm_100f, sm_89a: a suffix this number does not take here
        plain, *specific = named(number)
        return (f"llvmlite's NVPTX back end cannot emit it: of sm_{number} it emits "
                f"{' and '.join(named(number))}, not the {suffix!r} variant; pass "
                f"arch={(specific or [plain])[0]!r}" +
                (f" (or {plain!r}, without the arch-specific features)" if specific else ""))
    numbers = sorted({sm_number(a) for a in _PTX_VERSION})
    below = max(n for n in numbers if n < number)
    above = [n for n in numbers if n > number]
    newest = max(_PTX_VERSION.values())         # "+ptx88"
    where = (f"the nearest are {' and '.join(named(below))} below and "
             f"{' and '.join(named(above[0]))} above" if above else
             f"the newest are {' and '.join(named(below))}")
    return (f"llvmlite's NVPTX back end cannot emit it: of the archs it emits (PTX ISA up "
            f"to {newest[4]}.{newest[5:]}), {where}; for a GPU of compute capability "
            f"{number // 10}.{number % 10} pass arch='sm_{below}', whose PTX the CUDA driver "
            f"compiles for newer GPUs")


# AMD Instinct archs llvmlite's AMDGPU back end (LLVM 22) compiles for, with the LDS one
# workgroup may use
_AMDGPU_LDS = {"gfx90a": 65536, "gfx942": 65536, "gfx950": 163840}


def check_amdgpu_arch(arch) -> str:
    if isinstance(arch, str) and arch in _AMDGPU_LDS:
        return arch
    raise ValueError(f"arch: expected an AMDGPU arch ({', '.join(_AMDGPU_LDS)}) for target "
                     f"'amdgpu', got {arch!r}")


@dataclass(frozen=True)
class Target:
    kind: str               # "cuda" | "sim" | "cpu" | "amdgpu"
    arch: str = ""          # "sm_90a", …; "" for the simulator

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"target: expected one of {KINDS}, got {self.kind!r}")
        if self.kind == "cuda":
            check_arch(self.arch)
        if self.kind == "amdgpu":
            check_amdgpu_arch(self.arch)
        if self.kind in ("sim", "cpu") and self.arch:
            raise ValueError(f"target {self.kind!r} takes no arch, got {self.arch!r}")

    @classmethod
    def cuda(cls, arch: str) -> "Target":
        return cls("cuda", arch)

    @classmethod
    def amdgpu(cls, arch: str = "gfx942") -> "Target":
        return cls("amdgpu", arch)

    @classmethod
    def sim(cls) -> "Target":
        return SIM

    @classmethod
    def cpu(cls) -> "Target":
        return CPU

    def __str__(self):
        return self.arch or self.kind

    def describe(self) -> list:
        """JSON-friendly (part of the disk cache key)."""
        return [self.kind, self.arch]

    # -- what it is ---------------------------------------------------------------------
    @property
    def is_sim(self) -> bool:
        """The simulator: kernels are type-checked, not compiled to device code (the
        ``"cpu"`` target too)."""
        return self.kind in ("sim", "cpu")

    @property
    def is_cpu(self) -> bool:
        """TileLang's CPU backends (``target="c"``, ``"llvm"``), run by the simulator as
        those backends run a kernel: a block is one thread unless ``T.Kernel`` names its
        threads (``block_threads``), so its local tiles are the block's and ``T.gemm``
        takes them, and there are no tensor cores (``has_tensor_cores``). No GPU runs
        it, so the GPU's compile-time checks (registers, gemm engines) do not apply: the
        simulator's checks at run time do."""
        return self.kind == "cpu"

    def block_threads(self, named: bool, threads: int) -> int:
        """The threads of a block whose ``T.Kernel`` gave ``threads`` (``named``: the
        program wrote ``threads=``; else the default): one on a CPU target unless named."""
        return 1 if self.is_cpu and not named else threads

    @property
    def has_tensor_cores(self) -> bool:
        """Whether ``T.gemm`` multiplies on tensor cores, float32 operands rounded to
        TensorFloat-32 as they do (the simulator follows the GPU); a CPU multiplies
        float32 as float32."""
        return not self.is_cpu

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
    def has_mma_sync(self) -> bool:
        """The tensor cores' ``mma.sync.m16n8k16`` family (f16, bf16, tf32, int8: sm_80+);
        without it (sm_75) ``T.gemm`` of float32/float64 accumulators runs on the CUDA
        cores (``ir/gemm_plan.plan_fma``)."""
        return not self.is_cuda or self.sm >= 80

    @property
    def has_tma(self) -> bool:
        """Hopper's tensor memory accelerator and mbarriers (sm_90+)."""
        return self.sm >= 90

    @property
    def has_clusters(self) -> bool:
        """Thread block clusters: ``%cluster_ctarank``, multicast TMA, ``barrier.cluster``
        (sm_90+)."""
        return self.is_cuda and self.sm >= 90

    @property
    def has_float8_mma(self) -> bool:
        """``mma.sync.m16n8k32`` on float8 e4m3/e5m2: sm_89 (Ada) and newer, in PTX 8.4
        or later (so not sm_90a here, whose float8 gemms are on wgmma)."""
        return self.is_cuda and self.sm >= 89 and self.ptx_features >= "+ptx84"

    @property
    def device_scope(self) -> str:
        """LLVM's ``syncscope`` of the whole device, for ordered atomics and fences:
        ``"device"`` on NVPTX (PTX ``.gpu``), ``"agent"`` on AMDGPU (which has no
        "device" scope: LLVM stops the process on one)."""
        return "agent" if self.kind == "amdgpu" else "device"

    @property
    def has_vector_red(self) -> bool:
        """``red.global.add.v2/v4.f32``: one atomic add of 8 or 16 bytes (sm_90+, PTX 8.1+)."""
        return self.is_cuda and self.sm >= 90 and self.ptx_features >= "+ptx81"

    @property
    def has_wgmma(self) -> bool:
        """Warpgroup MMA (``wgmma.mma_async``): sm_90a only (the arch-specific features)."""
        return self.arch == "sm_90a"

    @property
    def has_packed_half_conversion(self) -> bool:
        """Two float32 rounded to float16 or bfloat16 and packed into one register by one
        instruction (``cvt.rn.f16x2.f32`` / ``cvt.rn.bf16x2.f32``, sm_80+): an ALU
        instruction where the scalar conversions are one each on the quarter-rate pipe
        that exp2 also needs."""
        return self.is_cuda and self.sm >= 80

    @property
    def has_special_function_unit(self) -> bool:
        """Float exp/exp2 on the SFU (``ex2.approx``) rather than software routines."""
        return self.is_cuda

    @property
    def shared_limit(self) -> int | None:
        """Most dynamic shared memory per block in bytes; for the simulator the most any
        supported GPU has (what no GPU could run does not run in simulation either); None
        where the arch is unknown to this table."""
        if self.is_sim:
            return max(_SHARED_LIMIT.values())
        if self.kind == "amdgpu":
            return _AMDGPU_LDS[self.arch]
        return _SHARED_LIMIT.get(self.sm) if self.is_cuda else None

    @property
    def shared_limit_text(self) -> str:
        """``shared_limit`` in words, for the error of a kernel over it."""
        if self.is_sim:
            return (f"the simulator allows at most {self.shared_limit} bytes per block (the "
                    f"most any supported GPU has)")
        return f"{self.arch} allows at most {self.shared_limit} bytes per block"

    @property
    def max_threads_per_block(self) -> int:
        return 1024

    @property
    def max_threads_per_sm(self) -> int:
        return _THREADS_PER_SM.get(self.sm, MOST_THREADS_PER_SM)

    @property
    def max_registers_per_thread(self) -> int:
        """32-bit registers a thread may hold: 255 on CUDA; 512 on CDNA 2/3 (256 vector
        and 256 accumulation registers)."""
        return 512 if self.kind == "amdgpu" else 255

    @property
    def ptx_features(self) -> str:
        """The llvmlite NVPTX feature string: the PTX ISA version to emit (the oldest one
        the arch accepts: 8.0 up to sm_87, 8.2 for sm_90a (its wgmma.mma_async.sp), 8.4
        for sm_89/sm_90, 8.6 for sm_100/101, 8.7 for sm_120, 8.8 for sm_103/121)."""
        return _PTX_VERSION[self.arch]


SIM = Target("sim")
CPU = Target("cpu")
