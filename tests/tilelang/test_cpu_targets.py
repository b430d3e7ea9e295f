"""TileLang's CPU programs as its own CPU tests write them: compiled inside ``with
tvm.target.Target("c")`` for ``target="c"`` (or ``"llvm"``), a helper that dispatches on a
compile-time op and ends in ``raise ValueError(op)``. tilejit runs them in its simulator
on host tensors (the compile-time ``if`` decided when the kernel is parsed,
``frontend/static_branches.py``); on the GPU the same program compiles to PTX."""
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T
from tilejit.tilelang import tvm


def _emit_reduce(T, op, src, dst, dim):
    if op == "sum":
        T.reduce_sum(src, dst, dim=dim)
    elif op == "max":
        T.reduce_max(src, dst, dim=dim)
    elif op == "bitor":
        T.reduce_bitor(src, dst, dim=dim)
    else:
        raise ValueError(op)


def row_reduce(op, M, N, dtype):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M,), dtype)):
        with T.Kernel(1):
            src = T.alloc_fragment((M, N), dtype)
            dst = T.alloc_fragment((M,), dtype)
            T.copy(A, src)
            _emit_reduce(T, op, src, dst, 1)
            T.copy(dst, B)
    return main


@pytest.mark.parametrize("target", ["c", "llvm"])
@pytest.mark.parametrize("op, dtype", [("sum", "float32"), ("max", "float32"),
                                       ("bitor", "int32")])
def test_a_cpu_target_runs_in_the_simulator(target, op, dtype):
    a = torch.randint(-50, 50, (4, 8)).to(getattr(torch, dtype))
    with tvm.target.Target(target):
        kernel = tilelang.compile(row_reduce(op, 4, 8, dtype), out_idx=[1], target=target,
                                  target_host=target, execution_backend="cython")
    if op == "bitor":
        want = a[:, 0].clone()
        for j in range(1, 8):
            want |= a[:, j]
    else:
        want = a.sum(1) if op == "sum" else a.amax(1)
    torch.testing.assert_close(kernel(a), want)


def test_a_helpers_unreachable_raise_is_dropped_and_a_reachable_one_refused(ptxas):
    ptx = tilelang.compile(row_reduce("max", 4, 8, "float32"), out_idx=[1],
                           target="cuda -arch=sm_90a").get_kernel_source()
    ptxas(ptx, "sm_90a")
    with pytest.raises(tilelang.CompileError, match="unsupported in a kernel: raise"):
        tilelang.compile(row_reduce("min", 4, 8, "float32"), out_idx=[1])


def test_the_target_context():
    assert tvm.target.Target.current() is None
    with tvm.target.Target("cuda -arch=sm_80") as t:
        assert tvm.target.Target.current() is t
        assert t.kind.name == "cuda" and t.arch == "sm_80" and str(t) == "cuda -arch=sm_80"
        with tvm.target.Target({"kind": "c"}):
            assert tvm.target.Target.current().kind.name == "c"
        # a compile whose target is "auto" takes the entered one: its arch
        ptx = tilelang.compile(row_reduce("sum", 4, 8, "float32"),
                               out_idx=[1]).get_kernel_source()
        assert ".target sm_80" in ptx
    assert tvm.target.Target.current() is None
    with pytest.raises(ValueError, match="no target is entered"):
        tvm.target.Target.current(allow_none=False)
    with pytest.raises(ValueError, match="expected a target string"):
        tvm.target.Target(3)


@tilelang.jit(out_idx=[1])
def reduced(M=4):
    @T.prim_func
    def main(A: T.Tensor((M,), "float32"), B: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(M):
                B[i] = A[i] * 2.0
    return main


def test_a_factorys_programs_are_kept_per_entered_target():
    with tvm.target.Target("cuda -arch=sm_80"):
        assert ".target sm_80" in reduced().get_kernel_source()
    with tvm.target.Target("cuda -arch=sm_90a"):
        assert ".target sm_90a" in reduced().get_kernel_source()


@pytest.mark.gpu
def test_the_same_program_on_the_gpu():
    a = torch.randn(4, 8)
    gpu = tilelang.compile(row_reduce("max", 4, 8, "float32"), out_idx=[1])(a.cuda())
    with tvm.target.Target("c"):
        sim = tilelang.compile(row_reduce("max", 4, 8, "float32"), out_idx=[1], target="c")(a)
    torch.testing.assert_close(gpu.cpu(), a.amax(1))
    torch.testing.assert_close(gpu.cpu(), sim)
