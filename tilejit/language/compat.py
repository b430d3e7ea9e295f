"""TileLang's public names that tilejit does not have, and the error that says so.

``import tilejit.language as T`` stands for ``import tilelang.language as T``: a name
of TileLang's language that tilejit has is an attribute of ``tilejit.language``; one it
does not have raises ``NotSupportedError`` naming it (through the module's
``__getattr__``), an ``AttributeError`` whose message says that the feature is
TileLang's and not supported, where the program uses it. In a kernel the front end
reports it as a ``CompileError`` at its line (``frontend/validate.py``). The same goes
for ``tilejit.<name>`` standing for ``tilelang.<name>`` (``TILELANG``).

The names are those of TileLang v0.1.13 (``tilelang.language.__all__``: its common and
CUDA dialects, its dtypes, TVM's TIR operations it re-exports) and the names of TVM's TIR
script that TileLang's own examples and tests use as ``T.<name>``.
``docs/tilelang-compat.md`` lists every one of them, supported or not
(``tests/language/test_compat.py`` keeps the two in step).
"""
from __future__ import annotations

import difflib
import dis
import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import threading

VERSION = "0.1.13"


class NotSupportedError(AttributeError):
    """A TileLang name tilejit does not have (an ``AttributeError``, so ``hasattr``
    and ``getattr(T, name, default)`` keep working). Made while the program's line is a
    ``from module import name`` it is a ``NotSupportedImportError`` instead: Python
    turns an ``AttributeError`` there into its own "cannot import name", which drops the
    message."""

    def __new__(cls, *args, **kwargs):
        if cls is NotSupportedError and _importing_a_name():
            return NotSupportedImportError(*args)
        return super().__new__(cls, *args, **kwargs)


class NotSupportedImportError(ImportError):
    """``NotSupportedError``'s message, for ``from module import name``."""


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_IMPORT_FROM = dis.opmap["IMPORT_FROM"]
_IMPORT_NAME = dis.opmap["IMPORT_NAME"]


def _programs_opcode(skip_importlib: bool = False) -> int | None:
    """The opcode the program's frame is at: the nearest frame outside tilejit (and, with
    ``skip_importlib``, outside importlib's own frames), None if there is none."""
    frame = sys._getframe(1).f_back
    while frame is not None and (frame.f_code.co_filename.startswith(_PACKAGE) or (
            skip_importlib and frame.f_code.co_filename.startswith("<frozen importlib"))):
        frame = frame.f_back
    if frame is None or not 0 <= frame.f_lasti < len(frame.f_code.co_code):
        return None
    return frame.f_code.co_code[frame.f_lasti]


def _importing_a_name() -> bool:
    """Whether the program's line is reading a name in ``from m import name``."""
    return _programs_opcode() == _IMPORT_FROM


def _import_statement() -> bool:
    """Whether the module being looked for is asked for by an ``import`` statement of the
    program's (not a probe: ``importlib.util.find_spec``, ``importlib.import_module``)."""
    return _programs_opcode(skip_importlib=True) == _IMPORT_NAME


def _names(text: str) -> tuple:
    return tuple(text.split())


# (where TileLang defines the names, the names): every public name of
# ``tilelang.language``, supported by tilejit or not
LANGUAGE_GROUPS = tuple((where, _names(text)) for where, text in (
    ('tilelang.language (common)', """
    access_ptr activemask all_of all_sync alloc_barrier alloc_fragment alloc_global
    alloc_local alloc_reducer alloc_shared alloc_var allocate annotate_layout
    annotate_restrict_buffers annotate_safe_value any_of any_sync async_copy
    atomic_add atomic_addx2 atomic_addx4 atomic_load atomic_max atomic_min atomic_or
    atomic_store ballot ballot_sync barrier_arrive barrier_wait BaseTileScheduler
    c2d_im2col clamp clear copy cummax cumsum dynamic empty fill finalize_reducer
    Fragment FragmentBuffer gemm gemm_sp GemmWarpPolicy get_block_binding
    get_block_bindings get_block_extent get_block_extents get_lane_idx get_let_value
    get_thread_binding get_thread_bindings get_thread_extent get_thread_extents
    get_warp_idx get_warp_idx_sync has_let_value im2col import_source
    index_to_coordinates inline Kernel KernelLaunchFrame Layout LocalBuffer
    loop_break make_tensor make_tensor_from_addr mbarrier_arrive
    mbarrier_arrive_expect_tx mbarrier_expect_tx mbarrier_wait_parity meta_class
    no_set_max_nreg Parallel Persistent PersistentTileScheduler Pipelined reduce
    reduce_absmax reduce_abssum reduce_bitand reduce_bitor reduce_bitxor reduce_max
    reduce_min reduce_sum reducer_init reducer_update reshape Serial SharedBuffer
    shfl_down shfl_sync shfl_up
    shfl_xor StridedTensor symbolic sync_global sync_grid sync_threads sync_warp
    syncthreads_and syncthreads_count syncthreads_or Tensor transpose Unroll
    use_swizzle Vectorized view warp_reduce_bitand warp_reduce_bitor warp_reduce_max
    warp_reduce_min warp_reduce_sum
    """),
    ('tilelang.language (eager builder)', """
    annotate_compile_flags annotate_pass_configs const JITFunc macro prim_func
    PrimFunc Ref
    """),
    ('tilelang.language.dtypes', """
    bool short int uint long half float double int4 int8 int16 int32 int64 int8x2
    int16x2 int32x2 int64x2 int8x4 int16x4 int32x4 int64x4 int8x8 int16x8 int32x8
    int64x8 int8x16 int16x16 int32x16 int64x16 int8x32 int16x32 int32x32 int64x32
    int8x64 int16x64 int32x64 int64x64 uint8 uint16 uint32 uint64 uint8x2 uint16x2
    uint32x2 uint64x2 uint8x4 uint16x4 uint32x4 uint64x4 uint8x8 uint16x8 uint32x8
    uint64x8 uint8x16 uint16x16 uint32x16 uint64x16 uint8x32 uint16x32 uint32x32
    uint64x32 uint8x64 uint16x64 uint32x64 uint64x64 float16 float32 float64
    float16x2 float32x2 float64x2 float16x4 float32x4 float64x4 float16x8 float32x8
    float64x8 float16x16 float32x16 float64x16 float16x32 float32x32 float64x32
    float16x64 float32x64 float64x64 float8_e3m4 float8_e3m4x2 float8_e3m4x4
    float8_e3m4x8 float8_e3m4x16 float8_e3m4x32 float8_e3m4x64 float8_e4m3
    float8_e4m3x2 float8_e4m3x4 float8_e4m3x8 float8_e4m3x16 float8_e4m3x32
    float8_e4m3x64 float8_e4m3b11fnuz float8_e4m3b11fnuzx2 float8_e4m3b11fnuzx4
    float8_e4m3b11fnuzx8 float8_e4m3b11fnuzx16 float8_e4m3b11fnuzx32
    float8_e4m3b11fnuzx64 float8_e4m3fn float8_e4m3fnx2 float8_e4m3fnx4
    float8_e4m3fnx8 float8_e4m3fnx16 float8_e4m3fnx32 float8_e4m3fnx64
    float8_e4m3fnuz float8_e4m3fnuzx2 float8_e4m3fnuzx4 float8_e4m3fnuzx8
    float8_e4m3fnuzx16 float8_e4m3fnuzx32 float8_e4m3fnuzx64 float8_e5m2
    float8_e5m2x2 float8_e5m2x4 float8_e5m2x8 float8_e5m2x16 float8_e5m2x32
    float8_e5m2x64 float8_e5m2fnuz float8_e5m2fnuzx2 float8_e5m2fnuzx4
    float8_e5m2fnuzx8 float8_e5m2fnuzx16 float8_e5m2fnuzx32 float8_e5m2fnuzx64
    float8_e8m0fnu float8_e8m0fnux2 float8_e8m0fnux4 float8_e8m0fnux8
    float8_e8m0fnux16 float8_e8m0fnux32 float8_e8m0fnux64 float6_e2m3fn
    float6_e2m3fnx2 float6_e2m3fnx4 float6_e2m3fnx8 float6_e2m3fnx16
    float6_e2m3fnx32 float6_e2m3fnx64 float6_e3m2fn float6_e3m2fnx2 float6_e3m2fnx4
    float6_e3m2fnx8 float6_e3m2fnx16 float6_e3m2fnx32 float6_e3m2fnx64 float4_e2m1fn
    float4_e2m1fnx2 float4_e2m1fnx4 float4_e2m1fnx8 float4_e2m1fnx16
    float4_e2m1fnx32 float4_e2m1fnx64 float4_e2m1_unpacked bfloat16 bfloat16x2
    tfloat32 tfloat32x2 tfloat32x4 tfloat32x8 tfloat32x16 tfloat32x32 tfloat32x64
    dtype AnyDType get_tvm_dtype is_float4_e2m1fn is_float4_e2m1_unpacked is_float4
    is_f8f6f4_family validate_gemm_ab_dtypes
    """),
    ('tilelang.language.math_intrinsics', """
    __cos __exp __exp10 __log __log10 __log2 __sin __tan abs2 add2 fast_rcp fma2
    ieee_add ieee_fdiv ieee_fmaf ieee_frcp ieee_frsqrt ieee_fsqrt ieee_mul ieee_sub
    max2 min2 mul2 sub2
    """),
    ('tilelang.language.tir.ir (TVM TIR operations)', """
    abs acos acosh address_of align_up Any anylist_getitem anylist_resetitem
    anylist_setitem_call_cpacked anylist_setitem_call_packed asin asinh assume atan
    atan2 atanh bitwise_and bitwise_not bitwise_or bitwise_xor call_cpacked
    call_cpacked_lowered call_extern call_intrin call_llvm_intrin
    call_llvm_pure_intrin call_packed call_packed_lowered call_pure_extern cast cdiv
    ceil ceildiv clz copysign cos cosh create_barriers end_profile_intrinsic erf exp
    exp10 exp2 extract_lane floor floordiv floormod fmod grid hypot if_then_else
    infinity IntImm isfinite isinf isnan isnullptr ldexp likely log log10 log1p log2
    lookup_param max max_value min min_value mma_fill mma_store nearbyint nextafter
    parallel popcount pow PrimExpr ptx_arrive_barrier ptx_arrive_barrier_expect_tx
    ptx_commit_group ptx_init_barrier_thread_count ptx_wait_group q_multiply_shift
    q_multiply_shift_per_axis reinterpret ret round rsqrt Select serial shift_left
    shift_right Shuffle sigmoid sin sinh sqrt start_profile_intrinsic StringImm tan
    tanh thread_binding trunc truncdiv truncmod tvm_access_ptr tvm_bmma_sync
    tvm_check_return tvm_fill_fragment tvm_load_matrix_sync tvm_mma_sync
    tvm_stack_alloca tvm_stack_make_array tvm_stack_make_shape tvm_storage_sync
    tvm_store_matrix_sync tvm_struct_get tvm_struct_set tvm_thread_allreduce
    tvm_thread_invariant tvm_throw_last_error tvm_tuple tvm_warp_activemask
    tvm_warp_shuffle tvm_warp_shuffle_down tvm_warp_shuffle_up
    TVMBackendAllocWorkspace TVMBackendFreeWorkspace undef unroll vectorcombine
    vectorhigh vectorized vectorlow vscale
    """),
    ("TVM's TIR script parser (re-exported by tilelang.language)", """
    alloc_buffer Assert attr bind block block_attr Broadcast Buffer buffer_store
    Cast comm_reducer decl_buffer dp4a Else env_thread evaluate func_attr handle
    handle_add_byte_offset If launch_thread let match_buffer ptr Ramp reads sblock
    sblock_alloc_buffer sblock_attr target Then thread_return tvm_call_cpacked
    type_annotation Var While writes
    """),
    ('tilelang.cuda.language', """
    alloc_cluster_barrier alloc_descriptor alloc_tmem annotate_consumer_reg_alloc
    annotate_l2_hit_ratio annotate_min_blocks_per_sm annotate_producer_reg_dealloc
    ClusterKernel copy_cluster create_tma_descriptor CUDASourceCodeKernel
    deallocate_tmem dec_max_nreg disable_warp_group_reg_alloc fence_proxy_async
    get_warp_group_idx inc_max_nreg increase_descriptor_offset ldg128 ldg256 ldg32
    ldg64 lds128 lds32 lds64 match_all_sync match_any_sync named_barrier_arrive
    ptx_arrive_cluster_barrier ptx_mma_sm70 set_max_nreg shuffle_elect stg128 stg256
    stg32 stg64 sts128 sts32 sts64 tma_copy tma_gather4 tma_gather4_bytes tma_load
    tma_load_2sm tma_scatter4 tma_store_arrive tma_store_wait
    """),
    ('tilelang.cuda.language.intrinsics', """
    __ffs __fns __ldg alloc_tcgen05_instr_desc alloc_tcgen05_instruction_desc
    alloc_tcgen05_smem_desc alloc_wgmma_desc compute_gmma_descriptor
    compute_umma_descriptor cp_async_barrier_noinc device_assert get_ldmatrix_offset
    get_mma_micro_size get_swizzle_layout initialize_tcgen05_descriptor
    initialize_wgmma_descriptor make_blockscaled_gemm_layout make_mma_swizzle_layout
    mma_gemm_blockscaled mma_store_index_map ptx_cp_async ptx_cp_async_barrier
    ptx_cp_async_bulk ptx_ldmatrix ptx_mma ptx_mma_sp ptx_tcgen05_mma_blockscaled_ss
    ptx_tcgen05_mma_ss ptx_tcgen05_mma_ts ptx_wgmma_rs ptx_wgmma_sp_rs
    ptx_wgmma_sp_ss ptx_wgmma_ss SparseTensorCoreIntrinEmitter
    tcgen05_after_thread_sync tcgen05_before_thread_sync tcgen05_cp_warpx4
    tcgen05_gemm tcgen05_gemm_blockscaled tcgen05_gemm_sp tcgen05_mma
    tcgen05_mma_arrive tcgen05_mma_blockscaled tcgen05_sf_warp_transpose
    TCGEN05DescriptorParams TCGEN05TensorCoreIntrinEmitter TensorCoreIntrinEmitter
    TensorCoreIntrinEmitterSM120 TensorCoreIntrinEmitterWithLadderTransform
    wait_wgmma warpgroup_arrive warpgroup_commit_batch warpgroup_fence_operand
    warpgroup_wait wgmma_gemm wgmma_gemm_sp wgmma_mma WGMMADescriptorParams
    WGMMATensorCoreIntrinEmitter WGSparseTensorCoreIntrinEmitter
    """),
    ('tilelang.cuda.language.cluster', """
    block_rank_in_cluster clc_get_first_ctaid_x clc_get_first_ctaid_y
    clc_get_first_ctaid_z clc_is_canceled clc_try_cancel clc_try_cancel_multicast
    cluster_arrive cluster_arrive_relaxed cluster_sync cluster_wait
    """),
    ('tilelang.cuda.language.pdl', """
    pdl_sync pdl_trigger
    """),
    ('tilelang.cuda.language.print', """
    print
    """),
    ('tilelang.cuda.language.random', """
    rng_init rng_rand rng_rand_float
    """),
    ('tilelang.cuda.language.tir', """
    ptx_fence_barrier_init ptx_mma_block_scale ptx_wait_barrier
    """),
    ('tilelang.cuda.language.warpgroup', """
    WarpSpecialize WarpSpecializeFrame ws
    """),
    ('tilelang.language.ws_schedule (after 0.1.13)', """
    annotate_ws_schedule ws_op WSID WSInstr WSOpRef WSPipeline WSRole WSSchedule WSScope
    WSSync WSSyncKind
    """),
))

# what a name that is not supported is, by where TileLang defines it
_GROUP_REASON = {
    "tilelang.language (common)": "not built in tilejit yet",
    "tilelang.language (eager builder)": "a piece of TileLang's eager builder that tilejit "
                                         "does not have",
    "tilelang.language.dtypes": "tilejit's dtypes are float16, bfloat16, float32 (tfloat32), "
                                "float64, float8_e4m3 (float8_e4m3fn), float8_e5m2, "
                                "float8_e8m0fnu, (u)int8 to (u)int64, bool, and "
                                "float4_e2m1fn, int4 and uint4 (tensors hold them two a "
                                "byte): no vector, fnuz/e3m4 fp8, fp6 or other sub-byte "
                                "dtypes",
    "tilelang.language.math_intrinsics": "TileLang's packed (x2) math intrinsics are not "
                                         "built (they take its vector dtypes)",
    "tilelang.language.tir.ir (TVM TIR operations)": "a TVM TIR operation (tilejit is built "
                                                     "without TVM)",
    "TVM's TIR script parser (re-exported by tilelang.language)": "TVM's TIR script "
                                                                  "(tilejit is built without "
                                                                  "TVM)",
    "tilelang.language.ws_schedule (after 0.1.13)": "TileLang's explicit warp-specialization "
                                                    "schedule (its compiler's schedule IR); "
                                                    "tilejit's roles are T.ws blocks and "
                                                    "its own pipelining",
}
_CUDA_REASON = ("a CUDA extension of TileLang (explicit PTX, Blackwell tcgen05/TMEM, "
                "clusters, descriptors) that tilejit does not build")

# names with a reason of their own
REASONS = {
    "has_let_value": "T.let is not built", "get_let_value": "T.let is not built",
    "CUDASourceCodeKernel": "a kernel written in CUDA C++ needs NVIDIA's compiler (nvcc "
                            "or NVRTC), and tilejit emits PTX itself",

}


def reason(name: str) -> str | None:
    """Why TileLang's ``tilelang.language.<name>`` is not in tilejit (None: not one of
    TileLang's names)."""
    if REASONS.get(name):
        return REASONS[name]
    for where, names in LANGUAGE_GROUPS:
        if name in names:
            return _GROUP_REASON.get(where, _CUDA_REASON)
    return None


def dtype_names() -> tuple:
    """TileLang's dtype names (``tilelang.language.dtypes``' group)."""
    return next(names for where, names in LANGUAGE_GROUPS if where == "tilelang.language.dtypes")


def language_names() -> list:
    """Every public name of TileLang's ``tilelang.language``, in group order."""
    return [n for _, names in LANGUAGE_GROUPS for n in names]


# TileLang's top-level ``tilelang.<name>``: those tilejit has are in
# ``tilejit/__init__.py``'s table; these are not (``tilejit.tilelang.unsupported``)
TILELANG = {
    "deprecated": "TileLang's deprecation decorator",
    "build_date": "TileLang's build date",
    "analysis": "TileLang's TVM analyses",
    "tools": "TileLang's tools",
    "lower": "TileLang's TVM lowering (tilejit.compile gives the PTX)",
    "register_cuda_postproc": "CUDA source post-processing (tilejit emits PTX, not CUDA C)",
    "register_hip_postproc": "HIP source post-processing (no AMD target yet)",
    "register_c_postproc": "C source post-processing (tilejit emits PTX)",
    "ir": "TileLang's TVM IR nodes (tilejit.ir is tilejit's own compiler IR, another "
          "module)",
    "cpu": "the CPU backend (tilejit simulates on the CPU instead)",
    "rocm": "the ROCm backend", "metal": "the Metal backend", "webgpu": "the WebGPU backend",
    "env": "TileLang's environment object (tilejit reads TILEJIT_* variables)",
    "libinfo": "TileLang's shared-library lookup",
    "get_windows_runtime_dll_dirs": "TileLang's Windows DLL lookup",
    "prepend_dll_search_path": "TileLang's Windows DLL lookup",
    "cache": "TileLang's kernel cache module (tilejit's is `python -m tilejit cache`)",
    "backend": "TileLang's backend registry (tilejit's targets: tilejit.target)",
    "instrumentation": "TileLang's TVM pass instrumentation",
    "autodd": "TileLang's delta-debugging tool",
    "quantize": "TileLang's dequantization helpers, which TileLang itself has moved out of "
                "the package (to examples/dequantize_gemm): copy the helper the program uses",
}


def message(name: str, why: str, tilelang_module: str = "tilelang.language",
            alias: str = "T") -> str:
    return (f"{alias}.{name} ({tilelang_module}.{name} in TileLang) is not supported by "
            f"tilejit: {why}; see docs/tilelang-compat.md")


def not_supported(name: str, tilelang_module: str, module: str) -> AttributeError:
    """The error for ``module.<name>`` that does not exist: ``NotSupportedError`` naming
    it when it is one of TileLang's names, else a plain ``AttributeError``."""
    if not (name.startswith("__") and name.endswith("__")) and \
            f"{module}.{name}" not in sys.modules:
        if tilelang_module == "tilelang.language":
            why = reason(name)
            if why is not None:
                return NotSupportedError(message(name, why))
        elif name in TILELANG:
            return NotSupportedError(message(name, TILELANG[name], "tilelang",
                                             "tilejit"))
    return AttributeError(f"module {module!r} has no attribute {name!r}")


def not_in_module(name: str, tilelang_module: str, module: str, why: str) -> AttributeError:
    """The error for ``module.<name>`` where ``module`` is tilejit's module standing for
    TileLang's ``tilelang_module`` and has no ``name``: ``NotSupportedError`` naming
    TileLang's name and saying ``why`` (what tilejit's module has instead), with the
    module's names close to it (a misspelling); Python's ``AttributeError`` for a special
    name (``__path__``, a probe) and for a submodule being imported (``from m import x``
    falls back to ``sys.modules["m.x"]`` on an ``AttributeError``: a stub, a cycle)."""
    if name.startswith("__") and name.endswith("__") or f"{module}.{name}" in sys.modules:
        return AttributeError(f"module {module!r} has no attribute {name!r}")
    names = dir(sys.modules[module]) if module in sys.modules else []
    close = difflib.get_close_matches(name, [n for n in names if not n.startswith("_")], n=1)
    near = f" (did you mean {close[0]!r}?)" if close else ""
    return NotSupportedError(f"{tilelang_module}.{name} is not supported by tilejit{near}: "
                             f"{why}; see docs/tilelang-compat.md")


def module_getattr(tilelang_module: str, module: str, why: str):
    """A module ``__getattr__`` raising ``not_in_module`` for every name the module lacks
    (``__getattr__ = module_getattr("tilelang.testing", __name__, "...")``); a submodule
    the package has and nothing imported yet (``tilelang.contrib.nvcc`` read as an
    attribute) is imported, as TileLang's packages import theirs."""
    def __getattr__(name):
        if not name.startswith("_") and _exists(f"{module}.{name}"):
            return importlib.import_module(f"{module}.{name}")
        raise not_in_module(name, tilelang_module, module, why)
    return __getattr__


# TileLang's classes tilejit has objects standing for, and their attributes tilejit's do
# not all have (of TileLang at the version above; TVM's for PrimFunc and DataType)
TILELANG_ATTRIBUTES = {
    "JITKernel": _names("""adapter artifact backend backend_context compile_flags config
        execution_backend execution_backend_spec export_library export_ptx export_sass
        export_sources from_database from_tilelang_function get_host_source
        get_kernel_source get_profiler get_tuner_result host_source kernel_source latency
        n_max_threads n_regs n_spills out_idx params pass_configs prim_func
        print_source_code ref_latency resource_usage run_once show_ptx show_sass
        show_source target target_host torch_function update_tuner_result verbose"""),
    "JITImpl": _names("""compile compile_flags debug_root_path execution_backend func
        func_source get_kernel_source get_tir initialize_jit_mode is_lazy_mode mode out_idx
        par_compile parse_cache_key parse_args pass_configs set_mode signature target
        target_host verbose"""),
    "Profiler": _names("""adapter assert_allclose assert_consistent do_bench func
        manual_assert_close params result_idx run_once supply_type with_default_adapter"""),
    "AutoTuner": _names("""cache_dir compile_args configs fn from_kernel generate_cache_key
        jit_compile jit_elaborate jit_input_tensors profile_args ref_input_tensors
        ref_latency_cache run set_compile_args set_kernel_parameters set_profile_args"""),
    "PrimFunc": _names("""attrs body buffer_map params ret_type script show specialize span
        struct_info with_attr with_attrs with_body without_attr astext"""),
    "DataType": _names("""type_code bits lanes bytes itemsize with_lanes with_bits
        is_scalable vscale_factor with_scalable_vscale_factor matches as_torch is_float4
        is_float4_e2m1_unpacked is_float4_e2m1fn"""),
}


def missing_attribute(obj, name: str, tilelang_class: str, why: str) -> AttributeError:
    """The error for ``obj.<name>`` where ``obj`` is tilejit's object standing for
    TileLang's ``tilelang_class`` (``TILELANG_ATTRIBUTES``) and has no ``name``:
    ``NotSupportedError`` naming TileLang's attribute, saying ``why`` and what tilejit's
    object has, for one of TileLang's names; Python's ``AttributeError`` for any other
    (a probe: ``getattr(x, "dtype", None)``, ``_repr_html_``). An attribute the class
    defines that raised an ``AttributeError`` itself (a property) is read again, so that
    its own error shows."""
    defined, has = _class_names(type(obj))
    rereading = _REREADING.__dict__
    if name in defined and id(obj) not in rereading:
        # (not inside another such read of the object: a property reading a property
        # that raises would be read again at every level, 2 ** depth times)
        rereading[id(obj)] = True
        try:
            object.__getattribute__(obj, name)
        finally:
            del rereading[id(obj)]
    if name not in TILELANG_ATTRIBUTES.get(tilelang_class, ()):
        return AttributeError(f"{type(obj).__name__!r} object has no attribute {name!r}")
    return NotSupportedError(f"{tilelang_class}.{name} (TileLang's) is not supported by "
                             f"tilejit: {why} (tilejit's has {has}); see "
                             f"docs/tilelang-compat.md")


_REREADING = threading.local()      # the ids of the objects an attribute is being read again of


@functools.lru_cache(maxsize=None)
def _class_names(cls) -> tuple:
    """The names ``cls`` and its bases define, and its public ones (not a builtin
    base's: a ``str``'s methods) as a message lists them."""
    defined = frozenset(n for k in cls.__mro__ for n in vars(k))
    builtin = {n for k in cls.__mro__ if k.__module__ == "builtins" for n in vars(k)}
    return defined, ", ".join(sorted(n for n in defined if not n.startswith("_")
                                     and n not in builtin))


# tilejit's packages that stand for TileLang's (``tilelang.<x>`` imported as
# ``tilejit.<x>``): a submodule of one that tilejit does not have is TileLang's
SHIM_PACKAGES = ("tilejit.tilelang", "tilejit.language", "tilejit.carver", "tilejit.utils",
                 "tilejit.autotuner", "tilejit.profiler", "tilejit.testing")


class MissingModules:
    """A last finder on ``sys.meta_path``: an import of one of TileLang's top-level
    modules tilejit does not have (``TILELANG``), written with the import swapped
    (``import tilelang.backend`` → ``tilejit.backend``, and its submodules), raises
    ``ModuleNotFoundError`` saying that TileLang's module is not supported and why, not
    Python's bare "No module named"; one tilejit keeps under ``tilejit.tilelang``
    (``tilejit.layout`` for ``tilelang.layout``) is that module; any other missing name
    gets Python's answer (so ``importlib.util.find_spec`` of it is None). An ``import``
    statement of ``tvm`` where no TVM is installed gets tilejit's stand-in, and one of a
    missing submodule of a package standing for TileLang's (``SHIM_PACKAGES``), a TVM
    module or ``tvm_ffi`` an error naming it; a probe of those gets None."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if fullname.split(".")[0] in ("tvm", "tvm_ffi"):
            # (a probe, importlib.util.find_spec("tvm"), is told there is none; a TVM
            # that is installed is found before this finder, and its modules are its own)
            stand_in = sys.modules.get("tilejit.tilelang.tvm")
            if not _import_statement() or fullname.startswith("tvm.") and (
                    stand_in is None or sys.modules.get("tvm") is not stand_in):
                return None
            return _tvm_spec(fullname)
        if not fullname.startswith("tilejit."):
            return None
        rest = fullname[len("tilejit."):]
        package = "tilejit"
        if rest.startswith("tilelang."):
            rest, package = rest[len("tilelang."):], "tilejit.tilelang"
        top = rest.split(".")[0]
        if package == "tilejit" and not _exists(f"tilejit.{top}") and \
                top not in _NOT_ALIASED and _exists(f"tilejit.tilelang.{top}", load=True) \
                and getattr(sys.modules.get("tilejit"), top, None) in (
                    None, sys.modules.get(f"tilejit.tilelang.{top}")):
            # (not a name tilejit has for something else, `tilejit.jit`: importing the
            # module would put it in the name's place)
            # `from tilelang.layout import ...` swapped by hand to `tilejit.layout`: the
            # module tilejit keeps for TileLang's name (tilejit.tilelang.layout)
            if "." in rest and not _exists(f"tilejit.tilelang.{rest}", load=True):
                # (a submodule of it tilejit lacks: `tilelang.transform.simplify`; a probe,
                # find_spec, is told there is none)
                if not _import_statement():
                    return None
                raise ModuleNotFoundError(
                    f"tilelang.{rest} (imported as {fullname}) is not supported by tilejit: "
                    f"tilejit does not have this module of TileLang's (TVM's passes, "
                    f"backends and internals are not built); see docs/tilelang-compat.md",
                    name=fullname)
            return importlib.util.spec_from_loader(fullname,
                                                   _Alias(f"tilejit.tilelang.{rest}"))
        why = TILELANG.get(top)
        if why is None or _exists(f"{package}.{top}"):
            return _missing_submodule(fullname)
        raise ModuleNotFoundError(f"tilelang.{rest} (imported as {fullname}) is not "
                                  f"supported by tilejit: {why}; see docs/tilelang-compat.md",
                                  name=fullname)


def _tvm_spec(fullname: str):
    """``import tvm`` (no TVM installed: this finder is the last): TileLang makes its
    bundled TVM importable, and tilejit's stand-in is ``from tilelang import tvm``'s
    (``tilejit/tilelang/tvm.py``), with its namespaces ``tvm.tirx`` (``tvm.tir``),
    ``tvm.arith``, ``tvm.target`` and ``tvm.te``; any other TVM module, and ``tvm_ffi``,
    is refused by name."""
    stand_in = importlib.import_module("tilejit.tilelang.tvm")
    if fullname == "tvm":
        return importlib.util.spec_from_loader(fullname, _Alias(stand_in.__name__))
    parts = fullname.split(".")
    namespace = getattr(stand_in, parts[1], None) if len(parts) == 2 else None
    if parts[0] == "tvm" and isinstance(namespace, type(sys)):
        return importlib.util.spec_from_loader(fullname, _Alias(namespace))
    why = ("TVM's FFI, which TileLang's execution backends call (tilejit launches through "
           "the CUDA driver)") if parts[0] == "tvm_ffi" else (
        "TVM, which TileLang bundles: tilejit is built without it (of it tilejit has "
        "DataType and a few names of tvm.tirx, tvm.arith, tvm.target and tvm.te)")
    raise ModuleNotFoundError(f"{fullname} is not supported by tilejit: {why}; see "
                              f"docs/tilelang-compat.md", name=fullname)


def _missing_submodule(fullname: str) -> None:
    """A module under one of ``SHIM_PACKAGES`` whose parent tilejit has and which it does
    not (``tilejit.tilelang.engine.lower``, ``tilejit.language.tir.exports``): a
    ``ModuleNotFoundError`` saying that TileLang's module is not supported; anything else:
    None (Python's own answer)."""
    parent, _, child = fullname.rpartition(".")
    if not parent.startswith(SHIM_PACKAGES) or parent not in sys.modules or \
            child.startswith("_") or not _import_statement():
        return None
    tilelang = "tilelang." + fullname.split(".", 2)[2] if fullname.startswith(
        "tilejit.tilelang.") else "tilelang." + fullname.split(".", 1)[1]
    raise ModuleNotFoundError(f"{tilelang} (imported as {fullname}) is not supported by "
                              f"tilejit: tilejit does not have this module of TileLang's "
                              f"(TVM's passes, backends and internals are not built); see "
                              f"docs/tilelang-compat.md", name=fullname)


class AliasedSubmodules:
    """A first finder on ``sys.meta_path``: a submodule of a module tilejit imported
    under another name (``tilejit.engine``, which is ``tilejit.tilelang.engine``) is the
    submodule of the module itself (``tilejit.engine.param`` is
    ``tilejit.tilelang.engine.param``), not a second copy of its file that Python's path
    finder would load from the package's folder under the alias."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if not fullname.startswith("tilejit."):
            return None
        parent, _, child = fullname.rpartition(".")
        module = sys.modules.get(parent)
        own = getattr(module, "__name__", parent)
        if module is None or own == parent or not isinstance(own, str) or \
                not _exists(f"{own}.{child}"):
            return None
        return importlib.util.spec_from_loader(fullname, _Alias(f"{own}.{child}"))


class ModuleOfName(type(sys)):
    """A module registered under a name the package also binds to something else
    (``tilejit.jit``, the decorator): its names are ``target``'s, loaded on first use;
    a package, so that its submodules are asked of ``MissingModules``."""

    def __init__(self, name: str, target: str):
        super().__init__(name)
        self.__path__ = []
        self._target = target

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(importlib.import_module(self._target), name)


class _Alias(importlib.abc.Loader):
    """Loads a module under another name: the module itself, imported by its own (or
    the module object given)."""

    def __init__(self, target):
        self.target = target

    def create_module(self, spec):
        module = self.target if isinstance(self.target, type(sys)) else \
            importlib.import_module(self.target)
        self.spec = getattr(module, "__spec__", None)
        return module

    def exec_module(self, module):
        # the import set the alias's spec on the module: its own again (reload finds it)
        if self.spec is not None:
            module.__spec__ = self.spec


# tilejit.tilelang's own modules that are no TileLang module name
_NOT_ALIASED = frozenset(("classic", "shape_symbols", "unsupported", "autotuner_class"))


def _exists(name: str, load: bool = False) -> bool:
    """Whether tilejit has the module ``name`` (its file, found without the meta path;
    ``load``: its package imported first)."""
    parent, _, child = name.rpartition(".")
    if load and parent not in sys.modules:
        importlib.import_module(parent)
    path = getattr(sys.modules.get(parent), "__path__", None)
    return path is not None and importlib.machinery.PathFinder.find_spec(name, path) is not None

