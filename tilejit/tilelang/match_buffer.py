"""``A = T.match_buffer(A, shape, dtype)`` in an eager program, as TileLang's eager
programs bind a ``T.ptr`` parameter to a tensor of a shape of ``T.const`` symbols::

    @tilelang.jit
    def f(A: T.ptr, is_2d=False):
        if is_2d:
            M, N = T.const("M, N")
            A = T.match_buffer(A, [M, N], T.float32)
            ...

is the annotation ``A: T.Tensor[[M, N], T.float32]`` at that place (the parameter a
tensor, its symbols sized by the call's tensor, as any annotated parameter's are). Only
the parameter itself may be matched, with a shape and a dtype (TileLang's default
float32); ``strides=`` and TVM's other buffer fields are a CompileError naming them.
Anywhere else (a ``@T.prim_func``, inside a kernel) ``T.match_buffer`` stays TVM's TIR,
which tilejit does not have (``language/compat.py`` says so)."""
from __future__ import annotations

import ast

from tilejit import language as T
from tilejit.errors import CompileError

_FIELDS = ("param", "shape", "dtype")


def _match_buffer_call(node, namespace) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
        node.func.attr == "match_buffer" and isinstance(node.func.value, ast.Name) and \
        namespace.get(node.func.value.id) is T


def matched_buffers(fdef, namespace, filename) -> list:
    """``fdef``'s body with each top-level ``X = T.match_buffer(X, ...)`` its annotation;
    one anywhere else outside the kernel (under an ``if`` that launches no kernel, in a
    loop) is a CompileError saying where it may stand."""
    body = [match_buffer_annotation(s, namespace, fdef, filename) or s for s in fdef.body]
    pending = [s for s in body if not isinstance(s, ast.With)]
    while pending:
        node = pending.pop()
        if _match_buffer_call(node, namespace):
            raise CompileError("T.match_buffer: an eager program matches its parameters in "
                               "statements at the top of its body (or of a branch that "
                               "launches its kernel), not here; annotate the parameter "
                               "there (`A: T.Tensor[shape, dtype]`)", filename, node.lineno)
        pending.extend(c for c in ast.iter_child_nodes(node) if not isinstance(c, ast.With))
    return body


def match_buffer_annotation(stmt, namespace, fdef, filename) -> ast.AnnAssign | None:
    """The annotation a ``X = T.match_buffer(X, shape, dtype)`` statement of a parameter
    stands for (the parameter's own annotation, ``T.ptr``, dropped), or None for any
    other statement."""
    if not (isinstance(stmt, ast.Assign) and _match_buffer_call(stmt.value, namespace)):
        return None
    call = stmt.value
    given = dict(zip(_FIELDS, call.args))
    for k in call.keywords:
        if k.arg not in _FIELDS or k.arg in given:
            raise CompileError(f"T.match_buffer: argument `{k.arg}` is not supported (an "
                               f"eager program's T.match_buffer takes the parameter, its "
                               f"shape and its dtype)", filename, call.lineno)
        given[k.arg] = k.value
    if len(call.args) > len(_FIELDS) or "shape" not in given:
        raise CompileError("T.match_buffer(param, shape, dtype) takes the parameter, its "
                           "shape and its dtype", filename, call.lineno)
    target = stmt.targets[0] if len(stmt.targets) == 1 else None
    param = given["param"]
    params = {a.arg: a for a in fdef.args.args}
    if not (isinstance(target, ast.Name) and isinstance(param, ast.Name)
            and param.id == target.id and param.id in params):
        raise CompileError(f"T.match_buffer: `{ast.unparse(stmt)}`: an eager program matches "
                           f"a parameter to itself (`A = T.match_buffer(A, shape, dtype)`)",
                           filename, stmt.lineno)
    params[param.id].annotation = None
    dtype = given.get("dtype", ast.Constant("float32"))
    tensor = ast.Attribute(ast.Name(call.func.value.id, ast.Load()), "Tensor", ast.Load())
    annotation = ast.Subscript(tensor, ast.Tuple([given["shape"], dtype], ast.Load()),
                               ast.Load())
    out = ast.AnnAssign(ast.Name(target.id, ast.Store()), annotation, None, 1)
    return ast.fix_missing_locations(ast.copy_location(out, stmt))
