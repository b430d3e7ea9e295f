"""The TMA path of software pipelines (passes/tma.py): which copies take it, what the
kernel and its launch look like, and (``-m gpu``) results against torch and against
the cp.async path."""
import re

import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit.runtime.fastlaunch import FastLauncher
from tilejit.runtime.arguments import as_tensor_arg
from tilejit.layouts import make_layout
from tilejit.language.dtypes import float16
from tilejit.layouts.swizzle import make_swizzled_layout
from tilejit.passes.tma import tma_layout
from tilejit.runtime.cuda_driver import layout_params
from tilejit.runtime.tensor_maps import MAP_BYTES, Box, TensorMaps, encode_arguments
from tilejit.ir.plan import SHARED, Tile
from kernels import gemm
from kernels import gemm_inputs as _inputs


@pytest.fixture(autouse=True)
def _one_program_for_all_threads(monkeypatch):
    """These tests read the TMA pass's own schedule (every thread waits, a block barrier,
    thread 0 refills); on sm_90a a pipeline feeding wgmma is then warp-specialized
    (tests/passes/test_warp_specialize.py), which they turn off."""
    monkeypatch.setenv("TILEJIT_WS", "0")


def _tile(shape, layout):
    return Tile("X", SHARED, shape, float16, 1, layout=layout)


@pytest.mark.parametrize("shape,expected", [
    ((128, 64), (128, 64)),        # one 128-byte atom per row
    ((64, 128), (128, 64)),        # two atoms per row: one box per column of atoms
    ((128, 32), (64, 32)),         # 64-byte rows: the 64-byte swizzle
    ((32, 16), (32, 16)),          # 32-byte rows
])
def test_the_swizzled_layouts_are_what_a_tma_box_writes(shape, expected):
    assert tma_layout(_tile(shape, make_swizzled_layout(shape, 2))) == expected


def test_row_major_is_an_unswizzled_box_and_other_layouts_are_not_tma():
    assert tma_layout(_tile((64, 8), make_layout((64, 8), order="row"))) == (0, 8)
    padded = make_layout((64, 64), (72, 1))
    assert tma_layout(_tile((64, 64), padded)) is None
    # atoms along a row contiguous (the layout before TMA): not one box per atom column
    from tilejit.layouts.layout import Layout
    from tilejit.layouts.swizzle import ComposedLayout, swizzle_for_bytes
    along = ComposedLayout(swizzle_for_bytes(128, 2), 0,
                           Layout(((8, 8), (64, 2)), ((64, 1024), (1, 512))))
    assert tma_layout(_tile((64, 128), along)) is None


def _head_of_loop(ptx):
    """The K loop's first mbarrier wait and the PTX lines after it up to the next
    instruction that is not a fence (a kernel whose wgmma operands ordinary stores also
    write fences the async proxy before each barrier: passes/async_proxy.py)."""
    wait = ptx.index("mbarrier.try_wait.parity")
    lines = [x for x in ptx[wait:].splitlines()[1:] if not x.strip().startswith("//")]
    lines = [x for x in lines if "fence.proxy.async" not in x]
    return "\n".join([ptx[wait:].splitlines()[0]] + lines[:3])


def _compiled(arch="sm_90a", dtype=np.float16, shape=(512, 512), **kw):
    a = np.zeros(shape, dtype)
    c = np.zeros((shape[0], shape[0]), np.float32)
    return gemm.compile(a, np.zeros(shape[::-1], dtype), c, target="cuda", arch=arch,
                        **kw).compiled


def _loads(k):
    """The tensor maps of A and B (parameters 0 and 1): C's, when the accumulator goes out
    by TMA (epilogue_staging.py), is a store's."""
    return [m for m in k.tensor_maps if m[0] in (0, 1)]


def test_a_pipelined_gemm_on_sm90_loads_its_tiles_with_tma():
    k = _compiled(stages=3, block_K=64)
    ptx = k.ptx
    # A 128x64 (one box), B 64x128 (two boxes, one per column of 128-byte atoms)
    assert k.tensor_maps[:2] == [(0, "float16", 2, [128, 64], 128),
                                 (1, "float16", 2, [64, 64], 128)]
    # the float32 accumulator goes out through shared memory by TMA (epilogue_staging.py):
    # boxes of 32 columns (128 bytes)
    assert k.tensor_maps[2:] == [(2, "float32", 4, [128, 32], 128)]
    assert k.param_formats[-2:] == ["T", "T"]
    assert len(re.findall(r"\.param \.align 64 \.b8 \w+\[128\]", ptx)) == 3
    assert "cvta.param.u64" in ptx                   # the maps are read in place
    # 3 boxes per iteration: the prologue (two iterations, unrolled) and the refill
    assert ptx.count("cp.async.bulk.tensor.2d.shared::cluster.global") == 9
    assert ptx.count("mbarrier.init.shared::cta.b64") == 3      # one per stage
    assert "mbarrier.try_wait.parity" in ptx and "fence.proxy.async" in ptx
    # the block barrier per iteration guards the stage the refill overwrites
    assert "bar.sync" in _head_of_loop(ptx) and "mbarrier.arrive.shared::cta" not in ptx
    assert "cp.async.cg" not in ptx and "cp.async.wait_group" not in ptx
    assert ".extern .shared .align 1024" in ptx


@pytest.mark.parametrize("causal", [False, True])
def test_attention_loads_k_and_v_with_tma(causal, monkeypatch):
    """FlashAttention's K and V tiles (4-d tensors, one head and 64 keys per box) come
    by TMA with the per-iteration block barrier; the output tile goes out by TMA (one
    more map), and the loop's barrier does not wait for that store."""
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    import tilejit as tj
    from flash_attention.flash_attn import flashattn
    q = np.zeros((4, 4096, 32, 128), np.float16)
    k = tj.kernel(flashattn.func, fast_math=True).compile(
        q, q, q, q, block_M=128, block_N=64, threads=128, num_stages=2, is_causal=causal,
        target="cuda", arch="sm_90a").compiled
    assert len(k.tensor_maps) == 3 and "cp.async.bulk.tensor.4d" in k.ptx
    assert "cp.async.bulk.tensor.4d.global.shared::cta" in k.ptx
    head = _head_of_loop(k.ptx)
    assert "bar.sync" in head and "mbarrier.arrive.shared::cta" not in k.ptx
    assert "wait_group.read" not in head


def test_tma_is_sm90_only_and_can_be_turned_off(monkeypatch):
    assert _compiled(arch="sm_80", stages=3).tensor_maps == []
    assert "cp.async.cg" in _compiled(arch="sm_80", stages=3).ptx
    monkeypatch.setenv("TILEJIT_TMA", "0")
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    k = _compiled(stages=3)
    assert k.tensor_maps == [] and "cp.async.cg" in k.ptx and "mbarrier" not in k.ptx


def test_unaligned_or_unpipelined_copies_keep_cp_async():
    # rows of 517 halves: not 16-byte aligned, so no tensor map can describe the tensor
    k = _compiled(shape=(512, 517), stages=3)
    assert _loads(k) == [] and "cp.async.cg" in k.ptx
    assert _loads(_compiled(stages=1)) == []


@tilejit.kernel
def gemm_and(A, B, C, extra: T.constexpr = "break", block: T.constexpr = 64):
    """A pipelined GEMM whose loop also leaves early ("break") or scales its staged A
    tile in place ("scale")."""
    M, K = A.shape
    with T.Kernel(T.ceildiv(M, block), T.ceildiv(M, block), threads=128) as (bx, by):
        A_s = T.alloc_shared((block, 32), A.dtype)
        B_s = T.alloc_shared((32, block), B.dtype)
        C_f = T.alloc_fragment((block, block), T.float32)
        T.clear(C_f)
        for k in T.Pipelined(T.ceildiv(K, 32), num_stages=3):
            T.copy(A[by * block, k * 32], A_s)
            T.copy(B[k * 32, bx * block], B_s)
            if extra == "scale":
                for i, j in T.Parallel(block, 32):
                    A_s[i, j] = A_s[i, j] * 2
            T.gemm(A_s, B_s, C_f)
            if extra == "break":
                if k == 3:
                    break
        T.copy(C_f, C[by * block, bx * block])


@pytest.mark.parametrize("extra", ["break", "scale"])
def test_a_loop_that_leaves_early_or_writes_a_staged_tile_keeps_cp_async(extra):
    a = np.zeros((256, 256), np.float16)
    k = gemm_and.compile(a, a, np.zeros((256, 256), np.float32), extra=extra, target="cuda",
                         arch="sm_90a").compiled
    assert _loads(k) == [] and "cp.async.cg" in k.ptx
    # the same loop without either takes TMA
    plain = gemm_and.compile(a, a, np.zeros((256, 256), np.float32), extra="", target="cuda",
                             arch="sm_90a").compiled
    assert _loads(plain)


def test_tensor_map_parameters_are_64_byte_aligned_in_the_launch_buffer():
    st, offsets = layout_params(["Q", "q", "i", "T", "T"])
    assert offsets == [0, 8, 16, 64, 192] and st.size == 320
    assert st.format.endswith("128s128s") or "128s" in st.format


def test_the_fast_path_packs_the_maps_of_its_tensors_last():
    class Fake:
        def __init__(self, ptr, shape, strides):
            self._ptr, self.shape, self._strides = ptr, shape, strides
            self.dtype = "f16"

        def data_ptr(self):
            return self._ptr

        def stride(self):
            return self._strides

        def get_device(self):
            return 0

    packed = []

    class Launcher:
        def parts(self):
            return (lambda view, off, *v: packed.append(v), None,
                    lambda *a: (0,), "f", 0)

    fast = FastLauncher([("tensor", 2), ("scalar", 0), ("tensor", 1)], Fake, {1: int})
    seen = []

    def maps(*runtime):
        seen.append(runtime)
        return (b"A" * 128,)
    x, y = Fake(4096, (2, 8), (8, 1)), Fake(8192, (8,), (1,))
    fast.remember((x, 3, y), Launcher(), (1, 1, 1), 32, 0, (lambda s: 0, 0), maps=maps)
    fast.launch(x, 3, y)
    assert seen == [((4096, (2, 8), (8, 1)), None, (8192, (8,), (1,)))]
    assert packed[-1] == (4096, 2, 8, 8, 1, 3, 8192, 8, 1, b"A" * 128)


def test_a_launch_gets_each_map_from_its_own_argument(monkeypatch):
    """kernel.tensor_map_maker: map j encodes the argument at its position; a new
    pointer (or shape) is a new map, the same arguments again are not re-encoded."""
    from tilejit.runtime.kernel import tensor_map_maker
    from tilejit.runtime import tensor_maps
    encoded = []

    def encode(args):
        encoded.append(args["address"])
        return args["address"].to_bytes(8, "little") * 16
    monkeypatch.setattr(tensor_maps, "MAPS", TensorMaps(encode=encode))
    maps = tensor_map_maker([(2, "float16", 2, [64, 64], 128), (0, "float16", 2, [64, 64], 128)])
    a, b = (4096, (128, 64), (64, 1)), (8192, (128, 64), (64, 1))
    first = maps(a, None, b)
    assert [m[:8] for m in first] == [(8192).to_bytes(8, "little"), (4096).to_bytes(8, "little")]
    assert maps(a, None, b) == first and encoded == [8192, 4096]
    maps(a, None, (12288, (128, 64), (64, 1)))
    assert encoded == [8192, 4096, 12288]


def test_maps_of_empty_tensors_and_of_dimensions_of_extent_one():
    maps = TensorMaps(encode=lambda args: bytes(MAP_BYTES))
    assert maps.get(0, (0, 64), (64, 1), Box("float16", 2, (64, 64))) == bytes(MAP_BYTES)
    # a dimension of extent 1 may carry any stride: the map gets a valid one
    args = encode_arguments(0, (4, 1, 64), (64, 7, 1), Box("float16", 2, (1, 1, 64)))
    assert args["strides"] == [128, 128]


def test_broadcast_tensors_are_not_aligned():
    t = torch.zeros(1, 64, dtype=torch.float16).expand(8, 64)
    assert not as_tensor_arg(t).aligned
    assert as_tensor_arg(torch.zeros(8, 64, dtype=torch.float16)).aligned


# -- on the GPU -------------------------------------------------------------------

@tilejit.kernel
def gemm_twice(A, B, C, block: T.constexpr = 64, stages: T.constexpr = 3):
    """C = 2 A B with the pipelined loop run twice per block: the mbarriers' phases
    must carry over from one run to the next (trip counts not a multiple of stages)."""
    M, K = A.shape
    N = B.shape[1]
    with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
        A_s = T.alloc_shared((block, 32), A.dtype)
        B_s = T.alloc_shared((32, block), B.dtype)
        C_f = T.alloc_fragment((block, block), T.float32)
        T.clear(C_f)
        for _rep in range(2):
            for k in T.Pipelined(T.ceildiv(K, 32), num_stages=stages):
                T.copy(A[by * block, k * 32], A_s)
                T.copy(B[k * 32, bx * block], B_s)
                T.gemm(A_s, B_s, C_f)
        T.copy(C_f, C[by * block, bx * block])


def test_the_next_run_of_a_nested_pipeline_waits_for_every_warp(tmp_path, monkeypatch):
    """A pipelined loop inside another loop: its next run's prologue overwrites stages the
    last run's consumers may still read in other warps, so a block barrier stands between
    them (after the proxy fence, before the first TMA load of the run)."""
    import ast
    monkeypatch.setenv("TILEJIT_DUMP_IR", str(tmp_path))
    monkeypatch.setenv("TILEJIT_DISABLE_CACHE", "1")
    a = np.zeros((192, 64), np.float16)
    gemm_twice.compile(a, np.zeros((64, 136), np.float16), np.zeros((192, 136), np.float32),
                       target="cuda", arch="sm_90a")
    (directory,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    (text,) = [p.read_text() for p in directory.iterdir() if p.name.endswith("barriers.py")]
    outer = next(n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.For)
                 and isinstance(n.target, ast.Name) and n.target.id == "_rep")
    calls = sorted((n for n in ast.walk(outer) if isinstance(n, ast.Call)
                    and isinstance(n.func, ast.Name) and n.func.id.startswith("__tj_")),
                   key=lambda n: (n.lineno, n.col_offset))
    order = [n.func.id for n in calls]                      # in program order
    first_load = order.index("__tj_tma_load")
    assert "__tj_sync" in order[order.index("__tj_tma_fence"):first_load], order


@pytest.mark.gpu
@pytest.mark.parametrize("K", [32, 64, 128, 160, 224])
def test_a_pipeline_run_twice_per_block_on_the_gpu(K):
    g = torch.Generator().manual_seed(K)
    a = torch.randn(192, K, generator=g).half().cuda()
    b = torch.randn(K, 136, generator=g).half().cuda()    # rows of 272 B: aligned
    c = torch.zeros(192, 136, device="cuda")
    gemm_twice(a, b, c)
    torch.cuda.synchronize()
    ref = 2 * (a.double() @ b.double())
    torch.testing.assert_close(c.double(), ref, rtol=1e-2, atol=1e-2)
    assert gemm_twice.compile(a, b, c).compiled.tensor_maps


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_tma_gemm_matches_cp_async_and_torch_across_calls(dtype, monkeypatch):
    """Several calls with new tensors of one shape (the fast path's maps follow the
    pointers) and tensors whose edges cut tiles, against torch and the cp.async path."""
    results = {}
    for flag in ("1", "0"):
        monkeypatch.setenv("TILEJIT_TMA", flag)
        kernel = tilejit.kernel(gemm.func)
        outs = []
        for seed in range(3):
            # rows of 1040 and 1552 bytes: aligned, so both copies can be TMA's
            a, b, A, B = _inputs(1000, 776, 520, dtype, False, False, device="cuda", seed=seed)
            c = torch.zeros(1000, 776, device="cuda")
            kernel(A, B, c, stages=3)
            torch.cuda.synchronize()
            torch.testing.assert_close(c.double().cpu(), a.double() @ b.double(),
                                       rtol=1e-2, atol=1e-2)
            outs.append(c)
        assert bool(kernel.compile(A, B, c, stages=3).compiled.tensor_maps) == (flag == "1")
        results[flag] = outs
    for x, y in zip(results["1"], results["0"]):
        torch.testing.assert_close(x, y, rtol=1e-3, atol=1e-3)
