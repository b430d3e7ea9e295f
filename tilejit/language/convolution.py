"""TileLang's im2col for 2-D convolution as a GEMM: ``T.im2col(img, col, nhw_step,
c_step, kernel, stride, dilation, pad)`` fills the shared tile ``col`` (block_M x
block_K) with rows ``nhw_step·block_M …`` and columns ``c_step·block_K …`` of the
image's im2col matrix.

``img`` is an NHWC tensor (N, H, W, C); the output has OH = (H + 2·pad − dilation·
(kernel − 1) − 1) // stride + 1 rows and OW likewise. Row m of the matrix is the output
pixel (n, oh, ow) = (m // (OH·OW), m % (OH·OW) // OW, m % OW); column k is the filter tap
(kh, kw, c) = (k // (kernel·C), k // C % kernel, k % C), channels fastest; the element is
``img[n, oh·stride + kh·dilation − pad, ow·stride + kw·dilation − pad, c]``, and 0 where
that lies in the padding, past the last image (a tail block of rows) or past the last
tap (a tail block of columns). A convolution is then ``T.gemm(col, W_flat, acc)`` with
the filter as a (kernel·kernel·C, F) matrix.

A statement in a kernel: the front end writes it as a ``T.Parallel`` loop over ``col``
(``frontend/im2col.py``), so it compiles and simulates as that loop does (ordinary
loads, not TMA's im2col mode); called as Python it raises.
"""
from __future__ import annotations

import warnings


def im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad, eviction_policy=None,
           annotations=None):
    """``col`` := its block of ``img``'s im2col matrix (see the module)."""
    raise TypeError("T.im2col is a statement of a kernel's body (`T.im2col(img, col, "
                    "nhw_step, c_step, kernel, stride, dilation, pad)`)")


def c2d_im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad,
               eviction_policy=None, annotations=None):
    """Deprecated in TileLang (to be removed in its 0.14.0): ``T.im2col``."""
    warnings.warn("T.c2d_im2col is deprecated (TileLang removes it in 0.14.0): use "
                  "T.im2col", DeprecationWarning, stacklevel=2)
    return im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad,
                  eviction_policy, annotations)
