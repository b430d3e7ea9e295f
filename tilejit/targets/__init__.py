"""Targets: ``nvptx`` (LLVM IR → PTX, Numba target contexts), ``cuda_driver`` (load and
launch through cuda.bindings), and the simulator lives in ``tilejit/sim``."""
