"""Where a ``T.*`` operation finds its meaning when Python runs it.

The language declares its operations (``T.copy``, ``T.gemm``, ``T.exp``, ``T.empty``, …)
as functions: their signatures and documentation say what they are, and the compiler
recognises the function objects themselves. What running one means as Python is given
by the layer that runs it, which installs it here when it is imported: the simulator
(``tilejit/sim``, numpy on whole tiles) for the device operations, the host side
(``tilejit/runtime/host.py``) for ``T.empty``. ``import tilejit`` imports both, so the
table is full before any kernel (or any direct ``T.exp(x)``) runs. The language imports
neither of them.
"""
from __future__ import annotations

_MEANINGS: dict = {}


def install(meanings: dict) -> None:
    """Give ``T.<name>`` the meaning ``meanings[name]`` (a function taking the
    declaration's arguments)."""
    _MEANINGS.update(meanings)


def meaning(name: str):
    """The function that ``T.<name>`` runs as."""
    try:
        return _MEANINGS[name]
    except KeyError:
        raise RuntimeError(f"T.{name} has no meaning here: it runs inside a kernel, compiled "
                           f"or simulated (import tilejit)") from None
