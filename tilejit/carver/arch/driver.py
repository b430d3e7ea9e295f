"""``from tilejit.carver.arch import driver`` (TileLang's ``tilelang.carver.arch.driver``):
figures of the current CUDA device, read through ``runtime/cuda_driver.py``.

Where no CUDA device is present (the simulator), ``get_num_sms()`` answers
``SIMULATED_NUM_SMS`` (132, an H100 SXM's or an H200's SMs) or its ``simulated``
argument, so a persistent kernel sized by it runs unchanged in simulation. The other
functions need a device.
"""
from __future__ import annotations

import numbers

from tilejit.runtime import cuda_driver as _cuda_driver
from tilejit.language.compat import module_getattr

SIMULATED_NUM_SMS = 132     # H100 SXM / H200: the simulator's SM count


def _device(device_id) -> int:
    if isinstance(device_id, bool) or not isinstance(device_id, numbers.Integral):
        raise TypeError(f"device_id: expected an int, got {type(device_id).__name__} "
                        f"{device_id!r}")
    count = _cuda_driver.device_count()
    if not 0 <= device_id < count:
        raise ValueError(f"device_id: expected a CUDA device in [0, {count}), got {device_id}")
    return int(device_id)


def get_num_sms(device_id: int = 0, simulated: int | None = None) -> int:
    """The streaming multiprocessors of CUDA device ``device_id``; without a CUDA device,
    ``simulated`` if given, else ``SIMULATED_NUM_SMS`` (132)."""
    if not _cuda_driver.cuda_available():
        if simulated is None:
            return SIMULATED_NUM_SMS
        if isinstance(simulated, bool) or not isinstance(simulated, numbers.Integral) \
                or simulated < 1:
            raise ValueError(f"simulated: expected a positive int, got {simulated!r}")
        return int(simulated)
    return _cuda_driver.device_limits(_device(device_id))["num_sms"]


# in a kernel's body a compile-time value of each specialization (frontend/host_queries.py)
get_num_sms.__tilejit_host_query__ = True


def _limit(device_id, key, what):
    if not _cuda_driver.cuda_available():
        raise RuntimeError(f"driver.{what}(): no CUDA device on this machine (only "
                           "get_num_sms() has a simulated answer)")
    return _cuda_driver.device_limits(_device(device_id))[key]


def get_registers_per_block(device_id: int = 0) -> int:
    """32-bit registers one block may use."""
    return _limit(device_id, "max_regs_per_block", "get_registers_per_block")


def get_max_dynamic_shared_size_bytes(device_id: int = 0) -> int:
    """The most dynamic shared memory one block may opt in to, in bytes."""
    return _limit(device_id, "max_shared_per_block_optin", "get_max_dynamic_shared_size_bytes")


def get_shared_memory_per_block(device_id: int = 0) -> int:
    """Shared memory per block without opting in (48 KiB), in bytes."""
    return _limit(device_id, "max_shared_per_block", "get_shared_memory_per_block")


# TileLang's names this module does not have: an error naming them (``compat.py``);
# TileLang's driver is a package (``driver.cuda_driver``): its submodules are refused too
__path__ = []
__getattr__ = module_getattr(
    "tilelang.carver.arch.driver", __name__,
    "of TileLang's driver queries tilejit has get_num_sms, get_registers_per_block, "
    "get_max_dynamic_shared_size_bytes and get_shared_memory_per_block")
