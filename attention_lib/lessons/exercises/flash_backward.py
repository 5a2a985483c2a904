"""Notebook 07, exercise 3: the backward pass from the log-sum-exp, checked against autograd.

`check_flash_backward(fn)`: the learner's ``fn(q, k, v, out, lse, d_out,
is_causal)`` returns (dq, dk, dv), for q (H, L, E), k (Hkv, S, E), v (Hkv,
S, Ev), H a multiple of Hkv (grouped heads: query head h reads key/value
head h // (H // Hkv), as PyTorch's ``enable_gqa``), the forward's output
out (H, L, Ev) and log-sum-exp lse (H, L) (from the library), and the
output's gradient d_out (H, L, Ev). The oracle is torch autograd through
``torch.nn.functional.scaled_dot_product_attention`` in float64.

With P = exp(S - lse) recomputed from the forward's statistics, and
δ = rowsum(dO ∘ O) (FlashAttention-2, arXiv:2307.08691, Algorithm 2):

    dV = Pᵀ dO    dP = dO Vᵀ    dS = P ∘ (dP − δ)    dQ = scale·dS K    dK = scale·dSᵀ Q

and a key/value head shared by a group of query heads gets the sum of
their dK and dV. A wrong answer is compared with the usual mistakes (dS
without − δ, the scale missing or doubled, P recomputed without the mask or
the scale, dK without the group sum or with its mean); one more case shifts
lse by log 2 and expects dV to halve, so a function that recomputes the
softmax from scratch instead of reading lse is told so.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ...core import attention_weights, scaled_dot_product_attention
from .base import (
    CaseResult,
    CheckReport,
    call,
    case_scores,
    close,
    log_sum_exp,
    max_error,
    rows_text,
)

__all__ = ["FlashBackwardCheck", "backward_cases", "check_flash_backward"]

_NAMES = ("dQ", "dK", "dV")


@dataclass(frozen=True)
class FlashBackwardCheck(CheckReport):
    """Exercise 3's report: one `CaseResult` per case, then the lse case."""

    SUBJECT: ClassVar[str] = "torch autograd of scaled_dot_product_attention in float64"
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
        """(dq, dk, dv) by torch autograd through PyTorch's SDPA, float64."""
        import torch
        import torch.nn.functional as F

        leaves = [torch.tensor(x, requires_grad=True) for x in (self.query, self.key, self.value)]
        with torch.enable_grad():
            out = F.scaled_dot_product_attention(
                *leaves, is_causal=self.is_causal, enable_gqa=self.group > 1
            )  # (H, L, Ev)
            out.backward(torch.from_numpy(self.d_out))
        return tuple(x.grad.numpy() for x in leaves)


def backward_cases(seed: int = 0) -> list[_BackwardCase]:
    """The seeded cases of `check_flash_backward`: L != S, causal, grouped heads."""
    rng = np.random.default_rng(seed)
    plan = [  # name, H, Hkv, L, S, E, Ev, causal
        ("one head", 1, 1, 5, 7, 4, 3, False),
        ("causal, L < S", 2, 2, 6, 9, 8, 4, True),
        ("causal, L > S", 1, 1, 8, 5, 4, 4, True),
        ("grouped heads", 4, 2, 5, 6, 8, 4, True),
        ("one kv head", 3, 1, 4, 5, 4, 2, False),
    ]
    cases = []
    for name, heads, heads_kv, length, keys, width, width_v, causal in plan:
        q = rng.normal(size=(heads, length, width))
        k, v = rng.normal(size=(heads_kv, keys, width)), rng.normal(size=(heads_kv, keys, width_v))
        d_out = rng.normal(size=(heads, length, width_v))
        cases.append(_BackwardCase(name, q, k, v, d_out, causal))
    return cases


def _group_sum(x: np.ndarray, heads_kv: int) -> np.ndarray:
    """(H, n, w) per query head -> (Hkv, n, w): each key head's group of query heads summed."""
    return x.reshape(heads_kv, -1, *x.shape[1:]).sum(axis=1)


def _heads_rows(got: np.ndarray, want: np.ndarray) -> str:
    """Where ``got`` (h, n, w) differs from ``want``: the heads, then the rows of the first."""
    wrong = ~np.all(np.isclose(got, want), axis=-1)  # (h, n)
    heads = np.any(wrong, axis=-1)  # (h,)
    first = int(np.argmax(heads))
    return f"{rows_text(heads, 'head')} ({rows_text(wrong[first])} of head {first})"


def _backward_mistake(case: _BackwardCase, got: tuple[np.ndarray, ...]) -> tuple[str, str]:
    """(cause, hint) for wrong gradients, from what the usual mistakes produce."""
    q, k, d_out, g = case.query, case.key, case.d_out, case.group
    heads_kv = k.shape[0]
    want = case.gradients()
    dq, dk, dv = want
    out, lse = case.forward()
    scale = 1 / math.sqrt(q.shape[-1])
    k_all = np.repeat(k, g, axis=0)  # (H, S, E)
    weights = attention_weights(q, k, is_causal=case.is_causal, enable_gqa=True)  # (H, L, S)
    delta = np.sum(d_out * out, axis=-1, keepdims=True)  # (H, L, 1)
    extra = weights * delta  # (H, L, S): what dS gains when - δ is left out

    def dv_from(p: np.ndarray) -> np.ndarray:
        return _group_sum(p.swapaxes(-1, -2) @ d_out, heads_kv)  # (Hkv, S, Ev)

    with np.errstate(over="ignore", invalid="ignore"):
        unmasked = np.exp(case_scores(q, k, False) - lse[..., None])  # (H, L, S)
        unscaled = np.exp(case_scores(q, k, case.is_causal, 1.0) - lse[..., None])
    candidates = [
        (0, "no delta", dq + scale * extra @ k_all),
        (1, "no delta", dk + scale * _group_sum(extra.swapaxes(-1, -2) @ q, heads_kv)),
        (0, "no scale", dq / scale),
        (1, "no scale", dk / scale),
        (0, "scale twice", dq * scale),
        (2, "P unscaled", dv_from(unscaled)),
    ]
    if case.is_causal:
        candidates.append((2, "P unmasked", dv_from(unmasked)))
    if g > 1:
        candidates += [(1, "group mean", dk / g), (2, "group mean", dv / g)]
    hints = {
        "no delta": "dS is missing the - δ term: dS = P * (dP - δ) with δ = rowsum(dO * O), "
        "one number per query row",
        "no scale": "dQ and dK lack the scale: S = scale * Q K^T, so dQ = scale * dS K and "
        "dK = scale * dS^T Q",
        "scale twice": "dQ has the scale twice: it enters once, dQ = scale * dS K",
        "P unscaled": "P was recomputed from unscaled scores: exp(S - lse) needs the forward's "
        "S = Q K^T / sqrt(E)",
        "P unmasked": "P was recomputed without the causal mask: set the masked scores to -inf "
        "before exp(S - lse), so P is 0 above the diagonal",
        "group mean": "a key head's gradient is the mean over its group of query heads: it must "
        f"be their sum (group of {g})",
    }
    for which, cause, theirs in candidates:
        if not close(got[which], want[which]) and close(got[which], theirs):
            return cause, hints[cause]
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


def _run_backward(fn: Callable[..., Any], case: _BackwardCase, lse_shift: float = 0.0) -> Any:
    """The learner's gradients for ``case`` (a tuple of 3 arrays), or a failed `CaseResult`."""
    out, lse = case.forward()
    args = (case.query, case.key, case.value, out, lse + lse_shift, case.d_out, case.is_causal)
    got, failed = call(fn, args, case.name, case.shape)
    if failed:
        return failed
    if not isinstance(got, tuple | list) or len(got) != 3:
        hint = "return the three gradients: return dq, dk, dv"
        return CaseResult(case.name, case.shape, False, None, hint, "shape")
    shapes = (case.query.shape, case.key.shape, case.value.shape)
    for name, x, want_shape in zip(_NAMES, got, shapes, strict=True):
        if np.shape(x) != want_shape:
            hint = _shape_hint(case, name, np.shape(x), want_shape)
            cause = "no group sum" if "group sum" in hint else "shape"
            return CaseResult(case.name, case.shape, False, None, hint, cause)
    return tuple(np.asarray(x, dtype=float) for x in got)


def _check_case(fn: Callable[..., Any], case: _BackwardCase) -> CaseResult:
    got = _run_backward(fn, case)
    if isinstance(got, CaseResult):
        return got
    want = case.gradients()
    error = max(max_error(x, w) for x, w in zip(got, want, strict=True))
    if all(close(x, w) for x, w in zip(got, want, strict=True)):
        return CaseResult(case.name, case.shape, True, error, "")
    if not all(np.all(np.isfinite(x)) for x in got):
        bad = [n for n, x in zip(_NAMES, got, strict=True) if not np.all(np.isfinite(x))]
        hint = (
            f"{', '.join(bad)} have NaN or inf: exp(S - lse) is 0 for a masked score (-inf) "
            "and at most 1 elsewhere, so look for an exp of unshifted scores or 0 * inf"
        )
        return CaseResult(case.name, case.shape, False, None, hint, "not finite")
    cause, hint = _backward_mistake(case, got)
    return CaseResult(case.name, case.shape, False, error, hint, cause)


def _check_reads_lse(fn: Callable[..., Any], case: _BackwardCase) -> CaseResult:
    """lse + log 2 halves P, so dV must halve: it does only if P comes from lse."""
    name, shape = "reads lse", "lse + log 2, dV halves"
    got = _run_backward(fn, case, lse_shift=math.log(2.0))
    if isinstance(got, CaseResult):
        return CaseResult(name, shape, False, None, got.hint, got.cause)
    dv = case.gradients()[2]
    if close(got[2], dv / 2):
        return CaseResult(name, shape, True, max_error(got[2], dv / 2), "")
    if close(got[2], dv):
        hint = (
            "your function did not use lse (dV stayed the same when lse rose by log 2): "
            "recompute P = exp(S - lse) from the forward's statistics, with no new pass "
            "over the keys for the maximum and the sum"
        )
        return CaseResult(name, shape, False, None, hint, "lse unused")
    hint = "dV should halve when lse rises by log 2 (P = exp(S - lse) halves); it did not"
    return CaseResult(name, shape, False, None, hint, "lse misused")


def check_flash_backward(
    fn: Callable[..., Any], *, verbose: bool = True, seed: int = 0
) -> FlashBackwardCheck:
    """Check the learner's ``fn(q, k, v, out, lse, d_out, is_causal) -> (dq, dk, dv)``.

    Arguments are float64 numpy arrays as in the module docstring, the scale
    1/sqrt(E), the causal mask top-left (query i sees keys j <= i). dq, dk
    and dv must have the shapes of q, k and v and equal torch autograd's
    gradients. Five seeded cases, then the lse case (run once the first case
    passes). Prints the report when ``verbose``; returns it. Raises TypeError
    if ``fn`` is not callable.
    """
    if not callable(fn):
        raise TypeError(f"check_flash_backward needs a function, got {type(fn).__name__}")
    cases = backward_cases(seed)
    results = [_check_case(fn, case) for case in cases]
    notes: tuple[str, ...] = ()
    if results[0].passed:
        results.append(_check_reads_lse(fn, cases[0]))
    elif not all(r.cause == "raised" for r in results):
        notes = (f"the lse case runs once the case {cases[0].name!r} passes",)
    report = FlashBackwardCheck(tuple(results), notes)
    if verbose:
        print(report)
    return report
