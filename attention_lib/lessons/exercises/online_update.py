"""Notebook 07, exercise 1: one step of the online softmax, checked.

- `check_online_update(fn)`: the learner's ``fn(m, total, acc, s, v)``
  returns the running state after one more block of scores. For rows of
  scores seen so far, the state is (the library's names, `attention_lib.flash.loop`)

      m      the largest score seen                    (L, 1)
      total  the sum of exp(score - m)                 (L, 1)
      acc    the sum of exp(score - m) * value         (L, Ev)

  and each case gives the state of some history and one new block s (L, bk)
  with its values v (bk, Ev); the answer must be the state of the history
  and the block together. The last case walks a whole row of keys block by
  block and compares acc / total with ``softmax(s) @ v``.
A wrong answer is compared with what the usual mistakes produce (the
accumulator or total not rescaled when the maximum rose, the factor upside
down, the old maximum forgotten, acc normalised at every step, NaN in a row
with no key yet, exp overflowing) and the report names the one it matches,
with the rows where it shows. Exercise 2 (`attention_lib.lessons.exercises.flash_forward`)
builds the tiled forward pass on this update.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ...flash.tiles import row_shift
from ...normalisers import softmax
from .base import CaseResult, CheckReport, call, close, max_error, rows_text, shape_problem

__all__ = ["OnlineUpdateCheck", "check_online_update", "update_cases"]


@dataclass(frozen=True)
class OnlineUpdateCheck(CheckReport):
    """Exercise 1's report: one `CaseResult` per case."""

    SUBJECT: ClassVar[str] = "the definition of (m, total, acc) over every score seen"
    QUESTION: ClassVar[str] = (
        "When a new block raises the running maximum, what must happen to total and acc "
        "before the block's terms are added?"
    )


# -- exercise 1: one step of the online softmax -------------------------------------------


@dataclass(frozen=True)
class _UpdateCase:
    name: str
    seen: np.ndarray  # (L, n) the scores of the blocks before, -inf where masked
    seen_values: np.ndarray  # (n, Ev)
    scores: np.ndarray  # (L, bk) the new block
    values: np.ndarray  # (bk, Ev)

    def states(self) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
        """(m, total, acc) before the new block and after it, from their definition."""
        after = _state(
            np.concatenate([self.seen, self.scores], axis=-1),
            np.concatenate([self.seen_values, self.values], axis=0),
        )
        return _state(self.seen, self.seen_values), after


def _state(scores: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, ...]:
    """(m, total, acc) of ``scores`` (L, n) and ``values`` (n, Ev), from their definition."""
    if scores.shape[-1] == 0:
        m = np.full((scores.shape[0], 1), -np.inf)  # (L, 1): nothing seen yet
    else:
        m = np.max(scores, axis=-1, keepdims=True)  # (L, 1)
    p = np.exp(scores - row_shift(np, m))  # (L, n): a row of -inf scores gives zeros
    return m, p.sum(axis=-1, keepdims=True), p @ values  # (L, 1), (L, 1), (L, Ev)


def update_cases(seed: int = 0) -> list[_UpdateCase]:
    """The seeded cases of `check_online_update`, each a history and one new block."""
    rng = np.random.default_rng(seed)

    def draw(*shape: int) -> np.ndarray:
        return rng.normal(size=shape)

    cases = [_UpdateCase("first block", draw(4, 0), draw(0, 2), draw(4, 3), draw(3, 2))]
    rises = np.where(np.arange(6) % 2 == 0, 4.0, -4.0)[:, None]  # (6, 1): even rows rise
    cases.append(_UpdateCase("max rises", draw(6, 5), draw(5, 3), draw(6, 4) + rises, draw(4, 3)))
    s = draw(5, 4) + 1.0
    s[rng.random(s.shape) < 0.3] = -np.inf  # some keys masked
    s[3] = -np.inf  # row 3: every key of this block masked
    cases.append(_UpdateCase("masked keys", draw(5, 4), draw(4, 2), s, draw(4, 2)))
    seen, s = draw(4, 3), draw(4, 2)
    seen[1:3] = -np.inf  # rows 1 and 2 have seen only masked keys
    s[1] = -np.inf  # row 1 still none; row 2 meets its first key now
    cases.append(_UpdateCase("no key yet", seen, draw(3, 2), s, draw(2, 2)))
    high = np.array([[803.0], [803.0], [797.0]])  # exp(800) overflows float64
    seen, s = draw(3, 4) + 800, draw(3, 4) + high
    cases.append(_UpdateCase("large scores", seen, draw(4, 2), s, draw(4, 2)))
    return cases


_HINTS = {
    "acc not rescaled": "the accumulator was not rescaled when the maximum changed ({rows}: "
    "the maximum rose there): multiply acc by exp(m - m_new) before adding p @ v",
    "total not rescaled": "total was not rescaled when the maximum changed ({rows}: the "
    "maximum rose there): total_new = exp(m - m_new) * total + rowsum(p)",
    "rescale inverted": "the rescale factor is upside down ({rows}): the old state is "
    "re-measured against the new maximum by exp(m - m_new) <= 1, not exp(m_new - m)",
    "old max forgotten": "m_new ignores the old maximum ({rows}: everything in this block is "
    "below m): m_new = max(m, rowmax(s))",
    "normalised": "acc was divided by total: keep acc unnormalised (a sum of exp(s - m) * v); "
    "the division happens once, after the last block",
    "masked row": "{rows} came out NaN: every score they have seen is masked, so m and m_new "
    "are -inf and exp(-inf - (-inf)) is NaN; shift by 0 where m_new is -inf "
    "(attention_lib.flash.tiles.row_shift does this)",
    "first keys": "{rows} came out NaN or inf: their first unmasked scores arrive in this "
    "block (m = -inf), where the old state's factor exp(m - m_new) is 0; exp(m_new - m) "
    "is inf there, and inf * 0 is NaN",
    "overflow": "the state has inf or NaN at scores near 800: exp(800) overflows; take "
    "p = exp(s - m_new) and rescale the old state by exp(m - m_new), both at most 1",
}


def _update_mistake(case: _UpdateCase, got: tuple[np.ndarray, ...]) -> tuple[str, str]:
    """(cause, hint) for a wrong update, from the known mistakes' outputs."""
    (m, total, acc), (m_new, total_new, acc_new) = case.states()
    m1, total1, acc1 = (np.asarray(x, dtype=float) for x in got)
    shift = row_shift(np, m_new)  # (L, 1)
    p = np.exp(case.scores - shift)  # (L, bk)
    rose = (m_new > m)[:, 0]  # (L,): rows whose maximum rose
    state = np.concatenate([np.where(np.isneginf(m1), 0.0, m1), total1, acc1], axis=-1)
    bad = ~np.all(np.isfinite(state), axis=-1)  # (L,): NaN or inf anywhere but m = -inf
    if np.any(bad):
        where = rows_text(bad).capitalize()
        if np.all(np.isneginf(m_new[bad])):
            return "masked row", _HINTS["masked row"].format(rows=where)
        if np.all(np.isneginf(m[bad])):
            return "first keys", _HINTS["first keys"].format(rows=where)
        if np.max(case.scores[np.isfinite(case.scores)], initial=-np.inf) > 700:
            return "overflow", _HINTS["overflow"]
        return (
            "not finite",
            f"NaN or inf in {rows_text(bad)}: exp of a large score, or -inf - (-inf)?",
        )
    if not close(m1, m_new):
        block_max = np.max(case.scores, axis=-1, keepdims=True)  # (L, 1)
        if close(m1, block_max):
            return "old max forgotten", _HINTS["old max forgotten"].format(
                rows=rows_text((m > block_max)[:, 0])
            )
        wrong = ~np.isclose(m1, m_new)[:, 0]
        return "m wrong", f"m_new differs in {rows_text(wrong)}: m_new = max(m, rowmax(s))"
    fine = np.isfinite(m)  # (L, 1): rows with an old maximum to re-measure
    inverted = np.where(fine, np.exp(np.where(fine, shift - m, 0.0)), 0.0)  # (L, 1)
    rows = rows_text(rose)
    candidates = [
        ("normalised", acc1, acc_new / np.where(total_new == 0, 1.0, total_new)),
        ("acc not rescaled", acc1, acc + p @ case.values),
        ("total not rescaled", total1, total + p.sum(axis=-1, keepdims=True)),
        ("rescale inverted", acc1, inverted * acc + p @ case.values),
        ("rescale inverted", total1, inverted * total + p.sum(axis=-1, keepdims=True)),
    ]
    for cause, mine, theirs in candidates:
        right = acc_new if mine is acc1 else total_new
        if not close(mine, right) and close(mine, theirs):
            return cause, _HINTS[cause].format(rows=rows)
    parts = [
        f"{name} differs in {rows_text(~np.all(np.isclose(x, want), axis=-1))}"
        for name, x, want in (("total_new", total1, total_new), ("acc_new", acc1, acc_new))
        if not close(x, want)
    ]
    said = "; ".join(parts) or "the state differs"
    return "unknown", f"{said} (the maximum rose in {rows})"


def _run_update(fn: Callable[..., Any], case: _UpdateCase) -> CaseResult:
    state, want = case.states()
    shape = f"L={case.scores.shape[0]} bk={case.scores.shape[1]} Ev={case.values.shape[1]}"
    got, failed = call(fn, (*state, case.scores, case.values), case.name, shape)
    if failed:
        return failed
    if not isinstance(got, tuple | list) or len(got) != 3:
        hint = "return the three new quantities: return m_new, total_new, acc_new"
        return CaseResult(case.name, shape, False, None, hint, "shape")
    for name, x, w in zip(("m_new", "total_new", "acc_new"), got, want, strict=True):
        problem = shape_problem(x, w, name, "keep the row axis: keepdims=True")
        if problem:
            return CaseResult(case.name, shape, False, None, problem, "shape")
    error = max(max_error(x, w) for x, w in zip(got, want, strict=True))
    if all(close(x, w) for x, w in zip(got, want, strict=True)):
        return CaseResult(case.name, shape, True, error, "")
    cause, hint = _update_mistake(case, tuple(got))
    return CaseResult(case.name, shape, False, None if np.isnan(error) else error, hint, cause)


def _run_whole_row(fn: Callable[..., Any], seed: int) -> CaseResult:
    """The update applied block by block from the empty state: acc / total = softmax(s) @ v."""
    rng = np.random.default_rng(seed + 1)
    scores, values, block = rng.normal(size=(3, 23)) * 2, rng.normal(size=(23, 4)), 5
    name, shape = "a whole row", "L=3 S=23 bk=5"
    state: Any = _state(scores[:, :0], values[:0])
    for k0 in range(0, scores.shape[1], block):
        s, v = scores[:, k0 : k0 + block], values[k0 : k0 + block]  # (3, bk), (bk, 4)
        state, failed = call(fn, (*state, s, v), name, shape)
        if failed:
            return failed
        if not isinstance(state, tuple | list) or len(state) != 3:
            return CaseResult(name, shape, False, None, "return m_new, total_new, acc_new", "shape")
    total, acc = (np.asarray(x, dtype=float) for x in state[1:])
    want = softmax(scores, axis=-1) @ values  # (3, 4)
    if total.shape != (3, 1) or acc.shape != want.shape:
        hint = f"after the last block total is {total.shape} and acc {acc.shape}"
        return CaseResult(name, shape, False, None, hint + ", expected (3, 1) and (3, 4)", "shape")
    with np.errstate(all="ignore"):
        out = acc / total  # (3, 4)
    error = max_error(out, want)
    if close(out, want):
        return CaseResult(name, shape, True, error, "")
    bad = ~np.all(np.isclose(out, want), axis=-1)  # (3,)
    hint = f"after 5 blocks, acc / total differs from softmax(s) @ v in {rows_text(bad)}"
    return CaseResult(name, shape, False, None if np.isnan(error) else error, hint, "whole row")


def check_online_update(
    fn: Callable[..., Any], *, verbose: bool = True, seed: int = 0
) -> OnlineUpdateCheck:
    """Check the learner's ``fn(m, total, acc, s, v) -> (m_new, total_new, acc_new)``.

    m and total (L, 1), acc (L, Ev), s (L, bk) the new block of scores
    (already scaled; -inf where a key is masked), v (bk, Ev), all float64.
    Five seeded cases of one step each, then a whole row of 23 keys in
    blocks of 5. Prints the report when ``verbose``; returns it. Raises
    TypeError if ``fn`` is not callable.
    """
    if not callable(fn):
        raise TypeError(f"check_online_update needs a function, got {type(fn).__name__}")
    results = [_run_update(fn, case) for case in update_cases(seed)]
    report = OnlineUpdateCheck((*results, _run_whole_row(fn, seed)), ())
    if verbose:
        print(report)
    return report
