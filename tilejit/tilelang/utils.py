"""TileLang's ``tilelang.utils`` tensor helpers (``tilejit.utils`` and
``tilejit.utils.tensor`` are its module paths): ``TensorSupplyType``, how the profiler
and ``get_tensor_supply`` fill a kernel's inputs, and ``torch_assert_close``, the
comparison that allows a fraction of the elements to differ.

The inputs are filled as TileLang fills them: ``Auto`` is uniform in [-1, 1) for
float16, bfloat16 and float32, integers in [0, 2] for unsigned, {0, 1} for bool, the
int8 range [-128, 127] as values for float8 and [-2, 2] for the other dtypes;
``Integer`` integers in those ranges for every dtype; ``Uniform`` uniform in [-1, 1);
``Normal`` normal with mean -1 and standard deviation 1 (TileLang's); ``Randn`` standard
normal; int8 tensors asked to be ``Uniform`` or ``Normal`` are ones. They are made on
the current CUDA device, or in host memory (where the kernels run in the simulator) when
there is none.
"""
from __future__ import annotations

import enum

from tilejit.language.dtypes import as_dtype
from tilejit.language.numerics import float4_codes
from tilejit.language.tilelang_names import SymbolicInt

__all__ = ["TensorSupplyType", "get_tensor_supply", "supply", "torch_assert_close"]


class TensorSupplyType(enum.Enum):
    """How a kernel's inputs are filled (TileLang's names and numbers)."""
    Integer = 1
    Uniform = 2
    Normal = 3
    Randn = 4
    Zero = 5
    One = 6
    Auto = 7


def _device():
    import torch    # the helpers make torch tensors; torch is only needed here
    return torch.cuda.current_device() if torch.cuda.is_available() else "cpu"


def _integers(shape, dtype, tdtype, device):
    import torch    # the helpers make torch tensors; torch is only needed here
    if dtype.name.startswith("float8"):     # TileLang's: the int8 range as float8 values
        return torch.randint(-128, 128, shape, device=device, dtype=torch.int8).to(tdtype)
    low, high = (0, 3) if dtype.kind == "uint" else (0, 2) if dtype.kind == "bool" else (-2, 3)
    return torch.randint(low, high, shape, device=device).to(tdtype)


def supply(shape, dtype, kind: TensorSupplyType, device=None):
    """One tensor of ``shape`` and ``dtype`` filled as ``kind`` says (module docstring)."""
    import torch    # the helpers make torch tensors; torch is only needed here
    if not isinstance(kind, TensorSupplyType):
        raise TypeError(f"expected a TensorSupplyType, got {kind!r}")
    dtype = as_dtype(dtype)
    shape = tuple(int(s) for s in shape)
    device = _device() if device is None else device
    if dtype.packed > 1:
        return _packed_supply(shape, dtype, kind, device)
    tdtype = dtype.as_torch()
    if kind is TensorSupplyType.Auto:
        if dtype.name in ("float16", "bfloat16", "float32"):
            return torch.empty(shape, device=device, dtype=tdtype).uniform_(-1.0, 1.0)
        return _integers(shape, dtype, tdtype, device)
    if kind is TensorSupplyType.Zero:
        return torch.zeros(shape, dtype=tdtype, device=device)
    if kind is TensorSupplyType.One:
        return torch.ones(shape, dtype=tdtype, device=device)
    if dtype.name == "int8" and kind in (TensorSupplyType.Uniform, TensorSupplyType.Normal):
        return torch.ones(shape, dtype=tdtype, device=device)
    if kind is TensorSupplyType.Integer or not dtype.is_float:
        return _integers(shape, dtype, tdtype, device)
    if kind is TensorSupplyType.Uniform:
        return torch.empty(shape, device=device).uniform_(-1.0, 1.0).to(tdtype)
    if kind is TensorSupplyType.Normal:
        return torch.empty(shape, device=device).normal_(-1.0, 1.0).to(tdtype)
    return torch.randn(shape, device=device).to(tdtype)


def _packed_supply(shape, dtype, kind, device):
    """A float4_e2m1fn tensor as its bytes (torch's float4_e2m1fn_x2 where torch has it,
    int8 otherwise, as TileLang's ``T.empty`` gives): the codes of the values ``kind``
    asks for, two a byte (element 2k low)."""
    import numpy as np
    import torch    # the helpers make torch tensors; torch is only needed here
    if not shape or shape[-1] % dtype.packed:
        raise ValueError(f"a {dtype.name} tensor is held {dtype.packed} elements a byte; its "
                         f"last extent must be a multiple of {dtype.packed}, got {shape}")
    if kind is TensorSupplyType.Zero:
        values = np.zeros(shape, np.float32)
    elif kind is TensorSupplyType.One:
        values = np.ones(shape, np.float32)
    elif kind in (TensorSupplyType.Integer, TensorSupplyType.Auto):
        values = np.random.randint(-2, 3, shape).astype(np.float32)
    else:
        values = np.random.uniform(-1.0, 1.0, shape).astype(np.float32) * 6
    codes = float4_codes(values)
    packed = (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)
    storage = getattr(torch, "float4_e2m1fn_x2", torch.int8)
    return torch.from_numpy(packed).to(device).view(storage)


def get_tensor_supply(supply_type: TensorSupplyType = TensorSupplyType.Integer):
    """TileLang's ``get_tensor_supply(kind)``: a function of a parameter description (an
    object with ``shape`` and ``dtype``: a ``T.Tensor(...)`` annotation, a tensor, a
    ``TensorSpec``) that returns a tensor filled as ``kind`` says. A symbolic extent is a
    ValueError (random inputs need static shapes)."""
    if not isinstance(supply_type, TensorSupplyType):
        raise TypeError(f"get_tensor_supply: expected a TensorSupplyType, got {supply_type!r}")

    def get_tensor(param):
        shape, dtype = getattr(param, "shape", None), getattr(param, "dtype", None)
        if shape is None or dtype is None:
            raise TypeError(f"get_tensor_supply: a parameter has a shape and a dtype; got "
                            f"{param!r}")
        if any(isinstance(d, SymbolicInt) or not hasattr(d, "__index__") for d in shape):
            raise ValueError(f"get_tensor_supply: the shape {tuple(shape)} has symbolic "
                             "extents; random tensors need a static shape")
        return supply(shape, dtype, supply_type)
    return get_tensor


def torch_assert_close(tensor_a, tensor_b, rtol=1e-2, atol=1e-3, max_mismatched_ratio=0.001,
                       verbose: bool = False, equal_nan: bool = True, check_device: bool = True,
                       check_dtype: bool = True, check_layout: bool = True,
                       check_stride: bool = False, base_name: str = "LHS",
                       ref_name: str = "RHS"):
    """TileLang's comparison: the shapes (and, as asked, devices, dtypes, layouts and
    strides) must agree; at most ``int(numel * max_mismatched_ratio)`` elements may
    differ by more than ``atol + rtol * |tensor_b|`` (a NaN matches a NaN when
    ``equal_nan``). Raises AssertionError saying how many differ, the first one and the
    largest differences; returns True."""
    import torch    # the helpers compare torch tensors; torch is only needed here
    a, b = tensor_a, tensor_b

    def mismatch(what, x, y):
        raise AssertionError(f"The values for attribute '{what}' do not match: {x} != {y}.")
    if a.shape != b.shape:
        mismatch("shape", a.shape, b.shape)
    if check_layout and a.layout != b.layout:
        mismatch("layout", a.layout, b.layout)
    if check_stride and a.layout == torch.strided and a.stride() != b.stride():
        mismatch("stride()", a.stride(), b.stride())
    if check_device and a.device != b.device:
        mismatch("device", a.device, b.device)
    if check_dtype and a.dtype != b.dtype:
        mismatch("dtype", a.dtype, b.dtype)
    if a.device != b.device:
        a, b = a.cpu(), b.cpu()
    if a.dtype != b.dtype:
        wide = {torch.uint16, torch.uint32, torch.uint64}
        ta = torch.int64 if a.dtype in wide else a.dtype
        tb = torch.int64 if b.dtype in wide else b.dtype
        common = torch.promote_types(ta, tb)
        a, b = a.to(common), b.to(common)
    if a.layout != b.layout:
        a = a.to_dense() if a.layout != torch.strided else a
        b = b.to_dense() if b.layout != torch.strided else b
    bad = ~torch.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    count, total = int(bad.sum().item()), a.numel()
    allowed = int(total * max_mismatched_ratio)
    if verbose:
        print(f"Number of mismatched elements: {count} / {total} (allowed: {allowed})")
    if count <= allowed:
        return True
    flat = int(torch.argmax(bad.reshape(-1).int()).item())
    index = [int(i) for i in torch.unravel_index(torch.tensor(flat), a.shape)]
    x, y = a.reshape(-1)[flat].item(), b.reshape(-1)[flat].item()
    diff = (a.double() - b.double()).abs()
    relative = diff / (b.double().abs() + 1e-12)
    raise AssertionError(
        f"Too many mismatched elements: {count} > {allowed} ({max_mismatched_ratio:.2%} "
        f"allowed, got {count / total:.2%}).\nFirst mismatch at index {index}: "
        f"{base_name}={x:.6f}, {ref_name}={y:.6f}, abs_diff={abs(x - y):.6f}\n"
        f"Greatest absolute difference: {diff.max().item()}, greatest relative difference: "
        f"{relative.max().item()}")
