"""The rules of a reducer's epoch (TileLang's reducer v2), checked before the rewrite.

    acc = T.alloc_reducer((M,), T.float32, op="sum")
    T.reducer_init(acc)                          # opens the epoch
    for i, k in T.Parallel(M, K):
        T.reducer_update(acc[i], x[i, k])        # the only way in while it is open
    T.finalize_reducer(acc, out)                 # closes it: the results are in out

While a reducer is open its values are partial (in TileLang, each thread's share), so
nothing else may read it, store into it, clear or fill it; an update needs an open
epoch and a ``T.Parallel`` loop around it; an epoch is opened once and closed once, by a
finalize in the same block of statements as its init (the same loop iteration and
branch), or in a branch inside it (``if S[bx] < 0: ... else: ...; T.finalize_reducer``:
it runs at most once per epoch; where it does not, the partials go unread), never in a
loop the init is not in (it would combine the combined partials again). Each broken
rule is a ``CompileError`` at the statement. A reducer used without ``T.reducer_init``
(TileLang's v1: ``T.clear``, folds ``r[i] += x``, ``T.finalize_reducer(r)``) is not
checked here (``reducers.py`` checks its folds).
"""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import resolve_static


def check_reducer_epochs(fdef: ast.FunctionDef, namespace, error) -> None:
    epochs = _Epochs(namespace, error)
    epochs.block(fdef.body, (), False)
    for name, (stmt, _scope) in epochs.open.items():
        raise error(f"{name}: never finalized: T.reducer_init opens an epoch that no "
                    f"T.finalize_reducer closes", stmt)


class _Epochs:
    def __init__(self, namespace, error):
        self.namespace, self.error = namespace, error
        self.open: dict = {}         # name -> (the init statement, its scope)
        self.v2: set = set()

    def _call(self, stmt, fn):
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        return call if isinstance(call, ast.Call) and \
            resolve_static(call.func, self.namespace) is fn else None

    def block(self, body, scope, parallel):
        for stmt in body:
            self.statement(stmt, scope, parallel)

    def statement(self, stmt, scope, parallel):
        init = self._call(stmt, T.reducer_init)
        if init is not None and init.args and isinstance(init.args[0], ast.Name):
            name = init.args[0].id
            if name in self.open:
                raise self.error(f"{name}: double T.reducer_init: its epoch is already open "
                                 f"(line {self.open[name][0].lineno}); close it with "
                                 f"T.finalize_reducer first", stmt)
            self._reads(init.args[1:], stmt)
            self.open[name] = (stmt, scope)
            self.v2.add(name)
            return
        update = self._call(stmt, T.reducer_update)
        if update is not None:
            target = update.args[0] if update.args else None
            name = target.value.id if isinstance(target, ast.Subscript) and \
                isinstance(target.value, ast.Name) else None
            if name is not None and name not in self.open:
                raise self.error(f"{name}: T.reducer_update before T.reducer_init (outside "
                                 f"the reducer's epoch); open it with T.reducer_init first", stmt)
            if not parallel:
                raise self.error(f"{name}: T.reducer_update outside any T.Parallel loop: it "
                                 f"must be inside one (each of its iterations contributes "
                                 f"once)", stmt)
            if target is not None:
                self._reads([target.slice], stmt)
            self._reads(update.args[1:], stmt)
            return
        final = self._call(stmt, T.finalize_reducer)
        if final is not None and final.args and isinstance(final.args[0], ast.Name):
            name = final.args[0].id
            if name in self.open:
                opened = self.open[name][1]
                if scope[:len(opened)] != opened or \
                        any(kind != "if" for _, kind in scope[len(opened):]):
                    raise self.error(f"{name}: T.finalize_reducer not in the scope of its "
                                     f"T.reducer_init (line {self.open[name][0].lineno}): "
                                     f"it is in another block of statements (a loop, or a "
                                     f"branch the init is not in)", stmt)
                del self.open[name]
            return
        for fn in (T.clear, T.fill):
            call = self._call(stmt, fn)
            if call is not None and call.args and isinstance(call.args[0], ast.Name) and \
                    call.args[0].id in self.v2:
                raise self.error(f"{call.args[0].id}: T.{fn.__name__} of a reducer; its "
                                 f"starting value is T.reducer_init's", stmt)
        if isinstance(stmt, (ast.For, ast.While, ast.If, ast.With)):
            heads = [stmt.iter] if isinstance(stmt, ast.For) else \
                [stmt.test] if isinstance(stmt, (ast.While, ast.If)) else \
                [item.context_expr for item in stmt.items]
            self._reads(heads, stmt)
            kind = "if" if isinstance(stmt, ast.If) else "loop"
            in_parallel = parallel or (isinstance(stmt, ast.For) and isinstance(
                stmt.iter, ast.Call) and resolve_static(stmt.iter.func, self.namespace)
                is T.Parallel)
            before = dict(self.open)
            self.block(stmt.body, scope + ((id(stmt), kind),), in_parallel)
            after_body, self.open = self.open, dict(before)
            self.block(getattr(stmt, "orelse", []), scope + ((id(stmt), kind + " else"),)
                       if kind == "loop" else scope + ((id(stmt.orelse), "if"),), in_parallel)
            closed = (before.keys() - after_body.keys()) | (before.keys() - self.open.keys())
            self.open = {k: v for k, v in {**after_body, **self.open}.items()
                         if k not in closed}
            return
        for node in syntax.walk(stmt):
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) and \
                    isinstance(node.value, ast.Name) and node.value.id in self.open:
                raise self.error(f"{node.value.id}: illegal store to reducer while its "
                                 f"epoch is open; contribute with T.reducer_update", stmt)
        self._reads([stmt], stmt)

    def _reads(self, exprs, stmt):
        for expr in exprs:
            for node in syntax.walk(expr):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and \
                        node.id in self.open:
                    raise self.error(f"{node.id}: illegal read of reducer while its epoch is "
                                     f"open (its values are partial until "
                                     f"T.finalize_reducer)", stmt)
