"""What the experiment scripts share and the product does not: environment switches
set around one variant's compilation, and the JSON an experiment writes."""
from __future__ import annotations

import contextlib
import os


@contextlib.contextmanager
def environment(env: dict):
    """``env`` set in ``os.environ`` inside the block, the previous values restored after
    (experiment switches read by the compiler while one variant compiles)."""
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def write_results(path: str, rows: list, **meta) -> None:
    """An experiment's JSON: ``{"meta": {"commit", "gpu", **meta}, "rows": rows}``. The
    commit is ``TILEJIT_COMMIT`` (the device machine's copy of the tree carries no current
    git metadata), the GPU torch's name for the current device ("none" without one)."""
    import json

    import torch
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "none"
    with open(path, "w") as f:
        json.dump({"meta": {"commit": os.environ.get("TILEJIT_COMMIT", "?"), "gpu": gpu,
                            **meta}, "rows": rows}, f, indent=1)
