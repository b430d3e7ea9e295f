"""Source passes: each a named step in its own file, run in order by
``compiler/pipeline.py`` (``SOURCE_PASSES``) on the device program's AST with a
``PassContext`` (``context.py``: the namespace, the Target, the CompileOptions and the
tile plan they fill in). They decide tiles, pipelines, layouts, TMA, shared-memory
offsets, barriers and vector groups, and insert the calls declared in
``ir/markers.py``. May import ``frontend``, ``ir``, ``layouts``, ``language``,
``target``, ``options``, ``errors``; never code generation, the runtime or the
simulator, and no pass imports another for a name.
"""
