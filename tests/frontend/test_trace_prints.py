"""Python's print() in a kernel runs once, when the kernel is parsed (TileLang's trace
time: its issue 830 prints a block index): compile-time values as values, run-time ones
as their source text; the device program holds nothing of it, so the simulator and the
GPU run the kernel as if it were not there."""
import numpy as np
import pytest

import tilejit
import tilejit as tilelang
import tilejit.language as T

BLOCK = 64


def test_printed_once_at_parse_and_gone_from_the_program(capsys):
    @tilejit.kernel
    def fill_rows(A):
        with T.Kernel(2, threads=32) as bx:
            print("block", bx, "of width", BLOCK, sep=" ")
            for i in T.serial(2):
                print(i)
                A[bx, i] = bx + i

    a = np.zeros((2, 2), np.float32)
    fill_rows(a)
    fill_rows(a)
    fill_rows.compile(a, target="cuda", arch="sm_90a")
    assert capsys.readouterr().out == "block bx of width 64\ni\n"
    np.testing.assert_array_equal(a, [[0, 1], [1, 2]])


def test_tilelangs_issue_830_kernels(capsys):
    @tilelang.jit
    def factory(use_tuple_binding: bool = False, threads: int = 32):
        @T.prim_func
        def with_tuple():
            with T.Kernel(1, threads=threads) as (pid,):
                print(pid, threads)

        @T.prim_func
        def with_scalar():
            with T.Kernel(1, threads=threads) as pid:
                print(pid)

        return with_tuple if use_tuple_binding else with_scalar

    for tuple_binding in (False, True):
        assert ".entry" in factory(use_tuple_binding=tuple_binding).get_kernel_source()
    assert capsys.readouterr().out == "pid\npid 32\n"


def test_a_print_used_as_a_value_is_still_an_error():
    def make():
        @tilejit.kernel
        def k(A):
            with T.Kernel(1, threads=32) as bx:
                A[bx] = print(bx)
        return k
    with pytest.raises(tilejit.CompileError, match=r"unsupported in a kernel: print\(\)"):
        make()(np.zeros(1, np.float32))



def shout(x):
    print("helper got", x)
    return x * 2


def test_a_helper_function_that_prints_is_still_an_error():
    """A helper computing a value is compiled as a device function, where print() has
    no trace time to run at: it stays an error naming the helper's line."""
    @tilejit.kernel
    def doubled(A):
        with T.Kernel(1, threads=32) as bx:
            A[bx] = shout(A[bx] + 1)
    with pytest.raises(tilejit.CompileError, match=r"print\(\)"):
        doubled(np.ones(1, np.float32))
