"""Tile operations' operands in the source, rewritten for the compiler and the simulator
alike (``passes/tile_allocation.py`` runs it first among its rewrites, ``sim/runner.py``
alone).

- A subscript used as an operand of a tile operation names a region:
  ``T.copy(A[by * 128, k * 32], A_s)`` → ``T.copy(__tj_region(A, "pp", (…, …), (None, None)), A_s)``
  (``"s"`` marks a sliced dimension, ``"p"`` a point; slice ends ride along for checks).
- An element atomic becomes its own call: ``T.atomic_add(C[i, j], v, mo, rp)`` →
  ``__tj_atomic_add(C, (i, j), v, rp, per_lane, mo)`` (``per_lane``: True for the
  read-modify-write atomics, which every thread performs, outside a ``T.Parallel`` too,
  as TileLang runs a block's statement in each thread; for ``T.atomic_load`` /
  ``T.atomic_store``, inside a ``T.Parallel`` or in a kernel that reads its thread index,
  else the block's one access; ``mo``, the memory order, a constant None or
  string, checked here); the region form keeps its call with its four operands
  positional. With a tile as the value, ``C[i, j]`` is the corner of a region of the
  tile's shape (``T.atomic_add(C[by * 128, bx * 128], C_local)``, as ``T.copy`` reads it).
"""
from __future__ import annotations

import ast
import copy

from tilejit import syntax
from tilejit import language as T
from tilejit.errors import CompileError
from tilejit.frontend.source import resolve_static
from tilejit.ir.markers import ATOMICS, LANGUAGE, REGION, THREAD_INDEX
from tilejit.language.atomics import call_signature, memory_order_error

# the operand positions of tile operations that may be regions
REGION_OPERANDS = {T.copy: (0, 1), T.clear: (0,), T.fill: (0,), T.atomic_add: (0, 1),
                   T.atomic_max: (0, 1), T.atomic_min: (0, 1), T.tma_copy: (0, 1),
                   T.copy_cluster: (0, 1), T.cumsum: (0, 1), T.cummax: (0, 1),
                   T.transpose: (0, 1)}
# the operands that may be regions, given by keyword (TileLang's scans: ``src=``, ``dst=``;
# on the GPU ``passes/tile_allocation.py`` scans a region in a tile of its own first)
REGION_KEYWORDS = {T.cumsum: ("src", "dst"), T.cummax: ("src", "dst"),
                   T.transpose: ("src", "dst")}


def _call(name, args):
    return ast.Call(ast.Name(name, ast.Load()), args, [])


def _slice_extent(lower, upper, known) -> int:
    """The compile-time length of ``lower:upper``, or 0 when it is not known:
    constant bounds, ``x : x + c`` and ``x * c : (x + 1) * c``."""
    lower = lower or ast.Constant(0)
    if upper is None:
        return 0
    def value(n):
        return known(n) if known is not None else (
            n.value if isinstance(n, ast.Constant) else None)
    lo, hi = value(lower), value(upper)
    if isinstance(lo, int) and isinstance(hi, int):
        return hi - lo
    same = lambda a, b: ast.dump(a) == ast.dump(b)  # noqa: E731
    try:
        if (isinstance(upper, ast.BinOp) and isinstance(upper.op, ast.Add)
                and same(upper.left, lower)):
            return int(value(upper.right))
        if (isinstance(lower, ast.BinOp) and isinstance(lower.op, ast.Mult)
                and isinstance(upper, ast.BinOp) and isinstance(upper.op, ast.Mult)
                and same(lower.right, upper.right) and isinstance(upper.left, ast.BinOp)
                and isinstance(upper.left.op, ast.Add) and same(upper.left.left, lower.left)
                and value(upper.left.right) == 1):
            return int(value(lower.right))
    except (TypeError, ValueError):
        pass
    return 0


def region_call(node: ast.Subscript, known=None) -> ast.Call:
    """``A[r0:r1, c]`` → ``__tj_region(A, "sp", (r0, c), (r1, None), "<extents>")``."""
    index = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    kinds, starts, ends, extents = "", [], [], []
    for i in index:
        if isinstance(i, ast.Slice):
            if i.step is not None:
                raise ValueError("a region's slice may not have a step")
            kinds += "s"
            starts.append(i.lower or ast.Constant(0))
            ends.append(i.upper or ast.Constant(None))
            extents.append(_slice_extent(i.lower, i.upper, known))
        else:
            kinds += "p"
            starts.append(i)
            ends.append(ast.Constant(None))
            extents.append(1)
    out = _call(REGION, [node.value, ast.Constant(kinds), ast.Tuple(starts, ast.Load()),
                         ast.Tuple(ends, ast.Load()),
                         ast.Constant(",".join(map(str, extents)))])
    return ast.copy_location(out, node)


def region_source(text: str) -> str:
    """``text`` (a message quoting rewritten source) with each ``__tj_region(A, "sp",
    (r0, c), (r1, None), "...")`` written back as the subscript it came from,
    ``A[r0:r1, c]``."""
    out, i = [], 0
    while (j := text.find(REGION + "(", i)) >= 0:
        depth, k = 0, j + len(REGION)
        for k in range(j + len(REGION), len(text)):
            depth += {"(": 1, ")": -1}.get(text[k], 0)
            if depth == 0:
                break
        out.append(text[i:j])
        out.append(_subscript_text(text[j:k + 1]))
        i = k + 1
    out.append(text[i:])
    return "".join(out)


def _subscript_text(call_text: str) -> str:
    try:
        call = ast.parse(call_text, mode="eval").body
        base, kinds, starts, ends = call.args[:4]
        parts = []
        for kind, start, end in zip(kinds.value, starts.elts, ends.elts):
            if kind == "p":
                parts.append(ast.unparse(start))
                continue
            lower = "" if isinstance(start, ast.Constant) and start.value == 0 \
                else ast.unparse(start)
            upper = "" if isinstance(end, ast.Constant) and end.value is None \
                else ast.unparse(end)
            parts.append(f"{lower}:{upper}")
        return f"{ast.unparse(base)}[{', '.join(parts)}]"
    except (SyntaxError, AttributeError, ValueError, IndexError):
        return call_text


def _slice_length(part: ast.Slice):
    """``b - a`` of the slice ``a:b`` where the source says it (two integers, or ``b`` is
    ``a + n``), else None."""
    lower = part.lower if part.lower is not None else ast.Constant(0)
    upper = part.upper
    if isinstance(lower, ast.Constant) and isinstance(upper, ast.Constant) and \
            isinstance(lower.value, int) and isinstance(upper.value, int):
        return upper.value - lower.value
    if isinstance(upper, ast.BinOp) and isinstance(upper.op, ast.Add) and \
            isinstance(upper.right, ast.Constant) and isinstance(upper.right.value, int) and \
            ast.dump(upper.left) == ast.dump(lower):
        return upper.right.value
    return None


class _Regions(syntax.NodeTransformer):
    def __init__(self, namespace, error, known=None):
        self.namespace = namespace
        self.error = error
        self.known = known
        self.parallel = 0       # how many T.Parallel loops enclose the current node
        self.per_thread = False     # the kernel reads its thread index
        self.tiles = set()      # the names of tiles the kernel allocates

    def visit_For(self, node):
        it = node.iter
        par = isinstance(it, ast.Call) and resolve_static(it.func, self.namespace) is T.Parallel
        self.parallel += par
        node = self.generic_visit(node)
        self.parallel -= par
        return node

    def visit_Expr(self, node):
        call = node.value
        fn = resolve_static(call.func, self.namespace) if isinstance(call, ast.Call) else None
        if fn in (T.atomic_addx2, T.atomic_addx4):
            return [ast.copy_location(ast.Expr(self._atomic(self.generic_visit(c),
                                                            T.atomic_add)), node)
                    for c, _ in self._pair_atomic(call, fn)]
        return self.generic_visit(node)

    def visit_Assign(self, node):
        """``P[0:2] = T.atomic_addx2(D[0:2], V[0:2], return_prev=True)``: each element of
        P the previous value of its element of D (``P[k] = T.atomic_add(D[k], V[k],
        return_prev=True)``)."""
        call = node.value
        fn = resolve_static(call.func, self.namespace) if isinstance(call, ast.Call) else None
        if fn not in (T.atomic_addx2, T.atomic_addx4):
            return self.generic_visit(node)
        target = node.targets[0] if len(node.targets) == 1 else None
        width = 2 if fn is T.atomic_addx2 else 4
        if not isinstance(target, ast.Subscript):
            raise self.error(f"T.{fn.__name__}(..., return_prev=True) gives {width} values: "
                             f"store them into {width} consecutive elements (P[i:i + {width}] "
                             f"= ...), got `{ast.unparse(node.targets[0])}`", node)
        pairs = self._pair_atomic(call, fn, returns=True)
        out = []
        for k, (c, _) in enumerate(pairs):
            dst = self._shifted(target, k, width, f"T.{fn.__name__}", node)
            dst.ctx = ast.Store()
            out.append(ast.copy_location(ast.Assign([self.generic_visit(dst)], self._atomic(
                self.generic_visit(c), T.atomic_add)), node))
        return out

    def _shifted(self, sub, k, width, sig, node):
        """Element ``k`` of the ``width`` consecutive elements ``sub`` names: its first
        (``D[i, j]``) or the slice of them (``D[i, j:j + 4]``) along the last dimension."""
        index = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
        if any(isinstance(i, ast.Slice) for i in index[:-1]):
            raise self.error(f"{sig}: the {width} elements are consecutive along the last "
                             f"dimension; index the others with one value each, got "
                             f"`{ast.unparse(sub)}`", node)
        last = index[-1]
        if isinstance(last, ast.Slice):
            first = last.lower if last.lower is not None else ast.Constant(0)
            size = _slice_length(last)
            if last.step is not None or last.upper is None or \
                    (size is not None and size != width):
                raise self.error(f"{sig}: a slice names the {width} elements "
                                 f"(D[i, j:j + {width}]), got `{ast.unparse(sub)}`", node)
            last = first
        last = ast.BinOp(copy.deepcopy(last), ast.Add(), ast.Constant(k)) if k else \
            copy.deepcopy(last)
        new = [copy.deepcopy(i) for i in index[:-1]] + [last]
        return ast.Subscript(copy.deepcopy(sub.value), ast.Tuple(new, ast.Load())
                             if len(new) > 1 else new[0], ast.Load())

    def _pair_atomic(self, node, fn, returns=False):
        """``T.atomic_addx2(D[.., n], V[.., m])`` → ``T.atomic_add(D[.., n + k], V[.., m +
        k])`` for k = 0, 1 (x4: 0 … 3): TileLang's pair (quad) atomic, element by element
        (its own fallback when a vector atomic does not apply); a scalar value is added to
        each element. D and V may name the elements by a slice (``D[.., n:n + 2]``). With
        ``returns`` (an assignment's value) return_prev=True gives each call its element's
        previous value."""
        name = fn.__name__
        width = 2 if name == "atomic_addx2" else 4
        sig = f"T.{name}(dst, value, return_prev=False)"
        args = list(node.args)
        for k in node.keywords:
            pos = {"dst": 0, "value": 1, "return_prev": 2}.get(k.arg)
            if pos is None or pos < len(args):
                raise self.error(f"{sig}: unexpected argument {k.arg!r}", node)
            args += [None] * (pos + 1 - len(args))
            args[pos] = k.value
        if len(args) < 2 or len(args) > 3 or args[0] is None or args[1] is None:
            raise self.error(f"{sig} takes a destination and a value", node)
        prev = len(args) == 3 and not (isinstance(args[2], ast.Constant) and
                                       args[2].value is False)
        if prev and not returns:
            raise self.error(f"{sig}: return_prev=True gives the {width} previous values; "
                             f"store them (P[i:i + {width}] = T.{name}(..., "
                             f"return_prev=True))", node)
        if returns and not prev:
            raise self.error(f"{sig} returns nothing without return_prev=True", node)
        dst, value = args[0], args[1]
        if isinstance(dst, ast.Name) and dst.id not in self.tiles and not prev and \
                not isinstance(value, ast.Subscript):
            # the whole-buffer form (TileLang's `T.atomic_addx2(Dst, Val)`): every element,
            # the tile-level T.atomic_add of the whole operands (a region, vectorized)
            self.namespace.setdefault(LANGUAGE, T)
            add = ast.Attribute(ast.Name(LANGUAGE, ast.Load()), "atomic_add", ast.Load())
            return [(ast.copy_location(ast.Call(add, [dst, value], []), node), 0)]
        if not isinstance(dst, ast.Subscript):
            raise self.error(f"{sig}: the destination is the first of {width} consecutive "
                             f"elements of a tensor or shared tile (D[i, j]), got "
                             f"`{ast.unparse(dst)}`", node)
        if isinstance(value, ast.Name) and value.id in self.tiles:
            raise self.error(f"{sig}: the value is the first of {width} elements (V[i, j]) "
                             f"or a scalar, not the whole tile {value.id!r}", node)
        keywords = [ast.keyword("return_prev", args[2])] if prev else []
        # (the calls' func is the original's: _atomic rewrites them by the function given)
        return [(syntax.fix_missing_locations(ast.copy_location(ast.Call(
            node.func, [self._shifted(dst, k, width, sig, node),
                        self._shifted(value, k, width, sig, node)
                        if isinstance(value, ast.Subscript) else copy.deepcopy(value)],
            copy.deepcopy(keywords)), node)), k) for k in range(width)]

    def visit_Call(self, node):
        node = self.generic_visit(node)
        fn = resolve_static(node.func, self.namespace)
        if fn in ATOMICS:
            node = self._atomic(node, fn)
            if isinstance(node.func, ast.Name) and node.func.id == ATOMICS[fn]:
                return node
        positions = REGION_OPERANDS.get(fn)
        if positions:
            for p in positions:
                if p < len(node.args) and isinstance(node.args[p], ast.Subscript):
                    node.args[p] = self._region(node.args[p], node)
            for k in node.keywords:
                if k.arg in REGION_KEYWORDS.get(fn, ()) and isinstance(k.value, ast.Subscript):
                    k.value = self._region(k.value, node)
        return node

    def _region(self, subscript, node):
        try:
            return region_call(subscript, self.known)
        except ValueError as e:
            raise self.error(str(e), node) from None

    def _load_store(self, node, fn):
        """``T.atomic_load(src, memory_order)`` and ``T.atomic_store(dst, value,
        memory_order)``: an element of a tensor or shared tile, the order "seq_cst" unless
        given; as the element form of the other atomics, the load with every thread
        reading and returning the value."""
        name = fn.__name__
        load = name == "atomic_load"
        params = ("src", "memory_order") if load else ("dst", "value", "memory_order")
        sig = f"T.{name}({', '.join(params[:-1])}, memory_order=\"seq_cst\")"
        args = list(node.args)
        for k in node.keywords:
            pos = params.index(k.arg) if k.arg in params else None
            if pos is None or pos < len(args) and args[pos] is not None:
                raise self.error(f"{sig}: unexpected argument {k.arg!r}", node)
            args += [None] * (pos + 1 - len(args))
            args[pos] = k.value
        required = len(params) - 1
        if len(args) > len(params) or len(args) < required \
                or any(a is None for a in args[:required]):
            raise self.error(f"{sig} takes {'an element' if load else 'an element and a value'}"
                             f" (and a memory order)", node)
        args += [None] * (len(params) - len(args))
        order = args[-1] if args[-1] is not None else ast.Constant("seq_cst")
        order = self._memory_order(name[7:], order, node)
        dst = args[0]
        index = (dst.slice.elts if isinstance(dst, ast.Subscript)
                 and isinstance(dst.slice, ast.Tuple) else [getattr(dst, "slice", None)])
        if not isinstance(dst, ast.Subscript) or any(isinstance(i, ast.Slice) for i in index):
            raise self.error(f"{sig}: the {params[0]} must be one element of a tensor or a "
                             f"shared tile (F[i], F[i, j]), got `{ast.unparse(dst)}`", node)
        value = ast.Constant(0) if load else args[1]
        out = _call(ATOMICS[fn], [dst.value, ast.Tuple(index, ast.Load()), value,
                                  ast.Constant(load),
                                  ast.Constant(load or self.parallel > 0 or self.per_thread),
                                  order])
        return ast.copy_location(out, node)

    def _atomic(self, node, fn):
        """The element form becomes ``__tj_atomic_*``; the region form keeps the call with
        its four operands positional, ``(dst, value, memory_order, return_prev)`` (the
        region rewrite then applies)."""
        if fn in (T.atomic_load, T.atomic_store):
            return self._load_store(node, fn)
        name = fn.__name__
        bitwise = fn is T.atomic_or         # TileLang's: one element, nothing returned
        sig = f"T.{name}{call_signature(name[7:])}"
        args = list(node.args)
        if bitwise and (len(args) > 3 or any(k.arg in ("return_prev", "use_tma")
                                              for k in node.keywords)):
            raise self.error(f"{sig}: takes one element, a value and a memory order "
                             f"(no return_prev or use_tma, as TileLang's)", node)
        # TileLang's use_tma=True asks for the region's sum by a TMA reduction: how the
        # elements are added, not what they become
        for k in node.keywords:
            if k.arg == "use_tma":
                self._flag(f"T.{name}: use_tma", k.value, node)
        for k in [k for k in node.keywords if k.arg != "use_tma"]:
            pos = {"dst": 0, "value": 1, "memory_order": 2, "return_prev": 3}.get(k.arg)
            if pos is None or pos < len(args) and args[pos] is not None:
                raise self.error(f"{sig}: unexpected argument {k.arg!r}", node)
            args += [None] * (pos + 1 - len(args))
            args[pos] = k.value
        if len(args) < 2 or len(args) > 4 or args[0] is None or args[1] is None:
            raise self.error(f"{sig} takes a destination and a value", node)
        args += [None] * (4 - len(args))
        args[2] = self._memory_order(name[7:], args[2], node)
        if args[3] is None:
            args[3] = ast.Constant(False)
        dst = args[0]
        index = (dst.slice.elts if isinstance(dst, ast.Subscript)
                 and isinstance(dst.slice, ast.Tuple) else [getattr(dst, "slice", None)])
        value = args[1]
        value_index = (value.slice.elts if isinstance(value, ast.Subscript)
                       and isinstance(value.slice, ast.Tuple) else [getattr(value, "slice", None)])
        # a whole tile, or a region of one (T.atomic_add(Out[0, 0], F[0:1, :])): the
        # region form, whose extents are the value's
        tile_value = isinstance(value, ast.Name) and value.id in self.tiles or (
            isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name)
            and value.value.id in self.tiles and any(isinstance(i, ast.Slice)
                                                     for i in value_index))
        if isinstance(dst, ast.Subscript) and not tile_value \
                and not any(isinstance(i, ast.Slice) for i in index):
            # every thread performs it, outside a T.Parallel too: TileLang runs a statement
            # of the block in each of its threads (its atomic tests add nthreads times)
            out = _call(ATOMICS[fn], [dst.value, ast.Tuple(index, ast.Load()), args[1], args[3],
                                      ast.Constant(True), args[2]])
            return ast.copy_location(out, node)
        if bitwise:
            raise self.error(f"{sig}: the destination must be one element of a tensor or "
                             f"shared tile (F[i], F[i, j]) and the value a scalar; TileLang's "
                             f"atomic_or has no region form, got `{ast.unparse(node)}`", node)
        node.args, node.keywords = args, []
        return node

    def _memory_order(self, op, expr, node):
        """``memory_order`` as a constant: None or one of ``MEMORY_ORDERS``, a literal or a
        compile-time value (a constexpr parameter, a global). Without ``known`` (the
        simulator) an expression it cannot resolve stays, for the simulator to check."""
        if expr is None:
            return ast.Constant(None)
        if isinstance(expr, ast.Constant):
            value = expr.value
        elif isinstance(expr, ast.Name) and expr.id in self.namespace:
            value = self.namespace[expr.id]
        else:
            value = self.known(expr) if self.known is not None else None
            if value is None:
                value = resolve_static(expr, self.namespace)
            if value is None and self.known is None:
                return expr
            if value is None:
                value = _Unparsed(f"the run-time expression `{ast.unparse(expr)}`")
        message = memory_order_error(op, value)
        if message is not None:
            raise self.error(message, node)
        return ast.copy_location(ast.Constant(value), expr)

    def _flag(self, what, expr, node):
        """A keyword that must be a compile-time True or False (a literal, a global or
        closure name, what ``known`` resolves); in the simulator's front end (no
        ``known``) an expression it cannot resolve is left alone."""
        if isinstance(expr, ast.Constant):
            value = expr.value
        elif isinstance(expr, ast.Name) and expr.id in self.namespace:
            value = self.namespace[expr.id]
        else:
            value = self.known(expr) if self.known is not None else None
            if value is None and self.known is None:
                return
        if not isinstance(value, bool):
            raise self.error(f"{what} must be True or False, got `{ast.unparse(expr)}`", node)


class _Unparsed(str):
    """A description shown as it is in an error message (its repr is itself)."""

    def __repr__(self):
        return str(self)


def rewrite_regions(fdef: ast.FunctionDef, namespace, error=None,
                    known=None) -> ast.FunctionDef:
    """``fdef`` with its tile operations' subscript operands made regions and its element
    atomics ``__tj_atomic_*`` calls. ``error(message, node)`` makes the exception to
    raise (a ``CompileError`` without a location by default); ``known(node)`` is an
    expression's compile-time value or None, for the extents of slices (literals only
    without it)."""
    regions = _Regions(namespace, error or (lambda m, n: CompileError(m)), known)
    regions.per_thread = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                             and n.func.id == THREAD_INDEX for n in syntax.walk(fdef))
    allocations = (T.alloc_fragment, T.alloc_shared, T.alloc_local)
    regions.tiles = {n.targets[0].id for n in syntax.walk(fdef) if isinstance(n, ast.Assign)
                     and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
                     and isinstance(n.value, ast.Call)
                     and resolve_static(n.value.func, namespace) in allocations}
    return regions.visit(fdef)
