"""The researcher's claims about scaling, as functions that check them numerically.

Notebook 04 states four things and shows each by running code from here:

1. Each row of attention weights is a point on the probability simplex
   (`simplex_check`).
2. For independent zero-mean components with variances sigma_q² and sigma_k²,
   Var(q·k) = sigma_q² sigma_k² d, so d for unit variances (Vaswani et al.,
   2017, arXiv:1706.03762, footnote 4) (`dot_product_variance`).
3. The softmax Jacobian is p_i (δ_ij − p_j) (`softmax_jacobian`); it vanishes
   as p approaches one-hot, which unscaled wide heads do (`jacobian_norms`).
4. A head that starts saturated learns slowly and stays saturated
   (`train_retrieval_head`, a few seconds of torch on the CPU).

Numbers go in as numpy arrays or torch tensors where the docstring says so;
torch is imported only by the functions that need it.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..backend import describe, device_of, is_torch_array, namespace, require_floating
from ..core import attention_weights
from ..normalisers import softmax
from .scaling_stats import WidthSweep, entropy, scale_for

__all__ = [
    "RetrievalRun",
    "SimplexCheck",
    "VarianceCheck",
    "dot_product_samples",
    "dot_product_variance",
    "jacobian_norms",
    "jacobian_row_norms",
    "simplex_check",
    "softmax_jacobian",
    "train_retrieval_head",
]

# numbers drawn per chunk by `dot_product_samples`, so wide heads do not need gigabytes
_CHUNK = 1 << 20


# -- 1. rows on the simplex ---------------------------------------------------------


@dataclass(frozen=True)
class SimplexCheck:
    """Whether every row of shares lies on the probability simplex.

    ``rows`` rows of ``length`` shares each; ``min_share`` is the smallest
    share anywhere, ``max_sum_error`` the largest |row sum − 1|, and ``atol``
    the tolerance that error is held to.
    """

    rows: int
    length: int
    min_share: float
    max_sum_error: float
    atol: float

    @property
    def ok(self) -> bool:
        """Every share is >= 0 and every row sums to one within ``atol``."""
        return self.min_share >= 0.0 and self.max_sum_error <= self.atol

    def __str__(self) -> str:
        verdict = "every row is on the simplex" if self.ok else "NOT on the simplex"
        return (
            f"{self.rows} rows of {self.length} shares: smallest share {self.min_share:.3g} "
            f"({'>= 0' if self.min_share >= 0 else '< 0'}), largest |row sum - 1| "
            f"{'<=' if self.max_sum_error <= self.atol else '>'} {self.atol:.0e}: {verdict}"
        )


def simplex_check(weights: Any, atol: float | None = None) -> SimplexCheck:
    """Check that each row of ``weights`` (..., n), along the last axis, is on the simplex.

    A row is on the simplex when its entries are non-negative and sum to one.
    ``atol`` bounds |row sum − 1|; by default the square root of the dtype's
    machine epsilon (1.5e-8 in float64, 3.5e-4 in float32), room for the
    rounding of a sum. numpy arrays or torch tensors; nothing is modified.

    Raises TypeError for non-float input and ValueError for a 0-d array or
    rows of length zero.
    """
    xp = namespace(weights)
    require_floating(xp, weights, "weights")
    if weights.ndim == 0 or weights.shape[-1] == 0:
        raise ValueError(f"weights need rows along the last axis, got {describe(weights)}")
    if atol is None:
        atol = math.sqrt(float(xp.finfo(weights.dtype).eps))
    if is_torch_array(weights):
        weights = weights.detach()  # only numbers are read; no autograd graph
    sums = xp.sum(weights, axis=-1)  # (...,)
    return SimplexCheck(
        rows=math.prod(int(s) for s in weights.shape[:-1]),
        length=int(weights.shape[-1]),
        min_share=float(xp.min(weights)),
        max_sum_error=float(xp.max(xp.abs(sums - 1.0))),
        atol=float(atol),
    )


# -- 2. the variance of a dot product ------------------------------------------------


@dataclass(frozen=True)
class VarianceCheck:
    """The sample variance of q·k next to the theory sigma_q² sigma_k² d.

    ``standard_error`` is the sampling standard deviation of ``empirical``
    for Gaussian components: q·k has fourth moment 3 d (d + 2) s² with
    s = sigma_q² sigma_k², so the sample variance of N draws has standard
    deviation s sqrt((2 d² + 6 d) / N) = theory · sqrt((2 + 6/d) / N).
    ``z`` is the error in those units; |z| < 4 fails about once in 16,000.
    """

    d: int
    sigma_q: float
    sigma_k: float
    samples: int
    empirical: float

    @property
    def theory(self) -> float:
        """sigma_q² sigma_k² d."""
        return self.sigma_q**2 * self.sigma_k**2 * self.d

    @property
    def standard_error(self) -> float:
        """Sampling standard deviation of ``empirical`` (Gaussian components)."""
        return self.theory * math.sqrt((2 + 6 / self.d) / self.samples)

    @property
    def z(self) -> float:
        """(empirical − theory) in standard errors."""
        return (self.empirical - self.theory) / self.standard_error


def _positive(name: str, value: float) -> float:
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be positive and finite, got {value!r}")
    return float(value)


def _generator(rng: np.random.Generator | int | None) -> np.random.Generator:
    if rng is None or isinstance(rng, (int, np.integer)):
        return np.random.default_rng(rng)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be an int seed or numpy.random.Generator, got {type(rng)}")
    return rng


def dot_product_samples(
    d: int,
    sigma_q: float = 1.0,
    sigma_k: float = 1.0,
    samples: int = 20_000,
    rng: np.random.Generator | int | None = None,
) -> np.ndarray:
    """``samples`` dot products q·k of independent Gaussian vectors of width ``d``.

    Components are drawn q_i ~ N(0, sigma_q²), k_i ~ N(0, sigma_k²), in
    chunks so that wide heads need little memory. Returns shape (samples,),
    float64. ``rng`` is a numpy Generator or an int seed (None: fresh entropy).

    Raises ValueError for d < 1, samples < 2 or a sigma that is not positive.
    """
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise ValueError(f"head width d must be a positive integer, got {d!r}")
    if samples < 2:
        raise ValueError(f"need at least 2 samples to estimate a variance, got {samples}")
    sigma_q, sigma_k = _positive("sigma_q", sigma_q), _positive("sigma_k", sigma_k)
    rng = _generator(rng)
    rows = max(1, _CHUNK // int(d))
    out = np.empty(samples)  # (N,)
    for start in range(0, samples, rows):
        n = min(rows, samples - start)
        q = rng.standard_normal((n, d)) * sigma_q  # (n, d)
        k = rng.standard_normal((n, d)) * sigma_k  # (n, d)
        out[start : start + n] = np.einsum("nd,nd->n", q, k)  # (n,) one q·k per pair
    return out


def dot_product_variance(
    d: int,
    sigma_q: float = 1.0,
    sigma_k: float = 1.0,
    samples: int = 20_000,
    rng: np.random.Generator | int | None = None,
) -> VarianceCheck:
    """The sample variance of `dot_product_samples` (ddof=1), with its theory.

    Same arguments and errors as `dot_product_samples`.
    """
    x = dot_product_samples(d, sigma_q, sigma_k, samples, rng)  # (N,)
    return VarianceCheck(int(d), float(sigma_q), float(sigma_k), samples, float(x.var(ddof=1)))


# -- 3. the softmax Jacobian ---------------------------------------------------------


def softmax_jacobian(p: Any, atol: float | None = None) -> Any:
    """The Jacobian of softmax at shares ``p``: J[..., i, j] = ∂p_i/∂s_j = p_i (δ_ij − p_j).

    ``p`` (..., n) holds rows of softmax output (numpy or torch, any float
    dtype); the result is (..., n, n) in the same library, dtype and device,
    batched over the leading dimensions. J is symmetric, its rows sum to zero
    (adding a constant to every score changes nothing), and it tends to zero
    as p approaches one-hot.

    Raises TypeError for non-float input and ValueError if ``p`` is 0-d or a
    row is not on the simplex (see `simplex_check`; ``atol`` is passed on).
    """
    check = simplex_check(p, atol)
    if not check.ok:
        raise ValueError(
            f"softmax_jacobian needs rows of shares (softmax output) along the last axis; "
            f"{describe(p)} is not: {check}"
        )
    xp = namespace(p)
    n = p.shape[-1]
    eye = xp.eye(n, dtype=p.dtype, device=device_of(p))  # (n, n)
    column = p[..., :, None]  # (..., n, 1)
    return column * eye - column * p[..., None, :]  # (..., n, n)


def jacobian_row_norms(scores: Any) -> Any:
    """Frobenius norm of the softmax Jacobian of each row of ``scores`` (..., n).

    ``scores`` are the logits that go into the softmax (already scaled);
    numpy or torch. Returns shape (...,) in the same library and dtype. A
    norm is at most 1/2 (two keys tied, the rest at zero) and tends to 0 as a
    row's largest score pulls away from the rest.
    """
    xp = namespace(scores)
    jac = softmax_jacobian(softmax(scores, axis=-1))  # (..., n, n)
    return xp.sqrt(xp.sum(jac * jac, axis=(-2, -1)))  # (...,)


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
    `attention_lib.lessons.scaling_stats.sweep_widths`); ``rule`` and ``multiplier``
    are those of `attention_lib.lessons.scaling_stats.scale_for` (``"none"``,
    ``"1/sqrt(d)"``, ``"1/d"``, ``"custom"``). The mean is what an average
    gradient sees, dominated by the few rows that happen to be nearly tied;
    the median is the typical row. Returns shape (len(sweep.widths),),
    float64. Raises ValueError for an unknown rule or statistic, or a bad
    multiplier.
    """
    if statistic not in _STATISTICS:  # before the work, not after
        raise ValueError(f"statistic must be one of {list(_STATISTICS)}, got {statistic!r}")
    return reduce_norms(jacobian_norm_table(sweep, rule, multiplier), statistic)


# -- 4. a saturated head in training -------------------------------------------------


@dataclass(frozen=True)
class RetrievalRun:
    """Per-step record of one attention head trained on the retrieval task.

    ``loss`` and ``entropy`` have shape (steps,): the batch's mean squared
    error before that step's update, and the mean entropy (nats) of its
    attention rows; ``max_entropy`` = ln(keys) is that of uniform weights.
    """

    scale: float
    width: int
    keys: int
    loss: np.ndarray
    entropy: np.ndarray

    @property
    def max_entropy(self) -> float:
        """ln(keys): the entropy of a head that spreads its weight evenly."""
        return math.log(self.keys)

    def smoothed_loss(self, window: int = 10) -> np.ndarray:
        """Trailing mean of ``window`` losses, shape (steps - window + 1,)."""
        if not 1 <= window <= self.loss.size:
            raise ValueError(f"window must be in 1..{self.loss.size}, got {window}")
        return np.convolve(self.loss, np.ones(window) / window, mode="valid")

    def steps_to_loss(self, level: float, window: int = 10) -> int | None:
        """Steps taken until the trailing mean of ``window`` losses first falls below ``level``.

        None if it never does within the run.
        """
        hits = np.flatnonzero(self.smoothed_loss(window) < level)  # (k,)
        return int(hits[0]) + window if hits.size else None


@contextlib.contextmanager
def _one_torch_thread() -> Iterator[None]:
    """Run torch on one CPU thread, then restore the thread count.

    The matrices are tiny, so extra threads only add contention, and a fixed
    thread count makes the float32 sums, and so the printed losses, the same
    on every machine.
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def train_retrieval_head(
    scale: float | None = None,
    *,
    width: int = 1024,
    keys: int = 16,
    token_width: int = 32,
    value_width: int = 8,
    batch: int = 16,
    steps: int = 150,
    lr: float = 0.03,
    seed: int = 0,
) -> RetrievalRun:
    """Train one attention head to look up a key and copy its value; record every step.

    The task, fresh each step: ``keys`` random tokens x_j of width
    ``token_width`` (entries N(0, 1/token_width), so |x_j| ≈ 1), each with a
    random value v_j (N(0, 1), width ``value_width``). The query token is one
    of the keys' tokens, picked at random; the right answer is its value. The
    head computes q = x_query W_q and k_j = x_j W_k (width ``width``), the
    weights `attention_weights`(q, k, scale=scale) and the output Σ_j p_j v_j;
    the loss is the mean squared error to the right value. Only W_q and W_k
    learn (Adam, ``lr``).

    W_q and W_k start with N(0, 1) entries, so q and k have unit-variance
    components and the raw scores q·k a spread of sqrt(width): with
    ``scale=1.0`` a wide head starts saturated; ``scale=None`` (1/sqrt(width))
    starts with scores of spread one. The same ``seed`` gives the same
    initial weights and the same batches whatever the scale, so two runs
    differ only by it. torch, float32, CPU, one thread: deterministic.

    Raises ValueError for a non-positive size or step count, or a scale that
    is not positive and finite.
    """
    import torch

    for name, value in (
        ("width", width),
        ("keys", keys),
        ("token_width", token_width),
        ("value_width", value_width),
        ("batch", batch),
        ("steps", steps),
    ):
        if value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    resolved = 1.0 / math.sqrt(width) if scale is None else _positive("scale", scale)
    _positive("lr", lr)

    with _one_torch_thread():
        gen = torch.Generator().manual_seed(seed)
        w_q = torch.randn(token_width, width, generator=gen).requires_grad_()  # (m, d)
        w_k = torch.randn(token_width, width, generator=gen).requires_grad_()  # (m, d)
        optimiser = torch.optim.Adam([w_q, w_k], lr=lr)
        rows = torch.arange(batch)  # (B,)
        losses, entropies = np.empty(steps), np.empty(steps)
        for step in range(steps):
            x = torch.randn(batch, keys, token_width, generator=gen) / math.sqrt(token_width)
            v = torch.randn(batch, keys, value_width, generator=gen)  # (B, n, dv)
            target = torch.randint(keys, (batch,), generator=gen)  # (B,)
            query = x[rows, target][:, None, :] @ w_q  # (B, 1, d)
            key = x @ w_k  # (B, n, d)
            weights = attention_weights(query, key, scale=resolved)  # (B, 1, n)
            out = weights @ v  # (B, 1, dv)
            loss = ((out - v[rows, target][:, None, :]) ** 2).mean()
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            losses[step] = loss.item()
            entropies[step] = entropy(weights.detach().double().numpy()).mean()
    return RetrievalRun(resolved, width, keys, losses, entropies)
