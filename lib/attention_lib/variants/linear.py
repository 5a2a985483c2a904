"""Kernelised (linear) attention: ``exp(q · k)`` replaced by a product of features.

With a positive feature map phi, attention becomes
``phi(Q) (phi(K)^T V) / (phi(Q) phi(K)^T 1)``: reassociated, the cost is
linear in the length and no (L, S) matrix exists.

- `elu_feature_map`: elu(x) + 1 (Katharopoulos et al., 2020, arXiv:2006.16236).
- `performer_feature_map` with `random_projection`: positive random
  features whose inner products estimate exp(q · k) (FAVOR+, Choromanski et
  al., 2021, arXiv:2009.14794); `performer_attention` approximates softmax
  attention this way, and `performer_weights` are the weights it applies.
- `linear_attention`: the linear-time computation; `kernel_weights`: the
  same weights written out the slow, quadratic way, for drawing and checking.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..backend import describe, namespace
from ..inputs import positive_integer, prepare
from ._arrays import as_like, check_pair

__all__ = [
    "elu_feature_map",
    "kernel_weights",
    "linear_attention",
    "performer_attention",
    "performer_feature_map",
    "performer_weights",
    "random_projection",
]

_FeatureMap = Callable[[Any], Any]


def elu_feature_map(x: Any) -> Any:
    """``elu(x) + 1``, Katharopoulos et al.'s positive feature map, same shape as x.

    Equal to x + 1 for x > 0 and exp(x) otherwise: always positive, so the
    normaliser phi(q) · sum_j phi(k_j) never vanishes.
    """
    xp = namespace(x)
    return xp.where(x > 0, x + 1, xp.exp(xp.clip(x, max=0.0)))  # (..., n, E)


def random_projection(
    width: int, num_features: int, seed: int = 0, orthogonal: bool = True
) -> np.ndarray:
    """Gaussian directions w for the random features, float64 numpy of shape (m, E).

    ``orthogonal=True`` builds blocks of E mutually orthogonal rows (QR of a
    Gaussian matrix) and gives each row the length of a Gaussian vector, so
    each row is still N(0, I) but the rows are less redundant (Performer's
    ORF). Raises ValueError, naming it, for a width or count that is not a
    positive integer.
    """
    width = positive_integer("width", width)
    num_features = positive_integer("num_features", num_features)
    rng = np.random.default_rng(seed)
    if not orthogonal:
        return rng.normal(size=(num_features, width))  # (m, E)
    blocks = []
    for _ in range(-(-num_features // width)):
        q, r = np.linalg.qr(rng.normal(size=(width, width)))  # (E, E), orthonormal columns
        q = q * np.sign(np.diag(r))  # fix the signs, else Q is not uniformly (Haar) distributed
        blocks.append(q.T)  # (E, E), orthonormal rows
    rows = np.concatenate(blocks)[:num_features]  # (m, E)
    lengths = np.linalg.norm(rng.normal(size=(num_features, width)), axis=-1)  # (m,)
    return rows * lengths[:, None]  # (m, E)


def performer_feature_map(projection: Any) -> _FeatureMap:
    """``phi(x) = exp(W x - |x|^2 / 2) / sqrt(m)``: positive random features (FAVOR+).

    ``projection`` W is (m, E) (see `random_projection`). Then
    E_w[phi(q) · phi(k)] = exp(q · k), so normalised kernel attention
    approximates softmax attention. Every feature is positive. Returns a
    function mapping (..., n, E) to (..., n, m). (Large |x| can overflow
    exp; Performer's code subtracts a per-row maximum, which cancels in the
    ratio; the inputs here are scaled by sqrt(scale) and stay small.)
    """
    m, width = projection.shape

    def phi(x: Any) -> Any:
        xp = namespace(x)
        if x.shape[-1] != width:
            raise ValueError(
                f"the projection {tuple(projection.shape)} expects width {width}, got {describe(x)}"
            )
        w = as_like(projection, x, xp)  # (m, E)
        wx = xp.matmul(x, xp.matrix_transpose(w))  # (..., n, m)
        half_sq = xp.sum(x * x, axis=-1, keepdims=True) / 2  # (..., n, 1)
        return xp.exp(wx - half_sq) / math.sqrt(m)  # (..., n, m)

    return phi


def linear_attention(
    query: Any, key: Any, value: Any, feature_map: _FeatureMap = elu_feature_map
) -> Any:
    """Kernelised attention in time linear in the length, shape (..., L, Ev).

    out_i = phi(q_i) (sum_j phi(k_j)^T v_j) / (phi(q_i) · sum_j phi(k_j)):
    ``phi(K)^T V`` (m, Ev) and ``phi(K)^T 1`` (m,) are formed once, so no
    (L, S) matrix exists; work is O((L + S) m Ev). query (..., L, E), key
    (..., S, E), value (..., S, Ev); ``feature_map`` maps (..., n, E) to
    (..., n, m) with positive entries. Errors name the shapes at fault.
    """
    xp = check_pair(query, key, value)
    phi_q = feature_map(query)  # (..., L, m)
    phi_k = feature_map(key)  # (..., S, m)
    kv = xp.matmul(xp.matrix_transpose(phi_k), value)  # (..., m, Ev)
    k_sum = xp.sum(phi_k, axis=-2)  # (..., m)
    numerator = xp.matmul(phi_q, kv)  # (..., L, Ev)
    k_sum = xp.expand_dims(k_sum, axis=-2)  # (..., 1, m)
    denominator = xp.sum(phi_q * k_sum, axis=-1, keepdims=True)  # (..., L, 1)
    return numerator / denominator  # (..., L, Ev)


def kernel_weights(query: Any, key: Any, feature_map: _FeatureMap = elu_feature_map) -> Any:
    """The weights linear attention applies, written out: (..., L, S), rows sum to one.

    ``phi(Q) phi(K)^T`` divided by its row sums: the quadratic form that
    `linear_attention` never builds. For drawing and checking only.
    """
    xp = check_pair(query, key)
    sim = xp.matmul(feature_map(query), xp.matrix_transpose(feature_map(key)))  # (..., L, S)
    return sim / xp.sum(sim, axis=-1, keepdims=True)  # (..., L, S)


def _root_scale(scale: float) -> float:
    """sqrt(scale): q·√s and k·√s have exp(q'·k') = exp(q·k·s), what the features estimate."""
    if scale < 0 or not math.isfinite(scale):
        raise ValueError(f"performer_attention needs a finite scale >= 0, got {scale}")
    return math.sqrt(scale)


def performer_attention(
    query: Any,
    key: Any,
    value: Any,
    num_features: int = 256,
    *,
    scale: float | None = None,
    seed: int = 0,
    orthogonal: bool = True,
) -> Any:
    """Softmax attention approximated by positive random features, shape (..., L, Ev).

    Approximates ``scaled_dot_product_attention(query, key, value, scale=scale)``
    (scale defaults to 1/sqrt(E)): the inputs are multiplied by sqrt(scale) so
    that phi(q') · phi(k') estimates exp(q · k * scale), then `linear_attention`
    runs with `performer_feature_map` of `random_projection(E, num_features,
    seed, orthogonal)`. The error falls like 1/sqrt(num_features)
    (`attention_course.lessons.alternatives.random_feature_error` measures it).
    Errors as `linear_attention`; ValueError for a negative scale.
    """
    problem = prepare(query, key, value, scale=scale)
    root = _root_scale(problem.scale)
    projection = random_projection(query.shape[-1], num_features, seed, orthogonal)  # (m, E)
    phi = performer_feature_map(projection)
    out = linear_attention(problem.query * root, problem.key * root, problem.value, phi)
    return problem.xp.astype(out, problem.out_dtype)  # (..., L, Ev)


def performer_weights(query: Any, key: Any, projection: Any, scale: float) -> Any:
    """The weights `performer_attention` applies with ``projection`` (m, E): (..., L, S).

    `kernel_weights` of q·√scale and k·√scale under `performer_feature_map`:
    each row estimates ``softmax(q · k * scale)`` and sums to one. query
    (..., L, E), key (..., S, E). For drawing and checking; ValueError for a
    negative scale, errors as `kernel_weights` otherwise.
    """
    root = _root_scale(float(scale))
    return kernel_weights(query * root, key * root, performer_feature_map(projection))
