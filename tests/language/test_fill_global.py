"""``T.fill``/``T.clear`` of a global tensor or a region of one (TileLang's tests fill an
output with ``T.fill(A, T.infinity(dtype))``): the block's threads share the elements; a
region's part past the tensor is skipped. The simulator did this and the GPU lowering had
no rule (an internal compiler error): now both, the PTX assembled, and ``-m gpu`` checks
the device against the simulator."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T


@tilejit.kernel
def fill_all(A, value: T.constexpr = 7.0):
    with T.Kernel(1, threads=64):
        T.fill(A, value)


@tilejit.kernel
def fill_blocks(A, block: T.constexpr = 32):
    M, N = A.shape
    with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
        T.fill(A[by * block:(by + 1) * block, bx * block:(bx + 1) * block], by * 100 + bx)


@tilejit.kernel
def clear_row(A, r):
    with T.Kernel(1, threads=32):
        T.clear(A[r, 0:40])


@tilejit.kernel
def clear_open_row(A, r):
    with T.Kernel(1, threads=32):
        T.clear(A[r, :])


def _sim(kernel, *args, **kw):
    return tilejit.kernel(kernel.func, target="sim")(*args, **kw)


def test_in_the_simulator():
    a = np.zeros((3, 50), np.float32)
    fill_all(a, value=float("inf"))
    assert np.isinf(a).all()
    b = np.zeros((70, 45), np.float32)
    fill_blocks(b)
    rows, cols = np.indices(b.shape)
    np.testing.assert_array_equal(b, (rows // 32) * 100 + cols // 32)
    c = np.ones((4, 40), np.float16)
    clear_row(c, 2)
    assert (c[2] == 0).all() and (c[[0, 1, 3]] == 1).all()


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_assembles(arch, ptxas):
    for kernel, args in ((fill_all, (np.zeros((3, 50), np.float32),)),
                         (fill_blocks, (np.zeros((70, 45), np.float32),)),
                         (clear_row, (np.zeros((4, 40), np.float16), 1))):
        ptx = kernel.compile(*args, target="cuda", arch=arch).ptx
        assert "st.global" in ptx
        ptxas(ptx, arch)


@tilejit.kernel
def fill_between(x, a, b, value: T.constexpr = 3.0):
    """TileLang's issue 1008: a region whose ends are known only at run time."""
    with T.Kernel(1, threads=128):
        T.fill(x[a:b], value)


def _run_time_regions(device):
    c = torch.ones(4, 40, dtype=torch.float16, device=device)
    clear_open_row(c, 1)                    # row 1 from 0 to its end
    x = torch.zeros(300, device=device)
    fill_between(x, 5, 290)
    y = torch.zeros(300, device=device)
    fill_between(y, 290, 5)                 # an end before the start: nothing
    z = torch.zeros(300, device=device)
    fill_between(z, 280, 1 << 40)           # past the tensor: clamped to it
    w = torch.zeros(300, device=device)
    fill_between(w, 5, -1)                  # a negative end: nothing (not "to the end")
    v = torch.zeros(300, device=device)
    fill_between(v, -20, 10)                # a negative start: from 0
    return c, x, y, z, w, v


def _check_run_time_regions(c, x, y, z, w, v):
    assert (c[1] == 0).all() and (c[[0, 2, 3]] == 1).all()
    assert (x[5:290] == 3).all() and (x[:5] == 0).all() and (x[290:] == 0).all()
    assert (y == 0).all() and (w == 0).all()
    assert (z[280:] == 3).all() and (z[:280] == 0).all()
    assert (v[:10] == 3).all() and (v[10:] == 0).all()


def test_a_region_of_run_time_extent_fills_from_its_start_to_its_end(ptxas):
    _check_run_time_regions(*_run_time_regions("cpu"))
    for arch in ("sm_80", "sm_90a"):
        ptx = fill_between.compile(np.zeros(300, np.float32), 5, 290, target="cuda",
                                   arch=arch).ptx
        ptxas(ptx, arch)


@pytest.mark.gpu
def test_a_region_of_run_time_extent_on_the_gpu():
    regions = _run_time_regions("cuda")
    torch.cuda.synchronize()
    _check_run_time_regions(*(r.cpu() for r in regions))


@tilejit.kernel
def fill_shared_parts(A):
    with T.Kernel(1, threads=32):
        S = T.alloc_shared((32, 32), T.float32)
        T.fill(S, 0.0)
        T.fill(S[0:16, :], 1.0)         # a region of a shared tile
        T.fill(S[20, 3], 2.0)           # one element (TileLang's T.fill(buf[i], v))
        T.copy(S, A[0, 0])


def _shared_parts_expected():
    e = np.zeros((32, 32), np.float32)
    e[:16] = 1.0
    e[20, 3] = 2.0
    return e


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_a_region_or_an_element_of_a_shared_tile(ptxas, arch):
    a = np.zeros((32, 32), np.float32)
    tilejit.kernel(fill_shared_parts.func, target="sim")(a)
    np.testing.assert_array_equal(a, _shared_parts_expected())
    ptxas(fill_shared_parts.compile(a, target="cuda", arch=arch).ptx, arch)


@pytest.mark.gpu
def test_a_region_or_an_element_of_a_shared_tile_on_the_gpu():
    a = torch.full((32, 32), 5.0, device="cuda")
    fill_shared_parts(a)
    np.testing.assert_array_equal(a.cpu().numpy(), _shared_parts_expected())


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_on_the_gpu(dtype):
    a = torch.zeros(3, 50, device="cuda", dtype=dtype)
    fill_all(a, value=float("inf"))
    b = torch.full((70, 45), -1.0, device="cuda", dtype=dtype)
    fill_blocks(b)
    c = torch.ones(4, 40, device="cuda", dtype=dtype)
    clear_row(c, 2)
    torch.cuda.synchronize()
    assert torch.isinf(a).all()
    b_sim = torch.zeros(70, 45, dtype=dtype)
    _sim(fill_blocks, b_sim)
    assert torch.equal(b.cpu(), b_sim)
    assert (c[2] == 0).all() and (c[[0, 1, 3]] == 1).all()


@tilejit.kernel
def fill_past_the_tile(A, r):
    with T.Kernel(1, threads=128):
        S = T.alloc_shared((32, 32), T.float32)
        S2 = T.alloc_shared((32, 32), T.float32)
        T.fill(S, 0.0)
        T.fill(S2, 0.0)
        T.fill(S[r:r + 16, :], 1.0)     # r = 24: rows 32…39 lie past S
        T.copy(S2, A[0, 0])


def test_a_shared_region_past_its_tile_is_reported_and_guarded(ptxas):
    a = np.full((32, 32), 5.0, np.float32)
    with pytest.raises(IndexError, match=r"T.fill: the region of shared tile S starting at "
                                         r"\(24, 0\) runs past its shape \(32, 32\)"):
        tilejit.kernel(fill_past_the_tile.func, target="sim")(a, 24)
    tilejit.kernel(fill_past_the_tile.func, target="sim")(a, 16)
    assert (a == 0).all()
    # on the GPU the part past the tile is skipped (a compare before each store)
    ptx = fill_past_the_tile.compile(a, 24, target="cuda", arch="sm_80").ptx
    ptxas(ptx, "sm_80")
