"""Notebook 02's scale-rule exercise: the learner's scale as a function of the head width.

`check_scale_rule(scale_fn, expect)`: what ``scale_fn(d)`` does to the mean
top weight as d grows (divide by d and the weights flatten toward 1/keys;
divide by less than sqrt(d) and they sharpen toward one; 1/sqrt(d) holds
them). The raw scores are a width sweep (`attention_course.lessons.scaling`),
or ``logits=`` given. The exercise's own cases are `scale_rule_logits`: the
2,000 trials of notebook 02's second table, drawn as the page draws them, so
that the notebook's gate and the graded edition run the rule on the same
scores. The rule's input is the width alone, so these cases are fixed: there
are no arrays for an answer to be fitted to.

The exercise's rule (``divides``) must sharpen the weights at every width,
by more than the trials' noise, not only from the first width to the last,
divide by something that grows with d, and change the weights from the
unscaled ones by a visible amount.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..scaling import WidthSweep, raw_logits, sweep_widths

__all__ = [
    "CHANGE",
    "CLIMB",
    "TABLE_KEYS",
    "TABLE_TRIALS",
    "TABLE_WIDTHS",
    "ScaleRuleCheck",
    "check_scale_rule",
    "scale_rule_logits",
]

_BEHAVIOURS = ("flatten", "sharpen", "hold")
#: the least rise (or fall) of the mean top weight from one width to the next that counts as
#: one: twice the trials' noise (a mean of 2,000 top weights moves by about 0.005)
CLIMB = 0.01
#: how far the widest width's mean top weight must move from the unscaled one
CHANGE = 0.02
#: notebook 02's second table: its widths, trials and keys
TABLE_WIDTHS, TABLE_TRIALS, TABLE_KEYS = (4, 16, 64, 256), 2_000, 6


@functools.cache
def _table_logits() -> tuple[tuple[int, np.ndarray], ...]:
    rng = np.random.default_rng(0)  # the page's generator: its first table draws first
    for d in TABLE_WIDTHS:
        rng.normal(size=(2, 20_000, d))  # the first table's 20,000 pairs at each width
    return tuple((d, raw_logits(rng, d, TABLE_TRIALS, TABLE_KEYS)) for d in TABLE_WIDTHS)


def scale_rule_logits() -> dict[int, np.ndarray]:
    """The exercise's cases: width d -> the raw scores (2,000 trials, 6 keys) of notebook 02's
    second table, the same draws from the same generator (seed 0, after the first table's)."""
    return {d: x.copy() for d, x in _table_logits()}


@dataclass(frozen=True)
class ScaleRuleCheck:
    """What a scale rule does to the mean top weight as d grows.

    ``behaviour`` is "flatten" (falls toward 1/keys, first width to last),
    "sharpen" (rises toward one) or "hold" (stays within 0.05 across the
    widths). ``problem`` says why an expected behaviour does not count
    (not at every width, no real change from the unscaled weights, a rule
    that does not divide by something growing with d); "" when none.
    """

    widths: tuple[int, ...]
    scales: tuple[float, ...]
    tops: tuple[float, ...]
    standard_tops: tuple[float, ...]
    keys: int
    behaviour: str
    expected: str | None
    divisor_problem: str = ""  # why the rule is not a division that grows with d ("" if it is)
    unscaled_tops: tuple[float, ...] = ()
    problem: str = ""

    @property
    def passed(self) -> bool:
        """Whether the behaviour is the expected one (True when nothing was expected), at every
        width, by a rule that divides by something growing with d when that was asked for."""
        return (self.expected is None or self.behaviour == self.expected) and not self.problem

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
        if self.problem:
            lines.append(f"not passed: {self.problem}")
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


def _steps_problem(widths: Sequence[int], tops: Sequence[float], expect: str | None) -> str:
    """Why the weights do not sharpen (flatten) at every width as ``expect`` asks ("" if so)."""
    if expect not in ("sharpen", "flatten"):
        return ""
    sign = 1 if expect == "sharpen" else -1
    way, pace = ("climb", "more slowly") if sign > 0 else ("fall", "faster")
    for (a, t), (b, u) in itertools.pairwise(zip(widths, tops, strict=True)):
        if sign * (u - t) < CLIMB:
            return (
                f"your weights do not {way} at every width: from d = {a} to d = {b} they go "
                f"{t:.3f} -> {u:.3f}; a divisor that grows {pace} than sqrt(d) at every width "
                f"makes them {way} at every step"
            )
    return ""


def _change_problem(widths: Sequence[int], tops: Sequence[float], unscaled: Sequence[float]) -> str:
    """Why the weights are as good as unscaled at the widest width ("" if they are not)."""
    if abs(tops[-1] - unscaled[-1]) >= CHANGE:
        return ""
    return (
        f"your weights are as good as unscaled: at d = {widths[-1]} the mean top weight is "
        f"{tops[-1]:.3f}, and {unscaled[-1]:.3f} with no scale at all; a divisor that barely "
        "grows changes nothing (a power of d between 0 and 1/2 does)"
    )


def _scale(scale_fn: Callable[[int], float], d: int) -> float:
    """``scale_fn(d)`` as a float; ValueError in one sentence for what is not a positive number."""
    try:
        s = scale_fn(d)
    except NotImplementedError:  # the starter: `feedback.checked` says so
        raise
    except Exception as err:  # the learner's code, in one sentence
        raise ValueError(f"scale_fn({d}) raised {type(err).__name__}: {err}") from None
    if isinstance(s, bool) or not isinstance(s, int | float | np.floating | np.integer):
        raise ValueError(
            f"scale_fn({d}) returned {s!r} ({type(s).__name__}); a scale must be a positive number"
        )
    if not (math.isfinite(s) and s > 0):
        raise ValueError(f"scale_fn({d}) returned {s!r}; a scale must be a positive number")
    return float(s)


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
    shape at every width; the widths are then its keys, in increasing order
    (the exercise passes `scale_rule_logits`, notebook 02's second table).
    ``expect`` is None or one of "flatten", "sharpen", "hold"; the result says
    whether the rule behaved that way. With ``divides`` (notebook 02's
    exercise) the rule must also divide by something that grows with d, move
    the weights that way at every width (by at least `CLIMB`) and visibly away
    from the unscaled ones at the widest (by `CHANGE`): a rule that does not
    divide, multiplies, divides by a constant or by something that barely
    grows does not pass, whatever its weights do at the ends. Raises ValueError
    for an unknown ``expect``, a ``scale_fn`` that raises or returns anything
    but a positive finite number (one sentence), or ``logits`` that are not one
    (trials, keys) array per width with at least two keys.
    """
    if expect is not None and expect not in _BEHAVIOURS:
        raise ValueError(f"expect must be None or one of {_BEHAVIOURS}, got {expect!r}")
    if not callable(scale_fn):
        raise TypeError(f"check_scale_rule needs a function of d, got {type(scale_fn).__name__}")
    sweep = (
        sweep_widths(widths, trials=2_000, keys=6, seed=0) if logits is None else _sweep_of(logits)
    )
    scales = [_scale(scale_fn, d) for d in sweep.widths]
    tops = tuple(st.top for st in sweep.stats_for_scales(scales))
    standard = tuple(st.top for st in sweep.stats("1/sqrt(d)"))
    unscaled = tuple(st.top for st in sweep.stats_for_scales([1.0] * len(scales)))
    if max(tops) - min(tops) <= 0.05:
        behaviour = "hold"
    else:
        behaviour = "flatten" if tops[-1] < tops[0] else "sharpen"
    divisor = _divisor_problem(sweep.widths, scales) if divides else ""
    problem = divisor
    if divides and not problem and behaviour == expect:  # the exercise: every step, a change
        problem = _steps_problem(sweep.widths, tops, expect) or _change_problem(
            sweep.widths, tops, unscaled
        )
    report = ScaleRuleCheck(
        sweep.widths,
        tuple(scales),
        tops,
        standard,
        sweep.keys,
        behaviour,
        expect,
        divisor,
        unscaled,
        problem,
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
