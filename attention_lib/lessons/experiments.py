"""The lesson's measurements, as functions the notebooks and tests call.

`scaling_tables` makes the same seeded draws, in the same order, as the
lesson's ``scaling.py`` (one ``numpy.random.default_rng(0)`` shared by both
tables), so its printed numbers come out digit for digit; the arithmetic is
this library's own (`attention_weights`, `softmax`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..core import attention_weights, scaled_dot_product_attention

__all__ = [
    "HandExample",
    "SpreadRow",
    "TopWeightRow",
    "format_scaling_tables",
    "hand_checkable_example",
    "scaling_tables",
    "score_spread",
    "top_weight",
]

LESSON_WIDTHS = (4, 16, 64, 256)


@dataclass(frozen=True)
class SpreadRow:
    """Standard deviation of q·k over random pairs, raw and divided by sqrt(d)."""

    d: int
    raw_std: float
    scaled_std: float


@dataclass(frozen=True)
class TopWeightRow:
    """Mean largest attention weight over random trials, unscaled and scaled."""

    d: int
    unscaled: float
    scaled: float


def score_spread(
    rng: np.random.Generator, widths: Sequence[int] = LESSON_WIDTHS, pairs: int = 20_000
) -> list[SpreadRow]:
    """For each head width d, the spread of q·k for ``pairs`` standard-normal pairs.

    Theory (Vaswani et al., footnote 4): std(q·k) = sqrt(d), and 1 after
    dividing by sqrt(d). Draws q then k, (pairs, d) each, per width.
    """
    rows = []
    for d in widths:
        q = rng.normal(size=(pairs, d))  # (N, d)
        k = rng.normal(size=(pairs, d))  # (N, d)
        raw = np.sum(q * k, axis=-1)  # (N,) one dot product per pair
        rows.append(SpreadRow(d, float(raw.std()), float((raw / np.sqrt(d)).std())))
    return rows


def top_weight(
    rng: np.random.Generator,
    widths: Sequence[int] = LESSON_WIDTHS,
    trials: int = 2_000,
    keys: int = 6,
) -> list[TopWeightRow]:
    """For each head width d, the mean largest weight one query gives ``keys`` keys.

    Unscaled (scale = 1) the winner takes more as d grows; with the default
    1/sqrt(d) it stays flat. Draws q (trials, 1, d) then K (trials, keys, d).
    """
    rows = []
    for d in widths:
        q = rng.normal(size=(trials, 1, d))  # (N, 1, d)
        k = rng.normal(size=(trials, keys, d))  # (N, keys, d)
        hot = attention_weights(q, k, scale=1.0)  # (N, 1, keys)
        cool = attention_weights(q, k)  # (N, 1, keys), scale 1/sqrt(d)
        rows.append(
            TopWeightRow(d, float(hot.max(axis=-1).mean()), float(cool.max(axis=-1).mean()))
        )
    return rows


def scaling_tables(seed: int = 0) -> tuple[list[SpreadRow], list[TopWeightRow]]:
    """Both of the lesson's tables from one generator, in the lesson's order."""
    rng = np.random.default_rng(seed)
    return score_spread(rng), top_weight(rng)


def format_scaling_tables(spread: list[SpreadRow], top: list[TopWeightRow]) -> str:
    """The two tables laid out as the lesson prints them."""
    lines = [
        "how big do raw dot products get as the head width d grows?",
        f"{'d':>5} {'std of q.k':>12} {'std of q.k/sqrt(d)':>20}",
    ]
    lines += [f"{r.d:>5} {r.raw_std:>12.2f} {r.scaled_std:>20.2f}" for r in spread]
    lines += [
        "",
        "what that does to attention weights over 6 keys (2000 random trials):",
        f"{'d':>5} {'mean top weight, no scaling':>29} {'with scaling':>14}",
    ]
    lines += [f"{r.d:>5} {r.unscaled:>29.3f} {r.scaled:>14.3f}" for r in top]
    return "\n".join(lines)


@dataclass(frozen=True)
class HandExample:
    """The lesson's attention step small enough to check by hand."""

    query: np.ndarray  # (2, 2)
    key: np.ndarray  # (3, 2)
    value: np.ndarray  # (3, 2)
    logits: np.ndarray  # (2, 3)
    weights: np.ndarray  # (2, 3)
    output: np.ndarray  # (2, 2)


def hand_checkable_example() -> HandExample:
    """Two queries, three keys, width 2: logits 0.707/0, weights 0.401/0.198/0.401.

    Query one, [1, 0], matches keys one and three but not two; its output
    [6.017, 3.983] is a blend, not a copy of any value row.
    """
    query = np.array([[1.0, 0.0], [0.0, 1.0]])  # (2, 2)
    key = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # (3, 2)
    value = np.array([[10.0, 0.0], [0.0, 10.0], [5.0, 5.0]])  # (3, 2)
    logits = query @ key.T / np.sqrt(query.shape[-1])  # (2, 3)
    return HandExample(
        query=query,
        key=key,
        value=value,
        logits=logits,
        weights=attention_weights(query, key),
        output=scaled_dot_product_attention(query, key, value),
    )
