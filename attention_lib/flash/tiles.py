"""The tiles every execution path walks, and the one rule they share for masked rows.

The numpy loop, the torch autograd path and the notebooks' drawings all cut
the (L, S) score matrix with these functions, so "which tiles are visited"
has one definition (the Triton kernels compute the same ranges on the GPU).
"""

from __future__ import annotations

from typing import Any

__all__ = ["key_blocks", "query_blocks", "row_shift"]


def query_blocks(length: int, block_q: int) -> list[tuple[int, int]]:
    """The query row blocks ``[r0, r1)`` covering ``length`` rows, the last one possibly short."""
    return [(r0, min(r0 + block_q, length)) for r0 in range(0, length, block_q)]


def key_blocks(
    q_rows: tuple[int, int], length_k: int, block_k: int, is_causal: bool
) -> list[tuple[int, int]]:
    """The key blocks ``[k0, k1)`` visited for the query rows ``[r0, r1)``.

    With ``is_causal`` query row r sees the keys up to r (top-left aligned),
    so the rows ``[r0, r1)`` see no key at or after r1: a block starting
    there lies wholly above the diagonal and is skipped, not computed and
    masked. The blocks that cross the diagonal are masked by `mask_tile`.
    The notebooks draw this list.
    """
    stop = min(length_k, q_rows[1]) if is_causal else length_k
    return [(k0, min(k0 + block_k, length_k)) for k0 in range(0, stop, block_k)]


def row_shift(xp: Any, m: Any) -> Any:
    """What each row's scores are shifted by before exp: the running maximum ``m``.

    A row with every key so far masked has m = -inf; it is shifted by 0
    instead, so exp(-inf - 0) = 0 rather than exp(-inf + inf) = NaN.
    """
    return xp.where(m == -xp.inf, 0.0, m)  # (..., bq, 1)
