"""A T.Parallel's indices in the simulator are open-mesh arrays (``np.indices(...,
sparse=True)``: the row index of shape (M, 1), the column index (1, N)), so an expression
of some of them is computed over those only. What the loop's iterations do must not
depend on it: a write that several iterations make to one element is still a race, an
atomic that several iterations make to one element still adds every value, and a
T.Parallel whose statements reach one element from different iterations is found
whether the index names every loop axis, some of them, or gathers through a tensor."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.sim.races import RaceError, one_to_one


def test_one_to_one_reads_the_shapes_of_open_mesh_indices():
    rows, cols = np.indices((4, 8), sparse=True)
    assert one_to_one((rows, cols), (4, 8))
    assert one_to_one((rows * 2 + 1, 7 - cols), (4, 8))     # each strictly along its axis
    assert one_to_one((np.array([[3], [0], [2], [1]]), cols), (4, 8))   # a gather
    assert one_to_one((5, rows, cols), (4, 8))              # a fixed index
    assert not one_to_one((rows, cols // 2), (4, 8))         # two columns, one element
    assert not one_to_one((rows, 0), (4, 8))                 # the columns not indexed
    assert not one_to_one((rows + cols,), (4, 8))            # one index, both axes
    assert not one_to_one((cols, cols), (4, 8))              # one axis twice
    assert not one_to_one((np.array([[1], [0], [1], [2]]), cols), (4, 8))   # a repeat
    assert not one_to_one(np.broadcast_arrays(rows, cols), (4, 8))  # a broadcast view
    assert one_to_one((rows[:, 0],), (4,))
    assert not one_to_one((rows, cols), (2, 4, 8))           # an outer axis not indexed


@tilejit.kernel
def spread(A, Idx, Out, S_out, form: T.constexpr):
    M, N = A.shape
    with T.Kernel(1, threads=128):
        S = T.alloc_shared((M, N), "float32")
        for i, j in T.Parallel(M, N):
            S[i, j] = 0.0
        for i, j in T.Parallel(M, N):
            if form == 0:
                S[Idx[i], j] = A[i, j]              # a gather of rows
            elif form == 1:
                S[i, j // 2] = A[i, j]              # two iterations, one element
            elif form == 2:
                S[i, 0] = A[i, j]                   # every column's iteration, one element
            else:
                T.atomic_add(Out[Idx[i], j], A[i, j])   # repeated rows add up
        for i, j in T.Parallel(M, N):
            S_out[i, j] = S[i, j]


def _inputs(idx):
    a = np.arange(4 * 8, dtype=np.float32).reshape(4, 8) + 1
    return a, np.array(idx, np.int32), np.zeros((4, 8), np.float32), \
        np.zeros((4, 8), np.float32)


def test_a_gather_of_distinct_rows_writes_each_row_once():
    a, idx, out, s = _inputs([2, 0, 3, 1])
    spread(a, idx, out, s, 0)
    expected = np.zeros_like(a)
    expected[idx] = a
    np.testing.assert_array_equal(s, expected)


@pytest.mark.parametrize("form, element", [(1, r"S\[0, 0\]"), (2, r"S\[0, 0\]")])
def test_iterations_writing_one_element_race(form, element):
    a, idx, out, s = _inputs([0, 1, 2, 3])
    with pytest.raises(RaceError, match=rf"race on shared tile {element}: an iteration of "
                                        rf"a T.Parallel loop writes it"):
        spread(a, idx, out, s, form)


def test_a_gather_with_a_repeated_row_races():
    a, idx, out, s = _inputs([1, 0, 1, 2])
    with pytest.raises(RaceError, match=r"race on shared tile S\[1, 0\]"):
        spread(a, idx, out, s, 0)


@pytest.mark.parametrize("idx", [[2, 0, 3, 1], [1, 1, 3, 1]])
def test_atomics_to_gathered_rows_add_every_value(idx):
    a, idx, out, s = _inputs(idx)
    spread(a, idx, out, s, 3)
    expected = np.zeros_like(a)
    np.add.at(expected, idx, a)
    np.testing.assert_array_equal(out, expected)


@pytest.mark.gpu
@pytest.mark.parametrize("idx", [[2, 0, 3, 1], [1, 1, 3, 1]])
def test_gathers_and_atomics_on_the_gpu(idx):
    """The race-free forms on the GPU, against the simulator and numpy."""
    import torch
    forms = (0, 3) if len(set(idx)) == 4 else (3,)
    for form in forms:
        a, i, out, s = _inputs(idx)
        spread(a, i, out, s, form)
        ta, ti = torch.from_numpy(a).cuda(), torch.from_numpy(i).cuda()
        tout, ts = torch.zeros(4, 8).cuda(), torch.zeros(4, 8).cuda()
        spread(ta, ti, tout, ts, form)
        torch.cuda.synchronize()
        np.testing.assert_array_equal(tout.cpu().numpy(), out)
        np.testing.assert_array_equal(ts.cpu().numpy(), s)


@tilejit.kernel
def one_element_per_thread_values(A, B, same: T.constexpr):
    with T.Kernel(1, threads=128):
        tx = T.get_thread_binding()
        s = T.alloc_shared((4,), "float32")
        if same:
            s[0] = A[0]             # every thread the same value: a flag
        else:
            s[0] = A[tx]            # every thread its own value, one element
        T.sync_threads()
        if tx == 0:
            B[0] = s[0]


def test_threads_storing_their_own_values_to_one_element_race():
    """The index is the same in every thread, the value is not: the store's value counts
    in the access's shape (a review found the race missed when only the indices'
    shapes were looked at)."""
    a = np.arange(128, dtype=np.float32) + 1
    b = np.zeros(1, np.float32)
    one_element_per_thread_values(a, b, True)
    assert b[0] == 1
    with pytest.raises(RaceError, match=r"race on shared tile s\[0\]: a thread writes it and "
                                        r"it is written by another thread"):
        one_element_per_thread_values(a, b, False)
