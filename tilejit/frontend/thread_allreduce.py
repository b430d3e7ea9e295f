"""TVM's thread all-reduce idiom (TileLang's GEMV examples), rewritten on the kernel's
tree into shared memory and barriers (``source.parse_kernel``, after the launch is found):

    with T.attr(T.comm_reducer(lambda x, y: x + y, [T.cast(0, dtype)]),
                "reduce_scope", T.reinterpret(T.uint64(0), dtype="handle")):
        T.evaluate(T.tvm_thread_allreduce(T.uint32(1), value, cond, result, tk,
                                          dtype="handle"))

becomes, with ``S = T.alloc_shared((x * y * z,), dtype)`` at the top of the launch's body
(one element per thread of the block, ``threads=(x, y, z)``) and ``t`` the thread's
linear index ``(tz * y + ty) * x + tx``:

    S[t] = value                        # T.if_then_else(cond, value, identity) unless True
    T.sync_threads()
    for r in T.serial(n):               # n: the reduced dimensions' threads (here y's)
        V[r] = S[(tz * y + r) * x + tx]  # V = T.alloc_local((n,), dtype), also at the top
    w = n
    while w > 1:                        # a tree: the widths halve
        h = (w + 1) // 2
        for r in T.serial(w - h):
            V[r] = fn(V[r], V[r + h])
        w = h
    result = V[0]
    T.sync_threads()                    # S is read before another all-reduce writes it

``fn``'s body is inlined with ``x``, ``y`` its two arguments. Every thread of a group (the
threads whose indices differ only along the reduced dimensions) folds the same values in
the same order, so all get the same result, in ``dtype`` after each step. For a group of a
power of two the tree is the butterfly TileLang's warp shuffles compute (lane ``i`` with
``i ^ h``, ``h`` halving), which for floats rounds as they do (a bfloat16 product of eight
values differs from the sequential order's). Only this shape is built: one value, a
reducer ``lambda x, y: <expr>`` with one identity (``T.cast(v, dtype)`` or
``dtype(v)``), thread variables bound by ``T.get_thread_binding(d)``. Any other use of
``T.attr``, ``T.comm_reducer``, ``T.tvm_thread_allreduce`` or ``T.evaluate`` in a kernel
is a CompileError at its line, but for ``with T.attr(..., "async_scope", 1):``, TVM's hint
that the copies inside may be asynchronous: they run as written (plain copies)."""
from __future__ import annotations

import ast
import copy
import linecache

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import (KernelSource, SubstituteLoads, kernel_call,
                                     resolve_static)
from tilejit.ir.markers import INTERNAL_BARRIER_ATTR
from tilejit.language.dtypes import DType
from tilejit.language.thread_allreduce import IDIOM

_TVM_NAMES = {T.attr: "T.attr", T.comm_reducer: "T.comm_reducer",
              T.tvm_thread_allreduce: "T.tvm_thread_allreduce", T.evaluate: "T.evaluate"}


def _is(node, func, namespace) -> bool:
    return isinstance(node, ast.Call) and resolve_static(node.func, namespace) is func


def _t(module, name, *args):
    """``T.<name>(*args)``, ``module`` the expression the kernel names the language by."""
    return ast.Call(ast.Attribute(copy.deepcopy(module), name, ast.Load()), list(args), [])


def _thread_variables(tree, namespace) -> dict:
    """{name: (dimension, extent or None)} of the names bound once, by
    ``name = T.get_thread_binding(d)`` or ``name = T.thread_binding(0, n,
    thread="threadIdx.x")`` (its ``n``, checked against the launch's extent)."""
    stores, found = {}, {}
    for node in syntax.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            stores[node.id] = stores.get(node.id, 0) + 1
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name):
            if _is(node.value, T.get_thread_binding, namespace):
                bound = (_binding_dim(node.value), None)
            elif _is(node.value, T.thread_binding, namespace):
                bound = _thread_binding(node.value)
            else:
                bound = (None, None)
            if bound[0] is not None:
                found[node.targets[0].id] = bound
    return {name: bound for name, bound in found.items() if stores.get(name) == 1}


def _static_int(expr, namespace):
    """The value of an expression of int constants and names bound to ints, or None."""
    names = {n.id for n in syntax.walk(expr) if isinstance(n, ast.Name)}
    if expr is None or not all(isinstance(namespace.get(n), int) for n in names) or any(
            isinstance(n, (ast.Call, ast.Attribute, ast.Subscript)) for n in syntax.walk(expr)):
        return None
    try:
        value = eval(compile(ast.Expression(copy.deepcopy(expr)), "<extent>", "eval"),  # noqa: S307
                     {"__builtins__": {}}, {n: namespace[n] for n in names})
    except Exception:
        return None
    return value if isinstance(value, int) else None


_AXES = {"threadIdx.x": 0, "threadIdx.y": 1, "threadIdx.z": 2}


def _thread_binding(call):
    """(dimension, extent ``n``) of ``T.thread_binding(0, n, thread="threadIdx.x")`` (or
    ``T.thread_binding(n, thread=...)``): the thread's own index along an axis, starting
    at 0 (TileLang's GEMV names its reducing threads so); (None, None) for any other
    form."""
    given = dict(zip(("start", "stop", "thread"), call.args))
    given.update({k.arg: k.value for k in call.keywords})
    thread = given.get("thread")
    start = given.get("start")
    if not (isinstance(thread, ast.Constant) and thread.value in _AXES):
        return None, None
    if "stop" in given and not (isinstance(start, ast.Constant) and start.value == 0):
        return None, None
    return _AXES[thread.value], given.get("stop", start)


def _lambda_source(func):
    """The ``ast.Lambda`` a Python lambda was made from (read from its file), or None."""
    code = getattr(func, "__code__", None)
    if code is None or getattr(func, "__name__", None) != "<lambda>":
        return None
    lines = linecache.getlines(code.co_filename)
    try:
        module = ast.parse("".join(lines))
    except SyntaxError:
        return None
    names = code.co_varnames[:code.co_argcount]
    found = [n for n in syntax.walk(module) if isinstance(n, ast.Lambda)
             and n.lineno == code.co_firstlineno and tuple(a.arg for a in n.args.args) == names]
    if len(found) > 1:
        # several on the line: the one whose body holds the code's first position
        spots = {(p[0], p[2]) for p in code.co_positions() if p[0] is not None}
        found = [n for n in found if (n.body.lineno, n.body.col_offset) in spots] or found
    return found[0] if len(found) == 1 else None


def _binding_dim(call):
    if call.keywords or len(call.args) > 1:
        return None
    if not call.args:
        return 0
    arg = call.args[0]
    if isinstance(arg, ast.Constant) and type(arg.value) is int and 0 <= arg.value < 3:
        return arg.value
    return None


class _AllReduces(syntax.NodeTransformer):
    def __init__(self, ks: KernelSource):
        self.ks = ks
        self.namespace = ks.namespace
        self.bindings = _thread_variables(ks.tree, ks.namespace)
        threads = next((k.value for k in kernel_call(ks).keywords if k.arg == "threads"), None)
        self.ndims = len(threads.elts) if isinstance(threads, (ast.Tuple, ast.List)) else 1
        self.extents = list(threads.elts) if isinstance(threads, (ast.Tuple, ast.List)) \
            else [threads]
        self.scratch = []           # the shared allocations, for the launch's body

    def error(self, message, node):
        return self.ks.error(message, node)

    def check_extent(self, var, dim, extent):
        """A ``T.thread_binding(0, n, ...)`` name reduced over all the launch's threads
        along its axis: ``n`` must be that extent (TVM's rule; fewer would sum the other
        threads' values in silently), where both are known now."""
        if dim is None or extent is None or dim >= self.ndims:
            return
        launch = self.extents[dim] if dim < len(self.extents) else None
        n, m = _static_int(extent, self.namespace), _static_int(launch, self.namespace)
        if n is not None and m is not None and n != m:
            raise self.error(f"T.tvm_thread_allreduce: {var.id} binds {n} threads along "
                             f"dimension {dim}, but T.Kernel launches {m} there and the "
                             f"all-reduce takes them all", var)

    def visit_With(self, node):
        if len(node.items) == 1 and _is(node.items[0].context_expr, T.attr, self.namespace):
            attr = node.items[0].context_expr
            if len(attr.args) == 3 and isinstance(attr.args[1], ast.Constant) and \
                    attr.args[1].value == "async_scope" and node.items[0].optional_vars is None:
                # TVM's hint that the copies inside may be cp.async (sglang's sparse
                # attention, before its T.cp_async_barrier_noinc): they run as plain
                # copies, done before the barrier arrives
                out = []
                for stmt in node.body:
                    new = self.visit(stmt)
                    out.extend(new if isinstance(new, list) else [new])
                return out
            return self.rewrite(node)
        return self.generic_visit(node)

    # -- the idiom's parts --------------------------------------------------------------
    def reducer(self, attr: ast.Call):
        """(the lambda, the identity expression, its dtype expression)."""
        if len(attr.args) != 3 or attr.keywords or \
                not _is(attr.args[0], T.comm_reducer, self.namespace) or \
                not (isinstance(attr.args[1], ast.Constant) and
                     attr.args[1].value == "reduce_scope"):
            raise self.error("T.attr is supported only as the thread all-reduce's "
                             f"\"reduce_scope\", {IDIOM}", attr)
        reducer = attr.args[0]
        fn, ident = (reducer.args + [None, None])[:2]
        if fn is not None and not isinstance(fn, ast.Lambda):
            # a lambda the kernel's closure holds (TileLang's issue 2628 passes one in)
            fn = _lambda_source(resolve_static(fn, self.namespace)) or fn
        if len(reducer.args) != 2 or reducer.keywords or not isinstance(fn, ast.Lambda) or \
                len(fn.args.args) != 2 or fn.args.vararg or fn.args.kwarg or \
                fn.args.kwonlyargs or fn.args.defaults or \
                not isinstance(ident, (ast.List, ast.Tuple)) or len(ident.elts) != 1:
            raise self.error("T.comm_reducer: only a reducer of one value is built, "
                             "T.comm_reducer(lambda x, y: <expression>, [identity]), got "
                             f"{ast.unparse(reducer)}", reducer)
        identity = ident.elts[0]
        if _is(identity, T.cast, self.namespace) and len(identity.args) == 2:
            dtype = identity.args[1]
        elif _is(identity, T.Cast, self.namespace) and len(identity.args) == 2:
            # TVM's tir.Cast(dtype, value), as TileLang's GEMV example writes the identity
            dtype = identity.args[0]
            identity = self.t("cast", identity.args[1], dtype)
        elif isinstance(identity, ast.Call) and len(identity.args) == 1 and \
                isinstance(identity.func, (ast.Name, ast.Attribute)) and \
                isinstance(resolve_static(identity.func, self.namespace), (DType, type(None))):
            # ``T.float32(0)``, or ``dtype(0)`` with dtype a parameter: T.cast(0, dtype)
            dtype = identity.func
            identity = self.t("cast", identity.args[0], dtype)
        else:
            raise self.error("T.comm_reducer: the identity must name its dtype, T.Cast(dtype, "
                             "value), "
                             "T.cast(value, dtype) or dtype(value) (the reduction's dtype), "
                             f"got {ast.unparse(identity)}", identity)
        return fn, identity, dtype

    def allreduce(self, node: ast.With):
        """(value, cond or None, result, [dimension of each reduced thread variable])."""
        stmt = node.body[0] if len(node.body) == 1 else None
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if not _is(call, T.evaluate, self.namespace) or len(call.args) != 1 or \
                not _is(call.args[0], T.tvm_thread_allreduce, self.namespace):
            raise self.error("the body of `with T.attr(T.comm_reducer(...), "
                             "\"reduce_scope\", ...)` must be the one statement "
                             "T.evaluate(T.tvm_thread_allreduce(...))",
                             stmt if stmt is not None else node)
        reduce = call.args[0]
        args = reduce.args
        for k in reduce.keywords:
            if k.arg != "dtype":
                raise self.error(f"T.tvm_thread_allreduce: unexpected keyword {k.arg}=", reduce)
        count = args[0] if args else None
        if isinstance(count, ast.Call) and len(count.args) == 1 and \
                isinstance(resolve_static(count.func, self.namespace), DType):
            count = count.args[0]
        if not (isinstance(count, ast.Constant) and type(count.value) is int):
            raise self.error("T.tvm_thread_allreduce: the first argument is the number of "
                             "values, T.uint32(1)", reduce)
        if count.value != 1:
            raise self.error(f"T.tvm_thread_allreduce of {count.value} values: only one "
                             "value is built (T.uint32(1), value, cond, result, "
                             "*thread_vars)", reduce)
        if len(args) < 5:
            raise self.error("T.tvm_thread_allreduce(T.uint32(1), value, cond, result, "
                             "*thread_vars): a value, a condition, a result and at least "
                             "one thread variable", reduce)
        value, cond, result = args[1:4]
        if not isinstance(result, (ast.Subscript, ast.Name)):
            raise self.error("T.tvm_thread_allreduce: the result must be an element "
                             f"(result[0]) or a name, got {ast.unparse(result)}", result)
        if isinstance(cond, ast.Constant) and cond.value is True:
            cond = None
        dims = []
        for var in args[4:]:
            dim, extent = self.bindings.get(var.id, (None, None)) if isinstance(
                var, ast.Name) else (_binding_dim(var) if _is(
                    var, T.get_thread_binding, self.namespace) else None, None)
            self.check_extent(var, dim, extent)
            if dim is None:
                raise self.error("T.tvm_thread_allreduce: a thread variable must be a name "
                                 "bound once by T.get_thread_binding(d) (d written as 0, 1 "
                                 "or 2) or T.thread_binding(0, n, thread=\"threadIdx.x\") "
                                 f"(.y, .z), got {ast.unparse(var)}", var)
            if dim in dims:
                raise self.error(f"T.tvm_thread_allreduce: thread dimension {dim} named "
                                 "twice", var)
            if dim >= self.ndims:
                raise self.error(f"T.tvm_thread_allreduce: thread dimension {dim} is not "
                                 "one of T.Kernel's threads= (written as a tuple "
                                 "threads=(x, y[, z]) for dimensions 1 and 2)", var)
            dims.append(dim)
        return value, cond, result, dims

    # -- the rewrite ----------------------------------------------------------------------
    def t(self, name, *args):
        return _t(self.module, name, *args)

    def _barrier(self):
        """``T.sync_threads()`` around the exchange through the shared scratch, marked as
        the front end's: no tensor is exchanged across it, so the kernel's tensors stay
        noalias (``passes/barriers.user_barriers``)."""
        call = self.t("sync_threads")
        setattr(call, INTERNAL_BARRIER_ATTR, True)
        return call

    def linear(self, index):
        """The linear thread index of the thread at ``index`` (one expression a dimension),
        x fastest."""
        flat = index[self.ndims - 1]
        for d in range(self.ndims - 2, -1, -1):
            flat = ast.BinOp(ast.BinOp(flat, ast.Mult(), self.t("get_thread_extent",
                                                             ast.Constant(d))),
                             ast.Add(), index[d])
        return flat

    def rewrite(self, node: ast.With):
        attr = node.items[0].context_expr
        if not isinstance(attr.func, ast.Attribute):
            raise self.error("write the thread all-reduce's T.attr as an attribute of the "
                             "language module (T.attr)", attr)
        self.module = attr.func.value
        fn, identity, dtype = self.reducer(attr)
        identity = ast.copy_location(identity, attr)
        value, cond, result, dims = self.allreduce(node)
        n = len(self.scratch)
        buf = f"__tj_allreduce{n}"
        size = self.t("get_thread_extent", ast.Constant(0))
        for d in range(1, self.ndims):
            size = ast.BinOp(size, ast.Mult(), self.t("get_thread_extent", ast.Constant(d)))
        alloc = ast.Assign([ast.Name(buf, ast.Store())],
                           self.t("alloc_shared", ast.Tuple([size], ast.Load()),
                              copy.deepcopy(dtype)))
        self.scratch.append(ast.copy_location(alloc, node))
        mine = [self.t("get_thread_binding", ast.Constant(d)) for d in range(self.ndims)]
        stored = value if cond is None else self.t("if_then_else", cond, value,
                                               copy.deepcopy(identity))
        store = ast.Assign([ast.Subscript(ast.Name(buf, ast.Load()), self.linear(mine),
                                          ast.Store())], stored)
        target = copy.deepcopy(result)
        target.ctx = ast.Store()

        # each thread's group (its reduced dimensions' threads, x fastest) copied from S
        # into a local array, then folded as a tree: the widths halve, element r taking
        # r + half (rounded up), which for a power-of-two group is the butterfly of
        # TileLang's warp shuffles, so every thread gets the same result
        group = [self.t("get_thread_extent", ast.Constant(d)) for d in dims]
        size = group[0]
        for extent in group[1:]:
            size = ast.BinOp(size, ast.Mult(), extent)
        tree, r = f"{buf}_tree", f"{buf}_r"
        self.scratch.append(ast.copy_location(ast.Assign(
            [ast.Name(tree, ast.Store())],
            self.t("alloc_local", ast.Tuple([size], ast.Load()), copy.deepcopy(dtype))), node))
        others = list(mine)
        stride: ast.expr = ast.Constant(1)
        for d, extent in zip(dims, group):
            index = ast.BinOp(ast.Name(r, ast.Load()), ast.FloorDiv(), stride)
            others[d] = ast.BinOp(index, ast.Mod(), copy.deepcopy(extent))
            stride = ast.BinOp(stride, ast.Mult(), copy.deepcopy(extent))
        element = ast.Subscript(ast.Name(buf, ast.Load()), self.linear(others), ast.Load())

        def slot(index):
            return ast.Subscript(ast.Name(tree, ast.Load()), index, ast.Load())
        gather = ast.For(ast.Name(r, ast.Store()), self.t("serial", copy.deepcopy(size)),
                         [ast.Assign([ast.Subscript(ast.Name(tree, ast.Load()),
                                                    ast.Name(r, ast.Load()), ast.Store())],
                                     element)], [])
        width, half = f"{buf}_width", f"{buf}_half"
        x, y = (a.arg for a in fn.args.args)
        folded = SubstituteLoads({
            x: slot(ast.Name(r, ast.Load())),
            y: slot(ast.BinOp(ast.Name(r, ast.Load()), ast.Add(), ast.Name(half, ast.Load())))
        }).visit(copy.deepcopy(fn.body))
        level = ast.For(
            ast.Name(r, ast.Store()),
            self.t("serial", ast.BinOp(ast.Name(width, ast.Load()), ast.Sub(),
                                       ast.Name(half, ast.Load()))),
            [ast.Assign([ast.Subscript(ast.Name(tree, ast.Load()), ast.Name(r, ast.Load()),
                                       ast.Store())], folded)], [])
        halve = ast.While(
            ast.Compare(ast.Name(width, ast.Load()), [ast.Gt()], [ast.Constant(1)]),
            [ast.Assign([ast.Name(half, ast.Store())], ast.BinOp(
                ast.BinOp(ast.Name(width, ast.Load()), ast.Add(), ast.Constant(1)),
                ast.FloorDiv(), ast.Constant(2))),
             level,
             ast.Assign([ast.Name(width, ast.Store())], ast.Name(half, ast.Load()))], [])
        stmts = [store, ast.Expr(self._barrier()), gather,
                 ast.Assign([ast.Name(width, ast.Store())], copy.deepcopy(size)), halve,
                 ast.Assign([target], slot(ast.Constant(0))),
                 ast.Expr(self._barrier())]
        for stmt in stmts:
            ast.copy_location(stmt, node)
        return stmts


class _Leftovers(syntax.NodeVisitor):
    def __init__(self, ks):
        self.ks = ks

    def visit_Attribute(self, node):
        if (node.attr if isinstance(node, ast.Attribute) else node.id) not in _SPELLINGS:
            self.generic_visit(node)
            return
        found = resolve_static(node, self.ks.namespace)
        what = next((name for f, name in _TVM_NAMES.items() if f is found), None)
        if what is not None:
            raise self.ks.error(f"{what} is supported only in TVM's thread all-reduce, "
                                f"{IDIOM}", node)
        self.generic_visit(node)

    visit_Name = visit_Attribute


# the names the idiom's functions go by (T.attr, or `from ... import attr`): a kernel
# spelling none of them is left as it is without resolving any of its names
_SPELLINGS = frozenset(name.split(".")[-1] for name in _TVM_NAMES.values())


class _Evaluations(syntax.NodeTransformer):
    """``T.evaluate(x)`` as a statement outside the idiom (TileLang's tests evaluate a
    tensor element, ``T.evaluate(A[0, 0])``): the expression statement ``x``, evaluated
    and its value dropped, as TVM's Evaluate is."""

    def __init__(self, namespace):
        self.namespace = namespace

    def visit_Expr(self, node):
        call = node.value
        if _is(call, T.evaluate, self.namespace) and len(call.args) == 1 \
                and not call.keywords \
                and not _is(call.args[0], T.tvm_thread_allreduce, self.namespace):
            return ast.copy_location(ast.Expr(call.args[0]), node)
        return node


def rewrite_thread_allreduce(ks: KernelSource) -> None:
    if not any(isinstance(n, ast.Attribute) and n.attr in _SPELLINGS
               or isinstance(n, ast.Name) and n.id in _SPELLINGS for n in syntax.walk(ks.tree)):
        return
    if not any(_is(node, T.attr, ks.namespace) for node in syntax.walk(ks.tree)):
        ks.tree = _Evaluations(ks.namespace).visit(ks.tree)
        _Leftovers(ks).visit(ks.tree)
        return
    rewriter = _AllReduces(ks)
    launch = rewriter.visit(ks.launch)
    launch.body[:0] = rewriter.scratch
    ks.tree = syntax.fix_missing_locations(_Evaluations(ks.namespace).visit(ks.tree))
    _Leftovers(ks).visit(ks.tree)
