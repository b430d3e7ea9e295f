"""TileLang's front door: the seeds' eager-style programs with only the imports
changed (`import tilejit as tilelang`, `import tilejit.language as T`)."""
import math
import os
import warnings

import numpy as np
import pytest

import tilejit as tilelang
import tilejit.language as T

torch = pytest.importorskip("torch")


# seed 000, chapter 2, as written
@tilelang.jit
def vector_add(A, B, block_M: int = 128):
    M = T.const("M")
    A: T.Tensor((M,), T.float32)
    B: T.Tensor((M,), T.float32)
    C = T.empty((M,), T.float32)

    with T.Kernel(T.ceildiv(M, block_M), threads=128) as (bx,):
        for i in T.Parallel(block_M):
            C[bx * block_M + i] = A[bx * block_M + i] + B[bx * block_M + i]

    return C


# seed 002, chapter 7, as written
@tilelang.jit
def tilelang_vector_add(
    A,
    B,
    block_size: int = 256,
):
    N = T.const("N")

    A: T.Tensor((N,), T.float32)
    B: T.Tensor((N,), T.float32)

    C = T.empty((N,), T.float32)

    with T.Kernel(
        T.ceildiv(N, block_size),
        threads=block_size,
    ) as block_id:
        for thread_id in T.Parallel(block_size):
            index = (
                block_id * block_size
                + thread_id
            )

            if index < N:
                C[index] = A[index] + B[index]

    return C


@tilelang.jit
def scale_rows(X, block_N, dtype="float16"):
    M, N = T.const("M, N")
    X: T.Tensor[[M, N], dtype]
    Y = T.empty((M, N), dtype)
    with T.Kernel(M, threads=128) as row:
        for j in T.Parallel(block_N):
            if j < N:
                Y[row, j] = T.Cast(dtype, X[row, j] * T.cast(row + 1, T.float32))
    return Y


@tilelang.jit
def dynamic_copy(A, block=256):
    n = T.dynamic("n")
    A: T.Tensor((n,), T.float32)
    B = T.empty((n,), T.float32)
    with T.Kernel(T.ceildiv(n, block), threads=128) as bx:
        for i in T.Parallel(block):
            k = bx * block + i
            if k < n:
                B[k] = A[k]
    return B


@tilelang.jit
def dynamic_whole_copy(A, W):
    n = T.dynamic("n")
    m = T.dynamic("m")
    A: T.Tensor((n, 64), T.float32)
    W: T.Tensor((m,), T.float32)               # dynamic, but moved whole to a tile
    B = T.empty((n, 64), T.float32)
    with T.Kernel(n, threads=64) as row:
        w = T.alloc_fragment((64,), T.float32)
        T.copy(W, w)
        for j in T.Parallel(64):
            B[row, j] = A[row, j] * w[j]
    return B


def test_a_dynamic_tensor_moved_whole_to_a_tile_has_the_tiles_extent():
    """Specialized on its shape (the tile's extents are the copy's): another length is
    refused at the call, in the simulator as on the GPU (whose copy was bounds-checked
    where the simulator refused it)."""
    assert dynamic_whole_copy.kernel.whole_copies == ("W",)
    a, w = torch.randn(5, 64), torch.randn(64)
    torch.testing.assert_close(dynamic_whole_copy(a, w), a * w)
    with pytest.raises(tilelang.CompileError, match="has shape \\(40,\\) and tile 'w'"):
        dynamic_whole_copy(a, torch.randn(40))


def test_seed_vector_add_runs_as_written():
    a, b = torch.randn(1024), torch.randn(1024)
    torch.testing.assert_close(vector_add(a, b), a + b)


def test_seed_vector_add_chapter_7():
    a = torch.randn(1 << 16)
    b = torch.randn_like(a)
    torch.testing.assert_close(tilelang_vector_add(a, b), a + b)
    torch.testing.assert_close(tilelang_vector_add(a[:1000], b[:1000]), a[:1000] + b[:1000])


def test_compile_with_symbol_sizes_gives_ptx():
    kernel = vector_add.compile(M=1024)
    src = kernel.get_kernel_source()
    assert ".entry vector_add_kernel" in src
    a, b = torch.randn(1024), torch.randn(1024)
    torch.testing.assert_close(kernel(a, b), a + b)


def test_compile_needs_every_symbol():
    with pytest.raises(TypeError, match="give the size of symbol"):
        vector_add.compile()


def test_bracket_annotations_dtype_parameter_and_cast():
    x = torch.randn(5, 40).half()
    y = scale_rows(x, 64)
    ref = (x.float() * torch.arange(1, 6).float()[:, None]).half()
    torch.testing.assert_close(y, ref)
    xb = torch.randn(3, 10).to(torch.bfloat16)
    yb = scale_rows(xb, 64, dtype="bfloat16")
    torch.testing.assert_close(yb, (xb.float() * torch.arange(1, 4).float()[:, None])
                               .to(torch.bfloat16))


def test_symbol_bound_to_two_sizes_is_an_error_naming_both():
    with pytest.raises(ValueError, match=r"symbol M: A has 8 but B.shape\[0\] is 9"):
        vector_add(torch.randn(8), torch.randn(9))


def test_annotated_dtype_is_checked():
    with pytest.raises(TypeError, match="expected dtype float32"):
        vector_add(torch.randn(8).double(), torch.randn(8).double())


def test_checks_skipped_only_for_shapes_and_settings_checked_before():
    a, b = torch.randn(256), torch.randn(256)      # the seed's listing has no guard
    torch.testing.assert_close(vector_add(a, b), a + b)
    torch.testing.assert_close(vector_add(a, b), a + b)     # the checked-call path
    with pytest.raises(ValueError, match=r"symbol M: A has 256 but B.shape\[0\] is 257"):
        vector_add(a, torch.randn(257))
    with pytest.raises(TypeError, match="expected dtype float32"):
        vector_add(a.double(), b.double())
    with pytest.raises(TypeError, match="expected dtype float32"):
        vector_add(a.double(), b, block_M=[64])     # unhashable: checked every call
    with pytest.raises(TypeError, match="expected dtype float32"):
        vector_add(A=a, B=b.double())
    torch.testing.assert_close(vector_add(B=b, A=a), a + b)


def test_dynamic_symbol_stays_runtime():
    a = np.arange(1000, dtype=np.float32)
    np.testing.assert_array_equal(dynamic_copy(a), a)
    assert dynamic_copy.kernel.shape_entries == ()


def test_dynamic_symbol_as_a_parallel_extent_specializes():
    """(One kernel per size, as T.const: logged at INFO.)"""
    @tilelang.jit
    def fill(A):
        n = T.dynamic("n")
        A: T.Tensor((n,), T.float32)
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(n):
                A[i] = bx + i
    for n in (4, 40):
        a = np.zeros(n, np.float32)
        fill(a)
        np.testing.assert_array_equal(a, np.arange(n, dtype=np.float32))
    assert ".entry" in fill.compile(np.zeros(4, np.float32)).get_kernel_source()


def test_a_program_that_does_not_compile_raises_when_used_not_when_defined():
    @tilelang.jit
    def blackwell_only(A):
        A: T.Tensor((128,), T.float32)
        with T.Kernel(1, threads=128) as bx:
            with T.ws_op("sched_init"):                     # marker: ws_op
                A[0] = bx
    assert "does not compile" in repr(blackwell_only)
    assert not hasattr(blackwell_only, "_repr_html_")     # a probe is not a use
    # nor pytest's, collecting a program named test_*
    assert getattr(blackwell_only, "patchings", None) is None
    assert not hasattr(blackwell_only, "pytestmark")
    assert blackwell_only.__name__ == "blackwell_only"
    for use in (lambda: blackwell_only(np.zeros(128, np.float32)),
                lambda: blackwell_only.get_kernel_source(),
                lambda: tilelang.autotune(configs=[{}])(blackwell_only)()):
        with pytest.raises(tilelang.CompileError, match=r"T.ws_op \(tilelang.language.ws_op "
                                                        r"in TileLang\) is not supported") as info:
            use()
        assert info.value.lineno == _line_of("marker: ws_op")


def test_pass_configs_accepted_and_unknown_warns_once():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            @tilelang.jit(pass_configs={tilelang.PassConfigKey.TL_ENABLE_DUMP_IR: False,
                                        "tl.no_such_thing": True})
            def k(A):
                n = T.const("n")
                A: T.Tensor((n,), T.float32)
                with T.Kernel(1, threads=32) as bx:
                    A[bx] = 1.0
    assert sum("tl.no_such_thing" in str(w.message) for w in caught) == 1


@pytest.mark.gpu
def test_seed_programs_on_gpu():
    a = torch.randn(1 << 20, device="cuda")
    b = torch.randn_like(a)
    torch.testing.assert_close(vector_add(a, b), a + b)
    torch.testing.assert_close(tilelang_vector_add(a, b), a + b)
    x = torch.randn(7, 50, device="cuda").half()
    y = scale_rows(x, 64)
    torch.testing.assert_close(y.cpu(), scale_rows(x.cpu(), 64))


# the classic style (seed 004's shape, on an elementwise body)
M_, N_ = 64, 96


@T.prim_func
def saxpy_kernel(
    X: T.Buffer((M_, N_), "float32"),
    Y: T.Buffer((M_, N_), "float32"),
    Z: T.Buffer((M_, N_), "float32"),
):
    with T.Kernel(T.ceildiv(N_, 32), M_, threads=32) as (bx, by):
        for j in T.Parallel(32):
            Z[by, bx * 32 + j] = 2.0 * X[by, bx * 32 + j] + Y[by, bx * 32 + j]


@tilelang.jit(out_idx=[-1])
def scaled_copy(M, N, scale, dtype="float16"):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(M, threads=64) as row:
            for j in T.Parallel(N):
                B[row, j] = A[row, j] * scale
    return main


def test_classic_compile_and_call_with_all_tensors():
    kernel = tilelang.compile(saxpy_kernel, target="cuda")
    x, y = torch.randn(M_, N_), torch.randn(M_, N_)
    z = torch.empty(M_, N_)
    kernel(x, y, z)
    torch.testing.assert_close(z, 2 * x + y)
    assert ".entry saxpy_kernel_kernel" in kernel.get_kernel_source()


def test_classic_factory_with_out_idx():
    kernel = scaled_copy(16, 64, 0.5)
    a = torch.randn(16, 64).half()
    b = kernel(a)
    torch.testing.assert_close(b, a * 0.5)
    assert scaled_copy(16, 64, 0.5) is kernel          # cached per arguments
    with pytest.raises(ValueError, match=r"shape\[1\] must be 64"):
        kernel(torch.randn(16, 32).half())
    with pytest.raises(TypeError, match="expected dtype float16"):
        kernel(torch.randn(16, 64))


@pytest.mark.gpu
def test_classic_on_gpu():
    kernel = scaled_copy(128, 256, 3.0)
    a = torch.randn(128, 256, device="cuda").half()
    b = kernel(a)
    assert b.is_cuda
    torch.testing.assert_close(b, a * 3.0)
    k2 = tilelang.compile(saxpy_kernel, target="cuda")
    x, y = torch.randn(M_, N_, device="cuda"), torch.randn(M_, N_, device="cuda")
    z = torch.empty_like(x)
    k2(x, y, z)
    torch.testing.assert_close(z, 2 * x + y)


def jitted_prim_func(n, block=64, scale=2.0, decorated=True):
    """KernelBench-style TileLang solutions (and older TileLang) put @tilelang.jit over a
    @T.prim_func: the prim_func compiled as tilelang.compile does it."""
    def main(X: T.Tensor((n,), "float16"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    Y[bx * block + i] = T.Cast("float32", X[bx * block + i]) * scale
    prim = T.prim_func(main)
    return tilelang.jit(out_idx=-1)(prim) if decorated else tilelang.jit(prim)


def test_jit_over_a_prim_func_is_its_compiled_kernel():
    x = torch.randn(200).half()
    y = jitted_prim_func(200)(x)
    torch.testing.assert_close(y, x.float() * 2.0)
    kernel = jitted_prim_func(200, decorated=False)          # bare: no out_idx
    out = torch.zeros(200)
    kernel(x, out)
    torch.testing.assert_close(out, x.float() * 2.0)
    assert ".entry" in kernel.get_kernel_source()

    @T.prim_func
    def broken(X: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=8) as bx:
            X[bx] = T.no_such_op(1.0)
    program = tilelang.jit(out_idx=-1)(broken)      # the error when used, not defined
    with pytest.raises(tilelang.CompileError, match=r"T.no_such_op"):
        program(torch.zeros(8))


@pytest.mark.gpu
def test_jit_over_a_prim_func_on_the_gpu():
    x = torch.randn(1000, device="cuda").half()
    y = jitted_prim_func(1000, block=128, scale=0.5)(x)
    assert y.is_cuda
    torch.testing.assert_close(y, x.float() * 0.5)
    torch.testing.assert_close(y.cpu(), jitted_prim_func(1000, 128, 0.5)(x.cpu()))


# -- f.compile(...): parameters not given take their defaults ---------------------------
@tilelang.jit
def scale(A, block_M: int = 128, factor: float = 2.0):
    M = T.const("M")
    A: T.Tensor((M,), T.float32)
    C = T.empty((M,), T.float32)
    with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
        for i in T.Parallel(block_M):
            if bx * block_M + i < M:
                C[bx * block_M + i] = A[bx * block_M + i] * factor
    return C


def test_compile_applies_the_defaults_of_parameters_not_given():
    a = torch.randn(1000)
    kernel = scale.compile(M=1000, factor=3.0)          # block_M left at its default
    assert kernel.constants == {"block_M": 128, "factor": 3.0}
    torch.testing.assert_close(kernel(a), a * 3.0)
    kernel = scale.compile(M=1000, block_M=256)         # factor left at its default
    assert kernel.constants == {"block_M": 256, "factor": 2.0}
    torch.testing.assert_close(kernel(a), a * 2.0)
    kernel = scale.compile(a, 64, 4.0)                  # an example tensor, positional params
    assert kernel.constants == {"block_M": 64, "factor": 4.0}
    torch.testing.assert_close(kernel(a), a * 4.0)
    with pytest.raises(TypeError, match=r"compiled scale\(\) takes the tensor\(s\) A"):
        kernel(a, a)
    with pytest.raises(TypeError, match="unexpected argument 'blockM'"):
        scale.compile(M=1000, blockM=64)


# -- classic style: T.dynamic / T.symbolic shapes are the run-time extents -------------
@tilelang.jit(out_idx=[1])
def dynamic_double(block=64):
    n = T.dynamic("n")

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=64) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    B[bx * block + i] = A[bx * block + i] * 2.0
    return main


@tilelang.jit(out_idx=[1])
def rows_plus_one(N=32, blocks=4):
    m = T.symbolic("m")     # TileLang's deprecated name; used in the body only

    @T.prim_func
    def main(A: T.Tensor((m, N), "float32"), B: T.Tensor((m, N), "float32")):
        with T.Kernel(blocks, threads=32) as bx:
            for k in T.serial(T.ceildiv(m, blocks)):
                for j in T.Parallel(N):
                    if k * blocks + bx < m:
                        B[k * blocks + bx, j] = A[k * blocks + bx, j] + 1.0
    return main


def test_classic_dynamic_symbol_is_the_tensors_runtime_extent():
    kernel = dynamic_double()
    for n in (100, 333):
        a = torch.randn(n)
        torch.testing.assert_close(kernel(a), a * 2.0)
    assert kernel.kernel.shape_entries == ()            # one kernel for every n
    b = torch.empty(57)
    kernel(torch.ones(57), b)                           # all tensors given
    torch.testing.assert_close(b, torch.full((57,), 2.0))
    with pytest.raises(ValueError, match=r"symbol n: A has 5 but B.shape\[0\] is 6"):
        kernel(torch.ones(5), torch.empty(6))


def test_classic_symbol_used_only_in_the_body(monkeypatch):
    from tilejit.language import tilelang_names
    monkeypatch.setattr(tilelang_names, "_SYMBOLIC_WARNED", False)
    with pytest.warns(DeprecationWarning, match="T.symbolic is deprecated"):
        kernel = rows_plus_one()
    for m in (5, 37):
        a = torch.randn(m, 32)
        torch.testing.assert_close(kernel(a), a + 1.0)


def dynamic_tile_extent():
    """TileLang's dynamic shared memory: a T.dynamic symbol as a tile's extent."""
    @tilelang.jit(out_idx=[1])
    def staged(block=64):
        n = T.dynamic("n")

        @T.prim_func
        def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(1, threads=64) as bx:
                S = T.alloc_shared((n,), "float32")
                for i in T.Parallel(n):
                    S[i] = A[i] + bx + 1
                for i in T.Parallel(n):
                    B[i] = S[i] * 2
        return main
    return staged()


def test_classic_dynamic_symbol_as_tile_extent_specializes(ptxas, caplog):
    with caplog.at_level("INFO", logger="tilejit"):
        kernel = dynamic_tile_extent()
        for n in (100, 200, 100):
            a = torch.randn(n)
            torch.testing.assert_close(kernel(a), (a + 1) * 2)
    assert "dynamic symbol n is a tile extent" in caplog.text
    for arch in ("sm_80", "sm_90a"):
        ptxas(kernel.get_kernel_source(arch=arch), arch)


def eager_dynamic_tile_extent():
    @tilelang.jit
    def staged(A):
        n = T.dynamic("n")
        A: T.Tensor[[n], T.float32]
        B = T.empty([n], T.float32)
        with T.Kernel(1, threads=64):
            S = T.alloc_shared((n,), T.float32)
            for i in T.Parallel(n):
                S[i] = A[i] - 1
            for i in T.Parallel(n):
                B[i] = S[i] * 3
        return B
    return staged


def test_eager_dynamic_symbol_as_tile_extent_specializes():
    kernel = eager_dynamic_tile_extent()
    for n in (48, 96):
        a = torch.randn(n)
        torch.testing.assert_close(kernel(a), (a - 1) * 3)


@pytest.mark.gpu
def test_gpu_classic_dynamic_symbol_as_tile_extent():
    a = torch.randn(96)
    eager = eager_dynamic_tile_extent()
    torch.testing.assert_close(eager(a.cuda()).cpu(), eager(a))
    kernel = dynamic_tile_extent()
    for n in (100, 200, 100):
        a = torch.randn(n)
        torch.testing.assert_close(kernel(a.cuda()).cpu(), kernel(a))


def test_classic_dynamic_symbol_as_a_parallel_extent_is_read_at_run_time():
    """A T.Parallel over a T.dynamic extent: one kernel for every size, the extent
    read at run time (``passes/dynamic_parallel.py``)."""
    @tilelang.jit(out_idx=[1])
    def shifted():
        n = T.dynamic("n")

        @T.prim_func
        def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(1, threads=64) as bx:
                for i in T.Parallel(n):
                    B[i] = A[i] + bx + 1
        return main
    kernel = shifted()
    assert kernel.kernel.shape_entries == ()
    for n in (3, 130):
        a = torch.randn(n)
        torch.testing.assert_close(kernel(a), a + 1.0)


def test_classic_output_sized_by_a_symbol_no_input_has():
    @tilelang.jit(out_idx=[1])
    def fill_k():
        k = T.dynamic("k")

        @T.prim_func
        def main(A: T.Tensor((4,), "float32"), B: T.Tensor((k,), "float32")):
            with T.Kernel(T.ceildiv(k, 32), threads=32) as bx:
                for i in T.Parallel(32):
                    if bx * 32 + i < k:
                        B[bx * 32 + i] = A[0]
        return main
    kernel = fill_k()
    with pytest.raises(ValueError, match=r"output 'B' \(out_idx\): symbol\(s\) k are not "
                                         "extents of any input"):
        kernel(torch.ones(4))
    b = torch.zeros(40)
    kernel(torch.full((4,), 7.0), b)
    torch.testing.assert_close(b, torch.full((40,), 7.0))


def test_symbolic_warns_once_that_it_is_deprecated(monkeypatch):
    from tilejit.language import tilelang_names
    monkeypatch.setattr(tilelang_names, "_SYMBOLIC_WARNED", False)
    with pytest.warns(DeprecationWarning, match=r"T.symbolic is deprecated.*T.dynamic"):
        s = T.symbolic("k")
    assert s.dynamic and s.name == "k"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        T.symbolic("k2")                                 # once: no second warning
    monkeypatch.setattr(tilelang_names, "_SYMBOLIC_WARNED", False)
    with pytest.warns(DeprecationWarning) as caught:     # eager style: read from the source
        @tilelang.jit
        def eager_symbolic(A, block=64):
            n = T.symbolic("n")
            A: T.Tensor((n,), T.float32)
            B = T.empty((n,), T.float32)
            with T.Kernel(T.ceildiv(n, block), threads=64) as bx:
                for i in T.Parallel(block):
                    if bx * block + i < n:
                        B[bx * block + i] = A[bx * block + i]
            return B
    assert caught[0].lineno == _line_of('n = T.symbolic("n")')
    a = torch.randn(70)
    torch.testing.assert_close(eager_symbolic(a), a)


def _line_of(text):
    with open(__file__) as f:
        return next(n for n, line in enumerate(f, 1) if text in line)


# -- a misspelt T. name is named, with the line of its use ------------------------------
def test_misspelt_language_name_is_a_clear_error():
    # found when the program is defined, raised when it is used (as TileLang compiles on
    # the first call): a module of programs for other GPUs still imports
    @tilelang.jit
    def misspelt(A):
        M = T.const("M")
        A: T.Tensor((M,), T.float32)
        C = T.empty((M,), T.float32)
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(M):
                C[i] = T.no_such_prim(A[i]) + bx
        return C
    with pytest.raises(tilelang.CompileError) as info:
        misspelt(np.zeros(4, np.float32))
    assert info.value.bare_message.startswith("unknown name T.no_such_prim")
    assert info.value.lineno == _line_of("C[i] = T.no_such_prim(A[i])")
    assert "internal compiler error" not in str(info.value)

    @tilelang.jit(out_idx=[1])
    def classic_misspelt(N=64):
        @T.prim_func
        def main(A: T.Tensor((4, N), "float32"), B: T.Tensor((4,), "float32")):
            with T.Kernel(4, threads=32) as row:
                x = T.alloc_fragment((1, N), "float32")
                s = T.alloc_fragment((1,), "float32")
                T.copy(A[row, 0], x)
                T.reduce_summ(x, s, dim=1)
                B[row] = s[0]
        return main
    with pytest.raises(tilelang.CompileError, match=r"unknown name T.reduce_summ: .*did you "
                                                    r"mean T.reduce_sum") as info:
        classic_misspelt()
    assert info.value.lineno == _line_of("T.reduce_summ(x, s, dim=1)")


# -- pass configs: the IR dump and fast math are honoured -------------------------------
def test_pass_config_dump_ir_writes_each_stage(tmp_path, monkeypatch):
    monkeypatch.delenv("TILEJIT_DUMP_IR", raising=False)
    configs = {tilelang.PassConfigKey.TL_ENABLE_DUMP_IR: True,
               tilelang.PassConfigKey.TL_DUMP_IR_DIR: str(tmp_path / "eager")}

    @tilelang.jit(pass_configs=configs)
    def dumped(A, block: int = 64):
        M = T.const("M")
        A: T.Tensor((M,), T.float32)
        C = T.empty((M,), T.float32)
        with T.Kernel(T.ceildiv(M, block), threads=64) as bx:
            for i in T.Parallel(block):
                if bx * block + i < M:
                    C[bx * block + i] = A[bx * block + i] + 1.0
        return C
    dumped.compile(M=256)
    files = [p.name for d in (tmp_path / "eager").iterdir() for p in d.iterdir()]
    for stage in ("source.py", "device_program.py", "llvm_optimized.ll", "kernel.ptx"):
        assert any(f.endswith(stage) for f in files), (stage, files)
    assert "TILEJIT_DUMP_IR" not in os.environ           # set only while compiling

    configs[tilelang.PassConfigKey.TL_DUMP_IR_DIR] = str(tmp_path / "classic")
    kernel = tilelang.compile(saxpy_kernel, pass_configs=configs)
    x = torch.randn(M_, N_)
    z = torch.empty(M_, N_)
    kernel(x, x, z)                                      # the simulator's compile dumps too
    files = [p.name for d in (tmp_path / "classic").iterdir() for p in d.iterdir()]
    assert any(f.endswith("numba_typed.txt") for f in files), files

    @tilelang.jit(pass_configs={tilelang.PassConfigKey.TL_ENABLE_DUMP_IR: False})
    def not_dumped(A):
        M = T.const("M")
        A: T.Tensor((M,), T.float32)
        with T.Kernel(1, threads=32) as bx:
            A[bx] = 1.0
    monkeypatch.chdir(tmp_path)
    not_dumped.compile(M=4)
    assert not (tmp_path / "tilejit_dump_ir").exists()


def _exp2_program(configs):
    @tilelang.jit(pass_configs=configs)
    def exp2_of(A):
        M = T.const("M")
        A: T.Tensor((M,), T.float32)
        C = T.empty((M,), T.float32)
        with T.Kernel(T.ceildiv(M, 128), threads=128) as bx:
            for i in T.Parallel(128):
                if bx * 128 + i < M:
                    C[bx * 128 + i] = T.exp2(A[bx * 128 + i])
        return C
    return exp2_of


def test_pass_config_fast_math_uses_approximate_instructions():
    key = tilelang.PassConfigKey
    fast = _exp2_program({key.TL_ENABLE_FAST_MATH: True})
    assert "ex2.approx.ftz.f32" in fast.compile(M=1024).get_kernel_source()
    exact = _exp2_program({})
    assert "ex2.approx.ftz" not in exact.compile(M=1024).get_kernel_source()
    overruled = _exp2_program({key.TL_ENABLE_FAST_MATH: True, key.TL_DISABLE_FAST_MATH: True})
    assert fast.kernel.fast_math and not overruled.kernel.fast_math
    a = torch.randn(300)
    torch.testing.assert_close(fast(a), torch.exp2(a))


def _gemm_program(configs):
    @tilelang.jit(pass_configs=configs)
    def gemm(A, B):
        M = T.const("M")
        N = T.const("N")
        K = T.const("K")
        A: T.Tensor((M, K), T.float16)
        B: T.Tensor((K, N), T.float16)
        C = T.empty((M, N), T.float32)
        with T.Kernel(T.ceildiv(N, 128), T.ceildiv(M, 128), threads=128) as (bx, by):
            A_s = T.alloc_shared((128, 64), T.float16)
            B_s = T.alloc_shared((64, 128), T.float16)
            C_f = T.alloc_fragment((128, 128), T.float32)
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, 64), num_stages=3):
                T.copy(A[by * 128, k * 64], A_s)
                T.copy(B[k * 64, bx * 128], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * 128, bx * 128])
        return C
    return gemm


@pytest.mark.parametrize("key,absent", [
    (None, set()),
    # warp specialization splits TMA pipelines that feed wgmma: it goes with either
    ("TL_DISABLE_TMA_LOWER", {"cp.async.bulk.tensor", "setmaxnreg"}),
    ("TL_DISABLE_WGMMA", {"wgmma.mma_async", "setmaxnreg"}),
    ("TL_DISABLE_WARP_SPECIALIZED", {"setmaxnreg"}),
])
def test_pass_configs_turn_off_tma_wgmma_and_warp_specialization(key, absent, monkeypatch):
    """TileLang's switches map to CompileOptions (tma, wgmma, warp_specialize); its checks'
    switches (TL_DISABLE_DATA_RACE_CHECK, ...) are accepted without a warning."""
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    configs = {tilelang.PassConfigKey.TL_DISABLE_DATA_RACE_CHECK: True,
               tilelang.PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC: True}
    if key:
        configs[getattr(tilelang.PassConfigKey, key)] = True
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        program = _gemm_program(configs)
    ptx = program.compile(M=512, N=512, K=512, arch="sm_90a").get_kernel_source()
    for instruction in ("cp.async.bulk.tensor", "wgmma.mma_async", "setmaxnreg"):
        assert (instruction in ptx) == (instruction not in absent), instruction


# TileLang's tests write the tensors' annotations in the signature of a @tilelang.jit
# function, with no nested T.prim_func
@tilelang.jit
def scale_by_factor(A: T.Tensor((16, 32), T.float32), B: T.Tensor((16, 32), "float32"),
               factor: float = 2.0):
    with T.Kernel(16, threads=32) as bx:
        tx = T.get_thread_binding()
        B[bx, tx] = A[bx, tx] * factor


@tilelang.jit
def signature_symbols(A: T.Tensor((M_, N_), T.float16)):
    M_, N_ = T.const("M_, N_")
    B = T.empty((M_, N_), T.float16)
    with T.Kernel(M_, threads=32) as bx:
        for j in T.Parallel(N_):
            B[bx, j] = A[bx, j] + A[bx, j]
    return B


def test_tensors_annotated_in_the_signature():
    a = torch.randn(16, 32)
    b = torch.empty(16, 32)
    scale_by_factor(a, b)
    torch.testing.assert_close(b, a * 2)
    scale_by_factor(a, b, 3.0)
    torch.testing.assert_close(b, a * 3)
    x = torch.randn(8, 48).half()
    torch.testing.assert_close(signature_symbols(x), x + x)
    with pytest.raises((TypeError, ValueError), match="A"):
        scale_by_factor(torch.randn(16, 16), b)          # not the annotated shape


@pytest.mark.gpu
def test_tensors_annotated_in_the_signature_on_gpu():
    a = torch.randn(16, 32, device="cuda")
    b = torch.empty_like(a)
    scale_by_factor(a, b)
    b_sim = torch.empty(16, 32)
    scale_by_factor(a.cpu(), b_sim)
    torch.testing.assert_close(b, a * 2)
    torch.testing.assert_close(b.cpu(), b_sim)


# TileLang's DeepSeek examples check their settings with asserts inside the host code's
# `if` blocks, before the kernel
@tilelang.jit
def replicate_heads(O, head_kv=128, dtype=T.float32):
    B, S = T.const("B, S")
    O: T.Tensor([B, S], dtype)
    if head_kv > 64:
        assert head_kv % 64 == 0, f"head_kv should be a multiple of 64, got {head_kv}"
        rep = head_kv // 64
    else:
        rep = 1
    D = T.empty([B, S], dtype)
    with T.Kernel(B, threads=64) as bx:
        for j in T.Parallel(S):
            D[bx, j] = O[bx, j] * rep
    return D


def test_asserts_in_the_host_codes_if_blocks_are_checked_by_the_host():
    x = torch.randn(4, 64)
    torch.testing.assert_close(replicate_heads(x), x * 2)
    torch.testing.assert_close(replicate_heads(x, head_kv=32), x)
    with pytest.raises(AssertionError, match="multiple of 64, got 96"):
        replicate_heads(x, head_kv=96)


def test_tensor_subscript_forms_and_the_default_dtype():
    """``T.Tensor[shape]`` (float32, TileLang's default; its issue 1728 writes
    ``T.Tensor[(num_tokens,)]``), ``T.Tensor[shape, dtype]``, a shape with a symbol."""
    n = T.dynamic("n")
    assert T.Tensor[(n,)].shape == (n,) and T.Tensor[(n,)].dtype == T.float32
    assert T.Tensor[(128, 64)].shape == (128, 64)
    assert T.Tensor[(n, 2)].shape == (n, 2) and T.Tensor[(n, 2)].dtype == T.float32
    assert T.Tensor[[n, 4], "float16"].dtype == T.float16
    assert T.Tensor[(8,), T.int32].shape == (8,) and T.Tensor[(8,), T.int32].dtype == T.int32
    # a one-dimensional shape written as its extent, then a dtype (TileLang's int64
    # fill test: `T.Tensor[n, dtype]`); two numbers stay a shape
    assert T.Tensor[1024, T.bfloat16].shape == (1024,)
    assert T.Tensor[1024, "bfloat16"].dtype == T.bfloat16
    assert T.Tensor[n, T.int8].shape == (n,) and T.Tensor[128, 64].shape == (128, 64)


@tilelang.jit
def rebound_extents(x, hc: int, hidden: int, h_blk: int = 1024, block_r=None):
    """DeepSeek mHC's ``h_blk = math.gcd(hidden, h_blk)`` and the FP8 indexer's ``if
    block_Q is None: block_Q = ...``: parameters the prologue binds again to compile-time
    values, then tile extents."""
    n = T.dynamic("n")
    h_blk = math.gcd(hidden, h_blk)
    if block_r is None:
        block_r = 128 // hc
    x: T.Tensor((n, hc, hidden), T.float32)
    with T.Kernel(n, threads=128) as i:
        s = T.alloc_shared((hc, h_blk), T.float32)
        r = T.alloc_shared((block_r,), T.float32)
        T.clear(r)
        for k in T.serial(hidden // h_blk):
            T.copy(x[i, 0, k * h_blk], s)
            for a, b in T.Parallel(hc, h_blk):
                s[a, b] = s[a, b] * 2 + r[a]
            T.copy(s, x[i, 0, k * h_blk])


def test_a_parameter_the_prologue_binds_again_is_a_compile_time_extent():
    x = torch.randn(3, 4, 96)
    want = x * 2
    rebound_extents(x, 4, 96, 64)          # h_blk = gcd(96, 64) = 32, block_r = 32
    torch.testing.assert_close(x, want)


# -- par_compile: the programs of several configs compiled ahead of their calls -------------
@tilelang.jit
def scaled(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32), block: int = 64):
    with T.Kernel(128 // block, threads=64) as bx:
        for i in T.Parallel(block):
            B[bx * block + i] = A[bx * block + i] * 2.0


def test_par_compile_gives_each_configs_program(ptxas):
    configs = [{"A": T.Tensor((128,), T.float32), "B": T.Tensor((128,), T.float32),
                "block": b} for b in (32, 64)]
    programs = scaled.par_compile(configs)
    assert len(programs) == 2
    for program, b in zip(programs, (32, 64)):
        ptx = program.get_kernel_source()
        assert ptx == scaled.get_kernel_source(block=b)
        ptxas(ptx, ptx.split(".target ")[1].split()[0])
    # a config that does not build: None with ignore_error, else its error
    assert scaled.par_compile([{"blocks": 32}], ignore_error=True) == [None]
    with pytest.raises(TypeError, match="blocks"):
        scaled.par_compile([{"blocks": 32}])
    with pytest.raises(TypeError, match="expected a list of dicts"):
        scaled.par_compile({"block": 32})
    a = torch.arange(128, dtype=torch.float32)
    b = torch.zeros(128)
    scaled(a, b, 32)
    torch.testing.assert_close(b, a * 2)


@tilelang.jit
def filled_by_atomics(out, value: float = 1.0):
    out: T.Tensor[(16, 16), T.float32]
    with T.Kernel(1):
        out_shared = T.alloc_shared((16, 16), dtype=T.float32)
        T.fill(out_shared, value)
        T.atomic_add(out, out_shared)


def test_compile_takes_a_tensor_as_its_annotation(ptxas):
    """TileLang's ``f.compile(out=T.Tensor[(16, 16), T.float32])``: the tensor's shape and
    dtype from the annotation, as from an example tensor."""
    by_annotation = filled_by_atomics.compile(out=T.Tensor[(16, 16), T.float32])
    by_position = filled_by_atomics.compile(T.Tensor[(16, 16), T.float32])
    by_example = filled_by_atomics.compile(out=torch.zeros(16, 16))
    ptx = by_annotation.get_kernel_source()
    assert ptx == by_example.get_kernel_source() == by_position.get_kernel_source()
    ptxas(ptx, ptx.split(".target ")[1].split()[0])
    out = torch.zeros(16, 16)
    filled_by_atomics(out)
    torch.testing.assert_close(out, torch.ones(16, 16))


# -- annotations: a conditional shape; globals defined below the program --------------------
@tilelang.jit
def matmul_maybe_transposed(A, B, block_M=64, block_N=64, block_K=32, trans_A=False):
    M, N, K = T.const("M, N, K")
    A: T.Tensor((K, M) if trans_A else (M, K), T.float16)
    B: T.Tensor((K, N), T.float16)
    C = T.empty((M, N), T.float32)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        A_shared = T.alloc_shared((block_M, block_K), T.float16)
        B_shared = T.alloc_shared((block_K, block_N), T.float16)
        C_local = T.alloc_fragment((block_M, block_N), T.float32)
        T.clear(C_local)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
            T.copy(A[by * block_M, k * block_K], A_shared)
            T.copy(B[k * block_K, bx * block_N], B_shared)
            T.gemm(A_shared, B_shared, C_local)
        T.copy(C_local, C[by * block_M, bx * block_N])
    return C


def test_compile_with_a_conditional_annotation(ptxas):
    kernel = matmul_maybe_transposed.compile(M=64, N=64, K=64)
    ptx = kernel.get_kernel_source()
    ptxas(ptx, ptx.split(".target ")[1].split()[0])
    a = torch.randint(-2, 3, (64, 64)).half()
    b = torch.randint(-2, 3, (64, 64)).half()
    torch.testing.assert_close(kernel(a, b), a.float() @ b.float())


@tilelang.jit
def doubled_rows(X, BLOCK_N=64):
    X: T.Tensor([ROWS_BELOW, COLS_BELOW], T.float32)     # globals defined below
    Y = T.empty([ROWS_BELOW, COLS_BELOW], T.float32)
    with T.Kernel(ROWS_BELOW, threads=64) as i_m:
        x = T.alloc_fragment([BLOCK_N], T.float32)
        for i_n in T.serial(T.ceildiv(COLS_BELOW, BLOCK_N)):
            T.copy(X[i_m, i_n * BLOCK_N], x)
            for j in T.Parallel(BLOCK_N):
                x[j] = x[j] * 2
            T.copy(x, Y[i_m, i_n * BLOCK_N])
    return Y


ROWS_BELOW = 4
COLS_BELOW = 128


def test_annotations_read_globals_defined_below_the_program():
    """As TileLang's online-softmax example, whose M and N follow the program."""
    x = torch.randn(ROWS_BELOW, COLS_BELOW)
    torch.testing.assert_close(doubled_rows(x), 2 * x)


def _two_outputs():
    @T.prim_func
    def main(A: T.Tensor((8,), T.float32), B: T.Tensor((8,), T.float32),
             C: T.Tensor((8,), T.float32)):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(8):
                B[i] = A[i] + 1
                C[i] = A[i] * 2
    return main


@pytest.mark.parametrize("out_idx", [[2, 1], [-1, -2], [1, 2]])
def test_outputs_come_back_in_the_order_out_idx_names_them(out_idx):
    """TileLang's adapters return ``[tensor_list[i] for i in out_idx]``: a list, in that
    order."""
    a = torch.full((8,), 5.0)
    out = tilelang.compile(_two_outputs(), out_idx=out_idx)(a)
    assert isinstance(out, list)
    want = {1: 6.0, 2: 10.0}
    assert [o[0].item() for o in out] == [want[i % 3] for i in out_idx]


@pytest.mark.parametrize("out_idx, error, match", [
    ([1, 1], ValueError, r"out_idx \[1, 1\] names parameter\(s\) \['B'\] more than once"),
    ([-1, 2], ValueError, r"names parameter\(s\) \['C'\] more than once"),
    (1.0, TypeError, "out_idx: expected an int or a list of ints, got 1.0"),
    ([True], TypeError, r"out_idx \[True\]: True is not an int"),
    ([2.0], TypeError, r"out_idx \[2.0\]: 2.0 is not an int"),
    ([5], ValueError, "out of range")])
def test_bad_out_idx_is_refused_at_compile(out_idx, error, match):
    with pytest.raises(error, match=match):
        tilelang.compile(_two_outputs(), out_idx=out_idx)


@tilelang.jit
def copied_rows(A):
    M = T.const("M")
    A: T.Tensor[[M, 4], T.float32]
    B = T.empty((M, 4), T.float32)
    with T.Kernel(1, threads=32):
        for i, j in T.Parallel(M, 4):
            B[i, j] = A[i, j]
    return B


@pytest.mark.parametrize("bad", [None, "x", [[1.0] * 4] * 2])
def test_something_else_than_a_tensor_for_an_annotated_tensor_is_named(bad):
    with pytest.raises(TypeError, match=f"argument 'A': expected a tensor \\(line \\d+\\), "
                                        f"got {type(bad).__name__}"):
        copied_rows(bad)


def test_a_factorys_programs_are_keyed_by_its_bound_arguments():
    """``f(16)``, ``f(16, 1.0)`` and ``f(N=16)`` are one program (defaults applied,
    keywords bound to their parameters); ``1`` and ``1.0`` are not."""
    made = []

    @tilelang.jit
    def fill(N, val: float = 1.0, **options):
        made.append((N, val, options))

        @T.prim_func
        def main(A: T.Tensor((N,), T.float32)):
            with T.Kernel(1, threads=32):
                for i in T.Parallel(N):
                    A[i] = val
        return main

    assert fill(16) is fill(16, 1.0) is fill(N=16) is fill(val=1.0, N=16)
    assert fill(16, 1) is not fill(16)
    assert fill(16, extra=2) is fill(N=16, extra=2) is not fill(16)
    assert len(made) == 3
    a = torch.zeros(16)
    fill(16, 2.5)(a)
    assert a.tolist() == [2.5] * 16


@tilelang.jit
def element_wise(A, fn):
    """TileLang's eager notebook: a function passed for a compile-time parameter is a
    helper the kernel calls (inlined)."""
    N = T.dynamic("N")
    A: T.Tensor[[N], T.float32]
    B = T.empty((N,), dtype=A.dtype)
    with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
        for i in T.Parallel(128):
            idx = bx * 128 + i
            if idx < N:
                B[idx] = fn(A[idx])
    return B


@T.macro
def plus_one(x):
    return x + 1


def twice(x):
    return x * 2


def test_a_function_or_macro_as_an_argument():
    a = torch.randn(300)
    torch.testing.assert_close(element_wise(a, plus_one), a + 1)
    torch.testing.assert_close(element_wise(a, twice), a * 2)
    torch.testing.assert_close(element_wise(a, lambda x: x - 3), a - 3)
    # another function, the same name and code but another closure value: another kernel
    def scaled(k):
        return lambda x: x * k
    for k in (2.0, 5.0):
        torch.testing.assert_close(element_wise(a, scaled(k)), a * k)
    with pytest.raises(TypeError, match="argument 'fn': a T.constexpr must be .* a function "
                                        "or @T.macro of your own, or None, got builtin"):
        element_wise(a, abs)


@pytest.mark.gpu
def test_gpu_a_function_or_macro_as_an_argument():
    a = torch.randn(300, device="cuda")
    torch.testing.assert_close(element_wise(a, plus_one), a + 1)
    torch.testing.assert_close(element_wise(a, twice), a * 2)
    torch.testing.assert_close(element_wise(a.cpu(), twice), a.cpu() * 2)


def test_pass_config_keys_are_an_enum_of_their_strings():
    """TileLang's PassConfigKey is a str enum: `.value` (its tma_copy tests build the
    config dict from it), equal to and hashed as its string, iterable."""
    key = tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED
    assert key.value == "tl.disable_warp_specialized" == key
    assert {key.value: True}.get(key) is True and f"{key}" == key.value
    assert tilelang.PassConfigKey.TL_ENABLE_FAST_MATH in list(tilelang.PassConfigKey)


def test_jitimpl_names_what_the_decorator_returns():
    """`from tilelang.jit import JITImpl` (a type annotation in Qwen-in-TileLang's kernel
    runner): the class of an eager @tilelang.jit program."""
    from tilejit.tilelang.jit import JITImpl
    assert isinstance(scale, JITImpl)


def test_parse_cache_key_is_the_calls_key_without_running_it():
    # TileLang's eager-JIT tutorial times f.parse_cache_key(A, B) beside a call
    a, b = torch.randn(256), torch.randn(256)
    key = vector_add.parse_cache_key(a, b)
    assert key == vector_add.parse_cache_key(torch.zeros(256), torch.ones(256))  # no data
    assert key != vector_add.parse_cache_key(torch.randn(512), torch.randn(512))
    assert key != vector_add.parse_cache_key(a, b, block_M=64)
    assert hash(key) is not None
    assert vector_add.parse_cache_key(a, b, block_M=[64]) is None      # unhashable
