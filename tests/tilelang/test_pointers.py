"""``T.ptr`` parameters and pointer tables (``T.Tensor([G], T.ptr)``, int64 addresses)
with ``T.make_tensor(ptr, shape, dtype)``: a kernel that reads and writes tensors it is
given by address, as TileLang's pointer tests and grouped GEMMs write it (a GEMM over
three pointers, a table of source pointers, a grouped GEMM whose groups are found
through a table). In the simulator the addresses are host memory, or on a machine with a
device (TILEJIT_TARGET=sim there) CUDA memory read through host copies."""
import math

import pytest
import torch

import tilejit
import tilejit.language as T


def gemm_by_pointers(block_M, block_N, block_K, dtype="float16", accum="float32"):
    @T.prim_func
    def main(a_ptr: T.ptr, b_ptr: T.ptr, c_ptr: T.ptr, m: T.int32, n: T.int32,
             k: T.int32):
        A = T.make_tensor(a_ptr, (m, k), dtype)
        B = T.make_tensor(b_ptr, (n, k), dtype)
        C = T.make_tensor(c_ptr, (m, n), accum)
        with T.Kernel(T.ceildiv(n, block_N), T.ceildiv(m, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_N, block_K), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(k, block_K), num_stages=2):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[bx * block_N, ko * block_K], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            T.copy(C_local, C[by * block_M, bx * block_N])
    return main


def gather_rows(G, N, dtype="float16"):
    """out[g] = the N elements at the address table[g]."""
    @T.prim_func
    def main(table: T.Tensor([G], T.ptr), out: T.Tensor([G, N], dtype)):
        with T.Kernel(G, threads=32) as bx:
            src = T.make_tensor(table[bx], (N,), dtype)
            for i in T.Parallel(N):
                out[bx, i] = src[i] * 2
    return main


def grouped_gemm(sizes, N, K, block_M, block_N, block_K, dtype="float16"):
    """C_g = A_g @ B_g for groups of sizes[g] rows, A_g, B_g, C_g found through pointer
    tables; ``offsets[g]``: the first row block of group g."""
    G, max_M = len(sizes), max(sizes)
    blocks = sum(math.ceil(s / block_M) for s in sizes)

    @T.prim_func
    def main(a_ptrs: T.Tensor([G], T.ptr), b_ptrs: T.Tensor([G], T.ptr),
             c_ptrs: T.Tensor([G], T.ptr), offsets: T.Tensor([G], T.int32)):
        with T.Kernel(blocks, T.ceildiv(N, block_N), threads=32) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            g = T.alloc_var(T.int32)
            first = T.alloc_var(T.int32)
            g = 0
            first = 0
            for i in range(G):
                inside = bx >= offsets[i]
                g = T.if_then_else(inside, i, g)
                first = T.if_then_else(inside, offsets[i], first)
            row = (bx - first) * block_M
            A = T.make_tensor(a_ptrs[g], (max_M, K), dtype)
            B = T.make_tensor(b_ptrs[g], (K, N), dtype)
            C = T.make_tensor(c_ptrs[g], (max_M, N), dtype)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=1):
                T.copy(A[row, ko * block_K], A_shared)
                T.copy(B[ko * block_K, by * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[row, by * block_N])
    return main


def by_keywords(kind):
    """T.make_tensor with its dtype, shape and strides given by keyword."""
    @T.prim_func
    def main(p: T.ptr, C: T.Tensor((8,), "float32")):
        if kind == "dtype":
            X = T.make_tensor(p, (8,), dtype="float32")
        else:
            X = T.make_tensor(p, shape=(4,), dtype="float32", strides=(2,))
        with T.Kernel(1, threads=32):
            for i in T.Parallel(8):
                C[i] = X[i % 4] if kind == "strides" else X[i]
    return main


@pytest.mark.parametrize("kind", ["dtype", "strides"])
def test_make_tensor_by_keywords(kind, ptxas):
    kernel = tilejit.compile(by_keywords(kind), out_idx=[1])
    x = torch.arange(8, dtype=torch.float32)
    want = x if kind == "dtype" else x[::2].repeat(2)
    assert torch.equal(kernel(x), want)
    ptxas(kernel.get_kernel_source(arch="sm_90a"), "sm_90a")


def _table(tensors, device):
    return torch.tensor([t.data_ptr() for t in tensors], dtype=torch.int64, device=device)


def run_gemm(device):
    M, N, K = 96, 64, 80
    kernel = tilejit.compile(gemm_by_pointers(32, 32, 16))
    a = torch.randn(M, K, dtype=torch.float16, device=device)
    b = torch.randn(N, K, dtype=torch.float16, device=device)
    c = torch.zeros(M, N, dtype=torch.float32, device=device)
    kernel(a, b, c, M, N, K)                          # tensors for the pointers
    ref = a.double() @ b.double().T
    torch.testing.assert_close(c.double(), ref, rtol=1e-2, atol=1e-2)
    c2 = torch.zeros_like(c)
    kernel(a.data_ptr(), b.data_ptr(), c2.data_ptr(), M, N, K)   # or their addresses
    assert torch.equal(c, c2)
    return c


def run_gather(device):
    G, N = 3, 64
    kernel = tilejit.compile(gather_rows(G, N), out_idx=[1])
    srcs = [torch.randn(N, dtype=torch.float16, device=device) for _ in range(G)]
    out = kernel(_table(srcs, device))
    assert torch.equal(out, torch.stack(srcs) * 2)
    return out


def run_grouped(device):
    sizes, N, K, bM = [8, 12, 17], 32, 32, 16
    kernel = tilejit.compile(grouped_gemm(sizes, N, K, bM, 16, 16))
    offsets = [0]
    for s in sizes[:-1]:
        offsets.append(offsets[-1] + math.ceil(s / bM))
    g = torch.Generator().manual_seed(3)
    a = [torch.zeros(max(sizes), K, dtype=torch.float16) for _ in sizes]
    for t, s in zip(a, sizes):
        t[:s] = torch.randn(s, K, generator=g).half()
    b = [torch.randn(K, N, generator=g).half() for _ in sizes]
    a, b = [t.to(device) for t in a], [t.to(device) for t in b]
    c = [torch.zeros(max(sizes), N, dtype=torch.float16, device=device) for _ in sizes]
    kernel(_table(a, device), _table(b, device), _table(c, device),
           torch.tensor(offsets, dtype=torch.int32, device=device))
    for ci, ai, bi, s in zip(c, a, b, sizes):
        torch.testing.assert_close(ci[:s].double(), (ai[:s].double() @ bi.double()),
                                   rtol=1e-2, atol=1e-2)
    return c


def test_simulator_gemm_by_pointers():
    run_gemm("cpu")


def test_simulator_pointer_table():
    run_gather("cpu")


def test_simulator_grouped_gemm_through_tables():
    run_grouped("cpu")


def test_a_pointer_table_is_an_int64_tensor():
    ann = gather_rows(4, 8).annotations["table"]
    assert ann.dtype == "int64" and ann.shape == (4,)
    with pytest.raises(TypeError, match="expected dtype int64"):
        tilejit.compile(gather_rows(4, 8), out_idx=[1])(torch.zeros(4, dtype=torch.int32))


def test_a_pointer_argument_is_a_tensor_or_an_address():
    kernel = tilejit.compile(gemm_by_pointers(32, 32, 16))
    with pytest.raises(TypeError, match="argument 'a_ptr': expected a tensor or an address"):
        kernel(1.5, 0, 0, 1, 1, 1)


def test_an_address_outside_host_memory_is_an_error_in_the_simulator():
    kernel = tilejit.compile(gather_rows(1, 8), out_idx=[1])
    with pytest.raises(ValueError, match="not in this process's memory"):
        kernel(torch.tensor([16], dtype=torch.int64))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_assembles(arch, ptxas):
    for program in (gemm_by_pointers(32, 32, 16), gather_rows(3, 64),
                    grouped_gemm([8, 12, 17], 32, 32, 16, 16, 16)):
        ptx = tilejit.compile(program).get_kernel_source(arch=arch)
        ptxas(ptx, arch)
        assert "mma.sync" in ptx or "wgmma" in ptx or "ld.global" in ptx


@pytest.mark.gpu
def test_gpu_gemm_by_pointers():
    assert run_gemm("cuda").is_cuda


@pytest.mark.gpu
def test_gpu_pointer_tables_match_the_simulator():
    G, N = 3, 64
    kernel = tilejit.compile(gather_rows(G, N), out_idx=[1])
    srcs = [torch.randn(N, dtype=torch.float16) for _ in range(G)]
    on_gpu = [s.cuda() for s in srcs]         # kept alive while the table names them
    gpu = kernel(_table(on_gpu, "cuda"))
    assert torch.equal(gpu.cpu(), kernel(_table(srcs, "cpu")))
    assert all(t.is_cuda for t in run_grouped("cuda"))


# -- the eager @tilejit.jit form: `A: T.ptr` bound again by `A = T.make_tensor(A, ...)` ----
@tilejit.jit
def eager_gemm_by_pointers(A: T.ptr, B: T.ptr, C: T.ptr, M: int, N: int, K: int,
                           dtype: T.dtype, out_dtype: T.dtype, block_M: int = 64,
                           block_N: int = 64, block_K: int = 32):
    A = T.make_tensor(A, (M, K), dtype)
    B = T.make_tensor(B, (K, N), dtype)
    C = T.make_tensor(C, (M, N), out_dtype)
    with T.Kernel(T.ceildiv(M, block_M), T.ceildiv(N, block_N), threads=128) as (bx, by):
        A_shared = T.alloc_shared((block_M, block_K), dtype)
        B_shared = T.alloc_shared((block_K, block_N), dtype)
        C_local = T.alloc_fragment((block_M, block_N), out_dtype)
        T.clear(C_local)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
            T.copy(A[bx * block_M, k * block_K], A_shared)
            T.copy(B[k * block_K, by * block_N], B_shared)
            T.gemm(A_shared, B_shared, C_local)
        T.copy(C_local, C[bx * block_M, by * block_N])


def test_eager_pointer_parameters_bound_again_as_tensors(ptxas):
    configs = [{"A": T.ptr(), "B": T.ptr(), "C": T.ptr(), "M": 128, "N": 128, "K": 64,
                "dtype": dtype, "out_dtype": T.float32} for dtype in (T.float16, T.bfloat16)]
    # TileLang's test's form (bfloat16 too: the host program makes the tensor for its
    # shape; only the simulator's reads refuse a dtype it holds in float32)
    for program in eager_gemm_by_pointers.par_compile(configs):
        ptx = program.get_kernel_source()
        ptxas(ptx, ptx.split(".target ")[1].split()[0])
    a = torch.randint(-3, 4, (128, 64)).half()
    b = torch.randint(-3, 4, (64, 128)).half()
    c = torch.zeros(128, 128)
    eager_gemm_by_pointers(a, b, c, 128, 128, 64, T.float16, T.float32)
    torch.testing.assert_close(c, a.float() @ b.float())
    with pytest.raises(TypeError, match="bfloat16 in the simulator.*not at the address"):
        eager_gemm_by_pointers(a.bfloat16(), b.bfloat16(), c, 128, 128, 64, T.bfloat16,
                               T.float32)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [T.float16, T.bfloat16])
def test_eager_pointer_parameters_on_the_gpu(dtype):
    a = torch.randn(256, 128, device="cuda").to(dtype.as_torch())
    b = torch.randn(128, 192, device="cuda").to(dtype.as_torch())
    c = torch.zeros(256, 192, device="cuda")
    eager_gemm_by_pointers(a, b, c, 256, 192, 128, dtype, T.float32)
    torch.testing.assert_close(c, a.double() @ b.double(), atol=1e-2, rtol=1e-2,
                               check_dtype=False)


@pytest.mark.gpu
def test_gpu_device_addresses_in_the_simulator(monkeypatch):
    """TileLang's pointer tests simulated on a GPU machine: the tables hold CUDA tensors'
    addresses, which the simulator reads through host copies (one per launch, every
    block's tensor at an address sharing it) and writes back; a span past the end of the
    driver's allocation is an error, not a read of whatever lies there."""
    from tilejit.runtime import cuda_driver
    monkeypatch.setenv("TILEJIT_TARGET", "sim")
    assert run_gemm("cuda").is_cuda
    assert run_gather("cuda").is_cuda
    assert all(t.is_cuda for t in run_grouped("cuda"))
    kernel = tilejit.compile(gather_rows(1, 64), out_idx=[1])
    address = cuda_driver.alloc(128)
    try:
        with pytest.raises(ValueError, match="run 2 bytes past the end of the device "
                                             "allocation"):
            kernel(torch.tensor([address + 2], dtype=torch.int64, device="cuda"))
    finally:
        cuda_driver.free(address)
