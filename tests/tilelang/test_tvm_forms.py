"""Forms third-party TileLang programs write for per-thread code and compile-time Python
(frontend/tvm_calls.py, static_comprehensions.py, tir_buffers.hoist_global_allocations,
kernel_macros.inline_call): ``T.thread_return()``, TVM's warp shuffles in a helper that
assigns its parameter, ``T.call_extern`` of CUDA math functions, a generator expression
summing compile-time taps, and ``T.alloc_global`` inside the ``T.Kernel`` block."""
import pytest
import torch

import tilejit
import tilejit as tilelang
import tilejit.language as T

TAPS = ((0, 0), (0, 1), (1, 0), (1, 1))


def _warp_sum(value):
    mask = T.tvm_warp_activemask()
    for k in T.unroll(5):
        value += T.tvm_warp_shuffle_down(mask, value, 16 >> k, 32, 32)
    return T.tvm_warp_shuffle(mask, value, 0, 32, 32)


@tilelang.jit(out_idx=[1])
def row_sums(R=6, C=64):
    @T.prim_func
    def main(X: T.Tensor((R, C), "float32"), S: T.Tensor((8,), "float32")):
        with T.Kernel(8, threads=32) as row:
            lane = T.get_thread_binding()
            if row >= R:            # the padding blocks end, all their threads (a return
                T.thread_return()   # only some of a block's threads take is not simulated)
            v = X[row, lane] + X[row, lane + 32]
            total = _warp_sum(v)
            if lane == 0:
                S[row] = total
    return main


@tilelang.jit(out_idx=[2])
def extern_math(N=128):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"),
             O: T.Tensor((4, N), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(N):
                O[0, i] = T.call_extern("float32", "fmaxf", A[i], B[i])
                O[1, i] = T.call_extern("float32", "__fdiv_rn", A[i], B[i])
                O[2, i] = T.call_extern("exp2f", A[i], dtype="float32")
                O[3, i] = T.call_extern("float32", "powf", T.abs(A[i]), 1.5)
    return main


@tilelang.jit(out_idx=[2])
def box_sum(H=16, W=16):
    @T.prim_func
    def main(X: T.Tensor((H + 1, W + 1), "float32"), Wt: T.Tensor((2, 2), "float32"),
             O: T.Tensor((H, W), "float32")):
        with T.Kernel(1, threads=128):
            for i, j in T.Parallel(H, W):
                O[i, j] = sum(X[i + a, j + b] * Wt[a, b] for (a, b) in TAPS)
    return main


@tilelang.jit(out_idx=[1])
def scratch_in_the_block(N=64):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(2, threads=32) as bx:
            C = T.alloc_global((N,), "float32")
            for i in T.Parallel(32):
                C[bx * 32 + i] = A[bx * 32 + i] * 2
            for i in T.Parallel(32):
                B[bx * 32 + i] = C[bx * 32 + i] + 1
    return main


def _inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(6, 64, generator=g), torch.randn(128, generator=g),
            torch.rand(128, generator=g) + 0.5, torch.randn(17, 17, generator=g),
            torch.randn(2, 2, generator=g))


def _box(x, w):
    return sum(x[a:a + 16, b:b + 16] * w[a, b] for a, b in TAPS)


def test_thread_return_and_the_warp_shuffles():
    x = _inputs()[0]
    s = row_sums()(x)
    torch.testing.assert_close(s[:6].double(), x.double().sum(1), rtol=1e-5, atol=1e-5)


def test_cuda_math_by_name():
    _, a, b, _, _ = _inputs()
    o = extern_math()(a, b)
    torch.testing.assert_close(o[0], torch.maximum(a, b))
    torch.testing.assert_close(o[1], a / b)
    torch.testing.assert_close(o[2], torch.exp2(a))
    torch.testing.assert_close(o[3], a.abs() ** 1.5)


def test_an_unknown_extern_function_is_refused_naming_it():
    @T.prim_func
    def main(A: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(32):
                A[i] = T.call_extern("float32", "my_device_fn", A[i])
    with pytest.raises(tilejit.CompileError, match=r"T.call_extern of 'my_device_fn' is "
                       r"not supported by tilejit: it emits PTX itself and compiles no C"):
        tilelang.compile(main, target="cuda -arch=sm_90a")


def _extern_by_variable(func_name):
    # TileLang's dequantize examples: the function's name from a table, dtype= last
    @T.prim_func
    def main(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(32):
                B[i] = T.call_extern(func_name, A[i], A[i], dtype="float32")
    return main


def test_an_extern_functions_name_may_be_a_variable():
    a = torch.randn(32)
    b = tilelang.compile(_extern_by_variable("fmaxf"), out_idx=[1], target="sim")(a)
    torch.testing.assert_close(b, a)
    with pytest.raises(tilejit.CompileError, match=r"T.call_extern of 'decode_i4s_to_f16' "
                       r"is not supported by tilejit: .*T.import_source's source"):
        tilelang.compile(_extern_by_variable("decode_i4s_to_f16"), target="sim")
    with pytest.raises(tilejit.CompileError, match=r"the name a string known when the "
                       r"kernel is compiled"):
        tilelang.compile(_extern_by_variable(3), target="sim")


def test_a_generator_expression_over_compile_time_taps():
    *_, x, w = _inputs()
    torch.testing.assert_close(box_sum()(x, w), _box(x, w))


def test_a_list_comprehension_is_a_tuple_of_its_elements():
    @T.prim_func
    def main(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(32):
                w = [A[i] * k for k in range(1, 4)]
                B[i] = w[0] + w[1] + list(2 * w[k] for k in range(3))[2]
    a, b = torch.randn(32), torch.zeros(32)
    tilelang.compile(main)(a, b)
    torch.testing.assert_close(b, a + 2 * a + 6 * a)


def test_an_assignment_expression_is_refused_at_its_line():
    @T.prim_func
    def main(X: T.Tensor((32,), "float32"), Y: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(32):
                Y[i] = (t := X[i] * 2) + t
    with pytest.raises(tilejit.CompileError, match=r"unsupported in a kernel: an assignment "
                       r"expression \(:=\)"):
        tilelang.compile(main, target="cuda -arch=sm_90a")


def test_a_comprehension_over_a_run_time_sequence_stays_refused():
    @T.prim_func
    def main(A: T.Tensor((32,), "float32"), n: T.int32):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(32):
                A[i] = sum(A[k] for k in range(n))
    with pytest.raises(tilejit.CompileError, match="a generator expression"):
        tilelang.compile(main, target="cuda -arch=sm_90a")


def test_a_global_scratch_declared_in_the_block():
    a = torch.randn(64)
    torch.testing.assert_close(scratch_in_the_block()(a), a * 2 + 1)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_assembles(arch, ptxas):
    ptx = row_sums().get_kernel_source(arch=arch)
    assert "shfl.sync.down.b32" in ptx and "shfl.sync.idx.b32" in ptx
    ptxas(ptx, arch)
    ptx = extern_math().get_kernel_source(arch=arch)
    assert "div.rn.f32" in ptx and "max.f32" in ptx
    ptxas(ptx, arch)
    ptxas(box_sum().get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
def test_on_gpu_against_torch_and_the_simulator():
    x, a, b, xx, w = _inputs(1)
    s = row_sums()(x.cuda()).cpu()
    torch.testing.assert_close(s[:6].double(), x.double().sum(1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(s[:6], row_sums()(x)[:6])
    o = extern_math()(a.cuda(), b.cuda()).cpu()
    torch.testing.assert_close(o, extern_math()(a, b), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(o[1], a / b, rtol=0, atol=0)
    torch.testing.assert_close(box_sum()(xx.cuda(), w.cuda()).cpu(), _box(xx, w))
    a64 = torch.randn(64)
    torch.testing.assert_close(scratch_in_the_block()(a64.cuda()).cpu(), a64 * 2 + 1)


@T.macro
def _exchange(buf, stride, warp_size):
    # TileLang's Hadamard example: its sub-warp width passed as TVM's warp_size too
    tx = T.get_thread_binding(0)
    buf[tx] = T.tvm_warp_shuffle(0xFFFFFFFF, buf[tx], (tx ^ stride) % warp_size, warp_size,
                                 warp_size)


def _shuffled(width):
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            buf = T.alloc_shared((64,), "float32")
            tx = T.get_thread_binding(0)
            buf[tx] = A[tx]
            _exchange(buf, 1, width)
            B[tx] = buf[tx]
    return main


def _wavefront():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding(0)
            B[tx] = T.tvm_warp_shuffle(0xFFFFFFFF, A[tx], tx ^ 1, 32, 64)
    return main


@pytest.mark.parametrize("width", [32, 16, 2])
def test_tvms_warp_size_may_be_a_macro_parameter(width):
    a = torch.randn(64)
    b = tilelang.compile(_shuffled(width), out_idx=[1], target="sim")(a)
    lanes = torch.arange(64)
    torch.testing.assert_close(b, a[(lanes // width) * width + (lanes % width ^ 1)])


WAVEFRONT = 64


def _wavefront_by_name():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding(0)
            B[tx] = T.tvm_warp_shuffle(0xFFFFFFFF, A[tx], tx ^ 1, 32, WAVEFRONT)
    return main


def test_a_warp_size_past_32_is_refused():
    for program, written in ((_wavefront, "64"), (_wavefront_by_name, "WAVEFRONT")):
        with pytest.raises(tilejit.CompileError, match=r"a warp of 32 lanes \(the warp_size "
                           r"argument: a power of two up to 32\), got `" + written + "`"):
            tilelang.compile(program(), target="sim")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_a_sub_warp_shuffle_assembles(arch, ptxas):
    ptx = tilelang.compile(_shuffled(16), target=f"cuda -arch={arch}").get_kernel_source()
    assert "shfl.sync.idx.b32" in ptx
    ptxas(ptx, arch)


@pytest.mark.gpu
@pytest.mark.parametrize("width", [32, 16, 2])
def test_sub_warp_shuffles_on_the_gpu(width):
    a = torch.randn(64)
    got = tilelang.compile(_shuffled(width), out_idx=[1])(a.cuda()).cpu()
    sim = tilelang.compile(_shuffled(width), out_idx=[1], target="sim")(a)
    lanes = torch.arange(64)
    assert torch.equal(got, a[(lanes // width) * width + (lanes % width ^ 1)])
    assert torch.equal(got, sim)
