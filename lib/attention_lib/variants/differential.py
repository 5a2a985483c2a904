"""Differential attention (Ye et al., 2024, "Differential Transformer", arXiv:2410.05258).

Two softmax maps from two halves of the query and key, one subtracted from
the other: ``softmax(Q1 K1ᵀ·s) - λ softmax(Q2 K2ᵀ·s)``. What both put on the
same keys (their "attention noise") cancels; each row sums to 1 - λ, and a
weight may be negative. λ is learned through a re-parametrisation
(`differential_lambda`) that starts at `differential_lambda_init`.
"""

from __future__ import annotations

import math
from typing import Any

from ..backend import namespace
from ..core import masked_scores
from ..inputs import positive_integer
from ..normalisers import softmax
from ._arrays import check_pair

__all__ = [
    "differential_attention",
    "differential_lambda",
    "differential_lambda_init",
    "differential_weights",
]


def differential_lambda_init(layer: int) -> float:
    """λ_init = 0.8 - 0.6·exp(-0.3·(layer - 1)) for layer 1, 2, ... (Ye et al., 2024, eq. 2):
    0.2 in the first layer, rising towards 0.8. Raises ValueError for a layer that is not a
    positive integer (layers count from 1)."""
    layer = positive_integer("layer", layer)
    return 0.8 - 0.6 * math.exp(-0.3 * (layer - 1))


def differential_lambda(
    lambda_q1: Any, lambda_k1: Any, lambda_q2: Any, lambda_k2: Any, lambda_init: float
) -> Any:
    """λ = exp(λ_q1 · λ_k1) - exp(λ_q2 · λ_k2) + λ_init, the learned re-parametrisation of
    Ye et al. (2024); the four vectors (d,) are learned per layer."""
    xp = namespace(lambda_q1, lambda_k1, lambda_q2, lambda_k2)
    return (
        xp.exp(xp.sum(lambda_q1 * lambda_k1)) - xp.exp(xp.sum(lambda_q2 * lambda_k2)) + lambda_init
    )


def differential_weights(
    query: Any,
    key: Any,
    lam: float,
    attn_mask: Any = None,
    is_causal: bool = False,
    *,
    scale: float | None = None,
) -> Any:
    """Differential attention's weights softmax(Q1 K1ᵀ·s) - λ softmax(Q2 K2ᵀ·s): (..., L, S).

    query (..., L, 2d) and key (..., S, 2d) hold [Q1, Q2] and [K1, K2] side by
    side (the first d columns, then the last d). The scale s defaults to
    1/sqrt(d), d the width of one half. Each row sums to 1 - λ, and may be
    negative. Masks as `attention_lib.scaled_dot_product_attention`'s. ``lam``
    is a number (see `differential_lambda`). In the query's dtype. Raises
    ValueError for an odd width, errors as SDPA's otherwise.
    """
    xp = check_pair(query, key)
    width = query.shape[-1]
    if width % 2:
        raise ValueError(
            f"query and key need an even width 2d to split into two halves, got {width}"
        )
    d = width // 2
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    maps = []
    for half in (slice(0, d), slice(d, width)):
        q, k = query[..., half], key[..., half]  # (..., L, d), (..., S, d)
        scores = masked_scores(q, k, attn_mask, is_causal, scale=scale)  # (..., L, S)
        maps.append(softmax(scores, axis=-1))  # (..., L, S), rows sum to 1 (0 if all masked)
    return xp.astype(maps[0] - float(lam) * maps[1], query.dtype)  # (..., L, S)


def differential_attention(
    query: Any,
    key: Any,
    value: Any,
    lam: float,
    attn_mask: Any = None,
    is_causal: bool = False,
    *,
    scale: float | None = None,
) -> Any:
    """Differential attention ``(softmax(Q1 K1ᵀ·s) - λ softmax(Q2 K2ᵀ·s)) @ value``: (..., L, Ev).

    See `differential_weights`; value is (..., S, Ev) (the paper's is 2d wide).
    The paper then normalises each head's output (RMSNorm) and multiplies it
    by 1 - λ_init; that belongs to the layer, not to this attention call.
    """
    xp = check_pair(query, key, value)
    weights = differential_weights(query, key, lam, attn_mask, is_causal, scale=scale)
    return xp.matmul(weights, value)  # (..., L, Ev)
