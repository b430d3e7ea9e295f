"""A kernel whose ``with T.Kernel`` block is written in a ``@T.macro`` (or a plain helper)
that the kernel calls, as TileLang programs compose kernels:

    @T.macro
    def copy_impl(A, B):
        M, N = A.shape
        with T.Kernel(T.ceildiv(M, 128), T.ceildiv(N, 128), threads=128) as (bx, by):
            T.copy(A[bx * 128, by * 128], B[bx * 128, by * 128])

    @tilejit.kernel
    def copy(A, B):
        copy_impl(A, B)

An object whose class defines ``__call__`` in Python (a graph compiler's emitter, built
per operation and called in the prim_func's body: ``emitter((x, w, b, y))``) is its
``__call__`` with the object first; the helper's own top-level imports (``import math``
in that ``__call__``) bind what Python would, imported when the kernel is parsed; an
argument that is an attribute chain through a global object (``self.shape``) is passed as
written, its value known at compilation.

The call statement (or ``return helper(...)``, the helper's own last statement being the
``return`` of the kernel's outputs) is replaced by the helper's body, its parameters renamed to the
call's arguments (names or constants), before the kernel's launch is looked for. The
helper must be in the kernel's file (errors quote its lines there) and must not assign
its parameters; anything else is a ``CompileError`` at the call (when the kernel is
defined). A name the helper reads from its own globals or closure that the kernel does
not see, or sees as something else (a macro made in a program's factory reading the
factory's ``block_M``), is bound under a name of its own (``__tj_<helper>_<name>``) in
the kernel's namespace (``KernelSource.bind``: read again when the kernel resolves its
names, and watched for changes as the kernel's own are); the disk cache's key follows
the helper into its closure already.
"""
from __future__ import annotations

import ast
import copy
import importlib

from tilejit import syntax
from tilejit.frontend.tail_returns import single_exit
from tilejit import language as T
from tilejit.frontend.references import current_namespace
from tilejit.frontend.source import SubstituteLoads, function_def_from_file, resolve_static
from tilejit.language.tilelang_names import SymbolicInt

_DEPTH = 8          # helpers holding the launch that call one another


def _launches(stmts) -> bool:
    return any(isinstance(s, ast.With) and any(
        isinstance(i.context_expr, ast.Call) and _is_kernel(i.context_expr.func)
        for i in s.items) for s in stmts) or any(_raw_launch(s) for s in stmts)


def _raw_launch(stmt) -> bool:
    """A statement that opens a launch as TIR writes it (``raw_launches.py``): a ``for``
    over ``T.thread_binding``, or a ``T.launch_thread`` assignment or ``with``."""
    if isinstance(stmt, ast.For):
        call, wanted = stmt.iter, "thread_binding"
    elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.Expr)):
        call, wanted = stmt.value, ("launch_thread", "thread_binding")
    elif isinstance(stmt, ast.With) and stmt.items:
        call, wanted = stmt.items[0].context_expr, "launch_thread"
    else:
        return False
    if not isinstance(call, ast.Call):
        return False
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else \
        func.id if isinstance(func, ast.Name) else None
    return name in wanted if isinstance(wanted, tuple) else name == wanted


def _is_kernel(func) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr in _LAUNCHES) or (
        isinstance(func, ast.Name) and func.id in _LAUNCHES)


_LAUNCHES = ("Kernel", "ClusterKernel")


def _helper_function(obj):
    if isinstance(obj, T.macro):
        return obj.func
    if callable(obj) and hasattr(obj, "__code__"):
        return obj
    return call_method(obj)


def call_method(obj):
    """``__call__`` of an object of a class written in Python (a program's emitter object
    that holds the launch: ``emitter((x, w, b, y))``), or None."""
    if isinstance(obj, type) or obj is None:
        return None
    method = next((c.__dict__["__call__"] for c in type(obj).__mro__
                   if "__call__" in c.__dict__), None)
    return method if hasattr(method, "__code__") else None


def inline_kernel_macros(ks) -> None:
    """``ks.tree``'s top-level calls of helpers that hold the ``with T.Kernel`` block,
    replaced by the helpers' bodies (in place), when the kernel has no launch of its own."""
    renamed = 0
    for _ in range(_DEPTH):
        if _launches(ks.tree.body):
            return
        for index, stmt in enumerate(ks.tree.body):
            if not (isinstance(stmt, (ast.Expr, ast.Return)) and isinstance(stmt.value,
                                                                             ast.Call)):
                continue
            fn = _helper_function(resolve_static(stmt.value.func, ks.namespace))
            found = fn is not None and function_def_from_file(fn)
            if not found or not _holds_launch(found[1], fn, _DEPTH):
                continue
            if call_method(resolve_static(stmt.value.func, ks.namespace)) is fn:
                # `emitter(ops)` is `type(emitter).__call__(emitter, ops)`
                stmt.value.args.insert(0, copy.deepcopy(stmt.value.func))
            module = ast.Module(inline_call(
                ks, stmt, fn, *found, "the kernel's `with T.Kernel` block is in"), [])
            # the names the helper binds, its own (`M, N = A.shape` in a macro the kernel
            # calls does not rebind the kernel's T.const M, N)
            renamed += 1
            rename_locals(module, f"__{found[1].name}{renamed}")
            ks.tree.body[index:index + 1] = module.body
            break
        else:
            return


def launching_call(stmt, namespace) -> bool:
    """Whether ``stmt`` is a call statement of a helper (or ``@T.macro``) that holds a
    ``with T.Kernel`` block (TileLang's split-and-combine decoders call two in turn)."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    fn = _helper_function(resolve_static(stmt.value.func, namespace))
    found = fn is not None and function_def_from_file(fn)
    return bool(found) and _holds_launch(found[1], fn, _DEPTH)


def _holds_launch(fdef, fn, depth) -> bool:
    """Whether a helper's body holds the launch, itself or through a helper it calls."""
    if _launches(fdef.body):
        return True
    if depth == 0:
        return False
    namespace = current_namespace(fn)
    for stmt in fdef.body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            inner = _helper_function(resolve_static(stmt.value.func, namespace))
            found = inner is not None and function_def_from_file(inner)
            if found and _holds_launch(found[1], inner, depth - 1):
                return True
    return False


def inline_call(ks, stmt, fn, filename, fdef, what: str) -> list:
    """The statements of helper ``fn`` (``fdef``, parsed from ``filename``) that replace
    the call statement ``stmt``: its parameters renamed to the call's arguments. ``what``
    begins the errors' message ("<what> name(), called here: ...")."""
    call = stmt.value
    name = fdef.name

    def error(msg):
        return ks.error(f"{what} {name}(), called here: {msg}", stmt)

    if filename != ks.filename:
        raise error(f"{name} is defined in {filename}; a helper inlined into the kernel must "
                    f"be in the kernel's file")
    params = [a.arg for a in fdef.args.args]
    keyword_only = [a.arg for a in fdef.args.kwonlyargs]     # after `*` (RWKV's `*, out`)
    # `body(*ops)` where a helper inlined before made `ops` a tuple the call spells out
    # (`emit((x, y))` calling `body(*ops)`): its elements, as Python passes them
    if any(isinstance(a, ast.Starred) and isinstance(a.value, (ast.Tuple, ast.List))
           for a in call.args):
        call.args = [e for a in call.args for e in (
            a.value.elts if isinstance(a, ast.Starred) and isinstance(
                a.value, (ast.Tuple, ast.List)) else [a])]
    if fdef.args.vararg or fdef.args.kwarg or fdef.args.posonlyargs or \
            any(isinstance(a, ast.Starred) for a in call.args):
        raise error("its parameters must be plain positional ones (or keyword-only after "
                    "a bare `*`)")
    if len(call.args) > len(params):
        raise error(f"it takes {len(params)} positional argument(s), got {len(call.args)}")
    bound = dict(zip(params, call.args))
    for kw in call.keywords:
        if kw.arg not in params + keyword_only or kw.arg in bound:
            raise error(f"unexpected or repeated argument {kw.arg!r}")
        bound[kw.arg] = kw.value
    # the caller's names in its arguments stay the caller's (rename_locals renames the
    # helper's own apart from the kernel's)
    for value in bound.values():
        for n in syntax.walk(value):
            if isinstance(n, ast.Name):
                n.tj_ref = True
    own = current_namespace(fn)
    refs = _reference_params(fdef, own, bound, error)
    # an argument computed at the call (`load_rows(X, xf, bx * block_M)`): bound to a
    # name of its own before the body, evaluated once where the call is, as Python
    # evaluates it; a region or an element (`A[r, 0:n]`, `C[by * M, bx * N]`: a tile
    # operation's operand by its start) is passed as written
    arguments = []
    for p, value in list(bound.items()):
        if p in refs or isinstance(value, (ast.Name, ast.Constant, ast.Subscript)) or (
                isinstance(value, ast.Attribute) and _static_chain(value, ks.namespace)) \
                or not any(
                isinstance(n, ast.Name) for n in syntax.walk(value)) or (
                isinstance(value, (ast.Tuple, ast.List)) and all(
                    isinstance(e, (ast.Name, ast.Constant)) for e in value.elts)):
            continue                # (an expression of constants, a tuple of names: as
            #                           written, so that `body(*ops)` spells them out)
        fresh = f"__tj_{name}_{p}_{stmt.lineno}_{stmt.col_offset}"
        arguments.append(ast.copy_location(
            ast.Assign([ast.Name(fresh, ast.Store())], value), stmt))
        bound[p] = ast.Name(fresh, ast.Load())
    # a parameter left out: its default, the value Python computed when the helper was
    # defined (in the helper's scope, not the kernel's)
    values = (fn.__defaults__ or ()) if callable(fn) else ()
    defaults = list(zip(params[len(params) - len(values):], values))
    defaults += list(((getattr(fn, "__kwdefaults__", None) or {}) if callable(fn)
                      else {}).items())
    for p, value in defaults:
        if p in bound:
            continue
        if value is None or isinstance(value, (bool, int, float, str)):
            bound[p] = ast.Constant(value)
        else:
            fresh = f"__tj_{name}_{p}_default"
            ks.made[fresh] = ks.namespace[fresh] = value
            bound[p] = ast.Name(fresh, ast.Load())
    params = params + keyword_only
    missing = [p for p in params if p not in bound]
    if missing:
        raise error(f"missing argument(s) {', '.join(missing)}")
    assigned = {n.id for n in syntax.walk(fdef) if isinstance(n, ast.Name)
                and isinstance(n.ctx, ast.Store)}
    # a parameter the body assigns (`value += shfl_down(value, 16)`) is the helper's own
    # variable, as Python's parameters are (and TileLang's macro binds a value argument
    # to a new variable): it starts as the argument; a T.Ref parameter is the caller's
    for p in params:
        if p in assigned and p not in refs:
            arguments.append(ast.copy_location(
                ast.Assign([ast.Name(p, ast.Store())], bound.pop(p)), stmt))
    # shape symbols the kernel binds at its top (`n = cu.shape[0] - 1`, classic.py's
    # _bind_symbols, for those its helpers read): the helper reads the kernel's value
    symbols = {t.id for s in ks.tree.body if isinstance(s, ast.Assign)
               for t in s.targets if isinstance(t, ast.Name)
               and isinstance(own.get(t.id), SymbolicInt)}
    for n in syntax.walk(fdef):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and \
                n.id not in assigned and n.id not in params and n.id in own and \
                n.id not in symbols:
            if resolve_static(n, ks.namespace) is not own[n.id] and n.id not in bound:
                # a name the helper sees and the kernel does not (or sees as another
                # thing): a macro made in a program's factory reads the factory's
                # parameters (`block_M`) that the kernel's own body may never name. Its
                # value, bound under a name of its own in the kernel's namespace
                # (numbered apart from another helper of the same name's: RWKV-7's
                # macro factories each return an `_impl` reading its own `main`)
                fresh, k = f"__tj_{name}_{n.id}", 1
                while ks.namespace.get(fresh, own[n.id]) is not own[n.id]:
                    k += 1
                    fresh = f"__tj_{name}_{n.id}_{k}"
                ks.bind(fresh, fn, n.id)
                bound[n.id] = ast.Name(fresh, ast.Load())
    body = [s for s in fdef.body if not (
        s is fdef.body[0] and isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    body = _imports_bound(ks, body, name, bound, error)
    returns = [n for s in body for n in syntax.walk(s) if isinstance(n, ast.Return)]
    if any(r is not body[-1] for r in returns):
        # early returns under `if`s: one exit (tail_returns.py), or the rule's error
        body = single_exit(body, None if isinstance(stmt, ast.Expr) else f"__tj_{name}_ret")
        if body is None:
            raise error("a `return` inside a loop or `with` cannot be inlined; its "
                        "returns may end its body or the branches of its `if`s")
    elif returns and isinstance(stmt, ast.Expr):
        body = body[:-1]                # the kernel does not return what the helper does
    ks.inlined.add((fdef.lineno, getattr(fdef, "end_lineno", fdef.lineno), name, stmt.lineno))
    module = ast.Module(body=copy.deepcopy(body), type_ignores=[])
    if refs:
        _StoreReferences(refs).visit(module)
    renamed = SubstituteLoads(bound).visit(module)
    for node in syntax.walk(renamed):        # which call each statement came from
        if not hasattr(node, "tj_call"):
            node.tj_call = stmt.lineno
    return arguments + renamed.body


def _static_chain(node, namespace) -> bool:
    """``emitter.shape``: an attribute chain through a global or closure object of the
    kernel's, passed as written (its value known when the kernel is compiled)."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id in namespace


def _imports_bound(ks, body, name, bound, error) -> list:
    """``body`` without the helper's own top-level imports (``import math`` in an
    emitter's ``__call__``): each name one binds is the module (or its member) Python
    would bind, a global of the kernel's (imported now, as the call would)."""
    out = []
    for stmt in body:
        if not isinstance(stmt, (ast.Import, ast.ImportFrom)):
            out.append(stmt)
            continue
        if isinstance(stmt, ast.ImportFrom) and (stmt.level or any(
                a.name == "*" for a in stmt.names)):
            raise error(f"`{ast.unparse(stmt)}`: a helper's import is inlined where it names "
                        f"its module absolutely and the names it binds")
        try:
            if isinstance(stmt, ast.Import):
                values = {(a.asname or a.name.split(".")[0]):
                          importlib.import_module(a.name if a.asname else a.name.split(".")[0])
                          for a in stmt.names}
            else:
                module = importlib.import_module(stmt.module)
                values = {(a.asname or a.name): getattr(module, a.name) for a in stmt.names}
        except (ImportError, AttributeError) as e:
            raise error(f"`{ast.unparse(stmt)}` fails: {e}") from None
        for local, value in values.items():
            # (numbered apart from another helper's import of the name: every emitter's
            # method is a `__call__`)
            fresh, k = f"__tj_{name}_{local}_module", 1
            while ks.namespace.get(fresh, value) is not value:
                k += 1
                fresh = f"__tj_{name}_{local}_module_{k}"
            ks.made[fresh] = ks.namespace[fresh] = value
            bound[local] = ast.Name(fresh, ast.Load())
    return out


def _is_reference(arg: ast.arg, own) -> bool:
    """A parameter annotated ``T.Ref`` (or TileLang's deprecated ``T.Var``)."""
    return arg.annotation is not None and resolve_static(arg.annotation, own) in (T.Ref, T.Var)


def has_reference_params(fdef, own) -> bool:
    """Whether a helper has a ``T.Ref`` parameter: it is inlined, which a device
    function, taking values, cannot stand for."""
    return any(_is_reference(a, own) for a in fdef.args.args + fdef.args.kwonlyargs)


def _reference_params(fdef, own, bound, error) -> dict:
    """{parameter: the caller's variable or element} of the ``T.Ref`` parameters (their
    names already marked the caller's, ``tj_ref``, by ``inline_call``)."""
    refs = {}
    for a in fdef.args.args + fdef.args.kwonlyargs:
        if not _is_reference(a, own):
            continue
        value = bound.get(a.arg)
        if not isinstance(value, (ast.Name, ast.Subscript)):
            raise error(f"parameter {a.arg!r} is a T.Ref: its argument must be a variable "
                        f"(T.alloc_var) or an element (buf[i]), got "
                        f"`{ast.unparse(value) if value is not None else 'nothing'}`")
        refs[a.arg] = value
    return refs


class _StoreReferences(syntax.NodeTransformer):
    """A store to a ``T.Ref`` parameter stores into the caller's variable or element."""

    def __init__(self, refs):
        self.refs = refs

    def visit_Name(self, node):
        target = self.refs.get(node.id)
        if target is None or not isinstance(node.ctx, ast.Store):
            return node
        store = copy.deepcopy(target)
        store.ctx = ast.Store()
        return ast.copy_location(store, node)


def rename_locals(module, suffix):
    """The names the inlined body assigns, renamed apart from the kernel's; each keeps the
    name its source spells as ``tj_name``, for messages."""
    stored = {n.id for n in syntax.walk(module) if isinstance(n, ast.Name)
              and isinstance(n.ctx, ast.Store) and not getattr(n, "tj_ref", False)}
    # a lambda's own parameters are its names, not the body's (TileOPs' decode combine:
    # T.Fragment(shape, forward_thread_fn=lambda i, j: i) beside a loop over i, j)
    own = {id(n) for lam in syntax.walk(module) if isinstance(lam, ast.Lambda)
           for n in syntax.walk(lam.body) if isinstance(n, ast.Name)
           and n.id in {a.arg for a in lam.args.args + lam.args.kwonlyargs}}
    for n in syntax.walk(module):
        if isinstance(n, ast.Name) and n.id in stored and id(n) not in own and \
                not getattr(n, "tj_ref", False):       # (a T.Ref argument: the caller's)
            n.tj_name = getattr(n, "tj_name", n.id)
            n.id = n.id + suffix
