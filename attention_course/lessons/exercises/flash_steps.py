"""Notebook 07, exercise 2 in three steps, each checked on its own before the whole pass.

- `check_key_loop(fn)`: ``fn(q, k, v, block_k) -> (out, lse)`` for ONE block of
  queries (all of q) against every key, block by block, no mask: the loop
  around exercise 1's ``online_update``. Run on exercise 2's cases that are not
  causal (scores near 1000 and rows far below zero among them), with the whole
  of q as one query block, and held to what `check_flash_forward` holds the
  whole pass to (what is read, and the tiles).
- `check_key_stop(fn)`: ``fn(r1, length_k, is_causal) -> int``, where the key
  loop of the query block that ends before row r1 may stop: min(length_k, r1)
  when causal (the tiles past it lie wholly above the diagonal), else length_k.
- `check_diagonal_mask(fn)`: ``fn(s, r0, k0) -> s`` with -inf where key j >
  query i, for the tile of scores whose first row is query r0 and first
  column key k0 (PyTorch's top-left causal mask, any L and S).

Each draws its cases from a seed and names the mistakes its step is about;
exercise 2 then puts the three together
(`attention_course.lessons.exercises.flash_forward`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from .base import CaseResult, CheckReport, as_array, seeded
from .flash_forward import FlashForwardCheck, _run_forward, forward_cases
from .guards import call

__all__ = [
    "DiagonalMaskCheck",
    "KeyLoopCheck",
    "KeyStopCheck",
    "check_diagonal_mask",
    "check_key_loop",
    "check_key_stop",
    "key_loop_cases",
    "mask_tiles",
    "stop_cases",
]


@dataclass(frozen=True)
class KeyLoopCheck(FlashForwardCheck):
    """Step 2a's report."""

    QUESTION: ClassVar[str] = (
        "For one block of queries, what state do you start from, and what do you do with "
        "each block of keys?"
    )


@dataclass(frozen=True)
class KeyStopCheck(CheckReport):
    """Step 2b's report."""

    SUBJECT: ClassVar[str] = "where each query block's key loop must stop"
    QUESTION: ClassVar[str] = (
        "With is_causal, which is the last key any row of the block r0..r1-1 may see?"
    )


@dataclass(frozen=True)
class DiagonalMaskCheck(CheckReport):
    """Step 2c's report."""

    SUBJECT: ClassVar[str] = "PyTorch's top-left causal mask"
    QUESTION: ClassVar[str] = "In a tile that starts at row r0 and key k0, which key is query i?"


def key_loop_cases(seed: int = 0) -> list[Any]:
    """The cases of `check_key_loop` for ``seed``: exercise 2's that are not causal, with the
    whole of q as one query block."""
    return [replace(c, block_q=len(c.query)) for c in forward_cases(seed) if not c.is_causal]


@np.errstate(all="ignore")  # a wrong answer's inf and NaN are for the report to name
def check_key_loop(
    fn: Callable[..., Any], *, verbose: bool = True, seed: int | None = None
) -> KeyLoopCheck:
    """Check ``fn(q, k, v, block_k) -> (out (L, Ev), lse (L,))``: one query block, no mask.

    `key_loop_cases` drawn from ``seed`` (None: the attempt's own). Prints the
    report when ``verbose``; returns it. Raises TypeError if ``fn`` is not
    callable.
    """
    if not callable(fn):
        raise TypeError(f"check_key_loop needs a function, got {type(fn).__name__}")

    def whole(q: Any, k: Any, v: Any, block_q: int, block_k: int, is_causal: bool) -> Any:
        return fn(q, k, v, block_k)

    seed = seeded(seed, fn)
    results = tuple(_run_forward(fn, c, call_as=whole) for c in key_loop_cases(seed))
    report = KeyLoopCheck(results, seed=seed)
    if verbose:
        print(report)
    return report


def stop_cases(seed: int = 0) -> list[tuple[int, int, bool]]:
    """The cases of `check_key_stop` for ``seed``: (r1, length_k, is_causal), causal with the
    block ending inside the keys, at the last key and past it (L > S), a block of one row, then
    two that are not causal."""
    rng = np.random.default_rng(seed)
    keys = int(rng.integers(6, 15))
    return [
        (int(rng.integers(2, keys - 1)), keys, True),  # L < S: stop inside the keys
        (keys, keys, True),  # the block ends at the last key
        (keys + int(rng.integers(1, 6)), keys, True),  # a last query block past the last key
        (1, int(rng.integers(3, 9)), True),  # tiles of one row
        (int(rng.integers(2, keys)), keys, False),
        (keys + int(rng.integers(1, 6)), keys, False),
    ]


def _stop_mistake(got: int, r1: int, keys: int, causal: bool) -> tuple[str, str]:
    want = min(keys, r1) if causal else keys
    said = f"stop = {got}, expected {want}"
    if not causal:
        return "stopped without causal", (
            f"{said}: without is_causal every query sees every key, so walk all {keys}"
        )
    if got == keys:
        return "walks every key", (
            f"{said}: with is_causal the keys from {r1} on lie above the diagonal for every row "
            f"of the block (rows < {r1}); stop at min(S, r1) and never compute those tiles"
        )
    if got == r1 - 1:
        return "misses the diagonal", (
            f"{said}: the block's last row, query {r1 - 1}, sees key {r1 - 1} too; the loop must "
            "run up to r1, not r1 - 1"
        )
    if got == r1 and r1 > keys:
        return "past the last key", (
            f"{said}: there are only {keys} keys; with L > S a query block can end past the last "
            "key, so take min(S, r1)"
        )
    return "unknown", f"{said}: with is_causal, min(S, r1); without it, S"


@np.errstate(all="ignore")  # a wrong answer's inf and NaN are for the report to name
def check_key_stop(
    fn: Callable[..., Any], *, verbose: bool = True, seed: int | None = None
) -> KeyStopCheck:
    """Check ``fn(r1, length_k, is_causal) -> int``: where a query block's key loop ends.

    `stop_cases` drawn from ``seed`` (None: the attempt's own). Prints the
    report when ``verbose``; returns it. Raises TypeError if ``fn`` is not
    callable.
    """
    if not callable(fn):
        raise TypeError(f"check_key_stop needs a function, got {type(fn).__name__}")
    seed = seeded(seed, fn)
    results = []
    for r1, keys, causal in stop_cases(seed):
        name = f"r1={r1} S={keys}"
        shape = "causal" if causal else "not causal"
        want = min(keys, r1) if causal else keys
        got, failed = call(fn, (r1, keys, causal), name, shape, ("r1", "length_k", "is_causal"))
        if failed:
            results.append(failed)
            continue
        if isinstance(got, bool) or not isinstance(got, int | np.integer):
            hint = f"return one int, the end of range(0, stop, block_k); got {type(got).__name__}"
            results.append(CaseResult(name, shape, False, None, hint, "not an int"))
            continue
        if got == want:
            results.append(CaseResult(name, shape, True, None, ""))
            continue
        cause, hint = _stop_mistake(int(got), r1, keys, causal)
        results.append(CaseResult(name, shape, False, None, hint, cause))
    report = KeyStopCheck(tuple(results), seed=seed)
    if verbose:
        print(report)
    return report


def mask_tiles(seed: int = 0) -> list[tuple[str, np.ndarray, int, int]]:
    """The cases of `check_diagonal_mask` for ``seed``: (name, tile of scores, r0, k0), tiles on
    the diagonal, offset across it, wholly below and wholly above it (every score masked), of one
    cell, and at the edge of a case with L > S."""
    rng = np.random.default_rng(seed)

    def size() -> int:
        return int(rng.integers(2, 6))

    at = int(rng.integers(0, 9))
    bq, bk = size(), size()
    plan = [
        ("on the diagonal", bq, bq, at, at),
        ("offset tile", bq, bk, at + int(rng.integers(1, 4)), at + bq),  # crosses the diagonal
        ("below", bq, bk, at + bk + int(rng.integers(1, 4)), at),
        ("above", bq, bk, at, at + bq + int(rng.integers(0, 3))),
        ("one cell", 1, 1, at, at),
        ("L > S edge", bq, bk, at + bk + int(rng.integers(2, 5)), at + int(rng.integers(0, 2))),
    ]
    return [(name, rng.normal(size=(h, w)), r0, k0) for name, h, w, r0, k0 in plan]


def _masked(s: np.ndarray, r0: int, k0: int, keep: Callable[..., np.ndarray]) -> np.ndarray:
    rows = np.arange(r0, r0 + s.shape[0])[:, None]  # (bq, 1) query indices
    cols = np.arange(k0, k0 + s.shape[1])[None, :]  # (1, bk) key indices
    return np.where(keep(rows, cols), s, -np.inf)  # (bq, bk)


def _named(results: list[CaseResult], mistakes: dict[str, tuple[Any, str]]) -> tuple:
    """The failed cases named by the mistake that explains the most of them.

    Some tiles cannot tell two mistakes apart (a tile wholly above the diagonal
    is all kept both when the mask is inverted and when the triangle points the
    wrong way); each such case is named by the mistake the other tiles single
    out. A failed case's cause holds its candidates, "|"-joined, until here.
    """
    votes = [r.cause.split("|") for r in results if not r.passed and r.hint == ""]
    counts = {c: sum(c in v for v in votes) for c in mistakes}
    named = []
    for r in results:
        if r.passed or r.hint:
            named.append(r)
            continue
        found = r.cause.split("|")
        cause = max(found, key=lambda c: counts.get(c, 0)) if r.cause != "unknown" else "unknown"
        hint = mistakes[cause][1] if cause in mistakes else _UNKNOWN_MASK
        named.append(replace(r, cause=cause, hint=hint))
    return tuple(named)


_UNKNOWN_MASK = "keep the scores where key k0 + b <= query r0 + a, -np.inf elsewhere"


@np.errstate(all="ignore")  # a wrong answer's inf and NaN are for the report to name
def check_diagonal_mask(
    fn: Callable[..., Any], *, verbose: bool = True, seed: int | None = None
) -> DiagonalMaskCheck:
    """Check ``fn(s, r0, k0) -> s masked``: -inf where key j > query i inside one tile.

    s is a read-only (bq, bk) float64 tile whose row a is query r0 + a and
    column b key k0 + b (masking it in place is a write into the caller's
    tile, and fails). `mask_tiles` drawn from ``seed`` (None: the attempt's
    own). Prints the report when ``verbose``; returns it. Raises TypeError if
    ``fn`` is not callable.
    """
    if not callable(fn):
        raise TypeError(f"check_diagonal_mask needs a function, got {type(fn).__name__}")
    mistakes = {
        "tile indices": (
            lambda s, r0, k0: _masked(s, 0, 0, lambda i, j: j <= i),
            "the mask counts rows and columns from the tile's corner: query i is r0 + row and "
            "key j is k0 + column, so compare np.arange(r0, r0 + bq)[:, None] with "
            "np.arange(k0, k0 + bk)[None, :]",
        ),
        "diagonal hidden": (
            lambda s, r0, k0: _masked(s, r0, k0, lambda i, j: j < i),
            "the diagonal is masked: query i sees key i (keep j <= i)",
        ),
        "upper triangle": (
            lambda s, r0, k0: _masked(s, r0, k0, lambda i, j: j >= i),
            "the triangle points the wrong way: keep the keys j <= i (the past), hide j > i",
        ),
        "inverted": (
            lambda s, r0, k0: _masked(s, r0, k0, lambda i, j: j > i),
            "the mask is inverted: the visible keys (j <= i) were hidden and the others kept",
        ),
        "zeros not -inf": (
            lambda s, r0, k0: np.where(_masked(s, r0, k0, lambda i, j: j <= i) == -np.inf, 0, s),
            "the hidden scores were set to 0: a score of 0 still takes weight after exp; "
            "use -np.inf",
        ),
    }
    seed = seeded(seed, fn)
    results = []
    for name, s, r0, k0 in mask_tiles(seed):
        shape = f"{s.shape[0]}x{s.shape[1]} at ({r0}, {k0})"
        want = _masked(s, r0, k0, lambda i, j: j <= i)
        got, failed = call(fn, (s, r0, k0), name, shape, ("s", "r0", "k0"))
        if failed:
            results.append(failed)
            continue
        got, cause, problem = as_array(got, "the masked tile")
        if not problem and got.shape != want.shape:
            cause = "shape"
            problem = f"the masked tile should keep the tile's shape {want.shape}, got {got.shape}"
        if problem:
            results.append(CaseResult(name, shape, False, None, problem, cause))
            continue
        if np.array_equal(got, want):
            results.append(CaseResult(name, shape, True, None, ""))
            continue
        matches = [c for c, (wrong, _) in mistakes.items() if np.array_equal(got, wrong(s, r0, k0))]
        results.append(CaseResult(name, shape, False, None, "", "|".join(matches) or "unknown"))
    report = DiagonalMaskCheck(_named(results, mistakes), seed=seed)
    if verbose:
        print(report)
    return report
