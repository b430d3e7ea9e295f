"""TileLang's ``tilelang.cuda.intrinsics.macro``: the emitters tilejit builds
(``mma_macro_generator``)."""
from tilejit.language.compat import module_getattr

# TileLang's names this module does not have: an error naming them (``compat.py``)
__getattr__ = module_getattr(
    "tilelang.cuda.intrinsics.macro", __name__,
    "of TileLang's MMA macro generators tilejit has TensorCoreIntrinEmitter (mma.sync; not the "
    "ladder, wgmma or tcgen05 emitters)")
