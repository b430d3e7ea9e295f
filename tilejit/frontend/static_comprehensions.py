"""Comprehensions over compile-time sequences, unrolled as TileLang's Python builder
runs them when it builds the program (an LLM-written depthwise convolution sums its
taps so: ``O[i, j] = sum(X[i + ky, j + kx] * W[ky, kx] for (ky, kx) in TAPS)``)::

    sum(e(k) for k in TAPS)          →   e(0) + e(1) + e(2)        (TAPS = (0, 1, 2))
    [e(k) for k in range(3)]         →   (e(0), e(1), e(2))        (a kernel's sequences
                                                                    are tuples)
    tuple(e(k) for k in range(3))    →   (e(0), e(1), e(2))

A sequence is compile-time when it is ``range`` of compile-time numbers, a literal tuple
or list of them, or a name of the kernel's closure or globals (not one the kernel
assigns) bound to a tuple, list or range of numbers, strings or tuples of them, or of
its constexpr parameters (unrolled per specialization: ``unroll_for``); an
``if`` clause must be decided by those values. Anything else (a sequence the kernel
computes, a generator expression handed to another function) stays, and the front end
refuses it at its line."""
from __future__ import annotations

import ast
import builtins
import copy
import numbers

from tilejit import syntax
from tilejit.frontend.analysis import plain_value
from tilejit.frontend.source import (SubstituteLoads, assigned_names, resolve_static,
                                    static_truth)

_LIMIT = 4096           # elements an unrolled comprehension may have
_KINDS = (bool, numbers.Number, str, type(None), tuple, list, range)
_FOLDS = {builtins.sum: "sum", builtins.tuple: "tuple", builtins.list: "list"}


def has_comprehensions(tree) -> bool:
    return any(isinstance(n, (ast.GeneratorExp, ast.ListComp)) for n in syntax.walk(tree))


def unroll_comprehensions(ks) -> None:
    _Unroll(ks.namespace, assigned_names(ks.tree)).visit(ks.tree)


def over_constexprs(ks) -> bool:
    """Whether a comprehension the decorator left in the block's code (after ``with
    T.Kernel``; the prologue's are host Python) names a constexpr parameter
    (``sum(W[k] for k in range(taps))``, taps a T.constexpr): it is unrolled per
    specialization (``unroll_for``), the simulator's program built per set of values."""
    names = set(ks.constexpr_params)
    return bool(names) and ks.launch_index >= 0 and any(
        isinstance(n, ast.Name) and n.id in names
        for c in syntax.walk(ks.tree.body[ks.launch_index])
        if isinstance(c, (ast.GeneratorExp, ast.ListComp)) for n in syntax.walk(c))


def unroll_for(fdef, within, namespace, constexprs) -> None:
    """The comprehensions in ``within`` (a statement of ``fdef``, a device program)
    over sequences its constexpr parameters' values (``constexprs``) decide, unrolled
    in place."""
    stored = {n.id for n in syntax.walk(fdef) if isinstance(n, ast.Name)
              and isinstance(n.ctx, ast.Store)}
    constexprs = {k: v for k, v in constexprs.items() if k not in stored}
    unroll = _Unroll(namespace, assigned_names(fdef) - set(constexprs))
    unroll.known.update(constexprs)
    unroll.visit(within)


class _Unroll(syntax.NodeTransformer):
    def __init__(self, namespace, assigned):
        self.namespace = namespace
        # the names whose values are the program's (not ones the kernel assigns)
        self.known = {k: v for k, v in namespace.items() if k not in assigned}

    def visit_Call(self, node):
        self.generic_visit(node)
        fold = _FOLDS.get(resolve_static(node.func, self.namespace)) \
            if isinstance(node.func, ast.Name) else None
        if fold is None or not node.args or node.keywords or not isinstance(
                node.args[0], (ast.GeneratorExp, ast.ListComp)):
            return node
        if fold != "sum" and len(node.args) != 1 or len(node.args) > 2:
            return node
        items = self._items(node.args[0])
        if items is None:
            return node
        if fold == "tuple":
            return ast.copy_location(ast.Tuple(items, ast.Load()), node)
        if fold == "list":          # (a kernel holds tuples: a list is refused there)
            return ast.copy_location(ast.Tuple(items, ast.Load()), node)
        start = node.args[1] if len(node.args) == 2 else None
        terms = ([start] if start is not None else []) + items
        if not terms:
            return ast.copy_location(ast.Constant(0), node)
        out = terms[0]
        for t in terms[1:]:
            out = ast.BinOp(out, ast.Add(), t)
        return ast.copy_location(out, node)

    def visit_ListComp(self, node):
        self.generic_visit(node)
        items = self._items(node)
        return node if items is None else ast.copy_location(ast.Tuple(items, ast.Load()), node)

    def _items(self, comp):
        """The element expressions of the comprehension, one per compile-time iteration,
        or None where it is not one."""
        envs = [{}]
        for gen in comp.generators:
            if gen.is_async:
                return None
            targets = _target_names(gen.target)
            if targets is None:
                return None
            nxt = []
            for env in envs:
                seq = self._sequence(_substituted(gen.iter, env))
                if seq is None:
                    return None
                for value in seq:
                    bound = _bind(gen.target, value)
                    if bound is None:
                        return None
                    new = {**env, **bound}
                    truths = [self._truth(_substituted(test, new)) for test in gen.ifs]
                    if None in truths:
                        return None
                    if all(truths):
                        nxt.append(new)
                    if len(nxt) > _LIMIT:
                        return None
            envs = nxt
        return [_substituted(comp.elt, env) for env in envs]

    def _value(self, node):
        """The compile-time value of ``node`` (``analysis.plain_value`` over the names the
        kernel does not assign, and ``range`` of such numbers), or ``_NO``."""
        if isinstance(node, ast.Call) and not node.keywords and \
                resolve_static(node.func, self.namespace) is builtins.range:
            args = [self._value(a) for a in node.args]
            ok = 1 <= len(args) <= 3 and all(isinstance(a, int) for a in args)
            return range(*args) if ok else _NO
        value, ok = plain_value(node, self.known, _KINDS)
        return value if ok else _NO

    def _sequence(self, node):
        value = self._value(node)
        if isinstance(value, (tuple, list, range)) and all(_plain(v) for v in value):
            return list(value)
        return None

    def _truth(self, node):
        value = self._value(node)
        return None if value is _NO else bool(value)


def unroll_constexpr_comprehensions(ks, fdef, constexprs) -> None:
    """In ``fdef`` (a copy of the kernel's tree), the comprehensions of the block's code
    that name constexprs unrolled for ``constexprs``' values (the prologue's are host
    Python); one they leave, outside the branches those values rule out, is a
    CompileError at its line."""
    if not over_constexprs(ks):
        return
    launch = fdef.body[ks.launch_index]
    unroll_for(fdef, launch, ks.namespace, constexprs)
    left = live_comprehensions(launch, {**ks.namespace, **constexprs},
                               assigned_names(fdef) - set(constexprs))
    if left:
        what = "a list comprehension" if isinstance(left[0], ast.ListComp) else \
            "a generator expression"
        raise ks.error(f"unsupported in a kernel: {what} (only one over a sequence "
                       f"compile-time values give, such as range of constexprs, is "
                       f"unrolled)", left[0])


def live_comprehensions(fdef, namespace, assigned) -> list:
    """The comprehensions left in ``fdef`` outside the branches its compile-time
    conditions (``if bad:`` of a constexpr) rule out."""
    out = []

    def walk(node):
        if isinstance(node, ast.If):
            truth = static_truth(node.test, namespace, assigned)
            for child in ([node.test] + (node.body if truth is not False else [])
                          + (node.orelse if truth is not True else [])):
                walk(child)
            return
        if isinstance(node, (ast.GeneratorExp, ast.ListComp)):
            out.append(node)
        for child in ast.iter_child_nodes(node):
            walk(child)
    walk(fdef)
    return out


_NO = object()


def _plain(v) -> bool:
    return isinstance(v, (bool, numbers.Number, str)) or (
        isinstance(v, tuple) and all(_plain(x) for x in v))


def _target_names(target):
    names = [n for n in syntax.walk(target) if isinstance(n, ast.Name)]
    ok = all(isinstance(n, (ast.Name, ast.Tuple, ast.List, ast.Store, ast.Load))
             for n in syntax.walk(target))
    return names if ok and names else None


def _bind(target, value) -> dict | None:
    if isinstance(target, ast.Name):
        return {target.id: value}
    if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, tuple) and \
            len(value) == len(target.elts):
        out = {}
        for t, v in zip(target.elts, value):
            b = _bind(t, v)
            if b is None:
                return None
            out.update(b)
        return out
    return None


def _constant(value):
    if isinstance(value, tuple):
        return ast.Tuple([_constant(v) for v in value], ast.Load())
    return ast.Constant(value)


def _substituted(expr, env):
    return SubstituteLoads({k: _constant(v) for k, v in env.items()}).visit(
        copy.deepcopy(expr)) if env else expr


__all__ = ["has_comprehensions", "unroll_comprehensions"]
