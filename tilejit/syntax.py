"""``ast.walk``, ``ast.iter_child_nodes``, ``ast.NodeVisitor``, ``ast.NodeTransformer``
and ``ast.fix_missing_locations`` with the standard library's results, faster: what the
front end and the passes traverse a kernel's tree with.

The passes walk the device program some 100 times over in a compile (FlashAttention's:
~230,000 nodes visited), most of it in small subtrees, and the standard library's walk
spends most of its time in its two generators (``iter_child_nodes`` over
``iter_fields``). These read each class's ``_fields`` directly: the same nodes in the
same order (breadth first, children in field order; a field a node lacks is skipped),
at 0.55 of the time per node on the CPU machine.
"""
from __future__ import annotations

import ast
import contextlib
import sys
import threading
from collections import deque

_AST = ast.AST


def walk(node):
    """``ast.walk``: ``node`` and every node below it, breadth first."""
    todo = deque((node,))
    pop, push = todo.popleft, todo.append
    while todo:
        node = pop()
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, _AST):
                push(value)
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, _AST):
                        push(item)
        yield node


def iter_child_nodes(node):
    """``ast.iter_child_nodes``: the direct children, in field order."""
    for name in node._fields:
        value = getattr(node, name, None)
        if isinstance(value, _AST):
            yield value
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, _AST):
                    yield item


class NodeVisitor(ast.NodeVisitor):
    """``ast.NodeVisitor`` whose ``generic_visit`` reads ``_fields`` directly."""

    def generic_visit(self, node):
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, _AST):
                        self.visit(item)
            elif isinstance(value, _AST):
                self.visit(value)


class NodeTransformer(ast.NodeTransformer):
    """``ast.NodeTransformer`` whose ``generic_visit`` reads ``_fields`` directly: a
    visit returning None removes the node, a list splices its nodes in."""

    def generic_visit(self, node):
        for name in node._fields:
            old = getattr(node, name, None)
            if isinstance(old, list):
                new = []
                for item in old:
                    if isinstance(item, _AST):
                        item = self.visit(item)
                        if item is None:
                            continue
                        if not isinstance(item, _AST):
                            new.extend(item)
                            continue
                    new.append(item)
                old[:] = new
            elif isinstance(old, _AST):
                replacement = self.visit(old)
                if replacement is None:
                    delattr(node, name)
                else:
                    setattr(node, name, replacement)
        return node


def fix_missing_locations(node):
    """``ast.fix_missing_locations``: each node that lacks a location takes its
    parent's (the root's default: line 1, column 0)."""
    _fix(node, 1, 0, 1, 0)
    return node


def _fix(node, lineno, col_offset, end_lineno, end_col_offset):
    attributes = node._attributes
    if "lineno" in attributes:
        if not hasattr(node, "lineno"):
            node.lineno = lineno
        else:
            lineno = node.lineno
    if "end_lineno" in attributes:
        if getattr(node, "end_lineno", None) is None:
            node.end_lineno = end_lineno
        else:
            end_lineno = node.end_lineno
    if "col_offset" in attributes:
        if not hasattr(node, "col_offset"):
            node.col_offset = col_offset
        else:
            col_offset = node.col_offset
    if "end_col_offset" in attributes:
        if getattr(node, "end_col_offset", None) is None:
            node.end_col_offset = end_col_offset
        else:
            end_col_offset = node.end_col_offset
    for name in node._fields:
        value = getattr(node, name, None)
        if isinstance(value, _AST):
            _fix(value, lineno, col_offset, end_lineno, end_col_offset)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, _AST):
                    _fix(item, lineno, col_offset, end_lineno, end_col_offset)


# the recursion a deep expression (a sum of 300 terms: a left-leaning tree 300 deep) needs
# in the recursive walks of a compile (copy.deepcopy, the transformers, Numba's), over
# Python's default of 1000
_DEEP_LIMIT = 20000
_DEEP = threading.Lock()
_deep_users = [0, 0]        # compilations under way; the limit before the first


@contextlib.contextmanager
def deep_trees():
    """Python's recursion limit raised (to ``_DEEP_LIMIT``, never lowered) while a kernel
    compiles, restored after the last of nested and concurrent compilations."""
    with _DEEP:
        if _deep_users[0] == 0:
            _deep_users[1] = sys.getrecursionlimit()
            sys.setrecursionlimit(max(_deep_users[1], _DEEP_LIMIT))
        _deep_users[0] += 1
    try:
        yield
    finally:
        with _DEEP:
            _deep_users[0] -= 1
            if _deep_users[0] == 0:
                sys.setrecursionlimit(_deep_users[1])
