"""TileLang's doors: ``tilelang.jit`` (``jit.py``), the classic ``@T.prim_func`` with
``tilelang.compile`` (``classic.py``), ``tilelang.autotuner`` and ``tilelang.profiler``,
so TileLang programs run with only their imports swapped. The top of the tree: built on
the runtime and tuning, imported by nothing below.
"""
