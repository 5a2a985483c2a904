"""What every checker shares: its report, one tolerance, the learner's answer read as an array.

The checkers (`attention_course.lessons.exercises`) run a learner's function on
cases drawn from a seed, compare with the library's reference, and report in
the learner's terms: one `CaseResult` per case, gathered in a `CheckReport`
(with the seed, so that the cases can be drawn again), which the gates of
notebooks 02 and 07, the graded edition and
`attention_course.lessons.exercises.feedback.feedback` read; an untouched starter
(it raises NotImplementedError) reads as one question, not a page of failures.
A `Solution` is an exercise's answer, kept off the page until the learner
has tried.

- `close`, `max_error`, `rows_close`: one tolerance (`RTOL`, `ATOL`) for every
  float64 comparison of a learner's answer with the reference, the rows a
  report lists included; `float32_like`: an answer that agrees only to
  float32's precision, whose message is `HINT_FLOAT64`.
- `as_array`: an answer as a float64 array, or the one sentence (and its
  cause) on why it is not one: a Python list or tuple, None, another type,
  float32 numbers.
- `rows_text`: which rows a boolean row mask picks, as "rows 0–2, 7";
  `shape_problem`: why an answer does not have the shape it should.
- `attempt_seed`: the seed an attempt draws its cases with when none is given:
  a hash of the function's source, so that the same function meets the same
  cases (a notebook run twice prints the same) and a changed one new cases.
- `case_scores`, `log_sum_exp`: the scaled, masked scores of a case
  (`attention_lib.core.masked_scores`, grouped heads as PyTorch's
  ``enable_gqa``), and each row's log-sum-exp (numpy's ``logaddexp``).

Running the learner's code (read-only arguments, a time limit, forbidden
calls) is `attention_course.lessons.exercises.guards`.
"""

from __future__ import annotations

import inspect
import secrets
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from attention_lib.core import masked_scores

from ..printing import format_difference

__all__ = [
    "ATOL",
    "HINT_FLOAT64",
    "NOT_WRITTEN",
    "RTOL",
    "SEEDS",
    "CaseResult",
    "CheckReport",
    "Solution",
    "as_array",
    "attempt_seed",
    "case_scores",
    "close",
    "fit_scale",
    "float32_like",
    "log_sum_exp",
    "max_error",
    "rows_close",
    "rows_text",
    "seeded",
    "shape_problem",
]

#: float64 on O(1) problems: rounding is ~1e-15, the mistakes the checkers name are > 1e-3
RTOL, ATOL = 1e-7, 1e-9
#: an answer off by no more than this (relative to the answer's size) but beyond the
#: tolerance agrees only to float32's precision (about 6e-8 a step)
_FLOAT32_RTOL = 1e-4
#: seeds are drawn below this: short enough to read out of a report and type back
SEEDS = 1_000_000

NOT_WRITTEN = "NotImplementedError"

HINT_FLOAT64 = (
    "compute in float64: your answer agrees with the reference only to float32's precision "
    "(about 7 digits, where the checker asks for about 15); look for a float32 array, "
    "np.float32 or a float32 torch tensor on the way"
)


def attempt_seed(fn: Any) -> int:
    """The seed of an attempt with ``fn`` (a function, or its source text): a hash of its
    source, or a fresh draw where there is none to read.

    The same function meets the same cases (Run All prints the same report
    every time); a function changed in any way meets new ones, so no answer
    can be fitted to the cases it is checked on.
    """
    try:
        text = fn if isinstance(fn, str) else inspect.getsource(fn)
    except (OSError, TypeError):  # no source to read (built in a string, a C function)
        text = _methods_source(fn)  # a class defined in a notebook's cell: its methods'
        if not text:
            return secrets.randbelow(SEEDS)
    return zlib.crc32(text.encode()) % SEEDS


def _methods_source(cls: Any) -> str:
    """The source of the functions a class defines, one after the other ("" for anything else,
    or where one has no source): a class's own source cannot be read back in a notebook."""
    if not inspect.isclass(cls):
        return ""
    parts = []
    for name, value in vars(cls).items():
        inner = getattr(value, "__func__", value)  # a staticmethod's or classmethod's function
        if inspect.isfunction(inner):
            try:
                parts.append(f"{cls.__name__}.{name}\n{inspect.getsource(inner)}")
            except (OSError, TypeError):
                return ""
    return "\n".join(parts)


def close(got: Any, want: Any) -> bool:
    """Whether ``got`` equals ``want`` to float64 rounding (same shape; infinities equal)."""
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    return got.shape == want.shape and bool(np.allclose(got, want, rtol=RTOL, atol=ATOL))


def rows_close(got: Any, want: Any) -> np.ndarray:
    """Per row (every axis but the last), whether it equals ``want``'s by `close`'s tolerance.

    A 1-d array is compared entry by entry. The rows a report lists as wrong
    are the rows this finds wrong, so a report never says "differs in no rows".
    """
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    same = np.isclose(got, want, rtol=RTOL, atol=ATOL)  # (..., n)
    return same if same.ndim <= 1 else np.all(same, axis=-1)  # (...,)


def max_error(got: Any, want: Any) -> float:
    """max |got - want|, equal entries (infinities included) counting 0; NaN if got has NaN."""
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    with np.errstate(invalid="ignore"):
        diff = np.where(got == want, 0.0, np.abs(got - want))
    return float(np.max(diff)) if diff.size else 0.0


def float32_like(got: Any, want: Any) -> bool:
    """Whether ``got`` misses ``want`` by float32's rounding: beyond `close`, within
    about 1e-4 of the answer's size (a real mistake misses by far more)."""
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    if got.shape != want.shape or close(got, want) or not np.all(np.isfinite(got)):
        return False
    size = max(1.0, float(np.max(np.abs(want[np.isfinite(want)]), initial=0.0)))
    return max_error(got, want) <= _FLOAT32_RTOL * size


def fit_scale(
    output_at: Callable[[float], np.ndarray], got: Any, start: float
) -> tuple[float, float]:
    """The constant scale whose output (``output_at(scale)``) is closest to ``got``, and that
    distance (max |difference|): the scale a wrong answer used, where it used a constant.

    A log-spaced search over six decades around ``start``, then three rounds
    of zooming in on the best point.
    """
    got = np.asarray(got, dtype=float)

    def distance(s: float) -> float:
        with np.errstate(all="ignore"):
            return float(np.max(np.abs(output_at(s) - got)))

    best, span = start, 1e3
    for points in (121, 41, 41, 41):
        grid = best * np.logspace(-np.log10(span), np.log10(span), points)
        best = float(grid[int(np.argmin([distance(float(s)) for s in grid]))])
        span = span ** (2 / (points - 1))  # the next search covers two grid steps each side
    return best, distance(best)


def rows_text(bad: Any, word: str = "row") -> str:
    """The indices where ``bad`` (1-d bool) is True, as runs: "rows 0–2, 7" or "row 3"."""
    index = np.flatnonzero(np.asarray(bad, dtype=bool))
    if index.size == 0:
        return f"no {word}s"
    runs, start = [], index[0]
    for a, b in zip(index, [*index[1:], None], strict=True):
        if b is None or b != a + 1:
            runs.append(f"{start}" if start == a else f"{start}–{a}")
            start = b
    plural = index.size > 1
    return f"{word}{'s' if plural else ''} {', '.join(runs)}"


def shape_problem(got: Any, want: np.ndarray, what: str, advice: str = "") -> str | None:
    """A sentence saying why ``got`` is not an array shaped like ``want``, or None."""
    try:
        shape = np.shape(got)
    except Exception:  # a ragged list, an object numpy cannot size
        shape = None
    if shape == want.shape:
        return None
    extra = f" ({advice})" if advice else ""
    return f"{what} should have shape {want.shape}, got {shape}{extra}"


def _type_name(got: Any) -> str:
    kind = type(got)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"


def as_array(got: Any, what: str) -> tuple[np.ndarray, str, str]:
    """``got`` as a float64 array: (array, "", ""), or (an empty array, cause, one sentence).

    Causes: "not an array" (a Python list or tuple, even one numpy could
    read: the exercises are about array code, and a list usually means a loop
    built the answer row by row; None; any other type, a torch tensor
    included) and "float32" (numbers in less than float64's precision). The
    same message for the same mistake in every exercise.
    """
    empty = np.empty(0)
    if isinstance(got, list | tuple):
        return (
            empty,
            "not an array",
            (
                f"{what} is a Python {type(got).__name__}, not a numpy array: return the array "
                "itself (numpy operations such as @ and np.where give one)"
            ),
        )
    if got is None:
        return empty, "not an array", f"{what} is None: does your function end with a return?"
    if not isinstance(got, np.ndarray | np.generic):
        said = f"{what} is a {_type_name(got)}, not a numpy array"
        if type(got).__module__.startswith("torch"):
            said += ": compute with numpy, or return tensor.numpy()"
        return empty, "not an array", said
    if got.dtype.kind not in "biuf":
        return empty, "not an array", f"{what} holds {got.dtype} values, not real numbers"
    if got.dtype.kind == "f" and got.dtype.itemsize < 8:
        digits = {2: 3, 4: 7}.get(got.dtype.itemsize, 7)
        return (
            empty,
            "float32",
            (
                f"{what} is {got.dtype}: compute in float64 (the inputs are float64; {got.dtype} "
                f"keeps about {digits} digits, the checker asks for about 15)"
            ),
        )
    return np.asarray(got, dtype=float), "", ""


@dataclass(frozen=True)
class CaseResult:
    """How the reader's function did on one case.

    ``cause`` names the diagnosis ("" when passed), one short phrase per
    mistake ("no scale", "writes input", "calls attention", "float32", ...).
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
        return f"  {mark} {self.name:<13} {self.shape:<22} {err}{tail}".rstrip()


@dataclass(frozen=True)
class CheckReport:
    """A checker's whole report: every case, the most likely cause of any failure, the seed.

    Subclasses name what a passing case agrees with (``SUBJECT``) and what
    the starter asks while the function is not written yet (``QUESTION``,
    read by `attention_course.lessons.exercises.feedback.feedback`). ``seed``
    drew the cases (None: fixed cases), and the report says how to draw them
    again.
    """

    cases: tuple[CaseResult, ...]
    notes: tuple[str, ...] = ()
    seed: int | None = None

    SUBJECT: ClassVar[str] = "the reference"
    QUESTION: ClassVar[str] = ""

    @property
    def passed(self) -> bool:
        """True when every case that ran matched the reference."""
        return bool(self.cases) and all(c.passed for c in self.cases)

    @property
    def cause(self) -> str:
        """The most common cause among the failing cases ('' when all passed)."""
        causes = [c.cause for c in self.cases if not c.passed]
        return max(causes, key=causes.count) if causes else ""

    @property
    def hint(self) -> str:
        """The hint of the first failing case with the most common cause ('' when all passed)."""
        return next((c.hint for c in self.cases if not c.passed and c.cause == self.cause), "")

    @property
    def not_written(self) -> bool:
        """Every case raised NotImplementedError: the untouched starter."""
        return bool(self.cases) and all(
            c.cause == "raised" and NOT_WRITTEN in c.hint for c in self.cases
        )

    def __str__(self) -> str:
        lines = [str(c) for c in self.cases] + [f"  note: {n}" for n in self.notes]
        if self.seed is not None:
            lines.append(
                f"  cases drawn with seed {self.seed} (pass seed={self.seed} to rerun them)"
            )
        failed = sum(not c.passed for c in self.cases)
        if failed == 0:
            verdict = f"All {len(self.cases)} cases agree with {self.SUBJECT}."
        else:
            verdict = f"{failed} of {len(self.cases)} cases differ. Most likely: {self.hint}"
        return "\n".join([verdict, *lines])


@dataclass(frozen=True)
class Solution:
    """One exercise's solution: ``code`` defines the function ``name``; ``explanation``
    is the prose that would give the answer away if shown before an attempt; ``hints``
    the ladder a learner climbs first, one step at a time: the idea, then the shapes,
    then the one line that matters."""

    name: str
    code: str
    explanation: str
    hints: tuple[str, ...] = ()


def case_scores(
    query: np.ndarray, key: np.ndarray, is_causal: bool, scale: float | None = None
) -> np.ndarray:
    """``query @ key^T * scale`` (..., L, S), -inf where the causal mask hides a key.

    query (..., H, L, E), key (..., Hkv, S, E) with H a multiple of Hkv: key
    head h // (H // Hkv) serves query head h (PyTorch's ``enable_gqa``).
    ``scale`` defaults to 1/sqrt(E). The mask is top-left aligned: query i
    sees keys j <= i, also when L != S. `attention_lib.core.masked_scores`.
    """
    grouped = query.ndim >= 3 and key.shape[-3] != query.shape[-3]
    return masked_scores(query, key, is_causal=is_causal, scale=scale, enable_gqa=grouped)


def log_sum_exp(scores: np.ndarray) -> np.ndarray:
    """Each row's log of the sum of exp(scores) (..., L): -inf for a row that is all -inf."""
    with np.errstate(divide="ignore"):
        return np.logaddexp.reduce(scores, axis=-1)  # (..., L)


def seeded(seed: int | None, fn: Callable[..., Any]) -> int:
    """``seed``, or the attempt's own (`attempt_seed`) when it is None; refuses a bad seed."""
    if seed is None:
        return attempt_seed(fn)
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise TypeError(f"seed must be a non-negative int, got {seed!r}")
    return int(seed)
