"""The four mistakes made for real: the shared inputs, the wrong functions and the ``run_*``
functions that make each mistake beside the correct version and run its check."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from attention_lib.core import attention_weights, scaled_dot_product_attention
from attention_lib.normalisers import softmax
from attention_lib.variants import cosines, qk_norm_logits

from .checks import (
    MistakeRun,
    _run_check,
    check_no_future_leak,
    check_not_saturated,
    check_rows_sum_to_one,
    check_scale_matches_head_width,
)

__all__ = [
    "attend_mask_after_softmax",
    "attend_wrong_axis",
    "multi_head_qk",
    "qk_normalised_weights",
    "random_rows",
    "run_mask_after_softmax",
    "run_model_width_scale",
    "run_scale_as_knob",
    "run_wrong_axis",
    "split_heads",
]


# -- the inputs every mistake is made on -----------------------------------------------


def split_heads(x: np.ndarray, n_heads: int) -> np.ndarray:
    """(L, d_model) -> (n_heads, L, d_model // n_heads): each head's slice of the features.

    Raises ValueError if d_model is not a multiple of n_heads.
    """
    length, d_model = x.shape
    if n_heads < 1 or d_model % n_heads:
        raise ValueError(f"d_model {d_model} must be a positive multiple of n_heads {n_heads}")
    return x.reshape(length, n_heads, d_model // n_heads).swapaxes(0, 1)  # (H, L, dh)


def random_rows(length: int, width: int, count: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    """``count`` arrays (length, width) of N(0, 1) entries from one seeded generator, in turn:
    the queries, keys (and values) each mistake is made on, here and in its explorer."""
    rng = np.random.default_rng(seed)
    return tuple(rng.normal(size=(length, width)) for _ in range(count))  # (L, E) each


def multi_head_qk(
    d_model: int = 512, n_heads: int = 8, length: int = 16, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Per-head queries and keys (H, L, d_model // H) of one seeded multi-head layer.

    Token features are N(0, 1) and the projections N(0, 1/d_model), so each
    head's queries and keys have unit-variance entries. Raises ValueError as
    `split_heads` does.
    """
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(length, d_model))  # (L, d_model) token features
    w_q = rng.normal(size=(d_model, d_model)) / math.sqrt(d_model)  # (d_model, d_model)
    w_k = rng.normal(size=(d_model, d_model)) / math.sqrt(d_model)  # (d_model, d_model)
    return split_heads(x @ w_q, n_heads), split_heads(x @ w_k, n_heads)  # (H, L, dh) each


# -- the wrong functions, as a learner might write them ------------------------------


def attend_wrong_axis(
    query: np.ndarray, key: np.ndarray, value: np.ndarray, mask: np.ndarray | None = None
) -> np.ndarray:
    """The mistake: softmax over the queries (axis -2) instead of the keys. (L, E) -> (L, Ev)."""
    scores = query @ key.swapaxes(-1, -2) / math.sqrt(query.shape[-1])  # (L, S)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)  # (L, S)
    return softmax(scores, axis=-2) @ value  # (L, Ev); columns, not rows, sum to one


def attend_mask_after_softmax(
    query: np.ndarray, key: np.ndarray, value: np.ndarray, mask: np.ndarray | None = None
) -> np.ndarray:
    """The mistake: zero the masked weights after the softmax. (L, E) -> (L, Ev).

    ``mask`` is boolean (L, S), True where the key takes part (None: no mask).
    """
    scores = query @ key.swapaxes(-1, -2) / math.sqrt(query.shape[-1])  # (L, S)
    weights = softmax(scores, axis=-1)  # (L, S)
    if mask is not None:
        weights = weights * mask  # (L, S); rows now sum to less than one
    return weights @ value  # (L, Ev)


# -- 1. the scale from d_model rather than from one head -----------------------------


def run_model_width_scale(
    d_model: int = 512, n_heads: int = 8, length: int = 16, seed: int = 0
) -> MistakeRun:
    """A multi-head layer scaled by 1/sqrt(d_model) instead of 1/sqrt(d_model / n_heads).

    Projections are initialised with standard deviation 1/sqrt(d_model), so
    the per-head queries and keys have unit-variance entries and correctly
    scaled logits have a spread near 1. The mistaken scale is sqrt(n_heads)
    times too small: the spread drops by that factor and the weights flatten.
    """
    q, k = multi_head_qk(d_model, n_heads, length, seed)  # (H, L, dh) each
    raw = q @ k.swapaxes(-1, -2)  # (H, L, L)
    wrong_scale = 1.0 / math.sqrt(d_model)
    right_scale = 1.0 / math.sqrt(q.shape[-1])
    wrong = attention_weights(q, k, scale=wrong_scale)  # (H, L, L)
    right = attention_weights(q, k)  # (H, L, L), scale from the head width
    numbers = {
        "head width d_model / n_heads": q.shape[-1],
        "logit std, 1/sqrt(head width)": float((raw * right_scale).std()),
        "logit std, 1/sqrt(d_model)": float((raw * wrong_scale).std()),
        "spread ratio (sqrt(n_heads))": float(
            (raw * right_scale).std() / (raw * wrong_scale).std()
        ),
        "mean top weight, right": float(right.max(axis=-1).mean()),
        "mean top weight, mistaken": float(wrong.max(axis=-1).mean()),
    }
    return MistakeRun(
        title=f"1. scaled by the model width ({d_model}), not the head width: {n_heads} heads",
        numbers=numbers,
        caught=_run_check(lambda: check_scale_matches_head_width(wrong_scale, q)),
        correct_passes=_run_check(lambda: check_scale_matches_head_width(right_scale, q)) is None,
    )


# -- 2. softmax over the wrong axis -------------------------------------------------


def run_wrong_axis(length: int = 5, width: int = 16, seed: int = 0) -> MistakeRun:
    """Softmax over the queries instead of the keys, on a square (L, L) score matrix.

    The shapes all work, so nothing complains; only the row sums give it away.
    """
    q, k = random_rows(length, width, 2, seed)  # (L, E) each
    scores = q @ k.T / math.sqrt(width)  # (L, L)
    wrong = softmax(scores, axis=0)  # (L, L), normalised down each column
    right = attention_weights(q, k)  # (L, L), normalised along each row
    sums = wrong.sum(axis=-1)  # (L,)
    numbers = {
        "smallest row sum, mistaken": float(sums.min()),
        "largest row sum, mistaken": float(sums.max()),
        "largest |column sum - 1|, mistaken": float(np.abs(wrong.sum(axis=0) - 1).max()),
        "largest |row sum - 1|, right": float(np.abs(right.sum(axis=-1) - 1).max()),
    }
    return MistakeRun(
        title="2. softmax over the query axis instead of the key axis",
        numbers=numbers,
        caught=_run_check(lambda: check_rows_sum_to_one(wrong)),
        correct_passes=_run_check(lambda: check_rows_sum_to_one(right)) is None,
    )


# -- 3. the mask after the softmax ---------------------------------------------------


def run_mask_after_softmax(length: int = 6, width: int = 8, seed: int = 0) -> MistakeRun:
    """A causal mask applied to the weights (zeroing) instead of to the scores.

    Two checks catch it: the rows no longer sum to one, and the masked future
    keys still move earlier outputs through the softmax's denominator.
    """
    q, k, v = random_rows(length, width, 3, seed)  # (L, E) each
    keep = np.tril(np.ones((length, length), dtype=bool))  # (L, L) causal
    wrong = softmax(q @ k.T / math.sqrt(width), axis=-1) * keep  # (L, L)
    right = attention_weights(q, k, is_causal=True)  # (L, L)

    def correct(q_: np.ndarray, k_: np.ndarray, v_: np.ndarray) -> np.ndarray:
        return scaled_dot_product_attention(q_, k_, v_, is_causal=True)  # (L, E)

    def mistaken(q_: np.ndarray, k_: np.ndarray, v_: np.ndarray) -> np.ndarray:
        return attend_mask_after_softmax(q_, k_, v_, keep)  # (L, E)

    sums = wrong.sum(axis=-1)  # (L,)
    out_gap = np.abs(mistaken(q, k, v) - correct(q, k, v))  # (L, E)
    caught = [
        _run_check(lambda: check_rows_sum_to_one(wrong)),
        _run_check(lambda: check_no_future_leak(mistaken, q, k, v)),
    ]
    passes = [
        _run_check(lambda: check_rows_sum_to_one(right)),
        _run_check(lambda: check_no_future_leak(correct, q, k, v)),
    ]
    return MistakeRun(
        title="3. the causal mask applied to the weights after the softmax",
        numbers={
            "row sum of the first query, mistaken": float(sums[0]),
            "smallest row sum, mistaken": float(sums.min()),
            "largest output difference from the right answer": float(out_gap.max()),
        },
        caught=" | ".join(c for c in caught if c) or None,
        correct_passes=all(p is None for p in passes),
    )


# -- 4. the scale as a knob to tune ---------------------------------------------------


def qk_normalised_weights(
    query: np.ndarray, key: np.ndarray, temperature: float | None = None
) -> np.ndarray:
    """QK normalisation: unit-length queries and keys, logits = temperature × cos(q, k).

    The softmax of `attention_lib.variants.qk_norm_logits`: the logits can
    never leave [-temperature, temperature], however large the raw queries
    and keys grow. ``temperature`` defaults to sqrt(E); RMS-normalising q and
    k and then scaling by 1/sqrt(E), as QK-norm layers do, gives the same
    logits (a learned gain would make it a parameter). Shapes as
    `attention_weights`; returns (..., L, S).
    """
    return softmax(qk_norm_logits(query, key, temperature), axis=-1)  # (..., L, S)


def run_scale_as_knob(
    width: int = 64,
    length: int = 16,
    growths: Sequence[float] = (1.0, 2.0, 4.0, 8.0),
    tuned_at: float = 2.0,
    seed: int = 0,
) -> MistakeRun:
    """Queries and keys that grow during training, against a hand-tuned scale and QK norm.

    The same random queries and keys are multiplied by each growth factor g
    (what drifting projection weights do), so the logits grow like g². A scale
    tuned to undo the growth seen at ``tuned_at`` only holds there; QK
    normalisation holds at every g. The check runs at the largest growth.
    """
    q, k = random_rows(length, width, 2, seed)  # (L, E) each
    standard = 1.0 / math.sqrt(width)
    tuned = standard / tuned_at**2  # undoes the growth seen at g = tuned_at, and only there
    numbers: dict[str, float] = {}
    widths = (14, 10, 10, 12, 14)
    headers = ("std, 1/sqrt(E)", "std, tuned", "top, tuned", "top, QK norm", "max|logit| QK")
    rows = [f"{'g':>5} " + " ".join(f"{h:>{w}}" for h, w in zip(headers, widths, strict=True))]
    for g in growths:
        qg, kg = g * q, g * k  # (L, E) each, grown
        raw = qg @ kg.T  # (L, L), grows like g²
        cos = cosines(qg, kg)  # (L, L), in [-1, 1] whatever g is
        row = {
            "logit std, standard": float((raw * standard).std()),
            "logit std, tuned": float((raw * tuned).std()),
            "top weight, tuned": float(attention_weights(qg, kg, scale=tuned).max(axis=-1).mean()),
            "top weight, QK norm": float(qk_normalised_weights(qg, kg).max(axis=-1).mean()),
            "max |logit|, QK norm": float(np.abs(cos).max() * math.sqrt(width)),
        }
        numbers.update({f"g={g:g}: {name}": value for name, value in row.items()})
        rows.append(
            f"{g:>5g} "
            + " ".join(f"{v:>{w}.3f}" for v, w in zip(row.values(), widths, strict=True))
        )
    g = max(growths)
    tuned_weights = attention_weights(g * q, g * k, scale=tuned)  # (L, L)
    normalised = qk_normalised_weights(g * q, g * k)  # (L, L)
    return MistakeRun(
        title=(
            f"4. the scale tuned by hand (at growth {tuned_at:g}) instead of QK normalisation "
            f"(E = {width}, QK-norm logits bounded by sqrt(E) = {math.sqrt(width):.0f})"
        ),
        numbers=numbers,
        caught=_run_check(lambda: check_not_saturated(tuned_weights)),
        correct_passes=_run_check(lambda: check_not_saturated(normalised)) is None,
        table="\n".join(rows),
    )
