"""The softmax Jacobian against the head width, and the scale inside the gradient.

- `jacobian_row_norms`: the Frobenius norm of the softmax Jacobian
  (`attention_lib.normalisers.softmax_jacobian_norm`) at each row of scores:
  what a gradient passes back through the softmax. At most 1/2, and it
  tends to 0 as a row's largest score pulls away from the rest.
- `jacobian_norms` (with `jacobian_norm_table` and `reduce_norms`): its
  mean or median over a width sweep's rows
  (`attention_course.lessons.scaling.sweep_widths`) under a scale rule: it
  collapses with the width unscaled and holds with 1/sqrt(d).
- `score_gradient_check`: the scale appears inside the gradient. With
  s = q·k·c, ∂s/∂q = c·k and ∂s/∂k = c·q, so through attention
  dQ = c·dS·K and dK = c·dSᵀ·Q (dS the softmax's backward), checked with
  autograd in float64 against those formulas (torch, imported there).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from attention_lib.inputs import positive_integer
from attention_lib.normalisers import softmax, softmax_jacobian_norm
from attention_lib.scales import scale_for

from ..scaling import WidthSweep

__all__ = [
    "ScoreGradient",
    "jacobian_norm_table",
    "jacobian_norms",
    "jacobian_row_norms",
    "reduce_norms",
    "score_gradient_check",
]


def jacobian_row_norms(scores: Any) -> Any:
    """Frobenius norm of the softmax Jacobian of each row of ``scores`` (..., n).

    ``scores`` are the logits that go into the softmax (already scaled);
    numpy or torch. Returns shape (...,) in the same library and dtype. A
    norm is at most 1/2 (two keys tied, the rest at zero) and tends to 0 as a
    row's largest score pulls away from the rest.
    """
    return softmax_jacobian_norm(softmax(scores, axis=-1))  # (...,)


_STATISTICS = {"mean": np.mean, "median": np.median}


def jacobian_norm_table(sweep: WidthSweep, rule: str, multiplier: float = 1.0) -> np.ndarray:
    """`jacobian_row_norms` of every trial at every width of ``sweep``: (widths, trials).

    The arguments are those of `jacobian_norms`, which reduces this table;
    compute it once to take both the mean and the median.
    """
    scales = [scale_for(rule, d, multiplier) for d in sweep.widths]
    return np.asarray(jacobian_row_norms(sweep.scaled(scales)))  # (widths, trials), one call


def reduce_norms(table: np.ndarray, statistic: str = "mean") -> np.ndarray:
    """The mean or median of a `jacobian_norm_table` over its trials: (widths,)."""
    if statistic not in _STATISTICS:
        raise ValueError(f"statistic must be one of {list(_STATISTICS)}, got {statistic!r}")
    return _STATISTICS[statistic](table, axis=-1)


def jacobian_norms(
    sweep: WidthSweep, rule: str, multiplier: float = 1.0, statistic: str = "mean"
) -> np.ndarray:
    """The mean (or median) `jacobian_row_norms` at every width of ``sweep``.

    ``sweep`` holds raw logits q·k, (trials, keys) per head width (see
    `attention_course.lessons.scaling.sweep_widths`); ``rule`` and ``multiplier``
    are those of `attention_lib.scales.scale_for` (``"none"``,
    ``"1/sqrt(d)"``, ``"1/d"``, ``"custom"``). The mean is what an average
    gradient sees, dominated by the few rows that happen to be nearly tied;
    the median is the typical row. Returns shape (len(sweep.widths),),
    float64. Raises ValueError for an unknown rule or statistic, or a bad
    multiplier.
    """
    if statistic not in _STATISTICS:  # before the work, not after
        raise ValueError(f"statistic must be one of {list(_STATISTICS)}, got {statistic!r}")
    return reduce_norms(jacobian_norm_table(sweep, rule, multiplier), statistic)


# -- the scale inside the gradient ---------------------------------------------------------


@dataclass(frozen=True)
class ScoreGradient:
    """Autograd's gradients of attention against the written-out formulas (float64).

    ``dq_error``, ``dk_error``: the largest differences; ``dq_norm`` the norm
    of dL/dQ at this scale, ``dq_norm_unit`` at scale 1 on the same inputs:
    their ratio is the scale, the factor the gradient carries.
    """

    width: int
    scale: float
    dq_error: float
    dk_error: float
    dq_norm: float
    dq_norm_unit: float


def _attention_grads(q: Any, k: Any, v: Any, g: Any, c: float) -> tuple[tuple[Any, Any], ...]:
    """(autograd dQ, dK) and (formula dQ, dK) of L = Σ g ∘ softmax(c·QKᵀ)V."""
    import torch

    q = q.clone().requires_grad_()
    k = k.clone().requires_grad_()
    p = torch.softmax(c * (q @ k.T), dim=-1)  # (L, S)
    ((p @ v) * g).sum().backward()
    with torch.no_grad():
        dp = g @ v.T  # (L, S)
        ds = p * (dp - (p * dp).sum(-1, keepdim=True))  # (L, S): the softmax's backward
        dq = c * ds @ k  # (L, d): ∂s/∂q = c·k
        dk = c * ds.T @ q  # (S, d): ∂s/∂k = c·q
    return (q.grad, k.grad), (dq, dk)


def score_gradient_check(
    width: int = 64, length: int = 8, scale: float | None = None, seed: int = 0
) -> ScoreGradient:
    """Check dQ = c·dS·K and dK = c·dSᵀ·Q with autograd on seeded float64 inputs.

    q, k, v (length, width) with N(0, 1) entries, a random upstream gradient
    g; c = ``scale`` (default 1/sqrt(width)). Raises ValueError for a width
    or length that is not a positive integer. Imports torch.
    """
    import torch

    width, length = positive_integer("width", width), positive_integer("length", length)
    c = 1 / math.sqrt(width) if scale is None else float(scale)
    gen = torch.Generator().manual_seed(seed)
    q, k, v, g = (torch.randn(length, width, generator=gen, dtype=torch.float64) for _ in "qkvg")
    (dq, dk), (dq_f, dk_f) = _attention_grads(q, k, v, g, c)
    # the same softmax weights at scale 1: multiply q by c first, (c·q)·k = c·(q·k), so
    # only the factor the gradient carries differs
    (dq1, _), _ = _attention_grads(q * c, k, v, g, 1.0)
    return ScoreGradient(
        width,
        c,
        float((dq - dq_f).abs().max()),
        float((dk - dk_f).abs().max()),
        float(dq.norm()),
        float(dq1.norm()),
    )
