"""TileLang's ``tilelang.contrib.nvcc``: the compute-capability queries its programs use
(``arch = nvcc.get_target_compute_version()``; ``assert float(arch) >= 9.0``). The
compiler entry points (``compile_cuda``, ``get_ptx_from_source``, ...) are not built:
tilejit emits PTX itself and never runs nvcc; reading one raises ``NotSupportedError``
naming it."""
from __future__ import annotations

import re

from tilejit.language.compat import module_getattr

_ARCH = re.compile(r"sm_(\d+?)(\d)[af]?$")


def _arch_of(target) -> str | None:
    """``sm_90a`` from a tilejit Target, an arch string (``"sm_90a"``) or a TileLang-style
    target string or dict (``"cuda -arch=sm_90"``, ``{"kind": "cuda", "arch": "sm_90"}``);
    None when it names none."""
    if target is None:
        return None
    arch = getattr(target, "arch", None)
    if arch is None and isinstance(target, dict):
        arch = target.get("arch")
    if arch is None and isinstance(target, str):
        found = re.search(r"sm_\d+[af]?", target)
        arch = found.group(0) if found else None
    return str(arch) if arch else None


def get_target_compute_version(target=None) -> str:
    """The compute capability as TileLang writes it (``"9.0"``, ``"8.6"``): of the
    target's arch when it names one, else of CUDA device 0."""
    arch = _arch_of(target)
    if arch is None:
        # the driver (cuda.bindings) only when the device is asked about
        from tilejit.runtime import cuda_driver
        if not cuda_driver.cuda_available():
            raise ValueError("get_target_compute_version: no CUDA architecture was given "
                             "(target=...) and this machine has no CUDA device")
        arch = cuda_driver.device_arch(0)
    found = _ARCH.match(arch)
    if found is None:
        raise ValueError(f"get_target_compute_version: expected an arch such as 'sm_90a', "
                         f"got {arch!r}")
    return f"{found.group(1)}.{found.group(2)}"


def parse_compute_version(compute_version) -> tuple[int, int]:
    """``"9.0"`` -> ``(9, 0)``."""
    try:
        major, minor = str(compute_version).split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        raise RuntimeError(f"Compute version parsing error: {compute_version!r}") from None


def get_target_arch(compute_version) -> str:
    """``"9.0"`` or ``(9, 0)`` -> ``"90a"`` (the arch-specific variant from 9.0 on)."""
    major, minor = parse_compute_version(compute_version) if isinstance(
        compute_version, str) else compute_version
    return f"{major * 10 + minor}" + ("a" if major >= 9 else "")


def have_fp16(compute_version) -> bool:
    major, minor = parse_compute_version(compute_version)
    return major >= 6 or (major == 5 and minor >= 3)


def have_int8(compute_version) -> bool:
    return parse_compute_version(compute_version)[0] >= 6


def have_tensorcore(compute_version=None, target=None) -> bool:
    if compute_version is None:
        compute_version = get_target_compute_version(target)
    return parse_compute_version(compute_version)[0] >= 7


def have_bf16(compute_version) -> bool:
    return parse_compute_version(compute_version)[0] >= 8


def have_fp8(compute_version) -> bool:
    major, minor = parse_compute_version(compute_version)
    return (major, minor) >= (8, 9)


__getattr__ = module_getattr(
    "tilelang.contrib.nvcc", __name__,
    "it runs NVIDIA's compiler, and tilejit emits PTX itself (no nvcc, no NVRTC)")
