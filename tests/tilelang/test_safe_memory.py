"""TileLang's safe memory access: in the programs its doors compile, an element of a
global tensor read outside the tensor gives 0 and a write outside is dropped, on the GPU
(passes/safe_memory.py) and in the simulator alike; tilejit's own door keeps reporting
such an access; ``TL_DISABLE_SAFE_MEMORY_ACCESS`` turns the masking off."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit as tilelang
import tilejit.language as T
from tilejit.tilelang.jit import PassConfigKey


def past_the_edge(M, N, block=128):
    """Each block of columns runs whole: the last one reads and writes past N (TileLang's
    grouped GEMM stores its tiles this way); row 0 also reads its neighbour's index."""
    @T.prim_func
    def main(A: T.Tensor((M, N), T.float32), idx: T.Tensor((N,), T.int32),
             C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block), M, threads=block) as (bx, by):
            for j in T.Parallel(block):
                C[by, bx * block + j] = A[by, bx * block + j] * 2 + A[by, idx[bx * block + j]]
    return main


def _reference(a, idx):
    gathered = np.where((idx >= 0) & (idx < a.shape[1]), a[:, np.clip(idx, 0, a.shape[1] - 1)],
                        0)
    return a * 2 + gathered


def _inputs(M=5, N=200, seed=0):
    g = np.random.default_rng(seed)
    a = g.standard_normal((M, N)).astype(np.float32)
    idx = g.integers(-20, N + 20, N).astype(np.int32)      # some indices outside A
    return a, idx


def test_simulated_reads_outside_give_zero_and_writes_are_dropped():
    a, idx = _inputs()
    c = np.full_like(a, 7.0)
    tilelang.compile(past_the_edge(5, 200), target="sim")(torch.from_numpy(a),
                                                          torch.from_numpy(idx),
                                                          torch.from_numpy(c))
    np.testing.assert_allclose(c, _reference(a, idx), rtol=1e-6)


def test_tilejit_kernels_still_report_the_access():
    @tilejit.kernel
    def k(A, C, block: T.constexpr = 128):
        n, = A.shape
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = A[bx * block + i]

    with pytest.raises(IndexError, match="out of bounds"):
        k(np.zeros(200, np.float32), np.zeros(200, np.float32))


def test_the_pass_config_turns_it_off():
    a, idx = _inputs()
    kernel = tilelang.compile(past_the_edge(5, 200), target="sim", pass_configs={
        PassConfigKey.TL_DISABLE_SAFE_MEMORY_ACCESS: True})
    with pytest.raises(IndexError, match="out of bounds"):
        kernel(torch.from_numpy(a), torch.from_numpy(idx), torch.zeros(5, 200))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_guards_are_in_the_ptx(arch, ptxas):
    ptx = tilelang.compile(past_the_edge(5, 200)).get_kernel_source(arch=arch)
    ptxas(ptx, arch)
    plain = tilelang.compile(past_the_edge(5, 200), pass_configs={
        PassConfigKey.TL_DISABLE_SAFE_MEMORY_ACCESS: True}).get_kernel_source(arch=arch)
    assert ptx.count("setp.") > plain.count("setp.")
    assert "f64" not in ptx         # the 0 of a masked read has the tensor's type


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_static_extents_are_compiled_in(arch, ptxas):
    """The annotation's extents (5 x 200, checked at the call) are the kernel's: each
    guard compares with a constant, and no shape is read from the launch's parameters
    (only the three data pointers and the two strides of A and C the rows step by)."""
    ptx = tilelang.compile(past_the_edge(5, 200)).get_kernel_source(arch=arch)
    ptxas(ptx, arch)
    tests = [line.rstrip(";").split(",")[-1].strip() for line in ptx.splitlines()
             if "setp." in line]
    assert {"200", "199"} & set(tests), tests       # the column guard: j < 200
    assert sum("ld.param" in line for line in ptx.splitlines()) == 5
    with pytest.raises(ValueError, match="200"):
        tilelang.compile(past_the_edge(5, 200), target="sim")(
            torch.zeros(5, 201), torch.zeros(201, dtype=torch.int32), torch.zeros(5, 201))


def inside(M, N, bm=32, bn=64):
    """Every tile inside the tensors (M, N multiples of the tile): no index can pass an
    edge, as TileLang's analyzer proves from the grid and the loop extents."""
    @T.prim_func
    def main(A: T.Tensor((M, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            for i, j in T.Parallel(bm, bn):
                row = by * bm + i
                C[row, bx * bn + j] = A[row, bx * bn + j] * 2
    return main


def compared(ptx):
    """What the kernel's tests compare with: the immediates of its setp instructions."""
    return {line.rstrip(";").split(",")[-1].strip() for line in ptx.splitlines()
            if "setp." in line}


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_no_guard_where_no_index_passes_an_edge(arch, ptxas):
    ptx = tilelang.compile(inside(256, 512)).get_kernel_source(arch=arch)
    ptxas(ptx, arch)
    assert not compared(ptx) & {"255", "256", "511", "512"}, compared(ptx)
    # one row more than the tiles cover: the row guard comes back, the column's stays out
    edge = tilelang.compile(inside(257, 512)).get_kernel_source(arch=arch)
    assert compared(edge) & {"256", "257"} and not compared(edge) & {"511", "512"}, \
        compared(edge)
    a, c = torch.randn(257, 512).half(), torch.zeros(257, 512).half()
    tilelang.compile(inside(257, 512), target="sim")(a, c)
    torch.testing.assert_close(c, a * 2, rtol=0, atol=0)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_an_element_wise_map_inside_moves_16_bytes_at_a_time(arch, ptxas):
    """With no guard left, the element-wise T.Parallel runs each thread's groups of 8
    halves as straight-line lanes: one 16-byte load and one 16-byte store per group
    (a rolled loop of 2-byte accesses before)."""
    a = torch.randn(256, 512).half()
    ptx = tilelang.compile(inside(256, 512)).get_kernel_source(arch=arch, tensors=[a, a])
    ptxas(ptx, arch)
    assert "ld.global.nc.v4.b32" in ptx and "st.global.v4.b32" in ptx
    assert "ld.global.nc.b16" not in ptx


@pytest.mark.gpu
def test_inside_on_gpu_against_simulator_and_torch():
    for m in (256, 257):
        a = torch.randn(m, 512).half()
        c = torch.zeros(m, 512, device="cuda").half()
        tilelang.compile(inside(m, 512))(a.cuda(), c)
        c_sim = torch.zeros(m, 512).half()
        tilelang.compile(inside(m, 512), target="sim")(a, c_sim)
        torch.testing.assert_close(c.cpu(), (a.double() * 2).half(), rtol=0, atol=0)
        assert torch.equal(c.cpu(), c_sim)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_groups_inside_the_edge_move_16_bytes_at_a_time(arch, ptxas):
    """Tiles that pass both edges (250 x 520 in 32 x 64 tiles): the guards stay, and a
    group of 8 halves whose first and last element pass them (every group but the last
    column's) reads and writes 16 bytes at once; the others go element by element. Before,
    every element of every group was guarded (the H200 ran C = A + B at 8000² in 256-wide
    tiles at 1.16 TB/s, torch 4.13)."""
    a = torch.randn(250, 520).half()
    ptx = tilelang.compile(inside(250, 520)).get_kernel_source(arch=arch, tensors=[a, a])
    ptxas(ptx, arch)
    assert "ld.global.nc.v4.b32" in ptx and "st.global.v4.b32" in ptx
    assert "ld.global.nc.b16" in ptx and "st.global.b16" in ptx


EDGES = [(250, 520), (257, 515), (31, 8), (300, 130)]


@pytest.mark.parametrize("m,n", EDGES)
def test_groups_at_the_edge_in_simulation(m, n):
    a, c = torch.randn(m, n).half(), torch.zeros(m, n).half()
    tilelang.compile(inside(m, n), target="sim")(a, c)
    torch.testing.assert_close(c, a * 2, rtol=0, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("m,n", EDGES)
def test_groups_at_the_edge_on_gpu_against_simulator_and_torch(m, n):
    a = torch.randn(m, n).half()
    c = torch.full((m + 1, n), -1.0, device="cuda").half()  # a row past C: left alone
    tilelang.compile(inside(m, n))(a.cuda(), c[:m])
    c_sim = torch.zeros(m, n).half()
    tilelang.compile(inside(m, n), target="sim")(a, c_sim)
    torch.testing.assert_close(c[:m].cpu(), (a.double() * 2).half(), rtol=0, atol=0)
    assert torch.equal(c[:m].cpu(), c_sim) and bool((c[m] == -1).all())


def pipelined_sums(M, K, bm=32, bk=64):
    """Element reads inside a T.Pipelined loop: its variable's range (the loop's extent,
    index_ranges.py; LLVM's trip count would also prove it) keeps them inside A when M
    and K are multiples of the tile: no guard in the PTX. Past K's edge they are guarded."""
    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), C: T.Tensor((M, 64), T.float32)):
        with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
            acc = T.alloc_fragment((bm, bk), T.float32)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                for i, j in T.Parallel(bm, bk):
                    acc[i, j] += A[bx * bm + i, k * bk + j]
            T.copy(acc, C[bx * bm, 0])
    return main


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_no_guard_on_reads_a_pipelined_loop_keeps_inside(arch, ptxas):
    ptx = tilelang.compile(pipelined_sums(256, 512)).get_kernel_source(arch=arch)
    ptxas(ptx, arch)
    assert not compared(ptx) & {"255", "256", "511", "512"}, compared(ptx)
    edge = tilelang.compile(pipelined_sums(256, 520)).get_kernel_source(arch=arch)
    assert compared(edge) & {"519", "520"}, compared(edge)
    for k in (512, 520):
        a, c = torch.randn(256, k).half(), torch.zeros(256, 64)
        tilelang.compile(pipelined_sums(256, k), target="sim")(a, c)
        ref = torch.nn.functional.pad(a.double(), (0, -k % 64)).reshape(256, -1, 64).sum(1)
        torch.testing.assert_close(c.double(), ref, rtol=1e-5, atol=1e-4)


@pytest.mark.gpu
def test_pipelined_reads_on_gpu_against_simulator_and_torch():
    for k in (512, 520):
        a = torch.randn(256, k).half()
        c = torch.zeros(256, 64, device="cuda")
        tilelang.compile(pipelined_sums(256, k))(a.cuda(), c)
        c_sim = torch.zeros(256, 64)
        tilelang.compile(pipelined_sums(256, k), target="sim")(a, c_sim)
        ref = torch.nn.functional.pad(a.double(), (0, -k % 64)).reshape(256, -1, 64).sum(1)
        torch.testing.assert_close(c.cpu().double(), ref, rtol=1e-5, atol=1e-4)
        torch.testing.assert_close(c.cpu(), c_sim, rtol=1e-6, atol=1e-5)


def rebound_view():
    """A parameter's name bound again to a view of another shape: its accesses are the
    view's, whose columns end at 32, not the parameter's 64 (found by review)."""
    @T.prim_func
    def main(A: T.Tensor((4, 64), T.float32), C: T.Tensor((4, 64), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            A = T.reshape(A, (8, 32))
            for r, c in T.Parallel(2, 64):
                C[r, c] = A[r, c]
    return main


def test_a_rebound_parameter_keeps_its_guards():
    ptx = tilelang.compile(rebound_view()).get_kernel_source(arch="sm_90a")
    assert any(line.rstrip(";").endswith(("31", "32")) for line in ptx.splitlines()
               if "setp." in line)
    a, c = torch.arange(256.0).reshape(4, 64), torch.zeros(4, 64)
    tilelang.compile(rebound_view(), target="sim")(a, c)
    assert c[0, 30:34].tolist() == [30.0, 31.0, 0.0, 0.0]


@T.macro
def _put(C, A, base):
    for i in T.Parallel(64):
        j = base + i
        C[j] = A[j] + 1


def macro_past_the_edge():
    """A @T.macro's element accesses past the edge (found by review: a macro compiled as a
    device function had no guards, as TileLang's inlined macro has)."""
    @T.prim_func
    def main(A: T.Tensor((128,), T.float32), C: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=64) as bx:
            _put(C, A, 0)
            _put(C, A, 100)         # 100 + 63 > 127: the writes past the end are dropped
    return main


def test_a_macros_accesses_are_guarded():
    ptx = tilelang.compile(macro_past_the_edge()).get_kernel_source(arch="sm_90a")
    assert "setp." in ptx           # (base + i < 128 folded to a test of the thread: i < 28)
    a, c = torch.arange(128.0), torch.zeros(128)
    tilelang.compile(macro_past_the_edge(), target="sim")(a, c)
    torch.testing.assert_close(c, _macro_want(a), rtol=0, atol=0)


def _macro_want(a):
    want = torch.zeros(128)
    want[:64], want[100:] = a[:64] + 1, a[100:] + 1
    return want


@pytest.mark.gpu
def test_a_macros_accesses_are_guarded_on_gpu():
    a, c = torch.arange(128.0), torch.zeros(128, device="cuda")
    tilelang.compile(macro_past_the_edge())(a.cuda(), c)
    torch.testing.assert_close(c.cpu(), _macro_want(a), rtol=0, atol=0)


def atomics_past_the_edge(N, block=128):
    @T.prim_func
    def main(A: T.Tensor((N,), T.float32), C: T.Tensor((N,), T.float32),
             D: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                T.atomic_add(C[bx * block + i], A[bx * block + i])
                D[bx * block + i] = T.atomic_add(C[bx * block + i], 1.0, return_prev=True)
    return main


def test_element_atomics_outside_are_dropped():
    a = torch.randn(300)
    c, d = torch.zeros(300), torch.zeros(300)
    tilelang.compile(atomics_past_the_edge(300), target="sim")(a, c, d)
    torch.testing.assert_close(d, a)
    torch.testing.assert_close(c, a + 1)


@pytest.mark.gpu
def test_element_atomics_on_gpu():
    a = torch.randn(300)
    c, d = torch.zeros(300, device="cuda"), torch.zeros(300, device="cuda")
    tilelang.compile(atomics_past_the_edge(300))(a.cuda(), c, d)
    torch.testing.assert_close(d.cpu(), a)
    torch.testing.assert_close(c.cpu(), a + 1)


@pytest.mark.gpu
def test_on_gpu_against_simulator_and_numpy():
    a, idx = _inputs(7, 300, seed=1)
    c = torch.full((7, 300), 7.0, device="cuda")
    tilelang.compile(past_the_edge(7, 300))(torch.from_numpy(a).cuda(),
                                            torch.from_numpy(idx).cuda(), c)
    want = _reference(a, idx)
    np.testing.assert_allclose(c.cpu().numpy(), want, rtol=1e-6)
    c_sim = torch.full((7, 300), 7.0)
    tilelang.compile(past_the_edge(7, 300), target="sim")(torch.from_numpy(a),
                                                          torch.from_numpy(idx), c_sim)
    np.testing.assert_array_equal(c.cpu().numpy(), c_sim.numpy())


def _many_reads(tmp_path, monkeypatch, n, name):
    """`B[i] = A[i % T.int32(8)] + A[(i + 1) % T.int32(8)] + ...`: n reads at computed
    indices in one statement, each guarded (the index ranges know no T.int32(8))."""
    terms = " + ".join(f"A[(i + {k}) % T.int32(8)]" for k in range(n))
    (tmp_path / f"{name}.py").write_text(
        "import tilejit.language as T\n"
        "@T.prim_func\n"
        "def main(A: T.Tensor((8,), 'float32'), B: T.Tensor((8,), 'float32')):\n"
        "    with T.Kernel(1, threads=32) as bx:\n"
        "        for i in T.Parallel(8):\n"
        f"            B[i] = {terms}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib
    import sys
    sys.modules.pop(name, None)
    return importlib.import_module(name).main


def test_a_statement_of_too_many_guarded_reads_is_refused_at_its_line(tmp_path, monkeypatch):
    """Each guarded read is a branch, and Numba's analyses of a function's branches take
    time and memory growing with the square of their number (400 reads: 68 s and 6 GB;
    1000: killed for memory): past 64 in one statement, a CompileError at its line
    before Numba runs; with the guards off (the pass config) it compiles as before."""
    from tilejit.passes.safe_memory import MAX_GUARDED_READS
    program = _many_reads(tmp_path, monkeypatch, 200, "many_guarded_reads")
    for target in ("sim", "cuda -arch=sm_90a"):
        with pytest.raises(tilelang.CompileError, match=rf"200 reads of tensor elements at "
                           rf"computed indices in one statement \(at most {MAX_GUARDED_READS}\)"
                           r": safe memory access checks each .*pass_configs=\{'tl.disable_"
                           r"safe_memory_legalize': True\}") as info:
            tilelang.compile(program, target=target)
        assert info.value.lineno == 6
    a = torch.arange(8.0)
    b = torch.zeros(8)
    tilelang.compile(program, target="sim", pass_configs={
        PassConfigKey.TL_DISABLE_SAFE_MEMORY_ACCESS: True})(a, b)
    assert torch.equal(b, torch.full((8,), 25.0 * 28))


def test_a_statement_at_the_limit_compiles(tmp_path, monkeypatch):
    from tilejit.passes.safe_memory import MAX_GUARDED_READS
    program = _many_reads(tmp_path, monkeypatch, MAX_GUARDED_READS, "limit_guarded_reads")
    a = torch.arange(8.0)
    b = torch.zeros(8)
    tilelang.compile(program, target="sim")(a, b)
    assert torch.equal(b, torch.full((8,), MAX_GUARDED_READS // 8 * 28.0))
