"""Checkers for the "Try it yourself" exercises: run the reader's code, explain what is off.

- `check_attention(fn)`: the reader's own attention, ``fn(q, k, v)`` or
  ``fn(q, k, v, mask)`` on numpy arrays, against
  `scaled_dot_product_attention` on several seeded cases. A wrong answer is
  compared with the usual mistakes (no scale, 1/d, softmax over the wrong
  axis, a mask after the softmax or ignored) to say which one it looks like.
- `check_scale_rule(scale_fn, expect)`: the reader's scale as a function of
  the head width, and what it does to the mean top weight as d grows
  (notebook 02: divide by d and the weights flatten toward 1/keys; divide by
  less than sqrt(d) and they sharpen toward one). ``logits=`` runs it on
  given raw scores (notebook 02 passes its second table's own draws).
- `check_combined_mask(fn)`: the reader's one boolean mask for a padded
  batch that is also causal, ``fn(lengths, size)`` -> (B, L, L), against the
  reference on seeded cases, with the usual mistakes named (causality or
  padding left out, the triangle upside down, ``|`` for ``&``, True and
  False swapped, the diagonal hidden, padding queries' rows left empty).
- `check_decode_step(fn)`: the reader's KV-cache decode step, ``fn(q, k, v,
  k_cache, v_cache)`` -> (output, new k_cache, new v_cache): append the new
  keys and values, then attend with the causal mask aligned bottom-right;
  the usual mistakes named (the mask aligned top-left, the new keys not yet
  in the cache, or put at its front, no mask between new tokens).
- `SOLUTIONS`: each exercise's solution code and the explanation that goes
  with it, kept here so the notebook's code cells do not show the answer
  before the learner tries (notebook 02 hands them to a solution gate).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..core import scaled_dot_product_attention
from ..masks import apply_mask
from ..normalisers import softmax
from .rounding import format_difference
from .scaling_stats import WidthSweep, sweep_widths

__all__ = [
    "SOLUTIONS",
    "AttentionCheck",
    "CaseResult",
    "CheckReport",
    "DecodeCheck",
    "MaskCheck",
    "ScaleRuleCheck",
    "Solution",
    "attention_cases",
    "check_attention",
    "check_combined_mask",
    "check_decode_step",
    "check_scale_rule",
    "decode_cases",
    "mask_cases",
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
        return f"  {mark} {self.name:<13} {self.shape:<22} {err}{tail}".rstrip()


@dataclass(frozen=True)
class CheckReport:
    """A checker's whole report: every case, and the most likely cause of any failure.

    Subclasses name what a passing case agrees with (``SUBJECT``) and what
    the starter asks while the function is not written yet (``QUESTION``,
    read by `attention_lib.explorers.reveal.feedback`).
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
class AttentionCheck(CheckReport):
    """`check_attention`'s report."""

    SUBJECT: ClassVar[str] = "attention_lib.scaled_dot_product_attention"
    QUESTION: ClassVar[str] = "Which steps turn q, k and v into one output row per query?"


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
    logits: Mapping[int, np.ndarray] | None = None,
    verbose: bool = True,
) -> ScaleRuleCheck:
    """Mean top weight over the keys with ``scale_fn(d)`` multiplying the raw scores q·k.

    By default the raw scores are 2,000 seeded trials of one query against 6
    keys at each of ``widths`` (`sweep_widths`, seed 0). ``logits`` gives them
    instead: head width d -> raw scores of shape (trials, keys), the same
    shape at every width; the widths are then its keys, in increasing order (notebook
    02 passes its second table's draws, so the answer comes from the trials
    the table printed). ``expect`` is None or one of "flatten", "sharpen",
    "hold"; the result says whether the rule behaved that way. Raises
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
    report = ScaleRuleCheck(
        sweep.widths, tuple(scales), tops, standard, sweep.keys, behaviour, expect
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


# -- notebook 02: one mask for padding and causality --------------------------------

HINT_PADDING_LEFT_OUT = (
    "the padding keys are still visible: in sequence b the keys at positions lengths[b] and "
    "after are padding and must be False in every row"
)
HINT_CAUSALITY_LEFT_OUT = (
    "there is no causal part: query i sees keys after it (j > i); combine the padding mask "
    "with a lower triangle"
)
HINT_UPPER_TRIANGLE = (
    "the triangle points the wrong way: query i may see keys 0..i, the lower triangle "
    "(np.tril), not i and after (np.triu)"
)
HINT_OR_NOT_AND = (
    "the two masks were combined with | (or): a key must pass both tests, being real and not "
    "in the future, so combine them with &"
)
HINT_MASK_SWAPPED = (
    "True and False are swapped: True marks a key the query may attend to (PyTorch's "
    "convention), False one it may not"
)
HINT_EMPTY_ROWS = (
    "some rows are all False: the rows of padding queries (or row 0, if the diagonal is "
    "hidden). A softmax over a row with no key is 0/0, NaN; hide the padding keys (the "
    "columns) and let padding queries see the real keys, their outputs are thrown away"
)
HINT_NO_DIAGONAL = (
    "the diagonal is missing: a query may attend to its own key (j = i), so the triangle "
    "includes it (np.tril with k=0)"
)


@dataclass(frozen=True)
class _MaskCase:
    name: str
    lengths: tuple[int, ...]  # (B,) tokens before the padding, per sequence
    size: int  # L, the padded length


def mask_cases() -> list[_MaskCase]:
    """The cases `check_combined_mask` runs: no padding, then batches with some."""
    return [
        _MaskCase("no padding", (4,), 4),
        _MaskCase("three, padded", (5, 3, 1), 5),
        _MaskCase("all padded", (4, 2), 6),
    ]


def _combined_mask(lengths: Sequence[int], size: int) -> np.ndarray:
    """The reference: True where key j is a real token at or before query i, (B, L, L)."""
    causal = np.tril(np.ones((size, size), dtype=bool))  # (L, L)
    real = np.arange(size) < np.asarray(lengths)[:, None]  # (B, L)
    return causal & real[:, None, :]  # (B, L, L)


def _known_mask_mistakes(case: _MaskCase) -> list[tuple[str, str, np.ndarray]]:
    """The usual wrong masks for ``case``: (cause, hint, mask), each (B, L, L)."""
    size, batch = case.size, len(case.lengths)
    causal = np.tril(np.ones((size, size), dtype=bool))  # (L, L)
    real = np.arange(size) < np.asarray(case.lengths)[:, None]  # (B, L)
    keys = real[:, None, :]  # (B, 1, L): the padding hides key columns
    right = causal & keys  # (B, L, L)
    shape = (batch, size, size)
    return [
        ("padding left out", HINT_PADDING_LEFT_OUT, np.broadcast_to(causal, shape)),
        ("causality left out", HINT_CAUSALITY_LEFT_OUT, np.broadcast_to(keys, shape)),
        ("upper triangle", HINT_UPPER_TRIANGLE, np.triu(np.ones((size, size), bool)) & keys),
        ("or, not and", HINT_OR_NOT_AND, causal | keys),
        ("swapped", HINT_MASK_SWAPPED, ~right),
        ("no diagonal", HINT_NO_DIAGONAL, np.tril(np.ones((size, size), bool), k=-1) & keys),
        # padding queries' rows hidden as well (or instead: with causality it is the same)
        ("empty rows", HINT_EMPTY_ROWS, right & real[:, :, None]),
    ]


@dataclass(frozen=True)
class MaskCheck(CheckReport):
    """`check_combined_mask`'s report."""

    SUBJECT: ClassVar[str] = "the reference mask"
    QUESTION: ClassVar[str] = (
        "In sequence b, which keys may query i look at, and which must it never see?"
    )


def _run_mask_case(fn: Callable[..., Any], case: _MaskCase) -> CaseResult:
    shape = f"L={case.size} lengths {','.join(map(str, case.lengths))}"
    expected = _combined_mask(case.lengths, case.size)  # (B, L, L)

    def result(passed: bool, hint: str, cause: str = "") -> CaseResult:
        return CaseResult(case.name, shape, passed, None, hint, cause)

    try:
        got = fn(np.array(case.lengths), case.size)
    except Exception as err:  # the reader's code: report whatever it raised
        return result(False, f"raised {type(err).__name__}: {err}", "raised")
    got = np.asarray(got)
    if got.shape != expected.shape:
        hint = f"expected one (L, L) mask per sequence, shape {expected.shape}, got {got.shape}"
        if got.shape == expected.shape[1:]:
            hint += ": one mask cannot hold every sequence's padding; give each its own"
        return result(False, hint, "shape")
    if got.dtype != bool:
        return result(
            False,
            f"the mask is {got.dtype}, not bool: PyTorch adds a float mask to the scores "
            "instead of choosing keys; build it from comparisons (<, np.tril(..., dtype=bool), "
            "&) so it is boolean",
            "dtype",
        )
    if np.array_equal(got, expected):
        return result(True, "")
    wrong = int(np.sum(got != expected))
    for cause, hint, mistake in _known_mask_mistakes(case):
        if np.array_equal(got, mistake):
            return result(False, f"{wrong} of {got.size} entries differ: {hint}", cause)
    if not got.any(axis=-1).all():
        return result(
            False, f"{wrong} of {got.size} entries differ: {HINT_EMPTY_ROWS}", "empty rows"
        )
    return result(
        False,
        f"{wrong} of {got.size} entries differ, not in one of the usual ways; check each part: "
        "query i sees keys j <= i, and only keys j < lengths[b]",
        "unknown",
    )


def check_combined_mask(fn: Callable[..., Any], *, verbose: bool = True) -> MaskCheck:
    """Check the reader's mask for a padded batch that is also causal.

    ``fn(lengths, size)`` takes ``lengths``, an int array (B,) of each
    sequence's length before its padding, and ``size`` = L, the length all
    are padded to, and returns a boolean array (B, L, L) that is True where
    query i of sequence b may attend to key j: j <= i and j < lengths[b]
    (True = take part, PyTorch's convention; add a head axis, ``[:, None]``,
    to hand it to ``scaled_dot_product_attention``). Run on `mask_cases`; a
    wrong mask is compared with the usual mistakes to say which it is.
    Prints the report when ``verbose`` and returns it. Raises TypeError for
    an ``fn`` that is not callable.
    """
    if not callable(fn):
        raise TypeError(f"check_combined_mask needs a function fn(lengths, size), got {fn!r}")
    report = MaskCheck(tuple(_run_mask_case(fn, c) for c in mask_cases()))
    if verbose:
        print(report)
    return report


# -- notebook 02: a KV-cache decode step ----------------------------------------------

HINT_TOP_LEFT = (
    "the causal mask is aligned top-left (what is_causal=True does when L != S): the new "
    "token(s) at the end of the sequence saw only the first key(s); align the triangle "
    "bottom-right, np.tril(np.ones((T, S), dtype=bool), k=S - T)"
)
HINT_NOT_APPENDED = (
    "the new tokens did not see their own keys: append k and v to the cache first, then attend "
    "to the whole cache"
)
HINT_NO_CHUNK_MASK = (
    "no mask among the new tokens: new token i saw the new tokens after it; with T > 1 new "
    "tokens, token i may see the cached keys and new keys 0..i, a bottom-right triangle"
)
HINT_CACHE_FRONT = (
    "the new keys and values went to the front of the cache: they belong at its end, after "
    "the P cached ones (np.concatenate([k_cache, k]))"
)
HINT_CACHE_STALE = (
    "the cache that came back is the old one: return it with the new keys and values "
    "appended, shapes (P + T, d) and (P + T, dv)"
)


@dataclass(frozen=True)
class _DecodeCase:
    name: str
    query: np.ndarray  # (T, E) the new tokens' queries
    key: np.ndarray  # (T, E) their keys
    value: np.ndarray  # (T, Ev) their values
    key_cache: np.ndarray  # (P, E) the keys of the P tokens before
    value_cache: np.ndarray  # (P, Ev)


def decode_cases(seed: int = 0) -> list[_DecodeCase]:
    """The seeded cases `check_decode_step` runs: one new token (caches of 4 and 11), then
    chunks of three and four new tokens.

    The last starts with an empty cache (P = 0), where the step is ordinary
    causal attention over the four tokens.
    """
    rng = np.random.default_rng(seed)
    cases = []
    for name, past, new, width, vwidth in [
        ("one new token", 4, 1, 8, 4),
        ("long cache", 11, 1, 16, 2),
        ("three new", 5, 3, 8, 4),
        ("empty cache", 0, 4, 4, 3),
    ]:
        cases.append(
            _DecodeCase(
                name,
                rng.normal(size=(new, width)),
                rng.normal(size=(new, width)),
                rng.normal(size=(new, vwidth)),
                rng.normal(size=(past, width)),
                rng.normal(size=(past, vwidth)),
            )
        )
    return cases


def _bottom_right(new: int, total: int) -> np.ndarray:
    """(T, S) True where new token i, at position S - T + i, may see key j."""
    return np.tril(np.ones((new, total), dtype=bool), k=total - new)


def _known_decode_mistakes(case: _DecodeCase) -> list[tuple[str, str, np.ndarray]]:
    """Outputs of the usual wrong decode steps on ``case``: (cause, hint, output)."""
    q, new = case.query, case.query.shape[0]
    k = np.concatenate([case.key_cache, case.key])  # (S, E)
    v = np.concatenate([case.value_cache, case.value])  # (S, Ev)
    total, width = k.shape[0], q.shape[-1]
    mask = _bottom_right(new, total)
    out = [
        (
            "top-left",
            HINT_TOP_LEFT,
            scaled_dot_product_attention(q, k, v, np.tril(np.ones((new, total), bool))),
        ),
        ("no scale", HINT_NO_SCALE, scaled_dot_product_attention(q, k, v, mask, scale=1.0)),
        ("1/d", HINT_TOO_FLAT_D, scaled_dot_product_attention(q, k, v, mask, scale=1 / width)),
    ]
    if new > 1:
        out.append(("no mask", HINT_NO_CHUNK_MASK, scaled_dot_product_attention(q, k, v, None)))
    if case.key_cache.shape[0] > 0:  # attended before appending: only the old keys
        out.append(
            (
                "not appended",
                HINT_NOT_APPENDED,
                scaled_dot_product_attention(q, case.key_cache, case.value_cache, None),
            )
        )
    return out


@dataclass(frozen=True)
class DecodeCheck(CheckReport):
    """`check_decode_step`'s report."""

    SUBJECT: ClassVar[str] = "the reference decode step"
    QUESTION: ClassVar[str] = (
        "Where in the cache do the new keys go, and which of its keys may each new query see?"
    )


def _run_decode_case(fn: Callable[..., Any], case: _DecodeCase) -> CaseResult:
    q = case.query
    past, new = case.key_cache.shape[0], q.shape[0]
    shape = f"P={past} T={new} d={q.shape[1]} dv={case.value.shape[1]}"
    k = np.concatenate([case.key_cache, case.key])  # (S, E)
    v = np.concatenate([case.value_cache, case.value])  # (S, Ev)
    expected = scaled_dot_product_attention(q, k, v, _bottom_right(new, k.shape[0]))  # (T, Ev)

    def result(passed: bool, hint: str, cause: str = "", error: float | None = None):
        return CaseResult(case.name, shape, passed, error, hint, cause)

    arrays = (q, case.key, case.value, case.key_cache, case.value_cache)
    try:
        got = fn(*(a.copy() for a in arrays))  # copies: the reader's code may write to them
    except Exception as err:  # the reader's code: report whatever it raised
        return result(False, f"raised {type(err).__name__}: {err}", "raised")
    if not (isinstance(got, tuple) and len(got) == 3):
        return result(False, "return three things: (output, k_cache, v_cache)", "returns")
    out, k_cache, v_cache = (np.asarray(x, dtype=float) for x in got)
    for name, cache, right, front in (
        ("k_cache", k_cache, k, np.concatenate([case.key, case.key_cache])),
        ("v_cache", v_cache, v, np.concatenate([case.value, case.value_cache])),
    ):
        if cache.shape == right.shape and np.array_equal(cache, right):
            continue
        if past > 0 and cache.shape == front.shape and np.array_equal(cache, front):
            return result(False, HINT_CACHE_FRONT, "cache front")
        if cache.shape[0] == past:
            return result(False, HINT_CACHE_STALE, "cache stale")
        return result(
            False,
            f"the {name} returned, shape {cache.shape}, is not the cached rows followed by the "
            f"new ones, shape {right.shape}",
            "cache",
        )
    if out.shape != expected.shape:
        hint = f"expected an output of shape {expected.shape} (new tokens × dv), got {out.shape}"
        return result(False, hint, "shape")
    if not np.all(np.isfinite(out)):
        return result(False, "the output has NaN or inf: is some query's row fully masked?", "nan")
    error = float(np.max(np.abs(out - expected)))
    if np.allclose(out, expected, rtol=_RTOL, atol=_ATOL):
        return result(True, "", error=error)
    for cause, hint, wrong in _known_decode_mistakes(case):
        if wrong.shape == out.shape and np.allclose(out, wrong, rtol=_RTOL, atol=1e-7):
            return result(False, hint, cause, error)
    return result(
        False,
        "not one of the usual mistakes; check the steps: append, scores q @ k_cache.T / sqrt(d), "
        "the bottom-right mask, softmax over the keys, weights @ v_cache",
        "unknown",
        error,
    )


def check_decode_step(fn: Callable[..., Any], *, verbose: bool = True) -> DecodeCheck:
    """Check the reader's KV-cache decode step against the reference on seeded cases.

    ``fn(q, k, v, k_cache, v_cache)`` gets the T new tokens' queries, keys
    and values, (T, d), (T, d), (T, dv), and the cache of the P tokens
    before, (P, d) and (P, dv), all float64; it returns ``(output, k_cache,
    v_cache)``: the new tokens' attention output (T, dv) over the whole
    sequence, and the cache with the new rows appended, (P + T, d) and
    (P + T, dv). New token i sits at position P + i, so it may see keys
    0..P + i: the causal mask of a (T, S) score matrix, S = P + T, aligned
    bottom-right (PyTorch's ``causal_lower_right``). T = 1 is ordinary
    decoding. A wrong step is compared with the usual mistakes. Prints the
    report when ``verbose`` and returns it. Raises TypeError for an ``fn``
    that is not callable.
    """
    if not callable(fn):
        raise TypeError(
            f"check_decode_step needs a function fn(q, k, v, k_cache, v_cache), got {fn!r}"
        )
    report = DecodeCheck(tuple(_run_decode_case(fn, c) for c in decode_cases()))
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
        "1/6). sqrt(d) is the one power of d that cancels the growth, so it alone holds the "
        "spread, and with it the weights, level as d changes. It cancels it exactly (in "
        "expectation) only for independent components of mean zero and variance one: means "
        "mu_q and mu_k add d(mu_q^2 + mu_k^2) to the variance.",
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
    "combined_mask": Solution(
        "combined_mask",
        "def combined_mask(lengths, size):\n"
        "    causal = np.tril(np.ones((size, size), dtype=bool))  # (L, L): key j <= query i\n"
        "    real = np.arange(size) < np.asarray(lengths)[:, None]  # (B, L): key j not padding\n"
        "    return causal & real[:, None, :]  # (B, L, L): both at once\n",
        "Two masks, each a comparison, combined with &: a key takes part only if it is not in "
        "the query's future and not padding. The padding mask indexes keys, so it broadcasts "
        "over the query axis (real[:, None, :]); a padding query keeps the real keys, so no "
        "row is all False (a softmax over an empty row is NaN). In PyTorch the mask goes in as "
        "attn_mask, with a head axis added, and is_causal stays False: the causal part is "
        "already in it (passing both is an error). Now break it on purpose (np.triu, |, "
        "padding on the rows) and read what the checker says.",
    ),
    "decode_step": Solution(
        "decode_step",
        "def decode_step(q, k, v, k_cache, v_cache):\n"
        "    k_cache = np.concatenate([k_cache, k])  # (S, d), S = P + T: new keys go last\n"
        "    v_cache = np.concatenate([v_cache, v])  # (S, dv)\n"
        "    T, S = len(q), len(k_cache)\n"
        "    mask = np.tril(np.ones((T, S), dtype=bool), k=S - T)  # bottom-right\n"
        "    scores = np.where(mask, q @ k_cache.T / math.sqrt(q.shape[-1]), -np.inf)  # (T, S)\n"
        "    return softmax(scores, axis=-1) @ v_cache, k_cache, v_cache\n",
        "Append first, so each new token sees its own key, then attend over the whole cache. "
        "New token i sits at position S - T + i, so its row of the (T, S) scores may reach "
        "key S - T + i: the lower triangle shifted right by S - T, aligned to the bottom-right "
        "corner. With T = 1 that row is all True and the mask changes nothing; PyTorch's "
        "is_causal=True aligns the triangle top-left instead, which would leave the new token "
        "only the first key. In PyTorch the bottom-right mask is "
        "torch.nn.attention.bias.causal_lower_right(T, S).",
    ),
}
