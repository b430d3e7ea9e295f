"""The recommender's other templates, as TileLang's ``tilelang.carver.template`` names
them: ``FlashAttentionTemplate`` (two GEMMs sharing a row block), ``ElementwiseTemplate``
and ``GeneralReductionTemplate`` (row reductions: softmax, norms). Each searches its
kernel's tile parameters the way ``MatmulTemplate`` does (``recommend.py``): candidates,
the device's limits as hard constraints, ``(traffic + 1) · num_wave`` as the objective;
``recommend_hints(topk)`` (or TileLang's ``get_hardware_aware_configs(arch, topk)``)
returns ``Hint``s whose ``config`` a kernel's ``@tilejit.autotune`` takes directly.

What each template assumes of its kernel (the examples' kernels):

- ``FlashAttentionTemplate``: ``examples/flash_attention/flash_attn.py``'s parameters
  ``block_M``, ``block_N``, ``threads``, ``num_stages``. On wgmma (sm_90a) a consumer
  warpgroup holds 64 query rows (``threads = 128 · block_M / 64``, up to three
  warpgroups: the most the warp-specialized kernel has been measured with) and the
  compiler adds a producer warpgroup that keeps 24 registers; the consumers share the
  rest of the register file (at most 255 each, in steps of 8). The accumulators a
  thread holds, O (``block_M · d``) and S (``block_M · block_N``) in float32 over the
  block's threads, may take at most 70 % of its registers (the rest: P, the softmax
  state, addresses; past that the kernel spills: 192 × 128 at d 128 does, 192 × 96 does
  not). Shared memory: Q once, K and V per stage.
- ``ElementwiseTemplate``: one constexpr ``block`` (elements per block) at a fixed
  ``threads``, as ``examples/vector_add.py``.
- ``GeneralReductionTemplate``: ``block_M`` rows per block of ``threads`` threads, each
  row whole in registers (``examples/softmax.py``, ``examples/norms.py``): at most 96
  float32 values a thread.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from tilejit.carver.recommend import CUDA, Hint, Template, _candidates, dtype_bytes, torch_dtype

_THREADS_PER_SM = 2048      # resident threads per SM (sm_80 … sm_90)
_BLOCKS_PER_SM = 32         # resident blocks per SM


def _positive(template: str, **values) -> None:
    for name, value in values.items():
        if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{template}: {name} must be a positive int, got {value!r}")


@dataclass
class FlashAttentionTemplate(Template):
    """softmax(Q·Kᵀ)·V over ``batch_size · num_heads`` heads of ``seq_length`` queries and
    ``seq_kv_length`` keys of ``head_dim``."""
    batch_size: int = 1
    num_heads: int = 1
    head_dim: int = 128
    seq_length: int = 1
    seq_kv_length: int = 1
    is_causal: bool = False
    in_dtype: str = "float16"
    out_dtype: str = "float16"
    accum_dtype: str = "float32"
    arch: CUDA | None = None

    def recommend_hints(self, topk: int = 10) -> list[Hint]:
        name = "FlashAttentionTemplate"
        _positive(name, batch_size=self.batch_size, num_heads=self.num_heads,
                  head_dim=self.head_dim, seq_length=self.seq_length,
                  seq_kv_length=self.seq_kv_length)
        arch = self.arch or CUDA()
        in_bytes, out_bytes = dtype_bytes(name, self.in_dtype), dtype_bytes(name, self.out_dtype)
        d, wgmma = self.head_dim, arch.target.has_wgmma
        heads = self.batch_size * self.num_heads
        hints = []
        shapes = [(bm, 128 * bm // 64) for bm in (64, 128, 192)] if wgmma else \
            [(bm, t) for bm in (64, 128) for t in (128, 256)]
        for bm, threads in shapes:
            if wgmma:       # consumers share what the 24-register producer leaves
                consumers = threads // 128
                per_thread = min(255, (arch.reg_cap // 128 - 24) // consumers) // 8 * 8
            else:
                per_thread = min(255, arch.reg_cap // threads) // 8 * 8
            for bn in range(32, 257, 16):
                if bn > max(self.seq_kv_length, 32):
                    break
                accumulators = bm * (d + bn) // threads
                if accumulators > 0.7 * per_thread:
                    continue
                stages = 2
                smem = (bm * d + stages * 2 * bn * d) * in_bytes
                if smem > arch.smem_cap:
                    continue
                per_sm = min(arch.smem_cap // smem, _THREADS_PER_SM // (threads + (
                    128 if wgmma else 0)), 1 if wgmma else _BLOCKS_PER_SM)
                grid = math.ceil(self.seq_length / bm) * heads
                waves = math.ceil(grid / (per_sm * arch.num_sms))
                keys = self.seq_kv_length / (2 if self.is_causal else 1)
                traffic = int((bm * d + 2 * keys * d) * in_bytes + bm * d * out_bytes)
                config = dict(block_M=bm, block_N=bn, threads=threads, num_stages=stages)
                hints.append(Hint(bm, bn, d, threads, stages, (traffic + 1) * waves, traffic,
                                  waves, per_sm, smem, config))
        # ties: the larger key block (fewer loop turns, barriers and rescales)
        hints.sort(key=lambda h: (h.score, -h.block_N))
        return hints[:topk]


@dataclass
class ElementwiseTemplate(Template):
    """An elementwise kernel over ``shape`` reading ``inputs`` and writing ``outputs``
    arrays of ``dtype``, ``threads`` to a block; the config is its ``block``."""
    shape: tuple = (1,)
    dtype: str = "float16"
    threads: int = 256
    inputs: int = 1
    outputs: int = 1
    arch: CUDA | None = None

    def recommend_hints(self, topk: int = 10) -> list[Hint]:
        name = "ElementwiseTemplate"
        shape = (self.shape,) if isinstance(self.shape, numbers.Integral) else \
            tuple(self.shape)
        _positive(name, threads=self.threads, **{f"shape[{i}]": s for i, s in enumerate(shape)})
        shape = tuple(int(s) for s in shape)
        arch = self.arch or CUDA()
        size, nbytes = math.prod(shape), dtype_bytes(name, self.dtype)
        vector = max(1, 16 // nbytes)       # a 16-byte access per thread
        per_sm = min(_THREADS_PER_SM // self.threads, _BLOCKS_PER_SM)
        hints = []
        for k in range(6):
            block = self.threads * vector << k
            if block > max(size, self.threads * vector):
                break
            grid = math.ceil(size / block)
            waves = math.ceil(grid / (per_sm * arch.num_sms))
            traffic = block * nbytes * (self.inputs + self.outputs)
            hints.append(Hint(block, 1, 1, self.threads, 1, (traffic + 1) * waves, traffic,
                              waves, per_sm, 0, dict(block=block)))
        # ties: the smaller block (a shorter tail)
        hints.sort(key=lambda h: (h.score, h.block_M))
        return hints[:topk]


@dataclass
class GeneralReductionTemplate(Template):
    """``shape`` reduced along the axes ``structure`` marks "R" (TileLang's spelling: one
    letter an axis, "S" spatial, "R" reduced; "SR" is rows reduced along N). The spatial
    extents multiply into the rows M and the reduced ones into the row length N (1 with
    none: a copy); each row is read and written once."""
    structure: str = "SR"
    shape: tuple = (1, 1)
    dtype: str = "float16"
    arch: CUDA | None = None

    def recommend_hints(self, topk: int = 10) -> list[Hint]:
        name = "GeneralReductionTemplate"
        shape = (self.shape,) if isinstance(self.shape, numbers.Integral) else \
            tuple(self.shape)
        if not isinstance(self.structure, str) or len(self.structure) != len(shape) or \
                set(self.structure) - set("SR"):
            raise ValueError(f"{name}: structure must be one letter an axis of shape, 'S' "
                             f"(spatial) or 'R' (reduced), got structure={self.structure!r}, "
                             f"shape={self.shape!r}")
        _positive(name, **{f"shape[{i}]": s for i, s in enumerate(shape)})
        shape = tuple(int(s) for s in shape)
        M = math.prod(s for s, a in zip(shape, self.structure) if a == "S")
        N = math.prod(s for s, a in zip(shape, self.structure) if a == "R")
        arch = self.arch or CUDA()
        nbytes = dtype_bytes(name, self.dtype)
        hints = []
        # rows a block: up to 8 long rows, more where a row is shorter than a block's
        # threads (a block holds at least one value a thread)
        for bm in (b for b in _candidates(M, 1, cap=max(8, 1024 // N)) if b <= M):
            # (fewer than 128 threads only where the block has fewer values)
            for threads in (32, 64, 128, 256, 512, 1024):
                if threads < 128 and bm * N >= 128:
                    continue
                values = math.ceil(bm * N / threads)      # float32 values a thread holds
                if values > 96 or threads > max(bm * N, 32):
                    continue
                registers = (values + 32 + 7) // 8 * 8
                per_sm = min(_THREADS_PER_SM // threads, _BLOCKS_PER_SM,
                             arch.reg_cap // (threads * registers))
                if per_sm < 1:
                    continue
                waves = math.ceil(math.ceil(M / bm) / (per_sm * arch.num_sms))
                traffic = 2 * bm * N * nbytes
                hints.append(Hint(bm, N, 1, threads, 1, (traffic + 1) * waves, traffic,
                                  waves, per_sm, 0, dict(block_M=bm, threads=threads)))
        # ties: more threads resident per SM (more loads in flight), then fewer rows
        hints.sort(key=lambda h: (h.score, -h.threads * h.blocks_per_sm, h.block_M))
        return hints[:topk]


@dataclass
class GEMVTemplate(Template):
    """y[N] = B[N, K] @ a[K] (TileLang's GEMV template), the kernel of
    ``examples/gemv``: ``BLOCK_N`` rows a block, each row reduced by ``reduce_threads``
    threads (``threads=(BLOCK_N, reduce_threads)``), 16 bytes a thread a step. B is read
    once, so the search is for a grid that keeps every SM's loads in flight: the fewest
    waves, then the most threads resident, then the shorter block."""
    N: int = 1
    K: int = 1
    in_dtype: str = "float16"
    out_dtype: str = "float16"
    accum_dtype: str = "float32"
    arch: CUDA | None = None

    def reference(self, A, B):
        """y = B @ a, accumulated in ``accum_dtype``, in ``out_dtype``."""
        acc = torch_dtype(self.accum_dtype)
        return (B.to(acc) @ A.to(acc)).to(torch_dtype(self.out_dtype))

    def recommend_hints(self, topk: int = 10) -> list[Hint]:
        name = "GEMVTemplate"
        _positive(name, N=self.N, K=self.K)
        N, K = int(self.N), int(self.K)
        arch = self.arch or CUDA()
        a_bytes, c_bytes = dtype_bytes(name, self.in_dtype), dtype_bytes(name, self.out_dtype)
        dtype_bytes(name, self.accum_dtype)
        vector = max(1, 16 // a_bytes)
        hints = []
        for bn in (1, 2, 4, 8, 16, 32, 64):
            if bn > max(N, 1):
                break
            for rt in (32, 64, 128, 256):
                threads = bn * rt
                if threads > 1024 or (rt > 32 and rt * vector > K):
                    continue
                per_sm = min(_THREADS_PER_SM // threads, _BLOCKS_PER_SM)
                waves = math.ceil(math.ceil(N / bn) / (per_sm * arch.num_sms))
                traffic = (bn + 1) * K * a_bytes + bn * c_bytes
                hints.append(Hint(1, bn, rt * vector, threads, 1, (traffic + 1) * waves,
                                  traffic, waves, per_sm, bn * 4,
                                  dict(BLOCK_N=bn, reduce_threads=rt)))
        # the fewest waves, then the most threads in flight (the grid's blocks, at most
        # what the SMs hold), then the least traffic a block
        in_flight = {id(h): min(math.ceil(N / h.block_N), h.blocks_per_sm * arch.num_sms)
                     * h.threads for h in hints}
        hints.sort(key=lambda h: (h.num_wave, -in_flight[id(h)], h.score, h.block_N))
        return hints[:topk]
