"""TileLang's explicit loads and stores, ``T.ldg*``/``T.stg*`` (global) and
``T.lds*``/``T.sts*`` (shared): raw bits at an element's address, one vector access of
the GPU (``frontend/bit_moves.py``, ``codegen/lowering/bit_moves.py``,
``sim/bit_moves.py``)."""
import re

import pytest

import tilejit
import tilejit.language as T

torch = pytest.importorskip("torch")


def copy_words(bits=128, dtype=T.float32, n=256):
    """Each block moves one access's bytes of X to Y as words, whatever the dtype."""
    per = bits // T.dtype(dtype).bits        # elements an access moves
    load, store = getattr(T, f"ldg{bits}"), getattr(T, f"stg{bits}")

    @T.prim_func
    def main(X: T.Tensor((n,), dtype), Y: T.Tensor((n,), dtype)):
        with T.Kernel(n // per, threads=32) as pid:
            val = load(X[pid * per:pid * per + per])
            store(Y[pid * per:pid * per + per], val)
    return main


def predicated(n=128):
    """Loads and stores under a predicate: Y gets X's first half, Z X's words as floats
    where the block is in the first half, 0 elsewhere."""
    @T.prim_func
    def main(X: T.Tensor((n,), T.float32), Y: T.Tensor((n,), T.float32),
             Z: T.Tensor((n,), T.float32)):
        with T.Kernel(n // 4, threads=32) as pid:
            T.stg64(Y[pid * 4:pid * 4 + 2], T.ldg64(X[pid * 4:pid * 4 + 2]), pred=pid < n // 8)
            Z[pid * 4:pid * 4 + 4] = T.reinterpret(
                T.ldg128(X[pid * 4:pid * 4 + 4], pred=pid < n // 8), T.float32x4)
            Y[pid * 4 + 2] = T.reinterpret(T.ldg32(X[pid * 4 + 2], pred=pid < n // 8),
                                           T.float32)
    return main


def through_shared(n=128):
    """Halves moved as words through a shared tile, then read back as float16 pairs."""
    @T.prim_func
    def main(X: T.Tensor((n,), T.float16), Y: T.Tensor((n,), T.float16)):
        with T.Kernel(n // 8, threads=32) as pid:
            S = T.alloc_shared((n,), T.float16)
            T.sts128(S[pid * 8:pid * 8 + 8], T.ldg128(X[pid * 8:pid * 8 + 8]))
            T.sync_threads()
            half = T.lds64(S[pid * 8 + 4:pid * 8 + 8])
            Y[pid * 8 + 4:pid * 8 + 8] = T.reinterpret(half, T.float16x4)
            T.stg32(Y[pid * 8:pid * 8 + 2], T.lds32(S[pid * 8]))
            T.stg32(Y[pid * 8 + 2:pid * 8 + 4], T.lds32(S[pid * 8 + 2]))
    return main


@pytest.mark.parametrize("bits, dtype", [(32, T.float32), (64, T.float16), (128, T.float32),
                                         (128, T.bfloat16), (128, T.float8_e4m3fn),
                                         (256, T.int8), (64, T.float64)])
def test_words_copy_every_dtype_bit_for_bit(bits, dtype):
    x = (torch.randn(256) * 4).to(T.dtype(dtype).as_torch()) if T.dtype(dtype).is_float \
        else torch.randint(-128, 128, (256,), dtype=torch.int8)
    y = torch.zeros_like(x)
    tilejit.compile(copy_words(bits, dtype), target="sim")(x, y)
    assert torch.equal(y.view(torch.uint8), x.view(torch.uint8))


def test_a_false_predicate_loads_zero_and_stores_nothing():
    x = torch.randn(128)
    y, z = torch.full((128,), 7.0), torch.full((128,), 7.0)
    tilejit.compile(predicated(), target="sim")(x, y, z)
    want_y, want_z = torch.full((128,), 7.0), torch.zeros(128)
    for b in range(32):
        if b < 16:
            want_y[b * 4:b * 4 + 3] = x[b * 4:b * 4 + 3]
            want_z[b * 4:b * 4 + 4] = x[b * 4:b * 4 + 4]
        else:
            want_y[b * 4 + 2] = 0.0
    torch.testing.assert_close(y, want_y, rtol=0, atol=0)
    torch.testing.assert_close(z, want_z, rtol=0, atol=0)


def test_words_through_a_shared_tile():
    x = torch.randn(128).half()
    y = torch.zeros_like(x)
    tilejit.compile(through_shared(), target="sim")(x, y)
    assert torch.equal(y, x)


def test_a_misaligned_address_is_reported():
    @T.prim_func
    def shifted(X: T.Tensor((64,), T.float32), Y: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=32):
            T.stg128(Y[0:4], T.ldg128(X[2:6]))
    with pytest.raises(ValueError, match="not aligned to 16 bytes"):
        tilejit.compile(shifted, target="sim")(torch.zeros(64), torch.zeros(64))


@pytest.mark.parametrize("body, message", [
    ("v = T.ldg128(S[0:4])", "a global tensor"),
    ("v = T.lds64(X[0:2])", "a shared tile"),
    ("v = T.lds64(S[0:2], pred=True)", "takes no pred"),
    ("T.stg128(X[0:4], T.ldg64(X[4:6]))", "the value is 4 uint32 words"),
    ("v = T.ldg64(X[0:8:2])", "a region with a step"),
    ("X[0:4] = T.reinterpret(T.ldg64(X[0:2]), T.float32x4)", "are 128 bits, the words 64"),
])
def test_wrong_operands_are_compile_errors(body, message, tmp_path):
    source = ("import tilejit.language as T\n\n@T.prim_func\n"
              "def main(X: T.Tensor((64,), T.float32)):\n"
              "    with T.Kernel(1, threads=32):\n"
              "        S = T.alloc_shared((64,), T.float32)\n"
              f"        {body}\n")
    path = tmp_path / "kernel_words.py"
    path.write_text(source)
    namespace = {}
    exec(compile(source, str(path), "exec"), namespace)
    with pytest.raises(tilejit.CompileError, match=message):
        tilejit.compile(namespace["main"], target="cuda -arch=sm_90a").get_kernel_source()


def test_outside_a_kernel_they_raise():
    with pytest.raises(RuntimeError, match="only meaningful in the body"):
        T.ldg32(None)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_one_vector_access_each_and_the_ptx_assembles(arch, ptxas):
    ptx = tilejit.compile(copy_words(128, T.float32)).get_kernel_source(arch=arch)
    assert re.search(r"ld\.global(\.nc)?\.v4\.b32", ptx) and "st.global.v4.b32" in ptx
    ptxas(ptx, arch)
    ptx = tilejit.compile(through_shared()).get_kernel_source(arch=arch)
    assert "ld.global.v4.b32" in ptx and "st.shared.v4.b32" in ptx
    # (the 64-bit shared load's halves are read one by one: LLVM narrows it so)
    assert ptx.count("bar.sync") == 1           # the kernel's own: loads need none
    ptxas(ptx, arch)
    ptxas(tilejit.compile(predicated()).get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
def test_on_the_gpu_against_torch_and_the_simulator():
    for bits, dtype in [(32, T.float32), (128, T.bfloat16), (256, T.int8), (64, T.float64)]:
        x = (torch.randn(256) * 4).to(T.dtype(dtype).as_torch()) if T.dtype(dtype).is_float \
            else torch.randint(-128, 128, (256,), dtype=torch.int8)
        y = torch.zeros_like(x).cuda()
        tilejit.compile(copy_words(bits, dtype))(x.cuda(), y)
        assert torch.equal(y.cpu().view(torch.uint8), x.view(torch.uint8)), (bits, dtype)
    x = torch.randn(128)
    gpu = [x.cuda(), torch.full((128,), 7.0).cuda(), torch.full((128,), 7.0).cuda()]
    sim = [x.clone(), torch.full((128,), 7.0), torch.full((128,), 7.0)]
    tilejit.compile(predicated())(*gpu)
    tilejit.compile(predicated(), target="sim")(*sim)
    for g, s in zip(gpu, sim):
        torch.testing.assert_close(g.cpu(), s, rtol=0, atol=0)
    x = torch.randn(128).half()
    y = torch.zeros_like(x).cuda()
    tilejit.compile(through_shared())(x.cuda(), y)
    assert torch.equal(y.cpu(), x)


def packed_rows(rows=8):
    """A cache packer's form: lanes 0..7 of each block move 8 bfloat16 values of a row
    into 4 uint32 words of another tensor; a T.Parallel moves float16 rows by 128 bits."""
    @T.prim_func
    def main(A: T.Tensor((rows, 64), T.bfloat16), C: T.Tensor((rows, 32), T.uint32),
             X: T.Tensor((64, 16), T.float16), Y: T.Tensor((64, 16), T.float16)):
        with T.Kernel(rows, threads=32) as t:
            lane = T.get_thread_binding()
            if lane < 8:
                e = lane * 8
                packed = T.ldg128(A[t, e:e + 8])
                T.stg128(C[t, e // 2:e // 2 + 4], packed)
            for i, j in T.Parallel(64, 2):
                v = T.ldg128(X[i, j * 8:j * 8 + 8])
                T.stg128(Y[i, j * 8:j * 8 + 8], v, pred=t == 0)
    return main


def test_rows_packed_into_words():
    a = torch.randn(8, 64).bfloat16()
    c = torch.zeros(8, 32, dtype=torch.uint32)
    x = torch.randn(64, 16).half()
    y = torch.zeros_like(x)
    tilejit.compile(packed_rows(), target="sim")(a, c, x, y)
    assert torch.equal(c.view(torch.uint8), a.view(torch.uint8))
    assert torch.equal(y, x)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_packed_rows_ptx(arch, ptxas):
    ptx = tilejit.compile(packed_rows()).get_kernel_source(arch=arch)
    assert len(re.findall(r"ld\.global(\.nc)?\.v4\.b32", ptx)) >= 2
    ptxas(ptx, arch)


@pytest.mark.gpu
def test_rows_packed_into_words_on_the_gpu():
    a = torch.randn(8, 64).bfloat16()
    x = torch.randn(64, 16).half()
    c = torch.zeros(8, 32, dtype=torch.uint32).cuda()
    y = torch.zeros_like(x).cuda()
    tilejit.compile(packed_rows())(a.cuda(), c, x.cuda(), y)
    assert torch.equal(c.cpu().view(torch.uint8), a.view(torch.uint8))
    assert torch.equal(y.cpu(), x)


def _one(body, dtype=T.float32):
    @T.prim_func
    def main(X: T.Tensor((16,), dtype), Y: T.Tensor((16,), dtype)):
        with T.Kernel(1, threads=1):
            body(X, Y)
    return main


@T.macro
def _past_the_end(X, Y):
    T.stg128(Y[0:4], T.ldg128(X[16:20]))


@T.macro
def _before_the_start(X, Y):
    Y[1] = T.reinterpret(T.ldg32(X[-2]), T.float32)


@T.macro
def _scaled_words(X, Y):
    Y[0:4] = T.reinterpret(T.ldg128(X[0:4]), T.float32x4) * 2.0


@pytest.mark.parametrize("body, message", [(_past_the_end, "run outside its shape"),
                                           (_before_the_start, "run outside its shape")])
def test_an_access_outside_the_tensor_is_reported(body, message):
    with pytest.raises(IndexError, match=message):
        tilejit.compile(_one(body), target="sim")(torch.zeros(16), torch.zeros(16))


def test_a_tensor_address_off_the_accesss_alignment_is_reported():
    x = torch.arange(20.0)[1:17]        # 4 bytes past a 16-byte boundary
    with pytest.raises(ValueError, match="not aligned to 16 bytes"):
        tilejit.compile(copy_words(128, T.float32, n=16), target="sim")(x, torch.zeros(16))


def test_elements_not_consecutive_in_memory_are_refused():
    x = torch.arange(16.0).reshape(4, 4).t()

    @T.prim_func
    def main(X: T.Tensor((4, 4), T.float32), Y: T.Tensor((4, 4), T.float32)):
        with T.Kernel(1, threads=1):
            T.stg128(Y[0, 0:4], T.ldg128(X[0, 0:4]))
    with pytest.raises(ValueError, match="not consecutive in memory"):
        tilejit.compile(main, target="sim")(x, torch.zeros(4, 4))


def test_words_read_as_floats_in_an_expression():
    x, y = torch.arange(16.0), torch.zeros(16)
    tilejit.compile(_one(_scaled_words), target="sim")(x, y)
    torch.testing.assert_close(y[:4], x[:4] * 2, rtol=0, atol=0)


def test_a_wrong_value_is_one_message():
    @T.prim_func
    def main(X: T.Tensor((16,), T.float32), Y: T.Tensor((16,), T.float32)):
        with T.Kernel(1, threads=1):
            T.stg32(Y[0], X[1])
    with pytest.raises(tilejit.CompileError) as info:
        tilejit.compile(main).get_kernel_source(arch="sm_90a")
    assert "the value is 32 bits" in str(info.value)
    assert "compile-time value" not in str(info.value)
