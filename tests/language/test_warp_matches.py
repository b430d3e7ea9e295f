"""Warp matches (``T.match_any_sync``, ``T.match_all_sync``) and ``T.sync_warp`` in
per-thread code, as TileLang writes them: in the simulator against numpy (several warps,
masks, 32- and 64-bit integers and floats compared bit for bit), their errors, the PTX
(``match.any.sync``, ``match.all.sync``, ``bar.warp.sync``, assembled by ptxas) and, with
``-m gpu``, on the device against numpy and the simulator."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError
from tilejit.sim.threads import ThreadCodeError

FULL = 0xFFFFFFFF


@tilejit.kernel
def warp_matches(V, F, ANY, ALL, FANY, HALF):
    with T.Kernel(1, threads=128):
        tx = T.get_thread_binding()
        ANY[tx] = T.match_any_sync(V[tx])
        ALL[tx] = T.match_all_sync(V[tx])
        FANY[tx] = T.match_any_sync(F[tx], FULL)
        if tx % 32 < 16:
            HALF[tx] = T.match_any_sync(V[tx], 0x0000FFFF)
        else:
            HALF[tx] = T.match_all_sync(V[tx], 0xFFFF0000)


def _values(dtype, seed=0):
    """Warp 0: all equal; warp 1: four classes; warp 2: all distinct; warp 3: random of
    three values (upper half equal)."""
    rng = np.random.default_rng(seed)
    v = np.zeros(128, np.int64)
    v[:32] = 7
    v[32:64] = np.arange(32) % 4 - 2
    v[64:96] = np.arange(32) * (1 << 33 if np.dtype(dtype).itemsize == 8 else 3)
    v[96:128] = rng.integers(0, 3, 32)
    v[112:128] = 9
    return v.astype(dtype)


def _floats():
    f = np.linspace(-1, 1, 128).astype(np.float32)
    f[:32] = 0.5
    f[32:48], f[48:64] = 0.0, -0.0                 # equal as numbers, not as bits
    f[64:96] = np.nan
    return f


def _expected(v, f):
    def any_of(x, mask=FULL):
        w = x.reshape(-1, 32)
        bits = ((mask >> np.arange(32)) & 1).astype(bool)
        same = (w[:, :, None] == w[:, None, :]) & bits[None, None, :]
        return (same.astype(np.uint64) << np.arange(32, dtype=np.uint64)).sum(2).reshape(-1)

    def all_of(x, mask=FULL):
        w = x.reshape(-1, 32)
        bits = ((mask >> np.arange(32)) & 1).astype(bool)
        agree = np.array([len(set(row[bits].tolist())) == 1 for row in w])
        return np.repeat(np.where(agree, mask, 0), 32)

    fb = f.view(np.uint32)
    half = np.where(np.arange(128) % 32 < 16, any_of(v, 0x0000FFFF), all_of(v, 0xFFFF0000))
    return dict(ANY=any_of(v), ALL=all_of(v), FANY=any_of(fb), HALF=half)


def _outputs(lib=np, **kw):
    return {k: lib.zeros(128, dtype=lib.int64, **kw) for k in ("ANY", "ALL", "FANY", "HALF")}


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64])
def test_matches_in_the_simulator(dtype):
    v, f = _values(dtype), _floats()
    out = _outputs()
    tilejit.kernel(warp_matches.func, target="sim")(v, f, *out.values())
    for k, want in _expected(v, f).items():
        np.testing.assert_array_equal(out[k], want.astype(np.int64), err_msg=k)


def test_python_calls_outside_a_kernel():
    assert T.match_any_sync(np.int32(5)) == FULL          # 32 copies of one value
    assert T.match_all_sync(np.int64(5)) == FULL
    with pytest.raises(TypeError, match="T.match_any_sync takes an integer or float of 32 "
                                        "or 64 bits, got float16"):
        T.match_any_sync(np.float16(1))


@tilejit.kernel
def bad_match(V, OUT):
    with T.Kernel(1, threads=32):
        tx = T.get_thread_binding()
        OUT[tx] = T.match_any_sync(V[tx])


def test_a_value_of_16_bits_is_a_compile_error():
    with pytest.raises(CompileError, match=r"T.match_any_sync takes an integer or float of "
                                           r"32 or 64 bits, got float16"):
        bad_match.compile(np.zeros(32, np.float16), np.zeros(32, np.int64), target="cuda",
                          arch="sm_90a")


@tilejit.kernel
def match_outside_its_mask(V, OUT):
    with T.Kernel(1, threads=32):
        tx = T.get_thread_binding()
        OUT[tx] = T.match_any_sync(V[tx], 0x0000FFFF)      # lanes 16..31 are not in it


def test_a_lane_outside_its_mask_is_reported():
    with pytest.raises(ThreadCodeError, match="does not name the lane"):
        tilejit.kernel(match_outside_its_mask.func, target="sim")(
            np.zeros(32, np.int32), np.zeros(32, np.int64))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_has_the_matches(arch, ptxas):
    v, f = _values(np.int64), _floats()
    ptx = warp_matches.compile(v, f, *_outputs().values(), target="cuda", arch=arch).ptx
    assert "match.any.sync.b64" in ptx and "match.all.sync.b64" in ptx
    assert "match.any.sync.b32" in ptx                       # the float's bits
    ptxas(ptx, arch)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_on_the_gpu(dtype):
    import torch
    v, f = _values(dtype, seed=1), _floats()
    out = _outputs(torch, device="cuda")
    warp_matches(torch.from_numpy(v).cuda(), torch.from_numpy(f).cuda(), *out.values())
    sim = _outputs()
    tilejit.kernel(warp_matches.func, target="sim")(v, f, *sim.values())
    for k, want in _expected(v, f).items():
        np.testing.assert_array_equal(out[k].cpu().numpy(), want.astype(np.int64), err_msg=k)
        np.testing.assert_array_equal(sim[k], want.astype(np.int64), err_msg=k)


# -- T.sync_warp ---------------------------------------------------------------------------
@tilejit.kernel
def warp_exchange(X, Y):
    """Each lane writes its value to shared memory, the warp synchronizes, and each lane
    reads its neighbour's (the protocol __syncwarp orders)."""
    with T.Kernel(1, threads=64):
        S = T.alloc_shared((64,), "float32")
        tx = T.get_thread_binding()
        S[tx] = X[tx]
        T.sync_warp()
        Y[tx] = S[(tx // 32) * 32 + (tx + 1) % 32]
        T.sync_warp(0xFFFFFFFF)


def _exchanged(x):
    return np.concatenate([np.roll(x[:32], -1), np.roll(x[32:], -1)])


def test_sync_warp_in_the_simulator_and_the_ptx(ptxas):
    x = np.arange(64, dtype=np.float32)
    y = np.zeros(64, np.float32)
    tilejit.kernel(warp_exchange.func, target="sim")(x, y)
    np.testing.assert_array_equal(y, _exchanged(x))
    for arch in ("sm_80", "sm_90a"):
        ptx = warp_exchange.compile(x, y, target="cuda", arch=arch).ptx
        assert "bar.warp.sync" in ptx
        ptxas(ptx, arch)


@tilejit.kernel
def sync_warp_outside_its_mask(X):
    with T.Kernel(1, threads=32):
        T.sync_warp(0x0000FFFF)


def test_sync_warp_names_a_lane_outside_its_mask():
    with pytest.raises(ThreadCodeError, match="T.sync_warp: lane 16 of warp 0 calls it with "
                                              "mask 0x0000ffff, which does not name the lane"):
        tilejit.kernel(sync_warp_outside_its_mask.func, target="sim")(np.zeros(1, np.int32))


@pytest.mark.gpu
def test_sync_warp_on_the_gpu():
    import torch
    x = torch.randn(64, device="cuda")
    y = torch.zeros(64, device="cuda")
    warp_exchange(x, y)
    np.testing.assert_array_equal(y.cpu().numpy(), _exchanged(x.cpu().numpy()))


@tilejit.kernel
def narrow_matches(V, OUT):
    with T.Kernel(1, threads=32):
        tx = T.get_thread_binding()
        OUT[tx] = T.match_any_sync(V[tx])


def test_narrow_integers_are_widened_on_both_targets(ptxas):
    v = (np.arange(32) % 3 - 1).astype(np.int8)
    out = np.zeros(32, np.int64)
    tilejit.kernel(narrow_matches.func, target="sim")(v, out)
    np.testing.assert_array_equal(out, _expected(np.tile(v.astype(np.int32), 4),
                                                 _floats())["ANY"][:32].astype(np.int64))
    ptxas(narrow_matches.compile(v, out, target="cuda", arch="sm_90a").ptx, "sm_90a")
