"""Pass: TileLang's safe memory access, for the programs its doors compile
(``CompileOptions.safe_memory``; off for ``tilejit.kernel``, whose out-of-bounds
accesses the simulator and ``debug=True`` report).

TileLang guards every element access of a global tensor whose indices it cannot prove
inside the tensor (its ``LegalizeSafeMemoryAccess``): a read outside gives 0, a write
outside is dropped, so a program may let a tile run past a tensor's edge
(``C[m, by * 128 + j] = ...`` for the last column block) as its grouped GEMM does. Here

    A[i, j]             (a read)  →  (A[i, j] if 0 <= i < A.shape[0] and 0 <= j < A.shape[1]
                                       else __tj_cast(0, "<A's dtype>"))
    A[i, j] = v         (a write) →  if <the same test>: A[i, j] = v      (and A[i, j] += v)
    T.atomic_add(A[i, j], v)      →  if <the same test>: <the atomic>  (its previous value,
                                     when read, 0 outside)

for every tensor parameter's element access with a non-constant index (a constant index
is left as written, as TileLang leaves it); the read is lazy (the load runs only inside
the tensor). Tile copies (``T.copy`` of regions) already clip at the edges. The
simulator follows the option (``sim/runtime.SimTensor``: reads outside give 0, writes
outside are dropped, where it otherwise raises).

A tensor with a ``T.annotate_safe_value`` (``safe_values.py``) reads as that value
outside it, not 0, and its reads are guarded also where safe memory access is off
(its writes then are not: the simulator reports them outside the tensor).
"""
from __future__ import annotations

import ast
import copy

from tilejit import syntax
from tilejit.passes.barriers import predicate_barrier
from tilejit.passes.index_ranges import IndexRanges
from tilejit.ir.markers import (ATOMIC_ADD, ATOMIC_LOAD, ATOMIC_MAX, ATOMIC_MIN, ATOMIC_OR,
                                ATOMIC_STORE, CAST)

_ATOMICS = (ATOMIC_ADD, ATOMIC_MAX, ATOMIC_MIN, ATOMIC_OR, ATOMIC_LOAD, ATOMIC_STORE)


def _indices(node: ast.Subscript) -> list:
    return list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]


class _Guard(syntax.NodeTransformer):
    def __init__(self, tensors: dict, values: dict, writes: bool, barrier, shapes=None,
                 ranges=None):
        self.tensors = tensors      # name -> dtype name
        self.shapes = shapes or {}  # name -> its static shape (None where not known)
        self.ranges = ranges        # index_ranges.IndexRanges: what an index can be
        self.values = values        # name -> the T.annotate_safe_value expression
        self.writes = writes        # writes and atomics guarded too (safe memory access)
        self.barrier = barrier      # call -> whether it is a block barrier (a predicate's)
        self.count = 0

    def _outside(self, name):
        """What an element outside tensor ``name`` reads as: its safe value, else 0."""
        value = self.values.get(name)
        return ast.Call(ast.Name(CAST, ast.Load()),
                        [copy.deepcopy(value) if value is not None else ast.Constant(0),
                         ast.Constant(self.tensors[name])], [])

    def _tensor(self, node) -> str | None:
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
                and node.value.id in self.tensors:
            return node.value.id
        return None

    def _inside(self, node: ast.Subscript):
        """The test that ``node``'s indices lie inside its tensor, or None when they are
        all constants (or a slice: not an element access)."""
        name, indices = node.value.id, _indices(node)
        if any(isinstance(i, ast.Slice) for i in indices):
            return None
        tests = []
        shape = self.shapes.get(name) or ()
        for d, index in enumerate(indices):
            if isinstance(index, ast.Constant):
                continue
            known = self.ranges.of(index) if self.ranges is not None and d < len(shape) \
                and shape[d] is not None else None
            if known is not None and 0 <= known[0] and known[1] < shape[d]:
                continue        # inside on every path (TileLang's analyzer proves it so)
            extent = ast.Subscript(ast.Attribute(ast.Name(name, ast.Load()), "shape", ast.Load()),
                                   ast.Constant(d), ast.Load())
            tests.append(ast.Compare(ast.Constant(0), [ast.LtE(), ast.Lt()],
                                     [copy.deepcopy(index), extent]))
        if not tests:
            return None
        return tests[0] if len(tests) == 1 else ast.BoolOp(ast.And(), tests)

    def visit_Subscript(self, node):
        node = self.generic_visit(node)
        name = self._tensor(node)
        if name is None or not isinstance(node.ctx, ast.Load) or getattr(
                node, "_tj_guarded", False):        # guarded already (safe_values.py)
            return node
        test = self._inside(node)
        if test is None:
            return node
        return _counted(ast.copy_location(ast.IfExp(test, node, self._outside(name)), node))

    def _store(self, node, target):
        node = self.generic_visit(node)
        test = self._inside(target) if self.writes and self._tensor(target) else None
        if test is None:
            return node
        if any(isinstance(n, ast.Call) and self.barrier(n) for n in syntax.walk(node.value)):
            # `O[tid] = T.syncthreads_count(p)`: the block barrier is every thread's, so
            # its value is taken before the guard and only the store is guarded
            name = f"__tj_barrier_value{self.count}"
            self.count += 1
            value, node.value = node.value, ast.Name(name, ast.Load())
            return [ast.copy_location(ast.Assign([ast.Name(name, ast.Store())], value), node),
                    ast.copy_location(ast.If(test, [node], []), node)]
        return ast.copy_location(ast.If(test, [node], []), node)

    def _atomic(self, node):
        """An element atomic (``__tj_atomic_*(tensor, (i, j), value, …)``) of a tensor
        parameter: its test, or None."""
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in _ATOMICS and node.args
                and isinstance(node.args[0], ast.Name) and node.args[0].id in self.tensors
                and isinstance(node.args[1], ast.Tuple)):
            return None
        element = ast.Subscript(node.args[0], ast.Tuple(node.args[1].elts, ast.Load()),
                                ast.Load())
        return self._inside(element)

    def visit_Expr(self, node):       # an atomic as a statement: under an `if`
        if not self.writes or self._atomic(node.value) is None:
            return self.generic_visit(node)
        node.value = self.generic_visit(node.value)
        return ast.copy_location(ast.If(self._atomic(node.value), [node], []), node)

    def visit_Call(self, node):       # an atomic whose previous value is read: a 0 outside
        node = self.generic_visit(node)
        test = self._atomic(node) if self.writes else None
        if test is None:
            return node
        return _counted(ast.copy_location(ast.IfExp(test, node, self._outside(node.args[0].id)),
                                          node))

    def visit_Assign(self, node):
        if len(node.targets) == 1:
            return self._store(node, node.targets[0])
        return self.generic_visit(node)

    def visit_AugAssign(self, node):
        return self._store(node, node.target)


def guard_global_accesses(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    values = {name: value for name, (value, _line) in ctx.safe_values.items()}
    if not ctx.options.safe_memory and not values:
        return fdef
    tensors = {name: ty.dtype.name for name, ty in ctx.params.items()
               if ctx.options.safe_memory or name in values}
    guard = _Guard(tensors, values, writes=ctx.options.safe_memory,
                   barrier=lambda call: predicate_barrier(call, ctx) is not None,
                   shapes=_static_shapes(fdef, ctx),
                   ranges=IndexRanges(fdef, ctx))
    fdef = guard.visit(fdef)
    _check_guarded_reads(fdef, ctx)
    return syntax.fix_missing_locations(fdef)


def _static_shapes(fdef, ctx) -> dict:
    """{tensor parameter: its static shape}, for those the body never rebinds (``A =
    T.reshape(A, ...)`` names a view of another shape)."""
    rebound = {n.id for n in syntax.walk(fdef) if isinstance(n, ast.Name)
               and isinstance(n.ctx, (ast.Store, ast.Del))}
    return {name: ty.static_shape for name, ty in ctx.params.items() if name not in rebound}


# The guarded reads one statement may hold. Each is a branch in the device code, and
# Numba's liveness and reaching-definition analyses take time and memory growing with the
# square of the branches of a function: measured on the CPU machine (the compile of
# `B[i] = A[i] + A[i] + ...`, n reads, to PTX), n = 32: 1.3 s, 64: 2.8 s / 0.36 GB,
# 128: 8 s / 1 GB, 200: 18 s / 1.6 GB, 400: 68 s / 6 GB, 1000: killed for memory. TileLang's
# programs and tilejit's tests hold at most 4 in a statement (14 in a kernel).
MAX_GUARDED_READS = 64


def _counted(node: ast.IfExp) -> ast.IfExp:
    node._tj_guarded_read = True
    return node


def _check_guarded_reads(fdef: ast.FunctionDef, ctx) -> None:
    """A CompileError at the first statement holding more than MAX_GUARDED_READS guarded
    reads (its own expressions, not the statements nested in it), before Numba meets it."""
    for stmt in syntax.walk(fdef):
        if not isinstance(stmt, ast.stmt) or stmt is fdef:
            continue
        count = 0
        for name in stmt._fields:
            value = getattr(stmt, name, None)
            for expr in value if isinstance(value, list) else [value]:
                if isinstance(expr, ast.expr):
                    count += sum(getattr(n, "_tj_guarded_read", False)
                                 for n in syntax.walk(expr))
        if count > MAX_GUARDED_READS:
            raise ctx.error(
                f"{count} reads of tensor elements at computed indices in one statement (at "
                f"most {MAX_GUARDED_READS}): safe memory access checks each against the "
                f"tensor's extent, a branch each, and compiling that many branches takes time "
                f"and memory growing with the square of their number; read an element used "
                f"again once into a variable (a = A[i]), sum over a loop (for k in "
                f"T.serial(n): acc += A[i, k]), or turn the checks off with "
                f"pass_configs={{'tl.disable_safe_memory_legalize': True}}", stmt)
