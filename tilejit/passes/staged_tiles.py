"""Part of tile allocation: shared tiles a kernel stacks itself, used one 2-d slice at a
time, become staged tiles (the form a software pipeline gives its own tiles).

Seed 000's warp-specialized GEMM keeps its ring of stages in one tile::

    A_shared = T.alloc_shared((num_stages, block_M, block_K), dtype)
    T.tma_copy(A[...], A_shared[ko % num_stages, :, :], barrier=...)
    T.gemm(A_shared[ko % num_stages, :, :], B_shared[ko % num_stages, :, :], C_local)

When every use of a shared tile of three or more dimensions indexes its first dimension
and takes the rest whole (``X[e, :, :]``), a region of it (``X[e, :, :64]``, a gemm
operand) or one element of it (``X[e, i, j]``, also a thread's ``T.ptx_cp_async`` into
it) or a copy's region of it (``T.copy(acc, X[s, :, 64:])``), the tile is
allocated as ``num_stages`` versions of the rest (``Tile.stages``, each version at its own
128-byte aligned offset and in its own layout, as the pipeline's stages are) and each use
becomes ``__tj_stage(X, e)`` (an element ``__tj_stage(X, e)[i, j]``, a region
``__tj_stage(X, e)[:, :64]``): a gemm reads one version through its descriptors, TMA
writes one version's boxes. Any other use (the tile itself) keeps the tile as it is
written, but ``T.annotate_layout({X: make_swizzled_layout(X)})``: each version is a gemm
operand's tile, laid out swizzled as such, and the entry is dropped (a GQA kernel
annotates its stacked K/V ring so).

The barrier pass takes a stage expression the kernel wrote as naming the whole tile
(``Tile.user_staged``): unlike the pipeline's, nothing guarantees two of them differ.
"""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import resolve_static
from tilejit.ir.markers import CP_ASYNC, REGION, STAGE
from tilejit.passes.static_eval import NotStatic


def _full(node) -> bool:
    return isinstance(node, ast.Slice) and node.lower is None and node.upper is None \
        and node.step is None


def _view_index(node, name, ndim):
    """The stage expression of a use of tile ``name`` that is a whole-version view, else
    None."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
            and node.value.id == name and isinstance(node.slice, ast.Tuple):
        first, *rest = node.slice.elts
        if len(rest) == ndim - 1 and not isinstance(first, ast.Slice) and all(map(_full, rest)):
            return first
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id == REGION and isinstance(node.args[0], ast.Name) \
            and node.args[0].id == name:
        kinds, starts, ends = node.args[1].value, node.args[2].elts, node.args[3].elts
        if kinds == "p" + "s" * (ndim - 1) and all(
                isinstance(s, ast.Constant) and s.value == 0 for s in starts[1:]) and all(
                isinstance(e, ast.Constant) and e.value is None for e in ends):
            return starts[0]
    return None


def _region_index(node, name, ndim):
    """(stage expression, the slices in the version) of ``X[s, a:b, c:d]``, a region of
    one version (a gemm operand: half of a stage's columns), else None."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
            and node.value.id == name and isinstance(node.slice, ast.Tuple) \
            and len(node.slice.elts) == ndim:
        first, *rest = node.slice.elts
        if not isinstance(first, ast.Slice) and all(isinstance(r, ast.Slice) for r in rest) \
                and not all(map(_full, rest)):
            return first, rest
    return None


def _version_region(node, name, ndim):
    """(stage expression, the region call of the version) of ``REGION(X, "pss", (s, a, b),
    (_, c, d), ...)``, a region of part of one version (``T.copy(acc, S[0, :, 64:])``),
    else None."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id == REGION and isinstance(node.args[0], ast.Name) \
            and node.args[0].id == name and len(node.args) == 5:
        kinds, starts, ends = node.args[1].value, node.args[2].elts, node.args[3].elts
        if kinds == "p" + "s" * (ndim - 1):
            extents = node.args[4].value
            rest = ",".join(extents.split(",")[1:]) if extents else extents
            region = ast.Call(node.func, [None, ast.Constant(kinds[1:]),
                                          ast.Tuple(starts[1:], ast.Load()),
                                          ast.Tuple(ends[1:], ast.Load()), ast.Constant(rest)],
                              [])
            return starts[0], region
    return None


def _copy_element(node, name, ndim):
    """(stage expression, the element's indices in the version) of a thread's copy into
    ``X[s, i, j]`` (``__tj_cp_async(X, (s, i, j), ...)``), else None."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id == CP_ASYNC and isinstance(node.args[0], ast.Name) \
            and node.args[0].id == name and isinstance(node.args[1], ast.Tuple) \
            and len(node.args[1].elts) == ndim:
        return node.args[1].elts[0], node.args[1].elts[1:]
    return None


def _element_index(node, name, ndim):
    """(stage expression, the element's indices in the version) of ``X[s, i, j]``, a use
    of one element of a version, else None."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
            and node.value.id == name and isinstance(node.slice, ast.Tuple) \
            and len(node.slice.elts) == ndim \
            and not any(isinstance(e, ast.Slice) for e in node.slice.elts):
        return node.slice.elts[0], node.slice.elts[1:]
    return None


def _swizzled_entries(node, namespace) -> list | None:
    """The keys of a ``T.annotate_layout({X: make_swizzled_layout(X), ...})`` call whose
    layout is X's own swizzle (None: not such a call)."""
    if not (isinstance(node, ast.Call) and resolve_static(node.func, namespace)
            is T.annotate_layout and len(node.args) == 1 and isinstance(node.args[0], ast.Dict)):
        return None
    out = []
    for k, v in zip(node.args[0].keys, node.args[0].values):
        fn = resolve_static(v.func, namespace) if isinstance(v, ast.Call) else None
        if isinstance(k, ast.Name) and getattr(fn, "__name__", "") == "make_swizzled_layout" \
                and getattr(fn, "__module__", "").startswith("tilejit.") and v.args and \
                isinstance(v.args[0], ast.Name) and v.args[0].id == k.id:
            out.append(k.id)
    return out


class _Uses(syntax.NodeVisitor):
    """Whether each candidate tile is used only as whole-version views."""

    def __init__(self, candidates, namespace):
        self.candidates = candidates     # name -> ndim
        self.namespace = namespace
        self.ok = {name: True for name in candidates}

    def visit_Subscript(self, node):
        self._check(node)

    def visit_Call(self, node):
        swizzled = _swizzled_entries(node, self.namespace)
        if swizzled:                    # X's own swizzle: each version's, as a gemm's
            for k, v in zip(node.args[0].keys, node.args[0].values):
                if not (isinstance(k, ast.Name) and k.id in swizzled):
                    self.visit(k)
                    self.visit(v)
            return
        if not self._check(node):
            self.generic_visit(node)

    def visit_Name(self, node):
        if node.id in self.candidates and isinstance(node.ctx, ast.Load):
            self.ok[node.id] = False        # the tile itself: a copy, a macro argument

    def _check(self, node) -> bool:
        """True when ``node`` is a view of a candidate (its index is visited)."""
        for name, ndim in self.candidates.items():
            index = _view_index(node, name, ndim)
            if index is not None:
                self.visit(index)
                return True
            element = _element_index(node, name, ndim) or _region_index(node, name, ndim)
            if element is not None:
                for e in (element[0], *element[1]):
                    self.visit(e)
                return True
            element = _copy_element(node, name, ndim)
            if element is not None:
                for e in (element[0], *element[1], *node.args[2:]):
                    self.visit(e)
                return True
            region = _version_region(node, name, ndim)
            if region is not None:
                for e in (region[0], *region[1].args[2].elts, *region[1].args[3].elts):
                    self.visit(e)
                return True
        if isinstance(node, ast.Subscript):
            self.generic_visit(node)
        return False


class _Rewrite(syntax.NodeTransformer):
    def __init__(self, staged, namespace):
        self.staged = staged            # name -> ndim
        self.namespace = namespace

    def _view(self, node):
        for name, ndim in self.staged.items():
            index = _view_index(node, name, ndim)
            if index is not None:
                return ast.copy_location(self._stage(name, index), node)
            element = _element_index(node, name, ndim) or _region_index(node, name, ndim)
            if element is not None:            # X[s, i, j] → stage(X, s)[i, j]
                stage, rest = element
                indices = ast.Tuple([self.visit(e) for e in rest], ast.Load())
                return ast.copy_location(ast.Subscript(self._stage(name, stage), indices,
                                                       node.ctx), node)
            region = _version_region(node, name, ndim)
            if region is not None:             # REGION(X, "pss", …) → REGION(stage(X, s), "ss", …)
                stage, call = region
                call.args[0] = self._stage(name, stage)
                call.args[2:4] = [self.visit(a) for a in call.args[2:4]]
                return ast.copy_location(call, node)
            element = _copy_element(node, name, ndim)
            if element is not None:            # a copy into X[s, i, j]: into stage(X, s)
                stage, rest = element
                node.args[0] = self._stage(name, stage)
                node.args[1] = ast.Tuple([self.visit(e) for e in rest], ast.Load())
                node.args[2:] = [self.visit(a) for a in node.args[2:]]
                return node
        return None

    def _stage(self, name, index):
        return ast.Call(ast.Name(STAGE, ast.Load()), [ast.Name(name, ast.Load()),
                                                      self.visit(index)], [])

    def visit_Subscript(self, node):
        return self._view(node) or self.generic_visit(node)

    def visit_Call(self, node):
        swizzled = _swizzled_entries(node, self.namespace)
        if swizzled:                    # a staged tile's own swizzle: its versions have it
            pairs = [(k, v) for k, v in zip(node.args[0].keys, node.args[0].values)
                     if not (isinstance(k, ast.Name) and k.id in swizzled
                             and k.id in self.staged)]
            node.args[0].keys = [k for k, _ in pairs]
            node.args[0].values = [v for _, v in pairs]
        return self._view(node) or self.generic_visit(node)


def stage_views(fdef: ast.FunctionDef, ctx, static) -> tuple[ast.FunctionDef, dict]:
    """``fdef`` with the stacked shared tiles' allocations made one version and their
    uses ``__tj_stage`` views; returns it and {tile name: number of versions}."""
    allocs = {}
    for node in syntax.walk(fdef):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Call)
                and resolve_static(node.value.func, ctx.namespace) is T.alloc_shared
                and node.value.args):
            continue
        try:
            shape = static.shape(node.value.args[0])
        except NotStatic:
            continue                     # tile allocation reports it
        if len(shape) >= 3:
            allocs[node.targets[0].id] = (node, shape)
    if not allocs:
        return fdef, {}
    uses = _Uses({name: len(shape) for name, (_, shape) in allocs.items()}, ctx.namespace)
    for stmt in fdef.body:
        uses.visit(stmt)
    staged = {name: len(allocs[name][1]) for name, ok in uses.ok.items() if ok}
    if not staged:
        return fdef, {}
    fdef = _Rewrite(staged, ctx.namespace).visit(fdef)
    for name in staged:
        node, shape = allocs[name]
        node.value.args[0] = ast.copy_location(
            ast.Tuple([ast.Constant(s) for s in shape[1:]], ast.Load()), node.value.args[0])
    return fdef, {name: allocs[name][1][0] for name in staged}
