"""TileLang's ``tilelang.language.annotations`` by its module path: the annotations
imported from there are the language's own, so a kernel using them compiles as with
``T.*`` (a varlen attention program imports ``annotate_layout`` from it)."""
import pytest

import tilejit as tilelang
import tilejit.language as T
from tilejit.language import annotations
from tilejit.language.annotations import annotate_layout, use_swizzle

torch = pytest.importorskip("torch")


def test_the_module_names_the_languages_annotations():
    for name in annotations.__all__:
        assert getattr(annotations, name) is getattr(T, name), name


def _copy_through_swizzled_shared(n):
    @T.prim_func
    def main(A: T.Tensor((n, n), "float16"), B: T.Tensor((n, n), "float16")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((n, n), "float16")
            annotate_layout({s: tilelang.layout.make_swizzled_layout(s)})
            use_swizzle(4)
            T.copy(A, s)
            T.copy(s, B)
    return main


def test_a_kernel_using_them_runs_and_its_ptx_assembles(ptxas):
    a = torch.randn(64, 64).half()
    kernel = tilelang.compile(_copy_through_swizzled_shared(64), out_idx=[1])
    assert torch.equal(kernel(a), a)
    for arch in ("sm_80", "sm_90a"):
        ptx = tilelang.compile(_copy_through_swizzled_shared(64), out_idx=[1],
                               target=f"cuda -arch={arch}").get_kernel_source()
        assert "st.shared" in ptx
        ptxas(ptx, arch)


@pytest.mark.gpu
def test_on_the_gpu_against_the_input():
    a = torch.randn(64, 64).half().cuda()
    assert torch.equal(tilelang.compile(_copy_through_swizzled_shared(64), out_idx=[1])(a), a)
