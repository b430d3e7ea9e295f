"""The host side of a launch: the arguments as the compiler sees them, the launch
configuration the host program returns, and the outputs it allocates (``T.empty``)."""
from __future__ import annotations

import linecache
import re
import sys
import threading
import uuid

import numpy as np

from tilejit.runtime.arguments import (DevicePointer, PackedTensor, TensorArg, TensorSpec,
                                       as_tensor_arg, is_compile_time_value, scalar_key)
from tilejit.language import (_semantics, check_cluster_grid, check_min_blocks, cluster_shape,
                              launch_shape)
from tilejit.language.dtypes import DType, as_dtype, bfloat16
from tilejit.language.layout import Layout
from tilejit.frontend.helpers import HelperArgument
from tilejit.frontend.references import user_function
from tilejit.runtime.disk_cache import Unkeyable, function_fingerprint


class LaunchConfig:
    """What the host program returns: grid (3 dims), threads, the minimum of resident
    blocks per SM asked for (or None), the cluster's dims ((1, 1, 1): no clusters;
    ``T.ClusterKernel``) and the outputs."""
    __slots__ = ("grid", "threads", "min_blocks_per_sm", "cluster", "outputs")

    def __init__(self, *grid, threads=128, prelude=None, outputs=(), min_blocks_per_sm=None,
                 cluster_dims=1):
        self.outputs = outputs
        if getattr(_ALLOCATION, "shapes_only", False):
            # the outputs are all a shape-only run wants (a fake implementation while
            # torch.compile traces): the grid, whose extents may be symbolic sizes, is
            # not made ints, which would specialize the trace on each one's value
            self.grid = self.threads = self.min_blocks_per_sm = self.cluster = None
            return
        dims, threads = launch_shape(grid, threads)
        self.grid = dims + (1,) * (3 - len(dims))
        self.threads = threads
        self.min_blocks_per_sm = check_min_blocks(min_blocks_per_sm, threads)
        self.cluster = cluster_shape(cluster_dims)
        check_cluster_grid(self.grid, self.cluster)


# -- outputs ------------------------------------------------------------------------
_ALLOCATION = threading.local()


class allocating_like:
    """While the host program runs, ``T.empty`` allocates tensors of the same kind
    (torch or numpy) and on the same device as ``like``. ``shapes_only``: the run wants
    the outputs alone (tilejit.torch's fake implementation): the launch's grid is not
    computed (``LaunchConfig.grid`` is None) and symbolic sizes (``torch.SymInt``) stay
    symbolic, so tracing with dynamic shapes does not specialize on them."""

    def __init__(self, like: TensorArg | None, shapes_only: bool = False):
        self.like = like
        self.shapes_only = shapes_only

    def __enter__(self):
        self.outer = (getattr(_ALLOCATION, "like", None),
                      getattr(_ALLOCATION, "shapes_only", False))
        _ALLOCATION.like, _ALLOCATION.shapes_only = self.like, self.shapes_only
        return self

    def __exit__(self, *exc):
        _ALLOCATION.like, _ALLOCATION.shapes_only = self.outer
        return False


def _extent(n):
    """An extent of ``T.empty``'s shape as an int; a symbolic size (``torch.SymInt``,
    while torch.compile traces with dynamic shapes) as it is: ``int()`` of it would
    specialize the trace on its value, one recompilation per size."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(n, torch.SymInt):
        return n
    return int(n)


def allocate_output(shape, dtype):
    """``T.empty(shape, dtype)`` in the host program."""
    dtype = as_dtype(dtype)
    shape = tuple(_extent(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    if any(isinstance(s, int) and s < 0 for s in shape):
        raise ValueError(f"T.empty: negative extent in shape {shape}")
    like = getattr(_ALLOCATION, "like", None)
    if dtype.packed > 1:
        return _allocate_packed(shape, dtype, like)
    if like is not None and like.is_torch:
        import torch
        return torch.empty(shape, dtype=dtype.as_torch(), device=_device_of(like))
    if like is not None and isinstance(like.obj, TensorSpec):
        return TensorSpec(shape, dtype)     # compiling from shapes: no data to hold
    if like is not None and like.device >= 0:
        # a CUDA array that is not a torch tensor (CuPy, Numba, JAX): memory of tilejit's
        # own, handed on by __cuda_array_interface__ and __dlpack__, torch not imported
        from tilejit.runtime.device_array import DeviceArray
        return DeviceArray(shape, dtype, like.device)
    if dtype == bfloat16:
        raise TypeError("T.empty: a bfloat16 output needs torch tensors as inputs "
                        "(numpy has no bfloat16)")
    return np.empty(shape, dtype=dtype.numpy)


def _device_of(like):
    """The torch device of the tensor outputs are allocated like (a packed tensor's is its
    bytes')."""
    obj = like.obj
    return getattr(obj, "storage", obj).device if isinstance(obj, PackedTensor) else obj.device


def _allocate_packed(shape, dtype, like):
    """``T.empty`` of float4_e2m1fn or int4: its bytes, two elements each, as TileLang
    returns them: beside torch inputs, an int8 tensor for int4 and torch's
    float4_e2m1fn_x2 (int8 where torch lacks it) for float4_e2m1fn; uint8 beside numpy
    ones (the kernel reads any of them as the declared dtype)."""
    n = dtype.packed
    if not shape or shape[-1] % n:
        raise ValueError(f"T.empty: a {dtype.name} tensor is held {n} elements a byte; its "
                         f"last extent must be a multiple of {n}, got shape {shape}")
    stored = shape[:-1] + (shape[-1] // n,)
    if like is not None and like.is_torch:
        import torch
        storage = torch.int8 if dtype.is_packed_int else getattr(
            torch, "float4_e2m1fn_x2", torch.int8)
        return torch.empty(stored, dtype=storage, device=_device_of(like))
    if like is not None and isinstance(like.obj, TensorSpec):
        return TensorSpec(shape, dtype)     # compiling from shapes: the logical shape
    if like is not None and like.device >= 0:
        raise TypeError(f"T.empty: a {dtype.name} output is made beside torch or numpy "
                        f"inputs only")
    return PackedTensor(np.zeros(stored, dtype=np.uint8), dtype)


# what ``T.empty`` means as Python (the language declares it and imports nothing of ours)
_semantics.install({"empty": allocate_output})


# -- arguments ----------------------------------------------------------------------
class Call:
    """One call's arguments, classified: compile-time values, tensors, scalars."""
    __slots__ = ("host_args", "runtime", "constexprs", "key", "device", "like")

    def __init__(self):
        self.host_args, self.runtime, self.constexprs, self.key = [], [], [], []
        self.device, self.like = -1, None


def classify(kernel, values) -> Call:
    call = Call()
    devices = {}
    source = kernel.source
    for name, value in zip(source.params, values):
        if name not in source.constexpr_params:
            check_tensor_use(kernel, name, value)
        if name in source.constexpr_params or is_compile_time_value(value):
            value = constexpr_value(name, value,
                                    getattr(kernel, "integer_constexprs", {}).get(name))
            call.constexprs.append((name, value))
            call.host_args.append(value)
            call.key.append(("const", name, hashable(value)))
            continue
        tensor = as_tensor_arg(value)
        if tensor is not None:
            check_rank(kernel, name, tensor)
            check_writable(kernel, name, tensor)
            check_viewable(kernel, name, tensor)
            devices.setdefault(tensor.device, name)
            call.runtime.append((name, tensor))
            call.host_args.append(tensor)
            call.key.append(tensor.type_key())
            if call.like is None:
                call.like = tensor
        else:
            call.key.append(scalar_key(name, value))
            call.runtime.append((name, value))
            call.host_args.append(value)
            if isinstance(value, DevicePointer):      # a T.ptr argument given as a tensor
                devices.setdefault(value.device, name)
    if len(devices) > 1:
        names = ", ".join(f"{n!r} on {device_name(d)}" for d, n in devices.items())
        raise ValueError(f"{kernel.__name__}(): arguments live on different devices ({names});"
                         " move them to one device")
    call.device = next(iter(devices), -1)
    if call.like is None and kernel.outputs:
        call.like = placement_without_inputs(kernel)
        call.device = call.like.device
    return call


class _Placement:
    """Where a kernel without tensor arguments puts its ``T.empty`` outputs (what
    ``allocate_output`` reads of a first tensor argument otherwise)."""
    __slots__ = ("obj", "device", "is_torch")

    def __init__(self, device: int, is_torch: bool):
        self.device, self.is_torch = device, is_torch
        self.obj = None
        if is_torch:
            import torch
            self.obj = torch.empty(0, device=f"cuda:{device}" if device >= 0 else "cpu")


def placement_without_inputs(kernel) -> _Placement:
    """A kernel whose only tensors are its outputs (``kernel()`` of a fill or an iota)
    runs on the current CUDA device when its target allows one and torch and a device
    are there, with torch outputs; else in the simulator, with torch CPU outputs when
    torch is imported (what TileLang's kernels return) and numpy ones otherwise; the
    simulator as the target on a machine with a device puts them on the device."""
    torch = sys.modules.get("torch")
    target = kernel._env_target or kernel.target
    if target in ("auto", "cuda"):
        # the driver (cuda.bindings) stays off `import tilejit`; loaded here, for the
        # kernels without tensor arguments only
        from tilejit.runtime import cuda_driver
        if cuda_driver.cuda_available():
            if torch is None:
                try:
                    import torch  # noqa: F811 - torch only when the outputs need it
                except ImportError:
                    raise TypeError(f"{kernel.__name__}(): a kernel whose only tensors are "
                                    "its T.empty outputs allocates them with torch on the "
                                    "GPU; torch is not installed") from None
            return _Placement(torch.cuda.current_device(), True)
    if target == "sim" and torch is not None and torch.cuda.is_available():
        # the simulator standing in for the GPU on a machine that has one (TileLang's
        # tests under TILEJIT_TARGET=sim): the outputs where the GPU's would be, simulated
        # on host copies and written back (sim/runner._wrap)
        return _Placement(torch.cuda.current_device(), True)
    return _Placement(-1, torch is not None)


def run_host_program(kernel, call: Call) -> LaunchConfig:
    """The kernel's host program (the statements before ``T.Kernel`` and the grid) on
    the call's arguments. A division by zero there is reported at the kernel's line,
    with the compile-time values that line reads (``block=0``)."""
    try:
        return kernel._host(*call.host_args)
    except ZeroDivisionError as e:
        raise ZeroDivisionError(_host_error(kernel, call, e, "division by zero")) from None
    except (ValueError, TypeError) as e:
        # a launch the language refuses (threads=0, 2000 or "a"; a grid extent of 0), or
        # a value of the wrong kind in the host's arithmetic (a block size given as '32'):
        # its own message, with the kernel's line that computed it and the values it read
        what = "an invalid launch" if isinstance(e, ValueError) else "a value of the wrong kind"
        try:
            error = type(e)(_host_error(kernel, call, e, what))
        except Exception:       # noqa: BLE001 - an error type made otherwise: as it is
            error = None
        if error is None:
            raise e
        raise error from None


def _host_error(kernel, call: Call, e: BaseException, what: str) -> str:
    source = kernel.source
    line = None
    tb = e.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code is kernel._host.__code__:
            line = tb.tb_lineno
        tb = tb.tb_next
    if line is None:
        return f"{kernel.__name__}(): {what} computing the launch on the host: {e}"
    text = linecache.getline(source.filename, line).strip()
    names = set(re.findall(r"[A-Za-z_]\w*", text))
    values = ", ".join(f"{n}={v!r}" for n, v in call.constexprs if n in names)
    return (f"{kernel.__name__}(): {what} computing the launch on the host, at "
            f"{source.filename}, line {line}: `{text}`"
            + (f" (with {values})" if values else "") + f": {e}")


def add_outputs(kernel, call: Call, launch: LaunchConfig):
    """Append the outputs the host program allocated to the call's run-time arguments."""
    for name, value in zip(kernel.outputs, launch.outputs):
        tensor = as_tensor_arg(value)
        call.runtime.append((name, tensor))
        call.key.append(tensor.type_key())


def shape_constants(kernel, call: Call, values) -> tuple:
    """((param, dim, value), …) of the shape entries the kernel specializes on: those it
    needs at compile time, and every entry of a tensor a ``T.copy`` moves whole."""
    if not kernel.shape_entries and not kernel.whole_copies:
        return ()
    index = {n: i for i, n in enumerate(kernel.source.params)}
    out = []
    for param in kernel.whole_copies:
        tensor = as_tensor_arg(values[index[param]])
        if tensor is not None:
            out += [(param, d, int(n)) for d, n in enumerate(tensor.shape)
                    if (param, d) not in kernel.shape_entries]
    for param, dim in kernel.shape_entries:
        tensor = as_tensor_arg(values[index[param]])
        if tensor is None or dim >= tensor.ndim:
            raise ValueError(f"argument {param!r}: the kernel reads {param}.shape[{dim}] as a "
                             f"compile-time extent; got {type(values[index[param]]).__name__}"
                             + (f" of rank {tensor.ndim}" if tensor is not None else ""))
        out.append((param, dim, int(tensor.shape[dim])))
    return tuple(sorted(out))


def check_tensor_use(kernel, name, value):
    """A number or None where the source uses the parameter as a tensor (indexes it,
    reads its shape) is a TypeError naming the parameter and the use, before typing."""
    line = getattr(kernel, "tensor_uses", {}).get(name)
    if line is None:
        return
    if value is None or isinstance(value, (bool, int, float, complex, np.number, np.bool_)):
        text = linecache.getline(kernel.source.filename, line).strip()
        got = "None" if value is None else f"{type(value).__name__} {value!r}"
        raise TypeError(f"argument {name!r}: expected a tensor or array (the kernel uses "
                        f"{name} as one at line {line}: `{text}`), got {got}")


def check_writable(kernel, name, tensor: TensorArg):
    """A read-only numpy array where the source writes the parameter: a ValueError
    naming the parameter and the write, before anything runs."""
    if not isinstance(tensor.obj, np.ndarray) or tensor.obj.flags.writeable:
        return
    line = getattr(kernel, "written", {}).get(name)
    if line is not None:
        text = linecache.getline(kernel.source.filename, line).strip()
        raise ValueError(f"argument {name!r}: the kernel writes {name} (line {line}: "
                         f"`{text}`), got a read-only numpy array; pass a writable one "
                         f"(numpy.array(x) copies it)")


def check_viewable(kernel, name, tensor: TensorArg):
    """A tensor the source takes a view of (``T.reshape``/``T.view``) or lays out
    (``T.annotate_layout``) must hold its elements in row-major order: a ValueError
    naming the parameter and the view."""
    line = getattr(kernel, "viewed", {}).get(name)
    if line is None:
        return
    expected, acc = [], 1
    for n in reversed(tuple(tensor.shape)):
        expected.append(acc)
        acc *= n
    if any(n != 1 and s != e for n, s, e in zip(tensor.shape, tensor.strides,
                                                expected[::-1])):
        text = linecache.getline(kernel.source.filename, line).strip()
        how = ("lays out {name} by T.annotate_layout" if getattr(kernel, "laid_out", {}).get(
            name) == line else "views {name} with another shape").format(name=name)
        raise ValueError(f"argument {name!r}: the kernel {how} "
                         f"(line {line}: `{text}`), which needs a contiguous tensor; got "
                         f"strides {tuple(tensor.strides)} for shape {tuple(tensor.shape)} "
                         f"(.contiguous() copies it)")


def check_rank(kernel, name, tensor: TensorArg):
    rank = kernel.ranks.get(name)
    if tensor.ndim == 0 and (rank is None or rank[0] == 0):
        how = (f"reads it as {name}[()] at line {rank[1]}, which takes a 0-d torch tensor "
               "or numpy array" if rank else f"does not read it as {name}[()]")
        raise ValueError(f"argument {name!r}: a 0-d {type(tensor.obj).__name__} is not "
                         f"supported here (the kernel {how}); pass {name}.reshape(1) and "
                         f"index {name}[0], or pass the number as a scalar")
    if rank is not None and rank[0] == 0:
        rank = (1, rank[1])     # its one-element view (scalar_views checked the 0-d)
    if rank is not None and rank[0] != tensor.ndim:
        raise ValueError(
            f"argument {name!r}: expected a {rank[0]}-d tensor (the kernel uses {name} "
            f"that way at line {rank[1]}), got a {tensor.ndim}-d tensor of shape "
            f"{tuple(tensor.shape)}" + (f" (a kernel reads a 0-d tensor as {name}[()])"
                                        if tensor.ndim == 0 else ""))


def scalar_views(kernel, values):
    """``values`` with each 0-d tensor the kernel reads as ``P[()]`` replaced by its
    one-element view (a torch tensor's, a numpy array's or a TensorSpec's), which the
    compiled kernel indexes ``P[0]`` (frontend/scalar_tensors.py); the same sequence
    when there is none. A tensor of other rank there is a ValueError naming the use."""
    scalar = kernel.source.scalar_tensors
    if not scalar:
        return values
    views = None
    for i, (name, value) in enumerate(zip(kernel.source.params, values)):
        if name not in scalar or not isinstance(value, (np.ndarray, TensorSpec)) \
                and not _is_torch_tensor(value):
            continue
        if value.ndim != 0:
            raise ValueError(
                f"argument {name!r}: expected a 0-d tensor (the kernel reads it as "
                f"{name}[()] at line {scalar[name]}), got a {value.ndim}-d tensor of "
                f"shape {tuple(value.shape)}")
        if views is None:
            views = list(values)
        views[i] = value.reshape(1)
    return values if views is None else type(values)(views)


def _is_torch_tensor(value) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def _fingerprint(fn) -> str:
    """A helper argument's digest (its source and what it reads), or a text unique to
    this process where that cannot be taken."""
    try:
        return function_fingerprint(fn, strict=True)
    except (Unkeyable, TypeError):
        return f"{id(fn)}-{uuid.uuid4().hex}"


def constexpr_value(name, value, integer: str | None = None):
    """A compile-time argument's value, checked the same for every target: an int,
    float, bool, str, tuple, dtype, layout (``T.Fragment`` for ``loop_layout=``) or None
    (a numpy scalar as its Python value, a list as
    a tuple); an int where the kernel needs one (``integer`` says why)."""
    if type(value).__module__ == "torch" and type(value).__name__ == "dtype":
        return as_dtype(value)
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, list):         # TileLang's programs pass lists: a tuple here
        value = _frozen(value)
    if user_function(value) is not None:
        return HelperArgument.of(value, _fingerprint)
    if not (value is None or isinstance(value, (int, float, bool, str, tuple, DType, Layout))):
        array = as_tensor_arg_or_none(value) is not None
        raise TypeError(f"argument {name!r}: a T.constexpr must be an int, float, bool, str, "
                        f"tuple, dtype, T.Layout/T.Fragment, a function or @T.macro of "
                        f"your own, or None, got "
                        f"{type(value).__name__}"
                        + ("; a tensor or array goes to a parameter not annotated "
                           "T.constexpr" if array else ""))
    if integer is not None and isinstance(value, float):
        raise TypeError(f"argument {name!r}: T.constexpr {name} must be an int ({integer}), "
                        f"got the float {value!r}")
    return value


class FrozenList(tuple):
    """A list passed as a compile-time value: a tuple (hashable, so a specialization's
    key) that still concatenates with lists as the list did (``sizes + [0]``,
    ``[0] + sizes``)."""
    __slots__ = ()

    def __add__(self, other):
        if isinstance(other, (list, tuple)):
            return FrozenList(tuple(self) + tuple(other))
        return NotImplemented

    def __radd__(self, other):
        if isinstance(other, (list, tuple)):
            return FrozenList(tuple(other) + tuple(self))
        return NotImplemented


def _frozen(value):
    """A list (of lists) of plain values as a FrozenList (of FrozenLists); a tuple's
    items frozen likewise."""
    if isinstance(value, list):
        return FrozenList(_frozen(v) for v in value)
    if isinstance(value, tuple):
        return tuple(_frozen(v) for v in value)
    return value.item() if isinstance(value, np.generic) else value


def as_tensor_arg_or_none(value):
    try:
        return as_tensor_arg(value)
    except Exception:   # only asked to describe the value
        return None


def hashable(value):
    try:
        hash(value)
        return (type(value).__name__, value)
    except TypeError:
        return (type(value).__name__, repr(value))


def device_name(device: int) -> str:
    return "the host" if device < 0 else f"cuda:{device}"
