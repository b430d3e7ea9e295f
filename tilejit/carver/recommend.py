"""The hardware-aware tile recommender (TileLang's carver, as the seeds describe it): from
the device's figures and a kernel's shape, a ranked list of configs that
``@tilejit.autotune`` takes directly. It predicts; the autotuner measures.

    arch = CUDA.from_device()                      # or CUDA("sm_90a") without a GPU
    hints = MatmulTemplate(M, N, K, "float16", "float16", "float32").with_arch(arch) \\
        .recommend_hints(topk=8)
    configs = [h.config for h in hints]            # block_M, block_N, block_K, threads,
                                                   # num_stages
The search, one GEMM-like kernel at a time:

- **candidates**: per dimension, powers of two and the dimension's own factors that are
  multiples of the tensor-core instruction's granularity (16 for M and N; 64 rows per
  warpgroup for M on wgmma), up to 256; ``block_K`` from the smallest coalesced width (128
  bytes of a row: 64 fp16 elements) up, in powers of two; warps from the warp tile
  convention (64 × 64 of C per warp, or one 64-row warpgroup slice on wgmma), between 4
  and 8;
- **constraints**: shared memory ``stages · (bM · bK + bK · bN) · in_bytes`` within the
  per-block limit, and the register proxy ``2 · bM · bN · acc_bits / 32`` within the
  register file (65536 32-bit registers per SM on CUDA);
- **objective**: ``(traffic + 1) · num_wave``, where ``traffic`` is the DRAM bytes of the
  output tiles one SM holds at once (``blocks_per_SM`` tiles, each its A and B panels and
  its C tile) and ``num_wave`` the waves of blocks over the SMs,
  ``ceil(grid / (blocks_per_SM · SMs))``, with ``blocks_per_SM`` the least of the
  shared-memory and register sides and 4 (the SM's scheduler partitions). The product is
  what the seeds make of it: the DRAM bytes each SM moves over the kernel. (Counting one
  tile's bytes whatever the SM holds, as the seeds' formula reads when one block fills
  an SM, ranked two 128 × 128 blocks an SM above one 128 × 256 block: the carver's top 3
  at 4096³ fp16 then ran at 0.777 of the best of a hand-written grid on the H200,
  2026-12-03; the same tile area per SM, the larger tile reads a quarter fewer bytes.)
- **stages**: the deepest (2 … 4) that keeps ``blocks_per_SM`` at its target: 1 for a
  tile of 128 × 256 or more, else 2.

Ties go to the config with warps nearest the 4 partitions, then the one with more of K
in flight (``stages · block_K``), then the deeper pipeline.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from tilejit.language.dtypes import as_dtype
from tilejit.target import Target, sm_number

_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "int8": 1, "int32": 4,
          "float8_e4m3": 1, "float8_e5m2": 1}
# per-block shared memory (opt-in), SMs, L2 bytes of the usual parts per arch
_DEFAULTS = {90: (232448, 132, 50 << 20), 80: (166912, 108, 40 << 20),
             86: (101376, 84, 6 << 20), 89: (101376, 128, 72 << 20),
             100: (232448, 148, 126 << 20), 120: (101376, 170, 96 << 20)}


@dataclass(frozen=True)
class CUDA:
    """A CUDA device's figures: arch, SMs, shared memory per block, the register file per
    SM, the scheduler partitions per SM, L2 bytes."""
    arch: str = "sm_90a"
    num_sms: int = 0
    smem_cap: int = 0
    reg_cap: int = 65536
    sm_partition: int = 4
    l2_bytes: int = 0

    def __post_init__(self):
        if self.arch == "cuda":         # TileLang's CUDA("cuda"): the current device's
            # the driver only when the device is asked about
            from tilejit.runtime import cuda_driver
            if cuda_driver.cuda_available():
                device = CUDA.from_device(0)
                for name in ("arch", "num_sms", "smem_cap"):
                    object.__setattr__(self, name, getattr(device, name))
            else:
                object.__setattr__(self, "arch", "sm_90a")
        Target.cuda(self.arch)          # a clear error for an unknown arch
        smem, sms, l2 = _DEFAULTS.get(sm_number(self.arch), _DEFAULTS[90])
        object.__setattr__(self, "smem_cap", self.smem_cap or smem)
        object.__setattr__(self, "num_sms", self.num_sms or sms)
        object.__setattr__(self, "l2_bytes", self.l2_bytes or l2)

    @property
    def target(self) -> Target:
        return Target.cuda(self.arch)

    @classmethod
    def from_device(cls, device_id: int = 0) -> "CUDA":
        """The figures of CUDA device ``device_id`` (read through the driver)."""
        # the driver only when a device is asked about: building a CUDA("sm_90a") needs none
        from tilejit.runtime import cuda_driver
        limits = cuda_driver.device_limits(device_id)
        return cls(arch=cuda_driver.device_arch(device_id), num_sms=limits["num_sms"],
                   smem_cap=limits["max_shared_per_block_optin"])


@dataclass(frozen=True)
class Hint:
    """One recommended config and the figures it was ranked by."""
    block_M: int
    block_N: int
    block_K: int
    threads: int
    num_stages: int
    score: float
    traffic: int            # the DRAM bytes of one output tile
    num_wave: int
    blocks_per_sm: int
    smem_bytes: int
    config: dict = field(compare=False, repr=False, default_factory=dict)

    @property
    def block(self) -> tuple:
        return (self.block_M, self.block_N)

    # TileLang's roller hint fields, for programs that read configs off them
    @property
    def warp(self) -> tuple:
        """(rows, columns) of C one warp computes: the block's warps as near square as
        the tile divides (``block_M // warp_M · block_N // warp_N · 32 = threads``)."""
        warps = max(1, self.threads // 32)
        rows = max((r for r in range(1, warps + 1)
                    if warps % r == 0 and self.block_M % r == 0
                    and self.block_N % (warps // r) == 0),
                   key=lambda r: (-abs(self.block_M / r - self.block_N / (warps // r)), r),
                   default=1)
        return (self.block_M // rows, self.block_N // (warps // rows))

    @property
    def rstep(self) -> tuple:
        return (self.block_K,)

    @property
    def pipeline_stage(self) -> int:
        return self.num_stages

    @property
    def rasterization_plan(self):
        # the roller's plans are a module of their own (TileLang's path); none is chosen
        from tilejit.carver.roller.rasterization import NoRasterization
        return NoRasterization()


def _candidates(extent: int, granule: int, cap: int = 256) -> list[int]:
    out = {granule << k for k in range(8) if granule << k <= cap}
    out |= {f for f in range(granule, min(extent, cap) + 1, granule) if extent % f == 0}
    return sorted(out)


def dtype_bytes(template: str, dtype) -> int:
    """The bytes of an element of ``dtype`` (a name or a dtype object); a ValueError
    naming the template for a dtype it does not know."""
    try:
        name = as_dtype(dtype).name        # TileLang's spellings: "float", "half", T.float32
    except (TypeError, ValueError):
        name = getattr(dtype, "name", None) or str(dtype)
    if name not in _BYTES:
        raise ValueError(f"{template}: unknown dtype {dtype!r}; expected one of "
                         f"{', '.join(_BYTES)}")
    return _BYTES[name]


def torch_dtype(dtype):
    """torch's dtype for ``dtype`` (a name, a tilejit dtype or torch's own)."""
    return as_dtype(dtype).as_torch()


class Template:
    """What every template has: ``with_arch`` and TileLang's
    ``get_hardware_aware_configs`` over its ``recommend_hints``."""
    arch: CUDA | None = None

    def with_arch(self, arch: CUDA):
        self.arch = arch
        return self

    def equivalent_function(self):
        """What the template computes, as a function of torch tensors (TileLang's is a
        TVM PrimFunc of it): the reference a tuned kernel's results are checked
        against."""
        return self.reference

    def reference(self, *tensors):
        raise NotImplementedError(f"{type(self).__name__} has no reference function")

    def get_hardware_aware_configs(self, arch: CUDA | None = None, topk: int = 10):
        """TileLang's name for ``recommend_hints`` (with the arch given here)."""
        if arch is not None:
            self.arch = arch
        return self.recommend_hints(topk)


@dataclass
class MatmulTemplate(Template):
    """C[M, N] = A[M, K] @ B[K, N] with the given dtypes (the GEMM kernels of
    ``benchmarks/run.py`` and ``examples/gemm.py`` take these configs)."""
    M: int
    N: int
    K: int
    in_dtype: str = "float16"
    out_dtype: str = "float16"
    accum_dtype: str = "float32"
    arch: CUDA | None = None

    def reference(self, A, B):
        """C = A @ B, accumulated in ``accum_dtype``, in ``out_dtype``."""
        return (A.to(torch_dtype(self.accum_dtype)) @ B.to(torch_dtype(self.accum_dtype))) \
            .to(torch_dtype(self.out_dtype))

    def recommend_hints(self, topk: int = 10) -> list[Hint]:
        arch = self.arch or CUDA()
        for name in ("M", "N", "K"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"MatmulTemplate: {name} must be a positive int, got {value!r}")
        a_bytes, c_bytes = dtype_bytes("MatmulTemplate", self.in_dtype), \
            dtype_bytes("MatmulTemplate", self.out_dtype)
        acc_bits = 8 * dtype_bytes("MatmulTemplate", self.accum_dtype)
        wgmma = arch.target.has_wgmma
        m_granule = 64 if wgmma else 16
        k_min = max(16, 128 // a_bytes)
        hints = []
        for bm in _candidates(self.M, m_granule):
            for bn in _candidates(self.N, 16):
                regs = 2 * bm * bn * acc_bits // 32
                if regs > arch.reg_cap:
                    continue
                if wgmma:       # warpgroups along M (64 rows each), N at most 256 each
                    warps = 4 * (bm // 64) * max(1, bn // 256)
                else:           # the warp tile convention: 64 x 64 of C per warp
                    warps = (bm // 64) * (bn // 64)
                warps = max(4, min(8, warps))
                threads = 32 * warps
                big = bm * bn >= 128 * 256
                for bk in (k_min, 2 * k_min):
                    if bk > max(self.K, k_min):
                        continue
                    best = None
                    for stages in (2, 3, 4):
                        smem = stages * (bm * bk + bk * bn) * a_bytes
                        if smem > arch.smem_cap:
                            break
                        per_sm = min(arch.smem_cap // smem, arch.reg_cap // regs,
                                     arch.sm_partition)
                        if per_sm < (1 if big else 2):
                            break
                        best = (stages, smem, per_sm)
                    if best is None:
                        continue
                    stages, smem, per_sm = best
                    grid = math.ceil(self.M / bm) * math.ceil(self.N / bn)
                    waves = math.ceil(grid / (per_sm * arch.num_sms))
                    traffic = (bm * self.K + self.K * bn) * a_bytes + bm * bn * c_bytes
                    score = (traffic * per_sm + 1) * waves
                    config = dict(block_M=bm, block_N=bn, block_K=bk, threads=threads,
                                  num_stages=stages)
                    hints.append(Hint(bm, bn, bk, threads, stages, score, traffic, waves,
                                      per_sm, smem, config))
        hints.sort(key=lambda h: (h.score, abs(h.threads // 32 - arch.sm_partition),
                                  -h.num_stages * h.block_K, -h.num_stages))
        return hints[:topk]
