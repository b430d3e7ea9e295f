"""TileLang's ``tilelang.language.tir``: its TIR operations, ``tir.op`` (``from
tilelang.language.tir import op as tir_op``; ``tir_op.abs``, ``tir_op.if_then_else``) and
``tir.ir`` (``T.cast``'s home in TileLang). Each name is ``tilejit.language``'s of the same
name: what tilejit's language has works in a kernel as ``T.<name>`` does, and what it
lacks is refused by name, as ``T.<name>`` is (``compat.py``)."""
from tilejit.language.tir import ir, op  # noqa: F401  (tilelang.language.tir.op, .ir)


def __getattr__(name):
    import tilejit.language as language      # (this package is inside it)
    return getattr(language, name)
