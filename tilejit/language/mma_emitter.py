"""TileLang's hand-written MMA path: ``TensorCoreIntrinEmitter`` (TileLang's
``tilelang.intrinsics.mma_macro_generator``), for what ``T.gemm`` does not cover.

The emitter is a compile-time code generator built outside the kernel from the warp grid
and the micro tiles; its methods, called in a kernel's body, are expanded by the front end
(``frontend/mma_emitter_calls.py``) into per-thread code over ``T.alloc_local`` arrays:

    mma_emitter.ldmatrix_a(A_local, A_shared, ki)   # ldmatrix.x4 (.trans for A^T) per row tile
                                                    # (int8 A^T, B as (K, N): element loads)
    mma_emitter.ldmatrix_b(B_local, B_shared, ki)   # ldmatrix.x4 / .x2 per column tile
    mma_emitter.mma(A_local, B_local, C_local)      # mma.sync.aligned.m16n8k16 (k32 int8)
    mma_emitter.stmatrix(C_local, C_shared)         # per-thread stores, (M/16, N/16, 16, n) or 2-d

The local arrays hold, in each thread, exactly the elements PTX's fragments give its lane
(PTX ISA "Matrix Fragments for mma.m16n8k16", ``layouts/fragment.py``): per 16 x 16 tile of
A, ``local_size_a`` elements ``a0 … a7``; per column tile of B, ``b0 … b3`` of its first 8
columns then of its second 8 (n_dim 16); per 16 x n_dim tile of C, ``c0 … c3`` of each
16 x 8 half. Tile ``(i, j)`` of a warp is at ``A_local[i * local_size_a]``,
``B_local[j * local_size_b]``, ``C_local[(i * warp_cols + j) * local_size_out]``.
Warp ``w`` of the block owns rows ``warp_m * warp_row_tiles`` and columns ``warp_n *
warp_col_tiles`` with ``warp_m = w % block_row_warps``, ``warp_n = w // block_row_warps``
(``is_m_first``: the other way round), as TileLang's ``extract_thread_binding``.

NVIDIA only (ldmatrix and mma.sync, sm_80+; sm_90a too); the simulator runs the same
per-thread code, each instruction by its PTX meaning (``sim/mma.py``).
"""
from __future__ import annotations

from tilejit.language.dtypes import as_dtype

WARP_SIZE = 32

# A/B dtype -> (k of the instruction, the accumulator dtypes it takes)
_INSTRUCTIONS = {
    "float16": (16, ("float32", "float16")),
    "bfloat16": (16, ("float32",)),
    "int8": (32, ("int32",)),
}
_ABBREVIATIONS = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "int8": "int8",
                  "int32": "int32"}


def _dtype_name(value, what: str) -> str:
    try:
        name = as_dtype(value).name
    except (TypeError, ValueError, KeyError):
        name = None
    if name is None:
        raise ValueError(f"TensorCoreIntrinEmitter: {what} must be a dtype, got {value!r}")
    return name


def _positive_int(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"TensorCoreIntrinEmitter: {what} must be a positive int, got "
                         f"{value!r}")
    return value


def _multiple(value, of: int, what: str, why: str) -> int:
    _positive_int(value, what)
    if value % of:
        raise ValueError(f"TensorCoreIntrinEmitter: {what} must be a multiple of {of} "
                         f"({why}), got {value}")
    return value


class TensorCoreIntrinEmitter:
    """mma.sync on per-thread arrays, TileLang's hand-written MMA path (module docstring).

    ``a_dtype``/``b_dtype``: float16, bfloat16 or int8 (the same); ``accum_dtype``: float32
    (or float16 for float16 operands), int32 for int8. ``a_transposed``: A stored (K, M);
    ``b_transposed``: B stored (N, K) (int8 A as (K, M) or B as (K, N) is read element by
    element: ldmatrix transposes 16-bit elements only). ``warp_row_tiles`` a multiple of 16,
    ``warp_col_tiles`` of 8 (n_dim 16 when it is a multiple of 16, else 8), ``chunk`` (the
    block's K) of ``micro_size_k``."""

    M_DIM = 16
    WARP_SIZE = WARP_SIZE
    # its fields read in a kernel (``e.micro_size_k``) are compile-time constants
    # (``frontend/attribute_chains.py``), as an object of the user's would be
    compile_time_fields = True
    dtype_abbrv = dict(_ABBREVIATIONS)
    is_m_first = False

    def __init__(self, a_dtype="float16", b_dtype="float16", accum_dtype="float16",
                 a_transposed=False, b_transposed=False, block_row_warps=2, block_col_warps=2,
                 warp_row_tiles=8, warp_col_tiles=8, chunk=16, reduce_k=1,
                 num_elems_per_byte=1, is_m_first=False, thread_var=None):
        self.a_dtype = _dtype_name(a_dtype, "a_dtype")
        self.b_dtype = _dtype_name(b_dtype, "b_dtype")
        self.accum_dtype = _dtype_name(accum_dtype, "accum_dtype")
        if self.a_dtype not in _INSTRUCTIONS:
            raise ValueError(f"TensorCoreIntrinEmitter: a_dtype must be one of "
                             f"{', '.join(_INSTRUCTIONS)}, got {self.a_dtype}")
        if self.b_dtype != self.a_dtype:
            raise ValueError(f"TensorCoreIntrinEmitter: b_dtype must be a_dtype "
                             f"({self.a_dtype}), got {self.b_dtype}")
        self.k_dim, accums = _INSTRUCTIONS[self.a_dtype]
        if self.accum_dtype not in accums:
            raise ValueError(f"TensorCoreIntrinEmitter: accum_dtype for {self.a_dtype} "
                             f"operands must be {' or '.join(accums)}, got {self.accum_dtype}")
        for name, value in (("a_transposed", a_transposed), ("b_transposed", b_transposed)):
            if not isinstance(value, bool):
                raise ValueError(f"TensorCoreIntrinEmitter: {name} must be True or False, "
                                 f"got {value!r}")
        self.a_transposed, self.b_transposed = a_transposed, b_transposed
        self.block_row_warps = _positive_int(block_row_warps, "block_row_warps")
        self.block_col_warps = _positive_int(block_col_warps, "block_col_warps")
        self.warp_row_tiles = _multiple(warp_row_tiles, self.M_DIM, "warp_row_tiles",
                                        "micro_size_x, the mma's M")
        self.warp_col_tiles = _multiple(warp_col_tiles, 8, "warp_col_tiles", "the mma's N")
        self.chunk = _multiple(chunk, self.k_dim, "chunk",
                               f"micro_size_k, the mma's K for {self.a_dtype}")
        self.reduce_k = _positive_int(reduce_k, "reduce_k")
        if num_elems_per_byte != 1:
            raise ValueError("TensorCoreIntrinEmitter: num_elems_per_byte must be 1 (packed "
                             f"sub-byte operands are not built), got {num_elems_per_byte!r}")
        self.num_elems_per_byte = 1
        if thread_var is not None:
            raise ValueError("TensorCoreIntrinEmitter: thread_var is TileLang's TIR variable; "
                             "pass thread_binding= to the methods instead (got "
                             f"{thread_var!r})")
        self.thread_var = None
        if is_m_first is not None:
            if not isinstance(is_m_first, bool):
                raise ValueError("TensorCoreIntrinEmitter: is_m_first must be True, False or "
                                 f"None, got {is_m_first!r}")
            self.is_m_first = is_m_first
        self.n_dim = 16 if self.warp_col_tiles % 16 == 0 else 8
        self.micro_size_x, self.micro_size_y, self.micro_size_k = (self.M_DIM, self.n_dim,
                                                                    self.k_dim)
        self.local_size_a = self.M_DIM * self.k_dim // WARP_SIZE
        self.local_size_b = self.n_dim * self.k_dim // WARP_SIZE
        self.local_size_out = self.M_DIM * self.n_dim // WARP_SIZE
        self.warp_rows = self.warp_row_tiles // self.micro_size_x
        self.warp_cols = self.warp_col_tiles // self.micro_size_y
        self.threads = WARP_SIZE * self.block_row_warps * self.block_col_warps * self.reduce_k
        self.mma_prefix = f"m16n8k{self.k_dim}"
        self.a_dtype_abbrv = _ABBREVIATIONS[self.a_dtype]
        self.b_dtype_abbrv = _ABBREVIATIONS[self.b_dtype]
        self.accum_dtype_abbrv = _ABBREVIATIONS[self.accum_dtype]

    def __repr__(self):
        return (f"TensorCoreIntrinEmitter({self.a_dtype} x {self.b_dtype} -> "
                f"{self.accum_dtype}, warps {self.block_row_warps}x{self.block_col_warps}, "
                f"warp tile {self.warp_row_tiles}x{self.warp_col_tiles}, chunk {self.chunk})")

    def extract_thread_binding(self, thread_id, is_m_first=None):
        """(lane, warp_n, warp_m) of a thread index (ints, numpy arrays or expressions)."""
        first = self.is_m_first if is_m_first is None else is_m_first
        lane, warp = thread_id % WARP_SIZE, thread_id // WARP_SIZE
        if first:
            return (lane, warp % self.block_col_warps,
                    (warp // self.block_col_warps) % self.block_row_warps)
        return (lane, (warp // self.block_row_warps) % self.block_col_warps,
                warp % self.block_row_warps)

    def _in_kernel(self, name):
        raise TypeError(f"TensorCoreIntrinEmitter.{name} generates a kernel's code: call it "
                        "in the body of a tilejit kernel (the front end expands it), not as "
                        "Python")

    def ldmatrix_a(self, A_local_buf, A_shared_buf, ki, rk=0, thread_binding=None):
        """This warp's A registers of k step ``ki`` (of ``rk``'s chunk): one ldmatrix.x4 per
        row tile into ``A_local_buf[i * local_size_a ...]``."""
        self._in_kernel("ldmatrix_a")

    def ldmatrix_b(self, B_local_buf, B_shared_buf, ki, rk=0, thread_binding=None):
        """This warp's B registers of k step ``ki``: one ldmatrix (.x4 for n_dim 16, .x2
        for 8) per column tile into ``B_local_buf[j * local_size_b ...]``."""
        self._in_kernel("ldmatrix_b")

    def mma(self, A_local_buf, B_local_buf, C_local_buf, k_inner=0):
        """C += A·B for every (row tile, column tile) of the warp: mma.sync.m16n8k16
        (m16n8k32 for int8), two per tile when n_dim is 16."""
        self._in_kernel("mma")

    def stmatrix(self, C_local_buf, C_buf, pid_m=None, pid_n=None, thread_binding=None):
        """Each thread's accumulators into C_buf: a shared tile shaped (M / 16, N / n_dim,
        16, n_dim) or (M, N), or, with ``pid_m``/``pid_n``, the block's tile of a tensor."""
        self._in_kernel("stmatrix")


def mma_store_index_map(thread_id, local_id):
    """(row, col) in a 16 x 16 C tile of accumulator ``local_id`` of lane ``thread_id``
    (two m16n8 fragments side by side: PTX's c0..c3 of the left, then of the right)."""
    row = 8 * (local_id % 4 // 2) + thread_id // 4
    col = 8 * (local_id // 4) + (thread_id % 4) * 2 + local_id % 2
    return row, col


def get_mma_micro_size(dtype):
    """(micro_size_x, micro_size_y, micro_size_k) of the mma for operands of ``dtype``."""
    name = _dtype_name(dtype, "dtype")
    return 16, 16, 32 if as_dtype(name).itemsize == 1 else 16


def get_ldmatrix_offset(matrix, row_idx, col_idx, stride=None, dtype="float16",
                        transposed=False):
    """TileLang's ``get_ldmatrix_offset``: (row, col) in the 16 x k_bytes tile of operand
    ``matrix`` ("A" or "B") that element ``col_idx`` of lane ``row_idx`` of an ldmatrix.x4
    reads (``stride`` is unused, as in TileLang). 16-bit: lane ``L`` addresses row ``L %
    16`` of k half ``L // 16`` (``.trans``: rows ``8·(L // 16) + L % 8``, columns ``8·(L %
    16 // 8)``); 8-bit and 32-bit only for A as (M, K) and B as (N, K) (ldmatrix does not
    transpose them), 32 and 4 elements a lane; sub-byte columns scaled by the packing.
    Ints, numpy arrays or expressions alike."""
    if matrix not in ("A", "B"):
        raise ValueError(f"get_ldmatrix_offset matrix: must be 'A' or 'B', got {matrix!r}")
    bits = as_dtype(dtype).bits if not isinstance(dtype, int) else dtype
    lane, local = row_idx, col_idx
    if bits == 16:
        if transposed:
            return 8 * (lane // 16) + lane % 8, 8 * (lane % 16 // 8) + local % 8
        return lane % 16, 8 * (lane // 16) + local % 8
    if bits not in (32, 8, 4):
        raise ValueError(f"get_ldmatrix_offset dtype: must be 32, 16, 8 or 4 bits wide, got "
                         f"{dtype!r} ({bits} bits)")
    if not ((matrix == "B" and transposed) or (matrix == "A" and not transposed)):
        raise ValueError(f"get_ldmatrix_offset: {bits}-bit operands are read without .trans "
                         "only (A not transposed, B transposed), got matrix "
                         f"{matrix!r}, transposed={transposed}")
    if bits == 32:
        if matrix == "A":
            return lane % 16, lane // 16 * 4 + local % 4
        return lane // 16 * 8 + lane % 8, lane % 16 // 8 * 4 + local % 4
    pack = 8 // bits
    if matrix == "A":
        return lane % 16, (local + lane // 16 * 16) * pack
    return lane // 16 * 8 + lane % 8, (local + 16 * (lane % 16 // 8)) * pack
