"""A T.Parallel over the first elements of a fragment (TileLang issue 1744's
``for i in T.Parallel(4): D[i, k] = S_frag[i]`` with S_frag of shape (8,)): the loop
runs over the fragment's shape with the iterations past its own extents left out
(passes/prefix_loops.py)."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError


@tilejit.kernel
def broadcast_head(S, D):
    """D[i, k] = S[i] for i < 4 of the 8 elements of S (TileLang issue 1744)."""
    with T.Kernel(1, threads=128) as bx:
        S_shared = T.alloc_shared((8,), T.float32)
        S_fragment = T.alloc_fragment((8,), T.float32)
        D_shared = T.alloc_shared((4, 64), T.float32)
        T.copy(S, S_shared)
        T.copy(S_shared, S_fragment)
        for k in T.serial(64):
            for i in T.Parallel(4):
                D_shared[i, k] = S_fragment[i]
        T.copy(D_shared, D)


@tilejit.kernel
def scale_top_left(A, B, rows: T.constexpr = 24, cols: T.constexpr = 40):
    """B = A, then B[:rows, :cols] *= 3 through a fragment of shape (32, 64)."""
    with T.Kernel(1, threads=128) as bx:
        F = T.alloc_fragment((32, 64), T.float32)
        T.copy(A, F)
        for i, j in T.Parallel(rows, cols):
            F[i, j] = F[i, j] * 3
        T.copy(F, B)


@tilejit.kernel
def two_shapes(A, B):
    """A loop indexing fragments of two different shapes stays an error."""
    with T.Kernel(1, threads=64) as bx:
        F = T.alloc_fragment((64,), T.float32)
        G = T.alloc_fragment((32,), T.float32)
        T.copy(A, F)
        for i in T.Parallel(32):
            G[i] = F[i]
        T.copy(G, B)


def _broadcast_case():
    s = np.arange(8, dtype=np.float32) + 0.5
    return (s, np.zeros((4, 64), np.float32)), np.repeat(s[:4, None], 64, axis=1)


def _scale_case():
    a = np.random.default_rng(3).standard_normal((32, 64)).astype(np.float32)
    want = a.copy()
    want[:24, :40] *= 3
    return (a, np.zeros_like(a)), want


CASES = {"broadcast_head": (broadcast_head, _broadcast_case),
         "scale_top_left": (scale_top_left, _scale_case)}


@pytest.mark.parametrize("name", sorted(CASES))
def test_simulator_matches_numpy(name):
    kernel, case = CASES[name]
    args, want = case()
    kernel(*args)
    np.testing.assert_array_equal(args[-1], want)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_the_ptx_assembles(name, arch, ptxas):
    kernel, case = CASES[name]
    args, _ = case()
    ptxas(kernel.compile(*args, target="cuda", arch=arch).ptx, arch)


def test_fragments_of_two_shapes_in_one_loop_are_still_an_error():
    a, b = np.zeros(64, np.float32), np.zeros(32, np.float32)
    with pytest.raises(CompileError, match="must cover its shape"):
        two_shapes.compile(a, b, target="cuda", arch="sm_80")


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_gpu_matches_simulator_and_torch(name):
    import torch
    kernel, case = CASES[name]
    args, want = case()
    sim = [a.copy() for a in args]
    kernel(*sim)
    dev = [torch.from_numpy(a).cuda() for a in args]
    kernel(*dev)
    got = dev[-1].cpu().numpy()
    np.testing.assert_array_equal(got, sim[-1])
    torch.testing.assert_close(torch.from_numpy(got).double(), torch.from_numpy(want).double())
