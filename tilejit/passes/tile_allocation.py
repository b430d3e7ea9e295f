"""Pass: find the kernel's tiles and put its tile operations into the compiler's forms.

- ``X = T.alloc_shared | alloc_fragment | alloc_local(shape, dtype)`` → a ``Tile`` in
  the plan (shape and dtype evaluated at compile time) and ``X = __tj_tile("X")``;
  ``x = T.alloc_var(dtype, init)`` → ``x = __tj_cast(init, dtype)`` (a scalar).
- ``V = T.reshape(S, shape)`` / ``T.view(S, shape, dtype)`` of a tile → a ``Tile`` with
  ``view_of`` S and ``V = __tj_tile("V")``: of a shared tile the same bytes
  (``shared_memory.py`` gives it S's offset); of a fragment or local tile the same
  registers (``lowering/tiles.tile_impl``; a fragment's view is laid out by
  ``layout_inference``), in the tile's own dtype.
- A subscript used as an operand of a tile operation names a region:
  ``T.copy(A[by * 128, k * 32], A_s)`` → ``T.copy(__tj_region(A, "pp", (…, …), (None, None)), A_s)``
  (``"s"`` marks a sliced dimension, ``"p"`` a point; slice ends ride along for checks).
- ``T.gemm(A, B, C, transpose_A=…, policy=…, clear_accum=…)`` → ``__tj_gemm(A, B, C, "g0")``
  with its options and warp partition in the plan (``ir/gemm_plan.py``).

The region and element-atomic rewrite, which the simulator runs too, is
``frontend/tile_operands.py`` (``rewrite_regions``).
"""
from __future__ import annotations

import ast
import copy
import inspect
import math
from dataclasses import replace

import numpy as np

from tilejit.errors import UnsupportedDtypeError, ValueCompileError
from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.rewrite import shape_constant_name
from tilejit.frontend.gemm_operands import (GemmOperand, dynamic_bound_error, form_error,
                                             region_errors, shape_error)
from tilejit.frontend.source import VARIABLE_SCOPES, alloc_var_arguments, resolve_static
from tilejit.frontend.tile_operands import rewrite_regions
from tilejit.ir.gemm_plan import (FLOAT8_GEMMS, FMA, GemmPlanError, plan_fma, plan_gemm,
                                  plan_mfma)
from tilejit.ir.markers import CAST, CUMSUM, GEMM, LANGUAGE, REDUCE, STAGE, TILE
from tilejit.ir.plan import FRAGMENT, LOCAL, SHARED, Tile
from tilejit.passes.constant_subscripts import fold_constant_subscripts
from tilejit.passes.staged_tiles import stage_views
from tilejit.passes.static_eval import NotStatic, StaticEval

REDUCTIONS = {T.reduce_sum: "sum", T.reduce_max: "max", T.reduce_min: "min",
              T.reduce_abssum: "abssum", T.reduce_absmax: "absmax",
              T.reduce_bitand: "bitand", T.reduce_bitor: "bitor", T.reduce_bitxor: "bitxor"}

# the tile allocations and the kind of tile each makes (also read by sparse_gemms.py and
# thread_branches.py)
ALLOCATION_KINDS = {T.alloc_shared: SHARED, T.alloc_fragment: FRAGMENT, T.alloc_local: LOCAL}
_SCOPES = {SHARED: ("shared.dyn", "shared"), FRAGMENT: ("local.fragment",),
           LOCAL: ("local",)}


def _call(name, args):
    return ast.Call(ast.Name(name, ast.Load()), args, [])


_GEMM_OPTIONS = ("transpose_A", "transpose_B", "policy", "clear_accum", "k_pack", "wg_wait")


class _Tiles(syntax.NodeTransformer):
    def __init__(self, ctx, static: StaticEval):
        self.ctx = ctx
        self.static = static
        self.plan = ctx.plan
        self.gemm_count = 0

    def _static(self, node, what):
        try:
            return self.static.value(node)
        except NotStatic:
            raise self.ctx.error(f"{what} must be known at compile time (literals, "
                                 f"T.constexpr parameters, dtypes, or shapes the kernel "
                                 f"specializes on), got `{ast.unparse(node)}`", node) from None

    def visit_Assign(self, node):
        call = node.value
        target = (resolve_static(call.func, self.ctx.namespace)
                  if isinstance(call, ast.Call) else None)
        if target in ALLOCATION_KINDS:
            if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
                raise self.ctx.error("assign a tile allocation to one name", node)
            return self._alloc(node, node.targets[0].id, ALLOCATION_KINDS[target], call)
        if target in (T.reshape, T.view) and _names_tile(call, self.plan):
            if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
                raise self.ctx.error("assign a view of a tile to one name "
                                     "(`V = T.reshape(S, shape)`)", node)
            return self._view(node, node.targets[0].id, target, call)
        if target is T.alloc_var:
            try:
                given = alloc_var_arguments(call)
            except TypeError as e:
                raise self.ctx.error(str(e), node) from None
            scope = given.get("scope")
            if scope is not None and not (isinstance(scope, ast.Constant)
                                          and scope.value in VARIABLE_SCOPES):
                raise self.ctx.error(f"T.alloc_var: scope {ast.unparse(scope)}: a variable "
                                     f"is each thread's register ('local.var')", node)
            if "dtype" not in given:
                raise self.ctx.error("T.alloc_var(dtype, init=0): the dtype is missing", node)
            init = given.get("init", ast.Constant(0))
            node.value = ast.copy_location(_call(CAST, [init, given["dtype"]]), call)
            return node
        return self.generic_visit(node)

    def _alloc(self, node, name, kind, call):
        what = f"T.alloc_{kind}"
        if not call.args:
            raise self.ctx.error(f"{what}(shape, dtype): the shape is missing", call)
        args = {"shape": call.args[0]}
        if len(call.args) > 1:
            args["dtype"] = call.args[1]
        for k in call.keywords:
            if k.arg in ("shape", "dtype", "scope"):
                args[k.arg] = k.value
        if len(call.args) > 2:
            args["scope"] = call.args[2]
        if "dtype" not in args:
            raise self.ctx.error(f"{what}(shape, dtype): the dtype is missing", call)
        scope = args.get("scope")
        if scope is not None:
            value = self._static(scope, f"{what}'s scope")
            if value not in _SCOPES[kind]:
                raise self.ctx.error(f"{what}: scope {value!r} is not this allocation's; it "
                                     f"takes {' or '.join(map(repr, _SCOPES[kind]))} (the "
                                     f"other scopes have their own T.alloc_*)", call)
        try:
            shape = self.static.shape(args["shape"])
        except NotStatic:
            raise self.ctx.error(f"{what}: the shape must be positive integers known at "
                                 f"compile time, got `{ast.unparse(args['shape'])}`",
                                 call) from None
        try:
            dtype = T.as_dtype(self._static(args["dtype"], f"{what}'s dtype")).in_tiles
        except TypeError as e:
            raise self.ctx.error(f"{what}: {e}", call) from None
        if name in self.plan.tiles:
            raise self.ctx.error(f"tile {name!r} is allocated twice (first at line "
                                 f"{self.plan.tiles[name].line}); give each tile its own name",
                                 node)
        self.plan.tiles[name] = Tile(name, kind, shape, dtype, node.lineno)
        node.value = ast.copy_location(_call(TILE, [ast.Constant(name)]), call)
        return node

    def _view(self, node, name, target, call):
        """``V = T.reshape(S, shape)`` / ``T.view(S, shape, dtype)`` of a tile: a tile of
        its own shape and dtype naming S's storage (``Tile.view_of``), row-major over the
        same elements (the same bytes, for another dtype)."""
        what = "T.reshape" if target is T.reshape else "T.view"
        names = ("buffer", "shape") + (("dtype",) if target is T.view else ())
        args = list(call.args)
        for k in call.keywords:         # T.view(S, shape=[...], dtype=...)
            at = names.index(k.arg) if k.arg in names else -1
            if at < len(args):
                args = None
                break
            args += [ast.Constant(None)] * (at - len(args)) + [k.value]
        if args is None or not 1 <= len(args) <= len(names):
            raise self.ctx.error(f"{what}({', '.join(names)}): got `{ast.unparse(call)}`",
                                 call)
        base = self.plan.tiles[args[0].id]
        root = self.plan.tiles[base.view_of] if base.view_of else base
        dtype = base.dtype
        if len(args) == 3 and not (isinstance(args[2], ast.Constant) and args[2].value is None):
            try:
                dtype = T.as_dtype(self._static(args[2], f"{what}'s dtype"))
            except TypeError as e:
                raise self.ctx.error(f"{what}: {e}", call) from None
            if dtype != base.dtype and any(
                    (d.held_in_float32 and base.kind != SHARED)
                    or not d.name.startswith(("int", "uint", "float", "bfloat"))
                    for d in (dtype, base.dtype)):
                raise self.ctx.error(f"{what}: argument `dtype`: a view as another dtype takes "
                                     f"integers and float16/32/64, got {base.name} "
                                     f"({base.dtype.name}) as {dtype.name}", call)
        if base.kind != SHARED and dtype != base.dtype:
            # a fragment's or local tile's view shares its registers, element for element
            raise self.ctx.error(
                f"{what}: argument `dtype`: a view of the {base.kind} tile {base.name!r} "
                f"({base.dtype.name}{list(base.shape)}) keeps its dtype (its elements are "
                f"registers), got {dtype.name}; view a shared tile as another dtype "
                f"(`T.copy({base.name}, S); V = {what}(S, shape, dtype)`)", call)
        shape_node = args[1] if len(args) > 1 else None
        if shape_node is None or (isinstance(shape_node, ast.Constant)
                                  and shape_node.value is None):
            if dtype.itemsize != base.dtype.itemsize:
                raise self.ctx.error(f"{what}: argument `shape`: a view of {base.name} "
                                     f"({base.dtype.name}) as {dtype.name} (another size) "
                                     f"needs its shape", call)
            shape = tuple(base.shape)
        else:
            try:
                shape = self.static.shape(shape_node)
            except NotStatic:
                raise self.ctx.error(f"{what}: argument `shape`: expected positive integers "
                                     f"known at compile time, got `{ast.unparse(shape_node)}`",
                                     call) from None
        have, want = base.nbytes, math.prod(shape) * dtype.itemsize
        if have != want:
            unit = (f"{math.prod(shape)} elements" if dtype == base.dtype else
                    f"{want} bytes ({math.prod(shape)} x {dtype.name})")
            held = (f"{base.size} elements" if dtype == base.dtype else f"{have} bytes")
            raise self.ctx.error(f"{what}: argument `shape`: expected a shape holding the "
                                 f"{held} of {base.name} ({base.dtype.name}"
                                 f"{list(base.shape)}), got {tuple(shape)}, which holds {unit}",
                                 call)
        if name in self.plan.tiles:
            raise self.ctx.error(f"tile {name!r} is allocated twice (first at line "
                                 f"{self.plan.tiles[name].line}); give each tile its own name",
                                 node)
        self.plan.tiles[name] = Tile(name, base.kind, shape, dtype, node.lineno,
                                     view_of=root.name)
        node.value = ast.copy_location(_call(TILE, [ast.Constant(name)]), call)
        return node

    def visit_Expr(self, node):
        cleared = self._run_time_clear(node) or self._b_through_shared(node)
        if cleared is not None:
            out = []
            for s in cleared:
                done = self.visit(s)
                out.extend(done if isinstance(done, list) else [done])
            return out
        node = self.generic_visit(node)
        call = node.value
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                and call.func.id == REDUCE):
            return node
        src, dst = (self.plan.tiles[a.id] for a in call.args[:2])
        if src.kind != FRAGMENT or dst.kind == FRAGMENT:
            return node
        return self._reduce_through_fragment(node, call, src, dst)

    def _run_time_clear(self, node):
        """``T.gemm(A, B, C, clear_accum=k == 0)`` (a condition known at run time, as
        TileLang's examples write it): ``if k == 0: T.clear(C)`` before the gemm, which
        then accumulates; None for another statement."""
        call = node.value
        if not (isinstance(call, ast.Call) and len(call.args) >= 3
                and resolve_static(call.func, self.ctx.namespace) is T.gemm):
            return None
        at = _GEMM_OPTIONS.index("clear_accum") + 3
        keyword = next((k for k in call.keywords if k.arg == "clear_accum"), None)
        value = keyword.value if keyword is not None else \
            call.args[at] if len(call.args) > at else None
        if value is None:
            return None
        try:
            self.static.value(value)
            return None
        except NotStatic:
            pass
        if keyword is not None:
            keyword.value = ast.Constant(False)
        else:
            call.args[at] = ast.Constant(False)
        clear = ast.Expr(ast.Call(ast.Attribute(ast.Name(LANGUAGE, ast.Load()), "clear",
                                                ast.Load()), [copy.deepcopy(call.args[2])], []))
        test = ast.If(value, [clear], [])
        return [syntax.fix_missing_locations(ast.copy_location(s, node)) for s in (test, node)]

    def _b_through_shared(self, node):
        """``T.gemm(A, B_frag, C)``: B held in registers, which the tensor cores take
        from shared memory only (mma.sync's B fragment layout is not a tile layout here,
        wgmma reads B from shared memory): B is copied into a shared tile of its own
        first, and the gemm reads that. None for another statement."""
        call = node.value
        if not (isinstance(call, ast.Call) and len(call.args) >= 3
                and resolve_static(call.func, self.ctx.namespace) is T.gemm
                and isinstance(call.args[1], ast.Name)):
            return None
        b = self.plan.tiles.get(call.args[1].id)
        if b is None or b.kind != FRAGMENT:
            return None
        k = self.ctx.number("gemm_b")
        tmp = f"__tj_gemm_b{k}"
        self.plan.tiles[tmp] = Tile(tmp, SHARED, b.shape, b.dtype, node.lineno)
        self.ctx.shown_names[tmp] = f"the shared copy of {b.name}"
        alloc = ast.Assign([ast.Name(tmp, ast.Store())], _call(TILE, [ast.Constant(tmp)]))
        move = ast.Expr(ast.Call(ast.Attribute(ast.Name(LANGUAGE, ast.Load()), "copy",
                                               ast.Load()),
                                 [ast.Name(b.name, ast.Load()), ast.Name(tmp, ast.Load())],
                                 []))
        call.args[1] = ast.Name(tmp, ast.Load())
        return [syntax.fix_missing_locations(ast.copy_location(s, node))
                for s in (alloc, move, node)]

    def _reduce_through_fragment(self, node, call, src, dst):
        """``T.reduce_*(fragment, shared, ...)``, which TileLang allows: the reduction goes
        into a new fragment of the destination's shape, which is then copied there (after
        the destination's values are copied in, for clear=False)."""
        if dst.kind == LOCAL:
            raise self.ctx.error(f"T.reduce_*: a fragment ({src.name}) reduced into a local "
                                 f"tile ({dst.name}) is not supported; reduce into a fragment "
                                 f"or a shared tile", node)
        rid = call.args[5].value
        tmp = f"__tj_reduced{rid}"
        self.plan.tiles[tmp] = Tile(tmp, FRAGMENT, dst.shape, dst.dtype, node.lineno)
        s, _, dim, line = self.plan.reductions[rid]
        self.plan.reductions[rid] = (s, tmp, dim, line)
        dst_name = call.args[1]
        call.args[1] = ast.Name(tmp, ast.Load())
        def copy(a, b):
            return ast.Expr(ast.Call(ast.Attribute(ast.Name(LANGUAGE, ast.Load()), "copy",
                                                   ast.Load()),
                                     [ast.Name(a, ast.Load()), ast.Name(b, ast.Load())], []))
        out = [ast.Assign([ast.Name(tmp, ast.Store())], _call(TILE, [ast.Constant(tmp)]))]
        if not call.args[4].value:          # clear=False: the destination's values first
            out.append(copy(dst_name.id, tmp))
        out += [node, copy(tmp, dst_name.id)]
        return [ast.copy_location(s, node) for s in out]

    def visit_Call(self, node):
        node = self.generic_visit(node)
        target = resolve_static(node.func, self.ctx.namespace)
        if target is T.gemm:
            return self._gemm(node)
        if target is T.gemm_sp:     # left by sparse_gemms.py for the sparse tensor cores
            return self._gemm(node, sparse=True)
        if target in REDUCTIONS:
            return self._reduction(node, REDUCTIONS[target])
        if target is T.cumsum or target is T.cummax:
            return self._cumsum(node, "sum" if target is T.cumsum else "max")
        return node

    def _tile_arg(self, node, arg, role, what):
        if not (isinstance(arg, ast.Name) and arg.id in self.plan.tiles):
            raise self.ctx.error(f"{what}: {role} must be a tile allocated in this kernel, "
                                 f"got `{ast.unparse(arg)}`", node)
        return self.plan.tiles[arg.id]

    def _options(self, node, fn, what):
        """The call's arguments by the parameters of the language's declaration ``fn``
        (TileLang's names, order and defaults), each an expression."""
        params = inspect.signature(fn).parameters
        positional = [n for n, p in params.items() if p.kind is p.POSITIONAL_OR_KEYWORD]
        if len(node.args) > len(positional):
            raise self.ctx.error(f"{what}: takes at most {len(positional)} positional "
                                 f"arguments ({', '.join(positional)}), got "
                                 f"{len(node.args)}", node)
        values = dict(zip(positional, node.args))
        for k in node.keywords:
            if k.arg not in params:
                raise self.ctx.error(f"{what}: unknown argument {k.arg!r}", node)
            if k.arg in values:
                raise self.ctx.error(f"{what}: argument {k.arg!r} given twice", node)
            values[k.arg] = k.value
        out = {}
        for name, p in params.items():
            if name in values:
                out[name] = values[name]
            elif p.default is not p.empty:
                out[name] = ast.Constant(p.default)
            else:
                raise self.ctx.error(f"{what}: missing argument {name!r}", node)
        return out

    def _reduction(self, node, op):
        what = f"T.reduce_{op}"
        a = self._options(node, getattr(T, f"reduce_{op}"), what)
        batch = self._static(a["batch"], f"{what}'s batch")     # TileLang's tuning: checked
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise self.ctx.error(f"{what}: batch must be a positive integer, got {batch!r}",
                                 node)
        if "nan_propagate" in a and self._static(a["nan_propagate"], f"{what}'s nan_propagate"):
            op += "_nan"
        src = self._tile_arg(node, a["buffer"], "buffer", what)
        dst = self._tile_arg(node, a["out"], "out", what)
        dim = self._static(a["dim"], f"{what}'s dim")
        clear = bool(self._static(a["clear"], f"{what}'s clear"))
        got = f"got {src.name} {src.dtype.name} and {dst.name} {dst.dtype.name}"
        if any(t.dtype.name == "bool" for t in (src, dst)):
            # (TileLang's lowering: a RuntimeError "not supported for bool")
            e = self.ctx.error(f"{what} is not supported for bool tiles, {got}: reduce an "
                               f"int8 or int32 copy", node)
            raise UnsupportedDtypeError(e.bare_message, e.filename, e.lineno)
        if op.startswith("bit") and not all(t.dtype.name.startswith(("int", "uint"))
                                            for t in (src, dst)):
            # (TileLang's check: a ValueError "requires an integer or bool buffer")
            e = self.ctx.error(f"{what}: a bitwise reduction requires an integer or bool "
                               f"buffer (integer tiles here), {got}", node)
            raise ValueCompileError(e.bare_message, e.filename, e.lineno)
        if not isinstance(dim, int) or not -len(src.shape) <= dim < len(src.shape):
            raise self.ctx.error(f"{what}: dim must be an integer in [{-len(src.shape)}, "
                                 f"{len(src.shape)}), got {dim!r}", node)
        dim %= len(src.shape)
        kept = src.shape[:dim] + src.shape[dim + 1:]
        kept1 = src.shape[:dim] + (1,) + src.shape[dim + 1:]
        if dst.shape not in (kept, kept1) and not (not kept and dst.shape == (1,)):
            raise self.ctx.error(f"{what}: dst {dst.name} has shape {dst.shape}; reducing "
                                 f"{src.name} {src.shape} along dim {dim} gives {kept}", node)
        rid = len(self.plan.reductions)
        self.plan.reductions.append((src.name, dst.name, dim, node.lineno))
        return ast.copy_location(_call(REDUCE, [a["buffer"], a["out"], ast.Constant(op),
                                                ast.Constant(dim), ast.Constant(clear),
                                                ast.Constant(rid)]), node)

    def _cumsum(self, node, op):
        what = "T.cumsum" if op == "sum" else "T.cummax"
        a = self._options(node, T.cumsum if op == "sum" else T.cummax, what)
        src = self._tile_arg(node, a["src"], "src", what)
        dst_arg = a["dst"] if not (isinstance(a["dst"], ast.Constant)
                                  and a["dst"].value is None) else a["src"]
        dst = self._tile_arg(node, dst_arg, "dst", what)
        if dst.shape != src.shape:
            raise self.ctx.error(f"{what}: dst {dst.name} {dst.shape} must have src's shape "
                                 f"{src.shape}", node)
        dim = self._static(a["dim"], f"{what}'s dim")
        if not isinstance(dim, int) or not -len(src.shape) <= dim < len(src.shape):
            raise self.ctx.error(f"{what}: dim must be an integer in [{-len(src.shape)}, "
                                 f"{len(src.shape)}), got {dim!r}", node)
        reverse = bool(self._static(a["reverse"], f"{what}'s reverse"))
        sid = len(self.plan.scans)
        self.plan.scans.append((src.name, dst.name, node.lineno))
        return ast.copy_location(_call(CUMSUM, [a["src"], dst_arg, ast.Constant(dim % len(
            src.shape)), ast.Constant(reverse), ast.Constant(sid), ast.Constant(op)]), node)

    def _gemm(self, node, sparse=False):
        """``T.gemm``; with ``sparse``, the ``T.gemm_sp(A_sparse, E, B, C, …)`` that
        ``sparse_gemms.py`` checked and kept for wgmma.sp: ``__tj_gemm(A, B, C, gid, E)``."""
        meta, transpose_E = None, False
        if sparse:
            meta = self._tile_arg(node, node.args[1], "E", "T.gemm_sp")
            transpose_E = any(k.arg == "transpose_E" and k.value.value for k in node.keywords)
            node = ast.copy_location(ast.Call(node.func, [node.args[0], *node.args[2:]], [
                k for k in node.keywords if k.arg != "transpose_E"]), node)
        if len(node.args) < 3:
            raise self.ctx.error("T.gemm(A, B, C, ...) takes three tiles", node)
        target = self.ctx.target
        opts = dict(zip(_GEMM_OPTIONS, node.args[3:]))
        for k in node.keywords:
            if k.arg is None:
                raise self.ctx.error(f"T.gemm: options passed as `**{ast.unparse(k.value)}` "
                                     f"are not taken; name each ({', '.join(_GEMM_OPTIONS)})",
                                     node)
            if k.arg not in _GEMM_OPTIONS:
                raise self.ctx.error(f"T.gemm: unknown option {k.arg!r}; expected one of "
                                     f"{', '.join(_GEMM_OPTIONS)}", node)
            opts[k.arg] = k.value
        values = {k: self._static(v, f"T.gemm's {k}") for k, v in opts.items()}
        operands, args = [], list(node.args[:3])
        for i, role in enumerate("ABC"):
            op, args[i] = self._gemm_operand(node, role, args[i])
            operands.append(op)
        a, b, c = (self.plan.tiles[op.name] for op in operands)
        for role, t, kinds in (("A", a, (SHARED, FRAGMENT)), ("B", b, (SHARED,)),
                               ("C", c, (FRAGMENT,))):
            if t.kind not in kinds or len(t.shape) != 2:
                raise self.ctx.error(f"T.gemm: operand {role} must be a 2-d "
                                     f"{' or '.join(kinds)} tile, got {t.kind} tile {t.name} of "
                                     f"shape {t.shape}", node)
        for k in ("transpose_A", "transpose_B", "clear_accum"):
            # a bool, or the 0 / 1 of C-like code: a 2 was taken as True
            v = values.get(k, False)
            if not (isinstance(v, (bool, np.bool_)) or (
                    isinstance(v, (int, np.integer)) and v in (0, 1))):
                raise self.ctx.error(f"T.gemm: {k} is True or False, got {v!r}", node)
        k_pack = values.get("k_pack", 1)
        # an int: 2.0 and True (== 1) were taken
        if not (isinstance(k_pack, (int, np.integer)) and not isinstance(k_pack, bool)
                and k_pack in (1, 2)):
            raise self.ctx.error(f"T.gemm: k_pack is 1 or 2 (TileLang's), got "
                                 f"{k_pack!r}", node)
        ta, tb = bool(values.get("transpose_A", False)), bool(values.get("transpose_B", False))
        if sparse:          # the operands' shapes were checked (language/sparse.py)
            M, N = c.shape
            K = b.shape[1] if tb else b.shape[0]
        else:
            message = shape_error(*operands, ta, tb)
            if message:
                raise self.ctx.error(message, node)
            op_a = operands[0].extents
            M, K = (op_a[1], op_a[0]) if ta else op_a
            N = c.shape[1]
        policy = values.get("policy", T.GemmWarpPolicy.Square)
        if isinstance(policy, int) and not isinstance(policy, bool):
            try:                        # TileLang's number of the policy (an IntEnum there)
                policy = T.GemmWarpPolicy(policy)
            except ValueError:
                raise self.ctx.error(f"T.gemm policy: expected a T.GemmWarpPolicy (or its "
                                     f"number 0, 1, 2), got {policy}", node) from None
        policy = getattr(policy, "value", policy)
        dtypes = (a.dtype.name, b.dtype.name, c.dtype.name)
        clear = bool(values.get("clear_accum", False))
        if not target.has_mma_sync:
            self._check_cuda_cores(target, a, dtypes, node)
        try:
            if not target.has_mma_sync:         # sm_75: TileLang's SIMT fallback
                plan = plan_fma(M, N, K, dtypes, ta, tb, policy, self.ctx.threads, clear)
            elif target.kind == "amdgpu" and dtypes not in FMA:   # AMD's matrix cores (MFMA)
                plan = plan_mfma(M, N, K, dtypes, ta, tb, policy, self.ctx.threads, clear,
                                 target.arch, a_in_registers=a.kind == FRAGMENT)
            else:
                plan = plan_gemm(M, N, K, dtypes, ta, tb, policy, self.ctx.threads, clear)
        except GemmPlanError as e:
            raise self.ctx.error(str(e), node) from None
        if dtypes in FLOAT8_GEMMS:
            self._check_float8(target, node)
        if a.kind == FRAGMENT and not (a.dtype.name in ("float16", "bfloat16") or (
                plan.kind in ("tf32", "s8") and plan.engine == "mma")):
            raise self.ctx.error(f"T.gemm: an A operand in registers needs float16, bfloat16 "
                                 f"or (on mma.sync) tfloat32/float32 or int8 inputs, got "
                                 f"{a.dtype.name}; put A in shared memory", node)
        if a.kind == FRAGMENT and ta and plan.engine not in ("mma", "wgmma"):
            raise self.ctx.error(f"T.gemm: transpose_A for an A operand in registers is "
                                 f"supported on the tensor cores' mma.sync and wgmma, not "
                                 f"on {plan.engine}; put A in shared memory", node)
        if not (operands[0].whole and operands[1].whole):
            if target.kind == "amdgpu" and plan.engine == "mfma":
                raise self.ctx.error("T.gemm: a region of a shared tile as an operand is not "
                                     "supported on AMDGPU (MFMA); copy it into a tile of its "
                                     "own", node)
            plan = replace(plan, a_origin=operands[0].origin, b_origin=operands[1].origin)
        if sparse:
            plan = replace(plan, sparse=True, transpose_E=transpose_E)
        gid = f"g{self.gemm_count}"
        self.gemm_count += 1
        self.plan.gemms[gid] = (plan, a.name, b.name, c.name, node.lineno)
        tail = [ast.Name(meta.name, ast.Load())] if sparse else []
        return ast.copy_location(_call(GEMM, args + [ast.Constant(gid)] + tail), node)

    def _check_cuda_cores(self, target, a, dtypes, node):
        """Without mma.sync's tensor cores (sm_75) a gemm runs on the CUDA cores: float
        operands (float16, bfloat16, float32, float64) into a float32 or float64
        accumulator, A in shared memory."""
        if dtypes[2] not in ("float32", "float64") or not all(
                d in ("float16", "bfloat16", "float32", "float64") for d in dtypes[:2]):
            raise self.ctx.error(f"T.gemm on {target.arch} runs on the CUDA cores (no "
                                 f"mma.sync.m16n8k16 before sm_80), which take float operands "
                                 f"into a float32 or float64 accumulator; A/B/C dtypes "
                                 f"{'/'.join(dtypes)} need sm_80 and newer", node)
        if a.kind == FRAGMENT:
            raise self.ctx.error(f"T.gemm on {target.arch} (on the CUDA cores) reads A from "
                                 f"shared memory; an A operand in registers needs sm_80 and "
                                 f"newer", node)

    def _gemm_operand(self, node, role, arg):
        """(GemmOperand, the argument naming its tile) of one operand: a tile, one version
        of a stacked tile (``staged_tiles.py``), or a region of a tile
        (``frontend/gemm_operands.py``), which becomes its tile (the plan keeps the
        region's origin)."""
        if (role != "C" and isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name)
                and arg.func.id == STAGE):
            tile = self.plan.tiles[arg.args[0].id]     # one version of a stacked tile
            return GemmOperand(role, tile.name, tile.kind, tuple(tile.shape)), arg
        if isinstance(arg, ast.Name) and arg.id in self.plan.tiles:
            tile = self.plan.tiles[arg.id]
            return GemmOperand(role, tile.name, tile.kind, tuple(tile.shape)), arg
        staged = (role != "C" and isinstance(arg, ast.Subscript)
                  and isinstance(arg.value, ast.Call) and isinstance(arg.value.func, ast.Name)
                  and arg.value.func.id == STAGE)     # a region of one version of a stack
        if not staged and not (isinstance(arg, ast.Subscript) and isinstance(
                arg.value, ast.Name) and arg.value.id in self.plan.tiles):
            raise self.ctx.error(f"T.gemm: operand {role} must be a tile allocated in this "
                                 f"kernel or a region of one, got `{ast.unparse(arg)}`", node)
        tile = self.plan.tiles[arg.value.args[0].id if staged else arg.value.id]
        text = ast.unparse(arg)
        index = arg.slice.elts if isinstance(arg.slice, ast.Tuple) else [arg.slice]
        kinds = "".join("s" if isinstance(i, ast.Slice) else "p" for i in index)
        message = form_error(role, text, tile.shape, kinds)
        if message:
            raise self.ctx.error(message, node)
        box = []
        for i, n in zip(index, tile.shape):
            if i.step is not None:
                raise self.ctx.error(f"T.gemm: operand {role} `{text}`: a region's slice "
                                     f"may not have a step", node)
            bounds = []
            for which, bound, default in (("start", i.lower, 0), ("end", i.upper, n)):
                try:
                    v = default if bound is None else self.static.value(bound)
                except NotStatic:
                    v = None
                if isinstance(v, bool) or not isinstance(v, int):
                    raise self.ctx.error(dynamic_bound_error(role, text, which,
                                                             ast.unparse(bound)), node)
                bounds.append(v)
            box.append(tuple(bounds))
        op = GemmOperand(role, tile.name, tile.kind, tuple(tile.shape), tuple(box))
        message = region_errors(op)
        if message:
            raise self.ctx.error(message, node)
        return op, (arg.value if staged else ast.copy_location(ast.Name(tile.name, ast.Load()),
                                                                arg))


    def _check_float8(self, target, node):
        """float8 gemms need sm_89's mma.sync forms or Hopper's wgmma."""
        wgmma = target.has_wgmma and self.ctx.options.wgmma
        if target.is_cuda and not (target.has_float8_mma or wgmma):
            why = " with wgmma=False" if target.has_wgmma else ""
            raise self.ctx.error(f"T.gemm on float8 operands needs float8 tensor cores: "
                                 f"mma.sync on sm_89/sm_90 and newer, or wgmma on sm_90a; the "
                                 f"target is {target.arch}{why}", node)


class _ScanRegions(syntax.NodeTransformer):
    """``T.cumsum(src=S[r0:r1, c0:c1], dst=D[...], dim, reverse)`` (TileLang's scans of
    regions of shared tiles, out of place or not, ``T.cummax`` alike): the region copied
    into a shared tile of its own, scanned there, and copied to the destination region (or
    back). Before the region rewrite, which then makes the copies' subscripts regions."""

    def __init__(self, fdef, ctx, static):
        self.ctx, self.static = ctx, static
        self.tiles = {}
        for node in syntax.walk(fdef):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                    isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Call):
                kind = ALLOCATION_KINDS.get(resolve_static(node.value.func, ctx.namespace))
                if kind is not None and len(node.value.args) >= 2:
                    self.tiles[node.targets[0].id] = (kind, node.value.args[0],
                                                      node.value.args[1])

    def visit_Expr(self, node):
        call = node.value
        fn = resolve_static(call.func, self.ctx.namespace) if isinstance(call, ast.Call) \
            else None
        if fn is not T.cumsum and fn is not T.cummax:
            return node
        what = f"T.{fn.__name__}"
        names = ("src", "dst", "dim", "reverse")
        values = dict(zip(names, call.args))
        values.update({k.arg: k.value for k in call.keywords if k.arg in names})
        src, dst = values.get("src"), values.get("dst")
        if isinstance(dst, ast.Constant) and dst.value is None:
            dst = None
        if not any(isinstance(a, ast.Subscript) for a in (src, dst)):
            return node
        src_shape, dtype = self._region(node, src, "src", what)
        if dst is not None:
            dst_shape, _ = self._region(node, dst, "dst", what)
            if dst_shape != src_shape:
                raise self.ctx.error(f"{what}: the dst region {dst_shape} must have the src "
                                     f"region's shape {src_shape}", node)
        tmp = f"__tj_scan_region{node.lineno}_{node.col_offset}"

        def language(name, args, keywords=()):
            return ast.Call(ast.Attribute(ast.Name(LANGUAGE, ast.Load()), name, ast.Load()),
                            args, list(keywords))
        self.ctx.namespace.setdefault(LANGUAGE, T)
        out = [ast.Assign([ast.Name(tmp, ast.Store())], language("alloc_shared", [
                   ast.Tuple([ast.Constant(n) for n in src_shape], ast.Load()), dtype])),
               ast.Expr(language("copy", [src, ast.Name(tmp, ast.Load())])),
               ast.Expr(language(fn.__name__, [ast.Name(tmp, ast.Load())], [
                   ast.keyword(k, values[k]) for k in ("dim", "reverse") if k in values])),
               ast.Expr(language("copy", [ast.Name(tmp, ast.Load()), dst or src]))]
        return [ast.copy_location(stmt, node) for stmt in out]

    def _region(self, node, arg, role, what):
        """(shape, dtype expression) of a scan's operand: a whole tile, or a region of a
        shared tile given by slices with compile-time bounds."""
        base = arg.value if isinstance(arg, ast.Subscript) else arg
        if not (isinstance(base, ast.Name) and base.id in self.tiles):
            raise self.ctx.error(f"{what}: {role} must be a tile allocated in this kernel, "
                                 f"or a region of one, got `{ast.unparse(arg)}`", node)
        kind, shape_node, dtype = self.tiles[base.id]
        try:
            shape = self.static.shape(shape_node)
        except NotStatic:
            raise self.ctx.error(f"{what}: the shape of {base.id} must be known at compile "
                                 f"time", node) from None
        if not isinstance(arg, ast.Subscript):
            return tuple(shape), dtype
        if kind != SHARED:
            raise self.ctx.error(f"{what}: {role}: a region of a {kind} tile is not "
                                 f"supported (a region of a shared tile is)", node)
        index = arg.slice.elts if isinstance(arg.slice, ast.Tuple) else [arg.slice]
        if len(index) != len(shape) or not all(isinstance(i, ast.Slice) and i.step is None
                                               for i in index):
            raise self.ctx.error(f"{what}: {role} `{ast.unparse(arg)}`: a region is a slice "
                                 f"of every dimension of {base.id} {tuple(shape)}", node)
        extents = []
        for i, extent in zip(index, shape):
            try:
                lo = 0 if i.lower is None else self.static.value(i.lower)
                hi = extent if i.upper is None else self.static.value(i.upper)
            except NotStatic:
                raise self.ctx.error(f"{what}: {role} `{ast.unparse(arg)}`: its bounds must "
                                     f"be known at compile time", node) from None
            if not 0 <= lo < hi <= extent:
                raise self.ctx.error(f"{what}: {role} `{ast.unparse(arg)}` is not inside "
                                     f"{base.id} {tuple(shape)}", node)
            extents.append(hi - lo)
        return tuple(extents), dtype


def _scan_regions(fdef, ctx):
    """``_ScanRegions`` where a scan takes a subscript (one walk otherwise)."""
    scans = (T.cumsum, T.cummax)
    if not any(isinstance(n, ast.Call) and resolve_static(n.func, ctx.namespace) in scans
               and any(isinstance(a, ast.Subscript) for a in n.args + [k.value for k in
                                                                      n.keywords])
               for n in syntax.walk(fdef)):
        return fdef
    static = StaticEval(ctx.namespace, ctx.param_dtypes, fdef)
    return syntax.fix_missing_locations(_ScanRegions(fdef, ctx, static).visit(fdef))


class _FoldStaticIfs(syntax.NodeTransformer):
    """``if <compile-time condition>:`` keeps only the branch taken, so the tile passes
    see the program that runs (``if trans_A: T.copy(...) else: T.copy(...)``)."""

    def __init__(self, static):
        self.static = static

    def visit_If(self, node):
        node = self.generic_visit(node)
        try:
            taken = self.static.value(node.test)
        except (NotStatic, Exception):
            return node
        body = node.body if taken else node.orelse
        return body or [ast.copy_location(ast.Pass(), node)]


def _names_tile(call, plan) -> bool:
    """Whether a ``T.reshape`` / ``T.view`` call's buffer is a tile of the plan."""
    return bool(call.args) and isinstance(call.args[0], ast.Name) and call.args[0].id in plan.tiles


def _known(static: StaticEval):
    """An expression's compile-time value, or None when it is not known."""
    def value(node):
        try:
            return static.value(node)
        except NotStatic:
            return None
    return value


def allocate_tiles(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    ctx.plan.threads = ctx.threads
    # the branch a compile-time condition takes, first: the passes see the program that
    # runs (a scan's regions in a branch not taken need not fit)
    fdef = _FoldStaticIfs(StaticEval(ctx.namespace, ctx.param_dtypes, fdef)).visit(fdef)
    fdef = _scan_regions(fdef, ctx)
    fdef = rewrite_regions(fdef, ctx.namespace, ctx.error,
                           _known(StaticEval(ctx.namespace, ctx.param_dtypes, fdef)))
    static = StaticEval(ctx.namespace, ctx.param_dtypes, fdef)
    fdef = fold_constant_subscripts(fdef, ctx, static)
    fdef, stacked = stage_views(fdef, ctx, static)
    fdef = _Tiles(ctx, static).visit(fdef)
    for name, versions in stacked.items():
        tile = ctx.plan.tiles[name]
        tile.stages, tile.user_staged = versions, True
    _check_whole_copies(fdef, ctx)
    return fdef


def _check_whole_copies(fdef, ctx):
    """``T.copy(W, w)`` with W a whole tensor: the kernel is specialized on W's shape
    (``frontend/analysis.whole_shape_params``), so extents other than the tile's (size-1
    dimensions aside) are an error here, before anything runs, as in the simulator."""
    for node in syntax.walk(fdef):
        if not (isinstance(node, ast.Call) and resolve_static(node.func, ctx.namespace)
                is T.copy and len(node.args) >= 2):
            continue
        for k, arg in enumerate(node.args[:2]):
            other = node.args[1 - k]
            tile = _tile_named(other, ctx)
            if not isinstance(arg, ast.Name) or tile is None:
                continue
            dims = []
            while shape_constant_name(arg.id, len(dims)) in ctx.namespace:
                dims.append(ctx.namespace[shape_constant_name(arg.id, len(dims))])
            # size-1 dimensions do not count, as everywhere a copy pairs extents
            if dims and [d for d in dims if d != 1] != [d for d in tile.shape if d != 1]:
                raise ctx.error(f"T.copy: tensor {arg.id!r} has shape {tuple(dims)} and tile "
                                f"{tile.name!r} has shape {tuple(tile.shape)}: a whole tensor "
                                f"is copied with its own extent, which must be the tile's "
                                f"(copy a region to move part of it)", node)


def _tile_named(node, ctx):
    """The plan's tile an operand names (``__tj_tile("w")`` after this pass), or None."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == TILE \
            and node.args and isinstance(node.args[0], ast.Constant):
        return ctx.plan.tiles.get(node.args[0].value)
    if isinstance(node, ast.Name):
        return ctx.plan.tiles.get(node.id)
    return None
