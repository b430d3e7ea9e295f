"""TileLang's ``tilelang.language.fp8``: the float8 dtype of the platform.

tilejit's float8 dtypes are the OCP ones CUDA uses, ``float8_e4m3`` (torch's
``float8_e4m3fn``) and ``float8_e5m2``; ROCm's FNUZ variants are not built."""
from __future__ import annotations

_FORMATS = ("e4m3", "e5m2")


def determine_fp8_type(fp8_format: str = "e4m3"):
    """The dtype of ``fp8_format`` ("e4m3" or "e5m2") on this platform, named as torch
    names it: ``T.float8_e4m3fn`` (tilejit's ``float8_e4m3``) or ``T.float8_e5m2``."""
    from tilejit import language as T      # this module is imported by the language
    if fp8_format not in _FORMATS:
        raise ValueError(f"determine_fp8_type: fp8_format must be one of {_FORMATS}, got "
                         f"{fp8_format!r}")
    import torch
    if getattr(torch.version, "hip", None):
        raise NotImplementedError("determine_fp8_type: ROCm's FNUZ float8 dtypes are not "
                                  "supported by tilejit (its float8 dtypes are CUDA's OCP ones)")
    return T.float8_e4m3fn if fp8_format == "e4m3" else T.float8_e5m2


def determine_torch_fp8_type(fp8_format: str = "e4m3"):
    """The torch dtype of ``determine_fp8_type(fp8_format)``."""
    return determine_fp8_type(fp8_format).as_torch()
