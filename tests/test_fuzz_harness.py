"""benchmarks/fuzz_gpu_sim.py, the GPU ≡ simulator ≡ torch differential fuzzer, where CI
runs it (no GPU): every example kernel and every seed program (tests/programs/) is a
target or excluded with its reason; each case's dtype, configuration and sizes come from
the kernel's valid set and replay from the case's seed; the kernels the first version left
out (varlen, the backward, float8, multicast, the seed programs) run in simulation
against their float64 references; and a wrong reference, or a GPU that disagrees with the
simulator (a stand-in here), is reported as a mismatch."""
import glob
import importlib
import json
import math
import os
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import fuzz_gpu_sim as fz  # noqa: E402
from tilejit.runtime.kernel import KernelFunction  # noqa: E402


def _example_kernels():
    """module.kernel of every @tilejit.kernel defined in examples/."""
    found = set()
    for path in sorted(glob.glob(os.path.join(ROOT, "examples", "**", "*.py"), recursive=True)):
        if "@tilejit.kernel" not in open(path).read():
            continue
        name = os.path.relpath(path, os.path.join(ROOT, "examples"))[:-3].replace(os.sep, ".")
        module = importlib.import_module(name)
        found |= {f"{name}.{value.__name__}" for value in vars(module).values()
                  if isinstance(value, KernelFunction) and value.func.__module__ == module.__name__}
    return found


def test_every_example_kernel_and_seed_program_is_fuzzed():
    covered = {k for t in fz.targets().values() for k in t.kernels()}
    examples = _example_kernels()
    assert len(examples) >= 18
    assert not examples - covered, f"example kernels no fuzz target runs: {examples - covered}"
    programs = {os.path.basename(p)[:-3]
                for p in glob.glob(os.path.join(ROOT, "tests", "programs", "*.py"))}
    seeds = {n for n, t in fz.targets().items() if t.source == "seed program"}
    assert seeds | set(fz.EXCLUDED) == programs and not seeds & set(fz.EXCLUDED)


def _configs(target, dtype):
    return target.configs[dtype] if isinstance(target.configs, dict) else target.configs


def test_cases_come_from_each_kernels_valid_set():
    seen = {}
    for name, target in fz.targets().items():
        for i in range(6):
            case = fz.draw(target, fz.case_seed(5, name, i))
            assert case["dtype"] in target.dtypes
            assert case["variant"] in [dict(v) for v in target.variants]
            sizes = case["sizes"]
            # the config drawn, with the dimensions it fixes, is one of the valid ones
            assert any(c == dict(case["config"], **{k: sizes[k] for k in c if k in target.dims})
                       for c in _configs(target, case["dtype"])), (name, case)
            for dim, spec in target.dims.items():
                if any(dim in c for c in _configs(target, case["dtype"])):
                    continue
                if isinstance(spec, list):
                    assert sizes[dim] in spec
                else:
                    lo, hi, step = (*spec, 1)[:3]
                    assert lo <= sizes[dim] <= hi and (sizes[dim] - lo) % step == 0
            seen.setdefault(name, []).append(case)
    # dtypes, configurations and shapes off the blocks are all drawn
    gemms = seen["gemm.matmul"]
    assert len({c["dtype"] for c in gemms}) > 1 and len({str(c["config"]) for c in gemms}) > 1
    assert any(c["sizes"]["M"] % c["config"]["block_M"] for c in gemms)
    varlen = seen["flash_attention.flash_attn_varlen.flashattn_varlen"]
    assert all(len(c["sizes"]["lens_q"]) == len(c["sizes"]["lens_k"]) == c["sizes"]["batch"]
               for c in varlen)
    # the seed program's non-causal path is not drawn (it reads acc_s before writing it)
    assert all("is_causal" not in c["config"] for c in seen["flashattn_seed000"])


def test_the_same_seed_gives_the_same_cases(tmp_path):
    first = fz.cases(3, seed=3)
    assert first == fz.cases(3, seed=3)
    assert [c["sizes"] for c in first] != [c["sizes"] for c in fz.cases(3, seed=4)]
    case = first[40]                  # a case replays alone from its kernel and seed
    assert fz.draw(fz.targets()[case["kernel"]], case["seed"]) == case
    # and its data too: two runs give the same errors
    add = next(c for c in first if c["kernel"] == "vector_add.vector_add")
    assert fz.run_case(add, sim_only=True)["errors"] == fz.run_case(add, sim_only=True)["errors"]
    out = tmp_path / "replay.json"          # --replay KERNEL:SEED runs that case alone
    assert fz.main(["--sim-only", "--jobs", "1", "--replay", f"{add['kernel']}:{add['seed']}",
                    "--json", str(out)]) == 0
    replayed = json.loads(out.read_text())["cases"]
    assert [{k: c[k] for k in add} for c in replayed] == [add]


# the kernels the first version did not fuzz (the fixed 1024^3 seed004 GEMM, 10 s in the
# simulator, runs in tests/tilelang/test_seed_programs.py instead)
NEW = ["flashattn_varlen", "attention_backward", "matmul_fp8", "matmul_multicast"] + sorted(
    n for n, t in fz.targets().items() if t.source == "seed program"
    and n != "matmul_kernel_seed004")


def test_the_new_kernels_run_in_simulation(tmp_path):
    out = tmp_path / "fuzz.json"
    rc = fz.main(["--sim-only", "--small", "--cases", "1", "--jobs", "1", "--seed", "7",
                  "--only", *NEW, "--json", str(out)])
    data = json.loads(out.read_text())
    expected = {n for n in fz.targets() if any(w in n for w in NEW)}
    assert rc == 0 and data["meta"]["sim only"] and data["meta"]["small"]
    assert set(data["per_kernel"]) == expected and len(expected) == len(NEW)
    assert data["totals"] == {"ok": len(expected)}, data["totals"]
    assert data["cases tried"] == len(expected)
    for case in data["cases"]:
        assert case["seed"] and case["sizes"] and case["dtype"]
        assert case["errors"]["sim_vs_ref"] <= case["tolerance"]
    assert data["per_kernel"]["gemm_fp8.matmul_fp8"]["ok"] == 1


def test_a_wrong_reference_is_a_mismatch(monkeypatch, tmp_path):
    target = fz.targets()["vector_add.vector_add"]       # A - B where the kernel adds
    monkeypatch.setattr(target, "reference", lambda x, *_: [x["A"].double() - x["B"].double()])
    out = tmp_path / "fuzz.json"
    rc = fz.main(["--sim-only", "--cases", "2", "--jobs", "1", "--only",
                  "vector_add.vector_add", "--json", str(out)])
    data = json.loads(out.read_text())
    assert rc == 1
    assert data["totals"] == {"mismatch": 2}
    assert data["per_kernel"]["vector_add.vector_add"]["mismatch"] == 2
    assert all(c["beyond"] == ["sim_vs_ref"] for c in data["cases"])


def _stand_in_gpu(monkeypatch, change):
    """Runs the 'GPU' in the simulator too, then ``change``s its outputs (or raises)."""
    real = fz._outcome

    def outcome(target, x, case, device):
        out, error = real(target, x, case, "cpu")
        return change(out) if device == "cuda" else (out, error)
    monkeypatch.setattr(fz, "_outcome", outcome)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)


def _case():
    return fz.cases(1, seed=1, only=["splitk_gemm"])[0]


def test_a_gpu_that_agrees_is_ok(monkeypatch):
    _stand_in_gpu(monkeypatch, lambda out: (out, None))
    row = fz.run_case(_case(), sim_only=False, capability=(9, 0))
    assert row["status"] == "ok" and row["errors"]["gpu_vs_sim"] == 0.0
    assert row["errors"]["gpu_vs_ref"] == row["errors"]["sim_vs_ref"] <= row["tolerance"]


def test_a_gpu_that_disagrees_with_the_simulator_is_a_mismatch(monkeypatch):
    def one_wrong(out):
        out = [o.clone() for o in out]
        out[0].view(-1)[-1] += 1 + out[0].abs().max()      # an error of at least 1/2
        return out, None
    _stand_in_gpu(monkeypatch, one_wrong)
    row = fz.run_case(_case(), sim_only=False, capability=(9, 0))
    assert row["status"] == "mismatch" and "gpu_vs_sim" in row["beyond"]


def test_a_failure_on_one_side_only_is_diverged(monkeypatch):
    def fails(out):
        return None, RuntimeError("CUDA_ERROR_ILLEGAL_ADDRESS")
    _stand_in_gpu(monkeypatch, fails)
    row = fz.run_case(_case(), sim_only=False, capability=(9, 0))
    assert row["status"] == "diverged" and "ILLEGAL_ADDRESS" in row["gpu"]


@pytest.mark.parametrize("kernel,capability,status", [
    ("gemm_multicast.matmul_multicast", (8, 9), "skipped"),
    ("gemm_fp8.matmul_fp8", (8, 0), "skipped"),
    ("matmul_ws_seed000_cleared", (8, 6), "skipped")])
def test_what_the_gpu_lacks_is_skipped(kernel, capability, status):
    case = fz.cases(1, seed=2, only=[kernel])[0]
    row = fz.run_case(case, sim_only=False, capability=capability)
    assert row["status"] == status and row["why"].startswith("needs sm_")


def test_the_error_measure():
    t = torch.tensor
    assert fz.max_error(t([1.0, 2.0]), t([1.0, 3.0])) == pytest.approx(1 / 4)
    assert fz.max_error(t([float("nan"), float("inf")]), t([float("nan"), float("inf")])) == 0
    assert fz.max_error(t([float("nan"), 1.0]), t([0.0, 1.0])) == math.inf
    assert fz.max_error(t([1.0]), t([1.0, 1.0])) == math.inf
