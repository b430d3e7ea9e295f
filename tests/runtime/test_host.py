"""The host side of a launch (runtime/host.py): where T.empty outputs are allocated."""
import pytest


def test_outputs_are_never_host_memory_for_cuda_arrays_of_other_libraries():
    """T.empty allocates like the first tensor argument; a CUDA array that is not a torch
    tensor (CuPy, Numba: __cuda_array_interface__) gets a clear error, not host memory."""
    from tilejit.runtime import host
    from tilejit.runtime.arguments import TensorArg
    from tilejit.language.dtypes import float32
    like = TensorArg(object(), 0x7f0000000000, (4,), (1,), float32, 0, False)
    with host.allocating_like(like), pytest.raises(TypeError, match="with torch only"):
        host.allocate_output((4,), "float32")
