"""Small fragments a T.Parallel reads at indices that are not the loop's own
(``a_local[k, i]`` in a loop over ``(i, j)``, k a serial loop's variable): every thread
holds the whole fragment, as TileLang replicates it (passes/layout_inference.py,
``_gathered_fragments``)."""
import warnings

import numpy as np
import pytest

import tilejit as tilelang
import tilejit.language as T
from tilejit.errors import CompileError
from tilejit.passes.registers import RegisterSpillWarning

torch = pytest.importorskip("torch")

HC, HB = 4, 256


@tilelang.jit
def mix_rows(a, b, c):
    """x[i, :] = c[i] + sum_k a[k, i] * b[k, :]: a small mixing matrix in registers (as
    TileLang's DeepSeek mHC example keeps its (hc, hc) matrix)."""
    a: T.Tensor((HC, HC), T.float32)
    b: T.Tensor((HC, HB), T.float32)
    c: T.Tensor((HC,), T.float32)
    x = T.empty((HC, HB), T.float32)
    with T.Kernel(1, threads=128) as bx:
        a_local = T.alloc_fragment((HC, HC), T.float32)
        c_local = T.alloc_fragment(HC, T.float32)
        b_shared = T.alloc_shared((HC, HB), T.float32)
        x_local = T.alloc_fragment((HC, HB), T.float32)
        T.copy(a, a_local)
        T.copy(c, c_local)
        T.copy(b, b_shared)
        for i, j in T.Parallel(HC, HB):
            x_local[i, j] = c_local[i]
            for k in T.serial(HC):
                x_local[i, j] += a_local[k, i] * b_shared[k, j]
        T.copy(x_local, x)
    return x


@tilelang.jit
def lookup(table, idx):
    """y[i, j] = table[i, j // 32]: a (4, 4) fragment read at a computed index."""
    table: T.Tensor((4, 4), T.int32)
    idx: T.Tensor((4, 128), T.int32)
    y = T.empty((4, 128), T.int32)
    with T.Kernel(1, threads=128) as bx:
        t_local = T.alloc_fragment((4, 4), T.int32)
        T.copy(table, t_local)
        for i, j in T.Parallel(4, 128):
            y[i, j] = t_local[i, j // 32] + idx[i, j]
    return y


@tilelang.jit
def writes_a_gathered_fragment(a):
    a: T.Tensor((4, 4), T.float32)
    x = T.empty((4, 64), T.float32)
    with T.Kernel(1, threads=64) as bx:
        a_local = T.alloc_fragment((4, 4), T.float32)
        T.copy(a, a_local)
        for i, j in T.Parallel(4, 64):
            a_local[i, j // 16] = a_local[i, j // 16] * 2
            x[i, j] = a_local[i, j // 16]
    return x


@tilelang.jit
def reads_past_the_end(s):
    """A loop over 64 writing a fragment of 8 (out of bounds): still an error."""
    s: T.Tensor((1,), T.float32)
    y = T.empty((64,), T.float32)
    with T.Kernel(1, threads=64) as bx:
        sinks = T.alloc_fragment((8,), T.float32)
        for i in T.Parallel(64):
            sinks[i] = s[0]
        for i in T.Parallel(64):
            y[i] = sinks[i]
    return y


@tilelang.jit
def wide_lookup(table, b):
    """TileLang issue 1374: B[i, j] += A_local[i, j // 32] with A_local (16, 14) int32,
    224 elements held whole by each of 128 threads (spilled past the registers)."""
    table: T.Tensor((16, 14), T.int32)
    b: T.Tensor((16, 448), T.int32)
    with T.Kernel(1, threads=128) as bx:
        a_local = T.alloc_fragment((16, 14), T.int32)
        T.copy(table, a_local)
        for i, j in T.Parallel(16, 448):
            b[i, j] += a_local[i, j // 32]


@tilelang.jit
def serial_row_sum(q):
    """A serial loop along a gemm accumulator's row inside a T.Parallel over rows:
    TileLang refuses it too (its issue 2393), pointing at T.reduce_sum."""
    q: T.Tensor((64, 64), T.float16)
    out = T.empty((64,), T.float32)
    with T.Kernel(1, threads=128) as bx:
        qs = T.alloc_shared((64, 64), T.float16)
        acc = T.alloc_fragment((64, 64), T.float32)
        s = T.alloc_fragment((64,), T.float32)
        T.copy(q, qs)
        T.clear(acc)
        T.gemm(qs, qs, acc, transpose_B=True)
        T.fill(s, 0.0)
        for i in T.Parallel(64):
            for j in T.serial(64):
                s[i] += acc[i, j]
        T.copy(s, out)
    return out


def _wide_inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randint(-1000, 1000, (16, 14), generator=g, dtype=torch.int32),
            torch.randint(-1000, 1000, (16, 448), generator=g, dtype=torch.int32))


def _wide_reference(table, b):
    return b + table[:, torch.arange(448) // 32]


def _mix_inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(HC, HC, generator=g), torch.randn(HC, HB, generator=g),
            torch.randn(HC, generator=g))


def test_a_small_fragment_read_at_another_loops_index_is_held_whole():
    a, b, c = _mix_inputs()
    x = mix_rows(a, b, c)
    ref = c.double()[:, None] + a.double().T @ b.double()
    torch.testing.assert_close(x.double(), ref, rtol=1e-5, atol=1e-5)


def test_a_fragment_read_at_a_computed_index():
    table = torch.arange(16, dtype=torch.int32).reshape(4, 4)
    idx = torch.randint(0, 100, (4, 128), dtype=torch.int32)
    y = lookup(table, idx)
    ref = table[:, torch.arange(128) // 32] + idx
    assert torch.equal(y, ref)


def test_a_fragment_of_224_elements_read_at_a_computed_index():
    table, b = _wide_inputs()
    want = _wide_reference(table, b)
    wide_lookup(table, b)
    assert torch.equal(b, want)


def test_a_serial_walk_along_a_distributed_fragment_names_reduce_sum():
    with pytest.raises(CompileError, match=r"fragment 'acc' is indexed in part, `acc\[i, j\]`"
                       r".*spreads them over threads: a thread-distributed fragment .*"
                       r"T.reduce_sum"):
        serial_row_sum.compile(np.zeros((64, 64), np.float16), target="cuda", arch="sm_90a")


def test_a_gathered_fragment_written_in_a_parallel_loop_is_an_error():
    with pytest.raises(CompileError, match="a_local"):
        writes_a_gathered_fragment(torch.randn(4, 4))


def test_a_loop_past_a_fragments_end_is_still_an_error():
    with pytest.raises(CompileError, match="runs to 63, past the extent 8 of fragment 'sinks'"):
        reads_past_the_end(torch.zeros(1))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_assembles(arch, ptxas):
    a, b, c = (t.numpy() for t in _mix_inputs())
    ptx = mix_rows.compile(a, b, c, target="cuda", arch=arch).get_kernel_source()
    assert "fma.rn.f32" in ptx
    ptxas(ptx, arch)
    table, idx = np.zeros((4, 4), np.int32), np.zeros((4, 128), np.int32)
    ptxas(lookup.compile(table, idx, target="cuda", arch=arch).get_kernel_source(), arch)
    table, b = (t.numpy() for t in _wide_inputs())
    with warnings.catch_warnings():      # 224 + the loop's registers: spilled (warned)
        warnings.simplefilter("ignore", RegisterSpillWarning)
        ptxas(wide_lookup.compile(table, b, target="cuda", arch=arch).get_kernel_source(), arch)


@pytest.mark.gpu
def test_gathered_fragments_on_the_gpu_against_torch_and_the_simulator():
    a, b, c = _mix_inputs(1)
    x = mix_rows(a.cuda(), b.cuda(), c.cuda())
    x_sim = mix_rows(a, b, c)
    ref = c.double()[:, None] + a.double().T @ b.double()
    torch.testing.assert_close(x.cpu().double(), ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(x.cpu(), x_sim, rtol=1e-6, atol=1e-6)
    table = torch.arange(16, dtype=torch.int32).reshape(4, 4)
    idx = torch.randint(0, 100, (4, 128), dtype=torch.int32)
    assert torch.equal(lookup(table.cuda(), idx.cuda()).cpu(), lookup(table, idx))
    table, b = _wide_inputs(2)
    want = _wide_reference(table, b)
    b_gpu = b.cuda()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RegisterSpillWarning)
        wide_lookup(table.cuda(), b_gpu)
    wide_lookup(table, b)
    assert torch.equal(b_gpu.cpu(), want) and torch.equal(b, want)
