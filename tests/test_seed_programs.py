"""The seeds' TileLang programs with only their imports changed (tests/seed_programs/,
copied from the seeds verbatim): run in simulation and, with ``-m gpu``, on the device,
against torch."""
import os
import sys

import pytest
import torch

import tilejit

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "seed_programs"))


def _device(gpu):
    return "cuda" if gpu else "cpu"


def _run_matmul(gpu):
    from seed000_matmul import matmul
    a = torch.randn(256, 128, dtype=torch.float16, device=_device(gpu))
    b = torch.randn(128, 192, dtype=torch.float16, device=_device(gpu))
    c = matmul(a, b, 128, 128, 32)
    err = (c.float() - a.float() @ b.float()).abs().max().item()
    assert err < 1e-2 * (1 + (a.float() @ b.float()).abs().max().item()), err


def _run_matmul_kernel(gpu):
    import seed004_matmul_kernel as mod
    kernel = tilejit.compile(mod.matmul_kernel, target="cuda")
    a = torch.randn(mod.M, mod.K, dtype=torch.float16, device=_device(gpu))
    b = torch.randn(mod.K, mod.N, dtype=torch.float16, device=_device(gpu))
    c = torch.empty(mod.M, mod.N, dtype=torch.float16, device=_device(gpu))
    kernel(a, b, c)
    ref = a.float() @ b.float()
    assert (c.float() - ref).abs().max().item() < 1e-2 * (1 + ref.abs().max().item())


def _run_flashattn(gpu):
    from seed000_flashattn import flashattn
    b, s, h, d = (2, 1024, 4, 128) if gpu else (1, 128, 2, 64)
    q, k, v = (torch.randn(b, s, h, d, dtype=torch.float16, device=_device(gpu))
               for _ in range(3))
    kernel = flashattn(b, h, s, d, True)      # the seed's causal path is complete
    o = kernel(q, k, v)
    ref = torch.nn.functional.scaled_dot_product_attention(
        q.float().transpose(1, 2), k.float().transpose(1, 2), v.float().transpose(1, 2),
        is_causal=True).transpose(1, 2)
    assert (o.float() - ref).abs().max().item() < 2e-2


PROGRAMS = {"seed000_matmul": _run_matmul, "seed004_matmul_kernel": _run_matmul_kernel,
            "seed000_flashattn": _run_flashattn}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_seed_program_simulated(name):
    PROGRAMS[name](gpu=False)


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_seed_program_gpu(name):
    PROGRAMS[name](gpu=True)
