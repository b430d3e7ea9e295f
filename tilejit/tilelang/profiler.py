"""TileLang's ``tilelang.profiler``: ``do_bench(fn, warmup, rep, ..., quantiles=,
backend=, return_mode=)`` (milliseconds, TileLang's signature), and the ``Profiler`` that
``kernel.get_profiler(tensor_supply_type=...)`` returns for a compiled ``@T.prim_func``:
it makes the kernel's inputs from their annotations, runs the kernel (on the GPU for a
CUDA machine, in the simulator otherwise), compares it with a reference program
(``assert_allclose``) and times it (``do_bench``, ``run_once``). The inputs are filled
as TileLang fills them (``TensorSupplyType``, ``utils.py``). An input with a symbolic
extent (``T.dynamic("m")``, or ``m // 2``) gets its size from
``dynamic_symbolic_constraints={"m": 1024}`` (by the symbol's name) or is passed in
``input_tensors``."""
from __future__ import annotations

import statistics

import numpy as np

from tilejit.language.tilelang_names import SymbolicInt
from tilejit.tilelang.utils import TensorSupplyType, supply
from tilejit.tuning.bench import tilelang_times
from tilejit.language.compat import NotSupportedError, missing_attribute, module_getattr

__all__ = ["do_bench", "Profiler", "TensorSupplyType"]

_BACKENDS = ("event", "cupti", "cudagraph")
_RETURN_MODES = {"min": min, "max": max, "mean": statistics.fmean,
                 "median": statistics.median}


def do_bench(fn, warmup: float = 25, rep: float = 100, _n_warmup: int = 0,
             _n_repeat: int = 0, quantiles=None, fast_flush: bool = True,
             backend: str = "event", return_mode: str = "mean", device=None,
             cache_size: int = 256, early_stop_baseline=None):
    """TileLang's ``tilelang.profiler.do_bench``: ``warmup`` and ``rep`` are
    milliseconds, turned into numbers of calls from an estimate (``_n_warmup``/
    ``_n_repeat`` instead when nonzero), an L2-sized buffer rewritten before each call
    (``tuning/bench.tilelang_times``); the calls' milliseconds summarised by
    ``return_mode`` ("mean", TileLang's default; "median", "min", "max") or their
    ``quantiles`` (a list; one quantile, a number). ``backend="cupti"``: the kernels'
    own time per call as the CUDA profiler records it (no launch overhead; one value,
    which ``return_mode`` and ``quantiles`` leave as it is); "event" and "cudagraph"
    time each call with CUDA events. ``early_stop_baseline``: an estimate above it is
    returned at once. ``fast_flush``, ``device`` and ``cache_size`` are accepted and not
    used. In the simulator, ``time.perf_counter``."""
    if backend not in _BACKENDS:
        raise ValueError(f"do_bench: backend must be one of {', '.join(map(repr, _BACKENDS))}, "
                         f"got {backend!r}")
    if return_mode not in _RETURN_MODES:
        raise ValueError(f"do_bench: return_mode must be one of "
                         f"{', '.join(map(repr, _RETURN_MODES))}, got {return_mode!r}")
    # what the timing loop and the quantiles would fail on inside (`'int' object is not
    # callable`, `'float' object is not iterable`): named before anything runs
    if not callable(fn):
        raise TypeError(f"do_bench: fn must be callable (the function to time), got "
                        f"{type(fn).__name__} {fn!r:.80}")
    if quantiles is not None and not isinstance(quantiles, (str, bytes)) and hasattr(
            quantiles, "__iter__"):
        quantiles = list(quantiles)
    if quantiles is not None and (not isinstance(quantiles, list) or not all(
            _is_number(q) for q in quantiles)):
        raise TypeError(f"do_bench: quantiles must be a list of numbers in [0, 1] (such as "
                        f"[0.5, 0.2, 0.8]), got {type(quantiles).__name__} {quantiles!r:.80}")
    for q in quantiles or ():
        if not 0 <= float(q) <= 1:
            raise ValueError(f"do_bench: quantiles must lie in [0, 1], got {q!r}")
    if early_stop_baseline is not None and not _is_number(early_stop_baseline):
        raise TypeError(f"do_bench: early_stop_baseline must be a time in milliseconds (a "
                        f"number) or None, got {type(early_stop_baseline).__name__} "
                        f"{early_stop_baseline!r:.80}")
    times = tilelang_times(fn, warmup, rep, _n_warmup, _n_repeat,
                           kernel_only=backend == "cupti", early_stop_ms=early_stop_baseline)
    if quantiles is not None:
        values = [_quantile(times, q) for q in quantiles]
        return values[0] if len(values) == 1 else values
    return float(_RETURN_MODES[return_mode](times))


def _is_number(value) -> bool:
    """A real number (a Python, numpy or one-element torch one): not a bool, a string
    or bytes (which float() takes too)."""
    if isinstance(value, (bool, np.bool_, str, bytes, bytearray)) or str(
            getattr(value, "dtype", "")) in ("bool", "torch.bool"):
        return False
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return not isinstance(value, complex)


def _inputs(input_tensors, who: str):
    """``input_tensors`` as given (a list or tuple of the kernel's inputs), or None; a
    TypeError naming ``who`` for anything else (an int failed inside, at the call)."""
    if input_tensors is None or isinstance(input_tensors, (list, tuple)):
        return input_tensors
    raise TypeError(f"{who}: input_tensors must be a list of the kernel's inputs (its "
                    f"tensors and scalars, in order), got {type(input_tensors).__name__} "
                    f"{input_tensors!r:.80}")


def _quantile(times, q) -> float:
    """The ``q`` quantile of sorted ``times``, interpolated linearly (torch.quantile's)."""
    if not 0 <= q <= 1:
        raise ValueError(f"do_bench: quantiles must lie in [0, 1], got {q!r}")
    pos = q * (len(times) - 1)
    low = int(pos)
    high = min(low + 1, len(times) - 1)
    return float(times[low] + (times[high] - times[low]) * (pos - low))


def _mismatch_details(out, ref, bad) -> str:
    """The largest finite difference, how many elements of the kernel's output are NaN
    or infinite where the reference's are not, and the first mismatching element."""
    import torch    # called with torch tensors only
    finite = torch.isfinite(out) & torch.isfinite(ref)
    diff = (out - ref).abs()[finite & bad]
    parts = [f"largest finite difference {diff.max().item():.4g}" if diff.numel()
             else "no finite element differs"]
    for what, mask in (("NaN", torch.isnan), ("infinite", torch.isinf)):
        n = int((mask(out) & ~mask(ref)).sum())
        if n:
            parts.append(f"{n} element(s) {what} where the reference's are not")
    at = tuple(int(i) for i in torch.nonzero(bad)[0])
    parts.append(f"first at {list(at)}: {out[at].item():.6g}, reference {ref[at].item():.6g}")
    return "; ".join(parts)


def prim_func_inputs(kernel) -> list:
    """(name, shape, dtype, scalar?) of each parameter of a compiled ``@T.prim_func`` that
    is not an output (``out_idx``); a shape's extents are ints or symbolic
    (``SymbolicInt``)."""
    prim = kernel.prim
    out = []
    for i, name in enumerate(prim.params):
        if i in kernel.out_idx:
            continue
        ann = prim.annotations[name]
        out.append((name, tuple(d if isinstance(d, SymbolicInt) else int(d)
                                for d in ann.shape), ann.dtype, getattr(ann, "scalar", False)))
    return out


class Profiler:
    """``kernel.get_profiler()`` of a compiled program: its inputs are made from
    ``inputs``, (name, shape, dtype, scalar?) of each parameter the kernel is called with
    (a ``@T.prim_func``'s from its annotations, ``prim_func_inputs``). ``func`` is the
    kernel, and calling the profiler calls it, as in TileLang."""

    def __getattr__(self, name):
        raise missing_attribute(self, name, "Profiler", "a part of TileLang's profiler that "
                                "tilejit's does not have (its adapters are TileLang's "
                                "execution backends)")

    def __init__(self, kernel, tensor_supply_type=TensorSupplyType.Auto, inputs=None):
        if not isinstance(tensor_supply_type, TensorSupplyType):
            raise TypeError(f"get_profiler: tensor_supply_type must be a TensorSupplyType, got "
                            f"{tensor_supply_type!r}")
        self.kernel = kernel
        self.supply_type = tensor_supply_type
        described = prim_func_inputs(kernel) if inputs is None else inputs
        self.inputs = [name for name, _, _, _ in described]
        self.shapes = {name: shape for name, shape, _, _ in described}
        self._kinds = {name: (dtype, scalar) for name, _, dtype, scalar in described}

    def _device(self) -> str:
        import torch    # the profiler makes torch tensors; torch is only needed here
        return "cuda" if torch.cuda.is_available() else "cpu"

    @property
    def func(self):
        """The compiled kernel the profiler runs (TileLang's ``profiler.func``)."""
        return self.kernel

    def __call__(self, *args, **kwargs):
        return self.kernel(*args, **kwargs)

    def _shape(self, name, constraints):
        """``name``'s shape, each symbolic extent evaluated with ``constraints``."""
        shape = self.shapes[name]
        symbols = list(dict.fromkeys(s.name for d in shape if isinstance(d, SymbolicInt)
                                     for s in d.symbols()))
        if not symbols:
            return shape
        if constraints is None:
            raise ValueError(f"get_profiler: input {name!r} has a symbolic shape "
                             f"({', '.join(map(str, shape))}); give the size of "
                             f"{', '.join(symbols)} with dynamic_symbolic_constraints="
                             f"{{{', '.join(repr(s) + ': ...' for s in symbols)}}} or pass "
                             "input_tensors=[...]")
        missing = [s for s in symbols if s not in constraints]
        if missing:
            raise ValueError(f"get_profiler: dynamic symbolic variable(s) "
                             f"{', '.join(map(repr, missing))} of input {name!r} not in "
                             f"dynamic_symbolic_constraints (given: "
                             f"{', '.join(map(repr, constraints)) or 'none'})")
        bad = {k: v for k, v in constraints.items()
               if isinstance(v, bool) or not isinstance(v, int) or v < 0}
        if bad:
            raise ValueError(f"get_profiler: dynamic_symbolic_constraints must give "
                             f"non-negative ints, got {bad}")
        out = tuple(d.evaluate(constraints) if isinstance(d, SymbolicInt) else d
                    for d in shape)
        if any(d < 0 for d in out):
            raise ValueError(f"get_profiler: input {name!r}: dynamic_symbolic_constraints "
                             f"{constraints} give the shape {out}")
        return out

    def input_tensors(self, dynamic_symbolic_constraints: dict | None = None) -> list:
        """Fresh inputs, one per non-output parameter; symbolic extents take their symbols'
        sizes from ``dynamic_symbolic_constraints`` ({symbol name: int})."""
        device = self._device()
        out = []
        for name in self.inputs:
            dtype, scalar = self._kinds[name]
            if scalar:
                raise ValueError(f"get_profiler: input {name!r} is a scalar "
                                 f"({dtype.name}); pass input_tensors=[...] with its value")
            shape = self._shape(name, dynamic_symbolic_constraints)
            out.append(supply(shape, dtype, self.supply_type, device))
        return out

    def _get_inputs(self, with_output=False, dynamic_symbolic_constraints=None) -> list:
        """TileLang's private ``_get_inputs`` (programs call it to make their inputs):
        ``input_tensors``; the outputs too (``with_output=True``) are not made here."""
        if with_output:
            raise NotSupportedError("Profiler._get_inputs(with_output=True) (TileLang's "
                                    "private profiler method) is not supported by tilejit: "
                                    "its profiler makes the kernel's inputs only "
                                    "(input_tensors())")
        return self.input_tensors(dynamic_symbolic_constraints)

    def _run(self, func, tensors):
        result = (func or self.kernel)(*tensors)
        if result is None:
            return []
        return list(result) if isinstance(result, (list, tuple)) else [result]

    def run_once(self, func=None, input_tensors=None):
        """Run ``func`` (default: the kernel) once on (fresh) inputs; its result."""
        if func is not None and not callable(func):
            raise TypeError(f"Profiler.run_once: func must be callable (the kernel when not "
                            f"given), got {type(func).__name__} {func!r:.80}")
        return (func or self.kernel)(*(_inputs(input_tensors, "Profiler.run_once")
                                       or self.input_tensors()))

    def assert_allclose(self, reference_program, input_tensors=None, atol: float = 1e-2,
                        rtol: float = 1e-2, max_mismatched_ratio: float = 0.01):
        """Run ``reference_program``, then the kernel, on the same inputs (TileLang's
        order: a kernel that writes an input does it after the reference read it) and
        compare every output: the same shape and dtype, and at most
        ``max_mismatched_ratio`` of the elements of each may differ by more than ``atol
        + rtol * |reference|`` (NaN where the reference is not counts as a mismatch). An
        output either side gives as None is not compared (TileLang's num-split
        references)."""
        import torch    # the profiler makes torch tensors; torch is only needed here
        atol, rtol = (_tolerance(v, n, None) for v, n in ((atol, "atol"), (rtol, "rtol")))
        max_mismatched_ratio = _tolerance(max_mismatched_ratio, "max_mismatched_ratio", 1.0)
        if not callable(reference_program):
            raise TypeError(f"assert_allclose: reference_program must be callable (the "
                            f"reference, called with the inputs), got "
                            f"{type(reference_program).__name__}")
        tensors = _inputs(input_tensors, "assert_allclose") or self.input_tensors()
        refs = self._run(reference_program, tensors)
        ours = self._run(None, tensors)
        if len(ours) != len(refs):
            raise AssertionError(f"the kernel returned {len(ours)} output(s), the reference "
                                 f"program {len(refs)}")
        for k, (out, ref) in enumerate(zip(ours, refs)):
            if out is None or ref is None:
                continue
            out, ref = torch.as_tensor(out).detach(), torch.as_tensor(ref).detach()
            # float8 compared as float32 on either side (TileLang's), then the dtypes
            out, ref = (x.float() if x.dtype.is_floating_point and x.element_size() == 1
                        else x for x in (out, ref))
            if out.dtype != ref.dtype:
                raise AssertionError(f"output {k}: dtype {out.dtype}, the reference's "
                                     f"{ref.dtype}")
            out, ref = out.to("cpu", torch.float64), ref.to("cpu", torch.float64)
            if out.shape != ref.shape:
                raise AssertionError(f"output {k}: shape {tuple(out.shape)}, the reference's "
                                     f"{tuple(ref.shape)}")
            bad = ~torch.isclose(out, ref, rtol=rtol, atol=atol, equal_nan=True)
            ratio = bad.double().mean().item() if bad.numel() else 0.0
            if ratio > max_mismatched_ratio:
                raise AssertionError(
                    f"output {k}: {int(bad.sum())} of {bad.numel()} elements ({ratio:.2%}) "
                    f"differ by more than atol={atol} + rtol={rtol}·|reference| (allowed "
                    f"{max_mismatched_ratio:.2%}); {_mismatch_details(out, ref, bad)}")

    def do_bench(self, func=None, warmup: float = 25, rep: float = 100, n_warmup: int = 0,
                 n_repeat: int = 0, input_tensors=None, backend: str = "event",
                 quantiles=None, return_mode: str = "mean",
                 dynamic_symbolic_constraints: dict | None = None, device=None,
                 early_stop_baseline=None):
        """The milliseconds of ``func`` (default: the kernel) on fixed inputs
        (``input_tensors``, else made with ``dynamic_symbolic_constraints`` giving the
        symbols' sizes), as the module's ``do_bench`` gives them (``warmup``/``rep`` in
        milliseconds, ``n_warmup``/``n_repeat`` its ``_n_warmup``/``_n_repeat``);
        ``device`` is accepted and not used."""
        if func is not None and not callable(func):
            raise TypeError(f"Profiler.do_bench: func must be callable (the kernel when "
                            f"not given), got {type(func).__name__} {func!r:.80}")
        tensors = _inputs(input_tensors, "Profiler.do_bench") or \
            self.input_tensors(dynamic_symbolic_constraints)
        fn = func or self.kernel
        return do_bench(lambda: fn(*tensors), warmup, rep, n_warmup, n_repeat,
                        quantiles=quantiles, backend=backend, return_mode=return_mode,
                        early_stop_baseline=early_stop_baseline)


def _tolerance(value, name, most):
    """``value`` as a float (a Python, numpy or one-element torch number), >= 0 and at
    most ``most`` where given; else a ValueError naming ``name``."""
    # (float() takes b"1", np.True_ and a bool tensor too: none is a tolerance)
    number = float(value) if _is_number(value) else None
    if number is None or not number >= 0 or (most is not None and number > most):
        where = f"in [0, {most:g}]" if most is not None else ">= 0"
        raise ValueError(f"assert_allclose: {name} must be a number {where}, got {value!r}")
    return number

# TileLang's names this module does not have: an error naming them (``compat.py``)
# TileLang's profiler is a package: its submodules tilejit lacks are refused too
__path__ = []
__getattr__ = module_getattr(
    "tilelang.profiler", __name__,
    "of TileLang's profiler tilejit has do_bench and the Profiler that kernel.get_profiler() makes")
