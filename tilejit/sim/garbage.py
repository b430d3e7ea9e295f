"""A read of memory nothing wrote, judged by whether its value matters.

The simulator runs a launch strictly first: an element read before anything wrote it
raises ``UninitializedReadError`` (on the GPU it holds whatever the register or the shared
memory held). Many correct programs make such reads and throw the value away: both arms
of a ``T.if_then_else`` are evaluated, a ``T.gemm`` multiplies rows of a tile no one
stored and whose results no one stores, a pipelined loop's last stage reads ahead. So an
``UninitializedReadError`` is not the end: the launch runs again from the arguments it
started with, ``VARIANTS`` times, each time with other garbage in every element nothing
wrote (a tile's at its allocation, a ``T.empty`` output's, a shared tile's while a
``T.ptx_cp_async`` is in flight into it): NaN and all-ones bits first, then two seeded
random fills. Where every run ends and leaves every argument with the same bytes, the
garbage did not matter and the launch's result stands, as it would on the GPU whatever the
memory held. Where a run stops (an index out of bounds, a block race, a deadlock) or two
runs leave different bytes, the first strict error is raised, saying so: the value of the
read reached the kernel's outputs, an index or a branch. Three fills are a test, not a
proof; they are what a GPU's leftover registers would have to beat.

The reruns print nothing but what the strict run did not reach (``Prints``). Device memory
a kernel reaches through ``T.make_tensor`` of an address is not compared.
"""
from __future__ import annotations

import contextvars

import numpy as np

VARIANTS = 3


class Prints:
    """A launch's device prints across its runs: the strict run prints and counts; the
    first rerun skips what the strict run printed and prints the rest; later reruns print
    nothing. Each run keeps its lines (``said``): what a kernel prints is an output too.
    ``variant`` is the run's garbage fill (None: the strict run)."""

    __slots__ = ("variant", "skip", "quiet", "printed", "said")

    def __init__(self, variant=None, skip=0, quiet=False):
        self.variant, self.skip, self.quiet, self.printed = variant, skip, quiet, 0
        self.said = []


# the running launch's (copied into the threads of its warpgroup roles and grid turns)
RUN: contextvars.ContextVar = contextvars.ContextVar("tilejit_sim_run", default=None)


def variant():
    """The running launch's garbage fill: None in a strict run."""
    run = RUN.get()
    return None if run is None else run.variant


def say(text) -> None:
    """A device print's line (``T.print``), once across the launch's runs."""
    run = RUN.get()
    if run is not None:
        if run.variant is not None:
            run.said.append(str(text))
        if run.skip:
            run.skip -= 1
            return
        if run.quiet:
            return
        run.printed += 1
    print(text)


def fill(shape, storage) -> np.ndarray:
    """A new tile's elements: zeros in a strict run (reads of them are errors), else the
    run's garbage."""
    k = variant()
    if k is None:
        return np.zeros(shape, dtype=storage)
    return garbage(shape, storage, k)


def garbage(shape, storage, k: int) -> np.ndarray:
    """Fill ``k`` of an array: NaN (floats), all ones (integers) or True for 0; seeded
    random values of either sign for the others (floats of a range every float dtype
    holds, integers over the whole type)."""
    storage = np.dtype(storage)
    if k == 0:
        if storage.kind == "f":
            return np.full(shape, np.nan, dtype=storage)
        if storage.kind == "b":
            return np.ones(shape, dtype=bool)
        return np.full(shape, -1 if storage.kind == "i" else np.iinfo(storage).max,
                       dtype=storage)
    rng = np.random.default_rng(0x5EED + k)
    if storage.kind == "f":
        return (rng.integers(-448, 448, size=shape) * 0.25).astype(storage)
    if storage.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    info = np.iinfo(storage)
    return rng.integers(info.min, info.max, size=shape, dtype=storage, endpoint=True)


def pour(tensor, idx=None) -> None:
    """Elements ``idx`` of ``tensor`` (None: all) hold the run's garbage (nothing in a
    strict run, where reading them is an error)."""
    k = variant()
    if k is None:
        return
    key = ... if idx is None else idx
    tensor.data[key] = garbage(np.shape(tensor.data[key]), tensor.data.dtype, k)


# -- the launch's arguments ------------------------------------------------------------

def _memory(tensor):
    """The memory a tensor argument (the runtime's ``TensorArg``) lives in, a torch tensor
    or a numpy array, where the kernel may write it; else None (a read-only or broadcast
    array, which no launch can change)."""
    obj = tensor.obj
    if tensor.dtype.packed > 1 and hasattr(obj, "storage"):    # float4's packed bytes
        obj = obj.storage
    if isinstance(obj, np.ndarray):
        return obj if obj.flags.writeable and 0 not in obj.strides else None
    stride = getattr(obj, "stride", None)
    if tensor.is_torch and callable(stride) and 0 not in tuple(stride()):
        return obj
    return None


def snapshot(arguments) -> list:
    """The bytes of the tensor arguments (name, ``TensorArg``) before a launch, to start
    each rerun from."""
    saved = []
    for name, tensor in arguments:
        mem = _memory(tensor)
        if mem is not None:
            saved.append((name, mem,
                          mem.copy() if isinstance(mem, np.ndarray) else mem.clone()))
    return saved


def restore(saved) -> None:
    for _, mem, before in saved:
        if isinstance(mem, np.ndarray):
            np.copyto(mem, before)
        else:
            mem.copy_(before)


def contents(saved) -> list:
    """The arguments' bytes now."""
    out = []
    for _, mem, _ in saved:
        if isinstance(mem, np.ndarray):
            out.append(np.ascontiguousarray(mem).tobytes())
            continue
        import torch    # (a torch argument's: torch is there)
        flat = mem.detach().cpu().contiguous().reshape(-1)
        out.append(flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b"")
    return out


def rerun(strict, saved, printed: int, run_once) -> None:
    """After the strict run's ``UninitializedReadError`` ``strict`` (having made
    ``printed`` device prints): ``run_once()`` again from the arguments ``saved`` with each
    garbage fill; raises ``strict`` (with what the reruns found) unless all end alike."""
    seen = said = None
    for k in range(VARIANTS):
        restore(saved)
        run = Prints(k, skip=printed if k == 0 else 0, quiet=k > 0)
        token = RUN.set(run)
        try:
            run_once()
        except Exception as e:          # noqa: BLE001 - what the garbage did
            raise _matters(strict, f"run again with garbage there, the launch stopped: "
                                   f"{type(e).__name__}: {_first_line(e)}") from e
        finally:
            RUN.reset(token)
        now = contents(saved)
        if seen is not None and now != seen:
            which = next(saved[i][0] for i, (a, b) in enumerate(zip(seen, now)) if a != b)
            raise _matters(strict, f"run again with other garbage there, the launch wrote "
                                   f"other values to {which}") from strict
        if said is not None and run.said != said:
            line = next((a, b) for a, b in zip(said + [""], run.said + [""]) if a != b)
            raise _matters(strict, f"run again with other garbage there, the launch printed "
                                   f"{line[1]!r} where it had printed {line[0]!r}") from strict
        seen, said = now, run.said


def _first_line(e) -> str:
    return str(e).split("\n", 1)[0]


def _matters(strict, found):
    """``strict`` again, saying that the value read reaches what the kernel does."""
    return type(strict)(f"{strict.args[0] if strict.args else strict}\n  The value "
                        f"matters: {found}.")
