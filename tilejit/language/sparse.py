"""Structured sparsity: ``T.gemm_sp`` and the compressed form of its A operand.

A 2:4 sparse matrix (1:2 for 32-bit elements) keeps, of every group of 4 (2)
consecutive elements along K, at most 2 (1) nonzeros. Compressed, it is two tensors:

- ``A_sparse``: the kept values, group g's at columns ``elem * g ...`` (M x K/2);
- ``E``, the metadata: 4 bits per group, the positions of its kept values within the
  group (bits 1:0 the first, bits 3:2 the second; a 32-bit group's one value is at
  ``(bits 1:0) // 2``), in increasing order; consecutive groups packed from the low bits
  up into integers of ``E``'s dtype, row by row (TileLang's "natural row-major"
  metadata: ``E[m, k // e_factor]``, ``e_factor = E bits / 4 * group`` dense columns an
  element). Positions not in increasing order (a repeated one among them) are undefined
  on the tensor cores and an error in the simulator.

This module holds the contract (``GROUP_CONFIG``, ``get_e_factor``, the operand checks
both the compiler and the simulator make); TileLang's ``tilelang.cuda.intrinsics
.sparse_layout`` names it. How it runs: ``passes/sparse_gemms.py``.
"""
from __future__ import annotations

from tilejit.language._semantics import meaning
from tilejit.language.dtypes import as_dtype
from tilejit.language.tiles import GemmWarpPolicy

# dtype name -> (values kept, group size) along K
_GROUPS = {"float32": (1, 2), "float16": (2, 4), "bfloat16": (2, 4), "int8": (2, 4),
           "uint8": (2, 4), "float8_e4m3": (2, 4), "float8_e5m2": (2, 4)}
BITS_PER_GROUP = 4
META_DTYPES = ("int8", "int16", "int32", "uint8", "uint16", "uint32")


class _GroupConfig(dict):
    """``GROUP_CONFIG[dtype]``: (values kept, group size) of a dtype ``T.gemm_sp`` takes
    as A; keyed by any spelling of the dtype (``T.float16``, ``"half"``, ``T.float``)."""

    def __missing__(self, key):
        try:
            name = as_dtype(key).name
        except TypeError:
            raise KeyError(key) from None
        if name not in _GROUPS:
            raise KeyError(key)
        return _GROUPS[name]

    def __contains__(self, key):
        try:
            self[key]
        except KeyError:
            return False
        return True


GROUP_CONFIG = _GroupConfig({as_dtype(name): v for name, v in _GROUPS.items()})


def group_of(a_dtype) -> tuple[int, int]:
    """(values kept, group size) of A's dtype; a ValueError naming the dtypes otherwise."""
    try:
        return GROUP_CONFIG[a_dtype]
    except KeyError:
        raise ValueError(f"T.gemm_sp: A's dtype {a_dtype} has no structured sparsity on the "
                         f"tensor cores (A may be {', '.join(_GROUPS)})") from None


def get_e_factor(a_dtype, meta_dtype) -> int:
    """Dense K columns one element of the metadata describes (16 for float16 A with int16
    metadata, 32 for int8 A with int32)."""
    _, group = group_of(a_dtype)
    return as_dtype(meta_dtype).bits // BITS_PER_GROUP * group


def get_e_replicate_factor(a_dtype) -> int:
    """Threads of a quad that hold the same metadata register in mma.sp (TileLang's
    contract): 2 for 16- and 32-bit A, 1 for 8-bit."""
    return 1 if as_dtype(a_dtype).bits <= 8 else 2


def operand_error(a_shape, e_shape, b_shape, c_shape, a_dtype, e_dtype, transpose_A,
                  transpose_E, transpose_B) -> str | None:
    """What is wrong with ``T.gemm_sp``'s operands (shapes and dtypes; each a 2-d tile),
    or None. The compiler and the simulator report the same message."""
    try:
        elem, group = group_of(a_dtype)
    except ValueError as e:
        return str(e)
    if as_dtype(e_dtype).name not in META_DTYPES:
        return (f"T.gemm_sp: E (the metadata) must be an integer tile of 8, 16 or 32 bits, "
                f"got {e_dtype}")
    if any(len(s) != 2 for s in (a_shape, e_shape, b_shape, c_shape)):
        return (f"T.gemm_sp: A, E, B and C must be 2-d tiles, got shapes {tuple(a_shape)}, "
                f"{tuple(e_shape)}, {tuple(b_shape)}, {tuple(c_shape)}")
    M, N = c_shape
    K = b_shape[1] if transpose_B else b_shape[0]
    kept = K * elem // group
    ef = get_e_factor(a_dtype, e_dtype)
    want_a = (kept, M) if transpose_A else (M, kept)
    if K % group or tuple(a_shape) != want_a:
        return (f"T.gemm_sp: A (compressed) must be {want_a} for C {tuple(c_shape)} and K = "
                f"{K} ({elem} of every {group} {a_dtype} values along K kept"
                f"{', A transposed' if transpose_A else ''}), got {tuple(a_shape)}")
    if K % ef:
        return (f"T.gemm_sp: K = {K} must be a multiple of the {ef} columns one {e_dtype} of "
                f"the metadata describes for {a_dtype} A")
    want_e = (K // ef, M) if transpose_E else (M, K // ef)
    if tuple(e_shape) != want_e:
        return (f"T.gemm_sp: E (the metadata) must be {want_e} for M = {M}, K = {K} (one "
                f"{e_dtype} per {ef} columns of A{', E transposed' if transpose_E else ''}), "
                f"got {tuple(e_shape)}")
    return None


def gemm_sp(A_sparse, E, B, C, transpose_A=False, transpose_E=False, transpose_B=False,
            policy=GemmWarpPolicy.Square, clear_accum=False, k_pack=1, wg_wait=0,
            annotations=None):
    """``C += op(A) @ op(B)`` where A is 2:4 sparse (1:2 for float32), given compressed:
    ``A_sparse`` the kept values, ``E`` the metadata (this module's docstring). A and E
    are shared tiles or fragments, B a shared tile or fragment, C a fragment; with
    ``transpose_A`` A is stored K x M (``A_sparse`` (K/2, M)), with ``transpose_E`` E is
    (K/e_factor, M). A's dtype is float16, bfloat16, float32 (tf32), int8, uint8 or a
    float8; the accumulator as for ``T.gemm``.

    16-bit A and B with A not transposed run on the sparse tensor cores (sm_80+:
    ``mma.sp``; sm_90a: ``wgmma.mma_async.sp`` where a wgmma plan takes the gemm); other
    gemms expand A into a dense shared tile first and take the dense product's time
    (``passes/sparse_gemms.py``)."""
    return meaning("gemm_sp")(A_sparse, E, B, C, transpose_A, transpose_E, transpose_B,
                              policy, clear_accum, k_pack, wg_wait)


def wgmma_gemm_sp(A_sparse, E, B, C, transpose_A=False, transpose_E=False, transpose_B=False,
                  policy=GemmWarpPolicy.Square, clear_accum=False, annotations=None):
    """TileLang's explicit Hopper sparse gemm, issued without waiting: in tilejit it is
    ``T.gemm_sp`` (the front end renames it), whose dense gemm waits where its products
    are first needed."""
    return gemm_sp(A_sparse, E, B, C, transpose_A, transpose_E, transpose_B, policy,
                   clear_accum)
