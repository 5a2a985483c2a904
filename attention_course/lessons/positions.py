"""Rotary positions (RoPE): what they do to the variance argument of notebook 04.

Attention alone does not know where a token sits: shuffle the keys and values
together and every output stays the same. Rotary position embeddings (Su et al.,
2021, RoFormer, arXiv:2104.09864) tell it by turning each pair of components
(x_{2i}, x_{2i+1}) of a query at position m by the angle m θ_i, and of a key at
position n by n θ_i, with θ_i = base^(-2i/d), just before the product q·k.
Two turned vectors' product depends on the positions only through n - m.

A rotation keeps lengths and, for independent queries and keys whose
components are independent with mean zero, it keeps the distribution of q·k:
the variance stays σ_q² σ_k² d at every distance (`rotary_dot_products`), and
so does the case for 1/sqrt(d). What it changes is a key that matches its
query: q·q turned by (n - m) θ_i has mean Σ_i 2 cos((n - m) θ_i), d at
distance 0 and falling with distance (`aligned_mean`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from attention_lib.inputs import positive_integer, positive_number

__all__ = ["aligned_mean", "rotary_angles", "rotary_dot_products", "rotate"]


def rotary_angles(width: int, positions: Sequence[float] | np.ndarray, base: float = 10_000.0):
    """The angle of each pair of components at each position: (T, width / 2), m θ_i.

    Raises ValueError for an odd or non-positive width or a base that is not positive.
    """
    width = positive_integer("head width d", width)
    if width % 2:
        raise ValueError(f"rotary positions turn pairs of components: d must be even, got {width}")
    base = positive_number("base", base)
    theta = base ** (-np.arange(0, width, 2) / width)  # (d/2,)
    return np.asarray(positions, dtype=float)[:, None] * theta  # (T, d/2)


def rotate(x: Any, positions: Sequence[float] | np.ndarray, base: float = 10_000.0) -> np.ndarray:
    """Queries or keys ``x`` (..., T, d), each pair (x_{2i}, x_{2i+1}) of the token at
    ``positions[t]`` turned by its angle (`rotary_angles`). Returns a new float64 array."""
    x = np.asarray(x, dtype=float)
    angle = rotary_angles(x.shape[-1], positions, base)  # (T, d/2)
    if angle.shape[0] != x.shape[-2]:
        raise ValueError(f"{angle.shape[0]} positions for {x.shape[-2]} tokens")
    cos, sin = np.cos(angle), np.sin(angle)  # (T, d/2)
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., T, d/2)
    out = np.empty_like(x)  # (..., T, d)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


def rotary_dot_products(
    width: int,
    distance: int,
    samples: int = 20_000,
    aligned: bool = False,
    base: float = 10_000.0,
    rng: np.random.Generator | int | None = None,
) -> np.ndarray:
    """``samples`` products q·k of unit-variance Gaussian vectors of width ``width`` after
    RoPE, the query at position ``distance`` and the key at position 0: (samples,).

    ``aligned``: each key is its query itself (a key that matches it exactly),
    else an independent draw. ``rng`` as `numpy.random.default_rng` takes it.
    """
    rng = np.random.default_rng(rng)
    q = rng.standard_normal((samples, 1, width))  # (N, 1, d)
    k = q if aligned else rng.standard_normal((samples, 1, width))  # (N, 1, d)
    turned_q, turned_k = rotate(q, [distance], base), rotate(k, [0], base)  # (N, 1, d) each
    return np.einsum("nd,nd->n", turned_q[:, 0], turned_k[:, 0])  # (N,)


def aligned_mean(width: int, distance: int, base: float = 10_000.0) -> float:
    """E[q·k] for a key equal to its query, turned ``distance`` positions apart, over unit-
    variance components: Σ_i 2 cos(distance θ_i), which is ``width`` at distance 0."""
    return float(2 * np.cos(rotary_angles(width, [distance], base)[0]).sum())
