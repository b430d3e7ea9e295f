"""TileLang's user layouts: ``T.Layout(shape, forward_fn)`` and the swizzle helpers
(``tilelang.layout``'s ``make_swizzled_layout``, ``make_full/half/quarter_bank_swizzled_layout``,
``make_linear_layout``; ``T.get_swizzle_layout``, ``T.make_mma_swizzle_layout``).

A layout maps each logical index ``(i, j, ...)`` of a tile of ``shape`` to a physical
index: ``forward_fn(i, j, ...)`` returns one expression or a list of them, built from
Python arithmetic on the indices (``+ - * // % ^ & | << >>``). A list ``[o0, ..., ok]``
is a physical index of an ``output shape`` (each extent one past the largest value of
its expression), stored row-major; the layout of a tile must be a bijection onto its
``size`` elements. Worked example, the 64-byte swizzle of a 16x32 float16 tile (16-byte
vectors of 8 elements, four per row, the vector index XOR-ed with bits 1..2 of the row)::

    >>> L = make_half_bank_swizzled_layout(16, 32, 16)
    >>> L.get_output_shape()             # (column atom, row, element in the atom)
    (1, 16, 32)
    >>> [L.offset(r, 0) for r in range(4)]
    [0, 32, 72, 104]
    >>> L.check((16, 32))                # a bijection onto the tile's 512 elements

The functions are evaluated with numpy arrays of all the indices at once (the offsets
of every element, ``offsets``), by the compiler with symbolic indices (the addressing
code, ``ir/function_layout.py``), and by ``get_swizzle_layout`` on whatever its caller
gives it; the definitions here use only operators, so one definition serves all three.
Imports nothing from tilejit but the language's dtypes.
"""
from __future__ import annotations

import inspect
import math
import threading
import types
from collections import OrderedDict
from typing import NamedTuple

import numpy as np

from tilejit.language.dtypes import as_dtype


class LayoutError(ValueError):
    """A layout that is not one a tile can have: the argument, what was expected, and
    what was received."""


def _shape(shape, what: str) -> tuple:
    try:
        out = tuple(int(s) for s in shape)
    except TypeError:
        out = None
    if not out or any(s <= 0 for s in out) or any(
            isinstance(s, bool) for s in shape):
        raise LayoutError(f"{what}: expected a non-empty list of positive extents, "
                          f"got {shape!r}")
    return out


def _arity(fn):
    """(least, most) positional arguments ``fn`` takes (most None: ``*args``)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 0, None
    least = most = 0
    for p in params:
        if p.kind == p.VAR_POSITIONAL:
            most = None
        elif p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            least += p.default is p.empty
            most = None if most is None else most + 1
    return least, most


def evaluate_user_function(fn, what: str, shape, args):
    """``fn(*args)`` (numpy index arrays), a ``LayoutError`` naming ``what`` when the
    user's function fails on them."""
    try:
        return fn(*args)
    except LayoutError:
        raise
    except Exception as e:       # the user's function, whatever it raised
        raise LayoutError(
            f"{what} could not be evaluated on the indices of shape {list(shape)}: "
            f"{type(e).__name__}: {e} (a layout is built from + - * // % ^ & | << >> on "
            f"the indices)") from None


def _name(fn) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


class _Evaluation:
    """A layout function's values over a shape and what was checked of them."""
    __slots__ = ("outputs", "offsets", "bijective", "injective")

    def __init__(self):
        self.outputs = self.offsets = None
        self.bijective = self.injective = False


_EVALUATIONS: OrderedDict = OrderedDict()    # _function_key -> _Evaluation, recent last
_EVALUATIONS_KEPT = 16
_EVALUATIONS_LOCK = threading.Lock()         # (threads may simulate at once)


def _function_key(fn, shape):
    """What a function's values over ``shape`` depend on: its code, defaults, closure
    values and the module globals its code names (each value with its type: ``1`` and
    ``1.0`` give other values); None when one of them is not a value that cannot change
    (a number, a string, a tuple of them, a module, a function or a class: an object
    whose attributes may change between two launches is not one)."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    try:
        names = getattr(fn, "__globals__", {})
        values = [c.cell_contents for c in fn.__closure__ or ()]
        values += [names[n] for n in code.co_names if n in names]
        values += list(fn.__defaults__ or ())
    except ValueError:                  # an empty cell
        return None
    if not all(_constant(v) for v in values):
        return None
    return (code, shape, tuple((type(v), v) for v in values))


_CONSTANT_TYPES = (int, float, complex, bool, str, bytes, type(None), np.generic, type,
                   types.ModuleType, types.FunctionType, types.BuiltinFunctionType)


def _constant(value) -> bool:
    if isinstance(value, (tuple, frozenset)):
        return all(_constant(v) for v in value)
    return isinstance(value, _CONSTANT_TYPES)


def _frozen(values: np.ndarray) -> np.ndarray:
    values.flags.writeable = False      # (shared by the layouts of one function)
    return values


def _evaluation(fn, shape) -> _Evaluation:
    """The evaluation layouts of one function share: a kernel makes its layout anew in
    every block (``T.Layout(shape, lambda ...)`` in its body), and the simulator checks
    it at each; the same code over the same values is the same map."""
    key = _function_key(fn, shape)
    if key is None:
        return _Evaluation()
    with _EVALUATIONS_LOCK:
        found = _EVALUATIONS.get(key)
        if found is None:
            found = _EVALUATIONS[key] = _Evaluation()
            if len(_EVALUATIONS) > _EVALUATIONS_KEPT:
                _EVALUATIONS.popitem(last=False)
        else:
            _EVALUATIONS.move_to_end(key)
    return found


class ForwardVar(NamedTuple):
    """An input dimension of a layout: TileLang's ``IterVar`` ``name`` over ``[0, extent)``."""
    name: str
    extent: int


class IndexFunction:
    """An index computed from a layout's input indices (where TileLang returns a
    ``PrimExpr`` over the layout's variables): callable on ints or numpy arrays, and equal
    (``==``) to another over the same ``shape`` when equal at every index of it."""

    def __init__(self, shape, fn):
        self.shape, self.fn = tuple(shape), fn

    def __call__(self, *indices):
        return self.fn(*indices)

    def values(self):
        """The value at every index of ``shape`` (int64, of ``shape``)."""
        grid = tuple(np.indices(self.shape, dtype=np.int64))
        return np.broadcast_to(np.asarray(self.fn(*grid), dtype=np.int64), self.shape)

    def __eq__(self, other) -> bool:
        if not isinstance(other, IndexFunction):
            return NotImplemented
        return self.shape == other.shape and np.array_equal(self.values(), other.values())

    __hash__ = None

    def __repr__(self) -> str:
        return f"IndexFunction({list(self.shape)}, {_name(self.fn)})"


class Layout:
    """``T.Layout(shape, forward_fn)``: TileLang's layout of a tile (``tilelang.layout.Layout``).

    ``forward_fn`` takes one index per dimension of ``shape`` and returns the physical
    index, one expression or a list (a multi-dimensional physical index, stored
    row-major over ``get_output_shape()``). ``T.annotate_layout({tile: layout})`` gives
    a shared tile this layout; the compiler then addresses the tile through it."""

    def __init__(self, shape, forward_fn):
        self._shape = _shape(shape, "T.Layout shape")
        if not callable(forward_fn):
            raise LayoutError(f"T.Layout forward_fn: expected a function of the "
                              f"{len(self._shape)} indices, got {forward_fn!r}")
        least, most = _arity(forward_fn)
        n = len(self._shape)
        if n < least or (most is not None and n > most):
            takes = f"{least}" if least == most else (
                f"{least} or more" if most is None else f"{least} to {most}")
            raise LayoutError(
                f"T.Layout forward_fn: expected a function of {n} indices (one per "
                f"dimension of shape {list(self._shape)}), got {_name(forward_fn)} taking "
                f"{takes}")
        self.forward_fn = forward_fn
        self._known = None          # its _Evaluation, found at the first use

    # -- TileLang's methods ----------------------------------------------------------

    def get_input_shape(self) -> tuple:
        return self._shape

    def get_output_shape(self) -> tuple:
        """One past the largest value of each output expression over the whole shape."""
        return tuple(int(o.max()) + 1 for o in self._evaluated())

    def get_forward_index(self):
        """The forward function (TileLang returns its index expressions, ``PrimExpr``s)."""
        return self.forward_fn

    def get_forward_vars(self) -> tuple:
        """One ``ForwardVar(name, extent)`` per input dimension (TileLang's ``IterVar``s
        ``i0, i1, ...`` over ``[0, extent)``)."""
        return tuple(ForwardVar(f"i{k}", n) for k, n in enumerate(self._shape))

    def get_linearized_forward_index(self) -> IndexFunction:
        """The physical index stored row-major over ``get_output_shape()``, as a function
        of the input indices (TileLang: one ``PrimExpr``). Comparable by ``==`` (equal at
        every index of the input shape) and callable on ints or numpy arrays."""
        extents = self.get_output_shape()

        def linearized(*idx):
            flat = 0
            for o, extent in zip(self.forward(*idx), extents):
                flat = flat * extent + o
            return flat
        linearized.__name__ = f"linearized {_name(self.forward_fn)}"
        return IndexFunction(self._shape, linearized)

    def map_forward_index(self, indices) -> list:
        """The physical index (a list, one entry per output dimension) of ``indices``."""
        return list(self.forward(*indices))

    def __call__(self, *indices) -> list:
        return self.map_forward_index(indices)

    def is_equal(self, other) -> bool:
        """The same map: equal input shapes, equal output shapes and equal outputs at
        every index (TileLang compares the output expressions structurally)."""
        if not isinstance(other, Layout) or other._shape != self._shape:
            return False
        if self._evaluation is other._evaluation:
            return True         # one function over the same values
        mine, theirs = self._evaluated(), other._evaluated()
        return (self.get_output_shape() == other.get_output_shape()
                and all(np.array_equal(a, b) for a, b in zip(mine, theirs)))

    def expand(self, leading_shape) -> Layout:
        """This layout under new leading dimensions: input shape ``leading_shape +
        get_input_shape()``, index ``(*lead, *rest)`` mapped to ``[*lead, *self(*rest)]``
        (a stack of tiles of this layout). An empty ``leading_shape`` returns ``self``."""
        if isinstance(leading_shape, (int, np.integer)) and not isinstance(leading_shape, bool):
            leading_shape = [leading_shape]
        if not isinstance(leading_shape, (list, tuple)):
            raise TypeError(f"Layout.expand leading_shape: expected an int or a list of "
                            f"ints, got {type(leading_shape).__name__} {leading_shape!r}")
        if not leading_shape:
            return self
        for k, extent in enumerate(leading_shape):
            if isinstance(extent, bool) or not isinstance(extent, (int, np.integer)):
                raise TypeError(f"Layout.expand leading_shape[{k}]: expected an int, got "
                                f"{type(extent).__name__} {extent!r}")
            if extent <= 0:
                raise LayoutError(f"Layout.expand leading_shape[{k}]: expected an extent "
                                  f"> 0, got {extent}")
        lead, inner = len(leading_shape), self.forward

        def expanded(*idx):
            return [*idx[:lead], *inner(*idx[lead:])]
        expanded.__name__ = f"{_name(self.forward_fn)} expanded"
        return Layout([*leading_shape, *self._shape], expanded)

    def repeat(self, dim: int, factor: int) -> Layout:
        """This layout tiled ``factor`` times along input dimension ``dim`` (negative
        counts from the end): index ``i`` of that dimension maps to ``[i // extent,
        *self(..., i % extent, ...)]``, a new leading output for the copy. ``factor`` 1
        returns ``self``."""
        for arg, value in (("dim", dim), ("factor", factor)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"Layout.repeat {arg}: expected an int, got "
                                f"{type(value).__name__} {value!r}")
        if factor < 1:
            raise LayoutError(f"Layout.repeat factor: expected an int >= 1, got {factor}")
        if factor == 1:
            return self
        n = len(self._shape)
        if not -n <= dim < n:
            raise LayoutError(f"Layout.repeat dim: expected a dimension in [{-n}, {n}) of "
                              f"input shape {list(self._shape)}, got {dim}")
        dim, inner = int(dim) % n, self.forward
        extent = self._shape[dim]

        def repeated(*idx):
            own = list(idx)
            own[dim] = idx[dim] % extent
            return [idx[dim] // extent, *inner(*own)]
        repeated.__name__ = f"{_name(self.forward_fn)} repeated"
        shape = list(self._shape)
        shape[dim] *= int(factor)
        return Layout(shape, repeated)

    def inverse(self) -> Layout:
        """The inverse map: input shape ``get_output_shape()``, each physical index mapped
        to the list of input indices stored there. The layout must be a bijection of its
        input shape onto its output shape (a ``LayoutError`` otherwise). Evaluated by
        table, on ints or numpy arrays."""
        out_shape = self.get_output_shape()
        if math.prod(out_shape) != self.size:
            raise LayoutError(
                f"Layout.inverse: expected a bijection of input shape {list(self._shape)} "
                f"onto its output shape, got output shape {list(out_shape)} of "
                f"{math.prod(out_shape)} elements for {self.size} inputs")
        self.check()
        table = np.empty((self.size, len(self._shape)), dtype=np.int64)
        table[self.offsets().reshape(-1)] = np.indices(self._shape).reshape(
            len(self._shape), -1).T

        def inverse(*out):
            flat = 0
            for o, extent in zip(out, out_shape):
                if not isinstance(o, (int, np.integer, np.ndarray)):
                    raise LayoutError(
                        f"Layout.inverse of {_name(self.forward_fn)} is evaluated by table, "
                        f"on int or numpy indices, got {type(o).__name__} (an annotated "
                        f"tile takes an inverse only where it equals row-major or a "
                        f"swizzle)")
                flat = flat * extent + o
            found = table[flat]
            if found.ndim == 1:
                return [int(x) for x in found]
            return [found[..., k] for k in range(len(self._shape))]
        inverse.__name__ = f"{_name(self.forward_fn)} inverse"
        return Layout(out_shape, inverse)

    def __repr__(self) -> str:
        return f"T.Layout({list(self._shape)}, {_name(self.forward_fn)})"

    # -- evaluation ------------------------------------------------------------------

    @property
    def size(self) -> int:
        return math.prod(self._shape)

    def forward(self, *indices) -> tuple:
        """``forward_fn(*indices)`` as a tuple (a single expression is a 1-tuple)."""
        out = self.forward_fn(*indices)
        if isinstance(out, (list, tuple)):
            if not out:
                raise LayoutError(f"T.Layout forward_fn: expected a physical index (an "
                                  f"expression or a list of them), got {out!r}")
            return tuple(out)
        return (out,)

    @property
    def _evaluation(self) -> _Evaluation:
        if self._known is None:
            self._known = _evaluation(self.forward_fn, self._shape)
        return self._known

    def __tj_key__(self):
        """What the disk cache keys a kernel that reads this layout by: its values
        (``runtime/disk_cache._value_data``), not its functions' code."""
        return [list(self._shape), list(self._evaluated())]

    def _evaluated(self) -> tuple:
        """Each output expression over the whole shape, int64 arrays of ``shape``."""
        known = self._evaluation
        if known.outputs is None:
            grid = tuple(np.indices(self._shape, dtype=np.int64))
            outs = evaluate_user_function(
                lambda *g: tuple(np.broadcast_to(np.asarray(o), self._shape)
                                 for o in self.forward(*g)),
                f"T.Layout forward_fn {_name(self.forward_fn)}", self._shape, grid)
            for o in outs:
                if not np.issubdtype(o.dtype, np.integer):
                    raise LayoutError(
                        f"T.Layout forward_fn {_name(self.forward_fn)}: expected integer "
                        f"physical indices, got values of type {o.dtype}")
            known.outputs = tuple(_frozen(o.astype(np.int64)) for o in outs)
        return known.outputs

    def offsets(self):
        """The flat physical index of every element (int64, of the input shape): the
        outputs stored row-major over the output shape."""
        known = self._evaluation
        if known.offsets is None:
            known.offsets = _frozen(self._offsets())
        return known.offsets

    def _offsets(self):
        outs = self._evaluated()
        for k, o in enumerate(outs):
            if (o < 0).any():
                at = tuple(int(x) for x in np.argwhere(o < 0)[0])
                raise LayoutError(
                    f"T.Layout forward_fn {_name(self.forward_fn)}: physical index out of "
                    f"range: output {k} at index {list(at)} is {int(o[at])}, expected a "
                    f"value >= 0")
        flat = np.zeros(self._shape, dtype=np.int64)
        for o, extent in zip(outs, self.get_output_shape()):
            flat = flat * extent + o
        return flat

    def offset(self, *index) -> int:
        """The flat physical index of one element."""
        return int(self.offsets()[tuple(index)])

    def check(self, shape=None, name: str = "the tile", injective: bool = False) -> None:
        """A ``LayoutError`` unless this layout maps ``shape`` (the tile's; default its
        own input shape) one to one onto ``[0, size)``; with ``injective`` (a shared
        tile's layout, as TileLang allows) onto distinct indices that may run past the
        tile's size (``lambda i: i * 2``: the tile's storage grows to hold them)."""
        fn = _name(self.forward_fn)
        if shape is not None and tuple(int(s) for s in shape) != self._shape:
            raise LayoutError(f"T.annotate_layout: the layout of {name} has input shape "
                              f"{list(self._shape)}, expected the tile's shape "
                              f"{[int(s) for s in shape]}")
        known = self._evaluation
        if known.bijective or (injective and known.injective):
            return              # checked once (the simulator asks at every block)
        flat = self.offsets()
        size = self.size
        if injective:
            order = np.argsort(flat, axis=None, kind="stable")
            ranked = flat.reshape(-1)[order]
            same = np.nonzero(ranked[1:] == ranked[:-1])[0]
            if same.size:
                a, b = (np.unravel_index(order[k], self._shape) for k in (same[0],
                                                                          same[0] + 1))
                raise LayoutError(
                    f"T.annotate_layout: the layout of shared buffer `{name.strip(chr(39))}` "
                    f"(forward_fn {fn}) must be injective: indices {[int(x) for x in a]} and "
                    f"{[int(x) for x in b]} both map to physical coordinates "
                    f"{int(ranked[same[0]])}")
            known.injective = True
            known.bijective = bool(flat.max() < size) if flat.size else True
            return
        if (flat >= size).any():
            at = tuple(int(x) for x in np.argwhere(flat >= size)[0])
            raise LayoutError(
                f"T.Layout forward_fn {fn} for {name}: physical index out of range: index "
                f"{list(at)} maps to {int(flat[at])} (output shape "
                f"{list(self.get_output_shape())}), expected a value in [0, {size}) (the "
                f"tile's {size} elements)")
        order = np.argsort(flat, axis=None, kind="stable")
        ranked = flat.reshape(-1)[order]
        same = np.nonzero(ranked[1:] == ranked[:-1])[0]
        if same.size:
            a, b = (np.unravel_index(order[k], self._shape) for k in (same[0], same[0] + 1))
            raise LayoutError(
                f"T.Layout forward_fn {fn} for {name}: not a bijection: indices "
                f"{[int(x) for x in a]} and {[int(x) for x in b]} both map to physical "
                f"index {int(ranked[same[0]])}; expected each of the {size} elements at its "
                f"own index in [0, {size})")
        known.bijective = True


# -- the swizzles ------------------------------------------------------------------------
#
# Shared memory is 32 banks of 4 bytes: a 128-byte line touches each once, eight 16-byte
# vectors. A swizzle of ``vectors`` = 8, 4 or 2 vectors (128, 64 or 32 bytes: full, half,
# quarter bank) cuts a tile's columns into atoms that wide, stacks each atom's rows
# (``(column atom, row, element)``, row-major), and XORs the vector index inside a row
# with bits of the row number, so the eight rows of an ldmatrix phase (8 x 16 bytes) sit
# in eight different vector slots. These are CuTe's SW128/64/32 layouts, the ones TMA and
# wgmma read (``ir/smem_layouts.py``).

def _swizzled(row, col, elem_bits: int, vectors: int):
    """(column atom, row, swizzled column in the atom) of ``vectors`` 16-byte vectors."""
    per_vector = 128 // elem_bits
    vec, inner = col // per_vector, col % per_vector
    atom, c = vec // vectors, vec % vectors
    return atom, row, (c ^ ((row % 8) // (8 // vectors))) * per_vector + inner


def _bits(dtype) -> int:
    if isinstance(dtype, int) and not isinstance(dtype, bool):
        return dtype
    return as_dtype(dtype).bits


def get_swizzle_layout(row_idx, col_idx, row_size, dtype, swizzle_bytes=None):
    """TileLang's ``get_swizzle_layout``: the physical index ``(column atom, row,
    column)`` of element ``(row_idx, col_idx)`` of a tile with rows of ``row_size``
    elements of ``dtype``, swizzled over ``swizzle_bytes`` (default: the row's bytes, at
    most 128). The row must be a multiple of 32 bytes."""
    bits = _bits(dtype)
    row_bytes = bits * int(row_size) // 8
    if row_bytes % 32:
        raise LayoutError(f"get_swizzle_layout row_size: expected rows of a multiple of 32 "
                          f"bytes, got {row_size} elements of {bits} bits ({row_bytes} "
                          f"bytes)")
    swizzle_bytes = min(128, row_bytes) if swizzle_bytes is None else int(swizzle_bytes)
    if swizzle_bytes not in (32, 64, 128):
        raise LayoutError(f"get_swizzle_layout swizzle_bytes: expected 32, 64 or 128, got "
                          f"{swizzle_bytes}")
    return _swizzled(row_idx, col_idx, bits, swizzle_bytes // 16)


def _buffer_info(args, what: str):
    """(rows, columns, element bits, leading extents) from a buffer or from ``(stride,
    continuous, element_size)``."""
    if len(args) == 1:
        buf = args[0]
        shape = _shape(getattr(buf, "shape", ()), f"{what} buffer shape")
        if len(shape) < 2:
            raise LayoutError(f"{what}: expected a buffer of 2 or more dimensions, got "
                              f"shape {list(shape)}")
        return shape[-2], shape[-1], as_dtype(buf.dtype).bits, shape[:-2]
    if len(args) == 3:
        stride, continuous, bits = (int(a) for a in args)
        return stride, continuous, bits, ()
    raise LayoutError(f"{what}: expected a buffer or (stride, continuous, element_size), "
                      f"got {len(args)} arguments")


def _expand(lead, rows, cols, fn2d, name):
    """A layout of ``lead + (rows, cols)`` whose leading indices are outermost."""
    def forward(*idx):
        return [*idx[:-2], *fn2d(idx[-2], idx[-1])]
    forward.__name__ = name
    return Layout([*lead, rows, cols], forward)


def _bank_swizzled(args, vectors: int, name: str):
    rows, cols, bits, lead = _buffer_info(args, name)
    per_vector = 128 // bits
    if rows % 8 or cols % (per_vector * vectors):
        raise LayoutError(
            f"{name}: expected a multiple of 8 rows and of {per_vector * vectors} columns "
            f"({vectors} vectors of 16 bytes of {bits}-bit elements), got a {rows}x{cols} "
            f"tile")
    return _expand(lead, rows, cols, lambda i, j: _swizzled(i, j, bits, vectors), name)


def make_full_bank_swizzled_layout(*args):
    """The 128-byte swizzle of a buffer (or of ``(stride, continuous, element_size)``)."""
    return _bank_swizzled(args, 8, "make_full_bank_swizzled_layout")


def make_half_bank_swizzled_layout(*args):
    """The 64-byte swizzle of a buffer (or of ``(stride, continuous, element_size)``)."""
    return _bank_swizzled(args, 4, "make_half_bank_swizzled_layout")


def make_quarter_bank_swizzled_layout(*args):
    """The 32-byte swizzle of a buffer (or of ``(stride, continuous, element_size)``)."""
    return _bank_swizzled(args, 2, "make_quarter_bank_swizzled_layout")


def make_linear_layout(*args):
    """Row-major: a buffer, or ``(stride, continuous)``."""
    if len(args) == 2:
        return Layout([int(args[0]), int(args[1])], _identity)
    if len(args) != 1:
        raise LayoutError(f"make_linear_layout: expected a buffer or (stride, continuous), "
                          f"got {len(args)} arguments")
    return Layout(_shape(args[0].shape, "make_linear_layout buffer shape"), _identity)


def _identity(*idx):
    return list(idx)


def make_swizzled_layout(buffer, k_major: bool = True, allow_pad: bool = True):
    """TileLang's ``make_swizzled_layout``: the widest bank swizzle a buffer's rows take
    (128, 64 bytes; 32 bytes too with ``allow_pad=False``, TileLang's Hopper choice), else
    row-major. Where TileLang pads rows (``allow_pad``, and its float64 and K-outer int8
    layouts) tilejit keeps them row-major: a tile's layout here is a bijection onto its
    elements."""
    rows, cols, bits, lead = _buffer_info((buffer,), "make_swizzled_layout")
    per_vector = 128 // bits if bits <= 128 else 0
    choices = (8, 4) if allow_pad else (8, 4, 2)
    for vectors in choices:
        if per_vector and rows % 8 == 0 and cols % (per_vector * vectors) == 0:
            return _expand(lead, rows, cols, lambda i, j, v=vectors: _swizzled(i, j, bits, v),
                           "make_swizzled_layout")
    return Layout([*lead, rows, cols], _identity)


def make_mma_swizzle_layout(shared_buf, is_smooth: bool = False):
    """TileLang's ``make_mma_swizzle_layout``: ``get_swizzle_layout`` on the last two
    dimensions of a buffer whose rows are a multiple of 64 bytes, else (or ``is_smooth``)
    the identity."""
    shape = _shape(shared_buf.shape, "make_mma_swizzle_layout buffer shape")
    bits = as_dtype(shared_buf.dtype).bits
    if is_smooth or shape[-1] * bits % 512 or len(shape) < 2:
        return Layout(shape, _identity)

    def mma_swizzle(*idx):
        return [*idx[:-2], *get_swizzle_layout(idx[-2], idx[-1], shape[-1], bits)]
    return Layout(shape, mma_swizzle)
