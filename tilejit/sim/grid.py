"""``T.sync_grid()`` in the simulator: the blocks of a launch run concurrently.

A kernel without a grid barrier runs its blocks one after another (``runner.py``). One
with it runs each block as a Python thread, one at a time, in phases: in phase k every
block runs, in block order, from its (k-1)-th barrier to its k-th (or to its end); the
phase ends when every block has; the k-th barrier is complete when every block reached
it. So a block reads, after a barrier, what every block wrote before it. Within a phase
the blocks run in turn, so a block also sees what earlier blocks wrote in the same phase:
a kernel that depends on that is racy on the GPU, and the simulator does not report it.

A phase in which some blocks reach a barrier and others finish is a ``DeadlockError``
naming the blocks, their barrier counts and the lines where the others wait (on the GPU:
a hang). The GPU also needs every block resident at once, which the launch checks against
the device (``runtime/kernel.py``); the simulator has no device to ask and runs any grid
(a thread per block: grids of thousands of blocks take seconds).
"""
from __future__ import annotations

import contextvars
import threading

import numpy as np

from tilejit.sim.roles import DeadlockError
from tilejit.sim.runtime import STATE, _caller_location


class _Aborted(BaseException):
    """Unwinds a block whose launch failed in another block."""


class _Block:
    __slots__ = ("index", "go", "thread", "arrived", "where", "done")

    def __init__(self, index):
        self.index = index
        self.go = threading.Event()         # the block's turn
        self.thread = None
        self.arrived = 0                    # barriers it has reached
        self.where = ""                     # the line of the barrier it waits at
        self.done = False


class GridTurns:
    """The blocks of one launch, run by phases between grid barriers; the calling thread
    schedules, each block's thread runs when its ``go`` event is set and hands back
    through ``back``."""

    def __init__(self, blocks, kernel: str, launch_state: dict):
        self.coords = list(blocks)
        self.kernel = kernel
        self.launch_state = launch_state    # STATE's launch-wide fields, for each thread
        self.blocks = [_Block(k) for k in range(len(self.coords))]
        self.back = threading.Event()       # the running block has stopped
        self.failed = None
        self.aborted = False

    # -- what T.sync_grid() does in a block's thread -------------------------------
    def arrive(self):
        block = self.blocks[STATE.grid_block]
        block.arrived += 1
        block.where = _caller_location(3)
        self._pause(block)

    def _pause(self, block):
        block.go.clear()
        if self.aborted:            # (the launch stopped while this block ran)
            raise _Aborted()
        self.back.set()
        block.go.wait()
        if self.aborted:
            raise _Aborted()

    # -- the scheduler (the launching thread) ----------------------------------------
    def run(self, body):
        """Run ``body`` (one block's program, reading ``STATE.block``) for every block."""
        try:
            phase = 0
            while True:
                for block in self.blocks:
                    self._turn(block, body)
                    if self.failed is not None:
                        raise self.failed
                done = [b.done for b in self.blocks]
                if all(done):
                    return
                phase += 1
                if any(done) or any(b.arrived != phase for b in self.blocks):
                    raise DeadlockError(self._deadlock())
        finally:
            self._release()

    def _turn(self, block, body):
        self.back.clear()
        if block.thread is None:
            # (in the launch's context: its device memory, sim/views.py)
            block.thread = threading.Thread(target=contextvars.copy_context().run,
                                            args=(self._block, block, body), daemon=True,
                                            name=f"tilejit-sim-block-{block.index}")
            block.thread.start()
        else:
            block.go.set()
        self.back.wait()

    def _release(self):
        """Unwind every block still waiting at a barrier (after a failure)."""
        self.aborted = True
        for block in self.blocks:
            if block.thread is not None and not block.done:
                block.go.set()
        for block in self.blocks:
            if block.thread is not None:
                block.thread.join()

    def _deadlock(self) -> str:
        lines = [f"deadlock in {self.kernel}: blocks wait at a T.sync_grid() that other "
                 f"blocks never reach (every block must reach each grid barrier; on the GPU "
                 f"the kernel would hang)"]
        shown = [b for b in self.blocks if b.done][:4] + \
            [b for b in self.blocks if not b.done][:4]
        for b in sorted(shown, key=lambda b: b.index):
            what = (f"finished after {b.arrived} grid barrier(s)" if b.done else
                    f"waits at its grid barrier {b.arrived}{b.where}")
            lines.append(f"block {self.coords[b.index]} {what}")
        if len(shown) < len(self.blocks):
            lines.append(f"({len(self.blocks) - len(shown)} more blocks)")
        return "\n".join(lines)

    # -- a block's thread ------------------------------------------------------------
    def _block(self, block, body):
        for name, value in self.launch_state.items():
            setattr(STATE, name, value)
        STATE.block, STATE.mask, STATE.named_users = self.coords[block.index], None, {}
        STATE.grid_turns, STATE.grid_block = self, block.index
        try:
            with np.errstate(all="ignore"):
                body()
            block.done = True
        except _Aborted:
            block.done = True
        except BaseException as e:      # noqa: BLE001 - re-raised by run()
            block.done = True
            if self.failed is None:
                self.failed = e
        self.back.set()


def sync_grid():
    """``T.sync_grid()``: this block waits for every block (``GridTurns``)."""
    turns = getattr(STATE, "grid_turns", None)
    if turns is None:
        raise RuntimeError("T.sync_grid() outside a simulated launch of a kernel that has one")
    turns.arrive()
