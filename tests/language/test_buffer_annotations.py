"""``T.SharedBuffer`` / ``T.FragmentBuffer`` / ``T.LocalBuffer``: how TileLang's macros
annotate the tiles they are passed (its sparse-attention and top-k examples). The macro
is inlined and uses the tile it is given; the annotation is for the reader. A kernel
parameter so annotated is a ``TypeError`` naming it. In simulation, in PTX (assembled
for sm_80 and sm_90a) and, with ``-m gpu``, on the device against numpy and the
simulator."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T

M, N = 128, 64


def scaled_rows(dtype="float16"):
    @T.macro
    def scale(S: T.SharedBuffer([M, N], dtype), F: T.FragmentBuffer([M, N], T.float32),
              r: T.LocalBuffer([1], T.float32), k: T.int32):
        T.copy(S, F)
        for i, j in T.Parallel(M, N):
            F[i, j] = F[i, j] * r[0] + k

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((M, N), dtype)
            F = T.alloc_fragment((M, N), T.float32)
            r = T.alloc_local((1,), T.float32)
            r[0] = 2.0
            T.copy(A, S)
            scale(S, F, r, 3)
            T.copy(F, B)
    return main


def _expected(a):
    return a.astype(np.float32) * 2 + 3


def test_a_macro_with_buffer_annotations_runs_in_the_simulator_and_assembles(ptxas):
    kernel = tilejit.compile(scaled_rows())
    a = np.random.default_rng(0).random((M, N)).astype(np.float16)
    b = np.zeros((M, N), np.float32)
    kernel(a, b)
    np.testing.assert_array_equal(b, _expected(a))
    for arch in ("sm_80", "sm_90a"):
        ptxas(kernel.get_kernel_source(arch=arch), arch)


def test_the_annotations_read_as_tilelang_writes_them():
    assert repr(T.SharedBuffer([4, 8], T.float16)) == "T.SharedBuffer((4, 8), float16)"
    assert T.FragmentBuffer[(16,), "float32"].shape == (16,)
    assert T.LocalBuffer([1], "int32").scope == "local"


def test_a_kernel_parameter_annotated_as_a_tile_is_an_error():
    with pytest.raises(TypeError, match=r"parameter 'A' needs a T.Tensor.*T.SharedBuffer"):
        @T.prim_func
        def main(A: T.SharedBuffer((128,), T.float32)):
            with T.Kernel(1, threads=128):
                for i in T.Parallel(128):
                    A[i] = i


@pytest.mark.gpu
def test_gpu_a_macro_with_buffer_annotations_matches_numpy_and_the_simulator():
    import torch
    kernel = tilejit.compile(scaled_rows("bfloat16"))
    a = torch.rand(M, N, device="cuda").to(torch.bfloat16)
    b = torch.zeros(M, N, device="cuda")
    kernel(a, b)
    torch.cuda.synchronize()
    torch.testing.assert_close(b, a.float() * 2 + 3, rtol=0, atol=0)
    b_sim = torch.zeros(M, N)
    tilejit.compile(scaled_rows("bfloat16"), target="sim")(a.cpu(), b_sim)
    torch.testing.assert_close(b.cpu(), b_sim, rtol=0, atol=0)
