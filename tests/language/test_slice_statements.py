"""Slices of a buffer in a statement of the block, as TileLang's programs write them
outside tile operations (its let test: ``b = A[0, 0:4]`` then ``A[0, 4:8] = b``): TVM's
vector statements, one lane per element (frontend/slice_vectors.py)."""
import pytest

import tilejit
import tilejit as tilelang
import tilejit.language as T

torch = pytest.importorskip("torch")


def let_vector():
    """TileLang's let test: a vector bound to a name, stored four elements on."""
    @T.prim_func
    def main(A: T.Tensor((16, 16), T.float32)):
        for _bx in T.thread_binding(1, thread="blockIdx.x"):
            for _tx in T.thread_binding(128, thread="threadIdx.x"):
                b = A[0, 0:4]
                A[0, 4:8] = b
    return main


def row_vectors(rows=8, dtype=T.float16):
    """Per row of a T.Parallel: a slice scaled into another; an open slice added to."""
    @T.prim_func
    def main(A: T.Tensor((rows, 16), dtype), B: T.Tensor((rows, 16), dtype)):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(rows):
                B[i, 4:8] = A[i, 0:4] * 2
            for i in T.serial(rows):
                B[i, 12:] += A[i, :4]
    return main


def bound_vectors(n=64, width=4):
    """Vectors bound per block and combined: v = A[..]; w = v * 2; B[..] = w + v."""
    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
        with T.Kernel(n // width, threads=32) as bx:
            v = A[bx * width:bx * width + width]
            w = v * 2
            B[bx * width:(bx + 1) * width] = w + v
    return main


def shifted_in_place(n=16):
    """A[1:5] = A[0:4]: every lane loaded before any is stored."""
    @T.prim_func
    def main(A: T.Tensor((n,), T.float32)):
        with T.Kernel(1, threads=32):
            A[1:5] = A[0:4]
    return main


def shared_broadcast():
    """A scalar stored into a slice of a shared tile, read back through one."""
    @T.prim_func
    def main(A: T.Tensor((8,), T.float32)):
        with T.Kernel(1, threads=64):
            s = T.alloc_shared((8,), T.float32)
            s[0:8] = 3.0
            s[2:4] = s[0:2] + 1.0
            A[0:8] = s[0:8]
    return main


def cast_vectors():
    """``b = T.cast(I[0:4] * 0.5, "float32")`` of an int32 tensor holds floats (TVM's
    float32x4), not int32 (I's) that would drop the halves."""
    @T.prim_func
    def main(I: T.Tensor((8,), T.int32), B: T.Tensor((8,), T.float32)):
        with T.Kernel(1, threads=1):
            b = T.cast(I[0:4] * 0.5, "float32")
            B[0:4] = b
            c = I[4:8].astype("float32")
            B[4:8] = c * 0.5
    return main


def test_a_bound_vector_is_its_elements_where_it_was_bound():
    a = torch.randn(16, 16)
    want = a.clone()
    want[0, 4:8] = a[0, 0:4]
    tilelang.compile(let_vector(), target="sim")(a)
    torch.testing.assert_close(a, want, rtol=0, atol=0)


def test_slices_in_parallel_and_serial_rows():
    a = torch.randn(8, 16).half()
    b = torch.ones(8, 16).half()
    tilelang.compile(row_vectors(), target="sim")(a, b)
    want = torch.ones(8, 16).half()
    want[:, 4:8] = a[:, 0:4] * 2
    want[:, 12:] += a[:, :4]
    torch.testing.assert_close(b, want, rtol=0, atol=0)


def test_vectors_bound_and_combined():
    a = torch.randn(64)
    b = torch.zeros(64)
    tilelang.compile(bound_vectors(), target="sim")(a, b)
    torch.testing.assert_close(b, a * 2 + a, rtol=0, atol=0)


def test_a_slice_read_and_written_loads_every_lane_first():
    a = torch.arange(16.0)
    tilelang.compile(shifted_in_place(), target="sim")(a)
    want = torch.arange(16.0)
    want[1:5] = torch.arange(4.0)
    torch.testing.assert_close(a, want, rtol=0, atol=0)


def test_a_scalar_stored_into_a_shared_slice():
    a = torch.zeros(8)
    tilelang.compile(shared_broadcast(), target="sim")(a)
    torch.testing.assert_close(a, torch.tensor([3.0, 3, 4, 4, 3, 3, 3, 3]))


@pytest.mark.parametrize("body, message", [
    ("B[0:5:2] = A[0:10:2]", "a slice with a step"),
    ("B[0:2, 0:2] = 1", "slices 2 dimensions"),
    ("B[0:4] = A[0:8]", "slices of different lengths"),
])
def test_what_tilelang_refuses_is_a_compile_error_at_the_line(body, message, tmp_path):
    source = (f"import tilejit.language as T\n\n"
              f"@T.prim_func\n"
              f"def main(A: T.Tensor((10,), T.int32), B: T.Tensor((5, 5), T.int32)):\n"
              f"    with T.Kernel(1):\n"
              f"        {body.replace('B[0:5:2]', 'B[0, 0:5:2]').replace('B[0:4]', 'B[0, 0:4]')}\n")
    path = tmp_path / "kernel_slices.py"
    path.write_text(source)
    namespace = {}
    exec(compile(source, str(path), "exec"), namespace)
    with pytest.raises(tilejit.CompileError, match=message) as err:
        tilelang.compile(namespace["main"], target="sim")(
            torch.zeros(10, dtype=torch.int32), torch.zeros(5, 5, dtype=torch.int32))
    assert "kernel_slices.py\", line 6" in str(err.value)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("program", [let_vector, row_vectors, bound_vectors, shifted_in_place,
                                     shared_broadcast, cast_vectors])
def test_the_ptx_assembles(program, arch, ptxas):
    ptxas(tilelang.compile(program()).get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
def test_on_the_gpu_against_torch_and_the_simulator():
    def both(program, *tensors):
        gpu = [t.cuda() for t in tensors]
        sim = [t.clone() for t in tensors]
        tilelang.compile(program())(*gpu)
        tilelang.compile(program(), target="sim")(*sim)
        for g, s in zip(gpu, sim):
            torch.testing.assert_close(g.cpu(), s, rtol=0, atol=0)
        return [g.cpu() for g in gpu]

    a = torch.randn(16, 16)
    (out,) = both(let_vector, a)
    torch.testing.assert_close(out[0, 4:8], a[0, 0:4], rtol=0, atol=0)
    a, b = torch.randn(8, 16).half(), torch.ones(8, 16).half()
    _, out = both(row_vectors, a, b)
    torch.testing.assert_close(out[:, 4:8], a[:, 0:4] * 2, rtol=0, atol=0)
    a, b = torch.randn(64), torch.zeros(64)
    _, out = both(bound_vectors, a, b)
    torch.testing.assert_close(out, a * 3, rtol=0, atol=0)
    (out,) = both(shifted_in_place, torch.arange(16.0))
    torch.testing.assert_close(out[1:5], torch.arange(4.0), rtol=0, atol=0)
    (out,) = both(shared_broadcast, torch.zeros(8))
    torch.testing.assert_close(out, torch.tensor([3.0, 3, 4, 4, 3, 3, 3, 3]))


def test_a_slice_as_long_as_a_constexpr():
    @tilejit.jit
    def blocks(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.float32),
               BLOCK: T.constexpr):
        with T.Kernel(64 // BLOCK, threads=32) as bx:
            v = A[bx * BLOCK:(bx + 1) * BLOCK]
            B[bx * BLOCK:(bx + 1) * BLOCK] = v - 1

    a, b = torch.randn(64), torch.zeros(64)
    blocks.compile(a, b, 8, target="sim")(a, b)
    torch.testing.assert_close(b, a - 1, rtol=0, atol=0)


def tile_rows():
    """Slices of a fragment's and a shared tile's rows in a T.Parallel over the rows."""
    @T.prim_func
    def main(A: T.Tensor((64, 16), T.float16), B: T.Tensor((64, 16), T.float16),
             C: T.Tensor((64, 16), T.float16)):
        with T.Kernel(1, threads=128):
            F = T.alloc_fragment((64, 16), T.float16)
            S = T.alloc_shared((64, 16), T.float16)
            for i in T.Parallel(64):
                F[i, 0:16] = A[i, 0:16]
                S[i, 0:8] = A[i, 0:8]
                S[i, 8:16] = A[i, 8:16] * 2
            for i, j in T.Parallel(64, 16):
                F[i, j] = F[i, j] + 1
            T.copy(F, B)
            T.copy(S, C)
    return main


def test_slices_of_tile_rows():
    a = torch.randn(64, 16).half()
    b, c = torch.zeros_like(a), torch.zeros_like(a)
    tilelang.compile(tile_rows(), target="sim")(a, b, c)
    want = a.clone()
    want[:, 8:] *= 2
    torch.testing.assert_close(b, a + 1, rtol=0, atol=0)
    torch.testing.assert_close(c, want, rtol=0, atol=0)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_tile_rows_ptx_assembles(arch, ptxas):
    ptxas(tilelang.compile(tile_rows()).get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
def test_slices_of_tile_rows_on_the_gpu():
    a = torch.randn(64, 16).half()
    gpu = [a.cuda(), torch.zeros_like(a).cuda(), torch.zeros_like(a).cuda()]
    sim = [a.clone(), torch.zeros_like(a), torch.zeros_like(a)]
    tilelang.compile(tile_rows())(*gpu)
    tilelang.compile(tile_rows(), target="sim")(*sim)
    for g, s in zip(gpu, sim):
        torch.testing.assert_close(g.cpu(), s, rtol=0, atol=0)
    torch.testing.assert_close(sim[1], a + 1, rtol=0, atol=0)


def test_a_bound_vector_in_a_statement_of_ramps():
    @T.prim_func
    def ramps(A: T.Tensor((16,), T.float32), C: T.Tensor((16,), T.float32)):
        with T.Kernel(1, threads=32):
            b = A[0:4]
            C[T.Ramp(4, 1, 4)] = b * T.Broadcast(2.0, 4)
    a, c = torch.randn(16), torch.zeros(16)
    tilelang.compile(ramps, target="sim")(a, c)
    want = torch.zeros(16)
    want[4:8] = a[0:4] * 2
    torch.testing.assert_close(c, want, rtol=0, atol=0)


def _run_source(tmp_path, body, *tensors, header="", name="kernel_review"):
    """Compile and run (simulator) a one-block kernel whose body is ``body``."""
    source = ("import tilejit.language as T\nWIDE = False\n" + header +
              "\n@T.prim_func\n"
              "def main(A: T.Tensor((16,), T.float32), B: T.Tensor((16,), T.float32)):\n"
              "    with T.Kernel(1, threads=1):\n" +
              "".join(f"        {line}\n" for line in body.splitlines()))
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    namespace = {}
    exec(compile(source, str(path), "exec"), namespace)
    tilelang.compile(namespace["main"], target="sim")(*tensors)


@pytest.mark.parametrize("body, want", [
    # a dead branch of a compile-time `if` is dropped before its slices are read
    ("if WIDE:\n    B[0:8:2] = A[0:4]\nB[0:4] = A[0:4]", lambda a: torch.cat([a[:4], 0 * a[4:]])),
    # one binding of a static if/else
    ("if WIDE:\n    b = A[4:8]\nelse:\n    b = A[0:4]\nB[0:4] = b",
     lambda a: torch.cat([a[:4], 0 * a[4:]])),
    # an element of a vector is a scalar
    ("b = A[0:4]\nx = b[1]\nB[0] = x\nB[4:8] = A[4:8]",
     lambda a: torch.cat([a[1:2], 0 * a[1:4], a[4:8], 0 * a[8:]])),
    # a bound vector updated in place (TileLang rebinds it to b + 1)
    ("b = A[0:4]\nb += 1\nB[0:4] = b", lambda a: torch.cat([a[:4] + 1, 0 * a[4:]])),
    # lengths through // (an atom of their own)
    ("b = A[3 // 2 * 4:3 // 2 * 4 + 4]\nB[0:4] = b", lambda a: torch.cat([a[4:8], 0 * a[4:]])),
    # a cast outermost gives the bound vector its dtype (TVM's float16x4), not A's
    ("b = T.cast(A[0:4] / 3.0, 'float16')\nB[0:4] = b",
     lambda a: torch.cat([(a[:4] / 3.0).half().float(), 0 * a[4:]])),
    ("b = (A[0:4] / 3.0).astype('float16')\nB[0:4] = b",
     lambda a: torch.cat([(a[:4] / 3.0).half().float(), 0 * a[4:]])),
    ("b = T.Cast('int32', A[0:4] * 2.5)\nB[0:4] = b + 0.25",
     lambda a: torch.cat([(a[:4] * 2.5).int().float() + 0.25, 0 * a[4:]])),
    # a comparison's vector is bool
    ("b = A[0:4] > 2.0\nB[0:4] = T.if_then_else(b, A[0:4], -1.0)",
     lambda a: torch.cat([torch.where(a[:4] > 2, a[:4], -1.0), 0 * a[4:]])),
])
def test_review_forms(body, want, tmp_path):
    a, b = torch.arange(1.0, 17.0), torch.zeros(16)
    _run_source(tmp_path, body, a, b)
    torch.testing.assert_close(b, want(a), rtol=0, atol=0)


def test_a_cast_gives_the_bound_vector_its_dtype():
    i, b = torch.arange(1, 9, dtype=torch.int32), torch.zeros(8)
    tilelang.compile(cast_vectors(), target="sim")(i, b)
    torch.testing.assert_close(b, i.float() * 0.5, rtol=0, atol=0)


@pytest.mark.gpu
def test_a_cast_gives_the_bound_vector_its_dtype_on_the_gpu():
    i = torch.arange(1, 9, dtype=torch.int32)
    b = torch.zeros(8, device="cuda")
    tilelang.compile(cast_vectors())(i.cuda(), b)
    torch.testing.assert_close(b.cpu(), i.float() * 0.5, rtol=0, atol=0)


@pytest.mark.parametrize("body, error, message", [
    ("b = A[-4:]\nB[0:4] = b", tilejit.CompileError, "a negative slice bound"),
    ("b = A[12:]\nB[0:4] = b", tilejit.CompileError, "known only when the kernel runs"),
    ("b = A[0:4]\nb = A[4:8]\nB[0:4] = b", tilejit.CompileError, "bound again elsewhere"),
    ("B[8:] = A[0:4]", AssertionError, "T.assume"),
    ("B[8:] = A[2:]", AssertionError, "T.assume"),
])
def test_review_errors(body, error, message, tmp_path):
    with pytest.raises(error, match=message):
        _run_source(tmp_path, body, torch.zeros(16), torch.zeros(16))


@T.macro
def _moved(A, B):
    B[4:8] = A[0:4]


def _moved_twice(A, B):
    B[8:12] = A[0:4] * 2


def test_slice_statements_in_a_macro_and_a_helper():
    @T.prim_func
    def main(A: T.Tensor((16,), T.float32), B: T.Tensor((16,), T.float32)):
        with T.Kernel(1, threads=1):
            _moved(A, B)
            _moved_twice(A, B)
    a, b = torch.arange(1.0, 17.0), torch.zeros(16)
    tilelang.compile(main, target="sim")(a, b)
    want = torch.zeros(16)
    want[4:8], want[8:12] = a[0:4], a[0:4] * 2
    torch.testing.assert_close(b, want, rtol=0, atol=0)


@pytest.mark.parametrize("body", ["b = A[0:4]\nB[0] = b",
                                  "B[0] = T.reinterpret(T.ldg128(A[0:4]), T.float32x4)"])
def test_a_vector_stored_into_one_element_is_an_error(body, tmp_path):
    with pytest.raises(tilejit.CompileError, match="stores a vector"):
        _run_source(tmp_path, body, torch.zeros(16), torch.zeros(16))
