"""The lowering tables.

``TABLES["common"]`` holds rules that are plain LLVM IR and serve every GPU target;
``TABLES["cuda"]`` (and later ``"amdgpu"``) the rules that use a target's intrinsics.
A target context installs ``common`` plus its own table. Target-dependent facts such as
the thread index are read through the target context's hooks (``thread_index``,
``block_index``), so most rules stay common.
"""
from __future__ import annotations

from numba.core.imputils import Registry

TABLES: dict[str, Registry] = {
    "common": Registry("tilejit.common"),
    "cuda": Registry("tilejit.cuda"),
    "amdgpu": Registry("tilejit.amdgpu"),
}


def lower(op, *argtys, target: str = "common"):
    return TABLES[target].lower(op, *argtys)


def lower_getattr(ty, attr, target: str = "common"):
    return TABLES[target].lower_getattr(ty, attr)


def lower_cast(fromty, toty, target: str = "common"):
    return TABLES[target].lower_cast(fromty, toty)


def lower_constant(ty, target: str = "common"):
    return TABLES[target].lower_constant(ty)


def load_rules():
    """Import every rule module (each registers itself)."""
    from tilejit.codegen.lowering import copy, gemm, math, parallel, printing, scalar, tensor, tiles  # noqa: F401
    from tilejit.codegen.lowering import atomics  # noqa: F401
    from tilejit.codegen.lowering import reductions  # noqa: F401
    from tilejit.codegen.lowering import tma, warp_roles, warp_specialize  # noqa: F401
    from tilejit.codegen.lowering import cluster, grid_sync, warp  # noqa: F401
    from tilejit.codegen.lowering import mma_sync, random, sparse_gemm  # noqa: F401
    from tilejit.codegen.lowering import async_copies, bit_moves  # noqa: F401
    from tilejit.codegen.lowering import scalar_math  # noqa: F401
    from tilejit.codegen.lowering import elementary, math_intrinsics  # noqa: F401
