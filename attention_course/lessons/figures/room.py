"""Notebook 01's still picture: one word sharing its attention over the others."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch

from attention_lib.normalisers import softmax

from ..crowded_room import LESSON_WORDS, percent, sharing_headline
from .style import WORD_COLOURS, still_figure

__all__ = ["sharing_picture"]


def sharing_picture(
    weights: Sequence[float] | None = None,
    words: Sequence[str] = LESSON_WORDS,
    query: str = "it",
    *,
    scores: Sequence[float] | None = None,
) -> Figure:
    """A still picture of ``query`` sharing its attention over ``words``, for beginners.

    The words sit in a row, each with a bar as tall as its share and the share
    written on it; an arrow from the query word to each word is as thick as
    that share. Give either ``weights`` (one share per word, each >= 0,
    adding up to 1: a trained model's attention, say) or ``scores`` (raw
    totals, shared out here with `softmax`). The title (`sharing_headline`)
    is computed from the shares. Raises ValueError for both or neither, a
    length that does not match ``words``, or shares that are negative or do
    not add up to one (within 1e-6).
    """
    if (weights is None) == (scores is None):
        raise ValueError("give either weights (shares adding up to 1) or scores, not both")
    if scores is not None:
        shares = softmax(np.asarray(scores, dtype=float))  # (n,)
    else:
        shares = np.asarray(weights, dtype=float)  # (n,)
    if shares.ndim != 1 or shares.size != len(words):
        raise ValueError(f"need one share per word: {len(words)} words, got shape {shares.shape}")
    if not np.all(np.isfinite(shares)) or shares.min() < 0 or abs(shares.sum() - 1) > 1e-6:
        raise ValueError(
            f"shares must be >= 0 and add up to 1, got {np.round(shares, 4)} "
            f"(sum {shares.sum():.6f}); pass scores= to share out raw totals"
        )
    n = len(words)
    fig = still_figure(height=3.4)
    ax = fig.add_subplot()
    x = np.arange(n, dtype=float)  # (n,) where each word sits
    top = int(np.argmax(shares))
    colours = [WORD_COLOURS[1] if i == top else "#7f7f7f" for i in range(n)]
    ax.bar(x, 1.6 * shares, bottom=0.35, width=0.55, color=colours, alpha=0.85)
    for i, (word, share) in enumerate(zip(words, shares, strict=True)):
        ax.text(i, 0.1, word, ha="center", va="center", fontsize=14, fontweight="bold")
        ax.text(i, 0.4 + 1.6 * share, percent(share), ha="center", va="bottom", fontsize=11)
    query_x = (n - 1) / 2
    ax.text(
        query_x,
        -1.35,
        f'"{query}"',
        ha="center",
        va="center",
        fontsize=15,
        fontweight="bold",
        color=WORD_COLOURS[0],
    )
    for i, share in enumerate(shares):
        ax.add_patch(
            FancyArrowPatch(
                (query_x, -1.1),
                (i, -0.12),
                arrowstyle="-|>",
                mutation_scale=12 + 20 * share,
                linewidth=0.5 + 10 * share,
                color=WORD_COLOURS[0],
                alpha=0.25 + 0.75 * share,
                shrinkA=4,
                shrinkB=4,
            )
        )
    ax.set_xlim(-0.6, n - 0.4)
    ax.set_ylim(-1.6, 2.25)
    ax.axis("off")
    ax.set_title(
        sharing_headline(shares, words, query) + "\n(thicker arrow, taller bar: a bigger share)",
        fontsize=12,
    )
    return fig
