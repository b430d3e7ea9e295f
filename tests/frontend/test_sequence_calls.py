"""``list(t)`` and ``tuple(t)`` of a helper's tuple in a kernel (TileLang's quantization
helpers are called so: ``decoded = list(unpack(packed))``): the tuple itself, indexed
alike in the simulator and on the GPU (PTX assembled here, the GPU twin there)."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T


def pair(x):
    return x + 1, x * 2


@tilejit.kernel
def unpacked(A, B):
    with T.Kernel(A.shape[0], threads=1) as bx:
        d = list(pair(A[bx]))
        t = tuple(pair(A[bx]))
        B[bx, 0] = d[0]
        B[bx, 1] = d[1] + t[1]


def _check(a, b):
    np.testing.assert_array_equal(b[:, 0], a + 1)
    np.testing.assert_array_equal(b[:, 1], a * 4)


def test_list_and_tuple_of_a_helpers_tuple():
    a = np.array([1, 2, 5], np.float32)
    b = np.zeros((3, 2), np.float32)
    unpacked(a, b)
    _check(a, b)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_ptx(arch, ptxas):
    a = np.zeros(3, np.float32)
    ptxas(unpacked.compile(a, np.zeros((3, 2), np.float32), target="cuda", arch=arch).ptx,
          arch)


@pytest.mark.gpu
def test_on_the_gpu():
    import torch
    a = torch.tensor([1.0, 2.0, 5.0], device="cuda")
    b = torch.zeros(3, 2, device="cuda")
    unpacked(a, b)
    _check(a.cpu().numpy(), b.cpu().numpy())
