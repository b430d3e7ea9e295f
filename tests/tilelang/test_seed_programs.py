"""The seeds' TileLang programs with only their imports changed (tests/programs/,
copied from the seeds verbatim): run in simulation and, with ``-m gpu``, on the device,
against torch."""

import pytest
import torch

import tilejit
from tilejit.errors import CompileError



def _device(gpu):
    return "cuda" if gpu else "cpu"


def _run_matmul(gpu):
    from matmul_seed000 import matmul
    a = torch.randn(256, 128, dtype=torch.float16, device=_device(gpu))
    b = torch.randn(128, 192, dtype=torch.float16, device=_device(gpu))
    c = matmul(a, b, 128, 128, 32)
    err = (c.float() - a.float() @ b.float()).abs().max().item()
    assert err < 1e-2 * (1 + (a.float() @ b.float()).abs().max().item()), err


def _run_matmul_kernel(gpu):
    import matmul_kernel_seed004 as mod
    kernel = tilejit.compile(mod.matmul_kernel, target="cuda")
    a = torch.randn(mod.M, mod.K, dtype=torch.float16, device=_device(gpu))
    b = torch.randn(mod.K, mod.N, dtype=torch.float16, device=_device(gpu))
    c = torch.empty(mod.M, mod.N, dtype=torch.float16, device=_device(gpu))
    kernel(a, b, c)
    ref = a.float() @ b.float()
    assert (c.float() - ref).abs().max().item() < 1e-2 * (1 + ref.abs().max().item())


def _run_flashattn(gpu):
    from flashattn_seed000 import flashattn
    b, s, h, d = (2, 1024, 4, 128) if gpu else (1, 128, 2, 64)
    q, k, v = (torch.randn(b, s, h, d, dtype=torch.float16, device=_device(gpu))
               for _ in range(3))
    kernel = flashattn(b, h, s, d, True)      # the seed's causal path is complete
    o = kernel(q, k, v)
    ref = torch.nn.functional.scaled_dot_product_attention(
        q.float().transpose(1, 2), k.float().transpose(1, 2), v.float().transpose(1, 2),
        is_causal=True).transpose(1, 2)
    assert (o.float() - ref).abs().max().item() < 2e-2


def _close(actual, ref, tol):
    """`actual` against a float64 reference, to `tol` relative to the reference's size."""
    err = (actual.double() - ref).abs().max().item()
    assert err < tol * (1 + ref.abs().max().item()), err


def _run_matmul_dynamic_mnk(gpu):
    import tilejit.language as T
    from matmul_dynamic_mnk_seed000 import matmul_dynamic_mnk
    shapes = [(1024, 1024, 1024), (768, 512, 256)] if gpu else [(128, 64, 96), (64, 128, 32)]
    for m, n, k in shapes:          # one kernel serves every shape: M, N, K are T.dynamic
        a = torch.randn(m, k, dtype=torch.float16, device=_device(gpu))
        b = torch.randn(k, n, dtype=torch.float16, device=_device(gpu))
        c = matmul_dynamic_mnk(a, b, 64, 64, 32, False, False,
                               T.float16, T.float16, T.float32, 2, 128)
        _close(c, a.double() @ b.double(), 1e-2)


def _run_seed001_matmul(gpu):
    from matmul_seed001 import matmul
    m, n, k = (1024, 1024, 1024) if gpu else (128, 64, 96)
    a = torch.randn(m, k, device=_device(gpu), dtype=torch.float16)
    b = torch.randn(k, n, device=_device(gpu), dtype=torch.float16)
    c = matmul(a, b)
    _close(c, a.double() @ b.double(), 1e-2)


def _run_ch08_row_sum(gpu):
    from row_sum_seed002_ch08 import tilelang_row_sum
    m, n = (1024, 1024) if gpu else (8, 64)
    x = torch.randn(m, n, device=_device(gpu), dtype=torch.float32)
    _close(tilelang_row_sum(x), x.double().sum(dim=-1), 1e-5)


def _run_ch09_softmax(gpu):
    from softmax_seed002_ch09 import tilelang_softmax
    m, n = (4096, 4096) if gpu else (8, 128)       # the 4096^2 of the seed's benchmark
    x = torch.randn(m, n, device=_device(gpu), dtype=torch.float16)
    _close(tilelang_softmax(x), torch.softmax(x.double(), dim=-1), 2e-3)


def _run_ch10_matmul(gpu):
    from matmul_seed002_ch10 import tilelang_matmul
    m, n, k = (1024, 1024, 1024) if gpu else (256, 128, 64)
    a = torch.randn(m, k, device=_device(gpu), dtype=torch.float16)
    b = torch.randn(k, n, device=_device(gpu), dtype=torch.float16)
    compiled = tilelang_matmul.compile(M=m, N=n, K=k, block_m=128, block_n=128, block_k=32)
    c_tilelang = compiled(a, b)
    _close(c_tilelang, a.double() @ b.double(), 1e-2)
    if gpu:
        assert compiled.get_kernel_source()


def _run_ch11_layer_norm(gpu):
    from layer_norm_seed002_ch11 import tilelang_layer_norm
    m, n = (4096, 1024) if gpu else (8, 128)
    x = torch.randn(m, n, device=_device(gpu), dtype=torch.float16)
    gamma = torch.randn(n, device=_device(gpu), dtype=torch.float16)
    beta = torch.randn(n, device=_device(gpu), dtype=torch.float16)
    ref = torch.nn.functional.layer_norm(x.double(), (n,), gamma.double(), beta.double(), 1e-5)
    _close(tilelang_layer_norm(x, gamma, beta), ref, 5e-3)


def _run_ch12_rms_norm(gpu):
    from rms_norm_seed002_ch12 import tilelang_rms_norm
    m, n = (4096, 1024) if gpu else (8, 128)
    x = torch.randn(m, n, device=_device(gpu), dtype=torch.float16)
    w = torch.randn(n, device=_device(gpu), dtype=torch.float16)
    xd = x.double()
    ref = xd * torch.rsqrt(xd.pow(2).mean(dim=-1, keepdim=True) + 1e-6) * w.double()
    _close(tilelang_rms_norm(x, w), ref, 5e-3)


def _sdpa64(q, k, v):
    return torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double())


def _run_ch13_flash_attention(gpu):
    from flash_attention_seed002_ch13 import tilelang_flash_attention
    batch, heads, sequence, dimension = (1, 8, 1024, 64) if gpu else (1, 2, 128, 64)
    q = torch.randn(batch, heads, sequence, dimension, device=_device(gpu), dtype=torch.float16)
    k = torch.randn_like(q)
    v = torch.randn_like(q)
    kernel = tilelang_flash_attention(batch=batch, heads=heads, sequence=sequence,
                                      dimension=dimension, block_m=64, block_n=64,
                                      num_stages=2, threads=128)
    output_tilelang = kernel(q, k, v)
    _close(output_tilelang, _sdpa64(q, k, v), 2e-2)


# Section 零基础教程's calling code compiles with example tensors,
# ``fn.compile(a, b, block_size=256)``: the *_compile entries run that call as written (the
# example tensors give the T.const sizes), the others call the kernel directly.

def _run_s05_vector_add(gpu, seed_call=False):
    from vector_add_seed002_s05 import tilelang_vector_add
    n = 1 << 20 if gpu else 1000                  # 1000: a ragged last block
    a = torch.randn(n, device=_device(gpu), dtype=torch.float32)
    b = torch.randn(n, device=_device(gpu), dtype=torch.float32)
    if seed_call:
        kernel = tilelang_vector_add.compile(a, b, block_size=256)
    else:
        kernel = lambda a, b: tilelang_vector_add(a, b, block_size=256)
    actual = kernel(a, b)
    torch.testing.assert_close(actual, a + b)
    if gpu and seed_call:
        assert kernel.get_kernel_source()


def _run_s06_row_sum(gpu, seed_call=False):
    from row_sum_seed002_s06 import tilelang_row_sum
    m, n = (1024, 1024) if gpu else (16, 64)
    x = torch.randn(m, n, device=_device(gpu), dtype=torch.float32)
    kernel = (tilelang_row_sum.compile(x, block_rows=1) if seed_call
              else lambda x: tilelang_row_sum(x, block_rows=1))
    _close(kernel(x), x.double().sum(dim=-1), 1e-5)


def _run_s07_softmax(gpu, seed_call=False):
    from softmax_seed002_s07 import tilelang_softmax
    m, n = (1024, 1024) if gpu else (16, 64)
    x = torch.randn(m, n, device=_device(gpu), dtype=torch.float32)
    kernel = (tilelang_softmax.compile(x, block_rows=1) if seed_call
              else lambda x: tilelang_softmax(x, block_rows=1))
    _close(kernel(x), torch.softmax(x.double(), dim=-1), 1e-5)


def _run_s08_matmul(gpu, seed_call=False):
    from matmul_seed002_s08 import tilelang_matmul
    m, n, k = (1024, 1024, 1024) if gpu else (256, 128, 64)
    a = torch.randn(m, k, device=_device(gpu), dtype=torch.float16)
    b = torch.randn(k, n, device=_device(gpu), dtype=torch.float16)
    kernel = (tilelang_matmul.compile(a, b, block_m=128, block_n=128, block_k=32) if seed_call
              else lambda a, b: tilelang_matmul(a, b, block_m=128, block_n=128, block_k=32))
    _close(kernel(a, b), a.double() @ b.double(), 1e-2)


def _run_s09_rms_norm(gpu, seed_call=False):
    from rms_norm_seed002_s09 import tilelang_rms_norm
    m, n, eps = (4096, 1024, 1e-6) if gpu else (16, 64, 1e-6)
    x = torch.randn(m, n, device=_device(gpu), dtype=torch.float32)
    weight = torch.randn(n, device=_device(gpu), dtype=torch.float32)
    kernel = (tilelang_rms_norm.compile(x, weight, block_rows=1, eps=eps) if seed_call
              else lambda x, weight: tilelang_rms_norm(x, weight, block_rows=1, eps=eps))
    xd = x.double()
    ref = xd * torch.rsqrt(xd.pow(2).mean(dim=-1, keepdim=True) + eps) * weight.double()
    _close(kernel(x, weight), ref, 1e-5)


def _run_s09_layer_norm(gpu):
    from layer_norm_seed002_s09 import tilelang_layer_norm
    m, n, eps = (4096, 1024, 1e-5) if gpu else (16, 64, 1e-5)
    x = torch.randn(m, n, device=_device(gpu), dtype=torch.float32)
    weight = torch.randn(n, device=_device(gpu), dtype=torch.float32)
    bias = torch.randn(n, device=_device(gpu), dtype=torch.float32)
    y = tilelang_layer_norm(x, weight, bias, block_rows=1, eps=eps)
    ref = torch.nn.functional.layer_norm(x.double(), (n,), weight.double(), bias.double(), eps)
    _close(y, ref, 1e-5)


def _run_s13_flash_attention(gpu):
    from flash_attention_seed002_s13 import tilelang_flash_attention
    b, h, s, d = (1, 8, 1024, 64) if gpu else (1, 2, 128, 64)
    q = torch.randn(b, h, s, d, device=_device(gpu), dtype=torch.float16)
    k = torch.randn_like(q)
    v = torch.randn_like(q)
    o = tilelang_flash_attention(q, k, v, block_m=64, block_n=64, block_d=d)
    _close(o, _sdpa64(q, k, v), 2e-2)


_seed_call = lambda run: (lambda gpu: run(gpu, seed_call=True))


PROGRAMS = {"matmul_seed000": _run_matmul, "matmul_kernel_seed004": _run_matmul_kernel,
            "flashattn_seed000": _run_flashattn,
            "matmul_seed001": _run_seed001_matmul,
            "flash_attention_seed002_ch13": _run_ch13_flash_attention,
            "vector_add_seed002_s05": _run_s05_vector_add,
            "row_sum_seed002_s06": _run_s06_row_sum,
            "softmax_seed002_s07": _run_s07_softmax,
            "matmul_seed002_s08": _run_s08_matmul,
            "rms_norm_seed002_s09": _run_s09_rms_norm,
            "layer_norm_seed002_s09": _run_s09_layer_norm,
            "matmul_dynamic_mnk_seed000": _run_matmul_dynamic_mnk,
            # the seeds' own calls: fn.compile(example tensors, **params)
            "vector_add_seed002_s05_compile": _seed_call(_run_s05_vector_add),
            "row_sum_seed002_s06_compile": _seed_call(_run_s06_row_sum),
            "softmax_seed002_s07_compile": _seed_call(_run_s07_softmax),
            "matmul_seed002_s08_compile": _seed_call(_run_s08_matmul),
            "rms_norm_seed002_s09_compile": _seed_call(_run_s09_rms_norm),
            "row_sum_seed002_ch08": _run_ch08_row_sum,
            "softmax_seed002_ch09": _run_ch09_softmax,
            "matmul_seed002_ch10": _run_ch10_matmul,
            "layer_norm_seed002_ch11": _run_ch11_layer_norm,
            "rms_norm_seed002_ch12": _run_ch12_rms_norm}


# the seeds' programs that do not run under tilejit: name -> (runner, the feature it lacks)
FAILING = {
    "flash_attention_seed002_s13": (
        _run_s13_flash_attention, CompileError,
        "T.gemm(scores, v_shared, ...) with a float32 A operand and a float16 B one (the seed "
        "leaves the cast to the reader): CompileError 'no mma.sync instruction for A/B/C "
        "dtypes float32/float16/float32'"),
}


def _failing(name):
    _, raises, reason = FAILING[name]
    return pytest.param(name, marks=pytest.mark.xfail(reason=reason, raises=raises, strict=True))


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_seed_program_simulated(name):
    PROGRAMS[name](gpu=False)


@pytest.mark.parametrize("name", [_failing(n) for n in sorted(FAILING)])
def test_seed_program_not_running_simulated(name):
    FAILING[name][0](gpu=False)


def test_flashattn_seed000_non_causal_reads_acc_s_before_writing_it():
    """Seed 000's non-causal path never initializes acc_s before T.gemm accumulates into
    it (TileLang's own example clears it in an ``else:``): wrong results on the GPU; the
    simulator reports the tile and the line."""
    import flashattn_seed000
    from tilejit.sim.runtime import UninitializedReadError
    q, k, v = (torch.randn(1, 128, 2, 64, dtype=torch.float16) for _ in range(3))
    kernel = flashattn_seed000.flashattn(1, 2, 128, 64, False)
    with pytest.raises(UninitializedReadError, match=r"acc_s\[0, 0\] is read before it is "
                                                     r"written \(fragment tile acc_s") as info:
        kernel(q, k, v)
    path = flashattn_seed000.__file__
    line = next(n for n, text in enumerate(open(path), 1)
                if "T.gemm(Q_shared, K_shared, acc_s" in text)
    assert f'File "{path}", line {line}' in str(info.value)


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_seed_program_gpu(name):
    PROGRAMS[name](gpu=True)


@pytest.mark.gpu
@pytest.mark.parametrize("name", [_failing(n) for n in sorted(FAILING)])
def test_seed_program_not_running_gpu(name):
    FAILING[name][0](gpu=True)
