"""Notebook 02's KV-cache exercise: one decode step, append then attend, checked.

`check_decode_step(fn)`: the reader's ``fn(q, k, v, k_cache, v_cache)`` ->
(output, new k_cache, new v_cache): append the new keys and values, then
attend with the causal mask aligned bottom-right, on seeded cases
(`decode_cases`); the usual mistakes named (the mask aligned top-left, the
new keys not yet in the cache, or put at its front, no mask between new
tokens, the old cache returned).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ...core import scaled_dot_product_attention
from .attention import HINT_NO_SCALE, HINT_TOO_FLAT_D
from .base import CaseResult, CheckReport, close

__all__ = [
    "HINT_CACHE_FRONT",
    "HINT_CACHE_STALE",
    "HINT_NOT_APPENDED",
    "HINT_NO_CHUNK_MASK",
    "HINT_TOP_LEFT",
    "DecodeCheck",
    "check_decode_step",
    "decode_cases",
]

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
    if close(out, expected):
        return result(True, "", error=error)
    for cause, hint, wrong in _known_decode_mistakes(case):
        if wrong.shape == out.shape and np.allclose(out, wrong, rtol=1e-6, atol=1e-7):
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
