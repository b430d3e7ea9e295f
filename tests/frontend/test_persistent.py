"""T.Persistent and T.PersistentTileScheduler (frontend/persistent.py): the decode is a
bijection of the tiles onto the domain, every tile is taken by exactly one block in the
simulated kernel (whose device program the GPU's typing also checks first), a pipelined
loop inside a persistent loop compiles for sm_80 and sm_90a, and misuse is a
CompileError at the line."""
import itertools

import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError
from tilejit.language.hopper import persistent_coord, scheduler_coord

DOMAINS = [(1, 1), (1, 7), (7, 1), (3, 5), (9, 10), (17, 4), (8, 8), (13, 3)]
GROUPS = [1, 2, 3, 8, 20]


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("group", GROUPS)
def test_the_decode_is_a_bijection_onto_the_domain(domain, group):
    total = domain[0] * domain[1]
    coords = [persistent_coord(t, domain, group) for t in range(total)]
    assert sorted(coords) == sorted(itertools.product(range(domain[0]), range(domain[1])))


def test_the_decode_walks_panels_of_group_rows_first_coordinate_fastest():
    order = [persistent_coord(t, (5, 3), 2) for t in range(15)]
    assert order[:6] == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]
    assert order[12:] == [(4, 0), (4, 1), (4, 2)]       # the last panel: one row


@pytest.mark.parametrize("domain,wave", [((9, 10), 7), ((3, 5), 132), ((17, 4), 4),
                                         ((11,), 3)])
def test_the_blocks_of_a_wave_take_every_tile_once(domain, wave):
    seen = [c for index in range(wave) for c in T.Persistent(list(domain), wave, index, 3)]
    expected = (list(range(domain[0])) if len(domain) == 1
                else list(itertools.product(range(domain[0]), range(domain[1]))))
    assert sorted(seen) == expected


@pytest.mark.parametrize("primary,secondary,swizzle", [(5, 7, 3), (4, 4, 1), (1, 9, 8),
                                                        (6, 2, 4)])
@pytest.mark.parametrize("column_major", [True, False])
def test_the_schedulers_decode_is_a_bijection(primary, secondary, swizzle, column_major):
    coords = [scheduler_coord(t, primary, secondary, swizzle, column_major)
              for t in range(primary * secondary)]
    m, n = (primary, secondary) if column_major else (secondary, primary)
    assert sorted(coords) == sorted(itertools.product(range(m), range(n)))


@pytest.mark.parametrize("domain,workers,group", [((9, 10), 7, 8), ((3, 5), 16, 2),
                                                  ((13, 3), 4, 3), ((1, 1), 1, 8)])
def test_each_tile_is_visited_by_exactly_one_block(domain, workers, group):
    owner = np.full(domain, -1, np.int32)
    count = np.zeros(domain, np.int32)
    persistent_owner_2d(owner, count, workers, group)
    np.testing.assert_array_equal(count, 32)        # each of the visiting block's threads
    expected = np.full(domain, -1, np.int32)
    for index in range(workers):
        for bx, by in T.Persistent(list(domain), workers, index, group):
            expected[bx, by] = index
    np.testing.assert_array_equal(owner, expected)


@tilejit.kernel
def persistent_owner_2d(Owner, Count, workers: T.constexpr, group: T.constexpr):
    D0, D1 = Owner.shape
    with T.Kernel(workers, threads=32) as block_id:
        for bx, by in T.Persistent([D0, D1], workers, block_id, group_size=group):
            Owner[bx, by] = block_id
            T.atomic_add(Count[bx, by], 1)


@tilejit.kernel
def persistent_1d(Owner, workers, group):
    with T.Kernel(workers, threads=32) as block_id:
        for t in T.Persistent([Owner.shape[0]], workers, block_id, group):
            Owner[t] = block_id


@tilejit.kernel
def persistent_owner_3d(Owner, workers: T.constexpr):
    D0, D1, D2 = Owner.shape
    with T.Kernel(workers, threads=1) as block_id:
        for i, j, k in T.Persistent([D0, D1, D2], workers, block_id):
            Owner[i, j, k] += block_id + 1


@pytest.mark.parametrize("domain,workers", [((3, 5, 7), 4), ((2, 1, 9), 132),
                                            ((4, 3, 2, 5), 7)])
def test_a_domain_of_three_or_more_extents(domain, workers, ptxas):
    """TileLang's issue 2433: every tile of a 3-d domain once, owned as the Python
    generator decodes it."""
    if len(domain) == 4:
        seen = [c for index in range(workers) for c in T.Persistent(list(domain), workers,
                                                                    index)]
        assert sorted(seen) == list(itertools.product(*map(range, domain)))
        return
    owner = np.zeros(domain, np.int32)
    persistent_owner_3d(owner, workers)
    expected = np.zeros(domain, np.int32)
    for index in range(workers):
        for c in T.Persistent(list(domain), workers, index):
            expected[c] += index + 1
    np.testing.assert_array_equal(owner, expected)
    assert (owner > 0).all()
    ptxas(persistent_owner_3d.compile(owner, workers, target="cuda", arch="sm_90a").ptx,
          "sm_90a")


def test_a_one_extent_domain_and_run_time_wave_and_group():
    owner = np.full(23, -1, np.int32)
    persistent_1d(owner, 5, 3)
    np.testing.assert_array_equal(owner, np.arange(23) % 5)


def test_a_pipelined_loop_inside_a_persistent_loop_compiles(ptxas):
    from matmul_persistent_seed000 import matmul_persistent
    kernel = matmul_persistent(1000, 1512, 512, 128, 128, 32, 128, 3)
    a = np.zeros((1000, 512), np.float16)
    b = np.zeros((512, 1512), np.float16)
    c = np.zeros((1000, 1512), np.float16)
    for arch, copy in (("sm_80", "cp.async.cg"), ("sm_90a", "cp.async.bulk.tensor")):
        ptx = kernel.kernel.compile(a, b, c, target="cuda", arch=arch).ptx
        assert "mma" in ptx and copy in ptx
        assert "spill" not in ptxas(ptx, arch).replace("0 bytes spill", "")


@tilejit.kernel
def scheduled_owner(Owner, Count, Iter, swizzle: T.constexpr, column_major: T.constexpr,
                    workers: T.constexpr):
    D0, D1 = Owner.shape
    with T.Kernel(workers, threads=32) as block_id:
        sched = T.PersistentTileScheduler("sched", D0, D1, swizzle_size=swizzle,
                                          column_major=True)
        sched.init(block_id)
        while sched.valid():
            bx, by = sched.m_idx[0], sched.n_idx[0]
            Owner[bx, by] = block_id
            Iter[bx, by] = sched.current_iter[0]
            T.atomic_add(Count[bx, by], 1)
            sched.next_tile()


@tilejit.kernel
def scheduled_coord(Owner, workers: T.constexpr):
    D0, D1 = Owner.shape
    with T.Kernel(workers, threads=32) as block_id:
        sched = T.PersistentTileScheduler("s", D0, D1, num_workers=workers, swizzle_size=2,
                                          column_major=False, stateful=False)
        for w in range(T.ceildiv(D0 * D1, workers)):
            m, n = sched.coord(w * workers + block_id)
            if m < D0 and n < D1:
                Owner[m, n] = block_id


@pytest.mark.parametrize("domain,swizzle,workers", [((9, 10), 3, 7), ((4, 6), 1, 5),
                                                    ((5, 5), 8, 32)])
def test_the_scheduler_visits_each_tile_once_with_the_grid_as_its_workers(domain, swizzle,
                                                                          workers):
    owner = np.full(domain, -1, np.int32)
    count = np.zeros(domain, np.int32)
    it = np.full(domain, -1, np.int32)
    scheduled_owner(owner, count, it, swizzle, True, workers)
    np.testing.assert_array_equal(count, 32)        # each of the visiting block's threads
    for index in range(workers):
        sched = T.PersistentTileScheduler("s", *domain, num_workers=workers,
                                          swizzle_size=swizzle)
        sched.init(index)
        while sched.valid():
            assert owner[sched.m_idx[0], sched.n_idx[0]] == index
            assert it[sched.m_idx[0], sched.n_idx[0]] == sched.current_iter[0]
            sched.next_tile()


def test_the_schedulers_coord_row_major():
    owner = np.full((5, 7), -1, np.int32)
    scheduled_coord(owner, 4)
    sched = T.PersistentTileScheduler("s", 5, 7, num_workers=4, swizzle_size=2,
                                      column_major=False)
    for t in range(35):
        assert owner[sched.coord(t)] == t % 4


def test_the_scheduler_compiles_for_the_gpu():
    a = np.zeros((9, 10), np.int32)
    ptx = scheduled_owner.compile(a, a, a, 3, True, 8, target="cuda", arch="sm_80").ptx
    assert "%nctaid.x" in ptx           # the default workers: the grid's x extent


# -- TileLang's current form: no name prefix, properties, next_tile(step) -------------

@tilejit.kernel
def scheduled_owner_now(Owner, Iter, workers: T.constexpr):
    D0, D1 = Owner.shape
    with T.Kernel(workers, threads=32) as block_id:
        sched = T.PersistentTileScheduler(D0, D1, swizzle_size=2, name="sched")
        sched.init(block_id)
        while sched.valid():
            Owner[sched.m_idx, sched.n_idx] = block_id
            Iter[sched.m_idx, sched.n_idx] = sched.current_iter
            sched.next_tile(workers)


@tilejit.kernel
def stateless_now(Owner, workers: T.constexpr):
    """TileLang's stateless form with num_workers positional: read once as the earlier
    form's (prefix, m, n), it walked a 4×7 domain as 7×workers, leaving tiles unwritten."""
    D0, D1 = Owner.shape
    with T.Kernel(workers, threads=32) as block_id:
        sched = T.PersistentTileScheduler(D0, D1, workers, stateful=False)
        for w in range(T.ceildiv(D0 * D1, workers)):
            m, n = sched.coord(workers * w + block_id)
            if m < D0 and n < D1:
                Owner[m, n] = block_id


def test_tilelangs_current_form_visits_each_tile_once():
    owner = np.full((9, 10), -1, np.int32)
    it = np.full((9, 10), -1, np.int32)
    scheduled_owner_now(owner, it, 7)
    sched = T.PersistentTileScheduler(9, 10, 7, swizzle_size=2)
    for index in range(7):
        sched.init(index)
        while sched.valid():
            assert owner[sched.m_idx, sched.n_idx] == index
            assert it[sched.m_idx, sched.n_idx] == sched.current_iter
            sched.next_tile()
    assert (owner >= 0).all()
    owner = np.full((4, 7), -1, np.int32)
    stateless_now(owner, 3)
    np.testing.assert_array_equal(owner.reshape(-1, order="F"), np.arange(28) % 3)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_tilelangs_current_form_compiles(arch, ptxas):
    a = np.zeros((9, 10), np.int32)
    ptxas(scheduled_owner_now.compile(a, a, 7, target="cuda", arch=arch).ptx, arch)
    ptxas(stateless_now.compile(a, 3, target="cuda", arch=arch).ptx, arch)


@pytest.mark.gpu
def test_tilelangs_current_form_on_the_gpu_matches_the_simulator():
    import torch
    owner, it = np.full((9, 10), -1, np.int32), np.full((9, 10), -1, np.int32)
    scheduled_owner_now(owner, it, 7)
    dev_owner = torch.full((9, 10), -1, dtype=torch.int32, device="cuda")
    dev_it = torch.full((9, 10), -1, dtype=torch.int32, device="cuda")
    scheduled_owner_now(dev_owner, dev_it, 7)
    np.testing.assert_array_equal(dev_owner.cpu().numpy(), owner)
    np.testing.assert_array_equal(dev_it.cpu().numpy(), it)


# -- misuse ---------------------------------------------------------------------------

@tilejit.kernel
def bad_domain(Owner):
    with T.Kernel(4, threads=32) as block_id:
        domain = (2, 2)
        for bx, by in T.Persistent(domain, 4, block_id):
            Owner[bx, by] = 1


@tilejit.kernel
def bad_wave(Owner):
    with T.Kernel(4, threads=32) as block_id:
        for bx, by in T.Persistent([2, 2], 0, block_id):
            Owner[bx, by] = 1


@tilejit.kernel
def persistent_not_in_for(Owner):
    with T.Kernel(4, threads=32) as block_id:
        tiles = T.Persistent([2, 2], 4, block_id)
        Owner[0, 0] = 1


@tilejit.kernel
def scheduler_as_value(Owner):
    with T.Kernel(4, threads=32) as block_id:
        sched = T.PersistentTileScheduler("s", 2, 2)
        Owner[0, 0] = sched.total


@pytest.mark.parametrize("kernel,message,line", [
    (bad_domain, r"T.Persistent: domain must be a list of extents written in the "
                 r"call \(\[m_blocks, n_blocks\]\), got `domain`",
     "for bx, by in T.Persistent(domain, 4, block_id):"),
    (bad_wave, r"T.Persistent: wave_size must be a positive int, got 0",
     "for bx, by in T.Persistent([2, 2], 0, block_id):"),
    (persistent_not_in_for, r"only meaningful as the iterable of a `for` loop",
     "tiles = T.Persistent([2, 2], 4, block_id)"),
    (scheduler_as_value, r"sched.total\(...\)|offers init|not as a value",
     "Owner[0, 0] = sched.total"),
])
def test_misuse_is_a_compile_error_at_its_line(kernel, message, line):
    with pytest.raises(CompileError, match=message) as info:
        kernel(np.zeros((2, 2), np.int32))
    assert line in str(info.value) and __file__ in str(info.value)


@tilejit.kernel
def persistent_out_of_bounds(Owner):
    with T.Kernel(3, threads=32) as block_id:
        for bx, by in T.Persistent([4, 2], 3, block_id):
            Owner[bx + 3, by] = block_id        # out of bounds for bx >= 1


def test_the_body_keeps_its_lines():
    with pytest.raises(IndexError, match=r"Owner\[6, 0\] is out of bounds") as info:
        persistent_out_of_bounds(np.zeros((4, 2), np.int32))
    line = next(n for n, src in enumerate(open(__file__), 1) if "# out of bounds for bx" in src)
    assert f'File "{__file__}", line {line}' in str(info.value)


@pytest.mark.gpu
def test_a_three_extent_domain_on_the_gpu_matches_the_simulator():
    import torch
    owner = np.zeros((5, 6, 7), np.int32)
    persistent_owner_3d(owner, 11)
    dev = torch.zeros((5, 6, 7), dtype=torch.int32, device="cuda")
    persistent_owner_3d(dev, 11)
    np.testing.assert_array_equal(dev.cpu().numpy(), owner)
