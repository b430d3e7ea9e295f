"""T.atomic_load(src, memory_order="seq_cst") and T.atomic_store(dst, value,
memory_order="seq_cst"), TileLang's signatures: one element of a tensor or shared tile,
32- and 64-bit dtypes; the simulator's values, the PTX's relaxed accesses between the
memory order's fences (assembled by ptxas), the errors, and the GPU against the
simulator and numpy."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T

# (store, load) orders: a load does not release, a store does not acquire (as TileLang)
ORDERS = [(None, None), ("relaxed", "relaxed"), ("release", "acquire"),
          ("release", "consume"), ("seq_cst", "seq_cst"), ("relaxed", "seq_cst")]
LOAD_ORDERS = [None, "relaxed", "consume", "acquire", "seq_cst"]
STORE_ORDERS = [None, "relaxed", "release", "seq_cst"]


@tilejit.kernel
def publish(X, F, Y, store_order: T.constexpr = "seq_cst", load_order: T.constexpr = "seq_cst",
            block: T.constexpr = 128):
    """F = 2 X element by element (stores), Y = F + 1 (loads), then the block stores its
    index into F's first element of its block, once."""
    N = X.shape[0]
    with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
        for i in T.Parallel(block):
            if bx * block + i < N:
                T.atomic_store(F[bx * block + i], X[bx * block + i] * 2,
                               memory_order=store_order)
        for i in T.Parallel(block):
            if bx * block + i < N:
                Y[bx * block + i] = T.atomic_load(F[bx * block + i], memory_order=load_order) + 1
        T.atomic_store(F[bx * block], bx)


@tilejit.kernel
def shared_round_trip(X, Y, block: T.constexpr = 64):
    """Through a shared tile: atomic stores, a barrier, atomic loads of the neighbour."""
    with T.Kernel(1, threads=block) as bx:
        S = T.alloc_shared((block,), X.dtype)
        for i in T.Parallel(block):
            T.atomic_store(S[i], X[i], memory_order="release")
        T.sync_threads()
        for i in T.Parallel(block):
            Y[i] = T.atomic_load(S[(i + 1) % block], memory_order="acquire")


def _expected(x, block=128):
    f = 2 * x
    y = f + 1
    f[::block] = np.arange(len(x[::block]), dtype=x.dtype)
    return f, y


@pytest.mark.parametrize("orders", ORDERS)
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32, np.float64, np.uint32])
def test_stores_and_loads_in_simulation(orders, dtype):
    x = np.arange(300).astype(dtype)
    f, y = np.zeros_like(x), np.zeros_like(x)
    publish(x, f, y, store_order=orders[0], load_order=orders[1])
    want_f, want_y = _expected(x)
    np.testing.assert_array_equal(f, want_f)
    np.testing.assert_array_equal(y, want_y)


def test_a_shared_tile_in_simulation():
    x = np.arange(64, dtype=np.float32)
    y = np.zeros_like(x)
    shared_round_trip(x, y)
    np.testing.assert_array_equal(y, np.roll(x, -1))


def _events(ptx):
    return [line.split()[0].rstrip(";") for line in ptx.splitlines()
            if re.match(r"\s*(ld\.relaxed|st\.relaxed|fence|membar)\.", line)]


# (before, after) the relaxed access, as for the read-modify-write atomics
FENCES = {None: (None, None), "relaxed": (None, None),
          "consume": (None, "fence.acq_rel.gpu"), "acquire": (None, "fence.acq_rel.gpu"),
          "release": ("fence.acq_rel.gpu", None),
          "acq_rel": ("fence.acq_rel.gpu", "fence.acq_rel.gpu"),
          "seq_cst": ("fence.sc.gpu", "fence.acq_rel.gpu")}


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("store_order, load_order", list(zip(STORE_ORDERS, LOAD_ORDERS)) +
                         [("release", "acquire"), ("seq_cst", "consume")])
def test_ptx_orders_each_access_with_fences(store_order, load_order, arch, ptxas):
    x = np.zeros(1024, np.int32)
    ptx = publish.compile(x, x.copy(), x.copy(), store_order=store_order, load_order=load_order,
                          target="cuda", arch=arch).ptx
    before, after = FENCES[store_order]
    store = [e for e in (before, "st.relaxed.sys.global.b32", after) if e]
    before, after = FENCES[load_order]
    load = [e for e in (before, "ld.relaxed.sys.global.b32", after) if e]
    last = ["fence.sc.gpu", "st.relaxed.sys.global.b32", "fence.acq_rel.gpu"]   # seq_cst
    assert _events(ptx) == store + load + last
    ptxas(ptx, arch)


def test_a_tensor_stored_atomically_is_not_read_through_the_read_only_cache():
    """F is written (atomic_store): its plain reads must not use ld.global.nc."""
    @tilejit.kernel
    def stored_then_read(F, Y):
        with T.Kernel(1, threads=128) as bx:
            T.atomic_store(F[0], 1)
            for i in T.Parallel(128):
                Y[i] = F[i]
    f = np.zeros(128, np.int32)
    ptx = stored_then_read.compile(f, f.copy(), target="cuda", arch="sm_90a").ptx
    assert "ld.global.nc" not in ptx


@pytest.mark.parametrize("call, message", [
    ("T.atomic_load(F[0:4])", "one element"),
    ("T.atomic_store(F, 1)", "one element"),
    ("T.atomic_store(F[0])", "takes an element and a value"),
    ("T.atomic_load(F[0], memory_order='strong')", "atomic_load does not support memory_order"),
    ("T.atomic_load(F[0], memory_order='release')", "atomic_load does not support memory_order"),
    ("T.atomic_store(F[0], 1, memory_order='acquire')",
     "atomic_store does not support memory_order 'acquire' \\(illegal for a store\\): a "
     "store takes 'relaxed', 'release', 'seq_cst'"),
    ("T.atomic_load(F[0], order='acquire')", "unexpected argument 'order'"),
])
def test_bad_calls_are_compile_errors(call, message, tmp_path):
    # an order a load or store does not have is found where the kernel is defined, a
    # ValueError too (TileLang's)
    source = (f"import tilejit, tilejit.language as T\n"
              f"@tilejit.kernel\n"
              f"def k(F):\n"
              f"    with T.Kernel(1, threads=32) as bx:\n"
              f"        {call}\n")
    path = tmp_path / "bad.py"
    path.write_text(source)
    namespace = {}
    exec(compile(source, str(path), "exec"), namespace)
    with pytest.raises(tilejit.CompileError, match=message):
        namespace["k"](np.zeros(8, np.int32))


@pytest.mark.parametrize("dtype", [np.float16, np.int8])
def test_narrow_dtypes_are_errors_here_and_on_the_gpu(dtype):
    x = np.arange(128).astype(dtype)
    with pytest.raises((TypeError, tilejit.CompileError), match="32- |float32, float64"):
        publish(x, np.zeros_like(x), np.zeros_like(x))
    with pytest.raises(tilejit.CompileError, match="float32, float64"):
        publish.compile(x, x.copy(), x.copy(), target="cuda", arch="sm_90a")


@pytest.mark.gpu
@pytest.mark.parametrize("orders", [("relaxed", "relaxed"), ("release", "acquire"),
                                    ("seq_cst", "seq_cst")])
@pytest.mark.parametrize("dtype", [torch.int32, torch.float64])
def test_gpu_matches_the_simulator_and_numpy(orders, dtype):
    x = torch.arange(100_003, dtype=dtype)
    f, y = torch.zeros_like(x, device="cuda"), torch.zeros_like(x, device="cuda")
    publish(x.cuda(), f, y, store_order=orders[0], load_order=orders[1])
    torch.cuda.synchronize()
    fs, ys = np.zeros(x.shape, x.numpy().dtype), np.zeros(x.shape, x.numpy().dtype)
    publish(x.numpy(), fs, ys, store_order=orders[0], load_order=orders[1])
    want_f, want_y = _expected(x.numpy())
    np.testing.assert_array_equal(f.cpu().numpy(), want_f)
    np.testing.assert_array_equal(y.cpu().numpy(), want_y)
    np.testing.assert_array_equal(fs, want_f)
    np.testing.assert_array_equal(ys, want_y)
    xs = torch.arange(64, dtype=torch.float32)
    out = torch.zeros(64, device="cuda")
    shared_round_trip(xs.cuda(), out)
    torch.testing.assert_close(out.cpu(), torch.roll(xs, -1))


# ----------------------------------------------------------------- T.atomic_addx2 / x4

@tilejit.kernel
def pair_adds(A, B, block: T.constexpr = 64):
    """B += A through pairs from a shared tile, then + 1 in quads (a scalar value)."""
    M, N = A.shape
    with T.Kernel(T.ceildiv(M, block), threads=128) as bx:
        S = T.alloc_shared((block, N), A.dtype)
        T.copy(A[bx * block, 0], S)
        for i, j in T.Parallel(block, N // 2):
            T.atomic_addx2(B[bx * block + i, j * 2], S[i, j * 2])
        for i, j in T.Parallel(block, N // 4):
            T.atomic_addx4(B[bx * block + i, j * 4], 1.0)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_pair_and_quad_adds_in_simulation(dtype):
    a = (np.random.default_rng(2).standard_normal((128, 32)) * 8).astype(dtype)
    b = np.ones_like(a)
    pair_adds(a, b)
    np.testing.assert_allclose(b.astype(np.float64), a.astype(np.float64) + 2, rtol=1e-3)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_pair_adds_are_element_atomics_in_the_ptx(arch, ptxas):
    a = np.zeros((128, 32), np.float32)
    ptx = pair_adds.compile(a, a.copy(), target="cuda", arch=arch).ptx
    # each thread: 8 pairs and 4 quads, unrolled, each element its own add: 32
    assert len(re.findall(r"(?:red|atom)\.global\.add\.f32", ptx)) == 32
    ptxas(ptx, arch)


@pytest.mark.parametrize("call, message", [
    ("T.atomic_addx2(F, F[0])", "first of 2 consecutive elements"),
    ("P = T.atomic_addx2(F, F, return_prev=True)", "store them into 2 consecutive elements"),
    ("T.atomic_addx2(F[0:3], F[2])", "a slice names the 2 elements"),
    ("T.atomic_addx4(F[0], F[4], True)", "store them"),
    ("P = T.atomic_addx4(F[0], F[4], True)", "store them into 4 consecutive elements"),
    ("F[0:4] = T.atomic_addx4(F[0], F[4])", "returns nothing without return_prev=True"),
    ("T.atomic_addx2(F[0])", "takes a destination and a value"),
])
def test_bad_pair_calls_are_compile_errors(call, message, tmp_path):
    test_bad_calls_are_compile_errors(call, message, tmp_path)


@tilejit.kernel
def whole_buffer_adds(Val, Init, Dst, quads: T.constexpr = False):
    """TileLang's whole-buffer form, ``T.atomic_addx2(Dst, Val)``: every element of Dst
    gets its element of Val (the region atomic of the two tensors)."""
    with T.Kernel(1, threads=32):
        for i in T.Parallel(Dst.shape[0]):
            Dst[i] = Init[i]
        if quads:
            T.atomic_addx4(Dst, Val)
        else:
            T.atomic_addx2(Dst, Val)


@pytest.mark.parametrize("n, dtype, quads", [(2, np.float16, False), (8, np.float32, True),
                                             (64, np.float32, False), (6, np.int32, False)])
def test_whole_buffer_pair_adds(n, dtype, quads, ptxas):
    rng = np.random.default_rng(n)
    val, init = ((rng.standard_normal(n) * 8).astype(dtype) for _ in range(2))
    dst = np.zeros_like(val)
    whole_buffer_adds(val, init, dst, quads)
    want = (val.astype(np.float64) + init.astype(np.float64)).astype(dtype)
    np.testing.assert_array_equal(dst, want)
    kind = {np.float16: "f16", np.float32: "f32", np.int32: "[su]32"}[dtype]
    for arch in ("sm_80", "sm_90a"):
        ptx = whole_buffer_adds.compile(val, init, dst, quads, target="cuda", arch=arch).ptx
        assert re.search(rf"(?:red|atom)\.global(?:\.v\d)?\.(?:noftz\.)?add\.(?:noftz\.)?"
                         rf"{kind}", ptx), ptx[-2000:]
        ptxas(ptx, arch)


@pytest.mark.gpu
@pytest.mark.parametrize("n, dtype, quads", [(2, torch.float16, False), (64, torch.float32,
                                                                         True)])
def test_gpu_whole_buffer_pair_adds(n, dtype, quads):
    val, init = (torch.randn(n).to(dtype) for _ in range(2))
    dst = torch.zeros(n, dtype=dtype, device="cuda")
    whole_buffer_adds(val.cuda(), init.cuda(), dst, quads)
    sim = torch.zeros(n, dtype=dtype)
    whole_buffer_adds(val, init, sim, quads)
    assert torch.equal(dst.cpu(), sim)
    assert torch.equal(sim, (val.double() + init.double()).to(dtype))


@tilejit.kernel
def pair_adds_returning(Dst, Val, Prev, Rows, width: T.constexpr = 2):
    """TileLang's forms: the elements named by slices, a slice bound to a name first,
    the previous values stored into a slice; one thread, so one previous value each."""
    with T.Kernel(1, threads=1) as bx:
        dst = Dst[0:2]
        if width == 2:
            Prev[0:2] = T.atomic_addx2(dst, Val[0:2], return_prev=True)
        else:
            Prev[0:4] = T.atomic_addx4(Dst[0:4], Val[0:4], return_prev=True)
        T.atomic_addx4(Rows[Rows.shape[0] - 1, 4:8], Val[0:4])


@pytest.mark.parametrize("width", [2, 4])
def test_pair_adds_by_slices_return_the_previous_values(width):
    dst = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    val = np.array([10.0, 20.0, 30.0, 40.0], np.float32)
    prev, rows = np.zeros(4, np.float32), np.zeros((2, 8), np.float32)
    pair_adds_returning(dst, val, prev, rows, width)
    np.testing.assert_array_equal(prev[:width], [1.0, 2.0, 3.0, 4.0][:width])
    np.testing.assert_array_equal(prev[width:], 0)
    np.testing.assert_array_equal(dst, [11.0, 22.0, 3.0, 4.0] if width == 2 else
                                  [11.0, 22.0, 33.0, 44.0])
    np.testing.assert_array_equal(rows[1, 4:], val)
    for arch in ("sm_80", "sm_90a"):
        ptx = pair_adds_returning.compile(dst, val, prev, rows, width, target="cuda",
                                          arch=arch).ptx
        # the returning adds and the quad into Rows, each element its own
        assert len(re.findall(r"(?:atom|red)\.global\.add\.f32", ptx)) == width + 4


@pytest.mark.gpu
@pytest.mark.parametrize("width", [2, 4])
def test_gpu_pair_adds_by_slices_return_the_previous_values(width):
    dst = torch.tensor([1.0, 2.0, 3.0, 4.0], device="cuda")
    val = torch.tensor([10.0, 20.0, 30.0, 40.0], device="cuda")
    prev, rows = torch.zeros(4, device="cuda"), torch.zeros(2, 8, device="cuda")
    pair_adds_returning(dst, val, prev, rows, width)
    torch.cuda.synchronize()
    want = [np.array([1.0, 2.0, 3.0, 4.0], np.float32), val.cpu().numpy(),
            np.zeros(4, np.float32), np.zeros((2, 8), np.float32)]
    pair_adds_returning(*want, width)
    for got, sim in zip((dst, val, prev, rows), want):
        np.testing.assert_array_equal(got.cpu().numpy(), sim)
    np.testing.assert_array_equal(prev.cpu().numpy()[:width], [1.0, 2.0, 3.0, 4.0][:width])


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_gpu_pair_adds_match_the_simulator(dtype):
    # (rows a multiple of the block: the kernel does not guard its atomics, and the
    # simulator reports a tail block's out-of-bounds atomic as an error)
    a = (torch.randn(1024, 64) * 8).to(dtype)
    b = torch.ones(1024, 64, dtype=dtype, device="cuda")
    pair_adds(a.cuda(), b)
    torch.cuda.synchronize()
    bs = np.ones((1024, 64), a.numpy().dtype)
    pair_adds(a.numpy(), bs)
    torch.testing.assert_close(b.cpu(), torch.from_numpy(bs))
    torch.testing.assert_close(b.cpu().double(), a.double() + 2, rtol=2e-3, atol=2e-3)


def test_ordered_atomics_compile_for_amdgpu_at_agent_scope(tmp_path):
    """AMDGPU has no "device" syncscope: LLVM stopped the whole process on one (an
    acquire T.atomic_add, or any T.atomic_store, compiled for gfx90a). The scope is the
    target's (``Target.device_scope``: "agent" there). Run in a child: a regression
    would end the process, not raise."""
    import os
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    code = (
        "import sys, numpy as np\n"
        f"sys.path.insert(0, {here!r})\n"
        "from test_atomic_load_store import publish\n"
        "from test_atomic_memory_order import extremes_sum\n"
        "x = np.zeros(1024, np.int32)\n"
        "a = publish.compile(x, x.copy(), x.copy(), target='amdgpu', arch='gfx90a')\n"
        "b = extremes_sum.compile(x, x[:1].copy(), x[:1].copy(), x[:1].copy(),\n"
        "                         order='acquire', target='amdgpu', arch='gfx90a')\n"
        "ir = a.compiled.llvm_ir + b.compiled.llvm_ir\n"
        "print('agent' if 'syncscope(\"agent\")' in ir and 'syncscope(\"device\")' not in ir"
        " else 'scope?')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "TILEJIT_DISABLE_CACHE": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("agent"), out.stdout


def _load_program(order):
    @T.prim_func
    def kernel(source: T.Tensor((1,), T.int32), output: T.Tensor((1,), T.int32)):
        with T.Kernel(1, threads=1):
            output[0] = T.atomic_load(source[0], memory_order=order)
    return kernel


@pytest.mark.parametrize("order", ["release", "acq_rel"])
def test_an_order_a_load_lacks_is_a_value_error_where_the_program_is_defined(order):
    with pytest.raises(ValueError, match=f"atomic_load does not support memory_order "
                                         f"'{order}'"):
        _load_program(order)
    x = np.arange(1, dtype=np.int32) + 7
    y = np.zeros(1, np.int32)
    tilejit.compile(_load_program("acquire"))(x, y)
    assert y[0] == 7


@tilejit.kernel
def copy_by_atomics(A, B, block: T.constexpr = 16):
    """TileLang's atomic load/store test: A only read, atomically, in a T.Parallel that
    each thread runs several iterations of."""
    M, N = A.shape
    with T.Kernel(T.ceildiv(M, block), T.ceildiv(N, block), threads=32) as (bx, by):
        for i, j in T.Parallel(block, block):
            if bx * block + i < M and by * block + j < N:
                val = T.atomic_load(A[bx * block + i, by * block + j])
                T.atomic_store(B[bx * block + i, by * block + j], val)


_load = T.atomic_load          # an alias of the language's function, as a program may write


@tilejit.kernel
def copy_by_atomics_spelled_otherwise(A, B):
    """The same through a keyword operand, a module-level alias and a view's name."""
    with T.Kernel(4, threads=32) as bx:
        V = T.reshape(A, (4 * 32,))
        for i in T.Parallel(32):
            B[bx, i] = T.atomic_load(src=A[bx, i]) + _load(V[bx * 32 + i])


def _ptx_in_a_child(tmp_path, kernel_name, shape, dtype, archs=("sm_80", "sm_90a")):
    """The PTX of ``kernel_name`` (this module's) for each arch, compiled in a child
    process: an atomic load NVPTX's instruction selection aborts on (an LLVM assertion)
    fails the test, not the whole run."""
    script = tmp_path / "compile.py"
    script.write_text(
        "import sys, numpy as np\n"
        f"sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})\n"
        f"from test_atomic_load_store import {kernel_name} as k\n"
        f"a = np.zeros({shape!r}, np.{np.dtype(dtype).name})\n"
        f"for arch in {tuple(archs)!r}:\n"
        "    ptx = k.compile(a, a.copy(), target='cuda', arch=arch).ptx\n"
        "    open(sys.argv[1] + arch, 'w').write(ptx)\n")
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "ptx_")],
                          capture_output=True, text=True, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    return {arch: (tmp_path / f"ptx_{arch}").read_text() for arch in archs}


def test_an_atomic_load_spelled_otherwise_compiles(tmp_path, ptxas):
    ptx = _ptx_in_a_child(tmp_path, "copy_by_atomics_spelled_otherwise", (4, 32),
                          np.float32, ("sm_90a",))["sm_90a"]
    assert ptx.count("ld.relaxed.sys.global") == 2 and "ld.global.nc" not in ptx
    ptxas(ptx, "sm_90a")
    x = np.arange(128, dtype=np.float32).reshape(4, 32)
    y = np.zeros_like(x)
    copy_by_atomics_spelled_otherwise(x, y)
    np.testing.assert_array_equal(y, 2 * x)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float64])
def test_a_tensor_read_only_atomically_compiles(dtype, tmp_path, ptxas):
    # its atomic loads were read-only-cache candidates (noalias, never written)
    for arch, ptx in _ptx_in_a_child(tmp_path, "copy_by_atomics", (64, 64), dtype).items():
        assert "ld.relaxed.sys.global" in ptx and "ld.global.nc" not in ptx
        ptxas(ptx, arch)
    x = (np.arange(64 * 64) - 7).reshape(64, 64).astype(dtype)
    y = np.zeros_like(x)
    copy_by_atomics(x, y)
    np.testing.assert_array_equal(x, y)


@pytest.mark.gpu
def test_a_tensor_read_only_atomically_on_the_gpu():
    x = torch.randn(100, 70, dtype=torch.float32)
    y = torch.zeros(100, 70, device="cuda")
    copy_by_atomics(x.cuda(), y)
    torch.cuda.synchronize()
    assert torch.equal(y.cpu(), x)
