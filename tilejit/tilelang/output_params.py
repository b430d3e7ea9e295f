"""``out_idx`` for a program whose tensors are annotated in its body or signature
(TileLang's lazy ``@T.prim_func`` compiled with ``tilejit.compile(f, out_idx=[-1])``,
an eager ``@tilejit.jit(out_idx=[-1])`` program): the parameters it names are outputs
the program allocates and returns, written as the ``T.empty`` form it already has::

    def f(A, B):                              def f(A):
        A: T.Tensor[[M, N], T.float32]            A: T.Tensor[[M, N], T.float32]
        B: T.Tensor[[M, N], T.float32]   →        B = T.empty([M, N], T.float32)
        with T.Kernel(...): ...                   with T.Kernel(...): ...
                                                  return B

A call passes the other parameters; the outputs come back in ``out_idx``'s order (a
list for several). Their extents are the inputs' symbols, compile-time parameters and
constants (a symbol only an output has is reported: no input gives its size). A program
that returns its outputs itself cannot name them in ``out_idx`` too (TileLang's "Out
index conflict")."""
from __future__ import annotations

import ast
import copy
import numbers

import numpy as np

from tilejit import language as T
from tilejit import syntax
from tilejit.errors import CompileError
from tilejit.frontend.source import resolve_static
from tilejit.language.dtypes import DType
from tilejit.language.tilelang_names import TensorAnnotation, returned_count


def outputs_as_empty(fdef: ast.FunctionDef, out_idx, is_tensor, filename, name,
                     namespace) -> list:
    """``fdef`` rewritten in place for ``out_idx`` (module docstring); the names of the
    outputs, in out_idx's order."""
    params = [a.arg for a in fdef.args.args]
    order = out_positions(out_idx, params, name)
    if returned_count(fdef):
        raise ValueError(f"Out index conflict: {name} returns its outputs (T.empty); "
                         f"out_idx={out_idx!r} names outputs too")
    outputs = [params[i] for i in order]
    defaults_from = len(params) - len(fdef.args.defaults)
    for i in order:
        if i >= defaults_from:
            raise TypeError(f"out_idx={out_idx!r}: output parameter {params[i]!r} of {name} "
                            f"has a default value; an output is allocated by the kernel")
    signature = {a.arg: a for a in fdef.args.args}
    front = []
    for out in outputs:
        arg = signature[out]
        where = next((k for k, s in enumerate(fdef.body) if isinstance(s, ast.AnnAssign)
                      and isinstance(s.target, ast.Name) and s.target.id == out
                      and s.value is None), None)
        annotation = fdef.body[where].annotation if where is not None else arg.annotation
        alias = resolve_static(annotation, namespace) if isinstance(
            annotation, (ast.Name, ast.Attribute)) else None
        if annotation is None or not (is_tensor(annotation) or isinstance(
                alias, TensorAnnotation)):
            raise TypeError(f"out_idx={out_idx!r}: output parameter {out!r} of {name} needs "
                            f"a T.Tensor annotation (its shape and dtype are what the kernel "
                            f"allocates), got "
                            f"{ast.unparse(annotation) if annotation is not None else 'none'}")
        empty = ast.Assign([ast.Name(out, ast.Store())], _empty_call(
            annotation, alias, namespace, filename, arg.lineno))
        if where is not None:
            fdef.body[where] = ast.copy_location(empty, fdef.body[where])
        else:
            front.append(ast.copy_location(empty, fdef.body[0]))
            arg.annotation = None
    fdef.body[:0] = front
    fdef.args.args = [a for a in fdef.args.args if a.arg not in outputs]
    value = ast.Name(outputs[0], ast.Load()) if len(outputs) == 1 else ast.Tuple(
        [ast.Name(o, ast.Load()) for o in outputs], ast.Load())
    fdef.body.append(ast.copy_location(ast.Return(value), fdef.body[-1]))
    syntax.fix_missing_locations(fdef)
    return outputs


def _is_int(value) -> bool:
    """A Python or numpy int, not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def out_positions(out_idx, params, name) -> list:
    """The parameter positions ``out_idx`` names (an int or a list of ints, negative
    from the end), in its order; a TypeError or ValueError saying what is wrong."""
    n = len(params)
    if _is_int(out_idx):
        out_idx = [out_idx]
    if not isinstance(out_idx, (list, tuple)):
        raise TypeError(f"out_idx: expected an int or a list of ints, got {out_idx!r}")
    for i in out_idx:
        # (a 1.0, True or None was "out of range", which it is not: it is no position)
        if not _is_int(i):
            raise TypeError(f"out_idx {list(out_idx)}: {i!r} is not an int (a parameter's "
                            f"position, negative from the end)")
    out_idx = [int(i) for i in out_idx]
    if any(not -n <= i < n for i in out_idx):
        raise ValueError(f"out_idx {list(out_idx)} out of range for the {n} parameters of "
                         f"{name}")
    order = [i % n for i in out_idx]
    twice = sorted({params[i] for i in order if order.count(i) > 1})
    if twice:
        raise ValueError(f"out_idx {list(out_idx)} names parameter(s) {twice} more than once")
    return order


def _empty_call(annotation, alias, namespace, filename, line) -> ast.Call:
    """``T.empty(shape, dtype)`` of a ``T.Tensor[shape, dtype]`` / ``T.Tensor(shape,
    dtype)`` annotation (``T.Tensor[shape]``: float32, as TileLang's), or of a name bound
    to one (``B: Buf``, its extents numbers)."""
    def fail(why):
        return CompileError(f"an output's annotation `{ast.unparse(annotation)}` {why}",
                            filename, line)
    language = next((ast.Name(k, ast.Load()) for k, v in namespace.items() if v is T), None)
    if isinstance(alias, TensorAnnotation):
        if not all(isinstance(d, numbers.Integral) for d in alias.shape):
            raise fail("names a tensor type of symbolic extents: write T.Tensor[shape, "
                       "dtype] in the program for an output")
        shape = ast.Tuple([ast.Constant(int(d)) for d in alias.shape], ast.Load())
        dtype = ast.Constant(alias.dtype.name)
    else:
        head = annotation.func if isinstance(annotation, ast.Call) else annotation.value
        if isinstance(head, ast.Attribute):
            language = head.value
        shape, dtype = _shape_and_dtype(annotation, namespace)
        if shape is None:
            raise fail("must be T.Tensor[shape, dtype] (its shape and dtype allocate it)")
    if language is None:
        raise fail("is read through a name of its own; the program's module must import "
                   "tilejit.language (as T) for the output's T.empty")
    # (T.Tensor's dtype defaults to float32, as TileLang's)
    args = [copy.deepcopy(shape), copy.deepcopy(dtype) if dtype is not None
            else ast.Constant("float32")]
    return ast.Call(ast.Attribute(copy.deepcopy(language), "empty", ast.Load()), args, [])


def _shape_and_dtype(annotation, namespace):
    """(shape, dtype or None) expressions of a T.Tensor annotation, as
    ``TensorAnnotation.__class_getitem__`` reads a subscript: a pair whose second entry
    names a dtype is (shape, dtype), anything else the shape."""
    if isinstance(annotation, ast.Call):
        shape = annotation.args[0] if annotation.args else next(
            (k.value for k in annotation.keywords if k.arg == "shape"), None)
        dtype = annotation.args[1] if len(annotation.args) > 1 else next(
            (k.value for k in annotation.keywords if k.arg == "dtype"), None)
        return shape, dtype
    item = annotation.slice
    if isinstance(item, ast.Tuple) and len(item.elts) == 2 and _names_dtype(item.elts[1],
                                                                          namespace):
        return item.elts[0], item.elts[1]
    return item, None


def _names_dtype(node, namespace) -> bool:
    """Whether the expression names a dtype (``"float16"``, ``T.float16``, a name bound
    to one; a name the function binds itself, ``dtype``, is taken to be one): not an
    extent."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, (ast.Name, ast.Attribute)):
        value = resolve_static(node, namespace)
        return value is None or isinstance(value, (str, DType))
    return False
