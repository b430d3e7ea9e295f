"""TileLang's reducers (T.alloc_reducer, T.finalize_reducer; frontend/reducers.py; the v2
epoch T.reducer_init / T.reducer_update / T.finalize_reducer(r, dst) and its rules,
frontend/reducer_epochs.py): a
T.Parallel loop folds many iterations into one element (sum, max, min), in the
simulator against torch, with TileLang's own patterns (the fold in a branch of a
compile-time `if`, a reducer allocated inside a pipelined loop, finalize in a branch, the
v1 syntax without `replication`); bad folds and batches are errors at the line; the PTX
is assembled for sm_80 and sm_90a; on the GPU against torch and the simulator."""
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit.errors import CompileError


def _line(text):
    return next(n for n, src in enumerate(open(__file__), 1) if text in src)


def row_reduce(block_M, block_N, dtype, op, threads=256):
    @T.prim_func
    def kernel(A: T.Tensor((block_M, block_N), dtype), B: T.Tensor((block_M,), dtype)):
        with T.Kernel(1, threads=threads):
            acc = T.alloc_reducer(block_M, dtype, op=op, replication="all")
            if op == "sum":
                T.clear(acc)
            elif op == "max":
                T.fill(acc, -T.infinity(dtype))
            else:
                T.fill(acc, T.infinity(dtype))
            A_frag = T.alloc_fragment((block_M, block_N), dtype)
            T.copy(A, A_frag)
            for i, j in T.Parallel(block_M, block_N):
                if op == "sum":
                    acc[i] += A_frag[i, j]
                elif op == "max":
                    acc[i] = T.max(acc[i], A_frag[i, j])
                else:
                    acc[i] = T.min(A_frag[i, j], acc[i])
            T.finalize_reducer(acc)
            T.copy(acc, B)
    return kernel


def _reference(a, op):
    return {"sum": a.sum(1), "max": a.amax(1), "min": a.amin(1)}[op]


@pytest.mark.parametrize("op", ["sum", "max", "min"])
@pytest.mark.parametrize("M,N", [(128, 64), (64, 128)])
def test_a_fold_over_a_parallel_loop_is_the_rows_reduction(op, M, N):
    a = torch.randn(M, N)
    b = tilejit.compile(row_reduce(M, N, "float32", op), out_idx=-1)(a)
    torch.testing.assert_close(b, _reference(a, op), atol=1e-5, rtol=1e-5)


def log_sum_exp(K, BLOCK_K):

    @T.prim_func
    def kernel(A: T.Tensor((K,), T.float32), B: T.Tensor((1,), T.float32)):
        with T.Kernel(1, threads=128):
            a_shared = T.alloc_shared((BLOCK_K,), T.float32)
            a_frag = T.alloc_fragment((BLOCK_K,), T.float32)
            # (TileLang's test holds these in (1,) fragments; tilejit spreads a fragment
            # over the threads, so each thread keeps its own copy)
            running_max = T.alloc_local((1,), T.float32)
            running_sum = T.alloc_local((1,), T.float32)
            running_max[0] = -T.infinity(T.float32)
            running_sum[0] = 0.0
            for k in T.Pipelined(T.ceildiv(K, BLOCK_K), num_stages=2):
                T.copy(A[k * BLOCK_K], a_shared)
                T.copy(a_shared, a_frag)
                new_max = T.alloc_reducer((1,), T.float32, op="max", replication="all")
                T.fill(new_max, running_max[0])
                for i in T.Parallel(BLOCK_K):
                    new_max[0] = T.max(new_max[0], a_frag[i])
                T.finalize_reducer(new_max)
                new_sum = T.alloc_reducer((1,), T.float32, replication="all")
                T.fill(new_sum, 0.0)
                for i in T.Parallel(BLOCK_K):
                    new_sum[0] += T.exp(a_frag[i] - new_max[0])
                T.finalize_reducer(new_sum)
                running_sum[0] = T.exp(running_max[0] - new_max[0]) * running_sum[0] + \
                    new_sum[0]
                running_max[0] = new_max[0]
            for i in T.Parallel(1):
                B[i] = T.log(running_sum[0]) + running_max[0]

    return kernel


def test_a_reducer_allocated_in_a_pipelined_loop_gives_log_sum_exp():
    a = torch.randn(512)
    b = tilejit.compile(log_sum_exp(512, 128), out_idx=-1)(a)
    torch.testing.assert_close(b, torch.logsumexp(a, 0).reshape(1), atol=1e-5, rtol=1e-5)


def test_the_v1_syntax_and_a_finalize_in_one_branch():
    BLOCK, K = 64, 8

    @T.prim_func
    def kernel(G: T.Tensor((BLOCK, K), T.float32), S: T.Tensor((2,), T.int32),
               O: T.Tensor((2, BLOCK, K), T.float32)):
        with T.Kernel(2, threads=128) as bx:
            g = T.alloc_fragment((BLOCK, K), T.float32)
            out = T.alloc_fragment((BLOCK, K), T.float32)
            total = T.alloc_reducer((BLOCK,), T.float32)       # op "sum", no replication
            T.copy(G, g)
            T.clear(total)
            if S[bx] > 0:
                for i, j in T.Parallel(BLOCK, K):
                    total[i] += g[i, j] * g[i, j]
                T.finalize_reducer(total)
            for i, j in T.Parallel(BLOCK, K):
                out[i, j] = g[i, j] - total[i]
            T.copy(out, O[bx, :, :])

    g = torch.randn(BLOCK, K)
    o = tilejit.compile(kernel, out_idx=-1)(g, torch.tensor([-1, 1], dtype=torch.int32))
    torch.testing.assert_close(o[0], g)
    torch.testing.assert_close(o[1], g - (g * g).sum(1, keepdim=True), atol=1e-5, rtol=1e-5)


def bad(form):
    @T.prim_func
    def kernel(A: T.Tensor((64, 64), T.float32), B: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=128):
            r = T.alloc_reducer((64,), T.float32, op="max")
            f = T.alloc_fragment((64, 64), T.float32)
            T.copy(A, f)
            T.fill(r, -T.infinity(T.float32))
            for i, j in T.Parallel(64, 64):
                if form == 1:
                    r[i] += f[i, j]                                  # sum into a max
                elif form == 2:
                    r[j] = T.max(r[j], f[i, j])                      # fold over i: fine
                elif form == 3:
                    r[i] = f[i, j]                                   # a plain write
                else:
                    r[i] = T.max(r[i], f[i, j])
            T.finalize_reducer(r)
            T.copy(r, B)
    return kernel


@pytest.mark.parametrize("form,message,line", [
    (1, r"r: a reducer of op 'max' folds with \+=", "# sum into a max"),
    (3, r"r: a reducer's element is written in a T.Parallel loop only by folding into it",
     "# a plain write"),
])
def test_a_write_that_is_not_the_reducers_fold_is_an_error_at_its_line(form, message, line):
    with pytest.raises(CompileError, match=message) as info:
        tilejit.compile(bad(form), out_idx=-1)(torch.ones(64, 64))
    assert f"line {_line(line)}" in str(info.value)


def misuse(form):
    @T.prim_func
    def kernel(A: T.Tensor((64, 8), T.float32), B: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=128):
            r = T.alloc_reducer((64,), T.float32, op="sum")
            f = T.alloc_fragment((64, 8), T.float32)
            g = T.alloc_fragment((64, 8), T.float32)
            T.copy(A, f)
            T.clear(r)
            for i, j in T.Parallel(64, 8):
                if form == 1:
                    for t in T.serial(2):
                        r[i] += f[i, j] * t                          # in a nested loop
                else:
                    r[i] += f[i, j]
                    g[i, j] = r[i]                               # read while folding
            T.finalize_reducer(r)
            T.copy(r, B)
    return kernel


def test_a_read_while_folding_is_an_error():
    with pytest.raises(CompileError, match="r: read in the T.Parallel loop that folds into "
                                           "it") as info:
        tilejit.compile(misuse(2), out_idx=-1)
    assert f"line {_line('# read while folding')}" in str(info.value)


def test_a_fold_in_a_serial_loop_of_the_parallel_body_counts_each_iteration():
    a = torch.randn(64, 8)
    b = tilejit.compile(misuse(1), out_idx=-1)(a)       # r[i] = Σ_j Σ_t f[i, j]·t
    torch.testing.assert_close(b.double(), a.double().sum(1), atol=1e-5, rtol=1e-5)


def local_complete(M, K, op="sum", init=None):
    """TileLang's local-complete reducer plan: each T.Parallel iteration folds into its own
    element (no reduction across iterations): over a serial loop of K values
    (``T.reducer_update`` in ``T.Parallel(M) { T.serial(K) }``), and once each over
    ``T.Parallel(M, K)`` (a copy)."""
    @T.prim_func
    def kernel(A: T.Tensor((M, K), T.float32), B: T.Tensor((M,), T.float32),
               C: T.Tensor((M, K), T.float32)):
        with T.Kernel(1, threads=128):
            src = T.alloc_fragment((M, K), T.float32)
            T.copy(A, src)
            acc = T.alloc_reducer((M,), T.float32, op=op)
            T.reducer_init(acc, init)
            for i in T.Parallel(M):
                for k in T.serial(K):
                    T.reducer_update(acc[i], src[i, k])
            result = T.alloc_fragment((M,), T.float32)
            T.finalize_reducer(acc, result)
            T.copy(result, B)
            copied = T.alloc_reducer((M, K), T.float32, op="sum")
            T.reducer_init(copied)
            for i, k in T.Parallel(M, K):
                T.reducer_update(copied[i, k], src[i, k])
            moved = T.alloc_fragment((M, K), T.float32)
            T.finalize_reducer(copied, moved)
            T.copy(moved, C)
    return kernel


def _local_complete_reference(a, op, init):
    return _v2_reference(a, op, init), a


@pytest.mark.parametrize("op,init", [("sum", None), ("sum", 5.0), ("max", None)])
def test_local_complete_folds_into_each_element(op, init):
    a = torch.randn(16, 8)
    b, c = tilejit.compile(local_complete(16, 8, op=op, init=init), out_idx=[1, 2])(a)
    want_b, want_c = _local_complete_reference(a, op, init)
    torch.testing.assert_close(b.double(), want_b, atol=1e-5, rtol=1e-5)
    assert torch.equal(c, want_c)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_local_complete_ptx_assembles(arch, ptxas):
    ptxas(tilejit.compile(local_complete(16, 8), out_idx=[1, 2],
                          target="cuda").get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
@pytest.mark.parametrize("op,init", [("sum", 5.0), ("max", None)])
def test_local_complete_on_the_gpu_against_torch_and_the_simulator(op, init):
    a = torch.randn(16, 8)
    kernel = tilejit.compile(local_complete(16, 8, op=op, init=init), out_idx=[1, 2])
    (gb, gc), (sb, sc) = kernel(a.cuda()), kernel(a)
    want_b, want_c = _local_complete_reference(a, op, init)
    torch.testing.assert_close(gb.cpu().double(), want_b, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(gb.cpu(), sb, atol=1e-6, rtol=1e-6)
    assert torch.equal(gc.cpu(), want_c) and torch.equal(sc, want_c)


def test_a_fold_over_the_first_dimension():
    a = torch.randn(64, 64)
    torch.testing.assert_close(tilejit.compile(bad(2), out_idx=-1)(a), a.amax(0))


@pytest.mark.parametrize("batch,message", [
    (0, "batch must be >= 1, got 0"), (128, "batch 128 exceeds total output elements 64"),
    (3, "batch 3 must evenly divide the 64 output elements")])
def test_a_bad_batch_is_an_error_at_the_finalize(batch, message):
    @T.prim_func
    def kernel(A: T.Tensor((64, 8), T.float32), B: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=128):
            r = T.alloc_reducer(64, T.float32, op="sum")
            f = T.alloc_fragment((64, 8), T.float32)
            T.copy(A, f)
            T.clear(r)
            for i, j in T.Parallel(64, 8):
                r[i] += f[i, j]
            T.finalize_reducer(r, batch=batch)
            T.copy(r, B)

    with pytest.raises(CompileError, match=message) as info:
        tilejit.compile(kernel, out_idx=-1)         # when the kernel is made, not called
    # a batch below 1 is also the ValueError TileLang raises
    assert isinstance(info.value, ValueError) == (batch < 1)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("op", ["sum", "max", "log_sum_exp"])
def test_the_ptx_assembles(op, arch, ptxas):
    kernel = log_sum_exp(512, 128) if op == "log_sum_exp" else row_reduce(128, 64, "float32", op)
    ptx = tilejit.compile(kernel, out_idx=-1, target="cuda").get_kernel_source(arch=arch)
    assert "shfl.sync.bfly" in ptx          # the fold's reduction across the threads
    ptxas(ptx, arch)


@pytest.mark.gpu
def test_log_sum_exp_on_the_gpu():
    a = torch.randn(512)
    b = tilejit.compile(log_sum_exp(512, 128), out_idx=-1)(a.cuda())
    torch.testing.assert_close(b.cpu(), torch.logsumexp(a, 0).reshape(1), atol=1e-5, rtol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("op", ["sum", "max", "min"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_on_the_gpu_against_torch_and_the_simulator(op, dtype):
    a = torch.randn(128, 64, dtype=getattr(torch, dtype))
    gpu = tilejit.compile(row_reduce(128, 64, dtype, op), out_idx=-1)(a.cuda())
    sim = tilejit.compile(row_reduce(128, 64, dtype, op), out_idx=-1)(a)
    ref = _reference(a.double(), op)
    tol = 1e-4 if dtype == "float32" else 3e-2
    torch.testing.assert_close(gpu.cpu().double(), ref, atol=tol, rtol=tol)
    torch.testing.assert_close(gpu.cpu(), sim, atol=tol, rtol=tol)


# -- TileLang's reducer v2: T.reducer_init / T.reducer_update / T.finalize_reducer(r, dst)
def tiled_row_reduce(M, K, block_K, op, init=None, threads=128):
    """Rows of A (M, K) reduced over serial column tiles into one reducer: the epoch
    (init, updates from every tile, finalize into a fragment of its own) spans the loop;
    ``init`` is counted once per row."""
    @T.prim_func
    def kernel(A: T.Tensor((M, K), T.float32), B: T.Tensor((M,), T.float32)):
        with T.Kernel(1, threads=threads):
            acc = T.alloc_reducer((M,), T.float32, op=op)
            T.reducer_init(acc, init)
            tile = T.alloc_fragment((M, block_K), T.float32)
            for k in T.serial(T.ceildiv(K, block_K)):
                T.copy(A[0, k * block_K], tile)
                for i, j in T.Parallel(M, block_K):
                    T.reducer_update(acc[i], tile[i, j])
            out = T.alloc_fragment((M,), T.float32)
            T.finalize_reducer(acc, out)
            T.copy(out, B)
    return kernel


def _v2_reference(a, op, init):
    r = _reference(a.double(), op)
    if init is None:
        return r
    return r + init if op == "sum" else torch.maximum(r, torch.full_like(r, init)) \
        if op == "max" else torch.minimum(r, torch.full_like(r, init))


@pytest.mark.parametrize("op,init", [("sum", None), ("sum", 100.0), ("max", None),
                                     ("max", 3.5), ("min", None)])
def test_reducer_v2_epoch_across_serial_tiles(op, init):
    a = torch.randn(32, 512)
    b = tilejit.compile(tiled_row_reduce(32, 512, 128, op, init), out_idx=-1)(a)
    torch.testing.assert_close(b.double(), _v2_reference(a, op, init), atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_reducer_v2_ptx_assembles(arch, ptxas):
    ptxas(tilejit.compile(tiled_row_reduce(32, 512, 128, "sum", 1.0), out_idx=-1,
                          target="cuda").get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
@pytest.mark.parametrize("op,init", [("sum", 100.0), ("max", None), ("min", -0.5)])
def test_reducer_v2_on_the_gpu_against_torch_and_the_simulator(op, init):
    a = torch.randn(32, 512)
    kernel = tilejit.compile(tiled_row_reduce(32, 512, 128, op, init), out_idx=-1)
    gpu, sim = kernel(a.cuda()), kernel(a)
    torch.testing.assert_close(gpu.cpu().double(), _v2_reference(a, op, init), atol=1e-4,
                               rtol=1e-5)
    torch.testing.assert_close(gpu.cpu(), sim, atol=1e-5, rtol=1e-5)


def online_log_sum_exp(K, block_K):
    """log Σ exp over serial tiles, the running max and sum held in (1,) fragments used at
    constant indices only (every thread holds them), each tile's max and sum from a
    reducer epoch (the max's seeded with the running max)."""
    @T.prim_func
    def kernel(A: T.Tensor((K,), T.float32), B: T.Tensor((1,), T.float32)):
        with T.Kernel(1, threads=128):
            a_frag = T.alloc_fragment((block_K,), T.float32)
            run_max = T.alloc_fragment((1,), T.float32)
            run_sum = T.alloc_fragment((1,), T.float32)
            run_max[0] = -T.infinity(T.float32)
            run_sum[0] = 0.0
            for k in T.serial(T.ceildiv(K, block_K)):
                T.copy(A[k * block_K], a_frag)
                tile_max = T.alloc_reducer((1,), T.float32, op="max")
                T.reducer_init(tile_max, run_max[0])
                for i in T.Parallel(block_K):
                    T.reducer_update(tile_max[0], a_frag[i])
                m = T.alloc_fragment((1,), T.float32)
                T.finalize_reducer(tile_max, m)
                tile_sum = T.alloc_reducer((1,), T.float32, op="sum")
                T.reducer_init(tile_sum)
                for i in T.Parallel(block_K):
                    T.reducer_update(tile_sum[0], T.exp(a_frag[i] - m[0]))
                s = T.alloc_fragment((1,), T.float32)
                T.finalize_reducer(tile_sum, s)
                run_sum[0] = T.exp(run_max[0] - m[0]) * run_sum[0] + s[0]
                run_max[0] = m[0]
            if T.get_thread_binding() == 0:
                B[0] = T.log(run_sum[0]) + run_max[0]
    return kernel


def test_fragments_used_at_constant_indices_are_held_by_every_thread(ptxas):
    a = torch.randn(512)
    kernel = tilejit.compile(online_log_sum_exp(512, 128), out_idx=-1)
    torch.testing.assert_close(kernel(a), torch.logsumexp(a, 0).reshape(1), atol=1e-5,
                               rtol=1e-5)
    ptx = tilejit.compile(online_log_sum_exp(512, 128), out_idx=-1,
                          target="cuda").get_kernel_source(arch="sm_90a")
    ptxas(ptx, "sm_90a")


_EPOCH = '''
@T.prim_func
def kernel(A: T.Tensor((64, 64), T.float32), B: T.Tensor((64,), T.float32)):
    with T.Kernel(1, threads=128):
        src = T.alloc_fragment((64, 64), T.float32)
        T.copy(A, src)
        acc = T.alloc_reducer((64,), T.float32, op="sum")
        out = T.alloc_fragment((64,), T.float32)
        {body}
        T.copy(out, B)
'''
_INIT = "T.reducer_init(acc)"
_UPDATE = "for i, j in T.Parallel(64, 64):\n            T.reducer_update(acc[i], src[i, j])"
_FINAL = "T.finalize_reducer(acc, out)"


@pytest.mark.parametrize("body,message", [
    ([_UPDATE, _FINAL], "acc: T.reducer_update before T.reducer_init"),
    ([_INIT, _UPDATE], "acc: never finalized: T.reducer_init opens an epoch that no "
                       "T.finalize_reducer closes"),
    ([_INIT, _INIT, _UPDATE, _FINAL], "acc: double T.reducer_init: its epoch is already open"),
    ([_INIT, "T.reducer_update(acc[0], src[0, 0])", _FINAL],
     "acc: T.reducer_update outside any T.Parallel loop"),
    ([_INIT, _UPDATE, "out[0] = acc[0]", _FINAL], "acc: illegal read of reducer while its "
                                                  "epoch is open"),
    ([_INIT, "acc[0] = 1.0", _UPDATE, _FINAL], "acc: illegal store to reducer while its "
                                               "epoch is open"),
    ([_INIT, "T.clear(acc)", _UPDATE, _FINAL], "acc: T.clear of a reducer"),
    (["T.reducer_init(acc, T.float16(1.0))", _UPDATE, _FINAL],
     r"T.reducer_init: the starting value T.float16\(1.0\) is float16, which does not "
     r"match reducer 'acc' of float32"),
    ([_INIT, _UPDATE, "for k in T.serial(1):\n            " + _FINAL],
     "acc: T.finalize_reducer not in the scope of its T.reducer_init"),
    (["for k in T.serial(1):\n            " + _INIT + "\n            " +
      _UPDATE.replace("\n", "\n    "), _FINAL],
     r"acc: T.finalize_reducer not in the scope of its T.reducer_init \(line 11\): it is "
     r"in another block of statements \(a loop, or a branch the init is not in\)"),
    ([_INIT, _UPDATE, "if A[0, 0] > 0:\n            for k in T.serial(2):\n"
      "                " + _FINAL], "acc: T.finalize_reducer not in the scope of its"),
    ([_INIT, _UPDATE, "if A[0, 0] > 0:\n            " + _FINAL + "\n        " + _INIT +
      "\n        " + _FINAL], None),
])
def test_a_broken_reducer_epoch_is_an_error_at_its_line(body, message, tmp_path):
    source = _EPOCH.format(body="\n        ".join(body))
    path = tmp_path / "epoch_kernel.py"
    path.write_text("import tilejit.language as T\n" + source)
    import importlib.util
    spec = importlib.util.spec_from_file_location("epoch_kernel", path)
    module = importlib.util.module_from_spec(spec)
    if message is None:         # a branch that finalizes closes the epoch for what follows
        spec.loader.exec_module(module)
        tilejit.compile(module.kernel, out_idx=-1)(torch.zeros(64, 64))
        return
    with pytest.raises(CompileError, match=message) as info:
        spec.loader.exec_module(module)
        tilejit.compile(module.kernel, out_idx=-1)(torch.zeros(64, 64))
    assert "epoch_kernel.py" in str(info.value)


def conditional_finalize(extent=8, threads=128):
    """TileLang's sum_smaller_probs pattern: the epoch opens for every block, and only
    the blocks that take the branch update and finalize it (at most once per epoch)."""
    @T.prim_func
    def kernel(A: T.Tensor((extent,), T.float32), S: T.Tensor((2,), T.int32),
               B: T.Tensor((2,), T.float32)):
        with T.Kernel(2, threads=threads) as bx:
            src = T.alloc_fragment((extent,), T.float32)
            T.copy(A, src)
            acc = T.alloc_reducer((1,), T.float32, op="sum")
            T.reducer_init(acc)
            if S[bx] < 0:
                if T.get_thread_binding() == 0:
                    B[bx] = -1.0
            else:
                for i in T.Parallel(extent):
                    T.reducer_update(acc[0], src[i] * S[bx])
                result = T.alloc_fragment((1,), T.float32)
                T.finalize_reducer(acc, result)
                if T.get_thread_binding() == 0:
                    B[bx] = result[0]
    return kernel


def test_a_finalize_in_a_uniform_branch_of_the_epoch(ptxas):
    a, s = torch.arange(1.0, 9.0), torch.tensor([-1, 3], dtype=torch.int32)
    kernel = tilejit.compile(conditional_finalize(), out_idx=-1)
    torch.testing.assert_close(kernel(a, s), torch.tensor([-1.0, 108.0]), atol=0, rtol=0)
    for arch in ("sm_80", "sm_90a"):
        ptxas(tilejit.compile(conditional_finalize(), out_idx=-1,
                              target="cuda").get_kernel_source(arch=arch), arch)


@pytest.mark.gpu
def test_a_finalize_in_a_uniform_branch_of_the_epoch_on_the_gpu():
    a, s = torch.arange(1.0, 9.0), torch.tensor([3, -1], dtype=torch.int32)
    kernel = tilejit.compile(conditional_finalize(), out_idx=-1)
    gpu = kernel(a.cuda(), s.cuda()).cpu()
    torch.testing.assert_close(gpu, torch.tensor([108.0, -1.0]), atol=0, rtol=0)
    torch.testing.assert_close(gpu, kernel(a, s), atol=0, rtol=0)


@pytest.mark.gpu
def test_online_log_sum_exp_on_the_gpu():
    a = torch.randn(1024)
    kernel = tilejit.compile(online_log_sum_exp(1024, 128), out_idx=-1)
    gpu, sim = kernel(a.cuda()), kernel(a)
    torch.testing.assert_close(gpu.cpu(), torch.logsumexp(a.double(), 0).reshape(1).float(),
                               atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(gpu.cpu(), sim, atol=1e-5, rtol=1e-5)


def bitwise_reducer(M, K, op):
    @T.prim_func
    def kernel(A: T.Tensor((M, K), T.int32), B: T.Tensor((M,), T.int32)):
        with T.Kernel(1, threads=128):
            src = T.alloc_fragment((M, K), T.int32)
            T.copy(A, src)
            acc = T.alloc_reducer((M,), T.int32, op=op)
            T.reducer_init(acc)
            for i, k in T.Parallel(M, K):
                T.reducer_update(acc[i], src[i, k])
            out = T.alloc_fragment((M,), T.int32)
            T.finalize_reducer(acc, out)
            T.copy(out, B)
    return kernel


@pytest.mark.parametrize("op", ["bitand", "bitor", "bitxor"])
def test_a_bitwise_reducer(op):
    a = torch.randint(-2**31, 2**31 - 1, (16, 64), dtype=torch.int32)
    b = tilejit.compile(bitwise_reducer(16, 64, op), out_idx=-1)(a)
    want = a[:, 0].clone()
    for k in range(1, 64):
        want = {"bitand": want & a[:, k], "bitor": want | a[:, k], "bitxor": want ^ a[:, k]}[op]
    torch.testing.assert_close(b, want, rtol=0, atol=0)


def test_a_bitwise_reducer_of_floats_is_an_error():
    """Raised as @T.prim_func defines the program (TileLang's AssertionError too)."""
    with pytest.raises(CompileError, match="op 'bitand' is bitwise and needs an integer dtype"):
        @T.prim_func
        def kernel(A: T.Tensor((8,), T.float32), B: T.Tensor((1,), T.float32)):
            with T.Kernel(1, threads=32):
                acc = T.alloc_reducer((1,), T.float32, op="bitand")
                T.reducer_init(acc)
                for i in T.Parallel(8):
                    T.reducer_update(acc[0], A[i])
                out = T.alloc_fragment((1,), T.float32)
                T.finalize_reducer(acc, out)
                T.copy(out, B)


def rows_at_a_serial_index(K, op, fixed, threads=128):
    """TileLang's reducer v2 test shape: a fold into `acc[i]`, where `i` is an enclosing
    serial loop's (the same for every iteration of the T.Parallel), or into one constant
    element of a larger reducer. The fold is reduced into a tile of its own and combined
    into that element; before, the first was refused and the second reduced into the
    whole reducer (a shape error naming a tilejit-made tile)."""
    @T.prim_func
    def kernel(A: T.Tensor((4, K), T.float32), B: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=threads):
            src = T.alloc_fragment((4, K), T.float32)
            T.copy(A, src)
            acc = T.alloc_reducer((4,), T.float32, op=op)
            T.reducer_init(acc, 1.0)
            if fixed:
                for k in T.Parallel(K):
                    T.reducer_update(acc[2], src[2, k])
            else:
                for i in T.serial(4):
                    for k in T.Parallel(K):
                        T.reducer_update(acc[i], src[i, k])
            result = T.alloc_fragment((4,), T.float32)
            T.finalize_reducer(acc, result)
            T.copy(result, B)
    return kernel


def grid_at_a_serial_index(M, K, threads=128):
    """The kept loop dimension and an invariant index together: `acc[c, i]`."""
    @T.prim_func
    def kernel(A: T.Tensor((2, M, K), T.float32), B: T.Tensor((2, M), T.float32)):
        with T.Kernel(1, threads=threads):
            acc = T.alloc_reducer((2, M), T.float32, op="sum")
            T.reducer_init(acc)
            for c in T.serial(2):
                for i, k in T.Parallel(M, K):
                    T.reducer_update(acc[c, i], A[c, i, k] * 2.0)
            T.finalize_reducer(acc, B)
    return kernel


def _rows_reference(a, op, fixed):
    a = a.double()
    folded = a.sum(1) if op == "sum" else a.max(1).values
    out = torch.ones(4, dtype=torch.float64)
    both = out + folded if op == "sum" else torch.maximum(out, folded)
    if fixed:
        out[2] = both[2]
        return out
    return both


@pytest.mark.parametrize("op", ["sum", "max"])
@pytest.mark.parametrize("fixed", [False, True])
def test_a_fold_into_an_element_the_loop_does_not_choose(op, fixed):
    a = torch.randn(4, 256)
    b = tilejit.compile(rows_at_a_serial_index(256, op, fixed), out_idx=-1)(a)
    torch.testing.assert_close(b.double(), _rows_reference(a, op, fixed), rtol=1e-5, atol=1e-5)
    a2 = torch.randn(2, 16, 64)
    b2 = tilejit.compile(grid_at_a_serial_index(16, 64), out_idx=-1)(a2)
    torch.testing.assert_close(b2.double(), 2 * a2.double().sum(2), rtol=1e-5, atol=1e-5)


def test_a_fold_at_an_index_the_loop_changes_is_an_error():
    @T.prim_func
    def kernel(A: T.Tensor((4, 64), T.float32), B: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=64):
            acc = T.alloc_reducer((4,), T.float32, op="sum")
            T.reducer_init(acc)
            for k in T.Parallel(64):
                row = k % 4
                T.reducer_update(acc[row], A[row, k])        # an index the loop changes
            T.finalize_reducer(acc, B)
    with pytest.raises(CompileError, match=r"values the loop does not change, got \[row\]") \
            as info:
        tilejit.compile(kernel, out_idx=-1)(torch.ones(4, 64))
    assert f"line {_line('an index the loop changes')}" in str(info.value)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_folds_into_chosen_elements_assemble(arch, ptxas):
    for program in (rows_at_a_serial_index(256, "sum", False),
                    rows_at_a_serial_index(256, "max", True), grid_at_a_serial_index(16, 64)):
        ptxas(tilejit.compile(program, out_idx=-1,
                              target=f"cuda -arch={arch}").get_kernel_source(), arch)


@pytest.mark.gpu
@pytest.mark.parametrize("op", ["sum", "max"])
@pytest.mark.parametrize("fixed", [False, True])
def test_folds_into_chosen_elements_on_the_gpu(op, fixed):
    a = torch.randn(4, 256)
    b = tilejit.compile(rows_at_a_serial_index(256, op, fixed), out_idx=-1)(a.cuda())
    sim = tilejit.compile(rows_at_a_serial_index(256, op, fixed), out_idx=-1)(a)
    torch.testing.assert_close(b.cpu().double(), _rows_reference(a, op, fixed), rtol=1e-5,
                               atol=1e-5)
    # (sums of 256 in another order: a few float32 ulps of the row's magnitude apart)
    torch.testing.assert_close(b.cpu(), sim, rtol=1e-5, atol=1e-5)
    a2 = torch.randn(2, 16, 64)
    b2 = tilejit.compile(grid_at_a_serial_index(16, 64), out_idx=-1)(a2.cuda())
    torch.testing.assert_close(b2.cpu().double(), 2 * a2.double().sum(2), rtol=1e-5,
                               atol=1e-5)


def test_a_fold_at_an_index_read_from_a_tile_the_loop_writes_is_an_error():
    """`acc[l[0]]` with `l[0]` set in the loop: not an invariant index (found by a
    review: the fold went to the last iteration's element)."""
    @T.prim_func
    def kernel(A: T.Tensor((4, 256), T.float32), B: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=128):
            l = T.alloc_local((1,), T.int32)
            acc = T.alloc_reducer((4,), T.float32, op="sum")
            T.reducer_init(acc)
            for k in T.Parallel(256):
                l[0] = k % 4
                T.reducer_update(acc[l[0]], A[k % 4, k])
            T.finalize_reducer(acc, B)
    with pytest.raises(CompileError, match=r"values the loop does not change, got "
                                           r"\[l\[0\]\]"):
        tilejit.compile(kernel, out_idx=-1)(torch.ones(4, 256))


# -- integer max and min reducers: their identities are the dtype's extremes --------------
def int_row_reduce(M, N, dtype, op, v2):
    @T.prim_func
    def kernel(A: T.Tensor((M, N), dtype), B: T.Tensor((M,), dtype)):
        with T.Kernel(1, threads=64):
            r = T.alloc_reducer((M,), dtype, op=op)
            if v2:
                T.reducer_init(r)       # the identity: T.min_value / T.max_value
                for i, j in T.Parallel(M, N):
                    T.reducer_update(r[i], A[i, j])
                T.finalize_reducer(r, B)
            else:
                T.fill(r, T.min_value(dtype) if op == "max" else T.max_value(dtype))
                for i, j in T.Parallel(M, N):
                    r[i] = T.max(r[i], A[i, j]) if op == "max" else T.min(r[i], A[i, j])
                T.finalize_reducer(r)
                T.copy(r, B)
    return kernel


def _int_inputs(dtype):
    info = torch.iinfo(getattr(torch, dtype))
    a = torch.randint(info.min, info.max, (8, 32), dtype=getattr(torch, dtype))
    a[0, :] = info.min          # a row at the type's smallest, one at its largest
    a[1, :] = info.max
    return a


@pytest.mark.parametrize("dtype", ["int32", "int8", "int64"])
@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("v2", [False, True])
def test_integer_max_and_min_reducers(dtype, op, v2, ptxas):
    a = _int_inputs(dtype)
    b = tilejit.compile(int_row_reduce(8, 32, dtype, op, v2), out_idx=-1)(a)
    torch.testing.assert_close(b, a.amax(1) if op == "max" else a.amin(1))
    for arch in ("sm_80", "sm_90a"):
        ptx = tilejit.compile(int_row_reduce(8, 32, dtype, op, v2), out_idx=-1,
                              target=f"cuda -arch={arch}").get_kernel_source()
        ptxas(ptx, arch)


def test_max_value_and_min_value():
    assert T.max_value("int32") == 2 ** 31 - 1 and T.min_value(T.int8) == -128
    assert float(T.max_value("float16")) == 65504.0
    assert float(T.min_value("bfloat16")) == -3.3895313892515355e38


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["int32", "int8", "int64"])
@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("v2", [False, True])
def test_integer_max_and_min_reducers_on_the_gpu(dtype, op, v2):
    a = _int_inputs(dtype)
    gpu = tilejit.compile(int_row_reduce(8, 32, dtype, op, v2), out_idx=-1)(a.cuda())
    sim = tilejit.compile(int_row_reduce(8, 32, dtype, op, v2), out_idx=-1)(a)
    torch.testing.assert_close(gpu.cpu(), a.amax(1) if op == "max" else a.amin(1))
    torch.testing.assert_close(gpu.cpu(), sim)


def extreme_of_the_tensors_dtype(op):
    """The reducer's dtype known only when the kernel compiles (A.dtype)."""
    @tilejit.kernel
    def kernel(A, B):
        M, N = A.shape
        with T.Kernel(1, threads=64) as bx:
            r = T.alloc_reducer((M,), A.dtype, op=op)
            T.reducer_init(r)
            for i, j in T.Parallel(M, N):
                T.reducer_update(r[i], A[i, j])
            T.finalize_reducer(r, B)
    return kernel


max_of_the_tensors_dtype = extreme_of_the_tensors_dtype("max")
min_of_the_tensors_dtype = extreme_of_the_tensors_dtype("min")


@pytest.mark.parametrize("dtype", ["int32", "int16", "float32", "float16"])
@pytest.mark.parametrize("op", ["max", "min"])
def test_a_reducers_identity_for_a_dtype_known_at_compile_time(dtype, op, ptxas):
    a = (torch.randn(8, 32) * 100).to(getattr(torch, dtype))
    b = torch.zeros(8, dtype=a.dtype)
    kernel = max_of_the_tensors_dtype if op == "max" else min_of_the_tensors_dtype
    kernel(a, b)
    torch.testing.assert_close(b, a.amax(1) if op == "max" else a.amin(1))
    ptxas(kernel.compile(a, b, target="cuda", arch="sm_90a").ptx, "sm_90a")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["int32", "float16"])
@pytest.mark.parametrize("op", ["max", "min"])
def test_a_reducers_identity_for_a_dtype_known_at_compile_time_on_the_gpu(dtype, op):
    a = (torch.randn(8, 32) * 100).to(getattr(torch, dtype))
    b, sim = torch.zeros(8, dtype=a.dtype, device="cuda"), torch.zeros(8, dtype=a.dtype)
    kernel = max_of_the_tensors_dtype if op == "max" else min_of_the_tensors_dtype
    kernel(a.cuda(), b)
    kernel(a, sim)
    torch.testing.assert_close(b.cpu(), a.amax(1) if op == "max" else a.amin(1))
    torch.testing.assert_close(b.cpu(), sim)


# -- a local-complete fold at the loop's indices permuted: acc[j, i] in a loop over (i, j) --
def permuted_fold(M, N, op):
    @T.prim_func
    def kernel(A: T.Tensor((M, N), T.float32), B: T.Tensor((N, M), T.float32)):
        with T.Kernel(1, threads=128):
            src = T.alloc_fragment((M, N), T.float32)
            T.copy(A, src)
            acc = T.alloc_reducer((N, M), T.float32, op=op)
            T.reducer_init(acc, 1.0)
            for i, j in T.Parallel(M, N):
                T.reducer_update(acc[j, i], src[i, j])
            result = T.alloc_fragment((N, M), T.float32)
            T.finalize_reducer(acc, result)
            T.copy(result, B)
    return kernel


def _permuted_reference(a, op):
    t = a.t().double()
    return {"sum": t + 1.0, "max": t.clamp(min=1.0), "min": t.clamp(max=1.0)}[op]


@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_a_fold_at_the_loops_indices_permuted(op, ptxas):
    a = torch.randn(8, 16) * 3
    b = tilejit.compile(permuted_fold(8, 16, op), out_idx=-1)(a)
    torch.testing.assert_close(b.double(), _permuted_reference(a, op))
    for arch in ("sm_80", "sm_90a"):
        ptx = tilejit.compile(permuted_fold(8, 16, op), out_idx=-1,
                              target=f"cuda -arch={arch}").get_kernel_source()
        ptxas(ptx, arch)


@pytest.mark.gpu
@pytest.mark.parametrize("op", ["sum", "max"])
def test_a_fold_at_the_loops_indices_permuted_on_the_gpu(op):
    a = torch.randn(8, 16) * 3
    gpu = tilejit.compile(permuted_fold(8, 16, op), out_idx=-1)(a.cuda())
    sim = tilejit.compile(permuted_fold(8, 16, op), out_idx=-1)(a)
    torch.testing.assert_close(gpu.cpu().double(), _permuted_reference(a, op))
    torch.testing.assert_close(gpu.cpu(), sim)


# -- a fold at a constant index of a unit dimension: acc[0, i] of a (1, M) reducer ------------
def unit_dim_fold(M, K, op):
    @T.prim_func
    def kernel(A: T.Tensor((M, K), T.float32), B: T.Tensor((1, M), T.float32)):
        with T.Kernel(1, threads=128):
            src = T.alloc_fragment((M, K), T.float32)
            T.copy(A, src)
            acc = T.alloc_reducer((1, M), T.float32, op=op)
            T.reducer_init(acc)
            for i, k in T.Parallel(M, K):
                T.reducer_update(acc[0, i], src[i, k])
            result = T.alloc_fragment((1, M), T.float32)
            T.finalize_reducer(acc, result)
            T.copy(result, B)
    return kernel


@pytest.mark.parametrize("op", ["sum", "max"])
@pytest.mark.parametrize("M, K", [(16, 16), (8, 64)])
def test_a_fold_at_a_unit_dimensions_constant_index(op, M, K, ptxas):
    a = torch.randn(M, K)
    b = tilejit.compile(unit_dim_fold(M, K, op), out_idx=-1)(a)
    want = a.double().sum(1) if op == "sum" else a.double().amax(1)
    torch.testing.assert_close(b.double(), want.reshape(1, M), atol=1e-4, rtol=1e-5)
    for arch in ("sm_80", "sm_90a"):
        ptx = tilejit.compile(unit_dim_fold(M, K, op), out_idx=-1,
                              target=f"cuda -arch={arch}").get_kernel_source()
        ptxas(ptx, arch)


@pytest.mark.gpu
@pytest.mark.parametrize("op", ["sum", "max"])
def test_a_fold_at_a_unit_dimensions_constant_index_on_the_gpu(op):
    a = torch.randn(16, 16)
    gpu = tilejit.compile(unit_dim_fold(16, 16, op), out_idx=-1)(a.cuda())
    sim = tilejit.compile(unit_dim_fold(16, 16, op), out_idx=-1)(a)
    want = a.double().sum(1) if op == "sum" else a.double().amax(1)
    torch.testing.assert_close(gpu.cpu().double(), want.reshape(1, 16), atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(gpu.cpu(), sim, atol=1e-5, rtol=1e-5)


# -- a fold into one element of a reducer spread over the threads: acc[i, j] of serial i, j ---
def pairwise_dots(K, threads, fixed=False, op="sum"):
    """TileLang's reducer v2 "wide plan" test shape: each (i, j) of serial loops folds a
    row product into acc[i, j] of a (4, 4) reducer, which the finalize into a fragment
    spreads over the block's threads (so no thread holds every element: the combine is a
    T.Parallel over the reducer that updates the element the index picks); `fixed` folds
    into the constant element [2, 3] only."""
    @T.prim_func
    def kernel(A: T.Tensor((4, K), T.float32), A2: T.Tensor((4, K), T.float32),
               B: T.Tensor((4, 4), T.float32), C: T.Tensor((4, 4), T.float32)):
        with T.Kernel(1, threads=threads):
            src = T.alloc_fragment((4, K), T.float32)
            src2 = T.alloc_fragment((4, K), T.float32)
            T.copy(A, src)
            T.copy(A2, src2)
            acc = T.alloc_reducer((4, 4), T.float32, op=op)
            T.reducer_init(acc)
            if fixed:
                for k in T.Parallel(K):
                    T.reducer_update(acc[2, 3], src[2, k] * src2[3, k])
            else:
                for i in T.serial(4):
                    for j in T.serial(4):
                        for k in T.Parallel(K):
                            T.reducer_update(acc[i, j], src[i, k] * src2[j, k])
            result = T.alloc_fragment((4, 4), T.float32)
            T.finalize_reducer(acc, result)
            doubled = T.alloc_fragment((4, 4), T.float32)
            for i, j in T.Parallel(4, 4):
                doubled[i, j] = result[i, j] * 2.0
            T.copy(result, B)
            T.copy(doubled, C)
    return kernel


def _pairwise_reference(a, a2, fixed, op):
    prod = a.double()[:, None, :] * a2.double()[None, :, :]
    want = prod.sum(2) if op == "sum" else prod.amax(2)
    if fixed:
        ident = torch.zeros if op == "sum" else (lambda *s, **k: torch.full(s, -torch.inf,
                                                                              **k))
        out = ident(4, 4, dtype=torch.float64)
        out[2, 3] = want[2, 3]
        return out
    return want


@pytest.mark.parametrize("fixed", [False, True])
@pytest.mark.parametrize("op", ["sum", "max"])
@pytest.mark.parametrize("K, threads", [(256, 128), (64, 32)])
def test_a_fold_into_one_element_of_a_spread_reducer(fixed, op, K, threads):
    a, a2 = torch.randn(4, K), torch.randn(4, K)
    b, c = tilejit.compile(pairwise_dots(K, threads, fixed, op), out_idx=[-2, -1])(a, a2)
    want = _pairwise_reference(a, a2, fixed, op)
    torch.testing.assert_close(b.double(), want, atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(c.double(), 2 * want, atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_a_fold_into_one_element_of_a_spread_reducer_assembles(arch, ptxas):
    for fixed in (False, True):
        ptxas(tilejit.compile(pairwise_dots(256, 128, fixed), out_idx=[-2, -1],
                              target=f"cuda -arch={arch}").get_kernel_source(), arch)


@pytest.mark.gpu
@pytest.mark.parametrize("fixed", [False, True])
@pytest.mark.parametrize("op", ["sum", "max"])
def test_a_fold_into_one_element_of_a_spread_reducer_on_the_gpu(fixed, op):
    a, a2 = torch.randn(4, 256), torch.randn(4, 256)
    kernel = tilejit.compile(pairwise_dots(256, 128, fixed, op), out_idx=[-2, -1])
    b, c = kernel(a.cuda(), a2.cuda())
    sim_b, sim_c = tilejit.compile(pairwise_dots(256, 128, fixed, op), out_idx=[-2, -1])(a, a2)
    want = _pairwise_reference(a, a2, fixed, op)
    torch.testing.assert_close(b.cpu().double(), want, atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(c.cpu().double(), 2 * want, atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(b.cpu(), sim_b, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(c.cpu(), sim_c, atol=1e-5, rtol=1e-5)


def _folded_at(offset, constant):
    @T.prim_func
    def kernel(A: T.Tensor((4, 64), T.float32), B: T.Tensor((4, 4), T.float32)):
        with T.Kernel(1, threads=32):
            src = T.alloc_fragment((4, 64), T.float32)
            T.copy(A, src)
            acc = T.alloc_reducer((4, 4), T.float32, op="sum")
            T.reducer_init(acc)
            if constant:
                for k in T.Parallel(64):
                    T.reducer_update(acc[1, 4], src[1, k])
            else:
                for i in T.serial(4):
                    for k in T.Parallel(64):
                        T.reducer_update(acc[i, i + offset], src[i, k])
            res = T.alloc_fragment((4, 4), T.float32)
            T.finalize_reducer(acc, res)
            T.copy(res, B)
    return kernel


def test_a_fold_into_one_element_out_of_the_reducer_is_an_error():
    """The combine through a T.Parallel over the reducer would drop a fold whose index is
    outside it (no element equals it): a constant index is refused, one known when the
    kernel runs is checked there."""
    b = torch.zeros(4, 4)
    tilejit.compile(_folded_at(0, False))(torch.ones(4, 64), b)
    assert torch.equal(b, torch.eye(4) * 64)
    with pytest.raises(CompileError, match=r"acc\[1, 4\]: index 4 is out of the reducer's "
                                           r"extent 4"):
        tilejit.compile(_folded_at(0, True))(torch.ones(4, 64), torch.zeros(4, 4))
    with pytest.raises(AssertionError, match=r"acc\[i, i \+ offset\]: an index out of the "
                                             r"reducer's extent 4"):
        tilejit.compile(_folded_at(1, False))(torch.ones(4, 64), torch.zeros(4, 4))
