"""Host-side arguments TileLang's users get wrong, each a clear error naming it before
anything runs: a misspelled ``@tilelang.jit`` option, a target TileLang does not have,
``assert_allclose`` tolerances out of range."""
import numpy as np
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
    # a flag is a bool (or 0 / 1), k_pack an int: 2 was taken as True, 2.0 and True as ints
    (lambda: gemm_program(transpose_A=2), r"transpose_A is True or False, got 2"),
    (lambda: gemm_program(clear_accum=2), r"clear_accum is True or False, got 2"),
    (lambda: gemm_program(k_pack=2.0), r"k_pack is 1 or 2 \(TileLang's\), got 2.0"),
    (lambda: gemm_program(k_pack=True), r"k_pack is 1 or 2 \(TileLang's\), got True"),
    (lambda: gemm_program(k_pack=np.True_), r"k_pack is 1 or 2 \(TileLang's\), got np.True_"),
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


@pytest.mark.parametrize("statement, shown", [
    ("T.clear(A)", r"a tile operation \(T.clear\)"),
    ("T.fill(A, 0.0)", r"a tile operation \(T.fill\)"),
    ("T.copy(A, B)", r"a tile operation \(T.copy\)"),
    ("T.atomic_add(A[0], 1.0)", r"a tile operation \(T.atomic_add\)"),
    ("n = T.access_ptr(A)", r"T.access_ptr of the tensor parameter 'A'"),
    ("A.fill_(0)", r"a method of the tensor parameter 'A' \(.fill_\(\)\)"),
])
def test_a_tile_operation_before_the_kernel_is_named(statement, shown, tmp_path, monkeypatch):
    """A tile operation among the statements before `with T.Kernel` (run on the host,
    where a tensor is its shape and address): the front end's error at its line, where
    the simulator failed inside ('TensorArg' object has no attribute 'data')."""
    (tmp_path / "host_tile_op.py").write_text(
        "import tilejit.language as T\n"
        "@T.prim_func\n"
        "def main(A: T.Tensor((64,), 'float32'), B: T.Tensor((64,), 'float32')):\n"
        f"    {statement}\n"
        "    with T.Kernel(1, threads=64) as bx:\n"
        "        for i in T.Parallel(64):\n"
        "            B[i] = A[i] + 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib
    import sys
    sys.modules.pop("host_tile_op", None)
    program = importlib.import_module("host_tile_op").main
    for target in ("sim", "cuda -arch=sm_90a"):
        with pytest.raises(tilelang.CompileError, match=r"before `with T.Kernel` run on the "
                           r"host and may only compute values: " + shown + r" runs inside the "
                           r"kernel's `with T.Kernel` block") as info:
            tilelang.compile(program, target=target)
        assert info.value.lineno == 4 and statement in str(info.value)


def test_a_helper_reading_a_tensors_shape_before_the_kernel_stays_accepted():
    """A helper of the user's handed a tensor may read its shape on the host; one holding
    a tile operation is inlined, and the operation named."""
    def rows(t):
        return t.shape[0]

    def init(t):
        T.clear(t)

    @T.prim_func
    def shaped(A: T.Tensor((64,), "float32")):
        n = rows(A)
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                A[i] = A[i] + n
    a = torch.zeros(64)
    tilelang.compile(shaped, target="sim")(a)
    assert torch.equal(a, torch.full((64,), 64.0))

    @T.prim_func
    def cleared(A: T.Tensor((64,), "float32")):
        init(A)
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                A[i] = A[i] + 1
    with pytest.raises(tilelang.CompileError, match=r"a tile operation \(T.clear\) runs "
                                                    r"inside the kernel's"):
        tilelang.compile(cleared, target="sim")


@pytest.mark.parametrize("extent, shown", [
    (np.int64(-1), r"np.int64\(-1\)"), (np.int32(-8), r"np.int32\(-8\)"),
    (np.bool_(True), r"np.True_"), (True, r"True"), (np.float32(8.0), r"np.float32\(8.0\)"),
    ((8,), r"\(8,\)"), ([8], r"\[8\]"), (8 + 0j, r"\(8\+0j\)"),
    (object(), r"<object object at 0x[0-9a-f]+>"),
])
def test_an_extent_that_is_no_int_or_symbol_is_named(extent, shown):
    """Only an int >= 0 (a numpy one too) or a symbol is an extent: a nested tuple or a
    complex failed inside (int() of it), a negative np.int64, a bool or a float was kept."""
    with pytest.raises(TypeError, match=r"T.Tensor: extent 1 of the shape \(4, " + shown +
                       r",?\) is " + shown + r"; an extent is an int >= 0, or a symbol"):
        T.Tensor((4, extent), "float32")


def test_extents_tilelang_writes_stay_accepted():
    n = T.dynamic("n")
    ann = T.Tensor((np.int64(4), 0, n, n * 2 + 1, T.const("m")), "float32")
    assert ann.shape[:2] == (4, 0) and type(ann.shape[0]) is int


@pytest.mark.parametrize("target, shown", [
    ("cuda -- -arch=sm_80", r"the option '--' of the cuda target 'cuda -- -arch=sm_80' "
                            r"is not -key=value \(such as -arch=sm_90a\)"),
    ("cuda arch=sm_80", r"the option 'arch=sm_80' of the cuda target .* is not -key=value"),
    ("cuda -arch", r"the option '-arch' of the cuda target 'cuda -arch' has no value: "
                   r"-arch=<str> \(such as -arch=sm_90a\)"),
    ("cuda -arch=sm_80 -foo=bar", r"the cuda target 'cuda -arch=sm_80 -foo=bar' has no option "
                                  r"'-foo=bar'.*; its options are -arch, "),
    ("cuda -mcpu=sm_80", r".* has no option '-mcpu=sm_80' \(the CUDA arch is -arch=sm_XX\)"),
    ("cuda -max_num_threads=abc", r"the option '-max_num_threads=abc' of the cuda target "
                                  r".*: -max_num_threads takes an integer, got 'abc'"),
    ("c -arch=sm_80", r"the c target 'c -arch=sm_80' has no option '-arch=sm_80'"),
    ({"kind": "cuda", "arch": "sm_80", "foo": 1}, r"the cuda target .* has no option 'foo'"),
])
def test_a_target_option_tilelang_does_not_have_is_named(target, shown):
    """Every option after the kind is -key=value (or TVM's -key value) with a key of the
    kind: one that is not was skipped, and the kernel compiled for the default arch."""
    for call, who in ((lambda: tilelang.compile(copy_program(), out_idx=[1], target=target),
                       "tilelang.compile"),
                      (lambda: tilelang.jit(target=target), "@tilelang.jit")):
        with pytest.raises(ValueError, match=who + " target: " + shown):
            call()
    if isinstance(target, str):
        from tilejit.tilelang import tvm
        with pytest.raises(ValueError, match="tvm.target.Target: " + shown):
            tvm.target.Target(target)


@pytest.mark.parametrize("target", [
    "cuda -arch sm_86", "hip -mcpu=gfx950", "rocm -mcpu=gfx942",
    "cuda -arch=sm_90a -max_num_threads=1024 -thread_warp_size=32 -keys=cuda,gpu",
    "llvm -mcpu=skylake -fast-math", "c -mcpu=x86-64", "sim -arch=sm_80",
    "cuda --arch=sm_80", "cuda --arch sm_86 ---max_num_threads=512"])
def test_target_options_tilelang_writes_are_taken(target):
    """(TVM's parser strips any number of leading dashes: `cuda --arch=sm_90`, as a
    code generator's programs write it)"""
    tilelang.jit(target=target)
    from tilejit.tilelang.tvm_target import check_target
    check_target(target, "tilelang.compile")


def test_the_arch_of_a_double_dash_target_is_the_kernels():
    from tilejit.tilelang import tvm
    from tilejit.tilelang.classic import target_and_arch
    assert target_and_arch("cuda --arch=sm_80") == ("auto", "sm_80")
    assert target_and_arch("cuda --arch sm_86") == ("auto", "sm_86")
    assert tvm.target.Target("cuda --arch=sm_90a").arch == "sm_90a"
    ptx = tilelang.compile(copy_program(), out_idx=[1], target="cuda --arch=sm_80")\
        .get_kernel_source()
    assert ".target sm_80" in ptx


@pytest.mark.parametrize("given", [[1], "cuda", 5])
def test_an_option_given_to_jit_by_position_is_named(given):
    """`@tilelang.jit([1])` or `tilelang.jit(out_idx=[1])(5)`: the decorator takes a
    function (it failed inside, asking for the option's __name__)."""
    shown = rf"got {type(given).__name__} {given!r}".replace("[", r"\[").replace("]", r"\]")
    with pytest.raises(TypeError, match=r"@tilelang.jit takes a function; its options are "
                                        r"keywords, e.g. out_idx=\[1\]; " + shown):
        tilelang.jit(given)
    with pytest.raises(TypeError, match=r"@tilelang.jit takes a function; .*" + shown):
        tilelang.jit(out_idx=[1])(given)
    import tilejit
    with pytest.raises(TypeError, match=r"@tilejit.kernel takes a function; its options are "
                                        r"keywords, e.g. target=\"cuda\"; " + shown):
        tilejit.kernel(given)


@pytest.mark.parametrize("backend, error, shown", [
    ("bogus", ValueError, r"got 'bogus'"), (5, TypeError, r"got int 5"),
    ("TVM_FFI", ValueError, r"got 'TVM_FFI'")])
def test_an_execution_backend_tilelang_does_not_have_is_named(backend, error, shown):
    accepted = (r"expected one of 'auto', 'tvm_ffi', 'cython', 'nvrtc', 'torch', 'cutedsl', "
                r"'dlpack', 'ctypes' or None, ")
    with pytest.raises(error, match=r"tilelang.compile execution_backend: " + accepted + shown):
        tilelang.compile(copy_program(), out_idx=[1], execution_backend=backend)
    with pytest.raises(error, match=r"@tilelang.jit execution_backend: " + accepted + shown):
        tilelang.jit(execution_backend=backend)
    with pytest.raises(error, match=r"tilelang.par_compile execution_backend: "):
        tilelang.par_compile([copy_program()], execution_backend=backend, ignore_error=True)
    for backend in ("auto", "tvm_ffi", "cython", "nvrtc", "torch", "cutedsl", "dlpack", None):
        tilelang.compile(copy_program(), out_idx=[1], execution_backend=backend)


@pytest.mark.parametrize("out_idx", [[1.0], [True], [None], [0, "1"]])
def test_an_out_idx_entry_that_is_no_int_is_named(out_idx):
    """It said "out of range", which a 1.0 or None is not."""
    bad = next(i for i in out_idx if not isinstance(i, int) or isinstance(i, bool))
    with pytest.raises(TypeError, match=rf"out_idx .*: {bad!r} is not an int \(a parameter's "
                                        rf"position, negative from the end\)"):
        tilelang.compile(copy_program(), target="sim", out_idx=out_idx)
    a = torch.randn(64)
    assert torch.equal(tilelang.compile(copy_program(), out_idx=[np.int64(1)])(a), a)


@pytest.mark.parametrize("dtype", [None, 5])
def test_alloc_var_of_no_dtype_names_alloc_var(dtype):
    """The variable's stores are casts: the typing named T.cast(value, dtype)."""
    with pytest.raises(tilelang.CompileError, match=r"T.alloc_var\(dtype\): expected a dtype "
                       rf"\(T.float16, \"float16\", A.dtype\) first, got {dtype!r}") as info:
        @T.prim_func
        def main(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                v = T.alloc_var(dtype)
                v = 3
                B[0] = v
    assert "v = T.alloc_var(dtype)" in str(info.value)


def test_a_dtype_of_none():
    """``T.Tensor(shape, None)`` is TileLang's default float32 (numpy would read None as
    float64); a dtype of None anywhere else is an error naming it."""
    assert T.Tensor((4,), None).dtype == T.float32
    from tilejit.language.dtypes import as_dtype
    with pytest.raises(TypeError, match=r"expected a dtype .*got None"):
        as_dtype(None)


def _numpy_dtypes_kernel(dt):
    @T.prim_func
    def main(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32"),
             C: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32):
            v = T.alloc_var(dt, init=2.0)
            for i in T.Parallel(8):
                B[i] = T.cast(T.cast(A[i], dt), "float32") + v
                C[i] = T.cast(T.reinterpret(A[i], np.uint32) >> 31, "float32")
    return main


@pytest.mark.parametrize("dt", [np.float32, np.int8, np.float16, np.dtype("int16"),
                                torch.float32], ids=str)
def test_numpy_and_torch_dtypes_in_kernel_code(dt, ptxas):
    """numpy's scalar types (np.float32) and dtypes (np.dtype("int16")) name dtypes in a
    kernel's T.cast / T.reinterpret / T.alloc_var as torch's and TileLang's do (they were
    typing's "expected a dtype", got class(float32))."""
    a = torch.tensor([-2.7, -1.2, 0.0, 0.4, 1.6, 2.5, 3.9, 100.0])
    b, c = torch.zeros(8), torch.zeros(8)
    tilelang.compile(_numpy_dtypes_kernel(dt))(a, b, c)
    npd = np.dtype(dt) if not isinstance(dt, torch.dtype) else np.float32
    want = torch.from_numpy(a.numpy().astype(npd).astype(np.float32)) + \
        float(np.asarray(2.0).astype(npd))
    torch.testing.assert_close(b, want)
    assert c.tolist() == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    for arch in ("sm_80", "sm_90a"):
        ptxas(tilelang.compile(_numpy_dtypes_kernel(dt), target="cuda").get_kernel_source(
            arch=arch), arch)


def test_a_call_of_the_annotated_tensors_goes_straight_to_the_kernel(monkeypatch):
    """Torch tensors of the annotations' fixed dtypes and shapes skip the door's checks
    (~10 µs a call, which a benchmark timing each call sees); any other call is checked
    as before, with the same errors."""
    from tilejit.tilelang.classic import CompiledPrimFunc
    kernel = tilelang.compile(copy_program())
    checked = []
    real = CompiledPrimFunc._check
    monkeypatch.setattr(CompiledPrimFunc, "_check",
                        lambda self, *a: checked.append(a[0]) or real(self, *a))
    a, b = torch.randn(64), torch.zeros(64)
    kernel(a, b)
    assert torch.equal(b, a) and checked == []
    for bad, match in ((torch.zeros(65), r"argument 'B': shape\[0\] must be 64"),
                       (torch.zeros(64, dtype=torch.float64), "expected dtype float32"),
                       (torch.zeros(64, 1), "expected a 1-d tensor")):
        with pytest.raises((ValueError, TypeError), match=match):
            kernel(a, bad)
    assert checked
    b2 = torch.zeros(64)
    kernel(a.numpy(), b2.numpy())          # not torch tensors: checked, then run
    assert torch.equal(b2, a)


def test_symbolic_or_strided_annotations_keep_every_check():
    from tilejit.tilelang.classic import CompiledPrimFunc
    n = T.dynamic("n")

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                B[i] = A[i]
    kernel = tilelang.compile(main)
    assert CompiledPrimFunc._fixed_signature(kernel) is None
    with pytest.raises(ValueError, match="symbol n"):
        kernel(torch.zeros(64), torch.zeros(65))
