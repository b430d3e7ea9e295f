"""TileLang's ``tilelang.engine``: the names its programs import from it
(``engine.callback``'s post-processing hooks)."""
