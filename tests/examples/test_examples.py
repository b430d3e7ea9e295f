"""Every example's main(): on the GPU when there is one, else simulated; each checks
its result against torch in float64."""
import importlib

import pytest

EXAMPLES = ["gemm", "gemm_epilogue", "softmax", "norms", "row_sum", "splitk_gemm",
            "flash_attention.flash_attn"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_main(name):
    importlib.import_module(name).main()
