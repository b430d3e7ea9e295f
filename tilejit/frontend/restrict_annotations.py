"""TileLang's ``T.annotate_restrict_buffers(A, B, ...)``: the tensor parameters named may
alias each other (overlapping views of one tensor), so they must not be ``noalias``
(TileLang's ``__restrict__``, which tilejit's entry gives every tensor:
``codegen/entry.py``). Despite its name, TileLang's call takes the restriction away.

Each such statement of the kernel (outside or inside its ``with T.Kernel``, or of a
macro or helper inlined there: ``tile_helpers.py`` inlines those that hold one) is taken
out of the tree when the kernel is parsed (``source.parse_kernel``), its names checked
to be tensor parameters (a ``CompileError`` at its line otherwise) and kept in
``KernelSource.aliased``; the pipeline compiles the entry without ``noalias`` on them.
In the simulator numpy views of one array share its memory; the arrays it computes on
copies of (bfloat16, device tensors) are written back only where the kernel changed
them (``sim/runner.py``), so a copy left alone does not undo another's writes.

TileLang's function-level ``T.annotate_pass_configs`` / ``T.annotate_compile_flags`` are
read where the function is defined (``language/function_attrs.py``: the TileLang doors
merge the configs into the compile options); here they are taken out of the tree, and one
below the top of the body is refused.

Two more of TileLang's launch annotations are taken out here: ``T.annotate_min_blocks_per_sm
(K)`` becomes the launch's ``min_blocks_per_sm=K``, and ``T.annotate_l2_hit_ratio({A: r})``
``KernelSource.l2_window``, the L2 access policy window each GPU launch sets over ``A``."""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.analysis import plain_value
from tilejit.frontend.source import KernelSource, is_launch, resolve_static
from tilejit.language.function_attrs import annotation_kind, nested_annotation


def _is_annotation(node, namespace) -> bool:
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
            and resolve_static(node.value.func, namespace) is T.annotate_restrict_buffers)


def _kernel_level(ks: KernelSource) -> set:
    """The ids of the statements of the kernel's body and of its ``with`` blocks' bodies:
    where an annotation that holds for the whole kernel may be."""
    allowed = {id(s) for s in ks.tree.body}
    for stmt in ks.tree.body:
        if isinstance(stmt, ast.With):
            allowed.update(id(s) for s in stmt.body)
    return allowed


def _annotations(ks: KernelSource, fn) -> list:
    """The statements of ``ks.tree`` that call the language function ``fn``."""
    return [n for n in syntax.walk(ks.tree) if isinstance(n, ast.Expr)
            and isinstance(n.value, ast.Call)
            and resolve_static(n.value.func, ks.namespace) is fn]


def _take_out(ks: KernelSource, node) -> None:
    """``node``, a statement of the kernel's body or of one of its ``with`` blocks, out of
    it (a ``pass`` where the block would be left empty)."""
    for body in [ks.tree.body] + [s.body for s in ks.tree.body if isinstance(s, ast.With)]:
        if any(s is node for s in body):
            body[:] = [s for s in body if s is not node] or [ast.Pass()]
            return


class _Annotations(syntax.NodeTransformer):
    def __init__(self, ks: KernelSource):
        self.ks = ks
        self.allowed = _kernel_level(ks)

    def visit_Expr(self, node):
        if not _is_annotation(node, self.ks.namespace):
            return node
        call = node.value
        if id(node) not in self.allowed:
            raise self.ks.error("T.annotate_restrict_buffers is a statement of the kernel's "
                                "body or of its `with T.Kernel` block, not under an `if` or "
                                "a loop (it holds for the whole kernel)", node)
        if call.keywords:
            raise self.ks.error("T.annotate_restrict_buffers(*buffers) takes the tensor "
                                "parameters positionally", node)
        for arg in call.args:
            if not (isinstance(arg, ast.Name) and arg.id in self.ks.params
                    and arg.id not in self.ks.constexpr_params):
                raise self.ks.error(f"T.annotate_restrict_buffers: expected tensor parameters "
                                    f"of the kernel, got `{ast.unparse(arg)}`", node)
            self.ks.aliased.add(arg.id)
        return ast.copy_location(ast.Pass(), node)


def take_restrict_annotations(ks: KernelSource) -> None:
    """``T.annotate_restrict_buffers`` statements out of ``ks.tree``, their parameters into
    ``ks.aliased``."""
    ks.tree = syntax.fix_missing_locations(_Annotations(ks).visit(ks.tree))


def take_min_blocks_annotations(ks: KernelSource) -> None:
    """TileLang's ``T.annotate_min_blocks_per_sm(K)``, a statement of the ``with T.Kernel``
    block's body: the launch's ``min_blocks_per_sm=K`` (checked where the launch is made:
    a positive int whose blocks fit an SM), the statement taken out. Elsewhere (under an
    ``if``, in a loop, outside the block), twice, or beside the keyword it is an error at
    its line."""
    launches = {id(s): s for s in ks.tree.body if isinstance(s, ast.With) and any(
        is_launch(item.context_expr, ks.namespace) for item in s.items)}
    for node in _annotations(ks, T.annotate_min_blocks_per_sm):
        call = node.value
        block = next((w for w in launches.values() if any(s is node for s in w.body)), None)
        if block is None:
            raise ks.error("T.annotate_min_blocks_per_sm is a statement of the `with "
                           "T.Kernel` block's body, not under an `if` or a loop (it holds "
                           "for the whole launch)", node)
        if len(call.args) + len(call.keywords) != 1 or (
                call.keywords and call.keywords[0].arg != "min_blocks"):
            raise ks.error("T.annotate_min_blocks_per_sm(min_blocks) takes one value",
                           node)
        value = call.args[0] if call.args else call.keywords[0].value
        inside = {n.id for s in block.body for n in syntax.walk(s)
                  if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)} | {
                      n.id for item in block.items if item.optional_vars is not None
                      for n in syntax.walk(item.optional_vars) if isinstance(n, ast.Name)}
        late = sorted({n.id for n in syntax.walk(value) if isinstance(n, ast.Name)} & inside)
        if late:
            raise ks.error(f"T.annotate_min_blocks_per_sm: the launch's bound must be known "
                           f"before the `with T.Kernel` block; {', '.join(late)} is set "
                           f"inside it", node)
        launch = next(item.context_expr for item in block.items
                      if is_launch(item.context_expr, ks.namespace))
        if any(k.arg == "min_blocks_per_sm" for k in launch.keywords):
            raise ks.error("T.annotate_min_blocks_per_sm: the launch has "
                           "min_blocks_per_sm already (given twice)", node)
        launch.keywords.append(ast.keyword("min_blocks_per_sm", value))
        _take_out(ks, node)
    ks.tree = syntax.fix_missing_locations(ks.tree)


def take_l2_annotations(ks: KernelSource) -> None:
    """TileLang's ``T.annotate_l2_hit_ratio({A: r})``, a statement of the kernel's body or
    of its ``with T.Kernel`` block: ``ks.l2_window = (A, r)``, the statement taken out. A
    launch holds one L2 access policy window, so the dict names one tensor parameter; r is
    a number in (0, 1] known when the kernel is defined (a literal, a closure's value)."""
    allowed = _kernel_level(ks)
    for node in _annotations(ks, T.annotate_l2_hit_ratio):
        call = node.value
        if id(node) not in allowed:
            raise ks.error("T.annotate_l2_hit_ratio is a statement of the kernel's body or of "
                           "its `with T.Kernel` block, not under an `if` or a loop (it "
                           "holds for the whole launch)", node)
        mapping = call.args[0] if len(call.args) == 1 and not call.keywords else None
        if not isinstance(mapping, ast.Dict) or len(mapping.keys) != 1:
            raise ks.error("T.annotate_l2_hit_ratio({A: ratio}) takes a dict of one tensor "
                           "parameter and its hit ratio (a launch holds one L2 access "
                           "policy window)", node)
        key, ratio = mapping.keys[0], mapping.values[0]
        if not (isinstance(key, ast.Name) and key.id in ks.params
                and key.id not in ks.constexpr_params):
            raise ks.error(f"T.annotate_l2_hit_ratio: expected a tensor parameter of the "
                           f"kernel, got `{ast.unparse(key) if key else '**'}`", node)
        value, known = plain_value(ratio, ks.namespace, (int, float))
        if not known or isinstance(value, bool) or not 0 < value <= 1:
            raise ks.error(f"T.annotate_l2_hit_ratio: the hit ratio is a number in (0, 1] "
                           f"known when the kernel is defined, got `{ast.unparse(ratio)}`"
                           + (f" = {value!r}" if known else ""), node)
        if ks.l2_window is not None:
            raise ks.error("T.annotate_l2_hit_ratio given twice: a launch holds one L2 "
                           "access policy window", node)
        ks.l2_window = (key.id, float(value))
        _take_out(ks, node)
    ks.tree = syntax.fix_missing_locations(ks.tree)


def take_function_annotations(ks: KernelSource) -> None:
    """TileLang's ``T.annotate_pass_configs(...)`` / ``T.annotate_compile_flags(...)``,
    statements at the top of the kernel function's body: taken out (their values were read
    when the function was defined); one inside a block is a CompileError at its line."""
    nested = nested_annotation(ks.tree, ks.namespace)
    if nested is not None:
        kind = annotation_kind(nested, ks.namespace)
        raise ks.error(f"T.{kind} is a statement at the top of the kernel function's body "
                       f"(outside `with T.Kernel`, not under an `if` or a loop): it holds "
                       f"for the whole program", nested)
    ks.tree.body = [s for s in ks.tree.body if annotation_kind(s, ks.namespace) is None] or [
        ast.Pass()]
