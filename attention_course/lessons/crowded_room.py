"""The crowded room: notebook 01's analogy for attention, its numbers and its arithmetic.

Friends talk at once and you share your attention among them: the shares
are a softmax of how relevant each is (`RELEVANCE`), and the room's volume
multiplies every score (`attention_lib.scales.turn_volume`): turned down,
everyone gets the same share; turned up, one voice takes everything. Then
the lesson's own sentence, "the dog barked ... it": the query for "it"
scored against four words (`LESSON_SCORES`), turned down by sqrt(8) for a
head of 8 slots, shared out and mixed (`three_steps`, `format_three_steps`).

How much a nudge moves (`changed_hands`) and how strongly the shares answer
any nudge (`learning_signal`, the softmax Jacobian's size) show why a loud
room stops learning. The words a beginner reads are computed here too
(`percent`, `nudge_headline`, `sharing_headline`).

The explorers that draw all this are in `attention_course.explorers.crowded_room`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attention_lib.inputs import positive_integer
from attention_lib.normalisers import softmax, softmax_jacobian_norm

__all__ = [
    "FEATURES",
    "FRIENDS",
    "LESSON_HEAD_SLOTS",
    "LESSON_SCORES",
    "LESSON_WORDS",
    "RELEVANCE",
    "WORD_VALUES",
    "ThreeSteps",
    "changed_hands",
    "check_room",
    "format_three_steps",
    "learning_signal",
    "nudge_headline",
    "percent",
    "sharing_headline",
    "three_steps",
]

# The room: five friends and how relevant what each is saying is to you.
FRIENDS = ("Ana", "Ben", "Chloe", "Dev", "Eli")
RELEVANCE = np.array([2.0, 1.0, 0.5, 0.0, -1.0])  # (5,)

# The lesson's example: the query for "it" scored against four words' keys.
LESSON_WORDS = ("the", "dog", "barked", "it")
LESSON_SCORES = np.array([0.1, 4.0, 0.0, 0.2])  # (4,)
# A head of 8 slots: dividing by sqrt(8) = 2.83 gives the lesson's printed
# "turned down" row 0.0, 1.4, 0.0, 0.1 and shares 0.14, 0.57, 0.14, 0.15.
LESSON_HEAD_SLOTS = 8
# Made-up values (what each word passes on), three readable features each.
FEATURES = ("animal", "action", "pointer word")
WORD_VALUES = np.array(
    [
        [0.0, 0.0, 1.0],  # the
        [1.0, 0.1, 0.0],  # dog
        [0.1, 1.0, 0.0],  # barked
        [0.2, 0.0, 0.8],  # it
    ]
)  # (4 words, 3 features)


def check_room(relevance: np.ndarray, names: Sequence[str]) -> np.ndarray:
    """The relevance scores as a 1-d float array, or a ValueError naming the fault."""
    scores = np.asarray(relevance, dtype=float)
    if scores.ndim != 1 or scores.size < 2:
        raise ValueError(
            f"relevance must be a 1-d list of at least 2 scores, got shape {scores.shape}"
        )
    if len(names) != scores.size:
        raise ValueError(f"got {len(names)} names for {scores.size} relevance scores")
    if not np.all(np.isfinite(scores)):
        raise ValueError(f"relevance scores must be finite, got {scores}")
    return scores


@dataclass(frozen=True)
class ThreeSteps:
    """Score, turn down, share out, mix: one query's trip through attention.

    ``scores``, ``turned_down`` and ``shares`` have one entry per word;
    ``values`` is (words, features); ``mixed`` is (features,), the new vector
    for the query word.
    """

    words: tuple[str, ...]
    features: tuple[str, ...]
    scores: np.ndarray
    divisor: float
    turned_down: np.ndarray
    shares: np.ndarray
    values: np.ndarray
    mixed: np.ndarray


def three_steps(
    scores: np.ndarray = LESSON_SCORES,
    values: np.ndarray = WORD_VALUES,
    slots: int = LESSON_HEAD_SLOTS,
    turn_down: bool = True,
    words: Sequence[str] = LESSON_WORDS,
    features: Sequence[str] = FEATURES,
) -> ThreeSteps:
    """The lesson's three steps for one query whose scores are already known.

    scores (S,) are the query's raw totals against S keys (the words); values
    (S, F), F features per word. The scores are divided by sqrt(slots) (or by 1
    with ``turn_down=False``), shared out with `softmax`, and the values mixed
    in those shares. Raises ValueError for mismatched lengths or a number
    of slots that is not a positive integer.
    """
    scores = np.asarray(scores, dtype=float)  # (S,)
    values = np.asarray(values, dtype=float)  # (S, F)
    if scores.ndim != 1 or values.ndim != 2 or values.shape[0] != scores.shape[0]:
        raise ValueError(
            f"need scores (S,) and values (S, F) for the same S words, got scores "
            f"{scores.shape} and values {values.shape}"
        )
    if (len(words), len(features)) != values.shape:
        raise ValueError(
            f"got {len(words)} words and {len(features)} features for values of shape "
            f"{values.shape} (words, features)"
        )
    slots = positive_integer("slots", slots)
    divisor = math.sqrt(slots) if turn_down else 1.0
    turned_down = scores / divisor  # (S,)
    shares = softmax(turned_down)  # (S,), sums to 1
    mixed = shares @ values  # (F,)
    return ThreeSteps(
        tuple(words), tuple(features), scores, divisor, turned_down, shares, values, mixed
    )


def format_three_steps(steps: ThreeSteps) -> str:
    """The three steps as a small table, one column per word, rounded as the lesson prints them.

    Plain columns, no brackets: the beginner's notebook prints it as is.
    """
    width = max(6, *(len(w) + 2 for w in steps.words))
    label_width = 26

    def row(label: str, xs: np.ndarray, decimals: int, after: str = "") -> str:
        cells = "".join(f"{x:>{width}.{decimals}f}" for x in xs)
        return f"{label:<{label_width}}{cells}{after}"

    mixed = ", ".join(
        f"{name} {x:.2f}" for name, x in zip(steps.features, steps.mixed, strict=True)
    )
    mix_label = 'mix into a new "it"'
    lines = [
        f"{'':<{label_width}}" + "".join(f"{w:>{width}}" for w in steps.words),
        row('score "it" against each', steps.scores, 1),
        row(f"turn down (÷ {steps.divisor:.2f})", steps.turned_down, 1),
        row("share out", steps.shares, 2, f"   (adds up to {steps.shares.sum():.2f})"),
        f"{mix_label:<{label_width}}{mixed}",
    ]
    return "\n".join(lines)


def changed_hands(before: np.ndarray, after: np.ndarray) -> float:
    """How much attention moved between two share rows: half the total absolute change.

    0 when nothing moved, 1 when all of it went to someone else.
    """
    return float(0.5 * np.abs(np.asarray(after) - np.asarray(before)).sum())


def learning_signal(shares: np.ndarray) -> float:
    """Size (Frobenius norm) of the softmax Jacobian ``diag(p) - p p^T`` at shares p (n,).

    How strongly the shares respond to any small nudge of the scores; it tends
    to 0 as the shares approach one winner
    (`attention_lib.normalisers.softmax_jacobian_norm`, exact near one-hot too).
    """
    return float(softmax_jacobian_norm(np.asarray(shares, dtype=float)))


def percent(x: float) -> str:
    """A share as a percentage a reader can compare, small ones included."""
    if x >= 0.095:
        return f"{x:.0%}"
    if x >= 0.001:
        return f"{x:.1%}"
    if x >= 1e-5:
        return f"{x * 100:.1g}%"
    return "<0.001%"


def nudge_headline(calm: float, loud: float) -> str:
    """What a nudge did in each room, from the attention that changed hands there."""
    if calm == 0 and loud == 0:
        return "No nudge, nothing moves: pick a friend and move the slider"
    return (
        f"The same nudge moves {percent(calm)} of the calm room's attention, "
        f"{percent(loud)} of the loud room's"
    )


def sharing_headline(weights: np.ndarray, words: Sequence[str], query: str) -> str:
    """One plain sentence about how ``query`` shares its attention over ``words``.

    "most of its attention" only when the top share is at least a half;
    otherwise "its biggest share".
    """
    top = int(np.argmax(weights))
    amount = "most of its attention" if weights[top] >= 0.5 else "its biggest share of attention"
    return f'"{query}" gives {amount} to "{words[top]}" ({percent(weights[top])})'
