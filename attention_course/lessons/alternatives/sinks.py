"""Rows that need not sum to one, measured (notebook 06): softmax1 and sinks, sigmoid, differential.

- `sink_experiment`: a one-head toy model trained with `softmax` and
  `softmax1` on rows that sometimes have nothing to attend to (attention
  sinks, Xiao et al., 2024, arXiv:2309.17453), and `sink_headline`, what
  its held-out rows did. Torch is imported only by `sink_experiment`.
- `sigmoid_differential_weights`: softmax, sigmoid and differential weights
  of one query and key pair, and `sigmoid_differential_headline`, their row
  sums and signs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from attention_lib.core import attention_weights
from attention_lib.normalisers import softmax, softmax1
from attention_lib.variants import (
    differential_lambda_init,
    differential_weights,
    sigmoid_weights,
)

__all__ = [
    "SinkRun",
    "sigmoid_differential_headline",
    "sigmoid_differential_weights",
    "sink_experiment",
    "sink_headline",
]


# -- attention sinks (Xiao et al., 2024) ---------------------------------------------------


@dataclass(frozen=True)
class SinkRun:
    """One trained toy head, measured on held-out "nothing" and "match" rows.

    ``first_weight_nothing`` is the mean weight on position 0 in rows whose
    query has no matching key (NaN-free: position 0 is the first content key
    when there is no extra first token). ``example_weights`` (L, S') is one
    held-out sequence's weights, ``example_match`` (L,) says which rows match.
    """

    normaliser: str
    first_token: bool
    loss_nothing: float
    loss_match: float
    first_weight_nothing: float
    first_weight_match: float
    row_total_nothing: float
    row_total_match: float
    example_weights: np.ndarray
    example_match: np.ndarray


def sink_experiment(
    normaliser: str = "softmax",
    first_token: bool = True,
    *,
    vocab: int = 8,
    keys: int = 3,
    queries: int = 6,
    width: int = 8,
    steps: int = 200,
    batch: int = 64,
    lr: float = 0.1,
    seed: int = 0,
) -> SinkRun:
    """Train one attention head whose rows sometimes have nothing to attend to.

    Task: each sequence holds ``keys`` distinct tokens out of ``vocab``; each of
    ``queries`` query tokens must return its own target vector if its token is
    among the keys, and the zero vector if it is not (a "nothing" row, about
    half of them). Learned tables give each token a query, a key and a value
    (``width`` wide); the head computes ``normaliser(q k^T / sqrt(width)) v``,
    trained with Adam on the mean squared error, float64, seeded.

    With ``first_token=True`` every sequence starts with a content-free token
    whose key and value are zero vectors (its logit is 0 for every query).
    ``normaliser`` is ``"softmax"`` or ``"softmax1"``. Torch is imported here.
    """
    import torch

    norm_fns = {"softmax": softmax, "softmax1": softmax1}
    if normaliser not in norm_fns:
        raise ValueError(f"normaliser must be 'softmax' or 'softmax1', got {normaliser!r}")
    if not 1 <= keys <= vocab:
        raise ValueError(f"keys must be between 1 and vocab={vocab}, got {keys}")
    norm_fn = norm_fns[normaliser]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: one thread is faster and reproducible
    try:
        gen = torch.Generator().manual_seed(seed)
        f64 = torch.float64

        def draw(*shape: int) -> Any:
            return torch.randn(*shape, generator=gen, dtype=f64)

        tables = [torch.nn.Parameter(0.3 * draw(vocab, width)) for _ in range(3)]  # (V, d) each
        targets = draw(vocab, width)  # (V, d)
        optimiser = torch.optim.Adam(tables, lr=lr)

        def sample(n: int) -> tuple[Any, Any, Any, Any]:
            key_tok = torch.rand(n, vocab, generator=gen).argsort(-1)[:, :keys]  # (n, S)
            query_tok = torch.randint(0, vocab, (n, queries), generator=gen)  # (n, L)
            match = (query_tok[..., None] == key_tok[:, None, :]).any(-1)  # (n, L)
            target = torch.where(match[..., None], targets[query_tok], 0.0)  # (n, L, d)
            return query_tok, key_tok, match, target

        def forward(query_tok: Any, key_tok: Any) -> tuple[Any, Any]:
            w_q, w_k, w_v = tables
            q, k, v = w_q[query_tok], w_k[key_tok], w_v[key_tok]  # (n, L, d), (n, S, d) x2
            if first_token:
                blank = torch.zeros(q.shape[0], 1, width, dtype=f64)  # (n, 1, d)
                k, v = torch.cat([blank, k], 1), torch.cat([blank, v], 1)  # (n, 1 + S, d)
            weights = norm_fn(q @ k.transpose(-1, -2) / math.sqrt(width))  # (n, L, S')
            return weights, weights @ v  # (n, L, S'), (n, L, d)

        for _ in range(steps):
            query_tok, key_tok, match, target = sample(batch)
            loss = ((forward(query_tok, key_tok)[1] - target) ** 2).mean()
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()

        with torch.no_grad():
            query_tok, key_tok, match, target = sample(1024)
            weights, out = forward(query_tok, key_tok)  # (n, L, S'), (n, L, d)
            sq_err = ((out - target) ** 2).mean(-1)  # (n, L)
            nothing = ~match
            return SinkRun(
                normaliser=normaliser,
                first_token=first_token,
                loss_nothing=float(sq_err[nothing].mean()),
                loss_match=float(sq_err[match].mean()),
                first_weight_nothing=float(weights[..., 0][nothing].mean()),
                first_weight_match=float(weights[..., 0][match].mean()),
                row_total_nothing=float(weights.sum(-1)[nothing].mean()),
                row_total_match=float(weights.sum(-1)[match].mean()),
                example_weights=weights[0].numpy(),
                example_match=match[0].numpy(),
            )
    finally:
        torch.set_num_threads(threads)


def sink_headline(runs: Mapping[tuple[str, bool], SinkRun]) -> str:
    """What the held-out "nothing" rows do, from the runs' measured means (two lines)."""
    sink = runs["softmax", True]
    fade = runs["softmax1", False]
    return (
        f"'nothing' rows (held out): softmax with a blank first token puts "
        f"{sink.first_weight_nothing:.0%} of their weight on it;\n"
        f"softmax1 without one lets them sum to {fade.row_total_nothing:.2f}"
    )


# -- sigmoid and differential attention on one pair ---------------------------------------


def sigmoid_differential_weights(
    query: np.ndarray, key: np.ndarray, lam: float | None = None
) -> dict[str, np.ndarray]:
    """Softmax, sigmoid and differential weights of one query (L, E) and key (S, E) pair.

    softmax: ``softmax(q·k/sqrt(E))``; sigmoid: `sigmoid_weights` with its
    default scale 1/sqrt(E) and bias -log S; differential:
    `differential_weights` on the two halves of width E/2 with ``lam``
    (default λ_init of the first layer, 0.2). Each (L, S). Raises ValueError
    for an odd E (from `differential_weights`).
    """
    query, key = np.asarray(query, dtype=float), np.asarray(key, dtype=float)
    lam = differential_lambda_init(1) if lam is None else float(lam)
    return {
        "softmax": attention_weights(query, key),  # (L, S)
        "sigmoid": sigmoid_weights(query, key),
        f"differential, λ = {lam:.2g}": differential_weights(query, key, lam),
    }


def sigmoid_differential_headline(weights: Mapping[str, np.ndarray]) -> str:
    """Row sums and signs of each map in ``weights`` (as `sigmoid_differential_weights`)."""
    parts = []
    for name, w in weights.items():
        sums = w.sum(-1)  # (L,)
        negative = int(np.sum(w < 0))
        sign = f", {negative}/{w.size} negative (min {w.min():.2f})" if negative else ""
        parts.append(f"{name.split(',')[0]}: rows sum {sums.min():.2f}–{sums.max():.2f}{sign}")
    return "; ".join(parts)
