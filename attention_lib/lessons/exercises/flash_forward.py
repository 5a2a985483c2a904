"""Notebook 07, exercise 2: the tiled forward pass in numpy, with the log-sum-exp, checked.

`check_flash_forward(fn)`: the learner's ``fn(q, k, v, block_q, block_k,
is_causal)`` returns the output (L, Ev) and each row's log-sum-exp (L,),
for q (L, E), k (S, E), v (S, Ev), L != S, block sizes that need not divide
the lengths, and PyTorch's top-left causal mask. The oracle is
`attention_lib.scaled_dot_product_attention` for the output and numpy's
``logaddexp`` over the library's masked scores for lse.

A wrong answer is compared with what the usual mistakes produce (no scale,
the last key block left out, the causal mask ignored, the tiles across the
diagonal not masked, the mask aligned bottom-right or hiding the diagonal,
acc not divided by total, lse without m or without the log) and the report
names the one it matches, or the rows and query blocks where it differs.

A right answer must also be reached the way the exercise asks: while the
learner's function runs, its ``online_update`` (the exercise-1 function, found
by name in the function's module: a notebook's namespace) is watched. It must
be called on tiles no larger than block_q x block_k, never on a tile above the
diagonal when causal (one whose scores are all masked), and every output row
must be acc / total of a state it returned: an untiled pass that builds the
whole score matrix, or one that does its own arithmetic, does not pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ...core import scaled_dot_product_attention
from ...flash.tiles import key_blocks, query_blocks
from .base import (
    CaseResult,
    CheckReport,
    call,
    case_scores,
    close,
    log_sum_exp,
    max_error,
    rows_text,
    shape_problem,
)

__all__ = ["FlashForwardCheck", "check_flash_forward", "forward_cases"]


@dataclass(frozen=True)
class FlashForwardCheck(CheckReport):
    """Exercise 2's report: one `CaseResult` per case."""

    SUBJECT: ClassVar[str] = (
        "attention_lib.scaled_dot_product_attention (the output) and numpy's logaddexp (lse)"
    )
    QUESTION: ClassVar[str] = (
        "Which key blocks does each query block visit, and which of them need the causal mask?"
    )


@dataclass(frozen=True)
class _ForwardCase:
    name: str
    query: np.ndarray  # (L, E)
    key: np.ndarray  # (S, E)
    value: np.ndarray  # (S, Ev)
    block_q: int
    block_k: int
    is_causal: bool

    @property
    def shape(self) -> str:
        causal = " causal" if self.is_causal else ""
        return f"L={len(self.query)} S={len(self.key)} {self.block_q}x{self.block_k}{causal}"


def forward_cases(seed: int = 0) -> list[_ForwardCase]:
    """The seeded cases of `check_flash_forward`: L != S, uneven tiles, causal, large scores."""
    rng = np.random.default_rng(seed)
    plan = [  # name, L, S, E, Ev, block_q, block_k, causal, size of q
        ("one tile", 6, 6, 4, 3, 8, 8, False, 1.0),
        ("uneven tiles", 11, 13, 8, 4, 4, 5, False, 1.0),
        ("causal, L < S", 6, 10, 8, 4, 4, 3, True, 1.0),
        ("causal, L > S", 10, 6, 8, 4, 3, 4, True, 1.0),
        ("tiles of one", 5, 7, 4, 2, 1, 1, True, 1.0),
        ("large scores", 7, 9, 16, 4, 3, 4, False, 400.0),  # scores past exp's range
    ]
    cases = []
    for name, n, s, e, ev, bq, bk, causal, size in plan:
        q, k, v = rng.normal(size=(n, e)) * size, rng.normal(size=(s, e)), rng.normal(size=(s, ev))
        cases.append(_ForwardCase(name, q, k, v, bq, bk, causal))
    return cases


def _attend(case: _ForwardCase, keep: np.ndarray | None = None, **kw: Any) -> np.ndarray:
    """The reference output with the case's causal flag, or with a boolean mask ``keep``."""
    q, k, v = case.query, case.key, case.value
    if keep is None:
        return scaled_dot_product_attention(q, k, v, is_causal=case.is_causal, **kw)
    return scaled_dot_product_attention(q, k, v, keep, **kw)  # (L, Ev)


def _tile_mask(case: _ForwardCase) -> np.ndarray:
    """Keys in the tiles a causal loop visits, with no mask inside them: (L, S) bool."""
    keep = np.zeros((case.query.shape[0], case.key.shape[0]), dtype=bool)
    for r0, r1 in query_blocks(case.query.shape[0], case.block_q):
        for k0, k1 in key_blocks((r0, r1), case.key.shape[0], case.block_k, True):
            keep[r0:r1, k0:k1] = True
    return keep


def _forward_mistake(case: _ForwardCase, out: np.ndarray) -> tuple[str, str]:
    """(cause, hint) for a wrong output."""
    length, keys = case.query.shape[0], case.key.shape[0]
    i, j = np.arange(length)[:, None], np.arange(keys)[None, :]
    causal = (j <= i) if case.is_causal else np.ones((length, keys), dtype=bool)  # (L, S)
    if not np.all(np.isfinite(out)):
        bad = ~np.all(np.isfinite(out), axis=-1)  # (L,)
        if case.is_causal and length > keys and np.array_equal(bad, i[:, 0] < length - keys):
            return "bottom-right", (
                f"rows 0–{length - keys - 1} are NaN: your causal mask is aligned bottom-right "
                f"(query i sees keys up to i + S - L = i{keys - length:+d}), which leaves them no "
                "key; PyTorch's is_causal is top-left: keys j <= i"
            )
        if case.is_causal and bad[0] and not np.any(bad[1:]):
            return "diagonal masked", (
                "row 0 is NaN: it sees no key at all, so the diagonal must be masked too; "
                "with is_causal query i sees keys j <= i, key i included"
            )
        return "not finite", (
            f"NaN or inf in {rows_text(bad)}: exp of a large score (subtract "
            "the running maximum first), or -inf - (-inf) in a row with no key yet"
        )
    cut = keys // case.block_k * case.block_k  # the start of a short last key block
    candidates = [("no scale", _attend(case, scale=1.0))]
    if cut < keys:
        candidates.append(("last key block", _attend(case, causal & (j < cut))))
    if case.is_causal:
        candidates += [
            ("causal ignored", _attend(case, np.ones_like(causal))),
            ("tiles not masked", _attend(case, _tile_mask(case))),
            ("bottom-right", _attend(case, j <= i + keys - length)),
            ("diagonal masked", _attend(case, j < i)),
        ]
    scores = case_scores(case.query, case.key, case.is_causal)  # (L, S)
    total = np.exp(log_sum_exp(scores) - scores.max(axis=-1))[:, None]  # (L, 1)
    candidates.append(("not divided", _attend(case) * total))
    hints = {
        "no scale": "the scores were not multiplied by 1/sqrt(E) (E = query width)",
        "last key block": f"the last key block (keys {cut}–{keys - 1}, shorter than block_k "
        f"= {case.block_k}) was left out: the blocks must cover all {keys} keys",
        "causal ignored": "is_causal had no effect: query i must not see keys after i",
        "tiles not masked": "the tiles that cross the diagonal were not masked: inside them "
        "query i still saw keys j > i; skipping the tiles above it is not enough",
        "bottom-right": f"your causal mask is aligned bottom-right (query i sees keys up to "
        f"i + S - L = i{keys - length:+d}); PyTorch's is_causal is top-left: keys j <= i",
        "diagonal masked": "the diagonal is masked: query i must see key i (keep j <= i)",
        "not divided": "the output was not divided by total after the last key block",
    }
    for cause, theirs in candidates:
        if close(out, theirs):
            return cause, hints[cause]
    want = _attend(case)
    bad = ~np.all(np.isclose(out, want), axis=-1)  # (L,)
    row_blocks = query_blocks(length, case.block_q)
    blocks = [b for b, (r0, r1) in enumerate(row_blocks) if bad[r0:r1].any()]
    cut_q = length // case.block_q * case.block_q
    if cut_q < length and blocks == [len(row_blocks) - 1]:
        return "last query block", (
            f"rows {cut_q}–{length - 1} (the last query block, shorter than block_q = "
            f"{case.block_q}) are wrong; the rows before are right"
        )
    return "unknown", (
        f"the output differs in {rows_text(bad)} (query blocks {', '.join(map(str, blocks))}); "
        "check the exercise-1 update on those rows' tiles"
    )


def _lse_mistake(case: _ForwardCase, lse: np.ndarray, want: np.ndarray) -> tuple[str, str]:
    scores = case_scores(case.query, case.key, case.is_causal)  # (L, S)
    m = scores.max(axis=-1)  # (L,)
    total = np.exp(want - m)  # (L,)
    for cause, theirs, hint in (
        ("lse is m", m, "lse is the row maximum m alone: lse = m + log(total)"),
        ("lse lacks m", np.log(total), "lse is log(total) alone: add m back, lse = m + log(total)"),
        ("lse not logged", m + total, "lse = m + log(total): the log of total, not total"),
    ):
        if close(lse, theirs):
            return cause, hint
    return "lse", f"lse differs in {rows_text(~np.isclose(lse, want))}: lse = m + log(total)"


@dataclass
class _Tiles:
    """What the learner's ``online_update`` was called with, and what it returned."""

    found: bool = False  # the function's module has an online_update to watch
    shapes: list[tuple[int, ...]] = field(default_factory=list)  # each call's s.shape
    empty: int = 0  # calls whose scores were all masked: a tile above the diagonal
    rows: list[np.ndarray] = field(default_factory=list)  # each returned acc / total

    def record(self, s: Any, state: Any) -> None:
        s = np.asarray(s, dtype=float)
        self.shapes.append(s.shape)
        self.empty += bool(s.size and np.all(np.isneginf(s)))
        try:
            total, acc = (np.asarray(x, dtype=float) for x in state[1:3])
            with np.errstate(all="ignore"):
                self.rows.append((acc / total).reshape(-1, acc.shape[-1]))  # (bq, Ev)
        except Exception:  # a state of the wrong kind: exercise 1's checker explains it
            pass


@contextmanager
def _watch(fn: Callable[..., Any]) -> Iterator[_Tiles]:
    """Record the calls ``fn`` makes to ``online_update`` in its own module's namespace."""
    tiles = _Tiles()
    space = getattr(fn, "__globals__", None)
    update = space.get("online_update") if isinstance(space, dict) else None
    if not callable(update):
        yield tiles
        return

    def watched(m: Any, total: Any, acc: Any, s: Any, v: Any) -> Any:
        state = update(m, total, acc, s, v)
        tiles.record(s, state)
        return state

    tiles.found = True
    space["online_update"] = watched
    try:
        yield tiles
    finally:
        space["online_update"] = update


def _tiling_problem(case: _ForwardCase, tiles: _Tiles, out: np.ndarray) -> tuple[str, str]:
    """(cause, hint) when a right answer was not built tile by tile by online_update."""
    if not tiles.found or not tiles.shapes:
        return "no online_update", (
            "the output is right, but your function never called online_update: build the "
            "pass from exercise 1's update, one tile of scores at a time"
        )
    big = [
        sh for sh in tiles.shapes if len(sh) != 2 or sh[0] > case.block_q or sh[1] > case.block_k
    ]
    if big:
        return "not tiled", (
            f"online_update got scores of shape {big[0]}, larger than one tile, block_q x "
            f"block_k = {case.block_q} x {case.block_k}: walk the keys block by block instead "
            "of building the whole score matrix"
        )
    if case.is_causal and tiles.empty:
        return "tile above diagonal", (
            f"{tiles.empty} tile(s) above the diagonal were computed (every score in them "
            "masked): with is_causal, stop each query block's key loop at its last row"
        )
    found = np.concatenate(tiles.rows) if tiles.rows else np.empty((0, out.shape[-1]))
    own = [bool(np.any(np.all(np.isclose(found, row), axis=-1))) for row in out]
    if not all(own):
        return "own arithmetic", (
            f"{rows_text(~np.array(own))} of the output are not acc / total of any state "
            "online_update returned: let exercise 1's update do the arithmetic"
        )
    return "", ""


def _run_forward(
    fn: Callable[..., Any], case: _ForwardCase, call_as: Callable[..., Any] | None = None
) -> CaseResult:
    """One case; ``call_as`` (default ``fn``) is called with flash_forward's arguments, while
    the online_update watched is the one in ``fn``'s namespace (exercise 2's steps)."""
    args = (case.query, case.key, case.value, case.block_q, case.block_k, case.is_causal)
    with _watch(fn) as tiles:
        got, failed = call(call_as or fn, args, case.name, case.shape)
    if failed:
        return failed
    if not isinstance(got, tuple | list) or len(got) != 2:
        hint = "return two arrays: the output (L, Ev) and the log-sum-exp (L,)"
        return CaseResult(case.name, case.shape, False, None, hint, "shape")
    want = _attend(case)  # (L, Ev)
    want_lse = log_sum_exp(case_scores(case.query, case.key, case.is_causal))  # (L,)
    for what, x, w, advice in (
        ("the output", got[0], want, "queries x value width"),
        ("lse", got[1], want_lse, "one number per query row"),
    ):
        problem = shape_problem(x, w, what, advice)
        if problem:
            return CaseResult(case.name, case.shape, False, None, problem, "shape")
    out, lse = (np.asarray(x, dtype=float) for x in got)
    error = max(max_error(out, want), max_error(lse, want_lse))
    if not close(out, want):
        cause, hint = _forward_mistake(case, out)
    elif not close(lse, want_lse):
        cause, hint = _lse_mistake(case, lse, want_lse)
    else:
        cause, hint = _tiling_problem(case, tiles, out)
        if not cause:
            return CaseResult(case.name, case.shape, True, error, "")
    return CaseResult(case.name, case.shape, False, None if np.isnan(error) else error, hint, cause)


def check_flash_forward(
    fn: Callable[..., Any], *, verbose: bool = True, seed: int = 0
) -> FlashForwardCheck:
    """Check the learner's ``fn(q, k, v, block_q, block_k, is_causal) -> (out, lse)``.

    q (L, E), k (S, E), v (S, Ev) float64 numpy arrays; block_q and block_k
    ints (not necessarily dividing L and S); is_causal a bool, top-left
    aligned as in PyTorch (query i sees keys j <= i). The scale is
    1/sqrt(E). ``out`` (L, Ev) must equal `scaled_dot_product_attention`
    and ``lse`` (L,) each row's natural log of the sum of exp(scores).
    Prints the report when ``verbose``; returns it. Raises TypeError if
    ``fn`` is not callable.
    """
    if not callable(fn):
        raise TypeError(f"check_flash_forward needs a function, got {type(fn).__name__}")
    report = FlashForwardCheck(tuple(_run_forward(fn, c) for c in forward_cases(seed)), ())
    if verbose:
        print(report)
    return report
