"""``tilejit.carver.arch.driver`` (TileLang's module path): the device's SM count, a
fixed documented answer where there is no CUDA device (the simulator)."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T
from tilejit.carver.arch import driver
from tilejit.errors import CompileError
from tilejit.language.compat import NotSupportedError
from tilejit.runtime import cuda_driver


def test_without_a_device_the_simulated_count(monkeypatch):
    monkeypatch.setattr(cuda_driver, "cuda_available", lambda: False)
    assert driver.get_num_sms() == driver.SIMULATED_NUM_SMS == 132
    assert driver.get_num_sms(simulated=7) == 7
    with pytest.raises(ValueError, match=r"simulated: expected a positive int, got 0"):
        driver.get_num_sms(simulated=0)
    with pytest.raises(RuntimeError, match=r"driver.get_registers_per_block\(\): no CUDA "
                                           r"device on this machine"):
        driver.get_registers_per_block()


def test_unsupported_names_say_so():
    with pytest.raises(NotSupportedError, match=r"tilelang.carver.arch.driver.get_device_name "
                                                r"is not supported by tilejit.*get_num_sms"):
        getattr(driver, "get_device_name")  # noqa: B009


@pytest.mark.gpu
def test_the_devices_count():
    assert driver.get_num_sms() == cuda_driver.device_limits(0)["num_sms"] > 0
    assert driver.get_num_sms(simulated=7) == driver.get_num_sms()
    assert driver.get_registers_per_block() >= 65536 // 2
    assert driver.get_max_dynamic_shared_size_bytes() >= driver.get_shared_memory_per_block()
    with pytest.raises(ValueError, match=r"device_id: expected a CUDA device in \[0, "):
        driver.get_num_sms(cuda_driver.device_count())


@tilejit.kernel
def sms_into(Out):
    n = driver.get_num_sms()
    with T.Kernel(1, threads=32) as bx:
        Out[0] = n


@tilejit.kernel
def sms_of(Out, dev):
    n = driver.get_num_sms(dev)
    with T.Kernel(1, threads=32) as bx:
        Out[0] = n


def test_in_a_kernel_body_the_count_is_a_compile_time_value():
    out = np.zeros(1, np.int32)
    sms_into(out)
    assert out[0] == driver.get_num_sms()
    ptx = sms_into.compile(out, target="cuda", arch="sm_80").ptx
    assert f", {driver.get_num_sms()};" in ptx
    with pytest.raises(CompileError, match=r"`driver.get_num_sms\(dev\)` in a kernel body is "
                                           r"asked on the host before compiling: its arguments "
                                           r"must be constants"):
        sms_of(out, 0)
