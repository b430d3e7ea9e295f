"""``tilejit.utils.tensor``: TileLang's ``tilelang.utils.tensor`` module path
(``tilejit/tilelang/utils.py``)."""
from tilejit.tilelang.utils import TensorSupplyType, get_tensor_supply, torch_assert_close

__all__ = ["TensorSupplyType", "get_tensor_supply", "torch_assert_close"]
