"""Persistent tile loops, rewritten into plain loops (device and simulator programs).

``for bx, by in T.Persistent([D0, D1], wave_size, index, group_size=8): body`` becomes

    P_d0 = D0; P_d1 = D1; P_wave = wave_size; P_index = index
    P_total = P_d0 * P_d1
    for P_w in range((P_total + P_wave - 1) // P_wave):     # the waves
        P_tile = P_w * P_wave + P_index
        if P_tile < P_total:                                 # the last wave's idle blocks
            P_panel = P_tile // (G * P_d1)
            P_first = P_panel * G
            P_rows = P_d0 - P_first if P_d0 - P_first < G else G
            P_r = P_tile - P_panel * G * P_d1
            bx = P_first + P_r % P_rows
            by = P_r // P_rows
            body

(``P`` is ``__tj_persistN``, G the group size): the decode of
``language/hopper.persistent_coord``, a bijection of the tiles onto the domain, in panels
of G values of the first coordinate for L2 locality. One extent: ``bx = P_tile``. More
than two: the second coordinate of that decode is the row-major number of the rest. The
loops and the guard are ordinary ones, so a ``T.Pipelined`` loop in the body is
pipelined as anywhere else (its stage parities and hoisted indices live inside the wave
loop). The wave count is ``ceildiv(total, wave_size)`` (TileLang rounds it up further;
the extra waves would only be guarded out).

``sched = T.PersistentTileScheduler(m_tiles, n_tiles, num_workers=None,
swizzle_size=1, column_major=True, cluster_size=1, stateful=True, name=None)`` (TileLang's
earlier form put a name prefix first, ``("sched", m_tiles, …)``: accepted alike) becomes
scalar variables (``__tj_sched_<name>_<field>``): ``sched.init(w)``,
``sched.next_tile(step)`` assignments (``step`` by default ``num_workers``),
``sched.valid()`` a comparison, ``sched.m_idx`` (or the earlier ``sched.m_idx[0]``),
``n_idx``, ``linear_idx``, ``current_iter`` the variables, ``sched.coord(t)`` the decode of
``language/hopper.scheduler_coord`` as an expression. ``num_workers`` defaults to the
grid's x extent (``__tj_grid_dim(0)``) divided by ``cluster_size``.
"""
from __future__ import annotations

import ast
import copy
import inspect

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import resolve_static
from tilejit.ir.markers import GRID_DIM
from tilejit.language.hopper import scheduler_signature

_WAVES = """
{P}_d0 = __D0__
{P}_d1 = __D1__
{P}_wave = __WAVE__
{P}_index = __INDEX__
{P}_total = {P}_d0 * {P}_d1
for {P}_w in range(({P}_total + {P}_wave - 1) // {P}_wave):
    {P}_tile = {P}_w * {P}_wave + {P}_index
    if {P}_tile < {P}_total:
        __DECODE__
        __BODY__
"""

_DECODE_2D = """
{P}_panel = {P}_tile // (__GROUP__ * {P}_d1)
{P}_first = {P}_panel * __GROUP__
{P}_rows = {P}_d0 - {P}_first if {P}_d0 - {P}_first < __GROUP__ else __GROUP__
{P}_r = {P}_tile - {P}_panel * __GROUP__ * {P}_d1
__T0__ = {P}_first + {P}_r % {P}_rows
__T1__ = {P}_r // {P}_rows
"""

_SCHEDULER_FIELDS = {"m_idx": "m", "n_idx": "n", "linear_idx": "linear",
                     "current_iter": "iter"}



PREFIX = "__tj_persist"      # the names a persistent loop makes (passes/grid_sync.py reads it)

class _Fill(syntax.NodeTransformer):
    """Placeholders ``__X__`` of a template → copies of the given expressions; an
    expression statement ``__X__`` → the given statements."""

    def __init__(self, exprs, stmts):
        self.exprs, self.stmts = exprs, stmts

    def visit_Name(self, node):
        if node.id in self.exprs:
            value = self.exprs[node.id]
            if isinstance(node.ctx, ast.Store):
                value = copy.deepcopy(value)
                for n in syntax.walk(value):
                    if isinstance(n, (ast.Name, ast.Tuple, ast.List)):
                        n.ctx = ast.Store()
                return value
            return copy.deepcopy(value)
        return node

    def visit_Expr(self, node):
        if isinstance(node.value, ast.Name) and node.value.id in self.stmts:
            return self.stmts[node.value.id]
        return self.generic_visit(node)


def _template(text, prefix, exprs, stmts=None) -> list[ast.stmt]:
    module = ast.parse(text.replace("{P}", prefix).strip())
    return _Fill(exprs, stmts or {}).visit(module).body


def _located(stmts, where, keep=()):
    """Every node the template made at ``where``'s line; the statements ``keep`` (the
    loop body spliced in) keep their own."""
    kept = {id(node) for s in keep for node in syntax.walk(s)}
    for s in stmts:
        for node in syntax.walk(s):
            if "lineno" in node._attributes and id(node) not in kept:
                node.lineno = where.lineno
                node.col_offset = where.col_offset
                node.end_lineno = getattr(where, "end_lineno", where.lineno)
                node.end_col_offset = getattr(where, "end_col_offset", where.col_offset)
    return stmts


def _bind(fn, call, error, what):
    """The AST argument of each parameter of ``fn`` (a ``T.*`` declaration) in ``call``."""
    try:
        bound = inspect.signature(fn).bind(*call.args, **{k.arg: k.value
                                                          for k in call.keywords})
    except TypeError as e:
        raise error(f"{what}: {e}", call) from None
    return bound.arguments


def _ifexp_min(a, b):
    return ast.IfExp(ast.Compare(a, [ast.Lt()], [b]), a, copy.deepcopy(b))


class _PersistentForms(syntax.NodeTransformer):
    def __init__(self, namespace, error):
        self.namespace, self.error = namespace, error
        self.count = 0
        self.schedulers: dict[str, dict] = {}    # variable → its generated names

    def _is(self, node, obj):
        return isinstance(node, ast.Call) and resolve_static(node.func, self.namespace) is obj

    # -- T.Persistent ---------------------------------------------------------------
    def visit_For(self, node):
        if not self._is(node.iter, T.Persistent):
            return self.generic_visit(node)
        node.iter.args = [self.visit(a) for a in node.iter.args]
        for k in node.iter.keywords:
            k.value = self.visit(k.value)
        body = []
        for s in node.body:
            new = self.visit(s)
            body.extend(new if isinstance(new, list) else [new])
        node.body = body
        args = _bind(T.Persistent, node.iter, self.error, "T.Persistent(domain, wave_size, "
                     "index, group_size=8)")
        domain = args["domain"]
        if not isinstance(domain, (ast.List, ast.Tuple)) or not domain.elts:
            raise self.error("T.Persistent: domain must be a list of extents written in the "
                             f"call ([m_blocks, n_blocks]), got `{ast.unparse(domain)}`", node)
        dims = len(domain.elts)
        names = node.target.elts if isinstance(node.target, (ast.Tuple, ast.List)) \
            else [node.target]
        if len(names) != dims or not all(isinstance(n, ast.Name) for n in names):
            raise self.error(f"T.Persistent: the loop binds one name per domain extent "
                             f"({dims}), got `{ast.unparse(node.target)}`", node)
        if node.orelse:
            raise self.error("unsupported in a kernel: a loop's `else` clause", node)
        group = args.get("group_size", ast.Constant(8))
        for what, value in (("wave_size", args["wave_size"]), ("group_size", group)):
            if isinstance(value, ast.Constant) and not (
                    isinstance(value.value, int) and value.value >= 1):
                raise self.error(f"T.Persistent: {what} must be a positive int, got "
                                 f"{value.value!r}", node)
        prefix = f"{PREFIX}{self.count}"
        self.count += 1
        pre = []
        if not isinstance(group, ast.Constant):
            pre = _template("{P}_group = __G__", prefix, {"__G__": group})
            group = ast.Name(f"{prefix}_group", ast.Load())
        if dims == 1:
            decode = _template("__T0__ = {P}_tile", prefix, {"__T0__": names[0]})
            d1 = ast.Constant(1)
        else:
            # more than two extents: the panels of the first over the rest's row-major
            # number, which is then split into the rest's coordinates
            rest = names[1] if dims == 2 else ast.Name(f"{prefix}_rest", ast.Load())
            decode = _template(_DECODE_2D, prefix, {"__GROUP__": group, "__T0__": names[0],
                                                    "__T1__": rest})
            d1 = domain.elts[1]
            for k in range(2, dims):
                d1 = ast.BinOp(d1, ast.Mult(), domain.elts[k])
            for k in range(1, dims) if dims > 2 else ():
                value = ast.Name(f"{prefix}_rest", ast.Load())
                inner = None
                for e in domain.elts[k + 1:]:
                    inner = copy.deepcopy(e) if inner is None else ast.BinOp(
                        inner, ast.Mult(), copy.deepcopy(e))
                if inner is not None:
                    value = ast.BinOp(value, ast.FloorDiv(), inner)
                if k > 1:
                    value = ast.BinOp(value, ast.Mod(), copy.deepcopy(domain.elts[k]))
                decode.append(ast.Assign([ast.Name(names[k].id, ast.Store())], value))
        out = pre + _template(_WAVES, prefix,
                              {"__D0__": domain.elts[0], "__D1__": d1,
                               "__WAVE__": args["wave_size"], "__INDEX__": args["index"]},
                              {"__DECODE__": decode, "__BODY__": list(node.body)})
        return _located(out, node, keep=node.body)

    # -- T.PersistentTileScheduler --------------------------------------------------
    def visit_Assign(self, node):
        if not self._is(node.value, T.PersistentTileScheduler):
            return self.generic_visit(node)
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            raise self.error("T.PersistentTileScheduler(...) must be assigned to one name",
                             node)
        var = node.targets[0].id
        call = node.value
        if call.args and isinstance(call.args[0], ast.Constant) and \
                isinstance(call.args[0].value, str):
            # TileLang's earlier form, a name prefix first: the same scheduler
            call = ast.copy_location(ast.Call(call.func, call.args[1:], call.keywords), call)
        args = _bind(scheduler_signature, call, self.error,
                     "T.PersistentTileScheduler(num_m_tiles, num_n_tiles, num_workers=None, "
                     "swizzle_size=1, column_major=True, cluster_size=1, stateful=True, "
                     "name=None)")
        args = {k: self.visit(v) for k, v in args.items()}
        column_major = args.get("column_major", ast.Constant(True))
        if not isinstance(column_major, ast.Constant):
            raise self.error("T.PersistentTileScheduler: column_major must be True or False "
                             f"written in the call, got `{ast.unparse(column_major)}`", node)
        p = f"__tj_sched_{var}"
        names = {f: f"{p}_{f}" for f in ("primary", "secondary", "swizzle", "total",
                                         "workers", "m", "n", "linear", "iter")}
        names["column_major"] = bool(column_major.value)
        self.schedulers[var] = names
        cluster = args.get("cluster_size", ast.Constant(1))
        workers = args.get("num_workers")
        if workers is None or isinstance(workers, ast.Constant) and workers.value is None:
            workers = ast.BinOp(ast.Call(ast.Name(GRID_DIM, ast.Load()), [ast.Constant(0)], []),
                                ast.FloorDiv(), copy.deepcopy(cluster))
        text = """
__tj_m_tiles = (__M__ + __CLUSTER__ - 1) // __CLUSTER__
{P}_primary = {FIRST}
{P}_secondary = {SECOND}
{P}_swizzle = __SWIZZLE__
{P}_total = __tj_m_tiles * __N__
{P}_workers = __WORKERS__
{P}_m = 0
{P}_n = 0
{P}_linear = 0
{P}_iter = 0
""".replace("__tj_m_tiles", f"{p}_mtiles").replace(
            "{FIRST}", f"{p}_mtiles" if names["column_major"] else "__N__").replace(
            "{SECOND}", "__N__" if names["column_major"] else f"{p}_mtiles")
        out = _template(text, p, {"__M__": args["num_m_tiles"], "__N__": args["num_n_tiles"],
                                  "__CLUSTER__": cluster,
                                  "__SWIZZLE__": args.get("swizzle_size", ast.Constant(1)),
                                  "__WORKERS__": workers})
        return _located(out, node)

    def _scheduler_of(self, node):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            return self.schedulers.get(node.value.id)
        return None

    def _coord(self, s, tile):
        """The decode of ``scheduler_coord`` as one expression (a tuple (m, n))."""
        def name(f):
            return ast.Name(s[f], ast.Load())
        span = ast.BinOp(name("primary"), ast.Mult(), name("swizzle"))
        group = ast.BinOp(copy.deepcopy(tile), ast.FloorDiv(), span)
        base = ast.BinOp(group, ast.Mult(), name("swizzle"))
        left = ast.BinOp(name("secondary"), ast.Sub(), copy.deepcopy(base))
        narrow = _ifexp_min(name("swizzle"), left)
        width = ast.IfExp(ast.Compare(copy.deepcopy(narrow), [ast.Lt()], [ast.Constant(1)]),
                          ast.Constant(1), narrow)
        in_group = ast.BinOp(copy.deepcopy(tile), ast.Sub(),
                             ast.BinOp(copy.deepcopy(group), ast.Mult(),
                                       copy.deepcopy(span)))
        fast = ast.BinOp(in_group, ast.FloorDiv(), width)
        slow = ast.BinOp(copy.deepcopy(base), ast.Add(),
                         ast.BinOp(copy.deepcopy(in_group), ast.Mod(), copy.deepcopy(width)))
        pair = [fast, slow] if s["column_major"] else [slow, fast]
        return ast.Tuple(pair, ast.Load())

    def _advance(self, s, node, first=None, step=None):
        """``init(first)`` (``first`` given) or ``next_tile(step)``: the assignments."""
        def store(f):
            return ast.Name(s[f], ast.Store())

        def load(f):
            return ast.Name(s[f], ast.Load())
        if first is None:
            count = ast.BinOp(load("iter"), ast.Add(), ast.Constant(1))
            linear = ast.BinOp(load("linear"), ast.Add(),
                               load("workers") if step is None else step)
        else:
            count, linear = ast.Constant(0), first
        out = [ast.Assign([store("iter")], count), ast.Assign([store("linear")], linear),
               ast.Assign([ast.Tuple([store("m"), store("n")], ast.Store())],
                          self._coord(s, load("linear")))]
        return _located(out, node)

    def visit_Expr(self, node):
        call = node.value
        if isinstance(call, ast.Call):
            s = self._scheduler_of(call.func)
            if s is not None and call.func.attr in ("init", "next_tile"):
                if call.func.attr == "init":
                    if len(call.args) != 1 or call.keywords:
                        raise self.error(f"{call.func.value.id}.init(worker_id) takes one "
                                         "argument", node)
                    return self._advance(s, node, self.visit(call.args[0]))
                if len(call.args) > 1 or call.keywords:
                    raise self.error(f"{call.func.value.id}.next_tile(step) takes the step "
                                     "(by default the scheduler's num_workers)", node)
                step = self.visit(call.args[0]) if call.args else None
                return self._advance(s, node, step=step)
        return self.generic_visit(node)

    def visit_Call(self, node):
        s = self._scheduler_of(node.func)
        if s is not None:
            var, method = node.func.value.id, node.func.attr
            if method == "valid" and not node.args and not node.keywords:
                return ast.copy_location(ast.Compare(ast.Name(s["linear"], ast.Load()),
                                                     [ast.Lt()],
                                                     [ast.Name(s["total"], ast.Load())]), node)
            if method == "coord" and len(node.args) == 1 and not node.keywords:
                return ast.copy_location(self._coord(s, self.visit(node.args[0])), node)
            raise self.error(f"{var}.{method}(...): a T.PersistentTileScheduler offers "
                             "init(worker_id), next_tile(), valid() and coord(tile_id)", node)
        node = self.generic_visit(node)
        if self._is(node, T.Persistent):
            raise self.error("T.Persistent(...) is only meaningful as the iterable of a `for` "
                             "loop: `for bx, by in T.Persistent(...)`", node)
        return node

    def visit_Subscript(self, node):
        s = self._scheduler_of(node.value)
        if s is not None:
            field = _SCHEDULER_FIELDS.get(node.value.attr)
            if field is None or not (isinstance(node.slice, ast.Constant)
                                     and node.slice.value == 0):
                raise self.error(f"{ast.unparse(node)}: a T.PersistentTileScheduler's state "
                                 f"is read as {node.value.value.id}.m_idx[0], n_idx[0], "
                                 "linear_idx[0] or current_iter[0]", node)
            if not isinstance(node.ctx, ast.Load):
                raise self.error(f"{ast.unparse(node)}: the scheduler's state changes only "
                                 "through init() and next_tile()", node)
            return ast.copy_location(ast.Name(s[field], ast.Load()), node)
        return self.generic_visit(node)

    def visit_Attribute(self, node):
        # TileLang's current form reads the state as properties: sched.m_idx
        s = self._scheduler_of(node)
        field = _SCHEDULER_FIELDS.get(node.attr)
        if s is not None and field is not None and isinstance(node.ctx, ast.Load):
            return ast.copy_location(ast.Name(s[field], ast.Load()), node)
        return self.generic_visit(node)

    def visit_Name(self, node):
        if node.id in self.schedulers:
            raise self.error(f"{node.id} (a T.PersistentTileScheduler) is used as "
                             f"{node.id}.init(w), .next_tile(), .valid(), .coord(t) or "
                             f"{node.id}.m_idx[0] …, not as a value", node)
        return node


def rewrite_persistent(fdef: ast.FunctionDef, namespace, error) -> ast.FunctionDef:
    """``fdef`` with its ``T.Persistent`` loops and ``T.PersistentTileScheduler`` objects
    rewritten into plain loops and variables; ``error(message, node)`` makes the
    CompileError to raise."""
    return _PersistentForms(namespace, error).visit(fdef)
