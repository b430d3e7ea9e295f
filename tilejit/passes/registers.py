"""Pass: the fragments and local tiles of a thread must fit its registers, or spill to
local memory within a bound.

After layout inference every fragment has its slots per thread (in a kernel with
``T.ws`` roles, those of the role holding the most: each role's branch touches its own).
A thread has at most
``Target.max_registers_per_thread`` 32-bit registers (255 on every CUDA arch). Tiles that
need more still run: ptxas spills what does not fit to local memory (per-thread stack,
cached in L1), slowly, as TileLang's kernels do; such a kernel compiles with a
``RegisterSpillWarning`` naming each tile's share. Past ``SPILL_LIMIT`` words per thread
(8 KiB) it is a ``CompileError`` before lowering: at the sizes that get there by mistake
(a 1024×1024 float32 fragment at 128 threads is 8192 words per thread) LLVM and ptxas
take minutes (measured on the CPU machine, sm_90a: 640 words 0.6 s, 1152 words 2.9 s,
2304 words 7.6 s, 8192 words 17 minutes). The simulator applies the same rules as the
GPU, so what would not compile does not simulate either.
"""
from __future__ import annotations

import ast
import math
import warnings

from tilejit import syntax
from tilejit.ir.markers import ROLE_ATTR
from tilejit.ir.plan import FRAGMENT, LOCAL

# the register file per thread on every CUDA arch; the simulator uses the same
MAX_REGISTERS = 255
# 32-bit words of tiles per thread beyond which a kernel is refused, registers included
SPILL_LIMIT = 2048


class RegisterSpillWarning(UserWarning):
    """A kernel's tiles need more registers than a thread has: the rest lives in local
    memory, and every access of it is a load or store."""


def _role_shares(fdef, plan):
    """The tiles a thread holds at once: all of them, or in a kernel with ``T.ws`` roles
    those of the role that holds the most (all but the fragments only other roles'
    branches name)."""
    shares = plan.register_shares()
    roles = [n for n in syntax.walk(fdef) if isinstance(n, ast.If)
             and getattr(n, ROLE_ATTR, None) is not None]
    if not plan.role_threads or not roles:
        return shares
    named = [{n.id for n in syntax.walk(r) if isinstance(n, ast.Name)} for r in roles]
    best = []
    for k in range(len(roles)):
        others = set().union(*(names for j, names in enumerate(named) if j != k)) - named[k]
        # a tile only the other roles name is theirs; every other one (this role's, the
        # block's, a tile the passes made) counts
        mine = [(n, t) for n, t in shares if t.name not in others]
        if sum(n for n, _ in mine) > sum(n for n, _ in best):
            best = mine
    return best


def check_register_floor(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    """Before any layout is built: the fewest words a thread could hold of its fragments
    (spread evenly over the block's threads) and local tiles. Past the spill limit the
    kernel is refused at once, not after layout inference has listed every element of a
    fragment sized by mistake (a (8192, 8192) one)."""
    plan = ctx.plan
    limit = MAX_REGISTERS if ctx.target.is_sim else ctx.target.max_registers_per_thread
    threads = max(plan.threads or 1, 1)
    shares = []
    for t in plan.tiles.values():
        if t.view_of:
            continue
        if t.kind == FRAGMENT:
            shares.append((-(-math.prod(t.shape) * t.dtype.itemsize // (4 * threads)), t))
        elif t.kind == LOCAL:
            shares.append((-(-t.nbytes // 4), t))
    words = sum(n for n, _ in shares)
    if words <= max(SPILL_LIMIT, limit):
        return fdef
    shares = sorted(shares, key=lambda s: -s[0])
    detail = ", ".join(f"{t.name} {t.kind} {'x'.join(map(str, t.shape))} {t.dtype.name}: "
                       f"{n}" for n, t in shares if n)
    line = min((t.line for _, t in shares if t.line), default=None)
    raise ctx.error(f"the kernel's fragments and local tiles need at least {words} 32-bit "
                    f"registers per thread ({detail}; a fragment spread evenly over the "
                    f"{threads} threads); a thread has at most {limit} registers, and tilejit "
                    f"spills at most {SPILL_LIMIT} words of tiles to local memory: use more "
                    f"threads (T.Kernel(threads=...)) or smaller tiles", line)


def check_registers(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    plan = ctx.plan
    limit = MAX_REGISTERS if ctx.target.is_sim else ctx.target.max_registers_per_thread
    shares = _role_shares(fdef, plan)
    words = sum(n for n, _ in shares)
    if words <= limit:
        return fdef
    shares = sorted(shares, key=lambda s: -s[0])
    detail = ", ".join(f"{t.name} {t.kind} {'x'.join(map(str, t.shape))} {t.dtype.name}: {n}"
                       for n, t in shares if n)
    line = min((t.line for _, t in shares if t.line), default=None)
    need = f"the kernel's fragments and local tiles need {words} 32-bit registers per thread "
    whole = _held_whole(shares, plan.threads, plan.whole_by_use)
    if words > max(SPILL_LIMIT, limit):
        raise ctx.error(f"{need}({detail}); a thread has at most {limit} registers, and "
                        f"tilejit spills at most {SPILL_LIMIT} words of tiles to local memory: "
                        + (whole or "use more threads (T.Kernel(threads=...)) or smaller "
                           "tiles"), line)
    where = ctx.error(f"{need}({detail}); a thread has {limit}: the rest is spilled to local "
                      f"memory, and every access of it is a memory access. " + (
                          _own_scratch(shares) or whole or "More threads "
                          "(T.Kernel(threads=...)) or smaller tiles keep them in registers"),
                      line)
    # reported at the kernel's line (its file), not at the compiler's frame
    warnings.warn_explicit(where.bare_message, RegisterSpillWarning,
                           where.filename or "<kernel>", where.lineno or 0)
    return fdef


def _own_scratch(shares) -> str | None:
    """The advice where the largest share is tilejit's own: the thread all-reduce's
    per-thread copy of its group's values (``frontend/thread_allreduce.py``), which more
    threads make larger, not smaller; None otherwise."""
    n, t = shares[0]
    if not t.name.startswith("__tj_allreduce"):
        return None
    return (f"The largest is T.tvm_thread_allreduce's own scratch ({n} words: every thread "
            f"folds a copy of its group's values), which grows with the threads it reduces "
            f"over: an all-reduce over fewer threads, or T.reduce_sum / T.reduce_max over a "
            f"fragment, keeps it in registers")


def _held_whole(shares, threads, by_use=frozenset()) -> str | None:
    """The advice where a fragment over several threads is held whole by every one (its
    extents have no split over the threads: an odd row width, 1 × 2049; or only serial
    code indexes it, ``by_use``): more threads do not shrink it; None where none is."""
    whole = [t for n, t in shares if n and threads > 1 and t.kind == "fragment"
             and t.indexing is not None and t.indexing.slots >= math.prod(t.shape) > 1]
    if not whole:
        return None
    serial = [t for t in whole if t.name in by_use]
    if serial:
        names = ", ".join(f"{t.name} {'x'.join(map(str, t.shape))}" for t in serial)
        return (f"every thread holds all of {names}: only serial code indexes it (outside "
                f"T.Parallel loops and tile operations), so each thread runs that code on "
                f"its own copy, as TileLang's floating fragments; index it in T.Parallel "
                f"loops over its shape to spread it over the threads")
    names = ", ".join(f"{t.name} {'x'.join(map(str, t.shape))}" for t in whole)
    return (f"every thread holds all of {names} (its extents split over no group of the "
            f"block's threads, so more threads do not shrink it): give it extents of "
            f"power-of-two factors (pad the odd width), or stage it in shared memory")
