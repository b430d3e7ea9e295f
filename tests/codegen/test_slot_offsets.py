"""The shared-memory offsets of a fragment's runs (lowering/slot_offsets.py) and the
synchronous global ↔ shared copy by round steps (copy._planned_chunks), issue 24's cold
compile: each run's offset is an anchor run's, XOR-ed and added with constants found at
compile time for every thread. The values are the layout's at every (run, thread); only
the instructions that compute them drop."""
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import tilejit
from kernels import staged_epilogue
from tilejit.ir.addressing import Const, Var, evaluate, layout_offset
from tilejit.layouts.swizzle import make_swizzled_layout
from tilejit.codegen.lowering.slot_offsets import ANCHOR, run_plan

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "flash_attention"))

TV, S = Var("t"), Var("s")


class _Indexing:
    """An mma accumulator's (thread, slot) → (row, col) over 4 warps: 16 rows a warp,
    pairs of columns, 8-column steps; ``slots`` per thread."""

    def __init__(self, cols):
        self.coords = ((TV // 4) % 8 + (S // 2) % 2 * 8 + TV // 32 * 16,
                       TV % 4 * 2 + S % 2 + S // 4 * 8)
        self.slots = cols // 8 * 4
        self.valid = None


class _Scrambled:
    """A shared layout with no structure across rows: row r at ``(r * r) % 61 · 256``."""

    def offset_expr(self, coords):
        r, c = coords
        return (r * r) % Const(61) * Const(256) + c


def _offsets(ix, layout, dims, firsts, threads):
    coords = [Const(start) if k is None else ix.coords[k] + start for k, start in dims]
    env = {"t": np.arange(threads)[None, :], "s": np.asarray(firsts)[:, None]}
    return np.broadcast_to(evaluate(layout_offset(layout, coords), env),
                           (len(firsts), threads))


def _rebuilt(plan, offsets):
    """Each run's offsets as the plan writes them: anchors as they are, the others
    (anchor ^ x) + y."""
    out = []
    for r, entry in enumerate(plan):
        if entry is ANCHOR:
            out.append(offsets[r])
        else:
            a, x, y = entry
            assert plan[a] is ANCHOR and a < r
            out.append((offsets[a] ^ x) + y)
    return np.stack(out)


@pytest.mark.parametrize("cols, dims, anchors", [(128, ((0, 0), (1, 0)), 1),
                                                 (64, ((0, 16), (1, 32)), 2)])
def test_an_accumulator_in_a_swizzled_tile_takes_few_anchors(cols, dims, anchors):
    """Every run of pairs of a 64-row accumulator in a 128-byte-swizzled fp16 tile is one
    base XOR-ed and moved by constants; in a region at (16, 32) of a bigger tile, whose
    columns cross from one swizzle atom into the next, two bases."""
    ix = _Indexing(cols)
    layout = make_swizzled_layout((96, 128), 2)
    firsts = tuple(range(0, ix.slots, 2))
    plan = run_plan(ix, 128, layout, dims, firsts)
    offsets = _offsets(ix, layout, dims, firsts, 128)
    np.testing.assert_array_equal(_rebuilt(plan, offsets), offsets)
    assert sum(entry is ANCHOR for entry in plan) == anchors, plan


def test_a_layout_without_structure_takes_more_anchors_and_the_same_offsets():
    ix = _Indexing(64)
    layout = _Scrambled()
    firsts = tuple(range(0, ix.slots, 2))
    plan = run_plan(ix, 128, layout, ((0, 0), (1, 0)), firsts)
    offsets = _offsets(ix, layout, ((0, 0), (1, 0)), firsts, 128)
    np.testing.assert_array_equal(_rebuilt(plan, offsets), offsets)
    assert sum(entry is ANCHOR for entry in plan) == 2, plan   # the two row halves


def _bases(ptx, instruction):
    """(count, distinct base registers) of ``instruction``'s shared addresses."""
    found = re.findall(instruction + r"\s+\[(%r\d+)(?:\+\d+)?\]", ptx)
    return len(found), set(found)


def test_flash_attention_stores_from_few_shared_bases(monkeypatch):
    """128x64, 4 consumer warps: the epilogue's 64 stores of acc_o's pairs into O_shared
    take a handful of base registers and immediate offsets (57 bases before), and the
    Q tile's 16 chunks per thread (both the interior and the edge path) one base."""
    from flash_attn import flashattn
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    q = np.zeros((1, 512, 2, 128), np.float16)
    c = flashattn.compile(q, q, q, q.copy(), block_M=128, block_N=64, threads=128,
                          num_stages=2, target="cuda", arch="sm_90a")
    count, bases = _bases(c.ptx, r"st\.shared\.b32")
    assert count == 64 and len(bases) <= 8, (count, sorted(bases))
    count, bases = _bases(c.ptx, r"st\.shared\.v4\.b32")
    assert count == 32 and len(bases) == 1, (count, sorted(bases))


def _inputs(M, N, K, device="cpu"):
    g = torch.Generator().manual_seed(3)
    a = torch.randn(M, K, generator=g).half()
    b = torch.randn(K, N, generator=g).half()
    c = torch.full((M, N), 7.0).half()
    return a.to(device), b.to(device), c.to(device), c.clone().to(device)


def _check(a, b, c, f):
    ref = a.double().cpu() @ b.double().cpu()
    for out in (c, f):
        np.testing.assert_allclose(out.double().cpu().numpy(), ref.numpy(), rtol=2e-3,
                                   atol=2e-2)


def test_staged_epilogue_in_simulation():
    a, b, c, f = _inputs(100, 130, 96)
    tilejit.kernel(staged_epilogue.func, target="sim")(a, b, c, f)
    _check(a, b, c, f)


@pytest.mark.gpu
@pytest.mark.parametrize("M, N, K", [(128, 128, 64), (100, 130, 96)])
def test_staged_epilogue_on_gpu(M, N, K):
    """The GPU against float64 and against the simulator: tiles inside the tensors and
    tiles across their edges, through a region of a shared tile. The two ways out
    of the shared region give the same bits; the simulator's products round at other
    places than the tensor cores' (1 ulp of float16 at 11 of 16,384 elements, H200)."""
    a, b, c, f = _inputs(M, N, K, "cuda")
    staged_epilogue(a, b, c, f)
    torch.cuda.synchronize()
    _check(a, b, c, f)
    np.testing.assert_array_equal(f.cpu().numpy(), c.cpu().numpy())
    sa, sb, sc, sf = _inputs(M, N, K)
    tilejit.kernel(staged_epilogue.func, target="sim")(sa, sb, sc, sf)
    np.testing.assert_allclose(c.cpu().double().numpy(), sc.double().numpy(), rtol=2e-3,
                               atol=2e-3)
