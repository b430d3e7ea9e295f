"""``T.Ref`` macro parameters (and TileLang's deprecated ``T.Var`` annotation): the
macro's assignments to the parameter store into the caller's variable or element
(frontend/kernel_macros.inline_call), as a MoE router's warp arg-max macro writes them."""
import pytest
import torch

import tilejit
import tilejit as tilelang
import tilejit.language as T


@T.macro
def warp_argmax(value: T.Ref, index: T.Ref):
    for i in T.unroll(5):
        other = T.shfl_xor(value, 1 << i)
        other_index = T.shfl_xor(index, 1 << i)
        if other > value or (other == value and other_index < index):
            value = other
            index = other_index


@T.macro
def double_into(slot: T.Var, x):
    slot = slot * 2 + x


@tilelang.jit
def argmax_and_double():
    @T.prim_func
    def main(X: T.Tensor((32,), "float32"), V: T.Tensor((1,), "float32"),
             I: T.Tensor((1,), "int32"), D: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            m = T.alloc_var(T.float32)
            at = T.alloc_var(T.int32)
            m = X[tx]
            at = tx
            warp_argmax(m, at)
            if tx == 0:
                V[0] = m
                I[0] = at
            buf = T.alloc_local((2,), "float32")
            buf[1] = X[tx]
            double_into(buf[1], 1.0)
            D[tx] = buf[1]
    return main


def test_a_macro_assigns_the_callers_variable_and_element():
    x = torch.randn(32)
    v, i, d = torch.zeros(1), torch.zeros(1, dtype=torch.int32), torch.zeros(32)
    argmax_and_double()(x, v, i, d)
    assert v.item() == x.max().item() and i.item() == x.argmax().item()
    torch.testing.assert_close(d, x * 2 + 1)


def test_a_reference_needs_a_variable_or_an_element():
    @T.prim_func
    def main(X: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            double_into(X[tx] + 1, 1.0)
    with pytest.raises(tilejit.CompileError, match=r"parameter 'slot' is a T.Ref: its "
                       r"argument must be a variable \(T.alloc_var\) or an element"):
        tilelang.compile(main)(torch.zeros(32))


def test_a_plain_parameter_is_the_macros_own():
    """Without T.Ref the macro's assignment binds its own name (TileLang binds a value
    argument to a new variable): the caller's is unchanged."""
    @T.macro
    def bump(v):
        v = v + 1

    @T.prim_func
    def main(X: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            m = T.alloc_var(T.float32)
            m = 5.0
            bump(m)
            X[0] = m
    x = torch.zeros(32)
    tilelang.compile(main)(x)
    assert x[0].item() == 5.0


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_ptx_assembles(arch, ptxas):
    ptx = argmax_and_double().get_kernel_source(arch=arch)
    assert "shfl.sync.bfly.b32" in ptx
    ptxas(ptx, arch)


@pytest.mark.gpu
def test_on_gpu_against_torch_and_the_simulator():
    x = torch.randn(32)
    out = [torch.zeros(1), torch.zeros(1, dtype=torch.int32), torch.zeros(32)]
    gpu = [t.cuda() for t in out]
    argmax_and_double()(x.cuda(), *gpu)
    argmax_and_double()(x, *out)
    assert gpu[0].item() == x.max().item() and gpu[1].item() == x.argmax().item()
    torch.testing.assert_close(gpu[2].cpu().double(), x.double() * 2 + 1)
    for g, s in zip(gpu, out):
        assert torch.equal(g.cpu(), s)
