"""What a TileLang program meets where tilejit lacks one of TileLang's names outside
``tilelang.language``: an error naming TileLang's name and saying it is not supported,
never Python's bare "cannot import name", "No module named ..., not a package" or
"object has no attribute" from inside tilejit (``compat.py``: ``NotSupportedError``, its
``from m import name`` form ``NotSupportedImportError``, ``not_in_module``,
``missing_attribute``, ``MissingModules``). Probes keep Python's answers: ``hasattr`` is
False, ``getattr(x, name, default)`` the default, a name TileLang does not have either a
plain ``AttributeError``."""
import importlib

import pytest

import tilejit as tilelang
import tilejit.language as T
from tilejit.language.compat import NotSupportedError, NotSupportedImportError


@pytest.mark.parametrize("module, name, says", [
    ("tilejit.language", "match_all_sync_x", None),
    ("tilejit.language.dtypes", "is_float4_e2m1", "tilelang.language.dtypes"),
    ("tilejit.testing", "_check_is_gfx950", "tilelang.testing"),
    ("tilejit.tilelang.transform", "PassContext", "tilelang.transform"),
    ("tilejit.tilelang.layout", "SwizzleMode", "tilelang.layout"),
    ("tilejit.tilelang.contrib", "cc", "tilelang.contrib"),
    ("tilejit.carver.roller", "PrimFuncNode", "tilelang.carver.roller"),
    ("tilejit.carver.arch", "cuda", "tilelang.carver.arch"),
    ("tilejit.autotuner.param", "KERNEL_CUBIN_PATH", "tilelang.autotuner.param"),
    ("tilejit.tilelang.cuda.intrinsics.macro.mma_macro_generator",
     "TensorCoreIntrinEmitterWithLadderTransform", "mma_macro_generator"),
    ("tilejit.ir", "get_buffer_span", "tilelang.ir"),
    ("tilejit.tilelang.tvm", "relax", "tvm.relax"),
])
def test_importing_a_name_tilejit_lacks_says_it_is_not_supported(module, name, says):
    namespace = {}
    if says is None:        # a name neither has: Python's own answer
        with pytest.raises(ImportError, match="cannot import name"):
            exec(f"from {module} import {name}", namespace)
        return
    with pytest.raises(NotSupportedImportError, match="is not supported by tilejit") as e:
        exec(f"from {module} import {name}", namespace)
    assert says in str(e.value) and name in str(e.value)
    assert "docs/tilelang-compat.md" in str(e.value)
    # reading it is the AttributeError form; the probes keep Python's answers
    mod = importlib.import_module(module)
    with pytest.raises(NotSupportedError, match=name):
        getattr(mod, name)
    assert not hasattr(mod, name)
    assert getattr(mod, name, "default") == "default"


def test_importing_a_name_tilejit_has_and_one_it_lacks_together():
    with pytest.raises(NotSupportedImportError, match="tilelang.transform.PassContext"):
        exec("from tilejit.tilelang.transform import PassConfigKey, PassContext", {})


@pytest.mark.parametrize("module, tilelang_module", [
    ("tilejit.tilelang.engine.lower", "tilelang.engine.lower"),
    ("tilejit.tilelang.jit.adapter", "tilelang.jit.adapter"),
    ("tilejit.tilelang.jit.kernel", "tilelang.jit.kernel"),
    ("tilejit.language.tir.exports", "tilelang.language.tir.exports"),
    ("tilejit.profiler.bench", "tilelang.profiler.bench"),
    ("tilejit.autotuner.tuner", "tilelang.autotuner.tuner"),
    ("tilejit.carver.roller.hint", "tilelang.carver.roller.hint"),
    ("tilejit.carver.arch.driver.cuda_driver", "tilelang.carver.arch.driver.cuda_driver"),
    ("tilejit.tilelang.cuda.pipeline", "tilelang.cuda.pipeline"),
])
def test_a_module_of_tilelangs_tilejit_lacks_is_refused_by_name(module, tilelang_module):
    """Also below a module tilejit keeps as one file where TileLang has a package
    (``tilelang.jit``, ``tilelang.profiler``, ``tilelang.carver.arch.driver``), which
    Python would answer with "... is not a package"."""
    with pytest.raises(ModuleNotFoundError, match=f"{tilelang_module} \\(imported as "
                                                  f"{module}\\) is not supported by tilejit"):
        exec(f"import {module}", {})
    # a probe is told there is none, as Python tells it; so is a module outside the
    # packages that stand for TileLang's
    assert importlib.util.find_spec(module) is None
    with pytest.raises(ModuleNotFoundError, match="No module named"):
        importlib.import_module(module)
    assert importlib.util.find_spec("tilejit.sim.no_such_module") is None


@T.prim_func
def _copy(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.float32)):
    with T.Kernel(1, threads=64):
        for i in T.Parallel(64):
            B[i] = A[i]


@tilelang.jit
def _eager_copy(A, n: int = 64):
    A: T.Tensor((n,), T.float32)
    B = T.empty((n,), T.float32)
    with T.Kernel(1, threads=64):
        for i in T.Parallel(n):
            B[i] = A[i]
    return B


def _objects():
    kernel = tilelang.compile(_copy, out_idx=[1])
    profiler = kernel.get_profiler()
    tuner = tilelang.autotuner.AutoTuner(lambda n=64: _copy, [{"n": 64}])
    return {"JITKernel": kernel, "Profiler": profiler, "JITImpl": _eager_copy,
            "PrimFunc": _copy, "AutoTuner": tuner, "DataType": T.float16,
            "compiled eager": _eager_copy.compile(n=64)}


@pytest.mark.parametrize("which, name, says", [
    ("JITKernel", "get_host_source", "no host source"),
    ("JITKernel", "adapter", "execution backends"),
    ("compiled eager", "execution_backend", "execution backends"),
    ("Profiler", "with_default_adapter", "TileLang's profiler"),
    ("JITImpl", "parse_args", "@jit object"),
    ("JITImpl", "adapter", "execution backends"),
    ("PrimFunc", "script", "TVM's PrimFunc"),
    ("PrimFunc", "buffer_map", "TVM's PrimFunc"),
    ("AutoTuner", "jit_compile", "AutoTuner"),
    ("DataType", "type_code", "DataType"),
])
def test_an_attribute_of_tilelangs_object_tilejit_lacks_says_so(which, name, says):
    obj = _objects()[which]
    with pytest.raises(NotSupportedError, match="is not supported by tilejit") as e:
        getattr(obj, name)
    assert says in str(e.value) and name in str(e.value) and "tilejit's has" in str(e.value)
    assert not hasattr(obj, name)
    # a name TileLang's object does not have either, a private one: Python's answer
    for other in ("no_such_attribute", "_repr_html_"):
        with pytest.raises(AttributeError) as plain:
            getattr(obj, other)
        assert type(plain.value) is AttributeError


def test_a_property_that_raises_shows_its_own_error():
    class Kernel(tilelang.tilelang.jit.KernelConveniences):
        @property
        def latency(self):
            raise AttributeError("latency is known after tuning")
    with pytest.raises(AttributeError, match="known after tuning"):
        getattr(Kernel(), "latency")  # noqa: B009


def test_carver_templates_are_names_of_the_package():
    """``from tilelang import carver; carver.MatmulTemplate(...)``, as TileLang's tests
    spell it; a name the package lacks says so."""
    from tilejit import carver
    from tilejit.carver import template
    for name in ("MatmulTemplate", "GEMVTemplate", "ElementwiseTemplate",
                 "GeneralReductionTemplate", "FlashAttentionTemplate"):
        assert getattr(carver, name) is getattr(template, name)
    assert carver.CUDA is importlib.import_module("tilejit.carver.arch").CUDA
    with pytest.raises(NotSupportedError, match="tilelang.carver.ConvTemplate is not"):
        getattr(carver, "ConvTemplate")  # noqa: B009


def test_import_tvm_gives_the_stand_in_and_refuses_the_rest_by_name():
    """TileLang makes its bundled TVM importable (``import tvm``, ``from tvm.tirx import
    ...``); with no TVM installed, tilejit's stand-in (``from tilelang import tvm``'s) is
    that module, and a TVM module it lacks, or ``tvm_ffi``, is refused by name."""
    namespace = {}
    exec("import tvm", namespace)
    tvm = namespace["tvm"]
    from tilejit.tilelang import tvm as stand_in
    if tvm is not stand_in:
        pytest.skip("TVM itself is installed here")
    assert tvm.DataType("float16").bits == 16
    namespace = {}
    exec("import tvm.tirx as tirx\nfrom tvm.arith import Analyzer", namespace)
    assert namespace["tirx"] is stand_in.tirx
    assert namespace["Analyzer"]().can_prove_equal(4, 4)
    for module in ("tvm.ir", "tvm.tirx.expr", "tvm.script", "tvm_ffi"):
        with pytest.raises(ModuleNotFoundError, match=f"{module} is not supported by tilejit"):
            exec(f"import {module}", {})
    with pytest.raises(NotSupportedImportError, match="tvm.arith.Z3ContextScope"):
        exec("from tvm.arith import Z3ContextScope", {})
    # probes are told there is none (torch's `has_tvm()`, TileLang's requires_package)
    import sys
    saved = sys.modules.pop("tvm")
    try:
        for module in ("tvm", "tvm_ffi"):
            assert importlib.util.find_spec(module) is None
            assert not tilelang.testing._importable(module)
    finally:
        sys.modules["tvm"] = saved
    # the stand-in keeps its own spec under its second name (a reload finds its file)
    assert stand_in.__spec__.name == "tilejit.tilelang.tvm"


def test_a_misspelt_name_is_offered_the_one_meant():
    with pytest.raises(NotSupportedError, match="did you mean 'requires_cuda'"):
        getattr(tilelang.testing, "requires_cud")  # noqa: B009


def test_a_submodule_being_imported_is_found_where_python_looks_for_it():
    """``from m import x`` falls back to ``sys.modules["m.x"]`` on an AttributeError (a
    stub module, an import cycle): the module's ``__getattr__`` leaves it to Python."""
    import sys
    import types
    stub = types.ModuleType("tilejit.carver.stub")
    sys.modules["tilejit.carver.stub"] = stub
    try:
        namespace = {}
        exec("from tilejit.carver import stub", namespace)
        assert namespace["stub"] is stub
    finally:
        del sys.modules["tilejit.carver.stub"]


def test_a_property_of_properties_is_read_again_once():
    calls = []

    class Kernel(tilelang.tilelang.jit.KernelConveniences):
        def __getattr__(self, name):
            return super().__getattr__(name)

    for k in range(12):     # p11 reads p10 ... reads p0, which raises
        def getter(self, k=k):
            calls.append(k)
            if k == 0:
                raise AttributeError("p0 is not known yet")
            return getattr(self, f"p{k - 1}")
        setattr(Kernel, f"p{k}", property(getter))
    with pytest.raises(AttributeError):
        getattr(Kernel(), "p11")  # noqa: B009
    assert len(calls) <= 12 * 13        # (each level read again once: not 2 ** 12)


def test_tilelangs_partial_packages_are_attributes_of_the_top_module():
    """``tilelang.cuda``, ``tilelang.contrib``, ``tilelang.transform``, ``tilelang.engine``
    read off ``import tilelang``: tilejit's modules standing for them, their submodules
    imported when first read (``tilelang.contrib.nvcc``); a name they lack says so."""
    from tilejit.tilelang.cuda.intrinsics import TensorCoreIntrinEmitter
    assert tilelang.cuda.intrinsics.TensorCoreIntrinEmitter is TensorCoreIntrinEmitter
    assert tilelang.contrib.nvcc.have_tensorcore("9.0")
    assert tilelang.transform.simplify_prim_func(len) is len
    assert callable(tilelang.engine.callback.register_cuda_postproc_callback)
    with pytest.raises(NotSupportedError, match="tilelang.cuda.pipeline is not supported"):
        getattr(tilelang.cuda, "pipeline")  # noqa: B009
    # TileLang's CUDA dialect (`from tilelang.cuda import language as T`) is the language
    from tilejit.tilelang.cuda import language as cuda_language
    import tilejit.tilelang.cuda.language as cuda_language_too
    assert cuda_language is cuda_language_too is tilelang.language
    with pytest.raises(NotSupportedError, match="tilelang.contrib.cc is not supported"):
        getattr(tilelang.contrib, "cc")  # noqa: B009
    assert not hasattr(tilelang.contrib, "_private")
