"""TileLang's ``T.print`` in its full form, rewritten on the kernel's tree when it is parsed
(``source.parse_kernel``) into the one-number prints the compiler and the simulator run:

    T.print(obj=None, msg="", warp_group_id=0, warp_id=0)

- ``T.print(msg="hello")``: the message alone, from each thread that reaches it
  (``T.print("hello")``).
- ``T.print(value, msg)``: one number, from each thread that reaches it (keywords made
  positional; TileLang's default message ``expr<value's source>``).
- ``T.print(buffer, msg)`` of a tile or a tensor: every element with its index, in order,
  from one thread of the block (``warp_group_id * 128 + warp_id * 32``) for a shared tile,
  a fragment and a global tensor, from every thread for its own ``T.alloc_local``
  array. A fragment is first copied into a shared tile of its shape, as TileLang does.
  Each element becomes

      for i in T.serial(M):
          for j in T.serial(N):
              T.print_at(buf[i, j], "buffer<buf, float16>", lane, i, j)

  (TileLang prints a global tensor from every thread; here one thread prints it.)"""
from __future__ import annotations

import ast
import copy

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import KernelSource, resolve_static
from tilejit.language.dtypes import DType

_ALLOCATIONS = {T.alloc_shared: "shared", T.alloc_fragment: "fragment",
                T.alloc_local: "local"}
_PARAMETERS = ("obj", "msg", "warp_group_id", "warp_id")
PRINT_SCRATCH = "__tj_print"    # a fragment's shared copy for printing: its name's start


def _buffers(ks: KernelSource) -> dict:
    """{name: (kind, [extent expressions], dtype name or None, dtype expression)} of the
    kernel's tiles and annotated tensor parameters."""
    found = {}
    annotations = getattr(ks.func, "__annotations__", {}) or {}
    for name in ks.params:
        ann = annotations.get(name)
        if isinstance(ann, T.Tensor):
            shape = [ast.Subscript(ast.Attribute(ast.Name(name, ast.Load()), "shape",
                                                 ast.Load()), ast.Constant(d), ast.Load())
                     for d in range(len(ann.shape))]
            found[name] = ("global", shape, ann.dtype.name, None)
    for node in syntax.walk(ks.tree):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and
                isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Call)):
            continue
        kind = _ALLOCATIONS.get(resolve_static(node.value.func, ks.namespace))
        if kind is None or not node.value.args:
            continue
        shape = node.value.args[0]
        extents = list(shape.elts) if isinstance(shape, (ast.Tuple, ast.List)) else [shape]
        dtype = node.value.args[1] if len(node.value.args) > 1 else next(
            (k.value for k in node.value.keywords if k.arg == "dtype"), None)
        resolved = resolve_static(dtype, ks.namespace) if dtype is not None else None
        name = resolved.name if isinstance(resolved, DType) else (
            resolved if isinstance(resolved, str) else None)
        found[node.targets[0].id] = (kind, extents, name, dtype)
    return found


class _Prints(syntax.NodeTransformer):
    def __init__(self, ks: KernelSource, buffers: dict):
        self.ks = ks
        self.buffers = buffers
        self.scratch = []

    def visit_Expr(self, node):
        call = node.value
        if not (isinstance(call, ast.Call) and
                resolve_static(call.func, self.ks.namespace) is T.print):
            return node
        self.module = call.func.value if isinstance(call.func, ast.Attribute) else None
        args = self.bind(call)
        obj, msg = args.get("obj"), args.get("msg")
        text = self.constant(msg, str, "msg") if msg is not None else ""
        if obj is None or isinstance(obj, ast.Constant) and obj.value is None:
            if not text:
                raise self.ks.error("T.print: give a value to print or a message", call)
            return self.located(ast.Expr(self.call(call, "print", ast.Constant(text))), node)
        if isinstance(obj, ast.Name) and obj.id in self.buffers:
            lane = 128 * self.constant(args.get("warp_group_id"), int, "warp_group_id") + \
                32 * self.constant(args.get("warp_id"), int, "warp_id")
            return self.buffer(call, node, obj.id, text, lane)
        text = _label(text) if text else f"expr<{ast.unparse(obj)}> "
        return self.located(ast.Expr(self.call(call, "print", obj, ast.Constant(text))), node)

    def bind(self, call) -> dict:
        if len(call.args) > len(_PARAMETERS) or any(isinstance(a, ast.Starred)
                                                    for a in call.args):
            raise self.ks.error("T.print(obj=None, msg='', warp_group_id=0, warp_id=0) "
                                f"takes at most 4 arguments, got {ast.unparse(call)}", call)
        args = dict(zip(_PARAMETERS, call.args))
        for k in call.keywords:
            if k.arg not in _PARAMETERS or k.arg in args:
                raise self.ks.error(f"T.print: unexpected keyword {k.arg}= (its parameters: "
                                    f"{', '.join(_PARAMETERS)})", call)
            args[k.arg] = k.value
        return args

    def constant(self, node, kind, what):
        if node is None:
            return kind()
        value = node.value if isinstance(node, ast.Constant) else resolve_static(
            node, self.ks.namespace)
        if type(value) is not kind:
            raise self.ks.error(f"T.print: argument `{what}` must be a {kind.__name__} "
                                f"constant, got {ast.unparse(node)}", node)
        return value

    def call(self, site, name, *args):
        func = ast.Attribute(copy.deepcopy(self.module), name, ast.Load()) \
            if self.module is not None else ast.Name(f"__tj_{name}", ast.Load())
        return ast.copy_location(ast.Call(func, list(args), []), site)

    def buffer(self, call, node, name, text, lane):
        kind, extents, dtype, dtype_expr = self.buffers[name]
        if self.module is None:
            raise self.ks.error("write T.print of a buffer as an attribute of the language "
                                "module (T.print)", call)
        text = text or (f"buffer<{name}, {dtype}>" if dtype else f"buffer<{name}>")
        source, stmts = name, []
        if kind == "fragment":
            source = f"{PRINT_SCRATCH}{len(self.scratch)}_{name}"
            self.scratch.append(self.located(ast.Assign(
                [ast.Name(source, ast.Store())],
                self.call(call, "alloc_shared", ast.Tuple(
                    [copy.deepcopy(e) for e in extents], ast.Load()),
                    copy.deepcopy(dtype_expr))), node))
            stmts.append(self.located(ast.Expr(self.call(
                call, "copy", ast.Name(name, ast.Load()), ast.Name(source, ast.Load()))), node))
        index = [ast.Name(f"{source}_i{d}", ast.Load()) for d in range(len(extents))]
        element = ast.Subscript(ast.Name(source, ast.Load()),
                                ast.Tuple(index, ast.Load()) if len(index) > 1 else index[0],
                                ast.Load())
        body: ast.stmt = ast.Expr(self.call(
            call, "print_at", element, ast.Constant(text),
            ast.Constant(-1 if kind == "local" else lane), *index))
        for d in reversed(range(len(extents))):
            body = ast.For(ast.Name(index[d].id, ast.Store()),
                           self.call(call, "serial", copy.deepcopy(extents[d])), [body], [])
        stmts.append(self.located(body, node))
        return stmts

    @staticmethod
    def located(stmt, node):
        for n in syntax.walk(stmt):
            ast.copy_location(n, node)
        return stmt


def rewrite_prints(ks: KernelSource) -> None:
    if not any(isinstance(n, ast.Attribute) and n.attr == "print" or
               isinstance(n, ast.Name) and n.id == "print" for n in syntax.walk(ks.tree)):
        return
    if not any(isinstance(n, ast.Call) and resolve_static(n.func, ks.namespace) is T.print
               for n in syntax.walk(ks.tree)):
        return
    rewriter = _Prints(ks, _buffers(ks))
    ks.tree = rewriter.visit(ks.tree)
    ks.launch.body[:0] = rewriter.scratch
    ks.tree = syntax.fix_missing_locations(ks.tree)


def _label(msg: str) -> str:
    """A value's message as its label: ``msg="hello world"`` prints ``hello world: 10``,
    not ``hello world10``; a message that ends in a space, ``:`` or ``=`` keeps its own
    separator (``"twice: "``, ``"x ="``)."""
    if msg[-1].isspace():
        return msg
    return msg + (" " if msg[-1] in ":=" else ": ")
