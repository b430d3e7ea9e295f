"""TileLang's ``tilelang.profiler``: ``do_bench(fn, warmup, rep)``, the median time
in milliseconds (``tilejit.testing.do_bench``)."""
from tilejit.tuning.bench import do_bench

__all__ = ["do_bench"]
