"""tilejit's log: ``logging.getLogger("tilejit")``. Nothing is printed unless the program
configures logging; at DEBUG each compilation reports its kernel, specialization, the
duration of each stage and whether the disk cache had it. Turn DEBUG on for tilejit's
logger alone, either with a handler of its own:

    import logging
    log = logging.getLogger("tilejit")
    log.addHandler(logging.StreamHandler())
    log.setLevel(logging.DEBUG)

or with the root's handler, the root kept at WARNING:

    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("tilejit").setLevel(logging.DEBUG)

Not ``logging.basicConfig(level=logging.DEBUG)``: that turns on DEBUG for every library,
and Numba's loggers (``numba.core.ssa``, ``numba.core.byteflow``, which tilejit's
compiles go through) write about two thousand lines for a small kernel's compilation.
And not ``setLevel(DEBUG)`` alone: with no handler on the root either, the records reach
only the ``NullHandler`` below and nothing is printed.

Warnings stay Python warnings (``warnings.warn``: cache, changed globals, autotune).
Imports nothing from tilejit."""
from __future__ import annotations

import contextlib
import logging
import time

logger = logging.getLogger("tilejit")
logger.addHandler(logging.NullHandler())


def set_log_level(level) -> None:
    """TileLang's ``tilelang.set_log_level(level)``: tilejit's logger at ``level``, a
    ``logging`` level or its name (``"WARNING"``, any case). As TileLang's logger does, it
    then prints: a handler to stderr is added where the logger has none of its own but
    the ``NullHandler`` (and the root has none)."""
    import numbers
    if isinstance(level, str):
        value = logging.getLevelName(level.upper())
        if not isinstance(value, int):
            raise ValueError(f"set_log_level: level must be a logging level or one of "
                             f"DEBUG, INFO, WARNING, ERROR, CRITICAL, got {level!r}")
        level = value
    elif isinstance(level, bool) or not isinstance(level, numbers.Integral):
        raise TypeError(f"set_log_level: level must be a logging level (an int) or its "
                        f"name, got {type(level).__name__} {level!r}")
    logger.setLevel(int(level))
    own = [h for h in logger.handlers if not isinstance(h, logging.NullHandler)]
    if not own and not logging.getLogger().handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s [tilejit:%(levelname)s] "
                                               "%(message)s"))
        logger.addHandler(handler)


def debugging() -> bool:
    return logger.isEnabledFor(logging.DEBUG)


class Stages:
    """Durations of a compilation's stages, reported in one DEBUG line at the end."""

    def __init__(self, what: str):
        self.what = what
        self.times: list[tuple[str, float]] = []
        self.start = time.perf_counter()

    @contextlib.contextmanager
    def stage(self, name: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.times.append((name, time.perf_counter() - t0))

    def report(self, suffix: str = "") -> None:
        if not debugging():
            return
        total = time.perf_counter() - self.start
        parts = ", ".join(f"{name} {1e3 * t:.1f} ms" for name, t in self.times)
        logger.debug("compiled %s in %.1f ms (%s)%s", self.what, 1e3 * total, parts, suffix)
