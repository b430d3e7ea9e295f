"""TileLang's reducers, rewritten into fragments and tile reductions.

``r = T.alloc_reducer(shape, dtype, op="sum")`` is a fragment that a ``T.Parallel`` loop
folds values into from many iterations at once (``r[i] += A_f[i, j]``, or
``r[i] = T.max(r[i], x)`` for op "max", ``T.min`` for "min"), where an ordinary fragment
would let one iteration's write win; ``T.finalize_reducer(r)`` then makes every
thread's copy the reduced value. tilejit gives the fold its own tile and reduces it:

    r = T.alloc_fragment(shape, dtype)
    ...
    __tj_fold<k> = T.alloc_fragment((M, N), dtype)      # the loop's extents
    for i, j in T.Parallel(M, N):
        __tj_fold<k>[i, j] = <identity of op>            # 0, -inf, +inf
        ...                                              # the body, each fold of r into
        __tj_fold<k>[i, j] = __tj_fold<k>[i, j] + x      # __tj_fold<k> instead
    T.reduce_<op>(__tj_fold<k>, r, dim=1, clear=False)   # over the loop dims r's index lacks

so ``r`` holds the reduced values from then on (what finalize gives; a read of ``r``
between the loop and the finalize, a thread's partial value in TileLang, reads the
reduced one here) and ``T.finalize_reducer(r, batch=b)`` only checks ``b``. TileLang's
reducer v2 spells the same: ``T.reducer_init(r, init=None)`` is ``T.fill(r, init)`` (the
op's identity without ``init``: the starting value counts once per output),
``T.reducer_update(r[i], x)`` in a ``T.Parallel`` loop is the fold ``r[i] += x`` /
``T.max`` / ``T.min``, and ``T.finalize_reducer(r, dst)`` is ``T.copy(r, dst)``. A fold must
index ``r`` with loop variables in the loop's order, reducing one of its dimensions; or
with every loop variable, when each iteration folds into its own element (TileLang's
local-complete plan: ``r[i] += x`` straight into ``r``, no fold tile; with the loop
variables permuted, ``r[j, i]`` in a loop over ``(i, j)``, a fold tile in the loop's order
copied transposed and combined after the loop). A view of a reducer (``T.reshape(acc,
(M,))``) folds into it as one, and a fold at constant zeros of its unit dimensions
(``acc[0, i]`` of a (1, M) reducer) folds into such a view. Its index may also
hold constants and values the loop does not change (``acc[i]`` of an enclosing serial
loop): the fold tile is then reduced into a tile of the dimensions the index keeps and
combined into the elements it picks (when it keeps none, by a T.Parallel over the
reducer that updates the element its index equals: a reducer spread over the threads,
``acc[i, j]`` of a (4, 4) one, takes it too). Anything else is a ``CompileError`` at the line.
Folds inside a serial loop of the ``T.Parallel`` body accumulate once per its iteration.
The simulator and the GPU run the rewritten program.
"""
from __future__ import annotations

import ast
import copy

from tilejit import syntax
from tilejit.errors import ValueCompileError
from tilejit import language as T
from tilejit.frontend.reducer_epochs import check_reducer_epochs
from tilejit.frontend.source import assigned_names, is_call_to, resolve_static, static_truth
from tilejit.ir.markers import LANGUAGE

_REDUCE = {"sum": "reduce_sum", "max": "reduce_max", "min": "reduce_min",
           "bitand": "reduce_bitand", "bitor": "reduce_bitor", "bitxor": "reduce_bitxor"}
_BITWISE = {"bitand": ast.BitAnd, "bitor": ast.BitOr, "bitxor": ast.BitXor}


def _kwarg(call, name, position, default=None):
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return call.args[position] if len(call.args) > position else default


def _language(name, args):
    """``__tj_language.<name>(*args)``: a tile operation the rewrite writes."""
    return ast.Call(ast.Attribute(ast.Name(LANGUAGE, ast.Load()), name, ast.Load()), args, [])


def _text(index) -> str:
    """An index's source as written inside the brackets (``i, j``, not ``(i, j)``)."""
    if isinstance(index, ast.Tuple):
        return ", ".join(ast.unparse(e) for e in index.elts)
    return ast.unparse(index)


def _finalize_forms(call):
    """(dst or None, batch or None) of ``T.finalize_reducer``: TileLang's v2 form is
    ``(r, dst, batch)``, the v1 form ``(r, batch)`` (an integer in second place)."""
    keywords = {k.arg: k.value for k in call.keywords}
    second = call.args[1] if len(call.args) > 1 else None
    v1 = isinstance(second, ast.Constant) and isinstance(second.value, int)
    dst = keywords.get("dst", None if v1 else second)
    if isinstance(dst, ast.Constant) and dst.value is None:
        dst = None
    batch = keywords.get("batch", second if v1 else
                         (call.args[2] if len(call.args) > 2 else None))
    return dst, batch


def _identity(op, dtype):
    """The op's starting value for the reducer's dtype (the node ``dtype``): 0, all ones,
    or for max and min ``T.reducer_identity``: -inf and +inf of a float dtype, the
    smallest and largest value of an integer one (decided where the dtype is known: a
    constexpr's, ``A.dtype``)."""
    if op == "sum":
        return ast.Constant(0.0)
    if op in _BITWISE:
        return ast.Constant(-1 if op == "bitand" else 0)
    return _language("reducer_identity", [ast.Constant(op), copy.deepcopy(dtype)])


class _Reducers(syntax.NodeTransformer):
    def __init__(self, namespace, error):
        self.namespace, self.error = namespace, error
        self.reducers = {}      # name -> (op, dtype node, shape node)
        self.count = 0

    # -- allocation and finalize ----------------------------------------------------
    def visit_Assign(self, node):
        if (len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Call) and node.value.args
                and isinstance(node.value.args[0], ast.Name)
                and node.value.args[0].id in self.reducers
                and (is_call_to(node.value, T.reshape, self.namespace)
                     or is_call_to(node.value, T.view, self.namespace))):
            # a view of a reducer (`flat = T.reshape(acc, (M,))`) folds into it as one
            op, dtype, _ = self.reducers[node.value.args[0].id]
            shape = node.value.args[1] if len(node.value.args) > 1 else None
            self.reducers[node.targets[0].id] = (op, dtype, shape)
            return node
        if (len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and is_call_to(node.value, T.alloc_reducer, self.namespace)):
            call = node.value
            op_node = _kwarg(call, "op", 2, ast.Constant("sum"))
            op = resolve_static(op_node, self.namespace) if not isinstance(
                op_node, ast.Constant) else op_node.value
            if op not in _REDUCE:
                given = ast.unparse(op_node) + ("" if isinstance(op_node, ast.Constant)
                                                else f" = {op!r}")
                raise self.error(f"T.alloc_reducer: op: expected one of "
                                 f"{', '.join(map(repr, _REDUCE))}, got {given}", node)
            shape, dtype = _kwarg(call, "shape", 0), _kwarg(call, "dtype", 1)
            if op in _BITWISE:
                named = resolve_static(dtype, self.namespace) if dtype is not None else None
                named = dtype.value if isinstance(dtype, ast.Constant) else named
                if named is not None and not str(named).startswith(("int", "uint")):
                    raise self.error(f"T.alloc_reducer: op {op!r} is bitwise and needs an "
                                     f"integer dtype, got {named}", node)
            if shape is None or dtype is None:
                raise self.error("T.alloc_reducer(shape, dtype, op=...): shape and dtype "
                                 "are required", node)
            self.reducers[node.targets[0].id] = (op, dtype, shape)
            new = _language("alloc_fragment", [shape, dtype])
            return ast.copy_location(ast.Assign(node.targets, new), node)
        return self.generic_visit(node)

    def visit_Expr(self, node):
        if is_call_to(node.value, T.finalize_reducer, self.namespace):
            call = node.value
            name = self._reducer_arg(call, "T.finalize_reducer", node)
            dst, batch = _finalize_forms(call)
            self._check_batch(name, batch, node)
            if dst is None:
                return ast.copy_location(ast.Pass(), node)    # v1: in place
            return ast.copy_location(ast.Expr(_language("copy", [
                ast.Name(name, ast.Load()), dst])), node)      # v2: into dst
        if is_call_to(node.value, T.reducer_init, self.namespace):
            call = node.value
            name = self._reducer_arg(call, "T.reducer_init", node)
            op, dtype, _ = self.reducers[name]
            init = _kwarg(call, "init", 1)
            none = init is None or (isinstance(init, ast.Constant) and init.value is None) or (
                isinstance(init, ast.Name) and init.id in self.namespace and init.id not in
                self.assigned and self.namespace[init.id] is None)
            if not none:
                self._check_init_dtype(name, dtype, init, node)
            value = _identity(op, dtype) if none else init
            return ast.copy_location(ast.Expr(_language("fill", [
                ast.Name(name, ast.Load()), value])), node)
        return self.generic_visit(node)

    def _check_init_dtype(self, name, dtype_node, init, node):
        """A starting value written as a cast to a dtype (``T.float16(1.0)``) must be of
        the reducer's dtype, as TileLang requires; a number converts."""
        if not isinstance(init, ast.Call):
            return
        given = resolve_static(init.func, self.namespace)
        wanted = dtype_node.value if isinstance(dtype_node, ast.Constant) else \
            resolve_static(dtype_node, self.namespace)
        if not isinstance(given, T.DType) or wanted is None:
            return
        if given != T.as_dtype(wanted):
            raise self.error(f"T.reducer_init: the starting value {ast.unparse(init)} is "
                             f"{given}, which does not match reducer {name!r} of "
                             f"{T.as_dtype(wanted)}; pass a number or a "
                             f"{T.as_dtype(wanted)} value", node)

    def _reducer_arg(self, call, what, node):
        target = call.args[0] if call.args else None
        if not (isinstance(target, ast.Name) and target.id in self.reducers):
            raise self.error(f"{what}: expected a reducer of T.alloc_reducer, got "
                             f"{ast.unparse(target) if target else 'nothing'}", node)
        return target.id

    def _check_batch(self, name, batch, node):
        if batch is None:
            return
        value = batch.value if isinstance(batch, ast.Constant) else resolve_static(
            batch, self.namespace)
        if not isinstance(value, int) or isinstance(value, bool):
            return
        if value < 1:       # TileLang's ValueError too
            e = self.error(f"T.finalize_reducer: batch must be >= 1, got {value}", node)
            raise ValueCompileError(e.bare_message, e.filename, e.lineno)
        shape = self.reducers[name][2]
        extents = shape.elts if isinstance(shape, (ast.Tuple, ast.List)) else [shape]
        sizes = [e.value if isinstance(e, ast.Constant) else resolve_static(e, self.namespace)
                 for e in extents]
        if all(isinstance(s, int) for s in sizes):
            total = 1
            for s in sizes:
                total *= s
            if value > total:
                raise self.error(f"T.finalize_reducer: batch {value} exceeds total output "
                                 f"elements {total}", node)
            if total % value:
                raise self.error(f"T.finalize_reducer: batch {value} must evenly divide "
                                 f"the {total} output elements", node)

    # -- folds in T.Parallel loops ----------------------------------------------------
    def visit_For(self, node):
        node = self.generic_visit(node)
        if not (is_call_to(node.iter, T.Parallel, self.namespace) and self.reducers):
            return node
        target = node.target
        names = [t.id for t in (target.elts if isinstance(target, ast.Tuple) else [target])
                 if isinstance(t, ast.Name)]
        folds = {}
        self.invariant_of = _assigned_in(node.body) | set(names)
        self.views = []             # reducers' views the folds made (_squeezed)
        node.body = self._folds(node.body, names, folds)
        views = self.views
        self._check_rest(node.body, {key[0] if isinstance(key, tuple) else key
                                     for key in folds})
        if not folds:
            return node
        out = list(views)
        for key, (fold, op, _) in folds.items():
            dtype = self.reducers[key[0] if isinstance(key, tuple) else key][1]
            extents = ast.Tuple([copy.deepcopy(a) for a in node.iter.args], ast.Load())
            out.append(ast.Assign([ast.Name(fold, ast.Store())],
                                  _language("alloc_fragment", [extents, copy.deepcopy(dtype)])))
            init = ast.Assign([self._element(fold, names, ast.Store)],
                              _identity(op, dtype))
            node.body.insert(0, init)
        out.append(node)
        for key, (fold, op, dims) in folds.items():
            if isinstance(key, tuple) and key[-1] == "permuted":
                out += self._permuted_combine(key, fold, op, names, node.iter.args)
                continue
            if isinstance(key, tuple):
                out += self._into_element(key, fold, op, dims, names, node.iter.args)
                continue
            for dim in dims:
                reduce = _language(_REDUCE[op], [ast.Name(fold, ast.Load()),
                                                 ast.Name(key, ast.Load())])
                reduce.keywords = [ast.keyword("dim", ast.Constant(dim)),
                                   ast.keyword("clear", ast.Constant(False))]
                out.append(ast.Expr(reduce))
        return [ast.copy_location(s, node) for s in out]

    def _squeezed(self, name, index, names):
        """(the view of reducer ``name`` without its unit dimensions, the index into it)
        when ``index`` holds constant zeros at the reducer's dimensions of extent 1 and the
        loop's variables in its order elsewhere; else None. The view's statement goes
        before the loop (``self.views``)."""
        shape = self.reducers[name][2]
        extents = shape.elts if isinstance(shape, (ast.Tuple, ast.List)) else [shape]
        items = index.elts if isinstance(index, ast.Tuple) else [index]
        if len(items) != len(extents):
            return None
        kept_items, kept_extents = [], []
        for item, extent in zip(items, extents):
            if isinstance(item, ast.Constant) and item.value == 0:
                if not (isinstance(extent, ast.Constant) and extent.value == 1):
                    return None
                continue
            if not (isinstance(item, ast.Name) and item.id in names):
                return None
            kept_items.append(item)
            kept_extents.append(extent)
        if not kept_items:
            return None
        view = f"__tj_{name}_squeezed"
        if view not in self.reducers:
            op, dtype, _ = self.reducers[name]
            new_shape = ast.Tuple([copy.deepcopy(e) for e in kept_extents], ast.Load())
            self.reducers[view] = (op, dtype, new_shape)
            self.views.append(ast.Assign([ast.Name(view, ast.Store())], _language(
                "reshape", [ast.Name(name, ast.Load()), copy.deepcopy(new_shape)])))
        index = kept_items[0] if len(kept_items) == 1 else ast.Tuple(kept_items, ast.Load())
        return view, copy.deepcopy(index)

    def _permuted_combine(self, key, fold, op, names, extents):
        """A fold each iteration of which has its own element of the reducer, at the
        loop's indices permuted (``acc[j, i]`` in a loop over ``(i, j)``): the fold tile,
        in the loop's order, copied transposed into a tile of the reducer's shape (a
        transposed write, through shared memory: ``passes/fragment_transposes.py``),
        then combined into the reducer element by element in its own order."""
        name, index = key[0], key[2]
        dtype = self.reducers[name][1]
        order = [i.id for i in (index.elts if isinstance(index, ast.Tuple) else [index])]
        by_name = dict(zip(names, extents))
        shape = [copy.deepcopy(by_name[n]) for n in order]
        moved = f"{fold}_t"
        out = [ast.Assign([ast.Name(moved, ast.Store())], _language(
            "alloc_fragment", [ast.Tuple(shape, ast.Load()), copy.deepcopy(dtype)]))]

        def target(ids):
            return ast.Tuple([ast.Name(n, ast.Store()) for n in ids], ast.Store()) \
                if len(ids) > 1 else ast.Name(ids[0], ast.Store())
        transpose = ast.Assign([ast.Subscript(ast.Name(moved, ast.Load()),
                                              copy.deepcopy(index), ast.Store())],
                               self._element(fold, names, ast.Load))
        out.append(ast.For(target(names), _language("Parallel", [copy.deepcopy(e)
                                                                 for e in extents]),
                           [transpose], [], None))
        value = ast.Subscript(ast.Name(moved, ast.Load()), copy.deepcopy(index), ast.Load())
        combine = self._direct_fold(name, copy.deepcopy(index), op, value)
        out.append(ast.For(target(order), _language("Parallel", copy.deepcopy(shape)),
                           [combine], [], None))
        return out

    def _into_element(self, key, fold, op, dims, names, extents):
        """A fold whose reducer index holds constants or values the loop does not change
        (``acc[i]`` of an enclosing serial loop's ``i``): the fold tile reduced into a
        tile of the loop dimensions the index keeps, then combined into those elements
        of the reducer (one statement, or a T.Parallel over the kept dimensions)."""
        name, index = key[0], key[2]
        dtype = self.reducers[name][1]
        kept = [(n, e) for d, (n, e) in enumerate(zip(names, extents)) if d not in dims]
        part = f"{fold}_part"
        shape = [copy.deepcopy(e) for _, e in kept] or [ast.Constant(1)]
        out = [ast.Assign([ast.Name(part, ast.Store())], _language(
            "alloc_fragment", [ast.Tuple(shape, ast.Load()), copy.deepcopy(dtype)]))]
        reduce = _language(_REDUCE[op], [ast.Name(fold, ast.Load()), ast.Name(part, ast.Load())])
        reduce.keywords = [ast.keyword("dim", ast.Constant(dims[0])),
                           ast.keyword("clear", ast.Constant(True))]
        out.append(ast.Expr(reduce))
        at = [ast.Name(n, ast.Load()) for n, _ in kept] or [ast.Constant(0)]
        value = ast.Subscript(ast.Name(part, ast.Load()),
                              at[0] if len(at) == 1 else ast.Tuple(at, ast.Load()), ast.Load())
        if not kept:
            over_whole = self._over_whole_reducer(name, index, op, value)
            if over_whole is not None:
                return out + over_whole
        combine = self._direct_fold(name, copy.deepcopy(index), op, value)
        if kept:
            target = ast.Tuple([ast.Name(n, ast.Store()) for n, _ in kept], ast.Store()) \
                if len(kept) > 1 else ast.Name(kept[0][0], ast.Store())
            combine = ast.For(target, _language("Parallel", [copy.deepcopy(e) for _, e in kept]),
                              [combine], [], None)
        return out + [combine]

    def _over_whole_reducer(self, name, index, op, value):
        """The combine of a fold into the one element ``index`` picks (constants or
        values the loop does not change: ``acc[i, j]`` of enclosing serial loops) of a
        reducer of more than one element, as a T.Parallel over the reducer's shape that
        updates the element its index equals. A statement on the element alone needs every
        thread to hold it, which a reducer spread over the threads (one a T.copy or
        T.finalize_reducer into a fragment lays out so) does not; the T.Parallel is the
        reducer's own layout in either case. None where the shape is not known here or is
        a single element (the statement then)."""
        shape = self.reducers[name][2]
        if isinstance(shape, (ast.Tuple, ast.List)):
            extents = list(shape.elts)
        else:
            known = shape.value if isinstance(shape, ast.Constant) else \
                resolve_static(shape, self.namespace)
            if isinstance(known, int):
                known = (known,)
            if not isinstance(known, (tuple, list)) or \
                    not all(isinstance(e, int) for e in known):
                return None
            extents = [ast.Constant(e) for e in known]
        items = index.elts if isinstance(index, ast.Tuple) else [index]
        sizes = [e.value if isinstance(e, ast.Constant) else resolve_static(e, self.namespace)
                 for e in extents]
        if len(items) != len(extents) or all(s == 1 for s in sizes):
            return None
        checks = []
        for item, extent, size in zip(items, extents, sizes):
            at = item.value if isinstance(item, ast.Constant) else \
                resolve_static(item, self.namespace) if isinstance(item, ast.Name) else None
            if isinstance(at, int) and isinstance(size, int):
                if not 0 <= at < size:
                    raise self.error(f"{name}[{_text(index)}]: index {at} is out of "
                                     f"the reducer's extent {size}", index)
                continue
            # a value known when the kernel runs: checked there (the simulator always,
            # the GPU in a debug build), as an element's index would be
            bound = ast.Compare(ast.Constant(0), [ast.LtE(), ast.Lt()],
                                [copy.deepcopy(item), copy.deepcopy(extent)])
            checks.append(ast.Expr(_language("device_assert", [
                bound, ast.Constant(f"{name}[{_text(index)}]: an index out of the "
                                    f"reducer's extent {ast.unparse(extent)}")])))
        names = [f"__tj_at{self.count}_{d}" for d in range(len(extents))]
        self.count += 1
        at = [ast.Name(n, ast.Load()) for n in names]
        test = [ast.Compare(a, [ast.Eq()], [copy.deepcopy(item)]) for a, item in zip(at, items)]
        update = ast.If(test[0] if len(test) == 1 else ast.BoolOp(ast.And(), test),
                        [self._direct_fold(name, at[0] if len(at) == 1 else
                                           ast.Tuple(at, ast.Load()), op, value)], [])
        target = ast.Tuple([ast.Name(n, ast.Store()) for n in names], ast.Store()) \
            if len(names) > 1 else ast.Name(names[0], ast.Store())
        return checks + [ast.For(target, _language("Parallel", [copy.deepcopy(e)
                                                                for e in extents]),
                                 [update], [], None)]

    def _check_rest(self, body, folds):
        """What is left of a T.Parallel body after its folds: no other write into a
        reducer (one in a nested loop would be lost), no read of a reducer it folds into
        (each iteration would see the value before the loop)."""
        for stmt in body:
            for n in syntax.walk(stmt):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target] if \
                    isinstance(n, ast.AugAssign) else []
                for t in targets:
                    if getattr(n, "tj_direct_fold", False):
                        continue
                    if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) \
                            and t.value.id in self.reducers:
                        raise self.error(f"{t.value.id}: a reducer is folded into by a "
                                         "statement of the T.Parallel loop's body itself "
                                         "(not inside a nested loop)", n)
                if isinstance(n, ast.Name) and n.id in folds:
                    raise self.error(f"{n.id}: read in the T.Parallel loop that folds into "
                                     "it (its value there is the one before the loop); "
                                     "read it after the loop", stmt)

    @staticmethod
    def _element(fold, names, ctx):
        index = ast.Tuple([ast.Name(n, ast.Load()) for n in names], ast.Load()) \
            if len(names) > 1 else ast.Name(names[0], ast.Load())
        return ast.Subscript(ast.Name(fold, ast.Load()), index, ctx())

    def _folds(self, body, names, folds):
        """The statements with each fold of a reducer into the loop's fold tile."""
        out = []
        for stmt in body:
            if isinstance(stmt, ast.If):
                known = self._static_truth(stmt.test)
                if known is not None:       # `if op == "sum":` of the kernel's closure
                    out += self._folds(stmt.body if known else stmt.orelse, names, folds)
                    continue
                stmt.body = self._folds(stmt.body, names, folds)
                stmt.orelse = self._folds(stmt.orelse, names, folds)
                out.append(stmt)
                continue
            if isinstance(stmt, ast.For) and not is_call_to(stmt.iter, T.Parallel,
                                                            self.namespace):
                # a serial loop in the T.Parallel body: its folds accumulate per iteration
                stmt.body = self._folds(stmt.body, names, folds)
                out.append(stmt)
                continue
            fold = self._fold_of(stmt)
            if fold is None:
                out.append(stmt)
                continue
            name, index, op, value = fold
            dims, fixed = self._reduced_dims(index, names, stmt)
            if fixed == "permuted":
                # `acc[j, i]` folded in a loop over (i, j): a fold tile in the loop's order,
                # combined after the loop through a transposed copy (_permuted_combine)
                key = (name, ast.dump(index), index, "permuted")
                if key not in folds:
                    folds[key] = (f"__tj_fold{self.count}", op, [])
                    self.count += 1
                tile = folds[key][0]
                acc = self._element(tile, names, ast.Load)
                new = ast.BinOp(acc, ast.Add() if op == "sum" else _BITWISE[op](), value) \
                    if op in ("sum", *_BITWISE) else _language(op, [acc, value])
                out.append(ast.copy_location(
                    ast.Assign([self._element(tile, names, ast.Store)], new), stmt))
                continue
            if not dims:
                # every iteration folds into its own element (TileLang's local-complete
                # plan): the reducer itself, no fold tile and no reduction
                out.append(ast.copy_location(self._direct_fold(name, index, op, value), stmt))
                continue
            squeezed = self._squeezed(name, index, names) if fixed else None
            if squeezed is not None:
                # `acc[0, i]` of a (1, M) reducer: a fold into its view without the unit
                # dimension (`T.reshape(acc, (M,))`, made before the loop)
                name, index = squeezed
                fixed = False
            # a fold into elements an index of constants or loop-invariant values picks
            # has a fold tile of its own, combined into those elements after the loop
            key = (name, ast.dump(index), index) if fixed else name
            if key not in folds:
                folds[key] = (f"__tj_fold{self.count}", op, dims)
                self.count += 1
            tile = folds[key][0]
            acc = self._element(tile, names, ast.Load)
            if op in ("sum", *_BITWISE):
                new = ast.BinOp(acc, ast.Add() if op == "sum" else _BITWISE[op](), value)
            else:
                new = _language(op, [acc, value])
            out.append(ast.copy_location(
                ast.Assign([self._element(tile, names, ast.Store)], new), stmt))
        return out

    def _direct_fold(self, name, index, op, value):
        def element(ctx):
            return ast.Subscript(ast.Name(name, ast.Load()), copy.deepcopy(index), ctx())
        if op in ("sum", *_BITWISE):
            new = ast.BinOp(element(ast.Load), ast.Add() if op == "sum" else _BITWISE[op](),
                            value)
        else:
            new = _language(op, [element(ast.Load), value])
        stmt = ast.Assign([element(ast.Store)], new)
        stmt.tj_direct_fold = True
        return stmt

    def _static_truth(self, test):
        return static_truth(test, self.namespace, self.assigned)

    def _fold_of(self, stmt):
        """(reducer, its index, op, folded value) of ``r[i] += x`` / ``r[i] = r[i] + x`` /
        ``r[i] = T.max(r[i], x)`` (either order) / ``T.min``; None for other statements."""
        def reducer_element(node):
            return (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
                    and node.value.id in self.reducers)

        if isinstance(stmt, ast.Expr) and is_call_to(stmt.value, T.reducer_update,
                                                     self.namespace):
            call = stmt.value
            if len(call.args) != 2 or not reducer_element(call.args[0]):
                raise self.error("T.reducer_update(acc[i], value): the first argument is an "
                                 "element of a reducer of T.alloc_reducer", stmt)
            name = call.args[0].value.id
            return name, call.args[0].slice, self.reducers[name][0], call.args[1]
        if isinstance(stmt, ast.AugAssign) and reducer_element(stmt.target):
            name = stmt.target.value.id
            op = self.reducers[name][0]
            if op in _BITWISE and isinstance(stmt.op, _BITWISE[op]):
                return name, stmt.target.slice, op, stmt.value
            if not isinstance(stmt.op, ast.Add) or op != "sum":
                raise self.error(f"{name}: a reducer of op {self.reducers[name][0]!r} folds "
                                 f"with {'+=' if isinstance(stmt.op, ast.Add) else 'that'}; "
                                 "use r[i] += x (sum) or r[i] = T.max/T.min(r[i], x)", stmt)
            return name, stmt.target.slice, "sum", stmt.value
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and reducer_element(stmt.targets[0])):
            return None
        target, value = stmt.targets[0], stmt.value
        name, same = target.value.id, ast.dump(target.slice)
        op = self.reducers[name][0]

        def is_self(node):
            return reducer_element(node) and node.value.id == name and \
                ast.dump(node.slice) == same

        if (isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add) and op == "sum"
                and (is_self(value.left) or is_self(value.right))):
            return name, target.slice, op, value.right if is_self(value.left) else value.left
        if isinstance(value, ast.Call) and len(value.args) == 2 and op in ("max", "min") and \
                resolve_static(value.func, self.namespace) is getattr(T, op):
            a, b = value.args
            if is_self(a) or is_self(b):
                return name, target.slice, op, b if is_self(a) else a
        raise self.error(f"{name}: a reducer's element is written in a T.Parallel loop only "
                         f"by folding into it: r[i] += x (op 'sum') or r[i] = "
                         f"T.{'max' if op == 'sum' else op}(r[i], x) (op {op!r})", stmt)

    def _reduced_dims(self, index, names, stmt):
        """(the loop dimensions a fold reduces, whether the index also holds constants or
        values the loop does not change)."""
        items = index.elts if isinstance(index, ast.Tuple) else [index]
        used = [i.id for i in items if isinstance(i, ast.Name) and i.id in names]
        others = [i for i in items if not (isinstance(i, ast.Name) and i.id in names)]
        changing = getattr(self, "invariant_of", set(names))
        if any(not isinstance(i, ast.Constant) and any(
                isinstance(x, ast.Name) and x.id in changing for x in syntax.walk(i))
               for i in others):
            raise self.error("a reducer folded in a T.Parallel loop is indexed by the loop's "
                             "variables, constants or values the loop does not change, got "
                             f"[{ast.unparse(index)}]", stmt)
        dims = [d for d, n in enumerate(names) if n not in used]
        in_order = used == [n for n in names if n in used]
        if not dims and not in_order and not others:
            return [], "permuted"   # each iteration its own element, the indices permuted
        if not in_order:
            raise self.error("a reducer folded in a T.Parallel loop is indexed by the loop's "
                             "variables in the loop's order (or by all of them, permuted, "
                             "each iteration into its own element)", stmt)
        if not dims:
            return [], False        # each iteration its own element
        if len(dims) != 1:
            raise self.error(f"a fold into a reducer reduces one dimension of its T.Parallel "
                             f"loop here (the loop has {len(names)}, the reducer's index "
                             f"[{ast.unparse(index)}] leaves {len(dims)})", stmt)
        return dims, bool(others)


def _assigned_in(body) -> set:
    """The names a loop body may change from iteration to iteration: those it binds,
    stores an element of (``l[0] = k``), or hands whole to a call (a tile operation
    writing it)."""
    out = set()
    for s in body:
        for n in syntax.walk(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                out.add(n.id)
            elif isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store) and \
                    isinstance(n.value, ast.Name):
                out.add(n.value.id)
            elif isinstance(n, ast.Call):
                out.update(a.id for a in n.args if isinstance(a, ast.Name))
    return out


def rewrite_reducers(fdef: ast.FunctionDef, namespace, error) -> ast.FunctionDef:
    """``fdef`` with TileLang's reducers as fragments, their folds reduced after each
    loop and ``T.finalize_reducer`` checked and dropped; ``error(message, node)`` makes
    the CompileError to raise."""
    if not uses_reducers(fdef, namespace):
        return fdef
    namespace.setdefault(LANGUAGE, T)
    check_reducer_epochs(fdef, namespace, error)
    reducers = _Reducers(namespace, error)
    reducers.assigned = assigned_names(fdef)
    return syntax.fix_missing_locations(reducers.visit(fdef))


def uses_reducers(tree, namespace) -> bool:
    return any(isinstance(n, ast.Call) and resolve_static(n.func, namespace)
               is T.alloc_reducer for n in syntax.walk(tree))
