"""TileLang's public names in tilejit (``tilejit/language/compat.py``,
``docs/tilelang-compat.md``): every name of ``tilelang.language`` and ``tilelang`` is
either there or an error that names it and says it is not supported, where the program
uses it (a ``CompileError`` at its line in a kernel); the page lists them all."""
import importlib
import importlib.util
import os

import numpy as np
import pytest

import tilejit
import tilejit as tilelang
import tilejit.language as T
from tilejit.language import compat
from tilejit.language.compat import NotSupportedError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main_line(marker):
    return next(n for n, text in enumerate(open(__file__), 1) if marker in text and
                "main_line" not in text)


def _generator():
    spec = importlib.util.spec_from_file_location(
        "tilelang_compat", os.path.join(ROOT, "tools", "tilelang_compat.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_page_is_up_to_date():
    with open(os.path.join(ROOT, "docs", "tilelang-compat.md")) as f:
        assert f.read() == _generator().markdown(), \
            "regenerate: python tools/tilelang_compat.py > docs/tilelang-compat.md"


@pytest.mark.parametrize("name", compat.language_names())
def test_every_language_name_is_there_or_says_it_is_not_supported(name):
    try:
        getattr(T, name)
    except NotSupportedError as e:
        assert f"T.{name} (tilelang.language.{name} in TileLang) is not supported by " \
               f"tilejit: " in str(e) and "docs/tilelang-compat.md" in str(e)
        assert not hasattr(T, name) and getattr(T, name, None) is None


@pytest.mark.parametrize("name", list(compat.TILELANG))
def test_tilelang_names_that_are_not_supported(name):
    if name == "ir":            # tilejit.ir is tilejit's own package
        return
    with pytest.raises(NotSupportedError, match=rf"tilejit\.{name} \(tilelang\.{name} in "
                                                rf"TileLang\) is not supported by tilejit"):
        getattr(tilelang, name)


def test_other_missing_names_stay_plain_attribute_errors():
    for module in (T, tilelang):
        for name in ("no_such_name", "__no_such_dunder__"):
            with pytest.raises(AttributeError) as info:
                getattr(module, name)
            assert type(info.value) is AttributeError


def test_import_from_names_the_feature():
    with pytest.raises(ImportError, match="tma_gather4"):
        exec("from tilejit.language import tma_gather4", {})


def test_a_kernel_that_uses_one_is_a_compile_error_at_its_line():
    def make():
        @tilejit.kernel
        def vote(X, Out):
            with T.Kernel(1, threads=32) as bx:
                Out[0] = T.tma_gather4(X[0])
        return vote
    with pytest.raises(tilejit.CompileError) as info:
        make()
    e = info.value
    assert "T.tma_gather4 (tilelang.language.tma_gather4 in TileLang) is not " \
           "supported by tilejit: a CUDA extension of TileLang" in str(e)
    assert e.lineno == make.__code__.co_firstlineno + 4


def test_a_kernel_built_around_one_names_it_not_the_missing_t_kernel():
    """TileLang's source kernels have no `with T.Kernel`: the name they use in its place
    is the error, not the missing block."""
    N = T.dynamic("N")

    def make():
        @T.prim_func
        def main(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32)):
            T.CUDASourceCodeKernel(T.ceildiv(N, 128), threads=128, source_code_or_path="x.cu",
                                   entry_name="copy")
        return tilelang.compile(main, target="cuda")
    with pytest.raises(tilejit.CompileError) as info:
        make()
    assert "T.CUDASourceCodeKernel (tilelang.language.CUDASourceCodeKernel in TileLang) is " \
           "not supported by tilejit: a kernel written in CUDA C++ needs NVIDIA's compiler" \
           in str(info.value)
    assert info.value.lineno == make.__code__.co_firstlineno + 3


def test_a_tilelang_module_swapped_by_hand_is_tilejits():
    """`from tilelang.layout import make_swizzled_layout` with "tilelang" replaced by
    "tilejit": the module tilejit keeps for it, tilejit.tilelang.layout."""
    import importlib
    layout = importlib.import_module("tilejit.layout")
    assert layout is importlib.import_module("tilejit.tilelang.layout")
    from tilejit.layout import make_swizzled_layout
    assert make_swizzled_layout is layout.make_swizzled_layout
    with pytest.raises(ModuleNotFoundError, match="No module named 'tilejit.classic'"):
        importlib.import_module("tilejit.classic")
    # a name tilejit has for something else (the decorator tilejit.jit) is not replaced
    # by the module: TileLang's tilelang.jit is both, and `from tilelang.jit import
    # JITKernel` reads the module
    module = importlib.import_module("tilejit.jit")
    assert module.JITKernel is importlib.import_module("tilejit.tilelang.jit").JITKernel
    assert callable(tilejit.jit) and tilejit.jit is not module


def test_a_with_block_of_one_names_it():
    """`with T.sblock("b"), T.Then():` (TVM's script) says T.sblock is not supported, not
    that a `with` block is unsupported (`with T.If(c), T.Then():` is an `if`)."""
    def make():
        @tilejit.kernel
        def guarded(A, B):
            with T.Kernel(1, threads=128) as bx:
                for i in T.Parallel(128):
                    with T.sblock("b"), T.Then():
                        B[i] = A[i]
        return guarded
    with pytest.raises(tilejit.CompileError) as info:
        make()
    assert str(info.value).startswith("T.sblock (tilelang.language.sblock in TileLang) is "
                                      "not supported by tilejit")
    assert info.value.lineno == make.__code__.co_firstlineno + 5


def _extern_in_a_macro():
    @T.macro
    def dequantize(packed, out):
        T.call_extern("fast_dequant", T.access_ptr(packed, "r"), T.access_ptr(out, "w"), 1,
                      dtype="bfloat16")

    @T.prim_func
    def main(A: T.Tensor((128,), "uint8"), C: T.Tensor((128,), "bfloat16")):
        with T.Kernel(1, threads=128) as bx:
            packed = T.alloc_local((4,), "uint8")
            out = T.alloc_local((8,), "bfloat16")
            dequantize(packed, out)
            C[bx] = out[0]
    return main


@pytest.mark.parametrize("target", ["cuda -arch=sm_90a", "sim"])
def test_one_in_a_macro_is_a_compile_error_at_its_line_not_an_internal_error(target):
    """TileLang's mxfp4 dequantizing GEMM calls T.call_extern inside a T.macro: the
    error names the name and the macro's line, not "internal compiler error" (at
    tilelang.compile, as TileLang's, which compiles there)."""
    import torch
    with pytest.raises(tilejit.CompileError) as info:
        kernel = tilelang.compile(_extern_in_a_macro(), target=target)
        if target == "sim":
            kernel(torch.zeros(128, dtype=torch.uint8), torch.zeros(128, dtype=torch.bfloat16))
        else:
            kernel.get_kernel_source()
    e = info.value
    assert str(e).startswith("T.call_extern of 'fast_dequant' is not supported by tilejit: "
                             "it emits PTX itself") and "internal" not in str(e)
    assert e.lineno == _extern_in_a_macro.__code__.co_firstlineno + 3


def test_an_unsupported_dtype_in_an_annotation_says_so_where_it_is_written():
    # TileLang's dtypes that tilejit names only: the name reads (module-level defaults and
    # parametrize lists of TileLang's tests import), a tensor of it is a TypeError
    assert T.float8_e4m3fnuz == "float8_e4m3fnuz" and T.float8_e4m3fnuz.bits == 8
    with pytest.raises(TypeError, match=r"float8_e4m3fnuz is a dtype name tilejit has but no "
                                        r"tensor or tile can hold"):
        @T.prim_func
        def main(A: T.Tensor((16,), T.float8_e4m3fnuz)):
            pass


def test_vector_and_narrow_dtypes_are_names_with_tilelangs_attributes():
    assert (T.float32x4.bits, T.float32x4.lanes, T.float32x4.kind) == (32, 4, "float")
    assert (T.float4_e2m1fn.bits, T.float4_e2m1_unpacked.bits) == (4, 8)
    assert T.float4_e2m1fn.is_float4() and T.float4_e2m1fnx2.is_float4()
    assert T.float4_e2m1fn.is_float4_e2m1fn() and not T.float16.is_float4()
    assert T.float4_e2m1_unpacked.is_float4_e2m1_unpacked()
    assert not hasattr(T, "float4_e2m1_unpackedx2")      # not one of TileLang's names
    assert T.float4_e2m1fn != T.float4_e2m1_unpacked
    with pytest.raises(NotSupportedError):
        assert T.is_float4_e2m1fn is None                   # TileLang's function: not built
    from tilejit.language.dtypes import resolve_torch_storage_dtype
    assert resolve_torch_storage_dtype(T.float16) == T.float16
    assert resolve_torch_storage_dtype(T.int4) == T.int8
    torch = pytest.importorskip("torch")
    want = T.float4_e2m1fnx2 if hasattr(torch, "float4_e2m1fn_x2") else T.int8
    assert resolve_torch_storage_dtype(T.float4_e2m1fn) == want
    from tilejit.language.dtypes import _TORCH_DTYPE_TO_STR
    assert _TORCH_DTYPE_TO_STR[torch.bfloat16] == "bfloat16"
    assert _TORCH_DTYPE_TO_STR[torch.float8_e4m3fn] == "float8_e4m3"


def test_a_vector_dtype_in_a_kernel_is_an_error_at_its_line():
    @T.prim_func
    def main(A: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            v = T.alloc_local((1,), T.float32x4)                # marker: vector
            A[bx] = v[0]
    with pytest.raises(tilejit.CompileError, match=r"float32x4 \(a vector of 4 values\) is a "
                                                   r"dtype name tilejit has but no tensor") as e:
        tilejit.compile(main)(np.zeros(4, np.float32))
    assert e.value.lineno == main_line("marker: vector")


def test_a_narrow_dtype_in_an_eager_programs_annotation_names_the_argument():
    @tilejit.jit
    def packed(x):
        m = T.dynamic("m")
        x: T.Tensor[(m, 16), T.float6_e3m2fn]
        with T.Kernel(1, threads=32):
            pass
    with pytest.raises(TypeError, match=r"argument 'x' \(annotated at line \d+\): "
                                        r"float6_e3m2fn is a dtype name"):
        packed(np.zeros((4, 8), np.uint8))


def test_a_misspelt_name_still_gets_suggestions():
    with pytest.raises(tilejit.CompileError, match=r"unknown name T.ceildivv.*T.ceildiv"):
        @tilejit.kernel
        def k(Out):
            with T.Kernel(1, threads=32) as bx:
                Out[0] = T.ceildivv(3, 2)


def test_tvm_imports_and_its_names_say_they_are_not_supported():
    """`from tilelang import tvm` is the first line of many TileLang programs that never
    use it: the import works; any name of it but DataType raises NotSupportedError."""
    from tilejit import tvm
    from tilejit.language.dtypes import DType as tilejit_dtype
    for name in ("IRModule", "relax", "testing"):
        with pytest.raises(NotSupportedError, match=rf"tvm\.{name} .* tilejit is built "
                                                    "without TVM"):
            getattr(tvm, name)
    # the one name it has: TVM's DataType(dtype).bits is tilejit's dtype class
    assert tvm.DataType is tilejit_dtype and tvm.DataType("float16").bits == 16
    # tvm.target has its Target (tests/tilelang/test_cpu_targets.py), nothing else
    with pytest.raises(NotSupportedError, match=r"tvm\.target\.list_tags .* without TVM"):
        _ = tvm.target.list_tags
    with pytest.raises(AttributeError):
        _ = tvm.__wrapped__


def test_tvm_tir_is_the_older_name_of_tirx_and_te_var_a_dynamic_dimension():
    """BitBLAS's and older TileLang programs write `from tvm import tir` (TileLang's fork
    renamed it tirx) and declare run-time dimensions with `tvm.te.var("m")`."""
    from tvm import te, tir
    from tilejit import tvm
    assert tir.const is tvm.tirx.const and tir.Cast is tvm.tirx.Cast
    assert str(tir.const(7, "int8").dtype) == "int8"
    m = te.var("m")
    assert isinstance(m, T.Var) and m.name == "m" and m.dynamic
    with pytest.raises(NotSupportedError, match=r"tvm\.tir\.IRModule .* without TVM"):
        _ = tir.IRModule
    with pytest.raises(NotSupportedError, match=r"tvm\.te\.compute .* without TVM"):
        _ = te.compute


@pytest.mark.parametrize("module, missing, why", [
    ("tilejit.backend", "backend", "TileLang's backend registry"),
    ("tilejit.tools.plot", "tools", "TileLang's tools")])
def test_importing_a_module_tilejit_does_not_have_says_so(module, missing, why):
    """TileLang's tests import its modules with the name swapped: the error names
    TileLang's module (the first one missing) and says it is not supported, not Python's
    bare message."""
    with pytest.raises(ModuleNotFoundError) as info:
        importlib.import_module(module)
    text = str(info.value)
    assert text.startswith(f"tilelang.{missing} (imported as tilejit.{missing}) is not "
                           f"supported by tilejit: {why}")
    assert text.endswith("; see docs/tilelang-compat.md")


def test_modules_tilejit_has_still_import_and_others_get_pythons_answer():
    assert importlib.util.find_spec("tilejit.no_such_module") is None
    assert importlib.util.find_spec("tilejit.sim.no_such_module") is None
    # (a module under one of tilejit's packages standing for TileLang's is TileLang's:
    # tests/language/test_compat_errors.py)
    importlib.import_module("tilejit.sim")
    importlib.import_module("tilejit.tilelang.cuda.intrinsics.sparse_layout")


def test_a_missing_submodule_of_an_aliased_package_says_so():
    """`from tilelang.transform.simplify import apply_simplify` swapped to tilejit: the
    not-supported error, not Python's bare one; a probe is told there is none."""
    import importlib.util
    with pytest.raises(ModuleNotFoundError, match="tilelang.transform.simplify .* is not "
                                                  "supported by tilejit"):
        from tilejit.transform.simplify import apply_simplify  # noqa: F401
    assert importlib.util.find_spec("tilejit.transform.simplify") is None
    # one tilejit has is the module itself under either name
    import tilejit.engine.param as a
    import tilejit.tilelang.engine.param as b
    assert a is b


def test_programs_named_test_are_not_collected_by_pytest(tmp_path):
    """A `@tilelang.jit` program or `@tilejit.kernel` named test_* in a test file is not
    a test (TileLang's JITImpl is not collected either)."""
    import os
    import subprocess
    import sys
    (tmp_path / "test_named.py").write_text("""
import tilejit as tilelang
import tilejit.language as T

@tilelang.jit
def test_kernel(A, B):
    N = T.const("N")
    A: T.Tensor((N,), T.float32)
    B: T.Tensor((N,), T.float32)
    with T.Kernel(1, threads=32):
        for i in T.Parallel(N):
            B[i] = A[i]

@tilelang.kernel
def test_raw(A):
    with T.Kernel(1, threads=32):
        A[0] = 1.0

def test_real():
    assert True
""")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=root, PYTEST_ADDOPTS="")
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-p", "no:xdist", str(tmp_path / "test_named.py")],
                         capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.returncode == 0 and "1 passed" in out.stdout, out.stdout[-2000:]
