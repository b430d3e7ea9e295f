"""T.Pipelined runs a global→shared copy ahead of the body only where that keeps the
program's meaning (passes/pipeline.py): not a copy whose source region reads what the
body writes (an index a tile holds, the tensor itself), nor one whose tile a statement
before it reads; a tile staged by two loops keeps the most stages; ``T.use_swizzle``
remaps the block indices where they are bound, so a use above it sees them too
(passes/rasterization.py). Checked in the pipelined program (the IR dump), in
simulation, assembled by ptxas, and with ``-m gpu`` against the simulator."""
import glob
import os

import pytest
import torch

import tilejit as tilelang
import tilejit.language as T

M, K, BK, NBLK = 16, 256, 32, 7


def indexed_by_a_tile():
    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), Idx: T.Tensor((NBLK,), "int32"),
             O: T.Tensor((M, BK), "float32")):
        with T.Kernel(1, threads=128):
            blk = T.alloc_local((1,), "int32")
            S = T.alloc_shared((M, BK), "float32")
            acc = T.alloc_fragment((M, BK), "float32")
            T.clear(acc)
            for k in T.Pipelined(NBLK, num_stages=2):
                blk[0] = Idx[k]
                T.copy(A[0, blk[0] * BK], S)
                for i, j in T.Parallel(M, BK):
                    acc[i, j] += S[i, j]
            T.copy(acc, O)
    return main


def recurrence():
    @T.prim_func
    def main(X: T.Tensor((8, 32), "float32")):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((32,), "float32")
            F = T.alloc_fragment((32,), "float32")
            for k in T.Pipelined(7, num_stages=2):
                T.copy(X[k, :], S)
                for i in T.Parallel(32):
                    F[i] = S[i] * 2.0 + 1.0
                T.copy(F, X[k + 1, :])
    return main


def read_before_copy():
    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), O: T.Tensor((M, BK), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((M, BK), "float32")
            acc = T.alloc_fragment((M, BK), "float32")
            T.clear(acc)
            for k in T.Pipelined(K // BK, num_stages=2):
                if k > 0:
                    for i, j in T.Parallel(M, BK):
                        acc[i, j] += S[i, j] * (k + 1)
                T.copy(A[0, k * BK], S)
            T.copy(acc, O)
    return main


def two_loops():
    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((M, K), "float32"),
             O: T.Tensor((M, BK), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((M, BK), "float32")
            acc = T.alloc_fragment((M, BK), "float32")
            T.clear(acc)
            for k in T.Pipelined(K // BK, num_stages=3):
                T.copy(A[0, k * BK], S)
                for i, j in T.Parallel(M, BK):
                    acc[i, j] += S[i, j]
            for k in T.Pipelined(K // BK, num_stages=2):
                T.copy(B[0, k * BK], S)
                for i, j in T.Parallel(M, BK):
                    acc[i, j] += S[i, j]
            T.copy(acc, O)
    return main


def swizzled_late():
    @T.prim_func
    def main(A: T.Tensor((128, 128), "float32"), B: T.Tensor((128, 128), "float32")):
        with T.Kernel(4, 4, threads=128) as (bx, by):
            row0 = by * 32
            S = T.alloc_shared((32, 32), "float32")
            T.use_swizzle(panel_size=2)
            T.copy(A[row0, bx * 32], S)
            T.copy(S, B[by * 32, bx * 32])
    return main


def _inputs(name):
    g = torch.Generator().manual_seed(3)
    if name == "indexed_by_a_tile":
        return [torch.randn(M, K, generator=g),
                torch.randint(0, K // BK, (NBLK,), generator=g, dtype=torch.int32),
                torch.zeros(M, BK)]
    if name == "recurrence":
        x = torch.zeros(8, 32)
        x[0] = torch.randn(32, generator=g)
        return [x]
    if name == "read_before_copy":
        return [torch.randn(M, K, generator=g), torch.zeros(M, BK)]
    if name == "two_loops":
        return [torch.randn(M, K, generator=g), torch.randn(M, K, generator=g),
                torch.zeros(M, BK)]
    return [torch.randn(128, 128, generator=g), torch.zeros(128, 128)]


def _reference(name, args):
    if name == "indexed_by_a_tile":
        a, idx, _ = args
        return [sum(a[:, i * BK:(i + 1) * BK] for i in idx.tolist())]
    if name == "recurrence":
        x = args[0].clone()
        for k in range(7):
            x[k + 1] = x[k] * 2 + 1
        return [x]
    if name == "read_before_copy":
        a = args[0]
        blocks = [a[:, k * BK:(k + 1) * BK] for k in range(K // BK)]
        return [sum(blocks[k - 1] * (k + 1) for k in range(1, K // BK))]
    if name == "two_loops":
        a, b, _ = args
        return [a.view(M, -1, BK).sum(1) + b.view(M, -1, BK).sum(1)]
    return [args[0]]


PROGRAMS = {"indexed_by_a_tile": indexed_by_a_tile, "recurrence": recurrence,
            "read_before_copy": read_before_copy, "two_loops": two_loops,
            "swizzled_late": swizzled_late}


def _run(name, device="cpu", target="auto"):
    args = [a.to(device) for a in _inputs(name)]
    tilelang.compile(PROGRAMS[name](), target=target)(*args)
    return [a.cpu() for a in args]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_in_simulation(name):
    args = _run(name, target="sim")
    got = args[-1]
    torch.testing.assert_close(got, _reference(name, args)[0], rtol=1e-5, atol=1e-4)


def _dump(name, monkeypatch, tmp_path, pattern):
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    monkeypatch.setenv("TILEJIT_DUMP_IR", str(tmp_path))
    tilelang.compile(PROGRAMS[name](), target="cuda -arch=sm_90a").get_kernel_source()
    (path,) = [p for p in glob.glob(str(tmp_path / "*" / pattern))
               if glob.glob(os.path.join(os.path.dirname(p), "*kernel.ptx"))]
    return open(path).read()


def test_what_runs_ahead(monkeypatch, tmp_path):
    program = _dump("indexed_by_a_tile", monkeypatch, tmp_path, "*after_pipeline_loops.py")
    assert "__tj_inv" not in program                  # the index is not hoisted
    assert "__tj_copy_async(__tj_region(A" not in program   # A's copy stays in the body


@pytest.mark.parametrize("name", ["recurrence", "read_before_copy"])
def test_what_stays_in_order(name, monkeypatch, tmp_path):
    program = _dump(name, monkeypatch, tmp_path, "*after_pipeline_loops.py")
    assert "__tj_copy_async" not in program


def test_a_tile_two_loops_stage_keeps_the_most_stages(monkeypatch, tmp_path):
    plan = _dump("two_loops", monkeypatch, tmp_path, "*tile_plan.txt")
    assert "x 3 stages" in plan


def test_the_swizzle_remaps_where_the_blocks_are_bound(monkeypatch, tmp_path):
    program = _dump("swizzled_late", monkeypatch, tmp_path, "*after_rasterize_blocks.py")
    assert program.index("__tj_swizzle_blocks") < program.index("row0 = by * 32")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_ptx(name, arch, ptxas):
    ptxas(tilelang.compile(PROGRAMS[name]()).get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_gpu_matches_the_simulator_and_torch(name):
    gpu, sim = _run(name, "cuda"), _run(name, target="sim")
    torch.testing.assert_close(gpu[-1], sim[-1], rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(gpu[-1], _reference(name, gpu)[0], rtol=1e-5, atol=1e-4)
