"""Pass (a check): tile operations on a packed tensor (``float4_e2m1fn`` or ``int4``, two
elements a byte) are refused, naming the operation and the tensor.

A packed tensor's elements are read and written one at a time (``X[i, j]`` in a
``T.Parallel`` or a thread's own code: ``codegen/lowering/tensor.py`` reads its half of a
byte, or writes it by two atomics on the word holding it). The tile operations' lowering
moves whole bytes and wider words (``T.copy``'s vector loads, cp.async, TMA), and an
atomic's read-modify-write has no 4-bit form, so they would read or write the wrong
elements: a ``CompileError`` instead, on every target.
"""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import resolve_static
from tilejit.ir.markers import REGION
from tilejit.ir.plan import SHARED
from tilejit.language.tiles import TILE_OPERATIONS

_OPS = {getattr(T, name): name for name in TILE_OPERATIONS if hasattr(T, name)}


def _tensor_named(node):
    """The tensor name an operand stands for: ``X``, ``X[...]``, a region of ``X``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        return node.value.id
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
            node.func.id == REGION and node.args and isinstance(node.args[0], ast.Name):
        return node.args[0].id
    return None


def moved_whole(dtype, tile) -> bool:
    """Whether ``T.copy`` between a tensor of the packed ``dtype`` and ``tile`` (a Tile or
    None) is a tile copy of the copy lowering (``codegen/lowering/packed_copy.py``): an
    int4 tensor and a shared int8 or uint8 tile (an int4 tile holds int8), 16 elements
    at a time. Any other copy of a packed tensor is an element loop
    (``passes/fragment_regions.py``) or refused here."""
    return dtype.is_packed_int and tile is not None and tile.kind == SHARED and \
        tile.dtype.name in ("int8", "uint8")


def _copied_whole(call, name, dtype, ctx) -> bool:
    if len(call.args) != 2 or call.keywords:
        return False
    other = call.args[1] if _tensor_named(call.args[0]) == name else call.args[0]
    return isinstance(other, ast.Name) and moved_whole(dtype, ctx.plan.tiles.get(other.id))


def check_packed_tensors(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    packed = {name: ty.dtype for name, ty in ctx.params.items()
              if getattr(ty.dtype, "packed", 1) > 1}
    if not packed:
        return fdef
    for call in syntax.walk(fdef):
        if not isinstance(call, ast.Call):
            continue
        op = _OPS.get(resolve_static(call.func, ctx.namespace))
        if op is None:
            continue
        for arg in list(call.args) + [k.value for k in call.keywords]:
            name = _tensor_named(arg)
            if name in packed and not (op == "copy" and _copied_whole(call, name,
                                                                         packed[name], ctx)):
                raise ctx.error(
                    f"T.{op} on {name}, {packed[name].with_article} tensor: its elements are "
                    f"held two a byte, which T.{op} does not move (not supported); read and "
                    f"write them one at a time ({name}[i, j] in a T.Parallel loop is one "
                    f"element, as a {'float' if packed[name].is_float else 'value'})", call)
    return fdef
