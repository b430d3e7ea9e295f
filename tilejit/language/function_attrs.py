"""TileLang's function-level annotations, statements at the top of a kernel function's
body (a ``@T.prim_func``'s or an eager ``@tilejit.jit`` program's, outside ``with
T.Kernel``)::

    T.annotate_pass_configs({PassConfigKey.TL_ENABLE_FAST_MATH: True})
    T.annotate_compile_flags(["--use_fast_math"])

They are read from the source when the function is defined (``function_annotations``:
their arguments are values known then, literals and the names of its module and
closure), kept as the function's attributes (``PrimFunc.attrs["tilelang_pass_configs"]``)
and taken out of the program the compiler sees. The pass configs are the program's own
compile options: ``tilejit.compile(..., pass_configs=)`` and ``@tilejit.jit(pass_configs=)``
apply over them, key by key. The compile flags are kept as TileLang keeps them; they are
flags of NVIDIA's C++ compiler, which tilejit does not run, so they change nothing (as
``compile(compile_flags=)``)."""
from __future__ import annotations

import ast

PASS_CONFIGS = "tilelang_pass_configs"
COMPILE_FLAGS = "tilelang_compile_flags"


def annotate_pass_configs(configs):
    """TileLang's ``T.annotate_pass_configs({PassConfigKey...: value})``: the kernel's own
    pass configs (a statement at the top of the kernel function; see the module)."""
    return _checked_configs(configs)


def annotate_compile_flags(flags):
    """TileLang's ``T.annotate_compile_flags(["--use_fast_math"])``: kept as the
    function's attribute; flags of NVIDIA's compiler, which tilejit does not run."""
    return _checked_flags(flags)


def _checked_configs(configs):
    if not isinstance(configs, dict):
        raise TypeError(f"T.annotate_pass_configs: expected a dict of PassConfigKey values "
                        f"(`{{PassConfigKey.TL_ENABLE_FAST_MATH: True}}`), got "
                        f"{type(configs).__name__} {configs!r:.80}")
    bad = [k for k in configs if not isinstance(k, str)]
    if bad:
        raise TypeError(f"T.annotate_pass_configs: the keys are PassConfigKey names "
                        f"(strings), got {bad[0]!r}")
    return dict(configs)


def _checked_flags(flags):
    if isinstance(flags, str):
        flags = [flags]
    if not isinstance(flags, (list, tuple)) or not all(isinstance(f, str) for f in flags):
        raise TypeError(f"T.annotate_compile_flags: expected a list of strings "
                        f"(`[\"--use_fast_math\"]`), got {flags!r:.80}")
    return list(flags)


_KINDS = {"annotate_pass_configs": (PASS_CONFIGS, _checked_configs),
          "annotate_compile_flags": (COMPILE_FLAGS, _checked_flags)}


def annotation_kind(stmt, namespace) -> str | None:
    """``"annotate_pass_configs"`` / ``"annotate_compile_flags"`` for a statement that is
    the call (``T.annotate_pass_configs(...)``, however the language module is named in
    ``namespace``), else None."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return None
    func = stmt.value.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        owner = namespace.get(func.value.id)
        target = getattr(owner, func.attr, None) if owner is not None else None
    elif isinstance(func, ast.Name):
        target = namespace.get(func.id)
    else:
        return None
    for name in _KINDS:
        if target is globals()[name]:
            return name
    return None


class AnnotationError(ValueError):
    """An annotation whose argument is not a value known when the function is defined,
    or is malformed; ``node`` is the statement (the caller reports it at its line)."""

    def __init__(self, message, node):
        super().__init__(message)
        self.node = node


def function_annotations(body, namespace) -> tuple[dict, list]:
    """({attribute: value} of the annotations among ``body``'s statements, the statements
    left); their arguments are evaluated in ``namespace``. A repeated annotation merges
    (configs key by key, flags appended)."""
    attrs, kept = {}, []
    for stmt in body:
        kind = annotation_kind(stmt, namespace)
        if kind is None:
            kept.append(stmt)
            continue
        call = stmt.value
        if len(call.args) != 1 or call.keywords:
            raise AnnotationError(f"T.{kind} takes one argument", stmt)
        try:
            value = eval(compile(ast.Expression(call.args[0]), "<annotation>", "eval"),  # noqa: S307
                         dict(namespace))
        except Exception as e:       # noqa: BLE001 - any failure: not known at definition
            raise AnnotationError(f"T.{kind}: the argument `{ast.unparse(call.args[0])}` must "
                                  f"be a value known when the function is defined "
                                  f"(literals, names of its module or closure): "
                                  f"{type(e).__name__}: {e}", stmt) from None
        key, check = _KINDS[kind]
        try:
            value = check(value)
        except TypeError as e:
            raise AnnotationError(str(e), stmt) from None
        if key == PASS_CONFIGS:
            attrs[key] = {**attrs.get(key, {}), **value}
        else:
            attrs[key] = attrs.get(key, []) + value
    return attrs, kept


def nested_annotation(tree, namespace):
    """The first annotation statement below the top of the function's body (inside a
    ``with``, loop or branch), or None: TileLang's belong to the function."""
    top = {id(s) for s in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and id(node) not in top and \
                annotation_kind(node, namespace) is not None:
            return node
    return None
