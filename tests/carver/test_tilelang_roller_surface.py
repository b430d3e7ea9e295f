"""The carver surface TileLang's autotuning examples read (example_gemm_autotune.py):
``carver.arch.CUDA``/``CDNA``/``get_arch``/``auto_infer_current_arch``/``is_*_arch``,
``carver.roller.rasterization.NoRasterization``, a template's ``equivalent_function()``
and the hint fields ``block``, ``warp``, ``rstep``, ``pipeline_stage`` and
``rasterization_plan``, turned into configs as the example turns them."""
import pytest
import torch

from tilejit.carver import arch as carver_arch
from tilejit.carver.arch import CDNA, CUDA
from tilejit.carver.roller.rasterization import NoRasterization, Rasterization2DRow
from tilejit.carver.template import MatmulTemplate


def test_hints_read_as_tilelangs_example_reads_them():
    template = MatmulTemplate(M=1024, N=1024, K=1024, in_dtype="float16",
                              out_dtype="float16", accum_dtype="float32").with_arch(
        CUDA("sm_90a"))
    assert template.equivalent_function() is not None
    hints = template.recommend_hints(topk=5)
    assert hints
    for hint in hints:
        block_m, block_n = hint.block
        warp_m, warp_n = hint.warp
        assert block_m % warp_m == 0 and block_n % warp_n == 0
        assert (block_m // warp_m) * (block_n // warp_n) * 32 == hint.threads
        assert hint.rstep == (hint.block_K,) and hint.pipeline_stage == hint.num_stages
        assert isinstance(hint.rasterization_plan, NoRasterization)


def test_the_equivalent_function_is_the_templates_product():
    a, b = torch.randn(32, 16, dtype=torch.float16), torch.randn(16, 8, dtype=torch.float16)
    c = MatmulTemplate(32, 8, 16).equivalent_function()(a, b)
    assert c.dtype == torch.float16
    torch.testing.assert_close(c, (a.float() @ b.float()).half())


def test_arch_helpers():
    hopper, ampere = carver_arch.get_arch("cuda -arch=sm_90a"), carver_arch.get_arch("sm_80")
    assert carver_arch.is_hopper_arch(hopper) and carver_arch.is_ampere_arch(ampere)
    assert carver_arch.is_cuda_arch(hopper) and not carver_arch.is_cdna_arch(hopper)
    assert carver_arch.is_cuda_arch(carver_arch.auto_infer_current_arch())
    with pytest.raises(NotImplementedError, match="recommends for CUDA devices only"):
        CDNA("hip")
    with pytest.raises(ValueError, match="got target 'metal'"):
        carver_arch.get_arch("metal")
    assert Rasterization2DRow(8).panel_width == 8 and Rasterization2DRow(8) != NoRasterization()
