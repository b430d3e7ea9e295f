"""TileLang's ``tilelang.language.tir.op`` (TVM's TIR operations as TileLang wraps
them): each name is ``tilejit.language``'s (``tir_op.abs`` is ``T.abs``); a name tilejit
lacks is refused by name."""


def __getattr__(name):
    import tilejit.language as language      # (this module is inside it)
    return getattr(language, name)
