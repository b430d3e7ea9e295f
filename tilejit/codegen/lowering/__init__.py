"""Lowering rules: tile-language operations to LLVM IR, one rule per operation per
target, registered in the tables of ``registry.py``."""
