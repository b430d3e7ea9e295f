"""Seed 002 (TileLang 零基础完整开发教程, 五、示例一：向量加法), tilelang_vector_add with a required block_size: the program as the seed writes it, imports changed to tilejit; its test_vector_add (2^20 on cuda) is in tests/tilelang/test_seed_programs.py."""
from __future__ import annotations

import torch
import tilejit as tilelang
import tilejit.language as T


@tilelang.jit
def tilelang_vector_add(
    A,
    B,
    block_size: int,
):
    N = T.const("N")

    A: T.Tensor((N,), T.float32)
    B: T.Tensor((N,), T.float32)

    C = T.empty((N,), T.float32)

    with T.Kernel(
        T.ceildiv(N, block_size),
        threads=block_size,
    ) as bx:
        for tx in T.Parallel(block_size):
            index = bx * block_size + tx

            if index < N:
                C[index] = A[index] + B[index]

    return C
