"""A small fragment loaded from memory by T.copy and read by a subset of a larger
T.Parallel's indices (Mamba3's MIMO forward: ``PsiV[cs, r, p] = v[cs, p] * Psi[r, p]``,
``q[cs, r, n] += q_bias[r, n]``): every thread of the loop reads the elements its own
iterations need, so the fragment follows the loop's distribution reduced along the
dropped index, each thread holding a replica (passes/layout_inference.py, ``_resolve``).
Given a distribution of its own, the fragment sat in 16 of 128 threads and the others
read empty registers: rows 1-15 of each chunk wrong on the GPU, right in the simulator,
which holds fragments whole."""
import numpy as np
import pytest

import tilejit
import tilejit as tilelang
import tilejit.language as T

torch = pytest.importorskip("torch")

B, S, H, N, P, R, CS = 2, 32, 3, 32, 64, 2, 16
NCH = S // CS


@tilelang.jit
def up_project(q, v, mimo_v, q_bias):
    """Per head and chunk: V rows scaled by the head's (R, P) projection into (CS*R, P),
    Q rows plus the head's (R, N) bias into (CS*R, N), both through a view of the 3-d
    fragment copied to shared and from there to memory."""
    q: T.Tensor((B, S, R, 1, N), T.bfloat16)
    v: T.Tensor((B, S, H, P), T.bfloat16)
    mimo_v: T.Tensor((H, R, P), T.float32)
    q_bias: T.Tensor((H, R, N), T.float32)
    op = T.empty((B, H, NCH, CS * R, P), T.float32)
    oq = T.empty((B, H, NCH, CS * R, N), T.float32)
    with T.Kernel(H, B, threads=128) as (i_h, i_b):
        q_shared = T.alloc_shared((CS * R, N), T.bfloat16)
        psiv_shared = T.alloc_shared((CS * R, P), T.bfloat16)
        v_shared = T.alloc_shared((CS, P), T.bfloat16)
        bias = T.alloc_fragment((R, N), T.bfloat16)
        psi = T.alloc_fragment((R, P), T.bfloat16)
        T.copy(mimo_v[i_h, :, :], psi)
        T.copy(q_bias[i_h, :, :], bias)
        for i in T.serial(NCH):
            start = i * CS
            psiv = T.alloc_fragment((CS, R, P), T.bfloat16)
            for cs, p in T.Parallel(CS, P):
                v_shared[cs, p] = v[i_b, start + cs, i_h, p]
            for cs, r, p in T.Parallel(CS, R, P):
                psiv[cs, r, p] = v_shared[cs, p] * psi[r, p]
            T.copy(T.view(psiv, shape=[CS * R, P]), psiv_shared)
            qf = T.alloc_fragment((CS, R, N), T.bfloat16)
            T.copy(q[i_b, start:start + CS, :, 0, :], qf)
            for cs, r, n in T.Parallel(CS, R, N):
                qf[cs, r, n] += bias[r, n]
            T.copy(T.view(qf, shape=[CS * R, N]), q_shared)
            T.copy(psiv_shared, op[i_b, i_h, i, :, :])
            T.copy(q_shared, oq[i_b, i_h, i, :, :])
    return op, oq


def _inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, S, R, 1, N, generator=g).bfloat16(),
            torch.randn(B, S, H, P, generator=g).bfloat16(),
            torch.randn(H, R, P, generator=g), torch.randn(H, R, N, generator=g))


def _reference(q, v, mimo_v, q_bias):
    """float64 of the bf16 products and sums, each rounded to bf16 as the kernel stores."""
    bf = lambda t: t.bfloat16().double()    # noqa: E731
    vv = v.double().permute(0, 2, 1, 3).reshape(B, H, NCH, CS, 1, P)
    op = bf(vv * bf(mimo_v).reshape(1, H, 1, 1, R, P)).reshape(B, H, NCH, CS * R, P)
    qq = q[:, :, :, 0].double().reshape(B, 1, NCH, CS, R, N)
    oq = bf(qq + bf(q_bias).reshape(1, H, 1, 1, R, N)).reshape(B, H, NCH, CS * R, N)
    return op, oq


def _plan(tmp_path, monkeypatch, arch="sm_80"):
    monkeypatch.setenv("TILEJIT_DUMP_IR", str(tmp_path))
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    args = [t.numpy() if t.dtype != torch.bfloat16 else t for t in _inputs()]
    tilejit.kernel(up_project.func).compile(*args, target="cuda", arch=arch)
    (directory,) = tmp_path.iterdir()
    (path,) = [p for p in directory.iterdir() if p.name.endswith("_tile_plan.txt")]
    return path.read_text()


def test_the_simulator_matches_float64():
    args = _inputs()
    op, oq = up_project(*args)
    want_p, want_q = _reference(*args)
    torch.testing.assert_close(op.double(), want_p, rtol=0, atol=0)
    torch.testing.assert_close(oq.double(), want_q, rtol=0, atol=0)


def test_the_subset_read_fragments_hold_replicas_on_every_thread(tmp_path, monkeypatch):
    plan = _plan(tmp_path, monkeypatch)
    lines = {line.split("[")[0].split()[-1]: line for line in plan.splitlines()
             if line.startswith("fragment ") and not line.startswith("fragment loop")}
    for name, loop in (("psi", "psiv"), ("bias", "qf")):
        assert "reduced along dim 0" in lines[name], lines[name]
        assert f"indexed by a subset of the loop over {loop!r}" in lines[name], lines[name]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_assembles(arch, ptxas):
    args = [t.numpy() if t.dtype != torch.bfloat16 else t for t in _inputs()]
    ptx = up_project.compile(*args, target="cuda", arch=arch).get_kernel_source()
    assert "ld.global" in ptx and "st.shared" in ptx
    ptxas(ptx, arch)


@pytest.mark.gpu
def test_on_the_gpu_against_float64_and_the_simulator():
    args = _inputs(1)
    op, oq = up_project(*(t.cuda() for t in args))
    want_p, want_q = _reference(*args)
    torch.testing.assert_close(op.cpu().double(), want_p, rtol=0, atol=0)
    torch.testing.assert_close(oq.cpu().double(), want_q, rtol=0, atol=0)
    sim_p, sim_q = up_project(*args)
    assert np.array_equal(op.cpu().numpy(), sim_p.numpy())
    assert np.array_equal(oq.cpu().numpy(), sim_q.numpy())
