"""The register file a block's threads share (sm_80, sm_90): 64 K 32-bit registers an
SM, a thread's at most 255, allocated in units of 8. One block per SM gives each of its
``threads`` threads ``launch_registers(threads)``."""
from __future__ import annotations

REGISTER_FILE = 65536        # 32-bit registers of an SM (sm_80, sm_90)
MAX_REGISTERS = 256          # a thread's at most: 255, allocated in 8s


def launch_registers(threads: int) -> int:
    """A thread's registers at launch, one ``threads``-thread block per SM."""
    per = min(MAX_REGISTERS, REGISTER_FILE // max(threads, 1))
    return per - per % 8
