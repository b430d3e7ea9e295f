"""A shared tile's ``T.Layout`` may be injective without being onto (TileLang issue
2632): ``lambda i: i * 2`` or ``i + 10`` grow the tile's storage to the indices they
reach; a many-to-one map is a ValueError naming the buffer and the two indices, on both
targets (language/layout.py, passes/user_layouts.py, ir/plan.Tile.nbytes)."""
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T
from tilejit.tilelang.layout import Layout

N = 128
INJECTIVE = {"identity": lambda i: i, "xor-pair-swap": lambda i: i ^ 1,
             "grow-i-times-2": lambda i: i * 2, "grow-i-plus-10": lambda i: i + 10}
MANY_TO_ONE = {"mod64": lambda i: i % 64, "zero": lambda i: i * 0,
               "mod64-times4": lambda i: (i % 64) * 4}
REJECTED = (r"shared buffer `s`.*must be injective: indices \[\d+\] and \[\d+\] both map "
            r"to physical coordinates")


def roundtrip(fwd):
    @T.prim_func
    def main(A: T.Tensor((N,), "int32"), Out: T.Tensor((N,), "int32")):
        with T.Kernel(1, threads=N):
            s = T.alloc_shared((N,), "int32")
            T.annotate_layout({s: Layout((N,), fwd)})
            for i in T.Parallel(N):
                s[i] = A[i]
            for i in T.Parallel(N):
                Out[i] = s[N - 1 - i]
    return main


@pytest.mark.parametrize("name", sorted(INJECTIVE))
def test_simulator_and_ptx(name, ptxas, tmp_path, monkeypatch):
    a = torch.arange(N, dtype=torch.int32) * 3
    out = tilelang.compile(roundtrip(INJECTIVE[name]), out_idx=[1], target="sim")(a)
    assert torch.equal(out, a.flip(0))
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    monkeypatch.setenv("TILEJIT_DUMP_IR", str(tmp_path))
    ptxas(tilelang.compile(roundtrip(INJECTIVE[name]), out_idx=[1]).get_kernel_source(
        arch="sm_90a"), "sm_90a")
    # the GPU compilation's dump (tilejit.compile compiled for the simulator too)
    (plan,) = [p for p in tmp_path.glob("*/*tile_plan.txt")
              if any(p.parent.glob("*kernel.ptx"))]
    reach = max(INJECTIVE[name](i) for i in range(N)) + 1
    shared = int(plan.read_text().split("dynamic shared memory: ")[1].split()[0])
    assert shared >= 4 * reach, plan.read_text()


@pytest.mark.parametrize("name", sorted(MANY_TO_ONE))
def test_many_to_one_is_a_value_error_on_both_targets(name):
    with pytest.raises(ValueError, match=REJECTED):
        tilelang.compile(roundtrip(MANY_TO_ONE[name]), out_idx=[1]).get_kernel_source(
            arch="sm_90a")
    with pytest.raises(ValueError, match=REJECTED):
        tilelang.compile(roundtrip(MANY_TO_ONE[name]), out_idx=[1], target="sim")(
            torch.zeros(N, dtype=torch.int32))


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(INJECTIVE))
def test_gpu_matches_simulator(name):
    a = torch.arange(N, dtype=torch.int32) * 3
    program = roundtrip(INJECTIVE[name])
    out = tilelang.compile(program, out_idx=[1])(a.cuda())
    assert torch.equal(out.cpu(), a.flip(0))
