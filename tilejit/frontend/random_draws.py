"""Front end: TileLang's random streams (``language/random.py``) as the device program's
markers, for the GPU and the simulator alike.

A kernel that calls ``T.rng_init`` gets a local array, the thread's stream
(``ir/random_state.py``), at the top of its ``T.Kernel`` body, and

- ``T.rng_init(seed, seq, off)`` → ``__tj_rng_init(__tj_rng, seed, seq, off)``, ``seq``
  by default the thread's index in the grid along x
  (``T.get_thread_binding(0) + T.get_block_binding(0) * T.get_thread_extent(0)``, as
  TileLang writes it);
- a draw in the thread's own code → ``__tj_rng_next(__tj_rng, kind)``: the stream's next
  words, in the order the thread meets them (cuRAND's ``curand``, ``curand_uniform``, …);
- a draw in a ``T.Parallel`` body → ``__tj_rng_at(__tj_rng, kind, e * K + k)``, ``e``
  the iteration's row-major index, ``K`` the words the body draws (its draws' in source
  order, ``k`` this one's first), and after the loop ``__tj_rng_skip(__tj_rng, total *
  K)``: an iteration's numbers do not depend on which thread runs it or in which order.

Each marker ends with the kernel's generator (``ir/random_state``: Philox, XORWOW or
MRG32k3a, a literal): a kernel's ``T.rng_init`` calls name one. ``K`` counts the
generator's words (``random_state.words_per_draw``).

Checked here, with the line: the generator, ``bit`` and ``dist`` (compile-time values),
two generators in one kernel, a draw with no ``T.rng_init`` in the kernel,
``T.rng_init`` in a ``T.Parallel`` or as a value, and a draw in a loop nested in a
``T.Parallel`` body (its count of words per iteration would not be known).
"""
from __future__ import annotations

import ast
import inspect

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.explicit_sync import uses_warp_roles
from tilejit.frontend.source import KernelSource, resolve_static
from tilejit.ir import random_state as rs
from tilejit.ir.markers import LANGUAGE, RNG_AT, RNG_INIT, RNG_NEXT, RNG_SKIP
from tilejit.language.random import DISTRIBUTIONS, GENERATORS, PHILOX

STATE = "__tj_rng"
_DRAWS = (T.rng_rand, T.rng_rand_float)


def _call(name, args):
    return ast.Call(ast.Name(name, ast.Load()), list(args), [])


def _c(v):
    return ast.Constant(v)


class _Draws(syntax.NodeTransformer):
    def __init__(self, ks: KernelSource, values: dict):
        self.ks = ks
        self.values = values        # where a draw's bit=, dist= and generator= are read
        self.generator = rs.PHILOX  # the kernel's (``generator_of``)
        self.parallel = None        # (unit expression, {id(draw): first word}) in a T.Parallel
        self.started = False
        self.loops = 0              # T.Parallel loops around the statement

    def _fn(self, node):
        return resolve_static(node.func, self.ks.namespace) if isinstance(node, ast.Call) \
            else None

    def _static(self, node, what: str, allowed):
        value = node.value if isinstance(node, ast.Constant) else \
            resolve_static(node, self.values)
        if isinstance(value, bool) or value not in allowed:
            raise self.ks.error(f"{what} must be one of {', '.join(map(repr, allowed))} "
                                f"known when the kernel compiles, got `{ast.unparse(node)}`",
                                node)
        return value

    def _bound(self, fn, node):
        try:
            bound = inspect.signature(fn).bind(*node.args, **{k.arg: k.value
                                                              for k in node.keywords})
        except TypeError as e:
            raise self.ks.error(f"T.{fn.__name__}: {e}", node) from None
        return bound.arguments

    def kind(self, node) -> int:
        """The draw's kind (``ir/random_state.py``)."""
        fn = self._fn(node)
        args = self._bound(fn, node)
        if fn is T.rng_rand:
            return rs.UINT32
        bit = self._static(args["bit"], "T.rng_rand_float: bit", (32, 64)) \
            if "bit" in args else 32
        dist = self._static(args["dist"], "T.rng_rand_float: dist", DISTRIBUTIONS) \
            if "dist" in args else "uniform"
        return {(32, "uniform"): rs.UNIFORM, (64, "uniform"): rs.UNIFORM_DOUBLE,
                (32, "normal"): rs.NORMAL, (64, "normal"): rs.NORMAL_DOUBLE}[bit, dist]

    def visit_Expr(self, node):
        if self._fn(node.value) is T.rng_init:
            if self.loops:
                raise self.ks.error("T.rng_init inside a T.Parallel loop: a thread's stream "
                                    "is started in its own code, before the loop", node)
            return ast.copy_location(ast.Expr(self._init(node.value)), node)
        return self.generic_visit(node)

    def generator_of(self, calls) -> int:
        """The one generator the kernel's ``T.rng_init`` calls name."""
        named = {}
        for call in calls:
            args = self._bound(T.rng_init, call)
            name = self._static(args["generator"], "T.rng_init: generator", GENERATORS) \
                if "generator" in args else PHILOX
            named.setdefault(name, call)
        if len(named) > 1:
            first, second = list(named)[:2]
            raise self.ks.error(f"T.rng_init calls with generators {first!r} and "
                                f"{second!r}: a kernel draws from one generator",
                                named[second])
        return rs.GENERATOR_NAMES[next(iter(named), PHILOX)]

    def _init(self, call):
        call = self.generic_visit(call)        # a draw among its arguments
        args = self._bound(T.rng_init, call)
        seq = args.get("seq")
        if seq is None or isinstance(seq, ast.Constant) and seq.value is None:
            self.ks.namespace.setdefault(LANGUAGE, T)
            lang = ast.Name(LANGUAGE, ast.Load())
            binding = [ast.Call(ast.Attribute(lang, name, ast.Load()), [_c(0)], [])
                       for name in ("get_thread_binding", "get_block_binding",
                                    "get_thread_extent")]
            seq = ast.BinOp(binding[0], ast.Add(), ast.BinOp(binding[1], ast.Mult(),
                                                             binding[2]))
        self.started = True
        return ast.copy_location(_call(RNG_INIT, [ast.Name(STATE, ast.Load()), args["seed"],
                                                  seq, args.get("off", _c(0)),
                                                  _c(self.generator)]), call)

    def visit_Call(self, node):
        fn = self._fn(node)
        if fn is T.rng_init:
            raise self.ks.error("T.rng_init(...) is a statement (it starts the thread's "
                                "stream and has no value)", node)
        node = self.generic_visit(node)
        if fn not in _DRAWS:
            return node
        state = ast.Name(STATE, ast.Load())
        gen = _c(self.generator)
        if self.parallel is None:
            return ast.copy_location(_call(RNG_NEXT, [state, _c(self.kind(node)), gen]), node)
        unit, first = self.parallel
        word = ast.BinOp(unit, ast.Add(), _c(first[id(node)]))
        return ast.copy_location(_call(RNG_AT, [state, _c(self.kind(node)), word, gen]),
                                 node)

    def visit_For(self, node):
        it = node.iter
        is_parallel = isinstance(it, ast.Call) and \
            resolve_static(it.func, self.ks.namespace) is T.Parallel
        draws = [n for n in syntax.walk(ast.Module(body=node.body, type_ignores=[]))
                 if self._fn(n) in _DRAWS]
        if not (is_parallel and draws):
            self.loops += is_parallel
            node = self.generic_visit(node)
            self.loops -= is_parallel
            return node
        for inner in syntax.walk(ast.Module(body=node.body, type_ignores=[])):
            if isinstance(inner, (ast.For, ast.While)) and any(
                    self._fn(n) in _DRAWS for n in syntax.walk(inner)):
                raise self.ks.error(
                    "a random draw in a loop inside a T.Parallel body: an iteration's draws "
                    "must be counted before the loop runs (draw in the T.Parallel body "
                    "itself, or in the thread's own code)", inner)
        draws.sort(key=lambda n: (n.lineno, n.col_offset))
        first, words = {}, 0
        for d in draws:
            first[id(d)] = words
            words += rs.words_per_draw(self.generator, self.kind(d))
        names = node.target.elts if isinstance(node.target, ast.Tuple) else [node.target]
        extents = list(it.args)
        if len(names) != len(extents) or not all(isinstance(n, ast.Name) for n in names) \
                or any(isinstance(e, ast.Starred) for e in extents):
            raise self.ks.error("a T.Parallel loop that draws random numbers names one index "
                                "per extent and writes its extents one by one", node)
        flat = ast.Name(names[0].id, ast.Load())
        for name, extent in zip(names[1:], extents[1:]):
            flat = ast.BinOp(ast.BinOp(flat, ast.Mult(), extent), ast.Add(),
                             ast.Name(name.id, ast.Load()))
        total = extents[0]
        for extent in extents[1:]:
            total = ast.BinOp(total, ast.Mult(), extent)
        outer, self.parallel = self.parallel, (ast.BinOp(flat, ast.Mult(), _c(words)), first)
        self.loops += 1
        node.body = [self.visit(s) for s in node.body]
        self.loops -= 1
        self.parallel = outer
        skip = ast.Expr(_call(RNG_SKIP, [ast.Name(STATE, ast.Load()),
                                          ast.BinOp(total, ast.Mult(), _c(words)),
                                          _c(self.generator)]))
        return [node, ast.copy_location(skip, node)]


def _random_calls(tree, namespace):
    return [n for n in syntax.walk(tree) if isinstance(n, ast.Call) and
            resolve_static(n.func, namespace) in (T.rng_init,) + _DRAWS]


def uses_random_draws(ks: KernelSource) -> bool:
    """Whether the kernel's source calls T.rng_init or draws."""
    return bool(_random_calls(ks.tree, ks.namespace))


class _Conditional(syntax.NodeVisitor):
    """Draws the program may skip within an expression: the right of ``and`` / ``or``, a
    branch of ``a if c else b``, the middle of a chained comparison (evaluated twice by
    the simulator's lane-wise form, once or not at all by the GPU's)."""

    def __init__(self, draws):
        self.draws, self.found = draws, None

    def _check(self, nodes, node):
        for n in nodes:
            for d in syntax.walk(n):
                if id(d) in self.draws and self.found is None:
                    self.found = d

    def visit_BoolOp(self, node):
        self._check(node.values[1:], node)
        self.generic_visit(node)

    def visit_IfExp(self, node):
        self._check([node.body, node.orelse], node)
        self.generic_visit(node)

    def visit_Compare(self, node):
        self._check(node.comparators[:-1], node)
        self.generic_visit(node)


def rewrite_random_draws(fdef: ast.FunctionDef, ks: KernelSource,
                         values: dict | None = None) -> ast.FunctionDef:
    """``values``: where compile-time arguments are read (the compiled program's globals,
    its constexprs among them; the kernel's namespace when not given)."""
    calls = _random_calls(fdef, ks.namespace)
    if not calls:
        return fdef
    if uses_warp_roles(ks.tree, ks.namespace):
        raise ks.error("random draws in a kernel with `with T.ws` warpgroup roles are not "
                       "supported (each role would hold its own copy of every thread's "
                       "stream)", calls[0])
    conditional = _Conditional({id(c) for c in calls if resolve_static(
        c.func, ks.namespace) in _DRAWS})
    conditional.visit(fdef)
    if conditional.found is not None:
        raise ks.error(f"`{ast.unparse(conditional.found)}` in an operand that may not be "
                       f"evaluated (after `and` / `or`, in a branch of `x if c else y`, in "
                       f"the middle of a chained comparison): whether the stream moves on "
                       f"would depend on the others; draw into a name first",
                       conditional.found)
    draws = _Draws(ks, ks.namespace if values is None else values)
    draws.generator = draws.generator_of(
        [c for c in calls if resolve_static(c.func, ks.namespace) is T.rng_init])
    fdef = draws.visit(fdef)
    if not draws.started:
        first = min((n for n in calls), key=lambda n: (n.lineno, n.col_offset))
        raise ks.error(f"`{ast.unparse(first)}` with no T.rng_init(...) in the kernel: the "
                       f"thread's random stream is not started", first)
    ks.namespace.setdefault(LANGUAGE, T)
    alloc = ast.Assign([ast.Name(STATE, ast.Store())], ast.Call(
        ast.Attribute(ast.Name(LANGUAGE, ast.Load()), "alloc_local", ast.Load()),
        [ast.Tuple([_c(rs.WORDS)], ast.Load()), _c("uint32")], []))
    launch = fdef.body[ks.launch_index]
    launch.body.insert(0, ast.copy_location(alloc, launch.body[0]))
    return syntax.fix_missing_locations(fdef)
