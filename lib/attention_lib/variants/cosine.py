"""Cosine attention and QK-norm: scores from unit-length queries and keys.

One matrix of cosines, ``cosines(q, k)`` in [-1, 1], and two ways to
scale it:

- `cosine_logits` / `cosine_attention`: Swin Transformer V2 (Liu et al.,
  2022, arXiv:2111.09883), ``cos(q, k) / tau`` with a learned temperature
  tau, kept above 0.01.
- `qk_norm_logits`: QK-norm (Dehghani et al., 2023, arXiv:2302.05442, as
  in ViT-22B: normalise queries and keys before the product),
  ``gain · cos(q, k)``, every logit within ±gain however large q and k grow.

Unlike ``q · k / sqrt(E)`` neither can grow with the head width or the size
of the activations.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..inputs import positive_number
from ..normalisers import softmax
from ._arrays import check_pair

__all__ = [
    "SWIN_MIN_TAU",
    "cosine_attention",
    "cosine_logits",
    "cosines",
    "qk_norm_logits",
]

SWIN_MIN_TAU = 0.01  # Swin V2 keeps tau above 0.01 (it clamps the log of 1/tau at log 100)


def _unit_rows(xp: Any, x: Any, eps: float = 1e-12) -> Any:
    """Rows of ``x`` (..., n, E) scaled to unit length; a zero row stays zero (F.normalize)."""
    norm = xp.sqrt(xp.sum(x * x, axis=-1, keepdims=True))  # (..., n, 1)
    return x / xp.clip(norm, min=eps)  # (..., n, E)


def _cosines(xp: Any, query: Any, key: Any, gain: Any = 1.0) -> Any:
    """``gain · cos(q, k)``, the gain on the unit queries before the product: (..., L, S)."""
    return xp.matmul(_unit_rows(xp, query) * gain, xp.matrix_transpose(_unit_rows(xp, key)))


def cosines(query: Any, key: Any) -> Any:
    """cos(q, k) for every query-key pair, shape (..., L, S), each in [-1, 1].

    query (..., L, E), key (..., S, E), numpy or torch. Raises errors naming
    the shapes for bad inputs.
    """
    xp = check_pair(query, key)
    return _cosines(xp, query, key)  # (..., L, S)


def cosine_logits(query: Any, key: Any, tau: float = 0.1, *, min_tau: float = SWIN_MIN_TAU) -> Any:
    """Scores ``cos(q, k) / tau``, shape (..., L, S), each in [-1/tau, 1/tau].

    query (..., L, E), key (..., S, E). ``tau`` is the temperature Swin V2
    learns per head (a float, or an array broadcasting against (..., L, S),
    e.g. (H, 1, 1), torch autograd intact); values below ``min_tau`` are
    raised to it as Swin V2 does (``min_tau=0`` turns that off). Swin V2
    starts at tau = 0.1.

    Raises ValueError for a tau that is not positive after clamping, and
    errors naming the shapes for bad inputs.
    """
    xp = check_pair(query, key)
    if isinstance(tau, (int, float)):
        given, tau = float(tau), max(float(tau), min_tau)
        if not tau > 0:
            raise ValueError(f"tau must be positive, got {given} (with min_tau={min_tau})")
    else:
        tau = xp.clip(tau, min=min_tau) if min_tau > 0 else tau
        if bool(xp.any(tau <= 0)):
            raise ValueError(f"tau must be positive, got {tau}")
    return _cosines(xp, query, key) / tau  # (..., L, S)


def cosine_attention(
    query: Any,
    key: Any,
    value: Any,
    tau: float = 0.1,
    *,
    min_tau: float = SWIN_MIN_TAU,
    normaliser: Callable[..., Any] = softmax,
) -> Any:
    """Cosine attention: ``normaliser(cos(q, k) / tau) @ value``, shape (..., L, Ev).

    Shapes and errors as `cosine_logits`; value is (..., S, Ev).
    """
    xp = check_pair(query, key, value)
    weights = normaliser(cosine_logits(query, key, tau, min_tau=min_tau), axis=-1)  # (..., L, S)
    return xp.matmul(weights, value)  # (..., L, Ev)


def qk_norm_logits(query: Any, key: Any, gain: float | None = None) -> Any:
    """QK-norm's logits ``gain · cos(q, k)``, shape (..., L, S), every one in [-gain, gain].

    query (..., L, E), key (..., S, E), numpy or torch. ``gain`` defaults to
    sqrt(E): RMS-normalised q and k (each of length sqrt(E)) times 1/sqrt(E),
    as QK-norm layers compute them, give exactly these logits (a learned
    gain makes it a parameter). Raises ValueError for a gain that is not
    positive and finite, and errors naming the shapes for bad inputs.
    """
    xp = check_pair(query, key)
    gain = math.sqrt(query.shape[-1]) if gain is None else positive_number("gain", gain)
    return _cosines(xp, query, key, gain)  # (..., L, S)
