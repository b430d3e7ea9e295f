"""``tilejit.carver.arch``: the device's figures (``driver``; ``CUDA``, the recommender's
view of a device: ``recommend.py``), and TileLang's ways to get one: ``get_arch(target)``,
``auto_infer_current_arch()``, the ``is_*_arch`` tests. tilejit launches on CUDA only:
``CDNA`` (an AMD device) is a name to import, and making one is an error saying so."""
from tilejit.carver.recommend import CUDA
from tilejit.target import sm_number
from tilejit.language.compat import module_getattr

__all__ = ["CUDA", "CDNA", "get_arch", "auto_infer_current_arch", "is_cuda_arch",
           "is_volta_arch", "is_ampere_arch", "is_ada_arch", "is_hopper_arch",
           "is_cdna_arch", "is_cpu_arch", "is_metal_arch", "is_rdna_arch"]


class CDNA:
    """AMD's CDNA devices in TileLang's carver; tilejit's carver knows CUDA devices."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError("carver.arch.CDNA: tilejit's carver recommends for CUDA "
                                  "devices only (its AMD backend compiles without a "
                                  "recommender); use CUDA(\"cuda\") or CUDA(\"sm_90a\")")


def get_arch(target="cuda") -> CUDA:
    """The recommender's device for ``target``: "cuda" (the current device, or sm_90a
    without one), an arch ("sm_80"), or "cuda -arch=sm_80"."""
    text = str(target)
    arch = text.split("-arch=")[-1].split()[0] if "-arch" in text else text
    if arch.startswith("cuda") or arch == "auto":
        return CUDA("cuda")
    if not arch.startswith("sm_"):
        raise ValueError(f"carver.arch.get_arch: tilejit's carver recommends for CUDA "
                         f"devices; got target {target!r}")
    return CUDA(arch)


def auto_infer_current_arch() -> CUDA:
    """The current CUDA device's figures (sm_90a's without one)."""
    return CUDA("cuda")


def _sm(arch) -> int:
    return sm_number(arch.arch) if isinstance(arch, CUDA) else -1


def is_cuda_arch(arch) -> bool:
    return isinstance(arch, CUDA)


def is_volta_arch(arch) -> bool:
    return 70 <= _sm(arch) < 80


def is_ampere_arch(arch) -> bool:
    return 80 <= _sm(arch) < 89


def is_ada_arch(arch) -> bool:
    return _sm(arch) == 89


def is_hopper_arch(arch) -> bool:
    return _sm(arch) == 90


def is_cdna_arch(arch) -> bool:
    return False


is_rdna_arch = is_metal_arch = is_cpu_arch = is_cdna_arch

# TileLang's names this module does not have: an error naming them (``compat.py``)
__getattr__ = module_getattr(
    "tilelang.carver.arch", __name__,
    "tilejit's carver knows CUDA devices (CUDA, get_arch, auto_infer_current_arch, the "
    "is_*_arch tests, driver)")
