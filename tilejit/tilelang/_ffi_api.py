"""TileLang's ``tilelang._ffi_api`` (its C++ entry points, which TileLang's tests call
directly): only the ``Layout_*`` ones, each the ``Layout`` method of the same meaning
(``language/layout.py``), with its checks. Any other name says it is not built."""
from __future__ import annotations

from tilejit.language.compat import module_getattr


def Layout_repeat(layout, dim, factor):
    return layout.repeat(dim, factor)


def Layout_expand(layout, leading_shape):
    return layout.expand(list(leading_shape))


def Layout_inverse(layout):
    return layout.inverse()


def Layout_is_equal(layout, other):
    return layout.is_equal(other)


def Layout_input_shape(layout):
    return layout.get_input_shape()


def Layout_output_shape(layout):
    return layout.get_output_shape()


def Layout_index(layout):
    return layout.get_forward_index()


def Layout_linearized_index(layout):
    return layout.get_linearized_forward_index()


def Layout_forward_vars(layout):
    return layout.get_forward_vars()


__getattr__ = module_getattr(
    "tilelang._ffi_api", __name__,
    "TileLang's C++ entry point; only its Layout_* functions are built (the Layout "
    "methods)")
