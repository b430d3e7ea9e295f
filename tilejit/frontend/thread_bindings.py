"""TileLang's thread and block bindings in a kernel's body (``language/threads.py``),
rewritten into the thread and block indices, for the GPU and the simulator alike.

The block is one-dimensional on the device (``threads=(x, y, z)`` multiplies out), so
the thread index along each of T.Kernel's dimensions is computed from the flat one,
``__tj_thread_index()``, x fastest:

- ``T.get_thread_binding(0)`` → ``t % x`` (``t`` itself when ``threads`` is one number),
  ``(1)`` → ``t // x % y``, ``(2)`` → ``t // (x * y)``; a dimension T.Kernel does not
  give is 0. ``T.get_thread_bindings()`` is the tuple of the three.
- ``T.get_thread_extent(d)`` → T.Kernel's extent along d (1 past those it gives).
  ``threads=`` given as a name or an expression stands for one number: dimensions 1
  and 2 need the tuple written in ``T.Kernel(..., threads=(x, y))`` (a CompileError).
- ``T.get_block_binding(d)`` → ``__tj_block_index(d)``; ``T.get_block_extent(d)`` →
  ``__tj_grid_dim(d)``.
- ``T.get_lane_idx(ws)`` → ``t % ws``, ``T.get_warp_idx(ws)`` (and ``_sync``) → ``t // ws``,
  ``T.get_warp_group_idx(ws, n)`` → ``t // (ws * n)`` (n 4 by default), of the flat
  thread index; ``ws`` not given is the target's warp size, ``__tj_warp_size()``.
- ``T.thread_binding(start, stop, thread="threadIdx.y")`` → ``start + <index along y>``
  (``"blockIdx.y"``: the block's index); as a loop, ``for tx in T.thread_binding(...):
  body`` → ``tx = start + <index>`` and ``if tx < stop: body``.

The thread index makes the code after it per-thread: the simulator then runs the block
lane-wise (``sim/threads.py``), and element atomics outside a ``T.Parallel`` are done by
every thread (``tile_operands.py``), as TileLang's statements are.
"""
from __future__ import annotations

import ast
import copy

from tilejit import syntax
from tilejit.frontend.source import (KernelSource, assigned_names, bound_arguments, kernel_call,
                                     resolve_static)
from tilejit.errors import ValueCompileError
from tilejit.ir.markers import BLOCK_INDEX, GRID_DIM, THREAD_INDEX, WARP_SIZE
from tilejit.language import threads as TH


def _call(name, args=()):
    return ast.Call(ast.Name(name, ast.Load()), list(args), [])


def _binop(a, op, b):
    return ast.BinOp(a, op, b)


def _int_tuple(value) -> bool:
    return isinstance(value, (tuple, list)) and 1 <= len(value) <= 3 and all(
        isinstance(n, int) and not isinstance(n, bool) for n in value)


class _Bindings(syntax.NodeTransformer):
    def __init__(self, ks: KernelSource):
        self.ks = ks
        launch = kernel_call(ks)
        self.grid = len(launch.args)
        threads = next((k.value for k in launch.keywords if k.arg == "threads"), None)
        self.written = True     # threads= is a number or a tuple written in T.Kernel
        if threads is None:
            self.dims, self.flat = [ast.Constant(128)], True
        elif isinstance(threads, (ast.Tuple, ast.List)):
            self.dims, self.flat = list(threads.elts), len(threads.elts) == 1
        elif isinstance(threads, ast.Name) and _int_tuple(ks.namespace.get(threads.id)):
            # threads=threads, a tuple of the program's (a closure's or a global's)
            value = ks.namespace[threads.id]
            self.dims, self.flat = [ast.Constant(int(n)) for n in value], len(value) == 1
        elif isinstance(threads, ast.Name) and _int_tuple((ks.namespace.get(threads.id),)):
            # threads=threads, a number of the program's: (n, 1, 1), as TileLang takes it
            self.dims, self.flat = [ast.Constant(int(ks.namespace[threads.id]))], True
        else:
            # a name or an expression: one number (a tuple's parts are not known here)
            self.dims, self.flat, self.written = [threads], True, False

    def error(self, message, node):
        return self.ks.error(message, node)

    # -- the indices -----------------------------------------------------------------
    def _dim(self, node, what, limit=3):
        value = None
        if node is not None:
            try:
                value = ast.literal_eval(node)
            except ValueError:
                pass
        else:
            value = 0
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < limit:
            raise self.error(f"T.{what}: the dimension must be 0, 1 or 2 written as a "
                             f"number, got {ast.unparse(node)}", node)
        return value

    def _multi(self, dim, node):
        if dim and not self.written:
            raise self.error(f"the thread index along dimension {dim} needs T.Kernel's "
                             "threads= written as a tuple, threads=(x, y) or (x, y, z) (a "
                             "name or an expression stands for one number of threads)",
                             node)

    def thread_index(self, dim):
        t = _call(THREAD_INDEX)
        if self.flat:
            return t if dim == 0 else ast.Constant(0)
        if dim >= len(self.dims):
            return ast.Constant(0)
        x = copy.deepcopy(self.dims[0])
        if dim == 0:
            return _binop(t, ast.Mod(), x)
        if dim == 1:
            return _binop(_binop(t, ast.FloorDiv(), x), ast.Mod(), copy.deepcopy(self.dims[1]))
        return _binop(t, ast.FloorDiv(), _binop(x, ast.Mult(), copy.deepcopy(self.dims[1])))

    def thread_extent(self, dim):
        if dim < len(self.dims):
            return copy.deepcopy(self.dims[dim])
        return ast.Constant(1)

    def _binding(self, node):
        """(start, stop, index expression, whether it is a thread's) of a
        ``T.thread_binding(start, stop, thread=...)`` call."""
        args = list(node.args)
        kw = {k.arg: k.value for k in node.keywords}
        for name in ("start", "stop", "thread"):
            if name in kw:
                args += [None] * (("start", "stop", "thread").index(name) + 1 - len(args))
                args[("start", "stop", "thread").index(name)] = kw.pop(name)
        kw.pop("annotations", None)
        if kw or not args or len(args) > 3:
            raise self.error("T.thread_binding(start, stop, thread=\"threadIdx.x\") takes "
                             "the range and the thread axis", node)
        start, stop, thread = (args + [None] * 3)[:3]
        if thread is None and isinstance(stop, ast.Constant) and isinstance(stop.value, str):
            stop, thread = None, stop           # TVM's T.thread_binding(n, "threadIdx.x")
        if stop is None:
            start, stop = ast.Constant(0), start
        axis = thread.value if isinstance(thread, ast.Constant) else None
        if axis in TH.THREAD_AXES:
            self._multi(TH.THREAD_AXES[axis], node)
            index, of_thread = self.thread_index(TH.THREAD_AXES[axis]), True
        elif axis in TH.BLOCK_AXES:
            index, of_thread = _call(BLOCK_INDEX, [ast.Constant(TH.BLOCK_AXES[axis])]), False
        else:
            raise self.error(f"T.thread_binding: thread= names the axis as a string, "
                             f"\"threadIdx.x\" … \"threadIdx.z\" or \"blockIdx.x\" … "
                             f"\"blockIdx.z\"; got {ast.unparse(thread) if thread else None}",
                             node)
        if not (isinstance(start, ast.Constant) and start.value == 0):
            index = _binop(start, ast.Add(), index)
        return start, stop, index, of_thread

    # -- the rewrite -----------------------------------------------------------------
    def visit_For(self, node):
        it = node.iter
        if not (isinstance(it, ast.Call)
                and resolve_static(it.func, self.ks.namespace) is TH.thread_binding):
            return self.generic_visit(node)
        if not isinstance(node.target, ast.Name) or node.orelse:
            raise self.error("`for tx in T.thread_binding(...)` binds one name and has no "
                             "else clause", node)
        _, stop, index, of_thread = self._binding(it)
        bind = ast.copy_location(ast.Assign([ast.Name(node.target.id, ast.Store())],
                                            self.visit(index)), node)
        body = []
        for s in node.body:
            r = self.visit(s)
            body.extend(r if isinstance(r, list) else [r])
        if not of_thread:
            return [bind] + body
        test = ast.Compare(ast.Name(node.target.id, ast.Load()), [ast.Lt()],
                           [self.visit(stop)])
        return [bind, ast.copy_location(ast.If(test, body, []), node)]

    def visit_Call(self, node):
        node = self.generic_visit(node)
        fn = resolve_static(node.func, self.ks.namespace)
        if fn is None or getattr(fn, "__module__", None) != TH.__name__:
            return node
        name = fn.__name__
        if fn is TH.thread_binding:
            return ast.copy_location(self._binding(node)[2], node)
        if name in _WARP_INDICES:
            return ast.copy_location(self._warp_index(name, node), node)
        if name.endswith("s"):      # the plural forms take no argument
            if node.args or node.keywords:
                raise self.error(f"T.{name}() takes no arguments", node)
            count = 3 if "thread" in name else self.grid
            if "thread" in name:
                self._multi(1, node)
            one = getattr(self, name[:-1].replace("get_", "_one_"))
            return ast.copy_location(ast.Tuple([one(d) for d in range(count)], ast.Load()),
                                     node)
        arg = node.args[0] if node.args else next(
            (k.value for k in node.keywords if k.arg == "dim"), None)
        if len(node.args) + len(node.keywords) > 1:
            raise self.error(f"T.{name}(dim=0) takes one dimension", node)
        limit = 3 if "thread" in name else self.grid
        dim = self._dim(arg, name, max(limit, 1))
        if "thread" in name:
            self._multi(dim, node)
        return ast.copy_location(getattr(self, name.replace("get_", "_one_"))(dim), node)

    def _warp_index(self, name, node):
        """``T.get_lane_idx(warp_size)``: the linear thread index modulo the warp size;
        ``T.get_warp_idx(_sync)(warp_size)``: divided by it; ``T.get_warp_group_idx(
        warp_size, warps_per_group)``: divided by their product (4 warps by default)."""
        params = _WARP_INDICES[name]
        if len(node.args) > len(params):
            raise self.error(f"T.{name}({', '.join(params)}) takes at most {len(params)} "
                             f"argument(s), got {len(node.args)}", node)
        given = bound_arguments(node, params, lambda arg: self.error(
            f"T.{name}: unexpected argument {arg!r} (it takes {', '.join(params)})", node))
        given = {k: v for k, v in given.items() if not self._none(v)}
        if "warps_per_group" in given and "warp_size" not in given:
            e = self.error(f"T.{name}: warps_per_group needs warp_size (TileLang's rule)",
                           node)
            raise ValueCompileError(e.bare_message, e.filename, e.lineno)   # TileLang's too
        size = given.get("warp_size", _call(WARP_SIZE))
        t = _call(THREAD_INDEX)
        if name == "get_lane_idx":
            return _binop(t, ast.Mod(), size)
        if name == "get_warp_group_idx":
            size = _binop(size, ast.Mult(), given.get("warps_per_group", ast.Constant(4)))
        return _binop(t, ast.FloorDiv(), size)

    def _none(self, node) -> bool:
        """Whether an argument is None: written so, or a name (or attribute) the program
        holds None in (a factory's ``warp_size=None``) that the kernel does not assign."""
        if isinstance(node, ast.Constant):
            return node.value is None
        namespace = self.ks.namespace
        if isinstance(node, ast.Name):
            return node.id in namespace and namespace[node.id] is None and \
                node.id not in assigned_names(self.ks.tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, (ast.Name,
                                                                       ast.Attribute)):
            base = resolve_static(node.value, namespace)
            return base is not None and hasattr(base, node.attr) and \
                getattr(base, node.attr) is None
        return False

    def _one_thread_binding(self, dim):
        return self.thread_index(dim)

    def _one_thread_extent(self, dim):
        return self.thread_extent(dim)

    def _one_block_binding(self, dim):
        return _call(BLOCK_INDEX, [ast.Constant(dim)])

    def _one_block_extent(self, dim):
        return _call(GRID_DIM, [ast.Constant(dim)])


_WARP_INDICES = {"get_lane_idx": ("warp_size",), "get_warp_idx": ("warp_size",),
                 "get_warp_idx_sync": ("warp_size",),
                 "get_warp_group_idx": ("warp_size", "warps_per_group")}


def uses_bindings(ks: KernelSource, tree: ast.AST | None = None) -> bool:
    """Whether the kernel's source (or ``tree``, a rewritten form of it) names any of
    the bindings."""
    for node in syntax.walk(ks.tree if tree is None else tree):
        if isinstance(node, (ast.Attribute, ast.Name)):
            fn = resolve_static(node, ks.namespace)
            if callable(fn) and getattr(fn, "__module__", None) == TH.__name__:
                return True
    return False


def rewrite_thread_bindings(fdef: ast.FunctionDef, ks: KernelSource) -> ast.FunctionDef:
    """``fdef`` (the device program) with its thread and block bindings rewritten."""
    if not uses_bindings(ks, fdef):
        return fdef
    return _Bindings(ks).visit(fdef)
