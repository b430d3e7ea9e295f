"""``tilejit.syntax`` traverses trees exactly as the standard library does: the same
nodes in the same order from ``walk`` and ``iter_child_nodes``, the same visits from
``NodeVisitor``, and the same removals, replacements and splices from
``NodeTransformer``, on parsed source, on trees the passes build (fields left out,
lists holding non-node values), and on the repository's own modules."""
import ast
import copy
import os

import pytest

from tilejit import syntax

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOURCES = [os.path.join(ROOT, "tilejit", "passes", "layout_inference.py"),
           os.path.join(ROOT, "tilejit", "frontend", "rewrite.py"),
           os.path.join(ROOT, "examples", "flash_attention", "flash_attn.py")]


def _built_tree():
    # a Call without `keywords`, a Dict whose keys hold None (`**d`), a Global's names
    call = ast.Call(func=ast.Name("f", ast.Load()), args=[ast.Constant(1)])
    d = ast.Dict(keys=[None, ast.Constant("k")], values=[ast.Name("d", ast.Load()),
                                                         ast.Constant(2)])
    fn = ast.FunctionDef(name="g", args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[],
                                                      kw_defaults=[], defaults=[]),
                         body=[ast.Global(names=["x"]), ast.Expr(call), ast.Expr(d)],
                         decorator_list=[])
    return ast.Module(body=[fn], type_ignores=[])


def _trees():
    trees = [ast.parse(open(path).read()) for path in SOURCES]
    return trees + [_built_tree()]


@pytest.mark.parametrize("tree", _trees(), ids=["layout_inference", "rewrite", "flash_attn",
                                                 "built"])
def test_walk_and_children_as_the_standard_library(tree):
    assert [id(n) for n in syntax.walk(tree)] == [id(n) for n in ast.walk(tree)]
    for node in ast.walk(tree):
        assert [id(c) for c in syntax.iter_child_nodes(node)] == \
            [id(c) for c in ast.iter_child_nodes(node)]


class _Names:
    def __init__(self):
        self.seen = []

    def visit_Name(self, node):
        self.seen.append((node.id, node.lineno if hasattr(node, "lineno") else None))
        self.generic_visit(node)


class _StdNames(_Names, ast.NodeVisitor):
    pass


class _OurNames(_Names, syntax.NodeVisitor):
    pass


@pytest.mark.parametrize("tree", _trees(), ids=["layout_inference", "rewrite", "flash_attn",
                                                 "built"])
def test_visitor_as_the_standard_library(tree):
    std, ours = _StdNames(), _OurNames()
    std.visit(tree)
    ours.visit(tree)
    assert ours.seen == std.seen and std.seen


class _Edit:
    """Drops `pass` statements, splices each `del` into two, renames loads of `x`,
    and drops a lone return value named `gone`."""

    def visit_Pass(self, node):
        return None

    def visit_Delete(self, node):
        return [node, ast.Expr(ast.Constant("after del"))]

    def visit_Name(self, node):
        if node.id == "x" and isinstance(node.ctx, ast.Load):
            return ast.copy_location(ast.Name("y", ast.Load()), node)
        return node

    def visit_Return(self, node):
        self.generic_visit(node)
        return node

    def visit_Constant(self, node):
        return None if node.value == "gone" else node


class _StdEdit(_Edit, ast.NodeTransformer):
    pass


class _OurEdit(_Edit, syntax.NodeTransformer):
    pass


def test_transformer_as_the_standard_library():
    source = ("def f(x):\n    pass\n    del x\n    for i in range(3):\n        pass\n"
              "        z = x + i\n    return 'gone'\n")
    for tree in [ast.parse(source)] + _trees():
        a, b = copy.deepcopy(tree), copy.deepcopy(tree)
        _StdEdit().visit(a)
        _OurEdit().visit(b)
        assert ast.dump(b, include_attributes=True) == ast.dump(a, include_attributes=True)
    edited = _OurEdit().visit(ast.parse(source))
    text = ast.unparse(edited)
    assert "pass" not in text and "'after del'" in text and "y + i" in text
    assert "return\n" in text + "\n"      # the return value was removed


@pytest.mark.parametrize("tree", _trees(), ids=["layout_inference", "rewrite", "flash_attn",
                                                 "built"])
def test_fix_missing_locations_as_the_standard_library(tree):
    for k, node in enumerate(ast.walk(tree)):      # every third node loses its location
        if k % 3 == 0:
            for name in ("lineno", "col_offset", "end_lineno", "end_col_offset"):
                if name in vars(node):      # (not the class's default end position)
                    delattr(node, name)
    a, b = copy.deepcopy(tree), copy.deepcopy(tree)
    assert syntax.fix_missing_locations(b) is b
    ast.fix_missing_locations(a)
    assert ast.dump(b, include_attributes=True) == ast.dump(a, include_attributes=True)
