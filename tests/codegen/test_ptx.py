"""Each example kernel's PTX: the instructions it must use, and ptxas accepts it for
sm_80 and sm_90a."""
import re
import shutil
import subprocess

import numpy as np
import pytest

import tilejit
import tilejit.language as T
from ptx_examples import all_examples, example_arguments

ARCHS = ["sm_80", "sm_90a"]
EXAMPLES = list(all_examples())
PTXAS = shutil.which("ptxas")
F64_MATH = re.compile(r"\b(add|sub|mul|fma|div)\.[a-z.]*f64")


def must_on(arch, must):
    """The instructions an example must use on ``arch``: on sm_90a a pipelined copy is
    TMA's (passes/tma.py), completing on mbarriers, instead of cp.async, and T.gemm is
    wgmma.mma_async (its operands read through descriptors, not ldmatrix)."""
    if arch != "sm_90a":
        return must
    out = []
    for i in must:
        if i == "cp.async.cg.shared.global":
            out += ["cp.async.bulk.tensor", "mbarrier.arrive.expect_tx",
                    "mbarrier.try_wait.parity", "fence.proxy.async"]
        elif i.startswith("mma.sync.aligned"):
            out += ["wgmma.mma_async.sync.aligned", "wgmma.fence.sync.aligned",
                    "wgmma.commit_group.sync.aligned", "wgmma.wait_group.sync.aligned"]
        elif not i.startswith("ldmatrix"):
            out.append(i)
    return out


def assemble(ptx: str, arch: str, tmp_path) -> str:
    path = tmp_path / f"k_{arch}.ptx"
    path.write_text(ptx)
    out = subprocess.run([PTXAS, f"-arch={arch}", "-v", str(path), "-o", str(path) + ".cubin"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stderr


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name,kernel,specs,constexprs,must", EXAMPLES,
                         ids=[e[0] for e in EXAMPLES])
def test_example_ptx_assembles(name, kernel, specs, constexprs, must, arch, tmp_path):
    compiled = kernel.compile(*example_arguments(specs), target="cuda", arch=arch, **constexprs)
    ptx = compiled.ptx
    assert f".target {arch}" in ptx
    assert ".entry" in ptx and ".maxntid" in ptx
    assert not F64_MATH.search(ptx), "float64 arithmetic crept into a float32/float16 kernel"
    for instruction in must_on(arch, must):
        assert instruction in ptx, f"{name}: expected {instruction} in its PTX"
    if PTXAS is None:
        pytest.skip("ptxas is not on PATH: PTX generated and checked, not assembled")
    report = assemble(ptx, arch, tmp_path)
    spills = re.findall(r"(\d+) bytes spill stores", report)
    assert all(int(s) == 0 for s in spills), report


def _ptx(kernel, *args, **kw):
    return kernel.compile(*args, target="cuda", arch="sm_90", **kw).ptx


@tilejit.kernel
def copy_kernel(A, B, block: T.constexpr = 1024):
    with T.Kernel(T.ceildiv(A.shape[0], block), threads=128) as bx:
        for i in T.Parallel(block):
            B[bx * block + i] = A[bx * block + i]


def test_contiguous_aligned_tensors_get_16_byte_accesses():
    a = np.zeros(4096, np.float32)
    ptx = _ptx(copy_kernel, a, a.copy())
    assert "ld.global.nc.v4.b32" in ptx and "st.global.v4.b32" in ptx
    h = np.zeros(4096, np.float16)
    ptx = _ptx(copy_kernel, h, h.copy())
    assert re.search(r"ld\.global\.nc\.v4\.b32|ld\.global\.nc\.v8\.b16", ptx)


def test_strided_tensors_get_the_scalar_variant():
    a = np.zeros(8192, np.float32)[::2]
    ptx = _ptx(copy_kernel, a, np.zeros(4096, np.float32))
    assert "ld.global.nc.v4" not in ptx and "ld.global.nc.b32" in ptx


def test_misaligned_pointer_gets_the_scalar_variant():
    a = np.zeros(4097, np.float32)[1:]
    ptx = _ptx(copy_kernel, a, np.zeros(4096, np.float32))
    assert "ld.global.nc.v4" not in ptx


def test_weak_literals_keep_half_precision_math():
    @tilejit.kernel
    def axpy(X, Y, alpha):
        with T.Kernel(T.ceildiv(X.shape[0], 256), threads=256) as bx:
            for i in T.Parallel(256):
                k = bx * 256 + i
                if k < X.shape[0]:
                    Y[k] = X[k] * 2.0 + alpha + 1

    for dtype in (np.float16, np.float32):
        x = np.zeros(1000, dtype)
        ptx = _ptx(axpy, x, x.copy(), 0.5)
        assert not F64_MATH.search(ptx)
        assert "cvt.f64" not in ptx


def test_float64_tensor_asks_for_float64():
    x = np.zeros(1000, np.float64)
    ptx = _ptx(copy_kernel, x, x.copy())
    assert "ld.global.nc.v2.b64" in ptx or "ld.global.nc.b64" in ptx


def test_compile_exposes_llvm_ir_and_parameters():
    a = np.zeros(4096, np.float32)
    compiled = copy_kernel.compile(a, a.copy(), target="cuda", arch="sm_80")
    assert "ptx_kernel" in compiled.llvm_ir
    assert compiled.shared_bytes == 0
    assert ".param .u64 .ptr .align 16" in compiled.ptx


def test_register_report_without_a_gpu_says_why():
    from tilejit.runtime.cuda_driver import cuda_available
    if cuda_available():
        pytest.skip("this machine has a CUDA device")
    a = np.zeros(4096, np.float32)
    compiled = copy_kernel.compile(a, a.copy(), target="cuda", arch="sm_90")
    with pytest.raises(RuntimeError, match="no CUDA device.*ptxas -v"):
        _ = compiled.num_regs


@tilejit.kernel
def _scaled(X, Y, blocks: T.constexpr = None):
    N = X.shape[0]
    with T.Kernel(T.ceildiv(N, 256), threads=256, min_blocks_per_sm=blocks) as bx:
        for i in T.Parallel(256):
            if bx * 256 + i < N:
                Y[bx * 256 + i] = X[bx * 256 + i] * 2.0


def test_min_blocks_per_sm_is_a_launch_bound(tmp_path):
    x = np.zeros(1000, np.float32)
    plain = _scaled.compile(x, x, target="cuda", arch="sm_90a").ptx
    bound = _scaled.compile(x, x, target="cuda", arch="sm_90a", blocks=4).ptx
    assert ".minnctapersm" not in plain
    assert ".maxntid 256" in bound and ".minnctapersm 4" in bound
    if PTXAS is not None:
        assemble(bound, "sm_90a", tmp_path)
    y = np.zeros_like(x)
    _scaled(np.arange(1000, dtype=np.float32), y, blocks=4)      # the simulator ignores it
    assert np.array_equal(y, 2 * np.arange(1000, dtype=np.float32))


@tilejit.kernel
def _scaled_annotated(X, Y, blocks: T.constexpr = 3):
    """TileLang's spelling: T.annotate_min_blocks_per_sm(K) in the T.Kernel block."""
    N = X.shape[0]
    with T.Kernel(T.ceildiv(N, 256), threads=256) as bx:
        T.annotate_min_blocks_per_sm(blocks)
        for i in T.Parallel(256):
            if bx * 256 + i < N:
                Y[bx * 256 + i] = X[bx * 256 + i] * 2.0


def test_annotate_min_blocks_per_sm_is_the_launch_bound(tmp_path):
    x = np.arange(1000, dtype=np.float32)
    ptx = _scaled_annotated.compile(x, x, target="cuda", arch="sm_90a").ptx
    assert ".maxntid 256" in ptx and ".minnctapersm 3" in ptx
    if PTXAS is not None:
        assemble(ptx, "sm_90a", tmp_path)
    y = np.zeros_like(x)
    _scaled_annotated(x, y)
    assert np.array_equal(y, 2 * x)
    with pytest.raises(ValueError, match="4096 threads per SM"):
        _scaled_annotated(x, y, blocks=16)


def _annotated_in_a_branch(X):
    with T.Kernel(1, threads=32) as bx:
        if X[0] > 0:
            T.annotate_min_blocks_per_sm(2)
        X[0] = 1.0


def _annotated_with_a_value_of_the_block(X):
    with T.Kernel(1, threads=32) as bx:
        nb = 2
        T.annotate_min_blocks_per_sm(nb)
        X[0] = 1.0


def test_annotate_min_blocks_per_sm_of_a_value_set_in_the_block_is_an_error():
    with pytest.raises(tilejit.CompileError, match="nb is set inside it") as e:
        tilejit.kernel(_annotated_with_a_value_of_the_block)(np.zeros(4, np.float32))
    assert e.value.lineno == _annotated_with_a_value_of_the_block.__code__.co_firstlineno + 3


def test_annotate_min_blocks_per_sm_under_a_branch_is_an_error():
    # (found when the kernel is parsed: at its decoration)
    with pytest.raises(tilejit.CompileError, match="not under an `if` or a loop") as e:
        tilejit.kernel(_annotated_in_a_branch)(np.zeros(4, np.float32))
    assert e.value.lineno == _annotated_in_a_branch.__code__.co_firstlineno + 3


@pytest.mark.parametrize("blocks,message", [(0, "expected a positive int, got 0"),
                                            (2.5, "expected a positive int, got 2.5"),
                                            (16, "4096 threads per SM, more than the 2048")])
def test_min_blocks_per_sm_checked(blocks, message):
    x = np.zeros(10, np.float32)
    with pytest.raises(ValueError, match=message):
        _scaled(x, x.copy(), blocks=blocks)
