"""``tilejit.utils.tensor``: TileLang's ``tilelang.utils.tensor`` module path
(``tilejit/tilelang/utils.py``)."""
from tilejit.tilelang.utils import TensorSupplyType, get_tensor_supply, torch_assert_close
from tilejit.language.compat import module_getattr

__all__ = ["TensorSupplyType", "get_tensor_supply", "torch_assert_close"]

# TileLang's names this module does not have: an error naming them (``compat.py``)
__getattr__ = module_getattr(
    "tilelang.utils.tensor", __name__,
    "of TileLang's tensor helpers tilejit has TensorSupplyType, get_tensor_supply and "
    "torch_assert_close")
