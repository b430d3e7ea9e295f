"""TileLang's ``tilelang.layout`` (``import tilelang.layout`` becomes this package, as
``tilejit.layout``): ``Layout``, ``Fragment`` and the shared-memory swizzles, defined in
``language/layout.py`` and ``language/fragment_layout.py``, with TileLang's submodules
``layout``, ``fragment`` and ``swizzle``. TileLang's ``make_volta/wgmma/tcgen05mma_swizzled_layout``
and ``make_metadata_layout`` are not built (reading one says so)."""
from __future__ import annotations

from tilejit.language.compat import NotSupportedError, not_in_module
from tilejit.language.fragment_layout import (Fragment, make_fully_replicated_layout_fragment,
                                              make_gemm_fragment_8x8,
                                              make_gemm_fragment_8x8_transposed)
from tilejit.language.layout import (Layout, LayoutError, get_swizzle_layout,
                                     make_full_bank_swizzled_layout,
                                     make_half_bank_swizzled_layout, make_linear_layout,
                                     make_mma_swizzle_layout, make_quarter_bank_swizzled_layout,
                                     make_swizzled_layout)

__all__ = ["Fragment", "Layout", "LayoutError", "get_swizzle_layout",
           "make_fully_replicated_layout_fragment", "make_gemm_fragment_8x8",
           "make_gemm_fragment_8x8_transposed",
           "make_full_bank_swizzled_layout", "make_half_bank_swizzled_layout",
           "make_linear_layout", "make_mma_swizzle_layout", "make_quarter_bank_swizzled_layout",
           "make_swizzled_layout"]

_NOT_BUILT = {
    "make_volta_swizzled_layout": "Volta's mma layouts (tilejit targets sm_80 and newer)",
    "make_wgmma_swizzled_layout": "use make_swizzled_layout(buffer, allow_pad=False): "
                                  "tilejit recognizes the swizzles wgmma reads",
    "make_tcgen05mma_swizzled_layout": "Blackwell's tcgen05 is not built",
    "make_metadata_layout": "T.gemm_sp reads TileLang's natural row-major metadata as "
                            "it is (no layout of it for the sparse tensor cores)",
}


def not_built(module: str, name: str):
    """The error reading TileLang's ``module.name`` gives here (``module`` under
    ``layout``)."""
    if name in _NOT_BUILT:
        return NotSupportedError(
            f"tilejit.{module}.{name} (tilelang.{module}.{name} in TileLang) is not supported "
            f"by tilejit: {_NOT_BUILT[name]}; see docs/tilelang-compat.md")
    return not_in_module(name, f"tilelang.{module}", f"tilejit.tilelang.{module}",
                         "of TileLang's layouts tilejit has Layout, Fragment and the "
                         "shared-memory swizzles (make_swizzled_layout and the bank "
                         "swizzles, get_swizzle_layout, make_mma_swizzle_layout)")


def __getattr__(name):
    raise not_built("layout", name)
