"""LLVM's optimization and PTX emission run in a worker thread while the compiling
thread collects the compile's garbage (``compiler/pipeline._nvptx_backend``): the PTX
is the same as when they run in the compiling thread, the cycles are collected during
the compile, an error from LLVM reaches the caller as itself, and a caller that turned
the collector off (or holds Numba's compiler lock) gets it all in its own thread."""
import gc
import re
import threading

import pytest
from numba.core.compiler_lock import global_compiler_lock

from tilejit.codegen import nvptx
from tilejit.compiler import pipeline


def _vector_add():
    from ptx_examples import all_examples, example_arguments
    name, kernel, specs, constexprs, _ = next(e for e in all_examples()
                                              if e[0] == "vector_add.vector_add")
    spec = kernel._spec_without_launch(example_arguments(specs), constexprs, "cuda", "sm_90a")
    return kernel, spec


def _compile_recording_thread(monkeypatch):
    kernel, spec = _vector_add()
    seen = []
    optimize = nvptx.optimize

    def recording(module, target):
        seen.append(threading.current_thread().name)
        return optimize(module, target)
    monkeypatch.setattr(nvptx, "optimize", recording)
    return pipeline.compile_kernel(kernel.source, spec), seen


def test_backend_thread_gives_the_same_ptx_and_collects(monkeypatch):
    assert gc.isenabled()
    collected = []

    def on_gc(phase, info):
        if phase == "stop":
            collected.append((threading.current_thread().name, info["collected"]))
    gc.callbacks.append(on_gc)
    try:
        threaded, seen = _compile_recording_thread(monkeypatch)
    finally:
        gc.callbacks.remove(on_gc)
    assert seen == ["tilejit-llvm"]
    # the compile's cycles were collected by the compiling thread during the compile
    assert any(name == threading.current_thread().name and n > 0 for name, n in collected)
    gc.disable()
    try:
        inline, seen = _compile_recording_thread(monkeypatch)
    finally:
        gc.enable()
    assert seen == [threading.current_thread().name]
    assert threaded.ptx == inline.ptx
    # (Numba numbers each compile of a function: `...B2v1B...`, `...B3v12B...`)
    assert re.sub(r"B\d+v\d+B", "", threaded.llvm_ir) == re.sub(r"B\d+v\d+B", "", inline.llvm_ir)


def test_under_numbas_lock_the_backend_runs_in_the_caller(monkeypatch):
    with global_compiler_lock:
        _, seen = _compile_recording_thread(monkeypatch)
    assert seen == [threading.current_thread().name]


def test_an_llvm_error_in_the_worker_reaches_the_caller(monkeypatch):
    kernel, spec = _vector_add()

    def failing(module, target):
        raise RuntimeError("LLVM failed here")
    monkeypatch.setattr(nvptx, "optimize", failing)
    with pytest.raises(RuntimeError, match="LLVM failed here"):
        pipeline.compile_kernel(kernel.source, spec)
