"""Warp specialization (passes/warp_specialize.py): on sm_90a a TMA pipeline feeding a
gemm on wgmma gets a producer warpgroup, full/empty mbarriers and setmaxnreg; elsewhere
the program stays one for all threads. The results on the device are checked by the
GPU tests of tests/language/test_gemm_wgmma.py and test_gemm.py (their pipelines are
warp-specialized on an H100/H200)."""
import re

import numpy as np
import pytest

from kernels import gemm


def _compiled(arch="sm_90a", threads=256, **kw):
    a = np.zeros((512, 512), np.float16)
    c = np.zeros((512, 512), np.float32)
    cfg = dict(block_M=128, block_N=256, block_K=64, threads=threads, stages=3)
    cfg.update(kw)
    return gemm.compile(a, a.copy(), c, target="cuda", arch=arch, **cfg).compiled


def test_a_wgmma_pipeline_gets_a_producer_warpgroup(ptxas):
    k = _compiled()
    ptx = k.ptx
    assert k.block_threads == 384
    assert ".maxntid 384" in ptx and ".minnctapersm 1" in ptx
    assert "setmaxnreg.dec.sync.aligned.u32 40;" in ptx
    assert "setmaxnreg.inc.sync.aligned.u32 232;" in ptx
    # S full mbarriers (two TMA arrivals each) and S empty ones (one per consumer warp)
    assert ptx.count("mbarrier.init.shared::cta.b64") == 6
    assert "mbarrier.arrive.shared::cta.b64" in ptx
    # one block barrier (after the mbarrier initialization); none in the K loop
    assert len(re.findall(r"bar\.sync\s+0;", ptx)) == 1
    report = ptxas(ptx, "sm_90a")
    assert "C7508" not in report and "setmaxnreg" not in report   # not ignored
    assert "0 bytes spill stores" in report


def test_consumer_barriers_are_named_and_count_the_consumers_only():
    ptx = _compiled(threads=128, block_M=64, block_N=128).ptx
    assert ".maxntid 256" in ptx
    assert "setmaxnreg.inc.sync.aligned.u32 240;" in ptx
    for m in re.findall(r"bar\.sync\s+(\d+)(?:,\s*(\d+))?;", ptx):
        assert m in (("0", ""), ("1", "128")), m


@pytest.mark.parametrize("arch,env", [("sm_90", {}), ("sm_90a", {"TILEJIT_WS": "0"}),
                                      ("sm_90a", {"TILEJIT_WGMMA": "0"})])
def test_no_specialization_without_wgmma_or_when_turned_off(arch, env, monkeypatch):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    k = _compiled(arch=arch)
    assert k.block_threads == 0 and "setmaxnreg" not in k.ptx and ".maxntid 256" in k.ptx
