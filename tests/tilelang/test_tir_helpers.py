"""Helpers that build a value with TIR's expression vocabulary (``from tvm import tirx``:
``tirx.const``, ``tirx.reinterpret``, ``tirx.Cast``, ``tirx.Select``, ``x.astype(d)``,
``x.dtype``), called from a ``T.Parallel`` that reads a packed fragment at ``j // 2``:
how TileLang's dequantizing GEMMs unpack 4-bit weights. Written as a TileLang user
writes them (dtype names, ``tilejit.compile`` with ``out_idx``)."""
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit.tilelang.tvm import tirx

from packed_nibbles import (dtype_of_value, e2m1_to_bfloat16, e2m1_to_half, int4_to_int8,
                            int4_to_int8_by_int32_shifts, int_converter, plus_three)


def unpack(N, K, block_N, block_K, out_dtype, kind, threads=128):
    """C (N x K) = the 4-bit values packed two a byte in B (N x K/2), block by block
    through shared memory and a packed fragment read at ``j // 2``."""
    @T.prim_func
    def main(B: T.Tensor((N, K // 2), "uint8"), S: T.Tensor((N,), "uint8"),
             C: T.Tensor((N, K), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), threads=threads) as bx:
            B_shared = T.alloc_shared((block_N, block_K // 2), "uint8")
            B_local = T.alloc_fragment((block_N, block_K // 2), "uint8")
            D = T.alloc_fragment((block_N, block_K), out_dtype)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=1):
                T.copy(B[bx * block_N, k * block_K // 2], B_shared)
                T.copy(B_shared, B_local)
                for i, j in T.Parallel(block_N, block_K):
                    if kind == "half":
                        D[i, j] = e2m1_to_half(B_local[i, j // 2], j % 2, dtype=out_dtype)
                    elif kind == "bf16":
                        D[i, j] = e2m1_to_bfloat16(B_local[i, j // 2], j % 2,
                                                   S[bx * block_N + i], out_dtype)
                    elif kind == "int8":
                        D[i, j] = int4_to_int8(B_local[i, j // 2], j % 2)
                    else:
                        D[i, j] = int4_to_int8_by_int32_shifts(B_local[i, j // 2], j % 2)
                T.copy(D, C[bx * block_N, k * block_K])
    return main


def reference(b, s, kind):
    """The unpacked values, computed from the nibbles' meaning (float64)."""
    nib = torch.stack((b & 15, b >> 4), dim=-1).reshape(b.shape[0], -1).to(torch.int64)
    if kind in ("int8", "int8_c"):
        return torch.where(nib >= 8, nib - 16, nib).to(torch.int8)
    sign = torch.where(nib >= 8, -1.0, 1.0).double()
    e, m = (nib & 6) >> 1, (nib & 1).double()
    value = sign * torch.pow(2.0, (e - 1).double()) * (1 + m / 2)  # e == 0: as if normal
    if kind == "bf16":
        value = value * torch.pow(2.0, s.double())[:, None]
        return value.to(torch.bfloat16)
    return value.to(torch.float16)


CASES = [("half", "float16"), ("bf16", "bfloat16"), ("int8", "int8"), ("int8_c", "int8")]


def _inputs(N, K, device="cpu"):
    g = torch.Generator().manual_seed(5)
    b = torch.randint(0, 256, (N, K // 2), generator=g, dtype=torch.uint8)
    s = torch.randint(0, 6, (N,), generator=g, dtype=torch.uint8)
    return b.to(device), s.to(device)


@pytest.mark.parametrize("kind, dtype", CASES)
@pytest.mark.parametrize("threads", [128, 256])
def test_simulator_unpacks_as_the_reference(kind, dtype, threads):
    N, K = 64, 96
    kernel = tilejit.compile(unpack(N, K, 32, 32, dtype, kind, threads), out_idx=[2])
    b, s = _inputs(N, K)
    out = kernel(b, s)
    ref = reference(b, s, kind)
    assert out.dtype == ref.dtype
    assert torch.equal(out, ref)


@pytest.mark.parametrize("kind, dtype", CASES)
def test_the_ptx_assembles(kind, dtype, ptxas):
    kernel = tilejit.compile(unpack(64, 96, 32, 32, dtype, kind), out_idx=[2])
    for arch in ("sm_80", "sm_90a"):
        ptx = kernel.get_kernel_source(arch=arch)
        ptxas(ptx, arch)
        assert "trap" not in ptx          # the helper's asserts are decided when compiling


def test_a_small_packed_fragment_is_held_whole(ptxas):
    """16 x 8 bytes (at most 256 elements) read at j // 2 are held whole by every thread,
    as TileLang replicates such fragments (the replicas of a larger one: the group-scale
    test below)."""
    kernel = tilejit.compile(unpack(64, 96, 16, 16, "float16", "half", 256), out_idx=[2])
    b, s = _inputs(64, 96)
    assert torch.equal(kernel(b, s), reference(b, s, "half"))
    ptxas(kernel.get_kernel_source(arch="sm_90a"), "sm_90a")


def group_scaled_gemm(M, N, K, group, threads=128):
    """C = (A @ B) * S[:, j // group]: the accumulator (laid out for the tensor cores,
    two adjacent columns a thread) scaled by a fragment of per-group scales read at
    ``j // group``; groups of 4 span two threads, which then hold replicas of a scale."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             S: T.Tensor((M, N // group), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=threads):
            A_shared = T.alloc_shared((M, K), "float16")
            B_shared = T.alloc_shared((K, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            S_local = T.alloc_fragment((M, N // group), "float32")
            T.copy(A, A_shared)
            T.copy(B, B_shared)
            T.copy(S, S_local)
            T.clear(acc)
            T.gemm(A_shared, B_shared, acc)
            for i, j in T.Parallel(M, N):
                acc[i, j] = acc[i, j] * S_local[i, j // group]
            T.copy(acc, C)
    return main


@pytest.mark.parametrize("group", [2, 4, 8])
def test_group_scales_read_by_the_accumulator_layout(group, ptxas):
    M = N = K = 64
    kernel = tilejit.compile(group_scaled_gemm(M, N, K, group), out_idx=[3])
    g = torch.Generator().manual_seed(group)
    a = torch.randn(M, K, generator=g).half()
    b = torch.randn(K, N, generator=g).half()
    s = torch.rand(M, N // group, generator=g) + 0.5
    ref = (a.double() @ b.double()) * s.double().repeat_interleave(group, dim=1)
    torch.testing.assert_close(kernel(a, b, s).double(), ref, rtol=1e-3, atol=1e-3)
    for arch in ("sm_80", "sm_90a"):
        ptxas(kernel.get_kernel_source(arch=arch), arch)


def _divided_by(c, N=32, K=32, packed=16):
    @T.prim_func
    def main(B: T.Tensor((N, packed), "uint8"), C: T.Tensor((N, K), "uint8")):
        with T.Kernel(1, threads=128):
            B_local = T.alloc_fragment((N, packed), "uint8")
            D = T.alloc_fragment((N, K), "uint8")
            T.copy(B, B_local)
            for i, j in T.Parallel(N, K):
                D[i, j] = B_local[i, j // c]
            T.copy(D, C)
    return main


@pytest.mark.parametrize("c, K, packed, message", [
    (3, 32, 16, "not a multiple of 3"),
    (4, 32, 16, r"which gives the shape \(32, 8\)"),
])
def test_a_quotient_the_fragment_cannot_follow_is_a_compile_error(c, K, packed, message):
    with pytest.raises(tilejit.CompileError, match=message):
        tilejit.compile(_divided_by(c, K=K, packed=packed),
                        out_idx=[1]).get_kernel_source(arch="sm_90a")


def test_a_quotient_over_a_row_the_threads_do_not_divide(ptxas):
    """`B_local[i, j // 3]` over 96 columns on 128 threads: no distribution of the
    block's threads groups the columns by 3 (it was refused); a row per thread, the
    rows dealt to 32 threads and held four times over, does."""
    b = torch.randint(0, 255, (32, 32), dtype=torch.uint8)
    c = tilejit.compile(_divided_by(3, K=96, packed=32), out_idx=[1], target="sim")(b)
    torch.testing.assert_close(c, b.repeat_interleave(3, dim=1), rtol=0, atol=0)
    for arch in ("sm_80", "sm_90a"):
        ptxas(tilejit.compile(_divided_by(3, K=96, packed=32), out_idx=[1])
              .get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
def test_a_quotient_over_a_row_the_threads_do_not_divide_on_the_gpu():
    b = torch.randint(0, 255, (32, 32), dtype=torch.uint8)
    c = tilejit.compile(_divided_by(3, K=96, packed=32), out_idx=[1])(b.cuda())
    torch.testing.assert_close(c.cpu(), b.repeat_interleave(3, dim=1), rtol=0, atol=0)


def _elementwise(fn, dtype):
    @T.prim_func
    def main(A: T.Tensor((8,), dtype), C: T.Tensor((8,), dtype)):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(8):
                C[i] = fn(A[i])
    return main


def test_const_without_a_dtype_is_weak_and_with_one_by_keyword(ptxas):
    kernel = tilejit.compile(_elementwise(plus_three, "int8"), out_idx=[1])
    a = torch.tensor([127, 1, -128, 0, 5, 6, 7, 8], dtype=torch.int8)
    assert kernel(a).tolist() == [-126, 4, -125, 3, 8, 9, 10, 11]
    ptxas(kernel.get_kernel_source(arch="sm_90a"), "sm_90a")


def test_dtype_of_a_bfloat16_value_is_a_clear_error():
    with pytest.raises(tilejit.CompileError, match="x.dtype of a bfloat16 value"):
        tilejit.compile(_elementwise(dtype_of_value, "bfloat16"), out_idx=[1])
    with pytest.raises(tilejit.CompileError, match="x.dtype of a bfloat16 value"):
        tilejit.compile(_elementwise(dtype_of_value, "bfloat16"), out_idx=[1],
                        target="cuda -arch=sm_90a")


def made_by_a_factory(K=256):
    @T.prim_func
    def main(B: T.Tensor((K // 2,), "int8"), C: T.Tensor((K,), "float16")):
        with T.Kernel(1, threads=128):
            T.import_source(None)
            B_local = T.alloc_fragment((K // 2,), "int8")
            D = T.alloc_fragment((K,), "float16")
            T.copy(B, B_local)
            for i in T.Parallel(K):
                D[i] = int_converter("int", 8)(4, B_local[i // 2], i % 2, "float16")
            T.copy(D, C)
    return main


def test_a_helper_made_by_a_factory_in_the_kernel(ptxas):
    kernel = tilejit.compile(made_by_a_factory(), out_idx=[1])
    b = torch.randint(-128, 128, (128,), dtype=torch.int8)
    want = reference(b.view(torch.uint8)[None], None, "int8")[0].half()
    assert torch.equal(kernel(b), want)
    for arch in ("sm_80", "sm_90a"):
        ptxas(kernel.get_kernel_source(arch=arch), arch)


def _with_source(text):
    @T.prim_func
    def main(C: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32):
            T.import_source(text)
            for i in T.Parallel(8):
                C[i] = 1.0
    return main


def test_import_source_takes_none_only():
    with pytest.raises(tilejit.CompileError, match="CUDA C\\+\\+ source is not supported"):
        tilejit.compile(_with_source("__device__ int f();"),
                        out_idx=[0]).get_kernel_source(arch="sm_90a")


def test_tir_helpers_outside_a_kernel():
    import numpy as np
    assert tirx.const(3, "uint16").dtype == np.uint16 and tirx.const(7) == 7
    assert tirx.reinterpret("float16", np.uint32(0x3C00)) == np.float16(1.0)
    assert tirx.reinterpret("bfloat16", np.uint16(0x3F80)) == np.float32(1.0)
    assert tirx.Select(np.bool_(False), np.int32(1), np.int32(2)) == 2


def _pow2_of(e):
    """DeepSeek's fast_pow2, a helper the kernel calls: the old order inside it."""
    return T.reinterpret("float32", (e + 127) << 23)


def old_order_reinterpret(n):
    """DeepSeek's and sglang's kernels write TileLang's deprecated ``T.reinterpret(dtype,
    value)``; TileLang takes it with a warning, and so does tilejit (in the kernel and
    in a helper it calls)."""
    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "uint32"),
             Z: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.serial(n):
                Y[i] = T.reinterpret("uint32", X[i])
                Z[i] = T.reinterpret(Y[i], T.float32) * 2.0 * _pow2_of(T.int32(i % 3))
    return main


def test_reinterpret_takes_tilelangs_old_argument_order(ptxas, monkeypatch):
    from tilejit.language import tir_exprs
    monkeypatch.setattr(tir_exprs, "_OLD_REINTERPRET_WARNED", False)    # once per process
    x = torch.tensor([1.0, 2.0, -0.5, 3.0])
    y, z = torch.zeros(4, dtype=torch.uint32), torch.zeros(4)
    with pytest.warns(DeprecationWarning, match=r"T.reinterpret\(dtype, value\) is deprecated"):
        kernel = tilejit.compile(old_order_reinterpret(4))
        kernel(x, y, z)
    scale = torch.tensor([1.0, 2.0, 4.0, 1.0])
    assert torch.equal(y, x.view(torch.int32).to(torch.uint32)) and torch.equal(z, 2 * x * scale)
    for arch in ("sm_80", "sm_90a"):
        ptxas(tilejit.compile(old_order_reinterpret(4), target=f"cuda -arch={arch}")
              .get_kernel_source(), arch)


@pytest.mark.gpu
def test_gpu_old_order_reinterpret():
    x = torch.randn(64)
    y, z = torch.zeros(64, dtype=torch.uint32), torch.zeros(64)
    kernel = tilejit.compile(old_order_reinterpret(64))
    yc, zc = y.cuda(), z.cuda()
    kernel(x.cuda(), yc, zc)
    kernel(x, y, z)
    scale = 2.0 ** (torch.arange(64) % 3).float()
    assert torch.equal(yc.cpu(), y) and torch.equal(zc.cpu(), z) and torch.equal(z, 2 * x * scale)


@pytest.mark.gpu
def test_gpu_helper_made_by_a_factory_matches_the_simulator():
    kernel = tilejit.compile(made_by_a_factory(), out_idx=[1])
    b = torch.randint(-128, 128, (128,), dtype=torch.int8)
    assert torch.equal(kernel(b.cuda()).cpu(), kernel(b))


@pytest.mark.gpu
@pytest.mark.parametrize("group", [2, 4])
def test_gpu_group_scales_match_the_simulator(group):
    M = N = K = 64
    kernel = tilejit.compile(group_scaled_gemm(M, N, K, group), out_idx=[3])
    a = torch.randn(M, K, device="cuda").half()
    b = torch.randn(K, N, device="cuda").half()
    s = torch.rand(M, N // group, device="cuda") + 0.5
    ref = (a.double() @ b.double()) * s.double().repeat_interleave(group, dim=1)
    gpu = kernel(a, b, s)
    torch.testing.assert_close(gpu.double(), ref, rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(gpu.cpu(), kernel(a.cpu(), b.cpu(), s.cpu()), rtol=1e-5,
                               atol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("kind, dtype", CASES)
def test_gpu_matches_the_reference_and_the_simulator(kind, dtype):
    N, K = 128, 256
    kernel = tilejit.compile(unpack(N, K, 64, 64, dtype, kind), out_idx=[2])
    b, s = _inputs(N, K, "cuda")
    gpu = kernel(b, s)
    assert torch.equal(gpu.cpu(), reference(b.cpu(), s.cpu(), kind))
    assert torch.equal(gpu.cpu(), kernel(b.cpu(), s.cpu()))


def _log2_ceil(x):
    """TileLang's DeepSeek-V4 quantizer's helper: T.Cast (dtype first) in a device
    function the kernel calls, not only in the kernel's own body."""
    bits_x = T.reinterpret(x, "uint32")
    exp_x = (bits_x >> 23) & 0xFF
    man_bits = bits_x & ((1 << 23) - 1)
    return T.Cast("int32", exp_x - 127 + T.if_then_else(man_bits != 0, 1, 0))


def _pow2(x):
    """2^x from the exponent's bits: the shift runs in 64 bits here (32 in TileLang), and
    T.reinterpret takes the low 32 as float32."""
    bits_x = (x + 127) << 23
    return T.reinterpret(bits_x, "float32")


@T.prim_func
def log2_ceil_kernel(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "int32"),
                     P: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        for i in T.Parallel(128):
            B[i] = _log2_ceil(A[i]) + T.Cast("int32", A[i])
            P[i] = _pow2(_log2_ceil(A[i]))


def _log2_ceil_inputs():
    a = torch.linspace(0.3, 100.0, 128)
    want = torch.ceil(torch.log2(a.double())).int() + a.int()
    return a, want, torch.exp2(torch.ceil(torch.log2(a.double()))).float()


def test_cast_dtype_first_in_a_helper(ptxas):
    a, want, pow2 = _log2_ceil_inputs()
    b, p = torch.zeros(128, dtype=torch.int32), torch.zeros(128)
    tilejit.compile(log2_ceil_kernel)(a, b, p)
    assert torch.equal(b, want) and torch.equal(p, pow2)
    kernel = tilejit.compile(log2_ceil_kernel, target="cuda")
    for arch in ("sm_80", "sm_90a"):
        ptxas(kernel.kernel.compile(a.numpy(), b.numpy(), p.numpy(), target="cuda",
                                    arch=arch).ptx, arch)


@pytest.mark.gpu
def test_gpu_cast_dtype_first_in_a_helper():
    a, want, pow2 = _log2_ceil_inputs()
    b = torch.zeros(128, dtype=torch.int32, device="cuda")
    p = torch.zeros(128, device="cuda")
    tilejit.compile(log2_ceil_kernel)(a.cuda(), b, p)
    torch.cuda.synchronize()
    assert torch.equal(b.cpu(), want) and torch.equal(p.cpu(), pow2)


@pytest.mark.parametrize("name, bits, per_byte", [("int2", 2, 4),
                                                  ("uint1", 1, 8)])
def test_sub_byte_integer_names_are_dtypes_that_no_tensor_holds(name, bits, per_byte):
    """TVM's integers narrower than a byte, which TileLang's ``T.dtype("uint4")`` parses
    (its tests parametrize over them): a dtype to name and compare; a tensor of one is a
    TypeError saying how to pack it."""
    d = T.dtype(name)
    assert d == name and d.bits == bits and not d.held
    with pytest.raises(TypeError, match=rf"{name} .*no tensor or tile can hold: pack "
                                        rf"(two|{per_byte}) values a byte"):
        T.Tensor((8,), d)
    with pytest.raises(TypeError, match="unknown dtype 'int3'"):
        T.dtype("int3")
