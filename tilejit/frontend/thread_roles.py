"""Warp specialization written by hand: a chain of branches on the thread index, each
taken by one warpgroup, becomes the kernel's ``T.ws`` roles, for the GPU and the
simulator alike.

TileLang's FlashMLA, MLA-decode and sparse-MLA kernels split their block themselves::

    tx = T.get_thread_binding()
    if tx < 128:                       # consumer 0: fragments, wgmma, softmax
        ...
    elif tx >= 128 and tx < 256:       # consumer 1
        ...
    elif tx >= 256:                    # producer: cp.async / TMA, mbarrier arrivals
        ...

and TileLang lays out each branch's fragments over the threads that take it. That is what
``with T.ws(k):`` means (TileLang defines ``T.ws(1)`` as ``if tx >= 128 and tx < 256``):
here each branch becomes ``with T.ws(k):``, so that its tiles are planned over one
warpgroup and every role holds its own copy of each fragment (``passes/warp_roles.py``,
``sim/roles.py``); the thread index the kernel reads stays the block's.

A chain is taken when the block is whole warpgroups (at least two), each test is a
comparison of the thread index with compile-time values (``thread_tests.thread_takers``,
evaluated for every thread of the block; an ``elif`` sees the threads the tests before it
left), every branch is taken by exactly one warpgroup (or by none: then it is dropped),
and some branch needs its own registers (it names a fragment or runs a gemm or a
reduction: a branch of the block's threads cannot, ``passes/thread_branches.py`` maps
only shared-memory operations onto a range of threads) or arrives at a named barrier
without waiting (``T.named_barrier_arrive``, ids constants past the roles' own: a warp
handing another its data, which the simulator orders only between roles), and each
fragment the
branches name is one branch's alone (every role holds its own copy: a fragment one
branch writes and code after the chain reads would be read where it was never written,
so such a kernel keeps its branches and their error). Roles may be narrower than a
warpgroup (``role_size``: a warp or two where the branches' bounds need it); a branch
wider than its role that is per-thread code only (no fragment, no tile operation, no
T.Parallel: ``if tx < 32: <tile work> else: z[tx - 32] = ...``) becomes one role for
each group of its threads, each running it for its own threads; such a branch may be
taken by ranges of whole warps apart (``else`` of ``if tx >= 32 and tx < 64``). The
chain may be at the kernel's top level or inside loops and branches that every thread
reaches; a kernel that already has ``T.ws`` roles is left as written.
"""
from __future__ import annotations

import ast
import copy
from collections import Counter

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import KernelSource, kernel_call, resolve_static
from tilejit.frontend.thread_tests import (dependent_names, reads_thread, thread_names,
                                           thread_takers)
from tilejit.ir.markers import LANGUAGE, THREAD_INDEX
from tilejit.language.hopper import WARPGROUP_THREADS
from tilejit.language.tiles import TILE_OPERATIONS

WARP = 32
MAX_ROLES = 15          # named barriers 1 … 15, one a role
# the block's operations (its threads share them): a branch holding one is no role's own
_BLOCK_OPERATIONS = frozenset(getattr(T, n) for n in TILE_OPERATIONS
                              if n not in ("sync_threads",))

# what a branch of the block's threads cannot do by itself: its own registers' work
_OWN_REGISTERS = frozenset((T.gemm, T.wgmma_gemm, T.alloc_fragment, T.reduce, T.reduce_max,
                            T.reduce_min, T.reduce_sum, T.reduce_abssum, T.reduce_absmax,
                            T.cumsum))


def block_threads(ks: KernelSource, namespace) -> int | None:
    """The block's threads (``T.Kernel(..., threads=...)``) when known at compile time."""
    given = next((k.value for k in kernel_call(ks).keywords if k.arg == "threads"), None)
    if given is None:
        return None
    try:
        value = eval(compile(ast.Expression(given), "<threads>", "eval"),  # noqa: S307
                     {"__builtins__": {}}, dict(namespace))
    except Exception:       # names known only when the kernel runs
        return None
    if isinstance(value, (tuple, list)):
        total = 1
        for v in value:
            total *= v if isinstance(v, int) else 0
        value = total
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def roles_depend_on_constexprs(ks: KernelSource) -> bool:
    """Whether the kernel branches on its thread index in a block whose size only its
    constexprs give: whether it has roles then depends on them (the simulator builds
    its program per set of values)."""
    return block_threads(ks, ks.namespace) is None and any(
        isinstance(n, ast.Call) and resolve_static(n.func, ks.namespace) in (
            T.get_thread_binding, T.get_thread_bindings, T.thread_binding)
        for n in syntax.walk(ks.tree))


def rewrite_thread_roles(fdef: ast.FunctionDef, ks: KernelSource, namespace) -> ast.FunctionDef:
    """``fdef`` (after ``thread_bindings.py``) with its hand-written warpgroup branches as
    ``with T.ws(k):`` roles."""
    threads = block_threads(ks, namespace)
    if threads is None or threads % WARP or threads < 2 * WARP:
        return fdef
    if not any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
               and n.func.id == THREAD_INDEX for n in syntax.walk(fdef)):
        return fdef
    if any(isinstance(n, ast.Call) and resolve_static(n.func, ks.namespace) is T.ws
           for n in syntax.walk(fdef)):
        return fdef
    roles = _Roles(ks, namespace, threads, thread_names(fdef), _fragments(fdef, ks.namespace),
                   fdef)
    roles.block(fdef.body)              # find the chains
    roles.size = roles.role_size()
    if roles.size:
        fdef.body = roles.block(fdef.body)
    if roles.made:
        ks.namespace.setdefault(LANGUAGE, T)
    return fdef


def thread_role_size(fdef: ast.FunctionDef, ks: KernelSource, namespace) -> int:
    """The threads of one role when ``rewrite_thread_roles`` makes roles of ``fdef`` (it
    rewrites ``fdef``), else 0."""
    fdef = rewrite_thread_roles(fdef, ks, namespace)
    return role_threads_of(fdef, ks.namespace)


def role_threads_of(tree, namespace) -> int:
    """The role size the tree's ``T.ws`` blocks give (``role_threads=``, 128 by
    default), 0 without roles."""
    for node in syntax.walk(tree):
        if isinstance(node, ast.Call) and resolve_static(node.func, namespace) is T.ws:
            given = next((k.value for k in node.keywords if k.arg == "role_threads"), None)
            if given is None:
                return WARPGROUP_THREADS
            if not (isinstance(given, ast.Constant) and given.value in (WARP, 2 * WARP,
                                                                         WARPGROUP_THREADS)):
                raise TypeError(f"T.ws(..., role_threads=...): expected 32, 64 or 128 "
                                f"written as a literal, got `{ast.unparse(given)}`")
            return given.value
    return 0


def _runs(threads: set) -> list:
    """The contiguous ranges (lo, hi) a set of thread indices is made of, in order."""
    out = []
    for t in sorted(threads):
        if out and out[-1][1] == t:
            out[-1][1] = t + 1
        else:
            out.append([t, t + 1])
    return [tuple(r) for r in out]


def _fragments(fdef, namespace) -> set:
    return {node.targets[0].id for node in syntax.walk(fdef)
            if isinstance(node, ast.Assign) and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Call)
            and resolve_static(node.value.func, namespace) is T.alloc_fragment}


class _Roles:
    def __init__(self, ks, namespace, threads, names, fragments, fdef):
        self.ks, self.threads, self.fdef = ks, threads, fdef
        # the values a test may read: the program's and its constexprs', less the names
        # the kernel binds itself (a local `n` is not the global `n`)
        stored = {n.id for n in syntax.walk(fdef) if isinstance(n, ast.Name)
                  and isinstance(n.ctx, ast.Store)}
        self.namespace = {k: v for k, v in namespace.items() if k not in stored}
        self.names, self.fragments = names, fragments
        self.made = 0
        self.chains = {}        # id(if statement) -> its branches' (lo, hi, body, where)
        self.size = 0           # the role size, once the first walk decided it

    def block(self, stmts):
        out = []
        for st in stmts:
            new = self.statement(st)
            out.extend(new if isinstance(new, list) else [new])
        return out

    def statement(self, st):
        if isinstance(st, ast.If):
            if self.size:                       # the second walk: the chains found
                ranges = self.chains.get(id(st))
                if ranges is not None:
                    self.made += 1
                    # a branch of per-thread code wider than a role (or taken by threads
                    # apart): one role each of its groups of threads, running the branch
                    # for its own threads
                    out, placed = [], set()
                    for lo, hi, body, where in ranges:
                        last = hi // self.size if self._per_thread(body) else lo // self.size + 1
                        for k in range(lo // self.size, last):
                            out.append(self._role(k, copy.deepcopy(body) if id(body) in placed
                                                  else body, where, self.size))
                            placed.add(id(body))
                    return out
            else:
                ranges = self._chain(st)
                if ranges is not None:
                    self.chains[id(st)] = ranges
                    return st
            if thread_takers(st.test, self.names, self.threads, self.namespace) is None \
                    and not self._reads_thread(st.test):
                st.body, st.orelse = self.block(st.body), self.block(st.orelse)
            return st
        if isinstance(st, ast.For) and not (isinstance(st.iter, ast.Call) and resolve_static(
                st.iter.func, self.ks.namespace) is T.Parallel):
            if not self._reads_thread(st.iter):
                st.body = self.block(st.body)
            return st
        if isinstance(st, ast.While) and not self._reads_thread(st.test):
            st.body = self.block(st.body)
        if isinstance(st, ast.With):        # T.Kernel's block
            st.body = self.block(st.body)
        return st

    def _reads_thread(self, expr) -> bool:
        return reads_thread(expr, self.names)

    def _chain(self, st: ast.If):
        """The ``with T.ws(k):`` statements of a chain of warpgroup branches, or None."""
        branches, node = [], st
        while True:
            branches.append((node.test, node.body, node))
            if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
                node = node.orelse[0]
                continue
            if node.orelse:
                branches.append((None, node.orelse, node.orelse[0]))
            break
        left = set(range(self.threads))
        ranges = []
        for test, body, where in branches:
            if test is None:
                takers = left
            else:
                found = thread_takers(test, self.names, self.threads, self.namespace)
                if found is None:
                    return None
                takers = left & set(found)
            left = left - takers
            if not takers:
                continue
            runs = _runs(takers)
            if any(lo % WARP or hi % WARP for lo, hi in runs) or (
                    len(runs) > 1 and not self._per_thread(body)):
                return None             # not a range of whole warps (per-thread code:
                #                           ranges, `else` of `if 32 <= tx < 64`)
            ranges.extend((lo, hi, body, where) for lo, hi in runs)
        if not ranges or not any(self._own_registers(body) or self._arrives(body)
                                 for *_, body, _ in ranges):
            return None
        if not self._private_fragments(st, [body for *_, body, _ in ranges]):
            return None
        return ranges

    def _private_fragments(self, chain, bodies) -> bool:
        """Whether each fragment the branches name is one branch's alone: a role holds its
        own copy of every fragment, so one written in a branch and read after it (or in
        another branch) would be read in a role that never wrote it."""
        inside = [{n.id for n in syntax.walk(ast.Module(body=list(b), type_ignores=[]))
                   if isinstance(n, ast.Name) and n.id in self.fragments} for b in bodies]
        named = set().union(*inside)
        if sum(len(names) for names in inside) != len(named):
            return False
        in_chain = {id(n) for n in syntax.walk(chain)}
        return not any(isinstance(n, ast.Name) and n.id in named and id(n) not in in_chain
                       and isinstance(n.ctx, ast.Load) for n in syntax.walk(self.fdef))

    def _arrives(self, body) -> bool:
        """Whether a branch arrives at a named barrier without waiting
        (``T.named_barrier_arrive``: a producer handing a consumer warp its data, TileLang's
        issue-2188 form): roles, whose arrivals the simulator orders as the GPU does. Only
        where every named barrier the chain names is a constant past the roles' own ids
        (role k syncs on barrier 1 + k)."""
        calls = [n for n in syntax.walk(ast.Module(body=list(body), type_ignores=[]))
                 if isinstance(n, ast.Call) and resolve_static(n.func, self.ks.namespace) in (
                     T.named_barrier_arrive, T.sync_threads) and n.args]
        if not any(resolve_static(c.func, self.ks.namespace) is T.named_barrier_arrive
                   for c in calls):
            return False
        # (an id the kernel names once: `ready_barrier = 10`)
        stores = [n for n in syntax.walk(self.fdef) if isinstance(n, ast.Assign)
                  and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)]
        stored = Counter(n.id for n in syntax.walk(self.fdef) if isinstance(n, ast.Name)
                         and isinstance(n.ctx, ast.Store))
        once = {n.targets[0].id: n.value for n in stores if stored[n.targets[0].id] == 1}
        for c in calls:
            ident = c.args[0]
            if isinstance(ident, ast.Name) and isinstance(once.get(ident.id), ast.Constant):
                ident = once[ident.id]
            value = ident.value if isinstance(ident, ast.Constant) else (
                self.namespace.get(ident.id) if isinstance(ident, ast.Name) else None)
            if not isinstance(value, int) or isinstance(value, bool) or \
                    value <= self.threads // WARP:
                return False
        return True

    def _own_registers(self, body) -> bool:
        for node in syntax.walk(ast.Module(body=list(body), type_ignores=[])):
            if isinstance(node, ast.Name) and node.id in self.fragments:
                return True
            if isinstance(node, ast.Call) and resolve_static(
                    node.func, self.ks.namespace) in _OWN_REGISTERS:
                return True
        return False

    def role_size(self) -> int:
        """The threads of one role: a warpgroup where every branch is one, else the
        largest power of two (a warp at least) that divides every branch's start and
        size; each branch runs in the role of its first threads. 0 where that leaves a
        branch wider than its role reading the thread index (its other threads would
        not run it), or more roles than named barriers."""
        spans = [(lo, hi) for ranges in self.chains.values() for lo, hi, *_ in ranges]
        if not spans:
            return 0
        size = WARPGROUP_THREADS
        while size > WARP and any(lo % size or (hi - lo) % size for lo, hi in spans):
            size //= 2
        if any(lo % size or (hi - lo) % size for lo, hi in spans) or \
                self.threads // size > MAX_ROLES:
            return 0
        if size >= self.threads:
            return 0                        # one role for the whole block: no split
        dependent = dependent_names(self.fdef, self.names)
        for ranges in self.chains.values():
            for lo, hi, body, _ in ranges:
                if hi - lo > size and reads_thread(ast.Module(body=list(body), type_ignores=[]),
                                             dependent) and not self._per_thread(body):
                    return 0
        return size

    def _per_thread(self, body) -> bool:
        """Whether a branch is per-thread code only (no fragment, no tile operation, no
        T.Parallel): each role of its threads may run it for its own threads, as the
        branch's threads each run it."""
        if self._own_registers(body):
            return False
        for node in syntax.walk(ast.Module(body=list(body), type_ignores=[])):
            if isinstance(node, ast.For) and isinstance(node.iter, ast.Call) and \
                    resolve_static(node.iter.func, self.ks.namespace) is T.Parallel:
                return False
            if isinstance(node, ast.Call) and resolve_static(
                    node.func, self.ks.namespace) in _BLOCK_OPERATIONS:
                return False
        return True

    @staticmethod
    def _role(k, body, where, size):
        keywords = [] if size == WARPGROUP_THREADS else [ast.keyword("role_threads",
                                                                     ast.Constant(size))]
        ws = ast.Call(ast.Attribute(ast.Name(LANGUAGE, ast.Load()), "ws", ast.Load()),
                      [ast.Constant(k)], keywords)
        return ast.copy_location(ast.With([ast.withitem(ws, None)], list(body)), where)
