"""TileLang's ``tilelang.language.tir.ir``, where TileLang defines ``T.cast`` (with its
rounding modes, ``_VALID_CAST_ROUNDING_MODES``) and the TIR builders it re-exports: each
name is ``tilejit.language``'s; a name tilejit lacks is refused by name."""
from tilejit.language.numerics import CAST_ROUNDING_MODES as _VALID_CAST_ROUNDING_MODES  # noqa: F401


def __getattr__(name):
    import tilejit.language as language      # (this module is inside it)
    return getattr(language, name)
