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
   (`train_retrieval_head`, a few seconds of torch on the CPU), over several
   seeds (`compare_retrieval_heads`).

Numbers go in as numpy arrays or torch tensors where the docstring says so;
torch is imported only by the functions that need it.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..backend import describe, device_of, is_torch_array, namespace, require_floating
from ..core import attention_weights
from ..normalisers import softmax
from .scaling_stats import WidthSweep, entropy, scale_for

__all__ = [
    "ROWS",
    "RetrievalComparison",
    "RetrievalRun",
    "SimplexCheck",
    "VarianceCheck",
    "compare_retrieval_heads",
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
    share anywhere, ``max_sum_error`` the largest |row sum − 1| measured,
    ``atol`` the tolerance that error is held to and ``eps`` the machine
    epsilon of the shares' dtype.

    Printed, the measured error is a bound that holds on every machine
    (`rounding_bound`), and the tolerance is printed beside it: the digits
    of rounding differ from one CPU to another.
    """

    rows: int
    length: int
    min_share: float
    max_sum_error: float
    atol: float
    eps: float

    @property
    def ok(self) -> bool:
        """Every share is >= 0 and every row sums to one within ``atol``."""
        return self.min_share >= 0.0 and self.max_sum_error <= self.atol

    @property
    def rounding_bound(self) -> float:
        """The power of ten at or above 8·length·eps: more than rounding can leave in a row sum.

        A softmax row of n shares, each rounded in its exp, its sum and its
        division, then summed, is off by at most about (2n + 3)·eps; 8·n·eps
        covers that on any machine.
        """
        return 10.0 ** math.ceil(math.log10(8 * max(self.length, 1) * self.eps))

    def __str__(self) -> str:
        verdict = "every row is on the simplex" if self.ok else "NOT on the simplex"
        bound = self.rounding_bound
        error = f"below {bound:.0e}" if self.max_sum_error < bound else f"{self.max_sum_error:.2e}"
        return (
            f"{self.rows} rows of {self.length} shares: smallest share {self.min_share:.3g} "
            f"({'>= 0' if self.min_share >= 0 else '< 0'}), largest |row sum - 1| {error} "
            f"(tolerance {self.atol:.1e}): {verdict}"
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
    eps = float(xp.finfo(weights.dtype).eps)
    if atol is None:
        atol = math.sqrt(eps)
    if is_torch_array(weights):
        weights = weights.detach()  # only numbers are read; no autograd graph
    sums = xp.sum(weights, axis=-1)  # (...,)
    return SimplexCheck(
        rows=math.prod(int(s) for s in weights.shape[:-1]),
        length=int(weights.shape[-1]),
        min_share=float(xp.min(weights)),
        max_sum_error=float(xp.max(xp.abs(sums - 1.0))),
        atol=float(atol),
        eps=eps,
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
    as p approaches one-hot. The diagonal is computed as p_i Σ_{j≠i} p_j, not
    p_i (1 − p_i): near one-hot, 1 − p_top rounds to 0 long before the other
    weights do, and ‖J‖ would come out √3/2 of its value (exactly 2 (1 − p_top)
    when a single runner-up holds the rest).

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
    others = p[..., None, :] * (1 - eye)  # (..., n, n): row i is p with p_i zeroed
    rest = xp.sum(others, axis=-1)  # (..., n): Σ_{j≠i} p_j, exact where 1 − p_i is not
    return (p * rest)[..., :, None] * eye - p[..., :, None] * others  # (..., n, n)


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
    differ only by it. torch, float32, CPU, one thread: the same numbers on
    every run on one machine. Not across machines: the unscaled run is
    chaotic, and a last-bit difference in a matrix product (another CPU, or
    another MKL code path) grows into a different trajectory (a mean loss over
    the last 20 steps of 0.63 on one CPU, 1.4 on another). Report what holds
    over seeds instead: `compare_retrieval_heads`.

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


# -- 4b. the same comparison over seeds, printed as what holds on every machine ----------


def _scale_label(scale: float | None) -> str:
    return "no scaling" if scale == 1.0 else "1/sqrt(d)" if scale is None else f"scale {scale:g}"


ROWS = ("first loss", "first entropy", "reached", "floor", "final loss", "entropy")


@dataclass(frozen=True)
class RetrievalComparison:
    """`train_retrieval_head` over several seeds per scale, and what holds across them.

    ``runs[i]`` holds one run per seed (``seeds``, in order) for the scale
    labelled ``labels[i]``. A single unscaled run is chaotic: its late losses
    differ from one CPU to the next. So `rows` (and `str`) report only

    - medians over the seeds of the first step's loss and entropy, taken
      before any update (they agree to about six digits across CPUs; two are
      printed): rows "first loss" and "first entropy";
    - how many seeds land on each side of a threshold: the smoothed loss
      below ``loss_level`` within ``within`` steps ("reached"); the smoothed
      loss above ``floor_level`` at every step ("floor": a head that never
      gets near the answer); the mean loss of the last ``final_steps`` steps
      below ``final_level`` ("final loss");
      the entropy below ``entropy_level`` nats at every step ("entropy").
      A count is the same on every machine when every seed misses the
      threshold by a wide margin; the tests check that margin for each claim
      a notebook prints.

    ``show`` names the rows `str` prints, in order (all of `ROWS` by default).
    """

    labels: tuple[str, ...]
    runs: tuple[tuple[RetrievalRun, ...], ...]
    seeds: tuple[int, ...]
    loss_level: float = 0.1
    within: int = 40
    final_level: float = 0.01
    final_steps: int = 20
    entropy_level: float = 1.0
    floor_level: float = 0.05
    show: tuple[str, ...] = ROWS

    def __post_init__(self) -> None:
        unknown = [row for row in self.show if row not in ROWS]
        if unknown or not self.show:
            raise ValueError(f"show must name rows among {list(ROWS)}, got {list(self.show)}")

    def first_loss(self, label: str) -> np.ndarray:
        """Each seed's loss at the first step, before any update: (seeds,)."""
        return np.array([run.loss[0] for run in self._runs(label)])

    def first_entropy(self, label: str) -> np.ndarray:
        """Each seed's mean attention entropy (nats) at the first step: (seeds,)."""
        return np.array([run.entropy[0] for run in self._runs(label)])

    def reached_within(self, label: str) -> np.ndarray:
        """Per seed: did the smoothed loss fall below ``loss_level`` within ``within`` steps?"""
        steps = [run.steps_to_loss(self.loss_level) for run in self._runs(label)]
        return np.array([s is not None and s <= self.within for s in steps])

    def lowest_smoothed_loss(self, label: str) -> np.ndarray:
        """Each seed's lowest smoothed loss (trailing mean of 10 steps) over the run: (seeds,)."""
        return np.array([run.smoothed_loss().min() for run in self._runs(label)])

    def final_loss(self, label: str) -> np.ndarray:
        """Each seed's mean loss over its last ``final_steps`` steps: (seeds,)."""
        return np.array([run.loss[-self.final_steps :].mean() for run in self._runs(label)])

    def highest_entropy(self, label: str) -> np.ndarray:
        """Each seed's highest mean entropy over all steps (nats): (seeds,)."""
        return np.array([run.entropy.max() for run in self._runs(label)])

    def _runs(self, label: str) -> tuple[RetrievalRun, ...]:
        if label not in self.labels:
            raise KeyError(f"no runs labelled {label!r}; the labels are {list(self.labels)}")
        return self.runs[self.labels.index(label)]

    def rows(self) -> list[tuple[str, list[str]]]:
        """(what, one entry per label) for each row in ``show``: the lines `str` prints."""
        n = len(self.seeds)

        def count(flags: np.ndarray) -> str:
            return f"{int(np.sum(flags))} of {n}"

        def median(values: np.ndarray) -> str:
            return f"{float(np.median(values)):.2g}"

        keys = self.runs[0][0].keys
        every = {
            "first loss": (
                "median loss at the first step",
                [median(self.first_loss(x)) for x in self.labels],
            ),
            "first entropy": (
                f"median entropy at the first step, nats (uniform: ln {keys} = "
                f"{math.log(keys):.2f})",
                [median(self.first_entropy(x)) for x in self.labels],
            ),
            "reached": (
                f"smoothed loss below {self.loss_level:g} within {self.within} steps",
                [count(self.reached_within(x)) for x in self.labels],
            ),
            "floor": (
                f"smoothed loss above {self.floor_level:g} at every step",
                [count(self.lowest_smoothed_loss(x) > self.floor_level) for x in self.labels],
            ),
            "final loss": (
                f"mean loss of the last {self.final_steps} steps below {self.final_level:g}",
                [count(self.final_loss(x) < self.final_level) for x in self.labels],
            ),
            "entropy": (
                f"entropy below {self.entropy_level:g} nat at every step",
                [count(self.highest_entropy(x) < self.entropy_level) for x in self.labels],
            ),
        }
        return [every[row] for row in self.show]

    def __str__(self) -> str:
        run = self.runs[0][0]
        head = (
            f"{len(self.seeds)} seeds per head; width {run.width}, {run.keys} keys, "
            f"{run.loss.size} steps; a seed fixes the start and the batches"
        )
        rows = self.rows()
        first = max(len(what) for what, _ in rows)
        widths = [max(len(label), 6) for label in self.labels]

        def line(start: str, cells: Iterable[str]) -> str:
            return start + "".join(f"  {c:>{w}}" for c, w in zip(cells, widths, strict=True))

        lines = [head, line(" " * first, self.labels)]
        lines += [line(f"{what:<{first}}", cells) for what, cells in rows]
        return "\n".join(lines)


def compare_retrieval_heads(
    scales: Iterable[float | None] = (1.0, None),
    seeds: Iterable[int] = range(5),
    *,
    labels: Iterable[str] | None = None,
    show: Iterable[str] = ROWS,
    loss_level: float = 0.1,
    within: int = 40,
    final_level: float = 0.01,
    final_steps: int = 20,
    entropy_level: float = 1.0,
    floor_level: float = 0.05,
    **kwargs: Any,
) -> RetrievalComparison:
    """`train_retrieval_head` once per seed for each scale; the runs and what they share.

    ``scales`` as `train_retrieval_head`'s ``scale`` (1.0: no scaling, None:
    1/sqrt(width)); ``labels`` name them (default "no scaling", "1/sqrt(d)",
    "scale 0.5"...); ``kwargs`` go to every run (``width``, ``steps``...). The
    thresholds and ``show`` are those of `RetrievalComparison`. About a second
    per run of 150 steps on a laptop CPU. Raises ValueError for no seeds, no
    scales, labels that do not match the scales or an unknown row, and
    whatever `train_retrieval_head` raises for bad settings.
    """
    scales, seeds = tuple(scales), tuple(int(s) for s in seeds)
    if not scales or not seeds:
        raise ValueError(f"need at least one scale and one seed, got {scales} and {seeds}")
    names = tuple(_scale_label(s) for s in scales) if labels is None else tuple(labels)
    if len(names) != len(scales):
        raise ValueError(f"{len(names)} labels {list(names)} for {len(scales)} scales")
    if final_steps < 1 or within < 1:
        raise ValueError(f"final_steps and within must be positive, got {final_steps}, {within}")
    # fail on a bad row before the training, not after
    RetrievalComparison(names, ((),) * len(names), seeds, show=tuple(show))
    runs = tuple(
        tuple(train_retrieval_head(scale, seed=seed, **kwargs) for seed in seeds)
        for scale in scales
    )
    return RetrievalComparison(
        names,
        runs,
        seeds,
        loss_level=loss_level,
        within=within,
        final_level=final_level,
        final_steps=final_steps,
        entropy_level=entropy_level,
        floor_level=floor_level,
        show=tuple(show),
    )
