"""SPEC's Errors: bad arguments fail before any launch, naming the parameter, the
expected and the received; unsupported code fails with CompileError quoting the
kernel's file, line and source text."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T
from elementwise_2d import scale_bias
from vector_add import vector_add


def a32(n=16):
    return np.zeros(n, np.float32)


def test_too_many_arguments():
    with pytest.raises(TypeError, match=r"vector_add\(\) takes 4 argument"):
        vector_add(a32(), a32(), a32(), 1024, 5)


def test_missing_argument():
    with pytest.raises(TypeError, match=r"missing argument 'C'"):
        vector_add(a32(), a32())


def test_unknown_keyword():
    with pytest.raises(TypeError, match=r"unexpected argument 'blk'"):
        vector_add(a32(), a32(), a32(), blk=3)


def test_wrong_rank_names_parameter_and_line():
    x = np.zeros(16, np.float32)  # the kernel unpacks `M, N = X.shape`
    with pytest.raises(ValueError) as info:
        scale_bias(x, x, x, 1.0)
    msg = str(info.value)
    assert "argument 'X'" in msg and "2-d" in msg and "1-d" in msg and "line" in msg


def test_unsupported_dtype():
    x = np.zeros(16, np.complex64)
    with pytest.raises(TypeError, match=r"complex64"):
        vector_add(x, x, x)


def test_unsupported_argument_kind():
    with pytest.raises(TypeError, match=r"argument 'B'.*list"):
        vector_add(a32(), [1.0, 2.0], a32())


def test_bad_threads():
    @tilejit.kernel
    def k(A):
        with T.Kernel(1, threads=1025) as bx:
            A[bx] = 1

    with pytest.raises(ValueError, match=r"threads: expected a count in \[1, 1024\], got 1025"):
        k(a32())


def test_missing_kernel_block():
    def body(A):
        A[0] = 1

    with pytest.raises(tilejit.CompileError, match=r"with T.Kernel"):
        tilejit.kernel(body)


def _compile_error(fn, *args) -> str:
    with pytest.raises(tilejit.CompileError) as info:
        fn.compile(*args, target="cuda", arch="sm_90")
    return str(info.value)


def test_unsupported_syntax_quotes_line():
    with pytest.raises(tilejit.CompileError) as info:
        @tilejit.kernel
        def uses_try(A):
            with T.Kernel(1, threads=32) as bx:
                try:  # UNSUPPORTED-TRY
                    A[bx] = 1
                except Exception:
                    pass

    msg = str(info.value)
    assert __file__ in msg and "UNSUPPORTED-TRY" in msg and "try/except" in msg


def test_type_error_quotes_line():
    @tilejit.kernel
    def adds_tensor(A, B):
        with T.Kernel(1, threads=32) as bx:
            B[bx] = A + 1.0  # TYPE-ERROR-LINE

    msg = _compile_error(adds_tensor, a32(), a32())
    assert __file__ in msg and "TYPE-ERROR-LINE" in msg


def test_runtime_parallel_extent_over_a_fragment_is_an_error():
    @tilejit.kernel
    def dynamic_tile(A, n):
        with T.Kernel(1, threads=32) as bx:
            F = T.alloc_fragment((16,), "float32")
            for i in T.Parallel(n):  # DYNAMIC-EXTENT
                F[i] = bx
            T.copy(F, A[0:16])

    msg = _compile_error(dynamic_tile, a32(), 16)
    assert "known only at run time" in msg and "DYNAMIC-EXTENT" in msg


def test_a_slice_stored_into_one_element_is_an_error():
    @tilejit.kernel
    def slices(A, B):
        with T.Kernel(1, threads=32) as bx:
            B[bx] = A[0:4]  # SLICE-LINE

    msg = _compile_error(slices, a32(), a32())
    assert "stores a vector into one element, `B[bx]`" in msg and "SLICE-LINE" in msg


def test_same_error_in_simulation():
    @tilejit.kernel
    def adds_tensor(A, B):
        with T.Kernel(1, threads=32) as bx:
            B[bx] = A + 1.0  # SIM-TYPE-ERROR

    with pytest.raises(tilejit.CompileError, match="SIM-TYPE-ERROR"):
        adds_tensor(a32(), a32())


def test_target_cuda_with_host_arrays():
    k = tilejit.kernel(target="cuda")(vector_add.func)
    with pytest.raises(ValueError, match=r"target 'cuda' needs the tensors on a CUDA device"):
        k(a32(), a32(), a32())


@pytest.mark.gpu
def test_mixed_devices():
    import torch
    a = torch.zeros(16, device="cuda")
    with pytest.raises(ValueError, match=r"different devices.*'A'.*'B'"):
        vector_add(a, torch.zeros(16), a)


def test_a_region_in_a_message_is_written_as_in_the_source():
    """A pass's error quoting a rewritten T.copy shows its regions as the kernel wrote
    them, not the internal `__tj_region(...)` form (found by a user-style fuzz)."""
    import tilejit
    import tilejit.language as T

    @T.prim_func
    def main(A: T.Tensor((128, 128), "float16"), B: T.Tensor((128, 128), "float16")):
        with T.Kernel(1, threads=128):
            T.copy(A[:, :2], B[1, 1:4])             # 128 x 2 into 3: no copy

    with pytest.raises(tilejit.CompileError) as info:
        tilejit.compile(main, target="cuda -arch=sm_90a")
    message = str(info.value)
    assert "__tj_region" not in message
    assert "A[:, :2]" in message and "B[1, 1:4]" in message


def test_a_lowering_rules_error_names_the_kernels_line():
    """A rule of the lowering that raises without a place (a copy's extents that
    differ) gets the line being lowered (found by a user-style fuzz)."""
    import tilejit
    import tilejit.language as T

    @T.prim_func
    def main(A: T.Tensor((32, 32), "float32"), B: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((16, 16), "float32")
            T.copy(A[0:32, 0:8], f)                 # 32 x 8 into 16 x 16
            T.copy(f, B[0:16, 0:16])

    with pytest.raises(tilejit.CompileError, match=r"source's extent \(32, 8\)") as info:
        tilejit.compile(main)(np.zeros((32, 32), np.float32), np.zeros((32, 32), np.float32))
    assert info.value.lineno is not None and "32 x 8 into 16 x 16" in str(info.value)


def test_a_list_chosen_by_a_compile_time_condition_is_a_shape():
    """`T.alloc_shared([16, N] if wide else [8, N], ...)`: a list in a call's argument is a
    compile-time value also through a conditional expression (found by a user-style
    fuzz); a list elsewhere is refused with the tuple that holds the same values."""
    import tilejit
    import tilejit.language as T

    def program(wide):
        @T.prim_func
        def main(A: T.Tensor((16, 16), "float32"), B: T.Tensor((16, 16), "float32")):
            with T.Kernel(1, threads=128):
                S = T.alloc_shared([16, 16] if wide else [8, 16], "float32")
                for i, j in T.Parallel(S.shape[0], 16):
                    S[i, j] = A[i, j] * 2.0
                for i, j in T.Parallel(S.shape[0], 16):
                    B[i, j] = S[i, j]
        return main

    a = np.arange(256, dtype=np.float32).reshape(16, 16)
    for wide, rows in ((True, 16), (False, 8)):
        b = np.zeros_like(a)
        tilejit.compile(program(wide))(a, b)
        np.testing.assert_array_equal(b[:rows], 2 * a[:rows])
        assert not b[rows:].any()

    @T.prim_func
    def weights(A: T.Tensor((3,), "float32")):
        with T.Kernel(1, threads=32):
            ws = [1.0, 2.0, 3.0]
            for i in T.Parallel(3):
                A[i] = ws[i]

    with pytest.raises(tilejit.CompileError, match=r"a list \(a tuple holds the same "
                                                   r"values in a kernel: `\(1.0, 2.0, 3.0\)`"):
        tilejit.compile(weights)(np.zeros(3, np.float32))


def test_a_tuple_indexed_by_a_parallel_index():
    """The tuple the list's message suggests, read at a T.Parallel's index: each
    iteration its element (the simulator's vectorized loop indexed the tuple with the
    index array: a TypeError)."""
    import tilejit
    import tilejit.language as T

    @T.prim_func
    def weights(A: T.Tensor((3,), "float32")):
        with T.Kernel(1, threads=32):
            ws = (1.0, 2.0, 3.0)
            for i in T.Parallel(3):
                A[i] = ws[i] * 2.0

    a = np.zeros(3, np.float32)
    tilejit.compile(weights)(a)
    np.testing.assert_array_equal(a, [2.0, 4.0, 6.0])
    assert tilejit.compile(weights, target="cuda -arch=sm_90a").get_kernel_source()


def test_a_macros_names_are_shown_as_written():
    """An error in an inlined macro names its locals as the source spells them, not as
    renamed apart from the kernel's (`acc__step1`; found by a third-party FP8 GEMM)."""
    import tilejit
    import tilejit.language as T

    @T.macro
    def step(C_local, out):
        acc = T.alloc_fragment((64, 64), "float32")
        for i, j in T.Parallel(64, 64):
            acc[j, i // 2] = C_local[i, j]
        T.copy(acc, out)

    @T.prim_func
    def main(X: T.Tensor((64, 64), "float32"), Y: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            c = T.alloc_fragment((64, 64), "float32")
            T.copy(X, c)
            step(c, Y)

    with pytest.raises(tilejit.CompileError) as info:
        tilejit.compile(main, target="cuda -arch=sm_90a")
    assert "`acc[j, i // 2]`" in str(info.value) and "__step" not in str(info.value)
