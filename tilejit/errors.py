"""Errors raised by tilejit, each pointing at the kernel source that caused it."""
from __future__ import annotations

import linecache


class CompileError(Exception):
    """A kernel the compiler cannot accept: unsupported construct, type error, or a
    resource the device does not have. The message quotes file, line and source."""

    def __init__(self, message: str, filename: str | None = None, lineno: int | None = None):
        self.filename = filename
        self.lineno = lineno
        self.bare_message = message
        super().__init__(format_located(message, filename, lineno))


def with_call_sites(error: CompileError, filename: str, kernel_lines: tuple[int, int],
                    inlined) -> CompileError:
    """``error`` at a line of a helper inlined into the kernel (``inlined``: (first line,
    last line, name, the call's line) of each inlined call) with the calls that led there
    added: the line shown is the helper's, which names its parameters, and the message
    may name the caller's arguments."""
    if error.filename != filename or not error.lineno or getattr(error, "call_sites", None):
        return error
    line, notes = error.lineno, []
    first, last = kernel_lines
    for _ in range(8):                  # helpers inlined into helpers, outward
        if first <= line <= last:
            break
        calls = sorted({(c, n) for a, b, n, c in inlined if a <= line <= b})
        if not calls:
            break
        name = calls[0][1]
        if len(calls) > 1:
            notes.append(f"  in {name}(), called at lines {', '.join(str(c) for c, _ in calls)}")
            break
        line = calls[0][0]
        text = source_line(filename, line)
        notes.append(f"  in {name}(), called at line {line}" + (f"\n    {text}" if text else ""))
    if notes:
        error.call_sites = notes
        error.args = (str(error) + "\n" + "\n".join(notes),)
    return error


class AssumptionError(AssertionError, RuntimeError):
    """A ``T.assume`` that does not hold: found by the simulator, or on the host before a
    launch for a condition of the arguments' values and shapes only. An AssertionError,
    and the RuntimeError TileLang raises for an assumption it checks at a launch."""


def source_line(filename: str | None, lineno: int | None) -> str:
    if not filename or not lineno:
        return ""
    return linecache.getline(filename, lineno).strip()


def format_located(message: str, filename: str | None, lineno: int | None) -> str:
    if not filename or not lineno:
        return message
    text = source_line(filename, lineno)
    where = f'File "{filename}", line {lineno}'
    return f"{message}\n  {where}\n    {text}" if text else f"{message}\n  {where}"


class GridError(ValueError):
    """A grid CUDA cannot launch (an extent below 0, or above CUDA's limit for its
    dimension): the call's error, as in TileLang (a check made before the sizes are known
    leaves it to the call)."""


class EmptyGridError(GridError):
    """A launch of no blocks (``T.Kernel(0)``, or a grid extent that is 0 for these
    sizes): CUDA refuses it, and TileLang raises at the call."""


class LayoutCompileError(CompileError, ValueError):
    """A layout annotation a tile cannot have (``T.annotate_layout``): a CompileError
    naming the kernel's line, and a ValueError as TileLang raises it."""


class LoopNestError(CompileError, ValueError):
    """Loops nested in a way TileLang's loop-nest checker refuses (a ``T.Parallel`` in a
    ``T.Parallel`` that is not its whole body, a tile operation in one): a CompileError
    naming the line, and the ValueError TileLang raises."""


class ValueCompileError(CompileError, ValueError):
    """A value the kernel's source gives that its dtype cannot hold (``T.alloc_var(
    T.float32, init=1e300)``): a CompileError naming the line, and the ValueError TileLang
    raises when the program is defined."""


class UnsupportedDtypeError(CompileError, RuntimeError):
    """An operation TileLang's lowering refuses for a dtype with a RuntimeError (a max or
    min reduction of bool tiles): a CompileError naming the line, and that RuntimeError."""


class DefinitionError(CompileError, AssertionError):
    """A program TileLang refuses with an assertion as ``@T.prim_func`` defines it (a
    view to a shape that does not hold the tensor's bytes, a bitwise reducer of floats):
    a CompileError naming the line, and that AssertionError."""

