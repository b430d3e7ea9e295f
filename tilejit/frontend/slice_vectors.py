"""Front end: slices of a buffer in a statement of the block, as TileLang's programs write
them outside tile operations. ``A[0, 4:8] = A[0, 0:4]`` stores four elements, ``s[0:8] =
0.0`` eight, ``A[0, 4:8] += 1`` adds to four; ``b = A[0, 0:4]`` binds four values, loaded
where the name is bound (TileLang's let of a vector: ``float4 b`` in its CUDA), and
``A[0, 4:8] = b`` stores them. Each is TVM's vector statement, run by every thread that
runs it: a slice ``s:e`` of a tensor parameter or of a buffer the kernel allocates is
``T.Ramp(s, 1, e - s)`` (``s`` left out is 0, ``e`` the dimension's extent) and
``ramp_vectors.py`` runs the statement once per lane, every lane loaded before any is
stored where it reads what it writes. A bound vector is an array of the thread's own
(``T.alloc_local`` of the first sliced buffer's dtype, or the dtype its outermost cast or
comparison gives); its name read in a later vector
statement is its lanes. A slice with a step, two sliced dimensions of one buffer and
slices of different lengths in one statement are ``CompileError``s (TileLang refuses
them); a region as an operand of a tile operation (``T.copy(A[0, 0:4], s)``) is not a
statement's slice and stays as it is."""
from __future__ import annotations

import ast
import copy

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.ramp_vectors import buffer_dtypes
from tilejit.frontend.source import resolve_static
from tilejit.ir.markers import LANGUAGE
from tilejit.language.tiles import TILE_OPERATIONS

# calls whose operands are regions, not vectors: the statement is theirs
# (``P[0:2] = T.atomic_addx2(D[0:2], V[0:2], return_prev=True)``)
_REGION_CALLS = tuple(getattr(T, n) for n in (
    *TILE_OPERATIONS, "atomic_addx2", "atomic_addx4", "any_of", "all_of", "reduce",
    "tma_copy", "async_copy", "view", "reshape") if hasattr(T, n))


def _polynomial(node, constants):
    """{monomial: coefficient} of an integer expression made of +, -, * and atoms (a
    monomial: the sorted tuple of its atoms' texts, () the constant), or None;
    ``constants``: {name: int} of the kernel's compile-time names."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return {(): node.value}
    if isinstance(node, ast.Name) and type(constants.get(node.id)) is int:
        return {(): constants[node.id]}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _polynomial(node.operand, constants)
        return None if inner is None else {k: -v for k, v in inner.items()}
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
        a, b = _polynomial(node.left, constants), _polynomial(node.right, constants)
        if a is None or b is None:
            return None
        out: dict = {}
        if isinstance(node.op, ast.Mult):
            for ka, va in a.items():
                for kb, vb in b.items():
                    key = tuple(sorted(ka + kb))
                    out[key] = out.get(key, 0) + va * vb
            return out
        sign = 1 if isinstance(node.op, ast.Add) else -1
        out = dict(a)
        for k, v in b.items():
            out[k] = out.get(k, 0) + sign * v
        return out
    # anything else (a name, `A.shape[0]`, `bx // 2`) is an atom of its own
    return {(ast.unparse(node),): 1}


def _constant(node, constants):
    """The int an expression is (of literals and the kernel's compile-time ints), or
    None."""
    p = _polynomial(node, constants)
    return p.get((), 0) if p is not None and all(k == () for k in p) else None


def _length(lower, upper, constants):
    """``upper - lower``: an int where the two differ by one, the difference's own terms
    where they cancel to fewer (``(bx + 1) * BLOCK - bx * BLOCK`` is ``BLOCK``), else the
    expression."""
    a, b = _polynomial(lower, constants), _polynomial(upper, constants)
    if a is not None and b is not None:
        diff = dict(b)
        for k, v in a.items():
            diff[k] = diff.get(k, 0) - v
        terms = [(k, v) for k, v in diff.items() if v != 0]
        if all(k == () for k, _ in terms):
            return ast.Constant(diff.get((), 0))
        if len(terms) == 1 and terms[0][1] > 0:
            (atoms, coefficient), = terms
            out = ast.parse(atoms[0], mode="eval").body
            for atom in atoms[1:]:
                out = ast.BinOp(out, ast.Mult(), ast.parse(atom, mode="eval").body)
            return out if coefficient == 1 else ast.BinOp(ast.Constant(coefficient),
                                                           ast.Mult(), out)
    if isinstance(lower, ast.Constant) and lower.value == 0:
        return copy.deepcopy(upper)
    return ast.BinOp(copy.deepcopy(upper), ast.Sub(), copy.deepcopy(lower))


class _Vectors(syntax.NodeTransformer):
    def __init__(self, namespace, error, dtypes, stores):
        self.namespace = namespace
        # the closure's and globals' ints the kernel does not bind again
        self.constants = {k: v for k, v in namespace.items()
                          if type(v) is int and k not in stores}
        self.error = error
        self.buffers = dtypes           # {tensor parameter or allocated buffer: its dtype}
        self.stores = stores            # {name: how many times the kernel binds it}
        self.vectors = {}               # {bound vector name: its lane count (an AST)}
        self.assumed = []               # the lengths of open slices a statement took

    # which statements are vector statements
    def _sliced(self, node):
        if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
                and node.value.id in self.buffers):
            return False
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return any(isinstance(e, ast.Slice) for e in elts)

    def _vector_parts(self, expr):
        """Whether ``expr`` reads a slice of a buffer or a bound vector (outside the
        operands of region calls); None where a region call holds it."""
        found = False
        # (`v[0]`: one element of a vector, a scalar)
        elements = {id(n.value) for n in syntax.walk(expr) if isinstance(n, ast.Subscript)}
        for n in syntax.walk(expr):
            if isinstance(n, ast.Call) and resolve_static(n.func, self.namespace) in \
                    _REGION_CALLS:
                return None
            found = found or self._sliced(n) or (
                isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in self.vectors
                and id(n) not in elements)
        return found

    def _has_lanes(self, node):
        """A statement that already spells its lanes (T.Ramp, T.Broadcast; its slices are
        ``ramp_vectors.py``'s)."""
        return any(isinstance(n, ast.Call) and resolve_static(n.func, self.namespace) in
                   (T.Ramp, T.Broadcast) for n in syntax.walk(node))

    def visit_Assign(self, node):
        if self._has_lanes(node):
            return self._lanes_of_names(node)
        if len(node.targets) != 1:
            return node
        target, value = node.targets[0], node.value
        if isinstance(target, ast.Name) and target.id not in self.buffers and \
                self._vector_parts(value):
            if self.stores.get(target.id) != 1:
                raise self.error(f"`{target.id}` is bound to a vector here "
                                 f"(`{ast.unparse(value)}`) and bound again elsewhere in the "
                                 f"kernel: a vector is a value bound once (TileLang's let); "
                                 f"to update lanes, store into a T.alloc_local through a "
                                 f"slice (`v[0:4] = ...`)", node)
            return self._bind(target.id, node)
        if isinstance(target, ast.Subscript) and not self._sliced(target) and \
                isinstance(target.value, ast.Name) and target.value.id in self.buffers and \
                self._vector_parts(value):
            raise self.error(f"the statement stores a vector into one element, "
                             f"`{ast.unparse(target)}`: store it into a slice of as many "
                             f"elements (`{ast.unparse(target.value)}[i:i + n]`) or take one "
                             f"lane of it (`v[k]`)", node)
        if self._sliced(target) and self._vector_parts(value) is not None:
            lanes = []
            new = ast.Assign([self._ramped(target, lanes, node)],
                             self._ramped(value, lanes, node))
            self._agree(lanes, node)
            return self._with_assumptions(
                syntax.fix_missing_locations(ast.copy_location(new, node)), node)
        return node

    def visit_AugAssign(self, node):
        if self._has_lanes(node):
            return self._lanes_of_names(node)
        if isinstance(node.target, ast.Name) and node.target.id in self.vectors and \
                node.target.id in self.buffers and self._vector_parts(node.value) is not None:
            # `b += 1` of a bound vector (TileLang rebinds it to `b + 1`): its lanes updated
            name = node.target.id
            ramp = self._ramp(ast.Constant(0), self.vectors[name])
            lanes = [(self.vectors[name], node.target, ramp)]
            value = self._ramped(node.value, lanes, node)
            self._agree(lanes, node)
            new = ast.AugAssign(ast.Subscript(ast.Name(name, ast.Load()), ramp, ast.Store()),
                                node.op, value)
            return self._with_assumptions(
                syntax.fix_missing_locations(ast.copy_location(new, node)), node)
        if self._sliced(node.target) and self._vector_parts(node.value) is not None:
            lanes = []
            new = ast.AugAssign(self._ramped(node.target, lanes, node), node.op,
                                self._ramped(node.value, lanes, node))
            self._agree(lanes, node)
            return self._with_assumptions(
                syntax.fix_missing_locations(ast.copy_location(new, node)), node)
        return node

    def visit_Expr(self, node):
        return node

    def _lanes_of_names(self, node):
        """A statement spelling its lanes (``C[T.Ramp(0, 1, 4)] = b``): each bound
        vector it reads is its lanes (``b[T.Ramp(0, 1, 4)]``), its slices ramp_vectors'."""
        if not any(isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and
                   n.id in self.vectors for n in syntax.walk(node)):
            return node
        outer = self

        class Names(syntax.NodeTransformer):
            def visit_Subscript(self, n):
                if isinstance(n.value, ast.Name) and n.value.id in outer.vectors:
                    n.slice = self.visit(n.slice)
                    return n            # `v[0]`: one element of a vector
                return self.generic_visit(n)

            def visit_Name(self, n):
                if isinstance(n.ctx, ast.Load) and n.id in outer.vectors:
                    return ast.copy_location(ast.Subscript(
                        ast.Name(n.id, ast.Load()),
                        outer._ramp(ast.Constant(0), outer.vectors[n.id]), ast.Load()), n)
                return n

        return syntax.fix_missing_locations(Names().visit(node))

    def _bind(self, name, node):
        """``b = A[0, 0:4] * 2``: an array of the thread's own, its lanes stored here."""
        lanes = []
        value = self._ramped(node.value, lanes, node)
        count = self._agree(lanes, node)
        if any(isinstance(n, ast.Attribute) and n.attr == "shape" for n in syntax.walk(count)):
            raise self.error(f"`{name} = {ast.unparse(node.value)}` binds a vector of "
                             f"`{ast.unparse(count)}` lanes, which is known only when the "
                             f"kernel runs: give the slice its end (a length known at "
                             f"compile time)", node)
        dtype = self._result_dtype(node.value)
        if dtype is None:
            first = next(n for n in syntax.walk(node.value) if self._sliced(n) or (
                isinstance(n, ast.Name) and n.id in self.vectors))
            base = first.value.id if isinstance(first, ast.Subscript) else first.id
            dtype = self.buffers.get(base)
            if dtype is None:
                raise self.error(f"`{name} = {ast.unparse(node.value)}` binds a vector of "
                                 f"{base!r}'s dtype, which its allocation does not name",
                                 node)
        alloc = ast.Assign([ast.Name(name, ast.Store())], ast.Call(
            ast.Attribute(ast.Name(LANGUAGE, ast.Load()), "alloc_local", ast.Load()),
            [ast.Tuple([copy.deepcopy(count)], ast.Load()), dtype], []))
        store = ast.Assign([ast.Subscript(ast.Name(name, ast.Load()),
                                          self._ramp(ast.Constant(0), count), ast.Store())],
                           value)
        self.vectors[name] = count
        self.buffers[name] = dtype
        return self._with_assumptions([syntax.fix_missing_locations(ast.copy_location(s, node))
                                       for s in (alloc, store)], node)

    def _result_dtype(self, value):
        """The dtype a bound vector's value has where its outermost operation names one
        (TVM's: a cast's ``T.cast(v, "float32")``, ``T.Cast("float32", v)``,
        ``v.astype("float32")``, a comparison's bool); None: its first buffer's."""
        if isinstance(value, ast.Compare) or (isinstance(value, ast.UnaryOp) and
                                               isinstance(value.op, ast.Not)):
            return ast.Constant("bool")
        if not isinstance(value, ast.Call):
            return None
        if isinstance(value.func, ast.Attribute) and value.func.attr == "astype" and \
                len(value.args) == 1:
            return copy.deepcopy(value.args[0])
        called = resolve_static(value.func, self.namespace)
        keyword = next((k.value for k in value.keywords if k.arg == "dtype"), None)
        if called is T.cast:
            given = value.args[1] if len(value.args) > 1 else keyword
        elif called is getattr(T, "Cast", None):
            given = value.args[0] if value.args else keyword
        else:
            return None
        if given is None or getattr(resolve_static(given, self.namespace), "lanes", 1) != 1:
            return None         # (a vector dtype's lanes are the slice's)
        return copy.deepcopy(given)

    @staticmethod
    def _ramp(base, count):
        return ast.Call(ast.Attribute(ast.Name(LANGUAGE, ast.Load()), "Ramp", ast.Load()),
                        [base, ast.Constant(1), copy.deepcopy(count)], [])

    def _ramped(self, expr, lanes, stmt):
        """``expr`` with each slice of a buffer a Ramp and each bound vector its lanes;
        the lane counts met go to ``lanes``."""
        outer = self

        class Ramps(syntax.NodeTransformer):
            def visit_Name(self, node):
                if isinstance(node.ctx, ast.Load) and node.id in outer.vectors:
                    count = outer.vectors[node.id]
                    ramp = outer._ramp(ast.Constant(0), count)
                    lanes.append((count, node, ramp))
                    return ast.copy_location(ast.Subscript(
                        ast.Name(node.id, ast.Load()), ramp, ast.Load()), node)
                return node

            def visit_Subscript(self, node):
                if isinstance(node.value, ast.Name) and node.value.id in outer.vectors and \
                        not outer._sliced(node):
                    return node         # `v[0]`: one element of a vector
                if not outer._sliced(node):
                    return self.generic_visit(node)
                elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
                sliced = [k for k, e in enumerate(elts) if isinstance(e, ast.Slice)]
                if len(sliced) > 1:
                    raise outer.error(f"`{ast.unparse(node)}` slices {len(sliced)} dimensions "
                                      f"in a statement, a vector of one: slice one dimension "
                                      f"(or copy the region with T.copy)", stmt)
                k = sliced[0]
                sl = elts[k]
                if sl.step is not None:
                    raise outer.error(f"a slice with a step in a statement (`{ast.unparse(node)}"
                                      f"`) is not supported: index the elements with "
                                      f"T.Ramp(start, step, lanes)", stmt)
                for bound in (sl.lower, sl.upper):
                    value = None if bound is None else _constant(bound, outer.constants)
                    if value is not None and value < 0:
                        raise outer.error(f"a negative slice bound in a statement "
                                          f"(`{ast.unparse(node)}`) is not supported: give "
                                          f"the index from the start (`{node.value.id}.shape"
                                          f"[{k}] - {-value}`)", stmt)
                lower = self.visit(sl.lower) if sl.lower is not None else ast.Constant(0)
                upper = self.visit(sl.upper) if sl.upper is not None else ast.Subscript(
                    ast.Attribute(ast.Name(node.value.id, ast.Load()), "shape", ast.Load()),
                    ast.Constant(k), ast.Load())
                count = _length(lower, upper, outer.constants)
                new = [self.visit(e) for e in elts]
                new[k] = outer._ramp(lower, count)
                lanes.append((count, node, new[k]))
                index = ast.Tuple(new, ast.Load()) if len(new) > 1 else new[0]
                return ast.copy_location(ast.Subscript(node.value, index, node.ctx), node)

        return syntax.fix_missing_locations(Ramps().visit(copy.deepcopy(expr)))

    def _agree(self, lanes, stmt):
        """The statement's lane count: every slice's, where they are numbers, the same;
        a slice whose length is not a number (``A[4:]``: ``A.shape[0] - 4``) takes it."""
        known = [(c.value, n) for c, n, _ in lanes if isinstance(c, ast.Constant)]
        for value, n in known[1:]:
            if value != known[0][0]:
                raise self.error(f"slices of different lengths in one statement: "
                                 f"`{ast.unparse(known[0][1])}` ({known[0][0]}) and "
                                 f"`{ast.unparse(n)}` ({value})", stmt)
        if known and known[0][0] <= 0:
            raise self.error(f"an empty slice in a statement: `{ast.unparse(known[0][1])}`",
                             stmt)
        count = ast.Constant(known[0][0]) if known else lanes[0][0]
        for c, _, ramp in lanes:
            if not isinstance(c, ast.Constant) and (known or ast.dump(c) != ast.dump(count)):
                # `B[8:] = A[0:4]`: the open slice's length is the statement's, assumed
                # (checked by the simulator, as TVM checks lanes of static shapes)
                self.assumed.append(ast.Compare(copy.deepcopy(c), [ast.Eq()],
                                                [copy.deepcopy(count)]))
            ramp.args[2] = copy.deepcopy(count)
        return count

    def _with_assumptions(self, stmt, node):
        """``stmt`` (a statement or a list), after a ``T.assume`` of each length
        ``_agree`` took for an open slice."""
        out = [syntax.fix_missing_locations(ast.copy_location(ast.Expr(ast.Call(
            ast.Attribute(ast.Name(LANGUAGE, ast.Load()), "assume", ast.Load()), [test], [])),
            node)) for test in self.assumed]
        self.assumed = []
        return out + (stmt if isinstance(stmt, list) else [stmt]) if out else stmt


def expand_slice_statements(fdef: ast.FunctionDef, ks, tuples=None) -> ast.FunctionDef:
    """``fdef`` with the kernel body's slice statements in T.Ramp form (in place).
    ``tuples``: {name: (lanes, dtype name)} of names bound to tuples of values
    (``bit_moves.py``), vectors too."""
    launch = fdef.body[ks.launch_index] if 0 <= ks.launch_index < len(fdef.body) else None
    if launch is None or not tuples and not any(isinstance(n, ast.Slice)
                                                for n in syntax.walk(launch)):
        return fdef
    dtypes = buffer_dtypes(fdef, ks.namespace)
    # how many times each name is bound (`b += 1` updates a vector's lanes: not a binding)
    updated = {id(n.target) for n in syntax.walk(fdef) if isinstance(n, ast.AugAssign)}
    stores: dict = {}
    for n in syntax.walk(fdef):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and id(n) not in updated:
            stores[n.id] = stores.get(n.id, 0) + 1
    vectors = _Vectors(ks.namespace, ks.error, dtypes, stores)
    for name, (lanes, dtype) in (tuples or {}).items():
        vectors.vectors[name] = ast.Constant(lanes)
        dtypes[name] = ast.Constant(dtype)
    fdef.body[ks.launch_index] = vectors.visit(launch)
    return fdef


__all__ = ["expand_slice_statements"]
