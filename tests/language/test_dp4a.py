"""``T.dp4a(A[i, k], B[j, k], C[n])``: four int8 products summed into an int32, as
TileLang's SIMT int8 GEMM accumulates a thread's micro-tile (the front end writes the
multiply-adds: frontend/rewrite._dp4a_loop)."""
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T

M, N, K = 16, 16, 32


def dp4a_gemm(in_dtype="int8", acc_dtype="int32"):
    @T.prim_func
    def main(A: T.Tensor((M, K), "int8"), B: T.Tensor((N, K), "int8"),
             C: T.Tensor((M, N), "int32")):
        with T.Kernel(1, threads=M * N):
            tid = T.get_thread_binding()
            i = tid // N
            j = tid % N
            acc = T.alloc_local((1,), acc_dtype)
            a = T.alloc_local((K,), in_dtype)
            b = T.alloc_local((K,), in_dtype)
            acc[0] = 0
            for k in T.serial(K):
                a[k] = A[i, k]
                b[k] = B[j, k]
            for k in T.serial(K // 4):
                T.dp4a(a[k * 4], b[k * 4], acc[0])
            C[i, j] = acc[0]
    return main


def gemv_either_way(in_dtype):
    """T.dp4a only where the operands are int8, as TileLang's dequantizing GEMV writes it:
    a branch on a compile-time flag, the other branch a plain multiply-add."""
    use_dp4a = in_dtype == "int8"

    @T.prim_func
    def main(A: T.Tensor((K,), in_dtype), B: T.Tensor((K,), in_dtype),
             C: T.Tensor((1,), "int32" if use_dp4a else in_dtype)):
        with T.Kernel(1, threads=32):
            acc = T.alloc_local((1,), "int32" if use_dp4a else in_dtype)
            acc[0] = 0
            if use_dp4a:
                for k in T.serial(K // 4):
                    T.dp4a(A[k * 4], B[k * 4], acc[0])
            else:
                for k in T.serial(K):
                    acc[0] += A[k] * B[k]
            C[0] = acc[0]
    return main


@pytest.mark.parametrize("in_dtype", ["int8", "float16"])
def test_a_branch_a_compile_time_flag_leaves_out_is_not_checked(in_dtype, ptxas):
    kernel = tilelang.compile(gemv_either_way(in_dtype), out_idx=-1)
    a = torch.arange(K).to(getattr(torch, in_dtype)) % 4
    out = kernel(a, a)
    assert out.item() == int((a.long() * a.long()).sum())
    ptxas(kernel.get_kernel_source(arch="sm_90a"), "sm_90a")


def reference(a, b):
    return (a.long() @ b.long().T).int()


def test_in_simulation_against_torch():
    a = torch.randint(-128, 128, (M, K), dtype=torch.int8)
    b = torch.randint(-128, 128, (N, K), dtype=torch.int8)
    c = torch.zeros(M, N, dtype=torch.int32)
    tilelang.compile(dp4a_gemm(), target="sim")(a, b, c)
    assert torch.equal(c, reference(a, b))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_assembles(arch, ptxas):
    ptxas(tilelang.compile(dp4a_gemm()).get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
def test_on_gpu_against_torch():
    a = torch.randint(-128, 128, (M, K), dtype=torch.int8)
    b = torch.randint(-128, 128, (N, K), dtype=torch.int8)
    c = torch.zeros(M, N, dtype=torch.int32, device="cuda")
    tilelang.compile(dp4a_gemm())(a.cuda(), b.cuda(), c)
    assert torch.equal(c.cpu(), reference(a, b))


@pytest.mark.parametrize("in_dtype, acc_dtype, got", [
    ("float16", "int32", "float16 and float16 into int32"),
    ("uint8", "int32", "uint8 and uint8 into int32"),
    ("int8", "float32", "int8 and int8 into float32")])
@pytest.mark.parametrize("target", ["sim", "cuda -arch=sm_90a"])
def test_other_dtypes_are_refused_at_the_line(in_dtype, acc_dtype, got, target):
    """TileLang refuses them (its issue 2600); a float or unsigned dp4a would otherwise
    compute something else than the instruction."""
    a = torch.zeros(M, K, dtype=torch.int8)
    with pytest.raises(tilelang.CompileError, match=rf"T.dp4a requires int8 A and B and an "
                                                    rf"int32 accumulator C .* got {got}") as e:
        kernel = tilelang.compile(dp4a_gemm(in_dtype, acc_dtype), out_idx=-1, target=target)
        kernel(a, a) if target == "sim" else kernel.get_kernel_source()
    assert "test_dp4a.py" in str(e.value)


@pytest.mark.parametrize("dtypes", [("float16", "float16", "int32"), ("int8", "int8", "float32"),
                                    ("uint8", "uint8", "int32"), ("int8", "float16", "int32")])
def test_wrong_dtypes_are_an_error_when_the_program_is_defined(tmp_path, dtypes):
    """TileLang's ValueError as @T.prim_func defines the program (its issue 2600), for
    operands whose dtypes are known then; right ones define as usual."""
    import importlib.util
    for case in (dtypes, ("int8", "int8", "int32")):
        path = tmp_path / f"dp4a_{'_'.join(case)}.py"
        path.write_text(
            "import tilejit.language as T\n\n\n"
            "@T.prim_func\n"
            f"def kernel(A: T.Tensor((4,), '{case[0]}'), B: T.Tensor((4,), '{case[1]}'),\n"
            f"           C: T.Tensor((1,), '{case[2]}')):\n"
            "    with T.Kernel(1, threads=32):\n"
            "        T.dp4a(A[0], B[0], C[0])\n")
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        if case != dtypes:
            spec.loader.exec_module(module)
            continue
        with pytest.raises(ValueError, match=r"T.dp4a requires int8 A and B and an int32 "
                                             r"accumulator C .* got " + ", ".join(case[:2])
                           .replace(", ", " and ") + f" into {case[2]}") as info:
            spec.loader.exec_module(module)
        assert isinstance(info.value, tilelang.CompileError) and "line 8" in str(info.value)


@pytest.mark.gpu
@pytest.mark.parametrize("in_dtype", ["int8", "float16"])
def test_on_gpu_a_branch_left_out_and_a_float16_accumulator(in_dtype):
    """The float16 case accumulates ``acc[0] += A[k] * B[k]`` in a float16 local (an
    in-place operator on a half type, which stopped the compiler before)."""
    kernel = tilelang.compile(gemv_either_way(in_dtype), out_idx=-1)
    a = (torch.arange(K) % 4).to(getattr(torch, in_dtype))
    gpu = kernel(a.cuda(), a.cuda())
    assert torch.equal(gpu.cpu(), kernel(a, a))
    assert gpu.item() == int((a.long() * a.long()).sum())


def whole_buffers():
    """TileLang's instruction reference writes ``T.dp4a(a, b, c)`` of local buffers of 4,
    4 and 1 elements: each buffer is its first element."""
    @T.prim_func
    def main(A: T.Tensor((32, 4), "int8"), B: T.Tensor((32, 4), "int8"),
             C: T.Tensor((32,), "int32")):
        with T.Kernel(1, threads=32):
            tid = T.get_thread_binding()
            a = T.alloc_local((4,), "int8")
            b = T.alloc_local((4,), "int8")
            c = T.alloc_local((1,), "int32")
            c[0] = 7
            for k in T.serial(4):
                a[k] = A[tid, k]
                b[k] = B[tid, k]
            T.dp4a(a, b, c)
            C[tid] = c[0]
    return main


def test_whole_buffers_in_simulation():
    a = torch.randint(-128, 128, (32, 4), dtype=torch.int8)
    b = torch.randint(-128, 128, (32, 4), dtype=torch.int8)
    out = tilelang.compile(whole_buffers(), out_idx=-1)(a, b)
    assert torch.equal(out, (a.int() * b.int()).sum(1) + 7)


@pytest.mark.gpu
def test_on_gpu_whole_buffers():
    a = torch.randint(-128, 128, (32, 4), dtype=torch.int8)
    b = torch.randint(-128, 128, (32, 4), dtype=torch.int8)
    kernel = tilelang.compile(whole_buffers(), out_idx=-1)
    gpu = kernel(a.cuda(), b.cuda())
    assert torch.equal(gpu.cpu(), (a.int() * b.int()).sum(1) + 7)
    assert torch.equal(gpu.cpu(), kernel(a, b))
