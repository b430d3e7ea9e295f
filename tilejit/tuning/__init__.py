"""Tuning and timing: ``@tilejit.autotune`` (``autotune.py``) and the benchmark timers
(``bench.py``: ``do_bench``, CUDA-event medians, interleaved rounds). Sits above the
runtime; the TileLang doors use it, never the other way round.
"""
