"""``compress``: a dense 2:4 sparse matrix (1:2 for float32) as the two tensors
``T.gemm_sp`` reads (``language/sparse.py``), on the tensor's own device, with torch."""
from __future__ import annotations

from tilejit.language.dtypes import as_dtype
from tilejit.language.sparse import GROUP_CONFIG
from tilejit.language.compat import module_getattr


def compress(dense, meta_dtype=None):
    """(kept values, metadata) of ``dense`` (M x K, a torch tensor with at most 2 nonzeros
    in every group of 4 along K; 1 of 2 for float32): each group's kept positions in
    increasing order (the lowest zero positions make up the count), 4 bits a group
    packed from the low bits up into ``meta_dtype`` integers (default int16; int32 for
    8-bit values). A group with more nonzeros than it may keep is a ValueError."""
    import torch        # only for a caller that has torch tensors
    if dense.dim() != 2:
        raise ValueError(f"compress: dense must be a 2-d tensor, got shape {tuple(dense.shape)}")
    dtype = as_dtype(dense.dtype)
    if dtype not in GROUP_CONFIG:
        raise ValueError(f"compress: {dtype} has no structured sparsity on the tensor cores")
    elem, group = GROUP_CONFIG[dtype]
    meta = as_dtype(meta_dtype if meta_dtype is not None else
                    ("int32" if dtype.bits == 8 else "int16"))
    M, K = dense.shape
    per = meta.bits // 4
    if K % (group * per):
        raise ValueError(f"compress: K = {K} must be a multiple of {group * per} (the "
                         f"columns one {meta} of metadata describes)")
    groups = dense.float().view(M, K // group, group)
    zero = groups == 0
    if ((~zero).sum(-1) > elem).any():
        raise ValueError(f"compress: a group of {group} along K has more than {elem} "
                         f"nonzeros: the matrix is not {elem}:{group} sparse")
    key = zero.to(torch.int64) * group + torch.arange(group, device=dense.device)
    kept = key.argsort(-1)[..., :elem].sort(-1).values
    values = groups.gather(-1, kept).reshape(M, K * elem // group).to(dense.dtype)
    if elem == 2:
        codes = kept[..., 0] | (kept[..., 1] << 2)
    else:           # a 32-bit group's one value: 0b0100 at position 0, 0b1110 at 1
        codes = torch.where(kept[..., 0] == 0, 0b0100, 0b1110)
    codes = codes.view(M, K // group // per, per)
    word = codes[..., 0].clone()
    for j in range(1, per):
        word |= codes[..., j] << (4 * j)
    if meta.kind == "int":     # the word's bits as a signed integer of meta's width
        word = torch.where(word >= 2 ** (meta.bits - 1), word - 2 ** meta.bits, word)
    return values, word.to(meta.as_torch())

# TileLang's names this module does not have: an error naming them (``compat.py``)
__getattr__ = module_getattr(
    "tilelang.utils.sparse", __name__,
    "of TileLang's sparse helpers tilejit has compress")
