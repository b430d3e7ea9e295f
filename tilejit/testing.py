"""``tilejit.testing``: ``do_bench(fn, warmup, rep)`` (TileLang's ``tilelang.testing``
path; implemented in ``tilejit/tuning/bench.py``)."""
from tilejit.tuning.bench import do_bench

__all__ = ["do_bench"]
