"""Rewrite a kernel's device program for the simulator.

``for i, j in T.Parallel(m, n): body`` becomes one of
- ``for i, j in parallel_vectorized(m, n): body'`` where body' runs once on whole-tile
  index arrays: ``if``/``else`` become masked regions, names assigned inside them
  blend with their old values, ``a if c else b`` and ``and``/``or``/``not`` become their
  lane-wise forms;
- ``for i, j in parallel_scalar(m, n): body`` (one iteration at a time) when the body
  has ``while``, ``break``, ``continue`` or ``return``, or a nested loop whose bounds
  depend on the tile's indices, which lane-wise execution cannot express, or stores into
  a ``T.alloc_local`` array (each iteration's thread has its own).

A kernel that reads its thread index (the front end's ``__tj_thread_index()``, from
``T.get_thread_binding``: ``threads.py``) runs its whole block lane-wise, one lane per
thread: its statements outside ``T.Parallel`` loops take the same rewrite as a
vectorised ``T.Parallel`` body; a serial loop whose bounds differ between the threads
runs the longest thread's iterations, each thread masked to its own (``threads.lane_range``);
``while`` conditions, the bounds of a loop that ``break``s, and the conditions of branches
that leave a loop are checked to be the same in every thread.
"""
from __future__ import annotations

import ast
import copy
import inspect
import itertools
import types

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.explicit_sync import is_ws
from tilejit.frontend.print_buffers import PRINT_SCRATCH
from tilejit.frontend.source import names_bound_to, resolve_static
from tilejit.frontend.thread_tests import dependent_names, reads_thread
from tilejit.frontend.tile_operands import region_call
from tilejit.ir.markers import ATOMICS, THREAD_INDEX
from tilejit.sim.lane_loops import LaneLoops, returns_in as _returns_in
from tilejit.language.tiles import TILE_OPERATIONS

OWN_FRAGMENT = "__tj_own_fragment"   # semantics.own_fragment, bound by runner.py

SIM = "__tj_sim"
THREADS = "__tj_threads"        # sim/threads.py, in a kernel with per-thread code
_counter = itertools.count()
# the gemms whose operands may be regions of tiles (TileLang's explicit Hopper gemm too)
_GEMMS = (T.gemm, T.wgmma_gemm)


def _call(name, args):
    return ast.Call(ast.Attribute(ast.Name(SIM, ast.Load()), name, ast.Load()), args, [])


def _lambda(expr):
    return ast.Lambda(ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[],
                                    defaults=[]), expr)


_BUILTIN_NAMES = frozenset(("max", "min", "abs", "bool", "int", "float", "round"))


class LaneExpressions(syntax.NodeTransformer):
    """The expressions whose Python meaning takes one truth or one value where a lane
    array stands (``and``/``or``, ``a if c else b``, chained comparisons, ``not``, ``-``
    of a bool, ``max``/``min``/``abs``/``bool``/``int``/``float``/``round``) in their
    lane-wise forms (``runtime``), which on scalars are Python's: the body of a
    vectorised T.Parallel, and the helpers a kernel calls (``helpers.py``)."""

    def __init__(self, tuples=frozenset()):
        self.tuples = tuples    # names bound to tuples or lists (``tuple_names``)

    def visit_Subscript(self, node):
        """A read ``ws[i]`` of a tuple the kernel holds (``ws = (1.0, 2.0)``) at the
        loop's index array: ``item(ws, i)`` (a tuple takes no array index)."""
        node = self.generic_visit(node)
        if isinstance(node.ctx, ast.Load) and isinstance(node.value, ast.Name) and \
                node.value.id in self.tuples:
            return ast.copy_location(_call("item", [node.value, node.slice]), node)
        return node

    def visit_Call(self, node):
        node = self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in _BUILTIN_NAMES and \
                not any(isinstance(a, ast.Starred) for a in node.args):
            # the name as the program binds it: the builtin, or what shadows it
            return ast.copy_location(ast.Call(
                ast.Attribute(ast.Name(SIM, ast.Load()), "builtin", ast.Load()),
                [node.func, *node.args], node.keywords), node)
        return node

    def visit_IfExp(self, node):
        node = self.generic_visit(node)
        return ast.copy_location(_call("ifexp", [node.test, _lambda(node.body),
                                                 _lambda(node.orelse)]), node)

    def visit_BoolOp(self, node):
        """``a and b`` → ``logical_and(a, lambda: b)``: ``b`` evaluated on the lanes
        where ``a`` holds only, as the GPU's ``&&`` reads it (``p > 0 and loc[p - 1]``
        never reads ``loc[-1]``), each lane's value Python's (``3 and 6`` is 6)."""
        node = self.generic_visit(node)
        name = "logical_and" if isinstance(node.op, ast.And) else "logical_or"
        expr = node.values[0]
        for v in node.values[1:]:
            expr = _call(name, [expr, _lambda(v)])
        return ast.copy_location(expr, node)

    def visit_Compare(self, node):
        """``a < b < c`` → ``logical_and(a < b, b < c)``: Python's chained comparison
        takes the truth of ``a < b``, which an array of lanes has not (the GPU path
        compares lane by lane: Numba)."""
        node = self.generic_visit(node)
        if len(node.ops) == 1:
            return node
        operands = [node.left] + node.comparators
        pairs = [ast.Compare(operands[k], [op], [operands[k + 1]])
                 for k, op in enumerate(node.ops)]
        expr = pairs[0]
        for pair in pairs[1:]:
            expr = _call("logical_and", [expr, _lambda(pair)])
        return ast.copy_location(syntax.fix_missing_locations(expr), node)

    def visit_UnaryOp(self, node):
        node = self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return ast.copy_location(_call("logical_not", [node.operand]), node)
        if isinstance(node.op, ast.USub):
            return ast.copy_location(_call("negative", [node.operand]), node)
        return node


class _LaneWise(LaneExpressions):
    """The body of a vectorised T.Parallel."""

    def __init__(self, tuples=frozenset()):
        super().__init__(tuples)
        self.depth = 0   # how many masked regions enclose the current statement

    def visit_If(self, node):
        return self.masked_branches(node, self._visited)

    def _visited(self, body) -> list:
        flat = []
        for s in body:
            r = self.visit(s)
            flat.extend(r if isinstance(r, list) else [r])
        return flat

    def masked_branches(self, node, statements) -> list:
        """``if c: a else: b`` as ``cond = c``, then each side that may run under
        ``where(cond)`` (negated for the else), its statements ``statements(side)``."""
        cond = f"__tj_cond{next(_counter)}"
        out = [ast.copy_location(ast.Assign([ast.Name(cond, ast.Store())],
                                            self.visit(node.test)), node)]
        for negate, body in ((False, node.body), (True, node.orelse)):
            if not body:
                continue
            self.depth += 1
            flat = statements(body) or [ast.Pass()]
            self.depth -= 1
            item = ast.withitem(ast.Call(
                ast.Attribute(ast.Name(SIM, ast.Load()), "where", ast.Load()),
                [ast.Name(cond, ast.Load())],
                [ast.keyword("negate", ast.Constant(negate))]), None)
            masked = ast.copy_location(ast.With([item], flat), body[0])
            # a condition that is one value for every lane (a constexpr flag) skips the
            # branch, as Python would: `if write_lse: LSE[i] = ...` with LSE=None
            may_run = _call("may_run", [ast.Name(cond, ast.Load()), ast.Constant(negate)])
            out.append(ast.copy_location(ast.If(may_run, [masked], []), body[0]))
        return out

    def _blended(self, node, target: ast.Name, value):
        old = ast.IfExp(ast.Compare(ast.Constant(target.id), [ast.In()],
                                    [ast.Call(ast.Name("locals", ast.Load()), [], [])]),
                        ast.Name(target.id, ast.Load()), ast.Constant(None))
        return ast.copy_location(ast.Assign([ast.Name(target.id, ast.Store())],
                                            _call("blend", [old, value])), node)

    def visit_Assign(self, node):
        node = self.generic_visit(node)
        if not self.depth or not any(_names_in(t) for t in node.targets):
            return node         # (a store into a tensor or tile takes the mask itself)
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            return self._blended(node, node.targets[0], node.value)
        # `p = q = x`, `(a, b), c = ...` under a mask: the value once, then each name
        # blended (an item of a tuple target its item of the value)
        tmp = f"__tj_unpack{next(_counter)}"
        out = [ast.copy_location(ast.Assign([ast.Name(tmp, ast.Store())], node.value), node)]
        for target in node.targets:
            out += self._blended_target(node, target, ast.Name(tmp, ast.Load()))
        return out

    def _blended_target(self, node, target, value):
        if isinstance(target, ast.Name):
            return [self._blended(node, target, value)]
        if isinstance(target, (ast.Tuple, ast.List)) and \
                not any(isinstance(e, ast.Starred) for e in target.elts):
            out = []
            for k, e in enumerate(target.elts):
                item = ast.Subscript(copy.deepcopy(value), ast.Constant(k), ast.Load())
                out += self._blended_target(node, e, item)
            return out
        return [ast.copy_location(ast.Assign([target], value), node)]

    def visit_AnnAssign(self, node):
        node = self.generic_visit(node)
        if self.depth and node.value is not None and isinstance(node.target, ast.Name):
            return self._blended(node, node.target, node.value)     # `u: T.float32 = x`
        return node

    def visit_AugAssign(self, node):
        node = self.generic_visit(node)
        if self.depth and isinstance(node.target, ast.Name):
            value = ast.BinOp(ast.Name(node.target.id, ast.Load()), node.op, node.value)
            return self._blended(node, node.target, value)
        return node


def _names_in(target) -> bool:
    return any(isinstance(n, ast.Name) for n in syntax.walk(target)) and \
        not isinstance(target, (ast.Subscript, ast.Attribute))


def _is_parallel(node, namespace) -> bool:
    return (isinstance(node, ast.For) and isinstance(node.iter, ast.Call)
            and resolve_static(node.iter.func, namespace) is T.Parallel)


def _call_threads(name, args):
    return ast.Call(ast.Attribute(ast.Name(THREADS, ast.Load()), name, ast.Load()), args, [])


def _uniform(expr, what):
    call = ast.Call(ast.Attribute(ast.Name(THREADS, ast.Load()), "uniform", ast.Load()),
                    [expr, ast.Constant(what)], [])
    return ast.copy_location(call, expr)


# what a branch on the thread index may not hold to be per-thread code, whose statements
# the compiler counts as one (``passes/barriers.py``'s ``_per_thread``): the block's tile
# operations, T.Parallel, and the language's asynchronous copies, mbarriers, TMA, wgmma,
# clusters and reductions; a call of the kernel's own functions may hold them too
_BLOCK_WIDE = tuple(getattr(T, name) for name in TILE_OPERATIONS) + (T.Parallel,)
_BLOCK_WIDE_MODULES = frozenset(f"tilejit.language.{m}" for m in (
    "hopper", "cp_async", "cluster", "sparse", "convolution", "mma_emitter", "reductions",
    "thread_allreduce"))


def _per_thread_code(stmts, namespace) -> bool:
    """Whether ``stmts`` hold per-thread code only (none of ``_BLOCK_WIDE``)."""
    for node in (n for s in stmts for n in syntax.walk(s)):
        if not isinstance(node, ast.Call):
            continue
        fn = resolve_static(node.func, namespace)
        module = getattr(fn, "__module__", None) or ""
        if any(fn is op for op in _BLOCK_WIDE) or module in _BLOCK_WIDE_MODULES or (
                isinstance(fn, types.FunctionType) and not module.startswith("tilejit")):
            return False
    return True


def _in_region(stmts, tests):
    """``with __tj_threads.region(*tests): stmts`` (``threads.region``)."""
    item = ast.withitem(_call_threads("region", tests), None)
    return syntax.fix_missing_locations(ast.copy_location(ast.With([item], stmts), stmts[0]))


def _leaves(body) -> bool:
    """Whether statements leave an enclosing loop or the kernel (break, continue,
    return), not counting those of loops nested in them."""
    stack = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Break, ast.Continue, ast.Return)):
            return True
        if isinstance(node, (ast.For, ast.While)):
            stack.extend(node.orelse)
            continue
        stack.extend(syntax.iter_child_nodes(node))
    return False


class _ThreadLanes(LaneLoops, _LaneWise):
    """The block of a kernel with per-thread code, one lane per thread
    (``threads.py``): T.Parallel loops are left to ``SimRewriter``; loops that threads
    leave at different times are ``lane_loops.py``'s."""

    _call_threads = staticmethod(_call_threads)

    def __init__(self, namespace, tuples=frozenset()):
        super().__init__(tuples)
        self.namespace = namespace

    @staticmethod
    def _where(cond, negate=False):
        return ast.Call(ast.Attribute(ast.Name(SIM, ast.Load()), "where", ast.Load()), [cond],
                        [ast.keyword("negate", ast.Constant(negate))])

    def _body(self, body, node):
        """(statements before the loop, its body): ``lane_loops`` where the body's
        break/continue take some lanes out."""
        if self.escaping(body):
            return self.lane_loop_body(body, node)
        return [], self._statements(body)

    def visit_For(self, node):
        if _is_parallel(node, self.namespace):
            return node
        it = node.iter
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range" \
                and not it.keywords and 1 <= len(it.args) <= 3 and not node.orelse \
                and isinstance(node.target, ast.Name) and not _returns_in(node.body):
            return self._lane_bounds(node)
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range":
            it.args = [_uniform(self.visit(a), "a loop bound") for a in it.args]
        if node.orelse:
            node.body = self._statements(node.body)
            node.orelse = self._statements(node.orelse)
            return node
        before, node.body = self._body(node.body, node)
        return before + [node] if before else node

    def _lane_bounds(self, node):
        """A serial loop whose bounds may differ between the threads (``T.serial(tx % 4)``,
        a per-thread trip count): where they do, the longest trip count's iterations, each
        under the mask of the threads still in their own range (``threads.lane_range``);
        where they do not, Python's loop, as written."""
        bounds = f"__tj_bounds{next(_counter)}"
        live = f"__tj_live{next(_counter)}"
        out = [ast.copy_location(ast.Assign([ast.Name(bounds, ast.Store())], ast.Tuple(
            [self.visit(a) for a in node.iter.args], ast.Load())), node)]
        masked_body = copy.deepcopy(node.body)
        before, plain_body = self._body(node.body, node)
        plain = ast.For(node.target, ast.Call(ast.Name("range", ast.Load()), [ast.Starred(
            _call_threads("uniform_all", [ast.Name(bounds, ast.Load()),
                                          ast.Constant("a loop bound")]), ast.Load())], []),
            plain_body, [])
        self.depth += 1
        varying_before, inner = self._body(masked_body, node)
        self.depth -= 1
        out += before + varying_before
        item = ast.withitem(ast.Call(ast.Attribute(ast.Name(SIM, ast.Load()), "where",
                                                   ast.Load()), [ast.Name(live, ast.Load())],
                                     []), None)
        varying = ast.For(copy.deepcopy(node.target), _call_threads(
            "lane_range", [ast.Starred(ast.Name(bounds, ast.Load()), ast.Load())]),
            [ast.Assign([ast.Name(live, ast.Store())], _call_threads(
                "lane_live", [ast.Name(node.target.id, ast.Load()),
                              ast.Starred(ast.Name(bounds, ast.Load()), ast.Load())])),
             ast.With([item], inner)], [])
        test = _call_threads("varies_any", [ast.Name(bounds, ast.Load())])
        loop = ast.copy_location(ast.If(test, [varying], [plain]), node)
        if _per_thread_code(node.body, self.namespace):
            loop = _in_region([loop], [ast.Starred(ast.Name(bounds, ast.Load()), ast.Load())])
        out.append(loop)
        return [syntax.fix_missing_locations(ast.copy_location(s, node)) for s in out]

    def visit_While(self, node):
        if not node.orelse and not _returns_in(node.body):
            return self.lane_while(node)        # (its condition may differ between lanes)
        node.test = _uniform(self.visit(node.test), "a while loop's condition")
        node.body = self._statements(node.body)
        node.orelse = self._statements(node.orelse)
        return node

    def visit_If(self, node):
        if _leaves(node.body) or _leaves(node.orelse):
            node.test = _uniform(self.visit(node.test),
                                 "the condition of a branch that leaves a loop or the kernel")
            node.body = self._statements(node.body)
            node.orelse = self._statements(node.orelse)
            return node
        per_thread = _per_thread_code(node.body + node.orelse, self.namespace)
        out = super().visit_If(node)
        if not per_thread or len(out) < 2:
            return out
        cond = out[0].targets[0].id
        return [out[0], _in_region(out[1:], [ast.Name(cond, ast.Load())])]

    def _statements(self, body):
        out = []
        for s in body:
            r = self.visit(s)
            out.extend(r if isinstance(r, list) else [r])
        return out

    def visit_Assign(self, node):
        return _step(node, super().visit_Assign(node))

    def visit_AugAssign(self, node):
        return _step(node, super().visit_AugAssign(node))


def _step(original, node):
    """``with __tj_threads.step(): node`` where the assignment indexes something (a
    shared tile's races between threads are checked per statement: ``threads.step``)."""
    if not any(isinstance(n, ast.Subscript) for n in syntax.walk(original)):
        return node
    call = ast.Call(ast.Attribute(ast.Name(THREADS, ast.Load()), "step", ast.Load()), [], [])
    # (a tuple target under a mask is several statements: `a[0], a[1] = a[1], a[0]`)
    body = node if isinstance(node, list) else [node]
    return ast.copy_location(ast.With([ast.withitem(call, None)], body), original)


def uses_thread_index(fdef: ast.FunctionDef) -> bool:
    """Whether a device program reads its thread index (``__tj_thread_index()``), or
    holds an element atomic outside a T.Parallel whose previous value it reads: every
    thread performs that atomic and holds its own previous value, so the block runs
    lane-wise (``semantics.element_atomic``)."""
    if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
           and n.func.id == THREAD_INDEX for n in syntax.walk(fdef)):
        return True
    in_parallel = {id(n) for loop in syntax.walk(fdef) if isinstance(loop, ast.For)
                   and isinstance(loop.iter, ast.Call) and getattr(
                       loop.iter.func, "attr", getattr(loop.iter.func, "id", None)) == "Parallel"
                   for n in syntax.walk(loop)}
    # (a return_prev given by a name, a compile-time value, counts as True: lane-wise is
    # right either way)
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
               and n.func.id in _RMW_ATOMICS and len(n.args) > 3
               and not (isinstance(n.args[3], ast.Constant) and not n.args[3].value)
               and id(n) not in in_parallel for n in syntax.walk(fdef))


_RMW_ATOMICS = frozenset(m for fn, m in ATOMICS.items()
                         if fn not in (T.atomic_load, T.atomic_store))


def _needs_scalar(loop: ast.For, local_tiles=frozenset(), fragments=frozenset()) -> bool:
    """Also a body that stores into a thread's own T.alloc_local array, or into a
    fragment at an index none of the loop's indices reach (a fragment every thread
    holds whole, ``t[0] = x``): each iteration has the array to itself (its thread's),
    where the lane-wise body would give all iterations one."""
    targets = {n.id for n in syntax.walk(loop.target) if isinstance(n, ast.Name)}
    lane_names = _lane_names(loop)
    for node in syntax.walk(ast.Module(body=loop.body, type_ignores=[])):
        if isinstance(node, (ast.While, ast.Break, ast.Continue, ast.Return)):
            return True
        if isinstance(node, ast.For) and any(
                isinstance(n, ast.Name) and n.id in lane_names for n in syntax.walk(node.iter)):
            return True
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) and \
                isinstance(node.value, ast.Name) and (node.value.id in local_tiles or (
                    node.value.id in fragments and not targets & {
                        n.id for n in syntax.walk(node.slice) if isinstance(n, ast.Name)})):
            return True
    return False


def _lane_names(loop: ast.For) -> set:
    """The names that may hold a different value in each iteration of a T.Parallel: its
    indices and the names its body assigns."""
    return {n.id for n in syntax.walk(loop.target) if isinstance(n, ast.Name)} | {
        n.id for s in loop.body for n in syntax.walk(s)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _calls_lane_by_lane(loop: ast.For, namespace) -> bool:
    """A T.Parallel body handing a helper an iteration's own value (one its loop indices
    or its own names compute) where the helper's control flow reads it (its loop bounds,
    a ``while``, a branch leaving a loop: ``helpers.control_parameters``) runs one
    iteration at a time: the helper then takes each iteration's values."""
    from tilejit.sim.helpers import control_parameters  # (helpers.py imports this module)
    lane_names = _lane_names(loop)
    for s in loop.body:
        for call in syntax.walk(s):
            if not (isinstance(call, ast.Call) and
                    isinstance(call.func, (ast.Name, ast.Attribute))):
                continue
            helper = resolve_static(call.func, namespace)
            control = control_parameters(helper)
            if control and any(_reads(arg, lane_names)
                               for arg in _arguments_of(helper, call, control)):
                return True
    return False


def _arguments_of(helper, call, names):
    """The argument expressions ``call`` passes to ``helper``'s parameters ``names`` (every
    argument where the call cannot be matched to the signature: ``*args``)."""
    fn = helper.func if isinstance(helper, T.macro) else helper
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        params = []
    if any(isinstance(a, ast.Starred) for a in call.args) or \
            any(k.arg is None for k in call.keywords) or not params:
        return list(call.args) + [k.value for k in call.keywords]
    given = dict(zip(params, call.args)) | {k.arg: k.value for k in call.keywords}
    return [given[n] for n in names if n in given]


def _reads(expr, names) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in syntax.walk(expr))


class SimRewriter(syntax.NodeTransformer):
    def __init__(self, namespace, local_tiles=frozenset(), fragments=frozenset(),
                 tuples=frozenset()):
        self.namespace = namespace
        self.local_tiles = local_tiles
        self.fragments = fragments
        self.tuples = tuples

    def visit_With(self, node):
        # with T.ws(j, k): body  →  if __tj_sim.in_role((j, k)):
        #                               with __tj_sim.role_body(): body   (sim/roles.py)
        node = self.generic_visit(node)
        if not is_ws(node, self.namespace):
            return node
        ids = ast.Tuple(list(node.items[0].context_expr.args), ast.Load())
        inner = ast.With([ast.withitem(_call("role_body", []), None)], node.body)
        return ast.copy_location(ast.If(_call("in_role", [ids]), [inner], []), node)

    def visit_Expr(self, node):
        """A print of an element (``T.print(buf[i, j])``) or of a buffer
        (``print_buffers.py``: each element's ``T.print_at``, and a fragment's copy into
        its shared scratch first) reads with ``peeking``: an element nothing wrote is
        printed marked so, not an error (the GPU prints whatever the memory held;
        printing it changes no value). A value computed from one is still an error."""
        return _peeking_print(self.generic_visit(node), self.namespace)

    def visit_Call(self, node):
        # a stage of a multi-buffered tile as a T.gemm operand (T.gemm(A_s[k % 2, :, :],
        # …), as warp-specialized kernels write it): a region, as T.copy's operands are
        node = self.generic_visit(node)
        if resolve_static(node.func, self.namespace) in _GEMMS:
            node.args = [region_call(a) if i < 3 and isinstance(a, ast.Subscript) else a
                         for i, a in enumerate(node.args)]
        return node

    def visit_For(self, node):
        it = node.iter
        if isinstance(it, ast.Call) and resolve_static(it.func, self.namespace) is T.Parallel:
            scalar = _needs_scalar(node, self.local_tiles, self.fragments) or \
                _calls_lane_by_lane(node, self.namespace)
            it.func = ast.Attribute(ast.Name(SIM, ast.Load()),
                                    "parallel_scalar" if scalar else "parallel_vectorized",
                                    ast.Load())
            # no fragment in the body: the GPU's schedule, not a fragment's layout, says
            # which thread runs an iteration (runtime._block_loop); loop_layout= says it
            # whatever the body holds (passes/loop_layouts.py)
            laid_out = [k for k in it.keywords if k.arg == "loop_layout"]
            it.keywords = laid_out or ([] if any(
                isinstance(n, ast.Name) and n.id in self.fragments
                for n in syntax.walk(node)) else [ast.keyword("own_threads", ast.Constant(True))])
            if not scalar:
                body = []
                lanes = _LaneWise(self.tuples)
                prints = _PrintPeeks(self.namespace)
                for s in node.body:
                    r = lanes.visit(s)
                    body.extend(prints.visit(x) for x in (r if isinstance(r, list) else [r]))
                node.body = body
                return node
        return self.generic_visit(node)


def _peeking_print(node, namespace):
    """``node`` (an expression statement) in ``with peeking():`` where it prints an
    element or a buffer (``Transformer.visit_Expr``)."""
    call = node.value
    if not isinstance(call, ast.Call):
        return node
    fn = resolve_static(call.func, namespace)
    element = fn is T.print and call.args and isinstance(call.args[0], ast.Subscript)
    if fn is T.print_at or element or (fn is T.copy and len(call.args) == 2 and isinstance(
            call.args[1], ast.Name) and call.args[1].id.startswith(PRINT_SCRATCH)):
        return ast.copy_location(ast.With([ast.withitem(_call("peeking", []), None)],
                                          [node]), node)
    return node


class _PrintPeeks(syntax.NodeTransformer):
    """The prints of a vectorized T.Parallel body (which the transformer's own visit
    does not reach), each in ``with peeking():``."""

    def __init__(self, namespace):
        self.namespace = namespace

    def visit_Expr(self, node):
        return _peeking_print(node, self.namespace)


_BITWISE = {ast.BitAnd: "and", ast.BitOr: "or", ast.BitXor: "xor"}
_ARITH = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul"}
_DIVIDE = {ast.FloorDiv: "floordiv", ast.Mod: "mod"}


class _CIntegerOps(syntax.NodeTransformer):
    """``a << n`` / ``a >> n`` as ``runtime.shift``, ``a & b``, ``a | b``, ``a ^ b`` as
    ``runtime.bitwise``, ``a + b``, ``a - b``, ``a * b`` as ``runtime.arith`` and
    ``a // b``, ``a % b`` as ``runtime.divide`` (and their in-place forms): in the
    types the GPU computes them in (C's for the bitwise operations,
    ``codegen/typing/context._c_bitwise``; Numba's 64 bits for arithmetic), not
    numpy's.

    Each call is told which operands the GPU types as integer literals (``_static``):
    constants, names the kernel never assigns that are not run-time parameters (a
    constexpr, a closure's block size), and expressions of those only. A Python int
    anywhere else (a ``T.serial`` or ``T.Parallel`` index, a block index, a local) is an
    int64 variable on the GPU, and the simulator computes with it as one."""

    def __init__(self, fdef: ast.FunctionDef, constexprs=()):
        bindings: dict[str, list] = {}
        for n in syntax.walk(fdef):
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
                bindings.setdefault(n.id, []).append(n)
        args = fdef.args
        params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs
                  if not _constexpr(a.annotation) and a.arg not in constexprs}
        params |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
        self.variables = set(bindings) | params
        # a name bound once, by ``name = <literal expression>``, is a literal on the GPU
        # too (Numba types the constant it is assigned); found until nothing changes
        single = {}
        for n in syntax.walk(fdef):
            if (isinstance(n, ast.Assign) and len(n.targets) == 1
                    and isinstance(n.targets[0], ast.Name)
                    and len(bindings.get(n.targets[0].id, ())) == 1
                    and n.targets[0].id not in params):
                single[n.targets[0].id] = n.value
        changed = True
        while changed:
            changed = False
            for name, value in single.items():
                if name in self.variables and self._static(value):
                    self.variables.discard(name)
                    changed = True

    def _static(self, node) -> bool:
        if isinstance(node, ast.Constant):
            return isinstance(node.value, (int, float, bool))
        if isinstance(node, ast.Name):
            return node.id not in self.variables
        if isinstance(node, ast.Attribute):      # a module's constant, T.float16.bits
            return isinstance(node.value, ast.Name) and self._static(node.value)
        if isinstance(node, ast.BinOp):
            return self._static(node.left) and self._static(node.right)
        if isinstance(node, ast.UnaryOp):
            return self._static(node.operand)
        return False

    def visit_BinOp(self, node):
        # which operands are literals, read off the source before its own operators
        # are rewritten into calls
        static = (self._static(node.left), self._static(node.right))
        return self._c_operator(self.generic_visit(node), static)

    def _c_operator(self, node, static):
        if isinstance(node.op, (ast.LShift, ast.RShift)):
            return ast.copy_location(_call("shift", [
                node.left, node.right, ast.Constant(isinstance(node.op, ast.LShift)),
                ast.Constant(static[0])]), node)
        if type(node.op) in _DIVIDE:
            return ast.copy_location(_call("divide", [
                node.left, node.right, ast.Constant(_DIVIDE[type(node.op)])]), node)
        names = _BITWISE if type(node.op) in _BITWISE else _ARITH
        if type(node.op) in names:
            return ast.copy_location(_call("bitwise" if names is _BITWISE else "arith", [
                node.left, node.right, ast.Constant(names[type(node.op)]),
                ast.Constant(static[0]), ast.Constant(static[1])]), node)
        return node

    def visit_AugAssign(self, node):
        if (not isinstance(node.op, (ast.LShift, ast.RShift)) and type(node.op) not in _BITWISE
                and type(node.op) not in _ARITH and type(node.op) not in _DIVIDE):
            return self.generic_visit(node)
        if not isinstance(node.target, (ast.Name, ast.Subscript, ast.Attribute)):
            return self.generic_visit(node)
        target = self.visit(node.target)    # its own index's operators too
        if isinstance(target, ast.Subscript):
            load = ast.Subscript(copy.deepcopy(target.value), copy.deepcopy(target.slice),
                                 ast.Load())
        elif isinstance(target, ast.Attribute):
            load = ast.Attribute(copy.deepcopy(target.value), target.attr, ast.Load())
        else:
            load = ast.Name(target.id, ast.Load())
        load = ast.copy_location(load, target)
        static = (False, self._static(node.value))    # the target was assigned: a variable
        value = ast.BinOp(load, node.op, self.visit(node.value))
        store = ast.Assign([target], self._c_operator(ast.copy_location(value, node), static))
        return ast.copy_location(store, node)


def _constexpr(annotation) -> bool:
    """Whether a parameter's annotation is ``T.constexpr`` (a compile-time value)."""
    return (isinstance(annotation, ast.Attribute) and annotation.attr == "constexpr"
            or isinstance(annotation, ast.Name) and annotation.id == "constexpr")


def _own_fragments(fdef, namespace) -> None:
    """In a kernel with per-thread code, a fragment only ever indexed element by element
    outside a ``T.Parallel`` (TileLang's producer keeps its prefetched row indices so:
    ``idx[stage, r] = Indices[..., (tx - 256) // 8]``) is each thread's own: the compiler
    gives every thread all of it (``passes/whole_fragments.py``: used at indices a loop's
    variables do not decide), so here it is a ``T.alloc_local`` array, one per lane
    (``semantics.own_fragment``)."""
    allocs = {}
    for node in syntax.walk(fdef):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                node.targets[0], ast.Name) and isinstance(node.value, ast.Call) and \
                resolve_static(node.value.func, namespace) is T.alloc_fragment:
            allocs[node.targets[0].id] = node.value
    if not allocs:
        return
    elements = set()
    for node in syntax.walk(fdef):
        if isinstance(node, ast.For) and isinstance(node.iter, ast.Call) and \
                resolve_static(node.iter.func, namespace) is T.Parallel:
            allocs = {n: c for n, c in allocs.items() if not any(
                isinstance(x, ast.Name) and x.id == n for x in syntax.walk(node))}
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and not any(
                isinstance(i, ast.Slice) for i in syntax.walk(node.slice)):
            elements.add(id(node.value))
    for node in syntax.walk(fdef):
        if isinstance(node, ast.Name) and node.id in allocs and isinstance(node.ctx, ast.Load) \
                and id(node) not in elements:
            allocs.pop(node.id)         # a tile operation's operand: the block's
    # only where the threads store different values: a fragment every thread computes
    # alike (a running maximum) stays the block's, as tile operations read it
    dependent = dependent_names(fdef)
    stored_per_thread = set()

    def stores(stmts, divergent):
        for node in stmts:
            if isinstance(node, (ast.If, ast.While)):
                inner = divergent or reads_thread(node.test, dependent)
                stores(node.body + node.orelse, inner)
                continue
            if isinstance(node, ast.For):
                stores(node.body + node.orelse, divergent or reads_thread(node.iter, dependent))
                continue
            if isinstance(node, ast.With):
                stores(node.body, divergent)
                continue
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                    if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and (
                            divergent or reads_thread(node.value, dependent)
                            or reads_thread(t.slice, dependent)):
                        stored_per_thread.add(t.value.id)

    stores(fdef.body, False)
    allocs = {n: c for n, c in allocs.items() if n in stored_per_thread}
    for call in allocs.values():
        call.func = ast.Name(OWN_FRAGMENT, ast.Load())
        call.keywords = [k for k in call.keywords if k.arg == "dtype"]
        call.args = call.args[:2]


def tuple_names(fdef: ast.FunctionDef, namespace) -> frozenset:
    """The names a kernel reads that hold tuples or lists: bound to a literal one in the
    kernel, or in its globals and closure."""
    names = {n.id for n in syntax.walk(fdef) if isinstance(n, ast.Name)}
    bound = {t.id for n in syntax.walk(fdef) if isinstance(n, ast.Assign)
             and isinstance(n.value, (ast.Tuple, ast.List))
             for t in n.targets if isinstance(t, ast.Name)}
    return frozenset(bound | {n for n in names if isinstance(namespace.get(n), (tuple, list))})


def simulator_tree(fdef: ast.FunctionDef, namespace, constexprs=()) -> ast.FunctionDef:
    fdef = _CIntegerOps(fdef, constexprs).visit(fdef)
    tuples = tuple_names(fdef, namespace)
    if uses_thread_index(fdef):
        _own_fragments(fdef, namespace)
        lanes = _ThreadLanes(namespace, tuples)
        fdef.body = lanes.kernel_body(fdef.body) or lanes._statements(fdef.body)
    return syntax.fix_missing_locations(
        SimRewriter(namespace, names_bound_to(fdef, namespace, (T.alloc_local,)),
                    names_bound_to(fdef, namespace, (T.alloc_fragment,)),
                    tuples).visit(fdef))
