"""Every example's main(): on the GPU when there is one, else simulated; each checks
its result in float64 and prints where it ran and that it passed."""
import importlib

import pytest

EXAMPLES = ["vector_add", "elementwise_2d", "gemm", "gemm_intrinsics", "gemm_epilogue",
            "softmax", "norms", "row_sum", "splitk_gemm", "flash_attention.flash_attn",
            "torch_compile_block",
            "flash_attention.flash_attn_bwd", "flash_attention.flash_attn_varlen",
            "flash_attention.flash_attn_op"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_main(name, capsys):
    importlib.import_module(name).main()
    out = capsys.readouterr().out
    assert out and "passed" in out and "FAILED" not in out, out
    assert "GPU (" in out or "simulator" in out, out
