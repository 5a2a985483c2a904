"""Notebook 07, exercise 2: the tiled forward pass in numpy, with the log-sum-exp, checked.

`check_flash_forward(fn)`: the learner's ``fn(q, k, v, block_q, block_k,
is_causal)`` returns the output (L, Ev) and each row's log-sum-exp (L,),
for q (L, E), k (S, E), v (S, Ev), L != S, block sizes that need not divide
the lengths, and PyTorch's top-left causal mask, on cases drawn from a seed
(`forward_cases`: one tile, uneven tiles, causal with L < S and L > S, tiles
of one, scores near 1000, rows whose scores all lie far below zero). The
oracle is `attention_lib.scaled_dot_product_attention` for the output and
numpy's ``logaddexp`` over the library's masked scores for lse.

A wrong answer is compared with what the usual mistakes produce (no scale,
the last key block left out, the causal mask ignored, the tiles across the
diagonal not masked, the mask aligned bottom-right or hiding the diagonal,
acc not divided by total, a running maximum that starts at 0, lse without m
or without the log, float32) and the report names the one it matches, or
the rows and query blocks where it differs.

A right answer must also be reached the way the exercise asks (`tiling`):

- what is read: k and v come as `attention_course.lessons.exercises.watch.Watched`
  arrays, which record the keys each computation reads. Every read must lie
  in the tile handed to ``online_update`` next (or just before): no whole
  score matrix, no tile computed and then skipped, and with ``is_causal`` no
  key block past a query block's last row;
- what reaches the learner's ``online_update`` (the exercise-1 function,
  found by name in the function's module: a notebook's namespace, and
  watched while the function runs): tiles no larger than block_q x block_k,
  each a real block of the scaled, masked score matrix, each query block's
  tiles covering its keys once, and every output row acc / total of a state
  it returned.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from attention_lib.core import scaled_dot_product_attention
from attention_lib.flash.tiles import key_blocks, query_blocks

from .base import (
    HINT_FLOAT64,
    CaseResult,
    CheckReport,
    as_array,
    case_scores,
    close,
    float32_like,
    log_sum_exp,
    max_error,
    rows_close,
    rows_text,
    seeded,
    shape_problem,
)
from .draws import apart, far_below, large_scores
from .guards import call
from .watch import Reads, rows_of, watched

__all__ = ["FlashForwardCheck", "check_flash_forward", "forward_cases"]

_NAMES = ("q", "k", "v", "block_q", "block_k", "is_causal")


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


def _uneven(rng: np.random.Generator, length: int) -> int:
    """A block size from 3 to 5 that does not divide ``length`` (the last block is short)."""
    return int(rng.choice([b for b in (3, 4, 5) if length % b]))


def forward_cases(seed: int = 0) -> list[_ForwardCase]:
    """The cases of `check_flash_forward` for ``seed``: one tile; uneven tiles; causal with L < S
    and with L > S (tiles wholly above the diagonal in both); tiles of one; scores near 1000;
    rows whose scores all lie far below zero. Head widths 4 to 32, three of them or more."""
    rng = np.random.default_rng(seed)
    widths = [*rng.permutation([4, 8, 16, 32]), *rng.choice([4, 8, 16, 32], size=3)]
    n, s = apart(rng, 3, 7)
    wide_n, wide_s = apart(rng, 9, 14)
    few = int(rng.integers(4, 8))

    def blocks() -> tuple[int, int]:
        return int(rng.integers(2, 5)), int(rng.integers(2, 5))

    plan = [  # name, L, S, block_q, block_k, causal
        ("one tile", n, s, 8, 8, False),
        ("uneven tiles", wide_n, wide_s, _uneven(rng, wide_n), _uneven(rng, wide_s), False),
        ("causal, L < S", few, few + int(rng.integers(2, 7)), *blocks(), True),
        ("causal, L > S", few + int(rng.integers(2, 6)), few, *blocks(), True),
        ("tiles of one", *apart(rng, 3, 6), 1, 1, True),
        ("large scores", *apart(rng, 6, 10), *blocks(), False),
        ("far below 0", *apart(rng, 6, 10), *blocks(), False),
    ]
    cases = []
    for (name, length, keys, bq, bk, causal), width in zip(plan, widths, strict=True):
        q, k = rng.normal(size=(length, width)), rng.normal(size=(keys, width))  # (L, E), (S, E)
        v = rng.normal(size=(keys, int(rng.integers(2, 6))))  # (S, Ev)
        if name == "large scores":
            q = large_scores(rng, q, k)
        if name == "far below 0":
            rows = rng.random(length) < 0.5
            rows[int(rng.integers(length))] = True
            q, k = far_below(rng, q, k, rows)
        cases.append(_ForwardCase(name, q, k, v, int(bq), int(bk), causal))
    return cases


def _attend(case: _ForwardCase, keep: np.ndarray | None = None, **kw: Any) -> np.ndarray:
    """The reference output with the case's causal flag, or with a boolean mask ``keep``."""
    q, k, v = case.query, case.key, case.value
    with np.errstate(all="ignore"):
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


# -- what reaches online_update, and what is read ----------------------------------------


@dataclass
class _Tile:
    """One call of the learner's online_update: the scores, where they lie, what came back."""

    scores: np.ndarray  # (h, w) as handed over
    cols: tuple[int, int] | None  # the keys of the v handed over, [c0, c1), if a slice of v
    m: np.ndarray  # the running maximum handed over
    out: np.ndarray | None  # acc / total of the state returned, (h, Ev)
    at: tuple[int, int] | None = None  # (r0, c0) of the block of the score matrix it is


@dataclass
class _Tiles:
    """What the learner's ``online_update`` was called with, and what was read around it."""

    found: bool = False  # the function's module has an online_update to watch
    tiles: list[_Tile] = field(default_factory=list)
    reads: Reads = field(default_factory=Reads)

    def record(self, m: Any, s: Any, v: Any, state: Any) -> None:
        try:
            s = np.array(s, dtype=float)
        except Exception:  # not scores at all: no block of the score matrix
            s = np.full(1, np.nan)
        cols, keys = None, rows_of(v)
        if keys is not None and keys.size and keys[-1] - keys[0] + 1 == keys.size:
            cols = (int(keys[0]), int(keys[-1]) + 1)
        out = None
        try:
            total, acc = (np.asarray(x, dtype=float) for x in state[1:3])
            with np.errstate(all="ignore"):
                out = (acc / total).reshape(-1, acc.shape[-1])  # (h, Ev)
        except Exception:  # a state of the wrong kind: exercise 1's checker explains it
            pass
        try:
            m = np.asarray(m, dtype=float)
        except Exception:  # a state of the wrong kind, as above
            m = np.full(1, np.nan)
        self.tiles.append(_Tile(s, cols, m, out))
        self.reads.tile(len(self.tiles) - 1)


@contextmanager
def _watch(fn: Callable[..., Any], tiles: _Tiles) -> Iterator[_Tiles]:
    """Record the calls ``fn`` makes to ``online_update`` in its own module's namespace."""
    space = getattr(fn, "__globals__", None)
    update = space.get("online_update") if isinstance(space, dict) else None
    if not callable(update):
        yield tiles
        return

    def watched_update(m: Any, total: Any, acc: Any, s: Any, v: Any) -> Any:
        state = update(m, total, acc, s, v)
        tiles.record(m, s, v, state)
        return state

    tiles.found = True
    space["online_update"] = watched_update
    try:
        yield tiles
    finally:
        space["online_update"] = update


def _locate(tile: _Tile, full: np.ndarray) -> tuple[int, int] | None:
    """(r0, c0) of the block of ``full`` (L, S) that ``tile``'s scores are, or None."""
    s = tile.scores
    if s.ndim != 2 or s.shape[0] > full.shape[0] or s.shape[1] > full.shape[1]:
        return None
    h, w = s.shape
    starts = [tile.cols[0]] if tile.cols and tile.cols[1] - tile.cols[0] == w else None
    for c0 in starts or range(full.shape[1] - w + 1):
        for r0 in range(full.shape[0] - h + 1):
            if close(s, full[r0 : r0 + h, c0 : c0 + w]):
                return r0, c0
    return None


def _keys(span: tuple[int, int] | None) -> str:
    return "no keys" if span is None else rows_text(np.arange(span[1]) >= span[0], "key")


def _reading_problem(case: _ForwardCase, tiles: _Tiles) -> tuple[str, str]:
    """(cause, hint) for keys read outside the tile they are read for ("" when none)."""

    def span(i: int | None) -> tuple[int, int] | None:
        if i is None:
            return None
        tile = tiles.tiles[i]
        if tile.cols:
            return tile.cols
        return (tile.at[1], tile.at[1] + tile.scores.shape[1]) if tile.at else None

    events = tiles.reads.events
    index = [e[1] if e[0] == "tile" else None for e in events]
    for n, (kind, name, keys) in enumerate(events):
        if kind != "read" or keys.size == 0:
            continue
        before = next((i for i in reversed(index[:n]) if i is not None), None)
        after = next((i for i in index[n:] if i is not None), None)
        owner = next(
            (i for i in (after, before) if (s := span(i)) and s[0] <= keys[0] and keys[-1] < s[1]),
            None,
        )
        near = owner if owner is not None else before if before is not None else after
        tile = tiles.tiles[near] if near is not None else None
        read = rows_text(np.isin(np.arange(keys[-1] + 1), keys), "key")
        if tile is not None and tile.at is not None:
            r0, r1 = tile.at[0], tile.at[0] + tile.scores.shape[0]
            if case.is_causal and keys[0] >= r1:
                return "tile above diagonal", (
                    f"query rows {r0}–{r1 - 1} read {read} of {name}, past the block's last "
                    f"row ({r1 - 1}): with is_causal those tiles lie wholly above the diagonal; "
                    "stop each query block's key loop at its last row, min(S, r1), and never "
                    "compute them"
                )
        if owner is not None:
            continue
        if keys[-1] - keys[0] + 1 > case.block_k:
            return "not tiled", (
                f"your function read {read} of {name} at once, more than one tile (block_k = "
                f"{case.block_k}): read k[k0:k1] and v[k0:k1] one tile at a time, for the tile "
                "you hand to online_update (np.asarray(k) or k.sum() reads every key)"
            )
        return "read outside tiles", (
            f"your function read {read} of {name}, which the tile it handed to online_update "
            f"next ({_keys(span(after))}) does not use: read k and v one tile at a time"
        )
    return "", ""


def _covering_problem(case: _ForwardCase, tiles: list[_Tile]) -> tuple[str, str]:
    """(cause, hint) when the tiles do not cover each query block's keys exactly once."""
    length, keys = case.query.shape[0], case.key.shape[0]
    blocks: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for tile in tiles:
        (r0, c0), (h, w) = tile.at, tile.scores.shape
        blocks.setdefault((r0, r0 + h), []).append((c0, c0 + w))
    rows = np.zeros(length, dtype=int)
    for r0, r1 in blocks:
        rows[r0:r1] += 1
    if np.any(rows != 1):
        return "rows twice", (
            f"the tiles' query rows overlap or leave rows out ({rows_text(rows != 1)} are in "
            f"{'no' if np.any(rows == 0) else 'more than one'} query block): each row belongs "
            "to one block of block_q rows"
        )
    for (r0, r1), spans in sorted(blocks.items()):
        seen = np.zeros(keys, dtype=int)
        for c0, c1 in spans:
            seen[c0:c1] += 1
        need = min(keys, r1) if case.is_causal else keys
        if np.any(seen > 1):
            return "keys twice", (
                f"query rows {r0}–{r1 - 1} got {rows_text(seen > 1, 'key')} more than once: "
                "each query block's tiles cover its keys once"
            )
        if np.any(seen[:need] == 0):
            return "keys missed", (
                f"query rows {r0}–{r1 - 1} never got {rows_text(seen[:need] == 0, 'key')}: "
                "each query block's tiles cover every key it may see"
            )
    return "", ""


def _tiling_problem(case: _ForwardCase, tiles: _Tiles, out: np.ndarray) -> tuple[str, str]:
    """(cause, hint) when a right answer was not built tile by tile by online_update."""
    if not tiles.found or not tiles.tiles:
        return "no online_update", (
            "the output is right, but your function never called online_update: build the "
            "pass from exercise 1's update, one tile of scores at a time"
        )
    big = [
        t.scores.shape
        for t in tiles.tiles
        if t.scores.ndim != 2
        or t.scores.shape[0] > case.block_q
        or t.scores.shape[1] > case.block_k
    ]
    if big:
        return "not tiled", (
            f"online_update got scores of shape {big[0]}, larger than one tile, block_q x "
            f"block_k = {case.block_q} x {case.block_k}: walk the keys block by block instead "
            "of building the whole score matrix"
        )
    full = case_scores(case.query, case.key, case.is_causal)  # (L, S)
    for tile in tiles.tiles:
        tile.at = _locate(tile, full)
    cause, hint = _reading_problem(case, tiles)
    if cause:
        return cause, hint
    empty = sum(bool(t.scores.size and np.all(np.isneginf(t.scores))) for t in tiles.tiles)
    if case.is_causal and empty:
        return "tile above diagonal", (
            f"{empty} tile(s) above the diagonal were computed (every score in them "
            "masked): with is_causal, stop each query block's key loop at its last row"
        )
    lost = next((n for n, t in enumerate(tiles.tiles) if t.at is None), None)
    if lost is not None:
        return "not a block", (
            f"call {lost + 1} of online_update got scores of shape {tiles.tiles[lost].scores.shape}"
            " that are no block of the scaled, masked score matrix: hand it q[r0:r1] @ "
            "k[k0:k1].T / sqrt(E), -inf where the causal mask hides a key"
        )
    cause, hint = _covering_problem(case, tiles.tiles)
    if cause:
        return cause, hint
    found = [t.out for t in tiles.tiles if t.out is not None]
    states = np.concatenate(found) if found else np.empty((0, out.shape[-1]))
    own = [bool(np.any(rows_close(states, row))) for row in out]
    if not all(own):
        return "own arithmetic", (
            f"{rows_text(~np.array(own))} of the output are not acc / total of any state "
            "online_update returned: let exercise 1's update do the arithmetic"
        )
    return "", ""


# -- the numbers -----------------------------------------------------------------------------


def _forward_mistake(case: _ForwardCase, out: np.ndarray, tiles: _Tiles) -> tuple[str, str]:
    """(cause, hint) for a wrong output."""
    length, keys = case.query.shape[0], case.key.shape[0]
    i, j = np.arange(length)[:, None], np.arange(keys)[None, :]
    causal = (j <= i) if case.is_causal else np.ones((length, keys), dtype=bool)  # (L, S)
    scores = case_scores(case.query, case.key, case.is_causal)  # (L, S)
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
        starts = [t.m for t in tiles.tiles[:1]]  # the state the first tile met
        low = np.max(scores, axis=-1) < -745  # (L,): rows whose every score underflows exp
        if np.any(low[bad]) and starts and np.all(starts[0] == 0):
            return "m starts at 0", (
                f"{rows_text(bad)} are NaN: their scores all lie below -745, and a running "
                "maximum that starts at 0 never comes down to them, so every exp(s - m) is 0 "
                "and total stays 0; start each query block from m = -inf (the empty state)"
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
    with np.errstate(all="ignore"):
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
    want = _attend(case)
    for cause, theirs in candidates:
        if not close(theirs, want) and close(out, theirs):
            return cause, hints[cause]
    if float32_like(out, want):
        return "float32", HINT_FLOAT64
    bad = ~rows_close(out, want)  # (L,)
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
    if float32_like(lse, want):
        return "float32", HINT_FLOAT64
    return "lse", f"lse differs in {rows_text(~rows_close(lse, want))}: lse = m + log(total)"


_WATCHED_NOTE = (
    " (k and v come as read-only arrays that record which keys are read: index and compute "
    "with numpy, as with any array)"
)


def _run_forward(
    fn: Callable[..., Any], case: _ForwardCase, call_as: Callable[..., Any] | None = None
) -> CaseResult:
    """One case; ``call_as`` (default ``fn``) is called with flash_forward's arguments, while
    the online_update watched is the one in ``fn``'s namespace (exercise 2's steps)."""
    tiles = _Tiles()
    keys, values = watched(case.key, "k", tiles.reads), watched(case.value, "v", tiles.reads)
    args = (case.query, keys, values, case.block_q, case.block_k, case.is_causal)
    with _watch(fn, tiles):
        got, failed = call(call_as or fn, args, case.name, case.shape, _NAMES)
    if failed:
        if failed.cause == "raised" and "Watched" in failed.hint:
            return CaseResult(
                case.name, case.shape, False, None, failed.hint + _WATCHED_NOTE, "raised"
            )
        return failed
    if not isinstance(got, tuple | list) or len(got) != 2:
        hint = "return two arrays: the output (L, Ev) and the log-sum-exp (L,)"
        return CaseResult(case.name, case.shape, False, None, hint, "shape")
    want = _attend(case)  # (L, Ev)
    want_lse = log_sum_exp(case_scores(case.query, case.key, case.is_causal))  # (L,)
    parts = []
    for what, x, w, advice in (
        ("the output", got[0], want, "queries x value width"),
        ("lse", got[1], want_lse, "one number per query row"),
    ):
        array, cause, problem = as_array(x, what)
        problem = problem or shape_problem(array, w, what, advice)
        if problem:
            return CaseResult(case.name, case.shape, False, None, problem, cause or "shape")
        parts.append(array)
    out, lse = parts
    error = max(max_error(out, want), max_error(lse, want_lse))
    if not close(out, want):
        cause, hint = _forward_mistake(case, out, tiles)
    elif not close(lse, want_lse):
        cause, hint = _lse_mistake(case, lse, want_lse)
    else:
        cause, hint = _tiling_problem(case, tiles, out)
        if not cause:
            return CaseResult(case.name, case.shape, True, error, "")
    return CaseResult(case.name, case.shape, False, None if np.isnan(error) else error, hint, cause)


@np.errstate(all="ignore")  # a wrong answer's inf and NaN are for the report to name
def check_flash_forward(
    fn: Callable[..., Any], *, verbose: bool = True, seed: int | None = None
) -> FlashForwardCheck:
    """Check the learner's ``fn(q, k, v, block_q, block_k, is_causal) -> (out, lse)``.

    q (L, E) a read-only float64 numpy array, k (S, E) and v (S, Ev) read-only
    `Watched` arrays that record which keys are read; block_q and block_k ints
    (not necessarily dividing L and S); is_causal a bool, top-left aligned as
    in PyTorch (query i sees keys j <= i). The scale is 1/sqrt(E). ``out``
    (L, Ev) must equal `scaled_dot_product_attention` and ``lse`` (L,) each
    row's natural log of the sum of exp(scores), reached tile by tile through
    the learner's ``online_update`` (see the module). ``seed`` draws the cases
    (`forward_cases`; None: the attempt's own). Prints the report when
    ``verbose``; returns it. Raises TypeError if ``fn`` is not callable.
    """
    if not callable(fn):
        raise TypeError(f"check_flash_forward needs a function, got {type(fn).__name__}")
    seed = seeded(seed, fn)
    report = FlashForwardCheck(tuple(_run_forward(fn, c) for c in forward_cases(seed)), seed=seed)
    if verbose:
        print(report)
    return report
