"""Pass: insert the block barriers that shared memory needs; users never write one.
A global tensor the kernel stores into (not by atomics) is ordered alike: a statement
that reads it after another stored into it, or stores after another read it, gets a
barrier (another thread's element; the simulator runs statements in order). Two stores
of it in turn do not (a loop's stores of its regions are other elements).

Every statement is summarized by the shared tiles it reads and writes: ``T.copy`` reads
its source and writes its destination, ``T.gemm`` reads A and B, ``T.clear``/``T.fill``
write, a ``T.Parallel`` loop (one statement: its iterations are spread over the threads)
reads and writes what its body indexes, and any other statement what it indexes.
Walking the program in order with the accesses made since the last barrier, a barrier
goes before a statement that reads a tile written since (read after write) or writes a
tile read or written since (write after read/write). Tiles that share bytes
(``shared_memory.py``) count as one. A TMA store (``tma_store.py``) always gets the
writers' proxy fence and a barrier before it, and counts as a read of its tile: the first
barrier after it (after which the tile may be written again) is preceded by thread 0's
wait for TMA's reads.

Loops: the body is analyzed with the accesses pending at loop entry merged with those
pending at the end of the body (the back edge), until nothing changes; that puts, for a
copy-then-gemm body, one barrier before the gemm and one before the next iteration's
copies. After the loop the pending set is entry ∪ body end (the loop may run 0 times).
Where the body analyzed from a clean entry needs fewer barriers (a tile written before
the loop and read in every iteration, as FlashAttention's Q), one barrier goes before the
loop instead.
A kernel's own ``T.ws`` role (``ROLE_ATTR``) synchronizes inside on its named barrier;
its accesses, against the block's statements around it (which every role runs), get a
block barrier where they conflict; against another role's, none: the kernel orders
those itself (mbarriers, named barriers: ``named_barriers.py``).
``if``: each branch starts from the pending set before it (a barrier needed at a
branch's start is hoisted before the ``if``, so a barrier is never skipped by some
threads only); the pending set after it is the union of the branches' ends.
An ``if`` whose test depends on the thread index, or a loop whose range does, holding
per-thread code only (``if tx < 128:`` and scalar stores): no barrier goes inside (the
threads that skip it would never reach it); its accesses count as one statement's, so
the barrier goes before or after it.
With ``CompileOptions.thread_sync`` off (TileLang's ``TL_DISABLE_THREAD_STORAGE_SYNC``)
there is no walk: the kernel's own ``T.sync_threads()`` are its barriers (a role's in a
``T.ws`` role, ``_OwnSyncs``).
"""
from __future__ import annotations

import ast
import collections

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.helpers import is_helper
from tilejit.frontend.source import resolve_static
from tilejit.frontend.tile_helpers import reaches
from tilejit.frontend.thread_tests import thread_names, thread_takers
from tilejit.ir.markers import (ATOMICS, BITS_LOAD, BITS_STORE, CLUSTER_ARRIVE, CLUSTER_SYNC,
                                CLUSTER_WAIT, COMMIT,
                                CONVERT_LAYOUT, COPY_ASYNC, CUMSUM, DISJOINT_STORES_ATTR,
                                FRAG_LOOP, GEMM, GRID_SYNC, GROUPS, INTERNAL_BARRIER_ATTR,
                                LDMATRIX, MBAR_ARRIVE,
                                MBAR_ARRIVE_ALL, MMA_SYNC, REDUCE, REGION, ROLE_ATTR,
                                SETMAXNREG, STAGE, SYNC, SYNC_CONSUMERS, SYNC_ROLE,
                                THREAD_INDEX, TMA_COPY, TMA_EXPECT_LOAD, TMA_FENCE, TMA_INIT,
                                TMA_LOAD, TMA_STORE, TMA_STORE_WAIT, TMA_WAIT, WAIT,
                                WGMMA_WAIT, WS_ATTR)
from tilejit.ir.plan import SHARED
from tilejit.passes.dependence import dependent_names, reads_any
from tilejit.passes.named_barriers import NamedBarriers
from tilejit.language.tiles import TILE_OPERATIONS
from tilejit.passes.shared_memory import shares_bytes



def _sync_stmt(node, name=SYNC, args=()):
    return ast.copy_location(ast.Expr(ast.Call(ast.Name(name, ast.Load()),
                                               [ast.Constant(a) for a in args], [])), node)


def _depends(expr, tainted) -> bool:
    return reads_any(expr, tainted) or reads_any(expr, (THREAD_INDEX,))


def thread_dependent_names(fdef, memory=frozenset()) -> set[str]:
    """The names computed from the thread index (``thread_bindings.py``'s
    ``__tj_thread_index()``), directly or through other such names, and the loop
    variables of ranges that depend on it; an element of a shared tile or tensor
    (``memory``: shared tiles) that a thread-dependent value is stored into is read
    alike by all."""
    return dependent_names(fdef, {THREAD_INDEX}, memory, atomics=True) - {THREAD_INDEX}


# the compiler's forms that the block (or a warpgroup) does together: a branch holding
# one is not per-thread code (any other marker, a cast or a tile's pointer, is a value)
_BLOCK_WIDE_FORMS = frozenset((GEMM, REDUCE, CUMSUM, FRAG_LOOP, CONVERT_LAYOUT, SYNC,
                               SYNC_CONSUMERS, SYNC_ROLE, COPY_ASYNC, COMMIT, WAIT, LDMATRIX,
                               MMA_SYNC, TMA_INIT, TMA_LOAD, TMA_WAIT, TMA_FENCE, TMA_STORE,
                               TMA_STORE_WAIT, TMA_COPY, TMA_EXPECT_LOAD, WGMMA_WAIT,
                               MBAR_ARRIVE, MBAR_ARRIVE_ALL, SETMAXNREG, CLUSTER_SYNC,
                               CLUSTER_ARRIVE, CLUSTER_WAIT, GROUPS))
_BLOCK_WIDE_OPS = tuple(getattr(T, name) for name in TILE_OPERATIONS) + (T.Parallel,)


def _per_thread(stmt, tainted, namespace) -> bool:
    """A branch whose test depends on the thread index (or a loop whose range or test
    does) holding per-thread code only: no tile operation, no T.Parallel, none of the
    compiler's block-wide forms. No barrier can go inside it (the threads that skip it
    would never reach one): its shared-memory accesses count as one statement's."""
    if isinstance(stmt, ast.If):
        test = stmt.test
    elif isinstance(stmt, ast.While):
        test = stmt.test
    elif isinstance(stmt, ast.For):
        test = stmt.iter
    else:
        return False
    if not _depends(test, tainted):
        return False
    for node in syntax.walk(stmt):
        if not isinstance(node, ast.Call):
            continue
        if isinstance(node.func, ast.Name) and node.func.id in _BLOCK_WIDE_FORMS:
            return False
        if resolve_static(node.func, namespace) in _BLOCK_WIDE_OPS:
            return False
    return True


class _Access:
    def __init__(self, ctx, tensors=frozenset(), aliases=None):
        self.ctx = ctx
        self.shared = {n: t for n, t in ctx.plan.tiles.items() if t.kind == SHARED}
        # global tensors the kernel writes (``written_tensors``): an element one thread
        # stores and another then reads or stores is ordered by a barrier, as a shared
        # tile's (the simulator runs the statements one after another); a view of one
        # (T.reshape / T.view of the tensor) is the tensor
        self.tensors = frozenset(tensors)
        self.aliases = aliases or {}

    def _tile_of(self, node):
        """The resource an operand names: (tile, None) for a whole tile, (tile, stage
        expression) for one version of a pipelined tile; (tensor, None) for a global
        tensor the kernel writes."""
        if isinstance(node, ast.Name) and (node.id in self.shared or node.id in self.tensors):
            return (node.id, None)
        if isinstance(node, ast.Name) and self.aliases.get(node.id) in self.tensors:
            return (self.aliases[node.id], None)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == STAGE and len(node.args) == 2):
            inner = self._tile_of(node.args[0])
            if inner and self.shared[inner[0]].user_staged:
                return inner            # the kernel's own stage expressions: any version
            return inner and (inner[0], ast.unparse(node.args[1]))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == REGION and node.args):
            return self._tile_of(node.args[0])
        return None

    def of(self, stmt) -> tuple[set, set]:
        reads, writes = set(), set()
        # an atomic's destination: atomics of one element commute, and the kernel orders
        # an atomic against plain accesses itself (a fence, T.sync_threads)
        atomic = {id(n) for call in syntax.walk(stmt) if isinstance(call, ast.Call)
                  and _is_atomic(call, self.ctx.namespace) and call.args
                  for n in syntax.walk(call.args[0])} if self.tensors else ()
        own = self._own_elements(stmt)
        for node in syntax.walk(stmt):
            if id(node) in atomic:
                continue
            if isinstance(node, ast.Subscript) and own and \
                    self._tile_of(node.value) in own:
                tensor = self._tile_of(node.value)[0]
                (writes if isinstance(node.ctx, ast.Store) else reads).add(
                    (tensor, ("own", id(stmt))))
                continue
            if isinstance(node, ast.Subscript):
                # an element of a tile, of one stage of a pipelined tile or of a region
                tile = self._tile_of(node.value)
                if tile:
                    (writes if isinstance(node.ctx, ast.Store) else reads).add(tile)
            elif isinstance(node, ast.Call):
                fn = resolve_static(node.func, self.ctx.namespace)
                name = node.func.id if isinstance(node.func, ast.Name) else None
                tiles = [self._tile_of(a) for a in node.args]
                if name == TMA_EXPECT_LOAD:
                    continue    # T.tma_copy: ordered by the kernel's own mbarriers
                if (fn is T.copy and len(tiles) == 2) or name in (COPY_ASYNC, TMA_LOAD):
                    if tiles[0]:
                        reads.add(tiles[0])
                    if tiles[1]:
                        writes.add(tiles[1])
                elif name == BITS_LOAD and tiles[0]:
                    reads.add(tiles[0])     # T.lds*: one element's words
                elif name == BITS_STORE and tiles[0]:
                    writes.add(tiles[0])    # T.sts*
                elif name == TMA_STORE and tiles[0]:
                    reads.add(tiles[0])     # by TMA, until the next barrier (tma_store.py)
                elif name == LDMATRIX and tiles[2]:
                    reads.add(tiles[2])     # TensorCoreIntrinEmitter's loads
                elif name == GEMM:
                    # A and B (and a sparse gemm's metadata, its fifth operand); a
                    # folded refill (pipeline.py: a condition fifth) writes its destinations
                    reads.update(t for t in tiles[:2] + tiles[4:5] if t)
                    writes.update(t for t in tiles[6::2] if t)
                elif fn in (T.clear, T.fill) and tiles and tiles[0]:
                    writes.add(tiles[0])
                elif name not in (REGION, STAGE) and fn not in (T.copy,):
                    # a tile passed to anything else (a macro): assume read and written
                    # (a tensor passed to a marker is its address, a shape, a descriptor;
                    # to a helper, a device function, what it may read and write)
                    helper = is_helper(fn.func if isinstance(fn, T.macro) else fn)
                    for t in tiles:
                        if t and (t[0] in self.shared or helper):
                            reads.add(t)
                            writes.add(t)
        return reads, writes

    def _own_elements(self, stmt) -> set:
        """The tensors a T.Parallel statement indexes only element by element, at one
        index: each iteration reads and writes its own element, on the thread the loop
        gives it, the same thread each time the statement runs (a serial loop around an
        in-place update needs no barrier between its turns). (tensor, None) each."""
        if not self.tensors or not (isinstance(stmt, ast.For) and _is_tile_loop(stmt,
                                                                                self.ctx)):
            return set()
        index: dict = {}
        other = set()
        for node in syntax.walk(stmt):
            if isinstance(node, ast.Subscript):
                t = self._tile_of(node.value)
                if t and t[0] in self.tensors:
                    index.setdefault(t, set()).add(ast.dump(node.slice))
            elif isinstance(node, ast.Call):
                other.update(t for t in (self._tile_of(a) for a in node.args) if t)
        return {t for t, forms in index.items() if len(forms) == 1 and t not in other}

    def conflict(self, r: set, w: set, reads: set, writes: set) -> bool:
        """Whether a statement reading ``r`` and writing ``w`` needs a barrier after the
        pending ``reads`` and ``writes``: a read after a write, a write after a read or a
        write. A global tensor's write after a write is not counted: the regions a loop
        stores in turn (`T.copy(x, Y[k * n])`) are other elements, and two statements
        storing one element from two threads is the kernel's own race."""
        return self.overlap(r, writes) or self.overlap(w, reads) or self.overlap(
            {a for a in w if a[0] not in self.tensors}, writes)

    def overlap(self, a: set, b: set) -> bool:
        """Whether two access sets touch common bytes. Two stages of one pipelined tile
        are distinct within an iteration (the pipeline pass guarantees the stage
        expressions it writes differ, and puts its own barrier on the back edge). The
        accesses of two different ``T.ws`` roles (tagged with the role, a third item) are
        ordered by the kernel's own protocol, its mbarriers or named barriers."""
        for (x, xs, *xr) in a:
            for (y, ys, *yr) in b:
                if xr and yr and xr != yr:
                    continue
                if x == y and x in self.tensors:
                    if isinstance(xs, tuple) and xs == ys:
                        continue        # one statement's own elements (_own_elements)
                    return True
                if x == y:
                    if xs is None or ys is None or xs == ys:
                        return True
                elif x in self.shared and y in self.shared and \
                        shares_bytes(self.shared[x], self.shared[y]):
                    return True
        return False


def _is_atomic(call: ast.Call, namespace) -> bool:
    if isinstance(call.func, ast.Name) and call.func.id in _ATOMIC_MARKERS:
        return True
    return resolve_static(call.func, namespace) in ATOMICS


_ATOMIC_MARKERS = frozenset(ATOMICS.values())


def tensor_views(fdef, ctx) -> dict:
    """{view: tensor} of the names bound to a T.reshape / T.view of a tensor parameter
    (or of such a view)."""
    views: dict = {}
    for node in syntax.walk(fdef):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                node.targets[0], ast.Name) and isinstance(node.value, ast.Call) and \
                node.value.args and isinstance(node.value.args[0], ast.Name) and \
                resolve_static(node.value.func, ctx.namespace) in (T.reshape, T.view):
            base = node.value.args[0].id
            base = views.get(base, base)
            if base in ctx.params:
                views[node.targets[0].id] = base
    return views


def written_tensors(fdef, ctx) -> frozenset:
    """The global tensors the kernel stores into other than by atomics (an element, a
    T.copy or T.fill destination, through a view, or passed to a helper)."""
    if not ctx.params:
        return frozenset()
    _, writes = _Access(ctx, ctx.params, tensor_views(fdef, ctx)).of(fdef)
    return frozenset(n for n, *_ in writes if n in ctx.params)


def shared_writes(ctx, stmt) -> set:
    """The shared tiles a statement writes, as (tile, stage expression or None)."""
    return _Access(ctx).of(stmt)[1]


def _is_tile_loop(stmt, ctx) -> bool:
    it = stmt.iter
    if not isinstance(it, ast.Call):
        return False
    if isinstance(it.func, ast.Name) and it.func.id == FRAG_LOOP:
        return True
    return resolve_static(it.func, ctx.namespace) is T.Parallel


def _is_call(stmt, *names) -> bool:
    return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Name) and stmt.value.func.id in names)


def _is_sync(stmt) -> bool:
    return _is_call(stmt, SYNC, SYNC_CONSUMERS, SYNC_ROLE)


class _Syncer:
    def __init__(self, ctx, sync=SYNC, sync_args=(), tainted=frozenset(), tensors=(),
                 views=None, thread_names=None, threads=0):
        self.ctx = ctx
        self.acc = _Access(ctx, tensors, views)
        self.tensors = tensors
        self.views = views
        self.tainted = tainted      # names computed from the thread index
        self.sync = sync            # the barrier this program's threads share
        self.sync_args = sync_args
        # the thread index's names and the block's threads (a branch every thread takes
        # may hold the block's barrier: _taken_by_all); none in a role's or consumers' walk
        self.thread_names, self.threads = thread_names or {}, threads

    def _barrier(self, node, reads=()):
        """The barrier before ``node`` (a list); with ``reads`` pending that include a tile
        a TMA store reads, thread 0 first waits for those reads."""
        stored = self.ctx.plan.tma_stored
        wait = [_sync_stmt(node, TMA_STORE_WAIT)] if any(t in stored for t, *_ in reads) else []
        return wait + [_sync_stmt(node, self.sync, self.sync_args)]

    def block(self, stmts, state):
        """(statements with barriers, pending (reads, writes) at the end)."""
        out = []
        reads, writes = set(state[0]), set(state[1])
        for stmt in stmts:
            # a run of stores of disjoint elements (DISJOINT_STORES_ATTR)
            this_group = getattr(stmt, DISJOINT_STORES_ATTR, None)
            if this_group is not None and out and getattr(out[-1], DISJOINT_STORES_ATTR,
                                                          None) == this_group:
                # the run's first statement was checked: the rest store other elements of
                # the same tiles, each by one thread, and need no barrier between them
                r, w = self.acc.of(stmt)
                reads |= r
                writes |= w
                out.append(stmt)
                continue
            if _per_thread(stmt, self.tainted, self.ctx.namespace):
                r, w = self.acc.of(stmt)
                if self.acc.conflict(r, w, reads, writes):
                    out += self._barrier(stmt, reads)
                    reads, writes = set(), set()
                reads |= r
                writes |= w
                out.append(stmt)
                continue
            if isinstance(stmt, (ast.For, ast.While)) and not (
                    isinstance(stmt, ast.For) and _is_tile_loop(stmt, self.ctx)):
                new, (reads, writes), hoist = self.loop(stmt, (reads, writes))
                if hoist:
                    out += self._barrier(stmt, reads)
                out.append(new)
                continue
            if isinstance(stmt, ast.If) and getattr(stmt, ROLE_ATTR, None) is not None:
                # a kernel's own warpgroup role (warp_roles.py): its barriers are its named
                # barrier; its accesses are ordered for the other roles by the kernel's
                # mbarriers or named barriers (tagged with the role: `overlap`). The
                # block's own statements around it run in every role: one that conflicts
                # with the role's accesses gets a block barrier between them (all the
                # block's threads reach it, outside the role's branch)
                role = getattr(stmt, ROLE_ATTR)
                body, _ = _Syncer(self.ctx, SYNC_ROLE, (role,), self.tainted,
                                  self.tensors, self.views).block(
                    stmt.body, (set(), set()))
                r, w = set(), set()
                for inner in stmt.body:
                    ir_, iw = self.acc.of(inner)
                    r |= {(*a, role) for a in ir_}
                    w |= {(*a, role) for a in iw}
                if self.acc.conflict(r, w, reads, writes):
                    out += self._barrier(stmt, reads)
                    reads, writes = set(), set()
                reads |= r
                writes |= w
                new = ast.copy_location(ast.If(stmt.test, body, []), stmt)
                setattr(new, ROLE_ATTR, role)
                out.append(new)
                continue
            if isinstance(stmt, ast.If) and getattr(stmt, WS_ATTR, False):
                # warp-specialized roles (warp_specialize.py): the producer's writes are
                # ordered by mbarriers; the consumers share barrier 1 only
                consumers = _Syncer(self.ctx, SYNC_CONSUMERS, (), self.tainted, self.tensors,
                                    self.views)
                orelse, (reads, writes) = consumers.block(stmt.orelse, (set(), set()))
                new = ast.copy_location(ast.If(stmt.test, stmt.body, orelse), stmt)
                setattr(new, WS_ATTR, True)
                out.append(new)
                continue
            if isinstance(stmt, ast.If):
                before = reads
                new, (reads, writes), hoist = self.branch(stmt, (reads, writes))
                if hoist:
                    out += self._barrier(stmt, before)
                out.append(new)
                continue
            if _is_call(stmt, _USER_SYNC):      # T.sync_threads(): this program's barrier
                out += self._barrier(stmt, reads)
                reads, writes = set(), set()
                continue
            if _is_sync(stmt):           # a barrier the pipeline pass placed
                out += self._barrier(stmt, reads)[:-1] + [stmt]
                reads, writes = set(), set()
                continue
            if _is_call(stmt, TMA_STORE):
                # every writer's generic stores of the tile are fenced from TMA's reads
                # (the async proxy) before the barrier that publishes them
                out += [_sync_stmt(stmt, TMA_FENCE), *self._barrier(stmt, reads), stmt]
                reads, writes = self.acc.of(stmt)
                continue
            r, w = self.acc.of(stmt)
            if self.acc.conflict(r, w, reads, writes):
                out += self._barrier(stmt, reads)
                reads, writes = set(), set()
            reads |= r
            writes |= w
            out.append(stmt)
        return out, (reads, writes)

    def _starts_with_sync(self, stmts):
        """Whether the statements start with a barrier (after a TMA store's wait or fence)."""
        while stmts and _is_call(stmts[0], TMA_STORE_WAIT, TMA_FENCE):
            stmts = stmts[1:]
        return bool(stmts) and _is_call(stmts[0], self.sync)

    def loop(self, stmt, state):
        body, end = self._fixpoint(stmt, state)
        hoist = False
        if state[0] or state[1]:
            # a barrier the body needs only for accesses made before the loop (a tile
            # written once, then read in every iteration) goes before the loop, once
            clean_body, clean_end = self._fixpoint(stmt, (set(), set()))
            if self._barriers_in(clean_body) < self._barriers_in(body):
                body, end, state, hoist = clean_body, clean_end, (set(), set()), True
        new = ast.For if isinstance(stmt, ast.For) else ast.While
        fields = {f: getattr(stmt, f) for f in stmt._fields}
        fields["body"] = body
        node = ast.copy_location(new(**fields), stmt)
        return node, (state[0] | end[0], state[1] | end[1]), hoist

    def _fixpoint(self, stmt, entry):
        """The loop's body with barriers for pending ``entry`` merged with the back edge's,
        and the pending accesses at the end of the body."""
        end = (set(), set())
        for _ in range(4):
            merged = (entry[0] | end[0], entry[1] | end[1])
            body, new_end = self.block(stmt.body, merged)
            if new_end == end:
                break
            end = new_end
        return body, end

    def _taken_by_all(self, test) -> bool:
        """Whether every thread of the block passes ``test`` (``if tx < 128`` in a block
        of 128), where it compares the thread index with compile-time values."""
        if not self.threads:
            return False
        takers = thread_takers(test, self.thread_names, self.threads, self.ctx.namespace)
        return takers is not None and len(takers) == self.threads

    def _barriers_in(self, stmts) -> int:
        return sum(1 for s in stmts for n in syntax.walk(s) if _is_call(n, self.sync))

    def branch(self, stmt, state):
        hoist = False
        body, end1 = self.block(stmt.body, state)
        orelse, end2 = self.block(stmt.orelse, state) if stmt.orelse else ([], state)
        if self._starts_with_sync(body) or self._starts_with_sync(orelse):
            hoist = True
            clean = (set(), set())
            body, end1 = self.block(stmt.body, clean)
            orelse, end2 = self.block(stmt.orelse, clean) if stmt.orelse else ([], clean)
        if _depends(stmt.test, self.tainted) and self.sync == SYNC and \
                self._barriers_in(body + orelse) and not self._taken_by_all(stmt.test):
            # the block's barrier inside a branch some threads skip: they never reach it,
            # and the GPU hangs (a producer warp's mbarrier handshake with a consumer role,
            # which TileLang runs with its automatic barriers turned off)
            raise self.ctx.error(
                "this branch depends on the thread index, and its shared-memory accesses "
                "need a barrier of all the block's threads inside it, which the threads "
                "that skip the branch never reach (the GPU would hang): move the accesses "
                "the barrier orders out of the branch, or order them with T.sync_threads() "
                "outside it (tilejit places barriers itself; it has no "
                "TL_DISABLE_THREAD_STORAGE_SYNC)", stmt)
        node = ast.copy_location(ast.If(stmt.test, body, orelse), stmt)
        return node, (end1[0] | end2[0], end1[1] | end2[1]), hoist


# what a T.sync_threads() statement is until the walk gives it the barrier of the
# threads that run it (the block's, the consumer warpgroups', a role's)
_USER_SYNC = "__tj_user_sync"


class _UserSyncs(syntax.NodeTransformer):
    """``T.sync_threads()`` statements, checked: every thread of the block must reach one,
    so not inside a branch or loop whose test depends on the thread index (names computed
    from it, ``thread_bindings.py``, count too). Named barriers (``T.sync_threads(id,
    count)``, ``T.named_barrier_arrive``) may be reached by some threads only:
    ``named_barriers.py``."""

    def __init__(self, ctx, fdef, marker, tainted):
        self.ctx = ctx
        self.marker = marker            # what each becomes
        self.divergent = 0
        self.tainted = tainted          # names computed from the thread index
        # a `return` some threads take leaves the others alone at every later barrier
        self.divergent += any(self._escapes(node, ast.Return) for node in syntax.walk(fdef)
                              if isinstance(node, ast.If))
        self.named = NamedBarriers(ctx, fdef)

    def _escapes(self, node, kinds) -> bool:
        """Whether ``node``, an ``if`` with a thread-dependent test, holds a ``kinds``
        statement (break/continue of the loop around it, or a return)."""
        if not _depends(node.test, self.tainted):
            return False
        stack = list(node.body) + list(node.orelse)
        while stack:
            st = stack.pop()
            if isinstance(st, kinds):
                return True
            if isinstance(st, (ast.For, ast.While)) and kinds != ast.Return:
                continue                 # its own break/continue leave that loop only
            stack += [c for c in syntax.iter_child_nodes(st) if isinstance(c, ast.stmt)]
        return False

    def _visit_branching(self, node, test):
        diverges = _depends(test, self.tainted)
        self.divergent += diverges
        node = self.generic_visit(node)
        self.divergent -= diverges
        return node

    def visit_If(self, node):
        return self._visit_branching(node, node.test)

    def visit_While(self, node):
        return self._visit_loop(node, node.test)

    def visit_For(self, node):
        it = node.iter
        if isinstance(it, ast.Call) and resolve_static(it.func, self.ctx.namespace) is T.Parallel:
            for n in syntax.walk(node):
                fn = resolve_static(n.value.func, self.ctx.namespace) if isinstance(
                    n, ast.Expr) and isinstance(n.value, ast.Call) else None
                if fn in (T.sync_threads, T.named_barrier_arrive, T.sync_grid):
                    raise self.ctx.error(f"T.{fn.__name__}() inside a T.Parallel loop: the "
                                         "loop's iterations are spread over the threads; "
                                         "put the barrier before or after the loop", node)
                if isinstance(n, ast.Call) and predicate_barrier(n, self.ctx):
                    name = predicate_barrier(n, self.ctx)
                    raise self.ctx.error(f"T.{name}() inside a T.Parallel loop: the loop's "
                                         f"iterations are spread over the threads; put the "
                                         f"barrier before or after the loop", n)
        return self._visit_loop(node, node.iter)

    def visit_Call(self, node):
        name = predicate_barrier(node, self.ctx)
        if name and self.divergent:
            raise self.ctx.error(f"T.{name}() inside a branch or loop that depends on the "
                                 f"thread index: it is a block barrier, and every thread of "
                                 f"the block must reach it", node)
        return self.generic_visit(node)

    def _visit_loop(self, node, test):
        """A loop whose trip count depends on the thread index, or whose body some
        threads leave early (a break or continue under a thread-dependent test): no
        barrier inside it is reached by every thread."""
        early = any(self._escapes(n, (ast.Break, ast.Continue)) for n in syntax.walk(node)
                    if isinstance(n, ast.If))
        self.divergent += early
        node = self._visit_branching(node, test)
        self.divergent -= early
        return node

    def visit_Expr(self, node):
        call = node.value
        fn = resolve_static(call.func, self.ctx.namespace) if isinstance(call, ast.Call) \
            else None
        if fn is T.named_barrier_arrive or (fn is T.sync_threads and (call.args or
                                                                      call.keywords)):
            return self.named.statement(node, call, fn)
        if fn is T.sync_grid:
            if self.divergent:
                raise self.ctx.error("T.sync_grid() inside a branch or loop that depends on "
                                     "the thread index: every thread of every block must "
                                     "reach it", node)
            # the block's barrier, the grid's arrival and wait by thread 0, the block's
            # barrier (passes/grid_sync.py)
            return [_sync_stmt(node, self.marker), _sync_stmt(node, GRID_SYNC),
                    _sync_stmt(node, self.marker)]
        if fn is not T.sync_threads:
            return self.generic_visit(node)
        if self.divergent:
            raise self.ctx.error("T.sync_threads() inside a branch or loop that depends on "
                                 "the thread index: every thread of the block must reach it",
                                 node)
        return _sync_stmt(node, self.marker)


# the block barriers that reduce a predicate (language/warp.py): checked as T.sync_threads
# is, and left in place (an expression; the walk below orders shared memory by itself)
_PREDICATE_BARRIERS = ("syncthreads_count", "syncthreads_and", "syncthreads_or")


def predicate_barrier(call: ast.Call, ctx) -> str | None:
    """The name of the predicate block barrier ``call`` calls, else None."""
    fn = resolve_static(call.func, ctx.namespace)
    return next((n for n in _PREDICATE_BARRIERS if fn is getattr(T, n)), None)


# the barriers across which a kernel's threads may exchange values through its tensors
# (its own, or its helpers': LLVM must not take a tensor for one thread's own)
_SYNC_FUNCTIONS = tuple(getattr(T, name) for name in (
    "sync_threads", "sync_warp", "sync_grid", "named_barrier_arrive", "syncthreads_count",
    "syncthreads_and", "syncthreads_or", "cluster_sync", "cluster_arrive",
    "cluster_arrive_relaxed", "cluster_wait"))


def _own_barrier(call, namespace) -> bool:
    """A barrier of the kernel's own (not one the front end wrote around a shared
    scratch: ``INTERNAL_BARRIER_ATTR``)."""
    return not getattr(call, INTERNAL_BARRIER_ATTR, False) and \
        resolve_static(call.func, namespace) in _SYNC_FUNCTIONS


def insert_barriers(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    shared = any(t.kind == SHARED for t in ctx.plan.tiles.values())
    syncs = any(isinstance(n, ast.Call) and (
        resolve_static(n.func, ctx.namespace) in (T.sync_threads, T.named_barrier_arrive,
                                                  T.sync_grid)
        or predicate_barrier(n, ctx)) for n in syntax.walk(fdef))
    # the kernel's own barriers, or its helpers': its tensors not noalias (codegen/entry.py)
    ctx.plan.user_barriers = reaches(fdef, ctx.namespace, _own_barrier)
    tensors = written_tensors(fdef, ctx)
    if not (shared or syncs or tensors):
        return fdef
    # shared tiles bound once (their allocation): a thread-dependent store into one is
    # ordered before other threads' reads by the barriers this pass inserts; a global
    # tensor's stores are not, and a reused name may be a thread's own tile
    stores = collections.Counter(n.id for n in syntax.walk(fdef)
                                 if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    memory = {n for n, t in ctx.plan.tiles.items() if t.kind == SHARED and stores[n] <= 1}
    tainted = thread_dependent_names(fdef, memory)      # one walk for both
    walk = bool(shared or tensors)
    users = None
    if syncs:
        # with no walk: the block's barrier, as asked
        users = _UserSyncs(ctx, fdef, _USER_SYNC if walk else SYNC, tainted)
        fdef = users.visit(fdef)
    if walk and not ctx.options.thread_sync:
        # TileLang's TL_DISABLE_THREAD_STORAGE_SYNC: the kernel orders its shared memory
        # with its own barriers (and may use every named barrier id a role does not)
        fdef = _OwnSyncs().visit(fdef)
    elif walk:
        fdef.body, _ = _Syncer(ctx, tainted=tainted, tensors=tensors,
                               views=tensor_views(fdef, ctx), thread_names=thread_names(fdef),
                               threads=ctx.plan.launch_threads or ctx.threads
                               ).block(fdef.body, (set(), set()))
    if users is not None:
        users.named.check_ids(fdef)       # against the ids the walk gave its barriers
    return fdef


class _OwnSyncs(syntax.NodeTransformer):
    """With no walk: each ``T.sync_threads()`` of the kernel (and of the front end's
    block reductions) is the block's barrier; inside a warpgroup role, the role's; in the
    consumers of a warp-specialized pipeline (``warp_specialize.py``), theirs, as the walk
    makes them."""

    def __init__(self):
        self.sync = (SYNC, ())

    def visit_If(self, node):
        role = getattr(node, ROLE_ATTR, None)
        if role is None and not getattr(node, WS_ATTR, False):
            return self.generic_visit(node)
        outer = self.sync
        if role is not None:
            self.sync = (SYNC_ROLE, (role,))
            node.body = [self.visit(s) for s in node.body]
        else:
            self.sync = (SYNC_CONSUMERS, ())
            node.orelse = [self.visit(s) for s in node.orelse]
        self.sync = outer
        return node

    def visit_Expr(self, node):
        if not _is_call(node, _USER_SYNC):
            return node
        return _sync_stmt(node, *self.sync)
