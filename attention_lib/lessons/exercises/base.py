"""What every checker shares: its report, running the learner's code, and one tolerance.

The checkers (`attention_lib.lessons.exercises`) run a learner's function on
seeded cases, compare with the library's reference, and report in the
learner's terms: one `CaseResult` per case, gathered in a `CheckReport`,
which notebook 02's and 07's solution gates and
`attention_lib.lessons.exercises.feedback.feedback` read; an untouched starter (it
raises NotImplementedError) reads as one question, not a page of failures.
A `Solution` is an exercise's answer, kept off the page until the learner
has tried.

- `call`: the learner's function on copies of the inputs, numpy warnings
  silenced (the checker says what went wrong in its own words); an exception
  becomes a failed `CaseResult`.
- `close`, `max_error`: one tolerance (`RTOL`, `ATOL`) for every float64
  comparison of a learner's answer with the reference.
- `rows_text`: which rows a boolean row mask picks, as "rows 0–2, 7";
  `shape_problem`: why an answer does not have the shape it should;
  `as_array`: an answer as a float array, or one sentence on why it is not one.
- `time_limit`: the learner's code stopped after a few seconds (`TimeLimit`), so
  a loop without end cannot hang the kernel.
- `case_scores`, `log_sum_exp`: the scaled, masked scores of a case
  (`attention_lib.core.masked_scores`, grouped heads as PyTorch's
  ``enable_gqa``), and each row's log-sum-exp (numpy's ``logaddexp``).
"""

from __future__ import annotations

import contextlib
import signal
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ...core import masked_scores
from ..printing import format_difference

__all__ = [
    "ATOL",
    "NOT_WRITTEN",
    "RTOL",
    "SECONDS",
    "CaseResult",
    "CheckReport",
    "Solution",
    "TimeLimit",
    "as_array",
    "call",
    "case_scores",
    "close",
    "log_sum_exp",
    "max_error",
    "rows_text",
    "shape_problem",
    "time_limit",
]

#: float64 on O(1) problems: rounding is ~1e-15, the mistakes the checkers name are > 1e-3
RTOL, ATOL = 1e-7, 1e-9

NOT_WRITTEN = "NotImplementedError"

#: how long a whole check may run the learner's code (every case together)
SECONDS = 20


class TimeLimit(BaseException):  # not an Exception: the checkers' `except` lets it by
    """The learner's code ran past `time_limit`'s seconds."""


@contextlib.contextmanager
def time_limit(seconds: float = SECONDS) -> Iterator[None]:
    """Raise `TimeLimit` in the block after ``seconds`` (an interval timer, SIGALRM).

    A kernel runs a cell, and a button's callback, in its main thread, where
    the signal can stop a loop that never ends. Elsewhere (another thread,
    Windows) there is no such timer and the block runs unlimited.
    """
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def stop(_signum: int, _frame: Any) -> None:
        raise TimeLimit(f"did not return within {seconds:g} s")

    before = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)


def close(got: Any, want: Any) -> bool:
    """Whether ``got`` equals ``want`` to float64 rounding (same shape; infinities equal)."""
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    return got.shape == want.shape and bool(np.allclose(got, want, rtol=RTOL, atol=ATOL))


def max_error(got: Any, want: Any) -> float:
    """max |got - want|, equal entries (infinities included) counting 0; NaN if got has NaN."""
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    with np.errstate(invalid="ignore"):
        diff = np.where(got == want, 0.0, np.abs(got - want))
    return float(np.max(diff)) if diff.size else 0.0


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


def call(
    fn: Callable[..., Any], args: Sequence[Any], name: str, shape: str
) -> tuple[Any, CaseResult | None]:
    """``fn(*args)`` on copies of array arguments: (result, None), or (None, a failed case).

    Numpy's floating-point warnings are silenced while the learner's code
    runs: a NaN or an overflow is reported by the checker, in its words.
    """
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return fn(*copies), None
    except Exception as err:  # the learner's code: report whatever it raised
        shapes = ", ".join(str(a.shape) for a in args if isinstance(a, np.ndarray))
        hint = f"raised {type(err).__name__}: {err} (array arguments of shapes {shapes})"
        return None, CaseResult(name, shape, False, None, hint, "raised")


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


def as_array(got: Any, what: str) -> tuple[np.ndarray, str]:
    """``got`` as a float array and "", or (an empty array, one sentence on why it is not one).

    A Python list is refused even when numpy could read it: the exercises are
    about array code, and a list usually means a loop built the answer row by row.
    """
    if isinstance(got, list | tuple):
        kind = type(got).__name__
        return np.empty(0), (
            f"{what} is a Python {kind}, not a numpy array: return the array itself "
            "(numpy operations such as @ and np.where give one)"
        )
    if got is None:
        return np.empty(0), f"{what} is None: does your function end with a return?"
    try:
        return np.asarray(got, dtype=float), ""
    except (TypeError, ValueError):
        return np.empty(0), f"{what} is a {type(got).__name__}, not an array of numbers"


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
        return f"  {mark} {self.name:<13} {self.shape:<22} {err}{tail}".rstrip()


@dataclass(frozen=True)
class CheckReport:
    """A checker's whole report: every case, and the most likely cause of any failure.

    Subclasses name what a passing case agrees with (``SUBJECT``) and what
    the starter asks while the function is not written yet (``QUESTION``,
    read by `attention_lib.lessons.exercises.feedback.feedback`).
    """

    cases: tuple[CaseResult, ...]
    notes: tuple[str, ...] = ()

    SUBJECT: ClassVar[str] = "the reference"
    QUESTION: ClassVar[str] = ""

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

    @property
    def not_written(self) -> bool:
        """Every case raised NotImplementedError: the untouched starter."""
        return bool(self.cases) and all(
            c.cause == "raised" and "NotImplementedError" in c.hint for c in self.cases
        )

    def __str__(self) -> str:
        lines = [str(c) for c in self.cases] + [f"  note: {n}" for n in self.notes]
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
