"""The generated hot path: one lookup keyed on everything the launch depends on."""
from types import SimpleNamespace

import pytest

from tilejit.runtime.fastlaunch import FastLauncher, param_kinds


class FakeTensor:
    def __init__(self, ptr, shape, strides, dtype="f32", device=0):
        self._ptr, self.shape, self._strides = ptr, shape, strides
        self.dtype, self._device = dtype, device

    def data_ptr(self):
        return self._ptr

    def stride(self):
        return self._strides

    def get_device(self):
        return self._device


class FakeLauncher:
    """Records what the generated path packs and launches, in the shape of
    (grid, block, shared, stream, packed values)."""

    def __init__(self):
        self.calls = []
        self._packed = None

    def parts(self):
        def pack_into(view, offset, *values):
            self._packed = values

        def cu_launch(func, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
            self.calls.append(((gx, gy, gz), (bx, by, bz), shared, stream, self._packed))
            return (0,)
        return pack_into, None, cu_launch, "function", 1234

    def _on_error(self, *args):
        raise AssertionError(args)


def make():
    kinds = [("tensor", 2), ("scalar", 0), ("tensor", 1), ("const", 0)]
    return FastLauncher(kinds, FakeTensor, {1: float})


def test_hit_packs_pointer_shape_strides_and_scalars():
    fast = make()
    launcher = FakeLauncher()
    x = FakeTensor(4096, (3, 5), (5, 1))
    y = FakeTensor(8192, (5,), (1,))
    assert fast.launch(x, 2.5, y, 64) is fast.MISS           # nothing recorded yet
    fast.remember((x, 2.5, y, 64), launcher, (4, 1, 1), 128, 0, (lambda s: s, 7))
    assert fast.launch(FakeTensor(4096, (3, 5), (5, 1)), 2.5, y, 64) is None
    assert launcher.calls == [((4, 1, 1), (128, 1, 1), 0, 7,
                               (4096, 3, 5, 5, 1, 2.5, 8192, 5, 1))]


def test_outputs_are_made_and_packed_after_the_inputs():
    fast = FastLauncher([("tensor", 1), ("const", 0)], FakeTensor, {})
    launcher = FakeLauncher()
    x = FakeTensor(64, (5,), (1,))
    fast.remember((x, 8), launcher, (1, 1, 1), 32, 0, (lambda s: None, 0),
                  outputs=lambda: ("result", (999, 5, 1), [(999, (5,), (1,))]))
    assert fast.launch(x, 8) == "result"
    assert launcher.calls[-1][4] == (64, 5, 1, 999, 5, 1)
    assert launcher.calls[-1][3] is None       # stream 0 goes as None


def test_tensor_maps_of_outputs_follow_the_inputs():
    """A T.empty output stored by TMA: its map is made from the output just allocated,
    at the output's position after the inputs, and packed after everything else."""
    fast = FastLauncher([("tensor", 1), ("const", 0)], FakeTensor, {})
    launcher = FakeLauncher()
    x = FakeTensor(64, (5,), (1,))
    seen = []

    def maps(*tensors):
        seen.append(tensors)
        return ["map_x", "map_out"]
    fast.remember((x, 8), launcher, (1, 1, 1), 32, 0, (lambda s: None, 0),
                  outputs=lambda: ("result", (999, 5, 1), [(999, (5,), (1,))]), maps=maps)
    assert fast.launch(x, 8) == "result"
    assert seen == [((64, (5,), (1,)), (999, (5,), (1,)))]
    assert launcher.calls[-1][4] == (64, 5, 1, 999, 5, 1, "map_x", "map_out")


def test_every_dependency_is_part_of_the_key():
    fast = make()
    launcher = FakeLauncher()
    x = FakeTensor(4096, (3, 5), (5, 1))
    y = FakeTensor(8192, (5,), (1,))
    fast.remember((x, 2.5, y, 64), launcher, (4, 1, 1), 128, 0, (lambda s: s, 0))
    misses = [
        (FakeTensor(4100, (3, 5), (5, 1)), 2.5, y, 64),          # alignment changes
        (FakeTensor(4096, (4, 5), (5, 1)), 2.5, y, 64),          # shape
        (FakeTensor(4096, (3, 5), (1, 3)), 2.5, y, 64),          # strides (transposed)
        (FakeTensor(4096, (3, 5), (5, 1), dtype="f16"), 2.5, y, 64),
        (FakeTensor(4096, (3, 5), (5, 1), device=1), 2.5, y, 64),
        (x, 3.5, y, 64),                                         # scalar value (grid)
        (x, 2, y, 64),                                           # scalar type
        (x, 2.5, y, 128),                                        # constexpr
        ("not a tensor", 2.5, y, 64),
    ]
    for args in misses:
        assert fast.launch(*args) is fast.MISS, args
    assert fast.launch(FakeTensor(4096, (3, 5), (5, 1)), 2.5, y, 64) is None
    # another pointer of the same alignment reuses the entry and passes the new pointer
    assert fast.launch(FakeTensor(4096 + 16, (3, 5), (5, 1)), 2.5, y, 64) is None
    assert launcher.calls[-1][4][0] == 4112


def test_values_the_kernel_specializes_on_are_part_of_the_key():
    """FlashAttention's optional LSE tensor left out (None) took the full path on every
    call: ~70 µs of Python per launch, measured as a constant in its time at every
    sequence length (H200, 2026-11-30). None, strings, tuples and dtypes are keyed like
    constexprs; a tensor passed there later misses."""
    from types import SimpleNamespace

    from tilejit.runtime.fastlaunch import param_kinds

    class CudaTensor(FakeTensor):
        is_cuda = True

        def dim(self):
            return len(self.shape)

    kernel = SimpleNamespace(_const_flags=(False, False, False, False, True))
    x = CudaTensor(4096, (3, 5), (5, 1))
    kinds = param_kinds(kernel, (x, None, "bshd", (1, 2), 64), CudaTensor)
    assert kinds == [("tensor", 2), ("const", 0), ("const", 0), ("const", 0), ("const", 0)]
    assert param_kinds(kernel, (x, object(), "bshd", (1, 2), 64), CudaTensor) is None

    fast = FastLauncher(kinds, CudaTensor, {})
    launcher = FakeLauncher()
    fast.remember((x, None, "bshd", (1, 2), 64), launcher, (4, 1, 1), 128, 0,
                  (lambda s: s, 7))
    assert fast.launch(x, None, "bshd", (1, 2), 64) is None
    assert launcher.calls[-1][-1] == (4096, 3, 5, 5, 1)
    assert fast.launch(x, CudaTensor(8192, (3,), (1,)), "bshd", (1, 2), 64) is fast.MISS
    assert fast.launch(x, None, "bhsd", (1, 2), 64) is fast.MISS
    assert len(launcher.calls) == 1


def test_a_float_for_an_integer_constexpr_misses():
    """Issue 23: 1024.0 == 1024 would hit the entry of block=1024; the full path gives
    the same TypeError as in the simulator."""
    fast = FastLauncher([("tensor", 1), ("const", 1)], FakeTensor, {})
    launcher = FakeLauncher()
    x = FakeTensor(4096, (5,), (1,))
    fast.remember((x, 1024), launcher, (1, 1, 1), 128, 0, (lambda s: s, 7))
    assert fast.launch(x, 1024) is None
    assert fast.launch(x, 1024.0) is fast.MISS


def test_parameters_take_the_fast_path_as_tensors():
    """A model's weights are ``nn.Parameter``s: read as tensors, not sent to the full path
    (the MLP example's two kernels cost ~110 µs a call there, H200, 2026-12-02)."""
    import torch

    class CudaTensor(torch.Tensor):       # stands for a CUDA tensor on this CPU machine
        pass
    weight = torch.nn.Parameter(torch.zeros(4), requires_grad=False)
    kernel = SimpleNamespace(_const_flags=(False,), source=SimpleNamespace(params=["W"]))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(torch.nn.Parameter, "is_cuda", property(lambda self: True))
        assert param_kinds(kernel, (weight,)) == [("tensor", 1)]
    fast = FastLauncher([("tensor", 1)], (CudaTensor, torch.nn.Parameter), {})
    assert fast.launch(object()) is fast.MISS



def test_a_compile_time_list_takes_the_full_path():
    """TileLang's programs pass lists as compile-time values (a grouped GEMM's batch
    sizes): a list cannot key the table, so such a call is neither remembered nor looked
    up (it runs the full path each time), and the calls before it keep theirs."""
    fast = FastLauncher([("tensor", 1), ("const", 0)], FakeTensor, {})
    launcher = FakeLauncher()
    x = FakeTensor(64, (5,), (1,))
    fast.remember((x, [1, 2]), launcher, (1, 1, 1), 32, 0, (lambda s: None, 0))
    assert fast.table == {}
    assert fast.launch(x, [1, 2]) is fast.MISS
    fast.remember((x, (1, 2)), launcher, (1, 1, 1), 32, 0, (lambda s: None, 0))
    assert fast.launch(x, (1, 2)) is None and len(launcher.calls) == 1
    assert fast.launch(x, [1, 2]) is fast.MISS


def test_the_entry_binds_as_the_kernel_and_falls_back_on_a_miss():
    """Once a kernel has a hot path, its call *is* the generated entry: the kernel's own
    parameter names and defaults (here ones the generated code also uses: ``table``,
    ``e``, ``a1``), keywords bound by Python, and anything it does not hold or cannot
    bind handed to the kernel's full path with what the call gave."""
    from tilejit.runtime.fastlaunch import MISSING
    missed = []
    kernel = SimpleNamespace(
        __name__="k", source=SimpleNamespace(params=["a1", "table", "e", "block"],
                                             defaults={"block": 64}),
        _call_missed=lambda values, extra, kw: missed.append((values, extra, kw)) or "full")
    fast = FastLauncher([("tensor", 2), ("scalar", 0), ("tensor", 1), ("const", 0)],
                        FakeTensor, {1: float})
    entry = fast.entry(kernel)
    launcher = FakeLauncher()
    x = FakeTensor(4096, (3, 5), (5, 1))
    y = FakeTensor(8192, (5,), (1,))
    fast.remember((x, 2.5, y, 64), launcher, (4, 1, 1), 128, 0, (lambda s: s, 7))
    assert entry(x, 2.5, y) is None                       # the default filled in
    assert entry(e=y, a1=x, table=2.5) is None            # keywords
    assert [c[4] for c in launcher.calls] == [(4096, 3, 5, 5, 1, 2.5, 8192, 5, 1)] * 2
    assert missed == []
    assert entry(x, 2.5, y, 128) == "full"                # not in the table
    assert missed[-1] == ((x, 2.5, y, 128), (), None)
    assert entry(x, 2.5) == "full"                        # e left out
    assert missed[-1] == ((x, 2.5, MISSING, 64), (), None)
    assert entry(x, 2.5, y, 64, 1) == "full"              # one too many
    assert missed[-1] == ((x, 2.5, y, 64), (1,), {})
    assert entry(x, 2.5, y, blk=1) == "full"              # an unknown keyword
    assert missed[-1] == ((x, 2.5, y, 64), (), {"blk": 1})
    assert len(launcher.calls) == 2


def test_a_kernel_with_a_hot_path_keeps_its_argument_errors():
    """The full path behind the entry raises the kernel's own errors for calls the entry
    could not bind."""
    import tilejit
    import tilejit.language as T
    from tilejit.runtime.fastlaunch import MISSING

    @tilejit.kernel
    def copy(A, B, block: T.constexpr = 64):
        with T.Kernel(T.ceildiv(A.shape[0], block), threads=block) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i]
    with pytest.raises(TypeError, match="missing argument 'B'"):
        copy._call_missed((1, MISSING, 64), (), None)
    with pytest.raises(TypeError, match="unexpected argument 'blk'"):
        copy._call_missed((1, 2, 64), (), {"blk": 3})
    with pytest.raises(TypeError, match="takes 3 argument"):
        copy._call_missed((1, 2, 64), (5,), {})


# --------------------------------------------------------------------------------------
# the monomorphic path: torch's C++ check of the tensors in place of the key


def _torch_launcher(kinds, scalar_types=None):
    import torch

    from tilejit.runtime.fastlaunch import tensor_guard_factory
    factory = tensor_guard_factory(torch)
    assert factory is not None, "this torch's TensorGuards failed the self-test"
    return FastLauncher(kinds, torch.Tensor, scalar_types or {}, factory)


def test_the_entry_used_first_is_checked_in_cpp_and_packs_its_shapes():
    import torch
    fast = _torch_launcher([("tensor", 2), ("scalar", 0), ("tensor", 1), ("const", 0)],
                           {1: float})
    launcher = FakeLauncher()
    x, y = torch.zeros(3, 5), torch.zeros(7)
    fast.remember((x, 2.5, y, 64), launcher, (4, 1, 1), 128, 0, (lambda s: s, 7))
    entry = fast._mono[0][1]
    assert entry is next(iter(fast.table.values()))
    x2, y2 = torch.ones(3, 5), torch.ones(7)           # other tensors, alike
    assert fast.launch(x2, 2.5, y2, 64) is None
    assert launcher.calls[-1] == ((4, 1, 1), (128, 1, 1), 0, 7,
                                  (x2.data_ptr(), 3, 5, 5, 1, 2.5, y2.data_ptr(), 7, 1))


def test_the_monomorphic_path_misses_whatever_the_key_would():
    """Each change the table's key sees makes the C++ check (or the conditions beside
    it) fail; the call then goes to the table, where it misses."""
    import torch
    fast = _torch_launcher([("tensor", 2), ("scalar", 0), ("tensor", 1), ("const", 0)],
                           {1: float})
    launcher = FakeLauncher()
    x, y = torch.zeros(3, 5), torch.zeros(7)
    fast.remember((x, 2.5, y, 64), launcher, (4, 1, 1), 128, 0, (lambda s: s, 7))
    misses = [
        (torch.zeros(3 * 5 + 1)[1:].view(3, 5), 2.5, y, 64),    # 4-byte aligned
        (torch.zeros(4, 5), 2.5, y, 64),                         # shape
        (torch.zeros(5, 3).t(), 2.5, y, 64),                     # strides
        (torch.zeros(3, 5, dtype=torch.float64), 2.5, y, 64),    # dtype
        (x, 3.5, y, 64),                                         # scalar value
        (x, 2, y, 64),                                           # scalar type
        (x, 2.5, y, 128),                                        # compile-time value
        (x, 2.5, torch.zeros(8)[::2].clone()[:3], 64),          # the other tensor
    ]
    for args in misses:
        assert fast.launch(*args) is fast.MISS, args
    assert len(launcher.calls) == 0
    # what the check rejects and the key does not hold (autograd) goes to the table
    z = torch.zeros(3, 5, requires_grad=True)
    assert fast.launch(z, 2.5, y, 64) is None and launcher.calls[-1][-1][0] == z.data_ptr()


def test_two_signatures_in_turn_stay_correct_and_the_repeated_one_becomes_monomorphic():
    import torch
    fast = _torch_launcher([("tensor", 1)])
    launcher = FakeLauncher()
    a, b = torch.zeros(8), torch.zeros(16)
    fast.remember((a,), launcher, (1, 1, 1), 32, 0, (lambda s: s, 0))
    fast.remember((b,), launcher, (2, 1, 1), 32, 0, (lambda s: s, 0))
    assert fast._mono[0][3:] == (8, 1)                  # the first remembered
    for t, blocks in [(b, 2), (a, 1), (b, 2), (a, 1)]:  # in turn: the table serves
        assert fast.launch(t) is None
        assert launcher.calls[-1][0] == (blocks, 1, 1)
        assert launcher.calls[-1][-1] == (t.data_ptr(), t.shape[0], 1)
    assert fast._mono[0][3:] == (8, 1)
    fast.launch(b)
    fast.launch(b)                                      # twice in a row: b's entry
    assert fast._mono[0][3:] == (16, 1)
    assert fast.launch(a) is None and launcher.calls[-1][0] == (1, 1, 1)


def test_without_a_guard_factory_only_the_table_serves():
    fast = make()
    assert "m = _tj_mono" not in fast._namespace["launch"].__code__.co_names
    assert fast._mono[0][0].__name__ == "_never"


@pytest.mark.gpu
def test_gpu_monomorphic_launches_match_torch_through_changes_of_signature():
    """On the GPU: calls alike take the monomorphic path (installed at the first launch);
    a call of another shape, dtype, alignment or stride goes to the table or the full
    path, and every result is right."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    import tilejit
    import tilejit.language as T

    @tilejit.kernel
    def scaled_add(A, B, C, alpha: float, block: T.constexpr = 256):
        n, = A.shape
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    C[bx * block + i] = A[bx * block + i] * alpha + B[bx * block + i]

    def check(a, b, alpha):
        c = torch.empty_like(a)
        scaled_add(a, b, c, alpha)
        torch.testing.assert_close(c, a * alpha + b)

    dev = "cuda"
    a, b = torch.randn(1000, device=dev), torch.randn(1000, device=dev)
    check(a, b, 2.0)
    assert scaled_add._fast is not None and scaled_add._fast._mono[0][0].__name__ != "_never"
    for _ in range(3):
        check(torch.randn(1000, device=dev), torch.randn(1000, device=dev), 2.0)
    check(a, b, 3.0)                                           # scalar value
    check(torch.randn(777, device=dev), torch.randn(777, device=dev), 2.0)   # shape
    check(a.half(), b.half(), 2.0)                             # dtype
    big = torch.randn(1001, device=dev)
    check(big[1:], b, 2.0)                                     # 4-byte aligned pointer
    check(torch.randn(2000, device=dev)[::2], b, 2.0)          # strides
    check(torch.randn(1000, device=dev, requires_grad=True).detach(), b, 2.0)
    for _ in range(3):
        check(torch.randn(777, device=dev), torch.randn(777, device=dev), 2.0)
    assert scaled_add._fast._mono[0][3:5] == (777, 1)          # the repeated one
    check(a, b, 2.0)


def test_the_monomorphic_launch_is_configured_once_per_stream():
    """On the stream it was installed on, the monomorphic path calls cuLaunchKernelEx
    with a configuration made once; on any other stream, cuLaunchKernel as before."""
    import torch

    class ConfiguredLauncher(FakeLauncher):
        def configured_launch(self, grid, block, shared, stream):
            config = ("config", grid, block, shared, stream)

            def launch_ex(cfg, func, params, extra):
                self.calls.append(("ex", cfg, func, params, self._packed))
                return (0,)
            return launch_ex, config

    fast = _torch_launcher([("tensor", 1)])
    launcher = ConfiguredLauncher()
    current = [7]
    a = torch.zeros(8)
    fast.remember((a,), launcher, (3, 1, 1), 64, 128, (lambda s: current[0], None))
    fast.launch(a)
    assert launcher.calls[-1] == ("ex", ("config", (3, 1, 1), (64, 1, 1), 128, 7),
                                  "function", 1234, (a.data_ptr(), 8, 1))
    current[0] = 9
    fast.launch(a)
    assert launcher.calls[-1] == ((3, 1, 1), (64, 1, 1), 128, 9, (a.data_ptr(), 8, 1))


def test_a_typed_scalar_takes_the_fast_path_and_its_type_is_checked():
    """TileLang's `s: T.float32` arrives as a numpy float32 (tilelang/classic.py): a
    scalar of the fast path, packed as given; a Python float there is another type (the
    kernel's key says float32, a Python float is a weak one) and misses."""
    import struct
    from types import SimpleNamespace

    import numpy as np

    class CudaTensor(FakeTensor):
        is_cuda = True

        def dim(self):
            return len(self.shape)

    kernel = SimpleNamespace(_const_flags=(False, False))
    x = CudaTensor(4096, (5,), (1,))
    kinds = param_kinds(kernel, (x, np.float32(0.5)), CudaTensor)
    assert kinds == [("tensor", 1), ("scalar", 0)]
    fast = FastLauncher(kinds, CudaTensor, {1: np.float32})
    launcher = FakeLauncher()
    fast.remember((x, np.float32(0.5)), launcher, (1, 1, 1), 32, 0, (lambda s: s, 0))
    assert fast.launch(x, np.float32(0.5)) is None
    assert launcher.calls[-1][4] == (4096, 5, 1, np.float32(0.5))
    assert fast.launch(x, 0.5) is fast.MISS
    assert struct.pack("f", np.float32(0.5)) == struct.pack("f", 0.5)


def test_equal_scalars_of_two_types_are_two_entries():
    """Found by a review: np.float32(2.0) == 2.0 and hashes alike, so a float32 call's
    entry replaced a Python float's, whose next call launched the float32 kernel."""
    from types import SimpleNamespace

    import numpy as np

    class CudaTensor(FakeTensor):
        is_cuda = True

        def dim(self):
            return len(self.shape)

    kernel = SimpleNamespace(_const_flags=(False, False))
    x = CudaTensor(4096, (5,), (1,))
    fast = FastLauncher(param_kinds(kernel, (x, 2.0), CudaTensor), CudaTensor, {1: float})
    weak, typed = FakeLauncher(), FakeLauncher()
    fast.remember((x, 2.0), weak, (1, 1, 1), 32, 0, (lambda s: s, 0))
    fast.remember((x, np.float32(2.0)), typed, (1, 1, 1), 32, 0, (lambda s: s, 0))
    assert fast.launch(x, 2.0) is None
    assert len(weak.calls) == 1 and not typed.calls
