"""Conversions between conflicting fragment layouts (issue 27, passes/layout_conversion.py):
a fragment-to-fragment flow (a T.copy, a cast, a T.Parallel reading one fragment and
writing another) that joins two gemm-fixed layouts goes through a shared scratch tile
instead of stopping the compile. FlashAttention at block 32 x 32, 128 threads, FullRow is
the case a TileLang user hit: the scores' accumulator is tiled 2 x 2 over the warps, the
second gemm's A operand in registers 2 warp rows copied on both warp columns. The
simulator runs the kernels as written (a conversion moves values unchanged) and defines
the results; the PTX is assembled by ptxas; ``-m gpu`` runs them on the device."""
import os
import sys

import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples", "flash_attention"))
from flash_attn import flashattn  # noqa: E402

ARCHS = ("sm_80", "sm_90a")
SMALL = dict(block_M=32, block_N=32, threads=128)    # the conflicting configuration


@tilejit.kernel
def chain(A, B, C, Out, mode: T.constexpr = "copy", threads: T.constexpr = 128):
    """Out = half(A B^T [* 0.5]) C: the first gemm's accumulator flows into the second
    gemm's A operand in registers, by a T.copy (a cast) or by a T.Parallel."""
    M, D = A.shape
    N = B.shape[0]
    with T.Kernel(1, threads=threads) as bx:
        a = T.alloc_shared([M, D], "float16")
        b = T.alloc_shared([N, D], "float16")
        c = T.alloc_shared([N, D], "float16")
        s = T.alloc_fragment([M, N], "float32")
        p = T.alloc_fragment([M, N], "float16")
        o = T.alloc_fragment([M, D], "float32")
        T.copy(A, a)
        T.copy(B, b)
        T.copy(C, c)
        T.clear(s)
        T.gemm(a, b, s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
        if mode == "copy":
            T.copy(s, p)
        else:
            for i, j in T.Parallel(M, N):
                p[i, j] = s[i, j] * 0.5
        T.clear(o)
        T.gemm(p, c, o, policy=T.GemmWarpPolicy.FullRow)
        T.copy(o, Out)


@tilejit.kernel
def chain_writes_both(A, B, C, Out):
    """A loop writing the accumulator and the A operand: no one layout runs it."""
    M, D = A.shape
    N = B.shape[0]
    with T.Kernel(1, threads=128) as bx:
        a = T.alloc_shared([M, D], "float16")
        b = T.alloc_shared([N, D], "float16")
        c = T.alloc_shared([N, D], "float16")
        s = T.alloc_fragment([M, N], "float32")
        p = T.alloc_fragment([M, N], "float16")
        o = T.alloc_fragment([M, D], "float32")
        T.copy(A, a)
        T.copy(B, b)
        T.copy(C, c)
        T.clear(s)
        T.gemm(a, b, s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
        for i, j in T.Parallel(M, N):
            s[i, j] = s[i, j] * 0.5
            p[i, j] = s[i, j]
        T.clear(o)
        T.gemm(p, c, o, policy=T.GemmWarpPolicy.FullRow)
        T.copy(o, Out)


@tilejit.kernel
def attention_cast_in_loop(Q, K, V, Output, block_M: T.constexpr = 32,
                           block_N: T.constexpr = 32, threads: T.constexpr = 128):
    """FlashAttention's forward with the probabilities cast to the second gemm's operand
    by a T.Parallel (``p[i, j] = s[i, j]``) instead of a T.copy."""
    batch, seq_len, heads, dim = Q.shape
    scale = (1.0 / dim) ** 0.5 * 1.44269504
    with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
        Q_s = T.alloc_shared([block_M, dim], Q.dtype)
        K_s = T.alloc_shared([block_N, dim], Q.dtype)
        V_s = T.alloc_shared([block_N, dim], Q.dtype)
        s = T.alloc_fragment([block_M, block_N], "float32")
        p = T.alloc_fragment([block_M, block_N], Q.dtype)
        o = T.alloc_fragment([block_M, dim], "float32")
        m = T.alloc_fragment([block_M], "float32")
        m_prev = T.alloc_fragment([block_M], "float32")
        r = T.alloc_fragment([block_M], "float32")
        denom = T.alloc_fragment([block_M], "float32")
        row_sum = T.alloc_fragment([block_M], "float32")
        T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], Q_s)
        T.fill(o, 0)
        T.fill(denom, 0)
        T.fill(m, -T.infinity("float32"))
        for k in T.Pipelined(T.ceildiv(seq_len, block_N), num_stages=2):
            T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], K_s)
            T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], V_s)
            T.clear(s)
            T.gemm(Q_s, K_s, s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
            if (k + 1) * block_N > seq_len:
                for i, j in T.Parallel(block_M, block_N):
                    s[i, j] = T.if_then_else(k * block_N + j < seq_len, s[i, j],
                                             -T.infinity("float32"))
            T.copy(m, m_prev)
            T.reduce_max(s, m, dim=1, clear=False)
            for i, j in T.Parallel(block_M, block_N):
                s[i, j] = T.exp2(s[i, j] * scale - m[i] * scale)
            T.reduce_sum(s, row_sum, dim=1)
            for i in T.Parallel(block_M):
                r[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                denom[i] = denom[i] * r[i] + row_sum[i]
            for i, j in T.Parallel(block_M, block_N):
                p[i, j] = s[i, j]
            for i, j in T.Parallel(block_M, dim):
                o[i, j] *= r[i]
            T.gemm(p, V_s, o, policy=T.GemmWarpPolicy.FullRow)
        for i, j in T.Parallel(block_M, dim):
            o[i, j] /= denom[i]
        T.copy(o, Output[bz, bx * block_M:(bx + 1) * block_M, by, :])


def _chain_inputs(seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    a, b, c = (torch.randn(32, 64, generator=g).half().to(device) for _ in range(3))
    return a, b, c


def _chain_reference(a, b, c, mode):
    """float64, with the probabilities rounded to float16 as the kernel's p holds them."""
    a, b, c = (x.cpu().numpy().astype(np.float64) for x in (a, b, c))
    s = a @ b.T * (1.0 if mode == "copy" else 0.5)
    return s.astype(np.float16).astype(np.float64) @ c


def _attention_reference(q, k, v):
    """softmax(Q K^T / sqrt(d)) V in float64 (bshd)."""
    q, k, v = (x.cpu().double().numpy().transpose(0, 2, 1, 3) for x in (q, k, v))
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True) @ v).transpose(0, 2, 1, 3)


def _qkv(b, s, h, d, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(b, s, h, d, generator=g).half().to(device) for _ in range(3)]


def _dump(kernel, tmp_path, monkeypatch, *args, **kw):
    """The IR dump directory of one compilation for sm_80."""
    monkeypatch.setenv("TILEJIT_DUMP_IR", str(tmp_path))
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    tilejit.kernel(kernel.func).compile(*args, target="cuda", arch="sm_80", **kw)
    (directory,) = tmp_path.iterdir()
    return directory


def _read(directory, suffix):
    (path,) = [p for p in directory.iterdir() if p.name.endswith(suffix)]
    return path.read_text()


# -- the direct case: a gemm accumulator into another gemm's register operand ---------

@pytest.mark.parametrize("mode", ["copy", "parallel"])
def test_chain_simulated_matches_float64(mode):
    a, b, c = _chain_inputs()
    out = torch.empty(32, 64)
    tilejit.kernel(chain.func, target="sim")(a, b, c, out, mode=mode)
    np.testing.assert_allclose(out.numpy(), _chain_reference(a, b, c, mode),
                               rtol=1e-2, atol=5e-2)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("mode", ["copy", "parallel"])
def test_chain_compiles_with_a_conversion_and_assembles(mode, arch, ptxas):
    a, b, c = _chain_inputs()
    k = chain.compile(a, b, c, torch.empty(32, 64), mode=mode, target="cuda", arch=arch)
    for instruction in ("mma.sync.aligned.m16n8k16", "bar.sync", "st.shared", "ld.shared"):
        assert instruction in k.ptx, instruction
    ptxas(k.ptx, arch)


@pytest.mark.parametrize("mode", ["copy", "parallel"])
def test_the_ir_dump_marks_the_conversion(mode, tmp_path, monkeypatch):
    a, b, c = _chain_inputs()
    directory = _dump(chain, tmp_path, monkeypatch, a, b, c, torch.empty(32, 64), mode=mode)
    before = _read(directory, "_after_choose_operand_layouts.py")
    after = _read(directory, "_after_convert_fragment_layouts.py")
    assert "__tj_convert_layout" not in before
    marker = [line.strip() for line in after.splitlines() if "__tj_convert_layout(" in line]
    assert len(marker) == 1
    assert marker[0].startswith("__tj_convert_layout('s', 'p', '__tj_convert0', ")
    assert "'s': the accumulator of T.gemm (line" in marker[0]
    assert "'p': the A operand of T.gemm held in registers (line" in marker[0]
    # the source's layout into the scratch, a barrier, the destination's out of it
    final = [line.strip() for line in _read(directory, "_after_insert_barriers.py").splitlines()]
    start = final.index("__tj_language.copy(s, __tj_convert0)")
    assert final[start + 1] == "__tj_sync()"
    if mode == "copy":
        assert final[start + 2] == "__tj_language.copy(__tj_convert0, p)"
    else:
        assert "__tj_convert0[i, j] * 0.5" in final[start + 4]
    plan = _read(directory, "_tile_plan.txt")
    (scratch,) = [line for line in plan.splitlines() if line.startswith("shared __tj_convert0")]
    # a T.copy converts on the way in (the destination's dtype), a loop reads the source's
    assert ("float16" if mode == "copy" else "float32") in scratch
    assert "converts 's' to the layout of 'p'" in scratch


def test_the_scratch_counts_in_shared_memory_and_reuses_dead_bytes(tmp_path, monkeypatch):
    """The scratch (32 x 32 float32, 4 KiB) is placed by the shared-memory pass: counted
    in the kernel's bytes, and on the bytes of an operand tile the first gemm is done
    with (three 4 KiB tiles and the scratch in 12 KiB)."""
    a, b, c = _chain_inputs()
    directory = _dump(chain, tmp_path, monkeypatch, a, b, c, torch.empty(32, 64),
                      mode="parallel")
    plan = _read(directory, "_tile_plan.txt")
    assert "dynamic shared memory: 12288 bytes" in plan
    k = chain.compile(a, b, c, torch.empty(32, 64), mode="parallel", target="cuda",
                      arch="sm_80")
    assert k.shared_bytes == 12288


def test_no_conversion_where_the_layouts_agree(tmp_path, monkeypatch):
    """Two warps: the accumulator and the A operand are both 2 warp rows, one layout."""
    a, b, c = _chain_inputs()
    directory = _dump(chain, tmp_path, monkeypatch, a, b, c, torch.empty(32, 64),
                      mode="parallel", threads=64)
    assert _read(directory, "_after_choose_operand_layouts.py") == _read(
        directory, "_after_convert_fragment_layouts.py")
    assert "__tj_convert" not in _read(directory, "_tile_plan.txt")


def test_a_loop_writing_both_layouts_is_an_error_at_its_line():
    a, b, c = _chain_inputs()
    with pytest.raises(CompileError) as info:
        chain_writes_both.compile(a, b, c, torch.empty(32, 64), target="cuda", arch="sm_80")
    e = info.value
    assert e.filename == __file__
    assert "for i, j in T.Parallel(M, N):" in str(e)
    assert "writes fragments 's' and 'p', whose layouts differ" in str(e)
    assert "the accumulator of T.gemm" in str(e)
    assert "the A operand of T.gemm held in registers" in str(e)
    assert "write them in separate T.Parallel loops" in str(e)


def test_the_simulator_stops_at_the_same_error():
    """The simulator's target also runs the passes (a kernel that does not compile does
    not simulate either)."""
    a, b, c = _chain_inputs()
    with pytest.raises(CompileError, match="writes fragments 's' and 'p'"):
        tilejit.kernel(chain_writes_both.func, target="sim")(a, b, c, torch.empty(32, 64))


# -- FlashAttention at 32 x 32, 128 threads, FullRow ----------------------------------

ATTENTION = {"copy": flashattn, "loop": attention_cast_in_loop}


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("form", ["copy", "loop"])
def test_small_block_attention_compiles_and_assembles(form, arch, ptxas):
    q = torch.zeros(1, 256, 2, 64, dtype=torch.float16)
    k = ATTENTION[form].compile(q, q, q, q.clone(), target="cuda", arch=arch, **SMALL)
    for instruction in ("mma.sync.aligned.m16n8k16", "ldmatrix", "cp.async", "bar.sync"):
        assert instruction in k.ptx, instruction
    ptxas(k.ptx, arch)


@pytest.mark.parametrize("form", ["copy", "loop"])
def test_small_block_attention_marks_its_conversion(form, tmp_path, monkeypatch):
    q = torch.zeros(1, 256, 2, 64, dtype=torch.float16)
    directory = _dump(ATTENTION[form], tmp_path, monkeypatch, q, q, q, q.clone(), **SMALL)
    src, dst = ("acc_s", "acc_s_cast") if form == "copy" else ("s", "p")
    marks = [line.strip() for line in _read(directory, "_after_insert_barriers.py").splitlines()
             if "__tj_convert_layout(" in line]
    assert len(marks) == 1 and marks[0].startswith(f"__tj_convert_layout({src!r}, {dst!r}, ")


@pytest.mark.parametrize("form", ["copy", "loop"])
@pytest.mark.parametrize("seq", [64, 100])
def test_small_block_attention_simulated_matches_float64(form, seq):
    q, k, v = _qkv(1, seq, 2, 64)
    out = torch.empty_like(q)
    tilejit.kernel(ATTENTION[form].func, target="sim")(q, k, v, out, **SMALL)
    err = np.abs(out.double().numpy() - _attention_reference(q, k, v)).max()
    assert err < 1e-2, err


# -- on the device --------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["copy", "parallel"])
def test_chain_on_the_gpu_matches_float64_and_the_simulator(mode):
    a, b, c = _chain_inputs(seed=3, device="cuda")
    out = torch.full((32, 64), float("nan"), device="cuda")
    chain(a, b, c, out, mode=mode)
    torch.cuda.synchronize()
    ref = torch.from_numpy(_chain_reference(a, b, c, mode))
    torch.testing.assert_close(out.cpu().double(), ref, rtol=1e-2, atol=5e-2)
    sim = torch.empty(32, 64)
    tilejit.kernel(chain.func, target="sim")(a.cpu(), b.cpu(), c.cpu(), sim, mode=mode)
    torch.testing.assert_close(out.cpu(), sim, rtol=1e-2, atol=5e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("form", ["copy", "loop"])
@pytest.mark.parametrize("seq", [256, 300])
def test_small_block_attention_on_the_gpu_matches_float64_and_the_simulator(form, seq):
    q, k, v = _qkv(2, seq, 4, 64, seed=seq, device="cuda")
    out = torch.full_like(q, float("nan"))
    ATTENTION[form](q, k, v, out, **SMALL)
    torch.cuda.synchronize()
    ref = torch.nn.functional.scaled_dot_product_attention(
        *(x.double().transpose(1, 2) for x in (q, k, v))).transpose(1, 2)
    assert not torch.isnan(out).any()
    assert (out.double() - ref).abs().max().item() < 1e-2
    sim = torch.empty_like(q.cpu())
    tilejit.kernel(ATTENTION[form].func, target="sim")(q.cpu(), k.cpu(), v.cpu(), sim, **SMALL)
    torch.testing.assert_close(out.cpu().float(), sim.float(), rtol=1e-2, atol=1e-2)
