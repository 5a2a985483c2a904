"""Masks: which keys each query may look at, applied to the scores before softmax.

Both execution paths call these on a block of scores, the reference path with
one block that covers everything, the tiled path once per tile, so a mask
means the same thing on both.
"""

from __future__ import annotations

from typing import Any

from .backend import device_of

__all__ = ["apply_mask", "causal_mask", "mask_index", "mask_tile", "visible_keys"]


def causal_mask(xp: Any, rows: tuple[int, int], cols: tuple[int, int], device: Any = None) -> Any:
    """Boolean causal mask for query rows ``[r0, r1)`` and key columns ``[c0, c1)``.

    True where key index <= query index: the lower triangle of
    ``tril(ones(L, S))`` aligned top-left, as PyTorch defines ``is_causal``
    (also when L != S). Returns shape (r1 - r0, c1 - c0).
    """
    r = xp.arange(rows[0], rows[1], device=device)  # (R,)
    c = xp.arange(cols[0], cols[1], device=device)  # (C,)
    return r[:, None] >= c[None, :]  # (R, C)


def apply_mask(xp: Any, scores: Any, mask: Any, *, exact: bool = False) -> Any:
    """Scores with ``mask`` applied; ``mask`` broadcasts to ``scores`` (..., l, s).

    A boolean mask keeps True entries and sets False ones to -inf (the key
    takes no part); a float mask is added, so -inf removes a key and finite
    values bias it (-1e9 too: a weight that underflows to 0, not a masked
    key). ``None`` returns ``scores`` unchanged.

    Where a float mask holds -inf the result is -inf whatever the score:
    with ``exact=True`` also for a NaN or +inf score (NaN + -inf would be
    NaN), at the cost of a comparison and a select; without it, the sum,
    which is the same whenever the scores are finite (see
    `attention_lib.nonfinite`). A boolean mask is exact either way.
    """
    if mask is None:
        return scores
    if mask.dtype == xp.bool:
        return xp.where(mask, scores, -xp.inf)  # (..., l, s)
    added = scores + xp.astype(mask, scores.dtype, copy=False)  # (..., l, s)
    if exact:
        return xp.where(mask == -xp.inf, -xp.inf, added)  # (..., l, s)
    return added


def visible_keys(
    xp: Any, mask: Any, is_causal: bool, length_q: int, length_k: int, device: Any = None
) -> Any:
    """Which key each query sees: boolean (..., L, S), or None when every key is seen.

    A key is hidden from a query where a boolean ``mask`` is False, a float
    ``mask`` is -inf (only -inf: a large finite bias such as -1e9 is seen,
    with a weight that underflows to 0), or ``is_causal`` puts it after the
    query (top-left aligned). The mask's batch dimensions are kept as they
    are (they broadcast); its last two are broadcast to (L, S), a view.
    """
    seen = None
    if mask is not None:
        seen = mask if mask.dtype == xp.bool else mask != -xp.inf  # (..., L or 1, S or 1)
    if is_causal:
        causal = causal_mask(xp, (0, length_q), (0, length_k), device)  # (L, S)
        seen = causal if seen is None else seen & causal
    if seen is None:
        return None
    return xp.broadcast_to(seen, (*seen.shape[:-2], length_q, length_k))  # (..., L, S)


def mask_index(mask: Any, rows: tuple[int, int], cols: tuple[int, int]) -> tuple[Any, ...]:
    """The index of ``mask``'s part that covers the tile of scores ``[rows) x [cols)``.

    ``mask`` has at least two dimensions and broadcasts to (..., L, S); a
    dimension of size 1 broadcasts over every tile and is kept whole.
    """
    return (
        Ellipsis,
        slice(None) if mask.shape[-2] == 1 else slice(*rows),
        slice(None) if mask.shape[-1] == 1 else slice(*cols),
    )


def mask_tile(
    xp: Any,
    mask: Any,
    is_causal: bool,
    rows: tuple[int, int],
    cols: tuple[int, int],
    like: Any,
) -> list[Any]:
    """The masks that apply to the tile of scores ``[rows) x [cols)``.

    ``mask`` is the user's mask with at least two dimensions, broadcastable
    to (..., L, S) and not broadcast: only its tile is sliced (a view), and a
    dimension of size 1 is kept whole, to broadcast over the tile. The
    causal mask is built only for tiles that cross the diagonal: tiles
    wholly below it need none.
    """
    parts = []
    if mask is not None:
        parts.append(mask[mask_index(mask, rows, cols)])  # (..., bq or 1, bk or 1), a view
    if is_causal and cols[1] - 1 > rows[0]:
        parts.append(causal_mask(xp, rows, cols, device_of(like)))  # (bq, bk)
    return parts
