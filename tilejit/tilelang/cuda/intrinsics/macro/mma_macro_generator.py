"""TileLang's ``tilelang.cuda.intrinsics.macro.mma_macro_generator``:
``TensorCoreIntrinEmitter`` (``tilejit/language/mma_emitter.py``)."""
from tilejit.language.mma_emitter import TensorCoreIntrinEmitter

__all__ = ["TensorCoreIntrinEmitter"]
