"""A helper's Python lists, as TileLang's helpers use them while it builds a kernel: a loop
over ``[v0, v1]`` appending to ``res``, a generator over ``[x0, x1]`` its caller wraps in
``list(...)``, a comprehension over ``range(4)``. Compiled, they are tuples of a length
fixed when the kernel compiles (``frontend/static_sequences.py``); the simulator runs the
same rewritten helper. Written as a TileLang user writes them (dtype names, tirx)."""
import numpy as np
import pytest
import torch

import tilejit
import tilejit.language as T
from tilejit.tilelang.tvm import tirx

U16 = (1 << 16) - 1


def pack_bf16x2(v0, v1):
    """Two float32 values rounded to bfloat16 (to nearest even, NaN and inf kept) and
    packed in a uint32, v0 in the low half."""
    halves = []
    for value in [v0, v1]:
        bits = tirx.reinterpret(T.uint32, value)
        exponent = (bits >> tirx.const(23, T.uint32)) & tirx.const(0xFF, T.uint32)
        bias = ((bits >> tirx.const(16, T.uint32)) & tirx.const(1, T.uint32)) + \
            tirx.const(0x7FFF, T.uint32)
        bits = tirx.Select(exponent == tirx.const(0xFF, T.uint32), bits, bits + bias)
        halves.append((bits >> tirx.const(16, T.uint32)) & tirx.const(U16, T.uint32))
    return halves[0] | (halves[1] << tirx.const(16, T.uint32))


def unpack_bf16x2(word):
    """The two bfloat16 halves of a uint32 as float32, a generator over a list."""
    low = word & tirx.const(U16, T.uint32)
    high = (word >> tirx.const(16, T.uint32)) & tirx.const(U16, T.uint32)
    return (tirx.reinterpret(T.float32, h << tirx.const(16, T.uint32)) for h in [low, high])


def powers(x):
    """x, x**2, x**3, x**4 summed through a list comprehension over range(4)."""
    terms = [x ** (k + 1) for k in range(4)]
    total = 0.0
    for t in terms:
        total += t
    return total


def folds(a):
    """``[a] * 3``, sum/max of displays, enumerate(reversed(...)): trace-time Python."""
    zs = [a] * 3
    total = sum([a, 2.0, 1.0])
    hi = max([a, 1.0])
    acc = 0.0
    for i, v in enumerate(reversed([a, 2.0])):
        acc += v * (i + 1)
    return total + hi + acc + zs[2]


def even_powers(a):
    """A comprehension whose condition is the item's own (a constant once it is in)."""
    return sum(a ** k for k in range(5) if k % 2 == 0)


def _folds_want(a):
    return (a + 3) + torch.clamp(a, min=1.0) + (2 + a * 2) + a


def appends_in_a_loop(x, n):
    out = []
    for k in range(n):
        out.append(x * k)
    return out[0]


@T.macro
def mixed_items(a):
    """A loop over items of two types (Numba's tuple iteration would refuse it)."""
    acc = a
    for w in (2, 0.5):
        acc = acc * w + 1.0
    return acc


def round_trip(n):
    @T.prim_func
    def main(bits: T.Tensor((n,), "uint32"), out: T.Tensor((n,), "float32"),
             packed: T.Tensor((n // 2,), "uint32")):
        with T.Kernel(n // 2, threads=1) as bx:
            f0 = T.reinterpret(bits[bx * 2], T.float32)
            f1 = T.reinterpret(bits[bx * 2 + 1], T.float32)
            word = pack_bf16x2(f0, f1)
            packed[bx] = word
            halves = list(unpack_bf16x2(word))
            out[bx * 2] = halves[0]
            out[bx * 2 + 1] = halves[1]
    return main


def lane_wise(fn):
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                B[i] = fn(A[i])
    return main


SPECIAL = [0x7FFF8C22, 0x7FFFFFFF, 0x7F800000, 0xFF800000, 0x3F808000, 0x3F818000,
           0x00000001, 0xC0490FDB]


def _bits(device="cpu"):
    values = torch.tensor(SPECIAL + list(range(0x3F000000, 0x3F000000 + 8 * 0x12345,
                                               0x12345)), dtype=torch.int64)
    return values.to(torch.uint32).to(device)


def _expected(bits):
    """float32 -> bfloat16 by torch (round to nearest even), back to float32."""
    return bits.view(torch.float32).to(torch.bfloat16).to(torch.float32)


def _check(out, packed, bits):
    want = _expected(bits.cpu())
    got = out.cpu()
    nan = torch.isnan(want)
    assert torch.equal(torch.isnan(got), nan)
    assert torch.equal(got[~nan], want[~nan])
    words = packed.cpu().to(torch.int64)
    low = (words & U16).to(torch.int32) << 16
    assert torch.equal(low.view(torch.float32)[~nan[0::2]], want[0::2][~nan[0::2]])


def test_pack_and_unpack_round_as_torch_in_the_simulator():
    bits = _bits()
    kernel = tilejit.compile(round_trip(bits.numel()), target="llvm")
    out = torch.zeros(bits.numel())
    packed = torch.zeros(bits.numel() // 2, dtype=torch.int64).to(torch.uint32)
    kernel(bits, out, packed)
    _check(out, packed, bits)
    assert torch.isinf(out[2]) and out[2] > 0 and torch.isinf(out[3]) and out[3] < 0


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_pack_and_unpack_ptx_assembles(arch, ptxas):
    kernel = tilejit.compile(round_trip(16), target="cuda")
    ptx = kernel.get_kernel_source(arch=arch)
    assert ptx.count(", 32767;") == 2      # the rounding bias, once for each unrolled half
    ptxas(ptx, arch)


@pytest.mark.parametrize("fn, want", [
    (powers, lambda a: a + a ** 2 + a ** 3 + a ** 4),
    (folds, _folds_want),
    (even_powers, lambda a: 1 + a ** 2 + a ** 4),
    (mixed_items, lambda a: (a * 2 + 1.0) * 0.5 + 1.0),
])
def test_comprehension_and_mixed_tuple_loop(fn, want, ptxas):
    kernel = tilejit.compile(lane_wise(fn), out_idx=[1])
    a = torch.linspace(-2, 2, 64)
    torch.testing.assert_close(kernel(a).double(), want(a.double()), rtol=1e-5, atol=1e-5)
    ptxas(kernel.get_kernel_source(arch="sm_90a"), "sm_90a")


def _appends(n):
    return lambda x: appends_in_a_loop(x, n)


@pytest.mark.parametrize("target", ["llvm", "cuda -arch=sm_90a"])
def test_appending_in_a_loop_is_a_compile_error_at_its_line(target):
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32"),
             n: T.int32):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                B[i] = appends_in_a_loop(A[i], n)

    with pytest.raises(tilejit.CompileError, match=r"out.append\(x \* k\)` in a loop") as e:
        kernel = tilejit.compile(main, target=target)
        if target == "llvm":
            kernel(torch.zeros(64), torch.zeros(64), 3)
        else:
            kernel.get_kernel_source()
    assert "test_static_sequences.py" in str(e.value)


def test_reinterpret_of_a_scalar_is_a_scalar():
    assert np.ndim(tirx.reinterpret(T.uint32, np.float32(1.0))) == 0
    assert tirx.reinterpret(T.uint32, np.float32(1.0)) == 0x3F800000
    assert np.shape(tirx.reinterpret(T.uint32, np.ones(3, np.float32))) == (3,)


@pytest.mark.gpu
def test_gpu_pack_and_unpack_match_torch_and_the_simulator():
    bits = _bits()
    kernel = tilejit.compile(round_trip(bits.numel()))
    out = torch.zeros(bits.numel(), device="cuda")
    packed = torch.zeros(bits.numel() // 2, dtype=torch.int64).to(torch.uint32).cuda()
    kernel(bits.cuda(), out, packed)
    _check(out, packed, bits)
    sim_out = torch.zeros(bits.numel())
    sim_packed = torch.zeros(bits.numel() // 2, dtype=torch.int64).to(torch.uint32)
    kernel(bits, sim_out, sim_packed)
    assert torch.equal(out.cpu().view(torch.int32), sim_out.view(torch.int32))
    assert torch.equal(packed.cpu().to(torch.int64), sim_packed.to(torch.int64))


@pytest.mark.gpu
@pytest.mark.parametrize("fn", [powers, mixed_items, folds, even_powers])
def test_gpu_comprehension_and_mixed_tuple_loop_match_the_simulator(fn):
    kernel = tilejit.compile(lane_wise(fn), out_idx=[1])
    a = torch.linspace(-2, 2, 64)
    torch.testing.assert_close(kernel(a.cuda()).cpu(), kernel(a), rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------------------------------
# lists only read, changed in place, copied, or walked with zip/enumerate; a module's own
# `list`; a helper that closes over its kernel factory's values

def read_only(x):
    """A list never appended to: kernel code cannot build it even to read it."""
    vals = [x, x * 2.0, x * 3.0]
    return vals[0] + vals[2]


def changed_in_place(x):
    res = [0.0, 0.0, 0.0]
    for i in range(3):
        res[i] = x * i               # an index the unrolled loop fixes
    res[-3] = x * 10.0
    res += [x]
    res.extend([x * 5.0])
    return res[0] + res[2] + res[3] + res[4]


def copied(x):
    a = [x, x]
    b = list(a)
    b[0] = x * 10.0                  # b is a copy: a stays as it is
    return a[0] + b[0]


def zipped(x):
    total = 0.0
    for i, v in enumerate([x, x * 2.0, x * 3.0]):
        total += v * i
    for a, w in zip([x, x * x], (1.0, 3.0)):
        total += a * w
    scaled = [v * i for i, v in enumerate((x, 4.0))]
    return total + scaled[1]


def as_list(x):
    return [x, x * 3.0]


def returned(x):
    pair = as_list(x)
    return pair[0] + pair[1]


def scaled_by(scale):
    def helper(x):
        res = []
        for w in [1.0, 2.0]:
            res.append(x * w * scale)
        return res[0] + res[1]
    return helper


@pytest.mark.parametrize("fn, want", [
    (read_only, lambda a: 4 * a),
    (changed_in_place, lambda a: 10 * a + 2 * a + a + 5 * a),
    (copied, lambda a: 11 * a),
    (zipped, lambda a: 8 * a + a + 3 * a * a + 4.0),
    (returned, lambda a: 4 * a),
    (scaled_by(3.0), lambda a: 9 * a),
])
def test_read_changed_copied_zipped_lists_as_python(fn, want, ptxas):
    kernel = tilejit.compile(lane_wise(fn), out_idx=[1])
    a = torch.linspace(-2, 2, 64)
    torch.testing.assert_close(kernel(a).double(), want(a.double()), rtol=1e-5, atol=1e-5)
    ptxas(tilejit.compile(lane_wise(fn), target="cuda").get_kernel_source(arch="sm_90a"),
          "sm_90a")


def item_at_a_run_time_index(x):
    res = [x, x]
    i = 1
    if x > 0:
        i = 0
    res[i] = x * 3.0
    return res[0]


@pytest.mark.parametrize("target", ["llvm", "cuda -arch=sm_90a"])
def test_item_at_a_run_time_index_is_a_compile_error_at_its_line(target):
    with pytest.raises(tilejit.CompileError, match=r"`res\[i\] = x \* 3.0`") as e:
        kernel = tilejit.compile(lane_wise(item_at_a_run_time_index), target=target)
        if target == "llvm":
            kernel(torch.zeros(64), torch.zeros(64))
        else:
            kernel.get_kernel_source()
    assert "test_static_sequences.py" in str(e.value)


OWN_LIST = """
def list(t):        # the module's own `list`, not the builtin
    return t[0] * 100.0


def own_list(x):
    return list((x, 1.0))
"""


def test_a_modules_own_list_is_called(tmp_path, monkeypatch, ptxas):
    (tmp_path / "seq_own_list.py").write_text(OWN_LIST)
    monkeypatch.syspath_prepend(str(tmp_path))
    import seq_own_list
    kernel = tilejit.compile(lane_wise(seq_own_list.own_list), out_idx=[1])
    a = torch.linspace(-2, 2, 64)
    torch.testing.assert_close(kernel(a), a * 100, rtol=1e-6, atol=1e-6)
    ptx = tilejit.compile(lane_wise(seq_own_list.own_list),
                          target="cuda").get_kernel_source(arch="sm_90a")
    ptxas(ptx, "sm_90a")


def grows_on_some_lanes(a):
    res = [a]
    if a > 0:
        res.append(a * 2)
    return res[0] + len(res)


def test_a_list_that_grows_under_a_lane_branch_is_refused_in_both():
    """Its length would differ between threads: the compile cannot type it, and the
    simulator (which had given every lane the longer one) says so at the append."""
    with pytest.raises(TypeError, match=r"gets another length under a branch on a "
                                        r"thread's value \(1 items, then 2\)") as e:
        tilejit.compile(lane_wise(grows_on_some_lanes), out_idx=[1], target="llvm")(
            torch.linspace(-2, 2, 64))
    assert "res.append(a * 2)" in str(e.value)
    with pytest.raises(tilejit.CompileError):
        tilejit.compile(lane_wise(grows_on_some_lanes), out_idx=[1],
                        target="cuda").get_kernel_source(arch="sm_90a")


@tilejit.kernel
def _taps_of_a_constexpr(X, Y, n, taps: T.constexpr = 3, bad: T.constexpr = False):
    """Comprehensions over a constexpr parameter's range, unrolled per specialization."""
    with T.Kernel(1, threads=32) as bx:
        for i in T.Parallel(8):
            if bad:
                Y[i] = sum(X[(i + t) % 8] for t in range(taps, n))     # n: a run-time value
            else:
                Y[i] = X[i] * sum([j for j in range(taps)]) + sum(
                    X[(i + t) % 8] for t in range(taps))


def _taps_reference(x, taps):
    return x * sum(range(taps)) + sum(torch.roll(x, -t) for t in range(taps))


def test_a_comprehension_over_a_constexpr_is_unrolled_per_value(ptxas):
    x, y = torch.randn(8), torch.zeros(8)
    for taps in (3, 5):
        _taps_of_a_constexpr(x, y, 8, taps=taps)
        torch.testing.assert_close(y, _taps_reference(x, taps))
    for arch in ("sm_80", "sm_90a"):
        ptx = _taps_of_a_constexpr.compile(x, y, 8, taps=5, target="cuda", arch=arch).ptx
        assert ptx.count("ld.global") >= 5        # the five taps' loads, unrolled
        ptxas(ptx, arch)


@pytest.mark.parametrize("target", ["cuda", "sim"])
def test_a_comprehension_a_run_time_value_bounds_is_refused_at_its_line(target):
    x, y = np.zeros(8, np.float32), np.zeros(8, np.float32)
    with pytest.raises(tilejit.CompileError, match="unsupported in a kernel: a generator "
                                                   "expression") as info:
        if target == "cuda":
            _taps_of_a_constexpr.compile(x, y, 8, bad=True, target="cuda", arch="sm_80")
        else:
            _taps_of_a_constexpr(x, y, 8, bad=True)
    assert "range(taps, n)" in str(info.value)


@pytest.mark.gpu
def test_gpu_a_comprehension_over_a_constexpr():
    x = torch.randn(8)
    y = torch.zeros(8, device="cuda")
    _taps_of_a_constexpr(x.cuda(), y, 8, taps=4)
    sim = torch.zeros(8)
    _taps_of_a_constexpr(x, sim, 8, taps=4)
    torch.testing.assert_close(y.cpu(), _taps_reference(x, 4))
    torch.testing.assert_close(y.cpu(), sim)
