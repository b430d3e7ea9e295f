"""Pass: an int4 tile copy in a software pipeline, staged as the tensor's bytes.

``T.copy(A[r, c], S)`` from an int4 tensor into a shared int8 tile unpacks as it copies
(``codegen/lowering/packed_copy.py``), so it cannot be a ``cp.async``, and a pipelined
loop of them waits on each iteration's loads (TileLang's int4 GEMM example: 0.51 of the
int8 GEMM's rate on the H100). Inside ``T.Pipelined(..., num_stages >= 2)`` such a copy,
a top-level statement of the loop whose source is a corner of an int4 parameter with an
even last start, becomes

    T.copy(A[r, c], S_bytes)          # the region's bytes: a producer the pipeline stages
    __tj_unpack_int4(S_bytes, S)      # the consumer's first step: bytes → S, one a byte

where ``S_bytes`` is a shared tile of the region's bytes (``Tile.holds_packed``: half of
S's last extent, int8). The pipeline pass then runs the byte copies ahead as any
producer (``cp.async`` of 16 bytes where the target has it), and the unpack reads the
stage the iteration computes on. S itself is written by the unpack, a consumer: one
version. The results are the copy's (a region outside the tensor reads zeros in both).

A copy of another form (a region given by slices, an odd or unknown last start, a tile
whose last extent is not a multiple of 32), or in a loop whose schedule is given per
statement (``order=``, ``stage=``: lists over the body's statements), stays the
unpacking copy.
"""
from __future__ import annotations

import ast
import numbers

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import resolve_static
from tilejit.ir.markers import REGION, TILE, UNPACK_INT4
from tilejit.ir.plan import SHARED, Tile
from tilejit.passes.packed_tensors import moved_whole
from tilejit.passes.pipeline import written_names
from tilejit.passes.static_eval import NotStatic, StaticEval


def stage_packed_copies(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    int4 = {name: dtype for name, dtype in ctx.param_dtypes.items() if dtype.is_packed_int}
    staging = ctx.options.packed_staging
    if not int4 or staging is False or (staging is None and not ctx.target.has_cp_async):
        return fdef     # (without cp.async the byte copy would not run ahead: no gain)
    return _Stager(ctx, int4, StaticEval(ctx.namespace, ctx.param_dtypes, fdef)).visit(fdef)


class _Stager(syntax.NodeTransformer):
    def __init__(self, ctx, int4, static):
        self.ctx, self.int4, self.static = ctx, int4, static

    def generic_visit(self, node):
        node = super().generic_visit(node)
        for field in ("body", "orelse"):
            block = getattr(node, field, None)
            if isinstance(block, list):
                setattr(node, field, self._block(block))
        return node

    def _block(self, block):
        """The block with each pipelined loop's staged tiles declared before it."""
        out = []
        for stmt in block:
            if isinstance(stmt, ast.For) and self._pipelined(stmt):
                out.extend(self._stage(stmt))
            out.append(stmt)
        return out

    def _pipelined(self, loop) -> bool:
        it = loop.iter
        if not (isinstance(it, ast.Call) and resolve_static(it.func, self.ctx.namespace)
                is T.Pipelined):
            return False
        if len(it.args) > 2 or any(k.arg in ("order", "stage", "group") for k in it.keywords):
            return False        # a schedule per statement: the body's statements stay its
        given = it.args[1:2] + [k.value for k in it.keywords if k.arg == "num_stages"]
        try:
            stages = self.static.value(given[0]) if given else 0
        except NotStatic:
            return False        # (the pipeline pass says so)
        return isinstance(loop.target, ast.Name) and _integer(stages) and stages >= 2

    def _stage(self, loop) -> list:
        """Declarations of the byte tiles of ``loop``'s staged copies (its body rewritten
        in place)."""
        declared, body = [], []
        # what the body writes (its loop index aside): a copy whose source reads any of it
        # is no producer (the pipeline would not run it ahead: staging would only add a
        # pass over shared memory)
        varying = written_names(loop.body) - {loop.target.id}
        for stmt in loop.body:
            matched = self._copy(stmt, varying)
            if matched is None:
                body.append(stmt)
                continue
            region, tile, signed = matched
            name = f"__tj_bytes_{tile.name}_{self.ctx.number('packed_staging')}"
            self.ctx.plan.tiles[name] = Tile(name, SHARED, tile.shape[:-1] + (
                tile.shape[-1] // 2,), T.int8, stmt.lineno, holds_packed=True)
            declared.append(ast.copy_location(ast.Assign(
                [ast.Name(name, ast.Store())],
                ast.Call(ast.Name(TILE, ast.Load()), [ast.Constant(name)], [])), loop))
            copy_call = stmt.value
            copy_call.args = [region, ast.Name(name, ast.Load())]
            body.append(stmt)
            body.append(ast.copy_location(ast.Expr(ast.Call(
                ast.Name(UNPACK_INT4, ast.Load()),
                [ast.Name(name, ast.Load()), ast.Name(tile.name, ast.Load()),
                 ast.Constant(signed)], [])), stmt))
        loop.body = body
        return declared

    def _copy(self, stmt, varying):
        """(source region, destination tile, signed) of a copy this pass stages, or
        None."""
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
            return None
        call = stmt.value
        if resolve_static(call.func, self.ctx.namespace) is not T.copy or \
                len(call.args) != 2 or call.keywords:
            return None
        src, dst = call.args
        if not (isinstance(src, ast.Call) and isinstance(src.func, ast.Name)
                and src.func.id == REGION and isinstance(dst, ast.Name)):
            return None
        base, kinds, starts = src.args[0], src.args[1], src.args[2]
        tile = self.ctx.plan.tiles.get(dst.id)
        if not (isinstance(base, ast.Name) and base.id in self.int4 and
                moved_whole(self.int4[base.id], tile) and tile.view_of is None
                and not tile.holds_packed
                and not tile.user_staged and tile.shape[-1] % 32 == 0):
            return None
        if {n.id for n in syntax.walk(src) if isinstance(n, ast.Name)} & varying:
            return None
        if not (isinstance(kinds, ast.Constant) and set(kinds.value) == {"p"} and
                isinstance(starts, ast.Tuple) and starts.elts and self._even(starts.elts[-1])):
            return None     # a corner (extents the tile's) whose last start is even
        return src, tile, self.int4[base.id].kind == "int"

    def _even(self, node) -> bool:
        """Whether an index expression is even whatever its run-time values."""
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.Mult):
                return self._even(node.left) or self._even(node.right)
            if isinstance(node.op, (ast.Add, ast.Sub)):
                return self._even(node.left) and self._even(node.right)
            if isinstance(node.op, ast.LShift):
                return self._known(node.right, lambda v: v >= 1) or self._even(node.left)
        return self._known(node, lambda v: v % 2 == 0)

    def _known(self, node, test) -> bool:
        try:
            value = self.static.value(node)
        except NotStatic:
            return False
        return _integer(value) and test(value)


def _integer(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)
