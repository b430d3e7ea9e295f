"""``ir/digits.reshape_layout``, the layout of a fragment's ``T.reshape``, by its defining
property at every (thread, slot): the view holds, where the fragment holds the element of
flat index f, the element of flat index f; splits the digits cannot follow raise
``ReshapeError``."""
import numpy as np
import pytest

from tilejit.ir.addressing import evaluate
from tilejit.ir.digits import ReshapeError, digit_layout, reshape_layout
from tilejit.ir.gemm_plan import plan_gemm
from tilejit.layouts import parallel_fragment


def _flat(layout):
    t, s = np.meshgrid(np.arange(layout.threads), np.arange(layout.slots), indexing="ij")
    out = np.zeros_like(t)
    for c, n in zip(layout.coords(), layout.shape):
        out = out * n + np.broadcast_to(evaluate(c, {"t": t, "s": s}), t.shape)
    return out


@pytest.mark.parametrize("shape, threads, vec, new", [
    ((16, 64), 128, 4, (16, 8, 8)),
    ((16, 64), 128, 4, (1024,)),
    ((16, 8, 8), 128, 4, (16, 64)),
    ((16, 64), 128, 4, (16, 4, 16)),
    ((16, 64), 128, 4, (16, 32, 2)),
    ((16, 64), 128, 4, (32, 32)),
    ((16, 64), 128, 4, (2, 8, 64)),
    ((8, 4, 32), 128, 4, (8, 128)),
    ((32, 96), 16, 2, (32, 3, 32)),
])
def test_a_reshape_keeps_every_element_in_its_thread_and_slot(shape, threads, vec, new):
    base = digit_layout(parallel_fragment(shape, threads, vec))
    view = reshape_layout(base, new)
    assert view.shape == new and (view.threads, view.slots) == (base.threads, base.slots)
    np.testing.assert_array_equal(_flat(view), _flat(base))
    np.testing.assert_array_equal(_flat(reshape_layout(view, shape)), _flat(base))


def test_an_mma_accumulator_splits_at_its_powers_of_two():
    acc = digit_layout(plan_gemm(64, 64, 32, ("float16", "float16", "float32"),
                                 threads=128).c_fragment())
    for new in ((64, 4, 16), (64, 16, 4), (64, 32, 2), (4096,), (8, 8, 64)):
        np.testing.assert_array_equal(_flat(reshape_layout(acc, new)), _flat(acc))


def test_a_cut_inside_a_digit_raises():
    base = digit_layout(parallel_fragment((6,), 2, 1))      # t mod 2, then 3 slots
    with pytest.raises(ReshapeError, match=r"a run of 3 elements 2 apart in the flat order, "
                                           r"held by one thread's consecutive registers, is "
                                           r"cut at flat element 3"):
        reshape_layout(base, (2, 3))
    with pytest.raises(ReshapeError, match=r"holds 8 elements"):
        reshape_layout(base, (2, 4))
