"""``tilelang.set_log_level`` / ``tilelang.logger`` (TileLang programs set the level at
import: DeepSeek-V3.2's inference kernels call ``tilelang.set_log_level("WARNING")``)."""
import logging

import numpy as np
import pytest

import tilejit as tilelang


@pytest.fixture
def restore_level():
    logger = logging.getLogger("tilejit")
    level, handlers = logger.level, list(logger.handlers)
    yield logger
    logger.setLevel(level)
    logger.handlers[:] = handlers


@pytest.mark.parametrize("level, expected", [("WARNING", logging.WARNING),
                                             ("debug", logging.DEBUG),
                                             (logging.ERROR, logging.ERROR),
                                             (np.int64(20), logging.INFO)])
def test_set_log_level_sets_tilejits_logger(restore_level, level, expected):
    tilelang.set_log_level(level)
    assert restore_level.level == expected
    assert tilelang.logger is restore_level


def test_a_compilation_logs_at_debug(restore_level, caplog):
    import numpy as np
    import tilejit.language as T

    @tilelang.kernel
    def fill(A):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(32):
                A[i] = 1.0
    tilelang.set_log_level("DEBUG")
    with caplog.at_level(logging.DEBUG, logger="tilejit"):
        fill.compile(np.zeros(32, np.float32), target="cuda", arch="sm_80")
    assert any("compiled" in r.getMessage() and "fill" in r.getMessage()
               for r in caplog.records)


@pytest.mark.parametrize("level, error, message", [
    ("LOUD", ValueError, r"set_log_level: level must be a logging level or one of DEBUG, "
                         r"INFO, WARNING, ERROR, CRITICAL, got 'LOUD'"),
    (2.5, TypeError, r"set_log_level: level must be a logging level \(an int\) or its "
                     r"name, got float 2.5"),
])
def test_bad_levels_are_named(restore_level, level, error, message):
    with pytest.raises(error, match=message):
        tilelang.set_log_level(level)


def test_set_log_level_prints_as_tilelangs_logger_does(restore_level, capsys):
    """With no handler of the program's, the messages go to stderr."""
    import logging as lg
    if lg.getLogger().handlers:
        pytest.skip("the root logger has a handler here")
    tilelang.set_log_level("INFO")
    restore_level.info("hello from tilejit")
    assert "hello from tilejit" in capsys.readouterr().err
