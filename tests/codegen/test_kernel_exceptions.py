"""A ``raise`` or ``assert`` in a helper or ``@T.macro`` the kernel calls: on the GPU the
thread prints where and what and traps (the launch fails), never ends silently; a check
whose condition is known at compile time folds away; the simulator raises the exception.
``return`` inside a ``T.Parallel`` is a CompileError (its iterations are spread over the
threads).

PYTEST_DONT_REWRITE: the asserts the kernels hold are plain Python's."""
import pytest
import torch

import tilejit
import tilejit as tilelang
import tilejit.language as T


@T.macro
def store(C, block):
    assert block % 16 == 0, "block must be a multiple of 16"
    C[0] = 1.0


def checked(block):
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), C: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            store(C, block)
    return main


def positive(x):
    if x < 0:
        raise ValueError("positive")
    return x


@T.prim_func
def runtime_check(A: T.Tensor((64,), "float32"), C: T.Tensor((64,), "float32")):
    with T.Kernel(1, threads=64) as bx:
        for i in T.Parallel(64):
            C[i] = positive(A[i])


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_a_failing_check_traps_with_its_message(arch, ptxas):
    ptx = tilelang.compile(checked(24), target=f"cuda -arch={arch}").get_kernel_source()
    assert "trap;" in ptx and "vprintf" in ptx
    text = bytes(int(b) for b in ptx.split("__tj_fmt")[1].split("{")[1].split("}")[0]
                 .split(",")).decode(errors="replace")
    assert "AssertionError: block must be a multiple of 16" in text
    ptxas(ptx, arch)
    ptx = tilelang.compile(runtime_check, target=f"cuda -arch={arch}").get_kernel_source()
    assert "trap;" in ptx
    ptxas(ptx, arch)


def test_a_passing_check_folds_away():
    ptx = tilelang.compile(checked(32), target="cuda -arch=sm_90a").get_kernel_source()
    assert "trap" not in ptx and "vprintf" not in ptx


def test_the_simulator_raises_the_exception():
    with pytest.raises(AssertionError, match="block must be a multiple of 16"):
        tilelang.compile(checked(24), target="sim")(torch.zeros(64), torch.zeros(64))
    c = torch.zeros(64)
    tilelang.compile(checked(32), target="sim")(torch.zeros(64), c)
    assert c[0] == 1
    with pytest.raises(ValueError, match="positive"):
        tilelang.compile(runtime_check, target="sim")(-torch.ones(64), c)


def test_return_inside_a_parallel_loop_is_an_error():
    @T.prim_func
    def early(A: T.Tensor((64,), "float32"), C: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(64):
                if i == 5:
                    return
                C[i] = A[i]
    with pytest.raises(tilejit.CompileError, match=r"return inside a T.Parallel loop") as e:
        tilelang.compile(early, target="sim")
    assert "return" in str(e.value).splitlines()[-1]


@pytest.mark.gpu
def test_a_failing_check_fails_the_launch_on_the_gpu(tmp_path):
    """In a process of its own: a trap leaves the CUDA context unusable."""
    import subprocess
    import sys
    script = tmp_path / "trap.py"
    script.write_text(
        "import torch, tilejit as tilelang, tilejit.language as T\n"
        "def positive(x):\n"
        "    if x < 0:\n"
        "        raise ValueError('positive')\n"
        "    return x\n"
        "@T.prim_func\n"
        "def main(A: T.Tensor((64,), 'float32'), C: T.Tensor((64,), 'float32')):\n"
        "    with T.Kernel(1, threads=64) as bx:\n"
        "        for i in T.Parallel(64):\n"
        "            C[i] = positive(A[i])\n"
        "k = tilelang.compile(main)\n"
        "c = torch.zeros(64, device='cuda')\n"
        "k(torch.ones(64, device='cuda'), c)\n"
        "torch.cuda.synchronize()\n"
        "assert c.eq(1).all()\n"
        "print('ok', flush=True)\n"
        "k(-torch.ones(64, device='cuda'), c)\n"
        "torch.cuda.synchronize()\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=300)
    assert out.stdout.startswith("ok"), out.stderr
    assert out.returncode != 0
    assert "ValueError: positive" in out.stdout + out.stderr


# -- a review's findings: recursion and tiles sized by mistake are named, fast ------------
@T.macro
def fill_first(C, n):
    if n > 0:
        C[n - 1] = 1.0
        fill_first(C, n - 1)


@T.macro
def ping(C, n):
    pong(C, n)


@T.macro
def pong(C, n):
    ping(C, n)


def test_a_helper_that_calls_itself_is_named():
    @T.prim_func
    def bounded(A: T.Tensor((64,), "float32"), C: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            fill_first(C, 4)

    @T.prim_func
    def mutual(A: T.Tensor((64,), "float32"), C: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            ping(C, 0)
    with pytest.raises(tilejit.CompileError, match=r"fill_first\(\) calls itself \(fill_first "
                       r"→ fill_first\): kernel code has no recursion"):
        tilelang.compile(bounded, target="cuda -arch=sm_90a")
    with pytest.raises(tilejit.CompileError, match=r"ping → pong → ping"):
        tilelang.compile(mutual, target="cuda -arch=sm_90a")


@pytest.mark.parametrize("shape", [(8192, 8192), (1 << 31,)])
@pytest.mark.parametrize("target", ["sim", "cuda -arch=sm_90a"])
def test_a_fragment_far_past_the_registers_is_refused_at_once(shape, target):
    import time

    @T.prim_func
    def huge(A: T.Tensor((64,), "float32"), C: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            F = T.alloc_fragment(shape, "float32")
            T.fill(F, 0)
            T.copy(A, C)
    start = time.perf_counter()
    with pytest.raises(tilejit.CompileError, match=r"need at least \d+ 32-bit registers per "
                       r"thread \(F fragment .*spread evenly over the 128 threads\)"):
        tilelang.compile(huge, out_idx=[1], target=target)
    assert time.perf_counter() - start < 5


def located(x, i):
    if x < 0:
        raise ValueError("negative at index", i)
    return x


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_a_raise_with_run_time_values_traps_too(arch, ptxas):
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), C: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                C[i] = located(A[i], i)
    ptx = tilelang.compile(main, target=f"cuda -arch={arch}").get_kernel_source()
    assert "trap;" in ptx and "vprintf" in ptx
    ptxas(ptx, arch)
