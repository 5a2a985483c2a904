"""The scale against the head width d: why 1/sqrt(d), and when 1/d.

Three answers to one question, from the course's notebooks 02 and 04:

- The width sweep (notebook 02's explorer and its "Try it yourself"
  checker): for random queries and keys of width d, multiplied by some
  scale (`attention_lib.scales.scale_for`), how peaked are the weights one
  query gives a handful of keys? The mean top weight (1/keys when uniform,
  1 when one key takes everything) and the mean entropy in nats (ln(keys)
  when uniform, 0 when one-hot) answer it (`WeightStats`). The raw dot
  products are drawn once per width (`sweep_widths`), so trying another
  scale is a multiplication and a softmax, fast enough for a slider.
- The variance (notebook 04): for independent zero-mean components with
  variances sigma_q² and sigma_k², Var(q·k) = sigma_q² sigma_k² d, so d for
  unit variances (Vaswani et al., 2017, arXiv:1706.03762, footnote 4):
  `dot_product_samples`, `dot_product_variance`.
- μP's alignment (notebook 04): trained queries and keys are not
  independent. Yang et al. (2022), Tensor Programs V (arXiv:2203.03466),
  argue that training correlates them, so q·k grows like d, not sqrt(d),
  and 1/d keeps logits of order one as the width grows. `alignment_table`
  and `width_growth` read that from the trained models' report
  (`attention_course.model.head_stats.alignment_ratio`: 1 independent,
  sqrt(d) parallel).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attention_lib.inputs import positive_integer, positive_number
from attention_lib.normalisers import entropy, softmax
from attention_lib.scales import scale_for

from ..model.catalogue import MODEL_LABELS
from ..model.head_stats import parallel_alignment
from ..model.report import head_metric, report_models

__all__ = [
    "POWER_OF_TWO_WIDTHS",
    "VarianceCheck",
    "WeightStats",
    "WidthSweep",
    "alignment_table",
    "dot_product_samples",
    "dot_product_variance",
    "raw_logits",
    "sweep_widths",
    "weight_stats",
    "width_growth",
]

POWER_OF_TWO_WIDTHS = tuple(2**i for i in range(11))  # 1, 2, 4, ..., 1024


def raw_logits(rng: np.random.Generator, d: int, trials: int, keys: int) -> np.ndarray:
    """Unscaled logits of ``trials`` random queries against ``keys`` random keys each.

    Query and key entries are independent standard normals, so each logit has
    mean 0 and standard deviation sqrt(d). Returns shape (trials, keys), float64.
    """
    q = rng.normal(size=(trials, 1, d))  # (N, 1, d)
    k = rng.normal(size=(trials, keys, d))  # (N, keys, d)
    return (q @ k.swapaxes(-1, -2))[:, 0, :]  # (N, keys)


@dataclass(frozen=True)
class WeightStats:
    """How peaked the weights are: mean top weight and mean entropy (nats) over trials."""

    top: float
    entropy: float


def weight_stats(logits: np.ndarray, scale: float) -> WeightStats:
    """Softmax of ``scale * logits`` (rows over the last axis), summarised.

    ``logits`` has shape (trials, keys); the weights are `softmax` of each row.
    """
    return _summarise(softmax(logits * scale, axis=-1))


def _summarise(weights: np.ndarray) -> WeightStats:
    """Mean top weight and mean entropy of weights (trials, keys)."""
    return WeightStats(float(weights.max(axis=-1).mean()), float(entropy(weights).mean()))


@dataclass(frozen=True)
class WidthSweep:
    """Raw logits drawn once for each head width, ready to be scaled any way.

    ``logits[d]`` has shape (trials, keys). Each width has its own seeded
    generator, so adding or removing widths does not change the others' draws.
    """

    widths: tuple[int, ...]
    trials: int
    keys: int
    logits: dict[int, np.ndarray] = field(repr=False)
    # scales per width -> stats: a slider move asks again for curves it has drawn before
    _computed: dict[tuple[float, ...], list[WeightStats]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def stats(self, rule: str, multiplier: float = 1.0) -> list[WeightStats]:
        """`WeightStats` at every width under a named rule (see `scale_for`); remembered."""
        scales = tuple(scale_for(rule, d, multiplier) for d in self.widths)
        if scales not in self._computed:
            self._computed[scales] = self.stats_for_scales(scales)
        return self._computed[scales]

    def stats_for_scales(self, scales: Sequence[float]) -> list[WeightStats]:
        """`WeightStats` at every width, ``scales[i]`` multiplying the logits of ``widths[i]``."""
        scaled = self.scaled(scales)  # (widths, trials, keys)
        weights = softmax(scaled, axis=-1)  # one call for every width: a slider move waits on it
        return [_summarise(w) for w in weights]

    def scaled(self, scales: Sequence[float]) -> np.ndarray:
        """Every width's logits times its scale, stacked: (widths, trials, keys)."""
        if len(scales) != len(self.widths):
            raise ValueError(
                f"need one scale per width ({len(self.widths)} widths {self.widths}), "
                f"got {len(scales)}"
            )
        stacked = np.stack([self.logits[d] for d in self.widths])  # (widths, trials, keys)
        return stacked * np.asarray(scales, dtype=float)[:, None, None]


def sweep_widths(
    widths: Sequence[int] = POWER_OF_TWO_WIDTHS, trials: int = 2_000, keys: int = 6, seed: int = 0
) -> WidthSweep:
    """Draw the raw logits for every width; see `WidthSweep`.

    Width d uses ``numpy.random.default_rng([seed, d])``. Raises ValueError for
    a width below 1, or fewer than one trial or two keys.
    """
    widths = tuple(positive_integer("every width", d) for d in widths)
    if not widths:
        raise ValueError("need at least one width, got none")
    if trials < 1 or keys < 2:
        raise ValueError(f"need at least 1 trial and 2 keys, got trials={trials}, keys={keys}")
    logits = {d: raw_logits(np.random.default_rng([seed, d]), d, trials, keys) for d in widths}
    return WidthSweep(widths, trials, keys, logits)


# -- the variance of a dot product ---------------------------------------------------------

# numbers drawn per chunk by `dot_product_samples`, so wide heads do not need gigabytes
_CHUNK = 1 << 20


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
    d = positive_integer("head width d", d)
    if samples < 2:
        raise ValueError(f"need at least 2 samples to estimate a variance, got {samples}")
    sigma_q, sigma_k = positive_number("sigma_q", sigma_q), positive_number("sigma_k", sigma_k)
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


# -- μP's alignment, read from the trained models' report ----------------------------------


def alignment_table(
    report: dict[str, Any] | None = None, names: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """Per model: head width d, and at the start and end of training the mean (and
    largest) `attention_course.model.head_stats.alignment_ratio` over heads, with
    sqrt(d), the ratio of parallel q and k; the mean raw q·k size (rms) and the
    logit spread at the end."""
    rows = []
    for name, run in report_models(report, names).items():
        d = run["model"]["head_width"]
        first, last = run["checkpoints"][0], run["checkpoints"][-1]
        rows.append(
            {
                "model": name,
                "label": MODEL_LABELS.get(name, name),
                "d": d,
                "alignment_start": float(head_metric(first, "alignment_ratio").mean()),
                "alignment_end": float(head_metric(last, "alignment_ratio").mean()),
                "alignment_end_max": float(head_metric(last, "alignment_ratio").max()),
                "parallel": parallel_alignment(d),
                "raw_qk_start": float(head_metric(first, "raw_qk_rms").mean()),
                "raw_qk_end": float(head_metric(last, "raw_qk_rms").mean()),
                "spread_end": float(head_metric(last, "logit_spread").mean()),
            }
        )
    return rows


def width_growth(
    narrow: str = "sqrt_d16", wide: str = "sqrt_d64", report: dict[str, Any] | None = None
) -> dict[str, float]:
    """How the trained raw q·k (rms, mean over heads, end of training) grew from the
    narrow model to the wide one, against sqrt(d ratio) (independence) and the d ratio
    (full alignment)."""
    runs = report_models(report, [narrow, wide])
    d_n, d_w = (runs[n]["model"]["head_width"] for n in (narrow, wide))
    size = {n: float(head_metric(runs[n]["checkpoints"][-1], "raw_qk_rms").mean()) for n in runs}
    grew = size[wide] / size[narrow]
    return {
        "d_narrow": d_n,
        "d_wide": d_w,
        "grew": grew,
        "independent": math.sqrt(d_w / d_n),
        "aligned": d_w / d_n,
        "exponent": math.log(grew) / math.log(d_w / d_n),  # q·k ∝ d^exponent
    }
