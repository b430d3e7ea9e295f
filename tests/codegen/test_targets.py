"""Targets: the arch is validated before anything runs, features an arch lacks are a
CompileError naming the feature and the arch, and no input aborts the process (LLVM's
fatal errors cannot be caught from Python, so these run where an abort would show)."""
import os
import shutil
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError
from tilejit.target import Target, check_arch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("arch, hint", [("SM_90", "did you mean 'sm_90'"),
                                        ("90", "did you mean 'sm_90'"),
                                        ("compute_90", "did you mean 'sm_90'"),
                                        ("sm_999", "cannot emit it"),
                                        ("sm_110", "cannot emit it"),
                                        ("sm_70", "sm_75 and newer"),
                                        ("gfx942", "known: sm_75"),
                                        (None, "got None")])
def test_a_bad_arch_is_a_clear_error(arch, hint):
    with pytest.raises(ValueError, match="arch: expected a CUDA arch") as e:
        Target.cuda(arch)
    assert hint in str(e.value)


def test_the_arch_is_checked_when_the_kernel_is_decorated():
    with pytest.raises(ValueError, match="did you mean 'sm_90'"):
        tilejit.kernel(arch="SM_90")(lambda A: None)


@pytest.mark.parametrize("arch, version", [("sm_80", "+ptx80"), ("sm_90a", "+ptx82"),
                                           ("sm_100a", "+ptx86"), ("sm_120", "+ptx87"),
                                           ("sm_121", "+ptx88")])
def test_each_arch_gets_the_ptx_version_it_needs(arch, version):
    assert check_arch(arch) == arch and Target.cuda(arch).ptx_features == version


def test_amdgpu_what_is_not_built_is_a_clear_error_not_an_abort():
    """GEMMs compile for AMDGPU on MFMA (tests/codegen/test_amdgpu_mfma.py); one whose
    dtypes no MFMA instruction takes is a CompileError at its line, not an LLVM abort."""
    from gemm import matmul
    a = np.zeros((64, 64), np.float64)
    with pytest.raises(CompileError, match="no MFMA instruction on gfx942 for A/B/C dtypes "
                                           "float64/float64/float32") as e:
        matmul.compile(a, a, np.zeros((64, 64), np.float32), target="amdgpu", arch="gfx942")
    assert e.value.lineno is not None


def test_tilejit_target_is_validated(monkeypatch):
    from tilejit.options import target_override
    monkeypatch.setenv("TILEJIT_TARGET", "bogus")
    with pytest.raises(ValueError, match="TILEJIT_TARGET: expected 'sim', 'cuda' or 'auto'"):
        target_override()


@tilejit.kernel
def staged_copy(A, B, block: T.constexpr = 64):
    with T.Kernel(T.ceildiv(A.shape[0], block), threads=128) as bx:
        S = T.alloc_shared((block, 64), A.dtype)
        F = T.alloc_fragment((block, 64), A.dtype)
        T.clear(F)
        for k in T.Pipelined(A.shape[1] // 64, num_stages=2):
            T.copy(A[bx * block, k * 64], S)
            for i, j in T.Parallel(block, 64):
                F[i, j] += S[i, j]
        T.copy(F, B[bx * block, 0])


def test_a_pipeline_before_sm80_copies_synchronously():
    """No cp.async on sm_75: the pipeline's copies are plain loads and stores (it used to
    abort the process: LLVM cannot select cp.async.commit.group there)."""
    a = np.zeros((256, 256), np.float16)
    ptx = staged_copy.compile(a, np.zeros((256, 64), np.float16), target="cuda",
                              arch="sm_75").ptx
    assert ".target sm_75" in ptx and "cp.async" not in ptx
    assert "cp.async" in staged_copy.compile(a, np.zeros((256, 64), np.float16),
                                             target="cuda", arch="sm_80").ptx


def test_gemm_before_sm80_runs_on_the_cuda_cores_or_names_the_feature_and_the_line():
    from gemm import matmul
    a = np.zeros((256, 256), np.float16)
    ptx = matmul.compile(a, a, np.zeros((256, 256), np.float32), target="cuda",
                         arch="sm_75").ptx
    assert "fma.rn.f32" in ptx and "mma" not in ptx
    i8 = np.zeros((256, 256), np.int8)
    with pytest.raises(CompileError, match=r"T.gemm on sm_75 runs on the CUDA cores \(no "
                                           r"mma.sync.m16n8k16 before sm_80\)") as e:
        matmul.compile(i8, i8, np.zeros((256, 256), np.float32), target="cuda", arch="sm_75")
    assert "gemm.py" in str(e.value)


@tilejit.kernel
def too_big(A, B):
    with T.Kernel(1, threads=128) as bx:
        F = T.alloc_fragment((1024, 1024), T.float32)
        T.copy(A[0:1024, 0:1024], F)
        T.copy(F, B[0:1024, 0:1024])


@pytest.mark.parametrize("target", ["cuda", "sim"])
def test_fragments_beyond_the_register_file_are_a_compile_error(target):
    """8192 registers per thread used to compile for 17 minutes; now it is refused before
    any layout is built (the fewest words a thread could hold), in the simulator too,
    naming the tile and its share."""
    a = np.zeros((1024, 1024), np.float32)
    kw = dict(target="cuda", arch="sm_90a") if target == "cuda" else dict(target="sim")
    with pytest.raises(CompileError, match=r"need at least 8192 32-bit registers per "
                                           r"thread \(F fragment 1024x1024 float32: 8192; "
                                           r".*\); a thread has at most 255 registers, and "
                                           r"tilejit spills at most 2048 words") as e:
        too_big.compile(a, a.copy(), **kw)
    assert "test_targets.py" in str(e.value)


@tilejit.kernel
def row_sums_one_warp(A, B):
    """A 128x128 float32 fragment at 32 threads: 512 words a thread, as TileLang's own
    reduction tests write it."""
    with T.Kernel(1, threads=32) as bx:
        F = T.alloc_fragment((128, 128), T.float32)
        S = T.alloc_fragment((128,), T.float32)
        T.copy(A[0:128, 0:128], F)
        T.reduce_sum(F, S, dim=1)
        T.copy(S, B[0:128])


@pytest.mark.parametrize("target", ["sm_80", "sm_90a", "sim"])
def test_fragments_past_the_register_file_spill_with_a_warning(target, ptxas):
    """640 words a thread: compiled (ptxas spills), with a warning naming each tile's share
    and the line; the simulator warns the same and computes the sums."""
    from tilejit.passes.registers import RegisterSpillWarning
    a = np.random.default_rng(0).standard_normal((128, 128)).astype(np.float32)
    b = np.zeros(128, np.float32)
    with pytest.warns(RegisterSpillWarning, match=r"need 640 32-bit registers per thread "
                      r"\(F fragment 128x128 float32: 512, S fragment 128 float32: 128\); "
                      r"a thread has 255: the rest is spilled to local memory") as w:
        if target == "sim":
            tilejit.kernel(row_sums_one_warp.func, target="sim")(a, b)
        else:
            ptx = row_sums_one_warp.compile(a, b, target="cuda", arch=target).ptx
    # reported at the kernel's line of its file, not at the compiler's frame
    assert w[0].filename.endswith("test_targets.py") and w[0].lineno > 0
    if target == "sim":
        np.testing.assert_allclose(b, a.astype(np.float64).sum(1), rtol=1e-5, atol=1e-4)
    else:
        ptxas(ptx, target)


def test_every_known_arch_compiles_without_aborting(tmp_path):
    """In a child process (an LLVM abort kills the process): the vector add and the staged
    copy for every arch in the table, assembled by ptxas where it is on the PATH."""
    code = textwrap.dedent(f"""
        import os, sys
        sys.path[:0] = [{os.path.join(ROOT, 'examples')!r}, {os.path.dirname(__file__)!r}]
        os.environ["TILEJIT_DISABLE_CACHE"] = "1"
        import numpy as np
        from tilejit.target import _PTX_VERSION
        from vector_add import vector_add
        from test_targets import staged_copy
        a, h = np.zeros(1024, np.float32), np.zeros((256, 256), np.float16)
        for arch in _PTX_VERSION:
            for name, ptx in (("add", vector_add.compile(a, a, a.copy(), target="cuda",
                                                         arch=arch).ptx),
                              ("staged", staged_copy.compile(h, np.zeros((256, 64), np.float16),
                                                             target="cuda", arch=arch).ptx)):
                open(os.path.join(sys.argv[1], f"{{name}}_{{arch}}.ptx"), "w").write(ptx)
        print("done")
    """)
    out_dir = str(tmp_path)
    r = subprocess.run([sys.executable, "-c", code, out_dir], capture_output=True, text=True)
    assert r.returncode == 0 and "done" in r.stdout, r.stderr[-2000:]
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        return
    from tilejit.target import _PTX_VERSION
    for arch in _PTX_VERSION:
        for name in ("add", "staged"):
            path = os.path.join(out_dir, f"{name}_{arch}.ptx")
            r = subprocess.run([ptxas, f"-arch={arch}", path, "-o", path + ".o"],
                               capture_output=True, text=True)
            assert r.returncode == 0, f"{name} {arch}: {r.stderr}"


@pytest.mark.gpu
def test_spilled_fragments_on_the_gpu_against_the_simulator():
    import torch
    from tilejit.passes.registers import RegisterSpillWarning
    a = np.random.default_rng(1).standard_normal((128, 128)).astype(np.float32)
    b = torch.zeros(128, device="cuda")
    sim = np.zeros(128, np.float32)
    with warnings.catch_warnings():      # warned at compile time only: a cache hit is quiet
        warnings.simplefilter("ignore", RegisterSpillWarning)
        row_sums_one_warp(torch.from_numpy(a).cuda(), b)
        tilejit.kernel(row_sums_one_warp.func, target="sim")(a, sim)
    np.testing.assert_allclose(b.cpu().numpy(), a.astype(np.float64).sum(1), rtol=1e-5,
                               atol=1e-4)
    np.testing.assert_allclose(b.cpu().numpy(), sim, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("threads", [128, 1024])
def test_a_fragment_every_thread_holds_whole_is_named_not_more_threads(threads):
    """A 1 × 2049 row reduced and broadcast: its odd width splits over no group of the
    block's threads, so each holds all of it; the error says so instead of asking for more
    threads (which would not shrink it)."""
    @T.prim_func
    def main(A: T.Tensor((1, 2049), "float32"), O: T.Tensor((1, 2049), "float32")):
        with T.Kernel(1, threads=threads):
            f = T.alloc_fragment((1, 2049), "float32")
            r = T.alloc_fragment((1,), "float32")
            T.copy(A, f)
            T.reduce_max(f, r, dim=1)
            for i, j in T.Parallel(1, 2049):
                f[i, j] = f[i, j] - r[i]
            T.copy(f, O)
    with pytest.raises(CompileError, match=r"every thread holds all of f 1x2049 .* more "
                                           r"threads do not shrink it\): give it extents of "
                                           r"power-of-two factors") as e:
        tilejit.compile(main, out_idx=[1]).get_kernel_source(arch="sm_90a")
    assert "use more threads" not in str(e.value)
