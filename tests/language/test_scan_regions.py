"""TileLang's scans of regions of shared tiles (``T.cumsum(src=S[r0:r1, c0:c1],
dst=D[...], dim, reverse)``, ``T.cummax`` alike), and a scan named through a local
(``scan = T.cumsum if op == "cumsum" else T.cummax``): in simulation against torch, the PTX
assembled by ptxas, refusals of other regions on both targets, and on the GPU against torch
and the simulator."""
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError


def scan_regions(M, N, src_pitch, dst_pitch, op, dim, reverse, offset=0):
    """The scan of A written into a wider tile at row ``offset``, out of place into
    another wider tile (or in place, ``dst_pitch`` 0), read back."""
    dst_cols = max(dst_pitch, 1)

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            src_big = T.alloc_shared((M + offset, src_pitch), "float32")
            dst_big = T.alloc_shared((M, dst_cols), "float32")
            for i, j in T.Parallel(M + offset, src_pitch):
                src_big[i, j] = 0.0
            for i, j in T.Parallel(M, N):
                src_big[i + offset, j] = A[i, j]
            scan = T.cumsum if op == "cumsum" else T.cummax
            if dst_pitch:
                scan(src=src_big[offset:offset + M, 0:N], dst=dst_big[0:M, 0:N], dim=dim,
                     reverse=reverse)
                for i, j in T.Parallel(M, N):
                    B[i, j] = dst_big[i, j]
            else:
                scan(src=src_big[offset:offset + M, 0:N], dim=dim, reverse=reverse)
                for i, j in T.Parallel(M, N):
                    B[i, j] = src_big[i + offset, j]
    return main


def _reference(a, op, dim, reverse):
    x = a.double().flip(dim) if reverse else a.double()
    r = x.cumsum(dim) if op == "cumsum" else x.cummax(dim).values
    return r.flip(dim) if reverse else r


CASES = [("cumsum", 0, False, 80, 0), ("cumsum", 1, True, 80, 3), ("cummax", 1, False, 72, 0),
         ("cummax", 0, True, 0, 2), ("cumsum", 1, False, 0, 1)]


@pytest.mark.parametrize("op, dim, reverse, dst_pitch, offset", CASES)
def test_scans_of_regions_in_simulation(op, dim, reverse, dst_pitch, offset):
    a = torch.randn(8, 40)
    kernel = tilejit.compile(scan_regions(8, 40, 64, dst_pitch, op, dim, reverse, offset),
                             out_idx=-1, target="sim")
    torch.testing.assert_close(kernel(a).double(), _reference(a, op, dim, reverse),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_scans_of_regions_assemble(arch, ptxas):
    for op, dim, reverse, dst_pitch, offset in CASES[:2]:
        kernel = tilejit.compile(scan_regions(8, 40, 64, dst_pitch, op, dim, reverse, offset),
                                 out_idx=-1, target=f"cuda -arch={arch}")
        ptxas(kernel.get_kernel_source(), arch)


def fragment_region():
    @T.prim_func
    def main(B: T.Tensor((8, 40), "float32")):
        with T.Kernel(1, threads=128):
            F = T.alloc_fragment((8, 64), "float32")
            T.fill(F, 1.0)
            T.cumsum(src=F[0:8, 0:40], dim=1)
            T.copy(F[0:8, 0:40], B)
    return main


def mismatched_regions():
    @T.prim_func
    def main(B: T.Tensor((8, 40), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((8, 64), "float32")
            D = T.alloc_shared((8, 64), "float32")
            T.fill(S, 1.0)
            T.cumsum(src=S[0:8, 0:40], dst=D[0:8, 0:32], dim=1)
            T.copy(D[0:8, 0:40], B)
    return main


@pytest.mark.parametrize("target", ["sim", "cuda -arch=sm_90a"])
@pytest.mark.parametrize("program, message", [
    (fragment_region, r"T.cumsum: src: a region of a fragment tile is not supported"),
    (mismatched_regions, r"T.cumsum: the dst region \(8, 32\) must have the src region's "
                         r"shape \(8, 40\)"),
])
def test_other_regions_are_refused_on_both_targets(target, program, message):
    with pytest.raises(CompileError, match=message):
        kernel = tilejit.compile(program(), out_idx=-1, target=target)
        if target == "sim":
            kernel()
        else:
            kernel.get_kernel_source()


@pytest.mark.gpu
@pytest.mark.parametrize("op, dim, reverse, dst_pitch, offset", CASES)
def test_scans_of_regions_on_the_gpu(op, dim, reverse, dst_pitch, offset):
    a = torch.randn(8, 40)
    kernel = tilejit.compile(scan_regions(8, 40, 64, dst_pitch, op, dim, reverse, offset),
                             out_idx=-1)
    got = kernel(a.cuda()).cpu()
    torch.testing.assert_close(got.double(), _reference(a, op, dim, reverse), rtol=1e-5,
                               atol=1e-5)
    torch.testing.assert_close(got, kernel(a), rtol=1e-6, atol=1e-6)
