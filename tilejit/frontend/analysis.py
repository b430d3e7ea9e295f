"""What the front end learns from a kernel's source before any call.

- ``kernel_outputs``: the outputs the kernel allocates with ``C = T.empty(shape,
  dtype)`` before ``T.Kernel``, and what its final ``return`` gives back.
- ``compile_time_shapes``: the shape entries (parameter, dimension) the program needs
  at compile time — a ``T.Parallel`` extent or the block size computed from
  ``A.shape[i]`` — on which each specialization is made automatically.
- ``whole_shape_params``: the tensors a ``T.copy`` moves whole
  (``T.copy(W, w)``: a weight vector into a fragment), or copies region to region with
  another tensor, or ``T.annotate_layout`` lays out. Specializing on them costs nothing
  where they equal an extent already compiled in, and turns the copy's bounds checks
  into constants: no edge path, every load in flight at once.
"""
from __future__ import annotations

import ast
import copy

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import (KernelSource, is_call_to, is_launch, names_bound_to,
                                     resolve_static)


def kernel_outputs(ks: KernelSource) -> tuple[list[str], tuple[str, ...] | None]:
    """(names allocated by T.empty, in order; the names returned, or None)."""
    outputs = []
    for stmt in ks.tree.body[:ks.launch_index]:
        if isinstance(stmt, ast.Assign) and is_call_to(stmt.value, T.empty, ks.namespace):
            if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
                raise ks.error("`T.empty(...)` must be assigned to one name", stmt)
            outputs.append(stmt.targets[0].id)
    for node in syntax.walk(ks.tree):
        if is_call_to(node, T.empty, ks.namespace) and not any(
                node is s.value for s in ks.tree.body[:ks.launch_index]
                if isinstance(s, ast.Assign)):
            raise ks.error("`T.empty(...)` allocates a kernel output: write `C = "
                           "T.empty(shape, dtype)` before `with T.Kernel`", node)
    returns = None
    tail = ks.tree.body[ks.launch_index + 1:]
    if len(tail) > 1:
        raise ks.error("a kernel ends with at most one `return`", tail[1])
    if tail and tail[0].value is not None:
        value = tail[0].value
        items = value.elts if isinstance(value, ast.Tuple) else [value]
        names = []
        for item in items:
            if not (isinstance(item, ast.Name) and item.id in outputs):
                raise ks.error("a kernel returns the outputs it allocated with T.empty "
                               f"({', '.join(outputs) or 'none'})", item)
            names.append(item.id)
        returns = tuple(names) if isinstance(value, ast.Tuple) else (names[0],)
        if not isinstance(value, ast.Tuple):
            returns = names[0]
    for name in outputs:
        if name in ks.params:
            raise ks.error(f"output {name!r} shadows a parameter", ks.tree)
    return outputs, returns


def _shape_entry(node, params):
    """(param, dim) for ``P.shape[i]`` with a constant i; else None."""
    if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute)
            and node.value.attr == "shape" and isinstance(node.value.value, ast.Name)
            and node.value.value.id in params and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, int)):
        return node.value.value.id, node.slice.value
    return None


def _deps(expr, env, params) -> set:
    out = set()
    for node in syntax.walk(expr):
        entry = _shape_entry(node, params)
        if entry is not None:
            out.add(entry)
        elif isinstance(node, ast.Name) and node.id in env:
            out |= env[node.id]
    return out


def shape_environment(ks: KernelSource) -> dict[str, set]:
    """For each name the kernel assigns, the shape entries its value depends on
    (assignments taken in source order)."""
    params = set(ks.params)
    env: dict[str, set] = {}
    assigns = sorted((n for n in syntax.walk(ks.tree) if isinstance(n, ast.Assign)),
                     key=lambda n: (n.lineno, n.col_offset))
    for stmt in assigns:
        for target in stmt.targets:
            if isinstance(target, ast.Name):
                env[target.id] = _deps(stmt.value, env, params)
            elif isinstance(target, ast.Tuple) and isinstance(stmt.value, ast.Attribute) \
                    and stmt.value.attr == "shape" and isinstance(stmt.value.value, ast.Name) \
                    and stmt.value.value.id in params:
                for dim, elt in enumerate(target.elts):
                    if isinstance(elt, ast.Name):
                        env[elt.id] = {(stmt.value.value.id, dim)}
    return env


# calls whose arguments are compile-time: loop extents, tile shapes, pipeline schedules
_COMPILE_TIME_ARGS = (T.Parallel, T.alloc_shared, T.alloc_fragment, T.alloc_local,
                      T.Pipelined, T.use_swizzle)


def compile_time_shapes(ks: KernelSource, parallel=True) -> tuple[tuple[str, int], ...]:
    """The shape entries used where a compile-time value is needed (with
    ``parallel=False``, not counting T.Parallel extents, which may be run-time values:
    ``passes/dynamic_parallel.py``)."""
    params = set(ks.params)
    env = shape_environment(ks)
    needed: set = set()
    kinds = _COMPILE_TIME_ARGS if parallel else _COMPILE_TIME_ARGS[1:]
    for node in syntax.walk(ks.tree):
        if any(is_call_to(node, f, ks.namespace) for f in kinds):
            args, keywords = list(node.args), node.keywords
            if is_call_to(node, T.Pipelined, ks.namespace):
                # the start and stop (the trip count) are run-time values
                args = args[2:]
                keywords = [k for k in keywords if k.arg not in ("start", "stop")]
            for arg in args + [k.value for k in keywords]:
                needed |= _deps(arg, env, params)
        if is_launch(node, ks.namespace):
            for kw in node.keywords:
                if kw.arg in ("threads", "cluster_dims"):
                    needed |= _deps(kw.value, env, params)
    return tuple(sorted(needed))


_REGION_ATOMICS = (T.atomic_add, T.atomic_max, T.atomic_min,
                   T.atomic_addx2, T.atomic_addx4)      # (their whole-buffer form)


def whole_shape_params(ks: KernelSource) -> tuple[tuple[str, ...], dict[str, int]]:
    """(the tensor parameters named bare as a ``T.copy`` or region atomic operand, copied
    region to region with another tensor (a parameter or a ``T.empty`` output),
    transposed (``T.transpose``: whole, or a region whose slice may run to its edge),
    whose bare shape is a call's argument (``T.alloc_shared(A.shape, ...)``), or
    laid out by ``T.annotate_layout``: every dimension of their shape is specialized on,
    the rank being known at the call; {each laid-out parameter:
    the line of its annotation}, which must be contiguous: ``passes/global_layouts.py``),
    from one walk of the kernel (it runs at every decoration)."""
    params = set(ks.params) - set(ks.constexpr_params)
    outputs = {stmt.targets[0].id for stmt in ks.tree.body[:max(ks.launch_index, 0)]
               if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(
                   stmt.targets[0], ast.Name) and is_call_to(stmt.value, T.empty, ks.namespace)}
    out = set()
    laid_out: dict[str, int] = {}
    for node in syntax.walk(ks.tree):
        if isinstance(node, ast.Call):
            # a bare shape passed on (T.alloc_shared(A.shape, ...), T.Parallel(*A.shape),
            # a slice of it, A.shape[-2:]): all of its entries
            given = [a.value if isinstance(a, ast.Starred) else a for a in node.args]
            given = [a.value if isinstance(a, ast.Subscript) and isinstance(a.slice, ast.Slice)
                     else a for a in given + [k.value for k in node.keywords]]
            out.update(a.value.id for a in given
                       if isinstance(a, ast.Attribute) and a.attr == "shape" and
                       isinstance(a.value, ast.Name) and a.value.id in params)
        if any(is_call_to(node, f, ks.namespace) for f in _REGION_ATOMICS):
            # a region atomic of whole tensors (T.atomic_add(B, A)), or a number into a
            # region open to a tensor's edge (T.atomic_add(B[r0:r1, :], 1)): their
            # extents (a tile's value gives the region's extents itself)
            number = len(node.args) > 1 and all(
                isinstance(n, (ast.Constant, ast.UnaryOp, ast.BinOp, ast.operator,
                               ast.unaryop)) for n in syntax.walk(node.args[1]))
            for a in node.args[:2]:
                if number and isinstance(a, ast.Subscript) and any(
                        isinstance(i, ast.Slice) and i.upper is None
                        for i in (a.slice.elts if isinstance(a.slice, ast.Tuple)
                                  else [a.slice])):
                    a = a.value
                if isinstance(a, ast.Name) and a.id in params:
                    out.add(a.id)
        elif is_call_to(node, T.copy, ks.namespace):
            operands = copy_operand_nodes(node)
            out.update(a.id for a in operands if isinstance(a, ast.Name) and a.id in params)
            # a copy between two tensors' regions: an open slice runs to the tensor's edge
            named = [a.value.id if isinstance(a, ast.Subscript) and isinstance(
                a.value, ast.Name) else None for a in operands]
            if len(named) == 2 and all(n in params or n in outputs for n in named) and \
                    any(n in params for n in named):     # an output's extents are the other's
                out.update(n for n in named if n in params)
        elif is_call_to(node, T.transpose, ks.namespace):
            # its operands' extents are compile-time (a whole tensor's, an open slice's)
            for a in list(node.args[:2]) + [k.value for k in node.keywords]:
                base = a.value if isinstance(a, ast.Subscript) else a
                if isinstance(base, ast.Name) and base.id in params:
                    out.add(base.id)
        elif _laid_out(node, ks.namespace):
            for k in node.args[0].keys:
                if isinstance(k, ast.Name) and k.id in params:
                    out.add(k.id)
                    laid_out.setdefault(k.id, node.lineno)
    return tuple(sorted(out)), laid_out


def tile_copied_params(ks: KernelSource) -> frozenset:
    """The tensor parameters a ``T.copy`` moves whole to or from a tile the kernel
    allocates (``T.copy(A, S)``): the tensor's extents must be the tile's, so such a tensor
    is specialized on its shape even where its annotation says ``T.dynamic`` (a size
    other than the tile's is then the compile-time error a static one gives, as the
    simulator's)."""
    params = set(ks.params) - set(ks.constexpr_params)
    tiles = names_bound_to(ks.tree, ks.namespace,
                           (T.alloc_shared, T.alloc_fragment, T.alloc_local))
    out = set()
    for node in syntax.walk(ks.tree):
        if is_call_to(node, T.copy, ks.namespace):
            operands = copy_operand_nodes(node)
            names = [a.id if isinstance(a, ast.Name) else None for a in operands]
            if len(names) == 2 and any(n in tiles for n in names):
                out.update(n for n in names if n in params)
    return frozenset(out)


def copy_operand_nodes(call: ast.Call) -> list:
    """A ``T.copy`` call's operands, positional or by keyword (``src=``, ``dst=``)."""
    operands = list(call.args[:2])
    for name in ("src", "dst")[len(operands):]:
        operands += [k.value for k in call.keywords if k.arg == name]
    return operands


def _laid_out(node, namespace) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name))
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "annotate_layout"
            and is_call_to(node, T.annotate_layout, namespace) and node.args
            and isinstance(node.args[0], ast.Dict))


_PLAIN = (bool, int, float, str, type(None))


def plain_value(expr, namespace, kinds=_PLAIN):
    """(value, True) of an expression of literals and names bound to plain values
    (``kinds``) with no calls, attributes or subscripts (``not has_sink``, ``"reduce_" +
    op``), or attributes of an object of the user's that lead to one (TileKernels'
    ``if in_config.with_sf:`` on a frozen dataclass); (None, False) when it is not one."""
    if any(isinstance(n, ast.Attribute) for n in syntax.walk(expr)):
        expr, namespace = _object_attributes(expr, namespace, kinds)
        if expr is None:
            return None, False
    names = {n.id for n in syntax.walk(expr) if isinstance(n, ast.Name)}
    if any(not isinstance(namespace.get(n, ...), kinds) for n in names) or any(
            isinstance(n, (ast.Call, ast.Attribute, ast.Subscript)) for n in syntax.walk(expr)):
        return None, False
    try:
        return eval(compile(ast.Expression(expr), "<compile-time value>", "eval"),  # noqa: S307
                    {"__builtins__": {}}, {n: namespace[n] for n in names}), True
    except Exception:       # not a compile-time value
        return None, False


def _object_attributes(expr, namespace, kinds):
    """``expr`` with each attribute chain through an object of the user's (a dataclass, a
    namespace: ``object_arguments.is_config_object``) that ends at a value of ``kinds``
    made a name bound to that value, and the namespace with those names; (None, None)
    when another attribute stays."""
    from tilejit.frontend.object_arguments import is_config_object   # (a circle)
    bound = {}

    class _Chains(syntax.NodeTransformer):
        def visit_Attribute(self, node):
            chain, base = [], node
            while isinstance(base, ast.Attribute):
                chain.append(base.attr)
                base = base.value
            if not isinstance(base, ast.Name) or not is_config_object(namespace.get(base.id)):
                return node
            value = namespace[base.id]
            try:
                for attr in reversed(chain):
                    value = getattr(value, attr)
            except Exception:   # noqa: BLE001 - a missing attribute, a failing property
                return node
            if not isinstance(value, kinds):
                return node
            name = f"__tj_attr{len(bound)}"
            bound[name] = value
            return ast.copy_location(ast.Name(name, ast.Load()), node)

    expr = _Chains().visit(copy.deepcopy(expr))
    if any(isinstance(n, ast.Attribute) for n in syntax.walk(expr)):
        return None, None
    return expr, {**namespace, **bound}


def settled(test, namespace):
    """The truth of an ``if`` test made of compile-time values (``with_bias``, ``not
    has_sink``, ``window is None``), or None when it is not one."""
    if isinstance(test, ast.BoolOp):       # one operand decides (source.static_truth)
        parts = [settled(v, namespace) for v in test.values]
        decisive = isinstance(test.op, ast.Or)
        if decisive in parts:
            return decisive
        return (not decisive) if None not in parts else None
    value, ok = plain_value(test, namespace)
    return bool(value) if ok else None


def live_walk(tree: ast.AST, namespace: dict):
    """``syntax.walk`` of ``tree`` without the branches of compile-time ``if``s
    (``if dim == 1:`` of the program's closure) that are not taken."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, ast.If):
            truth = settled(node.test, namespace)
            if truth is not None:
                todo.extend(reversed(node.body if truth else node.orelse))
                continue
        todo.extend(reversed(list(syntax.iter_child_nodes(node))))


def unread_params(ks: KernelSource) -> frozenset:
    """The parameters the kernel never mentions once its compile-time branches are
    settled (``if with_bias:`` with ``with_bias`` False), but for their shape (``A.shape``,
    a symbol bound from it: the call supplies it): a TileLang program may pass None for
    such a tensor (``tilelang.jit``'s null pointer)."""
    used = set()

    def visit(node):
        if isinstance(node, ast.If):
            truth = settled(node.test, ks.namespace)
            if truth is not None:
                for stmt in node.body if truth else node.orelse:
                    visit(stmt)
                return
        # `a if c else b` and TileLang's T.if_then_else(c, a, b) with `c` settled: the side
        # it takes (`T.if_then_else(has_indices, Indices[b], b)` with has_indices False)
        if isinstance(node, ast.IfExp):
            truth = settled(node.test, ks.namespace)
            if truth is not None:
                return visit(node.body if truth else node.orelse)
        if isinstance(node, ast.Call) and len(node.args) == 3 and not node.keywords and \
                resolve_static(node.func, ks.namespace) is T.if_then_else:
            truth = settled(node.args[0], ks.namespace)
            if truth is not None:
                return visit(node.args[1] if truth else node.args[2])
        if isinstance(node, ast.Attribute) and node.attr == "shape" and \
                isinstance(node.value, ast.Name):
            return
        if isinstance(node, ast.Name):
            used.add(node.id)
        for child in syntax.iter_child_nodes(node):
            visit(child)

    for stmt in ks.tree.body:
        visit(stmt)
    return frozenset(p for p in ks.params if p not in used)


__all__ = ["kernel_outputs", "live_walk", "unread_params", "plain_value", "settled",
           "compile_time_shapes", "whole_shape_params", "tile_copied_params",
           "shape_environment", "resolve_static"]
