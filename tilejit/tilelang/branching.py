"""An eager ``@tilejit.jit`` program that chooses its kernel in Python, as TileLang's
eager programs may (TileLang runs the function's Python when it traces it)::

    @tilejit.jit
    def scale(A, double: bool = False):
        N = T.const("N")
        A: T.Tensor[[N], T.float32]
        B = T.empty([N], T.float32)
        if double:
            with T.Kernel(1, threads=32):
                ...
        else:
            with T.Kernel(1, threads=32):
                ...
        return B

An ``if`` at the top of the body whose branches hold a ``with T.Kernel`` block is decided
at each call by the call's arguments (and the program's globals and closure): its test
is evaluated as Python, and the program of the branch taken (the ``if`` replaced by that
branch's statements; an ``elif`` decided the same way) is an ordinary eager program, one
per outcome, made on first use. Its calls, ``compile``, ``get_kernel_source`` and
``par_compile`` are that program's. A test that reads a name the body binds first (not
a parameter) is a CompileError at its line: it has no value before the kernel runs."""
from __future__ import annotations

import ast
import copy
import inspect

from tilejit import syntax
from tilejit.errors import CompileError
from tilejit.frontend.kernel_macros import launching_call
from tilejit.frontend.source import function_namespace, is_launch


def launching_ifs(fdef: ast.FunctionDef, namespace) -> list:
    """The ``if`` statements at the top of the body with a ``with T.Kernel`` inside."""
    return [s for s in fdef.body if _launching(s, namespace)]


def _launching(stmt, namespace) -> bool:
    """An ``if`` holding a ``with T.Kernel`` block, or a call of a macro holding one."""
    return isinstance(stmt, ast.If) and any(
        (isinstance(w, ast.With) and any(is_launch(i.context_expr, namespace)
                                         for i in w.items))
        or launching_call(w, namespace) for w in syntax.walk(stmt))


class BranchingProgram:
    """One eager program per outcome of the launching ``if``s (module docstring)."""

    def __init__(self, func, filename, fdef, make_program, out_idx=None):
        self.func, self.filename, self.fdef = func, filename, fdef
        self.__name__, self.__doc__, self.__wrapped__ = func.__name__, func.__doc__, func
        self._make = make_program           # (filename, FunctionDef) -> a JitFunction
        # a call's arguments: out_idx's parameters are the program's outputs, not given
        signature = inspect.signature(func)
        params = list(signature.parameters.values())
        outputs = set()
        if out_idx is not None:
            positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY,
                                                          p.POSITIONAL_OR_KEYWORD)]
            for i in ([out_idx] if isinstance(out_idx, int) else list(out_idx)):
                if isinstance(i, int) and -len(positional) <= i < len(positional):
                    outputs.add(positional[i].name)
        self._signature = signature.replace(
            parameters=[p for p in params if p.name not in outputs])
        self._var_keywords = any(p.kind == p.VAR_KEYWORD for p in params)
        self._programs: dict = {}
        # each launching `if` (an `elif` too): its test compiled, and the names it reads
        # that the body binds first (a CompileError when it is decided), read once here:
        # a call only evaluates the tests
        namespace = function_namespace(func)
        body_binds = {n.id for s in fdef.body for n in syntax.walk(s)
                      if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        self._tests = {}
        for k, stmt in enumerate(fdef.body):
            # a parameter bound again before the `if` is the body's (`mode = mode.lower()`)
            before = {n.id for s in fdef.body[:k] for n in syntax.walk(s)
                      if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            late_names = before | (body_binds - set(self._signature.parameters))
            for node in syntax.walk(stmt):
                if _launching(node, namespace):
                    late = sorted({n.id for n in syntax.walk(node.test)
                                   if isinstance(n, ast.Name)} & late_names)
                    self._tests[id(node)] = (
                        compile(ast.Expression(node.test), filename, "eval"), late)

    def _choose(self, args, kwargs):
        """(the outcomes, the body with each launching ``if`` replaced by its branch)."""
        # (compile()'s symbol sizes, `N=100`, are not parameters: they decide nothing,
        # but for a **kwargs the test may read)
        if not self._var_keywords:
            kwargs = {k: v for k, v in kwargs.items() if k in self._signature.parameters}
        try:
            bound = self._signature.bind_partial(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{self.__name__}(): {e}") from None
        bound.apply_defaults()
        # the test's names: the call's arguments, the closure, the globals as they are now
        func = self.func
        local = {}
        for name, cell in zip(func.__code__.co_freevars, func.__closure__ or ()):
            try:
                local[name] = cell.cell_contents
            except ValueError:          # a cell not filled yet
                pass
        local.update(bound.arguments)
        outcomes = []

        def chosen(stmts):
            out = []
            for s in stmts:
                if id(s) in self._tests:
                    taken = self._decide(s, func.__globals__, local)
                    outcomes.append(taken)
                    out.extend(chosen(s.body if taken else s.orelse))
                else:
                    out.append(s)
            return out

        body = chosen(self.fdef.body)
        return tuple(outcomes), body

    def _decide(self, node, globals_, local) -> bool:
        code, late = self._tests[id(node)]
        if late:
            raise CompileError(f"the `if` around `with T.Kernel` reads {', '.join(late)}, "
                               f"which the body binds: it is decided when the program is "
                               f"called, from its arguments, globals and closure",
                               self.filename, node.lineno)
        try:
            return bool(eval(code, globals_, local))  # noqa: S307 - the program's own test
        except Exception as e:      # noqa: BLE001 - any failure: named at the test
            raise CompileError(f"the `if` around `with T.Kernel` could not be decided from "
                               f"the call's arguments: {type(e).__name__}: {e}",
                               self.filename, node.lineno) from None

    def program(self, *args, **kwargs):
        """The eager program these arguments choose."""
        outcomes, body = self._choose(args, kwargs)
        found = self._programs.get(outcomes)
        if found is None:
            fdef = copy.deepcopy(self.fdef)
            fdef.body = copy.deepcopy(body)
            found = self._programs[outcomes] = self._make(self.filename, fdef)
        return found

    def __call__(self, *args, **kwargs):
        return self.program(*args, **kwargs)(*args, **kwargs)

    def compile(self, *args, target=None, arch=None, **params):
        return self.program(*args, **params).compile(*args, target=target, arch=arch,
                                                     **params)

    def get_kernel_source(self, *args, **params) -> str:
        return self.compile(*args, **params).get_kernel_source()

    def get_tir(self, *args, **kwargs):
        """TileLang's ``f.get_tir(...)`` of the program these arguments choose."""
        return self.program(*args, **kwargs).get_tir(*args, **kwargs)

    def par_compile(self, configs, num_workers=None, ignore_error=False):
        if not isinstance(configs, (list, tuple)) or not all(isinstance(c, dict)
                                                             for c in configs):
            raise TypeError(f"{self.__name__}.par_compile(configs): expected a list of dicts "
                            f"of parameter values, got {configs!r:.80}")
        out = []
        for config in configs:
            try:
                out.extend(self.program(**config).par_compile([config], num_workers))
            except (CompileError, TypeError, ValueError):
                if not ignore_error:
                    raise
                out.append(None)
        return out

    def make_autotuner(self, *args, **kwargs):
        raise TypeError(f"@tilejit.autotune over {self.__name__}, whose `if` around "
                        f"`with T.Kernel` chooses a kernel per call, is not supported: tune "
                        f"a program per branch")

    def __repr__(self):
        return f"<tilejit.jit program {self.__name__} (a kernel per outcome of its `if`s)>"
