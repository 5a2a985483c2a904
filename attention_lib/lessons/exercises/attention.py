"""Notebook 02's first exercise: the learner's own attention, checked against the reference.

`check_attention(fn)`: the reader's own attention, ``fn(q, k, v)`` or
``fn(q, k, v, mask)`` on numpy arrays, against
`attention_lib.scaled_dot_product_attention` on several seeded cases
(`attention_cases`). A wrong answer is compared with the usual mistakes (no
scale, 1/d, softmax over the wrong axis, a mask after the softmax, ignored
or inverted) to say which one it looks like, or with the constant scale
that would explain it.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ...core import masked_scores, scaled_dot_product_attention
from ...normalisers import softmax
from .base import CaseResult, CheckReport, as_array, close

__all__ = [
    "HINT_MASK_AFTER",
    "HINT_MASK_IGNORED",
    "HINT_MASK_INVERTED",
    "HINT_NO_MASK_ARGUMENT",
    "HINT_NO_SCALE",
    "HINT_TOO_FLAT_D",
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
HINT_NO_MASK_ARGUMENT = (
    "your function takes no mask argument, so the masked cases could not run: write "
    "my_attention(q, k, v, mask=None) and hide the keys where mask is False"
)


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
class AttentionCheck(CheckReport):
    """`check_attention`'s report."""

    SUBJECT: ClassVar[str] = "attention_lib.scaled_dot_product_attention"
    QUESTION: ClassVar[str] = "Which steps turn q, k and v into one output row per query?"


def _known_mistakes(case: _Case) -> list[tuple[str, str, np.ndarray]]:
    """Outputs of the usual wrong versions on ``case``: (cause, hint, output)."""
    q, k, v, mask = case.query, case.key, case.value, case.mask
    width = q.shape[-1]
    wrong_axis = softmax(masked_scores(q, k, mask), axis=-2)  # (L, S), down the columns
    out = [
        ("no scale", HINT_NO_SCALE, scaled_dot_product_attention(q, k, v, mask, scale=1.0)),
        ("1/d", HINT_TOO_FLAT_D, scaled_dot_product_attention(q, k, v, mask, scale=1.0 / width)),
        ("wrong axis", HINT_WRONG_AXIS, wrong_axis @ v),
    ]
    if mask is not None:
        after = softmax(masked_scores(q, k), axis=-1) * mask  # (L, S), zeroed after
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
        if np.allclose(got, wrong, rtol=1e-6, atol=1e-7):  # looks like this mistake
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


def _skipped(case: _Case) -> CaseResult:
    """A masked case that cannot run: the function takes no mask. It fails, never passes."""
    q, k = case.query, case.key
    shape = f"L={q.shape[0]} S={k.shape[0]} d={q.shape[1]} dv={case.value.shape[1]}"
    return CaseResult(case.name, shape, False, None, HINT_NO_MASK_ARGUMENT, "no mask argument")


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
        with np.errstate(all="ignore"):  # a NaN or an overflow is the checker's to report
            got = fn(*args)
    except Exception as err:  # the reader's code: report whatever it raised
        hint = f"raised {type(err).__name__}: {err} (inputs: q {q.shape}, k {k.shape}, v {v.shape})"
        return CaseResult(case.name, shape, False, None, hint, "raised")
    got, problem = as_array(got, "the output")
    if problem:
        return CaseResult(case.name, shape, False, None, problem, "not an array")
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
    if close(got, expected):
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
    masked = _accepts(fn, 4)
    results = tuple(
        _run_case(fn, c) if masked or c.mask is None else _skipped(c) for c in attention_cases(seed)
    )
    report = AttentionCheck(results)
    if verbose:
        print(report)
    return report
