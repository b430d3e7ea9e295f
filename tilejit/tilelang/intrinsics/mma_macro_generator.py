"""TileLang's ``tilelang.intrinsics.mma_macro_generator``: ``TensorCoreIntrinEmitter``
(``tilejit/language/mma_emitter.py``)."""
from tilejit.language.mma_emitter import TensorCoreIntrinEmitter
from tilejit.language.compat import module_getattr

__all__ = ["TensorCoreIntrinEmitter"]

# TileLang's names this module does not have: an error naming them (``compat.py``)
__getattr__ = module_getattr(
    "tilelang.intrinsics.mma_macro_generator", __name__,
    "of TileLang's MMA macro generators tilejit has TensorCoreIntrinEmitter (mma.sync; not the "
    "ladder, wgmma or tcgen05 emitters)")
