"""``tilejit.utils``: TileLang's ``tilelang.utils`` module path (its tensor helpers:
``TensorSupplyType``, ``get_tensor_supply``, ``torch_assert_close``). The helpers are in
``tilejit/tilelang/utils.py``; ``tilejit.utils.tensor`` is TileLang's
``tilelang.utils.tensor`` path to the same ones."""
from tilejit.tilelang.utils import TensorSupplyType, get_tensor_supply, torch_assert_close

__all__ = ["TensorSupplyType", "get_tensor_supply", "torch_assert_close"]
