"""TileLang's user fragment layouts: ``T.Fragment(shape, forward_thread_fn, replicate,
forward_index_fn)`` (and ``forward_fn``, ``.repeat``, ``.replicate``) in
``T.annotate_layout`` for ``T.alloc_fragment`` tiles.

Values never depend on the layout (the simulator is the definition, compared here with
float64 numpy); the compiler places the fragment as the user says (thread t holds
element (i, j) at local index forward_index_fn(i, j): the digit layout it builds finds
every element at its thread and slot), a gemm accumulator's layout given by hand gives
the gemm's own PTX, a different one is a CompileError naming both uses, and a copy from
the accumulator into a fragment of another user layout goes through shared memory. Bad
layouts are errors in the compiler and the simulator before anything runs. GPU twins
(``-m gpu``) compare with torch in float64 and with the simulator."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit.ir.addressing import digit_indexing, evaluate
from tilejit.language.layout import LayoutError
from tilejit.passes.user_fragments import digit_form
from tilejit.tilelang.layout import Fragment


def warp_rows(M, N):
    """Four rows per 32-lane warp group, 32 consecutive columns per lane group."""
    return T.Fragment((M, N), forward_thread_fn=lambda i, j: (i % 4) * 32 + j % 32,
                      forward_index_fn=lambda i, j: (i // 4) * 4 + j // 32)


def mma_accumulator(M, N):
    """The m16n8 accumulator of one warp (PTX ISA "Matrix Fragments for mma.m16n8k16"),
    N / 8 tiles side by side: what T.gemm gives a 16 x N accumulator on one warp."""
    return T.Fragment((M, N), forward_thread_fn=lambda i, j: (i % 8) * 4 + (j % 8) // 2,
                      forward_index_fn=lambda i, j: j % 2 + 2 * (i // 8) + 4 * (j // 8))


def row_per_pair(M, N):
    """Not the accumulator: each pair of lanes holds one row."""
    return T.Fragment((M, N), forward_thread_fn=lambda i, j: i * 2 + j // (N // 2))


LAYOUTS = {
    "warp_rows": warp_rows,
    # TileLang's decode combine: one thread per row, the columns its local indices
    "thread_per_row": lambda M, N: T.Fragment((M, N), forward_thread_fn=lambda i, j: i),
    "forward_fn": lambda M, N: T.Fragment(
        (M, N), forward_fn=lambda i, j: ((j // 4) % 32 + 32 * (i % 4), j % 4 + 4 * (i // 4)
                                         + 8 * (j // 128))),
    # 64 threads, each element held twice (threads t and t + 64)
    "replicated": lambda M, N: T.Fragment(
        (M, N), forward_thread_fn=lambda i, j, rep: (i % 2) * 32 + j % 32 + 64 * rep,
        replicate=2),
    # a 4 x 128 atom repeated along the rows on local indices, then replicated
    "repeat": lambda M, N: T.Fragment(
        (4, 128), forward_thread_fn=lambda i, j: j % 64,
        forward_index_fn=lambda i, j: i * 2 + j // 64).repeat([M // 4, 1]).replicate(2),
    # only half the block's threads named: the others hold copies
    "half_the_threads": lambda M, N: T.Fragment(
        (M, N), forward_thread_fn=lambda i, j: j // 2,
        forward_index_fn=lambda i, j: i * 2 + j % 2),
    # threads [32, 96) of the 128 (TileLang's thread-offset partial reductions): the
    # digits read t - 32; the others hold copies
    "thread_offset": lambda M, N: T.Fragment(
        (M, N), forward_fn=lambda i, j: (32 + j // 2, i * 2 + j % 2)),
}


@tilejit.kernel
def elementwise(X, Y, layout: T.constexpr = "warp_rows"):
    M, N = X.shape
    with T.Kernel(1, threads=128) as bx:
        F = T.alloc_fragment((M, N), T.float32)
        T.annotate_layout({F: LAYOUTS[layout](M, N)})
        T.copy(X, F)
        for i, j in T.Parallel(M, N):
            F[i, j] = F[i, j] * 2.0 + X[i, j] * F[i, j]
        T.copy(F, Y)


@tilejit.kernel
def row_sum(X, Y, layout: T.constexpr = "warp_rows"):
    M, N = X.shape
    with T.Kernel(1, threads=128) as bx:
        F = T.alloc_fragment((M, N), T.float32)
        S = T.alloc_fragment((M,), T.float32)
        T.annotate_layout({F: LAYOUTS[layout](M, N)})
        T.copy(X, F)
        T.reduce_sum(F, S, dim=1)
        T.copy(S, Y)


@tilejit.kernel
def gemm_acc(A, B, C, annotate: T.constexpr = "mma"):
    M, K = A.shape
    N = B.shape[1]
    with T.Kernel(1, threads=32) as bx:
        A_s = T.alloc_shared((M, K), A.dtype)
        B_s = T.alloc_shared((K, N), B.dtype)
        C_f = T.alloc_fragment((M, N), T.float32)
        O_f = T.alloc_fragment((M, N), T.float32)
        if annotate == "mma":
            T.annotate_layout({C_f: mma_accumulator(M, N)})
        elif annotate == "rows":
            T.annotate_layout({C_f: row_per_pair(M, N)})
        elif annotate == "copy_rows":
            T.annotate_layout({O_f: row_per_pair(M, N)})
        T.copy(A, A_s)
        T.copy(B, B_s)
        T.clear(C_f)
        T.gemm(A_s, B_s, C_f)
        T.copy(C_f, O_f)
        for i, j in T.Parallel(M, N):
            O_f[i, j] = O_f[i, j] + 1.0
        T.copy(O_f, C)


@tilejit.kernel
def bad(X, Y, which: T.constexpr = "collide"):
    M, N = X.shape
    with T.Kernel(1, threads=128) as bx:
        F = T.alloc_fragment((M, N), T.float32)
        S = T.alloc_shared((M, N), T.float32)
        if which == "collide":
            T.annotate_layout({F: T.Fragment((M, N), forward_thread_fn=lambda i, j: j,
                                             forward_index_fn=lambda i, j: i % 4)})
        elif which == "out_of_range":
            T.annotate_layout({F: T.Fragment((M, N), forward_thread_fn=lambda i, j: i * 32 + j)})
        elif which == "wrong_shape":
            T.annotate_layout({F: T.Fragment((M, 2 * N), forward_thread_fn=lambda i, j: j)})
        elif which == "layout_for_fragment":
            T.annotate_layout({F: T.Layout((M, N), lambda i, j: i * N + j)})
        elif which == "fragment_for_shared":
            T.annotate_layout({S: T.Fragment((M, N), forward_thread_fn=lambda i, j: j)})
        elif which == "no_digit_form":
            T.annotate_layout({F: T.Fragment((M, N), forward_thread_fn=lambda i, j: (i + j) % 128,
                                             forward_index_fn=lambda i, j: i)})
        T.copy(X, F)
        T.copy(F, S)
        T.copy(S, Y)


def _x(M=8, N=128, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).standard_normal((M, N))).float()


# -- the layout object --------------------------------------------------------------------

def test_fragment_tables_and_tilelang_methods():
    F = Fragment([16, 8], forward_thread_fn=lambda i, j: i * 2 + j // 4,
                 forward_index_fn=lambda i, j: j % 4)
    assert F is not None and T.Fragment is Fragment and tilejit.Fragment is Fragment
    assert F.get_thread_size() == 32 and F.get_output_shape() == (4,)
    assert F.map_forward_thread([3, 5]) == 7 and F.map_forward_index([3, 5]) == [1]
    F.check((16, 8), "'F'", 32)
    # the index a thread's elements take without forward_index_fn: row-major rank
    G = Fragment([16, 8], forward_thread_fn=lambda i, j: i * 2 + j // 4)
    assert G.is_equal(F)
    # forward_fn's (thread, index) pairs, with a replica index
    R = Fragment([16, 8], forward_fn=lambda i, j, rep: (i * 2 + j // 4 + 32 * rep, j % 4),
                 replicate=2)
    assert R.is_equal(F.replicate(2)) and R.get_thread_size() == 64
    assert R.map_forward_thread([3, 5], rep=1) == 39
    # repeat on the thread or on the local index (TileLang's Fragment.repeat)
    on_threads = F.repeat([2, 1], repeat_on_thread=True)
    assert on_threads.get_input_shape() == (32, 8) and on_threads.get_thread_size() == 64
    assert on_threads.map_forward_thread([19, 5]) == 32 + 7
    on_index = F.repeat([1, 2], lower_dim_first=True)
    assert on_index.get_output_shape() == (8,) and on_index.map_forward_index([3, 13]) == [5]


def test_fragment_errors_name_the_argument_expected_and_received():
    with pytest.raises(LayoutError, match=r"T.Fragment forward_thread_fn: expected a function "
                                          r"of 3 arguments \(one index per dimension of shape "
                                          r"\[4, 4\] and the replica index rep\), got <lambda> "
                                          r"taking 2"):
        Fragment((4, 4), forward_thread_fn=lambda i, j: i, replicate=2)
    with pytest.raises(LayoutError, match=r"T.Fragment replicate: expected a positive int, "
                                          r"got 0"):
        Fragment((4, 4), forward_thread_fn=lambda i, j: i, replicate=0)
    with pytest.raises(LayoutError, match=r"thread out of range: element \[1, 0\] is on thread "
                                          r"16, expected a thread in \[0, 16\)"):
        Fragment((4, 4), forward_thread_fn=lambda i, j: i * 16 + j).check(threads=16)
    with pytest.raises(LayoutError, match=r"thread 0 holds elements \[0, 0\] and \[1, 0\] both "
                                          r"at local index 0"):
        Fragment((4, 4), forward_thread_fn=lambda i, j: j,
                 forward_index_fn=lambda i, j: i % 1).check(threads=32)
    with pytest.raises(LayoutError, match=r"thread 0 holds elements \[0, 0\] \(replica 0\) and "
                                          r"\[0, 0\] \(replica 1\)"):
        Fragment((4, 4), forward_thread_fn=lambda i, j, rep: j, replicate=2).check(threads=32)
    with pytest.raises(LayoutError, match=r"has shape \[4, 4\], expected the fragment's shape "
                                          r"\[4, 8\]"):
        Fragment((4, 4), forward_thread_fn=lambda i, j: j).check((4, 8))
    with pytest.raises(LayoutError, match=r"T.Fragment forward_fn .*expected a pair"):
        Fragment((4, 4), forward_fn=lambda i, j: i).check()


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_the_compilers_layout_places_each_element_where_the_user_says(layout):
    """The digit layout found for the user's tables, read at each element's (thread, slot)
    as the generated code reads it, gives back that element (every replica's thread too)."""
    user = LAYOUTS[layout](8, 128)
    user.check((8, 128), "'F'", 128)
    thread, slot = user.thread_table(), user.offsets()
    dl, problem = digit_form(thread, slot, (8, 128), 128)
    assert dl is not None, problem
    coords = digit_indexing(dl).coords
    index = np.indices((8, 128))
    for rep in range(thread.shape[-1]):
        env = {"t": thread[..., rep], "s": slot}
        for k, c in enumerate(coords):
            np.testing.assert_array_equal(np.broadcast_to(evaluate(c, env), (8, 128)), index[k])
    assert dl.slots == int(slot.max()) + 1


# -- simulation against float64 numpy -----------------------------------------------------

@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_copy_and_elementwise_through_a_user_fragment_simulated(layout):
    x = _x()
    y = torch.zeros_like(x)
    elementwise(x, y, layout=layout)
    x64 = x.double().numpy()
    np.testing.assert_allclose(y.numpy(), x64 * 2 + x64 * x64, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("layout", ["warp_rows", "thread_per_row", "forward_fn", "replicated",
                                    "thread_offset"])
def test_reduction_of_a_user_fragment_simulated(layout):
    x = _x(seed=1)
    y = torch.zeros(8)
    row_sum(x, y, layout=layout)
    np.testing.assert_allclose(y.numpy(), x.double().numpy().sum(axis=1), rtol=1e-5, atol=1e-5)


def _gemm_inputs(seed=2):
    rng = np.random.default_rng(seed)
    a = torch.from_numpy(rng.standard_normal((16, 16))).half()
    b = torch.from_numpy(rng.standard_normal((16, 32))).half()
    ref = a.double().numpy() @ b.double().numpy() + 1
    return a, b, ref


@pytest.mark.parametrize("annotate", ["none", "mma", "copy_rows"])
def test_gemm_accumulator_with_a_user_fragment_simulated(annotate):
    a, b, ref = _gemm_inputs()
    c = torch.zeros(16, 32)
    gemm_acc(a, b, c, annotate=annotate)       # values never depend on the layout
    np.testing.assert_allclose(c.numpy(), ref, rtol=1e-3, atol=1e-3)


# -- the compiler ---------------------------------------------------------------------------

def _ptx(kernel, arch, *args, **kw):
    return kernel.compile(*args, target="cuda", arch=arch, **kw).ptx


def offset_normalize(offset=32, rows=2, width=512, vec=8):
    """TileLang's thread-offset partial reduction: threads [offset, offset + 64) of 128
    hold the rows (eight consecutive columns each), the sums replicated on them."""
    @T.prim_func
    def main(x: T.Tensor((rows, width), "float32"), out: T.Tensor((rows, width), "float32")):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((rows, width), "float32")
            s = T.alloc_fragment((rows,), "float32")
            T.annotate_layout({
                f: T.Fragment(f.shape, forward_fn=lambda i, j: (offset + j // vec,
                                                                 i * vec + j % vec)),
                s: T.Fragment(s.shape, forward_fn=lambda i, rep: (offset + rep, i),
                              replicate=64)})
            for i, j in T.Parallel(rows, width):
                f[i, j] = x[i, j]
            T.reduce_sum(f, s, dim=1)
            for i, j in T.Parallel(rows, width):
                out[i, j] = f[i, j] / s[i]
    return main


def test_a_layout_starting_at_a_thread_offset(ptxas):
    x = torch.rand(2, 512)
    kernel = tilejit.compile(offset_normalize(), out_idx=[1])
    torch.testing.assert_close(kernel(x), x / x.sum(1, keepdim=True), rtol=1e-5, atol=1e-6)
    for arch in ("sm_80", "sm_90a"):
        ptxas(tilejit.compile(offset_normalize(), out_idx=[1],
                              target="cuda").get_kernel_source(arch=arch), arch)
    with pytest.raises(tilejit.CompileError, match=r"element \[0, 0\] is on thread 16 at "
                                                   r"local index 0 \(a layout may start at a "
                                                   r"thread that is a multiple of 32"):
        tilejit.compile(offset_normalize(offset=16), out_idx=[1],
                        target="cuda").get_kernel_source(arch="sm_80")


@pytest.mark.gpu
def test_a_layout_starting_at_a_thread_offset_gpu():
    x = torch.rand(2, 512)
    kernel = tilejit.compile(offset_normalize(), out_idx=[1])
    gpu = kernel(x.cuda()).cpu()
    torch.testing.assert_close(gpu.double(), (x.double() / x.double().sum(1, keepdim=True)),
                               rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(gpu, kernel(x), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_user_fragments_compile_and_assemble(arch, ptxas):
    x, y = _x(), torch.zeros(8, 128)
    for layout in sorted(LAYOUTS):
        ptxas(_ptx(elementwise, arch, x, y, layout=layout), arch)
    for layout in ("warp_rows", "thread_per_row", "replicated", "thread_offset"):
        ptx = _ptx(row_sum, arch, x, torch.zeros(8), layout=layout)
        ptxas(ptx, arch)
    # lanes 0..31 of warp w hold rows w, w + 4 (warp_rows): the reduction is within a warp
    assert "shfl.sync.bfly" in _ptx(row_sum, arch, x, torch.zeros(8), layout="warp_rows")
    # one thread per row: nothing to exchange
    assert "shfl" not in _ptx(row_sum, arch, x, torch.zeros(8), layout="thread_per_row")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_accumulators_own_layout_gives_the_gemms_ptx(arch, ptxas):
    a, b, _ = _gemm_inputs()
    c = torch.zeros(16, 32)
    own = _ptx(gemm_acc, arch, a, b, c, annotate="none")
    assert "mma.sync.aligned.m16n8k16" in own
    assert _ptx(gemm_acc, arch, a, b, c, annotate="mma") == own
    ptxas(own, arch)
    # a copy into a fragment of another user layout: through shared memory
    converted = _ptx(gemm_acc, arch, a, b, c, annotate="copy_rows")
    assert "mma.sync.aligned.m16n8k16" in converted and "bar.sync" in converted
    ptxas(converted, arch)


@pytest.mark.parametrize("target", ["sim", "cuda"])
def test_a_user_layout_the_gemm_cannot_write_is_a_compile_error(target):
    a, b, _ = _gemm_inputs()
    run = gemm_acc if target == "sim" else lambda *a, **kw: gemm_acc.compile(
        *a, target="cuda", arch="sm_80", **kw)
    with pytest.raises(tilejit.CompileError,
                       match=r"fragment 'C_f' needs two different layouts: the T.Fragment "
                             r"given to 'C_f' by T.annotate_layout \(line \d+: .*\) and the "
                             r"accumulator of T.gemm \(line \d+: T.gemm\(A_s, B_s, C_f\)\)"):
        run(a, b, torch.zeros(16, 32), annotate="rows")


@pytest.mark.parametrize("which,message,targets", [
    ("collide", r"for 'F': thread 0 holds elements \[0, 0\] and \[4, 0\] both at local "
                r"index 0", ("sim", "cuda")),
    ("out_of_range", r"for 'F': thread out of range: element \[1, 96\] is on thread 128, "
                     r"expected a thread in \[0, 128\) \(the kernel's threads\)",
     ("sim", "cuda")),
    ("wrong_shape", r"the T.Fragment of 'F' has shape \[8, 256\], expected the fragment's "
                    r"shape \[8, 128\]", ("sim", "cuda")),
    ("layout_for_fragment", r"expected a T.Fragment for fragment 'F', got a T.Layout",
     ("cuda",)),
    ("fragment_for_shared", r"'S' is a shared tile, got a T.Fragment", ("cuda",)),
    ("no_digit_form", r"the T.Fragment of 'F' .* is not a layout tilejit can build: along "
                      r"dimension 0: index 1 moves both of the thread \(\+1\) and the local "
                      r"index \(\+1\)", ("cuda",)),
])
@pytest.mark.parametrize("target", ["sim", "cuda"])
def test_bad_fragment_layouts_are_errors_before_anything_runs(which, message, targets, target):
    if target not in targets:
        pytest.skip(f"{which}: the simulator holds fragments as logical tiles; only the "
                    f"compiler has a layout to reject")
    x = _x()
    with pytest.raises((tilejit.CompileError, LayoutError), match=message):
        if target == "sim":
            bad(x, torch.zeros_like(x), which=which)
        else:
            bad.compile(x, torch.zeros_like(x), target="cuda", arch="sm_80", which=which)


# -- on the GPU -------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_copy_and_elementwise_through_a_user_fragment_gpu(layout):
    x = _x().cuda()
    y = torch.zeros_like(x)
    elementwise(x, y, layout=layout)
    torch.cuda.synchronize()
    x64 = x.double()
    torch.testing.assert_close(y.double(), x64 * 2 + x64 * x64, rtol=1e-5, atol=1e-5)
    sim = torch.zeros(8, 128)
    elementwise(x.cpu(), sim, layout=layout)       # CPU tensors: the simulator
    torch.testing.assert_close(y.cpu(), sim, rtol=1e-6, atol=1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["warp_rows", "thread_per_row", "forward_fn", "replicated",
                                    "thread_offset"])
def test_reduction_of_a_user_fragment_gpu(layout):
    x = _x(seed=1).cuda()
    y = torch.zeros(8, device="cuda")
    row_sum(x, y, layout=layout)
    torch.cuda.synchronize()
    torch.testing.assert_close(y.double(), x.double().sum(dim=1), rtol=1e-5, atol=1e-5)
    sim = torch.zeros(8)
    row_sum(x.cpu(), sim, layout=layout)           # CPU tensors: the simulator
    torch.testing.assert_close(y.cpu(), sim, rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("annotate", ["none", "mma", "copy_rows"])
def test_gemm_accumulator_with_a_user_fragment_gpu(annotate):
    a, b, ref = _gemm_inputs()
    c = torch.zeros(16, 32, device="cuda")
    gemm_acc(a.cuda(), b.cuda(), c, annotate=annotate)
    torch.cuda.synchronize()
    torch.testing.assert_close(c.double().cpu(), torch.from_numpy(ref), rtol=1e-3, atol=1e-3)
    sim = torch.zeros(16, 32)
    gemm_acc(a, b, sim, annotate=annotate)         # CPU tensors: the simulator
    torch.testing.assert_close(c.cpu(), sim, rtol=1e-5, atol=1e-5)


def replicated_readback(use_copy):
    """TileLang's fully replicated fragment (``make_fully_replicated_layout_fragment``):
    serial code fills every element in each thread, a T.Parallel or a T.copy reads it
    back out (one copy stores)."""
    import tilejit.tilelang as tilelang_door

    @T.prim_func
    def main(inp: T.Tensor((128,), T.float32), out: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128):
            frag = T.alloc_fragment((128,), T.float32)
            T.annotate_layout({frag: tilelang_door.layout.make_fully_replicated_layout_fragment(
                frag, 128)})
            for i in T.serial(128):
                frag[i] = inp[i] * 2.0
            if use_copy:
                T.copy(frag, out)
            else:
                for i in T.Parallel(128):
                    out[i] = frag[i]
    return main


@pytest.mark.parametrize("use_copy", [False, True])
def test_a_fully_replicated_fragment_is_indexed_by_serial_code(use_copy):
    x, y = torch.randn(128), torch.zeros(128)
    tilejit.compile(replicated_readback(use_copy), target="sim")(x, y)
    torch.testing.assert_close(y, x * 2)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_a_fully_replicated_fragment_assembles(arch, ptxas):
    ptxas(tilejit.compile(replicated_readback(True)).get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
def test_a_fully_replicated_fragment_on_the_gpu():
    x = torch.randn(128)
    for use_copy in (False, True):
        y = torch.zeros(128, device="cuda")
        tilejit.compile(replicated_readback(use_copy))(x.cuda(), y)
        torch.testing.assert_close(y.cpu(), x * 2)
