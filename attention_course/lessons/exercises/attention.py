"""Notebook 02's first exercise: the learner's own attention, checked against the reference.

`check_attention(fn)`: the reader's own attention, ``fn(q, k, v)`` or
``fn(q, k, v, mask)`` on numpy arrays, against
`attention_lib.scaled_dot_product_attention` on cases drawn from a seed
(`attention_cases`): several head widths, L != S, a causal and a padding
mask, scores up to about 1000 and rows whose scores all lie far below zero.
The exercise is to write attention, so calling an attention function (the
library's, PyTorch's) fails with the call named
(`attention_course.lessons.exercises.tripwires`). A wrong answer is compared
with the usual mistakes (no scale, 1/d, softmax over the wrong axis, a mask
after the softmax, ignored, inverted or setting scores to 0, an exp that
overflows, float32) to say which one it looks like, or with the constant
scale that would explain it.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from attention_lib.core import masked_scores, scaled_dot_product_attention
from attention_lib.normalisers import softmax

from .base import (
    HINT_FLOAT64,
    CaseResult,
    CheckReport,
    as_array,
    close,
    fit_scale,
    float32_like,
    max_error,
    rows_close,
    rows_text,
    seeded,
)
from .draws import apart, far_below, large_scores
from .guards import call

__all__ = [
    "HINT_MASK_AFTER",
    "HINT_MASK_IGNORED",
    "HINT_MASK_INVERTED",
    "HINT_MASK_ZERO",
    "HINT_NO_MASK_ARGUMENT",
    "HINT_NO_SCALE",
    "HINT_TOO_FLAT_D",
    "HINT_UNSTABLE",
    "HINT_WRONG_AXIS",
    "AttentionCheck",
    "attention_cases",
    "check_attention",
]

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
HINT_MASK_ZERO = (
    "the masked scores were set to 0, which still takes weight after exp: set them to -inf "
    "(np.where(mask, scores, -np.inf))"
)
HINT_NO_MASK_ARGUMENT = (
    "your function takes no mask argument, so the masked cases could not run: write "
    "my_attention(q, k, v, mask=None) and hide the keys where mask is False"
)
HINT_UNSTABLE = (
    "the output has NaN or inf in {rows}, whose scores {where}: subtract each row's maximum "
    "before exp (exp overflows past 709 and is 0 below -745), as attention_lib.softmax does"
)


@dataclass(frozen=True)
class _Case:
    name: str
    query: np.ndarray  # (L, E)
    key: np.ndarray  # (S, E)
    value: np.ndarray  # (S, Ev)
    mask: np.ndarray | None  # (L, S) bool, True = the key takes part

    @property
    def shape(self) -> str:
        (length, width), keys = self.query.shape, self.key.shape[0]
        return f"L={length} S={keys} d={width} dv={self.value.shape[1]}"


def attention_cases(seed: int = 0) -> list[_Case]:
    """The cases `check_attention` runs for ``seed``: three plain ones (head widths from 4 to 64,
    three different), two with masks, then large scores and rows far below zero.

    The widths tell 1, 1/sqrt(d) and 1/d apart and leave no one constant scale
    right; L != S in every case but the causal one, so a transposed result has
    the wrong shape; dv != d, so dividing by the value width shows.
    """
    rng = np.random.default_rng(seed)
    widths = rng.permutation([4, 8, 16, 32, 64])[:3]

    def draw(name: str, length: int, keys: int, width: int) -> _Case:
        vwidth = int(rng.choice([n for n in (2, 3, 5, 6) if n != width]))
        q, k = rng.normal(size=(length, width)), rng.normal(size=(keys, width))  # (L, E), (S, E)
        return _Case(name, q, k, rng.normal(size=(keys, vwidth)), None)  # v (S, Ev)

    cases = []
    for name, width in zip(("small", "wide head", "another width"), widths, strict=True):
        cases.append(draw(name, *apart(rng, 3, 8), int(width)))
    size = int(rng.integers(4, 8))
    causal = draw("causal mask", size, size, int(rng.choice([8, 16])))
    cases.append(replace(causal, mask=np.tril(np.ones((size, size), dtype=bool))))
    length, keys = apart(rng, 3, 8)
    padded = draw("padding mask", length, keys, int(rng.choice([8, 16])))
    real = int(rng.integers(1, keys))  # the keys from `real` on are padding
    mask = np.broadcast_to(np.arange(keys) < real, (length, keys)).copy()  # (L, S)
    cases.append(replace(padded, mask=mask))
    big = draw("large scores", *apart(rng, 3, 8), int(rng.choice([16, 32])))
    cases.append(replace(big, query=large_scores(rng, big.query, big.key)))
    low = draw("far below 0", *apart(rng, 3, 8), int(rng.choice([16, 32])))
    rows = rng.random(low.query.shape[0]) < 0.5
    rows[0] = True  # at least one row far below zero
    q, k = far_below(rng, low.query, low.key, rows)
    cases.append(replace(low, query=q, key=k))
    return cases


@dataclass(frozen=True)
class AttentionCheck(CheckReport):
    """`check_attention`'s report."""

    SUBJECT: ClassVar[str] = "attention_lib.scaled_dot_product_attention"
    QUESTION: ClassVar[str] = "Which steps turn q, k and v into one output row per query?"


def _known_mistakes(case: _Case) -> list[tuple[str, str, np.ndarray]]:
    """Outputs of the usual wrong versions on ``case``: (cause, hint, output)."""
    q, k, v, mask = case.query, case.key, case.value, case.mask
    width = q.shape[-1]
    with np.errstate(all="ignore"):
        wrong_axis = softmax(masked_scores(q, k, mask), axis=-2)  # (L, S), down the columns
        out = [
            ("no scale", HINT_NO_SCALE, scaled_dot_product_attention(q, k, v, mask, scale=1.0)),
            ("1/d", HINT_TOO_FLAT_D, scaled_dot_product_attention(q, k, v, mask, scale=1 / width)),
            ("wrong axis", HINT_WRONG_AXIS, wrong_axis @ v),
        ]
        if mask is not None:
            after = softmax(masked_scores(q, k), axis=-1) * mask  # (L, S), zeroed after
            zeroed = np.where(mask, masked_scores(q, k), 0.0)  # (L, S): hidden scores are 0
            out += [
                ("mask after softmax", HINT_MASK_AFTER, after @ v),
                ("mask ignored", HINT_MASK_IGNORED, scaled_dot_product_attention(q, k, v)),
                ("mask inverted", HINT_MASK_INVERTED, scaled_dot_product_attention(q, k, v, ~mask)),
                ("mask zero", HINT_MASK_ZERO, softmax(zeroed, axis=-1) @ v),
            ]
    return out


def _unstable(case: _Case, got: np.ndarray) -> str:
    """The hint for an output with NaN or inf, naming its rows and what their scores are."""
    bad = ~np.all(np.isfinite(got), axis=-1)  # (L,)
    scores = masked_scores(case.query, case.key, case.mask)[bad]  # (n, S)
    finite = scores[np.isfinite(scores)]
    if finite.size and finite.max() > 700:
        where = f"reach {finite.max():.0f}"
    elif finite.size and finite.max() < -700:
        where = f"all lie below {finite.max():.0f}"
    else:
        where = "are of ordinary size (is a row wholly masked?)"
    return HINT_UNSTABLE.format(rows=rows_text(bad), where=where)


def _diagnose(case: _Case, got: np.ndarray, want: np.ndarray) -> tuple[str, str]:
    """(cause, hint) for a wrong output."""
    if not np.all(np.isfinite(got)):
        return "not finite", _unstable(case, got)
    for cause, hint, wrong in _known_mistakes(case):
        if np.allclose(got, wrong, rtol=1e-6, atol=1e-7):  # looks like this mistake
            return cause, hint
    if float32_like(got, want):
        return "float32", HINT_FLOAT64
    q, k, v, mask = case.query, case.key, case.value, case.mask
    standard = 1.0 / math.sqrt(q.shape[-1])
    scale, gap = fit_scale(
        lambda s: scaled_dot_product_attention(q, k, v, mask, scale=s), got, standard
    )
    if gap < 1e-5 and not math.isclose(scale, standard, rel_tol=1e-3):
        too = "too flat" if scale < standard else "too sharp"
        how = "divided by too much" if scale < standard else "divided by too little"
        return too, (
            f"your weights look {too} ({how}): they match a scale of {scale:.4g}, but "
            f"1/sqrt(d) = {standard:.4g} for d = {case.query.shape[-1]}"
        )
    return "unknown", (
        f"not one of the usual mistakes ({rows_text(~rows_close(got, want))} differ); check "
        "the steps one by one: scores q @ k.T, times 1/sqrt(d), softmax over the last axis, "
        "then weights @ v"
    )


def _accepts(fn: Callable[..., Any], n_args: int) -> bool:
    """Whether ``fn`` can be called with ``n_args`` positional arguments."""
    try:
        inspect.signature(fn).bind(*([None] * n_args))
    except TypeError:
        return False
    except ValueError:  # no signature available (some builtins): try it
        return True
    return True


def _run_case(fn: Callable[..., Any], case: _Case, masked: bool) -> CaseResult:
    q, k, v = case.query, case.key, case.value
    if case.mask is not None and not masked:  # it fails, never passes: masking is half of it
        return CaseResult(
            case.name, case.shape, False, None, HINT_NO_MASK_ARGUMENT, "no mask argument"
        )
    expected = scaled_dot_product_attention(q, k, v, case.mask)  # (L, Ev)
    args: tuple = (q, k, v)
    if case.mask is not None:
        args += (case.mask,)
    elif not _accepts(fn, 3):  # fn(q, k, v, mask) with a required mask: no mask is None
        args += (None,)
    got, failed = call(fn, args, case.name, case.shape, ("q", "k", "v", "mask"), forbid=True)
    if failed:
        return failed
    got, cause, problem = as_array(got, "the output")
    if problem:
        return CaseResult(case.name, case.shape, False, None, problem, cause)
    if got.shape != expected.shape:
        hint = (
            f"expected an output of shape {expected.shape} (queries × value width), got "
            f"{got.shape}; the output is weights (L, S) @ v (S, dv)"
        )
        return CaseResult(case.name, case.shape, False, None, hint, "shape")
    error = max_error(got, expected)
    if close(got, expected):
        return CaseResult(case.name, case.shape, True, error, "")
    cause, hint = _diagnose(case, got, expected)
    shown = None if math.isnan(error) else error
    return CaseResult(case.name, case.shape, False, shown, hint, cause)


@np.errstate(all="ignore")  # a wrong answer's inf and NaN are for the report to name
def check_attention(
    fn: Callable[..., Any], *, verbose: bool = True, seed: int | None = None
) -> AttentionCheck:
    """Check the reader's attention function against the reference on drawn cases.

    ``fn(q, k, v)`` takes read-only numpy float64 arrays q (L, d), k (S, d), v
    (S, dv) and returns the output (L, dv) as a float64 array. If it also
    takes a fourth argument, the masked cases call ``fn(q, k, v, mask)`` with
    a boolean (L, S) mask, True where the key takes part (PyTorch's
    convention), and the plain cases pass ``None`` if the mask is not
    optional; a function of three arguments fails the masked cases.
    ``seed`` draws the cases (`attention_cases`; None: the attempt's own,
    `base.attempt_seed`). Prints the report when ``verbose`` and returns it.
    Raises TypeError for an ``fn`` that is not callable.
    """
    if not callable(fn):
        raise TypeError(f"check_attention needs a function fn(q, k, v), got {type(fn).__name__}")
    seed = seeded(seed, fn)
    masked = _accepts(fn, 4)
    results = tuple(_run_case(fn, c, masked) for c in attention_cases(seed))
    report = AttentionCheck(results, seed=seed)
    if verbose:
        print(report)
    return report
