"""Compiler passes, each a named step in its own file, called from the pipeline."""
