"""passes/wgmma_waits.py: a wgmma gemm's wait moves past the statements that do not need
it (FlashAttention's backward: dK's product beside the dQ product and its atomics), and
stays where anything could: the accumulator read, an operand written, another wgmma, a
barrier whose protected write would come before the wait."""
import ast
import os
import re
import sys
import textwrap
from types import SimpleNamespace

import numpy as np
import pytest

import tilejit.language as T
from tilejit.ir.plan import FRAGMENT, SHARED, Tile, TilePlan
from tilejit.passes.wgmma_waits import defer_wgmma_waits
from tilejit.target import Target

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(source, engines=None):
    """The pass over ``source`` (a device program) with tiles A, B (shared), C, D
    (fragments), S (shared) and gemms g0 (wgmma, A·B → C) and g1 (mma.sync, S·B → D)."""
    plan = TilePlan()
    for name, kind in (("A", SHARED), ("B", SHARED), ("S", SHARED), ("C", FRAGMENT),
                       ("D", FRAGMENT)):
        plan.tiles[name] = Tile(name, kind, (64, 64), None, 1)
    engines = engines or {"g0": "wgmma", "g1": "mma"}
    for gid, engine in engines.items():
        plan.gemms[gid] = (SimpleNamespace(engine=engine), None, None, None, 1)
    ctx = SimpleNamespace(plan=plan, target=Target.cuda("sm_90a"), namespace={"T": T})
    fdef = ast.parse(textwrap.dedent(source)).body[0]
    out = defer_wgmma_waits(fdef, ctx)
    return ast.unparse(out), plan.deferred_waits


def test_the_wait_moves_past_an_mma_gemm_and_atomics_to_the_end_of_the_loop():
    program, deferred = _run("""
        def k():
            for i in range(n):
                __tj_sync()
                __tj_gemm(A, B, C, 'g0')
                T.copy(D, S)
                __tj_sync()
                __tj_gemm(S, B, D, 'g1')
                T.atomic_add(G, D)
                r = i
            T.copy(C, G)
        """)
    assert deferred == {"g0"}
    body = program.splitlines()
    assert body[-2].strip() == "__tj_wgmma_wait('g0')"     # last in the loop body
    assert body[-1].strip() == "T.copy(C, G)"


@pytest.mark.parametrize("after", [
    "T.copy(C, S)",                   # reads the accumulator
    "T.copy(D, A)",                   # writes a shared operand
    "__tj_gemm(S, A, C, 'g1')",       # accumulates into it
    "__tj_gemm(A, B, D, 'g2')",       # another wgmma gemm
    "if x:\n                    y = 1",
    "__tj_mbar_arrive(bar)",          # a stage release: any other marker
])
def test_the_wait_stays_where_the_next_statement_could_need_it(after):
    program, deferred = _run(f"""
        def k():
            for i in range(n):
                __tj_sync()
                __tj_gemm(A, B, C, 'g0')
                {after}
                T.atomic_add(G, D)
        """, {"g0": "wgmma", "g1": "mma", "g2": "wgmma"})
    assert "g0" not in deferred and "__tj_wgmma_wait" not in program


def test_a_barrier_ends_the_window_unless_the_next_writes_come_after_another():
    # the loop's next iteration reaches a barrier only after naming A: the window ends
    # at the barrier inside it
    program, deferred = _run("""
        def k():
            for i in range(n):
                T.copy(G, A)
                __tj_sync()
                __tj_gemm(A, B, C, 'g0')
                T.copy(D, S)
                __tj_sync()
                __tj_gemm(S, B, D, 'g1')
        """)
    assert deferred == {"g0"}
    lines = [x.strip() for x in program.splitlines()]
    at = lines.index("__tj_wgmma_wait('g0')")
    assert lines[at - 1] == "T.copy(D, S)" and lines[at + 1] == "__tj_sync()"


def test_no_wait_moves_off_wgmma_targets():
    program, deferred = _run("""
        def k():
            __tj_gemm(A, B, C, 'g0')
            T.copy(D, S)
        """, {"g0": "mma"})
    assert not deferred and "__tj_wgmma_wait" not in program


def test_the_attention_backward_overlaps_dk_with_the_dq_product(tmp_path, monkeypatch, ptxas):
    """The example's 32 x 128 backward on sm_90a: dK's wgmma (g3) is committed, the dQ
    product's mma.sync instructions follow, then the wait; dV's (g1) waits at once."""
    sys.path.insert(0, os.path.join(ROOT, "examples", "flash_attention"))
    from flash_attn_bwd import flashattn_bwd
    monkeypatch.setenv("TILEJIT_DUMP_IR", str(tmp_path))
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    q = np.zeros((1, 256, 2, 128), np.float16)
    lse = np.zeros((1, 2, 256), np.float32)
    ptx = flashattn_bwd.compile(q, q, q, q, lse, lse, np.zeros(q.shape, np.float32), q, q,
                                block_M=32, block_N=128, threads=256, num_stages=2,
                                target="cuda", arch="sm_90a").ptx
    (directory,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    (after,) = [p for p in directory.iterdir() if p.name.endswith("defer_wgmma_waits.py")]
    assert "__tj_wgmma_wait('g3')" in after.read_text()
    assert "'g1')" in after.read_text() and "__tj_wgmma_wait('g1'" not in after.read_text()
    events = [m.group(0) for m in re.finditer(
        r"wgmma\.commit_group|wgmma\.wait_group|mma\.sync", ptx)]
    assert events.count("wgmma.commit_group") == events.count("wgmma.wait_group") == 4
    last_commit = len(events) - 1 - events[::-1].index("wgmma.commit_group")
    assert "mma.sync" in events[last_commit:]
    assert events[-1] == "wgmma.wait_group"
    ptxas(ptx, "sm_90a")


def test_a_gemm_at_two_sites_keeps_its_wait():
    """A pass that copies a statement list (a peeled iteration) leaves one gemm id at two
    sites: deferring it would mark both, and only one would get the wait."""
    program, deferred = _run("""
        def k():
            __tj_gemm(A, B, C, 'g0')
            T.copy(D, S)
            for i in range(n):
                __tj_gemm(A, B, C, 'g0')
                T.copy(D, S)
        """)
    assert not deferred and "__tj_wgmma_wait" not in program
