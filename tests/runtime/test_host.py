"""The host side of a launch (runtime/host.py): where T.empty outputs are allocated."""


def test_outputs_for_cuda_arrays_of_other_libraries_are_device_arrays(monkeypatch):
    """T.empty allocates like the first tensor argument; for a CUDA array that is not a
    torch tensor (CuPy, Numba: __cuda_array_interface__) that is device memory of
    tilejit's own (runtime/device_array.py), never host memory, and torch is not needed."""
    from tilejit.runtime import cuda_driver, host
    from tilejit.runtime.arguments import TensorArg
    from tilejit.runtime.device_array import DeviceArray
    from tilejit.language.dtypes import float32
    allocated, freed = [], []
    monkeypatch.setattr(cuda_driver, "alloc",
                        lambda n, ordinal=0: allocated.append((n, ordinal)) or 0x7f0000001000)
    monkeypatch.setattr(cuda_driver, "free", freed.append)
    like = TensorArg(object(), 0x7f0000000000, (4,), (1,), float32, 1, False)
    with host.allocating_like(like):
        out = host.allocate_output((4, 3), "float16")
    assert isinstance(out, DeviceArray) and allocated == [(24, 1)]
    assert out.__cuda_array_interface__ == {
        "shape": (4, 3), "typestr": "<f2", "data": (0x7f0000001000, False),
        "strides": None, "version": 3, "stream": None}
    del out
    assert freed == [0x7f0000001000]
