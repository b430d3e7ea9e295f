"""TileLang's CPU programs as its own CPU tests write them: compiled inside ``with
tvm.target.Target("c")`` for ``target="c"`` (or ``"llvm"``), a helper that dispatches on a
compile-time op and ends in ``raise ValueError(op)``. tilejit runs them in its simulator
on host tensors as TileLang's CPU backends run them (``Target.is_cpu``: a block of one
thread unless T.Kernel names its threads, local tiles the block's, no tensor cores; the
compile-time ``if`` decided when the kernel is parsed, ``frontend/static_branches.py``); on
the GPU the same program compiles to PTX."""
import pytest
import torch

import tilejit as tilelang
from tilejit.sim.races import RaceError
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


def local_gemm(M, N, K, bm, bn, bk, trans_A=False):
    """TileLang's CPU gemm test: local tiles, one block of one thread (T.Kernel names no
    threads), T.copy from a corner index, T.gemm of the local tiles."""
    a_shape, a_local = ((K, M), (bk, bm)) if trans_A else ((M, K), (bm, bk))

    @T.prim_func
    def main(A: T.Tensor(a_shape, "float32"), B: T.Tensor((K, N), "float32"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            A_local = T.alloc_local(a_local, "float32")
            B_local = T.alloc_local((bk, bn), "float32")
            C_local = T.alloc_local((bm, bn), "float32")
            T.clear(C_local)
            for ko in T.serial(T.ceildiv(K, bk)):
                if trans_A:
                    T.copy(A[ko * bk, by * bm], A_local)
                else:
                    T.copy(A[by * bm, ko * bk], A_local)
                T.copy(B[ko * bk, bx * bn], B_local)
                T.gemm(A_local, B_local, C_local, trans_A, False)
            T.copy(C_local, C[by * bm, bx * bn])
    return main


@pytest.mark.parametrize("trans_A", [False, True])
def test_a_cpu_target_multiplies_local_tiles_in_float32(trans_A):
    """A CPU has no tensor cores: float32 is multiplied as float32 (TensorFloat-32's
    10-bit mantissa would be off by ~1e-3 here), and a block's local tiles are the
    block's."""
    M, N, K = 64, 32, 48
    a = torch.randn((K, M) if trans_A else (M, K), dtype=torch.float32)
    b = torch.randn(K, N, dtype=torch.float32)
    with tvm.target.Target("c"):
        kernel = tilelang.compile(local_gemm(M, N, K, 32, 16, 16, trans_A), out_idx=[2],
                                  target="c")
    want = (a.double().T if trans_A else a.double()) @ b.double()
    torch.testing.assert_close(kernel(a, b).double(), want, rtol=1e-5, atol=1e-5)


def test_the_gpu_and_the_simulator_refuse_local_gemm_operands():
    program = local_gemm(64, 32, 48, 32, 16, 16)
    with pytest.raises(tilelang.CompileError, match="T.gemm: operand A must be a 2-d shared "
                                                    "or fragment tile, got local tile"):
        tilelang.compile(program, out_idx=[2], target="sim")(torch.zeros(64, 48),
                                                             torch.zeros(48, 32))
    with pytest.raises(tilelang.CompileError, match="operand A must be a 2-d shared"):
        tilelang.compile(program, out_idx=[2]).get_kernel_source(arch="sm_90a")


def test_a_cpu_block_is_one_thread_so_a_serial_atomic_returns_its_previous_value(
        monkeypatch):
    """Outside a T.Parallel, the block's one thread performs the atomic, so return_prev
    has a value (an exclusive prefix sum here); TILEJIT_TARGET=sim keeps the CPU target's
    semantics (it is simulated already)."""
    N = 8

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((1,), "float32"),
             P: T.Tensor((N,), "float32")):
        with T.Kernel(1):
            B[0] = 1.0
            for i in T.serial(N):
                P[i] = T.atomic_add(B[0], A[i], return_prev=True)

    a = torch.randn(N)
    monkeypatch.setenv("TILEJIT_TARGET", "sim")
    with tvm.target.Target("llvm"):
        b, p = tilelang.compile(main, out_idx=[1, 2], target="llvm")(a)
    torch.testing.assert_close(p, 1.0 + torch.cumsum(a, 0) - a)
    torch.testing.assert_close(b, 1.0 + a.sum().reshape(1))
    # on the GPU's model the block is 128 threads, each adding every A[i] and storing
    # its own previous value into P[i]: the stores race, and the simulator says so
    with pytest.raises(RaceError, match="race on tensor P"):
        tilelang.compile(main, out_idx=[1, 2], target="sim")(a)


def test_a_cpu_target_keeps_the_threads_t_kernel_names():
    """T.Kernel(threads=...) on a CPU target is that many threads: a T.Parallel's
    T.get_thread_binding() sees them."""
    @T.prim_func
    def main(X: T.Tensor((4,), "int32")):
        with T.Kernel(1, threads=4):
            tx = T.get_thread_binding()
            X[tx] = tx + 10

    @T.prim_func
    def one(X: T.Tensor((4,), "int32")):
        with T.Kernel(1):
            T.fill(X, 7)
            tx = T.get_thread_binding()
            X[tx] = tx + 10

    out = tilelang.compile(main, out_idx=[0], target="c")()
    assert out.tolist() == [10, 11, 12, 13]
    out = tilelang.compile(one, out_idx=[0], target="c")()
    assert out.tolist() == [10, 7, 7, 7]
