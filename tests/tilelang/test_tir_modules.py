"""TileLang's ``tilelang.language.tir.op`` and ``.ir`` modules, as programs import them
(``from tilelang.language.tir import op as tir_op``: ``tir_op.abs``,
``tir_op.if_then_else``; TileLang's cast test reads ``_VALID_CAST_ROUNDING_MODES`` from
``tir.ir``): their names are ``tilejit.language``'s, in a kernel and outside it; a name
tilejit lacks is refused by name. In simulation against torch, in PTX through ptxas, on
the GPU against the simulator."""
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit.language.compat import NotSupportedError
from tilejit.language.tir import op as tir_op
from tilejit.language.tir.ir import _VALID_CAST_ROUNDING_MODES


@T.prim_func
def soft_max_pair(A: T.Tensor((4, 64), T.float32), B: T.Tensor((4, 64), T.float32),
                  C: T.Tensor((4, 64), T.float32)):
    with T.Kernel(4, threads=64) as bx:
        for j in T.Parallel(64):
            a = A[bx, j]
            b = B[bx, j]
            bigger = 0.5 * (a + b + tir_op.abs(a - b))
            C[bx, j] = tir_op.if_then_else(a != 0.0, bigger, tir_op.round(b))


def _expected(a, b):
    return torch.where(a != 0, torch.maximum(a, b), torch.round(b))


def test_the_modules_names_are_the_languages(ptxas):
    assert tir_op.abs is T.abs and tir_op.if_then_else is T.if_then_else
    assert {"", "rn", "rs"} <= set(_VALID_CAST_ROUNDING_MODES)
    a, b = torch.randn(4, 64), torch.randn(4, 64) * 4
    a[0, :8] = 0
    c = torch.zeros(4, 64)
    tilejit.compile(soft_max_pair, target="sim")(a, b, c)
    torch.testing.assert_close(c, _expected(a, b))
    ptxas(tilejit.compile(soft_max_pair, target="cuda -arch=sm_90a").get_kernel_source(),
          "sm_90a")


def test_a_name_tilejit_lacks_is_refused_by_name():
    with pytest.raises(NotSupportedError, match=r"T.call_packed .* is not supported"):
        getattr(tir_op, "call_packed")  # noqa: B009 - the attribute read is the test


@pytest.mark.gpu
def test_the_modules_names_on_the_gpu():
    a, b = torch.randn(4, 64), torch.randn(4, 64) * 4
    a[0, :8] = 0
    c = torch.zeros(4, 64, device="cuda")
    tilejit.compile(soft_max_pair)(a.cuda(), b.cuda(), c)
    torch.testing.assert_close(c.cpu(), _expected(a, b))
