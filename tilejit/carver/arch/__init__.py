"""``tilejit.carver.arch``: the device's figures (``driver``; ``CUDA``, the recommender's
view of a device: ``recommend.py``)."""
from tilejit.carver.recommend import CUDA

__all__ = ["CUDA"]
