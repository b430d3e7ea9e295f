"""Code generation: from the passes' device program to PTX.

``typing/`` gives the tile language Numba types, ``lowering/`` holds one rule per
operation per target (the tables in ``lowering/registry.py``), ``numba_target.py`` and
``numba_pipeline.py`` are the Numba target and compiler pipeline those run in,
``nvptx.py`` links, optimizes and emits PTX with llvmlite. This layer and
``compiler/pipeline.py`` are the only code that imports Numba and llvmlite. May import:
``ir``, ``layouts``, ``language``, ``target``, ``errors``; never the passes, the runtime
or the doors above it.
"""
