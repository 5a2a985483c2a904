"""The tiles every execution path walks, and the rules they share for masked keys.

The numpy loop, the torch autograd path and the notebooks' drawings all cut
the (L, S) score matrix with these functions, so "which tiles are visited"
has one definition (the Triton kernels compute the same ranges on the GPU).

Masked keys are never read. Where a row's key is masked (boolean False, a
float mask of -inf, ``is_causal``, including the tiles that are skipped),
that key's score and value have no effect on the row's output or on any
gradient through the row, whatever they hold: NaN and infinities included.
PyTorch parts from this: there a NaN value at a masked position still
reaches the row through 0 * NaN in the weighted sum, and a NaN key under a
float mask through NaN + (-inf). A finite mask value (-1e9, the dtype's
minimum) is an ordinary bias, not a mask. A row with no visible key gives
zeros, and zero gradients, whatever its query holds. Non-finite entries at
visible positions make the outputs they reach non-finite.

Such leaks only happen when an input holds a non-finite value, and a leak
always shows: a masked position contributes exactly 0 x (what it holds),
which is 0 for a finite value and NaN otherwise. So the paths run the fast
route, check its results once (`all_finite`: one pass over the output, or
over the gradients) and only when one is not finite compute them again on
the exact route: scores forced to -inf where masked (`visible_keys`) and
products over a tile that read no masked row (`visible_matmul` of
`attention_lib.nonfinite`). A finite result of the fast route is the exact
route's result.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "all_finite",
    "first_row",
    "key_blocks",
    "query_blocks",
    "row_shift",
    "score_fraction",
    "visible_keys",
]


def query_blocks(length: int, block_q: int) -> list[tuple[int, int]]:
    """The query row blocks ``[r0, r1)`` covering ``length`` rows, the last one possibly short."""
    return [(r0, min(r0 + block_q, length)) for r0 in range(0, length, block_q)]


def key_blocks(
    q_rows: tuple[int, int],
    length_k: int,
    block_k: int,
    is_causal: bool,
    block_k_below: int | None = None,
) -> list[tuple[int, int]]:
    """The key blocks ``[k0, k1)`` visited for the query rows ``[r0, r1)``.

    With ``is_causal`` query row r sees the keys up to r (top-left aligned),
    so the rows ``[r0, r1)`` see no key at or after r1: a block starting
    there lies wholly above the diagonal and is skipped, not computed and
    masked. The blocks that cross the diagonal are masked by `mask_tile`.
    The notebooks draw this list.

    ``block_k_below`` (causal only; the torch path's choice): the keys
    before r0, which every row of the block sees, come in blocks that wide,
    then the keys from r0 to r1 in blocks ``block_k`` wide (the last cut
    at r1). Only those are masked, and narrow ones waste few scores above
    the diagonal, while wide unmasked tiles take fewer steps.
    """
    stop = min(length_k, q_rows[1]) if is_causal else length_k
    if not (is_causal and block_k_below):
        return [(k0, min(k0 + block_k, length_k)) for k0 in range(0, stop, block_k)]
    below = min(q_rows[0], length_k)
    return [(k0, min(k0 + block_k_below, below)) for k0 in range(0, below, block_k_below)] + [
        (k0, min(k0 + block_k, stop)) for k0 in range(below, stop, block_k)
    ]


def first_row(rows: tuple[int, int], cols: tuple[int, int], is_causal: bool) -> int:
    """The first of the query rows ``[r0, r1)`` that sees a key of the block ``[c0, c1)``.

    With ``is_causal`` row r sees the keys up to r, so the rows before c0
    see none of the block: the torch path leaves them out of the tile (the
    numpy loop, kept simple, computes and masks them). Without it, r0.
    """
    return max(rows[0], cols[0]) if is_causal else rows[0]


def score_fraction(
    length_q: int,
    length_k: int,
    block_q: int,
    block_k: int,
    is_causal: bool,
    block_k_below: int | None = None,
) -> float:
    """The fraction of the L x S scores the torch path computes (1 for L or S = 0).

    Without ``is_causal`` every tile is visited: 1. With it, the tiles wholly
    above the diagonal are skipped, and so are a tile's rows above its first
    key (`first_row`), so the fraction falls towards the visible half as
    the key blocks shrink: L = S = 2048 in blocks of 256 keys computes 9/16
    of the scores (whatever the query blocks), blocks of 128 keys 17/32.
    ``block_k_below`` as `key_blocks`: wider blocks below the diagonal
    waste nothing, and the blocks from r0 on stop at the diagonal, so it
    changes the fraction only where the query blocks do not start and end
    on multiples of ``block_k``.
    """
    if length_q == 0 or length_k == 0:
        return 1.0
    computed = sum(
        (rows[1] - first_row(rows, cols, is_causal)) * (cols[1] - cols[0])
        for rows in query_blocks(length_q, block_q)
        for cols in key_blocks(rows, length_k, block_k, is_causal, block_k_below)
    )
    return computed / (length_q * length_k)


def row_shift(xp: Any, m: Any) -> Any:
    """What each row's scores are shifted by before exp: the running maximum ``m``.

    A row with every key so far masked has m = -inf; it is shifted by 0
    instead, so exp(-inf - 0) = 0 rather than exp(-inf + inf) = NaN.
    """
    return xp.where(m == -xp.inf, 0.0, m)  # (..., bq, 1)


def all_finite(xp: Any, *arrays: Any) -> bool:
    """Whether every entry of every array is finite, from one sum over each (no temporaries).

    A NaN or an infinity makes the sum non-finite; so, rarely, does a sum
    of huge finite entries that overflows (a False that only costs time: the
    paths then take their exact route, whose result is the same).
    """
    return all(bool(xp.isfinite(xp.sum(x))) for x in arrays if x is not None)


def visible_keys(xp: Any, parts: list[Any]) -> Any:
    """Where the tile's keys are visible, from the masks that apply to it (`mask_tile`).

    A boolean mask is its own answer; a float mask hides a key only where it
    holds -inf. Returns a boolean array broadcastable to the tile, or None
    when no mask applies (every key visible).
    """
    visible = None
    for part in parts:
        seen = part if part.dtype == xp.bool else part != -xp.inf
        visible = seen if visible is None else visible & seen
    return visible
