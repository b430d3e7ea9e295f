"""Front end: TVM's per-thread calls written as tilejit's (``language/tvm_calls.py``)::

    T.thread_return()                          →  return
    T.tvm_warp_activemask()                    →  T.cast(T.activemask(), "uint32")
    T.tvm_warp_shuffle(m, v, lane, w, 32)      →  T.shfl_sync(v, lane, w, m)
    T.tvm_warp_shuffle_down(m, v, d, w, 32)    →  T.shfl_down(v, d, w, m)   (_up alike)
    T.call_extern("float32", "fmaxf", a, b)    →  T.cast(T.max(a, b), "float32")
    T.shuffle_elect(n)                         →  tx == 0 if n == 0 else
                                                  tx // 32 % (n // 32) == 0 and tx % 32 == 0
                                                  (tx: T.get_thread_binding())

A warp size other than 32, or an external function tilejit does not know, is a
``CompileError`` at the call."""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit.frontend.source import resolve_static
from tilejit.ir.markers import LANGUAGE
from tilejit.language import tvm_calls
from tilejit.language.tvm_calls import CUDA_MATH

_SHUFFLES = {tvm_calls.tvm_warp_shuffle: "shfl_sync",
             tvm_calls.tvm_warp_shuffle_down: "shfl_down",
             tvm_calls.tvm_warp_shuffle_up: "shfl_up"}


_UNKNOWN = object()     # a value the front end cannot know (a macro parameter, a loop's)


def rewrite_tvm_calls(ks) -> None:
    _Calls(ks).visit(ks.tree)
    syntax.fix_missing_locations(ks.tree)


def _language(name, args):
    return ast.Call(ast.Attribute(ast.Name(LANGUAGE, ast.Load()), name, ast.Load()), args, [])


class _Calls(syntax.NodeTransformer):
    def __init__(self, ks):
        self.ks = ks

    def visit_Expr(self, node):
        self.generic_visit(node)
        if isinstance(node.value, ast.Call) and resolve_static(
                node.value.func, self.ks.namespace) is tvm_calls.thread_return:
            return ast.copy_location(ast.Return(None), node)
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        fn = resolve_static(node.func, self.ks.namespace)
        if fn is tvm_calls.tvm_warp_activemask:
            return ast.copy_location(_language("cast", [_language("activemask", []),
                                                        ast.Constant("uint32")]), node)
        if fn in _SHUFFLES:
            if len(node.args) != 5 or node.keywords:
                raise self.ks.error(f"T.{fn.__name__} takes (mask, value, lane or delta, "
                                    f"width, warp_size)", node)
            mask, value, lane, width, warp_size = node.args
            # the last argument is TVM's warp size, which CUDA's __shfl_sync does not take
            # (TileLang's Hadamard example passes its sub-warp width there, a macro
            # parameter); one known here past 32 (AMD's wavefront of 64) is refused
            known = self._known(warp_size)
            if known is not _UNKNOWN and not (
                    type(known) is int and 0 < known <= 32 and known & (known - 1) == 0):
                raise self.ks.error(f"T.{fn.__name__}: a warp of 32 lanes (the warp_size "
                                    f"argument: a power of two up to 32), got "
                                    f"`{ast.unparse(warp_size)}`", node)
            return ast.copy_location(_language(_SHUFFLES[fn], [value, lane, width, mask]),
                                     node)
        if fn is tvm_calls.call_extern:
            return ast.copy_location(self._extern(node), node)
        if fn is tvm_calls.shuffle_elect:
            return ast.copy_location(self._elect(node), node)
        return node

    def _known(self, node):
        """The value of a constant, or of a name bound where the kernel is defined
        (TileLang's dequantize examples: ``func_name = info["func_name"]``); else
        ``_UNKNOWN`` (a macro parameter, a loop's variable)."""
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self.ks.namespace.get(node.id, _UNKNOWN)
        return _UNKNOWN

    def _elect(self, node):
        """One thread of each group of ``thread_extent`` threads: lane 0 of the group's
        first warp (TileLang's ``tl_shuffle_elect``: the group's warp index 0 and
        ``elect.sync``, which elects lane 0 of a whole warp); 0: thread 0 of the block.
        A constant extent is checked here; a compile-time name (a constexpr) is used as
        given: ``tx == 0 if n == 0 else tx // 32 % max(n // 32, 1) == 0 and tx % 32 ==
        0``."""
        given = {k.arg: k.value for k in node.keywords}
        args = list(node.args) + ([given.pop("thread_extent")] if "thread_extent" in given
                                  else [])
        if len(args) != 1 or given:
            raise self.ks.error("T.shuffle_elect takes one argument, thread_extent", node)
        extent = args[0]
        if isinstance(extent, ast.Constant) and (
                not isinstance(extent.value, int) or isinstance(extent.value, bool)
                or extent.value < 0 or extent.value % 32):
            raise self.ks.error("T.shuffle_elect(thread_extent) takes a number of threads, "
                                f"0 or a multiple of 32, got {extent.value!r}", node)

        def tx():
            return _language("get_thread_binding", [ast.Constant(0)])

        def eq(a, b):
            return ast.Compare(a, [ast.Eq()], [b])
        # (at least 1: the side n == 0 does not take is compiled too)
        warps = _language("max", [ast.BinOp(extent, ast.FloorDiv(), ast.Constant(32)),
                                  ast.Constant(1)])
        groups = ast.BinOp(ast.BinOp(tx(), ast.FloorDiv(), ast.Constant(32)), ast.Mod(), warps)
        elect = ast.BoolOp(ast.And(), [eq(groups, ast.Constant(0)),
                                       eq(ast.BinOp(tx(), ast.Mod(), ast.Constant(32)),
                                          ast.Constant(0))])
        return ast.IfExp(eq(extent, ast.Constant(0)), eq(tx(), ast.Constant(0)), elect)

    def _extern(self, node):
        # TileLang's T.call_extern takes its dtype first or as `dtype=` (then the name is
        # first: `T.call_extern("fast_dequant", ..., dtype=out_dtype)`)
        keywords = {k.arg: k.value for k in node.keywords}
        args = list(node.args)
        if "dtype" in keywords:
            args.insert(0, keywords.pop("dtype"))
        name = self._known(args[1]) if len(args) >= 2 else None
        if not isinstance(name, str) or keywords:
            raise self.ks.error("T.call_extern takes (dtype, \"function name\", *args), "
                                "the name a string known when the kernel is compiled", node)
        dtype, args = args[0], args[2:]
        known = CUDA_MATH.get(name)
        if known is None:
            raise self.ks.error(
                f"T.call_extern of {name!r} is not supported by tilejit: it emits PTX "
                f"itself and compiles no C or CUDA C++ (a function of T.import_source's "
                f"source included); it calls only CUDA's math functions by name "
                f"({', '.join(sorted(CUDA_MATH))})", node)
        target, arity = known
        if len(args) != arity:
            raise self.ks.error(f"T.call_extern of {name!r}: {arity} argument(s), got "
                                f"{len(args)}", node)
        return _language("cast", [_language(target, list(args)), dtype])


def spells_tvm_calls(spelled: set) -> bool:
    return bool(spelled & set(tvm_calls.NAMES))


__all__ = ["rewrite_tvm_calls", "spells_tvm_calls"]
