"""Host-side arguments TileLang's users get wrong, each a clear error naming it before
anything runs: a misspelled ``@tilelang.jit`` option, a target TileLang does not have,
``assert_allclose`` tolerances out of range."""
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T


def copy_program(N=64):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(N):
                B[i] = A[i]
    return main


def test_a_misspelled_jit_option_is_named():
    with pytest.raises(TypeError, match=r"@tilelang.jit: unexpected option\(s\) 'out_idxx'; "
                       r"it takes out_idx, target"):
        @tilelang.jit(out_idxx=[1])
        def factory(N):
            return copy_program(N)
    with pytest.raises(TypeError, match=r"'pass_config', 'targt'"):
        tilelang.jit(pass_config={}, targt="cuda")

    @tilelang.jit(out_idx=[1], target_host="c", debug_root_path=None, compile_flags=None)
    def accepted(N):
        return copy_program(N)
    a = torch.randn(64)
    assert torch.equal(accepted(64)(a), a)


@pytest.mark.parametrize("target, error, match", [
    ("bogus", ValueError, r"expected one of auto, cuda, hip, .* got 'bogus'"),
    ("CUDA", ValueError, r"got 'CUDA'"),
    ("", ValueError, r"got ''"),
    ({"kind": "bogus"}, ValueError, r"got \{'kind': 'bogus'\}"),
    (42, TypeError, r"a dict or a tvm.target.Target, got int 42"),
])
def test_a_target_tilelang_does_not_have_is_named(target, error, match):
    with pytest.raises(error, match="tilelang.compile target: .*" + match):
        tilelang.compile(copy_program(), out_idx=[1], target=target)
    with pytest.raises(error, match="@tilelang.jit target: .*" + match):
        tilelang.jit(target=target)


@pytest.mark.parametrize("target", ["auto", "sim", "c", "llvm", "cuda -arch=sm_90a",
                                    {"kind": "cuda", "arch": "sm_80"}, "nvidia/nvidia-h100"])
def test_targets_tilelang_has_are_taken(target):
    tilelang.compile(copy_program(), out_idx=[1], target=target)


def test_assert_allclose_checks_its_tolerances():
    profiler = tilelang.compile(copy_program(), out_idx=[1]).get_profiler()
    for kwargs, match in (({"max_mismatched_ratio": -1}, r"max_mismatched_ratio must be a "
                                                         r"number in \[0, 1\], got -1"),
                          ({"max_mismatched_ratio": 1.5}, r"got 1.5"),
                          ({"atol": -1e-3}, r"atol must be a number >= 0, got -0.001"),
                          ({"rtol": "1e-2"}, r"rtol must be a number >= 0, got '1e-2'")):
        with pytest.raises(ValueError, match=match):
            profiler.assert_allclose(lambda a: a, **kwargs)
    with pytest.raises(TypeError, match="reference_program must be callable"):
        profiler.assert_allclose(None)
    profiler.assert_allclose(lambda a: a, max_mismatched_ratio=0)


@pytest.mark.parametrize("threads, match", [
    (0, r"expected a count in \[1, 1024\], got 0"),
    (2000, r"expected a count in \[1, 1024\], got 2000"),
    ("a", r"or a tuple of 1 to 3 block extents \(ints\), got 'a'"),
    ((4, 4, 4, 1), r"got \(4, 4, 4, 1\)"),
])
def test_an_invalid_launch_names_the_kernels_line(threads, match):
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), C: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            for i in T.Parallel(64):
                C[i] = A[i]
    with pytest.raises(ValueError, match=r"main\(\): an invalid launch computing the launch on "
                       r"the host, at .*test_host_argument_checks.py, line \d+: `with "
                       r"T.Kernel\(1, threads=threads\) as bx:`.*" + match):
        tilelang.compile(main, out_idx=[1], target="sim")(torch.ones(64))


def gemm_program(num_stages=2, transpose_A=False, clear_accum=False, k_pack=1):
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"),
             C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((64, 32), "float16")
            C_f = T.alloc_fragment((64, 64), "float32")
            T.clear(C_f)
            for k in T.Pipelined(2, num_stages=num_stages):
                T.copy(A[0:64, k * 32:(k + 1) * 32], A_s)
                T.copy(B[0:64, k * 32:(k + 1) * 32], B_s)
                T.gemm(A_s, B_s, C_f, transpose_A=transpose_A, transpose_B=True,
                       clear_accum=clear_accum, k_pack=k_pack)
            T.copy(C_f, C)
    return main


@pytest.mark.parametrize("make, match", [
    (lambda: gemm_program(num_stages=-1), r"num_stages is an int >= 0 .*got -1"),
    (lambda: gemm_program(num_stages="3"), r"num_stages is an int >= 0 .*got '3'"),
    (lambda: gemm_program(transpose_A="yes"), r"transpose_A is True or False, got 'yes'"),
    (lambda: gemm_program(clear_accum="no"), r"clear_accum is True or False, got 'no'"),
    (lambda: gemm_program(k_pack=3), r"k_pack is 1 or 2 \(TileLang's\), got 3"),
])
def test_tile_operation_options_are_checked(make, match):
    with pytest.raises(tilelang.CompileError, match=match):
        tilelang.compile(make(), target="sim")


def test_valid_options_still_compute():
    a, b = torch.randn(64, 64).half(), torch.randn(64, 64).half()
    c = torch.zeros(64, 64)
    tilelang.compile(gemm_program(num_stages=0, k_pack=1, clear_accum=False),
                     target="sim")(a, b, c)
    torch.testing.assert_close(c, (a.double() @ b.double().T).float(), rtol=1e-3, atol=1e-3)


def test_definition_mistakes_are_named():
    with pytest.raises(TypeError, match=r"T.Tensor: extent 0 of the shape \('M',\) is 'M'; an "
                       r"extent is an int >= 0, or a symbol .*T.dynamic\(\"M\"\)"):
        T.Tensor(("M",), "float32")
    with pytest.raises(TypeError, match=r"extent 0 of the shape \(-4,\) is -4"):
        T.Tensor((-4,), "float32")

    @T.prim_func
    def local_shared(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            S = T.alloc_shared((64,), "float32", scope="local")
            T.copy(A, S)
            T.copy(S, A)
    with pytest.raises(tilelang.CompileError, match=r"T.alloc_shared: scope 'local' is not "
                       r"this allocation's; it takes 'shared.dyn' or 'shared'"):
        tilelang.compile(local_shared, target="sim")
    profiler = tilelang.compile(copy_program(), out_idx=[1]).get_profiler()
    with pytest.raises(TypeError, match=r"do_bench\(\) got an unexpected keyword argument "
                       r"'bogus'"):
        profiler.do_bench(bogus=1)
    with pytest.raises(TypeError, match=r"pass_configs: expected a dict .*got list"):
        tilelang.compile(copy_program(), out_idx=[1], pass_configs=["tl.disable_tma_lower"])
    with pytest.raises(TypeError, match=r"@tilelang.jit pass_configs: expected a dict"):
        tilelang.jit(pass_configs=("tl.disable_tma_lower",))

    @T.macro
    def store(C, n):
        C[0] = n

    @T.prim_func
    def too_few(A: T.Tensor((64,), "float32"), C: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            store(C)
    with pytest.raises(tilelang.CompileError, match=r"a helper called with arguments its "
                       r"signature \(C, n\) does not take: missing a required argument: 'n'"):
        tilelang.compile(too_few, target="cuda -arch=sm_90a")


def test_a_tensor_as_an_index_is_named():
    @T.prim_func
    def self_indexed(A: T.Tensor((64,), "float32"), C: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            C[0] = A[A]
    with pytest.raises(tilelang.CompileError, match=r"`A\[A\]` indexes with `A`, a tensor or "
                       r"tile: an index is a number"):
        tilelang.compile(self_indexed, target="sim")

    @tilelang.jit
    def add(A, B, blk=64):
        M = T.const("M")
        A: T.Tensor((M,), T.float32)
        B: T.Tensor((M,), T.float32)
        with T.Kernel(T.ceildiv(M, blk), threads=64) as bx:
            for i in T.Parallel(blk):
                B[bx * blk + i] = A[bx * blk + i]
    with pytest.raises(TypeError, match=r"add\(\): a value of the wrong kind computing the "
                       r"launch on the host, at .*line \d+: `with T.Kernel.*\(with blk='32'\)"):
        add(torch.zeros(64), torch.zeros(64), blk="32")


def test_a_reviews_cases_stay_accepted():
    import numpy as np
    from tilejit.target import Target
    profiler = tilelang.compile(copy_program(), out_idx=[1]).get_profiler()
    profiler.assert_allclose(lambda a: a, atol=np.float32(1e-2), rtol=torch.tensor(1e-2),
                             max_mismatched_ratio=np.float32(0.01))
    a, b = torch.randn(64, 64).half(), torch.randn(64, 64).half()
    c = torch.zeros(64, 64)
    tilelang.compile(gemm_program(transpose_A=np.int64(0), k_pack=np.int64(1)),
                     target="sim")(a, b, c)
    torch.testing.assert_close(c, (a.double() @ b.double().T).float(), rtol=1e-3, atol=1e-3)
    for target in ("rocm", Target.sim(), Target.cuda("sm_90a")):
        tilelang.compile(copy_program(), out_idx=[1], target=target)

    is_hip = False

    @T.prim_func
    def dead_branch(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(8):
                if is_hip:
                    B[i] = T.cast(T.cast(A[i], "float8_e4m3fnuz"), "float32")
                else:
                    B[i] = A[i]
    x = torch.arange(8.0)
    assert torch.equal(tilelang.compile(dead_branch, out_idx=[1], target="sim")(x), x)


def test_a_tensor_written_before_the_kernel_is_named():
    @T.prim_func
    def early_write(A: T.Tensor((64,), "float32")):
        A[0] = 5.0
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                A[i] = A[i] + 1
    with pytest.raises(tilelang.CompileError, match=r"before `with T.Kernel` run on the host "
                       r"and may only compute values: a tensor is written inside"):
        tilelang.compile(early_write, target="sim")
