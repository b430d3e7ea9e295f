"""Numba types and typing rules of the tile language (target independent)."""
