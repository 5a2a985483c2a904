"""Checkers for the "Try it yourself" exercises: run the reader's code, explain what is off.

- `check_attention(fn)`: the reader's own attention, ``fn(q, k, v)`` or
  ``fn(q, k, v, mask)`` on numpy arrays, against
  `scaled_dot_product_attention` on several seeded cases. A wrong answer is
  compared with the usual mistakes (no scale, 1/d, softmax over the wrong
  axis, a mask after the softmax or ignored) to say which one it looks like.
- `check_scale_rule(scale_fn, expect)`: the reader's scale as a function of
  the head width, and what it does to the mean top weight as d grows
  (notebook 02: divide by d and the weights flatten toward 1/keys; divide by
  less than sqrt(d) and they sharpen toward one).
- `SOLUTIONS`: each exercise's solution code and the explanation that goes
  with it, kept here so the notebook's code cells do not show the answer
  before the learner tries (notebook 02 hands them to a solution gate).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..core import scaled_dot_product_attention
from ..masks import apply_mask
from ..normalisers import softmax
from .rounding import format_difference
from .scaling_stats import sweep_widths

__all__ = [
    "SOLUTIONS",
    "AttentionCheck",
    "CaseResult",
    "ScaleRuleCheck",
    "Solution",
    "attention_cases",
    "check_attention",
    "check_scale_rule",
]

_RTOL, _ATOL = 1e-6, 1e-9

HINT_TOO_FLAT_D = "your weights look too flat: did you divide by d instead of sqrt(d)?"
HINT_NO_SCALE = "your weights look too sharp: did you forget to divide the scores by sqrt(d)?"
HINT_WRONG_AXIS = (
    "the softmax ran over the queries (axis 0), not the keys: each row of weights must sum "
    "to one, so use softmax(..., axis=-1)"
)
HINT_MASK_AFTER = (
    "the mask was applied to the weights after the softmax: the rows no longer sum to one; "
    "set masked scores to -inf before the softmax"
)
HINT_MASK_IGNORED = "the mask had no effect: masked keys (mask False) must get zero weight"
HINT_MASK_INVERTED = "the mask is inverted: True means the key takes part, False that it is hidden"


@dataclass(frozen=True)
class _Case:
    name: str
    query: np.ndarray  # (L, E)
    key: np.ndarray  # (S, E)
    value: np.ndarray  # (S, Ev)
    mask: np.ndarray | None  # (L, S) bool, True = the key takes part


def attention_cases(seed: int = 0) -> list[_Case]:
    """The seeded cases `check_attention` runs: three plain ones, then two with masks.

    Widths 4, 64 and 16 tell 1, 1/sqrt(d) and 1/d apart; L != S in most
    cases so a transposed result has the wrong shape.
    """
    rng = np.random.default_rng(seed)
    plain = [("small", 3, 5, 4, 2), ("wide head", 4, 6, 64, 8), ("square", 5, 5, 16, 3)]
    cases = []
    for name, length, keys, width, vwidth in plain:
        q = rng.normal(size=(length, width))  # (L, E)
        k = rng.normal(size=(keys, width))  # (S, E)
        v = rng.normal(size=(keys, vwidth))  # (S, Ev)
        cases.append(_Case(name, q, k, v, None))
    q, k, v = rng.normal(size=(6, 8)), rng.normal(size=(6, 8)), rng.normal(size=(6, 4))
    cases.append(_Case("causal mask", q, k, v, np.tril(np.ones((6, 6), dtype=bool))))
    q, k, v = rng.normal(size=(4, 8)), rng.normal(size=(6, 8)), rng.normal(size=(6, 4))
    padding = np.broadcast_to(np.arange(6) < 4, (4, 6))  # (L, S): the last two keys are padding
    cases.append(_Case("padding mask", q, k, v, padding.copy()))
    return cases


@dataclass(frozen=True)
class CaseResult:
    """How the reader's function did on one case.

    ``cause`` names the diagnosis ("" when passed): "no scale", "1/d",
    "wrong axis", "mask after softmax", "mask ignored", "mask inverted",
    "too flat", "too sharp", "shape", "raised", "not finite" or "unknown".
    """

    name: str
    shape: str
    passed: bool
    max_abs_error: float | None  # None when no comparable output came back
    hint: str
    cause: str = ""

    def __str__(self) -> str:
        """One line; an error at rounding level prints as a bound, the same on every CPU."""
        mark = "ok  " if self.passed else "FAIL"
        err = (
            ""
            if self.max_abs_error is None
            else f"max abs error {format_difference(self.max_abs_error)}"
        )
        tail = f" -> {self.hint}" if self.hint else ""
        return f"  {mark} {self.name:<13} {self.shape:<22} {err}{tail}"


@dataclass(frozen=True)
class AttentionCheck:
    """The whole report: every case, and the most likely cause of any failure.

    Other exercises' reports subclass it and name their own ``oracle`` (what
    a passing attempt agrees with) and ``against`` (the same, in the words of
    `attention_lib.explorers.reveal.feedback`'s "not written yet" line).
    """

    oracle: ClassVar[str] = "attention_lib.scaled_dot_product_attention"
    against: ClassVar[str] = "the library"

    cases: tuple[CaseResult, ...]
    notes: tuple[str, ...]

    @property
    def passed(self) -> bool:
        """True when every case that ran matched the reference."""
        return all(c.passed for c in self.cases)

    @property
    def cause(self) -> str:
        """The most common cause among the failing cases ('' when all passed)."""
        causes = [c.cause for c in self.cases if not c.passed]
        return max(causes, key=causes.count) if causes else ""

    @property
    def hint(self) -> str:
        """The hint of the first failing case with the most common cause ('' when all passed)."""
        return next((c.hint for c in self.cases if not c.passed and c.cause == self.cause), "")

    def __str__(self) -> str:
        lines = [str(c) for c in self.cases] + [f"  note: {n}" for n in self.notes]
        failed = sum(not c.passed for c in self.cases)
        if failed == 0:
            verdict = f"All {len(self.cases)} cases agree with {self.oracle}."
        else:
            verdict = f"{failed} of {len(self.cases)} cases differ. Most likely: {self.hint}"
        return "\n".join([verdict, *lines])


def _scores(case: _Case, scale: float) -> np.ndarray:
    return case.query @ case.key.T * scale  # (L, S)


def _known_mistakes(case: _Case) -> list[tuple[str, str, np.ndarray]]:
    """Outputs of the usual wrong versions on ``case``: (cause, hint, output)."""
    q, k, v, mask = case.query, case.key, case.value, case.mask
    width = q.shape[-1]
    wrong_axis = softmax(apply_mask(np, _scores(case, width**-0.5), mask), axis=-2)  # (L, S)
    out = [
        ("no scale", HINT_NO_SCALE, scaled_dot_product_attention(q, k, v, mask, scale=1.0)),
        ("1/d", HINT_TOO_FLAT_D, scaled_dot_product_attention(q, k, v, mask, scale=1.0 / width)),
        ("wrong axis", HINT_WRONG_AXIS, wrong_axis @ v),
    ]
    if mask is not None:
        after = softmax(_scores(case, width**-0.5), axis=-1) * mask  # (L, S)
        out += [
            ("mask after softmax", HINT_MASK_AFTER, after @ v),
            ("mask ignored", HINT_MASK_IGNORED, scaled_dot_product_attention(q, k, v)),
            ("mask inverted", HINT_MASK_INVERTED, scaled_dot_product_attention(q, k, v, ~mask)),
        ]
    return out


def _fit_scale(case: _Case, got: np.ndarray) -> tuple[float, float]:
    """The constant scale whose attention output is closest to ``got``, and that distance.

    A log-spaced search over six decades around 1/sqrt(d), then three rounds
    of zooming in on the best point.
    """
    q, k, v, mask = case.query, case.key, case.value, case.mask

    def distance(s: float) -> float:
        out = scaled_dot_product_attention(q, k, v, mask, scale=s)  # (L, Ev)
        return float(np.max(np.abs(out - got)))

    best = 1.0 / math.sqrt(q.shape[-1])
    span = 1e3
    for points in (121, 41, 41, 41):
        grid = best * np.logspace(-np.log10(span), np.log10(span), points)
        best = float(grid[int(np.argmin([distance(float(s)) for s in grid]))])
        span = span ** (2 / (points - 1))  # the next search covers two grid steps each side
    return best, distance(best)


def _diagnose(case: _Case, got: np.ndarray) -> tuple[str, str]:
    """(cause, hint) for a wrong output."""
    for cause, hint, wrong in _known_mistakes(case):
        if np.allclose(got, wrong, rtol=_RTOL, atol=1e-7):
            return cause, hint
    standard = 1.0 / math.sqrt(case.query.shape[-1])
    scale, gap = _fit_scale(case, got)
    if gap < 1e-5 and not math.isclose(scale, standard, rel_tol=1e-3):
        too = "too flat" if scale < standard else "too sharp"
        how = "divided by too much" if scale < standard else "divided by too little"
        return too, (
            f"your weights look {too} ({how}): they match a scale of {scale:.4g}, but "
            f"1/sqrt(d) = {standard:.4g} for d = {case.query.shape[-1]}"
        )
    return "unknown", (
        "not one of the usual mistakes; check the steps one by one: scores q @ k.T, "
        "times 1/sqrt(d), softmax over the last axis, then weights @ v"
    )


def _accepts(fn: Callable[..., np.ndarray], n_args: int) -> bool:
    """Whether ``fn`` can be called with ``n_args`` positional arguments."""
    try:
        inspect.signature(fn).bind(*([None] * n_args))
    except TypeError:
        return False
    except ValueError:  # no signature available (some builtins): try it
        return True
    return True


def _run_case(fn: Callable[..., np.ndarray], case: _Case) -> CaseResult:
    q, k, v = case.query, case.key, case.value
    shape = f"L={q.shape[0]} S={k.shape[0]} d={q.shape[1]} dv={v.shape[1]}"
    expected = scaled_dot_product_attention(q, k, v, case.mask)  # (L, Ev)
    args: tuple = (q.copy(), k.copy(), v.copy())  # copies: the reader's code may write to them
    if case.mask is not None:
        args += (case.mask.copy(),)
    elif not _accepts(fn, 3):  # fn(q, k, v, mask) with a required mask: no mask is None
        args += (None,)
    try:
        got = np.asarray(fn(*args), dtype=float)
    except Exception as err:  # the reader's code: report whatever it raised
        hint = f"raised {type(err).__name__}: {err} (inputs: q {q.shape}, k {k.shape}, v {v.shape})"
        return CaseResult(case.name, shape, False, None, hint, "raised")
    if got.shape != expected.shape:
        hint = (
            f"expected an output of shape {expected.shape} (queries × value width), got "
            f"{got.shape}; the output is weights (L, S) @ v (S, dv)"
        )
        return CaseResult(case.name, shape, False, None, hint, "shape")
    if not np.all(np.isfinite(got)):
        hint = "the output has NaN or inf: subtract each row's maximum before exp"
        return CaseResult(case.name, shape, False, None, hint, "not finite")
    error = float(np.max(np.abs(got - expected)))
    if np.allclose(got, expected, rtol=_RTOL, atol=_ATOL):
        return CaseResult(case.name, shape, True, error, "")
    cause, hint = _diagnose(case, got)
    return CaseResult(case.name, shape, False, error, hint, cause)


def check_attention(
    fn: Callable[..., np.ndarray], *, verbose: bool = True, seed: int = 0
) -> AttentionCheck:
    """Check the reader's attention function against the reference on seeded cases.

    ``fn(q, k, v)`` takes numpy float64 arrays q (L, d), k (S, d), v (S, dv)
    and returns the output (L, dv). If it also takes a fourth argument, the
    masked cases call ``fn(q, k, v, mask)`` with a boolean (L, S) mask, True
    where the key takes part (PyTorch's convention), and the plain cases pass
    ``None`` if the mask is not optional; a function of three arguments skips
    the masked cases, with a note. Prints the report when ``verbose`` and returns it.
    """
    if not callable(fn):
        raise TypeError(f"check_attention needs a function fn(q, k, v), got {type(fn).__name__}")
    notes = []
    cases = attention_cases(seed)
    if not _accepts(fn, 4):
        cases = [c for c in cases if c.mask is None]
        notes.append("your function takes no mask argument, so the masked cases were skipped")
    report = AttentionCheck(tuple(_run_case(fn, c) for c in cases), tuple(notes))
    if verbose:
        print(report)
    return report


# -- notebook 02: the scale rule ---------------------------------------------------

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

    @property
    def passed(self) -> bool:
        """Whether the behaviour is the expected one (True when nothing was expected)."""
        return self.expected is None or self.behaviour == self.expected

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
        if self.expected is not None:
            lines.append(
                "as expected." if self.passed else f"expected them to {self.expected} instead."
            )
        return "\n".join(lines)


def check_scale_rule(
    scale_fn: Callable[[int], float],
    expect: str | None = None,
    *,
    widths: Sequence[int] = (4, 16, 64, 256, 1024),
    verbose: bool = True,
) -> ScaleRuleCheck:
    """Mean top weight over 6 keys (2000 seeded trials) with ``scale_fn(d)`` multiplying q·k.

    ``expect`` is None or one of "flatten", "sharpen", "hold"; the result says
    whether the rule behaved that way. Raises ValueError for an unknown
    ``expect`` or a scale that is not a positive finite number.
    """
    if expect is not None and expect not in _BEHAVIOURS:
        raise ValueError(f"expect must be None or one of {_BEHAVIOURS}, got {expect!r}")
    scales = []
    for d in widths:
        s = scale_fn(d)
        if not isinstance(s, (int, float, np.floating)) or not (math.isfinite(s) and s > 0):
            raise ValueError(f"scale_fn({d}) returned {s!r}; a scale must be a positive number")
        scales.append(float(s))
    sweep = sweep_widths(widths, trials=2_000, keys=6, seed=0)
    tops = tuple(st.top for st in sweep.stats_for_scales(scales))
    standard = tuple(st.top for st in sweep.stats("1/sqrt(d)"))
    if max(tops) - min(tops) <= 0.05:
        behaviour = "hold"
    else:
        behaviour = "flatten" if tops[-1] < tops[0] else "sharpen"
    report = ScaleRuleCheck(
        tuple(int(d) for d in widths), tuple(scales), tops, standard, sweep.keys, behaviour, expect
    )
    if verbose:
        print(report)
    return report


# -- the exercises' solutions --------------------------------------------------------


@dataclass(frozen=True)
class Solution:
    """One exercise's solution: ``code`` defines the function ``name``; ``explanation``
    is the prose that would give the answer away if shown before an attempt."""

    name: str
    code: str
    explanation: str


SOLUTIONS: dict[str, Solution] = {
    "under_divided": Solution(
        "under_divided",
        "def under_divided(d):\n    return d**-0.25  # divides by d^(1/4), less than sqrt(d)\n",
        "Dividing by d^(1/4) under-corrects: the logits' spread becomes d^(1/2) / d^(1/4) = "
        "d^(1/4), which still grows, so the winner's share climbs toward one. Dividing by d "
        "over-corrects the other way (the spread 1/sqrt(d) shrinks and the weights slide toward "
        "1/6). sqrt(d) is the one power of d that cancels the growth (exactly, in expectation, "
        "for independent unit-variance components), so it alone holds the spread, and with it "
        "the weights, level as d changes.",
    ),
    "my_attention": Solution(
        "my_attention",
        "def my_attention(q, k, v, mask=None):\n"
        "    scores = q @ k.T / math.sqrt(q.shape[-1])  # (L, S)\n"
        "    if mask is not None:\n"
        "        scores = np.where(mask, scores, -np.inf)  # masked keys get no weight\n"
        "    return softmax(scores, axis=-1) @ v  # (L, dv)\n",
        "Scale the scores by 1/sqrt(d) where d is the query's last dimension, mask the scores "
        "(not the weights) with -inf, and take the softmax over the last axis, the keys. Now "
        "break it on purpose (divide by d, drop the scale, softmax over axis=0, mask after the "
        "softmax) and read what the checker says about each.",
    ),
}
