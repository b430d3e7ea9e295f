"""Reject, before typing, Python constructs a kernel cannot contain, with the line."""
from __future__ import annotations

import ast
import copy
import builtins
import difflib
import math

import numpy as np

from tilejit import syntax
from tilejit import language as _language
from tilejit.frontend.reducers import rewrite_reducers, uses_reducers
from tilejit.language import compat as _compat
from tilejit.language import _semantics
from tilejit.frontend.explicit_sync import is_ws
from tilejit.frontend.source import (KernelSource, alloc_var_arguments,
                                     function_def_from_file, function_namespace,
                                     resolve_static, static_truth, tensor_param_names)
from tilejit.frontend.static_prologue import evaluate_static, is_prologue_value
from tilejit.errors import CompileError, ValueCompileError, DefinitionError
from tilejit.language.atomics import memory_order_error
from tilejit.language.dtypes import as_dtype
from tilejit.language.numerics import FLOAT_MAX
from tilejit.ir.markers import DP4A_MESSAGE

UNSUPPORTED = {
    ast.Try: "try/except", ast.Raise: "raise (use T.device_assert)",
    ast.Yield: "yield", ast.YieldFrom: "yield from", ast.Await: "await",
    ast.AsyncFor: "async for", ast.AsyncWith: "async with",
    ast.Lambda: "lambda", ast.FunctionDef: "a nested def (use @T.macro)",
    ast.ClassDef: "a class definition", ast.ListComp: "a list comprehension",
    ast.SetComp: "a set comprehension", ast.DictComp: "a dict comprehension",
    ast.GeneratorExp: "a generator expression", ast.Global: "global",
    ast.NamedExpr: "an assignment expression (:=); assign on a line of its own",
    ast.Nonlocal: "nonlocal", ast.Delete: "del", ast.JoinedStr: "an f-string",
    ast.Dict: "a dict", ast.Set: "a set", ast.List: "a list",
    ast.Import: "import", ast.ImportFrom: "import", ast.Assert: "assert (use T.device_assert)",
}
if hasattr(ast, "TryStar"):
    UNSUPPORTED[ast.TryStar] = "try/except*"


def _chosen(node):
    """``node`` and, through conditional expressions, the values it may be."""
    if isinstance(node, ast.IfExp):
        return [node, *_chosen(node.body), *_chosen(node.orelse)]
    return [node]


def check_supported(ks: KernelSource) -> None:
    launch = ks.launch
    # reducers: folds and finalize batches checked when the kernel is made, as TileLang does
    if uses_reducers(ks.tree, ks.namespace):
        rewrite_reducers(copy.deepcopy(ks.tree), dict(ks.namespace), ks.error)
    # a list or dict written as a call's argument is a compile-time value: a tile shape
    # `[block_M, dim]`, the mapping of T.annotate_layout
    # (and the lists inside it: T.Pipelined's group=[[0], [1, 2]])
    # (or chosen by a compile-time condition: `[16, N] if flag else [8, N]`)
    call_args = {id(n) for node in syntax.walk(ks.tree) if isinstance(node, ast.Call)
                 for a in node.args + [k.value for k in node.keywords]
                 for b in _chosen(a) if isinstance(b, (ast.List, ast.Dict))
                 for n in syntax.walk(b) if isinstance(n, (ast.List, ast.Dict))}
    # T.alloc_barrier([128, 128] * stages): the arrival counts, compile-time too
    call_args |= {id(n) for node in syntax.walk(ks.tree) if isinstance(node, ast.Call)
                  and resolve_static(node.func, ks.namespace) is _language.alloc_barrier
                  for a in node.args + [k.value for k in node.keywords]
                  for n in syntax.walk(a) if isinstance(n, ast.List)}
    # a layout (T.annotate_layout's dict, a T.Layout): a compile-time value, evaluated as
    # Python (passes/user_layouts.py), so its function may be a lambda
    call_args |= {id(n) for node in syntax.walk(ks.tree) if isinstance(node, ast.Call)
                  and resolve_static(node.func, ks.namespace) in (_language.annotate_layout,
                                                                 _language.Layout,
                                                                 _language.Fragment)
                  for a in node.args + [k.value for k in node.keywords] for n in syntax.walk(a)}
    # a value computed before `with T.Kernel(...)`: folded at compile time where it can be
    # (static_prologue.py), which reports what stays unsupported
    call_args |= {id(n) for stmt in ks.tree.body[:max(ks.launch_index, 0)]
                  if is_prologue_value(stmt) for n in syntax.walk(stmt.value)}
    # a comprehension over a constexpr parameter's values: unrolled per specialization
    # (static_comprehensions.unroll_for), which refuses it if it is not unrolled then
    call_args |= {id(c) for c in syntax.walk(ks.tree)
                  if isinstance(c, (ast.GeneratorExp, ast.ListComp)) and any(
                      isinstance(n, ast.Name) and n.id in ks.constexpr_params
                      for n in syntax.walk(c))}
    _check_initializers(ks.tree, ks.namespace, ks.filename)
    _check_dtype_strings(ks.tree, ks.namespace, ks.filename)
    for index, stmt in enumerate(ks.tree.body):
        # host code's asserts, at the top or in its `if` blocks (their messages may be
        # f-strings): the host program checks them; rewrite.device_tree drops them
        host_asserts = {id(n) for a in syntax.walk(stmt) if isinstance(a, ast.Assert)
                        for n in syntax.walk(a)} if index < ks.launch_index else set()
        for node in syntax.walk(stmt):
            if id(node) in host_asserts:
                continue
            if id(node) in call_args and type(node) in UNSUPPORTED:
                continue
            what = UNSUPPORTED.get(type(node))
            if what is not None:
                if isinstance(node, ast.List):
                    what += (f" (a tuple holds the same values in a kernel: "
                             f"`{ast.unparse(ast.Tuple(node.elts, ast.Load()))}`)")
                raise ks.error(f"unsupported in a kernel: {what}", node)
            if isinstance(node, ast.Attribute) and not hasattr(_language, node.attr) \
                    and resolve_static(node.value, ks.namespace) is _language:
                raise ks.error(unknown_language_name_message(node), node)
            if isinstance(node, ast.Call) and resolve_static(
                    node.func, ks.namespace) is _language.match_buffer:
                raise ks.error(f"in a kernel: {_language.MATCH_BUFFER_USE}", node)
            if isinstance(node, ast.Call) and \
                    resolve_static(node.func, ks.namespace) is builtins.print:
                raise ks.error("unsupported in a kernel: print() as a value (a print() "
                               "statement runs once when the kernel is parsed; T.print("
                               "value, msg) prints on the device: a scalar, or one element "
                               "such as A[i] or tile[i, j])", node)
            if isinstance(node, ast.With) and node is not launch and not is_ws(node,
                                                                              ks.namespace):
                for item in node.items:         # `with T.If(c), T.Then():` names itself
                    for n in syntax.walk(item.context_expr):
                        if isinstance(n, ast.Attribute) and not hasattr(_language, n.attr) \
                                and resolve_static(n.value, ks.namespace) is _language:
                            raise ks.error(unknown_language_name_message(n), n)
                raise ks.error("unsupported in a kernel: a `with` block other than "
                               "`with T.Kernel(...)` and `with T.ws(...)`", node)
            if isinstance(node, ast.While) and node.orelse or (
                    isinstance(node, ast.For) and node.orelse):
                raise ks.error("unsupported in a kernel: a loop's `else` clause", node)
    _check_parallel_returns(ks)
    _check_tensor_indices(ks)


def _check_tensor_indices(ks) -> None:
    """``A[B]`` with ``B`` a tensor or tile (a name the kernel indexes elsewhere): an index
    is a number; the typing's overload list would not say so."""
    bases = {n.value.id for n in syntax.walk(ks.launch) if isinstance(n, ast.Subscript)
             and isinstance(n.value, ast.Name)}
    # the tensor parameters too (one the kernel only ever uses as an index: `B[i] = A[I]`)
    bases |= tensor_param_names(ks)
    # a T.alloc_var variable is a value by its name (`x[0]` reads it too)
    bases -= {t.id for n in syntax.walk(ks.tree) if isinstance(n, ast.Assign)
              and isinstance(n.value, ast.Call)
              and resolve_static(n.value.func, ks.namespace) is _language.alloc_var
              for t in n.targets if isinstance(t, ast.Name)}
    for node in syntax.walk(ks.launch):
        if not isinstance(node, ast.Subscript):
            continue
        index = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        for i in index:
            for name in _bare_names(i):
                if name in bases:
                    raise ks.error(f"`{ast.unparse(node)}` indexes with `{name}`, a tensor "
                                   f"or tile: an index is a number (an element of it, "
                                   f"`{name}[...]`, is one)", node)


def _bare_names(expr):
    """The names ``expr`` uses as values themselves (``I`` of ``I + 1``; not of ``I[0]``
    or ``I.shape[0]``)."""
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name):
            yield node.id
        elif not isinstance(node, (ast.Subscript, ast.Attribute, ast.Slice)):
            stack.extend(syntax.iter_child_nodes(node))


def _check_parallel_returns(ks) -> None:
    """``return`` inside a ``T.Parallel`` (or ``T.vectorized``) body: its iterations are
    spread over the threads, so there is no one place the kernel would end. The same in
    the helpers and macros the kernel calls (there ``break`` and ``continue`` too, which
    the kernel's own rewrite refuses in its body): each thread would leave only its own
    iterations."""
    _parallel_exits(ks.launch, ks.namespace, ks.error, returns_only=True)
    for fdef, namespace, error in _called_helpers(ks):
        _parallel_exits(fdef, namespace, error, returns_only=False)


def _parallel_exits(tree, namespace, error, returns_only) -> None:
    for node in syntax.walk(tree):
        if not (isinstance(node, ast.For) and resolve_static(
                getattr(node.iter, "func", None), namespace) in (_language.Parallel,
                                                                 _language.vectorized)):
            continue
        for inner in _exits(node.body, returns_only):
            what = "return" if isinstance(inner, ast.Return) else \
                "break" if isinstance(inner, ast.Break) else "continue"
            raise error(f"unsupported in a kernel: {what} inside a T.Parallel loop (its "
                        "iterations are spread over the block's threads, each thread "
                        "would leave only its own; guard the body with `if` instead)", inner)


def _exits(body, returns_only):
    """The returns in ``body``, and (not ``returns_only``) the breaks and continues that
    leave the loop it is the body of (not those of loops nested in it)."""
    stack = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return) or (not returns_only and isinstance(
                node, (ast.Break, ast.Continue))):
            yield node
        if isinstance(node, (ast.For, ast.While)) and not returns_only:
            stack.extend(n for s in node.body + node.orelse for n in syntax.walk(s)
                         if isinstance(n, ast.Return))
            continue
        if not isinstance(node, (ast.FunctionDef, ast.Lambda)):
            stack.extend(syntax.iter_child_nodes(node))


def _called_helpers(ks, limit=64):
    """(source tree, namespace, error maker) of each helper and macro the kernel calls,
    directly or through one another (those whose source can be read)."""
    from tilejit.frontend.helpers import is_helper          # (a circle broken here)
    from tilejit.frontend.references import current_namespace
    seen, found = set(), []
    pending = [(ks.tree, ks.namespace)]
    while pending and len(seen) < limit:
        tree, namespace = pending.pop()
        for node in syntax.walk(tree):
            if not isinstance(node, (ast.Name, ast.Attribute)):
                continue
            value = resolve_static(node, namespace)
            fn = value.func if isinstance(value, _language.macro) else value
            if not is_helper(fn) or fn in seen:
                continue
            seen.add(fn)
            source = function_def_from_file(fn, copy_tree=False)
            if source is None:
                continue
            filename, fdef = source
            own = current_namespace(fn)
            found.append((fdef, own, lambda msg, n, f=filename: CompileError(msg, f, n.lineno)))
            pending.append((fdef, own))
    return found


def check_definition(func) -> None:
    """What TileLang reports as a program is defined (``@T.prim_func``), before anything
    compiles: an initializer its dtype cannot hold, a view that does not hold its
    tensor, a bitwise reducer of floats, ``T.dp4a`` of wrong dtypes. Nothing when the
    source cannot be read (the compile reports that)."""
    found = function_def_from_file(func, copy_tree=False)
    if found is None:
        return
    filename, tree = found
    namespace = function_namespace(func)
    _check_initializers(tree, namespace, filename)
    # the parameters' annotations, where the body never binds the name to something else
    rebound = {n.id for n in syntax.walk(tree) if isinstance(n, ast.Name)
               and isinstance(n.ctx, ast.Store)}
    annotations = {k: v for k, v in getattr(func, "__annotations__", {}).items()
                   if k not in rebound}
    _check_views(tree, namespace, filename, annotations)
    _check_reducers(tree, namespace, filename)
    _check_dp4a(tree, namespace, filename, annotations)
    _check_memory_orders(tree, namespace, filename)


def _check_memory_orders(tree, namespace, filename) -> None:
    """``T.atomic_load`` / ``T.atomic_store`` with a memory order a load or a store does
    not have (a load that releases), known as the program is defined: TileLang's
    ValueError there."""
    assigned = {n.id for n in syntax.walk(tree) if isinstance(n, ast.Name)
                and isinstance(n.ctx, ast.Store)}
    for node in syntax.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        fn = resolve_static(node.func, namespace)
        op = {_language.atomic_load: "load", _language.atomic_store: "store"}.get(fn)
        if op is None:
            continue
        given = {k.arg: k.value for k in node.keywords}
        position = 1 if op == "load" else 2
        expr = given.get("memory_order", node.args[position]
                         if len(node.args) > position else None)
        if isinstance(expr, ast.Constant):
            order = expr.value
        elif isinstance(expr, ast.Name) and expr.id not in assigned:
            order = namespace.get(expr.id)
        else:
            continue
        message = memory_order_error(op, order) if isinstance(order, str) else None
        if message is not None:
            raise ValueCompileError(message, filename, node.lineno)


def _check_dtype_strings(tree, namespace, filename) -> None:
    """``T.cast(x, "flaot16")`` / ``T.reinterpret(x, "...")``: a dtype written as a string
    the language has no dtype of is an error naming it, when the program is defined."""
    for node in syntax.walk(tree):
        if isinstance(node, ast.Call) and len(node.args) == 2 and \
                isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
            fn = resolve_static(node.func, namespace)
            if fn is _language.cast or fn is _language.reinterpret:
                try:
                    as_dtype(node.args[1].value)
                except TypeError as e:
                    if "unknown dtype" in str(e):   # a misspelling (a dtype no value holds:
                        raise CompileError(         # the typing says so where it is used)
                            f"T.{fn.__name__}(value, dtype): {e}", filename,
                            node.lineno) from None


def _known_value(node, tree, namespace) -> bool:
    """Whether ``node`` is a constant, or a name of the kernel's globals or closure that
    the kernel neither assigns nor takes as a parameter: its value known as it is defined."""
    if isinstance(node, ast.Constant):
        return True
    if not isinstance(node, ast.Name) or node.id not in namespace:
        return False
    if isinstance(tree, ast.FunctionDef) and any(a.arg == node.id for a in tree.args.args):
        return False
    return not any(isinstance(n, ast.Name) and n.id == node.id and isinstance(n.ctx, ast.Store)
                   for n in syntax.walk(tree))


def _check_initializers(tree, namespace, filename) -> None:
    """``T.alloc_var(dtype, init=v)`` with a literal ``v`` the dtype cannot hold is an
    error when the program is defined (TileLang's ValueError), never a silent infinity
    or wrapped integer."""
    for node in syntax.walk(tree):
        if not (isinstance(node, ast.Call) and
                resolve_static(node.func, namespace) is _language.alloc_var):
            continue
        try:
            given = alloc_var_arguments(node)
        except TypeError:
            continue                # the allocation's own error, where it is made
        if "dtype" not in given:
            continue
        dtype = resolve_static(given["dtype"], namespace)
        if isinstance(given["dtype"], ast.Constant):
            dtype = given["dtype"].value
        if (dtype is None or isinstance(dtype, (bool, int, float))) and \
                _known_value(given["dtype"], tree, namespace):
            # (as_dtype(None) is numpy's float64; the typing named T.cast, which the
            # variable's stores become)
            raise CompileError(f"T.alloc_var(dtype): expected a dtype (T.float16, "
                               f"\"float16\", A.dtype) first, got {dtype!r}", filename,
                               node.lineno)
        try:
            dtype = as_dtype(dtype)
        except (TypeError, ValueError, KeyError) as e:
            if isinstance(dtype, str):      # a dtype string the language does not have
                raise CompileError(f"T.alloc_var: {e}", filename, node.lineno) from None
            continue
        value = _literal_number(given.get("init"))
        if value is None:
            continue
        problem = _unrepresentable(value, dtype)
        if problem:
            raise ValueCompileError(f"T.alloc_var({dtype.name}, init={value!r}): {problem}",
                                    filename, node.lineno)


def _check_views(tree, namespace, filename, annotations) -> None:
    """``T.view(A, shape, dtype)`` / ``T.reshape(A, shape)`` of a parameter annotated with
    a shape and dtype known as the program is defined, to a shape known then: the bytes
    must be the tensor's (TileLang's AssertionError), else an error at the line."""
    assigned = {n.id for n in syntax.walk(tree) if isinstance(n, ast.Name)
                and isinstance(n.ctx, ast.Store)}
    for node in syntax.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        fn = resolve_static(node.func, namespace)
        if fn not in (_language.view, _language.reshape):
            continue
        given = dict(zip(("buffer", "shape", "dtype"), node.args))
        given.update({k.arg: k.value for k in node.keywords})
        src = given.get("buffer")
        ann = annotations.get(src.id) if isinstance(src, ast.Name) else None
        shape = _static_ints(given.get("shape"), namespace)
        if ann is None or shape is None or not hasattr(ann, "shape"):
            continue
        have = ann.shape
        if not all(_plain_int(d) for d in have):     # a T.dynamic extent
            continue
        to = given.get("dtype")
        to = ann.dtype if to is None or (isinstance(to, ast.Constant) and to.value is None) \
            else resolve_static(to, namespace) if not isinstance(to, ast.Constant) else to.value
        if to is None and isinstance(given.get("dtype"), ast.Name) and \
                given["dtype"].id in namespace and given["dtype"].id not in assigned:
            to = ann.dtype      # dtype=new_dtype, a closure name bound to None: the tensor's
        elif to is None:
            continue            # a name the program binds itself: not known here
        try:
            to = as_dtype(to)
        except (TypeError, ValueError, KeyError):
            continue
        held, asked = math.prod(have) * ann.dtype.bits, math.prod(shape) * to.bits
        if held != asked:
            what = ast.unparse(node)
            raise DefinitionError(
                f"{what}: {src.id} holds {math.prod(have)} {ann.dtype.name} elements "
                f"({held // 8} bytes); the shape {list(shape)} of {to.name} holds "
                f"{math.prod(shape)} ({asked // 8} bytes)", filename, node.lineno)


def _check_reducers(tree, namespace, filename) -> None:
    """``T.alloc_reducer(shape, dtype, op="bitand" | "bitor" | "bitxor")`` folds bits: an
    integer dtype only."""
    for node in syntax.walk(tree):
        if not (isinstance(node, ast.Call) and
                resolve_static(node.func, namespace) is _language.alloc_reducer):
            continue
        given = dict(zip(("shape", "dtype", "op"), node.args))
        given.update({k.arg: k.value for k in node.keywords})
        op, dtype = given.get("op"), given.get("dtype")
        if not (isinstance(op, ast.Constant) and op.value in ("bitand", "bitor", "bitxor")):
            continue
        dtype = dtype.value if isinstance(dtype, ast.Constant) else \
            resolve_static(dtype, namespace)
        try:
            dtype = as_dtype(dtype)
        except (TypeError, ValueError, KeyError):
            continue
        if not dtype.is_int:
            raise DefinitionError(f"T.alloc_reducer: op {op.value!r} is bitwise and needs an "
                                  f"integer dtype, got {dtype.name}", filename, node.lineno)


def _check_dp4a(tree, namespace, filename, annotations) -> None:
    """``T.dp4a(A, B, C)`` on operands whose dtypes are known as the program is defined
    (parameters, their elements, tiles allocated with a dtype): int8, int8 into int32,
    TileLang's ValueError otherwise (the compiler's typing checks the rest)."""
    allocated = {}
    for node in syntax.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                node.targets[0], ast.Name) and isinstance(node.value, ast.Call) and \
                len(node.value.args) >= 2 and resolve_static(node.value.func, namespace) in (
                    _language.alloc_local, _language.alloc_shared, _language.alloc_fragment):
            allocated[node.targets[0].id] = node.value.args[1]

    def dtype_of(arg):
        base = arg.value if isinstance(arg, ast.Subscript) else arg
        if not isinstance(base, ast.Name):
            return None
        if base.id in annotations and hasattr(annotations[base.id], "dtype"):
            return annotations[base.id].dtype
        expr = allocated.get(base.id)
        if expr is None:
            return None
        value = expr.value if isinstance(expr, ast.Constant) else resolve_static(expr,
                                                                                  namespace)
        if value is None:
            return None
        try:
            return as_dtype(value)
        except (TypeError, ValueError, KeyError):
            return None

    for node in _live_nodes(tree, namespace):
        if isinstance(node, ast.Call) and len(node.args) == 3 and \
                resolve_static(node.func, namespace) is _language.dp4a:
            got = [dtype_of(a) for a in node.args]
            if None not in got and [g.name for g in got] != ["int8", "int8", "int32"]:
                raise ValueCompileError(DP4A_MESSAGE.format(*(g.name for g in got)),
                                        filename, node.lineno)


def _live_nodes(tree, namespace):
    """The nodes of ``tree`` but those of branches a compile-time condition leaves out
    (``if use_dp4a:`` with ``use_dp4a`` False in the closure): TileLang never builds
    them, so their operations are not checked."""
    assigned = {n.id for n in syntax.walk(tree) if isinstance(n, ast.Name)
                and isinstance(n.ctx, ast.Store)}
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If):
            truth = static_truth(node.test, namespace, assigned)
            if truth is not None:
                stack.extend(node.body if truth else node.orelse)
                continue
        stack.extend(syntax.iter_child_nodes(node))


def _static_ints(node, namespace):
    """A shape written with names and values known as the program is defined (its
    globals and closure: ``[N // M, M + 1]``), as a tuple of ints; else None."""
    if isinstance(node, ast.Name) and isinstance(namespace.get(node.id), (list, tuple)):
        value, ok = namespace[node.id], True        # a shape built before the kernel
    elif not isinstance(node, (ast.List, ast.Tuple)):
        return None
    else:
        value, ok = evaluate_static(node, dict(namespace), frozenset())
    return tuple(value) if ok and all(_plain_int(v) for v in value) else None


def _plain_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _literal_number(node):
    """The value of ``1e300`` / ``-5`` / ``True`` written in the source, else None."""
    sign = 1
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        sign = -1 if isinstance(node.op, ast.USub) else 1
        node = node.operand
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and \
            not isinstance(node.value, bool):
        return sign * node.value
    return None


def _unrepresentable(value, dtype) -> str | None:
    if dtype.is_float and math.isfinite(value):
        # (float64 is as Python's; float4 saturates, as its conversions do)
        finfo = None if dtype.name in ("float64", "float4_e2m1fn") else FLOAT_MAX.get(dtype.name)
        if finfo is not None and abs(value) > finfo:
            return (f"{abs(value)!r} exceeds maximum of {dtype.name} ({finfo!r}); write "
                    f"T.infinity({dtype.name}) for an infinity")
    if dtype.is_int:
        info = np.iinfo(dtype.numpy)
        if not float(value).is_integer():
            return f"an integer dtype takes a whole number, got {value!r}"
        if not info.min <= value <= info.max:
            return f"{value!r} is outside {dtype.name}'s range [{info.min}, {info.max}]"
    return None


def first_unknown_language_name(ks: KernelSource):
    """The first ``T.<name>`` of the kernel that tilejit.language does not have, as the
    CompileError that names it (or None): reported before the kernel's shape is checked,
    so a body built around a feature tilejit lacks (``T.CUDASourceCodeKernel(...)`` where
    ``with T.Kernel`` would be) says which."""
    for node in syntax.walk(ks.tree):
        if isinstance(node, ast.Attribute) and not hasattr(_language, node.attr) \
                and resolve_static(node.value, ks.namespace) is _language:
            return ks.error(unknown_language_name_message(node), node)
    return None


def unknown_language_name_message(node: ast.Attribute) -> str:
    """``T.no_such_prim``: the name as written, and the closest names the language has;
    for one of TileLang's names that tilejit does not have, that it is not supported."""
    prefix = ast.unparse(node.value)
    why = _compat.reason(node.attr)
    if why is not None:
        return _compat.message(node.attr, why, alias=prefix)
    close = difflib.get_close_matches(node.attr, [n for n in dir(_language)
                                                  if not n.startswith("_")], n=3)
    hint = f"; did you mean {', '.join(f'{prefix}.{c}' for c in close)}?" if close else ""
    return (f"unknown name {prefix}.{node.attr}: tilejit.language has no "
            f"{node.attr!r}{hint}")


_semantics.install({"prim_func": check_definition})  # what @T.prim_func runs as Python

