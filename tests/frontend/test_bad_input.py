"""Issue 23: bad input gets a clear error naming what is wrong, before anything runs
(SPEC, Errors), and the same one in the simulator as on the GPU path."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T


def a32(n=64):
    return np.zeros(n, np.float32)


@tilejit.kernel
def add(A, B, C, block: T.constexpr = 32):
    N = A.shape[0]
    with T.Kernel(T.ceildiv(N, block), threads=32) as bx:
        for i in T.Parallel(block):
            idx = bx * block + i
            if idx < N:
                C[idx] = A[idx] + B[idx]  # ADD-LINE


def both(kernel, *args, **kwargs):
    """The call in the simulator, then compiled for the GPU: (first error, second)."""
    errors = []
    for run in (lambda: kernel(*args, **kwargs),
                lambda: kernel.compile(*args, target="cuda", arch="sm_90a", **kwargs)):
        with pytest.raises(Exception) as info:
            run()
        errors.append(info.value)
    assert type(errors[0]) is type(errors[1]) and str(errors[0]) == str(errors[1])
    return errors[0]


# -- 1: a number or None where the kernel uses a tensor -------------------------------
@pytest.mark.parametrize("value, got", [(1.0, "got float 1.0"), (None, "got None"),
                                        (3, "got int 3")])
def test_a_number_or_none_for_a_tensor_names_the_parameter(value, got):
    e = both(add, a32(), value, a32())
    assert isinstance(e, TypeError)
    msg = str(e)
    assert "argument 'B'" in msg and "expected a tensor" in msg and got in msg
    assert "ADD-LINE" in msg


def test_an_optional_tensor_compared_with_none_may_be_none():
    @tilejit.kernel
    def maybe(A, B=None):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(32):
                A[i] = 1.0
                if B is not None:
                    B[i] = 2.0

    a = np.zeros(32, np.float32)
    maybe(a)
    assert (a == 1).all()


# -- 2: a zero constexpr divisor -------------------------------------------------------
def test_a_zero_divisor_is_reported_at_the_kernel_line_with_the_constexpr():
    e = both(add, a32(), a32(), a32(), block=0)
    assert isinstance(e, ZeroDivisionError)
    msg = str(e)
    assert "division by zero" in msg and "block=0" in msg and __file__ in msg
    assert "T.Kernel(T.ceildiv(N, block), threads=32)" in msg


def test_a_zero_divisor_before_the_launch_names_its_own_line():
    @tilejit.kernel
    def tiles(A, block: T.constexpr = 32):
        n = A.shape[0] // block  # HOST-DIVISION
        with T.Kernel(n, threads=32) as bx:
            A[bx] = 1.0

    e = both(tiles, a32(), block=0)
    assert "HOST-DIVISION" in str(e) and "block=0" in str(e)


# -- 3: a run-time T.Parallel extent ---------------------------------------------------
def test_a_run_time_parallel_extent_leads_with_the_reason_and_names_the_extent():
    """A T.Parallel over a run-time extent is the threads' element loop
    (passes/dynamic_parallel.py); over a fragment it is an error that leads with the
    reason, names the fragment and quotes the line."""
    @tilejit.kernel
    def dynamic(A, m):
        with T.Kernel(1, threads=32) as bx:
            F = T.alloc_fragment((16,), "float32")
            for i in T.Parallel(m):  # RUNTIME-EXTENT
                F[i] = bx
            T.copy(F, A[0:16])

    e = both(dynamic, a32(), 16)
    assert isinstance(e, tilejit.CompileError)
    msg = str(e)
    assert msg.startswith("`for ... in T.Parallel(m)`: a T.Parallel over extents known only "
                          "at run time indexes fragment 'F'")
    assert "No implementation" not in msg and "candidate" not in msg
    assert __file__ in msg and "RUNTIME-EXTENT" in msg


# -- 4: a plain Python function called in a kernel --------------------------------------
def plus_one(x):
    return x + 1


def scaled(x, s):
    return plus_one(x) * s       # a helper calling a helper: both inlined


def test_a_plain_function_is_inlined_as_tilelang_runs_it(ptxas):
    """TileLang runs a plain helper while it builds the kernel; tilejit compiles it inline
    (as a @T.macro): the simulator calls it, the GPU code has no call."""
    @tilejit.kernel
    def calls(A):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(32):
                A[i] = plus_one(A[i])

    a = np.arange(32, dtype=np.float32)
    calls(a)
    np.testing.assert_array_equal(a, np.arange(32) + 1)
    ptx = calls.compile(a, target="cuda", arch="sm_80").ptx
    assert "call.uni" not in ptx and "add.f32" in ptx
    ptxas(ptx, "sm_80")


def test_helpers_calling_helpers_are_inlined_too():
    @tilejit.kernel
    def calls(A):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(32):
                A[i] = scaled(A[i], 3.0)

    a = np.arange(32, dtype=np.float32)
    calls(a)
    np.testing.assert_array_equal(a, (np.arange(32) + 1) * 3)
    assert "call.uni" not in calls.compile(a, target="cuda", arch="sm_90a").ptx


def merges_options(x):
    options = {}
    return plus_one(x, **options)          # MERGE-LINE: a call with **, Python-only


def test_a_helper_with_python_only_forms_is_an_error_at_its_line():
    @tilejit.kernel
    def calls(A):
        with T.Kernel(1, threads=32) as bx:
            # (a call of it in an expression evaluated each time is inlined; under
            # `x if c else y` it stays a device function)
            A[bx] = merges_options(A[bx]) + 1 if bx >= 0 else A[bx]

    with pytest.raises(tilejit.CompileError, match=r"unsupported in a kernel or a helper it "
                                                   r"calls") as info:
        calls.compile(a32(), target="cuda", arch="sm_80")
    assert info.value.filename == __file__
    assert "MERGE-LINE" in str(info.value)


# -- 5: print() and T.print of a tensor ------------------------------------------------
def test_print_as_a_value_is_a_compile_error_pointing_to_t_print():
    """A print() statement runs when the kernel is parsed (test_trace_prints.py); its
    value is nothing a kernel can use."""
    with pytest.raises(tilejit.CompileError) as info:
        @tilejit.kernel
        def prints(A):
            with T.Kernel(1, threads=32) as bx:
                A[bx] = print(A)  # BUILTIN-PRINT

    msg = str(info.value)
    assert "print() as a value" in msg and "T.print" in msg and "BUILTIN-PRINT" in msg
    assert "internal compiler error" not in msg


def test_print_before_the_launch_runs_at_parse_too(capsys):
    @tilejit.kernel
    def host_prints(A):
        print("launching")
        with T.Kernel(1, threads=32) as bx:
            A[bx] = 1.0
    assert capsys.readouterr().out == "launching\n"
    a = np.zeros(1, np.float32)
    host_prints(a)
    assert a[0] == 1.0 and capsys.readouterr().out == ""


def test_t_print_of_an_unannotated_tensor_is_a_clear_error():
    """A tile or an annotated tensor prints element by element (test_print_buffers.py);
    a parameter without a T.Tensor annotation has no shape to print by."""
    @tilejit.kernel
    def t_prints(A):
        with T.Kernel(1, threads=32) as bx:
            T.print(A)  # T-PRINT
            A[bx] = 1.0

    e = both(t_prints, a32())
    msg = str(e)
    assert msg.startswith("T.print prints a number (a scalar, or one element such as A[i]")
    assert "T-PRINT" in msg and "No implementation" not in msg


# -- 6: an IR dump directory that cannot be written ------------------------------------
def test_an_unwritable_dump_directory_names_the_variable_and_the_path(tmp_path, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    where = str(blocker / "dump")
    monkeypatch.setenv("TILEJIT_DUMP_IR", where)

    @tilejit.kernel
    def dumped(A):
        with T.Kernel(1, threads=32) as bx:
            A[bx] = 1.0

    for run in (lambda: dumped(a32()),
                lambda: dumped.compile(a32(), target="cuda", arch="sm_90a")):
        with pytest.raises(OSError) as info:
            run()
        msg = str(info.value)
        assert f"TILEJIT_DUMP_IR={where!r}" in msg and "cannot write the IR dump" in msg


# -- 7: a grid beyond CUDA's limits ----------------------------------------------------
@tilejit.kernel
def grid_of(A, gx, gy, gz):
    with T.Kernel(gx, gy, gz, threads=32) as (bx, by, bz):
        A[0] = 1.0


@pytest.mark.parametrize("grid, axis, limit", [((2 ** 31, 1, 1), "0 (x)", 2 ** 31 - 1),
                                               ((1, 65536, 1), "1 (y)", 65535),
                                               ((1, 1, 70000), "2 (z)", 65535)])
def test_a_grid_beyond_cudas_limits_is_refused_before_launch(grid, axis, limit):
    e = both(grid_of, a32(), *grid)
    assert isinstance(e, ValueError)
    msg = str(e)
    big = max(grid)
    assert f"grid extent {axis} is {big}" in msg and f"limit of {limit}" in msg


@tilejit.kernel
def one_block_per_row(A):
    n, = A.shape
    with T.Kernel(T.ceildiv(n, 32), threads=32) as bx:
        for i in T.Parallel(32):
            if bx * 32 + i < n:
                A[bx * 32 + i] = 1.0


@pytest.mark.parametrize("grid, axis", [((0, 1, 1), "0 (x)"), ((4, 0, 1), "1 (y)"),
                                        ((4, 2, 0), "2 (z)")])
def test_an_empty_grid_is_refused_before_launch(grid, axis):
    # CUDA's launch refuses an empty grid; TileLang raises (its issue 1993): so here, on
    # every target, where a launch that does nothing would hide a size gone wrong
    e = both(grid_of, a32(), *grid)
    assert isinstance(e, ValueError)
    assert f"grid extent {axis} is 0 (grid {grid})" in str(e)
    assert "at least one block in each dimension" in str(e)
    e = both(one_block_per_row, np.zeros(0, np.float32))
    assert isinstance(e, ValueError) and "grid extent 0 (x) is 0 (grid (0,))" in str(e)


@pytest.mark.gpu
def test_an_empty_grid_is_refused_on_the_gpu():
    import torch
    ok = torch.zeros(40, device="cuda")
    one_block_per_row(ok)
    torch.cuda.synchronize()
    assert bool((ok == 1).all())
    with pytest.raises(ValueError, match=r"grid extent 0 \(x\) is 0"):
        one_block_per_row(torch.zeros(0, device="cuda"))
    guard = torch.zeros(4, device="cuda")
    with pytest.raises(ValueError, match=r"grid extent 0 \(x\) is 0"):
        grid_of(guard, 0, 1, 1)
    torch.cuda.synchronize()
    assert bool((guard == 0).all())
    one_block_per_row(ok)           # the kernel launches again after the refusals
    torch.cuda.synchronize()


def test_the_largest_grid_is_accepted():
    grid_of.compile(a32(), 2 ** 31 - 1, 65535, 65535, target="cuda", arch="sm_90a")


# -- 9: a read-only output array -------------------------------------------------------
def read_only(n=64):
    a = np.zeros(n, np.float32)
    a.setflags(write=False)
    return a


def test_a_read_only_output_names_the_parameter():
    e = both(add, a32(), a32(), read_only())
    assert isinstance(e, ValueError)
    msg = str(e)
    assert "argument 'C'" in msg and "read-only" in msg and "ADD-LINE" in msg


def test_a_read_only_input_is_fine():
    c = a32()
    add(read_only(), read_only(), c)
    assert (c == 0).all()


@T.macro
def store_one(X, i):
    X[i] = 1.0


def test_a_read_only_array_written_through_a_macro_names_the_parameter():
    @tilejit.kernel
    def via_macro(A, C):
        with T.Kernel(1, threads=32) as bx:
            store_one(C, bx)

    with pytest.raises(ValueError, match=r"writes a read-only array: argument 'C'"):
        via_macro(a32(), read_only())


def test_tile_operation_destinations_count_as_writes():
    @tilejit.kernel
    def copies(A, C):
        with T.Kernel(1, threads=32) as bx:
            s = T.alloc_shared((32,), T.float32)
            T.copy(A[0], s)
            T.copy(s, C[0])  # TILE-WRITE

    e = both(copies, a32(), read_only())
    assert "argument 'C'" in str(e) and "TILE-WRITE" in str(e)


# -- 10: what a T.constexpr may be -----------------------------------------------------
def test_a_float_for_an_integer_constexpr_is_refused_at_bind_time():
    e = both(add, a32(), a32(), a32(), block=32.0)
    assert isinstance(e, TypeError)
    msg = str(e)
    assert "argument 'block'" in msg and "must be an int" in msg and "float 32.0" in msg
    assert "extent" in msg


def test_a_float_constexpr_that_is_no_extent_is_fine():
    @tilejit.kernel
    def scaled(A, scale: T.constexpr = 1):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(32):
                A[i] = scale * 2.0

    a = np.zeros(32, np.float32)
    scaled(a, scale=0.25)
    assert (a == 0.5).all()


@pytest.mark.parametrize("value", [np.zeros(1, np.int64), np.zeros(4, np.int64)])
def test_an_array_passed_as_a_constexpr_is_refused_at_bind_time(value):
    e = both(add, a32(), a32(), a32(), block=value)
    assert isinstance(e, TypeError)
    msg = str(e)
    assert "argument 'block'" in msg and "a T.constexpr must be an int" in msg
    assert "got ndarray" in msg and "not annotated T.constexpr" in msg


def test_a_numpy_integer_constexpr_is_its_value():
    c = a32()
    add(np.ones(64, np.float32), a32(), c, block=np.int64(32))
    assert (c == 1).all()


def _reduce_along(M, N, dim):
    out_shape = (M,) if dim == 1 else (1, N)

    @T.prim_func
    def f(A: T.Tensor((M, N), "float32"), O: T.Tensor(out_shape, "float32")):
        with T.Kernel(1, threads=128):
            x = T.alloc_fragment((M, N), "float32")
            T.copy(A, x)
            if dim == 1:
                r = T.alloc_fragment((M,), "float32")
                T.reduce_sum(x, r, dim=1)
                T.copy(r, O[0])
            else:
                r = T.alloc_fragment((N,), "float32")
                T.reduce_sum(x, r, dim=0)
                T.copy(r, O[0, 0])
    return f


@pytest.mark.parametrize("dim", [1, 0])
def test_a_rank_read_in_a_branch_not_taken_is_not_checked(dim):
    """A compile-time `if` of the program's closure picks how O is indexed: the branch
    not taken says nothing about O's rank (found by a user-style fuzz: the call was
    refused with the dead branch's rank)."""
    import torch
    import tilejit as tilelang
    a = torch.randn(8, 16)
    out = tilelang.compile(_reduce_along(8, 16, dim), out_idx=[1])(a)
    torch.testing.assert_close(out.reshape(-1), a.sum(dim), atol=1e-5, rtol=1e-5)


@tilejit.kernel
def add_a_zero_d(A, S):
    with T.Kernel(1, threads=64):
        for i in T.Parallel(A.shape[0]):
            A[i] = A[i] + S[()]


def test_a_zero_d_tensor():
    """Found by a review: a 0-d tensor argument was an internal compiler error. Read as
    S[()] it is TileLang's 0-d tensor (tests/tilelang/test_scalar_tensors.py)."""
    a = np.ones(64, np.float32)
    add_a_zero_d(a, np.array(3.0, np.float32))
    assert (a == 4).all()


@tilejit.kernel
def size_of(A, S, out):
    with T.Kernel(1, threads=32):
        out[0] = A.shape[0]


def test_a_zero_d_tensor_the_kernel_does_not_read_as_one_is_refused_by_name():
    with pytest.raises(ValueError, match=r"argument 'S': a 0-d ndarray is not supported "
                       r"here \(the kernel does not read it as S\[\(\)\]\)"):
        size_of(np.zeros(4, np.float32), np.array(3.0, np.float32), np.zeros(1, np.int32))
