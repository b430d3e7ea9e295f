"""What TileLang's parser computes in Python while it builds a kernel, and tilejit
before typing: an int method of a compile-time value (``T.serial(max(1, (batch -
1).bit_length()))``, a paged-RoPE preprocessing kernel's binary search), TVM's
``PrimFunc.with_attr("global_symbol", name)`` on a factory's program (a GDN L2-norm
kernel names each specialization), and TileLang's newer pass-config keys."""
import pytest

import tilejit as tilelang
import tilejit.language as T

torch = pytest.importorskip("torch")


def offsets(n):
    @T.prim_func
    def main(A: T.Tensor((n,), "int32"), B: T.Tensor((n,), "int32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.serial(n):
                B[i] = A[i] + (n - 1).bit_length() * 10 + n.bit_count()
            for i in T.serial(max(1, (n - 1).bit_length())):
                B[i] = B[i] + 100
    return main


def _offsets_expected(a, n):
    want = a + (n - 1).bit_length() * 10 + bin(n).count("1")
    want[:max(1, (n - 1).bit_length())] += 100
    return want


@pytest.mark.parametrize("n", [5, 9, 1])
def test_an_int_method_of_a_compile_time_value_is_folded(n):
    a = torch.arange(n, dtype=torch.int32)
    b = tilelang.compile(offsets(n), out_idx=[1])(a)
    assert b.tolist() == _offsets_expected(a, n).tolist()


def test_the_ptx_assembles(ptxas):
    ptx = tilelang.compile(offsets(9), out_idx=[1],
                           target="cuda -arch=sm_90a").get_kernel_source()
    assert "st.global" in ptx
    ptxas(ptx, "sm_90a")


def _named(n, name):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(n):
                B[i] = A[i] * 2
    return main.with_attr("global_symbol", name)


def test_with_attr_names_a_copy_of_the_program():
    program = _named(32, "double_32")
    assert program.attrs["global_symbol"] == "double_32"
    tagged = program.with_attr("tag", 3)
    assert tagged.attrs["tag"] == 3 and "tag" not in program.attrs
    a = torch.randn(32)
    torch.testing.assert_close(tilelang.compile(program, out_idx=[1])(a), a * 2)
    with pytest.raises(ValueError, match="global_symbol must be an identifier, got 'a b'"):
        program.with_attr("global_symbol", "a b")


def test_newer_pass_config_keys_are_accepted():
    keys = tilelang.PassConfigKey
    assert keys.TL_ENABLE_FP32X2_REDUCTION == "tl.enable_fp32x2_reduction"
    assert keys.TL_ENABLE_AUTO_WARP_SPECIALIZATION == "tl.enable_auto_warp_specialization"
    a = torch.randn(32)
    kernel = tilelang.compile(_named(32, "k"), out_idx=[1], pass_configs={
        keys.TL_ENABLE_FP32X2_REDUCTION: False})
    torch.testing.assert_close(kernel(a), a * 2)


@pytest.mark.gpu
def test_on_the_gpu_against_torch():
    a = torch.arange(9, dtype=torch.int32)
    b = tilelang.compile(offsets(9), out_idx=[1])(a.cuda()).cpu()
    assert b.tolist() == _offsets_expected(a, 9).tolist()
    x = torch.randn(32)
    torch.testing.assert_close(tilelang.compile(_named(32, "d"), out_idx=[1])(x.cuda()).cpu(),
                               x * 2)
