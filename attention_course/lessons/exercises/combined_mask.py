"""Notebook 02's mask exercise: one boolean mask for a padded batch that is also causal.

`check_combined_mask(fn)`: the reader's ``fn(lengths, size)`` -> (B, L, L),
against the reference on batches drawn from a seed (`mask_cases`), with the
usual mistakes named: causality or padding left out, the triangle upside
down, ``|`` for ``&``, True and False swapped, the diagonal hidden, the
padding one position off, padding queries' rows left empty (against the
exercise's convention: a padding query keeps the real keys), a float mask.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .base import CaseResult, CheckReport, as_array, seeded
from .guards import call

__all__ = [
    "HINT_CAUSALITY_LEFT_OUT",
    "HINT_EMPTY_ROWS",
    "HINT_MASK_SWAPPED",
    "HINT_NO_DIAGONAL",
    "HINT_OR_NOT_AND",
    "HINT_PADDING_LEFT_OUT",
    "HINT_PADDING_OFF_BY_ONE",
    "HINT_UPPER_TRIANGLE",
    "MaskCheck",
    "check_combined_mask",
    "mask_cases",
]

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
    "hidden). This exercise's convention: a padding query keeps the real keys up to its "
    "position, like any query, and only the padding keys (the columns) are hidden; its output "
    "is thrown away. A row with no key at all is NaN in a plain softmax; PyTorch (since 2.5) "
    "returns zeros for it, and this course's library too, but that is a library's choice"
)
HINT_PADDING_OFF_BY_ONE = (
    "the padding starts one position off: in sequence b the real keys are 0 .. lengths[b] - 1, "
    "so keep j < lengths[b] (not <=)"
)
HINT_NO_DIAGONAL = (
    "the diagonal is missing: a query may attend to its own key (j = i), so the triangle "
    "includes it (np.tril with k=0)"
)


_NAMES = ("lengths", "size")


@dataclass(frozen=True)
class _MaskCase:
    name: str
    lengths: tuple[int, ...]  # (B,) tokens before the padding, per sequence
    size: int  # L, the padded length


def mask_cases(seed: int = 0) -> list[_MaskCase]:
    """The cases `check_combined_mask` runs for ``seed``: one sequence with no padding, a
    batch of three (one of them a single token) and a batch where every sequence is padded."""
    rng = np.random.default_rng(seed)
    size = int(rng.integers(3, 7))
    three = int(rng.integers(5, 9))
    middle = int(rng.integers(2, three))
    padded = int(rng.integers(4, 9))
    every = rng.integers(1, padded, size=int(rng.integers(2, 4)))
    return [
        _MaskCase("no padding", (size,), size),
        _MaskCase("three, padded", (three, middle, 1), three),
        _MaskCase("all padded", tuple(int(n) for n in every), padded),
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

    def real_to(extra: int) -> np.ndarray:  # (B, L): the padding moved by ``extra`` positions
        return np.arange(size) < np.asarray(case.lengths)[:, None] + extra

    right = causal & keys  # (B, L, L)
    shape = (batch, size, size)
    return [
        ("padding left out", HINT_PADDING_LEFT_OUT, np.broadcast_to(causal, shape)),
        ("causality left out", HINT_CAUSALITY_LEFT_OUT, np.broadcast_to(keys, shape)),
        ("upper triangle", HINT_UPPER_TRIANGLE, np.triu(np.ones((size, size), bool)) & keys),
        ("or, not and", HINT_OR_NOT_AND, causal | keys),
        ("swapped", HINT_MASK_SWAPPED, ~right),
        ("no diagonal", HINT_NO_DIAGONAL, np.tril(np.ones((size, size), bool), k=-1) & keys),
        ("padding off by one", HINT_PADDING_OFF_BY_ONE, causal & (real_to(1)[:, None, :])),
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

    got, failed = call(fn, (np.array(case.lengths), case.size), case.name, shape, _NAMES)
    if failed:
        return failed
    if not isinstance(got, np.ndarray):
        _, cause, problem = as_array(got, "the mask")
        return result(False, problem or "the mask is a number, not an array", cause or "type")
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


@np.errstate(all="ignore")  # a wrong answer's inf and NaN are for the report to name
def check_combined_mask(
    fn: Callable[..., Any], *, verbose: bool = True, seed: int | None = None
) -> MaskCheck:
    """Check the reader's mask for a padded batch that is also causal.

    ``fn(lengths, size)`` takes ``lengths``, an int array (B,) of each
    sequence's length before its padding, and ``size`` = L, the length all
    are padded to, and returns a boolean array (B, L, L) that is True where
    query i of sequence b may attend to key j: j <= i and j < lengths[b]
    (True = take part, PyTorch's convention). By the exercise's convention a
    padding query (i >= lengths[b]) keeps the real keys j <= i, so no row is
    all False (add a head axis, ``[:, None]``,
    to hand it to ``scaled_dot_product_attention``). Run on `mask_cases`, drawn
    from ``seed`` (None: the attempt's own, `base.attempt_seed`); a
    wrong mask is compared with the usual mistakes to say which it is.
    Prints the report when ``verbose`` and returns it. Raises TypeError for
    an ``fn`` that is not callable.
    """
    if not callable(fn):
        raise TypeError(f"check_combined_mask needs a function fn(lengths, size), got {fn!r}")
    seed = seeded(seed, fn)
    report = MaskCheck(tuple(_run_mask_case(fn, c) for c in mask_cases(seed)), seed=seed)
    if verbose:
        print(report)
    return report
