"""Shuffles with a mask: the two half-warps of a warp part ways (a third-party
Birkhoff-polytope projection gives each 4x4 problem 16 lanes and lets each stop its
Newton iterations on its own), each shuffling with its own half's mask. ``shfl.sync``
takes the call's mask (the full one would name lanes that run other code: undefined);
the simulator checks the mask as the GPU requires (every lane it names runs the shuffle
with the same mask, and no lane reads outside its mask)."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.sim.threads import ThreadCodeError

torch = pytest.importorskip("torch")


@tilejit.kernel
def half_warp_sums(X, Y, R):
    """Lanes 0-15 sum their half by butterflies over 1..8 with mask 0xFFFF, then do one
    more round (R[0] rounds in all); lanes 16-31 take the row sums of a 4x4 (xor 1, 2)
    with mask 0xFFFF0000, then all read lane 19 (the first row's sum) with shfl_sync."""
    with T.Kernel(2, threads=64) as bx:
        tx = T.get_thread_binding()
        lane = tx % 32
        v = T.alloc_var("float32")
        v = X[bx * 64 + tx]
        if lane < 16:
            for _ in T.serial(R[0]):
                v = v + T.shfl_xor(v, 1, mask=0x0000FFFF)
                v = v + T.shfl_xor(v, 2, mask=0x0000FFFF)
                v = v + T.shfl_xor(v, 4, mask=0x0000FFFF)
                v = v + T.shfl_xor(v, 8, mask=0x0000FFFF)
        else:
            v = v + T.shfl_xor(v, 1, 4, mask=0xFFFF0000)
            v = v + T.shfl_xor(v, 2, 4, mask=0xFFFF0000)
            v = T.shfl_sync(v, 19, mask=0xFFFF0000)
        Y[bx * 64 + tx] = v


def _expected(x, rounds):
    y = x.astype(np.float64).reshape(4, 32).copy()
    lo = y[:, :16].copy()
    for _ in range(rounds):
        lo = np.repeat(lo.sum(1, keepdims=True), 16, 1)
    hi = y[:, 16:].reshape(4, 4, 4).sum(2)[:, 0]      # lane 19: the first row of 4
    return np.concatenate([lo, np.repeat(hi[:, None], 16, 1)], 1).reshape(128)


@pytest.mark.parametrize("rounds", [0, 1, 2])
def test_the_half_warps_shuffle_apart_in_the_simulator(rounds):
    x = (np.arange(128, dtype=np.float32) % 13) / 4
    y = np.zeros(128, np.float32)
    half_warp_sums(x, y, np.array([rounds], np.int32))
    np.testing.assert_allclose(y, _expected(x, rounds), rtol=1e-6)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_passes_each_mask(arch, ptxas):
    ptx = half_warp_sums.compile(np.zeros(128, np.float32), np.zeros(128, np.float32),
                                 np.zeros(1, np.int32), target="cuda", arch=arch).ptx
    shuffles = [line for line in ptx.splitlines() if "shfl.sync" in line]
    assert any(line.rstrip(";").endswith("65535") for line in shuffles), shuffles
    assert any(line.rstrip(";").endswith("-65536") or line.rstrip(";").endswith("4294901760")
               for line in shuffles), shuffles
    ptxas(ptx, arch)


@tilejit.kernel
def full_mask_in_half(X, Y):
    with T.Kernel(1, threads=32):
        tx = T.get_thread_binding()
        if tx < 16:
            Y[tx] = T.shfl_xor(X[tx], 1)


@tilejit.kernel
def mask_without_its_lanes(X, Y):
    with T.Kernel(1, threads=32):
        tx = T.get_thread_binding()
        if tx < 8:
            Y[tx] = T.shfl_xor(X[tx], 1, mask=0x0000FFFF)


@tilejit.kernel
def reads_outside_its_mask(X, Y):
    with T.Kernel(1, threads=32):
        tx = T.get_thread_binding()
        if tx < 16:
            Y[tx] = T.shfl_xor(X[tx], 16, mask=0x0000FFFF)


def test_what_the_gpu_leaves_undefined_is_reported():
    x, y = np.ones(32, np.float32), np.zeros(32, np.float32)
    with pytest.raises(ThreadCodeError, match="every lane of the warp"):
        full_mask_in_half(x, y)
    with pytest.raises(ThreadCodeError, match=r"lane 0 of warp 0 calls it with mask "
                       r"0x0000ffff, and lane 8, which the mask names, does not call it"):
        mask_without_its_lanes(x, y)
    with pytest.raises(ThreadCodeError, match=r"lane 0 of warp 0 reads lane 16, which its "
                       r"mask 0x0000ffff does not name"):
        reads_outside_its_mask(x, y)


@pytest.mark.gpu
@pytest.mark.parametrize("rounds", [0, 1, 3])
def test_on_the_gpu_against_float64_and_the_simulator(rounds):
    x = torch.rand(128) * 4
    r = torch.tensor([rounds], dtype=torch.int32)
    y = torch.zeros(128, device="cuda")
    half_warp_sums(x.cuda(), y, r.cuda())
    sim = np.zeros(128, np.float32)
    tilejit.kernel(half_warp_sums.func, target="sim")(x.numpy(), sim, r.numpy())
    np.testing.assert_allclose(y.cpu().numpy(), _expected(x.numpy(), rounds), rtol=1e-5)
    assert np.array_equal(y.cpu().numpy(), sim)
