"""The tile source passes at compile time (no GPU needed): where the barrier pass puts
``__tj_sync()``, how shared memory is planned (sizes, reuse of dead tiles' bytes, the
device limit), and the compile errors of tile programs (message and source line)."""
import ast
import inspect

import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T

SYNC = "__tj_sync()"


def _f16(*shape):
    return np.zeros(shape, np.float16)


def _f32(*shape):
    return np.zeros(shape, np.float32)


def _dump(kernel, args, tmp_path, monkeypatch, arch="sm_90", **constexprs):
    """Compile with TILEJIT_DUMP_IR; return (compiled kernel, {suffix: text})."""
    monkeypatch.setenv("TILEJIT_DUMP_IR", str(tmp_path))
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    compiled = kernel.compile(*args, target="cuda", arch=arch, **constexprs)
    (directory,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    files = {}
    for p in directory.iterdir():
        files[p.name.split("_", 1)[1]] = p.read_text()
    return compiled, files


def _barriers(kernel, args, tmp_path, monkeypatch, **kw):
    """The program after the barrier pass, TMA off (its stores bring their own fence and
    barrier: tests/passes/test_tma_store.py)."""
    monkeypatch.setenv("TILEJIT_TMA", "0")
    _, files = _dump(kernel, args, tmp_path, monkeypatch, **kw)
    return files["after_insert_barriers.py"]


def _body_lines(text):
    """The program's statements, stripped, in order (after the def line)."""
    return [l.strip() for l in text.splitlines()[1:] if l.strip()]


def _line_of(kernel, marker):
    """The file line number of the first source line of ``kernel`` containing marker."""
    lines, start = inspect.getsourcelines(kernel.func)
    for k, line in enumerate(lines):
        if marker in line:
            return start + k
    raise AssertionError(f"{marker!r} not in the kernel's source")


# ----------------------------------------------------------------------------- barriers

@tilejit.kernel
def mm_serial(A, B, C, bm: T.constexpr = 64, bn: T.constexpr = 64, bk: T.constexpr = 32):
    M, K = A.shape
    N = B.shape[1]
    with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
        A_s = T.alloc_shared((bm, bk), A.dtype)
        B_s = T.alloc_shared((bk, bn), B.dtype)
        C_f = T.alloc_fragment((bm, bn), T.float32)
        T.clear(C_f)
        for k in T.serial(T.ceildiv(K, bk)):
            T.copy(A[by * bm, k * bk], A_s)
            T.copy(B[k * bk, bx * bn], B_s)
            T.gemm(A_s, B_s, C_f)
        T.copy(C_f, C[by * bm, bx * bn])


@tilejit.kernel
def mm_pipelined(A, B, C, bm: T.constexpr = 64, bn: T.constexpr = 64, bk: T.constexpr = 32):
    M, K = A.shape
    N = B.shape[1]
    with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
        A_s = T.alloc_shared((bm, bk), A.dtype)
        B_s = T.alloc_shared((bk, bn), B.dtype)
        C_f = T.alloc_fragment((bm, bn), T.float32)
        T.clear(C_f)
        for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
            T.copy(A[by * bm, k * bk], A_s)
            T.copy(B[k * bk, bx * bn], B_s)
            T.gemm(A_s, B_s, C_f)
        T.copy(C_f, C[by * bm, bx * bn])


@tilejit.kernel
def no_shared(A, B, bm: T.constexpr = 64, bn: T.constexpr = 64):
    M, N = A.shape
    with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
        F = T.alloc_fragment((bm, bn), T.float32)
        T.copy(A[by * bm, bx * bn], F)
        for i, j in T.Parallel(bm, bn):
            F[i, j] = F[i, j] * 2.0
        T.copy(F, B[by * bm, bx * bn])


@tilejit.kernel
def write_then_read(A, B, bm: T.constexpr = 64, bn: T.constexpr = 64):
    M, N = A.shape
    with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
        S = T.alloc_shared((bm, bn), A.dtype)
        T.copy(A[by * bm, bx * bn], S)
        T.copy(S, B[by * bm, bx * bn])


@tilejit.kernel
def read_only_after_sync(A, B, C, D, bm: T.constexpr = 64, bn: T.constexpr = 64):
    M, N = A.shape
    with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
        S = T.alloc_shared((bm, bn), A.dtype)
        F = T.alloc_fragment((bm, bn), T.float32)
        T.copy(A[by * bm, bx * bn], S)
        T.copy(S, F)
        T.copy(S, B[by * bm, bx * bn])
        for i, j in T.Parallel(bm, bn):
            C[by * bm + i, bx * bn + j] = S[bm - 1 - i, j] * 2.0
        T.copy(F, D[by * bm, bx * bn])


@tilejit.kernel
def write_read_write(A, A2, B, B2, bm: T.constexpr = 64, bn: T.constexpr = 64):
    M, N = A.shape
    with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
        S = T.alloc_shared((bm, bn), A.dtype)
        T.copy(A[by * bm, bx * bn], S)
        T.copy(S, B[by * bm, bx * bn])
        T.copy(A2[by * bm, bx * bn], S)          # write after read: a second barrier
        T.copy(S, B2[by * bm, bx * bn])           # read after write: a third


@tilejit.kernel
def read_in_branch(A, B, bm: T.constexpr = 64, bn: T.constexpr = 64):
    M, N = A.shape
    with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
        S = T.alloc_shared((bm, bn), A.dtype)
        T.copy(A[by * bm, bx * bn], S)
        if bx % 2 == 0:
            T.copy(S, B[by * bm, bx * bn])


def _mm_args():
    return _f16(128, 64), _f16(64, 128), _f32(128, 128)


def test_copy_then_gemm_loop_syncs_before_gemm_and_at_loop_top(tmp_path, monkeypatch):
    text = _barriers(mm_serial, _mm_args(), tmp_path, monkeypatch)
    tree = ast.parse(text)
    (loop,) = [n for n in ast.walk(tree) if isinstance(n, ast.For)]
    body = [ast.unparse(s) for s in loop.body]
    assert body[0] == "__tj_sync()", body                     # the back edge: WAR on A_s/B_s
    gemm = next(k for k, s in enumerate(body) if s.startswith("__tj_gemm("))
    assert body[gemm - 1] == "__tj_sync()", body              # RAW: the copies, then the gemm
    assert sum(s == "__tj_sync()" for s in body) == 2, body
    copies = [k for k, s in enumerate(body) if s.startswith("T.copy(")]
    assert len(copies) == 2 and 0 < min(copies) and max(copies) < gemm - 1


def test_pipelined_copy_then_gemm_syncs_before_gemm_and_before_refilling(tmp_path,
                                                                         monkeypatch):
    """Whatever the schedule: a barrier after the last wait for the copies and before the
    gemm (read after write), and one before the body's copies refill a stage that the
    previous iteration's gemm read (write after read, through the back edge)."""
    # the cp.async schedule (sm_90 takes TMA's: tests/passes/test_tma.py)
    text = _barriers(mm_pipelined, _mm_args(), tmp_path, monkeypatch, arch="sm_80")
    tree = ast.parse(text)
    main = [n for n in ast.walk(tree) if isinstance(n, ast.For)
            and isinstance(n.target, ast.Name) and n.target.id == "k"]
    assert len(main) == 1, text
    body = [ast.unparse(s) for s in main[0].body]
    syncs = [k for k, s in enumerate(body) if s == "__tj_sync()"]
    gemm = next(k for k, s in enumerate(body) if s.startswith("__tj_gemm("))
    waits = [k for k, s in enumerate(body[:gemm]) if s.startswith("__tj_cp_wait(")]
    # the refill's copies: statements, or handed to the gemm (its operands past the 4th)
    copies = [k for k, s in enumerate(body) if "__tj_copy_async(" in s or s.startswith("T.copy(")
              or s.startswith("__tj_gemm(") and "__tj_region(" in s]
    assert copies and waits, body
    assert any(max(waits) < k < gemm for k in syncs), body
    assert any(k < min(copies) for k in syncs), body


@tilejit.kernel
def no_shared_plain(A, B, bm: T.constexpr = 64, bn: T.constexpr = 64):
    M, N = A.shape
    with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
        F = T.alloc_fragment((bm, bn), T.float32)
        T.copy(A[by * bm, bx * bn], F)
        T.copy(F, B[by * bm, bx * bn])


def test_no_shared_memory_no_barrier(tmp_path, monkeypatch):
    compiled, files = _dump(no_shared_plain, (_f32(128, 128), _f32(128, 128)), tmp_path,
                            monkeypatch)
    assert "__tj_sync" not in files["after_insert_barriers.py"]
    assert "bar.sync" not in compiled.ptx
    assert compiled.shared_bytes == 0


def test_no_shared_memory_with_fragment_loop_no_barrier():
    compiled = no_shared.compile(_f32(128, 128), _f32(128, 128), target="cuda", arch="sm_90")
    assert "bar.sync" not in compiled.ptx and compiled.shared_bytes == 0


def test_dump_ir_with_a_fragment_loop(tmp_path, monkeypatch):
    _, files = _dump(no_shared, (_f32(128, 128), _f32(128, 128)), tmp_path, monkeypatch)
    assert "fragment loop L0" in files["tile_plan.txt"]
    assert "__tj_sync" not in files["after_insert_barriers.py"]


def test_write_then_read_outside_loops_one_barrier_between(tmp_path, monkeypatch):
    text = _barriers(write_then_read, (_f16(128, 128), _f16(128, 128)), tmp_path, monkeypatch)
    body = _body_lines(text)
    assert body.count(SYNC) == 1, text
    k = body.index(SYNC)
    assert body[k - 1].startswith("T.copy(__tj_region(A,"), text
    assert body[k + 1].startswith("T.copy(S,"), text


def test_read_only_uses_after_a_barrier_need_no_more(tmp_path, monkeypatch):
    text = _barriers(read_only_after_sync, (_f16(128, 128), _f16(128, 128), _f16(128, 128),
                                            _f32(128, 128)), tmp_path, monkeypatch)
    body = _body_lines(text)
    assert body.count(SYNC) == 1, text
    k = body.index(SYNC)
    assert body[k - 1].startswith("T.copy(__tj_region(A,"), text
    assert body[k + 1].startswith("T.copy(S, F)"), text


def test_write_after_read_gets_its_own_barrier(tmp_path, monkeypatch):
    args = (_f16(128, 128),) * 4
    text = _barriers(write_read_write, args, tmp_path, monkeypatch)
    body = _body_lines(text)
    assert body.count(SYNC) == 2 + 1, text
    copies = [k for k, s in enumerate(body) if s.startswith("T.copy(")]
    # sync between each consecutive pair of copies
    for a, b in zip(copies, copies[1:]):
        assert SYNC in body[a + 1:b], (a, b, text)


def test_barrier_needed_inside_a_branch_is_hoisted_before_it(tmp_path, monkeypatch):
    text = _barriers(read_in_branch, (_f16(128, 128), _f16(128, 128)), tmp_path, monkeypatch)
    tree = ast.parse(text)
    (branch,) = [n for n in ast.walk(tree) if isinstance(n, ast.If)]
    assert "__tj_sync" not in ast.unparse(branch), text     # never skipped by some threads
    body = _body_lines(text)
    k = next(i for i, s in enumerate(body) if s.startswith("if "))
    assert body[k - 1] == SYNC and body.count(SYNC) == 1, text


# ----------------------------------------------------------------------------- shared memory

@tilejit.kernel
def three_live(A, B, C, D):
    with T.Kernel(1, threads=128) as bx:
        X = T.alloc_shared((64, 32), T.float16)      # 4096 B
        Y = T.alloc_shared((7, 9), T.float32)        # 252 B -> 256
        Z = T.alloc_shared((3, 5), T.float16)        # 30 B -> 32
        T.copy(A[0, 0], X)
        T.copy(B[0, 0], Y)
        T.copy(C[0, 0], Z)
        for i, j in T.Parallel(3, 5):
            D[i, j] = X[i, j] + Y[i, j] + Z[i, j]


@tilejit.kernel
def reuse(A, B, Out1, Out2, bm: T.constexpr = 64, bn: T.constexpr = 64):
    """P is dead after the first T.Parallel; Q is allocated after it: Q may reuse P's
    bytes (shapes must be multiples of the block: the loops index global directly)."""
    M, N = A.shape
    with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
        P = T.alloc_shared((bm, bn), T.float32)
        T.copy(A[by * bm, bx * bn], P)
        for i, j in T.Parallel(bm, bn):
            Out1[by * bm + i, bx * bn + j] = P[bm - 1 - i, j]
        Q = T.alloc_shared((bm, bn), T.float32)
        T.copy(B[by * bm, bx * bn], Q)
        for i, j in T.Parallel(bm, bn):
            Out2[by * bm + i, bx * bn + j] = Q[i, bn - 1 - j] * 10.0


reuse_sim = tilejit.kernel(reuse.func, target="sim")


@tilejit.kernel
def reuse_allocated_first(A, B, Out1, Out2, bm: T.constexpr = 64, bn: T.constexpr = 64):
    """As ``reuse``, with both tiles allocated at the top, as the seeds write kernels
    (FlashAttention's O_shared): an allocation is not a use, so Q still takes P's bytes."""
    M, N = A.shape
    with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
        P = T.alloc_shared((bm, bn), T.float32)
        Q = T.alloc_shared((bm, bn), T.float32)
        T.copy(A[by * bm, bx * bn], P)
        for i, j in T.Parallel(bm, bn):
            Out1[by * bm + i, bx * bn + j] = P[bm - 1 - i, j]
        T.copy(B[by * bm, bx * bn], Q)
        for i, j in T.Parallel(bm, bn):
            Out2[by * bm + i, bx * bn + j] = Q[i, bn - 1 - j] * 10.0


@tilejit.kernel
def too_big(A, B, rows: T.constexpr = 256):
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((rows, 256), T.float32)
        T.copy(A[0, 0], S)
        T.copy(S, B[0, 0])


def test_shared_bytes_is_the_sum_of_aligned_tiles_when_all_live():
    compiled = three_live.compile(_f16(64, 32), _f32(7, 9), _f16(3, 5), _f32(3, 5),
                                  target="cuda", arch="sm_90")
    assert compiled.shared_bytes == 4096 + 256 + 32


def test_shared_tiles_all_live_do_not_overlap(tmp_path, monkeypatch):
    _, files = _dump(three_live, (_f16(64, 32), _f32(7, 9), _f16(3, 5), _f32(3, 5)),
                     tmp_path, monkeypatch)
    plan = files["tile_plan.txt"]
    offsets = {}
    for line in plan.splitlines():
        if line.startswith("shared "):
            name = line.split()[1].split("[")[0]
            offsets[name] = int(line.split("@ byte ")[1].split()[0])
    assert sorted(offsets) == ["X", "Y", "Z"]
    spans = sorted((offsets[n], offsets[n] + s) for n, s in
                   (("X", 4096), ("Y", 256), ("Z", 32)))
    for (_s0, e0), (s1, _e1) in zip(spans, spans[1:]):
        assert e0 <= s1, spans
    assert all(o % 16 == 0 for o in offsets.values())


@pytest.mark.parametrize("kernel", [reuse, reuse_allocated_first], ids=["late", "first"])
def test_tiles_with_disjoint_live_ranges_share_bytes(tmp_path, monkeypatch, kernel):
    compiled, files = _dump(kernel, (_f32(128, 128),) * 4, tmp_path, monkeypatch)
    assert compiled.shared_bytes == 64 * 64 * 4 < 2 * 64 * 64 * 4
    plan = files["tile_plan.txt"]
    assert "shared P[64, 64] float32 @ byte 0" in plan, plan
    assert "shared Q[64, 64] float32 @ byte 0" in plan, plan
    # Q's copy overwrites P's bytes, which other threads have just read: a barrier between
    body = _body_lines(files["after_insert_barriers.py"])
    p_read = next(k for k, s in enumerate(body) if s.startswith("for ") and "Parallel" in s)
    q_copy = next(k for k, s in enumerate(body) if s.startswith("T.copy(__tj_region(B,"))
    assert p_read < q_copy and SYNC in body[p_read + 1:q_copy], body


def test_reused_bytes_give_the_right_answer_in_simulation():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(128, 64, generator=g), torch.randn(128, 64, generator=g)
    out1, out2 = torch.zeros(128, 64), torch.zeros(128, 64)
    reuse(a, b, out1, out2)
    ref1, ref2 = torch.empty(128, 64), torch.empty(128, 64)
    for r0 in range(0, 128, 64):
        ref1[r0:r0 + 64] = a[r0:r0 + 64].flip(0)
        ref2[r0:r0 + 64] = b[r0:r0 + 64].flip(1) * 10.0
    torch.testing.assert_close(out1, ref1, rtol=0, atol=0)
    torch.testing.assert_close(out2, ref2, rtol=0, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", [reuse, reuse_allocated_first], ids=["late", "first"])
def test_reused_bytes_give_the_right_answer_on_gpu(kernel):
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(256, 192, generator=g), torch.randn(256, 192, generator=g)
    outs = [torch.zeros(256, 192, device="cuda") for _ in range(2)]
    kernel(a.cuda(), b.cuda(), *outs)
    torch.cuda.synchronize()
    outs_sim = [torch.zeros(256, 192) for _ in range(2)]
    reuse_sim(a, b, *outs_sim)
    for o, o_sim in zip(outs, outs_sim):
        torch.testing.assert_close(o.cpu(), o_sim, rtol=0, atol=0)
    torch.testing.assert_close(outs_sim[0][:64], a[:64].flip(0), rtol=0, atol=0)


@tilejit.kernel
def unused_tile(A, B, unused_rows: T.constexpr = 224):
    # TileLang's dequantizing GEMM allocates a bias tile it does not use without a bias
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((128, 128), T.float32)           # 64 KB
        U = T.alloc_shared((unused_rows, 256), T.float32)   # 224 KB, never used
        T.copy(A[0, 0], S)
        for i, j in T.Parallel(128, 128):
            B[i, j] = S[i, 127 - j] + 1.0


def test_an_unused_tile_takes_no_bytes_where_the_kernel_would_not_fit_otherwise():
    a, b = _f32(128, 128), _f32(128, 128)
    compiled = unused_tile.compile(a, b, target="cuda", arch="sm_90a")
    assert compiled.shared_bytes == 128 * 128 * 4
    # within the limit it keeps its bytes (the placement of kernels that fit is unchanged)
    assert unused_tile.compile(a, b, unused_rows=8, target="cuda",
                               arch="sm_90a").shared_bytes == 128 * 128 * 4 + 8 * 256 * 4
    x = torch.randn(128, 128)
    out = torch.zeros(128, 128)
    unused_tile(x, out)
    torch.testing.assert_close(out, x.flip(1) + 1.0, rtol=0, atol=0)


@pytest.mark.gpu
def test_an_unused_tile_takes_no_bytes_on_the_gpu():
    x = torch.randn(128, 128)
    out = torch.zeros(128, 128, device="cuda")
    unused_tile(x.cuda(), out)
    torch.cuda.synchronize()
    torch.testing.assert_close(out.cpu(), x.flip(1) + 1.0, rtol=0, atol=0)


def test_over_the_shared_memory_limit_is_a_compile_error():
    a = _f32(256, 256)
    with pytest.raises(tilejit.CompileError) as info:
        too_big.compile(a, a.copy(), target="cuda", arch="sm_90")
    msg = str(info.value)
    assert "262144" in msg and "232448" in msg and "shared memory" in msg, msg


def test_shared_memory_limit_depends_on_the_arch():
    a = _f32(256, 256)
    # 200 x 256 float32 = 204800 bytes: fits sm_90, not sm_80 (166912)
    assert too_big.compile(a, a.copy(), target="cuda", arch="sm_90",
                           rows=200).shared_bytes == 204800
    with pytest.raises(tilejit.CompileError, match="204800.*166912"):
        too_big.compile(a, a.copy(), target="cuda", arch="sm_80", rows=200)


# ----------------------------------------------------------------------------- errors

@tilejit.kernel
def frag_outside_parallel(A):
    with T.Kernel(1, threads=128) as bx:
        F = T.alloc_fragment((64, 64), T.float32)
        T.clear(F)
        F[0, 0] = 1.0                                  # marker: outside
        T.copy(F, A[0, 0])


@tilejit.kernel
def frag_wrong_indices(A):
    with T.Kernel(1, threads=128) as bx:
        F = T.alloc_fragment((64, 64), T.float32)
        T.clear(F)
        for i, j in T.Parallel(64, 64):
            F[i, j] = F[j, i] + 1.0                    # marker: transposed
        T.copy(F, A[0, 0])


@tilejit.kernel
def frag_wrong_extents(A):
    with T.Kernel(1, threads=128) as bx:
        F = T.alloc_fragment((64, 64), T.float32)
        T.clear(F)
        for i, j in T.Parallel(64, 96):                # marker: extents
            F[i, j] = 1.0
        T.copy(F, A[0, 0])


@tilejit.kernel
def runtime_tile_shape(A, n):
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((n, 64), T.float32)         # marker: runtime shape
        T.copy(A[0, 0], S)
        T.copy(S, A[0, 0])


@tilejit.kernel
def gemm_mismatch(A, B, C):
    with T.Kernel(1, threads=128) as bx:
        A_s = T.alloc_shared((64, 32), T.float16)
        B_s = T.alloc_shared((32, 64), T.float16)
        C_f = T.alloc_fragment((64, 32), T.float32)
        T.copy(A[0, 0], A_s)
        T.copy(B[0, 0], B_s)
        T.gemm(A_s, B_s, C_f)                          # marker: mismatch
        T.copy(C_f, C[0, 0])


@tilejit.kernel
def two_policies(A, B, C):
    with T.Kernel(1, threads=128) as bx:
        A_s = T.alloc_shared((64, 32), T.float16)
        B_s = T.alloc_shared((32, 64), T.float16)
        C_f = T.alloc_fragment((64, 64), T.float32)
        T.copy(A[0, 0], A_s)
        T.copy(B[0, 0], B_s)
        T.gemm(A_s, B_s, C_f, policy=T.GemmWarpPolicy.Square)     # marker: first
        T.gemm(A_s, B_s, C_f, policy=T.GemmWarpPolicy.FullRow)    # marker: second
        T.copy(C_f, C[0, 0])


@tilejit.kernel
def region_too_long(A, B):
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((32, 64), A.dtype)
        T.copy(A[0:64, 0:64], S)                       # marker: a region past the tile
        T.copy(S, B[0, 0])


def _compile_error(kernel, args, **kw):
    with pytest.raises(tilejit.CompileError) as info:
        kernel.compile(*args, target="cuda", arch="sm_90", **kw)
    return str(info.value)


def _assert_names_line(msg, kernel, marker):
    line = _line_of(kernel, marker)
    assert f"line {line}" in msg, msg
    assert "test_tile_passes.py" in msg, msg


def test_fragment_indexed_outside_parallel():
    msg = _compile_error(frag_outside_parallel, (_f32(64, 64),))
    assert "fragment 'F'" in msg and "T.Parallel" in msg, msg
    _assert_names_line(msg, frag_outside_parallel, "marker: outside")
    assert "F[0, 0] = 1.0" in msg, msg


def test_fragment_outside_parallel_fails_in_simulation_too():
    with pytest.raises(tilejit.CompileError, match="T.Parallel"):
        frag_outside_parallel(_f32(64, 64))


def test_fragment_indexed_with_other_indices():
    msg = _compile_error(frag_wrong_indices, (_f32(64, 64),))
    assert "loop's indices" in msg and "F[j, i]" in msg, msg
    _assert_names_line(msg, frag_wrong_indices, "marker: transposed")


def test_parallel_over_fragment_with_wrong_extents():
    msg = _compile_error(frag_wrong_extents, (_f32(64, 64),))
    # a loop over the first elements is a prefix loop (passes/prefix_loops.py); past the
    # fragment's end it is an error
    assert ("index 'j' of this T.Parallel runs to 95, past the extent 64 of fragment 'F' "
            "(shape (64, 64)): an access out of its bounds") in msg, msg
    _assert_names_line(msg, frag_wrong_extents, "marker: extents")


def test_a_guarded_loop_past_a_fragments_end_keeps_the_general_message(tmp_path):
    source = tmp_path / "guarded.py"
    source.write_text("import tilejit, tilejit.language as T\n"
                      "@tilejit.kernel\n"
                      "def guarded(A):\n"
                      "    with T.Kernel(1, threads=64) as bx:\n"
                      "        F = T.alloc_fragment((64,), T.float32)\n"
                      "        T.copy(A, F)\n"
                      "        for i in T.Parallel(128):\n"
                      "            if i < 64:\n"
                      "                F[i] = F[i] + 1.0\n"
                      "        T.copy(F, A)\n")
    namespace = {}
    exec(compile(source.read_text(), str(source), "exec"), namespace)
    msg = _compile_error(namespace["guarded"], (_f32(64),))
    assert "must cover its shape (64,)" in msg and "out of its bounds" not in msg, msg


def test_parallel_past_a_fragments_end_fails_in_simulation_too():
    # TileLang's attention-sink backward writes `sinks[i]`, sinks of shape (heads,), in a
    # T.Parallel over block_M: out of bounds there, an error here on every target
    with pytest.raises(tilejit.CompileError, match="past the extent 64 of fragment 'F'"):
        frag_wrong_extents(_f32(64, 64))


def test_tile_shape_not_known_at_compile_time():
    msg = _compile_error(runtime_tile_shape, (_f32(64, 64), 64))
    assert "compile time" in msg and "(n, 64)" in msg, msg
    _assert_names_line(msg, runtime_tile_shape, "marker: runtime shape")


def test_gemm_with_mismatched_shapes():
    msg = _compile_error(gemm_mismatch, (_f16(64, 32), _f16(32, 64), _f32(64, 32)))
    assert "shapes do not match" in msg and "64x32" in msg, msg
    _assert_names_line(msg, gemm_mismatch, "marker: mismatch")


def test_accumulator_of_two_gemms_with_different_policies():
    msg = _compile_error(two_policies, (_f16(64, 32), _f16(32, 64), _f32(64, 64)))
    assert "C_f" in msg and "two different layouts" in msg, msg
    first, second = _line_of(two_policies, "marker: first"), _line_of(two_policies,
                                                                        "marker: second")
    assert f"line {first}" in msg and f"line {second}" in msg, msg
    assert "GemmWarpPolicy.Square" in msg and "GemmWarpPolicy.FullRow" in msg, msg


def test_same_policy_twice_is_fine():
    # the control for the test above: the same warp policy twice compiles
    @tilejit.kernel
    def twice(A, B, C):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((64, 32), T.float16)
            B_s = T.alloc_shared((32, 64), T.float16)
            C_f = T.alloc_fragment((64, 64), T.float32)
            T.copy(A[0, 0], A_s)
            T.copy(B[0, 0], B_s)
            T.gemm(A_s, B_s, C_f, policy=T.GemmWarpPolicy.FullRow)
            T.gemm(A_s, B_s, C_f, policy=T.GemmWarpPolicy.FullRow)
            T.copy(C_f, C[0, 0])
    twice.compile(_f16(64, 32), _f16(32, 64), _f32(64, 64), target="cuda", arch="sm_90")


def test_region_longer_than_the_tile_is_a_compile_error():
    msg = _compile_error(region_too_long, (_f32(64, 64), _f32(64, 64)))
    assert "(64, 64)" in msg and "(32, 64)" in msg, msg


def test_region_longer_than_the_tile_fails_in_simulation():
    with pytest.raises((ValueError, tilejit.CompileError), match="differ"):
        region_too_long(_f32(64, 64), _f32(64, 64))


@tilejit.kernel
def scale_staged_then_gemm(A, B, C):
    M, K = A.shape
    N = B.shape[1]
    with T.Kernel(T.ceildiv(N, 64), T.ceildiv(M, 64), threads=128) as (bx, by):
        A_s = T.alloc_shared((64, 32), A.dtype)
        B_s = T.alloc_shared((32, 64), B.dtype)
        C_f = T.alloc_fragment((64, 64), T.float32)
        T.clear(C_f)
        for k in T.Pipelined(T.ceildiv(K, 32), num_stages=2):
            T.copy(A[by * 64, k * 32], A_s)
            T.copy(B[k * 32, bx * 64], B_s)
            for i, j in T.Parallel(64, 32):
                A_s[i, j] = A_s[i, j] * 2.0
            T.gemm(A_s, B_s, C_f)
        T.copy(C_f, C[by * 64, bx * 64])


def test_element_writes_to_a_pipelined_stage_are_seen(tmp_path, monkeypatch):
    """A consumer writing one stage of a pipelined tile element by element
    (``__tj_stage(A_s, k % 2)[i, j] = ...``) and the gemm reading it need a barrier."""
    text = _barriers(scale_staged_then_gemm, (_f16(128, 128), _f16(128, 128),
                                              _f16(128, 128)), tmp_path, monkeypatch)
    body = _body_lines(text)
    gemm = next(k for k, s in enumerate(body) if s.startswith("__tj_gemm("))
    write = max(k for k in range(gemm) if "__tj_stage(A_s" in body[k] and "] =" in body[k])
    assert SYNC in body[write + 1:gemm], text


@pytest.mark.gpu
def test_element_writes_to_a_pipelined_stage_gpu():
    import torch
    a = torch.randn(512, 1024, dtype=torch.float16, device="cuda")
    b = torch.randn(1024, 512, dtype=torch.float16, device="cuda")
    c = torch.empty(512, 512, dtype=torch.float16, device="cuda")
    for _ in range(3):
        scale_staged_then_gemm(a, b, c)
        torch.cuda.synchronize()
        ref = (2 * a.double()) @ b.double()
        torch.testing.assert_close(c.double(), ref, rtol=2e-2, atol=2e-1)


# ------------------------------------------------------- pipeline: invariant index arithmetic

@tilejit.kernel
def grouped_rows(A, B, group: T.constexpr = 2, bm: T.constexpr = 32, bk: T.constexpr = 32):
    """Each block sums the K tiles of row block ``by // group``: the producer's index has
    arithmetic that does not depend on the loop."""
    H, M, K = A.shape
    with T.Kernel(T.ceildiv(M, bm), H * group, threads=128) as (bx, by):
        A_s = T.alloc_shared((bm, bk), A.dtype)
        acc = T.alloc_fragment((bm, bk), T.float32)
        T.clear(acc)
        for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
            T.copy(A[by // group, bx * bm:(bx + 1) * bm, k * bk:(k + 1) * bk], A_s)
            for i, j in T.Parallel(bm, bk):
                acc[i, j] += A_s[i, j]
        T.copy(acc, B[by, bx * bm:(bx + 1) * bm, :])


grouped_rows_sim = tilejit.kernel(grouped_rows.func, target="sim")


def test_pipelined_producer_invariant_index_arithmetic_runs_before_the_loop(tmp_path,
                                                                            monkeypatch):
    """``by // group`` is assigned once before the prologue; the refill inside the loop
    (where LLVM may not hoist a division) uses the name."""
    args = (_f16(3, 64, 96), _f32(6, 64, 32))
    _, files = _dump(grouped_rows, args, tmp_path, monkeypatch)
    tree = ast.parse(files["after_pipeline_loops.py"])
    (loop,) = [n for n in ast.walk(tree) if isinstance(n, ast.For)
               and isinstance(n.target, ast.Name) and n.target.id == "k"]
    assert not [n for n in ast.walk(loop) if isinstance(n, ast.BinOp)
                and isinstance(n.op, ast.FloorDiv)], ast.unparse(loop)
    before = [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Assign)
              and n.lineno <= loop.lineno and "//" in ast.unparse(n.value)]
    assert any("by // group" in s and s.startswith("__tj_inv") for s in before), before


def test_hoisted_index_arithmetic_gives_the_right_answer_in_simulation():
    a = np.random.default_rng(0).standard_normal((3, 64, 96)).astype(np.float16)
    b = np.zeros((6, 64, 32), np.float32)
    grouped_rows_sim(a, b)
    ref = a.astype(np.float32).reshape(3, 64, 3, 32).sum(axis=2)
    np.testing.assert_allclose(b, np.repeat(ref, 2, axis=0), rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
def test_hoisted_index_arithmetic_gives_the_right_answer_on_gpu():
    a = torch.randn(3, 64, 96, dtype=torch.float16, device="cuda")
    b = torch.zeros(6, 64, 32, dtype=torch.float32, device="cuda")
    grouped_rows(a, b)
    ref = a.float().reshape(3, 64, 3, 32).sum(dim=2).repeat_interleave(2, dim=0)
    torch.testing.assert_close(b, ref, rtol=1e-3, atol=1e-3)
    out = torch.zeros_like(b).cpu().numpy()
    grouped_rows_sim(a.cpu().numpy(), out)
    torch.testing.assert_close(b.cpu(), torch.from_numpy(out), rtol=1e-3, atol=1e-3)


def test_pipeline_stage_indices_are_loop_counters_not_divisions(tmp_path, monkeypatch):
    """k % S and (k + S - 1) % S are carried by the loop as counters: no modulo in the
    steady loop (a 64-bit k % 3 was a chain of wide multiplies after the barrier)."""
    _, files = _dump(mm_pipelined, _mm_args(), tmp_path, monkeypatch)
    tree = ast.parse(files["after_pipeline_loops.py"])
    (loop,) = [n for n in ast.walk(tree) if isinstance(n, ast.For)
               and isinstance(n.target, ast.Name) and n.target.id == "k"]
    assert not [n for n in ast.walk(loop) if isinstance(n, ast.BinOp)
                and isinstance(n.op, ast.Mod)], ast.unparse(loop)
    stages = {ast.unparse(n.args[1]) for n in ast.walk(loop) if isinstance(n, ast.Call)
              and isinstance(n.func, ast.Name) and n.func.id == "__tj_stage"}
    assert len(stages) == 2 and all(s.startswith(("__tj_cs", "__tj_rs")) for s in stages)


@tilejit.kernel
def rows_skipping(A, B, bm: T.constexpr = 32, bk: T.constexpr = 32):
    """A pipelined loop whose consumer may ``continue``: the stage indices stay k % S."""
    M, K = A.shape
    with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
        A_s = T.alloc_shared((bm, bk), A.dtype)
        acc = T.alloc_fragment((bm, bk), T.float32)
        T.clear(acc)
        for k in T.Pipelined(T.ceildiv(K, bk), num_stages=3):
            T.copy(A[bx * bm:(bx + 1) * bm, k * bk:(k + 1) * bk], A_s)
            if k % 2 == 1:
                continue
            for i, j in T.Parallel(bm, bk):
                acc[i, j] += A_s[i, j]
        T.copy(acc, B[bx * bm:(bx + 1) * bm, :])


def test_pipeline_with_continue_keeps_the_modulo(tmp_path, monkeypatch):
    _, files = _dump(rows_skipping, (_f16(64, 160), _f32(64, 32)), tmp_path, monkeypatch)
    tree = ast.parse(files["after_pipeline_loops.py"])
    (loop,) = [n for n in ast.walk(tree) if isinstance(n, ast.For)
               and isinstance(n.target, ast.Name) and n.target.id == "k"]
    assert "__tj_stage(A_s, k % 3)" in ast.unparse(loop)


@pytest.mark.gpu
def test_pipeline_with_continue_on_gpu():
    a = torch.randn(64, 160, dtype=torch.float16, device="cuda")
    b = torch.zeros(64, 32, dtype=torch.float32, device="cuda")
    rows_skipping(a, b)
    ref = a.float().reshape(64, 5, 32)[:, 0::2].sum(dim=1)
    torch.testing.assert_close(b, ref, rtol=1e-3, atol=1e-3)


def test_pipeline_with_continue_in_simulation():
    a = np.random.default_rng(1).standard_normal((64, 160)).astype(np.float16)
    b = np.zeros((64, 32), np.float32)
    tilejit.kernel(rows_skipping.func, target="sim")(a, b)
    ref = a.astype(np.float32).reshape(64, 5, 32)[:, 0::2].sum(axis=1)
    np.testing.assert_allclose(b, ref, rtol=1e-3, atol=1e-3)


def test_pipelined_gemm_issues_the_refill_after_its_first_ldmatrix(tmp_path, monkeypatch):
    """The steady loop's refill is handed to the gemm (its operands past the 4th: the
    condition, then source/destination pairs), which issues it after the first k-step's
    ldmatrix; the loop body has no refill statement of its own."""
    _, files = _dump(mm_pipelined, _mm_args(), tmp_path, monkeypatch)
    tree = ast.parse(files["after_pipeline_loops.py"])
    (loop,) = [n for n in ast.walk(tree) if isinstance(n, ast.For)
               and isinstance(n.target, ast.Name) and n.target.id == "k"]
    (gemm,) = [n for n in ast.walk(loop) if isinstance(n, ast.Call)
               and isinstance(n.func, ast.Name) and n.func.id == "__tj_gemm"]
    assert len(gemm.args) == 5 + 4, ast.unparse(gemm)     # A, B, C, id, cond, 2 pairs
    assert ast.unparse(gemm.args[4]).startswith("k + 1 <")
    assert "__tj_copy_async" not in ast.unparse(loop)
