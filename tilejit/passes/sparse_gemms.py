"""Pass: ``T.gemm_sp(A_sparse, E, B, C, …)`` on the sparse tensor cores where they take
it, else as a dense ``T.gemm`` of A expanded in shared memory.

On sm_80 and newer a gemm of 16-bit A and B, A not transposed, K a multiple of 32, that
tile allocation can plan over the block's warps (``_on_sparse_cores``) stays
``T.gemm_sp`` with its operands in shared memory: tile allocation makes it
``__tj_gemm(A, B, C, gid, E)`` with a sparse plan, and the lowering
(``codegen/lowering/sparse_gemm.py``) issues ``wgmma.mma_async.sp`` where layout inference
puts the gemm on wgmma (sm_90a), else ``mma.sp.sync.m16n8k32``, on the compressed A, each
thread's metadata register read from E (``codegen/lowering/sparse_meta.py``).

Every other gemm (8-bit or 32-bit A, A transposed, sm_75, AMDGPU, a tile with an annotated
layout or a view) is expanded: the compressed A (``language/sparse.py``: the kept values and 4
bits of metadata per group) becomes a shared tile of the dense A (M x K, K-major whatever
A's orientation), written by a ``T.Parallel`` loop over (row, group) which reads a
group's metadata and its kept values once and writes each of its columns the value whose
position is its own (0 where neither is), and the dense tile then goes to ``T.gemm`` with
the same B, C and options, on the dense tensor cores in the dense product's time. In
both forms A or E in registers is copied to a shared tile first (a fragment read at
another element's index would tie the loop's layout to it), as is B in registers
(``T.gemm`` takes B from shared memory). Runs before ``tile_allocation``, which
allocates the tiles it adds (after each operand's allocation). The simulator defines the
operation independently (``sim/sparse.py``), expanding A in numpy and checking the
metadata.
"""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import resolve_static
from tilejit.ir.gemm_plan import SPARSE_MMA, GemmPlanError, plan_gemm
from tilejit.ir.markers import CAST, LANGUAGE
from tilejit.ir.plan import FRAGMENT, SHARED
from tilejit.language.sparse import get_e_factor, group_of, operand_error
from tilejit.passes.static_eval import NotStatic, StaticEval
from tilejit.passes.tile_allocation import ALLOCATION_KINDS

_PARAMS = ("A_sparse", "E", "B", "C", "transpose_A", "transpose_E", "transpose_B", "policy",
           "clear_accum", "k_pack", "wg_wait", "annotations")
_GEMM_OPTIONS = ("policy", "clear_accum", "k_pack", "wg_wait")


class _Allocation:
    def __init__(self, stmt, kind, shape, dtype):
        self.stmt, self.kind, self.shape, self.dtype = stmt, kind, shape, dtype


def _allocations(fdef, ctx, static) -> dict:
    """name -> _Allocation of every tile the kernel allocates with a known shape."""
    found = {}
    for node in syntax.walk(fdef):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Call)):
            continue
        kind = ALLOCATION_KINDS.get(resolve_static(node.value.func, ctx.namespace))
        call = node.value
        args = dict(zip(("shape", "dtype"), call.args))
        args.update({k.arg: k.value for k in call.keywords if k.arg in ("shape", "dtype")})
        if kind is None or len(args) < 2:
            continue
        try:
            shape = static.shape(args["shape"])
            dtype = T.as_dtype(static.value(args["dtype"]))
        except (NotStatic, TypeError):
            continue                    # tile_allocation reports it
        found[node.targets[0].id] = _Allocation(node, kind, shape, dtype)
    return found


def _laid_out(fdef, ctx) -> set:
    """The tiles ``T.annotate_layout`` names, and those ``T.view``/``T.reshape`` view."""
    names = set()
    for node in syntax.walk(fdef):
        if not isinstance(node, ast.Call):
            continue
        fn = resolve_static(node.func, ctx.namespace)
        if fn is T.annotate_layout and node.args and isinstance(node.args[0], ast.Dict):
            names.update(k.id for k in node.args[0].keys if isinstance(k, ast.Name))
        elif fn in (T.view, T.reshape) and node.args and isinstance(node.args[0], ast.Name):
            names.add(node.args[0].id)
    return names


def _language(name, args, keywords=()):
    return ast.Call(ast.Attribute(ast.Name(LANGUAGE, ast.Load()), name, ast.Load()),
                    list(args), list(keywords))


def _allocation(name, kind, shape, dtype):
    return ast.Assign([ast.Name(name, ast.Store())], _language(
        "alloc_" + kind, [ast.Tuple([ast.Constant(int(n)) for n in shape], ast.Load()),
                          ast.Constant(dtype.name)]))


# one group of G dense columns of row i: its metadata bits (E's element holds Q groups),
# then each column p of the group: the first kept value where bits 1:0 name p, the
# second where bits 3:2 do, else 0 (16- and 8-bit A: 2 of 4 kept)
_PAIR = """
for {loop}:
    {nib} = ({e} >> ({g} % {Q} * 4)) & 15
    for {p} in range({G}):
        {dense} = ({a0} if ({nib} & 3) == {p} else ({a1} if ({nib} >> 2) == {p} else {zero}))
"""
# a 32-bit group of 2 keeps 1: code 0b0100 puts it at position 0, 0b1110 at 1
_SINGLE = """
for {loop}:
    {nib} = ({e} >> ({g} % {Q} * 4)) & 15
    for {p} in range({G}):
        {dense} = ({a0} if (({nib} & 3) >> 1) == {p} else {zero})
"""


class _SparseGemms(syntax.NodeTransformer):
    def __init__(self, ctx, static, tiles, laid_out):
        self.ctx, self.static, self.tiles = ctx, static, tiles
        self.laid_out = laid_out    # tiles given a layout (T.annotate_layout) or a view
        self.added = {}             # id(allocation statement) -> statements to add after it

    def _static(self, node, what, stmt):
        try:
            return self.static.value(node)
        except NotStatic:
            raise self.ctx.error(f"T.gemm_sp: {what} must be known at compile time, got "
                                 f"`{ast.unparse(node)}`", stmt) from None

    def visit_Expr(self, node):
        call = node.value
        if not (isinstance(call, ast.Call)
                and resolve_static(call.func, self.ctx.namespace) is T.gemm_sp):
            return node
        what = "T.gemm_sp(A_sparse, E, B, C, transpose_A, transpose_E, transpose_B, …)"
        if len(call.args) > len(_PARAMS):
            raise self.ctx.error(f"{what} takes at most {len(_PARAMS)} arguments, got "
                                 f"{len(call.args)}", node)
        args = dict(zip(_PARAMS, call.args))
        for k in call.keywords:
            if k.arg not in _PARAMS or k.arg in args:
                raise self.ctx.error(f"{what}: unexpected or repeated argument `{k.arg}`",
                                     node)
            args[k.arg] = k.value
        missing = [p for p in _PARAMS[:4] if p not in args]
        if missing:
            raise self.ctx.error(f"{what}: missing {', '.join(missing)}", node)
        ops = {}
        for role in _PARAMS[:4]:
            arg = args[role]
            if not (isinstance(arg, ast.Name) and arg.id in self.tiles):
                raise self.ctx.error(f"T.gemm_sp: {role} must be a whole tile allocated in "
                                     f"this kernel, named by its variable, got "
                                     f"`{ast.unparse(arg)}`", node)
            ops[role] = self.tiles[arg.id]
        flags = {f: bool(self._static(args[f], f, node)) if f in args else False
                 for f in ("transpose_A", "transpose_E", "transpose_B")}
        a, e, b, c = (ops[r] for r in _PARAMS[:4])
        message = operand_error(a.shape, e.shape, b.shape, c.shape, a.dtype, e.dtype,
                                flags["transpose_A"], flags["transpose_E"],
                                flags["transpose_B"])
        if message is not None:
            raise self.ctx.error(message, node)
        n = self.ctx.number("gemm_sp")
        prefix = f"__tj_sp{n}_"
        before, added = [], self.added.setdefault(id(a.stmt), [])
        names = {}
        for role, tile in (("A_sparse", a), ("E", e), ("B", b)):
            names[role] = args[role].id
            if tile.kind != SHARED:      # a fragment or local tile: read through shared
                staged = prefix + role[0].lower()
                added.append(_allocation(staged, "shared", tile.shape, tile.dtype))
                before.append(ast.Expr(_language("copy", [ast.Name(names[role], ast.Load()),
                                                          ast.Name(staged, ast.Load())])))
                names[role] = staged
        if self._on_sparse_cores(a, b, c, flags, args, node):
            keywords = [ast.keyword("transpose_B", ast.Constant(flags["transpose_B"])),
                        ast.keyword("transpose_E", ast.Constant(flags["transpose_E"]))]
            keywords += [ast.keyword(o, args[o]) for o in _GEMM_OPTIONS if o in args]
            gemm = ast.Expr(_language("gemm_sp", [ast.Name(names[r], ast.Load()) for r in
                                                  ("A_sparse", "E", "B")] + [args["C"]],
                                      keywords))
            return self._located(before + [gemm], node)
        M, N = c.shape
        K = b.shape[1] if flags["transpose_B"] else b.shape[0]
        dense = prefix + "dense"
        shape = (M, K)          # K-major whatever A's orientation (wgmma's float8 needs it)
        added.append(_allocation(dense, "shared", shape, a.dtype))
        before.append(self._expansion(prefix, dense, shape, names, a.dtype, e.dtype, flags))
        keywords = [ast.keyword("transpose_A", ast.Constant(False)),
                    ast.keyword("transpose_B", ast.Constant(flags["transpose_B"]))]
        keywords += [ast.keyword(o, args[o]) for o in _GEMM_OPTIONS if o in args]
        gemm = ast.Expr(_language("gemm", [ast.Name(dense, ast.Load()),
                                           ast.Name(names["B"], ast.Load()), args["C"]],
                                  keywords))
        return self._located(before + [gemm], node)

    @staticmethod
    def _located(out, node):
        for stmt in out:
            for sub in syntax.walk(stmt):
                if isinstance(sub, (ast.expr, ast.stmt)):
                    ast.copy_location(sub, node)
        return out

    def _on_sparse_cores(self, a, b, c, flags, args, node) -> bool:
        """Whether the sparse tensor cores take the gemm: sm_80+ (``mma.sp``; on sm_90a
        ``wgmma.mma_async.sp`` where a wgmma plan takes it), 16-bit A and B with A
        K-major, K a multiple of 32, the warps' plan tile allocation will make, and the
        shared operands in the layouts layout inference will give them (a tile with an
        annotated layout or a view keeps the expansion). Then ``T.gemm_sp`` stays, its
        operands in shared memory (``__tj_gemm(A, B, C, gid, E)``)."""
        ctx = self.ctx
        dtypes = (a.dtype.name, b.dtype.name, c.dtype.name)
        K = b.shape[1] if flags["transpose_B"] else b.shape[0]
        if not (ctx.target.is_cuda and ctx.target.has_mma_sync) or flags["transpose_A"] or \
                dtypes not in SPARSE_MMA or c.kind != FRAGMENT or K % 32 or \
                {args["A_sparse"].id, args["B"].id} & self.laid_out:
            return False
        policy = self._static(args["policy"], "policy", node) if "policy" in args else \
            T.GemmWarpPolicy.Square
        try:
            plan_gemm(*c.shape, K, dtypes, False, flags["transpose_B"],
                      getattr(policy, "value", policy), ctx.threads)
        except GemmPlanError:
            return False
        return True

    def _expansion(self, prefix, dense, shape, names, a_dtype, e_dtype, flags):
        """The loop over (row, group) writing the dense tile (``_PAIR`` / ``_SINGLE``):
        a group's metadata read once for its G columns."""
        elem, group = group_of(a_dtype)
        i, g, p = prefix + "i", prefix + "g", prefix + "p"
        ef = get_e_factor(a_dtype, e_dtype)
        rows, groups = shape[0], shape[1] // group

        def at(name, col, transposed):
            return f"{name}[{col}, {i}]" if transposed else f"{name}[{i}, {col}]"
        loop = f"{i}, {g} in {LANGUAGE}.Parallel({rows}, {groups})"
        text = (_PAIR if elem == 2 else _SINGLE).format(
            loop=loop, nib=prefix + "bits", G=group, Q=ef // group, g=g, p=p,
            e=at(names["E"], f"{g} // {ef // group}", flags["transpose_E"]),
            dense=at(dense, f"{g} * {group} + {p}", False),
            a0=at(names["A_sparse"], f"{g} * {elem}", flags["transpose_A"]),
            a1=at(names["A_sparse"], f"{g} * {elem} + 1", flags["transpose_A"]),
            zero=f"{CAST}(0, {a_dtype.name!r})")
        return ast.parse(text).body[0]


class _AddAllocations(syntax.NodeTransformer):
    """Each added allocation right after the operand's own (so the tile is allocated
    where the operand is, whatever loop the gemm is in)."""

    def __init__(self, added):
        self.added = added

    def generic_visit(self, node):
        node = super().generic_visit(node)
        for field in ("body", "orelse"):
            stmts = getattr(node, field, None)
            if isinstance(stmts, list) and any(id(s) in self.added for s in stmts):
                out = []
                for s in stmts:
                    out.append(s)
                    out.extend(ast.copy_location(a, s) for a in self.added.get(id(s), ()))
                setattr(node, field, out)
        return node


def expand_sparse_gemms(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    if not any(isinstance(n, ast.Call) and resolve_static(n.func, ctx.namespace)
               is T.gemm_sp for n in syntax.walk(fdef)):
        return fdef
    ctx.namespace.setdefault(LANGUAGE, T)
    static = StaticEval(ctx.namespace, ctx.param_dtypes, fdef)
    rewriter = _SparseGemms(ctx, static, _allocations(fdef, ctx, static), _laid_out(fdef, ctx))
    fdef = rewriter.visit(fdef)
    fdef = _AddAllocations({k: v for k, v in rewriter.added.items() if v}).visit(fdef)
    return syntax.fix_missing_locations(fdef)
