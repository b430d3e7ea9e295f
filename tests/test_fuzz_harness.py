"""benchmarks/fuzz_gpu_sim.py, the GPU ≡ simulator differential fuzzer, in its
simulator-only mode: the shape generator keeps every kernel's dimensions consistent, the
cases replay from their seeds, and the run's JSON counts them. (On the GPU the same
script compares each case's outputs with the simulator's.)"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import fuzz_gpu_sim  # noqa: E402


def test_every_kernel_has_consistent_shapes():
    seen = set()
    for name, kernel, _seed, args, _constexprs, sizes in fuzz_gpu_sim.cases(2, seed=7):
        seen.add(name)
        assert len(args) == len(kernel.source.params[:len(args)])
        for spec, dims in zip(args, fuzz_gpu_sim.DIMS[name]):
            if dims is not None:
                assert spec[0] == tuple(sizes[d] for d in dims)
    assert seen == set(fuzz_gpu_sim.DIMS)


def test_a_case_replays_from_its_seed():
    first = list(fuzz_gpu_sim.cases(1, seed=3, only=["gemm.matmul"]))
    again = list(fuzz_gpu_sim.cases(1, seed=3, only=["gemm.matmul"]))
    assert [c[3] for c in first] == [c[3] for c in again]
    other = list(fuzz_gpu_sim.cases(1, seed=4, only=["gemm.matmul"]))
    assert [c[3] for c in first] != [c[3] for c in other]


def test_the_simulator_only_run(tmp_path):
    out = tmp_path / "fuzz.json"
    rc = fuzz_gpu_sim.main(["--sim-only", "--cases", "1", "--only", "vector_add", "row_sum",
                            "splitk", "--json", str(out)])
    assert rc == 0
    data = json.loads(out.read_text())
    assert data["totals"] == {"sim ok": 5} and data["meta"]["sim only"]
    assert all(c["seed"] for c in data["cases"])
