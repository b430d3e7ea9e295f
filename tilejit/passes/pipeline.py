"""Pass: software pipelining of ``for k in T.Pipelined(n, num_stages=S)``.

The loop body's producers are its top-level ``T.copy`` statements from a global tensor
into a whole shared tile whose arguments depend only on ``k`` and values fixed before the
loop; everything else is the consumer. With S ≥ 2 every tile a producer writes gets S
versions (stage ``j`` holds the tile of iterations ``k ≡ j mod S``), and the loop becomes

    for p in range(S - 1):                       # prologue: tiles 0 … S-2 in flight
        if p < n:  copy_async(<producers at k = p>  → stage p)
        cp_commit()
    for k in range(n):                           # steady state
        cp_wait(S - 2)                           # this thread's copies of iteration k landed
        sync()                                   # everyone's did; everyone finished k - 1
        if k + S - 1 < n:  copy_async(<producers at k + S - 1> → stage (k + S - 1) % S)
        cp_commit()
        <consumers, reading stage k % S>

so while iteration k computes, the copies of k+1 … k+S-1 are in flight. The copies are
``cp.async`` on sm_80+ (one commit group per iteration, empty past the end so the wait
count stays exact). One block barrier per iteration serves both hazards: after it,
every thread's copies of iteration k are visible, and the stage refilled in this
iteration, (k - 1) mod S, is no longer read by anyone, so the refill is issued right
after the barrier, before the compute: its loads get the whole iteration in flight
(measured on the H200 against issuing it after the compute: GEMM the same, FlashAttention
up to 1.1x faster). The barrier pass knows two stages of a tile are
different memory within an iteration and adds nothing more. ``num_stages`` 0 or 1, or
a loop without producers, is a plain loop.

Where the first consumer is a ``T.gemm`` on a staged tile (after ``T.clear``/``T.fill``
only), the refill is handed to it: the gemm issues its first k-step's ldmatrix, then the
refill's cp.async under the refill's condition, then its mma, so the loads that feed
the first mma are not queued behind the refill (``_fold_refill``).

Two divisions are kept out of the steady state, which LLVM leaves in: the producers'
index arithmetic that does not involve ``k`` (``by // group`` in attention's
``K[bz, k*bn:(k+1)*bn, by // group, :]``) is computed once, before the prologue (inside
the guarded refill LLVM may not hoist a division, which could trap; FlashAttention's
loop carried two 64-bit divisions per iteration); and the stage indices ``k % S`` and
``(k + S - 1) % S`` are counters the loop carries, advanced at the end of the body (a
64-bit ``k % 3`` was a chain of wide multiplies between the barrier and the first
ldmatrix) — unless a consumer may ``continue``, which would skip the advance.

``stage=[...]`` and ``order=[...]`` (one entry per top-level statement of the body) give
the schedule explicitly: statements of stage 0 are the producers when some statement has
a later stage, and ``order`` is the order of the statements in the steady state. With
``group=[[...], ...]`` (entries per group of TileLang's lowered statements) the three are
a hint left out: the producers are found as without them.
"""
from __future__ import annotations

import ast
import copy
from dataclasses import dataclass

import numpy as np

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import DESTINATIONS, SubstituteLoads, resolve_static
from tilejit.ir.markers import (ATOMICS, COMMIT, COPY_ASYNC, GEMM, MULTICAST_ATTR, REGION,
                                STAGE, SYNC, TILE, WAIT)
from tilejit.ir.plan import SHARED
from tilejit.passes.barriers import shared_writes
from tilejit.passes.static_eval import NotStatic, StaticEval


def mark(node, pid, role):
    """Tags a statement this pass built with its loop's id and its role ("copy" in the
    prologue, "refill", "commit", "wait", "sync", "drain", "prologue", "fold",
    "advance", "steady"), for
    ``passes/tma.py``, which may
    turn the loop's cp.async schedule into TMA's after the layouts are known."""
    node._tj_pipe = (pid, role)
    return node


def role_of(node):
    return getattr(node, "_tj_pipe", None)


def _call(name, args):
    return ast.Call(ast.Name(name, ast.Load()), args, [])


def _expr_stmt(call, like):
    return ast.copy_location(ast.Expr(call), like)


def _assigned(stmts) -> set[str]:
    out = set()
    for s in stmts:
        for n in syntax.walk(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                out.add(n.id)
    return out


# the tile operations' destinations (an element atomic's marker: its first argument)
_ELEMENT_ATOMICS = frozenset(ATOMICS.values())


def written_names(stmts) -> set[str]:
    """The names the statements assign, and the tiles and tensors they write: an element
    (``X[i] = …``), or as a tile operation's destination (``T.copy(S, X[r])``, ``T.fill``,
    a gemm's accumulator, an atomic's target)."""
    out = _assigned(stmts)
    for s in stmts:
        for n in syntax.walk(s):
            if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store):
                out.add(_base_name(n))
            elif isinstance(n, ast.Call):
                name = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(
                    n.func, "id", None)
                position = 0 if name in _ELEMENT_ATOMICS else DESTINATIONS.get(name)
                dst = next((k.value for k in n.keywords if k.arg == "dst"), None)
                if dst is None and position is not None and position < len(n.args):
                    dst = n.args[position]
                if dst is not None:
                    out.add(_base_name(dst))
    out.discard(None)
    return out


def _base_name(node):
    """The tile or tensor an operand names: ``X``, ``X[i]``, ``__tj_region(X, …)``."""
    while isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
            node.func.id in (REGION, STAGE) and node.args:
        node = node.args[0]
    return node.id if isinstance(node, ast.Name) else None


def _reads(stmt, name) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
               for n in syntax.walk(stmt))


class _StageTiles(syntax.NodeTransformer):
    """Names of staged tiles → ``__tj_stage(tile, index)`` (loads only)."""

    def __init__(self, tiles, index):
        self.tiles, self.index = tiles, index

    def visit_Name(self, node):
        if node.id in self.tiles and isinstance(node.ctx, ast.Load):
            return ast.copy_location(_call(STAGE, [ast.Name(node.id, ast.Load()),
                                                   copy.deepcopy(self.index)]), node)
        return node


class _HoistInvariant(syntax.NodeTransformer):
    """Replaces the arithmetic subtrees that do not use ``loop_var`` by fresh names and
    collects their assignments (``assigns``), to be placed before the loop."""

    def __init__(self, loop_var, prefix):
        self.loop_var, self.prefix = loop_var, prefix
        self.assigns: list[ast.Assign] = []
        self.names: dict[str, str] = {}       # unparsed expression -> its name

    def _invariant(self, node):
        return not any(isinstance(n, ast.Name) and n.id == self.loop_var for n in syntax.walk(node))

    def generic_visit(self, node):
        if isinstance(node, (ast.BinOp, ast.UnaryOp)) and self._invariant(node):
            key = ast.unparse(node)
            if key not in self.names:
                self.names[key] = f"{self.prefix}_{len(self.names)}"
                self.assigns.append(ast.copy_location(
                    ast.Assign([ast.Name(self.names[key], ast.Store())], node), node))
            return ast.copy_location(ast.Name(self.names[key], ast.Load()), node)
        return super().generic_visit(node)


@dataclass
class Pipeline:
    """One software-pipelined loop, as ``passes/tma.py`` needs it: its id (the
    ``_tj_pipe`` tags of its statements), source line, stages, producer copies per
    iteration, the expression of the stage iteration k reads (valid at the loop's
    head), whether a consumer may leave the loop early (break or return: copies still
    in flight), and whether a consumer writes a staged tile (a later TMA write of those
    bytes would need a proxy fence)."""
    pid: int
    line: int
    stages: int
    producers: int
    current: ast.expr
    leaves: bool
    writes_staged: bool = False
    loop_var: str = ""               # the steady loop's variable and trip count's name
    trip_count: str = ""
    refill_stage: str | None = None  # the stage counter of the refill (None: k % S form)


class _Pipeliner(syntax.NodeTransformer):
    def __init__(self, ctx, static):
        self.ctx, self.static = ctx, static
        self.shared = {n for n, t in ctx.plan.tiles.items() if t.kind == SHARED}
        self.generated: set[int] = set()     # nodes of the loops this pass built
        self.staged: dict[str, int] = {}     # pipelined tile -> line of its loop

    def _producer_target(self, stmt, loop_var, varying):
        """The shared tile a producer statement fills, or None."""
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
            return None
        call = stmt.value
        if resolve_static(call.func, self.ctx.namespace) is not T.copy or len(call.args) != 2:
            return None
        src, dst = call.args
        if not (isinstance(dst, ast.Name) and dst.id in self.shared):
            return None
        base = src.args[0] if (isinstance(src, ast.Call) and isinstance(src.func, ast.Name)
                               and src.func.id == REGION) else src
        if not (isinstance(base, ast.Name) and base.id in self.ctx.param_dtypes):
            return None
        used = {n.id for n in syntax.walk(src) if isinstance(n, ast.Name)}
        if used & (varying - {loop_var}):
            return None
        return dst.id

    def visit_For(self, node):
        node = self.generic_visit(node)
        it = node.iter
        if not (isinstance(it, ast.Call) and resolve_static(it.func, self.ctx.namespace)
                is T.Pipelined):
            return node
        if not it.args:
            raise self.ctx.error("T.Pipelined(n, num_stages=...) needs the trip count", node)
        opts = dict(zip(("num_stages", "order", "stage", "group"), it.args[1:]))
        opts.update({k.arg: k.value for k in it.keywords})
        # TileLang's loop annotations (hints to its lowering) mean nothing here
        opts.pop("annotations", None)
        if opts.get("group") is not None and not (isinstance(opts["group"], ast.Constant)
                                                  and opts["group"].value is None):
            # order=/stage= per group of statements (TileLang's wgmma FlashAttention,
            # its groups counted over its own lowered statements): a schedule hint; the
            # producers are found as without them, the results the same
            for k in ("order", "stage", "group"):
                opts.pop(k, None)
        values = {}
        for k, v in opts.items():
            try:
                values[k] = self.static.value(v)
            except NotStatic:
                raise self.ctx.error(f"T.Pipelined's {k} must be known at compile time, got "
                                     f"`{ast.unparse(v)}`", node) from None
        plain = ast.copy_location(ast.For(node.target, _call("range", [it.args[0]]), node.body,
                                          node.orelse, None), node)
        stages = values.get("num_stages", 0)
        stages = 0 if stages is None else stages
        if isinstance(stages, bool) or not isinstance(stages, (int, np.integer)) or stages < 0:
            raise self.ctx.error(f"T.Pipelined's num_stages is an int >= 0 (0 or 1: no "
                                 f"pipelining), got {stages!r}", node)
        stages = int(stages)
        if stages < 2 or not isinstance(node.target, ast.Name):
            return plain
        loop_var = node.target.id
        # tiles allocated in the body (TileLang allocates them once, for the block) are
        # named before the loop, where its prologue already fills them, and so are their
        # layout annotations (declarations of the block's tiles, not loop statements)
        allocs = [s for s in node.body if _is_declaration(s, self.ctx.namespace)]
        body = [s for s in node.body if not _is_declaration(s, self.ctx.namespace)]
        # what the body assigns or writes: a copy whose source region reads any of it (an
        # index a tile holds, the tensor itself) cannot run ahead of the body
        varying = written_names(body) | {loop_var}
        stage_list, order = values.get("stage"), values.get("order")
        for name, lst in (("stage", stage_list), ("order", order)):
            if lst is not None and len(lst) != len(body):
                end = getattr(node, "end_lineno", None) or node.lineno
                inlined = any(not node.lineno <= getattr(s, "lineno", node.lineno) <= end
                              for s in body)
                raise self.ctx.error(
                    f"T.Pipelined: {name}= has {len(lst)} entries, the loop body has "
                    f"{len(body)} statements" + (
                        " (counted once the @T.macro and helper calls in it are inlined: "
                        "one entry per statement they expand to)" if inlined else ""), node)
        targets = [self._producer_target(s, loop_var, varying) for s in body]
        # nor one whose tile a statement before it reads (that reads the previous
        # iteration's version, which running ahead would have replaced)
        targets = [None if t is not None and any(_reads(b, t) for b in body[:i]) else t
                   for i, t in enumerate(targets)]
        if stage_list is not None and max(stage_list) > 0:
            for i, (s, st) in enumerate(zip(body, stage_list)):
                if st == 0 and targets[i] is None:
                    raise self.ctx.error(
                        f"T.Pipelined: stage=[...] puts statement {i} (line {s.lineno}) in stage "
                        f"0, but only a global→shared T.copy can run ahead of the compute", s)
            is_producer = [st == 0 for st in stage_list]
        else:
            is_producer = [t is not None for t in targets]
        if not any(is_producer):
            return plain
        producers = [s for s, p in zip(body, is_producer) if p]
        tiles = {t for t, p in zip(targets, is_producer) if p}
        for name in tiles:
            t = self.ctx.plan.tiles[name]
            t.stages = max(t.stages, stages)    # (staged by several loops: the most)
        consumers_idx = [i for i, p in enumerate(is_producer) if not p]
        if order is not None:
            consumers_idx.sort(key=lambda i: order[i])
        consumers = [body[i] for i in consumers_idx]
        seq = self.ctx.number("pipeline")    # per compilation: names the same every time
        n_name, p_name = f"__tj_n{seq}", f"__tj_p{seq}"
        n_assign = ast.copy_location(ast.Assign([ast.Name(n_name, ast.Store())], it.args[0]), node)
        hoist = _HoistInvariant(loop_var, f"__tj_inv{seq}")
        producers = [_hoist_indices(s, hoist) for s in producers]

        pid = len(self.ctx.pipelines)

        def issue(k_expr, stage_expr, role="copy"):
            out = []
            for s in producers:
                src, dst = s.value.args
                src = SubstituteLoads({loop_var: k_expr}).visit(copy.deepcopy(src))
                dst_staged = _call(STAGE, [ast.Name(dst.id, ast.Load()), stage_expr])
                issued = _call(COPY_ASYNC, [src, dst_staged])
                if hasattr(s.value, MULTICAST_ATTR):        # T.copy_cluster's mask
                    setattr(issued, MULTICAST_ATTR, getattr(s.value, MULTICAST_ATTR))
                out.append(mark(_expr_stmt(issued, s), pid, role))
            return out

        def commit():
            return mark(_expr_stmt(_call(COMMIT, []), node), pid, "commit")

        p = ast.Name(p_name, ast.Load())
        n = ast.Name(n_name, ast.Load())
        prologue_if = ast.If(ast.Compare(p, [ast.Lt()], [n]),
                             issue(p, ast.Name(p_name, ast.Load())), [])
        prologue = ast.For(ast.Name(p_name, ast.Store()),
                           _call("range", [ast.Constant(stages - 1)]),
                           [ast.copy_location(prologue_if, node), commit()], [], None)
        mark(prologue, pid, "prologue")
        ahead = ast.BinOp(ast.Name(loop_var, ast.Load()), ast.Add(), ast.Constant(stages - 1))
        # the stages as counters carried by the loop (k % S and (k + S - 1) % S without
        # a division: a 64-bit k % 3 is a chain of wide multiplies between the barrier and
        # the first ldmatrix); a consumer that may `continue` keeps the modulo
        counters = not any(isinstance(x, ast.Continue) for c in consumers
                           for x in _walk_this_loop(c))
        cs, rs = f"__tj_cs{seq}", f"__tj_rs{seq}"
        if counters:
            current, refill_stage = ast.Name(cs, ast.Load()), ast.Name(rs, ast.Load())
        else:
            current = ast.BinOp(ast.Name(loop_var, ast.Load()), ast.Mod(), ast.Constant(stages))
            refill_stage = ast.BinOp(copy.deepcopy(ahead), ast.Mod(), ast.Constant(stages))
        steady_if = ast.If(ast.Compare(copy.deepcopy(ahead), [ast.Lt()], [n]),
                           issue(ahead, refill_stage, "refill"), [])
        staged_consumers = [_StageTiles(tiles, current).visit(copy.deepcopy(s)) for s in consumers]
        advance, start = [], []
        if counters:
            def assign(name, value):
                return ast.copy_location(ast.Assign([ast.Name(name, ast.Store())], value), node)
            start = [assign(cs, ast.Constant(0)), assign(rs, ast.Constant(stages - 1))]
            advance = [mark(assign(rs, ast.Name(cs, ast.Load())), pid, "advance"),
                       assign(cs, ast.IfExp(
                           ast.Compare(ast.Name(cs, ast.Load()), [ast.Lt()],
                                       [ast.Constant(stages - 1)]),
                           ast.BinOp(ast.Name(cs, ast.Load()), ast.Add(), ast.Constant(1)),
                           ast.Constant(0)))]
        refill = [ast.copy_location(steady_if, node), commit()]
        head = [mark(_expr_stmt(_call(WAIT, [ast.Constant(stages - 2)]), node), pid, "wait"),
                mark(_expr_stmt(_call(SYNC, []), node), pid, "sync")]
        folded = (_fold_refill(staged_consumers, steady_if, tiles, self.ctx.namespace, commit,
                               pid)
                  if not self.ctx.target.is_sim else None)
        if folded is not None:
            refill, staged_consumers = [], folded
        steady = mark(ast.For(node.target, _call("range", [n]),
                              head + refill + staged_consumers + advance, [], None), pid, "steady")
        drain = mark(_expr_stmt(_call(WAIT, [ast.Constant(0)]), node), pid, "drain")
        leaves = (any(isinstance(x, ast.Break) for c in consumers for x in _walk_this_loop(c))
                  or any(isinstance(x, ast.Return) for c in consumers for x in syntax.walk(c)))
        writes = any(t in tiles for c in consumers for t, _ in shared_writes(self.ctx, c))
        self.ctx.pipelines.append(Pipeline(pid, node.lineno, stages, len(producers),
                                           copy.deepcopy(current), leaves, writes,
                                           loop_var, n_name, rs if counters else None))
        out = [*allocs, n_assign, *hoist.assigns, ast.copy_location(prologue, node), *start,
               ast.copy_location(steady, node), drain]
        for s in out:
            syntax.fix_missing_locations(ast.copy_location(s, node))
            self.generated.update(id(n) for n in syntax.walk(s))
        for name in tiles:
            self.staged[name] = node.lineno
        return out


def _is_declaration(stmt, namespace) -> bool:
    """``X = __tj_tile("X")`` (a tile named where the kernel allocated it) or
    ``T.annotate_layout({...})``."""
    if not (isinstance(stmt, (ast.Assign, ast.Expr)) and isinstance(stmt.value, ast.Call)):
        return False
    func = stmt.value.func
    if isinstance(stmt, ast.Assign):
        return isinstance(func, ast.Name) and func.id == TILE
    return resolve_static(func, namespace) is T.annotate_layout


def _fold_refill(consumers, steady_if, tiles, namespace, commit, pid):
    """The consumers with the refill handed to their first ``T.gemm`` on a staged tile,
    or None. The gemm issues its first k-step's ldmatrix, then the refill's cp.async
    (under the refill's condition), then its mma: the loads that feed the first mma are
    not queued behind the refill (ncu, H200: the first ldmatrix waited for the refill's
    cp.async whose address registers they reuse). Only ``T.clear``/``T.fill`` may come
    before that gemm (the refill then runs after them; consumers read only the current
    stage, the refill writes another)."""
    for i, stmt in enumerate(consumers):
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if not isinstance(call, ast.Call):
            return None
        if (isinstance(call.func, ast.Name) and call.func.id == GEMM and len(call.args) == 4
                and any(_staged(a, tiles) for a in call.args[:2])):
            pairs = [arg for copy_stmt in steady_if.body for arg in copy_stmt.value.args[:2]]
            gemm = copy.deepcopy(stmt)
            gemm.value.args += [copy.deepcopy(steady_if.test), *copy.deepcopy(pairs)]
            return consumers[:i] + [mark(gemm, pid, "fold"), commit()] + consumers[i + 1:]
        if resolve_static(call.func, namespace) not in (T.clear, T.fill):
            return None
    return None


def _staged(node, tiles):
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == STAGE and isinstance(node.args[0], ast.Name)
            and node.args[0].id in tiles)


def _walk_this_loop(node):
    """The nodes of ``node`` outside nested loops (whose ``continue`` is their own)."""
    yield node
    for child in syntax.iter_child_nodes(node):
        if not isinstance(child, (ast.For, ast.While)):
            yield from _walk_this_loop(child)


def _hoist_indices(stmt, hoist):
    """``stmt`` (a producer ``T.copy``) with its source region's invariant index
    arithmetic replaced by the names ``hoist`` assigns before the loop."""
    stmt = copy.deepcopy(stmt)
    src = stmt.value.args[0]
    if isinstance(src, ast.Call) and isinstance(src.func, ast.Name) and src.func.id == REGION:
        src.args[2] = hoist.visit(src.args[2])      # starts
        src.args[3] = hoist.visit(src.args[3])      # ends
    return stmt


def pipeline_loops(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    static = StaticEval(ctx.namespace, ctx.param_dtypes, fdef)
    pipeliner = _Pipeliner(ctx, static)
    fdef = pipeliner.visit(fdef)
    # a pipelined tile holds several versions: outside its loop no version is "the" tile
    # (T.annotate_layout names the tile for the layout each version has: user_layouts.py)
    annotations = {id(n) for call in syntax.walk(fdef) if isinstance(call, ast.Call)
                   and resolve_static(call.func, ctx.namespace) is T.annotate_layout
                   for n in syntax.walk(call)}
    for node in syntax.walk(fdef):
        if (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
                and node.id in pipeliner.staged and id(node) not in pipeliner.generated
                and id(node) not in annotations):
            raise ctx.error(f"shared tile {node.id!r} is filled by the software pipeline of "
                            f"the loop at line {pipeliner.staged[node.id]}, which keeps "
                            f"several versions of it; use it only inside that loop (copy "
                            f"what you need into another tile there)", node)
    return syntax.fix_missing_locations(fdef)
