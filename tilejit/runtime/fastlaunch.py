"""The hot path of a cached launch, generated per kernel.

After the first launch on the GPU, a kernel gets a small Python function written for
its parameter list (which parameters are torch tensors and of which rank, which are
scalars, which are compile-time): it reads each tensor's pointer, shape, strides,
dtype and device once, looks the whole call up in one dictionary, allocates the
kernel's T.empty outputs if it has any, and launches. The key
holds everything the compiled kernel and its grid depend on (dtypes, ranks, devices,
16-byte alignment of the pointers, shapes, strides, scalar values and types, constexpr
values), so a hit needs no other check; anything else returns ``MISS`` and the full path
(argument checks, compilation, the host prologue) runs and records its result here.
"""
from __future__ import annotations

from tilejit.runtime.arguments import is_compile_time_value

_MAX_ENTRIES = 4096


def tensor_types(torch) -> tuple:
    """The torch types the fast path reads as tensors: ``Tensor`` and ``nn.Parameter`` (a
    model's weights; its plain subclass), nothing that overrides torch's functions."""
    return (torch.Tensor, torch.nn.Parameter)


def param_kinds(kernel, values, tensor_type=None):
    """Per parameter: ("const", 0), ("scalar", 0) or ("tensor", ndim); None if some
    argument is of a kind the fast path does not take. An argument the kernel
    specializes on (None for an optional tensor left out, a dtype, a string, a tuple:
    ``is_compile_time_value``) is a "const" like a constexpr's: its value is part of
    the key, so a later call with a tensor there misses and takes the full path."""
    if tensor_type is None:
        import sys
        torch = sys.modules.get("torch")
        if torch is None:
            return None
        tensor_type = tensor_types(torch)
    elif not isinstance(tensor_type, tuple):
        tensor_type = (tensor_type,)
    kinds = []
    integers = getattr(kernel, "integer_constexprs", None)
    names = kernel.source.params if integers else [None] * len(values)
    for name, is_const, v in zip(names, kernel._const_flags, values):
        if is_const or is_compile_time_value(v):
            # ("const", 1): a constexpr that must be an int, whose float (equal to an
            # int, so the same key) takes the full path and its error
            kinds.append(("const", 1 if integers and name in integers else 0))
        elif type(v) in tensor_type and v.is_cuda:
            kinds.append(("tensor", v.dim()))
        elif type(v) in (int, float, bool):
            kinds.append(("scalar", 0))
        else:
            return None
    return kinds


def _source(kinds) -> str:
    args = ", ".join(f"a{i}" for i in range(len(kinds)))
    checks, reads, key, pack = [], [], [], []
    for i, (kind, ndim) in enumerate(kinds):
        a = f"a{i}"
        if kind == "const":
            if ndim:
                checks.append(f"type({a}) is float")
            key.append(a)
        elif kind == "scalar":
            checks.append(f"type({a}) is not type_{i}")
            key.append(a)
            pack.append(a)
        else:
            checks.append(f"type({a}) not in Tensor")
            reads.append(f"    p{i} = {a}.data_ptr(); s{i} = {a}.shape; t{i} = {a}.stride()")
            key += [f"{a}.dtype", f"{a}.get_device()", f"p{i} & 15", f"s{i}", f"t{i}"]
            pack += [f"p{i}"] + [f"s{i}[{d}]" for d in range(ndim)] + [
                f"t{i}[{d}]" for d in range(ndim)]
    lines = [f"def launch({args}):"]
    if checks:
        lines.append(f"    if {' or '.join(checks)}:")
        lines.append("        return MISS")
    lines += reads
    # the entry: (pack_into, view, cuLaunchKernel, function, gx, gy, gz, threads,
    # shared bytes, stream function, its argument, kernelParams, outputs, launcher, maps)
    # (a compile-time value that cannot be a key, a list, takes the full path)
    lines.append("    try:")
    lines.append(f"        e = table.get(({', '.join(key)},))")
    lines.append("    except TypeError:")
    lines.append("        return MISS")
    lines.append("    if e is None:")
    lines.append("        return MISS")
    # TMA tensor maps (kernel.tensor_map_maker), by run-time argument position
    runtime = [f"(p{i}, s{i}, t{i})" if kind == "tensor" else "None"
               for i, (kind, _) in enumerate(kinds) if kind != "const"]
    # (the outputs' maps too: they follow the inputs, as the outputs follow them)
    lines.append("    if e[12] is None:")
    lines.append("        result = None")
    lines.append(f"        maps = e[14]({', '.join(runtime)}) if e[14] is not None else ()")
    lines.append(f"        e[0](e[1], 0, {', '.join(pack + ['*maps'])})")
    lines.append("    else:")
    lines.append("        result, extra, outs = e[12]()")
    lines.append(f"        maps = e[14]({', '.join(runtime + ['*outs'])}) "
                 "if e[14] is not None else ()")
    lines.append(f"        e[0](e[1], 0, {', '.join(pack + ['*extra', '*maps'])})")
    lines.append("    stream = e[9](e[10])")
    lines.append("    err, = e[2](e[3], e[4], e[5], e[6], e[7], 1, 1, e[8], stream or None, "
                 "e[11], 0)")
    lines.append("    if err:")
    lines.append("        e[13]._on_error(err, (e[4], e[5], e[6]), (e[7], 1, 1), e[8], stream)")
    lines.append("    return result")
    lines.append(f"def key_of({args}):")
    lines += reads
    lines.append(f"    return ({', '.join(key)},)")
    return "\n".join(lines) + "\n"


MISS = object()   # what ``launch`` returns when the full path must run


class FastLauncher:
    MISS = MISS

    def __init__(self, kinds, tensor_type, scalar_types):
        self.kinds = kinds
        self.table: dict = {}
        types = tensor_type if isinstance(tensor_type, tuple) else (tensor_type,)
        namespace = {"Tensor": types, "table": self.table, "MISS": MISS}
        namespace.update({f"type_{i}": t for i, t in scalar_types.items()})
        exec(compile(_source(kinds), "<tilejit fast launch>", "exec"), namespace)
        self.launch = namespace["launch"]
        self._key_of = namespace["key_of"]

    def remember(self, values, launcher, grid, threads, shared, stream, outputs=None,
                 maps=None, cluster=(1, 1, 1)):
        """Record a launch. ``stream`` is (f, arg) with f(arg) the stream handle;
        ``outputs`` (or None) makes the call's T.empty outputs and returns (the call's
        result, their packed parameters); ``maps`` (or None) makes the TMA tensor maps
        (``kernel.tensor_map_maker``); a ``cluster`` launch goes through the launcher's
        ``cluster_launch`` in place of ``cuLaunchKernel``."""
        try:
            key = self._key_of(*values)
            hash(key)
        except TypeError:       # a compile-time value that cannot be a key: not remembered
            return
        if len(self.table) >= _MAX_ENTRIES:
            self.table.clear()
        pack, view, cu_launch, func, params = launcher.parts()
        if cluster != (1, 1, 1):
            cu_launch = launcher.cluster_launch(cluster)
        gx, gy, gz = grid
        self.table[key] = (pack, view, cu_launch, func, gx, gy, gz, threads,
                                             shared, stream[0], stream[1], params, outputs,
                                             launcher, maps)


def fast_launcher_for(kernel, values):
    """A FastLauncher for calls shaped like ``values`` (None if not applicable)."""
    import sys
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    types = tensor_types(torch)
    kinds = param_kinds(kernel, values, types)
    if kinds is None or not any(k == "tensor" for k, _ in kinds):
        return None
    scalar_types = {i: type(v) for i, ((k, _), v) in enumerate(zip(kinds, values))
                    if k == "scalar"}
    return FastLauncher(kinds, types, scalar_types)
