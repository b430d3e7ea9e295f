"""Targets: ``nvptx`` (LLVM IR → PTX, Numba target contexts), ``cuda_driver`` (load and
launch through cuda.bindings), and the simulator lives in ``tilejit/sim``."""


def sm_number(arch: str) -> int:
    """The compute capability in an arch name ("sm_90a" → 90); 0 for the simulator."""
    digits = "".join(ch for ch in arch if ch.isdigit())
    return int(digits) if digits else 0
