"""Notebook 07, exercise 3: the backward pass from the log-sum-exp, checked against autograd.

`check_flash_backward(fn)`: the learner's ``fn(q, k, v, out, lse, d_out,
is_causal)`` returns (dq, dk, dv), for q (H, L, E), k (Hkv, S, E), v (Hkv,
S, Ev), H a multiple of Hkv (grouped heads: query head h reads key/value
head h // (H // Hkv), as PyTorch's ``enable_gqa``), the forward's output
out (H, L, Ev) and log-sum-exp lse (H, L) (from the library), and the
output's gradient d_out (H, L, Ev). The oracle is the exact float64 gradients
of the attention, computed in numpy from the whole weight matrix (the tests
hold them to torch autograd through
``torch.nn.functional.scaled_dot_product_attention`` in float64, on many
seeds), so that a check needs no torch and takes a fraction of a second.

With P = exp(S - lse) recomputed from the forward's statistics, and
δ = rowsum(dO ∘ O) (FlashAttention-2, arXiv:2307.08691, Algorithm 2):

    dV = Pᵀ dO    dP = dO Vᵀ    dS = P ∘ (dP − δ)    dQ = scale·dS K    dK = scale·dSᵀ Q

and a key/value head shared by a group of query heads gets the sum of
their dK and dV. The cases (`backward_cases`, drawn from a seed) have L !=
S, causal and not, grouped heads, scores near 1000 and rows whose scores
all lie far below zero. A wrong answer is compared with the usual mistakes
(dS without − δ, the scale missing or doubled, P recomputed without the mask
or the scale or with the causal mask aligned bottom-right, dK without the
group sum or with its mean, query heads mapped to the wrong key heads,
float32). Every case that agrees is then probed: lse shifted by log 2 halves
P, so dQ, dK and dV must all halve; a function that recomputes the softmax
from scratch instead of reading lse, or takes δ from that P instead of from
the output, is told so.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from attention_lib.core import attention_weights, scaled_dot_product_attention

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
)
from .draws import apart, far_below, large_scores
from .guards import call

__all__ = ["FlashBackwardCheck", "backward_cases", "check_flash_backward"]

_NAMES = ("dQ", "dK", "dV")


@dataclass(frozen=True)
class FlashBackwardCheck(CheckReport):
    """Exercise 3's report: one `CaseResult` per case (its gradients, then its lse probe)."""

    SUBJECT: ClassVar[str] = "the float64 gradients of attention (torch autograd's)"
    QUESTION: ClassVar[str] = "Given lse, how do you get each weight back, and what is δ for a row?"


@dataclass(frozen=True)
class _BackwardCase:
    name: str
    query: np.ndarray  # (H, L, E)
    key: np.ndarray  # (Hkv, S, E)
    value: np.ndarray  # (Hkv, S, Ev)
    d_out: np.ndarray  # (H, L, Ev)
    is_causal: bool

    @property
    def group(self) -> int:
        return self.query.shape[0] // self.key.shape[0]

    @property
    def shape(self) -> str:
        (heads, length, _), (heads_kv, keys, _) = self.query.shape, self.key.shape
        causal = " causal" if self.is_causal else ""
        return f"H={heads} Hkv={heads_kv} L={length} S={keys}{causal}"

    def forward(self) -> tuple[np.ndarray, np.ndarray]:
        """The forward's out (H, L, Ev) and lse (H, L), from the library."""
        q, k, v = self.query, self.key, self.value
        out = scaled_dot_product_attention(q, k, v, is_causal=self.is_causal, enable_gqa=True)
        return out, log_sum_exp(case_scores(q, k, self.is_causal))

    def gradients(self) -> tuple[np.ndarray, ...]:
        """(dq, dk, dv), exact in float64: the whole weight matrix, then the formulas (torch
        autograd's gradients to rounding, as the tests check)."""
        q, k = self.query, self.key
        weights = attention_weights(q, k, is_causal=self.is_causal, enable_gqa=True)  # (H, L, S)
        out, _ = self.forward()
        delta = np.sum(self.d_out * out, axis=-1, keepdims=True)  # (H, L, 1)
        return _from_p(self, weights, delta)


def backward_cases(seed: int = 0) -> list[_BackwardCase]:
    """The cases of `check_flash_backward` for ``seed``: L != S, causal and not, grouped heads
    (two key heads for four query heads, one for three), scores near 1000, rows far below 0."""
    rng = np.random.default_rng(seed)
    causal = bool(rng.integers(2))
    plan = [  # name, H, Hkv, L, S, causal
        ("one head", 1, 1, *apart(rng, 4, 8), False),
        ("causal, L < S", 2, 2, *sorted(apart(rng, 4, 9)), True),
        ("causal, L > S", 1, 1, *sorted(apart(rng, 4, 9), reverse=True), True),
        ("grouped heads", 4, 2, *apart(rng, 4, 8), causal),
        ("one kv head", 3, 1, *apart(rng, 3, 7), not causal),
        ("large scores", 2, 1, *apart(rng, 4, 8), bool(rng.integers(2))),
        ("far below 0", 2, 2, *apart(rng, 4, 8), False),
    ]
    cases = []
    for name, heads, heads_kv, length, keys, is_causal in plan:
        width, width_v = int(rng.choice([4, 8, 16])), int(rng.integers(2, 6))
        q = rng.normal(size=(heads, length, width))  # (H, L, E)
        k, v = rng.normal(size=(heads_kv, keys, width)), rng.normal(size=(heads_kv, keys, width_v))
        if name == "large scores":
            q = large_scores(rng, q, k)
        if name == "far below 0":
            rows = rng.random(length) < 0.5
            rows[int(rng.integers(length))] = True
            q, k = far_below(rng, q, k, rows)
        d_out = rng.normal(size=(heads, length, width_v))  # (H, L, Ev)
        cases.append(_BackwardCase(name, q, k, v, d_out, is_causal))
    return cases


def _group_sum(x: np.ndarray, heads_kv: int) -> np.ndarray:
    """(H, n, w) per query head -> (Hkv, n, w): each key head's group of query heads summed."""
    return x.reshape(heads_kv, -1, *x.shape[1:]).sum(axis=1)


def _heads_rows(got: np.ndarray, want: np.ndarray) -> str:
    """Where ``got`` (h, n, w) differs from ``want``: the heads, then the rows of the first."""
    wrong = ~rows_close(got, want)  # (h, n)
    heads = np.any(wrong, axis=-1)  # (h,)
    first = int(np.argmax(heads))
    return f"{rows_text(heads, 'head')} ({rows_text(wrong[first])} of head {first})"


def _from_p(
    case: _BackwardCase, p: np.ndarray, delta: np.ndarray, heads: np.ndarray | None = None
) -> tuple[np.ndarray, ...]:
    """(dq, dk, dv) from weights ``p`` (H, L, S) and ``delta`` (H, L, 1), by the formulas.

    ``heads`` (H,): the key head each query head reads (default h // group); a key head's
    gradients are the sums over the query heads that read it.
    """
    q, k, v, d_out = case.query, case.key, case.value, case.d_out
    if heads is None:
        heads = np.arange(q.shape[0]) // case.group
    scale = 1 / math.sqrt(q.shape[-1])
    ds = p * (d_out @ v[heads].swapaxes(-1, -2) - delta)  # (H, L, S)
    dk, dv = np.zeros_like(k), np.zeros_like(v)  # (Hkv, S, E), (Hkv, S, Ev)
    np.add.at(dk, heads, scale * ds.swapaxes(-1, -2) @ q)
    np.add.at(dv, heads, p.swapaxes(-1, -2) @ d_out)
    return scale * ds @ k[heads], dk, dv  # dq (H, L, E)


_HINTS = {
    "no delta": "dS is missing the - δ term: dS = P * (dP - δ) with δ = rowsum(dO * O), "
    "one number per query row",
    "no scale": "dQ and dK lack the scale: S = scale * Q K^T, so dQ = scale * dS K and "
    "dK = scale * dS^T Q",
    "scale twice": "dQ has the scale twice: it enters once, dQ = scale * dS K",
    "P unscaled": "P was recomputed from unscaled scores: exp(S - lse) needs the forward's "
    "S = Q K^T / sqrt(E)",
    "P unmasked": "P was recomputed without the causal mask: set the masked scores to -inf "
    "before exp(S - lse), so P is 0 above the diagonal",
    "bottom-right": "P was recomputed with the causal mask aligned bottom-right: PyTorch's "
    "is_causal is top-left, query i sees keys j <= i also when L != S",
    "group mean": "a key head's gradient is the mean over its group of query heads: it must "
    "be their sum (group of {g})",
    "head mapping": "query head h reads key head h // group (np.repeat(k, group, axis=0), as "
    "PyTorch's enable_gqa): yours reads key head h % Hkv (np.tile), the heads interleaved",
}


def _backward_mistake(case: _BackwardCase, got: tuple[np.ndarray, ...]) -> tuple[str, str]:
    """(cause, hint) for wrong gradients, from what the usual mistakes produce."""
    q, k, d_out, g = case.query, case.key, case.d_out, case.group
    length, keys = q.shape[1], k.shape[1]
    want = case.gradients()
    dq, dk, dv = want
    out, lse = case.forward()
    scale = 1 / math.sqrt(q.shape[-1])
    k_all = np.repeat(k, g, axis=0)  # (H, S, E)
    weights = attention_weights(q, k, is_causal=case.is_causal, enable_gqa=True)  # (H, L, S)
    delta = np.sum(d_out * out, axis=-1, keepdims=True)  # (H, L, 1)
    extra = weights * delta  # (H, L, S): what dS gains when - δ is left out

    def dv_from(p: np.ndarray) -> np.ndarray:
        return _group_sum(p.swapaxes(-1, -2) @ d_out, k.shape[0])  # (Hkv, S, Ev)

    with np.errstate(over="ignore", invalid="ignore"):
        unmasked = np.exp(case_scores(q, k, False) - lse[..., None])  # (H, L, S)
        unscaled = np.exp(case_scores(q, k, case.is_causal, 1.0) - lse[..., None])
        i, j = np.arange(length)[:, None], np.arange(keys)[None, :]
        right = np.where(j <= i + keys - length, case_scores(q, k, False), -np.inf)  # (H, L, S)
        bottom = np.exp(right - lse[..., None])
    candidates = [
        (0, "no delta", dq + scale * extra @ k_all),
        (1, "no delta", dk + scale * _group_sum(extra.swapaxes(-1, -2) @ q, k.shape[0])),
        (0, "no scale", dq / scale),
        (1, "no scale", dk / scale),
        (0, "scale twice", dq * scale),
        (2, "P unscaled", dv_from(unscaled)),
    ]
    if case.is_causal:
        candidates.append((2, "P unmasked", dv_from(unmasked)))
        if length != keys:
            candidates.append((2, "bottom-right", dv_from(bottom)))
    if g > 1:
        candidates += [(1, "group mean", dk / g), (2, "group mean", dv / g)]
        if k.shape[0] > 1:  # interleaved heads (np.tile) differ from grouped ones
            heads = np.arange(q.shape[0]) % k.shape[0]
            with np.errstate(all="ignore"):
                p = np.exp(case_scores(q, k[heads], case.is_causal) - lse[..., None])
            tiled = _from_p(case, p, delta, heads)
            candidates += [(n, "head mapping", tiled[n]) for n in range(3)]
    for which, cause, theirs in candidates:
        if not close(got[which], want[which]) and close(got[which], theirs):
            return cause, _HINTS[cause].format(g=g)
    if all(float32_like(x, w) or close(x, w) for x, w in zip(got, want, strict=True)):
        return "float32", HINT_FLOAT64
    wrong = [n for n, x, w in zip(_NAMES, got, want, strict=True) if not close(x, w)]
    where = "; ".join(
        f"{n} differs in {_heads_rows(x, w)}"
        for n, x, w in zip(_NAMES, got, want, strict=True)
        if not close(x, w)
    )
    advice = (
        "dV is right, so P is: check δ and dS"
        if "dV" not in wrong
        else "dV = P^T dO is wrong: check P = exp(S - lse), its mask and its scale"
    )
    if g > 1 and k.shape[0] > 1:
        advice += "; query head h reads key head h // group"
    return "unknown", f"{where}; {advice}"


def _shape_hint(case: _BackwardCase, name: str, got_shape: Any, want_shape: tuple) -> str:
    heads, heads_kv = case.query.shape[0], case.key.shape[0]
    if name in ("dK", "dV") and case.group > 1 and got_shape == (heads, *want_shape[1:]):
        return (
            f"{name} is missing the group sum: it has one head per query head ({heads}), but "
            f"key/value head j served query heads {case.group}j to {case.group}j+{case.group - 1}; "
            f"sum their gradients into {heads_kv} heads: "
            f"{name.lower()}.reshape({heads_kv}, {case.group}, ...).sum(axis=1)"
        )
    like = {"dQ": "q", "dK": "k", "dV": "v"}[name]
    return f"{name} should have the shape of {like}, {want_shape}, got {got_shape}"


_ARGUMENTS = ("q", "k", "v", "out", "lse", "d_out", "is_causal")


def _run_backward(fn: Callable[..., Any], case: _BackwardCase, lse_shift: float = 0.0) -> Any:
    """The learner's gradients for ``case`` (a tuple of 3 arrays), or a failed `CaseResult`."""
    out, lse = case.forward()
    args = (case.query, case.key, case.value, out, lse + lse_shift, case.d_out, case.is_causal)
    got, failed = call(fn, args, case.name, case.shape, _ARGUMENTS)
    if failed:
        return failed
    if not isinstance(got, tuple | list) or len(got) != 3:
        hint = "return the three gradients: return dq, dk, dv"
        return CaseResult(case.name, case.shape, False, None, hint, "shape")
    shapes = (case.query.shape, case.key.shape, case.value.shape)
    grads = []
    for name, x, want_shape in zip(_NAMES, got, shapes, strict=True):
        array, cause, problem = as_array(x, name)
        if problem:
            return CaseResult(case.name, case.shape, False, None, problem, cause)
        if array.shape != want_shape:
            hint = _shape_hint(case, name, array.shape, want_shape)
            cause = "no group sum" if "group sum" in hint else "shape"
            return CaseResult(case.name, case.shape, False, None, hint, cause)
        grads.append(array)
    return tuple(grads)


def _lse_probe(fn: Callable[..., Any], case: _BackwardCase, got: tuple[np.ndarray, ...]) -> Any:
    """lse + log 2 halves P, so dQ, dK and dV must halve: (cause, hint), "" when they do, or a
    failed `CaseResult`."""
    shifted = _run_backward(fn, case, lse_shift=math.log(2.0))
    if isinstance(shifted, CaseResult):
        return shifted
    half = tuple(x / 2 for x in case.gradients())
    if all(close(x, w) for x, w in zip(shifted, half, strict=True)):
        return "", ""
    same = [n for n, x, y in zip(_NAMES, shifted, got, strict=True) if close(x, y)]
    if same:
        it = "it" if len(same) == 1 else "they"
        return "lse unused", (
            f"your function did not use lse for {', '.join(same)} ({it} stayed the same when "
            "lse rose by log 2): recompute P = exp(S - lse) from the "
            "forward's statistics for every gradient, with no new pass over the keys for the "
            "maximum and the sum"
        )
    _, lse = case.forward()
    with np.errstate(all="ignore"):
        p = np.exp(case_scores(case.query, case.key, case.is_causal) - lse[..., None] - math.log(2))
    v_all = np.repeat(case.value, case.group, axis=0)  # (H, S, Ev)
    delta_p = np.sum(p * (case.d_out @ v_all.swapaxes(-1, -2)), axis=-1, keepdims=True)
    if close(shifted[0], _from_p(case, p, delta_p)[0]):
        return "delta from P", (
            "δ came from the recomputed P, not from the output: dQ and dK did not halve with P "
            "when lse rose by log 2; δ = rowsum(d_out * out) reads the forward's output, one "
            "pass over it and none over the scores"
        )
    wrong = [n for n, x, w in zip(_NAMES, shifted, half, strict=True) if not close(x, w)]
    return "lse misused", (
        f"{', '.join(wrong)} should halve when lse rises by log 2 (P = exp(S - lse) halves); "
        "they did not: build every gradient from that one P"
    )


def _check_case(fn: Callable[..., Any], case: _BackwardCase) -> CaseResult:
    got = _run_backward(fn, case)
    if isinstance(got, CaseResult):
        return got
    want = case.gradients()
    error = max(max_error(x, w) for x, w in zip(got, want, strict=True))
    if not all(np.all(np.isfinite(x)) for x in got):
        bad = [n for n, x in zip(_NAMES, got, strict=True) if not np.all(np.isfinite(x))]
        hint = (
            f"{', '.join(bad)} have NaN or inf: exp(S - lse) is 0 for a masked score (-inf) "
            "and at most 1 elsewhere, so look for an exp of unshifted scores (they reach about "
            "1000 here) or 0 * inf"
        )
        return CaseResult(case.name, case.shape, False, None, hint, "not finite")
    if not all(close(x, w) for x, w in zip(got, want, strict=True)):
        cause, hint = _backward_mistake(case, got)
        return CaseResult(case.name, case.shape, False, error, hint, cause)
    probed = _lse_probe(fn, case, got)
    if isinstance(probed, CaseResult):
        return probed
    cause, hint = probed
    if cause:
        return CaseResult(case.name, case.shape, False, error, hint, cause)
    return CaseResult(case.name, case.shape, True, error, "")


@np.errstate(all="ignore")  # a wrong answer's inf and NaN are for the report to name
def check_flash_backward(
    fn: Callable[..., Any], *, verbose: bool = True, seed: int | None = None
) -> FlashBackwardCheck:
    """Check the learner's ``fn(q, k, v, out, lse, d_out, is_causal) -> (dq, dk, dv)``.

    Arguments are read-only float64 numpy arrays as in the module docstring,
    the scale 1/sqrt(E), the causal mask top-left (query i sees keys j <= i).
    dq, dk and dv must have the shapes of q, k and v, equal the exact float64
    gradients (torch autograd's), and halve when lse rises by log 2 (every
    case is run twice). `backward_cases` drawn from ``seed`` (None: the attempt's own).
    Prints the report when ``verbose``; returns it. Raises TypeError if ``fn``
    is not callable.
    """
    if not callable(fn):
        raise TypeError(f"check_flash_backward needs a function, got {type(fn).__name__}")
    seed = seeded(seed, fn)
    results = tuple(_check_case(fn, case) for case in backward_cases(seed))
    report = FlashBackwardCheck(results, seed=seed)
    if verbose:
        print(report)
    return report
