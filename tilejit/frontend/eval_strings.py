"""Python's ``eval(s)`` in a kernel body, of a string the program's Python gives (a
literal, a global, a closure's: ``C[bx] = T.Cast(dt, eval(post))`` with ``post = "r[0] /
N"``): the expression is parsed into the kernel at the call's line, as TileLang's parser
evaluates it with the kernel's names in scope. A string the kernel computes, or
``eval`` with globals or locals, is a CompileError at the line.

An f-string of values the program's Python gives (``getattr(T, f"reduce_{op}")``, as
TileLang's issue tests pick a reduction) is folded to its string here too; one that
formats a value the kernel computes stays, and is the validator's error."""
from __future__ import annotations

import ast
import builtins

from tilejit import syntax
from tilejit.frontend.source import KernelSource, assigned_names, resolve_static


def rewrite_eval_strings(ks: KernelSource) -> None:
    ks.tree = syntax.fix_missing_locations(_Evals(ks).visit(ks.tree))


class _Evals(syntax.NodeTransformer):
    def __init__(self, ks):
        self.ks = ks
        self.local = assigned_names(ks.tree)

    def visit_JoinedStr(self, node):
        text = self._formatted(node)
        return node if text is None else ast.copy_location(ast.Constant(text), node)

    def _formatted(self, node):
        """The string of an f-string whose values are all known, else None."""
        parts = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                parts.append(str(part.value))
                continue
            value = self._text(part.value)
            if value is None or value is _COMPUTED:
                return None
            if part.conversion != -1:
                value = {ord("r"): repr, ord("s"): str, ord("a"): ascii}[part.conversion](value)
            spec = "" if part.format_spec is None else self._formatted(part.format_spec)
            if spec is None:
                return None
            try:
                parts.append(format(value, spec))
            except (TypeError, ValueError):
                return None
        return "".join(parts)

    def visit_Call(self, node):
        self.generic_visit(node)
        if not (isinstance(node.func, ast.Name) and node.func.id not in self.local and
                resolve_static(node.func, self.ks.namespace) is builtins.eval):
            return node
        if len(node.args) != 1 or node.keywords:
            raise self.ks.error("eval() in a kernel takes one string, evaluated with the "
                                "kernel's names (globals and locals are not supported)", node)
        text = self._text(node.args[0])
        if not isinstance(text, str):
            got = "one the kernel computes" if text is _COMPUTED else \
                "no value yet" if text is None else type(text).__name__
            raise self.ks.error(f"eval({ast.unparse(node.args[0])}) in a kernel: expected "
                                f"a string known when the kernel compiles (a literal, a "
                                f"global or a closure's), got {got}", node)
        try:
            expr = ast.parse(text.strip(), mode="eval").body
        except SyntaxError as e:
            raise self.ks.error(f"eval({text!r}) in a kernel: not a Python expression "
                                f"({e.msg})", node) from None
        for n in ast.walk(expr):
            if "lineno" in n._attributes:
                n.lineno, n.end_lineno = node.lineno, node.end_lineno
                n.col_offset, n.end_col_offset = node.col_offset, node.end_col_offset
        return self.visit(expr)         # (an eval inside the string's)

    def _text(self, arg):
        """The string ``arg`` gives, else what it is (None: a name with no value yet)."""
        if isinstance(arg, ast.Constant):
            return arg.value
        if isinstance(arg, (ast.Name, ast.Attribute)) and not (
                isinstance(arg, ast.Name) and arg.id in self.local):
            return resolve_static(arg, self.ks.namespace)
        return _COMPUTED


_COMPUTED = object()    # a string the kernel computes
