"""TileLang's ``Layout`` methods, written as a TileLang user writes them: ``expand``,
``repeat(dim, factor)``, ``get_linearized_forward_index``, ``inverse``,
``get_forward_vars``, ``is_equal`` (of layouts and fragments), with the
``tilelang.layout.{layout,fragment,swizzle}`` modules, ``tilelang._ffi_api``'s ``Layout_*``
and ``tvm.tirx.decl_buffer`` / ``tvm.arith.Analyzer().can_prove_equal`` that TileLang's tests
reach them through. Each method is checked by its defining property at every index; a
kernel whose stacked shared tile is annotated with an expanded or repeated layout runs in
simulation, is assembled by ptxas, and (``-m gpu``) on the device."""
import itertools

import numpy as np
import pytest
import torch

import tilejit as tilelang
import tilejit.language as T
from tilejit import _ffi_api
from tilejit.tilelang import tvm
from tilejit.tilelang.layout import Fragment, Layout, LayoutError
from tilejit.tilelang.layout.swizzle import (make_full_bank_swizzled_layout,
                                             make_half_bank_swizzled_layout,
                                             make_swizzled_layout)


def _indices(shape):
    return itertools.product(*(range(n) for n in shape))


# -- expand ------------------------------------------------------------------------

@pytest.mark.parametrize("lead", [[4], [3, 2], 5])
def test_expand_prepends_the_leading_indices(lead):
    base = Layout([8, 16], lambda i, j: [j // 4, i * 4 + j % 4])
    expanded = base.expand(lead)
    lead = [lead] if isinstance(lead, int) else lead
    assert expanded.get_input_shape() == (*lead, 8, 16)
    assert expanded.get_output_shape() == (*lead, *base.get_output_shape())
    for idx in _indices(expanded.get_input_shape()):
        k = len(lead)
        assert expanded(*idx) == [*idx[:k], *base(*idx[k:])]
    expanded.check()


def test_expand_of_a_bank_swizzle_is_the_swizzle_of_the_stacked_buffer():
    buf2d = tvm.tirx.decl_buffer((8, 64), "float16", name="A2", scope="shared")
    buf4d = tvm.tirx.decl_buffer((3, 2, 8, 64), "float16", name="A4", scope="shared")
    for make in (make_full_bank_swizzled_layout, make_half_bank_swizzled_layout):
        assert make(buf4d).is_equal(make(buf2d).expand([3, 2]))
        assert not make(buf4d).is_equal(make(buf2d).expand([2, 3]))


def test_expand_by_nothing_is_the_layout_itself():
    base = Layout([16, 128], lambda j, k: j * 128 + k)
    assert base.expand([]) is base and base.expand(()) is base


@pytest.mark.parametrize("lead,error,message", [
    (0, ValueError, r"Layout.expand leading_shape\[0\]: expected an extent > 0, got 0"),
    ([4, -1], ValueError, r"leading_shape\[1\]: expected an extent > 0, got -1"),
    ("4", TypeError, r"leading_shape: expected an int or a list of ints, got str '4'"),
    ([2.5], TypeError, r"leading_shape\[0\]: expected an int, got float 2.5"),
])
def test_expand_errors_name_the_argument(lead, error, message):
    with pytest.raises(error, match=message):
        Layout([16, 128], lambda j, k: j * 128 + k).expand(lead)


# -- repeat ------------------------------------------------------------------------

@pytest.mark.parametrize("dim", [0, 1, -1, -2])
def test_repeat_tiles_one_dimension_with_a_leading_output(dim):
    atom = Layout([8, 16], lambda i, j: [j % 4, i * 4 + j // 4])
    repeated = atom.repeat(dim=dim, factor=3)
    d = dim % 2
    shape = [8, 16]
    shape[d] *= 3
    assert repeated.get_input_shape() == tuple(shape)
    assert repeated.get_output_shape() == (3, *atom.get_output_shape())
    for idx in _indices(shape):
        own = list(idx)
        own[d] %= atom.get_input_shape()[d]
        assert repeated(*idx) == [idx[d] // atom.get_input_shape()[d], *atom(*own)]
    repeated.check()
    assert atom.repeat(dim=dim, factor=1) is atom


def test_repeat_of_a_linear_atom_is_the_stacked_linear_layout():
    atom = Layout([8, 64], lambda i, j: i * 64 + j)
    assert atom.repeat(0, 2).is_equal(Layout([16, 64], lambda i, j: [i // 8, i % 8 * 64 + j]))
    # the same offsets, but TileLang's layouts are equal only with equal output shapes
    assert not atom.repeat(0, 2).is_equal(Layout([16, 64], lambda i, j: i * 64 + j))
    np.testing.assert_array_equal(atom.repeat(0, 2).offsets(), np.arange(16 * 64).reshape(16, 64))


@pytest.mark.parametrize("dim,factor,error,message", [
    (0, 0, ValueError, r"Layout.repeat factor: expected an int >= 1, got 0"),
    (0, -1, ValueError, r"factor: expected an int >= 1, got -1"),
    (2, 2, ValueError, r"dim: expected a dimension in \[-2, 2\) of input shape \[8, 64\], got 2"),
    (-3, 2, ValueError, r"dim: expected a dimension in \[-2, 2\) .*got -3"),
    (0, 2.0, TypeError, r"Layout.repeat factor: expected an int, got float 2.0"),
    ("0", 2, TypeError, r"Layout.repeat dim: expected an int, got str '0'"),
])
def test_repeat_errors_name_the_argument(dim, factor, error, message):
    atom = Layout([8, 64], lambda i, j: i * 64 + j)
    with pytest.raises(error, match=message):
        atom.repeat(dim=dim, factor=factor)
    with pytest.raises(error, match=message):
        _ffi_api.Layout_repeat(atom, dim, factor)


# -- the linearized index, forward vars -------------------------------------------------

@pytest.mark.parametrize("layout", [
    Layout([2, 3, 4], lambda i, j, k: [i, j, k]),
    Layout([64], lambda i: [i // 32, i % 32]),
    Layout([2, 32], lambda i, j: [j, i]),
    make_swizzled_layout(tvm.tirx.decl_buffer((16, 64), "float16")),
])
def test_linearized_index_is_the_row_major_offset(layout):
    linear = layout.get_linearized_forward_index()
    np.testing.assert_array_equal(linear.values(), layout.offsets())
    for idx in _indices(layout.get_input_shape()):
        assert linear(*idx) == layout.offset(*idx)
    assert _ffi_api.Layout_linearized_index(layout) == linear


def test_linearized_indices_compare_over_the_whole_shape():
    transposed = Layout([2, 32], lambda i, j: [j, i])
    assert transposed.get_linearized_forward_index() == Layout(
        [2, 32], lambda i, j: j * 2 + i).get_linearized_forward_index()
    assert transposed.get_linearized_forward_index() != Layout(
        [2, 32], lambda i, j: i * 32 + j).get_linearized_forward_index()
    analyzer = tvm.arith.Analyzer()
    assert analyzer.can_prove_equal(Layout([64], lambda i: [i // 32, i % 32])
                                    .get_linearized_forward_index(),
                                    Layout([64], lambda i: i).get_linearized_forward_index())
    assert analyzer.can_prove_equal(Layout([4], lambda i: 0 * i + 3)
                                    .get_linearized_forward_index(), 3)
    with pytest.raises(TypeError, match=r"can_prove_equal rhs: expected an int or a layout's "
                                        r"index function, got str"):
        analyzer.can_prove_equal(3, "3")


def test_forward_vars_are_one_per_input_dimension():
    layout = Layout([4, 8], lambda i, j: [j, i])
    assert [(v.name, v.extent) for v in layout.get_forward_vars()] == [("i0", 4), ("i1", 8)]
    assert layout.map_forward_index([3, 5]) == [5, 3] == layout(3, 5)


# -- inverse ------------------------------------------------------------------------

@pytest.mark.parametrize("layout", [
    Layout([2, 32], lambda i, j: [j, i]),
    Layout([64], lambda i: [i % 8, i // 8]),
    make_swizzled_layout(tvm.tirx.decl_buffer((16, 64), "float16")),
    Layout([16, 64], lambda i, j: i * 64 + (j + i) % 64),
])
def test_inverse_undoes_the_layout_at_every_index(layout):
    inverse = layout.inverse()
    assert inverse.get_input_shape() == layout.get_output_shape()
    assert inverse.get_output_shape() == layout.get_input_shape()
    for idx in _indices(layout.get_input_shape()):
        assert inverse(*layout(*idx)) == list(idx)
    for out in _indices(inverse.get_input_shape()):
        assert layout(*inverse(*out)) == list(out)
    assert inverse.inverse().is_equal(layout)


def test_inverse_needs_a_bijection_onto_the_output_shape():
    with pytest.raises(LayoutError, match=r"Layout.inverse: expected a bijection of input shape "
                                          r"\[4, 4\] onto its output shape, got output shape "
                                          r"\[4, 7\] of 28 elements for 16 inputs"):
        Layout([4, 4], lambda i, j: [i, i + j]).inverse()
    with pytest.raises(LayoutError, match="not a bijection"):
        Layout([4, 4], lambda i, j: [i, j // 2 * 3]).inverse()


# -- is_equal ---------------------------------------------------------------------

def test_layouts_are_equal_as_maps_with_their_output_shapes():
    assert Layout([32, 4], lambda x, y: x * 4 + y).is_equal(Layout([32, 4], lambda a, b: b + a * 4))
    pair = Layout([32, 4], lambda i, j: [i, j])
    assert not Layout([32, 4], lambda i, j: i * 4 + j).is_equal(
        Layout([16, 8], lambda i, j: i * 8 + j))
    assert not pair.is_equal(Layout([32, 4], lambda i, j: [j, i]))
    assert not pair.is_equal(Layout([32, 4], lambda i, j: i * 4 + j))     # output shapes
    assert not Layout([4], lambda i: i).is_equal("not a layout")


def test_fragments_are_equal_in_threads_replicas_and_local_indices():
    def frag(thread=lambda i, j: i * 4 + j, **kw):
        return Fragment([32, 4], forward_thread_fn=thread, **kw)
    assert frag().is_equal(frag(lambda a, b: b + a * 4))
    assert not frag().is_equal(frag(lambda i, j: j * 4 + i))
    assert not frag(forward_index_fn=lambda i, j: i).is_equal(
        frag(forward_index_fn=lambda i, j: j))
    rep = lambda i, j, r: i * 4 + r  # noqa: E731
    assert frag(rep, replicate=4).is_equal(frag(rep, replicate=4))
    assert not frag(rep, replicate=4).is_equal(frag(rep, replicate=2))


def test_tilelang_modules_and_ffi_names():
    import tilejit.tilelang.layout.fragment as fragment_module
    import tilejit.tilelang.layout.layout as layout_module
    import tilejit.tilelang.layout.swizzle as swizzle_module
    assert fragment_module.Fragment is Fragment and layout_module.Layout is Layout
    assert tilelang.layout.Layout is Layout
    with pytest.raises(AttributeError, match=r"tilelang.layout.swizzle.make_volta_swizzled_"
                                             r"layout in TileLang\) is not supported"):
        _ = swizzle_module.make_volta_swizzled_layout
    with pytest.raises(AttributeError, match=r"tilelang._ffi_api.Fragment_repeat .* only its "
                                             r"Layout_\* functions are built"):
        _ = _ffi_api.Fragment_repeat
    with pytest.raises(AttributeError, match=r"tvm.tirx.IndexMap .* not supported"):
        _ = tvm.tirx.IndexMap
    base = Layout([8, 16], lambda i, j: i * 16 + j)
    assert _ffi_api.Layout_expand(base, [2]).is_equal(base.expand(2))
    assert _ffi_api.Layout_inverse(base).is_equal(base.inverse())


# -- a kernel on an expanded / repeated layout ---------------------------------------

def _stacked_layout(which):
    if which == "expand":     # the 128-byte swizzle of one stage, under the stage index
        return make_swizzled_layout(tvm.tirx.decl_buffer((32, 64), "float16")).expand([2])
    # a rotated 16-row atom, per stage, repeated down the rows
    atom = Layout([16, 64], lambda i, j: i * 64 + (j + i) % 64)
    return atom.expand(2).repeat(dim=1, factor=2)


@tilelang.kernel
def stacked_copy(X, Y, which: T.constexpr = "expand"):
    """Y = 2·X through a (2, 32, 64) shared tile holding X's two 32-row halves."""
    with T.Kernel(1, threads=128):
        S = T.alloc_shared((2, 32, 64), X.dtype)
        T.annotate_layout({S: _stacked_layout(which)})
        for s, i, j in T.Parallel(2, 32, 64):
            S[s, i, j] = X[s * 32 + i, j]
        for s, i, j in T.Parallel(2, 32, 64):
            Y[s * 32 + i, j] = S[s, i, j] * 2


@pytest.mark.parametrize("which", ["expand", "repeat"])
def test_stacked_tile_with_an_expanded_layout_simulated(which):
    x = torch.randn(64, 64).half()
    y = torch.zeros(64, 64).half()
    stacked_copy(x, y, which=which)
    assert torch.equal(y, x * 2)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("which", ["expand", "repeat"])
def test_stacked_tile_with_an_expanded_layout_assembles(which, arch, ptxas):
    x = torch.randn(64, 64).half()
    ptx = stacked_copy.compile(x, torch.zeros_like(x), which=which, target="cuda",
                               arch=arch).ptx
    assert "st.shared" in ptx and "ld.shared" in ptx
    ptxas(ptx, arch)


@pytest.mark.gpu
@pytest.mark.parametrize("which", ["expand", "repeat"])
def test_stacked_tile_with_an_expanded_layout_gpu(which):
    x = torch.randn(64, 64, device="cuda").half()
    y = torch.zeros(64, 64, device="cuda").half()
    stacked_copy(x, y, which=which)
    torch.cuda.synchronize()
    assert torch.equal(y.cpu(), x.cpu() * 2)


INVERSES = {"row_major": Layout([32, 32], lambda i, j: [i, j]).inverse(),
            "transpose": Layout([32, 32], lambda i, j: [j, i]).inverse()}


@tilelang.kernel
def through_inverse(X, Y, which: T.constexpr = "row_major"):
    with T.Kernel(1, threads=128):
        S = T.alloc_shared((32, 32), X.dtype)
        T.annotate_layout({S: INVERSES[which]})
        T.copy(X, S)
        T.copy(S, Y)


def test_an_inverse_equal_to_a_known_layout_annotates_a_tile():
    x = torch.randn(32, 32).half()
    y = torch.zeros_like(x)
    through_inverse(x, y)
    assert torch.equal(y, x)


def test_any_other_inverse_is_a_compile_error():
    x = torch.randn(32, 32).half()
    with pytest.raises(tilelang.CompileError, match=r"the layout of 'S' cannot be computed on "
                                                    r"the GPU: Layout.inverse of <lambda> is "
                                                    r"evaluated by table"):
        through_inverse(x, torch.zeros_like(x), which="transpose")


def test_layouts_of_one_function_share_one_evaluation():
    """A kernel makes its T.Layout anew in every block (the lambda in its body): layouts
    of the same code over the same constant values share their evaluation and checks
    (the simulator checked each block's again); other values, or a captured object whose
    attributes may change between launches, get their own."""

    def make(n):
        return Layout((4, 8), lambda i, j: i * 8 + (j ^ n))
    first, again = make(1), make(1)
    assert first._evaluation is again._evaluation
    np.testing.assert_array_equal(again.offsets(), np.arange(32).reshape(4, 8) ^ 1)
    other = make(2)
    assert other._evaluation is not first._evaluation
    np.testing.assert_array_equal(other.offsets(), np.arange(32).reshape(4, 8) ^ 2)

    class Config:
        shift = 1
    config = Config()

    def make_from(cfg):
        return Layout((4, 8), lambda i, j: i * 8 + (j ^ cfg.shift))
    before = make_from(config)
    np.testing.assert_array_equal(before.offsets(), np.arange(32).reshape(4, 8) ^ 1)
    config.shift = 3
    after = make_from(config)
    assert after._evaluation is not before._evaluation
    np.testing.assert_array_equal(after.offsets(), np.arange(32).reshape(4, 8) ^ 3)
    with pytest.raises(ValueError, match="read-only"):
        after.offsets()[0, 0] = 5           # shared values are not to be changed
