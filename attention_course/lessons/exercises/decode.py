"""Notebook 02's KV-cache exercise: one decode step, append then attend, checked.

`check_decode_step(fn)`: the reader's ``fn(q, k, v, k_cache, v_cache)`` ->
(output, new k_cache, new v_cache): append the new keys and values, then
attend with the causal mask aligned bottom-right, on cases drawn from a seed
(`decode_cases`); the usual mistakes named (the mask aligned top-left or
hiding the new token's own key, the new keys not yet in the cache, or put at
its front, no mask between new tokens, the old cache returned, the caller's
cache grown in place, float32).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from attention_lib.core import scaled_dot_product_attention

from .attention import HINT_NO_SCALE, HINT_TOO_FLAT_D
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
)
from .draws import large_scores
from .guards import call

__all__ = [
    "HINT_CACHE_FRONT",
    "HINT_CACHE_STALE",
    "HINT_NOT_APPENDED",
    "HINT_NO_CHUNK_MASK",
    "HINT_OWN_KEY",
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
HINT_OWN_KEY = (
    "each new token missed its own key: new token i sits at position S - T + i and sees keys "
    "0 .. S - T + i, its own included, np.tril(np.ones((T, S), dtype=bool), k=S - T)"
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

    @property
    def shape(self) -> str:
        (new, width), past = self.query.shape, self.key_cache.shape[0]
        return f"P={past} T={new} d={width} dv={self.value.shape[1]}"


def decode_cases(seed: int = 0) -> list[_DecodeCase]:
    """The cases `check_decode_step` runs for ``seed``: one new token and a chunk of new tokens
    after a short cache, then after a long one, a chunk with an empty cache (P = 0, where the
    step is ordinary causal attention), and a chunk whose scores reach about 1000."""
    rng = np.random.default_rng(seed)
    plan = [  # name, P, T
        ("one new token", int(rng.integers(2, 6)), 1),
        ("chunk", int(rng.integers(3, 7)), int(rng.integers(2, 5))),
        ("long cache", int(rng.integers(9, 14)), 1),
        ("long chunk", int(rng.integers(9, 14)), int(rng.integers(2, 5))),
        ("empty cache", 0, int(rng.integers(3, 6))),
        ("large scores", int(rng.integers(3, 7)), int(rng.integers(2, 4))),
    ]
    cases = []
    for name, past, new in plan:
        width = int(rng.choice([4, 8, 16, 32]))
        vwidth = int(rng.choice([n for n in (2, 3, 4, 6) if n != width]))
        q, k = rng.normal(size=(new, width)), rng.normal(size=(new, width))  # (T, E) each
        k_cache = rng.normal(size=(past, width))  # (P, E)
        if name == "large scores":
            q = large_scores(rng, q, np.concatenate([k_cache, k]))
        cases.append(
            _DecodeCase(
                name,
                q,
                k,
                rng.normal(size=(new, vwidth)),  # v (T, Ev)
                k_cache,
                rng.normal(size=(past, vwidth)),  # v_cache (P, Ev)
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
    if case.key_cache.shape[0] > 0:  # attended before appending: only the old keys
        out.append(
            (
                "not appended",
                HINT_NOT_APPENDED,
                scaled_dot_product_attention(q, case.key_cache, case.value_cache, None),
            )
        )
    own_hidden = np.tril(np.ones((new, total), dtype=bool), k=total - new - 1)  # (T, S)
    # a token left with no key comes out zero, as this library's and PyTorch's softmax give it
    out.append(("own key hidden", HINT_OWN_KEY, scaled_dot_product_attention(q, k, v, own_hidden)))
    if new > 1:
        out.append(("no mask", HINT_NO_CHUNK_MASK, scaled_dot_product_attention(q, k, v, None)))
    return out


@dataclass(frozen=True)
class DecodeCheck(CheckReport):
    """`check_decode_step`'s report."""

    SUBJECT: ClassVar[str] = "the reference decode step"
    QUESTION: ClassVar[str] = (
        "Where in the cache do the new keys go, and which of its keys may each new query see?"
    )


_NAMES = ("q", "k", "v", "k_cache", "v_cache")


def _cache_problem(case: _DecodeCase, name: str, cache: np.ndarray) -> tuple[str, str]:
    """(cause, hint) for a returned cache that is not the old one with the new rows after it."""
    old, new = (case.key_cache, case.key) if name == "k_cache" else (case.value_cache, case.value)
    right, front = np.concatenate([old, new]), np.concatenate([new, old])
    if cache.shape == right.shape and np.array_equal(cache, right):
        return "", ""
    if len(old) > 0 and cache.shape == front.shape and np.array_equal(cache, front):
        return "cache front", HINT_CACHE_FRONT
    if cache.ndim == 2 and cache.shape[0] == len(old):
        return "cache stale", HINT_CACHE_STALE
    return "cache", (
        f"the {name} returned, shape {cache.shape}, is not the cached rows followed by the "
        f"new ones, shape {right.shape}"
    )


def _run_decode_case(fn: Callable[..., Any], case: _DecodeCase) -> CaseResult:
    q, new = case.query, case.query.shape[0]
    k = np.concatenate([case.key_cache, case.key])  # (S, E)
    v = np.concatenate([case.value_cache, case.value])  # (S, Ev)
    expected = scaled_dot_product_attention(q, k, v, _bottom_right(new, k.shape[0]))  # (T, Ev)

    def result(passed: bool, hint: str, cause: str = "", error: float | None = None):
        return CaseResult(case.name, case.shape, passed, error, hint, cause)

    arrays = (q, case.key, case.value, case.key_cache, case.value_cache)
    got, failed = call(fn, arrays, case.name, case.shape, _NAMES)
    if failed:
        return failed
    if not (isinstance(got, tuple | list) and len(got) == 3):
        return result(False, "return three things: (output, k_cache, v_cache)", "returns")
    parts = []
    for what, x in zip(("the output", "the k_cache", "the v_cache"), got, strict=True):
        array, cause, problem = as_array(x, what)
        if problem:
            return result(False, problem, cause)
        parts.append(array)
    out, k_cache, v_cache = parts
    for name, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
        cause, hint = _cache_problem(case, name, cache)
        if cause:
            return result(False, hint, cause)
    if out.shape != expected.shape:
        hint = f"expected an output of shape {expected.shape} (new tokens × dv), got {out.shape}"
        return result(False, hint, "shape")
    if not np.all(np.isfinite(out)):
        bad = rows_text(~np.all(np.isfinite(out), axis=-1))
        hint = (
            f"the output has NaN or inf in {bad}: subtract each row's maximum before exp "
            "(scores here reach about 1000), and leave no new token without a key"
        )
        return result(False, hint, "not finite")
    error = max_error(out, expected)
    if close(out, expected):
        return result(True, "", error=error)
    for cause, hint, wrong in _known_decode_mistakes(case):
        if wrong.shape == out.shape and np.allclose(out, wrong, rtol=1e-6, atol=1e-7):
            return result(False, hint, cause, error)
    if float32_like(out, expected):
        return result(False, HINT_FLOAT64, "float32", error)
    return result(
        False,
        f"not one of the usual mistakes ({rows_text(~rows_close(out, expected))} differ); check "
        "the steps: append, scores q @ k_cache.T / sqrt(d), the bottom-right mask, softmax over "
        "the keys, weights @ v_cache",
        "unknown",
        error,
    )


@np.errstate(all="ignore")  # a wrong answer's inf and NaN are for the report to name
def check_decode_step(
    fn: Callable[..., Any], *, verbose: bool = True, seed: int | None = None
) -> DecodeCheck:
    """Check the reader's KV-cache decode step against the reference on seeded cases.

    ``fn(q, k, v, k_cache, v_cache)`` gets the T new tokens' queries, keys
    and values, (T, d), (T, d), (T, dv), and the cache of the P tokens
    before, (P, d) and (P, dv), all float64; it returns ``(output, k_cache,
    v_cache)``: the new tokens' attention output (T, dv) over the whole
    sequence, and the cache with the new rows appended, (P + T, d) and
    (P + T, dv). New token i sits at position P + i, so it may see keys
    0..P + i: the causal mask of a (T, S) score matrix, S = P + T, aligned
    bottom-right (PyTorch's ``causal_lower_right``). T = 1 is ordinary
    decoding. The arrays are read-only: a step that grows the caller's cache in
    place is told so. ``seed`` draws the cases (`decode_cases`; None: the
    attempt's own). A wrong step is compared with the usual mistakes. Prints the
    report when ``verbose`` and returns it. Raises TypeError for an ``fn``
    that is not callable.
    """
    if not callable(fn):
        raise TypeError(
            f"check_decode_step needs a function fn(q, k, v, k_cache, v_cache), got {fn!r}"
        )
    seed = seeded(seed, fn)
    report = DecodeCheck(tuple(_run_decode_case(fn, c) for c in decode_cases(seed)), seed=seed)
    if verbose:
        print(report)
    return report
