"""``@tilelang.autotune(configs=...)`` stacked over ``@tilelang.jit``, in TileLang's two
styles, with only the imports changed (``from tilelang.autotuner import autotune`` too).
In simulation the first config that compiles is chosen; the ``gpu`` tests time every
config on the device and check the results against torch."""
import warnings

import pytest

import tilejit as tilelang
import tilejit.language as T
from tilejit.autotuner import (AutotuneWarning, ClassicAutotuner, EagerAutotuner, autotune,
                               get_autotune_inputs, set_autotune_inputs)

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TILEJIT_DISABLE_CACHE", raising=False)
    return tmp_path


# -- eager style (seed 000's form: `from tilelang.autotuner import autotune`) -----------
def vector_add_program(A, B, block_M=128, threads=128):
    M = T.const("M")
    A: T.Tensor((M,), T.float32)
    B: T.Tensor((M,), T.float32)
    C = T.empty((M,), T.float32)
    with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
        for i in T.Parallel(block_M):
            if bx * block_M + i < M:
                C[bx * block_M + i] = A[bx * block_M + i] + B[bx * block_M + i]
    return C


EAGER_CONFIGS = [{"block_M": 64, "threads": 2048},     # not a launchable block size
                 {"block_M": 256, "threads": 256}, {"block_M": 128}]

vector_add = autotune(configs=EAGER_CONFIGS, warmup=1, rep=2)(tilelang.jit(vector_add_program))


def test_eager_program_tunes_and_runs_the_first_valid_config_in_simulation():
    assert isinstance(vector_add, EagerAutotuner)
    a, b = torch.randn(1000), torch.randn(1000)
    with pytest.warns(AutotuneWarning, match=r"'threads': 2048.*skipped: failed: ValueError: "
                                             r".*T.Kernel threads"):
        c = vector_add(a, b)
    torch.testing.assert_close(c, a + b)
    assert vector_add.best_config == EAGER_CONFIGS[1]
    notes = [note for _, _, note in vector_add.timings]
    assert notes[1].startswith("valid") and notes[2].startswith("not tried")
    assert all(ms is None for _, ms, _ in vector_add.timings)      # simulation: not timed
    with warnings.catch_warnings():
        warnings.simplefilter("error")                             # tuned: from memory
        torch.testing.assert_close(vector_add(b, a), a + b)
    again = autotune(configs=EAGER_CONFIGS)(tilelang.jit(vector_add_program))
    with warnings.catch_warnings():
        warnings.simplefilter("error")                             # from the disk cache
        torch.testing.assert_close(again(a, b), a + b)
    assert again.best_config == EAGER_CONFIGS[1]
    assert {note for _, _, note in again.timings} == {"from the disk cache"}


def test_eager_autotune_checks_configs_and_calls():
    program = tilelang.jit(vector_add_program)
    with pytest.raises(ValueError, match=r"'blockM' is not a constexpr parameter of "
                                         r"vector_add_program .*block_M, threads"):
        autotune(configs=[{"blockM": 64}])(program)
    with pytest.raises(ValueError, match="configs must be a list of dicts"):
        autotune(configs=lambda: [{"block_M": 64}])(program)
    a, b = torch.randn(300), torch.randn(300)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # explicit values: used, nothing tuned
        torch.testing.assert_close(vector_add(a, b, block_M=64), a + b)


def test_no_valid_config_lists_why():
    tuned = tilelang.autotune(configs=[{"threads": 0}, {"threads": 2000}])(
        tilelang.jit(vector_add_program))
    with pytest.warns(AutotuneWarning):
        with pytest.raises(RuntimeError, match=r"(?s)no config compiled.*'threads': 0.*"
                                               r"'threads': 2000"):
            tuned(torch.randn(8), torch.randn(8))


# -- classic style: a factory returning a prim_func; the call returns the kernel --------
def _matmul_configs(M, N, K):
    return [{"block_M": 256, "block_N": 256, "block_K": 256},   # 512 KiB of shared memory
            {"block_M": 64, "block_N": 64, "block_K": 32},
            {"block_M": 128, "block_N": 128, "block_K": 32}]


@tilelang.autotune(configs=_matmul_configs, warmup=2, rep=5)
@tilelang.jit(out_idx=[-1])
def matmul(M, N, K, block_M=128, block_N=128, block_K=32, num_stages=2, threads=128):
    dtype, accum_dtype = "float16", "float32"

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
             C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M),
                      threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])
    return main


def test_classic_factory_returns_the_kernel_of_the_first_valid_config_in_simulation():
    assert isinstance(matmul, ClassicAutotuner)
    with pytest.warns(AutotuneWarning, match=r"'block_M': 256.*skipped: failed: CompileError"):
        kernel = matmul(128, 64, 64)
    assert matmul.best_config == {"block_M": 64, "block_N": 64, "block_K": 32}
    assert kernel.kernel.source.namespace["block_M"] == 64       # the factory's closure
    a = torch.randn(128, 64, dtype=torch.float16)
    b = torch.randn(64, 64, dtype=torch.float16)
    c = kernel(a, b)
    err = (c.double() - a.double() @ b.double()).abs().max().item()
    assert err < 1e-2 * (1 + (a.double() @ b.double()).abs().max().item())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert matmul(128, 64, 64) is kernel                     # tuned: from memory
    explicit = matmul(128, 64, 64, block_M=64, block_N=64, block_K=64)  # TileLang's rule
    assert explicit is not kernel and explicit.kernel.source.namespace["block_K"] == 64
    torch.testing.assert_close(explicit(a, b), c)


def test_classic_autotune_checks_configs():
    factory = tilelang.jit(out_idx=[-1])(matmul.program.factory)
    with pytest.raises(ValueError, match=r"'block_m' is not a parameter of matmul "
                                         r"\(parameters: M, N, K, block_M"):
        autotune(configs=[{"block_m": 64}])(factory)
    with pytest.raises(ValueError, match="non-empty list"):
        autotune(configs=lambda M, N, K: [])(factory)(64, 64, 64)
    with pytest.raises(ValueError, match="key does not apply"):
        autotune(configs=[{"block_M": 64}], key=["M"])(factory)
    with pytest.raises(TypeError, match=r"applies to a @tilejit.kernel or a @tilejit.jit"):
        autotune(configs=[{"block_M": 64}])(matmul.program.factory)


@tilelang.jit(out_idx=[1])
def dynamic_scale(block=128, threads=128):
    n = T.dynamic("n")

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=threads) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    B[bx * block + i] = A[bx * block + i] * 3.0
    return main


def test_classic_symbolic_shapes_tune_on_the_given_inputs():
    tuned = autotune(configs=[{"block": 96, "threads": 96}, {"block": 256}])(dynamic_scale)
    a = torch.randn(1000)
    with pytest.raises(ValueError, match=r"A has symbolic extent\(s\) n; tuning needs "
                                         r"inputs of real sizes: give them with `with "
                                         r"set_autotune_inputs"):
        tuned()
    assert get_autotune_inputs() is None
    with set_autotune_inputs(a):
        assert get_autotune_inputs()[0] is a
        kernel = tuned()
    assert tuned.best_config == {"block": 96, "threads": 96}
    torch.testing.assert_close(kernel(a), a * 3.0)
    torch.testing.assert_close(kernel(a[:77]), a[:77] * 3.0)


# -- on the device: every config timed, the fastest kept, results against torch ---------
@pytest.mark.gpu
def test_eager_autotune_on_gpu():
    import torch.cuda  # noqa: F401
    tuned = autotune(configs=[{"block_M": 256, "threads": 256}, {"block_M": 512},
                              {"block_M": 1024, "threads": 256}], warmup=2, rep=5)(
        tilelang.jit(vector_add_program))
    a = torch.randn(1_000_003, device="cuda")
    b = torch.randn_like(a)
    torch.testing.assert_close(tuned(a, b), a + b)
    times = [ms for _, ms, _ in tuned.timings]
    assert all(ms is not None and ms > 0 for ms in times)
    assert tuned.best_config == tuned.configs[times.index(min(times))]


@pytest.mark.gpu
def test_classic_autotune_on_gpu():
    import torch.cuda  # noqa: F401
    tuned = autotune(configs=_matmul_configs, warmup=2, rep=5)(matmul.program)
    with pytest.warns(AutotuneWarning, match=r"'block_M': 256.*skipped"):
        kernel = tuned(1024, 1024, 1024)
    valid = [(ms, c) for c, ms, _ in tuned.timings if ms is not None]
    assert len(valid) == 2 and tuned.best_config == min(valid, key=lambda t: t[0])[1]
    a = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
    b = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
    c = kernel(a, b)
    assert c.is_cuda
    ref = a.double() @ b.double()
    assert (c.double() - ref).abs().max().item() < 1e-2 * (1 + ref.abs().max().item())
    with set_autotune_inputs(a[:512], b[:, :256]):
        small = autotune(configs=_matmul_configs, warmup=1, rep=2)(matmul.program)
        with pytest.warns(AutotuneWarning):
            kernel = small(512, 256, 1024)
    c = kernel(a[:512], b[:, :256])
    ref = a[:512].double() @ b[:, :256].double()
    assert (c.double() - ref).abs().max().item() < 1e-2 * (1 + ref.abs().max().item())


def test_timeout_is_accepted_as_tilelang_spells_it():
    eager = tilelang.autotune(configs=EAGER_CONFIGS, timeout=100)(tilelang.jit(vector_add_program))
    assert eager.timeout == 100.0
    classic = autotune(configs=_matmul_configs, timeout=30)(
        tilelang.jit(out_idx=[-1])(matmul.program.factory))
    assert classic.timeout == 30.0


@tilelang.autotune(configs=[{"threads": 128}, {"threads": 256}], warmup=1, rep=1, timeout=60)
@tilelang.jit
def add_scalar(N: int = 4096, BLOCK_N: int = 512, threads: int = 128):
    @T.prim_func
    def kernel(A: T.Tensor((N,), T.float32), s: T.float32):
        with T.Kernel(T.ceildiv(N, BLOCK_N), threads=threads) as pid_n:
            A_local = T.alloc_fragment((BLOCK_N,), T.float32)
            T.copy(A[pid_n * BLOCK_N], A_local)
            for i in T.Parallel(BLOCK_N):
                A_local[i] += s
            T.copy(A_local, A[pid_n * BLOCK_N])
    return kernel


def test_scalar_inputs_given_with_set_autotune_inputs_in_simulation():
    import torch
    from tilejit.autotuner import set_autotune_inputs
    with set_autotune_inputs(torch.randn(4096), 0.5):
        kernel = add_scalar()
    a = torch.randn(4096)
    before = a.clone()
    kernel(a, 0.25)
    torch.testing.assert_close(a, before + 0.25)


def test_scalar_inputs_without_set_autotune_inputs_in_simulation(cache_dir):
    """As on the GPU (the simulator is never kinder): tuning cannot make a scalar input."""
    with pytest.raises(ValueError, match=r"input 's' is a scalar \(float32\); give the "
                                         r"inputs with `with set_autotune_inputs"):
        add_scalar(N=1024)


@pytest.mark.gpu
def test_scalar_inputs_on_the_gpu():
    """TileLang's scalar-input autotune test: a scalar among the tuning inputs stays as
    given (only tensors are restored between configs); without inputs, a ValueError
    that names set_autotune_inputs."""
    import torch
    from tilejit.autotuner import set_autotune_inputs
    tune_a = torch.randn(4096, device="cuda")
    with set_autotune_inputs(tune_a, 0.1):
        kernel = add_scalar()
    a = torch.randn(4096, device="cuda")
    before = a.clone()
    kernel(a, 0.1)
    torch.testing.assert_close(a, before + 0.1, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="set_autotune_inputs"):
        add_scalar(N=2048)


def _profiled_matmul(**profile):
    @tilelang.autotune(configs=[{"block_M": 64, "block_N": 64, "block_K": 32},
                                {"block_M": 64, "block_N": 64, "block_K": 64}],
                       warmup=1, rep=2, **profile)
    @tilelang.jit(out_idx=[-1])
    def mm(M, N, K, block_M=64, block_N=64, block_K=32, wrong_k64=False):
        @T.prim_func
        def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
                 C: T.Tensor((M, N), "float16")):
            with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (
                    bx, by):
                A_s = T.alloc_shared((block_M, block_K), "float16")
                B_s = T.alloc_shared((block_K, block_N), "float16")
                C_l = T.alloc_fragment((block_M, block_N), "float32")
                T.clear(C_l)
                for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=1):
                    T.copy(A[by * block_M, ko * block_K], A_s)
                    T.copy(B[ko * block_K, bx * block_N], B_s)
                    T.gemm(A_s, B_s, C_l)
                if wrong_k64 and block_K == 64:
                    for i, j in T.Parallel(block_M, block_N):
                        C_l[i, j] = C_l[i, j] * 2
                T.copy(C_l, C[by * block_M, bx * block_N])
        return main
    return mm


def test_tilelang_profile_options_of_autotune():
    """TileLang's @autotune options (skip_check, supply_type, ref_prog, ...,
    cache_input_tensors, do_not_specialize) on a classic factory; elsewhere a TypeError
    naming them; an unknown option a TypeError listing the known ones."""
    mm = _profiled_matmul(skip_check=True, supply_type=tilelang.TensorSupplyType.Integer,
                          cache_input_tensors=True, do_not_specialize=["N", "K"])
    kernel = mm(128, 64, 64)
    assert mm.best_config["block_K"] == 32 and kernel is not None
    # N and K do not select the tuned config: the same key, the kernel compiled for them
    key = lambda *a: mm._key(mm.configs, a, {}, None, "sim")   # noqa: E731
    assert key(128, 64, 64) == key(128, 256, 512) != key(256, 64, 64)
    with pytest.raises(TypeError, match="unexpected keyword argument.*supply_tipe"):
        tilelang.autotune(configs=[{}], supply_tipe=1)
    with pytest.raises(TypeError, match="skip_check apply to a classic-style"):
        tilelang.autotune(configs=[{"block": 1}], skip_check=True)(scale_rows_native)


@tilelang.kernel
def scale_rows_native(X, Y, block: T.constexpr = 64):
    with T.Kernel(1, threads=64) as bx:
        for i in T.Parallel(block):
            Y[i] = X[i]


@pytest.mark.gpu
def test_tilelang_profile_options_on_the_gpu():
    """ref_prog checks each config (a wrong one skipped, with the reason); supply_type
    makes the inputs; skip_check leaves a wrong config in the running."""
    ref = lambda A, B: (A.float() @ B.float()).half()   # noqa: E731
    mm = _profiled_matmul(ref_prog=ref, supply_type=tilelang.TensorSupplyType.Integer)
    with pytest.warns(AutotuneWarning, match="differ from the reference"):
        kernel = mm(256, 256, 256, wrong_k64=True)
    assert mm.best_config["block_K"] == 32
    a = torch.randn(256, 256, dtype=torch.float16, device="cuda")
    b = torch.randn(256, 256, dtype=torch.float16, device="cuda")
    torch.testing.assert_close(kernel(a, b).float(), a.float() @ b.float(), rtol=2e-2,
                               atol=2e-2)
    timed_both = _profiled_matmul(skip_check=True)
    timed_both(256, 256, 256, wrong_k64=True)
    assert all(ms is not None for _, ms, _ in timed_both.timings)


# -- a config's own pass_configs (TileLang's per-config compile options) -------------------
_WS = tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED


def _configs_with_pass_configs():
    return [{"block_M": 64, "block_N": 64, "block_K": 32, "num_stages": 3,
             "pass_configs": {_WS: True}},
            {"block_M": 64, "block_N": 64, "block_K": 32, "num_stages": 3}]


def test_a_configs_pass_configs_compile_that_config():
    tuned = autotune(configs=_configs_with_pass_configs(), warmup=1, rep=2)(matmul.program)
    kernel = tuned(256, 256, 256, __return_kernel=True)        # TileLang's keyword, taken
    assert tuned.best_config == _configs_with_pass_configs()[0]
    # the first config turns warp specialization off; the second (the program's own
    # options) keeps it: the PTX on sm_90a tells them apart
    assert "setmaxnreg" not in kernel.get_kernel_source(arch="sm_90a")
    plain = matmul.program(256, 256, 256, block_M=64, block_N=64, block_K=32, num_stages=3)
    assert "setmaxnreg" in plain.get_kernel_source(arch="sm_90a")
    a = torch.randn(256, 256, dtype=torch.float16)
    b = torch.randn(256, 256, dtype=torch.float16)
    torch.testing.assert_close(kernel(a, b), plain(a, b))
    # one program per set of extra options, kept
    assert matmul.program.with_pass_configs({_WS: True}) is \
        matmul.program.with_pass_configs({_WS: True})
    assert matmul.program.with_pass_configs({}) is matmul.program


def test_a_configs_pass_configs_must_be_a_dict():
    bad = [{"block_M": 64, "pass_configs": [_WS]}]
    with pytest.raises(ValueError, match="pass_configs: expected a dict of PassConfigKey "
                                         "values, got list"):
        autotune(configs=bad)(matmul.program)(128, 128, 128)


@pytest.mark.gpu
def test_a_configs_pass_configs_on_the_gpu():
    tuned = autotune(configs=_configs_with_pass_configs(), warmup=1, rep=3)(matmul.program)
    a = torch.randn(512, 512, device="cuda", dtype=torch.float16)
    b = torch.randn(512, 512, device="cuda", dtype=torch.float16)
    with set_autotune_inputs(a, b):
        kernel = tuned(512, 512, 512)
    assert all(ms is not None for _, ms, _ in tuned.timings)
    ref = a.double() @ b.double()
    assert (kernel(a, b).double() - ref).abs().max().item() < 1e-2 * (1 + ref.abs().max().item())


def test_do_not_specialize_reuses_the_config_and_builds_for_the_call():
    tuned = autotune(configs=_matmul_configs, do_not_specialize=["K"])(matmul.program)
    with pytest.warns(AutotuneWarning):
        first = tuned(128, 64, 64)
    assert len(tuned._tuner_cache) == 1                    # TileLang's attribute
    with warnings.catch_warnings():
        warnings.simplefilter("error")                      # not tuned again
        second = tuned(128, 64, K=128)
    assert len(tuned._tuner_cache) == 1 and second is not first
    a = torch.randn(128, 128, dtype=torch.float16)
    b = torch.randn(128, 64, dtype=torch.float16)
    ref = a.double() @ b.double()                           # built for K = 128
    assert (second(a, b).double() - ref).abs().max().item() < 1e-2 * (1 + ref.abs().max().item())
    with pytest.warns(AutotuneWarning):
        tuned(256, 64, 64)                                  # M is specialized on
    assert len(tuned._tuner_cache) == 2
    tuned(128, 64, 64, block_M=64, block_N=64, block_K=32)  # explicit: a key of its own
    assert len(tuned._tuner_cache) == 3


def test_explicit_values_equal_to_the_defaults_never_share_the_tuned_entry():
    # (a review's finding: the key filled in defaults, so an explicit call and a tuning
    # call were one entry, and the tuned config met the explicit values)
    tuned = autotune(configs=_matmul_configs)(matmul.program)
    explicit = tuned(128, 64, 64, block_M=128, block_N=128)        # the defaults, given
    assert explicit.kernel.source.namespace["block_M"] == 128
    with pytest.warns(AutotuneWarning):
        kernel = tuned(128, 64, 64)                                 # still tuned
    assert tuned.best_config == {"block_M": 64, "block_N": 64, "block_K": 32}
    assert kernel.kernel.source.namespace["block_M"] == 64
    again = tuned(128, 64, 64, block_M=128, block_N=128)           # after the tuning
    assert again.kernel.source.namespace["block_M"] == 128
    assert tuned(128, 64, 64, 128, 128).kernel.source.namespace["block_M"] == 128


def test_a_cached_config_outside_this_calls_list_is_tuned_again():
    def configs_of(M, N, K):                      # the list depends on K, not specialized
        return [{"block_M": 64, "block_N": 64, "block_K": 32}] if K < 128 else \
            [{"block_M": 32, "block_N": 32, "block_K": 64}]
    tuned = autotune(configs=configs_of, do_not_specialize=["K"])(matmul.program)
    tuned(128, 64, 64)
    assert tuned.best_config == {"block_M": 64, "block_N": 64, "block_K": 32}
    tuned(128, 64, 256)                           # same key, another list: tuned again
    assert tuned.best_config == {"block_M": 32, "block_N": 32, "block_K": 64}
