"""CuTe-style layout algebra, XOR swizzles and register fragments for tilejit.

* ``layout``   -- ``Layout(shape, stride)`` and its algebra.
* ``swizzle``  -- ``Swizzle``, ``ComposedLayout``, bank-conflict-free smem tiles.
* ``fragment`` -- thread/register distributions (mma.sync and MFMA operands, T.Parallel).
* ``plot``     -- ``plot_fragment`` (needs the optional matplotlib).

Pure algebra: imports nothing from tilejit but ``errors``.
"""
from tilejit.layouts.fragment import (MMA_M16N8K8_TF32_A, MMA_M16N8K8_TF32_B, MMA_M16N8K8_TF32_C,
                                      MMA_M16N8K16_F16_A, MMA_M16N8K16_F16_B, MMA_M16N8K16_F16_C,
                                      MMA_M16N8K32_INT8_A, MMA_M16N8K32_INT8_B,
                                      MMA_M16N8K32_INT8_C, WARP_SIZE, WAVE_SIZE, Fragment,
                                      FragmentInverse, mfma_fragment, mma_fragment,
                                      parallel_fragment, row_groups_fragment,
                                      tile_fragment)
from tilejit.layouts.layout import (Layout, coalesce, complement, composition, concat, flatten,
                                    left_inverse, logical_divide, logical_product, make_layout,
                                    offset_table, right_inverse, zipped_divide)
from tilejit.layouts.plot import plot_fragment
from tilejit.layouts.swizzle import ComposedLayout, Swizzle, make_swizzled_layout, swizzle_for_bytes

__all__ = [
    "ComposedLayout", "Fragment", "FragmentInverse", "Layout", "Swizzle", "WARP_SIZE",
    "WAVE_SIZE",
    "MMA_M16N8K8_TF32_A", "MMA_M16N8K8_TF32_B", "MMA_M16N8K8_TF32_C",
    "MMA_M16N8K16_F16_A", "MMA_M16N8K16_F16_B", "MMA_M16N8K16_F16_C",
    "MMA_M16N8K32_INT8_A", "MMA_M16N8K32_INT8_B", "MMA_M16N8K32_INT8_C",
    "coalesce", "complement", "composition", "concat", "flatten", "left_inverse",
    "logical_divide", "logical_product", "make_layout", "make_swizzled_layout",
    "mfma_fragment", "mma_fragment", "offset_table", "parallel_fragment", "plot_fragment",
    "right_inverse", "row_groups_fragment", "swizzle_for_bytes", "tile_fragment", "zipped_divide",
]
