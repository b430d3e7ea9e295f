"""A kernel's own ``setmaxnreg`` requests (``T.set_max_nreg``, ``T.inc_max_nreg``,
``T.annotate_consumer_reg_alloc``, …) checked against the registers its block holds.

``setmaxnreg`` moves registers between the warps of one block: the block is launched
(one per SM, ``.minnctapersm 1``) with the register file spread over its threads, a
multiple of 8 a thread (``launch_registers``), a ``dec`` gives a warp's surplus back to
the block's pool and an ``inc`` waits until the pool holds what it asks. Requests that
add up to more than the block holds wait for ever: the kernel hangs (TileLang's sparse
MLA example says so in a comment: "setting more registers will cause a hang").

Which warps run a request is read off the branches that enclose it: a warpgroup role
(``with T.ws(k)``) or a comparison of the thread index with compile-time values
(``if tx < 128:``, ``wg = tx // 128; if wg == 2:``, ``frontend/thread_tests.py``; the
index is the block's, in a kernel with ``T.ws`` roles too). Each warp
ends at the count of the last request (in the source) it may reach, else at its launch
count; if their sum is more than the block holds, some ``inc`` can never be granted.
Counts a warp holds on the way (an ``inc`` given back later by a ``dec``) are not
summed: a kernel that passes its registers on in turns is valid. A request under a
branch whose threads are not known that way leaves the kernel unchecked (no false
alarm), as does a block whose size is not known.
"""
from __future__ import annotations

import ast
import copy

from tilejit.ir.markers import ROLE_ATTR
from tilejit.ir.register_file import REGISTER_FILE, launch_registers
from tilejit.frontend.thread_tests import thread_names, thread_takers

WARP = 32
ROLE_THREADS = 128
REQUEST_ATTR = "_tj_setmaxnreg"     # (the call as written, reg_count, is_inc) on a marker


class _Unknown(Exception):
    """A request whose threads are not known at compile time."""


def _requests(stmts, who, names, threads, namespace, out, role=ROLE_THREADS):
    """(statement, its threads) of each request among ``stmts``, run by ``who``."""
    for st in stmts:
        if getattr(st, REQUEST_ATTR, None) is not None:
            out.append((st, who))
        elif isinstance(st, ast.If):
            k = getattr(st, ROLE_ATTR, None)      # `with T.ws(k)`: warpgroup k's threads
            if k is not None:
                mine = who & frozenset(range(k * role, (k + 1) * role))
            else:
                takers = thread_takers(st.test, names, threads, namespace)
                if takers is None:
                    if _has_request(st):
                        raise _Unknown
                    continue
                mine = who & frozenset(takers)
            _requests(st.body, mine, names, threads, namespace, out, role)
            _requests(st.orelse, who - mine, names, threads, namespace, out, role)
        elif isinstance(st, (ast.For, ast.While, ast.With)):
            _requests(st.body, who, names, threads, namespace, out, role)
            _requests(getattr(st, "orelse", []), who, names, threads, namespace, out, role)


class _Substitute(ast.NodeTransformer):
    def __init__(self, names):
        self.names = names

    def visit_Name(self, node):
        return copy.deepcopy(self.names[node.id]) if node.id in self.names else node


def derived_thread_names(fdef) -> dict:
    """``thread_tests.thread_names`` and the names assigned once from them and
    constants (``wg = tx // 128``), each as its expression of the thread index."""
    names = dict(thread_names(fdef))
    stores: dict = {}
    for node in ast.walk(fdef):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            stores[node.id] = stores.get(node.id, 0) + 1
    changed = True
    while changed:
        changed = False
        for node in ast.walk(fdef):
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name)):
                continue
            target = node.targets[0].id
            if target in names or stores.get(target) != 1:
                continue
            used = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
            if used and used <= set(names) and all(
                    isinstance(n, (ast.Name, ast.Constant, ast.BinOp, ast.operator,
                                   ast.Load)) for n in ast.walk(node.value)):
                names[target] = _Substitute(names).visit(copy.deepcopy(node.value))
                changed = True
    return names


def _has_request(node) -> bool:
    return any(getattr(n, REQUEST_ATTR, None) is not None for n in ast.walk(node))


def check_register_budget(fdef: ast.FunctionDef, ctx) -> None:
    """A CompileError where the kernel's requests add up to more than its block holds."""
    if not _has_request(fdef):
        return
    threads = ctx.plan.launch_threads or ctx.threads
    if not isinstance(threads, int) or threads <= 0:
        return
    found = []
    try:
        _requests(fdef.body, frozenset(range(threads)), derived_thread_names(fdef),
                  threads, ctx.namespace, found, ctx.plan.role_threads or ROLE_THREADS)
    except _Unknown:
        return
    launch = launch_registers(threads)
    warps = -(-threads // WARP)
    last = {}           # warp -> its last request in the source: (line, column, count)
    for st, who in found:
        _text, count, _is_inc = getattr(st, REQUEST_ATTR)
        where = (st.lineno, st.col_offset, count)
        for w in {t // WARP for t in who}:
            last[w] = max(last.get(w, where), where)
    final = [last[w][2] if w in last else launch for w in range(warps)]
    need, pool = sum(final) * WARP, launch * warps * WARP
    if need <= pool:
        return
    worst = max(found, key=lambda f: (getattr(f[0], REQUEST_ATTR)[1], f[0].lineno))[0]
    text, count, _ = getattr(worst, REQUEST_ATTR)
    groups = {}
    for c in final:
        groups[c] = groups.get(c, 0) + 1
    spread = ", ".join(f"{n} warp{'s' * (n > 1)} at {c}" for c, n in sorted(groups.items(),
                                                                          reverse=True))
    others = sum(c for c in final if c != count) * WARP
    at_count = final.count(count) * WARP
    fits = (pool - others) // at_count if at_count else 0
    fits -= fits % 8
    raise ctx.error(
        f"{text} asks more registers than the block holds: its {threads} threads are "
        f"launched with {launch} registers each ({REGISTER_FILE} / {threads}, in 8s), "
        f"{pool} in all, and the warps' setmaxnreg requests add up to {need} ({spread}); "
        f"setmaxnreg.inc would wait for ever (the kernel would hang). "
        + (f"With the other warps' counts as they are, it can ask at most {fits}"
           if fits >= 24 else "Lower the counts: times their threads, they must sum to at "
           "most the block's registers"),
        worst)
