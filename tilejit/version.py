"""tilejit's version (part of the disk cache's key)."""
__version__ = "0.1.0"
