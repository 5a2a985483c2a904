"""Linear attention against softmax attention, measured (notebook 06).

- `time_softmax_vs_linear`: wall time of softmax attention against linear
  attention as the length grows, robust to a busy machine (`TimingRow`),
  with `timing_slopes` (the fitted growth exponents), `timing_warnings`
  (sizes whose repeats spread too much to fit) and `describe_slopes` (the
  fit in words, via `growth_words`).
- `random_feature_error`: how far Performer's estimate is from exact
  softmax attention, against the number of random features.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from attention_lib.core import scaled_dot_product_attention
from attention_lib.fits import log_log_slope
from attention_lib.inputs import positive_integer
from attention_lib.variants import (
    linear_attention,
    performer_attention,
)

__all__ = [
    "MIN_SAMPLE_S",
    "NOISY_SPREAD",
    "FeatureErrorRow",
    "TimingRow",
    "TimingSlopes",
    "describe_slopes",
    "growth_words",
    "random_feature_error",
    "time_softmax_vs_linear",
    "timing_slopes",
    "timing_warnings",
]


# -- softmax against linear attention, timed -----------------------------------------------


@dataclass(frozen=True)
class TimingRow:
    """Seconds per call at one length T: the median of the repeats, and their spread.

    ``*_spread`` is the interquartile range of the repeats over their median
    (0 when every repeat took the same time): how far one reading can be trusted.
    """

    length: int
    softmax_s: float
    linear_s: float
    softmax_spread: float = 0.0
    linear_spread: float = 0.0


#: Above this interquartile range / median, `timing_warnings` reports a size as noisy.
NOISY_SPREAD = 0.25
#: A timed sample repeats a call until it lasts at least this long (as ``timeit`` does).
MIN_SAMPLE_S = 0.02


def _quartile_spread(times: Sequence[float]) -> float:
    """(75th - 25th percentile) / median of ``times``."""
    q1, median, q3 = np.percentile(times, [25, 50, 75])
    return float((q3 - q1) / median) if median > 0 else 0.0


def time_softmax_vs_linear(
    lengths: Sequence[int] = (512, 1024, 2048, 4096),
    width: int = 64,
    repeats: int = 7,
    seed: int = 0,
    dtype: Any = np.float32,
    warmup: int = 2,
) -> list[TimingRow]:
    """Wall time of softmax attention (reference path) and elu+1 linear attention
    on one head of length T = L = S, width E = Ev = ``width``, numpy.

    Measured to hold up on a busy machine: ``warmup`` untimed calls per path
    and size first (allocation, library loading, caches), then ``repeats``
    rounds that each time every size and path once, in turn (a burst of
    load then touches every size instead of skewing one), with
    ``time.perf_counter``; a sample of a fast call repeats it until the
    sample lasts `MIN_SAMPLE_S` and reports the time per call. Each row holds
    the median of its repeats and their spread (`TimingRow`);
    `timing_warnings` says which are too noisy to fit.
    The sizes start where the quadratic term dominates softmax's fixed costs,
    so `timing_slopes` fits where the asymptote holds. Machine-dependent:
    never assert on the times. Raises ValueError, naming it, for no lengths,
    a length, width or repeat count that is not a positive integer, or a
    negative warmup.
    """
    if not lengths:
        raise ValueError(f"need lengths >= 1, got lengths {tuple(lengths)}")
    for t in lengths:
        positive_integer("every length", t)
    positive_integer("width", width)
    positive_integer("repeats", repeats)
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup!r}")
    rng = np.random.default_rng(seed)
    calls = {}
    for t in lengths:
        qkv = tuple(rng.standard_normal((t, width)).astype(dtype) for _ in range(3))  # (T, E)
        calls[t] = {
            "softmax": partial(scaled_dot_product_attention, *qkv),
            "linear": partial(linear_attention, *qkv),
        }
    # calls per timed sample: enough that one sample lasts MIN_SAMPLE_S, so a fast path's
    # reading is not mostly timer and scheduler noise
    number: dict[tuple[int, str], int] = {}
    for t, paths in calls.items():
        for path, fn in paths.items():
            took = 0.0
            for _ in range(max(warmup, 1)):
                start = time.perf_counter()
                fn()
                took = time.perf_counter() - start
            number[t, path] = max(1, math.ceil(MIN_SAMPLE_S / max(took, 1e-9)))
    times: dict[tuple[int, str], list[float]] = {key: [] for key in number}
    for _ in range(repeats):
        for t, paths in calls.items():
            for path, fn in paths.items():
                n = number[t, path]
                start = time.perf_counter()
                for _ in range(n):
                    fn()
                times[t, path].append((time.perf_counter() - start) / n)
    return [
        TimingRow(
            length=t,
            softmax_s=float(np.median(times[t, "softmax"])),
            linear_s=float(np.median(times[t, "linear"])),
            softmax_spread=_quartile_spread(times[t, "softmax"]),
            linear_spread=_quartile_spread(times[t, "linear"]),
        )
        for t in lengths
    ]


@dataclass(frozen=True)
class TimingSlopes:
    """Growth exponents k of time ~ T**k, fitted on the largest ``points`` lengths."""

    softmax: float
    linear: float
    from_length: int
    points: int


def timing_slopes(rows: Sequence[TimingRow], points: int = 3) -> TimingSlopes:
    """Log-log slopes of the median times over the ``points`` largest lengths.

    Raises ValueError (from `attention_lib.fits.log_log_slope`) with fewer than two rows.
    """
    lengths = [r.length for r in rows]
    kept = sorted(lengths)[-points:]
    return TimingSlopes(
        softmax=log_log_slope(lengths, [r.softmax_s for r in rows], points),
        linear=log_log_slope(lengths, [r.linear_s for r in rows], points),
        from_length=kept[0],
        points=len(kept),
    )


def timing_warnings(rows: Sequence[TimingRow], limit: float = NOISY_SPREAD) -> list[str]:
    """One line per size whose repeats spread more than ``limit`` (IQR / median), else []."""
    warnings = []
    for r in rows:
        for path, spread in (("softmax", r.softmax_spread), ("linear", r.linear_spread)):
            if spread > limit:
                warnings.append(
                    f"warning: {path} at T = {r.length} varied by {spread:.0%} of its median "
                    f"between repeats (more than {limit:.0%}): the machine was busy; run the "
                    "cell again for a steadier fit"
                )
    return warnings


def growth_words(slope: float, tolerance: float = 0.3) -> str:
    """How a fitted exponent reads: "about linearly" within ``tolerance`` of 1,
    "about quadratically" within it of 2, else the exponent itself."""
    if abs(slope - 1) <= tolerance:
        return "about linearly"
    if abs(slope - 2) <= tolerance:
        return "about quadratically"
    return f"like T^{slope:.1f}"


def describe_slopes(slopes: TimingSlopes) -> str:
    """A title computed from the fitted slopes: what each path's time did, in words and numbers."""
    return (
        f"Fitted on T ≥ {slopes.from_length}: softmax grows {growth_words(slopes.softmax)} "
        f"(slope {slopes.softmax:.2f}), linear attention {growth_words(slopes.linear)} "
        f"(slope {slopes.linear:.2f})"
    )


@dataclass(frozen=True)
class FeatureErrorRow:
    """Relative error of Performer attention with m features, over several projections."""

    num_features: int
    mean_error: float
    std_error: float


def random_feature_error(
    feature_counts: Sequence[int] = (16, 64, 256, 1024, 4096),
    length: int = 32,
    width: int = 16,
    projections: int = 8,
    seed: int = 0,
    orthogonal: bool = False,
    input_std: float = 0.5,
) -> list[FeatureErrorRow]:
    """How far `performer_attention` is from exact softmax attention, against m.

    One seeded problem (query, key, value (length, width), float64, normal with
    standard deviation ``input_std`` for query and key, 1 for value); for each
    m, ``projections`` independent random projections (seeds 0, 1, ...); the
    error is ``|approx - exact|_F / |exact|_F``. Plain Gaussian features by
    default, whose error falls like 1/sqrt(m) (orthogonal ones do somewhat
    better at small m). The estimator's variance grows like
    exp(|q + k|^2 * scale): with input_std = 1 and width 16 the error at m = 4096
    is still about 0.5, which is why the default inputs are small.
    """
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((length, width)) for _ in range(3))  # (T, E) each
    q, k = q * input_std, k * input_std  # (T, E)
    exact = scaled_dot_product_attention(q, k, v)  # (T, E)
    rows = []
    for m in feature_counts:
        errors = [
            np.linalg.norm(performer_attention(q, k, v, m, seed=s, orthogonal=orthogonal) - exact)
            / np.linalg.norm(exact)
            for s in range(projections)
        ]
        rows.append(FeatureErrorRow(m, float(np.mean(errors)), float(np.std(errors))))
    return rows
