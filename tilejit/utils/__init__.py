"""``tilejit.utils``: TileLang's ``tilelang.utils`` module path (its tensor helpers:
``TensorSupplyType``, ``get_tensor_supply``, ``torch_assert_close``). The helpers are in
``tilejit/tilelang/utils.py``; ``tilejit.utils.tensor`` is TileLang's
``tilelang.utils.tensor`` path to the same ones."""
from tilejit.tilelang.utils import TensorSupplyType, get_tensor_supply, torch_assert_close
from tilejit.language.compat import module_getattr

__all__ = ["TensorSupplyType", "get_tensor_supply", "torch_assert_close"]

# TileLang's names this module does not have: an error naming them (``compat.py``)
__getattr__ = module_getattr(
    "tilelang.utils", __name__,
    "of TileLang's utils tilejit has the tensor helpers (TensorSupplyType, get_tensor_supply, "
    "torch_assert_close) and utils.sparse.compress")
