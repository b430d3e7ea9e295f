"""tilejit quickstart: a vector add, on the GPU when there is one, else in the
simulator. Prints where it ran and that it passed."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vector_add import vector_add  # noqa: E402

from tilejit.runtime.cuda_driver import cuda_available  # noqa: E402


def main():
    n = 1_000_003                      # not a multiple of the block
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and torch.cuda.is_available() and cuda_available():
        where = f"GPU ({torch.cuda.get_device_name()})"
        a = torch.randn(n, device="cuda")
        b = torch.randn(n, device="cuda")
        c = torch.empty_like(a)
        vector_add(a, b, c)
        torch.cuda.synchronize()
        expected = (a.double() + b.double()).float()
        ok = torch.allclose(c, expected, rtol=1e-6, atol=1e-6)
    else:
        where = "simulator (no CUDA device)"
        rng = np.random.default_rng(0)
        a = rng.standard_normal(n, dtype=np.float32)
        b = rng.standard_normal(n, dtype=np.float32)
        c = np.full_like(a, np.nan)
        vector_add(a, b, c)
        ok = np.allclose(c, a.astype(np.float64) + b, rtol=1e-6, atol=1e-6)
    print(f"vector add of {n} elements on the {where}: {'passed' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
