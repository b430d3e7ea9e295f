"""The AMDGPU target (codegen/amdgpu.py): kernels compile for gfx942 and gfx90a to
assembly and an HSA code object with no AMD hardware and no ROCm (llvmlite's AMDGPU back
end, LLD from the ziglang wheel); what is not lowered yet is a CompileError naming it,
never an LLVM abort. Not run on an AMD GPU here: compile-verified only."""
import struct

import numpy as np
import pytest

import tilejit
import tilejit.language as T
from ptx_examples import all_examples, example_arguments
from tilejit.target import Target

EXAMPLES = {name: (kernel, specs, constexprs) for name, kernel, specs, constexprs, _
            in all_examples()}
# the examples AMDGPU compiles today, and the instructions each must use
COMPILED = {
    "vector_add.vector_add": ["global_load_dwordx4", "global_store_dwordx4"],
    "vector_add.relu": ["global_load_dwordx4"],
    "elementwise_2d.scale_bias": ["global_load"],
    "softmax.softmax": ["ds_bpermute_b32"],
    "softmax.online_softmax": ["ds_bpermute_b32"],
    "norms.layer_norm": ["ds_bpermute_b32"],
    "norms.rms_norm": ["ds_bpermute_b32"],
    "row_sum.row_sum": ["ds_bpermute_b32"],
    "row_sum.row_sum_partials": ["ds_bpermute_b32"],
    "flash_attention.flash_attn_bwd.flashattn_bwd_preprocess": ["ds_bpermute_b32"],
    # T.gemm on MFMA (v_mfma_f32_32x32x8f16 on gfx90a, ..._8_f16 on gfx942)
    "gemm.matmul": ["v_mfma_f32_32x32x8", "ds_read_b128", "ds_write_b128", "s_barrier"],
    "gemm_epilogue.matmul_bias_relu": ["v_mfma_f32_32x32x8", "v_max_f32"],
    "splitk_gemm.splitk_gemm": ["v_mfma_f32_32x32x8", "global_atomic"],
    "flash_attention.flash_attn.flashattn": ["v_mfma_f32_32x32x8", "ds_bpermute_b32"],
    "flash_attention.flash_attn_bwd.flashattn_bwd": ["v_mfma_f32_32x32x8"],
    "flash_attention.flash_attn_varlen.flashattn_varlen": ["v_mfma_f32_32x32x8"],
}


def _elf_header(blob: bytes):
    assert blob[:4] == b"\x7fELF" and blob[4] == 2 and blob[5] == 1   # 64-bit, little
    e_type, e_machine = struct.unpack_from("<HH", blob, 16)
    return e_type, e_machine


@pytest.mark.parametrize("arch", ["gfx942", "gfx90a"])
@pytest.mark.parametrize("name", sorted(COMPILED))
def test_examples_compile_to_a_code_object(name, arch):
    kernel, specs, constexprs = EXAMPLES[name]
    handle = kernel.compile(*example_arguments(specs), target="amdgpu", arch=arch,
                            **constexprs)
    asm = handle.asm
    assert f".amdgcn_target \"amdgcn-amd-amdhsa--{arch}" in asm
    assert ".amdhsa_kernel" in asm and "s_endpgm" in asm
    for instruction in COMPILED[name]:
        assert instruction in asm, f"{name}: expected {instruction}"
    assert _elf_header(handle.code_object) == (3, 224)      # ET_DYN, EM_AMDGPU


@tilejit.kernel
def tile_roundtrip(A, B, block: T.constexpr = 256):
    """A block of A through an LDS tile (T.copy in and out) into B."""
    N = A.shape[0]
    with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
        S = T.alloc_shared((block,), A.dtype)
        T.copy(A[bx * block], S)
        for i in T.Parallel(block):
            if bx * block + i < N:
                B[bx * block + i] = S[block - 1 - i]


def test_lds_tiles_and_barriers():
    a = np.zeros(1000, np.float32)
    asm = tile_roundtrip.compile(a, a.copy(), target="amdgpu", arch="gfx942").asm
    assert "ds_write" in asm and "ds_read" in asm and "s_barrier" in asm


def test_what_is_not_lowered_yet_is_a_compile_error_not_an_abort():
    kernel, specs, constexprs = EXAMPLES["softmax.softmax"]
    fast = tilejit.kernel(kernel.func, fast_math=True)
    try:
        fast.compile(*example_arguments(specs), target="amdgpu", arch="gfx942", **constexprs)
    except tilejit.CompileError as e:
        assert "not lowered for AMDGPU" in str(e)


def test_arch_and_launch_errors():
    with pytest.raises(ValueError, match="expected an AMDGPU arch"):
        Target.amdgpu("gfx1100")
    kernel, specs, _ = EXAMPLES["vector_add.vector_add"]
    with pytest.raises(ValueError, match="expected an AMDGPU arch"):
        kernel.compile(*example_arguments(specs), target="amdgpu", arch="sm_90a")
    amd = tilejit.kernel(kernel.func, target="amdgpu")
    with pytest.raises(ValueError, match="target 'amdgpu' launches on the tensors' ROCm "
                                         "device"):
        amd(*example_arguments(specs))
    with pytest.raises(RuntimeError, match="AMDGPU's"):
        _ = kernel.compile(*example_arguments(specs), target="cuda", arch="sm_80").asm


def test_wave64_reductions_run_on_the_cpu():
    """A row reduction across a wave of 64 lanes (ds_bpermute over lane ^ 32 as well as
    the lower bits, no LDS scratch inside a wave): the kernel's AMDGPU LLVM IR run on the
    CPU (tests/support/amdgpu_cpu.py) against the simulator."""
    import torch
    from amdgpu_cpu import run_kernel
    kernel = EXAMPLES["softmax.softmax"][0]
    x = np.random.default_rng(0).standard_normal((4, 1024)).astype(np.float16)
    y = np.zeros_like(x)
    handle = kernel.compile(x, y, target="amdgpu", arch="gfx942")
    assert "ds_bpermute_b32" in handle.asm
    run_kernel(handle, [x, y], (4,), 256)
    want = torch.zeros(4, 1024, dtype=torch.float16)
    kernel(torch.from_numpy(x), want)
    np.testing.assert_allclose(y.astype(np.float32), want.float().numpy(), atol=1e-6)
