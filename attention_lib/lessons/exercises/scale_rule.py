"""Notebook 02's scale-rule exercise: the learner's scale as a function of the head width.

`check_scale_rule(scale_fn, expect)`: what ``scale_fn(d)`` does to the mean
top weight as d grows (divide by d and the weights flatten toward 1/keys;
divide by less than sqrt(d) and they sharpen toward one; 1/sqrt(d) holds
them). The raw scores are a width sweep (`attention_lib.lessons.scaling`),
or ``logits=`` given (notebook 02 passes its second table's own draws).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..scaling import WidthSweep, sweep_widths

__all__ = ["ScaleRuleCheck", "check_scale_rule"]

_BEHAVIOURS = ("flatten", "sharpen", "hold")


@dataclass(frozen=True)
class ScaleRuleCheck:
    """What a scale rule does to the mean top weight as d grows.

    ``behaviour`` is "flatten" (falls toward 1/keys), "sharpen" (rises toward
    one) or "hold" (stays within 0.05 across the widths).
    """

    widths: tuple[int, ...]
    scales: tuple[float, ...]
    tops: tuple[float, ...]
    standard_tops: tuple[float, ...]
    keys: int
    behaviour: str
    expected: str | None
    divisor_problem: str = ""  # why the rule is not a division that grows with d ("" if it is)

    @property
    def passed(self) -> bool:
        """Whether the behaviour is the expected one (True when nothing was expected), by a
        rule that divides by something growing with d when that was asked for."""
        return (self.expected is None or self.behaviour == self.expected) and not (
            self.divisor_problem
        )

    def __str__(self) -> str:
        lines = [f"{'d':>5} {'your scale':>11} {'mean top weight':>16} {'with 1/sqrt(d)':>15}"]
        lines += [
            f"{d:>5} {s:>11.4g} {t:>16.3f} {r:>15.3f}"
            for d, s, t, r in zip(
                self.widths, self.scales, self.tops, self.standard_tops, strict=True
            )
        ]
        uniform = 1 / self.keys
        first, last = f"{self.tops[0]:.3f}", f"{self.tops[-1]:.3f}"
        said = {
            "flatten": f"your weights flatten as d grows: {first} -> {last}, "
            f"toward uniform 1/{self.keys} = {uniform:.3f} (over-dividing)",
            "sharpen": f"your weights sharpen as d grows: {first} -> {last}, "
            "toward one (under-dividing)",
            "hold": f"your weights hold steady across widths ({min(self.tops):.3f} to "
            f"{max(self.tops):.3f}), as 1/sqrt(d) does",
        }[self.behaviour]
        lines.append(said)
        if self.divisor_problem:
            lines.append(f"not passed: {self.divisor_problem}")
        elif self.expected is not None:
            lines.append(
                "as expected." if self.passed else f"expected them to {self.expected} instead."
            )
        return "\n".join(lines)


def _divisor_problem(widths: Sequence[int], scales: Sequence[float]) -> str:
    """Why multiplying by ``scales`` is not dividing by something that grows with d ("" if it is).

    The scale rule exercise asks for a division that still grows with the width, so
    the weights' direction alone cannot pass it: no division, a multiplication, or a
    constant divisor would sharpen them too.
    """
    divisors = [1 / s for s in scales]
    pairs = ", ".join(f"d = {d}: ÷ {x:.3g}" for d, x in zip(widths, divisors, strict=True))
    if all(math.isclose(x, 1.0) for x in divisors):
        return (
            "your rule does not divide at all (it multiplies every logit by 1); the exercise "
            "asks for a divisor that grows with d, only more slowly than sqrt(d)"
        )
    if any(x < 1 and not math.isclose(x, 1.0) for x in divisors):
        return (
            f"your rule multiplies the logits instead of dividing them ({pairs}); divide by "
            "something greater than one that grows with d"
        )
    if not all(b > a and not math.isclose(a, b) for a, b in itertools.pairwise(divisors)):
        return (
            f"your divisor does not grow with d ({pairs}): a fixed constant is a knob, not a "
            "rule; the exercise asks for one that grows with d, more slowly than sqrt(d)"
        )
    return ""


def check_scale_rule(
    scale_fn: Callable[[int], float],
    expect: str | None = None,
    *,
    widths: Sequence[int] = (4, 16, 64, 256, 1024),
    logits: Mapping[int, np.ndarray] | None = None,
    divides: bool = False,
    verbose: bool = True,
) -> ScaleRuleCheck:
    """Mean top weight over the keys with ``scale_fn(d)`` multiplying the raw scores q·k.

    By default the raw scores are 2,000 seeded trials of one query against 6
    keys at each of ``widths`` (`sweep_widths`, seed 0). ``logits`` gives them
    instead: head width d -> raw scores of shape (trials, keys), the same
    shape at every width; the widths are then its keys, in increasing order (notebook
    02 passes its second table's draws, so the answer comes from the trials
    the table printed). ``expect`` is None or one of "flatten", "sharpen",
    "hold"; the result says whether the rule behaved that way. With ``divides``
    the rule must also divide by something that grows with d (notebook 02's
    exercise: a rule that does not divide, multiplies, or divides by a
    constant does not pass, whatever its weights do). Raises
    ValueError for an unknown ``expect``, a scale that is not a positive
    finite number, or ``logits`` that are not one (trials, keys) array per
    width with at least two keys.
    """
    if expect is not None and expect not in _BEHAVIOURS:
        raise ValueError(f"expect must be None or one of {_BEHAVIOURS}, got {expect!r}")
    sweep = (
        sweep_widths(widths, trials=2_000, keys=6, seed=0) if logits is None else _sweep_of(logits)
    )
    scales = []
    for d in sweep.widths:
        s = scale_fn(d)
        if not isinstance(s, (int, float, np.floating)) or not (math.isfinite(s) and s > 0):
            raise ValueError(f"scale_fn({d}) returned {s!r}; a scale must be a positive number")
        scales.append(float(s))
    tops = tuple(st.top for st in sweep.stats_for_scales(scales))
    standard = tuple(st.top for st in sweep.stats("1/sqrt(d)"))
    if max(tops) - min(tops) <= 0.05:
        behaviour = "hold"
    else:
        behaviour = "flatten" if tops[-1] < tops[0] else "sharpen"
    problem = _divisor_problem(sweep.widths, scales) if divides else ""
    report = ScaleRuleCheck(
        sweep.widths, tuple(scales), tops, standard, sweep.keys, behaviour, expect, problem
    )
    if verbose:
        print(report)
    return report


def _sweep_of(logits: Mapping[int, np.ndarray]) -> WidthSweep:
    """A `WidthSweep` of given raw scores, width -> (trials, keys); see `check_scale_rule`."""
    if not logits:
        raise ValueError("logits must hold the raw scores of at least one width")
    arrays = {int(d): np.asarray(logits[d], dtype=float) for d in sorted(logits)}
    shapes = {d: x.shape for d, x in arrays.items()}
    first = next(iter(shapes.values()))
    if len(first) != 2 or first[1] < 2 or any(shape != first for shape in shapes.values()):
        raise ValueError(
            f"logits must be one (trials, keys) array per width, the same shape for every "
            f"width and at least two keys; got shapes {shapes}"
        )
    return WidthSweep(tuple(arrays), first[0], first[1], arrays)
