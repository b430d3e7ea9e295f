"""``T.gemm``'s operands that are regions of tiles, checked alike by the compiler
(``passes/tile_allocation.py``) and the simulator (``sim/semantics.gemm``): the rules
and their messages live here once, so the simulator is never kinder than the GPU.

TileLang kernels pass part of a shared tile as an operand::

    T.gemm(A_shared[:, block_K:], B_shared[0:block_K, 0:block_N], C_local)
    T.gemm(Q_shared[:, :D], KV_shared, acc_p, transpose_B=True)

A region of a 2-d shared tile may be an A or B operand: two sliced dimensions whose
starts and ends are known at compile time, inside the tile. The gemm reads the region
through the tile's own layout at the region's origin. A region of a fragment is only the
whole fragment; C is a whole fragment.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import resolve_static

SHARED, FRAGMENT = "shared", "fragment"


@dataclass(frozen=True)
class GemmOperand:
    """One operand as the checks see it: a tile, or a region of one (``box``: the
    ``(start, stop)`` of each dimension of the tile, all sliced)."""
    role: str                       # "A", "B" or "C"
    name: str
    kind: str                       # "shared", "fragment", "local"
    shape: tuple[int, ...]          # the tile's
    box: tuple[tuple[int, int], ...] | None = None

    @property
    def extents(self) -> tuple[int, ...]:
        return self.shape if self.box is None else tuple(b - a for a, b in self.box)

    @property
    def origin(self) -> tuple[int, ...]:
        return (0,) * len(self.shape) if self.box is None else tuple(a for a, _ in self.box)

    @property
    def text(self) -> str:
        if self.box is None:
            return self.name
        return f"{self.name}[{', '.join(f'{a}:{b}' for a, b in self.box)}]"

    @property
    def whole(self) -> bool:
        return self.box is None or self.box == tuple((0, n) for n in self.shape)


def _head(op: GemmOperand) -> str:
    return f"T.gemm: operand {op.role} `{op.text}`"


def dynamic_bound_error(role: str, text: str, which: str, bound: str) -> str:
    """A region whose start or end is not a compile-time constant."""
    return (f"T.gemm: operand {role} `{text}`: the region's {which} `{bound}` must be known "
            f"at compile time (literals, T.constexpr parameters); a region that moves at "
            f"run time is not supported as a gemm operand (copy it into a shared tile of "
            f"its own)")


def form_error(role: str, text: str, shape, kinds: str) -> str | None:
    """A subscript that is not a region T.gemm takes: two sliced dimensions of a 2-d
    tile (a stacked tile's version or a region of one, ``X[s, :, :]``, ``X[s, :, :64]``,
    is taken before this check)."""
    if len(shape) == 2 and kinds == "ss":
        return None
    if role == "C":
        return (f"T.gemm: operand C `{text}`: the accumulator must be a whole fragment, "
                f"not a region of one")
    return (f"T.gemm: operand {role} `{text}`: a gemm operand may be a region of a 2-d "
            f"tile with both dimensions sliced (X[r0:r1, c0:c1]); got {kinds.count('s')} "
            f"sliced of {len(shape)} dimension(s) of a tile of shape {tuple(shape)} (a "
            f"stacked tile's version is X[s, :, :], or a region of it X[s, :, c0:c1], "
            f"used so everywhere)")


def region_errors(op: GemmOperand) -> str | None:
    """What is wrong with one region operand on its own (bounds, kind), or None."""
    if op.box is None:
        return None
    for d, ((a, b), n) in enumerate(zip(op.box, op.shape)):
        if not 0 <= a < b <= n:
            return (f"{_head(op)}: the region is outside tile {op.name} of shape "
                    f"{tuple(op.shape)} (dimension {d}: {a}:{b})")
    if op.whole:
        return None
    if op.role == "C":
        return (f"{_head(op)}: the accumulator must be a whole fragment, not a region of "
                f"one")
    if op.kind != SHARED:
        return (f"{_head(op)}: a region of a {op.kind} tile is not supported as a gemm "
                f"operand (an A operand in registers is the whole fragment {op.name} of "
                f"shape {tuple(op.shape)}); put the operand in shared memory, or copy the "
                f"region into a fragment of its own")
    return None


def shape_error(a: GemmOperand, b: GemmOperand, c: GemmOperand, transpose_A: bool,
                transpose_B: bool) -> str | None:
    """The operands' extents against each other: a region is checked against the gemm's
    M, N (from C) and K (from the other operand), and named with the expected and the
    received extents; whole tiles keep the general message."""
    am, ak = (a.extents[1], a.extents[0]) if transpose_A else a.extents
    bk, bn = (b.extents[1], b.extents[0]) if transpose_B else b.extents
    M, N = c.extents
    k, k_from = (bk, "B") if b.box is None or b.whole else (ak, "A")
    if a.box is not None and not a.whole and (am, ak) != (M, k):
        return _extent_error(a, (k, M) if transpose_A else (M, k),
                             "K x M (transpose_A)" if transpose_A else "M x K",
                             f"M = {M} from C, K = {k} from {k_from}")
    if b.box is not None and not b.whole and (bk, bn) != (ak, N):
        return _extent_error(b, (N, ak) if transpose_B else (ak, N),
                             "N x K (transpose_B)" if transpose_B else "K x N",
                             f"K = {ak} from A, N = {N} from C")
    if ak != bk or (am, bn) != (M, N):
        return (f"T.gemm: shapes do not match: op(A) is {am}x{ak}, op(B) is {bk}x{bn}, C is "
                f"{M}x{N}")
    return None


def _extent_error(op, expected, dims, why):
    got = "x".join(map(str, op.extents))
    return (f"{_head(op)}: expected a {expected[0]}x{expected[1]} region ({dims}; {why}), "
            f"got {got}")


def _static_prologue_names(fdef, dynamic, namespace) -> set:
    """The names an eager program's prologue binds once, at the body's top level, from
    compile-time values (``D = dim``, ``H = max(next_power_of_2(heads), 16)``): the
    compiler folds them (``static_prologue.py``), so a bound may read them."""
    counts = {}
    for n in syntax.walk(fdef):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            counts[n.id] = counts.get(n.id, 0) + 1
    static = set()
    for st in fdef.body:
        if not (isinstance(st, ast.Assign) and len(st.targets) == 1
                and isinstance(st.targets[0], ast.Name) and counts[st.targets[0].id] == 1):
            continue
        ok = True
        for n in syntax.walk(st.value):
            if isinstance(n, ast.Call):
                root = n.func
                while isinstance(root, ast.Attribute):
                    root = root.value
                fn = resolve_static(n.func, namespace)
                if not isinstance(root, ast.Name) or root.id.startswith("__tj") or \
                        root.id in dynamic - static or getattr(
                            fn, "__module__", "").startswith("tilejit.language"):
                    ok = False
            elif isinstance(n, ast.Name) and n.id in dynamic - static:
                ok = False
        if ok:
            static.add(st.targets[0].id)
    return static


def check_static_bounds(fdef, namespace, constexprs, error) -> None:
    """The simulator's form of the compiler's rule that a region operand's bounds are
    known at compile time (the compiler evaluates them, ``passes/static_eval.py``): a
    bound may read literals, ``T.constexpr`` parameters and names from outside the
    kernel, never a name the kernel binds (a loop index, a block index, a variable) or
    another parameter. ``error(message, node)`` makes the exception to raise."""
    params = {a.arg for a in fdef.args.args + fdef.args.kwonlyargs}
    bound = {n.id for n in syntax.walk(fdef) if isinstance(n, ast.Name)
             and isinstance(n.ctx, ast.Store)}
    dynamic = (bound | params) - set(constexprs)
    dynamic -= _static_prologue_names(fdef, dynamic, namespace)
    for node in syntax.walk(fdef):
        if not (isinstance(node, ast.Call)
                and resolve_static(node.func, namespace) in (T.gemm, T.wgmma_gemm)):
            continue
        for role, arg in zip("ABC", node.args[:3]):
            if not isinstance(arg, ast.Subscript):
                continue
            index = arg.slice.elts if isinstance(arg.slice, ast.Tuple) else [arg.slice]
            for i in index:
                if not isinstance(i, ast.Slice):
                    continue
                for which, b in (("start", i.lower), ("end", i.upper)):
                    if b is not None and any(isinstance(n, ast.Name) and n.id in dynamic
                                             for n in syntax.walk(b)):
                        raise error(dynamic_bound_error(role, ast.unparse(arg), which,
                                                        ast.unparse(b)), node)
