import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))


def _gpu_reason():
    try:
        from tilejit.targets.cuda_driver import cuda_available
    except Exception as e:  # pragma: no cover
        return f"cuda driver bindings unusable: {e}"
    if not cuda_available():
        return "no CUDA device on this machine"
    try:
        import torch
    except ImportError:
        return "GPU tests compare against torch, which is not installed"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    return None


GPU_SKIP_REASON = _gpu_reason()


def pytest_collection_modifyitems(config, items):
    if GPU_SKIP_REASON is None:
        return
    skip = pytest.mark.skip(reason=GPU_SKIP_REASON)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
