"""A ``@T.macro`` reading a shape symbol of its factory (``n = T.dynamic("n")``, bound
by a tensor's extent in the kernel's annotations, never named in the kernel's body):
the kernel binds it at its top and the macro, inlined, reads that value. A varlen
cumsum (a third-party GDN kernel) searches its sequence offsets so: ``hi =
real_batch_size`` in a macro that returns the batch of a token."""
import numpy as np
import pytest

import tilejit as tilelang
import tilejit.language as T

torch = pytest.importorskip("torch")


def batch_of_tokens(tokens=64):
    batches = T.dynamic("batches")

    @T.macro
    def locate(t, cu):
        # the batch b with cu[b] <= t < cu[b + 1], by bisection over [0, batches)
        lo = T.alloc_var("int32")
        hi = T.alloc_var("int32")
        lo = 0
        hi = batches
        while lo + 1 < hi:
            mid = (lo + hi) // 2
            if cu[mid] <= t:
                lo = mid
            else:
                hi = mid
        return lo

    @T.macro
    def count():
        return batches

    @T.prim_func
    def main(cu: T.Tensor([batches + 1], "int32"), out: T.Tensor([tokens], "int32"),
             total: T.Tensor([1], "int32")):
        with T.Kernel(1, threads=tokens):
            t = T.get_thread_binding()
            out[t] = locate(t, cu)
            if t == 0:
                total[0] = count()
    return main


def _run(target, cu, device="cpu"):
    out = torch.zeros(64, dtype=torch.int32, device=device)
    total = torch.zeros(1, dtype=torch.int32, device=device)
    tilelang.compile(batch_of_tokens(), target=target)(cu.to(device), out, total)
    return out.cpu(), total.cpu()


@pytest.mark.parametrize("offsets", [[0, 10, 30, 64], [0, 1, 2, 3, 40, 64]])
def test_a_macro_reads_the_kernels_value_of_its_factorys_symbol(offsets):
    cu = torch.tensor(offsets, dtype=torch.int32)
    out, total = _run("sim", cu)
    want = np.searchsorted(np.array(offsets), np.arange(64), side="right") - 1
    np.testing.assert_array_equal(out.numpy(), want)
    assert total.item() == len(offsets) - 1


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_assembles(arch, ptxas):
    kernel = tilelang.compile(batch_of_tokens())
    ptxas(kernel.get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
def test_on_the_gpu_against_numpy_and_the_simulator():
    offsets = [0, 7, 8, 50, 64]
    cu = torch.tensor(offsets, dtype=torch.int32)
    out, total = _run(None, cu, "cuda")
    want = np.searchsorted(np.array(offsets), np.arange(64), side="right") - 1
    np.testing.assert_array_equal(out.numpy(), want)
    assert total.item() == 4
    sim_out, sim_total = _run("sim", cu)
    assert torch.equal(out, sim_out) and torch.equal(total, sim_total)
