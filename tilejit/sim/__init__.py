"""The CPU simulator: the executable definition of the language's semantics.

``transform.py`` rewrites a kernel for whole-tile numpy execution, ``runtime.py`` holds
the values it runs on (tensors with bounds-checked, masked access), ``runner.py`` runs
the blocks of a launch one at a time.
"""
