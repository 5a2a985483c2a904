"""The readable loop: FlashAttention's algorithm, one block of scores at a time.

For each block of ``block_q`` queries we walk the keys ``block_k`` at a time
and keep three running quantities per query row (the online softmax of
Milakov and Gimelshein, arXiv:1805.02867):

    m      the largest score seen so far             (..., bq, 1)
    total  the sum of exp(score - m) so far (the papers' l)  (..., bq, 1)
    acc    the sum of exp(score - m) * value so far  (..., bq, Ev)

When a new tile raises the maximum from m to m', everything accumulated so
far is rescaled by exp(m - m'), so all terms stay relative to one maximum.
``acc / total`` is divided out once, after the last tile (FlashAttention-2,
arXiv:2307.08691). Only one (..., bq, bk) tile of scores exists at a time, so
memory grows linearly with the sequence length instead of quadratically.
The result equals `scaled_dot_product_attention` up to rounding, except
where an input holds NaN or an infinity at a masked position: a masked key
is never read here (see `attention_lib.flash.tiles`).

Written once for numpy and torch through the array-API namespace; numpy
arrays run it. Torch tensors run the in-place version in
`attention_lib.flash.torch_tiled`, which also has the backward pass.
"""

from __future__ import annotations

from typing import Any

from ..backend import device_of, nan_is_expected
from ..inputs import AttentionProblem
from ..masks import apply_mask, mask_tile
from ..nonfinite import visible_matmul
from .route import Tiling
from .tiles import (
    all_finite,
    key_blocks,
    query_blocks,
    row_shift,
    visible_keys,
)

__all__ = ["NUMPY_BLOCK_K", "NUMPY_BLOCK_Q", "tiled_loop"]

# Tiles of the readable loop (numpy): small enough to draw, large enough that
# the matrix products, not Python, take the time.
NUMPY_BLOCK_Q = 256
NUMPY_BLOCK_K = 512


def _query_block(
    problem: AttentionProblem, rows: tuple[int, int], block_k: int, exact: bool
) -> Any:
    """Attention output for query rows ``[r0, r1)``, one key tile at a time.

    Query, key and value keep their own batch dimensions; the products
    broadcast them, and the running quantities have the whole batch.
    ``exact``: the exact route, for inputs that hold a non-finite value:
    masked scores are forced to -inf and the product with the values reads
    no masked key (`attention_lib.flash.tiles`).
    """
    xp, value = problem.xp, problem.value
    q = problem.query[..., rows[0] : rows[1], :] * problem.scale  # (*Bq, bq, E)
    batch_rows = (*problem.batch, rows[1] - rows[0])
    device = device_of(q)
    m = xp.full((*batch_rows, 1), -xp.inf, dtype=q.dtype, device=device)  # (..., bq, 1)
    total = xp.zeros((*batch_rows, 1), dtype=q.dtype, device=device)  # (..., bq, 1)
    acc = xp.zeros((*batch_rows, value.shape[-1]), dtype=q.dtype, device=device)  # (..., bq, Ev)
    for cols in key_blocks(rows, problem.key.shape[-2], block_k, problem.is_causal):
        k = problem.key[..., cols[0] : cols[1], :]  # (*Bk, bk, E)
        v = value[..., cols[0] : cols[1], :]  # (*Bv, bk, Ev)
        s = xp.matmul(q, xp.matrix_transpose(k))  # (..., bq, bk)
        masks = mask_tile(xp, problem.mask, problem.is_causal, rows, cols, q)
        for mask in masks:
            s = apply_mask(xp, s, mask)  # (..., bq, bk)
        visible = visible_keys(xp, masks) if exact else None  # (..., bq or 1, bk or 1)
        if visible is not None:
            s = xp.where(visible, s, -xp.inf)  # a masked score is -inf, whatever the key held
        m_new = xp.maximum(m, xp.max(s, axis=-1, keepdims=True))  # (..., bq, 1)
        shift = row_shift(xp, m_new)  # (..., bq, 1)
        p = xp.exp(s - shift)  # (..., bq, bk)
        rescale = xp.exp(m - shift)  # (..., bq, 1), exp(old max - new max) <= 1
        total = rescale * total + xp.sum(p, axis=-1, keepdims=True)  # (..., bq, 1)
        acc = rescale * acc + visible_matmul(xp, p, v, visible)  # (..., bq, Ev)
        m = m_new
    return acc / xp.where(total == 0, 1.0, total)  # (..., bq, Ev); all-masked rows stay 0


@nan_is_expected
def tiled_loop(problem: AttentionProblem, tiling: Tiling) -> Any:
    """The readable loop on any array namespace: output (..., L, Ev) in the accumulation dtype,
    in ``tiling``'s tiles (`NUMPY_BLOCK_Q` x `NUMPY_BLOCK_K` where None).

    The output is allocated once and each query block is written into its
    rows: no list of blocks, no concatenation. A result that is not finite
    is computed again on the exact route (`attention_lib.flash.tiles`).
    """
    sized = tiling.sized(NUMPY_BLOCK_Q, NUMPY_BLOCK_K)
    assert sized.block_q is not None and sized.block_k is not None
    out = _loop(problem, sized.block_q, sized.block_k, exact=False)
    if not all_finite(problem.xp, out):
        out = _loop(problem, sized.block_q, sized.block_k, exact=True)
    return out


def _loop(problem: AttentionProblem, block_q: int, block_k: int, exact: bool) -> Any:
    q = problem.query
    out = problem.xp.empty(problem.shape, dtype=q.dtype, device=device_of(q))  # (..., L, Ev)
    for rows in query_blocks(q.shape[-2], block_q):
        out[..., rows[0] : rows[1], :] = _query_block(problem, rows, block_k, exact)
    return out
