"""``T.im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad)`` (and the
deprecated ``T.c2d_im2col``) as the ``T.Parallel`` loop over ``col`` it means
(``language/convolution.py``): every element of the shared tile from its image element,
guarded (``T.if_then_else`` evaluates the load only inside the image) to 0 in the
padding, past the last image and past the last filter tap. A ``CompileError`` at the
line for anything else: a ``col`` that is not a tile's name, arguments missing or
unknown."""
from __future__ import annotations

import ast

from tilejit import syntax
import copy

_PARAMS = ("img", "col", "nhw_step", "c_step", "kernel", "stride", "dilation", "pad",
           "eviction_policy", "annotations")
_REQUIRED = _PARAMS[:8]

_LOOP = """
for {i}, {j} in __tj_lang__.Parallel({col}.shape[0], {col}.shape[1]):
    {col}[{i}, {j}] = __tj_lang__.if_then_else(
        ({m}) // ({ohw}) < {img}.shape[0] and ({k}) < ({kernel}) * ({kernel}) * {img}.shape[3]
        and 0 <= ({h}) and ({h}) < {img}.shape[1] and 0 <= ({w}) and ({w}) < {img}.shape[2],
        {img}[({m}) // ({ohw}), {h}, {w}, ({k}) % {img}.shape[3]],
        __tj_lang__.cast(0, {img}.dtype))
"""


def im2col_loop(call: ast.Call, stmt: ast.stmt, language: str, error) -> ast.For:
    """The loop a ``T.im2col`` statement stands for; ``language``: the name ``T`` is bound
    to in the program the loop joins."""
    what = "T.im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad)"
    if len(call.args) > len(_PARAMS):
        raise error(f"{what} takes at most {len(_PARAMS)} arguments, got {len(call.args)}",
                    stmt)
    args = dict(zip(_PARAMS, call.args))
    for k in call.keywords:
        if k.arg not in _PARAMS or k.arg in args:
            raise error(f"{what}: unexpected or repeated argument `{k.arg}`", stmt)
        args[k.arg] = k.value
    missing = [p for p in _REQUIRED if p not in args]
    if missing:
        raise error(f"{what}: missing {', '.join(missing)}", stmt)
    for p, kind in (("img", "an NHWC tensor"), ("col", "a shared tile")):
        if not isinstance(args[p], ast.Name):
            raise error(f"{what}: `{p}` must be the name of {kind}, got "
                        f"`{ast.unparse(args[p])}`", stmt)
    src = {p: f"({ast.unparse(args[p])})" for p in _REQUIRED}
    img, col = args["img"].id, args["col"].id
    n = f"{stmt.lineno}_{stmt.col_offset}"
    i, j = f"__tj_i2c_m{n}", f"__tj_i2c_k{n}"
    K, S, D, P = src["kernel"], src["stride"], src["dilation"], src["pad"]
    oh = f"(({img}.shape[1] + 2 * {P} - {D} * ({K} - 1) - 1) // {S} + 1)"
    ow = f"(({img}.shape[2] + 2 * {P} - {D} * ({K} - 1) - 1) // {S} + 1)"
    m = f"{src['nhw_step']} * {col}.shape[0] + {i}"
    k = f"{src['c_step']} * {col}.shape[1] + {j}"
    h = f"({m}) % ({oh} * {ow}) // {ow} * {S} + ({k}) // ({K} * {img}.shape[3]) * {D} - {P}"
    w = f"({m}) % {ow} * {S} + ({k}) // {img}.shape[3] % {K} * {D} - {P}"
    text = _LOOP.format(i=i, j=j, col=col, img=img, m=m, k=k, h=h, w=w, kernel=K,
                        ohw=f"{oh} * {ow}")
    loop = _Language(ast.parse(language, mode="eval").body).visit(ast.parse(text).body[0])
    for node in syntax.walk(loop):
        if hasattr(node, "lineno"):
            ast.copy_location(node, stmt)
    return syntax.fix_missing_locations(loop)


class _Language(syntax.NodeTransformer):
    """The template's ``__tj_lang__`` as the kernel's own name of the language module."""

    def __init__(self, expr):
        self.expr = expr

    def visit_Name(self, node):
        return copy.deepcopy(self.expr) if node.id == "__tj_lang__" else node
