"""``T.annotate_layout({tile: layout})`` with TileLang's layouts: the layout a shared
tile gets from its annotation (called by ``layout_inference._annotate``).

The value is evaluated at compile time as Python: the kernel's globals, its compile-time
names, and each tile's name standing for a buffer with ``shape``, ``dtype`` and
``name`` (what ``make_swizzled_layout(A_shared)`` or the seeds' ``make_swizzle_layout``
read), so lambdas and the user's own helper functions work as in TileLang. A
``T.Layout`` is then checked (the tile's shape; a bijection onto its elements) and,
where it is equal at every element to a layout the compiler knows, replaced by that one
(``known_layout``: TileLang's full/half/quarter bank swizzles are tilejit's 128/64/32-byte
swizzles, which ldmatrix, TMA and wgmma read, ``ir/smem_layouts.canonical_layout``);
any other bijection is addressed through the user's function (``FunctionLayout``), which
``T.gemm`` reads on mma.sync (wgmma's descriptors and TMA's boxes take only the
canonical family, so a gemm on such a tile stays on mma.sync).
"""
from __future__ import annotations

import ast

import numpy as np

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import resolve_static
from tilejit.ir.addressing import row_major
from tilejit.ir.function_layout import FunctionLayout
from tilejit.language.fragment_layout import Fragment as UserFragment
from tilejit.language.layout import Layout as UserLayout
from tilejit.language.layout import LayoutError
from tilejit.layouts import ComposedLayout, Layout, make_swizzled_layout, swizzle_for_bytes
from tilejit.passes.static_eval import StaticEval


class TileBuffer:
    """What a shared tile's name means while an annotation is evaluated: TileLang's
    buffer attributes ``shape``, ``dtype``, ``name``."""

    def __init__(self, name, tile):
        self.name, self.shape, self.dtype = name, tuple(tile.shape), tile.dtype

    def __repr__(self):
        return f"<shared tile {self.name}: {self.dtype}{list(self.shape)}>"


def _assignments(fdef) -> dict:
    """name -> value of the names the kernel assigns exactly once."""
    counts, values = {}, {}
    for node in syntax.walk(fdef):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name):
            values[node.targets[0].id] = node.value
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            counts[node.id] = counts.get(node.id, 0) + 1
    return {n: v for n, v in values.items() if counts.get(n) == 1}


class AnnotationScope:
    """Evaluates annotation values; names the kernel assigns once (``layout =
    T.Layout(...)`` before the annotation) are evaluated when an annotation reads them."""

    def __init__(self, ctx, fdef):
        self.ctx = ctx
        self.scope = dict(ctx.namespace)
        self.scope.update(StaticEval(ctx.namespace, ctx.param_dtypes, fdef).env)
        self.tiles = {n: TileBuffer(n, t) for n, t in ctx.plan.tiles.items()}
        self.scope.update(self.tiles)
        self.assigned = _assignments(fdef)

    def value(self, node, depth=0):
        code = compile(syntax.fix_missing_locations(ast.Expression(node)), self.ctx.filename,
                       "eval")
        while True:
            try:
                return eval(code, self.scope)       # noqa: S307 - the kernel's own code
            except NameError as e:
                name = getattr(e, "name", None)
                value = self.assigned.get(name)
                if value is None or depth > 8 or isinstance(value, ast.Call) and \
                        resolve_static(value.func, self.ctx.namespace) in _ALLOCATIONS:
                    raise
                self.scope[name] = self.value(value, depth + 1)


_ALLOCATIONS = (T.alloc_shared, T.alloc_fragment, T.alloc_local, T.alloc_var)


def annotation_value(ctx, scope, name, value_node, line):
    """The value of ``{name: value_node}`` evaluated at compile time; a ``CompileError``
    at ``line`` when it cannot be."""
    try:
        return scope.value(value_node)
    except LayoutError as e:
        raise ctx.error(str(e), line) from None
    except Exception as e:       # the user's code, whatever it raised
        raise ctx.error(f"T.annotate_layout: the layout of {name!r}, "
                        f"`{ast.unparse(value_node)}`, must be known at compile time: "
                        f"{type(e).__name__}: {e}", line) from None


def annotated_layout(ctx, scope, name, tile, value_node, line):
    """(the tile's layout, why) for the annotation ``{name: value_node}``; a
    ``CompileError`` at ``line`` when the value is not a layout of this tile."""
    layout = annotation_value(ctx, scope, name, value_node, line)
    if isinstance(layout, UserFragment):
        raise ctx.error(f"T.annotate_layout: {name!r} is a shared tile, got a T.Fragment "
                        f"(`{ast.unparse(value_node)}`); a T.Fragment lays out a "
                        f"T.alloc_fragment tile, a shared tile takes a T.Layout", line)
    where = f"T.annotate_layout at line {line}"
    if isinstance(layout, (Layout, ComposedLayout)):
        if layout.size != tile.size:
            raise ctx.error(f"T.annotate_layout: expected a layout of {tile.size} elements "
                            f"for {name!r}, got {layout} ({layout.size} elements)", line)
        return layout, where
    if not isinstance(layout, UserLayout):
        raise ctx.error(f"T.annotate_layout: expected a T.Layout for {name!r}, got "
                        f"{layout!r} (`{ast.unparse(value_node)}`)", line)
    try:
        layout.check(tile.shape, repr(name), injective=True)
    except LayoutError as e:
        raise ctx.layout_error(str(e), line) from None
    known, what = known_layout(layout.offsets(), tuple(tile.shape), tile.dtype.itemsize)
    if known is not None:
        return known, f"{where} ({what})"
    fl = FunctionLayout(layout)
    try:
        problem = fl.check_unsigned()
    except LayoutError as e:        # a function not of index expressions (Layout.inverse)
        raise ctx.error(f"T.annotate_layout: the layout of {name!r} cannot be computed on "
                        f"the GPU: {e}", line) from None
    if problem is not None:
        raise ctx.error(
            f"T.annotate_layout: the layout of {name!r} cannot be computed on the GPU: "
            f"{problem}; the GPU computes indices in unsigned arithmetic, so keep every "
            f"intermediate value of forward_fn non-negative (add a multiple of the "
            f"divisor before // and %)", line)
    return fl, f"{where} (its own function)"


def known_layout(table, shape, itemsize):
    """(a tilejit layout equal to ``table`` at every element, its description), or
    (None, "")."""
    candidates = [(row_major(shape), "row-major")]
    if len(shape) == 2:
        candidates.append((make_swizzled_layout(shape, itemsize), "tilejit's swizzle"))
        rows, cols = shape
        for atom in (128, 64, 32):
            w = atom // itemsize
            if w == 0 or cols % w:
                continue
            sw = swizzle_for_bytes(atom, itemsize)
            if rows % 8 == 0:
                candidates.append((ComposedLayout(sw, 0, Layout(
                    ((8, rows // 8), (w, cols // w)), ((w, 8 * w), (1, rows * w)))),
                    f"the {atom}-byte swizzle"))
            candidates.append((ComposedLayout(sw, 0, row_major(shape)),
                               f"row-major with the {atom}-byte swizzle"))
    for layout, what in candidates:
        if np.array_equal(layout.offset_table(shape), table):
            return layout, what
    return None, ""
