"""``T.atomic_or(dst, value, memory_order=None)``, as TileLang's: one integer element of a
global tensor or a shared tile ``|=`` a value, atomically; inside a ``T.Parallel`` every
iteration, outside one the block once. In simulation against a Python reference, in
PTX (``atom.or``/``red.or``, the fence of a release order, assembled for sm_80 and
sm_90a) and, with ``-m gpu``, on the device against the reference and the simulator.
Floats, regions, ``return_prev`` and bad memory orders are errors before anything runs."""
import pytest
import torch

import tilejit
import tilejit.language as T

N = 256


def bit_flags(dtype="int32", order=None):
    """Bit ``i // 4`` of word ``i % 4`` set where A[i] is odd (many lanes per word), a
    block-once or with ``mask`` into word 3, and a shared word or-ed by every lane then
    copied out."""
    @T.prim_func
    def main(A: T.Tensor((N,), dtype), W: T.Tensor((8,), dtype), mask: T.int32):
        with T.Kernel(2, threads=128) as bx:
            S = T.alloc_shared((1,), dtype)
            S[0] = 0
            T.sync_threads()
            for i in T.Parallel(N // 2):
                g = bx * (N // 2) + i
                T.atomic_or(W[g % 4], (A[g] & 1) << (g // 8), memory_order=order)
                T.atomic_or(S[0], (A[g] & 1) << (i % 16))
            T.atomic_or(W[3], mask, order)
            T.sync_threads()
            W[4 + bx] = S[0]
    return main


def _reference(a, mask, dtype):
    words = [0] * 8
    a = a.tolist()
    for g, v in enumerate(a):
        words[g % 4] |= (v & 1) << (g // 8)
    words[3] |= mask
    for b in range(2):
        for i in range(N // 2):
            words[4 + b] |= (a[b * (N // 2) + i] & 1) << (i % 16)
    if dtype == "int32":        # bit 31 is the sign
        words = [w - (1 << 32) if w >= 1 << 31 else w for w in words]
    return words


def _inputs(dtype, device="cpu"):
    g = torch.Generator().manual_seed(3)
    a = torch.randint(0, 1000, (N,), generator=g, dtype=torch.int64)
    return a.to(getattr(torch, dtype)).to(device), torch.zeros(8, dtype=getattr(
        torch, dtype), device=device)


CASES = [("int32", None), ("int32", "release"), ("int64", "seq_cst"), ("uint32", "relaxed")]


@pytest.mark.parametrize("dtype, order", CASES)
def test_atomic_or_in_the_simulator_and_ptx(dtype, order, ptxas):
    kernel = tilejit.compile(bit_flags(dtype, order))
    a, w = _inputs(dtype)
    kernel(a, w, 1 << 30)
    assert w.tolist() == _reference(a, 1 << 30, dtype)
    for arch in ("sm_80", "sm_90a"):
        ptx = kernel.get_kernel_source(arch=arch)
        assert ".or.b" in ptx and ("atom." in ptx or "red." in ptx)
        if order in ("release", "seq_cst"):
            assert "fence." in ptx
        ptxas(ptx, arch)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype, order", CASES)
def test_gpu_atomic_or_matches_the_reference_and_simulator(dtype, order):
    kernel = tilejit.compile(bit_flags(dtype, order))
    a, w = _inputs(dtype, "cuda")
    kernel(a, w, 1 << 30)
    torch.cuda.synchronize()
    assert w.cpu().tolist() == _reference(a.cpu(), 1 << 30, dtype)
    a_cpu, w_cpu = _inputs(dtype)
    kernel(a_cpu, w_cpu, 1 << 30)
    assert torch.equal(w.cpu(), w_cpu)


def misuse(kind):
    @T.prim_func
    def main(A: T.Tensor((N,), "int32"), F: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((N,), "int32")
            for i in T.Parallel(N):
                if kind == "float_destination":
                    T.atomic_or(F[i], 1)
                elif kind == "float_value":
                    T.atomic_or(A[i], 1.5)
                elif kind == "return_prev":
                    A[i] = T.atomic_or(A[0], 1, return_prev=True)
                elif kind == "bad_order":
                    T.atomic_or(A[i], 1, memory_order="sometimes")
            if kind == "region":
                T.atomic_or(A[0:N], S)
    return main


@pytest.mark.parametrize("kind, message", [
    ("float_destination", "int32, int64, uint32, uint64 elements; the destination is float32"),
    ("float_value", "the value must be an integer"),
    ("return_prev", "no return_prev"),
    ("bad_order", "memory_order must be None or one of"),
    ("region", "has no region form"),
])
def test_misuse_is_a_clear_error_in_both_paths(kind, message):
    a = torch.zeros(N, dtype=torch.int32)
    f = torch.zeros(N, dtype=torch.float32)
    with pytest.raises(Exception, match=message):
        tilejit.compile(misuse(kind))(a, f)
    with pytest.raises(Exception, match=message):
        tilejit.compile(misuse(kind)).get_kernel_source(arch="sm_90a")
