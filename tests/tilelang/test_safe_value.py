"""TileLang's ``T.annotate_safe_value({A: v})``: the elements outside tensor A read as v,
in element reads and in tile copies from A (a copy pads its destination with v past A's
edges), written as TileLang's own tests write it: dtype strings, ``tilejit.compile`` with
``out_idx``."""
import pytest
import torch

import tilejit
import tilejit.language as T


def shifted_rows(M, N, block_M, block_N, dtype="float16", pad_value=0):
    """B[i] = A[i - 10]: the first ten rows read above A."""
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_N), dtype)
            T.annotate_safe_value({A: pad_value})
            for i, j in T.Parallel(block_M, block_N):
                A_shared[i, j] = A[by * block_M + i - 10, bx * block_N + j]
            for i, j in T.Parallel(block_M, block_N):
                B[by * block_M + i, bx * block_N + j] = A_shared[i, j]
    return main


def padded_copy(M, N, pM, pN, bM=32, bN=32, src="float32", dst="float32", pad=None,
                through_tiles=False):
    """B (pM x pN) = A (M x N) padded: a region copy global to global, or by its corner
    into a shared tile, then a fragment, then B."""
    @T.prim_func
    def main(A: T.Tensor((M, N), src), B: T.Tensor((pM, pN), dst)):
        with T.Kernel(T.ceildiv(pN, bN), T.ceildiv(pM, bM), threads=128) as (bx, by):
            S = T.alloc_shared((bM, bN), src)
            F = T.alloc_fragment((bM, bN), src)
            if pad is not None:
                T.annotate_safe_value({A: pad})
            if through_tiles:
                T.copy(A[by * bM, bx * bN], S)
                T.copy(S, F)
                T.copy(F, B[by * bM:(by + 1) * bM, bx * bN:(bx + 1) * bN])
            else:
                T.copy(A[by * bM:(by + 1) * bM, bx * bN:(bx + 1) * bN],
                       B[by * bM:(by + 1) * bM, bx * bN:(bx + 1) * bN])
    return main


def elementwise(M, N, pM, pN, pad=-99):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((pM, pN), "float32")):
        with T.Kernel(1, threads=128):
            T.annotate_safe_value({A: pad})
            for i, j in T.Parallel(pM, pN):
                T.copy(A[i, j], B[i, j])
    return main


def _padded_reference(a, shape, pad, dtype):
    ref = torch.full(shape, 0.0 if pad is None else float(pad), dtype=dtype, device=a.device)
    ref[:a.shape[0], :a.shape[1]] = a.to(dtype)
    return ref


@pytest.mark.parametrize("pad_value", [0, 10])
def test_element_reads_outside_read_the_value(pad_value):
    kernel = tilejit.compile(shifted_rows(64, 64, 32, 32, pad_value=pad_value), out_idx=[1])
    a = torch.randn(64, 64).half()
    ref = torch.full_like(a, pad_value)
    ref[10:] = a[:-10]
    torch.testing.assert_close(kernel(a), ref, rtol=0, atol=0)


@pytest.mark.parametrize("pad,src,dst,through_tiles", [
    (-99, "float32", "float32", False), (None, "float32", "float32", False),
    (-99, "float32", "float16", False), (-99, "float32", "float16", True),
    (7, "float16", "float32", True)])
def test_tile_copies_pad_with_the_value(pad, src, dst, through_tiles):
    kernel = tilejit.compile(padded_copy(70, 75, 96, 96, src=src, dst=dst, pad=pad,
                                         through_tiles=through_tiles), out_idx=[1])
    a = torch.randn(70, 75).to(getattr(torch, src))
    torch.testing.assert_close(kernel(a), _padded_reference(a, (96, 96), pad,
                                                            getattr(torch, dst)))


def test_elementwise_copies_read_the_value():
    kernel = tilejit.compile(elementwise(70, 75, 96, 96), out_idx=[1])
    a = torch.randn(70, 75)
    torch.testing.assert_close(kernel(a), _padded_reference(a, (96, 96), -99, torch.float32))


def test_without_safe_memory_access_only_the_annotated_reads_are_guarded():
    """A kernel of tilejit's own (no safe memory access): the annotated tensor reads as
    its value outside; a write outside a tensor is still reported."""
    @tilejit.kernel
    def shift(A, B, n: T.constexpr):
        with T.Kernel(1, threads=128):
            T.annotate_safe_value({A: -1.0})
            for i in T.Parallel(n):
                B[i] = A[i - 3]
    a, b = torch.randn(64), torch.zeros(64)
    shift(a, b, 64)
    torch.testing.assert_close(b[3:], a[:-3], rtol=0, atol=0)
    assert b[:3].tolist() == [-1.0] * 3

    @tilejit.kernel
    def spill(A, B, n: T.constexpr):
        with T.Kernel(1, threads=128):
            T.annotate_safe_value({A: 0.0})
            for i in T.Parallel(n):
                B[i + 1] = A[i]
    with pytest.raises(IndexError, match="out of bounds"):
        spill(a, b, 64)


def _kernel_with(body, tmp_path):
    """A kernel of ``body``'s lines, in a file of its own (tilejit reads the source)."""
    import importlib.util
    path = tmp_path / "safe_value_kernel.py"
    path.write_text("import tilejit.language as T\n\n\n@T.prim_func\n"
                    "def main(A: T.Tensor((64,), 'float32'), B: T.Tensor((64,), 'float32')):\n"
                    "    with T.Kernel(1, threads=64):\n"
                    + "".join(f"        {line}\n" for line in body))
    spec = importlib.util.spec_from_file_location("safe_value_kernel", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


@pytest.mark.parametrize("body,message", [
    (["for k in T.serial(2):", "    T.annotate_safe_value({A: k})",
      "for i in T.Parallel(64):", "    B[i] = A[i - 1]"], "under a loop or a run-time"),
    (["for i in T.Parallel(64):", "    B[i] = A[i - 1]", "T.annotate_safe_value({A: 1.0})"],
     "A is used before it"),
    (["T.annotate_safe_value({A: 1.0})", "T.annotate_safe_value({A: 2.0})",
      "for i in T.Parallel(64):", "    B[i] = A[i - 1]"], "already has the safe value"),
    (["s = T.alloc_shared((64,), 'float32')", "T.annotate_safe_value({s: 1.0})",
      "for i in T.Parallel(64):", "    B[i] = A[i - 1]"], "keys are tensor parameters"),
])
def test_annotations_tilejit_cannot_honour_are_compile_errors(body, message, tmp_path):
    kernel = _kernel_with(body, tmp_path)
    with pytest.raises(tilejit.CompileError, match=message):
        tilejit.compile(kernel)(torch.zeros(64), torch.zeros(64))


def test_the_ptx_assembles_and_the_padded_copy_is_an_element_loop(ptxas):
    kernel = tilejit.compile(padded_copy(70, 75, 96, 96, pad=-99, through_tiles=True),
                             out_idx=[1])
    plain = tilejit.compile(padded_copy(70, 75, 96, 96, pad=None, through_tiles=True),
                            out_idx=[1])
    for arch in ("sm_80", "sm_90a"):
        ptx = kernel.get_kernel_source(arch=arch)
        ptxas(ptx, arch)
        assert "0fC2C60000" in ptx                  # -99.0f, the padding
        assert "cp.async" not in ptx                # no zero-filling copy for A
        plain_ptx = plain.get_kernel_source(arch=arch)
        ptxas(plain_ptx, arch)
        assert "0fC2C60000" not in plain_ptx


@pytest.mark.gpu
def test_gpu_matches_torch_and_the_simulator():
    a = torch.randn(64, 64, device="cuda").half()
    kernel = tilejit.compile(shifted_rows(64, 64, 32, 32, pad_value=10), out_idx=[1])
    gpu = kernel(a)
    torch.testing.assert_close(gpu.cpu(), kernel(a.cpu()), rtol=0, atol=0)
    assert gpu[:10].eq(10).all() and torch.equal(gpu[10:], a[:-10])
    for pad, src, dst, through_tiles in [(-99, "float32", "float16", True),
                                        (-99, "float32", "float32", False),
                                        (None, "float32", "float32", True),
                                        (7, "float16", "float32", True)]:
        kernel = tilejit.compile(padded_copy(70, 75, 96, 96, src=src, dst=dst, pad=pad,
                                             through_tiles=through_tiles), out_idx=[1])
        x = torch.randn(70, 75, device="cuda").to(getattr(torch, src))
        gpu = kernel(x)
        torch.testing.assert_close(gpu, _padded_reference(x, (96, 96), pad,
                                                          getattr(torch, dst)))
        torch.testing.assert_close(gpu.cpu(), kernel(x.cpu()), rtol=0, atol=0)
    kernel = tilejit.compile(elementwise(70, 75, 96, 96), out_idx=[1])
    x = torch.randn(70, 75, device="cuda")
    torch.testing.assert_close(kernel(x), _padded_reference(x, (96, 96), -99, torch.float32))
    # a point before the slices (the second review's case)
    kernel = tilejit.compile(batched_rows(), out_idx=[1])
    x = torch.randn(2, 50, 32, device="cuda")
    gpu = kernel(x)
    torch.testing.assert_close(gpu[:, :50], x, rtol=0, atol=0)
    assert gpu[:, 50:].eq(-5).all()
    torch.testing.assert_close(gpu.cpu(), kernel(x.cpu()), rtol=0, atol=0)


# -- the review's cases: pairing, destinations, evaluation, dtype ------------------------
def corner_into_a_column(M=64, bM=32, pad=-5.0):
    """T.copy(A[r, c], S) with S of shape (bM, 1): a column of A (the corner takes S's
    extents, (bM, 1), in its last dimensions)."""
    @T.prim_func
    def main(A: T.Tensor((M, 4), "float32"), B: T.Tensor((M + 16, 1), "float32")):
        with T.Kernel(T.ceildiv(M + 16, bM), threads=128) as bx:
            S = T.alloc_shared((bM, 1), "float32")
            T.annotate_safe_value({A: pad})
            T.copy(A[bx * bM, 1], S)
            T.copy(S, B[bx * bM:(bx + 1) * bM, 0:1])
    return main


def halves_into_open_slices(M=64, N=32, bM=32, pad=-5.0):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M + 32, N), "float32")):
        with T.Kernel(T.ceildiv(M + 32, bM), threads=128) as bx:
            S = T.alloc_shared((bM, N), "float32")
            T.annotate_safe_value({A: pad})
            T.copy(A[bx * bM:(bx + 1) * bM, 0:16], S[:, 0:16])
            T.copy(A[bx * bM:(bx + 1) * bM, 16:32], S[:, 16:])
            T.copy(S, B[bx * bM:(bx + 1) * bM, 0:N])
    return main


def staged_destination(M=64, N=32, bM=32):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((2, bM, N), "float32")
            T.annotate_safe_value({A: -5.0})
            for k in T.serial(M // bM):
                T.copy(A[k * bM - 3:(k + 1) * bM - 3, 0:N], S[k % 2, :, :])
                T.copy(S[k % 2, :, :], B[k * bM:(k + 1) * bM, 0:N])
    return main


def value_then_changed():
    @T.prim_func
    def main(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            v = T.alloc_var("float32")
            v = 1.0
            T.annotate_safe_value({A: v})
            v = 2.0
            for i in T.Parallel(32):
                B[i] = A[i - 4]
    return main


@tilejit.kernel
def shifted_copy(A, B, n: T.constexpr):
    with T.Kernel(1, threads=128):
        T.annotate_safe_value({A: -1.0})
        T.copy(A[0:n], B[4:n + 4])


def _device_program(kernel, tensors, tmp_path, monkeypatch):
    """The device program after the guard pass, for sm_90a."""
    monkeypatch.setenv("TILEJIT_DUMP_IR", str(tmp_path))
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    kernel.compile(*tensors, target="cuda", arch="sm_90a")
    (guarded,) = tmp_path.glob("*/*_after_guard_global_accesses.py")
    return guarded.read_text()


def test_a_corner_takes_the_other_operands_extents_unit_dimensions_included():
    a = torch.arange(256.0).reshape(64, 4)
    out = tilejit.compile(corner_into_a_column(), out_idx=[1])(a)
    torch.testing.assert_close(out[:64, 0], a[:, 1], rtol=0, atol=0)
    assert out[64:].eq(-5).all()


def test_open_slices_of_a_tile_take_the_tiles_extent():
    a = torch.randn(64, 32)
    out = tilejit.compile(halves_into_open_slices(), out_idx=[1])(a)
    torch.testing.assert_close(out[:64], a, rtol=0, atol=0)
    assert out[64:].eq(-5).all()


def test_a_copy_into_a_stage_of_a_stacked_tile_is_a_clear_error():
    with pytest.raises(tilejit.CompileError, match="a stage of a stacked tile is not"):
        tilejit.compile(staged_destination(), out_idx=[1])(torch.randn(64, 32))


def test_the_value_is_evaluated_where_the_annotation_is():
    out = tilejit.compile(value_then_changed(), out_idx=[1])(torch.arange(32.0))
    assert out[:4].tolist() == [1.0] * 4 and out[4:].tolist() == list(range(28))


def test_the_padding_is_converted_to_the_destinations_dtype_once():
    """float16 source, float32 destination: 70000 fits float32, not float16 (TileLang
    converts the value to the destination's dtype)."""
    kernel = tilejit.compile(padded_copy(70, 75, 96, 96, src="float16", dst="float32",
                                         pad=70000), out_idx=[1])
    out = kernel(torch.randn(70, 75).half())
    assert out[80, 80].item() == 70000.0


def test_an_expanded_copy_never_writes_past_the_destination_tensor(tmp_path, monkeypatch):
    a, b = torch.randn(64), torch.zeros(64)
    shifted_copy(a, b, 64)
    torch.testing.assert_close(b[4:], a[:60], rtol=0, atol=0)
    program = _device_program(shifted_copy, (a, b, 64), tmp_path, monkeypatch)
    assert "if 0 <= 4 + __tj_sv1_0 < B.shape[0]:" in program


def test_an_element_copy_with_options_in_a_parallel_loop_is_the_assignment():
    @T.prim_func
    def main(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(32):
                T.copy(A[i], B[i], disable_tma=True)
    a = torch.randn(32)
    torch.testing.assert_close(tilejit.compile(main, out_idx=[1])(a), a, rtol=0, atol=0)


def test_an_element_copy_outside_a_parallel_loop_copies_one_element():
    """``T.copy(A[3], B[5])`` in the block's code: one element in the simulator, as the
    compiler copies it (the simulator asked for an extent before)."""
    @T.prim_func
    def main(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            T.copy(A[3], B[5])
    a, b = torch.arange(32.0), torch.zeros(32)
    kernel = tilejit.compile(main)
    kernel(a, b)
    assert b[5].item() == 3.0 and b.count_nonzero().item() == 1
    ptx = kernel.get_kernel_source(arch="sm_90a").splitlines()
    assert any("ld.global" in line and "+12]" in line for line in ptx)     # A[3]
    assert any("st.global" in line and "+20]" in line for line in ptx)     # B[5]


# -- the second review's cases ------------------------------------------------------------
def batched_rows(pad=-5.0):
    """A region with a point before its slices: A[bz, r0:r1, :] into a tile."""
    @T.prim_func
    def main(A: T.Tensor((2, 50, 32), "float32"), B: T.Tensor((2, 64, 32), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, bz):
            S = T.alloc_shared((32, 32), "float32")
            T.annotate_safe_value({A: pad})
            T.copy(A[bz, bx * 32:(bx + 1) * 32, :], S)
            T.copy(S, B[bz, bx * 32:(bx + 1) * 32, :])
    return main


def row_into_a_tile_row(pad=-5.0):
    """T.copy(A[bx, 0], S[1, 0:32]): the corner takes the slice's 32 elements."""
    @T.prim_func
    def main(A: T.Tensor((2, 20), "float32"), B: T.Tensor((2, 32), "float32")):
        with T.Kernel(2, threads=32) as bx:
            S = T.alloc_shared((2, 32), "float32")
            T.annotate_safe_value({A: pad})
            T.copy(A[bx, 0], S[1, 0:32])
            T.copy(S[1, 0:32], B[bx, 0:32])
    return main


def closed_rows(pad=-5.0):
    @T.prim_func
    def main(A: T.Tensor((64, 32), "float32"), B: T.Tensor((64, 32), "float32")):
        with T.Kernel(1, threads=128):
            T.annotate_safe_value({A: pad})
            T.copy(A[0:32, :], B[0:32, :])
    return main


@tilejit.kernel
def in_a_role(A, B):
    with T.Kernel(1, threads=256):
        with T.ws(1):
            T.annotate_safe_value({A: -1.0})
        with T.ws(0):
            for i in T.Parallel(64):
                B[i] = A[i - 3]


@tilejit.kernel
def reads_itself(A, B):
    with T.Kernel(1, threads=64):
        T.annotate_safe_value({A: A[0]})
        for i in T.Parallel(64):
            B[i] = A[i - 3]


def test_a_point_before_the_slices_counts_as_one_dimension():
    a = torch.randn(2, 50, 32)
    out = tilejit.compile(batched_rows(), out_idx=[1])(a)
    torch.testing.assert_close(out[:, :50], a, rtol=0, atol=0)
    assert out[:, 50:].eq(-5).all()
    a = torch.randn(2, 20)
    out = tilejit.compile(row_into_a_tile_row(), out_idx=[1])(a)
    torch.testing.assert_close(out[:, :20], a, rtol=0, atol=0)
    assert out[:, 20:].eq(-5).all()


def test_a_closed_slice_keeps_its_extent(tmp_path, monkeypatch):
    a, b = torch.randn(64, 32), torch.full((64, 32), 7.0)
    kernel = tilejit.compile(closed_rows())
    kernel(a, b)
    torch.testing.assert_close(b[:32], a[:32], rtol=0, atol=0)
    assert b[32:].eq(7).all()
    monkeypatch.setenv("TILEJIT_DUMP_IR", str(tmp_path))
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    kernel.get_kernel_source(arch="sm_90a")
    (program,) = tmp_path.glob("*/*_after_expand_safe_value_copies.py")
    assert "Parallel(32, 32)" in program.read_text()


def test_an_annotation_in_a_warp_role_or_reading_its_tensor_is_refused():
    a, b = torch.arange(64.0), torch.zeros(64)
    with pytest.raises(tilejit.CompileError, match="under a loop or a run-time condition"):
        in_a_role.compile(a, b, target="cuda", arch="sm_90a")
    with pytest.raises(IndexError, match="out of bounds"):     # the simulator: role 0
        in_a_role(a, b)                                        # reads before role 1 ran
    with pytest.raises(tilejit.CompileError, match="the safe value of A reads A"):
        reads_itself(a, b)


def test_an_element_copy_from_an_annotated_tensor():
    @T.prim_func
    def main(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            T.annotate_safe_value({A: -5.0})
            T.copy(A[3], B[5])
            T.copy(A[40], B[6])
    a, b = torch.arange(32.0), torch.zeros(32)
    tilejit.compile(main)(a, b)
    assert b[5].item() == 3.0 and b[6].item() == -5.0
