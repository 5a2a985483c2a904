"""Online softmax (Milakov and Gimelshein, arXiv:1805.02867), one score at a time.

The ordinary stable softmax reads its scores three times: once for the
maximum, once for the sum of exp(x - max), once to divide. The online form
keeps two running numbers while the scores stream past,

    m_t = max(m_{t-1}, x_t)                                  running maximum
    l_t = l_{t-1} * exp(m_{t-1} - m_t) + exp(x_t - m_t)      running sum

so the maximum and the sum come out of a single pass. When a new maximum
arrives, the sum collected so far was measured against the old one and is
multiplied by the rescale factor exp(m_{t-1} - m_t) <= 1. After the last
score, ``exp(x_i - m_n) / l_n`` is exactly the softmax. The tiled attention
path (`attention_lib.flash.loop`) runs this recurrence per query row, one tile of
scores at a time, and also folds the division into the weighted sum of
values, so the scores are read once.

Everything here is numpy and works on one stream (a 1-D array) at a time:
it is for reading and drawing, not for speed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

__all__ = [
    "CountingStream",
    "OnlineSoftmaxTrace",
    "PassCount",
    "compare_passes",
    "online_softmax_steps",
    "online_softmax_two_pass",
    "online_weighted_sum_one_pass",
    "safe_softmax_three_pass",
]


def _stream(scores: object, name: str = "scores") -> np.ndarray:
    """``scores`` as a 1-D float64 array of finite values or -inf, else ValueError."""
    x = np.asarray(scores, dtype=np.float64)  # (n,)
    if x.ndim != 1:
        raise ValueError(f"{name} must be a 1-D stream of scores, got shape {x.shape}")
    bad = np.isnan(x) | (x == np.inf)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"{name} must be finite or -inf (a masked key); entry {i} is {x[i]}, "
            "which makes the softmax undefined"
        )
    return x


def _shift(m: float) -> float:
    """What scores are measured against: the running max, or 0 while every score is -inf."""
    return 0.0 if m == -np.inf else m


@dataclass(frozen=True)
class OnlineSoftmaxTrace:
    """The online softmax's state after each score of a stream of n scores.

    Every array has shape (n,) and dtype float64; entry t is the state after
    reading ``scores[t]``:

    - ``running_max[t]``: m_t, the largest score so far (-inf while all are -inf);
    - ``running_sum[t]``: l_t, the sum of exp(x_i - m_t) over the scores so far;
    - ``rescale[t]``: exp(m_{t-1} - m_t), the factor the previous sum was
      multiplied by at this step (1 when the maximum did not change, below 1
      when a new maximum arrived, 0 at the first finite score, whose
      predecessor sum was empty).
    """

    scores: np.ndarray
    running_max: np.ndarray
    running_sum: np.ndarray
    rescale: np.ndarray

    def __len__(self) -> int:
        return len(self.scores)

    @property
    def new_max_steps(self) -> list[int]:
        """The steps at which the running sum was rescaled (a new maximum, not the first)."""
        return [int(t) for t in np.flatnonzero((self.rescale > 0) & (self.rescale < 1))]

    def weights(self, step: int | None = None) -> np.ndarray:
        """Softmax of the scores read up to ``step`` (default: all), from the state alone.

        Returns shape (step + 1,): exp(x_i - m_step) / l_step. With ``step``
        the last index this is the softmax of the whole stream; a stream of
        only -inf gives zeros, as `attention_lib.softmax` does. Raises
        IndexError for a step outside the stream.
        """
        n = len(self)
        t = n - 1 if step is None else step
        if not 0 <= t < n:
            raise IndexError(f"step {t} is outside a stream of {n} scores (0 to {n - 1})")
        e = np.exp(self.scores[: t + 1] - _shift(self.running_max[t]))  # (t + 1,)
        total = self.running_sum[t]
        return e / total if total > 0 else e  # e is all zeros when total is 0


def online_softmax_steps(scores: object) -> OnlineSoftmaxTrace:
    """Run the online softmax over ``scores`` and record its state at every step.

    ``scores``: a 1-D sequence of n >= 1 floats, each finite or -inf (a
    masked key). Returns an `OnlineSoftmaxTrace` whose arrays have shape (n,).

    Raises ValueError for an empty stream, one that is not 1-D, or one that
    holds NaN or +inf (the softmax is then undefined).
    """
    x = _stream(scores)
    if len(x) == 0:
        raise ValueError("scores must hold at least one score, got an empty stream")
    m_all, l_all, r_all = (np.empty_like(x) for _ in range(3))  # (n,) each
    m, total = -np.inf, 0.0
    for t, score in enumerate(x):
        m_new = max(m, score)
        shift = _shift(m_new)
        rescale = np.exp(m - shift)  # exp(m_{t-1} - m_t) <= 1; exp(-inf) = 0 at the start
        total = total * rescale + np.exp(score - shift)
        m = m_new
        m_all[t], l_all[t], r_all[t] = m, total, rescale
    return OnlineSoftmaxTrace(x, m_all, l_all, r_all)


# --- how many times each method reads its input ----------------------------------


class CountingStream:
    """A read-only sequence that counts how often it is walked from start to end.

    Iterating over it is one pass; ``passes`` is the number of passes begun.
    The methods below may only iterate (no indexing), so the count is honest.
    """

    def __init__(self, items: object) -> None:
        self._items = list(items)  # type: ignore[call-overload]
        self.passes = 0

    def __iter__(self) -> Iterator:
        self.passes += 1
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


def safe_softmax_three_pass(scores: CountingStream) -> np.ndarray:
    """The textbook stable softmax: pass 1 the maximum, pass 2 the sum, pass 3 the division."""
    m = max(scores, default=-np.inf)
    shift = _shift(m)
    total = sum(np.exp(x - shift) for x in scores)
    return np.array([np.exp(x - shift) / total if total > 0 else 0.0 for x in scores])


def online_softmax_two_pass(scores: CountingStream) -> np.ndarray:
    """Online softmax: pass 1 the maximum and sum together, pass 2 the division."""
    m, total = -np.inf, 0.0
    for x in scores:
        m_new = max(m, x)
        total = total * np.exp(m - _shift(m_new)) + np.exp(x - _shift(m_new))
        m = m_new
    shift = _shift(m)
    return np.array([np.exp(x - shift) / total if total > 0 else 0.0 for x in scores])


def online_weighted_sum_one_pass(pairs: CountingStream) -> np.ndarray:
    """sum_i softmax(x)_i * v_i over a stream of (score, value vector) pairs, in one pass.

    The accumulator of exp(x_i - m) * v_i is rescaled with the sum, and the
    division happens once, at the end (as FlashAttention-2 does). Returns the
    weighted mean of the values, shape (Ev,); zeros if every score is -inf.
    """
    m, total, acc = -np.inf, 0.0, None
    for x, v in pairs:
        v = np.asarray(v, dtype=np.float64)  # (Ev,)
        m_new = max(m, x)
        rescale, p = np.exp(m - _shift(m_new)), np.exp(x - _shift(m_new))
        total = total * rescale + p
        acc = p * v if acc is None else acc * rescale + p * v  # (Ev,)
        m = m_new
    if acc is None:
        raise ValueError("the stream of (score, value) pairs is empty")
    return acc / total if total > 0 else acc


@dataclass(frozen=True)
class PassCount:
    """One method's result and how many times it read the stream."""

    method: str
    passes: int
    max_error: float  # against the direct computation with attention_lib.softmax


def compare_passes(scores: object, values: object) -> list[PassCount]:
    """Three ways to get softmax weights (and their weighted sum), with their pass counts.

    ``scores``: shape (n,), finite or -inf; ``values``: shape (n, Ev). Each
    method reads the stream through a `CountingStream`; ``max_error`` is its
    largest absolute difference from `attention_lib.softmax` (for the
    weights) or from ``softmax(scores) @ values`` (for the weighted sum).
    Raises ValueError for bad scores or a values array whose first axis is
    not n.
    """
    from attention_lib.normalisers import softmax

    x = _stream(scores)
    v = np.asarray(values, dtype=np.float64)  # (n, Ev)
    if v.ndim != 2 or v.shape[0] != len(x):
        raise ValueError(
            f"values must have shape (n, Ev) = ({len(x)}, Ev) to match the scores, got {v.shape}"
        )
    weights = softmax(x)  # (n,)
    expected_mix = weights @ v  # (Ev,)

    rows = []
    methods: list[tuple[str, Callable[[CountingStream], np.ndarray], object, np.ndarray]] = [
        ("safe softmax (max, sum, divide)", safe_softmax_three_pass, x, weights),
        ("online softmax (max and sum, divide)", online_softmax_two_pass, x, weights),
        (
            "online softmax fused with the weighted sum",
            online_weighted_sum_one_pass,
            zip(x, v, strict=True),
            expected_mix,
        ),
    ]
    for name, method, items, expected in methods:
        stream = CountingStream(items)
        got = method(stream)
        rows.append(PassCount(name, stream.passes, float(np.max(np.abs(got - expected)))))
    return rows
