"""TileLang's ``memory_order=`` on T.atomic_add / atomic_max / atomic_min, as a TileLang
user writes it: ``T.atomic_add(dst, value, memory_order=None, return_prev=False)`` (also
positional, third and fourth), element and region forms. In simulation against numpy;
in PTX for sm_80 and sm_90a (the fences and orderings each order brings, assembled with
ptxas); bad orders are compile errors at their line; with ``-m gpu``, on the device
against torch and against a simulator copy of the same kernel."""
import re
import shutil
import subprocess

import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T

PTXAS = shutil.which("ptxas")
ARCHS = ["sm_80", "sm_90a"]
ORDERS = [None, "relaxed", "consume", "acquire", "release", "acq_rel", "seq_cst"]
STRONG = ["consume", "acquire", "release", "acq_rel", "seq_cst"]


# ----------------------------------------------------------------------------- kernels

@tilejit.kernel
def extremes_sum(A, S, Mx, Mn, order: T.constexpr = None, block: T.constexpr = 128):
    """Every element of A into S[0] (add), Mx[0] (max) and Mn[0] (min)."""
    N = A.shape[0]
    with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
        for i in T.Parallel(block):
            if bx * block + i < N:
                T.atomic_add(S[0], A[bx * block + i], memory_order=order)
                T.atomic_max(Mx[0], A[bx * block + i], memory_order=order)
                T.atomic_min(Mn[0], A[bx * block + i], memory_order=order)


@tilejit.kernel
def tickets(Counter, Out, order: T.constexpr = None, block: T.constexpr = 128):
    """memory_order and return_prev positional, as in TileLang's signature."""
    N = Out.shape[0]
    with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
        for i in T.Parallel(block):
            if bx * block + i < N:
                Out[bx * block + i] = T.atomic_add(Counter[0], 1, order, True)


@tilejit.kernel
def block_flags(A, Flag, Done):
    """Block-level element atomics with literal orders: each thread of each block
    publishes its block's value with release and counts itself with acq_rel."""
    N = A.shape[0]
    with T.Kernel(N, threads=128) as bx:
        T.atomic_max(Flag[0], A[bx], memory_order="release")
        T.atomic_add(Done[0], 1, memory_order="acq_rel")


@tilejit.kernel
def split_k(A, B, C, order: T.constexpr = None, bm: T.constexpr = 32, bn: T.constexpr = 32,
            splits: T.constexpr = 4):
    """C += A[:, part] @ B[part, :]: each split adds its fragment (region form)."""
    M, K = A.shape
    N = B.shape[1]
    with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), splits, threads=128) as (bx, by, bz):
        F = T.alloc_fragment((bm, bn), T.float32)
        T.clear(F)
        kk = K // splits
        for i, j in T.Parallel(bm, bn):
            for k in T.serial(kk):
                r = by * bm + i
                c = bx * bn + j
                if r < M and c < N:
                    F[i, j] += A[r, bz * kk + k] * B[bz * kk + k, c]
        T.atomic_add(C[by * bm:(by + 1) * bm, bx * bn:(bx + 1) * bn], F, memory_order=order)


@tilejit.kernel
def shared_region_extremes(A, Mx, Mn, order: T.constexpr = None, bm: T.constexpr = 16):
    """Blocks of rows staged in shared memory, combined into Mx and Mn (region form from
    a shared tile, memory_order positional)."""
    M, N = A.shape
    with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
        S = T.alloc_shared((bm, N), T.float32)
        T.copy(A[bx * bm:(bx + 1) * bm, 0:N], S)
        T.atomic_max(Mx[0:bm, 0:N], S, order)
        T.atomic_min(Mn[0:bm, 0:N], S, order)


extremes_sum_sim = tilejit.kernel(extremes_sum.func, target="sim")
tickets_sim = tilejit.kernel(tickets.func, target="sim")
block_flags_sim = tilejit.kernel(block_flags.func, target="sim")
split_k_sim = tilejit.kernel(split_k.func, target="sim")
shared_region_extremes_sim = tilejit.kernel(shared_region_extremes.func, target="sim")


def _ints(shape, lo, hi, seed=0, dtype=torch.int32):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(lo, hi, shape, generator=g, dtype=torch.int64).to(dtype)


def _shared_reference(a, bm=16):
    """What shared_region_extremes leaves: rows past A's end are copied as 0."""
    m, n = a.shape
    blocks = -(-m // bm)
    padded = np.zeros((blocks * bm, n), np.float32)
    padded[:m] = a
    padded = padded.reshape(blocks, bm, n)
    return padded.max(0), padded.min(0)


# ----------------------------------------------------------------------------- simulation

@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("dtype", [torch.int32, torch.float32, torch.float64])
def test_element_forms_in_simulation(order, dtype):
    a = _ints((3000,), -1000, 1000, seed=1, dtype=dtype)
    s, mx, mn = (torch.zeros(1, dtype=dtype), torch.full((1,), -10**6, dtype=dtype),
                 torch.full((1,), 10**6, dtype=dtype))
    extremes_sum(a, s, mx, mn, order=order)
    x = a.numpy().astype(np.float64)
    assert (s.item(), mx.item(), mn.item()) == (x.sum(), x.max(), x.min())


@pytest.mark.parametrize("order", ORDERS)
def test_return_prev_positional(order):
    counter = torch.zeros(1, dtype=torch.int32)
    out = torch.full((1000,), -1, dtype=torch.int32)
    tickets(counter, out, order=order)
    assert counter.item() == 1000
    np.testing.assert_array_equal(np.sort(out.numpy()), np.arange(1000))


def test_block_level_literal_orders():
    a = _ints((77,), -50, 50, seed=2)
    flag, done = torch.full((1,), -100, dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
    block_flags(a, flag, done)
    assert (flag.item(), done.item()) == (a.max().item(), 77 * 128)


@pytest.mark.parametrize("order", ORDERS)
def test_region_form_from_a_fragment_in_simulation(order):
    g = torch.Generator().manual_seed(3)
    a = torch.randint(-3, 4, (70, 64), generator=g).float()
    b = torch.randint(-3, 4, (64, 50), generator=g).float()
    c = torch.ones(70, 50)
    split_k(a, b, c, order=order)
    np.testing.assert_array_equal(c.numpy(), 1 + a.numpy().astype(np.float64)
                                  @ b.numpy().astype(np.float64))


@pytest.mark.parametrize("order", ORDERS)
def test_region_form_from_a_shared_tile_in_simulation(order):
    a = torch.randn(70, 64, generator=torch.Generator().manual_seed(4))
    mx, mn = torch.full((16, 64), -1e30), torch.full((16, 64), 1e30)
    shared_region_extremes(a, mx, mn, order=order)
    want_max, want_min = _shared_reference(a.numpy())
    np.testing.assert_array_equal(mx.numpy(), want_max)
    np.testing.assert_array_equal(mn.numpy(), want_min)


# ----------------------------------------------------------------------------- PTX

def _f32(*shape):
    return torch.zeros(*shape)


def _events(ptx):
    """The PTX's atomics and fences in order, each as its opcode."""
    return [line.split()[0].rstrip(";") for line in ptx.splitlines()
            if re.match(r"\s*(atom|red|fence|membar)\.", line)]


def _assemble(ptx, arch, tmp_path):
    if PTXAS is None:
        pytest.skip("ptxas is not on PATH: PTX generated and checked, not assembled")
    path = tmp_path / "k.ptx"
    path.write_text(ptx)
    r = subprocess.run([PTXAS, f"-arch={arch}", str(path), "-o", str(tmp_path / "k.cubin")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


# the fences around each atomic: (before, after); the NVPTX backend drops an atomicrmw's
# ordering, so a stronger order is the relaxed `atom.` between the memory model's fences
FENCES = {None: (None, None), "relaxed": (None, None),
          "consume": (None, "fence.acq_rel.gpu"), "acquire": (None, "fence.acq_rel.gpu"),
          "release": ("fence.acq_rel.gpu", None),
          "acq_rel": ("fence.acq_rel.gpu", "fence.acq_rel.gpu"),
          "seq_cst": ("fence.sc.gpu", "fence.acq_rel.gpu")}


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("order", ORDERS)
def test_element_add_ptx(order, arch, tmp_path):
    ptx = tickets.compile(torch.zeros(1, dtype=torch.int32), torch.zeros(1000, dtype=torch.int32),
                          order=order, target="cuda", arch=arch).ptx
    before, after = FENCES[order]
    want = [e for e in (before, "atom.global.add.u32", after) if e]
    assert _events(ptx) == want
    _assemble(ptx, arch, tmp_path)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("order", ORDERS)
def test_element_max_min_ptx(order, arch, tmp_path):
    ptx = extremes_sum.compile(_f32(1000), _f32(1), _f32(1), _f32(1), order=order,
                               target="cuda", arch=arch).ptx
    events = _events(ptx)
    before, after = FENCES[order]
    assert events.count("atom.global.add.f32") == 1
    if before is None and after is None:
        assert not [e for e in events if e.startswith("fence")]
        # float max/min: compare-and-swap loops, relaxed as before
        assert events.count("atom.relaxed.sys.global.cas.b32") == 2
    else:
        fences = [e for e in events if e.startswith("fence")]
        assert (before is None or before in fences) and (after is None or after in fences)
        sem = {"consume": "acquire", "seq_cst": "acquire"}.get(order, order)
        # the loops LLVM expands carry the ordering at GPU scope
        assert events.count(f"atom.{sem}.gpu.global.cas.b32") == 2
        if after:                                   # every atomic is followed by a fence
            assert all(events[k + 1] == after for k, e in enumerate(events)
                       if e == "atom.global.add.f32")
        if before:
            assert all(events[k - 1] == before for k, e in enumerate(events)
                       if e == "atom.global.add.f32")
    _assemble(ptx, arch, tmp_path)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("order", ORDERS)
def test_region_add_ptx(order, arch, tmp_path):
    """The vector red.global.add.v*.f32 of relaxed region adds on sm_90a; a stronger order
    adds element by element, each atomic between its fences."""
    ptx = split_k.compile(_f32(64, 64), _f32(64, 64), _f32(64, 64), order=order,
                          target="cuda", arch=arch).ptx
    events = _events(ptx)
    before, after = FENCES[order]
    vector = [e for e in events if e.startswith("red.global.add.v")]
    assert bool(vector) == (arch == "sm_90a" and order in (None, "relaxed"))
    adds = [k for k, e in enumerate(events) if e == "atom.global.add.f32"]
    assert adds
    for k in adds:
        if before:
            assert events[k - 1] == before
        if after:
            assert events[k + 1] == after
    if before is None and after is None:
        assert not [e for e in events if e.startswith("fence")]
    _assemble(ptx, arch, tmp_path)


@pytest.mark.parametrize("arch", ARCHS)
def test_relaxed_is_the_default(arch):
    args = (torch.zeros(1, dtype=torch.int32), torch.zeros(1000, dtype=torch.int32))
    default = tickets.compile(*args, target="cuda", arch=arch).ptx
    assert tickets.compile(*args, order="relaxed", target="cuda", arch=arch).ptx == default
    assert tickets.compile(*args, order=None, target="cuda", arch=arch).ptx == default


@pytest.mark.parametrize("arch", ARCHS)
def test_block_level_literal_orders_ptx(arch, tmp_path):
    ptx = block_flags.compile(torch.zeros(10, dtype=torch.int32),
                              torch.zeros(1, dtype=torch.int32),
                              torch.zeros(1, dtype=torch.int32), target="cuda", arch=arch).ptx
    assert _events(ptx) == ["fence.acq_rel.gpu", "atom.global.max.s32", "fence.acq_rel.gpu",
                            "atom.global.add.u32", "fence.acq_rel.gpu"]
    _assemble(ptx, arch, tmp_path)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("order", [None, "acquire", "seq_cst"])
def test_shared_region_ptx(order, arch, tmp_path):
    ptx = shared_region_extremes.compile(_f32(70, 64), _f32(16, 64), _f32(16, 64),
                                         order=order, target="cuda", arch=arch).ptx
    fences = [e for e in _events(ptx) if e.startswith("fence")]
    assert bool(fences) == (order is not None)
    _assemble(ptx, arch, tmp_path)


# ----------------------------------------------------------------------------- errors

EXPECTED = ("memory_order must be None or one of 'relaxed', 'consume', 'acquire', "
            "'release', 'acq_rel', 'seq_cst'")


def _error(make, *args, target, received, **kw):
    kernel = make()
    with pytest.raises(tilejit.CompileError) as info:
        if target == "sim":
            kernel(*args, **kw)
        else:
            kernel.compile(*args, target="cuda", arch="sm_90a", **kw)
    e = info.value
    assert EXPECTED in str(e) and f"got {received}" in str(e), str(e)
    return e


@pytest.mark.parametrize("target", ["sim", "cuda"])
def test_unknown_order_is_an_error_at_its_line(target):
    def make():
        @tilejit.kernel
        def strong(A):
            with T.Kernel(1, threads=128) as bx:
                for i in T.Parallel(128):
                    T.atomic_add(A[i % 4], 1.0, memory_order="strong")
        return strong
    e = _error(make, torch.zeros(4), target=target, received="'strong'")
    assert e.lineno == make.__code__.co_firstlineno + 5
    assert "T.atomic_add(dst, value, memory_order=None, return_prev=False)" in str(e)


@pytest.mark.parametrize("target", ["sim", "cuda"])
def test_run_time_order_is_an_error(target):
    def make():
        @tilejit.kernel
        def runtime(A, B):
            with T.Kernel(1, threads=128) as bx:
                F = T.alloc_fragment((128,), T.float32)
                T.clear(F)
                T.atomic_max(A[0:128], F, memory_order=B[0])
        return runtime
    e = _error(make, torch.zeros(128), torch.zeros(1), target=target,
               received="the run-time expression `B[0]`")
    assert e.lineno == make.__code__.co_firstlineno + 6


@pytest.mark.parametrize("target", ["sim", "cuda"])
@pytest.mark.parametrize("bad", ["Acquire", 2, "acquire_release"])
def test_bad_constexpr_order(target, bad):
    def make():
        @tilejit.kernel
        def by_param(A, order: T.constexpr = "acquire"):
            with T.Kernel(1, threads=128) as bx:
                for i in T.Parallel(128):
                    T.atomic_min(A[i], 1.0, order)
        return by_param
    e = _error(make, torch.zeros(128), target=target, received=repr(bad), order=bad)
    assert e.lineno == make.__code__.co_firstlineno + 5
    assert "T.atomic_min" in str(e)


def test_order_given_twice():
    @tilejit.kernel
    def twice(A):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(128):
                T.atomic_add(A[i], 1.0, "relaxed", memory_order="acquire")
    with pytest.raises(tilejit.CompileError, match="unexpected argument 'memory_order'"):
        twice.compile(torch.zeros(128), target="cuda", arch="sm_90a")


# ----------------------------------------------------------------------------- GPU

def _gpu_check(fn_gpu, fn_sim, make_args, out_indices, **kw):
    """Run the kernel on the device and a simulator copy on the same inputs; the device's
    outputs, which must equal the simulator's."""
    args = make_args()
    on_gpu = [a.cuda() if isinstance(a, torch.Tensor) else a for a in args]
    fn_gpu(*on_gpu, **kw)
    torch.cuda.synchronize()
    on_sim = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    fn_sim(*on_sim, **kw)
    got = [on_gpu[k].cpu() for k in out_indices]
    for g, k in zip(got, out_indices):
        torch.testing.assert_close(g, on_sim[k], rtol=0, atol=0)
    return got


@pytest.mark.gpu
@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("dtype", [torch.int32, torch.float32])
def test_gpu_element_forms(order, dtype):
    a = _ints((50_000,), -1000, 1000, seed=5, dtype=dtype)      # float32 sums exact
    s, mx, mn = _gpu_check(extremes_sum, extremes_sum_sim,
                           lambda: [a, torch.zeros(1, dtype=dtype),
                                    torch.full((1,), -10**6, dtype=dtype),
                                    torch.full((1,), 10**6, dtype=dtype)], [1, 2, 3],
                           order=order)
    x = a.double()
    assert (s.item(), mx.item(), mn.item()) == (x.sum().item(), x.max().item(),
                                                x.min().item())


@pytest.mark.gpu
@pytest.mark.parametrize("order", ORDERS)
def test_gpu_tickets(order):
    counter = torch.zeros(1, dtype=torch.int32, device="cuda")
    out = torch.full((100_000,), -1, dtype=torch.int32, device="cuda")
    tickets(counter, out, order=order)
    torch.cuda.synchronize()
    assert counter.item() == 100_000
    torch.testing.assert_close(out.sort().values.cpu(), torch.arange(100_000, dtype=torch.int32))


@pytest.mark.gpu
def test_gpu_block_level_literal_orders():
    a = _ints((5000,), -10**5, 10**5, seed=6)
    flag, done = _gpu_check(block_flags, block_flags_sim,
                            lambda: [a, torch.full((1,), -10**6, dtype=torch.int32),
                                     torch.zeros(1, dtype=torch.int32)], [1, 2])
    assert (flag.item(), done.item()) == (a.max().item(), 5000 * 128)


@pytest.mark.gpu
@pytest.mark.parametrize("order", ORDERS)
def test_gpu_region_forms(order):
    g = torch.Generator().manual_seed(7)
    a = torch.randint(-3, 4, (200, 256), generator=g).float()
    b = torch.randint(-3, 4, (256, 150), generator=g).float()
    (c,) = _gpu_check(split_k, split_k_sim, lambda: [a, b, torch.zeros(200, 150)], [2],
                      order=order)
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=0, atol=0)
    x = torch.randn(300, 64, generator=g)
    mx, mn = _gpu_check(shared_region_extremes, shared_region_extremes_sim,
                        lambda: [x, torch.full((16, 64), -1e30), torch.full((16, 64), 1e30)],
                        [1, 2], order=order)
    want_max, want_min = _shared_reference(x.numpy())
    np.testing.assert_array_equal(mx.numpy(), want_max)
    np.testing.assert_array_equal(mn.numpy(), want_min)
