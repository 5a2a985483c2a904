"""What notebook 07's four checkers share: running the learner's code, and saying where it is off.

The checkers (`online_exercise`, `backward_exercise`, `triton_exercise`) run
a learner's function on seeded cases, compare with the library's reference,
and report in the learner's terms: which output, which rows, which block.
Their reports are `attention_lib.lessons.exercises.CheckReport`s (one
`CaseResult` per case), so notebook 02's solution gate and its `feedback`
serve them unchanged: an untouched starter (it raises NotImplementedError)
reads as one question, not a page of failures.

- `call`: the learner's function on copies of the inputs, numpy warnings
  silenced (the checker says what went wrong in its own words); an exception
  becomes a failed `CaseResult`.
- `close`, `max_error`: one tolerance for every float64 comparison here.
- `rows_text`: which rows a boolean row mask picks, as "rows 0–2, 7".
- `masked_scores`, `log_sum_exp`: the scaled scores with the causal mask
  (top-left, as PyTorch's ``is_causal``) and grouped heads, and each row's
  log-sum-exp, from the library's masks and numpy's ``logaddexp``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..masks import apply_mask, causal_mask
from .exercises import CaseResult

__all__ = [
    "NOT_WRITTEN",
    "call",
    "close",
    "log_sum_exp",
    "masked_scores",
    "max_error",
    "rows_text",
    "shape_problem",
]

# float64 on O(1) problems: rounding is ~1e-15, the mistakes the checkers name are > 1e-3
_RTOL, _ATOL = 1e-7, 1e-9

NOT_WRITTEN = "NotImplementedError"


def close(got: Any, want: Any) -> bool:
    """Whether ``got`` equals ``want`` to float64 rounding (same shape; infinities equal)."""
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    return got.shape == want.shape and bool(np.allclose(got, want, rtol=_RTOL, atol=_ATOL))


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


def masked_scores(
    query: np.ndarray, key: np.ndarray, is_causal: bool, scale: float | None = None
) -> np.ndarray:
    """``query @ key^T * scale`` (..., L, S), -inf where the causal mask hides a key.

    query (..., H, L, E), key (..., Hkv, S, E) with H a multiple of Hkv: key
    head h // (H // Hkv) serves query head h (PyTorch's ``enable_gqa``).
    ``scale`` defaults to 1/sqrt(E). The mask is top-left aligned: query i
    sees keys j <= i, also when L != S.
    """
    if query.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        key = np.repeat(key, query.shape[-3] // key.shape[-3], axis=-3)  # (..., H, S, E)
    scale = query.shape[-1] ** -0.5 if scale is None else scale
    scores = query @ key.swapaxes(-1, -2) * scale  # (..., L, S)
    if is_causal:
        keep = causal_mask(np, (0, query.shape[-2]), (0, key.shape[-2]))  # (L, S)
        scores = apply_mask(np, scores, keep)  # (..., L, S)
    return scores


def log_sum_exp(scores: np.ndarray) -> np.ndarray:
    """Each row's log of the sum of exp(scores) (..., L): -inf for a row that is all -inf."""
    with np.errstate(divide="ignore"):
        return np.logaddexp.reduce(scores, axis=-1)  # (..., L)
