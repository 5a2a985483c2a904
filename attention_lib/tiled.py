"""The tiled path: FlashAttention's algorithm, one block of scores at a time.

For each block of ``block_q`` queries we walk the keys ``block_k`` at a time
and keep three running quantities per query row (the online softmax of
Milakov and Gimelshein, arXiv:1805.02867):

    m    the largest score seen so far             (..., bq, 1)
    l    the sum of exp(score - m) so far           (..., bq, 1)
    acc  the sum of exp(score - m) * value so far   (..., bq, Ev)

When a new tile raises the maximum from m to m', everything accumulated so
far is rescaled by exp(m - m'), so all terms stay relative to one maximum.
``acc / l`` is divided out once, after the last tile (FlashAttention-2,
arXiv:2307.08691). Only one (..., bq, bk) tile of scores exists at a time, so
memory grows linearly with the sequence length instead of quadratically.
The result equals `scaled_dot_product_attention` up to rounding.
"""

from __future__ import annotations

from typing import Any

from .backend import device_of
from .inputs import prepare
from .masks import apply_mask, mask_tile

__all__ = ["flash_attention", "key_blocks"]


def _check_block(name: str, size: int) -> int:
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"{name} must be a positive integer, got {size!r}")
    return size


def key_blocks(
    q_rows: tuple[int, int], length_k: int, block_k: int, is_causal: bool
) -> list[tuple[int, int]]:
    """The key blocks ``[k0, k1)`` visited for the query rows ``[r0, r1)``.

    With ``is_causal`` a block whose first key comes after the last query row
    lies wholly above the diagonal: every score in it would be masked, so it
    is skipped, not computed and masked. The notebooks draw this list.
    """
    stop = min(length_k, q_rows[1]) if is_causal else length_k
    return [(k0, min(k0 + block_k, length_k)) for k0 in range(0, stop, block_k)]


def _query_block(problem: Any, rows: tuple[int, int], block_k: int) -> Any:
    """Attention output for query rows ``[r0, r1)``, one key tile at a time."""
    xp, value = problem.xp, problem.value
    q = problem.query[..., rows[0] : rows[1], :] * problem.scale  # (..., bq, E)
    batch_rows = tuple(q.shape[:-1])
    m = xp.full((*batch_rows, 1), -xp.inf, dtype=q.dtype, device=device_of(q))  # (..., bq, 1)
    total = xp.zeros((*batch_rows, 1), dtype=q.dtype, device=device_of(q))  # (..., bq, 1)
    acc = xp.zeros((*batch_rows, value.shape[-1]), dtype=q.dtype, device=device_of(q))  # (..., bq, Ev)
    for cols in key_blocks(rows, problem.key.shape[-2], block_k, problem.is_causal):
        k = problem.key[..., cols[0] : cols[1], :]  # (..., bk, E)
        v = value[..., cols[0] : cols[1], :]  # (..., bk, Ev)
        s = xp.matmul(q, xp.matrix_transpose(k))  # (..., bq, bk)
        for mask in mask_tile(xp, problem.mask, problem.is_causal, rows, cols, q):
            s = apply_mask(xp, s, mask)  # (..., bq, bk)
        m_new = xp.maximum(m, xp.max(s, axis=-1, keepdims=True))  # (..., bq, 1)
        # a row with every key so far masked has m_new = -inf; shift it by 0
        # instead, so exp(-inf - 0) = 0 rather than exp(-inf + inf) = NaN
        shift = xp.where(m_new == -xp.inf, 0.0, m_new)  # (..., bq, 1)
        p = xp.exp(s - shift)  # (..., bq, bk)
        rescale = xp.exp(m - shift)  # (..., bq, 1), exp(old max - new max) <= 1
        total = rescale * total + xp.sum(p, axis=-1, keepdims=True)  # (..., bq, 1)
        acc = rescale * acc + xp.matmul(p, v)  # (..., bq, Ev)
        m = m_new
    return acc / xp.where(total == 0, 1.0, total)  # (..., bq, Ev); all-masked rows stay 0


def flash_attention(
    query: Any,
    key: Any,
    value: Any,
    attn_mask: Any = None,
    is_causal: bool = False,
    *,
    scale: float | None = None,
    enable_gqa: bool = False,
    block_q: int = 128,
    block_k: int = 128,
) -> Any:
    """Scaled dot-product attention computed tile by tile (online softmax).

    Same arguments, shapes, semantics and errors as
    `scaled_dot_product_attention` (no dropout): query (..., L, E), key
    (..., S, E), value (..., S, Ev) give (..., L, Ev) in the query's dtype, on
    its device, numpy or torch. ``block_q`` and ``block_k`` are the tile
    sizes: any positive integers, also ones that do not divide L or S. At most
    one (..., block_q, block_k) tile of scores exists at a time; the mask is
    sliced per tile and causal tiles wholly above the diagonal are skipped.

    Raises ValueError for block sizes that are not positive integers.
    """
    _check_block("block_q", block_q)
    _check_block("block_k", block_k)
    problem = prepare(query, key, value, attn_mask, is_causal, scale, enable_gqa)
    xp, length = problem.xp, problem.query.shape[-2]
    blocks = [
        _query_block(problem, (r0, min(r0 + block_q, length)), block_k)
        for r0 in range(0, length, block_q)
    ]  # each (..., bq, Ev)
    if not blocks:  # L = 0
        out = xp.zeros(problem.shape, dtype=problem.query.dtype, device=device_of(problem.query))
    else:
        out = xp.concat(blocks, axis=-2)  # (..., L, Ev)
    return xp.astype(out, problem.out_dtype)
