"""T.view of a shared uint8 tile as float8_e4m3fn or bfloat16 made after the tile was
written (TileLang programs such as sglang's fp8 paged MQA logits copy bytes into a uint8
tile, then view them): the view reads the bytes written before it was made, decoded with
its dtype as the GPU reads them (``sim/views.overlay``), against torch's own
reinterpretation; the view made before the copy reads them too; an element whose bytes
nothing wrote is still an ``UninitializedReadError``; with ``-m gpu`` against the GPU."""
import pytest

import tilejit
import tilejit.language as T
from tilejit.sim.runtime import UninitializedReadError

ROWS, COLS = 16, 64                     # the view's shape; the tile holds its bytes
DTYPES = (("float8_e4m3fn", 1), ("float8_e5m2", 1), ("bfloat16", 2))


@tilejit.kernel
def copy_then_view(X, O, dt: T.constexpr, width: T.constexpr):
    """The bytes copied into the uint8 tile, then viewed as ``dt`` and read."""
    with T.Kernel(1, threads=128) as bx:
        s8 = T.alloc_shared((ROWS, COLS * width), T.uint8)
        T.copy(X[0:ROWS, 0:COLS * width], s8)
        v = T.view(s8, (ROWS, COLS), dtype=dt)
        f = T.alloc_fragment((ROWS, COLS), T.float32)
        T.copy(v, f)
        for i, j in T.Parallel(ROWS, COLS):
            O[i, j] = f[i, j]


@tilejit.kernel
def view_then_copy(X, O, dt: T.constexpr, width: T.constexpr):
    """The view made first, the bytes copied into the uint8 tile after it."""
    with T.Kernel(1, threads=128) as bx:
        s8 = T.alloc_shared((ROWS, COLS * width), T.uint8)
        v = T.view(s8, (ROWS, COLS), dtype=dt)
        T.copy(X[0:ROWS, 0:COLS * width], s8)
        f = T.alloc_fragment((ROWS, COLS), T.float32)
        T.copy(v, f)
        T.copy(f, O[0:ROWS, 0:COLS])


@tilejit.kernel
def partly_written(X, O, dt: T.constexpr, width: T.constexpr, nbytes: T.constexpr,
                   rows: T.constexpr):
    """Only the first ``nbytes`` bytes of each row written before the view; ``rows``
    rows of the view read: a byte of row 0 nothing wrote is read when
    ``nbytes < COLS * width``."""
    with T.Kernel(1, threads=128) as bx:
        s8 = T.alloc_shared((ROWS, COLS * width), T.uint8)
        for i, j in T.Parallel(ROWS, COLS * width):
            if j < nbytes:
                s8[i, j] = X[i, j]
        v = T.view(s8, (ROWS, COLS), dtype=dt)
        for i, j in T.Parallel(rows, COLS):
            O[i, j] = v[i, j]  # READ-VIEW


def _bytes(width, device="cpu"):
    """Every byte value (NaN and infinity codes among them), in a fixed shuffle."""
    import torch
    g = torch.Generator().manual_seed(width)
    raw = torch.randint(0, 256, (ROWS, COLS * width), dtype=torch.uint8, generator=g)
    raw.view(-1)[:256] = torch.arange(256, dtype=torch.uint8)
    return raw.to(device)


def _expected(raw, dt):
    import torch
    return raw.cpu().view(getattr(torch, dt)).float()


def _same(got, want):
    import torch
    torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("dt,width", DTYPES)
@pytest.mark.parametrize("kernel", [copy_then_view, view_then_copy])
def test_a_view_reads_the_bytes_of_the_uint8_tile(kernel, dt, width):
    import torch
    raw = _bytes(width)
    out = torch.zeros(ROWS, COLS)
    kernel(raw, out, dt, width)
    _same(out, _expected(raw, dt))


@pytest.mark.parametrize("dt,width", DTYPES)
def test_an_element_whose_bytes_nothing_wrote_is_still_uninitialized(dt, width):
    import torch
    raw = _bytes(width)
    out = torch.zeros(ROWS, COLS)
    # a bfloat16 element of row 0 has one byte written, the other not
    nbytes = COLS * width - 1 if width == 2 else COLS // 2
    first = (COLS * width - 1) // width if width == 2 else COLS // 2
    with pytest.raises(UninitializedReadError) as info:
        partly_written(raw, out, dt, width, nbytes, ROWS)
    msg = str(info.value)
    assert f"[0, {first}]" in msg and "read before it is written" in msg, msg
    assert __file__ in msg and "READ-VIEW" in msg, msg
    # nothing written at all: the first element
    with pytest.raises(UninitializedReadError, match=r"\[0, 0\] is read before"):
        partly_written(raw, out, dt, width, 0, 1)
    # every byte written: the view reads them all
    partly_written(raw, out, dt, width, COLS * width, ROWS)
    _same(out, _expected(raw, dt))


@tilejit.kernel
def write_through_the_view_after(X, O, dt: T.constexpr, width: T.constexpr):
    """A view made after the copy, then written: the uint8 tile holds the bits written
    through the view, and the view its own writes."""
    with T.Kernel(1, threads=128) as bx:
        s8 = T.alloc_shared((ROWS, COLS * width), T.uint8)
        T.copy(X[0:ROWS, 0:COLS * width], s8)
        v = T.view(s8, (ROWS, COLS), dtype=dt)
        for i, j in T.Parallel(ROWS, COLS):
            if j == 0:
                v[i, j] = 1.0
        T.copy(s8, O[0:ROWS, 0:COLS * width])


@pytest.mark.parametrize("dt,width", DTYPES)
def test_a_write_through_a_view_made_after_the_copy_reaches_the_tile(dt, width):
    import torch
    raw = _bytes(width)
    out = torch.zeros(ROWS, COLS * width, dtype=torch.uint8)
    write_through_the_view_after(raw, out, dt, width)
    want = raw.clone()
    want.view(getattr(torch, dt))[:, 0] = 1.0
    assert torch.equal(out, want)


@tilejit.kernel
def rewrite_the_tile_after(X, O, dt: T.constexpr, width: T.constexpr):
    """The view made first, the tile copied whole, then its first byte of each row
    written again element by element: the view reads the bytes written last."""
    with T.Kernel(1, threads=128) as bx:
        s8 = T.alloc_shared((ROWS, COLS * width), T.uint8)
        v = T.view(s8, (ROWS, COLS), dtype=dt)
        T.copy(X[0:ROWS, 0:COLS * width], s8)
        for i, j in T.Parallel(ROWS, COLS * width):
            if j == width - 1:
                s8[i, j] = 0
        for i, j in T.Parallel(ROWS, COLS):
            O[i, j] = v[i, j]


@pytest.mark.parametrize("dt,width", DTYPES)
def test_a_write_to_the_whole_written_tile_reaches_the_view(dt, width):
    import torch
    raw = _bytes(width)
    out = torch.zeros(ROWS, COLS)
    rewrite_the_tile_after(raw, out, dt, width)
    want = raw.clone()
    want[:, width - 1] = 0
    _same(out, _expected(want, dt))


@pytest.mark.gpu
@pytest.mark.parametrize("dt,width", DTYPES)
def test_on_the_gpu_against_torch_and_the_simulator(dt, width):
    import torch
    raw = _bytes(width)
    for kernel in (copy_then_view, view_then_copy):
        gpu = torch.zeros(ROWS, COLS, device="cuda")
        kernel(raw.cuda(), gpu, dt, width)
        torch.cuda.synchronize()
        sim = torch.zeros(ROWS, COLS)
        kernel(raw, sim, dt, width)
        _same(gpu, _expected(raw, dt))
        _same(gpu, sim)
    gpu = torch.zeros(ROWS, COLS * width, dtype=torch.uint8, device="cuda")
    write_through_the_view_after(raw.cuda(), gpu, dt, width)
    torch.cuda.synchronize()
    sim = torch.zeros(ROWS, COLS * width, dtype=torch.uint8)
    write_through_the_view_after(raw, sim, dt, width)
    assert torch.equal(gpu.cpu(), sim)
    gpu = torch.zeros(ROWS, COLS, device="cuda")
    rewrite_the_tile_after(raw.cuda(), gpu, dt, width)
    torch.cuda.synchronize()
    sim = torch.zeros(ROWS, COLS)
    rewrite_the_tile_after(raw, sim, dt, width)
    _same(gpu, sim)
