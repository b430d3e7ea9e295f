"""``TensorCoreIntrinEmitter``'s methods in a kernel's body, expanded into per-thread code
(``language/mma_emitter.py``), for the GPU and the simulator alike.

``E.ldmatrix_a(A_local, A_shared, ki)`` (E a global or closure value that is an emitter)
becomes, per row tile ``i`` of the warp, one ``__tj_ldmatrix(A_local, i * local_size_a,
A_shared, row, col, 4, trans)`` whose ``row, col`` is this lane's row address: lane ``L``
of ``ldmatrix.x4`` addresses row ``L % 8`` of 8 x 8 matrix ``q = L // 8`` (PTX ISA
"Warp-level matrix load instruction: ldmatrix"), and matrix ``q`` lands in registers
``q`` of every lane. The A fragment's register ``q`` (a_{2q}, a_{2q+1}) covers rows ``8·(q
% 2)`` and k ``8·(q // 2)`` of the 16 x 16 tile (16 bytes of k per matrix row: 16 int8),
B's register ``q`` of a 16-column tile k ``8·(q % 2)`` and columns ``8·(q // 2)``
(PTX "Matrix Fragments for mma.m16n8k16"). An operand stored the other way round (A as
(K, M), B as (K, N)) is read with ``.trans``, its lanes addressing rows of k; for int8,
which ``.trans`` cannot move (it transposes 16-bit elements), such an operand is read
element by element into the fragment's slots, as TileLang falls back.

``E.mma(A, B, C)`` becomes ``__tj_mma_sync`` per (row tile, 16 x 8 column half);
``E.stmatrix(C_local, C)`` the stores of each accumulator to its (row, col) of PTX's C
fragment. The thread index is ``thread_binding=`` where given, else
``__tj_thread_index()`` (which makes the simulator run the block lane-wise).

An emitter built in the kernel's prologue (``E = TensorCoreIntrinEmitter(...)`` before
``with T.Kernel``, as TileLang's eager-style examples write it) is built here, once per
specialization: the prologue's assignments before it are run as Python on the
compile-time values (constexpr parameters, globals, constants; a compile-time ``if``
takes its branch), the construction statement leaves the device program, and reads of
the emitter's fields (``E.threads``) become constants. One whose arguments are not
compile-time values is a CompileError at its line saying to build it outside the kernel.
"""
from __future__ import annotations

import ast
import copy
import inspect

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import resolve_static
from tilejit.ir.markers import DISJOINT_STORES_ATTR, LDMATRIX, MMA_SYNC, THREAD_INDEX
from tilejit.language.mma_emitter import TensorCoreIntrinEmitter

_METHODS = ("ldmatrix_a", "ldmatrix_b", "mma", "stmatrix")
_ALLOCS = (T.alloc_shared, T.alloc_fragment, T.alloc_local)
_TX, _KI, _RK = "__tj_mma_tx", "__tj_mma_ki", "__tj_mma_rk"


def expand_emitter_calls(fdef: ast.FunctionDef, namespace: dict, error,
                         constants: dict | None = None) -> ast.FunctionDef:
    """``fdef`` with each statement calling an emitter's method replaced by its code;
    ``error(message, node)`` makes the CompileError at the kernel's line. ``constants``:
    the specialization's compile-time values (constexpr parameters), which an emitter
    built in the prologue may read."""
    built = _prologue_constructions(fdef, namespace)
    if not built and not any(isinstance(v, TensorCoreIntrinEmitter)
                             for v in namespace.values()):
        return fdef
    local, values = _run_prologue(fdef, built, namespace, constants, error) if built else (
        {}, {})
    return _Expand(fdef, namespace, error, local, values).visit(fdef)


def builds_emitter_in_prologue(fdef: ast.FunctionDef, namespace: dict) -> bool:
    """Whether the kernel builds a ``TensorCoreIntrinEmitter`` before ``with T.Kernel``
    (its code then depends on the specialization's compile-time values)."""
    return bool(_prologue_constructions(fdef, namespace))


def _prologue(fdef):
    """The statements before the first ``with`` (``T.Kernel``)."""
    out = []
    for stmt in fdef.body:
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            break
        out.append(stmt)
    return out


def _is_emitter_class(value) -> bool:
    return isinstance(value, type) and issubclass(value, TensorCoreIntrinEmitter)


def _prologue_constructions(fdef, namespace) -> list:
    """The prologue's ``name = TensorCoreIntrinEmitter(...)`` statements (also under an
    ``if``)."""
    out = []
    for stmt in _prologue(fdef):
        for node in syntax.walk(stmt):
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                    and _is_emitter_class(resolve_static(node.value.func, namespace))):
                out.append(node)
    return out


def _run_prologue(fdef, built, namespace, constants, error) -> tuple[dict, dict]:
    """({name: emitter} of the emitters the prologue builds, the prologue's compile-time
    values by name), computed from the compile-time values; the emitters' construction
    statements removed from ``fdef``."""
    env = dict(namespace)
    env.update(constants or {})
    for a in fdef.args.args:    # run-time parameters shadow any global of their name
        if a.arg not in (constants or {}):
            env.pop(a.arg, None)
    unknown: set = set()        # names whose value is not a compile-time one
    emitters: dict = {}         # name -> (emitter, its statement)
    untaken: list = []          # the branches of compile-time `if`s not taken
    constructions = {id(n) for n in built}

    def run(stmts):
        for stmt in stmts:
            if isinstance(stmt, ast.If):
                try:
                    taken = _evaluate(stmt.test, env, unknown)
                except _NotCompileTime as e:
                    inside = [n for n in syntax.walk(stmt) if id(n) in constructions]
                    if inside:
                        raise error(_not_compile_time(inside[0], f"the `if` around it: {e}"),
                                    inside[0]) from None
                    _forget(stmt, env, unknown)
                    continue
                run(stmt.body if taken else stmt.orelse)
                untaken.extend(stmt.orelse if taken else stmt.body)
                continue
            if not isinstance(stmt, ast.Assign):
                if not isinstance(stmt, (ast.Assert, ast.Expr, ast.Pass, ast.AnnAssign)):
                    _forget(stmt, env, unknown)
                continue
            try:
                value = _evaluate(stmt.value, env, unknown)
            except _NotCompileTime as e:
                if id(stmt) in constructions:
                    raise error(_not_compile_time(stmt, e), stmt) from None
                _forget(stmt, env, unknown)
                continue
            except Exception as e:      # the emitter's own checks: TileLang's ValueError
                if id(stmt) in constructions:
                    raise error(f"{type(e).__name__}: {e}", stmt) from None
                _forget(stmt, env, unknown)
                continue
            for target in stmt.targets:
                _bind(target, value, env, unknown)
            if id(stmt) in constructions:
                name = stmt.targets[0].id if (len(stmt.targets) == 1 and isinstance(
                    stmt.targets[0], ast.Name)) else None
                emitters[name] = (value, stmt)

    run(_prologue(fdef))
    skipped = {id(n) for stmt in untaken for n in syntax.walk(stmt)}
    stores: dict = {}           # the stores of each name the kernel may run
    for node in syntax.walk(fdef):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) \
                and id(node) not in skipped:
            stores[node.id] = stores.get(node.id, 0) + 1
    for name, (_, stmt) in emitters.items():
        if name is None or stores.get(name) != 1:
            raise error("a TensorCoreIntrinEmitter built in the kernel must be assigned to "
                        "one name, once (`mma_emitter = TensorCoreIntrinEmitter(...)`), or "
                        "be created outside the kernel", stmt)
    emitters = {name: value for name, (value, _) in emitters.items()}
    _RemoveStatements(constructions).visit(fdef)
    values = {k: v for k, v in env.items()
              if k not in namespace or namespace[k] is not v}
    return emitters, values


class _NotCompileTime(Exception):
    pass


def _not_compile_time(stmt, e) -> str:
    why = f" ({e})" if e else ""
    return ("TensorCoreIntrinEmitter(...) built in the kernel needs compile-time arguments "
            f"(constexpr parameters, globals, constants){why}: create the emitter outside "
            "the kernel, or from compile-time values only")


def _evaluate(expr, env, unknown):
    """``expr``'s value; a name read that has no compile-time value (a run-time parameter,
    a name an unknown statement bound) is ``_NotCompileTime``."""
    try:
        return eval(compile(ast.Expression(expr), "<prologue>", "eval"), env)
    except NameError as e:
        raise _NotCompileTime(f"`{e.name}` is not a compile-time value") from None


def _bind(target, value, env, unknown):
    if isinstance(target, ast.Name):
        env[target.id] = value
        unknown.discard(target.id)
    elif isinstance(target, (ast.Tuple, ast.List)):
        try:
            values = list(value)
        except TypeError:
            values = None
        if values is None or len(values) != len(target.elts):
            _forget(target, env, unknown)
            return
        for t, v in zip(target.elts, values):
            _bind(t, v, env, unknown)
    else:
        _forget(target, env, unknown)


def _forget(node, env, unknown):
    for n in syntax.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            env.pop(n.id, None)
            unknown.add(n.id)


class _RemoveStatements(syntax.NodeTransformer):
    def __init__(self, ids):
        self.ids = ids

    def visit_Assign(self, node):
        if id(node) in self.ids:
            return ast.copy_location(ast.Pass(), node)
        return node


class _Expand(syntax.NodeTransformer):
    def __init__(self, fdef, namespace, error, local, values):
        self.namespace, self.error = namespace, error
        self.local = local              # emitters built in the prologue, by name
        self.ranks = _tile_ranks(fdef, {**namespace, **values})
        self.stores = 0         # the stmatrix calls expanded: one run of stores each

    def _emitter_of(self, node):
        if isinstance(node, ast.Name) and node.id in self.local:
            return self.local[node.id]
        emitter = resolve_static(node, self.namespace)
        return emitter if isinstance(emitter, TensorCoreIntrinEmitter) else None

    def _emitter_call(self, node):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            return None
        return self._emitter_of(node.func.value)

    def visit_Attribute(self, node):
        # a field of an emitter built in the prologue: its compile-time value
        if isinstance(node.value, ast.Name) and node.value.id in self.local \
                and isinstance(node.ctx, ast.Load):
            value = getattr(self.local[node.value.id], node.attr, None)
            if value is None or type(value) not in (int, bool, str, float):
                raise self.error(f"{node.value.id}.{node.attr}: a TensorCoreIntrinEmitter "
                                 "built in the kernel is read in it by its int, bool and "
                                 "str fields, and its methods called as statements", node)
            return ast.copy_location(ast.Constant(value), node)
        return self.generic_visit(node)

    def visit_Expr(self, node):
        emitter = self._emitter_call(node.value)
        if emitter is None:
            return self.generic_visit(node)
        call = node.value
        method = call.func.attr
        if method not in _METHODS:
            raise self.error(f"TensorCoreIntrinEmitter.{method} is not built in a kernel "
                             f"(the emitter's kernel methods are {', '.join(_METHODS)})",
                             node)
        try:
            bound = inspect.signature(getattr(TensorCoreIntrinEmitter, method)).bind(
                emitter, *call.args, **{k.arg: k.value for k in call.keywords})
        except TypeError as e:
            raise self.error(f"TensorCoreIntrinEmitter.{method}: {e}", node) from None
        args = dict(bound.arguments)
        del args["self"]
        out = getattr(self, "_" + method)(emitter, node, args)
        for stmt in out:
            _locate(stmt, node)
        return out

    def visit_Call(self, node):
        emitter = self._emitter_call(node)
        if emitter is not None and node.func.attr in _METHODS:
            raise self.error(f"TensorCoreIntrinEmitter.{node.func.attr}(...) is a statement "
                             "of its own (it returns nothing)", node)
        return self.generic_visit(node)

    # -- the thread's position ------------------------------------------------------------
    @staticmethod
    def _tx(args):
        binding = args.get("thread_binding")
        if binding is None or (isinstance(binding, ast.Constant) and binding.value is None):
            return ast.Call(ast.Name(THREAD_INDEX, ast.Load()), [], [])
        return binding

    @staticmethod
    def _warp(e):
        """(lane, warp_m, warp_n) as source text over ``_TX``."""
        lane = f"({_TX} % 32)"
        if e.is_m_first:
            warp_n = f"({_TX} // 32 % {e.block_col_warps})"
            warp_m = f"({_TX} // {32 * e.block_col_warps} % {e.block_row_warps})"
        else:
            warp_m = f"({_TX} // 32 % {e.block_row_warps})"
            warp_n = f"({_TX} // {32 * e.block_row_warps} % {e.block_col_warps})"
        return lane, warp_m, warp_n

    def _subs(self, args):
        return {_TX: self._tx(args), _KI: args["ki"], _RK: args.get("rk", ast.Constant(0))}

    # -- the methods ------------------------------------------------------------------
    def _ldmatrix_a(self, e, node, args):
        lane, warp_m, _ = self._warp(e)
        per_row = 16 // (1 if e.a_dtype == "int8" else 2)         # elements in 16 bytes
        k0 = f"({_RK} * {e.chunk} + {_KI} * {e.micro_size_k})"
        out = []
        for i in range(e.warp_rows):
            m0 = f"({warp_m} * {e.warp_row_tiles} + {i * 16})"
            if e.a_dtype == "int8" and e.a_transposed:
                # ldmatrix's .trans moves 16-bit elements only: A (K, M) of int8 is read
                # element by element into PTX's m16n8k32 A fragment (as TileLang falls
                # back): a_s at row groupID + 8·(s // 4 % 2), k 4·(lane % 4) + s % 4 +
                # 16·(s // 8)
                for s_ in range(e.local_size_a):
                    row = f"{m0} + {lane} // 4 + {8 * (s_ // 4 % 2)}"
                    col = f"{k0} + {lane} % 4 * 4 + {s_ % 4 + 16 * (s_ // 8)}"
                    out.append(self._element_load(args["A_local_buf"],
                                                  i * e.local_size_a + s_,
                                                  args["A_shared_buf"], col, row, args))
                continue
            if e.a_transposed:      # (K, M): lanes address rows of k, .trans
                row = f"{k0} + {lane} // 16 * {per_row} + {lane} % 8"
                col = f"{m0} + {lane} // 8 % 2 * 8"
            else:
                row = f"{m0} + {lane} % 16"
                col = f"{k0} + {lane} // 16 * {per_row}"
            out.append(self._ldmatrix_stmt(args["A_local_buf"], i * e.local_size_a,
                                           args["A_shared_buf"], row, col, 4, e.a_transposed,
                                           args))
        return out

    def _ldmatrix_b(self, e, node, args):
        lane, _, warp_n = self._warp(e)
        per_row = 16 // (1 if e.b_dtype == "int8" else 2)
        k0 = f"({_RK} * {e.chunk} + {_KI} * {e.micro_size_k})"
        count = 4 if e.n_dim == 16 else 2
        out = []
        for j in range(e.warp_cols):
            n0 = f"({warp_n} * {e.warp_col_tiles} + {j * e.n_dim})"
            if e.b_dtype == "int8" and not e.b_transposed:
                # B (K, N) of int8, element by element into PTX's m16n8k32 B fragment of
                # each 8-column half: b_s at k 4·(lane % 4) + s % 4 + 16·(s // 4), column
                # groupID
                half = e.local_size_b * 8 // e.n_dim
                for s_ in range(e.local_size_b):
                    h, b = divmod(s_, half)
                    row = f"{k0} + {lane} % 4 * 4 + {b % 4 + 16 * (b // 4)}"
                    col = f"{n0} + {8 * h} + {lane} // 4"
                    out.append(self._element_load(args["B_local_buf"],
                                                  j * e.local_size_b + s_,
                                                  args["B_shared_buf"], row, col, args))
                continue
            n_half = f"{lane} // 16 * 8" if count == 4 else "0"
            if e.b_transposed:      # (N, K): lanes address rows of n
                row = f"{n0} + {n_half} + {lane} % 8"
                col = f"{k0} + {lane} // 8 % 2 * {per_row}"
            else:                   # (K, N): rows of k, .trans
                row = f"{k0} + {lane} % 16"
                col = f"{n0} + {n_half}"
            out.append(self._ldmatrix_stmt(args["B_local_buf"], j * e.local_size_b,
                                           args["B_shared_buf"], row, col, count,
                                           not e.b_transposed, args))
        return out

    def _element_load(self, local, slot, shared, row, col, args):
        """``local[slot] = shared[row, col]``: one element of this lane's fragment."""
        subs = self._subs(args)
        value = ast.Subscript(copy.deepcopy(shared), ast.Tuple(
            [_expr(row, subs), _expr(col, subs)], ast.Load()), ast.Load())
        return ast.Assign([ast.Subscript(copy.deepcopy(local), ast.Constant(slot),
                                         ast.Store())], value)

    def _ldmatrix_stmt(self, local, offset, shared, row, col, count, trans, args):
        subs = self._subs(args)
        call = ast.Call(ast.Name(LDMATRIX, ast.Load()), [
            copy.deepcopy(local), ast.Constant(offset), copy.deepcopy(shared),
            _expr(row, subs), _expr(col, subs), ast.Constant(count), ast.Constant(trans)], [])
        return ast.Expr(call)

    def _mma(self, e, node, args):
        k_inner = args.get("k_inner")
        if k_inner is not None and not (isinstance(k_inner, ast.Constant)
                                        and k_inner.value == 0):
            raise self.error("TensorCoreIntrinEmitter.mma: k_inner offsets fragment operands, "
                             "which are not built; the operands are T.alloc_local arrays "
                             f"(got k_inner={ast.unparse(k_inner)})", node)
        a, b, c = args["A_local_buf"], args["B_local_buf"], args["C_local_buf"]
        halves = 2 if e.n_dim == 16 else 1
        out = []
        for i in range(e.warp_rows):
            for j in range(e.warp_cols):
                for h in range(halves):
                    c_off = (i * e.warp_cols + j) * e.local_size_out + h * e.local_size_out // 2
                    b_off = j * e.local_size_b + h * e.local_size_b // 2
                    out.append(ast.Expr(ast.Call(ast.Name(MMA_SYNC, ast.Load()), [
                        copy.deepcopy(c), ast.Constant(c_off), copy.deepcopy(a),
                        ast.Constant(i * e.local_size_a), copy.deepcopy(b),
                        ast.Constant(b_off)], [])))
        return out

    def _stmatrix(self, e, node, args):
        local, dst = args["C_local_buf"], args["C_buf"]
        pid_m, pid_n = args.get("pid_m"), args.get("pid_n")
        to_tensor = pid_m is not None and pid_n is not None
        if (pid_m is None) != (pid_n is None):
            raise self.error("TensorCoreIntrinEmitter.stmatrix: give both pid_m and pid_n "
                             "(a tensor's block tile) or neither (a shared tile)", node)
        rank = 2 if to_tensor else self.ranks.get(getattr(dst, "id", None))
        if rank not in (2, 4):
            what = ast.unparse(dst)
            got = f"a {rank}-d tile" if rank else "not a tile allocated in this kernel"
            raise self.error(f"TensorCoreIntrinEmitter.stmatrix: C_buf must be a tile shaped "
                             f"(M // 16, N // {e.n_dim}, 16, {e.n_dim}) or (M, N), or a "
                             f"tensor with pid_m= and pid_n=; {what} is {got}", node)
        lane, warp_m, warp_n = self._warp(e)
        self.stores += 1
        subs = {_TX: self._tx(args), "__tj_pid_m": pid_m, "__tj_pid_n": pid_n}
        rows_per_block = e.block_row_warps * e.warp_rows
        cols_per_block = e.block_col_warps * e.warp_cols
        out = []
        for i in range(e.warp_rows):
            for j in range(e.warp_cols):
                ti, tj = f"({warp_m} * {e.warp_rows} + {i})", f"({warp_n} * {e.warp_cols} + {j})"
                if to_tensor:
                    ti = f"(__tj_pid_m * {rows_per_block} + {ti})"
                    tj = f"(__tj_pid_n * {cols_per_block} + {tj})"
                for s in range(e.local_size_out):
                    # PTX's C fragment: c0, c1 at row groupID, c2, c3 at groupID + 8, columns
                    # 2 * threadID_in_group + (s & 1), the second 16 x 8 half 8 further
                    row = f"{8 * (s % 4 // 2)} + {lane} // 4"
                    col = f"{8 * (s // 4) + s % 2} + {lane} % 4 * 2"
                    if rank == 4:
                        index = f"{ti}, {tj}, {row}, {col}"
                    else:
                        index = f"{ti} * 16 + {row}, {tj} * {e.n_dim} + {col}"
                    target = ast.Subscript(copy.deepcopy(dst), _expr(f"({index})", subs),
                                           ast.Store())
                    value = ast.Subscript(copy.deepcopy(local), ast.Constant(
                        (i * e.warp_cols + j) * e.local_size_out + s), ast.Load())
                    store = ast.Assign([target], value)
                    setattr(store, DISJOINT_STORES_ATTR, self.stores)
                    out.append(store)
        return out


def _expr(text: str, subs: dict) -> ast.expr:
    tree = ast.parse(text, mode="eval").body
    return _Substitute(subs).visit(tree)


class _Substitute(syntax.NodeTransformer):
    def __init__(self, subs):
        self.subs = subs

    def visit_Name(self, node):
        if node.id in self.subs:
            return copy.deepcopy(self.subs[node.id])
        return node


def _locate(stmt, like):
    for n in syntax.walk(stmt):
        if "lineno" in n._attributes:
            n.lineno, n.end_lineno = like.lineno, like.end_lineno
            n.col_offset, n.end_col_offset = like.col_offset, like.end_col_offset


def _tile_ranks(fdef, namespace) -> dict:
    """{name: rank} of the tiles the kernel allocates with a shape whose length is known
    from the source: a tuple or list written out, or a compile-time global or closure
    value (an int is a 1-d shape)."""
    ranks = {}
    for node in syntax.walk(fdef):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Call)
                and node.value.args and resolve_static(node.value.func, namespace) in _ALLOCS):
            continue
        shape = node.value.args[0]
        if isinstance(shape, (ast.Tuple, ast.List)):
            ranks[node.targets[0].id] = len(shape.elts)
            continue
        value = resolve_static(shape, namespace)
        if isinstance(value, (tuple, list)):
            ranks[node.targets[0].id] = len(value)
        elif isinstance(value, int):
            ranks[node.targets[0].id] = 1
    return ranks
