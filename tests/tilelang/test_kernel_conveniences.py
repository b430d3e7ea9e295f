"""TileLang's JITKernel conveniences on tilejit's compiled kernels: ``run_once()`` (the
kernel on inputs the profiler makes), ``show_source()``, ``export_sources()``, the
deprecated ``print_source_code()`` and ``get_kernel_source(kernel_only=True)``, for
``tilejit.compile`` of a T.prim_func and for a ``@tilejit.jit`` program."""
import pytest
import torch

import tilejit
import tilejit.language as T


def scale(n=256, dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype)):
        with T.Kernel(n // 128, threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[bx * 128 + i] * 2
    return main


def test_run_once_runs_the_kernel_on_profiler_inputs():
    kernel = tilejit.compile(scale(), out_idx=[1])
    out = kernel.run_once()
    assert tuple(out.shape) == (256,)
    seen = []
    kernel.run_once(lambda a: seen.append(tuple(a.shape)))
    assert seen == [(256,)]


def test_jitkernel_made_directly_compiles_as_tilelang_compile(ptxas):
    """``tilelang.JITKernel(prim_func, out_idx=..., target=...)`` (a PTX tutorial builds its
    kernels so): ``tilelang.compile``'s kernel."""
    kernel = tilejit.JITKernel(scale(), out_idx=[1], target="cuda -arch=sm_80")
    assert isinstance(kernel, tilejit.JITKernel)
    ptxas(kernel.get_kernel_source(), "sm_80")
    a = torch.arange(256, dtype=torch.float32)
    sim = tilejit.JITKernel(scale(), out_idx=[1], target="sim")
    assert torch.equal(sim(a), a * 2)
    from tilejit.language.compat import NotSupportedError
    with pytest.raises(NotSupportedError, match=r"JITKernel\(from_database=..."):
        tilejit.JITKernel(scale(), from_database=True)
    with pytest.raises(TypeError, match=r"tilejit.compile expects a @T.prim_func, got int"):
        tilejit.JITKernel(5)


@tilejit.jit
def doubled(A, n: int = 256):
    A: T.Tensor((n,), T.float32)
    B = T.empty((n,), T.float32)
    with T.Kernel(n // 128, threads=128) as bx:
        for i in T.Parallel(128):
            B[bx * 128 + i] = A[bx * 128 + i] * 2
    return B


def test_show_source_and_kernel_only(capsys):
    kernel = tilejit.compile(scale(), out_idx=[1])
    ptx = kernel.get_kernel_source(arch="sm_90a", kernel_only=True)
    assert ".entry" in ptx
    program = doubled.compile(n=256)
    assert program.get_kernel_source(kernel_only=True) == program.get_kernel_source()
    program.show_source()
    assert ".entry" in capsys.readouterr().out
    program.show_source("host")
    assert "no host source" in capsys.readouterr().out
    with pytest.raises(ValueError, match="`which` must be"):
        program.show_source("device")


def test_export_sources_and_the_deprecated_print_source_code(capsys, tmp_path, caplog):
    """A puzzle set calls ``kernel.print_source_code()``, TileLang's deprecated name."""
    kernel = tilejit.compile(scale(), out_idx=[1])
    with caplog.at_level("WARNING", logger="tilejit"):
        kernel.print_source_code()
    assert ".entry" in capsys.readouterr().out
    assert "print_source_code is deprecated" in caplog.text
    kernel.print_source_code(file=str(tmp_path / "k" / "kernel.ptx"))
    assert ".entry" in (tmp_path / "k" / "kernel.ptx").read_text()
    doubled.compile(n=256).export_sources(kernel_path=str(tmp_path / "d.ptx"),
                                          host_path=str(tmp_path / "h.cc"))
    assert ".entry" in (tmp_path / "d.ptx").read_text()
    assert "no host source" in (tmp_path / "h.cc").read_text()
    with pytest.raises(ValueError, match="give kernel_path or host_path"):
        kernel.export_sources()


@pytest.mark.gpu
def test_run_once_on_gpu():
    out = tilejit.compile(scale(), out_idx=[1]).run_once()
    assert out.is_cuda and tuple(out.shape) == (256,)
    assert torch.isfinite(out).all()
