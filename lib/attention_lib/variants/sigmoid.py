"""Sigmoid attention (Ramapuram et al., 2024, arXiv:2409.04431).

"Theory, analysis, and best practices for sigmoid self-attention": each
weight is its own sigmoid of the score, so a row need not sum to one and no
key competes with another.
"""

from __future__ import annotations

import math
from typing import Any

from ..backend import namespace
from ..core import masked_scores
from ._arrays import check_pair

__all__ = ["sigmoid_attention", "sigmoid_weights"]


def _sigmoid(xp: Any, x: Any) -> Any:
    """Logistic sigmoid without overflow: exp(-|x|) never exceeds 1, and σ(-inf) = 0."""
    z = xp.exp(-xp.abs(x))  # (...), in [0, 1]
    return xp.where(x >= 0, 1 / (1 + z), z / (1 + z))


def sigmoid_weights(
    query: Any,
    key: Any,
    attn_mask: Any = None,
    is_causal: bool = False,
    *,
    scale: float | None = None,
    bias: float | None = None,
) -> Any:
    """Sigmoid attention's weights ``sigmoid(q·k * scale + bias)``, shape (..., L, S).

    ``bias`` defaults to Ramapuram et al.'s b = -log(n), n = S the number of
    keys, which starts every weight near 1/(n + 1) (the sum of a row near
    one). Masked keys (``attn_mask``, ``is_causal``: as in
    `attention_lib.scaled_dot_product_attention`) get weight 0. Query (...,
    L, E), key (..., S, E), numpy or torch, in the query's dtype; errors as
    SDPA's.
    """
    scores = masked_scores(query, key, attn_mask, is_causal, scale=scale)  # (..., L, S)
    xp = namespace(scores)
    b = -math.log(scores.shape[-1]) if bias is None else float(bias)
    return xp.astype(_sigmoid(xp, scores + b), query.dtype)  # (..., L, S)


def sigmoid_attention(
    query: Any,
    key: Any,
    value: Any,
    attn_mask: Any = None,
    is_causal: bool = False,
    *,
    scale: float | None = None,
    bias: float | None = None,
) -> Any:
    """Sigmoid attention ``sigmoid(q·k * scale + bias) @ value``, shape (..., L, Ev).

    See `sigmoid_weights`; value is (..., S, Ev).
    """
    xp = check_pair(query, key, value)
    weights = sigmoid_weights(query, key, attn_mask, is_causal, scale=scale, bias=bias)
    return xp.matmul(weights, value)  # (..., L, Ev)
