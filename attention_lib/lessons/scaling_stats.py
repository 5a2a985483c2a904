"""How the scale rule shapes attention weights as the head width d grows.

The developer explorer and the "Try it yourself" checker of notebook 02 both
ask one question: for random queries and keys of width d, multiplied by some
scale, how peaked are the weights one query gives a handful of keys? Two
numbers answer it: the mean top weight (1/keys when the weights are uniform,
1 when one key takes everything) and the mean entropy in nats (ln(keys) when
uniform, 0 when one-hot).

The raw dot products are drawn once per width (`sweep_widths`), so trying
another scale is a multiplication and a softmax, fast enough for a slider.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..normalisers import softmax

__all__ = [
    "POWER_OF_TWO_WIDTHS",
    "SCALE_RULES",
    "WeightStats",
    "WidthSweep",
    "entropy",
    "raw_logits",
    "scale_for",
    "sweep_widths",
    "weight_stats",
]

POWER_OF_TWO_WIDTHS = tuple(2**i for i in range(11))  # 1, 2, 4, ..., 1024

# rule name -> what the logits q·k are multiplied by, for head width d and multiplier c
SCALE_RULES: dict[str, Callable[[int, float], float]] = {
    "none": lambda d, c: 1.0,
    "1/sqrt(d)": lambda d, c: 1.0 / math.sqrt(d),
    "1/d": lambda d, c: 1.0 / d,
    "custom": lambda d, c: c,
}


def scale_for(rule: str, d: int, multiplier: float = 1.0) -> float:
    """The number the raw logits q·k are multiplied by under ``rule`` at width ``d``.

    ``rule`` is one of `SCALE_RULES`: ``"none"`` (1), ``"1/sqrt(d)"`` (the
    standard), ``"1/d"`` (over-dividing) or ``"custom"`` (the constant
    ``multiplier``, the same at every width). Raises ValueError for an unknown
    rule, a width below 1 or a multiplier that is not positive and finite.
    """
    if rule not in SCALE_RULES:
        raise ValueError(f"unknown scale rule {rule!r}; choose one of {list(SCALE_RULES)}")
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise ValueError(f"head width d must be a positive integer, got {d!r}")
    if not (math.isfinite(multiplier) and multiplier > 0):
        raise ValueError(f"multiplier must be positive and finite, got {multiplier!r}")
    return SCALE_RULES[rule](int(d), float(multiplier))


def raw_logits(rng: np.random.Generator, d: int, trials: int, keys: int) -> np.ndarray:
    """Unscaled logits of ``trials`` random queries against ``keys`` random keys each.

    Query and key entries are independent standard normals, so each logit has
    mean 0 and standard deviation sqrt(d). Returns shape (trials, keys), float64.
    """
    q = rng.normal(size=(trials, 1, d))  # (N, 1, d)
    k = rng.normal(size=(trials, keys, d))  # (N, keys, d)
    return (q @ k.swapaxes(-1, -2))[:, 0, :]  # (N, keys)


def entropy(weights: np.ndarray, axis: int = -1) -> np.ndarray:
    """Shannon entropy in nats of each row of ``weights`` (0·log 0 counts as 0)."""
    safe = np.where(weights > 0, weights, 1.0)  # log(1) = 0 where a weight is exactly 0
    return -np.sum(weights * np.log(safe), axis=axis)


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
    widths = tuple(int(d) for d in widths)
    if not widths or min(widths) < 1:
        raise ValueError(f"widths must be positive integers, got {widths}")
    if trials < 1 or keys < 2:
        raise ValueError(f"need at least 1 trial and 2 keys, got trials={trials}, keys={keys}")
    logits = {d: raw_logits(np.random.default_rng([seed, d]), d, trials, keys) for d in widths}
    return WidthSweep(widths, trials, keys, logits)
