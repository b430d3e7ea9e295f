"""TileLang programs of the kinds the seeds teach, written in TileLang's two styles with
only the imports changed: an eager-style FlashAttention forward (T.const symbols,
``.compile``), and classic-style row sum, softmax, LayerNorm and RMSNorm (factories
with ``out_idx`` returning a ``@T.prim_func``). Simulated here; the ``gpu`` twins run
the same programs on the device at larger sizes, against torch."""
import pytest

import tilejit as tilelang
import tilejit.language as T

torch = pytest.importorskip("torch")
F = torch.nn.functional


def _close(actual, ref, tol):
    """``actual`` against a float64 reference, to ``tol`` relative to the reference."""
    err = (actual.double().cpu() - ref.double().cpu()).abs().max().item()
    assert err < tol * (1 + ref.abs().max().item()), err


# -- eager style: FlashAttention forward ------------------------------------------------
@tilelang.jit
def flash_attention(Q, K, V, block_M: int = 64, block_N: int = 64, num_stages: int = 1,
                    threads: int = 128):
    B, H, S, D = T.const("B, H, S, D")
    dtype = T.float16
    accum_dtype = T.float32
    Q: T.Tensor((B, H, S, D), dtype)
    K: T.Tensor((B, H, S, D), dtype)
    V: T.Tensor((B, H, S, D), dtype)
    O = T.empty((B, H, S, D), dtype)
    scale = 1.44269504 / T.sqrt(D)          # log2(e) / sqrt(d): exponentials as exp2

    with T.Kernel(T.ceildiv(S, block_M), H, B, threads=threads) as (bx, by, bz):
        Q_shared = T.alloc_shared((block_M, D), dtype)
        K_shared = T.alloc_shared((block_N, D), dtype)
        V_shared = T.alloc_shared((block_N, D), dtype)
        acc_s = T.alloc_fragment((block_M, block_N), accum_dtype)
        acc_s_cast = T.alloc_fragment((block_M, block_N), dtype)
        acc_o = T.alloc_fragment((block_M, D), accum_dtype)
        scores_max = T.alloc_fragment((block_M,), accum_dtype)
        scores_max_prev = T.alloc_fragment((block_M,), accum_dtype)
        scores_scale = T.alloc_fragment((block_M,), accum_dtype)
        scores_sum = T.alloc_fragment((block_M,), accum_dtype)
        logsum = T.alloc_fragment((block_M,), accum_dtype)

        T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], Q_shared)
        T.fill(acc_o, 0)
        T.fill(logsum, 0)
        T.fill(scores_max, -T.infinity(accum_dtype))
        for k in T.Pipelined(T.ceildiv(S, block_N), num_stages=num_stages):
            T.copy(K[bz, by, k * block_N:(k + 1) * block_N, :], K_shared)
            T.clear(acc_s)
            T.gemm(Q_shared, K_shared, acc_s, transpose_B=True,
                   policy=T.GemmWarpPolicy.FullRow)
            T.copy(scores_max, scores_max_prev)
            T.reduce_max(acc_s, scores_max, dim=1, clear=False)
            for i in T.Parallel(block_M):
                scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
            for i, j in T.Parallel(block_M, block_N):
                acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
            T.reduce_sum(acc_s, scores_sum, dim=1)
            for i in T.Parallel(block_M):
                logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
            T.copy(acc_s, acc_s_cast)       # the scores as float16: mma's A operand
            for i, j in T.Parallel(block_M, D):
                acc_o[i, j] *= scores_scale[i]
            T.copy(V[bz, by, k * block_N:(k + 1) * block_N, :], V_shared)
            T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
        for i, j in T.Parallel(block_M, D):
            acc_o[i, j] /= logsum[i]
        T.copy(acc_o, O[bz, by, bx * block_M:(bx + 1) * block_M, :])

    return O


def _qkv(b, h, s, d, device):
    return [torch.randn(b, h, s, d, dtype=torch.float16, device=device) for _ in range(3)]


def _sdpa(q, k, v, dtype):
    return F.scaled_dot_product_attention(q.to(dtype), k.to(dtype), v.to(dtype))


def test_eager_flash_attention_against_sdpa():
    q, k, v = _qkv(1, 2, 128, 64, "cpu")
    o = flash_attention(q, k, v)
    assert o.dtype == torch.float16 and o.shape == q.shape
    torch.testing.assert_close(o.float(), _sdpa(q, k, v, torch.float32), atol=2e-2, rtol=0)


def test_eager_flash_attention_compiles_to_mma():
    kernel = flash_attention.compile(B=1, H=2, S=128, D=64, block_N=32)
    assert kernel.constants["block_N"] == 32 and kernel.constants["block_M"] == 64
    ptx = kernel.get_kernel_source()
    assert "mma.sync" in ptx and ".entry flash_attention_kernel" in ptx
    q, k, v = _qkv(1, 2, 128, 64, "cpu")
    torch.testing.assert_close(kernel(q, k, v).float(), _sdpa(q, k, v, torch.float32),
                               atol=2e-2, rtol=0)


@pytest.mark.gpu
def test_eager_flash_attention_on_gpu():
    import torch.cuda  # noqa: F401
    for b, h, s, d in ((1, 8, 1024, 64), (2, 4, 512, 128)):
        q, k, v = _qkv(b, h, s, d, "cuda")
        o = flash_attention(q, k, v)
        assert o.is_cuda
        _close(o, _sdpa(q, k, v, torch.float64), 1e-2)
    kernel = flash_attention.compile(B=1, H=8, S=1024, D=64, num_stages=2)
    from tilejit.runtime.cuda_driver import device_arch
    # T.gemm is wgmma on an H100/H200 (sm_90a, the default arch there), else mma.sync
    engine = "wgmma.mma_async" if device_arch(0) == "sm_90a" else "mma.sync"
    assert engine in kernel.get_kernel_source()
    q, k, v = _qkv(1, 8, 1024, 64, "cuda")
    _close(kernel(q, k, v), _sdpa(q, k, v, torch.float64), 1e-2)


# -- classic style: reductions and norms, factories with out_idx ------------------------
@tilelang.jit(out_idx=[1])
def row_sum(M, N, block_N=64, threads=128, dtype="float32"):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M,), dtype)):
        with T.Kernel(M, threads=threads) as row:
            tile = T.alloc_fragment((1, block_N), "float32")
            total = T.alloc_fragment((1,), "float32")
            T.clear(total)
            for k in T.serial(T.ceildiv(N, block_N)):
                for i, j in T.Parallel(1, block_N):
                    tile[i, j] = T.if_then_else(k * block_N + j < N,
                                                X[row, k * block_N + j], 0)
                T.reduce_sum(tile, total, dim=1, clear=False)
            Y[row] = total[0]
    return main


@tilelang.jit(out_idx=[1])
def softmax(M, N, threads=128, dtype="float16"):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(M, threads=threads) as row:
            x = T.alloc_fragment((1, N), "float32")
            row_max = T.alloc_fragment((1,), "float32")
            row_sum = T.alloc_fragment((1,), "float32")
            for i, j in T.Parallel(1, N):
                x[i, j] = T.Cast("float32", X[row, j])
            T.reduce_max(x, row_max, dim=1)
            for i, j in T.Parallel(1, N):
                x[i, j] = T.exp(x[i, j] - row_max[i])
            T.reduce_sum(x, row_sum, dim=1)
            for i, j in T.Parallel(1, N):
                Y[row, j] = T.Cast(dtype, x[i, j] / row_sum[i])
    return main


@tilelang.jit(out_idx=[3])
def layer_norm(M, N, eps=1e-5, block_M=2, threads=128, dtype="float16"):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype),
             Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            sq = T.alloc_fragment((block_M, N), "float32")
            mean = T.alloc_fragment((block_M,), "float32")
            var = T.alloc_fragment((block_M,), "float32")
            for i, j in T.Parallel(block_M, N):
                x[i, j] = T.if_then_else(bx * block_M + i < M,
                                         T.Cast("float32", X[bx * block_M + i, j]), 0)
            T.reduce_sum(x, mean, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] - mean[i] / N
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, var, dim=1)
            for i, j in T.Parallel(block_M, N):
                if bx * block_M + i < M:
                    Y[bx * block_M + i, j] = T.Cast(
                        dtype, x[i, j] * T.rsqrt(var[i] / N + eps) * W[j] + B[j])
    return main


@tilelang.jit(out_idx=[2])
def rms_norm(M, N, eps=1e-6, block_M=2, threads=128, dtype="float16"):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            sq = T.alloc_fragment((block_M, N), "float32")
            ms = T.alloc_fragment((block_M,), "float32")
            for i, j in T.Parallel(block_M, N):
                x[i, j] = T.if_then_else(bx * block_M + i < M,
                                         T.Cast("float32", X[bx * block_M + i, j]), 0)
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, ms, dim=1)
            for i, j in T.Parallel(block_M, N):
                if bx * block_M + i < M:
                    Y[bx * block_M + i, j] = T.Cast(dtype, x[i, j] * T.rsqrt(ms[i] / N + eps)
                                                    * W[j])
    return main


def _run_row_sum(m, n, device):
    x = torch.randn(m, n, device=device)
    y = row_sum(m, n)(x)
    assert y.shape == (m,) and y.device == x.device
    _close(y, x.double().sum(dim=-1), 1e-5)


def _run_softmax(m, n, device):
    x = torch.randn(m, n, device=device, dtype=torch.float16)
    y = softmax(m, n)(x)
    assert y.dtype == torch.float16
    _close(y, torch.softmax(x.double(), dim=-1), 2e-3)


def _run_layer_norm(m, n, device):
    x = torch.randn(m, n, device=device, dtype=torch.float16)
    w = torch.randn(n, device=device, dtype=torch.float16)
    b = torch.randn(n, device=device, dtype=torch.float16)
    ref = F.layer_norm(x.double(), (n,), w.double(), b.double(), 1e-5)
    _close(layer_norm(m, n)(x, w, b), ref, 5e-3)


def _run_rms_norm(m, n, device):
    x = torch.randn(m, n, device=device, dtype=torch.float16)
    w = torch.randn(n, device=device, dtype=torch.float16)
    xd = x.double()
    ref = xd * torch.rsqrt(xd.pow(2).mean(dim=-1, keepdim=True) + 1e-6) * w.double()
    _close(rms_norm(m, n)(x, w), ref, 5e-3)


CLASSIC = {"row_sum": _run_row_sum, "softmax": _run_softmax, "layer_norm": _run_layer_norm,
           "rms_norm": _run_rms_norm}


@pytest.mark.parametrize("name", sorted(CLASSIC))
def test_classic_program_simulated(name):
    CLASSIC[name](7, 192 if name == "row_sum" else 128, "cpu")   # 7 rows: a ragged block


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CLASSIC))
def test_classic_program_on_gpu(name):
    import torch.cuda  # noqa: F401
    CLASSIC[name](4095, 1024, "cuda")
    CLASSIC[name](64, 4096 if name == "row_sum" else 2048, "cuda")


def test_classic_factory_arguments_are_checked_at_the_call():
    kernel = softmax(4, 64)
    with pytest.raises(ValueError, match=r"argument 'X': shape\[1\] must be 64, got 32"):
        kernel(torch.randn(4, 32).half())
    with pytest.raises(TypeError, match=r"takes the 3 input\(s\) \['X', 'W', 'B'\]"):
        layer_norm(4, 64)(torch.randn(4, 64).half())
