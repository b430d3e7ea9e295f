"""TileLang's ``tilelang.cuda.intrinsics.macro``: the emitters tilejit builds
(``mma_macro_generator``)."""
