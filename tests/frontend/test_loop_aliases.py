"""A name a T.Parallel body binds to an expression of the loop's indices (``idx_1 = d``)
and then indexes a fragment with (``cos_frag[idx_1]``): the loop's own index
(``frontend/loop_aliases.py``), as HunYuan's RoPE kernel writes it, with the same names
bound again in a second loop. A name bound twice in the body, or under a branch, stays a
name (and the fragment read is refused as before). In simulation against torch, in PTX
through ptxas, on the GPU against the simulator."""
import pytest
import torch

import tilejit
import tilejit.language as T


def rope(dim=64, heads=4, rebind=False):
    half = dim // 2

    @T.prim_func
    def main(Q: T.Tensor((2, heads, dim), T.float32), K: T.Tensor((2, heads, dim), T.float32),
             Cos: T.Tensor((2, dim), T.float32), Sin: T.Tensor((2, dim), T.float32),
             QO: T.Tensor((2, heads, dim), T.float32), KO: T.Tensor((2, heads, dim), T.float32)):
        with T.Kernel(2, threads=64) as bx:
            cos_frag = T.alloc_fragment((dim,), T.float32)
            sin_frag = T.alloc_fragment((dim,), T.float32)
            for d in T.Parallel(dim):
                cos_frag[d] = Cos[bx, d]
                sin_frag[d] = Sin[bx, d]
            for h in T.unroll(heads):
                for d in T.Parallel(half):
                    idx_1 = d
                    idx_2 = d + half
                    if rebind:
                        idx_1 = d + 0
                    c = cos_frag[idx_1]
                    s = sin_frag[idx_1]
                    QO[bx, h, idx_1] = Q[bx, h, idx_1] * c - Q[bx, h, idx_2] * s
                    QO[bx, h, idx_2] = Q[bx, h, idx_2] * c + Q[bx, h, idx_1] * s
            for h in T.unroll(heads):
                for d in T.Parallel(half):
                    idx_1 = d                   # the same names, bound again
                    idx_2 = d + half
                    c = cos_frag[idx_1]
                    s = sin_frag[idx_1]
                    KO[bx, h, idx_1] = K[bx, h, idx_1] * c - K[bx, h, idx_2] * s
                    KO[bx, h, idx_2] = K[bx, h, idx_2] * c + K[bx, h, idx_1] * s
    return main


def _rotate(x, cos, sin):
    half = x.shape[-1] // 2
    c, s = cos[:, None, :half].double(), sin[:, None, :half].double()
    x1, x2 = x[..., :half].double(), x[..., half:].double()
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1).float()


def _inputs():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(2, 4, 64, generator=g), torch.randn(2, 4, 64, generator=g),
            torch.randn(2, 64, generator=g), torch.randn(2, 64, generator=g)]


def test_an_alias_of_the_loops_index_indexes_the_fragment(ptxas):
    q, k, cos, sin = _inputs()
    qo, ko = tilejit.compile(rope(), out_idx=[4, 5], target="sim")(q, k, cos, sin)
    torch.testing.assert_close(qo, _rotate(q, cos, sin))
    torch.testing.assert_close(ko, _rotate(k, cos, sin))
    ptxas(tilejit.compile(rope(), out_idx=[4, 5], target="cuda -arch=sm_90a")
          .get_kernel_source(), "sm_90a")


def test_a_name_bound_twice_stays_a_name():
    with pytest.raises(tilejit.CompileError, match=r"`cos_frag\[idx_1\]` indexes the "
                                                   r"thread-distributed fragment"):
        tilejit.compile(rope(rebind=True), out_idx=[4, 5], target="sim")(*_inputs())


@pytest.mark.gpu
def test_an_alias_of_the_loops_index_on_the_gpu():
    q, k, cos, sin = _inputs()
    qo, ko = tilejit.compile(rope(), out_idx=[4, 5])(q.cuda(), k.cuda(), cos.cuda(),
                                                      sin.cuda())
    torch.testing.assert_close(qo.cpu(), _rotate(q, cos, sin))
    torch.testing.assert_close(ko.cpu(), _rotate(k, cos, sin))
