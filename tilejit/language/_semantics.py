"""Where a ``T.*`` operation finds its meaning when Python runs it.

The language declares its operations (``T.copy``, ``T.gemm``, ``T.exp``, ``T.empty``, …)
as functions: their signatures and documentation say what they are, and the compiler
recognises the function objects themselves. What running one means as Python is given
by the layer that runs it, which installs it here when it is imported: the simulator
(``tilejit/sim``, numpy on whole tiles) for the device operations, the host side
(``tilejit/runtime/host.py``) for ``T.empty``. ``import tilejit`` imports the host side
and registers a loader for the simulator, which the first lookup of a meaning not yet
installed runs (a process that only launches compiled kernels never imports the
simulator). The language imports neither of them.
"""
from __future__ import annotations

_MEANINGS: dict = {}
_LOADERS: list = []     # functions that install more meanings, each run once, on demand


def install(meanings: dict) -> None:
    """Give ``T.<name>`` the meaning ``meanings[name]`` (a function taking the
    declaration's arguments)."""
    _MEANINGS.update(meanings)


def install_on_demand(loader) -> None:
    """Run ``loader()`` (which calls ``install``) the first time a meaning is missing."""
    _LOADERS.append(loader)


def meaning(name: str):
    """The function that ``T.<name>`` runs as."""
    found = _MEANINGS.get(name)
    while found is None and _LOADERS:
        _LOADERS.pop(0)()
        found = _MEANINGS.get(name)
    if found is None:
        raise RuntimeError(f"T.{name} has no meaning here: it runs inside a kernel, compiled "
                           f"or simulated (import tilejit)")
    return found
