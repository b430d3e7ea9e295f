"""A read of memory nothing wrote, judged by whether its value matters.

The simulator runs a launch strictly first: an element read before anything wrote it
raises ``UninitializedReadError`` (on the GPU it holds whatever the register or the shared
memory held). Many correct programs make such reads and throw the value away: both arms
of a ``T.if_then_else`` are evaluated, a ``T.gemm`` multiplies rows of a tile no one
stored and whose results no one stores, a pipelined loop's last stage reads ahead. So an
``UninitializedReadError`` is not the end: the launch runs again from the arguments it
started with, ``VARIANTS`` times, each time with other garbage in every element nothing
wrote (a tile's at its allocation, a ``T.empty`` output's, a shared tile's while a
``T.ptx_cp_async`` is in flight into it): NaN (-1, True) first, then seeded random
positive and negative values (``garbage``: every element differs between the fills;
integers stay small, so one used as a loop bound ends). Where every run ends and leaves
every argument with the same bytes (an output's elements the launch never wrote left out:
each run has its own garbage there), the garbage did not matter and the launch's result
stands, as it would on the GPU whatever the memory held. A launch whose arguments hold
more than ``SNAPSHOT_MAX_BYTES`` keeps the strict check (nothing to rerun from). Where a
run stops (an index out of bounds, a block race, a deadlock) or two runs leave different
bytes, the first strict error is raised, saying so: the value of the read reached the
kernel's outputs, an index or a branch; where every rerun stops with the same error (its
type and first line), that error is the program's own, whatever the garbage, and is
raised itself, with a note of the read before it. Three fills are a test, not a
proof; they are what a GPU's leftover registers would have to beat.

The reruns print nothing but what the strict run did not reach (``Prints``). Memory a
kernel reaches through ``T.make_tensor`` of an address is neither kept nor compared: a
rerun's writes through it add to the strict run's.
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
    """Fill ``k`` of an array, every element other than the other fills' (so that any use
    of one changes something): fill 0 NaN (floats), True, -1 (signed integers) or 255
    (unsigned); fill 1 seeded random positive values (floats of a range every float dtype
    holds), False, 0…127; fill 2 negative ones, True and False in turn, -128…-2 (unsigned:
    128…254). Integers stay small: one used as a loop bound runs at most a few hundred
    iterations, not a billion."""
    storage = np.dtype(storage)
    if storage.kind == "b":
        if k == 2:
            return (np.arange(int(np.prod(shape, dtype=np.int64))) % 2 == 0).reshape(shape)
        return np.full(shape, k == 0, dtype=bool)
    if k == 0:
        value = np.nan if storage.kind == "f" else -1 if storage.kind == "i" else 255
        return np.full(shape, value, dtype=storage)
    rng = np.random.default_rng(0x5EED + k)
    if storage.kind == "f":
        magnitude = rng.integers(1, 448, size=shape) * 0.25
        return (magnitude if k == 1 else -magnitude).astype(storage)
    if k == 1:
        return rng.integers(0, 128, size=shape).astype(storage)
    low, high = (-128, -2) if storage.kind == "i" else (128, 254)
    return rng.integers(low, high, size=shape, endpoint=True).astype(storage)


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


# the most bytes of arguments a launch copies to be able to rerun (a larger launch keeps
# the strict check: its reads of memory nothing wrote are errors, whatever their use)
SNAPSHOT_MAX_BYTES = 64 << 20


def snapshot(arguments) -> list | None:
    """The bytes of the tensor arguments (name, ``TensorArg``) before a launch, to start
    each rerun from; None where they are more than ``SNAPSHOT_MAX_BYTES``."""
    found = [(name, mem) for name, mem in ((n, _memory(t)) for n, t in arguments)
             if mem is not None]
    if sum(_nbytes(mem) for _, mem in found) > SNAPSHOT_MAX_BYTES:
        return None
    return [(name, mem, mem.copy() if isinstance(mem, np.ndarray) else
             mem.detach().clone()) for name, mem in found]


def _nbytes(mem) -> int:
    if isinstance(mem, np.ndarray):
        return mem.nbytes
    return mem.numel() * mem.element_size()


def restore(saved) -> None:
    for _, mem, before in saved:
        if isinstance(mem, np.ndarray):
            np.copyto(mem, before)
        else:
            mem.detach().copy_(before)      # (in place, also into a tensor needing grad)


def contents(saved, unwritten=None) -> list:
    """The arguments' bytes now; the elements of an output the launch left unwritten
    (``unwritten``: {name: mask}, T.empty's and out_idx's memory) as zeros, since each
    run fills those with its own garbage."""
    out = []
    for name, mem, _ in saved:
        mask = (unwritten or {}).get(name)
        if isinstance(mem, np.ndarray):
            data = np.ascontiguousarray(mem)
            if mask is not None and mask.shape == data.shape and mask.any():
                data = data.copy()
                data[mask] = 0
            out.append(data.tobytes())
            continue
        import torch    # (a torch argument's: torch is there)
        data = mem.detach().cpu()
        if mask is not None and tuple(mask.shape) == tuple(data.shape) and mask.any():
            data = data.clone()
            data[torch.from_numpy(mask)] = 0
        flat = data.contiguous().reshape(-1)
        out.append(flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b"")
    return out


def rerun(strict, saved, printed: int, run_once) -> None:
    """After the strict run's ``UninitializedReadError`` ``strict`` (having made
    ``printed`` device prints): ``run_once()`` again from the arguments ``saved`` with each
    garbage fill (it returns the outputs' unwritten elements, ``contents``); raises
    ``strict`` (with what the reruns found) unless all end alike, or at once where the
    arguments were too large to keep (``saved`` None)."""
    if saved is None:
        raise strict
    seen = said = None
    for k in range(VARIANTS):
        run = Prints(k, skip=printed if k == 0 else 0, quiet=k > 0)
        try:
            unwritten = _run_with(run, saved, run_once)
        except Exception as e:          # noqa: BLE001 - what the garbage did
            if k == 0 and _stops_alike(e, saved, run_once):
                e.add_note(f"(Before it, the launch read memory nothing wrote: "
                           f"{_first_line(strict)} Run with {VARIANTS} different garbage "
                           f"values there, it stopped so each time: this error is not that "
                           f"value's.)")
                raise e from None
            raise _matters(strict, f"run again with garbage there, the launch stopped: "
                                   f"{type(e).__name__}: {_first_line(e)}") from e
        now = contents(saved, unwritten)
        if seen is not None and now != seen:
            which = next(saved[i][0] for i, (a, b) in enumerate(zip(seen, now)) if a != b)
            raise _matters(strict, f"run again with other garbage there, the launch wrote "
                                   f"other values to {which}") from strict
        if said is not None and run.said != said:
            line = next((a, b) for a, b in zip(said + [""], run.said + [""]) if a != b)
            raise _matters(strict, f"run again with other garbage there, the launch printed "
                                   f"{line[1]!r} where it had printed {line[0]!r}") from strict
        seen, said = now, run.said


def _stops_alike(first, saved, run_once) -> bool:
    """Whether the launch, run with each other garbage fill, stops with the error
    ``first`` stopped it with (its type and first line): an error of the program's own,
    whatever the memory nothing wrote held."""
    for k in range(1, VARIANTS):
        try:
            _run_with(Prints(k, quiet=True), saved, run_once)
        except Exception as e:          # noqa: BLE001 - compared with the first
            if type(e) is not type(first) or _first_line(e) != _first_line(first):
                return False
        else:
            return False
    return True


def _run_with(run: Prints, saved, run_once):
    """``run_once()`` from the arguments ``saved``, with ``run``'s garbage fill and
    prints."""
    restore(saved)
    token = RUN.set(run)
    try:
        return run_once()
    finally:
        RUN.reset(token)


def _first_line(e) -> str:
    return str(e).split("\n", 1)[0]


def _matters(strict, found):
    """``strict`` again, saying that the value read reaches what the kernel does."""
    return type(strict)(f"{strict.args[0] if strict.args else strict}\n  The value "
                        f"matters: {found}.")
