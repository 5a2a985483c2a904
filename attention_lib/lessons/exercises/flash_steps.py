"""Notebook 07, exercise 2 in three steps, each checked on its own before the whole pass.

- `check_key_loop(fn)`: ``fn(q, k, v, block_k) -> (out, lse)`` for ONE block of
  queries (all of q) against every key, block by block, no mask: the loop
  around exercise 1's ``online_update``. Run on exercise 2's cases that are not
  causal, with the whole of q as one query block, and held to what
  `check_flash_forward` holds the whole pass to (the tiles included).
- `check_key_stop(fn)`: ``fn(r1, length_k, is_causal) -> int``, where the key
  loop of the query block that ends before row r1 may stop: min(length_k, r1)
  when causal (the tiles past it lie wholly above the diagonal), else length_k.
- `check_diagonal_mask(fn)`: ``fn(s, r0, k0) -> s`` with -inf where key j >
  query i, for the tile of scores whose first row is query r0 and first
  column key k0 (PyTorch's top-left causal mask, any L and S).

Each names the mistakes its step is about (`cases` below); exercise 2 then
puts the three together (`attention_lib.lessons.exercises.flash_forward`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from .base import CaseResult, CheckReport, as_array, call
from .flash_forward import FlashForwardCheck, _run_forward, forward_cases

__all__ = [
    "DiagonalMaskCheck",
    "KeyLoopCheck",
    "KeyStopCheck",
    "check_diagonal_mask",
    "check_key_loop",
    "check_key_stop",
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


def check_key_loop(fn: Callable[..., Any], *, verbose: bool = True, seed: int = 0) -> KeyLoopCheck:
    """Check ``fn(q, k, v, block_k) -> (out (L, Ev), lse (L,))``: one query block, no mask.

    Exercise 2's cases that are not causal, with block_q = L. Prints the report
    when ``verbose``; returns it. Raises TypeError if ``fn`` is not callable.
    """
    if not callable(fn):
        raise TypeError(f"check_key_loop needs a function, got {type(fn).__name__}")

    def whole(q: Any, k: Any, v: Any, block_q: int, block_k: int, is_causal: bool) -> Any:
        return fn(q, k, v, block_k)

    cases = [replace(c, block_q=len(c.query)) for c in forward_cases(seed) if not c.is_causal]
    results = tuple(_run_forward(fn, c, call_as=whole) for c in cases)
    report = KeyLoopCheck(results)
    if verbose:
        print(report)
    return report


_STOP_CASES = [  # r1, length_k, is_causal
    (4, 10, True),  # L < S: stop inside the keys
    (8, 10, True),
    (12, 10, True),  # a last query block past the last key: stop at the end
    (1, 7, True),  # tiles of one row
    (4, 10, False),
    (12, 10, False),
]


def check_key_stop(fn: Callable[..., Any], *, verbose: bool = True) -> KeyStopCheck:
    """Check ``fn(r1, length_k, is_causal) -> int``: where a query block's key loop ends.

    Prints the report when ``verbose``; returns it. Raises TypeError if ``fn``
    is not callable.
    """
    if not callable(fn):
        raise TypeError(f"check_key_stop needs a function, got {type(fn).__name__}")
    results = []
    for r1, keys, causal in _STOP_CASES:
        name = f"r1={r1} S={keys}"
        shape = "causal" if causal else "not causal"
        want = min(keys, r1) if causal else keys
        got, failed = call(fn, (r1, keys, causal), name, shape)
        if failed:
            results.append(failed)
            continue
        if not isinstance(got, int | np.integer):
            hint = f"return one int, the end of range(0, stop, block_k); got {type(got).__name__}"
            results.append(CaseResult(name, shape, False, None, hint, "not an int"))
            continue
        if got == want:
            results.append(CaseResult(name, shape, True, None, ""))
            continue
        cause, hint = _stop_mistake(int(got), r1, keys, causal)
        results.append(CaseResult(name, shape, False, None, hint, cause))
    report = KeyStopCheck(tuple(results))
    if verbose:
        print(report)
    return report


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


def _tiles(seed: int = 0) -> list[tuple[str, np.ndarray, int, int]]:
    """(name, tile of scores, r0, k0): tiles across, below and at the edge of the diagonal."""
    rng = np.random.default_rng(seed)
    plan = [("on the diagonal", 4, 4, 4, 4), ("offset tile", 4, 3, 4, 6), ("below", 3, 3, 8, 2)]
    plan += [("one cell", 1, 1, 5, 5), ("L > S edge", 3, 4, 9, 8)]
    return [(name, rng.normal(size=(bq, bk)), r0, k0) for name, bq, bk, r0, k0 in plan]


def _masked(s: np.ndarray, r0: int, k0: int, keep: Callable[..., np.ndarray]) -> np.ndarray:
    rows = np.arange(r0, r0 + s.shape[0])[:, None]  # (bq, 1) query indices
    cols = np.arange(k0, k0 + s.shape[1])[None, :]  # (1, bk) key indices
    return np.where(keep(rows, cols), s, -np.inf)  # (bq, bk)


def check_diagonal_mask(
    fn: Callable[..., Any], *, verbose: bool = True, seed: int = 0
) -> DiagonalMaskCheck:
    """Check ``fn(s, r0, k0) -> s masked``: -inf where key j > query i inside one tile.

    s is a (bq, bk) float64 tile whose row a is query r0 + a and column b key
    k0 + b. Prints the report when ``verbose``; returns it. Raises TypeError if
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
    results = []
    for name, s, r0, k0 in _tiles(seed):
        shape = f"{s.shape[0]}x{s.shape[1]} at ({r0}, {k0})"
        want = _masked(s, r0, k0, lambda i, j: j <= i)
        got, failed = call(fn, (s, r0, k0), name, shape)
        if failed:
            results.append(failed)
            continue
        got, problem = as_array(got, "the masked tile")
        if not problem and got.shape != want.shape:
            problem = f"the masked tile should keep the tile's shape {want.shape}, got {got.shape}"
        if problem:
            results.append(CaseResult(name, shape, False, None, problem, "shape"))
            continue
        if np.array_equal(got, want):
            results.append(CaseResult(name, shape, True, None, ""))
            continue
        cause, hint = next(
            ((c, h) for c, (wrong, h) in mistakes.items() if np.array_equal(got, wrong(s, r0, k0))),
            ("unknown", "keep the scores where key k0 + b <= query r0 + a, -np.inf elsewhere"),
        )
        results.append(CaseResult(name, shape, False, None, hint, cause))
    report = DiagonalMaskCheck(tuple(results))
    if verbose:
        print(report)
    return report
