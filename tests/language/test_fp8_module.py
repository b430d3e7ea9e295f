"""``tilelang.language.fp8``'s helpers (tilejit/language/fp8.py)."""
import pytest
import torch

import tilejit.language as T
from tilejit.language.fp8 import determine_fp8_type, determine_torch_fp8_type


def test_the_platforms_float8_dtypes():
    assert determine_fp8_type() == T.float8_e4m3fn
    assert getattr(torch, determine_fp8_type()) is torch.float8_e4m3fn
    assert determine_fp8_type("e5m2") == T.float8_e5m2
    assert determine_torch_fp8_type("e5m2") is torch.float8_e5m2
    assert determine_torch_fp8_type() is torch.float8_e4m3fn
    with pytest.raises(ValueError, match="fp8_format must be one of"):
        determine_fp8_type("e3m4")
