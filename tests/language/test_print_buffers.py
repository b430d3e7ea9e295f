"""TileLang's ``T.print(obj=None, msg="", warp_group_id=0, warp_id=0)``: a message alone,
one value with TileLang's default message, and a whole buffer (a shared tile, a fragment
through shared memory, a local array, a global tensor) element by element with its index
from one thread (``frontend/print_buffers.py``). In the simulator (stdout), as PTX with
``vprintf`` assembled by ptxas, and on the GPU (the device's printf, read from the
process's stdout)."""
import numpy as np
import pytest

import tilejit
import tilejit.language as T


def printing(M=2, N=3, dtype=T.float16, warp_id=0):
    @T.prim_func
    def program(Q: T.Tensor((M, N), dtype)):
        with T.Kernel(1, 1, 2, threads=128 * 2) as (bx, by, bz):
            shared_buf = T.alloc_shared([M, N], dtype)
            frag = T.alloc_fragment([M, N], dtype)
            loc = T.alloc_local([2], dtype)
            for i, j in T.Parallel(M, N):
                shared_buf[i, j] = i * 10 + j
            T.fill(frag, 2)
            loc[0] = 3
            loc[1] = 4
            T.print(shared_buf)
            T.print(frag, msg="the fragment")
            T.print(Q, warp_id=warp_id)
            tid = T.get_thread_binding()
            if tid == 0:
                T.print(loc)
                T.print(msg="hello world")
                T.print(bz + 5, msg="block plus five: ")
                T.print(bz + 7)
                T.print(bz + 9, msg="plus nine")      # a label: "plus nine: 9", not "plus nine9"

    return tilejit.compile(program)


EXPECTED_PER_BLOCK = (
    ["buffer<shared_buf, float16>[%d, %d] = %.1f" % (i, j, i * 10 + j)
     for i in range(2) for j in range(3)] +
    ["the fragment[%d, %d] = 2.0" % (i, j) for i in range(2) for j in range(3)] +
    ["buffer<Q, float16>[%d, %d] = %.1f" % (i, j, i * 3 + j) for i in range(2) for j in range(3)] +
    ["buffer<loc, float16>[0] = 3.0", "buffer<loc, float16>[1] = 4.0", "hello world"])


def _normalized(lines):
    """Each ``... = value`` with its value as %.1f (C's %g prints 3.0 as 3)."""
    out = []
    for line in lines:
        head, sep, value = line.rpartition(" = ")
        try:
            out.append(f"{head}{sep}{float(value):.1f}" if sep else line)
        except ValueError:
            out.append(line)
    return out


def _q():
    return np.arange(6, dtype=np.float16).reshape(2, 3)


def test_buffers_messages_and_values_print_in_the_simulator(capsys):
    printing()(_q())
    lines = _normalized(capsys.readouterr().out.splitlines())
    for block in range(2):
        for line in EXPECTED_PER_BLOCK:
            assert sum(line in got for got in lines) == 2, line     # once per block
        assert f"block plus five: {block + 5}" in lines
        assert f"expr<bz + 7> {block + 7}" in lines
        assert f"plus nine: {block + 9}" in lines
    # one thread prints a shared buffer: 6 lines a block, not 6 × 256
    assert sum("buffer<shared_buf" in line for line in lines) == 12


def test_elements_nothing_wrote_print_marked_in_the_simulator(capsys):
    """TileLang's own debug-print tests print a fresh shared tile: the GPU prints what the
    memory held; the simulator prints such an element marked `(unwritten)` (a print
    changes no value), a fragment's through its shared copy too."""
    @T.prim_func
    def program(Q: T.Tensor((2, 2), "float16")):
        with T.Kernel(2, threads=64) as bx:
            s = T.alloc_shared([2, 2], "float16")
            f = T.alloc_fragment([2, 2], "float32")
            for j in T.Parallel(2):
                s[0, j] = j + 1.0
            for i, j in T.Parallel(2, 2):
                if i == 1:
                    f[i, j] = i + j
            if bx == 1:
                T.print(s, msg="s")
                T.print(f, msg="f")

    tilejit.compile(program)(_q()[:, :2].copy())
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["s[0, 0] = 1.0", "s[0, 1] = 2.0", "s[1, 0] = (unwritten)",
                     "s[1, 1] = (unwritten)", "f[0, 0] = (unwritten)",
                     "f[0, 1] = (unwritten)", "f[1, 0] = 1.0", "f[1, 1] = 2.0"]


def test_an_element_nothing_wrote_prints_marked_in_a_parallel_loop(capsys):
    """TileLang's debug-print test of a fresh fragment's elements, each thread its own
    (``T.print(register_buf[i, j])`` in a T.Parallel): marked, not an error; the
    elements written print their values."""
    @T.prim_func
    def program(Q: T.Tensor((2, 2), "float16")):
        with T.Kernel(1, threads=64):
            fresh = T.alloc_fragment([16, 16], "float16")
            done = T.alloc_fragment([2], "float32")
            for i in T.Parallel(2):
                done[i] = i + 0.5
            for i, j in T.Parallel(16, 16):
                T.print(fresh[i, j], msg="fresh")
            for i in T.Parallel(2):
                T.print(done[i], msg="done")

    tilejit.compile(program)(_q()[:, :2].copy())
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["fresh: (unwritten)", "done: [0.5 1.5]"]


def test_a_value_read_from_an_unwritten_tile_is_still_an_error():
    from tilejit.sim.runtime import UninitializedReadError

    @T.prim_func
    def program(Q: T.Tensor((2, 2), "float16")):
        with T.Kernel(1, threads=64):
            s = T.alloc_shared([2, 2], "float16")
            T.print(s[1, 1] + 1)

    with pytest.raises(UninitializedReadError, match=r"s\[1, 1\] is read before"):
        tilejit.compile(program)(_q()[:, :2].copy())


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_buffer_prints_assemble(arch, ptxas):
    ptx = printing().get_kernel_source(arch=arch)
    assert ptx.count("call.uni") >= 7 and "vprintf" in ptx
    ptxas(ptx, arch)


def test_print_arguments_are_checked_at_their_line():
    @T.prim_func
    def bad(Q: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=32):
            T.print(Q, width=3)  # BAD-PRINT

    with pytest.raises(tilejit.CompileError, match=r"unexpected keyword width=") as e:
        tilejit.compile(bad)(np.zeros(4, np.float32))
    assert "BAD-PRINT" in str(e.value)

    @T.prim_func
    def nothing(Q: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=32):
            T.print()  # NOTHING

    with pytest.raises(tilejit.CompileError, match="a value to print or a message"):
        tilejit.compile(nothing)(np.zeros(4, np.float32))


@pytest.mark.gpu
def test_buffer_prints_on_gpu_match_the_simulator(capfd):
    import torch
    printing(warp_id=1)(torch.arange(6, dtype=torch.float16, device="cuda").reshape(2, 3))
    torch.cuda.synchronize()
    lines = _normalized(capfd.readouterr().out.splitlines())
    for line in EXPECTED_PER_BLOCK:
        assert sum(got.endswith(line) for got in lines) == 2, (line, lines[:40])
    # the shared tile from thread 0, the global tensor from thread 32 (warp_id=1)
    assert all("thread 0]" in got for got in lines if "buffer<shared_buf" in got)
    assert all("thread 32]" in got for got in lines if "buffer<Q" in got)
    for block in range(2):
        assert f"[block (0, 0, {block}), thread 0] block plus five: {block + 5}" in lines
        assert f"[block (0, 0, {block}), thread 0] plus nine: {block + 9}" in lines
