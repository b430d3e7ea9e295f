"""``tilejit.testing``: TileLang's ``tilelang.testing`` path: ``do_bench(fn, warmup,
rep)`` (``tuning/bench.py``), ``torch_assert_close`` (``tilelang/utils.py``) and
``set_random_seed``."""
import random

from tilejit.tilelang.utils import torch_assert_close
from tilejit.tuning.bench import do_bench

__all__ = ["do_bench", "torch_assert_close", "set_random_seed"]


def set_random_seed(seed: int = 42) -> None:
    """Seed Python's, numpy's and (when installed) torch's generators."""
    import numpy as np
    random.seed(seed)
    np.random.seed(seed)
    try:
        import torch    # only seeded where it is installed
    except ImportError:
        return
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
