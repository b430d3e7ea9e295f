"""Parse a kernel's source and locate its launch statement, keeping file and line."""
from __future__ import annotations

import ast
import builtins
import copy
import inspect
import linecache
import textwrap
import threading
from dataclasses import dataclass, field

from tilejit import syntax
from tilejit.frontend.scalar_tensors import has_scalar_indexing, rewrite_scalar_indexing
from tilejit.errors import CompileError
from tilejit import language as T
from tilejit.frontend.references import check_reads, current_namespace, function_reads
from tilejit.ir.markers import LANGUAGE

_RESOLVING = threading.Lock()
_MISSING = object()


@dataclass
class KernelSource:
    func: object
    filename: str
    tree: ast.FunctionDef           # decorators stripped; line numbers are the file's
    params: list[str]
    constexpr_params: list[str]
    defaults: dict = field(default_factory=dict)
    launch_index: int = -1           # index of the `with T.Kernel` statement in the body
    # globals + closure values: as at decoration until ``resolve()`` reads them again
    namespace: dict = field(default_factory=dict)
    resolved: bool = False
    reads: list = field(default_factory=list)  # references.Read: what it read, resolved
    # tensor parameters that may alias (T.annotate_restrict_buffers): not noalias
    aliased: set = field(default_factory=set)
    # T.annotate_l2_hit_ratio({A: r}): (A, the ratio expression) for the launch's L2
    # access policy window (runtime/kernel.py)
    l2_window: tuple | None = None
    # names the front end binds in ``namespace``: {name: (helper, its own name)}, a value
    # an inlined helper reads that the kernel does not see (kernel_macros.inline_call)
    bindings: dict = field(default_factory=dict)
    # values the front end computed once and binds for good: {name: value} (a helper a
    # factory the kernel calls made: helper_factories.py)
    made: dict = field(default_factory=dict)
    # {name: (the factory's call, the factory, its (args, kwargs))}: checked at resolve
    made_from: dict = field(default_factory=dict)
    # helpers defined in the kernel's body: {name: the names they read that only the
    # kernel binds} (local_helpers.py: inlined where called as statements)
    local_helpers: dict = field(default_factory=dict)
    # 0-d tensor parameters, indexed ``P[()]``: {name: line} (scalar_tensors.py)
    scalar_tensors: dict = field(default_factory=dict)
    # helpers inlined into the kernel: {(first line, last line, name, the call's line)}
    # (kernel_macros.inline_call), to name the call of an error inside one
    inlined: set = field(default_factory=set)
    # TileLang's doors (safe memory access): a @T.macro is inlined where it can be, so the
    # passes (its element accesses' guards) see its body, as TileLang's parser inlines it
    inline_macros: bool = False

    def bind(self, name: str, helper, helper_name: str) -> None:
        """``name`` in ``namespace`` is what ``helper_name`` is to ``helper`` (read again
        by ``resolve``)."""
        self.bindings[name] = (helper, helper_name)
        self.namespace[name] = current_namespace(helper)[helper_name]

    @property
    def launch(self) -> ast.With:
        return self.tree.body[self.launch_index]

    @property
    def threads_named(self) -> bool:
        """Whether the kernel's ``T.Kernel(...)`` gives ``threads=`` (or ``**options``
        that may), rather than taking the default."""
        call = self.launch.items[0].context_expr
        return isinstance(call, ast.Call) and any(k.arg in ("threads", None)
                                                  for k in call.keywords)

    def resolve(self, *others: dict) -> None:
        """Read the function's globals and closure values now, once: at the kernel's
        first compilation (its first call or ``compile()``), not at decoration, so names
        defined below the kernel resolve. Refreshes ``namespace`` in place and each of
        ``others`` (namespaces derived from it, such as the host program's), keeping
        their own extra names. Raises a CompileError for an array or tensor the kernel
        or a user function it calls reads (tilejit compiles none into a kernel)."""
        if self.resolved:
            return
        with _RESOLVING:
            if self.resolved:
                return
            fresh = current_namespace(self.func)
            for name, (helper, helper_name) in self.bindings.items():
                fresh[name] = current_namespace(helper).get(helper_name, _MISSING)
            fresh.update(self.made)
            gone = [name for name in self.namespace if name not in fresh]
            for ns in (self.namespace, *others):
                for name in gone:
                    ns.pop(name, None)
                ns.update(fresh)
            reads = function_reads(self.func, self.tree, self.namespace)
            check_reads(self.func, reads, self.filename, f"kernel {self.tree.name}")
            if self.made_from:
                # helper_factories imports this module (a circle broken here)
                from tilejit.frontend.helper_factories import check_made_helpers
                check_made_helpers(self)
            self.reads = reads
            self.resolved = True

    def changed_globals(self) -> list[str]:
        """What the kernel reads (a global or closure variable, or an attribute read
        through one: ``cfg.BLOCK``) that is bound to another value than ``resolve()``
        found. A few lookups per name: for the slow path, not a cached launch."""
        cells = dict(zip(self.func.__code__.co_freevars, self.func.__closure__ or ()))
        changed = set()
        for read in self.reads:
            root, *attrs = read.name.split(".")
            try:
                if root in self.bindings:        # an inlined helper's, read where it is
                    helper, helper_name = self.bindings[root]
                    now = current_namespace(helper)[helper_name]
                elif root in self.made:          # made once, when the kernel was defined
                    now = self.made[root]
                else:
                    now = cells[root].cell_contents if read.kind == "closure" else \
                        self.func.__globals__[root]
            except (KeyError, ValueError):   # deleted, or an emptied cell
                now = _MISSING
            if not _same(now, read.root):
                changed.add(root)
                continue
            try:
                for attr in attrs:
                    now = getattr(now, attr)
            except Exception:   # deleted, or a property that fails
                now = _MISSING
            if not _same(now, read.value):
                changed.add(read.name)
        return sorted(changed)

    def error(self, message: str, node: ast.AST | None) -> CompileError:
        return CompileError(message, self.filename, getattr(node, "lineno", None))


# the allocations whose names are fragments (``names_bound_to(tree, ns, these)``)
FRAGMENT_ALLOCATIONS = frozenset(getattr(T, n) for n in ("alloc_fragment", "alloc_reducer")
                                 if hasattr(T, n))


def names_bound_to(tree: ast.AST, namespace: dict, functions) -> frozenset:
    """The names ``tree`` assigns the result of a call of one of ``functions``
    (``t = T.alloc_local(...)``: the names of its local tiles)."""
    return frozenset(
        t.id for n in syntax.walk(tree) if isinstance(n, ast.Assign)
        and isinstance(n.value, ast.Call)
        and resolve_static(n.value.func, namespace) in functions
        for t in n.targets if isinstance(t, ast.Name))


def resolve_static(node: ast.AST, namespace: dict):
    """The Python object an expression such as ``T.Parallel`` or ``tilejit.language.copy``
    names, looked up in the kernel's globals and closure; None if it is not a plain
    name or attribute chain, or is not found. The front end's own name of the language
    (``__tj_language``, in the calls its rewrites write) is the language."""
    if isinstance(node, ast.Name):
        if node.id in namespace:
            return namespace[node.id]
        if node.id == LANGUAGE:
            return T
        return getattr(builtins, node.id, None)
    if isinstance(node, ast.Attribute):
        base = resolve_static(node.value, namespace)
        return getattr(base, node.attr, None) if base is not None else None
    return None


def assigned_names(fdef: ast.FunctionDef) -> set:
    """The names a kernel assigns anywhere, and its parameters."""
    return {n.id for n in syntax.walk(fdef) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Store)} | {a.arg for a in fdef.args.args}


_PURE_BUILTINS = {"len": len, "min": min, "max": max, "abs": abs}


def static_truth(test: ast.AST, namespace: dict, assigned: set):
    """The truth of a condition made of constants and names of the kernel's globals and
    closure that the kernel does not assign (``op == "sum"``); None if it is not one.
    An ``and`` with one such operand false is false, an ``or`` with one true is true,
    whatever the others (``j == 3 and store_extra``), as TileLang's builder simplifies
    its ``T.And``."""
    if isinstance(test, ast.BoolOp):
        parts = [static_truth(v, namespace, assigned) for v in test.values]
        decisive = isinstance(test.op, ast.Or)
        if decisive in parts:
            return decisive
        return (not decisive) if None not in parts else None
    calls = [n for n in syntax.walk(test) if isinstance(n, ast.Call)]
    # `len(shape) == 1`: a pure builtin of such values (not one the program rebinds)
    if any(not isinstance(c.func, ast.Name) or c.func.id not in _PURE_BUILTINS
           or c.keywords or c.func.id in namespace or c.func.id in assigned for c in calls):
        return None
    called = {c.func.id for c in calls}
    names = {n.id for n in syntax.walk(test) if isinstance(n, ast.Name)} - called
    if not all(isinstance(n, (ast.Name, ast.Constant, ast.Compare, ast.BoolOp, ast.Call,
                              ast.UnaryOp, ast.Load, ast.cmpop, ast.boolop, ast.unaryop))
               for n in syntax.walk(test)):
        return None
    if names & assigned or not names <= set(namespace):
        return None
    try:
        value = eval(compile(ast.Expression(test), "<test>", "eval"),  # noqa: S307
                     {"__builtins__": {n: _PURE_BUILTINS[n] for n in called}},
                     {n: namespace[n] for n in names})
    except Exception:       # noqa: BLE001 - not a compile-time condition after all
        return None
    return bool(value) if isinstance(value, (bool, int, str)) else None


class SubstituteLoads(syntax.NodeTransformer):
    """Each load of a name in ``exprs`` ({name: expression}) replaced by a copy of its
    expression (stores are left alone)."""

    def __init__(self, exprs: dict):
        self.exprs = exprs

    def visit_Name(self, node):
        expr = self.exprs.get(node.id)
        if expr is None or not isinstance(node.ctx, ast.Load):
            return node
        return ast.copy_location(copy.deepcopy(expr), node)


def spelled_names(tree: ast.AST) -> set:
    """Every name and attribute name the tree spells (one walk): a rewrite for a few
    functions of the language runs only where one of them is written."""
    return {n.id if isinstance(n, ast.Name) else n.attr for n in syntax.walk(tree)
            if isinstance(n, (ast.Name, ast.Attribute))}


def bound_arguments(call: ast.Call, params, unexpected) -> dict:
    """{parameter: argument expression} of ``call`` by position, then by keyword;
    ``unexpected(name)`` is the error raised for a keyword ``params`` lacks or one given
    twice."""
    given = dict(zip(params, call.args))
    for k in call.keywords:
        if k.arg not in params or k.arg in given:
            raise unexpected(k.arg)
        given[k.arg] = k.value
    return given


def statement_lists(tree: ast.AST):
    """Every non-empty list of statements in ``tree`` (bodies, ``else`` and ``finally``
    branches), for a rewrite that works on neighbouring statements in place."""
    for node in syntax.walk(tree):
        for name in ("body", "orelse", "finalbody"):
            stmts = getattr(node, name, None)
            if isinstance(stmts, list) and stmts and isinstance(stmts[0], ast.stmt):
                yield stmts


def flatten_statements(statements) -> list:
    """Statements with the lists a ``NodeTransformer`` returned for one of them spliced
    in."""
    out = []
    for s in statements:
        out.extend(s if isinstance(s, list) else [s])
    return out


VARIABLE_SCOPES = ("local.var", "local")


def alloc_var_arguments(call: ast.Call) -> dict:
    """``{"dtype": …, "init": …, "scope": …}`` (expressions; the ones not given left
    out) of ``T.alloc_var`` called as TileLang takes it: ``(dtype, init)``, ``(dtype,
    "local.var")``, ``(dtype, init, scope)``, ``init=`` and ``scope=`` by keyword. A
    ``TypeError`` saying which when the call gives one twice."""
    out = dict(zip(("dtype",), call.args))
    rest = call.args[1:]
    if len(rest) == 1:
        only = rest[0]
        out["scope" if isinstance(only, ast.Constant) and isinstance(only.value, str)
            else "init"] = only
    elif len(rest) == 2:
        out["init"], out["scope"] = rest
    elif len(rest) > 2:
        raise TypeError("T.alloc_var(dtype, init, scope) takes at most three arguments")
    for k in call.keywords:
        if k.arg in out:
            raise TypeError(f"T.alloc_var: {k.arg} given twice")
        out[k.arg] = k.value
    return out


def is_call_to(node: ast.AST, obj, namespace: dict) -> bool:
    return isinstance(node, ast.Call) and resolve_static(node.func, namespace) is obj


def is_launch(node: ast.AST, namespace: dict) -> bool:
    """A ``T.Kernel(...)`` or ``T.ClusterKernel(...)`` call: a kernel's launch."""
    return isinstance(node, ast.Call) and resolve_static(node.func, namespace) in (
        T.Kernel, T.ClusterKernel)


def _same(a, b) -> bool:
    """The same object, or equal values of one type (a rebound ``SCALE = 3`` is)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    try:
        return bool(a == b) and (not isinstance(a, float) or repr(a) == repr(b))   # -0.0
    except Exception:   # an elementwise or failing comparison
        return False


def function_namespace(func) -> dict:
    """``func``'s globals and closure values as they are now (a copy)."""
    return current_namespace(func)


def _is_constexpr_node(node) -> bool:
    """``T.constexpr`` / ``constexpr`` written as an annotation (read from the AST)."""
    return (isinstance(node, ast.Attribute) and node.attr == "constexpr") or (
        isinstance(node, ast.Name) and node.id == "constexpr")


def _is_constexpr_annotation(ann) -> bool:
    if ann is T.constexpr:
        return True
    return isinstance(ann, str) and ann.split(".")[-1] == "constexpr"


_MODULES: dict = {}


def function_def_from_file(func, copy_tree: bool = True):
    """(filename, a copy of the function's ast.FunctionDef with the file's line
    numbers) from the whole file's syntax tree, parsed once per file version (much
    cheaper than inspect's tokenizer); None when the file does not give it.
    ``copy_tree=False`` gives the shared tree itself, for a caller that only reads it."""
    code = getattr(func, "__code__", None)
    if code is None:
        return None
    filename = code.co_filename
    lines = linecache.getlines(filename)
    if lines:
        text = "".join(lines)
        key = (filename, hash(text))
        tree = _MODULES.get(key)
        if tree is None:
            try:
                tree = _MODULES[key] = ast.parse(text)
            except SyntaxError:
                tree = None
        if tree is not None:
            for node in syntax.walk(tree):
                if isinstance(node, ast.FunctionDef) and node.name == func.__name__:
                    first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
                    if first == code.co_firstlineno:
                        if not copy_tree:
                            return filename, node
                        with syntax.deep_trees():
                            return filename, copy.deepcopy(node)
    return None


def _function_def(func):
    """(filename, the function's ast.FunctionDef with the file's line numbers)."""
    found = function_def_from_file(func)
    if found is not None:
        return found
    filename = func.__code__.co_filename
    try:
        src_lines, first = inspect.getsourcelines(func)
        filename = inspect.getsourcefile(func) or filename
    except (OSError, TypeError) as e:
        raise CompileError(f"cannot read the source of {func.__qualname__}: {e}; a kernel "
                           "must be defined in a file (or a notebook cell)") from None
    module = ast.parse(textwrap.dedent("".join(src_lines)))
    ast.increment_lineno(module, first - 1)
    return filename, module.body[0]


def parse_kernel(func, tree=None, inline_macros=False) -> KernelSource:
    """The kernel's source; ``tree`` = (filename, FunctionDef) gives it pre-parsed (a
    front end that desugared it, such as ``tilejit.jit``); ``inline_macros``:
    ``KernelSource.inline_macros``."""
    with syntax.deep_trees():
        return _parse_kernel(func, tree, inline_macros)


def _parse_kernel(func, tree=None, inline_macros=False) -> KernelSource:
    filename, fdef = tree if tree is not None else _function_def(func)
    first = fdef.lineno
    if not isinstance(fdef, ast.FunctionDef):
        raise CompileError("@tilejit.kernel applies to a plain `def` function",
                           filename, first)
    fdef.decorator_list = []
    args = fdef.args
    if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs:
        raise CompileError("kernel parameters must be plain positional parameters "
                           "(no *args, **kwargs, keyword-only or positional-only)",
                           filename, fdef.lineno)
    params = [a.arg for a in args.args]
    annotations = getattr(func, "__annotations__", {})
    constexprs = [a.arg for a in args.args if _is_constexpr_annotation(annotations.get(a.arg))
                  or (a.annotation is not None and _is_constexpr_node(a.annotation))]
    sig = inspect.signature(func)
    defaults = {k: v.default for k, v in sig.parameters.items()
                if v.default is not inspect.Parameter.empty}
    ks = KernelSource(func, filename, fdef, params, constexprs, defaults,
                      namespace=function_namespace(func), inline_macros=inline_macros)
    # the two import this module (its source reading helpers): a circle broken here
    from tilejit.frontend.assumptions import hoist_host_assumptions
    from tilejit.frontend.kernel_macros import inline_kernel_macros  # (the same circle)
    from tilejit.frontend.tile_helpers import inline_tile_helpers    # (the same circle)
    from tilejit.frontend.let_bindings import rewrite_let_bindings   # (the same circle)
    from tilejit.frontend.thread_allreduce import rewrite_thread_allreduce  # (the same circle)
    from tilejit.frontend.print_buffers import rewrite_prints        # (the same circle)
    from tilejit.frontend.generic_reduce import rewrite_generic_reduces  # (the same circle)
    from tilejit.frontend.restrict_annotations import (  # (the same circle)
        take_function_annotations, take_l2_annotations, take_min_blocks_annotations,
        take_restrict_annotations)
    from tilejit.frontend.let_bindings import rewrite_ldg            # (the same circle)
    from tilejit.frontend.tma_store_forms import rewrite_tma_store_forms  # (the same)
    from tilejit.frontend.helper_factories import bind_made_helpers   # (the same circle)
    from tilejit.frontend.local_helpers import (  # (the same circle)
        check_local_helper_calls, define_local_helpers)
    from tilejit.frontend.trace_prints import run_trace_time_prints  # (the same circle)
    from tilejit.frontend.static_branches import fold_static_branches  # (the same circle)
    from tilejit.frontend.raw_launches import rewrite_raw_launches  # (the same circle)
    from tilejit.frontend.async_tile_copies import rewrite_async_tile_copies  # (the same)
    from tilejit.frontend.tir_branches import rewrite_tir_branches  # (the same circle)
    from tilejit.frontend.eval_strings import rewrite_eval_strings  # (the same circle)
    from tilejit.frontend.tir_parallel import rewrite_tir_parallel  # (the same circle)
    from tilejit.frontend.index_helpers import spell_index_helpers  # (the same circle)
    if "eval" in spelled_names(ks.tree) or any(      # eval of a string the program gives,
            isinstance(n, ast.JoinedStr) for n in syntax.walk(ks.tree)):    # an f-string
        rewrite_eval_strings(ks)
    if any(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) for s in ks.tree.body):
        define_local_helpers(ks)
    rewrite_let_bindings(ks)
    bind_made_helpers(ks)
    inline_kernel_macros(ks)
    inline_tile_helpers(ks)
    spell_index_helpers(ks)             # y[coords(r, c)]: the tuple the helper returns
    if spelled_names(ks.tree) & {"thread_binding", "launch_thread"}:
        rewrite_raw_launches(ks)        # (after the helpers: one may hold a binding)
    if "async_copy" in spelled_names(ks.tree):      # (after the helpers it may be in)
        rewrite_async_tile_copies(ks)
    if ks.local_helpers:
        check_local_helper_calls(ks)
    if has_scalar_indexing(ks.tree):             # 0-d tensors (after the helpers)
        rewrite_scalar_indexing(ks)
    from tilejit.frontend.tvm_calls import rewrite_tvm_calls, spells_tvm_calls  # (circle)
    if spells_tvm_calls(spelled_names(ks.tree)):     # thread_return, warp shuffles, extern
        rewrite_tvm_calls(ks)
    from tilejit.frontend.static_comprehensions import (  # (the same circle)
        has_comprehensions, unroll_comprehensions)
    if has_comprehensions(ks.tree):             # over compile-time sequences: unrolled
        unroll_comprehensions(ks)
    if {"alloc_var", "copy"} <= spelled_names(ks.tree):   # T.copy of one element
        from tilejit.frontend.scalar_copies import rewrite_scalar_copies  # (the same circle)
        rewrite_scalar_copies(ks)
    if spelled_names(ks.tree) & {"If", "Then", "Else"}:   # TVM's script branches: an if
        rewrite_tir_branches(ks)
    if "parallel" in spelled_names(ks.tree):     # TVM's parallel loop: a T.Parallel
        rewrite_tir_parallel(ks)
    fold_static_branches(ks)
    from tilejit.frontend.layout_values import bind_layout_values  # (the same circle)
    bind_layout_values(ks)              # `a_layout = T.Fragment(...)`: computed now
    spelled = spelled_names(ks.tree)
    if "annotate_restrict_buffers" in spelled:
        take_restrict_annotations(ks)
    if "annotate_min_blocks_per_sm" in spelled:
        take_min_blocks_annotations(ks)
    if "annotate_l2_hit_ratio" in spelled:
        take_l2_annotations(ks)
    if spelled & {"annotate_pass_configs", "annotate_compile_flags"}:
        take_function_annotations(ks)
    if "reduce" in spelled:
        rewrite_generic_reduces(ks)
    if "__ldg" in spelled:
        rewrite_ldg(ks)
    if spelled & {"tma_copy", "tma_store_arrive", "tma_store_wait"}:
        rewrite_tma_store_forms(ks)
    run_trace_time_prints(ks)
    ks.launch_index = _find_launch(ks)
    rewrite_thread_allreduce(ks)
    rewrite_prints(ks)
    hoist_host_assumptions(ks)
    return ks


def _find_launch(ks: KernelSource) -> int:
    found = []
    for index, stmt in enumerate(ks.tree.body):
        if isinstance(stmt, ast.With) and any(
                is_launch(item.context_expr, ks.namespace) for item in stmt.items):
            found.append(index)
    for node in syntax.walk(ks.tree):
        if isinstance(node, ast.With) and node not in [ks.tree.body[i] for i in found]:
            if any(is_launch(item.context_expr, ks.namespace) for item in node.items):
                raise ks.error("`with T.Kernel(...)` must be a top-level statement of the "
                               "kernel function, not nested in another statement", node)
    if not found:
        from tilejit.frontend.validate import first_unknown_language_name   # (a circle)
        raise first_unknown_language_name(ks) or ks.error(
            "a kernel needs one `with T.Kernel(...) as bx:` block", ks.tree)
    if len(found) > 1:
        raise ks.error("a kernel has exactly one `with T.Kernel(...)` block; found another",
                       ks.tree.body[found[1]])
    index = found[0]
    launch = ks.tree.body[index]
    if len(launch.items) != 1:
        raise ks.error("`with T.Kernel(...)` takes no other context managers", launch)
    for stmt in ks.tree.body[index + 1:]:
        if not isinstance(stmt, ast.Return):
            raise ks.error("only `return` may follow the `with T.Kernel(...)` block", stmt)
    tensors = None          # the tensor parameters, when a host statement makes a call
    for stmt in ks.tree.body[:index]:
        for node in syntax.walk(stmt):
            if isinstance(node, (ast.For, ast.While, ast.With, ast.Return)):
                raise ks.error("the statements before `with T.Kernel` run on the host and "
                               "may only compute values (no loops, with or return)", node)
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) and \
                    isinstance(node.value, ast.Name) and node.value.id in ks.params:
                raise ks.error("the statements before `with T.Kernel` run on the host and "
                               "may only compute values: a tensor is written inside the "
                               "kernel's `with T.Kernel` block", node)
            if isinstance(node, ast.Call):
                if tensors is None:
                    tensors = tensor_param_names(ks)
                _check_host_call(ks, node, tensors)
    return index


# the language's operations a host statement may hand a tensor parameter: they make or
# describe a tensor (T.make_tensor, T.match_buffer: its own error) or annotate the
# kernel's tensors, none runs on the tensor's elements
_HOST_TENSOR_CALLS = ("make_tensor", "match_buffer", "annotate_restrict_buffers",
                      "annotate_l2_hit_ratio", "annotate_layout", "annotate_safe_value")
# the tile operations (a whole block's work on tiles or tensors); on the host, where a
# tensor parameter is only its shape and address, the simulator had them fail inside
_HOST_TILE_OPS = T.tiles.TILE_OPERATIONS + (
    "reduce", "cummax", "gemm_v1", "gemm_v2", "wgmma_gemm", "wgmma_gemm_sp", "atomic_store",
    "atomic_load", "atomic_addx2", "atomic_addx4", "tma_copy", "copy_cluster", "async_copy",
    "finalize_reducer", "reducer_init", "reducer_update", "c2d_im2col", "im2col")


def _check_host_call(ks: KernelSource, call: ast.Call, tensors: set) -> None:
    """A call before ``T.Kernel`` (run on the host, where a tensor argument is its shape
    and address only): refused if it is a tile operation, a language call handed a tensor
    parameter, or a method of a tensor parameter (``A.fill_(0)``). A helper of the user's
    handed a tensor stays allowed: it may read ``A.shape`` (a helper with tile operations
    was inlined, its operations checked here)."""
    message = ("the statements before `with T.Kernel` run on the host and may only compute "
               "values: {what} runs inside the kernel's `with T.Kernel` block")
    fn = resolve_static(call.func, ks.namespace)
    name = _language_name(fn)
    if name in _HOST_TILE_OPS:
        raise ks.error(message.format(what=f"a tile operation (T.{name})"), call)
    if name is not None and name not in _HOST_TENSOR_CALLS:
        for arg in list(call.args) + [k.value for k in call.keywords]:
            if isinstance(arg, ast.Starred):
                arg = arg.value
            if isinstance(arg, ast.Name) and arg.id in tensors:
                raise ks.error(message.format(
                    what=f"T.{name} of the tensor parameter {arg.id!r}"), call)
    if isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name) and \
            call.func.value.id in tensors:
        raise ks.error(message.format(
            what=f"a method of the tensor parameter {call.func.value.id!r} "
                 f"(.{call.func.attr}())"), call)


def _language_name(fn) -> str | None:
    """The name ``fn`` has in the language (``T.clear`` -> "clear"), or None."""
    if fn is None or not callable(fn):
        return None
    name = getattr(fn, "__name__", None)
    if isinstance(name, str) and getattr(T, name, None) is fn:
        return name
    return next((n for n, v in vars(T).items() if v is fn and not n.startswith("_")), None)


def tensor_param_names(ks: KernelSource) -> set:
    """The parameters known to be tensors: annotated ``T.Tensor(...)`` (or
    ``T.Buffer``...), indexed or asked for ``.shape`` / ``.strides`` in the source, or
    viewed (``T.reshape(P, ...)``)."""
    annotations = getattr(ks.func, "__annotations__", None) or {}
    annotated = {p for p in ks.params
                 if isinstance(annotations.get(p), T.tilelang_names.TensorAnnotation)}
    return annotated | set(tensor_params(ks)) | set(viewed_params(ks))


def kernel_call(ks: KernelSource) -> ast.Call:
    return ks.launch.items[0].context_expr


def block_index_names(ks: KernelSource) -> list[str]:
    """The names bound by ``as bx`` / ``as (bx, by)``; [] when there is no ``as``."""
    target = ks.launch.items[0].optional_vars
    ngrid = len(kernel_call(ks).args)
    if target is None:
        return []
    if isinstance(target, ast.Name):
        names = [target.id]
    elif isinstance(target, (ast.Tuple, ast.List)) and all(
            isinstance(e, ast.Name) for e in target.elts):
        names = [e.id for e in target.elts]
    else:
        raise ks.error("`with T.Kernel(...) as` binds a name or a tuple of names", target)
    if len(names) != ngrid:
        raise ks.error(f"`with T.Kernel` has {ngrid} grid extent(s) but binds "
                       f"{len(names)} block index name(s); bind one name per extent", target)
    return names


def expected_ranks(ks: KernelSource, walk=syntax.walk) -> dict[str, tuple[int, int]]:
    """Ranks the source implies for its parameters: ``P[i, j]`` (2) and
    ``a, b = P.shape`` (2); {name: (rank, line)} for the first such use among the nodes
    ``walk`` gives (``analysis.live_walk``: not in a branch a compile-time ``if`` does
    not take)."""
    params = set(ks.params)
    # a 0-d tensor (``P[()]``, indexed P[0] from the front end on): rank 0
    found: dict[str, tuple[int, int]] = {n: (0, line) for n, line in ks.scalar_tensors.items()}
    for node in walk(ks.tree):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
                and node.value.id in params:
            index = node.slice
            if isinstance(index, ast.Tuple):
                if any(isinstance(e, ast.Slice) for e in index.elts):
                    continue
                found.setdefault(node.value.id, (len(index.elts), node.lineno))
            elif not isinstance(index, ast.Slice) and isinstance(node.ctx, (ast.Load, ast.Store)):
                found.setdefault(node.value.id, (1, node.lineno))
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                node.targets[0], ast.Tuple):
            v = node.value
            if isinstance(v, ast.Attribute) and v.attr == "shape" and isinstance(
                    v.value, ast.Name) and v.value.id in params:
                found.setdefault(v.value.id, (len(node.targets[0].elts), node.lineno))
    return found


def tensor_params(ks: KernelSource) -> dict[str, int]:
    """The parameters the source uses as tensors: indexed (``P[i]``) or asked for a
    tensor's attribute (``P.shape``, ``P.strides``); {name: line of the first such use}.
    A parameter the source compares with None (``P is not None``: an optional tensor)
    is left out."""
    params = set(ks.params)
    optional = set()
    found: dict[str, int] = {}
    for node in syntax.walk(ks.tree):
        if isinstance(node, ast.Compare) and any(isinstance(op, (ast.Is, ast.IsNot))
                                                 for op in node.ops):
            optional.update(n.id for n in [node.left, *node.comparators]
                            if isinstance(n, ast.Name))
        if isinstance(node, ast.Subscript) or (
                isinstance(node, ast.Attribute) and node.attr in ("shape", "strides")):
            if isinstance(node.value, ast.Name) and node.value.id in params:
                line = found.get(node.value.id)
                if line is None or node.lineno < line:
                    found[node.value.id] = node.lineno
    return {name: line for name, line in found.items() if name not in optional}


# the tile operations' destination operand: its position (and keyword)
DESTINATIONS = {"copy": 1, "fill": 0, "clear": 0, "gemm": 2, "reduce_sum": 1,
                 "reduce_max": 1, "reduce_min": 1, "reduce_abssum": 1, "reduce_absmax": 1,
                 "reduce_bitand": 1, "reduce_bitor": 1, "reduce_bitxor": 1, "cumsum": 1,
                 "cummax": 1, "atomic_add": 0, "atomic_max": 0, "atomic_min": 0, "atomic_or": 0,
                 "atomic_store": 0, "atomic_addx2": 0, "atomic_addx4": 0, "tma_copy": 1}


def viewed_params(ks: KernelSource) -> dict[str, int]:
    """The parameters the source takes a view of (``V = T.reshape(P, …)`` or
    ``T.view(P, …)``), which must be contiguous; {name: first line}."""
    found: dict[str, int] = {}
    for _view, param, line in _views(ks):
        found.setdefault(param, line)
    return found


def _is_view(node, namespace) -> bool:
    return isinstance(node, ast.Call) and resolve_static(node.func, namespace) in (
        T.reshape, T.view)


def _views(ks: KernelSource):
    """(view name or None, parameter, line) of each ``T.reshape | T.view(P, …)`` call,
    assigned (``V = …``) or written in place, of a parameter or of a view of one."""
    params = set(ks.params)
    aliases: dict[str, str] = {}
    found = []
    calls = sorted((n for n in syntax.walk(ks.tree) if _is_view(n, ks.namespace)),
                   key=lambda n: (n.lineno, n.col_offset))
    targets = {id(n.value): n.targets[0].id for n in syntax.walk(ks.tree)
               if isinstance(n, ast.Assign) and len(n.targets) == 1
               and isinstance(n.targets[0], ast.Name)}
    for call in calls:
        buffer = call.args[0] if call.args else next(
            (k.value for k in call.keywords if k.arg == "buffer"), None)
        if not isinstance(buffer, ast.Name):
            continue
        param = buffer.id if buffer.id in params else aliases.get(buffer.id)
        if param is None:
            continue
        view = targets.get(id(call))
        if view is not None:
            aliases[view] = param
        found.append((view, param, call.lineno))
    return found


def written_params(ks: KernelSource) -> dict[str, int]:
    """The parameters the source writes: ``P[i] = …``, ``P[i] += …``, or the
    destination of a tile operation (``T.copy(tile, P[i, j])``), directly or through a
    view of it; {name: first line}."""
    params = set(ks.params)
    aliases = {view: param for view, param, _ in _views(ks) if view is not None}
    found: dict[str, int] = {}

    def note(node, line):
        while isinstance(node, ast.Subscript):
            node = node.value
        if _is_view(node, ks.namespace) and node.args:
            node = node.args[0]                  # a view written in place
        if isinstance(node, ast.Name) and node.id in aliases:
            node = ast.Name(aliases[node.id], ast.Load())
        if isinstance(node, ast.Name) and node.id in params:
            if node.id not in found or line < found[node.id]:
                found[node.id] = line

    for node in syntax.walk(ks.tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            note(node, node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name)):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
            position = DESTINATIONS.get(name)
            if position is None:
                continue
            dst = next((k.value for k in node.keywords if k.arg == "dst"), None)
            if dst is None and name in ("cumsum", "cummax") and len(node.args) == 1:
                position = 0
            if dst is None and position < len(node.args):
                dst = node.args[position]
            if dst is not None:
                note(dst, node.lineno)
    return found


# calls whose arguments are integer extents, and those whose first argument is a shape
_EXTENT_CALLS = {"Parallel", "serial", "Pipelined", "unroll", "vectorized", "range", "Kernel",
                 "ceildiv"}
_SHAPE_CALLS = {"alloc_shared", "alloc_fragment", "alloc_local", "empty"}


def integer_constexprs(ks: KernelSource) -> dict[str, str]:
    """The T.constexpr parameters that must be integers, with why: they appear in an
    extent (``T.Parallel(block)``, ``T.ceildiv(N, block)``, a tile's shape), where a
    float never works. (An int default says nothing: ``scale: T.constexpr = 1`` may
    take 0.5.)"""
    out: dict[str, str] = {}
    names = set(ks.constexpr_params)

    def names_in(node):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in ("int", "round"):
            return
        if isinstance(node, ast.Name):
            yield node.id
        for child in syntax.iter_child_nodes(node):
            yield from names_in(child)
    for node in syntax.walk(ks.tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, (ast.Attribute, ast.Name)):
            continue
        func = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
        if func in _EXTENT_CALLS:
            extents = node.args
        elif func in _SHAPE_CALLS and node.args:
            shape = node.args[0]
            extents = shape.elts if isinstance(shape, (ast.Tuple, ast.List)) else [shape]
        else:
            continue
        for arg in extents:
            for name in names_in(arg):
                if name in names and name not in out:
                    out[name] = f"the kernel uses it in an extent at line {node.lineno}"
    return out

