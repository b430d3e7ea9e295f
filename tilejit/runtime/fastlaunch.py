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

Before the lookup, the entry a kernel is called with over and over (the first one
recorded, later any entry the table serves twice in a row) is tried without a key: torch's
own C++ check of the tensors (``tensor_guard_factory``), the pointers' alignment and the
scalars' values; on a hit the call reads one attribute per tensor, its pointer, and packs
the entry's shapes and strides.
"""
from __future__ import annotations

import numpy as np

from tilejit.runtime.arguments import is_compile_time_value

_MAX_ENTRIES = 4096


def tensor_types(torch) -> tuple:
    """The torch types the fast path reads as tensors: ``Tensor`` and ``nn.Parameter`` (a
    model's weights; its plain subclass), nothing that overrides torch's functions."""
    return (torch.Tensor, torch.nn.Parameter)


def _packed_torch() -> tuple:
    """torch's dtypes whose tensors hold two elements a byte (float4_e2m1fn_x2): their
    logical shape is not the tensor's (``arguments.py``), so they take the full path."""
    import sys
    torch = sys.modules.get("torch")
    return tuple(getattr(torch, n) for n in ("float4_e2m1fn_x2",) if hasattr(torch, n))


_NUMPY_SCALARS = frozenset((np.float16, np.float32, np.float64, np.int8, np.int16, np.int32,
                            np.int64, np.uint8, np.uint16, np.uint32, np.uint64))


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
    packed = _packed_torch()
    integers = getattr(kernel, "integer_constexprs", None)
    names = kernel.source.params if integers else [None] * len(values)
    for name, is_const, v in zip(names, kernel._const_flags, values):
        if is_const or is_compile_time_value(v):
            # ("const", 1): a constexpr that must be an int, whose float (equal to an
            # int, so the same key) takes the full path and its error
            kinds.append(("const", 1 if integers and name in integers else 0))
        elif type(v) in tensor_type and v.is_cuda and v.dtype not in packed:
            kinds.append(("tensor", v.dim()))
        elif type(v) in (int, float, bool) or type(v) in _NUMPY_SCALARS:
            kinds.append(("scalar", 0))     # (a typed scalar: a TileLang `s: T.float32`)
        else:
            return None
    return kinds


def _pieces(kinds):
    """(type checks, pointer reads, shape reads, key items, packed values) of the generated
    code over arguments a0, a1, ... (Every global it reads is spelled ``_tj_``: the entry
    function's parameters are the kernel's own names, which may be ``table``.)"""
    checks, pointers, shapes, key, pack = [], [], [], [], []
    for i, (kind, ndim) in enumerate(kinds):
        a = f"a{i}"
        if kind == "const":
            if ndim:
                checks.append(f"_tj_type({a}) is float")
            key.append(a)
        elif kind == "scalar":
            checks.append(f"_tj_type({a}) is not _tj_type_{i}")
            # its type too: np.float32(2.0) == 2.0 and hashes alike, but the kernels of a
            # float32 and of a Python float (a weak one) are two
            key += [a, f"_tj_type({a})"]
            pack.append(a)
        else:
            checks.append(f"_tj_type({a}) not in _tj_Tensor")
            pointers.append(f"p{i} = {a}.data_ptr()")
            shapes.append(f"s{i} = {a}.shape; t{i} = {a}.stride()")
            key += [f"{a}.dtype", f"{a}.get_device()", f"p{i} & 15", f"s{i}", f"t{i}"]
            pack += [f"p{i}"] + [f"s{i}[{d}]" for d in range(ndim)] + [
                f"t{i}[{d}]" for d in range(ndim)]
    return checks, pointers, shapes, key, pack


def _monomorphic(kinds):
    """(conditions, pointer conditions, packed values) of the monomorphic path: the entry
    held in ``m = (check, entry, (stream, cuLaunchKernelEx, configuration), value,
    ...)``. ``check`` is torch's C++ check of the tensors' Python types, dtypes,
    devices, dispatch keys, sizes and strides (``guard_factory``); the scalars and
    compile-time values must have the entry's types and values, the pointers be 16-byte
    aligned as its key says; the shapes and strides it packs are the entry's own (equal,
    by the check), so a hit reads one attribute per tensor: its pointer."""
    tensors = [f"a{i}" for i, (kind, _) in enumerate(kinds) if kind == "tensor"]
    conditions = [f"m[0]({', '.join(tensors)})"]
    pointers = " | ".join(f"p{i}" for i, (kind, _) in enumerate(kinds) if kind == "tensor")
    pack, slot = [], 3
    for i, (kind, ndim) in enumerate(kinds):
        if kind == "tensor":
            pack += [f"p{i}"] + [f"m[{slot + d}]" for d in range(2 * ndim)]
            slot += 2 * ndim
            continue
        if kind == "scalar":
            conditions.append(f"_tj_type(a{i}) is _tj_type_{i}")
            pack.append(f"a{i}")
        elif ndim:                      # an integer constexpr: its float takes the full path
            conditions.append(f"_tj_type(a{i}) is not float")
        conditions.append(f"a{i} == m[{slot}]")
        slot += 1
    return conditions, f"not ({pointers}) & 15", pack


def _monomorphic_values(kinds, values) -> list:
    """The ``m[3:]`` of ``_monomorphic`` for the call ``values``."""
    out = []
    for (kind, _), v in zip(kinds, values):
        if kind == "tensor":
            out += list(v.shape) + list(v.stride())
        else:
            out.append(v)
    return out


def _launch_lines(indent: str, read_stream: bool = True) -> list[str]:
    """Launch the entry ``e`` whose parameters are packed."""
    # (stream 0 goes as None: the bindings' cheapest path to the NULL stream)
    return [f"{indent}stream = e[9](e[10])"] * read_stream + [
            f"{indent}err, = e[2](e[3], e[4], e[5], e[6], e[7], 1, 1, e[8], stream or None, "
            "e[11], 0)",
            f"{indent}if err:",
            f"{indent}    e[13]._on_error(err, (e[4], e[5], e[6]), (e[7], 1, 1), e[8], stream)"]


def _body(kinds, miss: str, mono: bool) -> list[str]:
    """The lines of the hot path over arguments a0, a1, ...; ``miss`` is the expression it
    returns when the call is not in the table; ``mono``: with the monomorphic path."""
    checks, pointers, shapes, key, pack = _pieces(kinds)
    args = ", ".join(f"a{i}" for i in range(len(kinds)))
    lines = []
    if mono:            # (before the type checks: torch's check includes the tensors')
        conditions, aligned, mono_pack = _monomorphic(kinds)
        lines.append("    m = _tj_mono[0]")
        lines.append(f"    if {' and '.join(conditions)}:")
        lines += [f"        {line}" for line in pointers]
        lines.append(f"        if {aligned}:")
        lines.append("            e = m[1]")
        lines.append("            _tj_last[0] = None")   # (so a turn of two is no repeat)
        lines.append(f"            e[0](e[1], 0, {', '.join(mono_pack)})")
        # on the install's stream: cuLaunchKernelEx with its configuration (m[2])
        lines.append("            stream = e[9](e[10])")
        lines.append("            c = m[2]")
        lines.append("            if stream == c[0]:")
        lines.append("                err, = c[1](c[2], e[3], e[11], 0)")
        lines.append("                if err:")
        lines.append("                    e[13]._on_error(err, (e[4], e[5], e[6]), (e[7], 1, 1), "
                     "e[8], stream)")
        lines.append("                return None")
        lines += _launch_lines("            ", read_stream=False)
        lines.append("            return None")
    if checks:
        lines.append(f"    if {' or '.join(checks)}:")
        lines.append(f"        return {miss}")
    lines += [f"    {line}" for line in pointers]
    lines += [f"    {line}" for line in shapes]
    # the entry: (pack_into, view, cuLaunchKernel, function, gx, gy, gz, threads,
    # shared bytes, stream function, its argument, kernelParams, outputs, launcher, maps,
    # neither outputs nor maps)
    # (a compile-time value that cannot be a key, a list, takes the full path)
    lines.append("    try:")
    lines.append(f"        e = _tj_table.get(({', '.join(key)},))")
    lines.append("    except TypeError:")
    lines.append(f"        return {miss}")
    lines.append("    if e is None:")
    lines.append(f"        return {miss}")
    # TMA tensor maps (kernel.tensor_map_maker), by run-time argument position
    runtime = [f"(p{i}, s{i}, t{i})" if kind == "tensor" else "None"
               for i, (kind, _) in enumerate(kinds) if kind != "const"]
    # (the outputs' maps too: they follow the inputs, as the outputs follow them)
    lines.append("    if e[15]:")       # no outputs, no tensor maps: the common case
    lines.append("        result = None")
    lines.append(f"        e[0](e[1], 0, {', '.join(pack)})")
    if mono:    # the same entry twice in a row: it becomes the monomorphic one
        lines.append("        if e is _tj_last[0]:")
        lines.append(f"            _tj_install(e, ({args},))")
        lines.append("        _tj_last[0] = e")
    lines.append("    elif e[12] is None:")
    lines.append("        result = None")
    lines.append(f"        maps = e[14]({', '.join(runtime)}) if e[14] is not None else ()")
    lines.append(f"        e[0](e[1], 0, {', '.join(pack + ['*maps'])})")
    lines.append("    else:")
    lines.append("        result, extra, outs = e[12]()")
    lines.append(f"        maps = e[14]({', '.join(runtime + ['*outs'])}) "
                 "if e[14] is not None else ()")
    lines.append(f"        e[0](e[1], 0, {', '.join(pack + ['*extra', '*maps'])})")
    lines += _launch_lines("    ")
    lines.append("    return result")
    return lines


def _source(kinds, mono: bool) -> str:
    """``launch(a0, a1, ...)``, which returns MISS when the call is not in the table, and
    ``key_of(a0, a1, ...)``."""
    args = ", ".join(f"a{i}" for i in range(len(kinds)))
    _, pointers, shapes, key, _ = _pieces(kinds)
    lines = [f"def launch({args}):"] + _body(kinds, "_tj_MISS", mono)
    lines += [f"def key_of({args}):"] + [f"    {line}" for line in pointers + shapes]
    lines += [f"    return ({', '.join(key)},)"]
    return "\n".join(lines) + "\n"


def _entry_source(kinds, params, has_default, mono: bool) -> str:
    """``entry``: the kernel's call itself, with its parameters' names and defaults (a
    parameter without one defaults to ``_tj_M``). A call the table does not hold, or that
    binds its arguments wrongly, goes to ``_tj_miss(values, extra positionals, unknown
    keywords)``, the kernel's full path with its errors."""
    names = ", ".join(params)
    signature = ", ".join(f"{p}=_tj_d{i}" if has_default[i] else f"{p}=_tj_M"
                          for i, p in enumerate(params))
    values = f"({names},)"
    lines = [f"def entry({signature}, *_tj_rest, **_tj_kw):",
             "    if _tj_rest or _tj_kw:",
             f"        return _tj_miss({values}, _tj_rest, _tj_kw)",
             f"    {', '.join(f'a{i}' for i in range(len(params)))}, = {values}"]
    # (the misses pass a0, a1, ...: a later local, e.g. ``e``, may be a parameter's name)
    args = ", ".join(f"a{i}" for i in range(len(params)))
    lines += _body(kinds, f"_tj_miss(({args},), (), None)", mono)
    return "\n".join(lines) + "\n"


MISS = object()   # what ``launch`` returns when the full path must run
MISSING = object()  # an argument the call left out, in the generated entry


def _never(*tensors):
    return False


class FastLauncher:
    """The generated hot path of one kernel's calls shaped like ``kinds``. With a
    ``guard_factory`` (``tensor_guard_factory``: tensors -> a check of tensors like them),
    the last entry used twice in a row is also held as the monomorphic one, checked in C++
    without building a key (``_monomorphic``)."""
    MISS = MISS

    def __init__(self, kinds, tensor_type, scalar_types, guard_factory=None):
        self.kinds = kinds
        self.table: dict = {}
        self._guard_factory = guard_factory
        self._mono = [(_never,)]         # (check, entry, values ...): see _monomorphic
        types = tensor_type if isinstance(tensor_type, tuple) else (tensor_type,)
        self._namespace = {"_tj_Tensor": types, "_tj_table": self.table, "_tj_MISS": MISS,
                           "_tj_type": type, "_tj_mono": self._mono, "_tj_last": [None],
                           "_tj_install": self._install}
        self._namespace.update({f"_tj_type_{i}": t for i, t in scalar_types.items()})
        exec(compile(_source(kinds, self._monomorphic_path), "<tilejit fast launch>",
                     "exec"), self._namespace)
        self.launch = self._namespace["launch"]
        self._key_of = self._namespace["key_of"]

    @property
    def _monomorphic_path(self) -> bool:
        return self._guard_factory is not None

    def entry(self, kernel):
        """The function a call of ``kernel`` runs once it has a hot path: its parameters
        by name, defaults included, then this launcher's lookup; a miss, or a call that
        binds wrongly, goes to ``kernel._call_missed``."""
        params = list(kernel.source.params)
        if any(p.startswith("_tj_") for p in params) or len(params) != len(self.kinds):
            return kernel._call_full            # (a name of the generated code's own)
        defaults = kernel.source.defaults
        namespace = dict(self._namespace, _tj_M=MISSING, _tj_miss=kernel._call_missed)
        namespace.update({f"_tj_d{i}": defaults[p] for i, p in enumerate(params)
                          if p in defaults})
        source = _entry_source(self.kinds, params, [p in defaults for p in params],
                               self._monomorphic_path)
        exec(compile(source, f"<tilejit fast launch of {kernel.__name__}>", "exec"),
             namespace)
        return namespace["entry"]

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
        # (16: stream -> (cuLaunchKernelEx, configuration), for the monomorphic path)
        configured = None
        if cluster == (1, 1, 1) and hasattr(launcher, "configured_launch"):
            def configured(s, launcher=launcher, grid=tuple(grid), block=(threads, 1, 1)):
                return launcher.configured_launch(grid, block, shared, s)
        entry = (pack, view, cu_launch, func, gx, gy, gz, threads, shared, stream[0],
                 stream[1], params, outputs, launcher, maps, outputs is None and maps is None,
                 configured)
        self.table[key] = entry
        if self._mono[0][0] is _never and entry[15]:     # the first: monomorphic at once
            self._install(entry, values)

    def _install(self, entry, values):
        """Make ``entry`` the monomorphic one for calls like ``values`` (tensors 16-byte
        aligned; otherwise, or if the check cannot be made, the table alone serves)."""
        tensors = [v for (kind, _), v in zip(self.kinds, values) if kind == "tensor"]
        try:
            if any(t.data_ptr() & 15 for t in tensors):
                return
            check = self._guard_factory(tensors)
            if not check(*tensors):
                return
        except Exception:       # (a torch whose check behaves otherwise: the table serves)
            return
        configured = (object(), None, None)        # (a stream no call has: cuLaunchKernel)
        if entry[16] is not None:
            stream = entry[9](entry[10])
            configured = (stream, *entry[16](stream))
        self._mono[0] = (check, entry, configured, *_monomorphic_values(self.kinds, values))


_GUARDS = []    # [the factory or None], once per process


def tensor_guard_factory(torch):
    """tensors -> a function checking that tensors passed to it have the same dtypes,
    devices, dispatch keys (so CUDA-ness), sizes and strides (and ``requires_grad``,
    which the table's key leaves out: such a call goes to the table): torch's own C++
    check, the one ``torch.compile``'s guards run
    (``torch._C._dynamo.guards.TensorGuards`` with every size and stride static). None
    when this torch has none, or it fails a self-test of what it must reject."""
    if not _GUARDS:
        _GUARDS.append(_make_guard_factory(torch))
    return _GUARDS[0]


def _make_guard_factory(torch):
    try:
        from torch._C._dynamo.guards import TensorGuards
    except Exception:
        return None

    def factory(tensors):
        return TensorGuards(*tensors,
                            dynamic_dims_sizes=[list(t.shape) for t in tensors],
                            dynamic_dims_strides=[list(t.stride()) for t in tensors]).check
    try:
        x = torch.zeros(4, 6)
        check = factory([x, x])
        others = [torch.zeros(4, 7), torch.zeros(4, 6, dtype=torch.float64),
                  torch.zeros(6, 4).t(), torch.zeros(4, 6, 2)[..., 0]]
        if not check(x, torch.zeros(4, 6)) or any(check(x, o) for o in others):
            return None
    except Exception:
        return None
    return factory


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
    return FastLauncher(kinds, types, scalar_types, tensor_guard_factory(torch))
