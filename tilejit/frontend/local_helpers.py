"""Helpers defined in the kernel's own body, as TileLang programs write them::

    @T.prim_func
    def kernel(A, B):
        A: T.Tensor[[32], T.float32]
        B: T.Tensor[[32], T.float32]

        @T.macro
        def twice(x):
            return x * 2.0

        with T.Kernel(1, threads=32):
            for i in T.Parallel(32):
                B[i] = twice(A[i])

A ``def`` among the statements of the kernel's body (before its launch) is defined when
the kernel is parsed: run, decorators and all, in a copy of the kernel's namespace (its
globals and closure values then; one scope for all of them, so that one may call
another defined after it), and bound there under its name (``KernelSource.made``, kept
when the kernel resolves its names); the statement is taken out. A default or decorator
reading the kernel's own names is refused (Python evaluates them at the def, where those
have no value yet at compile time). The kernel then
calls it as any helper of its file: inlined where it holds tile operations or takes a
fragment (``tile_helpers.py``), else compiled as a device function. One that reads a
name only the kernel binds (a parameter, a T.const symbol, a variable of the prologue) is
inlined where a statement calls it, so it sees the name as Python's closure would; called
in an expression, where it would be a device function, it is a CompileError naming the
name (pass it as an argument)."""
from __future__ import annotations

import ast
import builtins

from tilejit import syntax
from tilejit.frontend.source import KernelSource


def define_local_helpers(ks: KernelSource) -> None:
    defs = [s for s in ks.tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
    rest = [s for s in ks.tree.body if not any(s is d for d in defs)]
    # the kernel's own names: its parameters and what its other statements bind
    kernel = set(ks.params) | {n.id for s in rest for n in syntax.walk(s)
                               if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    env = dict(ks.namespace)            # one scope for them all, as the kernel's is
    for stmt in defs:
        if isinstance(stmt, ast.AsyncFunctionDef):
            raise ks.error(f"`async def {stmt.name}` in a kernel: a helper is a plain def",
                           stmt)
        # what Python evaluates at the def (defaults, decorators) runs here, where the
        # kernel's own names have no values yet
        at_def = stmt.args.defaults + [d for d in stmt.args.kw_defaults if d is not None] + \
            stmt.decorator_list
        early = sorted({n.id for e in at_def for n in syntax.walk(e)
                        if isinstance(n, ast.Name) and n.id in kernel})
        if early:
            raise ks.error(f"{stmt.name}(), defined in the kernel: its defaults or decorators "
                           f"read {', '.join(early)} of the kernel, which have no value when "
                           f"the kernel is compiled; pass them as arguments", stmt)
        try:
            exec(compile(ast.Module([stmt], []), ks.filename, "exec"), env)  # noqa: S102
        except Exception as e:     # noqa: BLE001 - a decorator's failure, at the def's line
            raise ks.error(f"defining {stmt.name}() in the kernel: {type(e).__name__}: {e}",
                           stmt) from None
        ks.made[stmt.name] = ks.namespace[stmt.name] = env[stmt.name]
    reads = {d.name: _free_names(d) for d in defs}
    own = {name: frozenset(n for n in free if n in kernel or (
        n not in env and not hasattr(builtins, n))) for name, free in reads.items()}
    # a helper calling another that reads the kernel's names reads them too
    changed = True
    while changed:
        changed = False
        for name, free in reads.items():
            more = own[name].union(*(own[g] for g in free if g in own and g != name))
            if more != own[name]:
                own[name], changed = more, True
    ks.local_helpers.update(own)
    if defs:
        ks.tree.body = rest


def _free_names(fdef) -> set:
    """The names ``fdef``'s body reads that it does not bind itself."""
    bound = {a.arg for a in fdef.args.args + fdef.args.kwonlyargs + fdef.args.posonlyargs}
    bound |= {a.arg for a in (fdef.args.vararg, fdef.args.kwarg) if a is not None}
    bound |= {n.id for n in syntax.walk(fdef) if isinstance(n, ast.Name)
              and isinstance(n.ctx, (ast.Store, ast.Del))}
    bound |= {n.name for n in syntax.walk(fdef) if isinstance(n, (ast.FunctionDef,
                                                                  ast.ClassDef))}
    return {n.id for stmt in fdef.body for n in syntax.walk(stmt)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in bound}


def check_local_helper_calls(ks: KernelSource) -> None:
    """After the inlining: a call left of a helper of the kernel's body that reads the
    kernel's own names (a device function, which cannot) is a CompileError there."""
    for node in syntax.walk(ks.tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                ks.local_helpers.get(node.func.id):
            names = ", ".join(sorted(ks.local_helpers[node.func.id]))
            raise ks.error(f"{node.func.id}(), defined in the kernel, reads {names} of the "
                           f"kernel: called in an expression it is compiled as a device "
                           f"function, which cannot read them; pass them as arguments (or "
                           f"call it as a statement, where it is inlined)", node)
