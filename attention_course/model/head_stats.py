"""Per-head measurements of a trained model's attention: spread, entropy, gradient, alignment.

Every function takes one layer's queries and keys, or its scaled logits and
weights, over a batch of sentences with the causal mask and padding, and
returns one number per head, averaged over the *rows* that mean something:
query positions that are real tokens and see at least two keys (the first
position sees only itself, so its weights are 1 whatever the scores).

- `logit_spread`: standard deviation of a row's scaled logits over the keys
  it sees: the "typical size" the scale rule is about.
- `row_entropy`: entropy of a row's weights (nats); ``log_keys`` gives ln n,
  the entropy of uniform weights over the n keys it sees.
- `jacobian_norm`: Frobenius norm of the softmax Jacobian diag(p) - p pᵀ
  (`attention_lib.normalisers.softmax_jacobian_norm`, exact also near
  one-hot); it is what a gradient passes through the softmax, and tends to
  0 as a row saturates.
- `top_weight`, `saturated_fraction`: the largest weight, and the share of
  rows whose largest weight is at least 0.99.
- `alignment_ratio`: sqrt(mean (q·k)²) / sqrt(mean |q|²|k|²/d) over the
  pairs a row sees. For q and k in independent random directions
  E[(q·k)²] = |q|²|k|²/d exactly, so the ratio is 1; for perfectly aligned
  (or anti-aligned) pairs it is sqrt(d). It measures how far a trained
  model's queries and keys are from the independence the 1/sqrt(d)
  derivation assumes (Yang et al. 2022, arXiv:2203.03466, argue they become
  correlated, so q·k grows like d and 1/d is the right scale).
- `attended_cosine`: Σ_j p_ij cos(q_i, k_j), the cosine of the pairs a row
  attends to, weighted by how much it attends.
- `raw_qk_rms`: sqrt(mean (q·k)²) over the visible pairs, before any scale:
  how big the raw scores are. Independent unit-variance components give
  sqrt(d); queries and keys that line up give up to d.

`head_summary` computes all of them at once; `saturation_step` finds the
first checkpoint of a training history where a model's heads saturate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from attention_lib.normalisers import entropy, simplex_check, softmax_jacobian_norm

from .report import head_metric

__all__ = [
    "METRICS",
    "SATURATED_TOP",
    "alignment_ratio",
    "attended_cosine",
    "head_summary",
    "jacobian_norm",
    "log_keys",
    "logit_spread",
    "parallel_alignment",
    "raw_qk_rms",
    "row_entropy",
    "row_mask",
    "saturated_fraction",
    "saturation_step",
    "top_weight",
]

SATURATED_TOP = 0.99  # a row whose largest weight is at least this counts as saturated

#: the per-head numbers `head_summary` returns, in order
METRICS = (
    "logit_spread",
    "entropy",
    "log_keys",
    "jacobian_norm",
    "top_weight",
    "saturated_fraction",
    "alignment_ratio",
    "attended_cosine",
    "raw_qk_rms",
)


def _as_numpy(x: Any) -> np.ndarray:
    """float64 numpy of a numpy array or (detached, CPU) torch tensor."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)


def row_mask(lengths: Any, length: int) -> np.ndarray:
    """(B, T) boolean: rows that count. Row t of sentence b counts when t < lengths[b]
    (a real token, not padding) and t >= 1 (it sees at least two keys).

    ``lengths`` (B,) are the sentences' token counts. Raises ValueError for a
    length outside 1..T.
    """
    lengths = np.asarray(lengths)  # (B,)
    if lengths.ndim != 1 or np.any(lengths < 1) or np.any(lengths > length):
        raise ValueError(f"lengths must be a 1-d array of values in 1..{length}, got {lengths}")
    t = np.arange(length)  # (T,)
    return (t[None, :] < lengths[:, None]) & (t[None, :] >= 1)  # (B, T)


def _visible(length: int) -> np.ndarray:
    """(T, T) boolean causal mask: key j visible to query i when j <= i."""
    return np.tril(np.ones((length, length), dtype=bool))


def _check(weights: np.ndarray, rows: np.ndarray) -> None:
    if weights.ndim != 4 or weights.shape[-1] != weights.shape[-2]:
        raise ValueError(f"weights must be (B, H, T, T), got shape {weights.shape}")
    b, _, t, _ = weights.shape
    if rows.shape != (b, t):
        raise ValueError(f"rows must be (B, T) = {(b, t)} to match the weights, got {rows.shape}")


def _mean_over_rows(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """values (B, H, T) averaged over the counted rows -> (H,)."""
    weight = rows[:, None, :].astype(float)  # (B, 1, T)
    return (values * weight).sum(axis=(0, 2)) / weight.sum(axis=(0, 2))  # (H,)


def logit_spread(logits: Any, rows: np.ndarray) -> np.ndarray:
    """Per head (H,): mean over rows of the std of the scaled logits over the visible keys.

    ``logits`` (B, H, T, T) are the scaled scores (masked entries are
    ignored whatever they hold); ``rows`` (B, T) from `row_mask`.
    """
    logits = _as_numpy(logits)  # (B, H, T, T)
    _check(logits, rows)
    seen = _visible(logits.shape[-1])  # (T, T)
    n = seen.sum(axis=-1)  # (T,) keys per row
    x = np.where(seen, logits, 0.0)  # (B, H, T, T)
    mean = x.sum(axis=-1) / n  # (B, H, T)
    var = (np.where(seen, x - mean[..., None], 0.0) ** 2).sum(axis=-1) / n  # (B, H, T)
    return _mean_over_rows(np.sqrt(var), rows)


def row_entropy(weights: Any, rows: np.ndarray) -> np.ndarray:
    """Per head (H,): mean entropy (nats) of the weight rows (`normalisers.entropy`)."""
    p = _as_numpy(weights)  # (B, H, T, T)
    _check(p, rows)
    return _mean_over_rows(entropy(p), rows)


def log_keys(rows: np.ndarray, heads: int) -> np.ndarray:
    """Per head (H,): mean ln(n) over the rows, n the keys a row sees: uniform weights' entropy."""
    b, t = rows.shape
    n = np.broadcast_to(np.log(np.arange(1, t + 1)), (b, heads, t))  # (B, H, T)
    return _mean_over_rows(n, rows)


def jacobian_norm(weights: Any, rows: np.ndarray) -> np.ndarray:
    """Per head (H,): mean Frobenius norm of the softmax Jacobian diag(p) - p pᵀ of each row.

    `attention_lib.normalisers.softmax_jacobian_norm` in float64, rows held
    to the simplex within the tolerance of the weights' own dtype (a float32
    model's rows sum to one within float32's rounding). Masked entries (p =
    0) change nothing.
    """
    p = _as_numpy(weights)  # (B, H, T, T)
    _check(p, rows)
    tolerance = simplex_check(weights).atol  # the default for the weights' own dtype
    return _mean_over_rows(softmax_jacobian_norm(p, tolerance), rows)  # (B, H, T) -> (H,)


def top_weight(weights: Any, rows: np.ndarray) -> np.ndarray:
    """Per head (H,): mean of each row's largest weight."""
    p = _as_numpy(weights)  # (B, H, T, T)
    _check(p, rows)
    return _mean_over_rows(p.max(axis=-1), rows)


def saturated_fraction(weights: Any, rows: np.ndarray, top: float = SATURATED_TOP) -> np.ndarray:
    """Per head (H,): the share of rows whose largest weight is at least ``top``."""
    p = _as_numpy(weights)  # (B, H, T, T)
    _check(p, rows)
    return _mean_over_rows((p.max(axis=-1) >= top).astype(float), rows)


def _pairs(q: Any, k: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Raw dot products (B, H, T, T), squared norm products (B, H, T, T), and d."""
    q, k = _as_numpy(q), _as_numpy(k)  # (B, H, T, d) each
    if q.shape != k.shape or q.ndim != 4:
        raise ValueError(f"q and k must both be (B, H, T, d), got {q.shape} and {k.shape}")
    dots = q @ k.swapaxes(-1, -2)  # (B, H, T, T)
    q2 = (q**2).sum(axis=-1)  # (B, H, T)
    k2 = (k**2).sum(axis=-1)  # (B, H, T)
    return dots, q2[..., :, None] * k2[..., None, :], q.shape[-1]


def alignment_ratio(q: Any, k: Any, rows: np.ndarray) -> np.ndarray:
    """Per head (H,): sqrt(mean (q·k)²) / sqrt(mean |q|²|k|²/d) over the visible pairs.

    1 for queries and keys in independent random directions, sqrt(d) for
    parallel ones (see the module docstring). Pairs are pooled over the
    counted rows.
    """
    dots, norms, d = _pairs(q, k)  # (B, H, T, T), (B, H, T, T), d
    seen = _visible(dots.shape[-1])[None, None] & rows[:, None, :, None]  # (B, 1, T, T)
    dot2 = np.where(seen, dots**2, 0.0).sum(axis=(0, 2, 3))  # (H,)
    independent = np.where(seen, norms / d, 0.0).sum(axis=(0, 2, 3))  # (H,)
    return np.sqrt(dot2 / independent)


def raw_qk_rms(q: Any, k: Any, rows: np.ndarray) -> np.ndarray:
    """Per head (H,): sqrt(mean (q·k)²) over the visible pairs of the counted rows, unscaled."""
    dots, _, _ = _pairs(q, k)  # (B, H, T, T)
    seen = _visible(dots.shape[-1])[None, None] & rows[:, None, :, None]  # (B, 1, T, T)
    count = np.broadcast_to(seen, dots.shape).sum(axis=(0, 2, 3))  # (H,)
    return np.sqrt(np.where(seen, dots**2, 0.0).sum(axis=(0, 2, 3)) / count)


def attended_cosine(q: Any, k: Any, weights: Any, rows: np.ndarray) -> np.ndarray:
    """Per head (H,): mean over rows of Σ_j p_ij cos(q_i, k_j)."""
    dots, norms, _ = _pairs(q, k)  # (B, H, T, T)
    p = _as_numpy(weights)  # (B, H, T, T)
    _check(p, rows)
    cos = dots / np.sqrt(np.maximum(norms, 1e-300))  # (B, H, T, T)
    return _mean_over_rows((p * cos).sum(axis=-1), rows)


def head_summary(q: Any, k: Any, logits: Any, weights: Any, rows: np.ndarray) -> dict:
    """Every metric of `METRICS` for one layer: {name: (H,) float64}."""
    heads = _as_numpy(weights).shape[1]
    return {
        "logit_spread": logit_spread(logits, rows),
        "entropy": row_entropy(weights, rows),
        "log_keys": log_keys(rows, heads),
        "jacobian_norm": jacobian_norm(weights, rows),
        "top_weight": top_weight(weights, rows),
        "saturated_fraction": saturated_fraction(weights, rows),
        "alignment_ratio": alignment_ratio(q, k, rows),
        "attended_cosine": attended_cosine(q, k, weights, rows),
        "raw_qk_rms": raw_qk_rms(q, k, rows),
    }


def saturation_step(
    checkpoints: Sequence[dict], threshold: float = 0.5, metric: str = "saturated_fraction"
) -> int | None:
    """The first checkpoint step at which the mean over all heads of ``metric`` reaches
    ``threshold``, or None if none does.

    ``checkpoints`` are a training report's entries: {"step": int, "heads":
    {metric: [[per head] per layer]}}. With the defaults: the first step at
    which half of all rows, over all heads, put 99% or more of their weight on
    one key.
    """
    for entry in checkpoints:
        values = head_metric(entry, metric)  # (layers, H)
        if values.mean() >= threshold:
            return int(entry["step"])
    return None


def parallel_alignment(d: int) -> float:
    """sqrt(d): the `alignment_ratio` of perfectly parallel queries and keys of width d."""
    return math.sqrt(d)
