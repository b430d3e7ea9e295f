"""A tile operation under a branch that only some of the block's threads take: done by
them where they are a contiguous range and the operation is on shared tiles and tensors
(tests/passes/test_thread_ranges.py), else refused before anything runs, on both targets
(passes/thread_branches.py; the simulator's own check is sim/threads.block_wide); a
branch every thread takes is left alone."""
import ast

import pytest
import torch

import tilejit as tilelang
import tilejit.language as T
from tilejit.errors import CompileError


def masked(lo, hi, copy=False, threads=256, every_other=False):
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=threads):
            S = T.alloc_shared((64, 64), "float16")
            tx = T.get_thread_binding(0)
            if tx >= lo and tx < hi and (tx % 2 == 0 or not every_other):
                if copy:
                    T.copy(A, S)
                else:
                    for i, k in T.Parallel(64, 64):
                        S[i, k] = A[i, k]
            T.copy(S, B)
    return main


@pytest.mark.parametrize("copy", [False, True])
@pytest.mark.parametrize("target", ["cuda", "sim"])
def test_threads_that_are_not_a_range_are_refused(copy, target):
    op = "copy" if copy else "Parallel"
    message = (rf"T.{op} inside a branch that depends on the thread index \(`if tx >= lo "
               rf"and tx < hi and \(tx % 2 == 0 or not every_other\)`: threads 64 of them "
               rf"of the block's 256\)" if target == "cuda" else
               rf"T.{op} inside a branch that depends on the thread index")
    with pytest.raises(CompileError, match=message):
        # with target "cuda" the front end refuses it at tilelang.compile (all static)
        kernel = tilelang.compile(masked(128, 256, copy, every_other=True), out_idx=[1],
                                  target=target)
        if target == "cuda":
            kernel.get_kernel_source(arch="sm_90a")
        else:
            kernel(torch.randn(64, 64, dtype=torch.float16))


@pytest.mark.parametrize("copy", [False, True])
def test_a_range_of_threads_does_the_operation(copy, ptxas, tmp_path, monkeypatch):
    a = torch.randn(64, 64, dtype=torch.float16)
    out = tilelang.compile(masked(128, 256, copy), out_idx=[1], target="sim")(a)
    assert torch.equal(out, a)
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    monkeypatch.setenv("TILEJIT_DUMP_IR", str(tmp_path))
    ptxas(tilelang.compile(masked(128, 256, copy), out_idx=[1]).get_kernel_source(
        arch="sm_90a"), "sm_90a")
    # TileLang's door guards the element loop's global reads (a cast in the branch):
    # still per-thread code, with no block barrier inside the branch
    # the GPU compilation's dump (tilejit.compile compiled for the simulator too)
    (program,) = [p for p in tmp_path.glob("*/*after_insert_barriers.py")
              if any(p.parent.glob("*kernel.ptx"))]
    tree = ast.parse(program.read_text())
    (branch,) = [n for n in ast.walk(tree) if isinstance(n, ast.If)
                 and ast.unparse(n.test).startswith("tx >= lo")]
    assert "__tj_sync" not in ast.unparse(branch)


@pytest.mark.gpu
@pytest.mark.parametrize("copy", [False, True])
@pytest.mark.parametrize("lo,hi", [(0, 128), (128, 256)])
def test_a_range_of_threads_on_the_gpu(copy, lo, hi):
    """TileLang's mask tests' shapes: float16, 128 x 128 tiles, 256 threads."""
    @T.prim_func
    def main(A: T.Tensor((1024, 1024), "float16"), B: T.Tensor((1024, 1024), "float16")):
        with T.Kernel(8, 8, threads=256) as (bx, by):
            S = T.alloc_shared((128, 128), "float16")
            tx = T.get_thread_binding(0)
            if tx >= lo and tx < hi:
                if copy:
                    T.copy(A[by * 128, bx * 128], S)
                else:
                    for i, k in T.Parallel(128, 128):
                        S[i, k] = A[by * 128 + i, bx * 128 + k]
            T.copy(S, B[by * 128, bx * 128])

    kernel = tilelang.compile(main, out_idx=[1],
                              pass_configs={"tl.disable_warp_specialized": True})
    a = torch.randn(1024, 1024, dtype=torch.float16, device="cuda")
    assert torch.equal(kernel(a), a)


def test_a_branch_every_thread_takes_is_left_alone(ptxas):
    a = torch.randn(64, 64, dtype=torch.float16)
    out = tilelang.compile(masked(0, 256), out_idx=[1], target="sim")(a)
    assert torch.equal(out, a)
    ptxas(tilelang.compile(masked(0, 256), out_idx=[1]).get_kernel_source(arch="sm_90a"),
          "sm_90a")


def test_threads_given_as_a_tuple_of_the_program():
    # threads=(64, 2) through a closure name: tx is the index along x, 0..63, so
    # `tx < 64` is every thread's branch
    threads = (64, 2)

    @T.prim_func
    def main(A: T.Tensor((32, 32), "float32"), C: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, threads=threads):
            tx = T.get_thread_binding()
            S = T.alloc_shared((32, 32), "float32")
            if tx < 64:
                T.copy(A, S)
            T.copy(S, C)
    a, c = torch.randn(32, 32), torch.zeros(32, 32)
    tilelang.compile(main, target="sim")(a, c)
    assert torch.equal(a, c)
    assert ".entry" in tilelang.compile(main).get_kernel_source(arch="sm_90a")


def exchanging(lo, hi, threads=256, scale=False):
    """The range's threads copy A into S and S (transposed, so every element crosses
    threads) into B inside their branch: a barrier of those threads goes between."""
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=threads):
            S = T.alloc_shared((64, 64), "float32")
            tx = T.get_thread_binding(0)
            if tx >= lo and tx < hi:
                T.copy(A, S)
                for i, j in T.Parallel(64, 64):
                    B[i, j] = S[j, i] * (2 if scale else 1)
    return main


def test_threads_of_a_range_exchanging_data_get_their_named_barrier(ptxas, tmp_path,
                                                                      monkeypatch):
    a = torch.randn(64, 64)
    out = tilelang.compile(exchanging(128, 256), out_idx=[1], target="sim")(a)
    assert torch.equal(out, a.T)
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    monkeypatch.setenv("TILEJIT_DUMP_IR", str(tmp_path))
    ptx = tilelang.compile(exchanging(128, 256), out_idx=[1]).get_kernel_source(arch="sm_90a")
    assert "bar.sync 15, 128;" in ptx
    ptxas(ptx, "sm_90a")
    # the GPU compilation's dump (tilejit.compile compiled for the simulator too)
    (program,) = [p for p in tmp_path.glob("*/*after_insert_barriers.py")
              if any(p.parent.glob("*kernel.ptx"))]
    (branch,) = [n for n in ast.walk(ast.parse(program.read_text())) if isinstance(n, ast.If)
                 and ast.unparse(n.test).startswith("tx >= lo")]
    body = [ast.unparse(s) for s in branch.body]
    assert len(body) == 3 and body[1] == "__tj_sync_range(15, 128)", body


def test_a_range_that_is_not_whole_warps_cannot_exchange_data_inside():
    with pytest.raises(CompileError, match=r"threads 100…255 exchange data through 'S'.*"
                                           r"multiples of 32"):
        tilelang.compile(exchanging(100, 256), out_idx=[1], target="cuda")


@pytest.mark.gpu
@pytest.mark.parametrize("lo,hi", [(0, 128), (128, 256), (32, 96)])
def test_threads_of_a_range_exchanging_data_on_the_gpu(lo, hi):
    kernel = tilelang.compile(exchanging(lo, hi, scale=True), out_idx=[1])
    a = torch.randn(64, 64, device="cuda")
    for _ in range(20):
        assert torch.equal(kernel(a), a.T * 2)


def tickets(n=8, threads=32):
    """Thread 0 of each block takes a ticket (an element atomic, each thread's own):
    allowed under the branch (found by a user-style fuzz: refused as a tile operation)."""
    @T.prim_func
    def main(Cnt: T.Tensor((1,), "int32"), Out: T.Tensor((n,), "int32"),
             Hi: T.Tensor((1,), "float32")):
        with T.Kernel(n, threads=threads) as bx:
            tx = T.get_thread_binding(0)
            if tx == 0:
                Out[bx] = T.atomic_add(Cnt[0], 1, return_prev=True)
            if tx < 16:
                T.atomic_max(Hi[0], T.cast(bx * 16 + tx, "float32"))
    return main


def test_an_element_atomic_under_a_branch_is_the_threads_own(ptxas):
    cnt, out, hi = torch.zeros(1, dtype=torch.int32), torch.zeros(8, dtype=torch.int32), \
        torch.zeros(1)
    tilelang.compile(tickets())(cnt, out, hi)
    assert cnt.item() == 8 and sorted(out.tolist()) == list(range(8))
    assert hi.item() == 7 * 16 + 15
    ptxas(tilelang.compile(tickets(), target="cuda -arch=sm_90a").get_kernel_source(),
          "sm_90a")


@pytest.mark.gpu
def test_an_element_atomic_under_a_branch_on_the_gpu():
    cnt = torch.zeros(1, dtype=torch.int32, device="cuda")
    out = torch.zeros(8, dtype=torch.int32, device="cuda")
    hi = torch.zeros(1, device="cuda")
    tilelang.compile(tickets())(cnt, out, hi)
    assert cnt.item() == 8 and sorted(out.cpu().tolist()) == list(range(8))
    assert hi.item() == 7 * 16 + 15
