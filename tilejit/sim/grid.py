"""``T.sync_grid()`` in the simulator: the blocks of a launch run concurrently.

A kernel without a grid barrier runs its blocks one after another (``runner.py``). One
with it runs each block as a Python thread, one at a time: a block runs until it reaches
its next ``T.sync_grid()``, then the next block (round-robin) that can run does. The k-th
barrier completes when every block has reached it; then the waiting blocks go on, again
one at a time. So a block reads, after a barrier, what every block wrote before it, and
nothing another block writes after it until its own next barrier, which is exactly what
the GPU guarantees (a kernel that reads more than that is racy there).

A block that finishes while others wait at a barrier it never reached, or that reaches
more barriers than another, is a ``DeadlockError`` naming the blocks, the barrier counts
and the lines where the others wait (on the GPU: a hang). The GPU also needs every block
resident at once, which the launch checks against the device (``runtime/kernel.py``);
the simulator has no device to ask and runs any grid.
"""
from __future__ import annotations

import threading

import numpy as np

from tilejit.sim.roles import DeadlockError
from tilejit.sim.runtime import STATE, _caller_location


class _Aborted(BaseException):
    """Unwinds a block whose launch failed in another block."""


class GridTurns:
    """The blocks of one launch, taking turns between grid barriers."""

    def __init__(self, blocks, kernel: str, launch_state: dict):
        self.blocks = list(blocks)
        self.kernel = kernel
        self.launch_state = launch_state    # STATE's launch-wide fields, for each thread
        n = len(self.blocks)
        self.cond = threading.Condition()
        self.turn = 0
        self.arrived = [0] * n              # barriers each block has reached
        self.where = [""] * n               # the line of the barrier it waits at
        self.done = [False] * n
        self.failed = None
        self.aborted = False

    # -- what T.sync_grid() does in a block's thread -------------------------------
    def arrive(self):
        k = STATE.grid_block
        with self.cond:
            self.arrived[k] += 1
            self.where[k] = _caller_location(3)
            self._hand_over(k)
            self._await_turn(k)

    # -- scheduling --------------------------------------------------------------
    def _completed(self, count) -> bool:
        """Whether barrier number ``count`` (1, 2, …) has been reached by every block."""
        return all(a >= count for a in self.arrived)

    def _runnable(self, j) -> bool:
        return not self.done[j] and self._completed(self.arrived[j])

    def _hand_over(self, k):
        n = len(self.blocks)
        for step in range(1, n + 1):
            j = (k + step) % n
            if self._runnable(j):
                self.turn = j
                self.cond.notify_all()
                return
        if all(self.done):
            return
        raise DeadlockError(self._deadlock())

    def _await_turn(self, k):
        while self.turn != k and not self.aborted:
            self.cond.wait()
        if self.aborted:
            raise _Aborted()

    def _deadlock(self) -> str:
        lines = [f"deadlock in {self.kernel}: blocks wait at a T.sync_grid() that other "
                 f"blocks never reach (every block must reach each grid barrier; on the GPU "
                 f"the kernel would hang)"]
        shown = 0
        for j, block in enumerate(self.blocks):
            if self.done[j]:
                what = f"finished after {self.arrived[j]} grid barrier(s)"
            else:
                what = f"waits at its grid barrier {self.arrived[j]}{self.where[j]}"
            if shown < 8 or j == len(self.blocks) - 1:
                lines.append(f"block {block} {what}")
                shown += 1
            elif shown == 8:
                lines.append("…")
                shown += 1
        return "\n".join(lines)

    # -- the threads -------------------------------------------------------------
    def _block(self, k, body):
        for name, value in self.launch_state.items():
            setattr(STATE, name, value)
        STATE.block, STATE.mask, STATE.named_users = self.blocks[k], None, {}
        STATE.grid_turns, STATE.grid_block = self, k
        try:
            with self.cond:
                self._await_turn(k)
            with np.errstate(all="ignore"):
                body()
            with self.cond:
                self.done[k] = True
                self._hand_over(k)
                self.cond.notify_all()
        except _Aborted:
            pass
        except BaseException as e:      # noqa: BLE001 - re-raised by run()
            with self.cond:
                if self.failed is None:
                    self.failed = e
                self.aborted = True
                self.cond.notify_all()

    def run(self, body):
        """Run ``body`` (one block's program, reading ``STATE.block``) for every block."""
        workers = [threading.Thread(target=self._block, args=(k, body), daemon=True,
                                    name=f"tilejit-sim-block-{k}")
                   for k in range(len(self.blocks))]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        if self.failed is not None:
            raise self.failed


def sync_grid():
    """``T.sync_grid()``: the block's barrier, then this block waits for every block."""
    turns = getattr(STATE, "grid_turns", None)
    if turns is None:
        raise RuntimeError("T.sync_grid() outside a simulated launch of a kernel that has one")
    turns.arrive()
