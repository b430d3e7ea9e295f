"""TileLang's ``tilelang.contrib.nvcc`` compute-capability queries (its FlashAttention
GQA examples import it at the top: ``arch = nvcc.get_target_compute_version()``)."""
import pytest

from tilejit.language.compat import NotSupportedError
from tilejit.tilelang.contrib import nvcc
from tilejit.target import Target


def test_compute_version_of_an_arch():
    assert nvcc.get_target_compute_version("sm_90a") == "9.0"
    assert nvcc.get_target_compute_version({"kind": "cuda", "arch": "sm_86"}) == "8.6"
    assert nvcc.get_target_compute_version("cuda -arch=sm_100a") == "10.0"
    assert nvcc.get_target_compute_version(Target.cuda("sm_80")) == "8.0"
    assert nvcc.parse_compute_version("9.0") == (9, 0)
    assert nvcc.get_target_arch("9.0") == "90a" and nvcc.get_target_arch((8, 0)) == "80"
    assert nvcc.have_tensorcore("8.0") and nvcc.have_bf16("8.0") and not nvcc.have_fp8("8.6")
    with pytest.raises(RuntimeError, match="parsing"):
        nvcc.parse_compute_version("nine")
    with pytest.raises(ValueError, match="expected an arch"):
        nvcc.get_target_compute_version({"arch": "gfx942"})


def test_the_compilers_are_named_as_not_supported():
    with pytest.raises(NotSupportedError, match="compile_cuda.*emits PTX itself"):
        nvcc.compile_cuda  # noqa: B018 (reading the name is what raises)


def test_the_source_post_processing_hooks_import_and_refuse_to_register():
    # TileLang's GDN examples import them (unused); registering one has no source to act on
    from tilejit.tilelang.engine.callback import (register_cuda_postproc_callback,
                                                  register_hip_postproc_callback)
    with pytest.raises(NotSupportedError, match="cuda_postproc_callback.*without any CUDA"):
        register_cuda_postproc_callback(lambda code, target: code)
    with pytest.raises(NotSupportedError, match="register_hip_postproc_callback"):
        register_hip_postproc_callback(lambda code, target: code)


@pytest.mark.gpu
def test_compute_version_of_the_device():
    assert float(nvcc.get_target_compute_version()) >= 8.0
