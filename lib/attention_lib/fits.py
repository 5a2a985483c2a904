"""Fitting power laws to measurements: the growth exponents the notebooks quote."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["fit_exponent", "log_log_slope"]


def log_log_slope(xs: Sequence[float], ys: Sequence[float], points: int | None = None) -> float:
    """The exponent k of ``y ~ x**k``: the least-squares slope of log(y) on log(x).

    ``points`` keeps only the pairs with the largest x, where asymptotic growth
    shows and fixed costs no longer do. Raises ValueError, naming the counts,
    when fewer than two pairs remain or the lengths differ; x and y must be > 0.
    """
    if len(xs) != len(ys):
        raise ValueError(f"need as many x as y values, got {len(xs)} and {len(ys)}")
    pairs = sorted(zip(xs, ys, strict=True))[-points:] if points else list(zip(xs, ys, strict=True))
    if len(pairs) < 2:
        raise ValueError(f"need two or more (x, y) pairs to fit a slope, got {len(pairs)}")
    x, y = np.log([p[0] for p in pairs]), np.log([p[1] for p in pairs])  # (n,), (n,)
    return float(np.polyfit(x, y, 1)[0])


def fit_exponent(
    lengths: Sequence[float], values: Sequence[float | None], points: int = 3
) -> float | None:
    """Growth exponent in L over the largest ``points`` lengths with a measurement.

    `log_log_slope` of the measured pairs: missing (None) and non-positive
    values, from refused or failed runs, are left out; None when fewer than
    two measurements remain.
    """
    pairs = [(x, y) for x, y in zip(lengths, values, strict=True) if y is not None and y > 0]
    if len(pairs) < 2:
        return None
    return log_log_slope([p[0] for p in pairs], [p[1] for p in pairs], points)
