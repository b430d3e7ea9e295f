"""The generated hot path: one lookup keyed on everything the launch depends on."""
from tilejit.fastlaunch import FastLauncher


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
    def __init__(self):
        self.calls = []

    def launch(self, grid, block, shared, stream, values):
        self.calls.append((grid, block, shared, stream, values))


def make():
    kinds = [("tensor", 2), ("scalar", 0), ("tensor", 1), ("const", 0)]
    return FastLauncher(kinds, FakeTensor, {1: float})


def test_hit_packs_pointer_shape_strides_and_scalars():
    fast = make()
    launcher = FakeLauncher()
    x = FakeTensor(4096, (3, 5), (5, 1))
    y = FakeTensor(8192, (5,), (1,))
    assert fast.launch(x, 2.5, y, 64) is fast.MISS           # nothing recorded yet
    fast.remember((x, 2.5, y, 64), launcher, (4, 1, 1), (128, 1, 1), 0, lambda: 7)
    assert fast.launch(FakeTensor(4096, (3, 5), (5, 1)), 2.5, y, 64) is None
    assert launcher.calls == [((4, 1, 1), (128, 1, 1), 0, 7,
                               (4096, 3, 5, 5, 1, 2.5, 8192, 5, 1))]


def test_every_dependency_is_part_of_the_key():
    fast = make()
    launcher = FakeLauncher()
    x = FakeTensor(4096, (3, 5), (5, 1))
    y = FakeTensor(8192, (5,), (1,))
    fast.remember((x, 2.5, y, 64), launcher, (4, 1, 1), (128, 1, 1), 0, lambda: 0)
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
