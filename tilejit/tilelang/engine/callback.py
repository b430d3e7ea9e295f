"""TileLang's ``tilelang.engine.callback``: ``register_cuda_postproc_callback`` and
``register_hip_postproc_callback`` register a function that rewrites the CUDA or HIP
source TileLang generates before nvcc/hipcc compile it. tilejit generates no such
source (it emits PTX and AMDGPU code from LLVM IR), so the names import, as TileLang's
GDN examples import them, and registering a callback raises ``NotSupportedError``."""
from __future__ import annotations

from tilejit.language.compat import NotSupportedError


def _unsupported(name: str, language: str):
    raise NotSupportedError(
        f"tilelang.engine.callback.{name} is not supported by tilejit: it post-processes "
        f"the {language} source TileLang generates for its compiler, and tilejit emits "
        f"device code from LLVM IR without any {language} source; see "
        f"docs/tilelang-compat.md")


def register_cuda_postproc_callback(func=None, override: bool = True):
    _unsupported("register_cuda_postproc_callback", "CUDA C++")


def register_hip_postproc_callback(func=None, override: bool = True):
    _unsupported("register_hip_postproc_callback", "HIP C++")
