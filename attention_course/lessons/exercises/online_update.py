"""Notebook 07, exercise 1: one step of the online softmax, checked.

- `check_online_update(fn)`: the learner's ``fn(m, total, acc, s, v)``
  returns the running state after one more block of scores. For rows of
  scores seen so far, the state is (the library's names, `attention_lib.flash.loop`)

      m      the largest score seen                    (L, 1)
      total  the sum of exp(score - m)                 (L, 1)
      acc    the sum of exp(score - m) * value         (L, Ev)

  and each case (`update_cases`, drawn from a seed) gives the state of some
  history and one new block s (L, bk) with its values v (bk, Ev); the answer
  must be the state of the history and the block together. The last case
  (`whole_row_case`) walks whole rows of keys block by block from the empty
  state, one row of ordinary scores, one near +1000 and one far below zero,
  and compares acc / total with ``softmax(s) @ v``.

A wrong answer is compared with what the usual mistakes produce (the
accumulator or total not rescaled when the maximum rose, the factor upside
down, the old maximum forgotten, the block's maximum taken over every row,
acc normalised at every step, NaN in a row with no key yet, exp overflowing
or underflowing, float32) and the report names the one it matches, with the
rows where it shows (by the tolerance of the verdict). Exercise 2
(`attention_course.lessons.exercises.flash_forward`) builds the tiled forward
pass on this update.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from attention_lib.flash.tiles import row_shift
from attention_lib.normalisers import softmax

from .base import (
    HINT_FLOAT64,
    CaseResult,
    CheckReport,
    as_array,
    close,
    float32_like,
    max_error,
    rows_close,
    rows_text,
    seeded,
    shape_problem,
)
from .draws import FAR_BELOW, LARGE
from .guards import call

__all__ = ["OnlineUpdateCheck", "check_online_update", "update_cases", "whole_row_case"]

_NAMES = ("m", "total", "acc", "s", "v")


@dataclass(frozen=True)
class OnlineUpdateCheck(CheckReport):
    """Exercise 1's report: one `CaseResult` per case."""

    SUBJECT: ClassVar[str] = "the definition of (m, total, acc) over every score seen"
    QUESTION: ClassVar[str] = (
        "When a new block raises the running maximum, what must happen to total and acc "
        "before the block's terms are added?"
    )


@dataclass(frozen=True)
class _UpdateCase:
    name: str
    seen: np.ndarray  # (L, n) the scores of the blocks before, -inf where masked
    seen_values: np.ndarray  # (n, Ev)
    scores: np.ndarray  # (L, bk) the new block
    values: np.ndarray  # (bk, Ev)

    @property
    def shape(self) -> str:
        (length, block), width = self.scores.shape, self.values.shape[1]
        return f"L={length} bk={block} Ev={width}"

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
    """The cases of `check_online_update` for ``seed``, each a history and one new block.

    A first block; a block that raises the maximum in some rows (which, drawn)
    and not others; masked keys (a row wholly masked); rows with no key yet;
    scores near 1000; rows whose every score lies far below zero; a wholly
    masked block.
    """
    rng = np.random.default_rng(seed)

    def draw(*shape: int) -> np.ndarray:
        return rng.normal(size=shape)

    def size() -> int:
        return int(rng.integers(2, 6))

    length = int(rng.integers(3, 6))
    s, v = _block(rng, length)
    cases = [_UpdateCase("first block", draw(length, 0), draw(0, v.shape[1]), s, v)]
    length, seen = int(rng.integers(4, 8)), size()
    rises = rng.random(length) < 0.5
    rises[:2] = (True, False)  # at least one row rises and one does not
    jump = np.where(rises, 4.0, -4.0)[:, None]  # (L, 1)
    s, v = _block(rng, length)
    cases.append(_UpdateCase("max rises", draw(length, seen), draw(seen, v.shape[1]), s + jump, v))
    length, seen = int(rng.integers(4, 7)), size()
    s, v = _block(rng, length)
    s[rng.random(s.shape) < 0.3] = -np.inf  # some keys masked
    s[int(rng.integers(length))] = -np.inf  # one row: every key of this block masked
    cases.append(_UpdateCase("masked keys", draw(length, seen), draw(seen, v.shape[1]), s, v))
    length, seen = int(rng.integers(4, 7)), size()
    history, (s, v) = draw(length, seen), _block(rng, length)
    history[1:3] = -np.inf  # rows 1 and 2 have seen only masked keys
    s[1] = -np.inf  # row 1 still none; row 2 meets its first key now
    cases.append(_UpdateCase("no key yet", history, draw(seen, v.shape[1]), s, v))
    length, seen = int(rng.integers(3, 6)), size()
    top = LARGE - rng.uniform(0, 200, size=(length, 1))  # (L, 1): each row's level, ~800-1000
    s, v = _block(rng, length)
    rise = rng.uniform(-3, 3, size=(length, 1))  # (L, 1): the block above or below the history
    cases.append(
        _UpdateCase(
            "large scores", draw(length, seen) + top, draw(seen, v.shape[1]), s + top + rise, v
        )
    )
    length, seen = int(rng.integers(3, 6)), size()
    low = FAR_BELOW - rng.uniform(0, 100, size=(length, 1))  # (L, 1): every score below -900
    s, v = _block(rng, length)
    cases.append(
        _UpdateCase("far below 0", draw(length, seen) + low, draw(seen, v.shape[1]), s + low, v)
    )
    length, seen = int(rng.integers(3, 6)), size()
    history, (s, v) = draw(length, seen), _block(rng, length)
    history[0] = -np.inf  # row 0 has seen no key, and meets none in this block either
    cases.append(
        _UpdateCase("masked block", history, draw(seen, v.shape[1]), np.full_like(s, -np.inf), v)
    )
    return cases


def _block(rng: np.random.Generator, length: int) -> tuple[np.ndarray, np.ndarray]:
    """A new block's scores (L, bk) and values (bk, Ev), bk and Ev from 2 to 5."""
    block, width = int(rng.integers(2, 6)), int(rng.integers(2, 6))
    return rng.normal(size=(length, block)), rng.normal(size=(block, width))


_HINTS = {
    "acc not rescaled": "the accumulator was not rescaled when the maximum changed ({rows}: "
    "the maximum rose there): multiply acc by exp(m - m_new) before adding p @ v",
    "total not rescaled": "total was not rescaled when the maximum changed ({rows}: the "
    "maximum rose there): total_new = exp(m - m_new) * total + rowsum(p)",
    "rescale inverted": "the rescale factor is upside down ({rows}): the old state is "
    "re-measured against the new maximum by exp(m - m_new) <= 1, not exp(m_new - m)",
    "old max forgotten": "m_new ignores the old maximum ({rows}: everything in this block is "
    "below m): m_new = max(m, rowmax(s))",
    "block max": "m_new is the largest score of the whole block, not of each row ({rows}): "
    "take the maximum along the keys, s.max(axis=-1, keepdims=True)",
    "normalised": "acc was divided by total: keep acc unnormalised (a sum of exp(s - m) * v); "
    "the division happens once, after the last block",
    "masked row": "{rows} came out NaN: every score they have seen is masked, so m and m_new "
    "are -inf and exp(-inf - (-inf)) is NaN; shift by 0 where m_new is -inf "
    "(attention_lib.flash.tiles.row_shift does this)",
    "first keys": "{rows} came out NaN or inf: their first unmasked scores arrive in this "
    "block (m = -inf), where the old state's factor exp(m - m_new) is 0; exp(m_new - m) "
    "is inf there, and inf * 0 is NaN",
    "overflow": "the state has inf or NaN at scores near 1000: exp(1000) overflows; take "
    "p = exp(s - m_new) and rescale the old state by exp(m - m_new), both at most 1",
    "underflow": "{rows} lost every term: their scores all lie below -900, where exp(s) is 0 "
    "in float64; take p = exp(s - m_new), whose largest term is exp(0) = 1",
}


def _not_finite(case: _UpdateCase, got: tuple[np.ndarray, ...]) -> tuple[str, str] | None:
    """(cause, hint) for a state with NaN or inf (m = -inf excepted), or None."""
    (m, _, _), (m_new, _, _) = case.states()
    m1, total1, acc1 = got
    state = np.concatenate([np.where(np.isneginf(m1), 0.0, m1), total1, acc1], axis=-1)
    bad = ~np.all(np.isfinite(state), axis=-1)  # (L,): NaN or inf anywhere but m = -inf
    if not np.any(bad):
        return None
    where = rows_text(bad).capitalize()
    if np.all(np.isneginf(m_new[bad])):
        return "masked row", _HINTS["masked row"].format(rows=where)
    if np.all(np.isneginf(m[bad])):
        return "first keys", _HINTS["first keys"].format(rows=where)
    if np.max(case.scores[np.isfinite(case.scores)], initial=-np.inf) > 700:
        return "overflow", _HINTS["overflow"]
    if np.all(m_new[bad] < -700):
        return "underflow", _HINTS["underflow"].format(rows=where)
    return "not finite", f"NaN or inf in {rows_text(bad)}: exp of a large score, or -inf - (-inf)?"


def _update_mistake(case: _UpdateCase, got: tuple[np.ndarray, ...]) -> tuple[str, str]:
    """(cause, hint) for a wrong update, from the known mistakes' outputs."""
    (m, total, acc), (m_new, total_new, acc_new) = case.states()
    m1, total1, acc1 = got
    found = _not_finite(case, got)
    if found:
        return found
    shift = row_shift(np, m_new)  # (L, 1)
    p = np.exp(case.scores - shift)  # (L, bk)
    rose = (m_new > m)[:, 0]  # (L,): rows whose maximum rose
    if not close(m1, m_new):
        block_max = np.max(case.scores, axis=-1, keepdims=True)  # (L, 1)
        if close(m1, block_max):
            return "old max forgotten", _HINTS["old max forgotten"].format(
                rows=rows_text((m > block_max)[:, 0])
            )
        whole = np.maximum(m, np.max(case.scores))  # (L, 1): one maximum for every row
        wrong = ~rows_close(m1, m_new)
        if close(m1, whole):
            return "block max", _HINTS["block max"].format(rows=rows_text(wrong))
        return "m wrong", f"m_new differs in {rows_text(wrong)}: m_new = max(m, rowmax(s))"
    lost = (total1 == 0)[:, 0] & (total_new > 0)[:, 0] & (m_new < -700)[:, 0]  # (L,)
    if np.any(lost):
        return "underflow", _HINTS["underflow"].format(rows=rows_text(lost).capitalize())
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
    if float32_like(total1, total_new) or float32_like(acc1, acc_new):
        return "float32", HINT_FLOAT64
    parts = [
        f"{name} differs in {rows_text(~rows_close(x, want))}"
        for name, x, want in (("total_new", total1, total_new), ("acc_new", acc1, acc_new))
        if not close(x, want)
    ]
    said = "; ".join(parts) or "the state differs"
    return "unknown", f"{said} (the maximum rose in {rows})"


def _state_of(
    got: Any, want: tuple[np.ndarray, ...], name: str, shape: str
) -> tuple[tuple[np.ndarray, ...] | None, CaseResult | None]:
    """The learner's returned state as three float arrays, or the failed case saying why not."""
    if not isinstance(got, tuple | list) or len(got) != 3:
        hint = "return the three new quantities: return m_new, total_new, acc_new"
        return None, CaseResult(name, shape, False, None, hint, "shape")
    state = []
    for what, x, w in zip(("m_new", "total_new", "acc_new"), got, want, strict=True):
        array, cause, problem = as_array(x, what)
        problem = problem or shape_problem(array, w, what, "keep the row axis: keepdims=True")
        if problem:
            return None, CaseResult(name, shape, False, None, problem, cause or "shape")
        state.append(array)
    return tuple(state), None


def _run_update(fn: Callable[..., Any], case: _UpdateCase) -> CaseResult:
    state, want = case.states()
    got, failed = call(fn, (*state, case.scores, case.values), case.name, case.shape, _NAMES)
    if failed:
        return failed
    got, failed = _state_of(got, want, case.name, case.shape)
    if failed:
        return failed
    error = max(max_error(x, w) for x, w in zip(got, want, strict=True))
    if all(close(x, w) for x, w in zip(got, want, strict=True)):
        return CaseResult(case.name, case.shape, True, error, "")
    cause, hint = _update_mistake(case, got)
    shown = None if np.isnan(error) else error
    return CaseResult(case.name, case.shape, False, shown, hint, cause)


def whole_row_case(seed: int = 0) -> tuple[np.ndarray, np.ndarray, int]:
    """The last case of `check_online_update` for ``seed``: scores (3, S), values (S, Ev), and
    the block size. Row 0 holds ordinary scores, row 1 scores near +1000, row 2 scores far
    below zero."""
    rng = np.random.default_rng([seed, 1])
    keys, width, block = int(rng.integers(17, 27)), int(rng.integers(2, 6)), int(rng.integers(4, 7))
    scores = rng.normal(size=(3, keys)) * 2  # (3, S)
    scores[1] += LARGE - 100
    scores[2] += FAR_BELOW - 50
    return scores, rng.normal(size=(keys, width)), block


def _run_whole_row(fn: Callable[..., Any], seed: int) -> CaseResult:
    """The update applied block by block from the empty state: acc / total = softmax(s) @ v."""
    scores, values, block = whole_row_case(seed)
    name = "whole rows"
    shape = f"L=3 S={scores.shape[1]} bk={block}"
    state: Any = _state(scores[:, :0], values[:0])
    for k0 in range(0, scores.shape[1], block):
        s, v = scores[:, k0 : k0 + block], values[k0 : k0 + block]  # (3, bk), (bk, Ev)
        want = _state(scores[:, : k0 + block], values[: k0 + block])
        got, failed = call(fn, (*state, s, v), name, shape, _NAMES)
        if failed:
            return failed
        state, failed = _state_of(got, want, name, shape)
        if failed:
            return failed
    want = softmax(scores, axis=-1) @ values  # (3, Ev)
    with np.errstate(all="ignore"):
        out = state[2] / state[1]  # (3, Ev)
    error = max_error(out, want)
    if close(out, want):
        return CaseResult(name, shape, True, error, "")
    bad = ~rows_close(out, want)  # (3,)
    kinds = ["ordinary scores", "scores near +1000", "scores far below zero"]
    said = ", ".join(kind for kind, b in zip(kinds, bad, strict=True) if b)
    hint = (
        f"after the last block, acc / total differs from softmax(s) @ v in {rows_text(bad)} "
        f"({said})"
    )
    cause = "whole row"
    if float32_like(out, want):
        cause, hint = "float32", HINT_FLOAT64
    return CaseResult(name, shape, False, None if np.isnan(error) else error, hint, cause)


@np.errstate(all="ignore")  # a wrong answer's inf and NaN are for the report to name
def check_online_update(
    fn: Callable[..., Any], *, verbose: bool = True, seed: int | None = None
) -> OnlineUpdateCheck:
    """Check the learner's ``fn(m, total, acc, s, v) -> (m_new, total_new, acc_new)``.

    m and total (L, 1), acc (L, Ev), s (L, bk) the new block of scores
    (already scaled; -inf where a key is masked), v (bk, Ev), all float64 and
    read-only. Seven cases of one step each (`update_cases`), then whole rows
    in blocks (`whole_row_case`), drawn from ``seed`` (None: the attempt's
    own). Prints the report when ``verbose``; returns it. Raises TypeError if
    ``fn`` is not callable.
    """
    if not callable(fn):
        raise TypeError(f"check_online_update needs a function, got {type(fn).__name__}")
    seed = seeded(seed, fn)
    results = [_run_update(fn, case) for case in update_cases(seed)]
    report = OnlineUpdateCheck((*results, _run_whole_row(fn, seed)), seed=seed)
    if verbose:
        print(report)
    return report
