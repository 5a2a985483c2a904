"""The extremes every exercise's drawn cases include, so that no fragile answer passes.

- `large_scores`: queries scaled so that the largest score is near +1000, far
  past exp's range (exp(710) overflows float64): a softmax that does not
  subtract its row's maximum returns inf or NaN.
- `far_below`: rows whose every score lies below -900 (exp(-746) is 0 in
  float64): a softmax without its maximum divides 0 by 0, and a running state
  whose maximum starts at 0 instead of -inf never rises from it.
- `apart`: two lengths that differ, so that L != S (a transposed answer has
  the wrong shape).

Scores are q·k/sqrt(E) as in every exercise, with grouped heads (``key``
heads fewer than ``query`` heads, query head h reading key head h // group).
"""

from __future__ import annotations

import numpy as np

__all__ = ["FAR_BELOW", "LARGE", "apart", "far_below", "large_scores", "scores"]

#: the largest score of a case with large scores (about)
LARGE = 1000.0
#: every score of a row far below zero is below this
FAR_BELOW = -900.0


def scores(query: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Unmasked q·k/sqrt(E): (L, S) or (H, L, S), key heads repeated to the query's."""
    if key.ndim == 3 and key.shape[0] != query.shape[0]:
        key = np.repeat(key, query.shape[0] // key.shape[0], axis=0)  # (H, S, E)
    return query @ np.swapaxes(key, -1, -2) / np.sqrt(query.shape[-1])  # (..., L, S)


def large_scores(rng: np.random.Generator, query: np.ndarray, key: np.ndarray) -> np.ndarray:
    """``query`` scaled so that its largest score against ``key`` is between +800 and +1000
    (the query negated first if every score is negative)."""
    raw = scores(query, key)
    if np.max(raw) <= 0:
        query, raw = -query, -raw
    return query * (LARGE * rng.uniform(0.8, 1.0) / float(np.max(raw)))


def far_below(
    rng: np.random.Generator, query: np.ndarray, key: np.ndarray, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(query, key) where the query ``rows`` (a bool (L,) mask) score below -900 on every key.

    The keys share one direction u, strongly enough that every key points the
    same way along it, and those queries point against it: their scores are
    all negative, then scaled so that each row's largest is -900 to -1000.
    The other rows keep scores of ordinary size.
    """
    width = query.shape[-1]
    u = rng.normal(size=width)
    u /= np.linalg.norm(u)  # (E,)
    key = key + 20.0 * u  # (..., S, E): k·u = 20 ± a few for every key
    query = np.array(query, dtype=float)  # (..., L, E)
    noise = 0.05 * rng.normal(size=query[..., rows, :].shape)
    query[..., rows, :] = -u + noise
    top = scores(query, key)[..., rows, :].max(axis=-1, keepdims=True)  # (..., n, 1), < 0
    target = rng.uniform(900.0, 1000.0, size=top.shape)
    query[..., rows, :] *= target / -top
    return query, key


def apart(rng: np.random.Generator, low: int, high: int) -> tuple[int, int]:
    """Two different lengths from ``low`` to ``high``, in either order."""
    first = int(rng.integers(low, high + 1))
    second = int(rng.choice([n for n in range(low, high + 1) if n != first]))
    return first, second
