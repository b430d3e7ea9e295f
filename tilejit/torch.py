"""tilejit kernels as PyTorch custom operators.

    op = tilejit.torch.custom_op("mylib::gemm_relu", gemm_relu, constexprs={"block_K": 64})
    y = op(a, b)                      # or torch.ops.mylib.gemm_relu(a, b)
    torch.compile(model, fullgraph=True)   # traces through it: no graph break

The operator's schema comes from the kernel: every parameter that is not a
``T.constexpr`` is an argument (a ``Tensor``, or ``int``/``float``/``bool`` where the
kernel annotates it so or ``scalars={"eps": float}`` says so), in order; a tensor the
kernel writes is declared mutated
(``Tensor(a!)``); the outputs are the ``T.empty`` tensors the kernel returns. The
constexprs are fixed when the operator is registered (one operator per configuration).

The fake ("meta") implementation, which ``torch.compile`` traces, runs only the
kernel's host program (the statements before ``T.Kernel``) on the fake inputs, so the
outputs' shapes and dtypes are derived from the same code that allocates them at run
time; no kernel is compiled or launched while tracing. It keeps symbolic sizes symbolic
(``T.empty``'s extents stay ``torch.SymInt``, the launch grid is not computed), so
``torch.compile(dynamic=True)``, or the default's automatic dynamic shapes from the second
size on, compiles one graph for every input size rather than one per size.

The operator is defined through ``torch.library.Library`` with the kernel registered for
the backends themselves (CPU runs the simulator), so a call crosses PyTorch's dispatcher
into Python once: ``torch.library.custom_op``'s Python autograd, in-place and alias
layers cost 13-33 µs a call on the H200's host (2026-12-02), more than the launch. The
in-place layer's one duty, bumping a mutated tensor's version counter, is done here. What
is returned is the operator itself (``torch.ops.namespace.op.default``); a kernel with a
backward pass registers it with ``torch.library.register_autograd("namespace::op",
backward, setup_context=...)``.

A kernel that writes its results into arguments (``flashattn(Q, K, V, Output, LSE)``)
is a mutating operator, which PyTorch gives no backward. ``outputs={"Output": alloc,
...}`` makes those arguments outputs instead: the operator allocates each with
``alloc(**arguments)`` (the operator's own arguments by name, e.g. ``lambda Q, **_:
torch.empty_like(Q)``; fake tensors while tracing), launches the kernel on them, and
returns them, in ``outputs``' order, before the ``T.empty`` results. A tensor parameter
whose default is None (``LSE=None``) is an optional argument (``Tensor? LSE=None``).
"""
from __future__ import annotations

import torch

from tilejit.language.dtypes import as_dtype
from tilejit.runtime import host
from tilejit.runtime.kernel import KernelFunction

_SCALARS = {int: "SymInt", float: "float", bool: "bool"}
_DISPATCH_KEYS = {"cpu": "CPU", "cuda": "CUDA"}
_LIBRARIES: list = []


class _ShapeOnly:
    """A tensor argument as the host program sees it (shape, dtype, where), without
    reading its data: what a fake tensor can give."""
    __slots__ = ("obj", "ptr", "shape", "strides", "dtype", "device", "is_torch")

    def __init__(self, t):
        self.obj, self.ptr, self.is_torch = t, 0, True
        self.shape, self.strides = tuple(t.shape), tuple(t.stride())
        self.dtype = as_dtype(t.dtype)
        self.device = t.device.index if t.is_cuda else -1

    @property
    def ndim(self):
        return len(self.shape)


def _schema(kernel: KernelFunction, params, mutated, scalars, n_outputs) -> str:
    notes = {**kernel.func.__annotations__, **scalars}
    defaults = kernel.source.defaults
    kinds, given = [], []
    for i, p in enumerate(params):
        kind = _SCALARS.get(notes.get(p), "Tensor")
        if kind == "Tensor" and p in mutated:
            kind = f"Tensor({chr(ord('a') + len([q for q in params[:i] if q in mutated]))}!)"
        default = defaults.get(p, ...)
        if kind.startswith("Tensor") and default is None:
            kind, given = kind + "?", given + ["None"]       # an optional tensor
        elif kind != "Tensor" and type(default) in (int, float, bool):
            given.append(repr(default))
        else:
            given.append(None)
        kinds.append(kind)
    # defaults only on the trailing parameters that all have one (the schema's rule)
    last = max((i for i, g in enumerate(given) if g is None), default=-1)
    args = [f"{k} {p}" + (f"={g}" if i > last else "")
            for i, (k, p, g) in enumerate(zip(kinds, params, given))]
    n = n_outputs + (0 if kernel.returns is None else
                     1 if isinstance(kernel.returns, str) else len(kernel.returns))
    out = "()" if n == 0 else "Tensor" if n == 1 else "(" + ", ".join(["Tensor"] * n) + ")"
    return f"({', '.join(args)}) -> {out}"


def custom_op(name: str, kernel: KernelFunction, *, constexprs: dict | None = None,
              scalars: dict | None = None, outputs: dict | None = None, device_types=None):
    """Register ``kernel`` as the PyTorch operator ``name`` ("namespace::op") for the
    ``device_types`` given ("cpu", "cuda"; both by default) and return it (the
    ``torch._ops.OpOverload`` ``torch.ops.namespace.op.default``: call it). ``outputs``:
    written tensor parameters the operator allocates (``{param: alloc}``) and returns."""
    if not isinstance(kernel, KernelFunction):
        raise TypeError(f"custom_op: expected a @tilejit.kernel, got {type(kernel).__name__}")
    if not isinstance(name, str) or name.count("::") != 1:
        raise ValueError(f"custom_op: expected a name 'namespace::op', got {name!r}")
    source = kernel.source
    constexprs = dict(constexprs or {})
    unknown = sorted(set(constexprs) - set(source.constexpr_params))
    if unknown:
        raise ValueError(f"custom_op: {', '.join(unknown)} not among the kernel's "
                         f"T.constexpr parameters ({', '.join(source.constexpr_params)})")
    params = [p for p in source.params if p not in source.constexpr_params]
    scalars = dict(scalars or {})
    for p, ty in scalars.items():
        if p not in params or ty not in _SCALARS:
            raise ValueError(f"custom_op: scalars= maps run-time parameters "
                             f"({', '.join(params)}) to int, float or bool; got {p!r}: {ty!r}")
    missing = [p for p in source.constexpr_params
               if p not in constexprs and p not in source.defaults]
    if missing:
        raise ValueError(f"custom_op: the constexprs {', '.join(missing)} have no default; "
                         f"give them in constexprs=")
    outputs = dict(outputs or {})
    for p, alloc in outputs.items():
        if p not in params or p in scalars or not callable(alloc):
            raise ValueError(f"custom_op: outputs= maps tensor parameters ({', '.join(params)})"
                             f" to functions that allocate them; got {p!r}: {alloc!r}")
    arguments = [p for p in params if p not in outputs]
    mutated = [p for p in arguments if p in kernel.written]
    values = {**{p: source.defaults[p] for p in source.constexpr_params
                 if p in source.defaults}, **constexprs}

    written = [i for i, p in enumerate(arguments) if p in mutated]

    def bind(args):
        """The kernel's run-time arguments: the operator's, then the allocated outputs."""
        bound = dict(zip(arguments, args))
        made = {p: alloc(**bound) for p, alloc in outputs.items()}
        return {**bound, **made}, list(made.values())

    def results(made, out):
        if not outputs:
            return out
        rest = [] if out is None else [out] if isinstance(kernel.returns, str) else list(out)
        return (made + rest)[0] if len(made) + len(rest) == 1 else tuple(made + rest)

    def call(*args):
        if outputs:
            bound, made = bind(args)
            out = kernel(*(bound[p] for p in params), **constexprs)
        else:               # the common case: the arguments are the kernel's, as given
            made, out = [], kernel(*args, **constexprs)
        for i in written:       # what ADInplaceOrView would do for a mutating operator
            torch.autograd.graph.increment_version(args[i])
        return results(made, out)

    def fake(*args):
        bound, made = bind(args)
        tensors = [a for a in bound.values() if isinstance(a, torch.Tensor)]
        host_args = []
        for p in source.params:
            v = values[p] if p in source.constexpr_params else bound[p]
            host_args.append(_ShapeOnly(v) if isinstance(v, torch.Tensor) else v)
        like = _ShapeOnly(tensors[0]) if tensors else None
        with host.allocating_like(like, shapes_only=True):
            launch = kernel._host(*host_args)
        return results(made, kernel._result(list(launch.outputs)))

    namespace, opname = name.split("::")
    lib = torch.library.Library(namespace, "FRAGMENT")
    try:
        lib.define(opname + _schema(kernel, arguments, mutated, scalars, len(outputs)))
    except RuntimeError as e:
        raise ValueError(f"custom_op: {name!r} cannot be defined (is it registered "
                         f"already?): {str(e).splitlines()[0]}") from None
    for key in device_types or ("CPU", "CUDA"):
        lib.impl(opname, call, _DISPATCH_KEYS.get(key, key))
    torch.library.register_fake(name, fake, lib=lib)
    _LIBRARIES.append(lib)      # the registrations live as long as their Library
    return getattr(getattr(torch.ops, namespace), opname).default
