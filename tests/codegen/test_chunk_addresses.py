"""The addresses of a global → shared cp.async copy (lowering/chunk_addresses.py): each
thread's chunks are one shared base plus constants and one global pointer advanced by
one step, found from the layout and checked for every thread; where that does not hold
the per-chunk computation stays. The GPU tests of T.gemm, T.Pipelined and FlashAttention
check the values these addresses move."""
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import tilejit
from kernels import shifted_copy
from tilejit.layouts.layout import Layout
from tilejit.layouts.swizzle import make_swizzled_layout
from tilejit.codegen.lowering.chunk_addresses import round_plan

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "flash_attention"))


@pytest.mark.parametrize("rows, cols, threads", [(64, 128, 128), (128, 64, 256),
                                                 (128, 32, 128), (32, 128, 128)])
def test_swizzled_tile_rounds_are_a_row_step_and_a_constant(rows, cols, threads):
    layout = make_swizzled_layout((rows, cols), 2)
    plan = round_plan(layout, (rows, cols), 8, threads, ((0, 0), (1, 0)))
    step = threads * 8 // cols
    n_rounds = rows * cols // 8 // threads
    assert plan is not None and len(plan) == n_rounds - 1
    for r, (delta, offset) in enumerate(plan, start=1):
        assert delta == (r * step, 0)
        # the constant is the layout's own offset difference, for every thread
        for t in range(threads):
            row, col = divmod(t * 8, cols)
            assert layout(row + r * step, col) - layout(row, col) == offset


def test_no_plan_where_threads_do_not_cover_whole_rows():
    # 3 chunks per row: thread t's second chunk is not the same column of another row
    layout = Layout((64, 24), (24, 1))
    assert round_plan(layout, (64, 24), 8, 128, ((0, 0), (1, 0))) is None


def test_no_plan_for_a_single_round():
    layout = make_swizzled_layout((16, 64), 2)
    assert round_plan(layout, (16, 64), 8, 128, ((0, 0), (1, 0))) is None


def _cp_async_bases(ptx):
    """(number of unconditional 16-byte cp.async, the distinct shared base registers
    they use)."""
    found = re.findall(r"cp\.async\.cg\.shared\.global \[(%r\d+)(?:\+\d+)?\], "
                       r"\[%rd\d+\], 16, 16;", ptx)
    return len(found), set(found)


def test_flash_attention_refill_takes_one_shared_base_per_copy(monkeypatch):
    """128x64 with 4 warps: each thread copies 8 chunks of K and 8 of V per stage. The
    chunks of one copy share a base register and differ by immediates; with one address
    per chunk (before) the refill's addresses held ~48 registers and the kernel spilled."""
    import tilejit
    from flash_attn import flashattn
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    monkeypatch.setenv("TILEJIT_TMA", "0")        # the cp.async path (sm_90 takes TMA's)
    q = np.zeros((1, 512, 2, 128), np.float16)
    c = tilejit.kernel(flashattn.func, fast_math=True).compile(
        q, q, q, q, block_M=128, block_N=64, threads=128, num_stages=2, target="cuda",
        arch="sm_90a")
    count, bases = _cp_async_bases(c.ptx)
    assert count >= 32, count          # K and V, 8 chunks each, prologue and loop
    assert len(bases) <= count // 4, (count, sorted(bases))


def _shifted_reference(a, shift):
    ref = np.zeros_like(a)
    ref[shift:, shift:] = a[:-shift, :-shift]
    return ref


def test_copy_from_before_the_tensor_start_reads_zeros_in_simulation():
    a = np.arange(100 * 200, dtype=np.float32).reshape(100, 200).astype(np.float16)
    out = np.full_like(a, 7)
    tilejit.kernel(shifted_copy.func, target="sim")(a, out)
    np.testing.assert_array_equal(out, _shifted_reference(a, 32))


@pytest.mark.gpu
def test_copy_from_before_the_tensor_start_reads_zeros_on_gpu():
    """cp.async's edge path: a negative column start is outside the tensor (zero-filled),
    not a full chunk read from before it or from the previous row."""
    import torch
    a = torch.arange(100 * 200, dtype=torch.float32).reshape(100, 200).half()
    out = torch.full_like(a, 7).cuda()
    shifted_copy(a.cuda(), out)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), _shifted_reference(a.numpy(), 32))
