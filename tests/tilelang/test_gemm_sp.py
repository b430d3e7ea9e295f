"""``T.gemm_sp``: a GEMM whose A is 2:4 sparse (1:2 for float32), given compressed as
TileLang's users give it (the kept values and natural row-major metadata,
``language/sparse.py``), written as a TileLang user writes it: dtype names, ``out_idx``,
``tilejit.compile``. The simulator expands A and checks the metadata
(``sim/sparse.py``); the compiler runs 16-bit K-major A on the sparse tensor cores
(``test_gemm_sp_tensor_cores.py``) and expands the others into shared memory for the dense
gemm (``passes/sparse_gemms.py``): PTX for sm_80 and sm_90a assembled, GPU twins against
float64 torch and the simulator."""
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError
from tilejit.tilelang.cuda.intrinsics.sparse_layout import (GROUP_CONFIG, get_e_factor,
                                                             get_e_replicate_factor)
from tilejit.utils.sparse import compress


# -- a 2:4 sparse matrix (compressed by tilejit.utils.sparse.compress) ------------------

def semi_sparse(M, K, dtype, seed=0):
    """A random M x K matrix with 2 of every 4 values along K zero (1 of every 2 for
    float32), as ``dtype``."""
    elem, group = GROUP_CONFIG[dtype]
    g = torch.Generator().manual_seed(seed)
    if "int" in dtype:
        dense = torch.randint(-8, 8, (M, K), generator=g).to(torch.float32)
    else:
        dense = torch.randn(M, K, generator=g)
    drop = torch.rand(M, K // group, group, generator=g).argsort(-1)[..., :group - elem]
    dense = dense.view(M, K // group, group).scatter(-1, drop, 0.0).view(M, K)
    return dense.to(T.dtype(dtype).as_torch())


# -- the kernel, as TileLang's users write it -------------------------------------------

def matmul_sp(M, N, K, block_M, block_N, block_K, in_dtype, accum_dtype, meta_dtype,
              trans_A=False, trans_B=False, a_in_registers=False, b_in_registers=False,
              num_stages=2, threads=128):
    e_factor = get_e_factor(in_dtype, meta_dtype)
    A_shape = (K // 2, M) if trans_A else (M, K // 2)
    E_shape = (K // e_factor, M) if trans_A else (M, K // e_factor)
    B_shape = (N, K) if trans_B else (K, N)
    A_shared_shape = (block_K // 2, block_M) if trans_A else (block_M, block_K // 2)
    E_shared_shape = (block_K // e_factor, block_M) if trans_A else (block_M, block_K // e_factor)
    B_shared_shape = (block_N, block_K) if trans_B else (block_K, block_N)

    @T.prim_func
    def main(A_sparse: T.Tensor(A_shape, in_dtype), E: T.Tensor(E_shape, meta_dtype),
             B: T.Tensor(B_shape, in_dtype), C: T.Tensor((M, N), accum_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared(A_shared_shape, in_dtype)
            E_shared = T.alloc_shared(E_shared_shape, meta_dtype)
            B_shared = T.alloc_shared(B_shared_shape, in_dtype)
            A_frag = T.alloc_fragment(A_shared_shape, in_dtype)
            B_frag = T.alloc_fragment(B_shared_shape, in_dtype)
            C_frag = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_frag)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                if trans_A:
                    T.copy(A_sparse[k * block_K // 2, by * block_M], A_shared)
                    T.copy(E[k * block_K // e_factor, by * block_M], E_shared)
                else:
                    T.copy(A_sparse[by * block_M, k * block_K // 2], A_shared)
                    T.copy(E[by * block_M, k * block_K // e_factor], E_shared)
                if trans_B:
                    T.copy(B[bx * block_N, k * block_K], B_shared)
                else:
                    T.copy(B[k * block_K, bx * block_N], B_shared)
                if a_in_registers and b_in_registers:
                    T.copy(A_shared, A_frag)
                    T.copy(B_shared, B_frag)
                    T.gemm_sp(A_frag, E_shared, B_frag, C_frag, trans_A, trans_A, trans_B)
                elif a_in_registers:
                    T.copy(A_shared, A_frag)
                    T.gemm_sp(A_frag, E_shared, B_shared, C_frag, trans_A, trans_A, trans_B)
                elif b_in_registers:
                    T.copy(B_shared, B_frag)
                    T.gemm_sp(A_shared, E_shared, B_frag, C_frag, trans_A, trans_A, trans_B)
                else:
                    T.gemm_sp(A_shared, E_shared, B_shared, C_frag, transpose_A=trans_A,
                              transpose_E=trans_A, transpose_B=trans_B,
                              policy=T.GemmWarpPolicy.Square)
            T.copy(C_frag, C[by * block_M, bx * block_N])

    return main


def _case(M, N, K, in_dtype, meta_dtype, trans_A=False, trans_B=False, device="cpu", seed=0):
    dense = semi_sparse(M, K, in_dtype, seed)
    values, meta = compress(dense, meta_dtype)
    g = torch.Generator().manual_seed(seed + 1)
    B = (torch.randint(-8, 8, (K, N), generator=g).float() if "int" in in_dtype
         else torch.randn(K, N, generator=g)).to(dense.dtype)
    ref = dense.double() @ B.double()
    if trans_A:
        values, meta = values.T.contiguous(), meta.T.contiguous()
    if trans_B:
        B = B.T.contiguous()
    return [x.to(device) for x in (values, meta, B)], ref


CASES = [  # M, N, K, blocks, in, accum, meta, trans_A, trans_B, A / B in registers
    (128, 128, 64, (128, 128, 32), "float16", "float32", "int16", False, False, False, False),
    (128, 128, 64, (128, 128, 32), "float16", "float32", "int16", False, True, False, False),
    (64, 128, 64, (64, 128, 32), "float16", "float32", "int16", True, False, False, False),
    (64, 128, 64, (64, 128, 32), "float16", "float32", "int16", True, True, True, False),
    (128, 128, 64, (128, 64, 32), "bfloat16", "float32", "int16", False, True, True, True),
    (128, 128, 64, (128, 128, 32), "float16", "float16", "int8", False, False, False, True),
    (128, 128, 128, (128, 128, 64), "int8", "int32", "int32", False, True, False, False),
    (128, 128, 128, (128, 128, 64), "int8", "int32", "int16", False, True, True, False),
    (128, 128, 128, (128, 128, 64), "float8_e5m2", "float32", "int32", False, True, False,
     False),
    (128, 64, 64, (64, 64, 32), "float32", "float32", "int16", False, False, False, False),
]
IDS = [f"{c[4]}-{c[5]}-{c[6]}-tA{int(c[7])}-tB{int(c[8])}-"
       f"{'r' if c[9] else 's'}{'r' if c[10] else 's'}" for c in CASES]


def _tolerance(accum):
    return {"float16": 2e-2, "float32": 1e-2}.get(accum, 0)


def _program(case):
    M, N, K, (bM, bN, bK), ind, acc, meta, tA, tB, ar, br = case
    return matmul_sp(M, N, K, bM, bN, bK, ind, acc, meta, tA, tB, ar, br)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_gemm_sp_in_simulation(case):
    M, N, K, _, ind, acc, meta, tA, tB, _, _ = case
    kernel = tilejit.compile(_program(case), out_idx=[3], target="sim")
    args, ref = _case(M, N, K, ind, meta, tA, tB)
    C = kernel(*args)
    tol = _tolerance(acc)
    if ind == "float32":        # the tensor cores' tf32: 10 mantissa bits
        tol = 3e-2
    torch.testing.assert_close(C.double(), ref.to(C.dtype).double(), rtol=tol, atol=tol)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("case", [CASES[0], CASES[2], CASES[4], CASES[6]],
                         ids=[IDS[0], IDS[2], IDS[4], IDS[6]])
def test_gemm_sp_ptx(case, arch, ptxas):
    ptx = tilejit.compile(_program(case), out_idx=[3],
                          target=f"cuda -arch={arch}").get_kernel_source()
    # 16-bit A, K-major: the sparse tensor cores; the others: A expanded, the dense ones
    sparse = case[4] in ("float16", "bfloat16") and not case[7]
    want = {"sm_90a": "wgmma.mma_async.sp" if sparse else "wgmma.mma_async.sync",
            "sm_80": "mma.sp.sync" if sparse else "mma.sync"}[arch]
    assert want in ptx
    ptxas(ptx, arch)


def test_the_contract_names():
    assert GROUP_CONFIG[T.float16] == (2, 4) and GROUP_CONFIG["float"] == (1, 2)
    assert get_e_factor(T.float16, T.int16) == 16
    assert get_e_factor("int8", "int32") == 32
    assert get_e_factor(T.float32, T.int16) == 8
    assert get_e_replicate_factor(T.bfloat16) == 2 and get_e_replicate_factor("int8") == 1
    assert "float64" not in GROUP_CONFIG


def test_metadata_of_the_wrong_shape_is_a_compile_error_naming_it():
    @T.prim_func
    def main(A_sparse: T.Tensor((128, 32), "float16"), E: T.Tensor((128, 8), "int16"),
             B: T.Tensor((64, 128), "float16"), C: T.Tensor((128, 128), "float32")):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            A_s = T.alloc_shared((128, 32), "float16")
            E_s = T.alloc_shared((128, 8), "int16")
            B_s = T.alloc_shared((64, 128), "float16")
            C_f = T.alloc_fragment((128, 128), "float32")
            T.copy(A_sparse, A_s)
            T.copy(E, E_s)
            T.copy(B, B_s)
            T.gemm_sp(A_s, E_s, B_s, C_f, clear_accum=True)
            T.copy(C_f, C)

    for target in ("sim", "cuda -arch=sm_90a"):
        with pytest.raises(CompileError, match=r"E \(the metadata\) must be \(128, 4\).*"
                                               r"got \(128, 8\)"):
            tilejit.compile(main, out_idx=[3], target=target).get_kernel_source()


def test_a_region_operand_is_refused_at_its_line():
    @T.prim_func
    def main(A_sparse: T.Tensor((128, 32), "float16"), E: T.Tensor((128, 4), "int16"),
             B: T.Tensor((64, 128), "float16"), C: T.Tensor((128, 128), "float32")):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            A_s = T.alloc_shared((128, 64), "float16")
            E_s = T.alloc_shared((128, 4), "int16")
            B_s = T.alloc_shared((64, 128), "float16")
            C_f = T.alloc_fragment((128, 128), "float32")
            T.copy(A_sparse, A_s[:, 0:32])
            T.copy(E, E_s)
            T.copy(B, B_s)
            T.gemm_sp(A_s[:, 0:32], E_s, B_s, C_f, clear_accum=True)
            T.copy(C_f, C)

    with pytest.raises(CompileError, match=r"A_sparse must be a whole tile") as info:
        tilejit.compile(main, out_idx=[3], target="cuda -arch=sm_90a").get_kernel_source()
    assert "T.gemm_sp(A_s[:, 0:32]" in str(info.value)


def test_undefined_metadata_is_an_error_in_the_simulator():
    program = matmul_sp(128, 128, 64, 128, 128, 32, "float16", "float32", "int16")
    (values, meta, B), _ = _case(128, 128, 64, "float16", "int16")
    meta = meta.clone()
    meta[5, 1] = (meta[5, 1] & ~0xF0) | (0b0101 << 4)    # row 5, group 5: positions 1, 1
    with pytest.raises(ValueError, match=r"row 5, group 5 is 0b0101.*increasing order.*"
                                         r"1 such group") as info:
        tilejit.compile(program, out_idx=[3], target="sim")(values, meta, B)
    assert "T.gemm_sp(A_shared, E_shared" in str(info.value)


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_gemm_sp_on_the_gpu_against_torch_and_the_simulator(case):
    M, N, K, _, ind, acc, meta, tA, tB, _, _ = case
    args, ref = _case(M, N, K, ind, meta, tA, tB, device="cuda")
    C = tilejit.compile(_program(case), out_idx=[3], target="cuda")(*args)
    torch.cuda.synchronize()
    tol = 3e-2 if ind == "float32" else _tolerance(acc)
    torch.testing.assert_close(C.cpu().double(), ref.to(C.dtype).double(), rtol=tol, atol=tol)
    sim = tilejit.compile(_program(case), out_idx=[3], target="sim")(*(a.cpu() for a in args))
    torch.testing.assert_close(C.cpu().double(), sim.double(), rtol=tol, atol=tol)


def test_compress_refuses_a_matrix_that_is_not_sparse_enough():
    dense = torch.ones(16, 32, dtype=torch.float16)
    with pytest.raises(ValueError, match=r"more than 2 nonzeros: the matrix is not 2:4 sparse"):
        compress(dense)


def test_compress_packs_groups_from_the_low_bits():
    dense = torch.zeros(1, 16, dtype=torch.float16)
    dense[0, 1], dense[0, 3] = 1.0, 2.0            # group 0: positions 1, 3 -> 0b1101
    dense[0, 6] = 3.0                              # group 1: position 2 (and 0) -> 0b1000
    values, meta = compress(dense)
    assert values.tolist() == [[1.0, 2.0, 0.0, 3.0] + [0.0] * 4]
    assert meta.dtype == torch.int16 and meta.item() == 0b0100_0100_1000_1101


def test_wgmma_gemm_sp_is_gemm_sp():
    @T.prim_func
    def main(A_sparse: T.Tensor((64, 32), "float16"), E: T.Tensor((64, 4), "int16"),
             B: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            A_s = T.alloc_shared((64, 32), "float16")
            E_s = T.alloc_shared((64, 4), "int16")
            B_s = T.alloc_shared((64, 64), "float16")
            C_f = T.alloc_fragment((64, 64), "float32")
            T.copy(A_sparse, A_s)
            T.copy(E, E_s)
            T.copy(B, B_s)
            T.wgmma_gemm_sp(A_s, E_s, B_s, C_f, clear_accum=True, annotations={})
            T.copy(C_f, C)

    (values, meta, B), ref = _case(64, 64, 64, "float16", "int16")
    C = tilejit.compile(main, out_idx=[3], target="sim")(values, meta, B)
    torch.testing.assert_close(C.double(), ref.float().double(), rtol=1e-2, atol=1e-2)
    ptx = tilejit.compile(main, out_idx=[3], target="cuda -arch=sm_90a").get_kernel_source()
    assert "wgmma.mma_async" in ptx


def test_gemm_sp_in_a_thread_branch_is_refused_as_gemm_is():
    @T.prim_func
    def main(A_sparse: T.Tensor((64, 32), "float16"), E: T.Tensor((64, 4), "int16"),
             B: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            A_s = T.alloc_shared((64, 32), "float16")
            E_s = T.alloc_shared((64, 4), "int16")
            B_s = T.alloc_shared((64, 64), "float16")
            C_f = T.alloc_fragment((64, 64), "float32")
            T.copy(A_sparse, A_s)
            T.copy(E, E_s)
            T.copy(B, B_s)
            if tx < 64:
                T.gemm_sp(A_s, E_s, B_s, C_f, clear_accum=True)
            T.copy(C_f, C)

    with pytest.raises(CompileError, match=r"T.gemm_sp inside a branch that depends on the "
                                           r"thread index"):
        tilejit.compile(main, out_idx=[3], target="cuda -arch=sm_90a").get_kernel_source()


def test_float8_with_a_transposed_a():
    """The dense tile is K-major whatever A's orientation: wgmma's float8 reads it so."""
    case = (128, 128, 128, (128, 128, 64), "float8_e5m2", "float32", "int32", True, True,
            False, False)
    ptx = tilejit.compile(_program(case), out_idx=[3],
                          target="cuda -arch=sm_90a").get_kernel_source()
    assert "wgmma.mma_async" in ptx
    M, N, K, _, ind, acc, meta, tA, tB, _, _ = case
    args, ref = _case(M, N, K, ind, meta, tA, tB)
    C = tilejit.compile(_program(case), out_idx=[3], target="sim")(*args)
    torch.testing.assert_close(C.double(), ref.float().double(), rtol=1e-2, atol=1e-2)
