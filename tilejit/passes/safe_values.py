"""Pass: TileLang's ``T.annotate_safe_value({A: v})``: the elements outside global tensor A
read as ``v`` instead of 0, in element reads and in the tile copies from A.

The statement is taken out of the program and its values go to ``ctx.safe_values`` ({A:
(value expression, line)}); one value per tensor in a kernel (TileLang scopes it to the
enclosing block, which tilejit does not model), written where it runs unconditionally
or under ``if`` tests known at compile time. Each ``T.copy`` from a region of A (or all
of A) becomes the element loop it means, whose reads the guard pass then gives the value
outside A (``safe_memory.py``; also without TileLang's safe memory access):

    T.copy(A[r0:r1, c0:c1], S)   →   for i, j in T.Parallel(r1 - r0, c1 - c0):
                                         S[i, j] = A[r0 + i, c0 + j]

pairing the two operands' elements as ``T.copy`` does (dimensions of extent 1 set aside;
an operand given by its corner, ``A[r, c]``, takes the other's extents in its last
dimensions). Those copies run as element loops, never as TMA or ``cp.async`` zero-fills:
a padding value other than 0 is the point of the annotation.
"""
from __future__ import annotations

import ast

from tilejit import language as T
from tilejit.frontend.rewrite import shape_constant_name
from tilejit.frontend.source import assigned_names, resolve_static, static_truth
from tilejit.passes.element_loops import index, is_region, parallel_loop


def _annotation(stmt, namespace):
    """The dict of a ``T.annotate_safe_value({...})`` statement, else None."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            and resolve_static(stmt.value.func, namespace) is T.annotate_safe_value):
        return None
    return stmt.value


class _Collect:
    """Takes the annotations out of the program, into ``ctx.safe_values``."""

    def __init__(self, ctx, fdef):
        self.ctx, self.assigned = ctx, assigned_names(fdef)
        self.seen = {}          # name -> the line of its first use, in program order

    def block(self, stmts: list, when: str) -> None:
        """``stmts`` in place; ``when``: "always" (they run whenever the kernel does, as
        far as compile-time tests go), "never" (a branch compile-time tests rule out) or
        "maybe"."""
        kept = []
        for stmt in stmts:
            call = _annotation(stmt, self.ctx.namespace)
            if call is not None:
                if when != "never":
                    self.take(call, when == "always")
                continue
            kept.append(stmt)
            self._uses(stmt)
            if isinstance(stmt, ast.If):
                truth = static_truth(stmt.test, self.ctx.namespace, self.assigned)
                for branch, taken in ((stmt.body, True), (stmt.orelse, False)):
                    self.block(branch, "never" if when == "never" or truth is (not taken)
                               else when if truth is taken else "maybe")
                continue
            for name in ("body", "orelse", "finalbody"):
                inner = getattr(stmt, name, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    # a `with` body runs when the statement does; a loop's maybe not
                    self.block(inner, when if isinstance(stmt, ast.With) or when == "never"
                               else "maybe")
        if len(kept) < len(stmts):
            stmts[:] = kept or [ast.copy_location(ast.Pass(), stmts[0])]

    def _uses(self, stmt) -> None:
        """The names a statement's own parts use but through an attribute (a compound
        statement's header; its body is walked statement by statement)."""
        parts = [stmt] if not hasattr(stmt, "body") else [
            getattr(stmt, f) for f in ("test", "iter", "items") if getattr(stmt, f, None)]
        for part in parts:
            nodes = list(ast.walk(part) if isinstance(part, ast.AST) else (
                n for item in part for n in ast.walk(item)))
            # `A.shape` reads no element
            queried = {id(n.value) for n in nodes if isinstance(n, ast.Attribute)}
            for node in nodes:
                if isinstance(node, ast.Name) and id(node) not in queried:
                    self.seen.setdefault(node.id, getattr(node, "lineno", stmt.lineno))

    def take(self, call, known: bool) -> None:
        ctx = self.ctx
        if call.keywords or len(call.args) != 1 or not isinstance(call.args[0], ast.Dict):
            raise ctx.error("T.annotate_safe_value({tensor: value, ...}) takes one dict "
                            f"written in the call, got `{ast.unparse(call)}`", call)
        if not known:
            raise ctx.error("T.annotate_safe_value under a loop or a run-time condition: "
                            "write it where the kernel always runs it (at the top of its "
                            "T.Kernel body, or under an `if` known at compile time)", call)
        for key, value in zip(call.args[0].keys, call.args[0].values):
            if not (isinstance(key, ast.Name) and key.id in ctx.params):
                raise ctx.error(f"T.annotate_safe_value: the keys are tensor parameters of "
                                f"the kernel, got `{ast.unparse(key) if key else '**'}`", call)
            if key.id in self.seen:
                raise ctx.error(f"T.annotate_safe_value: {key.id} is used before it (line "
                                f"{self.seen[key.id]}); write the annotation before the "
                                f"kernel's first use of {key.id}", call)
            before = ctx.safe_values.get(key.id)
            if before is not None and ast.dump(before[0]) != ast.dump(value):
                raise ctx.error(f"T.annotate_safe_value: {key.id} already has the safe value "
                                f"`{ast.unparse(before[0])}` (line {before[1]}); tilejit keeps "
                                f"one per tensor in a kernel, got `{ast.unparse(value)}`", call)
            ctx.safe_values[key.id] = (value, call.lineno)


class _Copies(ast.NodeTransformer):
    """``T.copy`` from an annotated tensor → the element loop."""

    def __init__(self, ctx):
        self.ctx = ctx

    def visit_Expr(self, node):
        call = node.value
        if not (isinstance(call, ast.Call) and len(call.args) >= 2
                and resolve_static(call.func, self.ctx.namespace) is T.copy):
            return node
        src, dst = call.args[:2]
        name = src.args[0].id if is_region(src) else getattr(src, "id", None)
        if name not in self.ctx.safe_values:
            return node
        return ast.copy_location(self._loop(src, dst, call), node)

    def _dims(self, operand, call):
        """[(start, extent or None)] per dimension, and whether the operand is given by
        its corner (a region of single elements)."""
        ctx = self.ctx
        if is_region(operand):
            kinds, starts = operand.args[1].value, operand.args[2].elts
            extents = operand.args[4].value.split(",")
            dims = [(s, 1 if k == "p" else int(e) or None)
                    for k, s, e in zip(kinds, starts, extents)]
            return dims, set(kinds) == {"p"}
        name = operand.id
        if name in ctx.plan.tiles:
            shape = ctx.plan.tiles[name].shape
        else:
            shape = [ctx.namespace.get(shape_constant_name(name, d))
                     for d in range(ctx.params[name].ndim)]
        if not all(isinstance(e, int) for e in shape):
            raise ctx.error(f"T.copy from a tensor with a safe value: {name}'s shape is not "
                            "known at compile time; copy a region of it", call)
        return [(ast.Constant(0), e) for e in shape], False

    def _loop(self, src, dst, call):
        ctx = self.ctx
        (s_dims, s_corner), (d_dims, d_corner) = self._dims(src, call), self._dims(dst, call)
        for dims in (s_dims, d_dims):
            if any(e is None for _, e in dims):
                raise ctx.error("T.copy from a tensor with a safe value: a region's extent is "
                                "not known at compile time; give its slices as start:stop "
                                f"with compile-time extents (`{ast.unparse(call)}`)", call)
        wide = [[e for _, e in dims if e != 1] for dims in (s_dims, d_dims)]
        sizes = [w for w, corner in zip(wide, (s_corner, d_corner)) if not corner]
        extents = sizes[0] if sizes else []
        if any(w != extents for w in sizes) or any(
                len(dims) < len(extents) for dims in (s_dims, d_dims)):
            raise ctx.error(f"T.copy: the operands' extents {wide[0]} and {wide[1]} do not "
                            f"pair (`{ast.unparse(call)}`)", call)
        seq = ctx.number("safe_copy")
        names = [f"__tj_sv{seq}_{k}" for k in range(len(extents))]

        def element(operand, dims, corner, load):
            it = iter(names)
            first = len(dims) - len(extents)
            elts = []
            for d, (start, extent) in enumerate(dims):
                moves = d >= first if corner else extent != 1
                if moves:
                    var = ast.Name(next(it), ast.Load())
                    zero = isinstance(start, ast.Constant) and start.value == 0
                    elts.append(var if zero else ast.BinOp(start, ast.Add(), var))
                else:
                    elts.append(start)
            base = operand.args[0] if is_region(operand) else operand
            return ast.Subscript(ast.Name(base.id, ast.Load()), index(elts),
                                 ast.Load() if load else ast.Store())

        store = ast.Assign([element(dst, d_dims, d_corner, False)],
                           element(src, s_dims, s_corner, True))
        return parallel_loop(names, extents, [store]) if extents else store


def expand_safe_value_copies(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    _Collect(ctx, fdef).block(fdef.body, "always")
    if not ctx.safe_values:
        return fdef
    return ast.fix_missing_locations(_Copies(ctx).visit(fdef))
