"""Additive attention (Bahdanau, Cho and Bengio, 2015, arXiv:1409.0473).

Scores ``v^T tanh(W1 q + W2 k)``: one small network per query-key pair
instead of a dot product, so query and key may have different widths.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..backend import namespace
from ..inputs import positive_integer
from ..normalisers import softmax
from ._arrays import as_like, check_pair

__all__ = [
    "AdditiveParams",
    "additive_attention",
    "additive_hidden",
    "additive_logits",
    "additive_params",
]


@dataclass(frozen=True)
class AdditiveParams:
    """The additive scorer's parameters: w_query (H, Eq), w_key (H, Ek), v (H,).

    Numpy or torch arrays (the inputs' library); H is the hidden width.
    """

    w_query: Any
    w_key: Any
    v: Any

    @property
    def shapes(self) -> str:
        return (
            f"w_query {tuple(self.w_query.shape)}, w_key {tuple(self.w_key.shape)}, "
            f"v {tuple(self.v.shape)}"
        )


def additive_params(
    query_width: int, key_width: int, hidden: int = 16, seed: int = 0
) -> AdditiveParams:
    """Seeded float64 numpy parameters with Glorot-like 1/sqrt(fan-in) spread.

    Shapes: w_query (hidden, query_width), w_key (hidden, key_width), v (hidden,).
    Raises ValueError, naming it, for a width that is not a positive integer.
    """
    query_width = positive_integer("query_width", query_width)
    key_width = positive_integer("key_width", key_width)
    hidden = positive_integer("hidden", hidden)
    rng = np.random.default_rng(seed)
    return AdditiveParams(
        w_query=rng.normal(size=(hidden, query_width)) / math.sqrt(query_width),  # (H, Eq)
        w_key=rng.normal(size=(hidden, key_width)) / math.sqrt(key_width),  # (H, Ek)
        v=rng.normal(size=(hidden,)) / math.sqrt(hidden),  # (H,)
    )


def additive_hidden(query: Any, key: Any, params: AdditiveParams | None = None) -> Any:
    """The hidden units ``tanh(W1 q + W2 k)`` of the additive scorer: (..., L, S, H).

    Arguments and errors as `additive_logits`, which sums these against ``v``.
    Additive scores have no 1/sqrt(d), but the scale is still there, in the
    size of W1 and W2: where W1 q + W2 k is large the units sit at ±1, and a
    saturated tanh passes almost no gradient (its slope 1 − tanh² is near 0).
    """
    xp = check_pair(query, key, same_width=False)
    if params is None:
        params = additive_params(query.shape[-1], key.shape[-1])
    hidden = params.v.shape[0] if params.v.ndim == 1 else -1
    if (
        params.v.ndim != 1
        or tuple(params.w_query.shape) != (hidden, query.shape[-1])
        or tuple(params.w_key.shape) != (hidden, key.shape[-1])
    ):
        raise ValueError(
            "additive parameters must be w_query (H, Eq), w_key (H, Ek), v (H,) for "
            f"query {tuple(query.shape)} and key {tuple(key.shape)}; got {params.shapes}"
        )
    w_query, w_key = (as_like(p, query, xp) for p in (params.w_query, params.w_key))
    hq = xp.matmul(query, xp.matrix_transpose(w_query))  # (..., L, H)
    hk = xp.matmul(key, xp.matrix_transpose(w_key))  # (..., S, H)
    return xp.tanh(xp.expand_dims(hq, axis=-2) + xp.expand_dims(hk, axis=-3))  # (.., L, S, H)


def additive_logits(query: Any, key: Any, params: AdditiveParams | None = None) -> Any:
    """Additive scores ``v^T tanh(W1 q + W2 k)`` for every query-key pair, shape (..., L, S).

    query (..., L, Eq) and key (..., S, Ek) may have different widths (in
    Bahdanau et al. the decoder state and the encoder annotations do).
    ``params`` default to `additive_params(Eq, Ek)` (seed 0); numpy params are
    moved to a torch input's dtype and device. The (..., L, S, H) tensor of
    hidden activations (`additive_hidden`) is what a single matrix multiply
    avoids: memory and work grow with L * S * H instead of L * S.

    Raises TypeError/ValueError naming the shapes for bad inputs, and
    ValueError when the parameters do not fit the widths.
    """
    xp = namespace(query, key)
    if params is None:
        params = additive_params(query.shape[-1], key.shape[-1])
    hidden_act = additive_hidden(query, key, params)  # (..., L, S, H), checks the arguments
    return xp.sum(hidden_act * as_like(params.v, query, xp), axis=-1)  # (..., L, S)


def additive_attention(
    query: Any,
    key: Any,
    value: Any,
    params: AdditiveParams | None = None,
    *,
    normaliser: Callable[..., Any] = softmax,
) -> Any:
    """Additive attention: ``normaliser(additive_logits(query, key)) @ value``, (..., L, Ev).

    Shapes and errors as `additive_logits`; value is (..., S, Ev).
    """
    xp = check_pair(query, key, value, same_width=False)
    weights = normaliser(additive_logits(query, key, params), axis=-1)  # (..., L, S)
    return xp.matmul(weights, value)  # (..., L, Ev)
