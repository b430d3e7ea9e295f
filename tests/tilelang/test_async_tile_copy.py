"""TileLang's ``T.async_copy`` (a global region into a shared tile, not waited for) with
``T.ptx_wait_group``: a tile used (or a view of it) while its copy may be in flight is a
CompileError at that line, along every path, each path's copies counted on their own
(``frontend/async_tile_copies.py``: branches, loops run any number of times, ``break``
and ``continue``, the taken arm of a compile-time ``if``); a program that waits is
the same kernel as with ``T.copy`` (TileLang's own equivalence test, on sm_80 and
sm_90a), checked against torch in the simulator and on the device."""
import pytest
import torch

import tilejit
import tilejit as tilelang
import tilejit.language as T


def relu_matmul(M, N, K, block_M=128, block_N=128, block_K=32, asynchronous=True):
    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
             C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M)) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), T.float16)
            B_shared = T.alloc_shared((block_K, block_N), T.float16)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                if asynchronous:
                    T.async_copy(A[by * block_M, ko * block_K], A_shared)
                    T.ptx_wait_group(0)
                    T.async_copy(B[ko * block_K, bx * block_N], B_shared)
                    T.ptx_wait_group(0)
                else:
                    T.copy(A[by * block_M, ko * block_K], A_shared)
                    T.copy(B[ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = T.max(C_local[i, j], 0)
            T.copy(C_local, C[by * block_M, bx * block_N])
    return main


def _ptx(func, arch):
    return tilelang.compile(func, target=f"cuda -arch={arch}").get_kernel_source()


def test_the_waited_copy_computes_the_product():
    a, b = torch.randn(256, 128).half(), torch.randn(128, 256).half()
    c = torch.zeros(256, 256).half()
    tilelang.compile(relu_matmul(256, 256, 128), target="sim")(a, b, c)
    torch.testing.assert_close(c, torch.relu(a.double() @ b.double()).half(), rtol=1e-2,
                               atol=1e-2)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_async_copy_and_wait_is_the_copys_kernel(arch, ptxas):
    ptx = _ptx(relu_matmul(256, 256, 128), arch)
    assert ptx == _ptx(relu_matmul(256, 256, 128, asynchronous=False), arch)
    if arch == "sm_80":
        assert "cp.async" in ptx
    ptxas(ptx, arch)


def _compile(func):
    return tilelang.compile(func, target="sim")


def test_a_tile_used_before_its_wait_is_an_error():
    @T.prim_func
    def early(A: T.Tensor((4,), T.float16), B: T.Tensor((4,), T.float16)):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((4,), T.float16)
            T.async_copy(A[0:4], S)
            T.copy(S, B[0:4])
    with pytest.raises(tilejit.CompileError, match=r"'S' is used while the T.async_copy into "
                       r"it \(line \d+\) may still be in flight") as info:
        _compile(early)
    assert "T.copy(S, B[0:4])" in str(info.value)

    @T.prim_func
    def waits_for_the_older_only(A: T.Tensor((8,), T.float16), B: T.Tensor((8,), T.float16)):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((4,), T.float16)
            R = T.alloc_shared((4,), T.float16)
            T.async_copy(A[0:4], S)
            T.async_copy(A[4:8], R)
            T.ptx_wait_group(1)             # S has landed; R may not have
            T.copy(S, B[0:4])
            T.copy(R, B[4:8])
    with pytest.raises(tilejit.CompileError, match="'R' is used while"):
        _compile(waits_for_the_older_only)


def test_a_copy_carried_into_the_next_iteration_is_checked():
    @T.prim_func
    def prefetch(A: T.Tensor((512,), T.float32), B: T.Tensor((512,), T.float32)):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((128,), T.float32)
            T.async_copy(A[0:128], S)
            for k in T.serial(4):
                T.copy(S, B[k * 128:(k + 1) * 128])     # the next copy is in flight
                if k < 3:
                    T.async_copy(A[(k + 1) * 128:(k + 2) * 128], S)
    with pytest.raises(tilejit.CompileError, match="'S' is used while"):
        _compile(prefetch)

    @T.prim_func
    def prefetch_waited(A: T.Tensor((512,), T.float32), B: T.Tensor((512,), T.float32)):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((128,), T.float32)
            T.async_copy(A[0:128], S)
            for k in T.serial(4):
                T.ptx_wait_group(0)
                T.copy(S, B[k * 128:(k + 1) * 128])
                if k < 3:
                    T.async_copy(A[(k + 1) * 128:(k + 2) * 128], S)
    a, b = torch.randn(512), torch.zeros(512)
    _compile(prefetch_waited)(a, b)
    assert torch.equal(a, b)


def test_operands_and_arguments_are_checked():
    @T.prim_func
    def shared_to_global(A: T.Tensor((4,), T.float16)):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((4,), T.float16)
            T.clear(S)
            T.async_copy(S, A[0:4])
    with pytest.raises(tilejit.CompileError, match=r"copies a region of a global tensor into "
                       r"a shared tile \(cp.async\), got `S` → `A\[0:4\]`"):
        _compile(shared_to_global)

    @T.prim_func
    def bad_wait(A: T.Tensor((4,), T.float16), n: T.int32):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((4,), T.float16)
            T.async_copy(A[0:4], S)
            T.ptx_wait_group(n)
    with pytest.raises(tilejit.CompileError, match=r"a non-negative int known at compile"):
        _compile(bad_wait)

    @T.prim_func
    def unknown_keyword(A: T.Tensor((4,), T.float16)):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((4,), T.float16)
            T.async_copy(A[0:4], S, disable_tma=True)
    with pytest.raises(tilejit.CompileError, match="unexpected argument 'disable_tma'"):
        _compile(unknown_keyword)


def test_a_copy_never_used_needs_no_wait():
    @T.prim_func
    def unused(A: T.Tensor((130, 32), T.float16), B: T.Tensor((130, 32), T.float16)):
        with T.Kernel(2, threads=128) as pid:
            S = T.alloc_shared((128, 32), T.float16)
            T.async_copy(A[pid * 128:(pid + 1) * 128, 0:32], S)
            B[0, 0] = A[0, 0]
    a, b = torch.randn(130, 32).half(), torch.zeros(130, 32).half()
    _compile(unused)(a, b)
    assert b[0, 0] == a[0, 0]


@pytest.mark.gpu
def test_async_copy_on_the_gpu():
    a = torch.randn(512, 256, device="cuda").half()
    b = torch.randn(256, 384, device="cuda").half()
    c = torch.zeros(512, 384, device="cuda").half()
    tilelang.compile(relu_matmul(512, 384, 256))(a, b, c)
    torch.testing.assert_close(c, torch.relu(a.double() @ b.double()).half(), rtol=1e-2,
                               atol=1e-2)
    sim = torch.zeros(512, 384).half()
    tilelang.compile(relu_matmul(512, 384, 256), target="sim")(a.cpu(), b.cpu(), sim)
    torch.testing.assert_close(c.cpu(), sim, rtol=2e-3, atol=2e-3)


@T.macro
def load(A, S, k):
    T.async_copy(A[k * 128:(k + 1) * 128], S)


def test_a_macros_async_copy_and_a_computed_wait():
    stages = 2

    @T.prim_func
    def in_macro(A: T.Tensor((256,), T.float32), B: T.Tensor((256,), T.float32)):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((128,), T.float32)
            for k in T.serial(2):
                load(A, S, k)
                T.ptx_wait_group(stages - 2)
                T.copy(S, B[k * 128:(k + 1) * 128])
    a, b = torch.randn(256), torch.zeros(256)
    tilelang.compile(in_macro, target="sim")(a, b)
    assert torch.equal(a, b)


def _refused(func, message, line):
    """``func`` is a CompileError matching ``message`` that quotes the source ``line``."""
    with pytest.raises(tilejit.CompileError, match=message) as info:
        _compile(func)
    assert line in str(info.value)


_IN_FLIGHT = r"'S' is used while the T.async_copy into it \(line \d+\) may still be in flight"


def test_a_wait_counts_the_copies_of_each_path():
    # the paths that issue another copy and those that do not are counted apart: where
    # the if is not taken, S is the only copy and wait(1) leaves it in flight
    @T.prim_func
    def skipped_arm(A: T.Tensor((8,), T.float32), B: T.Tensor((4,), T.float32), c: T.int32):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((4,), T.float32)
            R = T.alloc_shared((4,), T.float32)
            T.async_copy(A[0:4], S)
            if c > 0:
                T.async_copy(A[4:8], R)
            T.ptx_wait_group(1)
            T.copy(S, B[0:4])   # skipped arm
    _refused(skipped_arm, _IN_FLIGHT, "T.copy(S, B[0:4])   # skipped arm")

    @T.prim_func
    def other_arm(A: T.Tensor((8,), T.float32), B: T.Tensor((4,), T.float32), c: T.int32):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((4,), T.float32)
            R = T.alloc_shared((4,), T.float32)
            if c > 0:
                T.async_copy(A[0:4], S)
            else:
                T.async_copy(A[4:8], R)
            T.ptx_wait_group(1)
            T.copy(S, B[0:4])   # other arm
    _refused(other_arm, _IN_FLIGHT, "T.copy(S, B[0:4])   # other arm")

    @T.prim_func
    def zero_trip(A: T.Tensor((8,), T.float32), B: T.Tensor((4,), T.float32), n: T.int32):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((4,), T.float32)
            R = T.alloc_shared((4,), T.float32)
            T.async_copy(A[0:4], S)
            for _ in T.serial(n):
                T.ptx_wait_group(0)
                T.async_copy(A[4:8], R)
            T.ptx_wait_group(1)
            T.copy(S, B[0:4])   # no iteration
    _refused(zero_trip, _IN_FLIGHT, "T.copy(S, B[0:4])   # no iteration")

    @T.prim_func
    def more_than_issued(A: T.Tensor((8,), T.float32), B: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((4,), T.float32)
            R = T.alloc_shared((4,), T.float32)
            T.async_copy(A[0:4], S)
            T.async_copy(A[4:8], R)
            T.ptx_wait_group(3)     # both may stay in flight
            T.copy(S, B[0:4])   # three allowed
    _refused(more_than_issued, _IN_FLIGHT, "T.copy(S, B[0:4])   # three allowed")


def test_a_break_or_continue_past_the_wait_is_checked():
    @T.prim_func
    def breaks(A: T.Tensor((16,), T.float32), B: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((4,), T.float32)
            for k in T.serial(4):
                T.async_copy(A[k * 4:k * 4 + 4], S)
                if k == 3:
                    break
                T.ptx_wait_group(0)
            T.copy(S, B[0:4])   # after a break
    _refused(breaks, _IN_FLIGHT, "T.copy(S, B[0:4])   # after a break")

    @T.prim_func
    def loop_break(A: T.Tensor((16,), T.float32), B: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((4,), T.float32)
            for k in T.serial(4):
                T.async_copy(A[k * 4:k * 4 + 4], S)
                if k == 3:
                    T.loop_break()
                T.ptx_wait_group(0)
            T.copy(S, B[0:4])   # after T.loop_break
    _refused(loop_break, _IN_FLIGHT, "T.copy(S, B[0:4])   # after T.loop_break")

    # the continue carries S in flight into the next iteration, whose copy writes it
    @T.prim_func
    def continues(A: T.Tensor((16,), T.float32), B: T.Tensor((16,), T.float32)):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((4,), T.float32)
            for k in T.serial(4):
                T.async_copy(A[k * 4:k * 4 + 4], S)     # after a continue
                if k == 1:
                    continue
                T.ptx_wait_group(0)
                T.copy(S, B[k * 4:k * 4 + 4])
    _refused(continues, _IN_FLIGHT, "T.async_copy(A[k * 4:k * 4 + 4], S)     # after a")


def test_a_view_of_a_tile_in_flight_is_the_tile():
    @T.prim_func
    def reshaped(A: T.Tensor((8,), T.float32), B: T.Tensor((8,), T.float32)):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((8,), T.float32)
            V = T.reshape(S, (2, 4))
            T.async_copy(A[0:8], S)
            for i, j in T.Parallel(2, 4):
                B[i * 4 + j] = V[i, j]
    _refused(reshaped, r"'V' \(a view of 'S'\) is used while the T.async_copy into 'S' "
             r"\(line \d+\) may still be in flight", "B[i * 4 + j] = V[i, j]")

    @T.prim_func
    def viewed(A: T.Tensor((8,), T.float32), B: T.Tensor((8,), T.int32)):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((8,), T.float32)
            W = T.view(S, shape=(8,), dtype=T.int32)
            T.async_copy(A[0:8], S)
            for i in T.Parallel(8):
                B[i] = W[i]
    _refused(viewed, r"'W' \(a view of 'S'\) is used while", "B[i] = W[i]")

    @T.prim_func
    def renamed(A: T.Tensor((8,), T.float32), B: T.Tensor((8,), T.float32)):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((8,), T.float32)
            V = S
            T.async_copy(A[0:8], S)
            T.copy(V, B)
    _refused(renamed, r"is used while the T.async_copy", "T.copy(V, B)")


def test_async_copy_is_a_statement_and_its_calls_are_checked():
    @T.prim_func
    def assigned(A: T.Tensor((4,), T.float32), B: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((4,), T.float32)
            _ = T.async_copy(A[0:4], S)
            T.copy(S, B)
    _refused(assigned, "T.async_copy is a statement of its own",
             "_ = T.async_copy(A[0:4], S)")

    @T.prim_func
    def twice(A: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((4,), T.float32)
            T.async_copy(A[0:4], S, src=A[0:4])
    _refused(twice, r"T.async_copy\(src, dst, .*\): src given twice",
             "T.async_copy(A[0:4], S, src=A[0:4])")

    @T.prim_func
    def no_destination(A: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=32):
            T.async_copy(src=A[0:4])
    _refused(no_destination, r"takes a source and a destination, got no dst",
             "T.async_copy(src=A[0:4])")

    @T.prim_func
    def wait_keyword(A: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((4,), T.float32)
            T.async_copy(A[0:4], S)
            T.ptx_wait_group(n=0)
    _refused(wait_keyword, r"T.ptx_wait_group\(num\): unexpected argument 'n'; it takes "
             r"one argument, num \(by position or as num=\)", "T.ptx_wait_group(n=0)")


# -- programs the check accepts: the same in the simulator and on the GPU's PTX ---------

def older_copy_waited():
    """The copy into S is older than either arm's on both paths: wait(1) lands it."""
    @T.prim_func
    def main(A: T.Tensor((12,), T.float32), B: T.Tensor((8,), T.float32), c: T.int32):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((4,), T.float32)
            R = T.alloc_shared((4,), T.float32)
            Q = T.alloc_shared((4,), T.float32)
            T.async_copy(A[0:4], S)
            if c > 0:
                T.async_copy(A[4:8], R)
            else:
                T.async_copy(A[8:12], Q)
            T.ptx_wait_group(1)
            T.copy(S, B[0:4])
            T.ptx_wait_group(0)
            if c > 0:
                T.copy(R, B[4:8])
            else:
                T.copy(Q, B[4:8])
    a = torch.randn(12)
    return main, (a, torch.zeros(8), 1), torch.cat([a[0:4], a[4:8]])


def waited_before_break():
    @T.prim_func
    def main(A: T.Tensor((16,), T.float32), B: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((4,), T.float32)
            for k in T.serial(4):
                T.async_copy(A[k * 4:k * 4 + 4], S)
                if k == 2:
                    T.ptx_wait_group(0)
                    break
                T.ptx_wait_group(0)
            T.copy(S, B)
    a = torch.randn(16)
    return main, (a, torch.zeros(4)), a[8:12]


def keyword_operands():
    @T.prim_func
    def main(A: T.Tensor((4,), T.float32), B: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((4,), T.float32)
            T.async_copy(dst=S, src=A[0:4])
            T.ptx_wait_group(num=0)
            T.copy(S, B)
    a = torch.randn(4)
    return main, (a, torch.zeros(4)), a


def static_flag(use_async=False):
    """The arm a compile-time flag does not take is not checked (its copy unwaited)."""
    @T.prim_func
    def main(A: T.Tensor((4,), T.float32), B: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((4,), T.float32)
            if use_async:
                T.async_copy(A[0:4], S)
            else:
                T.copy(A[0:4], S)
            T.copy(S, B)
    a = torch.randn(4)
    return main, (a, torch.zeros(4)), a


def many_paths(last=0):
    """Eight optional copies in a row: 256 paths, followed as one of an unknown order
    (``_MAX_PATHS``), which wait(0) empties (and wait(last) with last > 0 does not)."""
    @T.prim_func
    def main(A: T.Tensor((32,), T.float32), B: T.Tensor((32,), T.float32), c: T.int32):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((32,), T.float32)
            R0 = T.alloc_shared((4,), T.float32)
            R1 = T.alloc_shared((4,), T.float32)
            R2 = T.alloc_shared((4,), T.float32)
            R3 = T.alloc_shared((4,), T.float32)
            R4 = T.alloc_shared((4,), T.float32)
            R5 = T.alloc_shared((4,), T.float32)
            R6 = T.alloc_shared((4,), T.float32)
            R7 = T.alloc_shared((4,), T.float32)
            T.async_copy(A[0:32], S)
            if c > 0:
                T.async_copy(A[0:4], R0)
            if c > 1:
                T.async_copy(A[4:8], R1)
            if c > 2:
                T.async_copy(A[8:12], R2)
            if c > 3:
                T.async_copy(A[12:16], R3)
            if c > 4:
                T.async_copy(A[16:20], R4)
            if c > 5:
                T.async_copy(A[20:24], R5)
            if c > 6:
                T.async_copy(A[24:28], R6)
            if c > 7:
                T.async_copy(A[28:32], R7)
            T.ptx_wait_group(last)
            T.copy(S, B)
    a = torch.randn(32)
    return main, (a, torch.zeros(32), 5), a


_ACCEPTED = [older_copy_waited, waited_before_break, keyword_operands, static_flag,
             many_paths]


@pytest.mark.parametrize("program", _ACCEPTED, ids=lambda f: f.__name__)
def test_an_accepted_program_computes_the_reference(program):
    func, args, expected = program()
    _compile(func)(*args)
    assert torch.equal(args[1], expected)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("program", _ACCEPTED, ids=lambda f: f.__name__)
def test_an_accepted_program_assembles(program, arch, ptxas):
    ptxas(_ptx(program()[0], arch), arch)


def test_the_taken_arm_of_a_static_flag_is_checked():
    func, args, expected = static_flag(use_async=True)
    with pytest.raises(tilejit.CompileError, match=_IN_FLIGHT) as info:
        _compile(func)
    assert "T.copy(S, B)" in str(info.value)


def test_too_many_paths_are_followed_as_one():
    func, _, _ = many_paths(last=1)     # c <= 0: S is the only copy, left in flight
    with pytest.raises(tilejit.CompileError, match=_IN_FLIGHT) as info:
        _compile(func)
    assert "T.copy(S, B)" in str(info.value)
