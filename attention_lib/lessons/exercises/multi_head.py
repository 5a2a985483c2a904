"""Notebook 02's multi-head exercise: project, split into heads, attend at the head's width, merge.

`check_multi_head(fn)`: the learner's ``fn(x, w_q, w_k, w_v, w_o, n_heads)``
-> (B, T, d_model), on seeded cases (`multi_head_cases`) against the
reference: q = x W_q split into n_heads heads of width d_head = d_model /
n_heads, each head's attention scaled by 1/sqrt(d_head), the heads merged
side by side and projected by W_o. A wrong answer is compared with every
combination of the mistakes the exercise is about, and each part that is
wrong is named with the case's numbers:

- the scale: by sqrt(d_model) (the most common bug in tutorial code), by
  sqrt(n_heads), or none at all;
- the split: (B, T, d_model) reshaped straight to (B, H, T, d_head), which
  mixes tokens into heads (the transpose left out);
- the merge: (B, H, T, d_head) reshaped straight back to (B, T, d_model),
  heads and tokens in the wrong order.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ...core import scaled_dot_product_attention
from .base import CaseResult, CheckReport, as_array, call, close, max_error

__all__ = ["MultiHeadCheck", "check_multi_head", "multi_head_cases"]

_SCALES = ("head", "model", "heads", "none")  # what the scores are divided by (the root of)


@dataclass(frozen=True)
class _HeadCase:
    name: str
    x: np.ndarray  # (B, T, D)
    weights: tuple[np.ndarray, ...]  # W_q, W_k, W_v, W_o, each (D, D)
    n_heads: int

    @property
    def widths(self) -> tuple[int, int, int]:
        """(d_model, n_heads, d_head)."""
        d_model = self.x.shape[-1]
        return d_model, self.n_heads, d_model // self.n_heads

    @property
    def shape(self) -> str:
        batch, length, d_model = self.x.shape
        return f"B={batch} T={length} d_model={d_model} heads={self.n_heads}"


def multi_head_cases(seed: int = 0) -> list[_HeadCase]:
    """The seeded cases `check_multi_head` runs: three widths, each head 16 wide.

    Weights of variance 1/d_model keep q and k near unit variance, so the
    scale the learner picks shows in the weights as it would at initialisation.
    """
    rng = np.random.default_rng(seed)
    plan = [("4 heads", 2, 5, 64, 4), ("2 heads", 1, 7, 32, 2), ("3 heads", 2, 4, 48, 3)]
    return [
        _HeadCase(
            name,
            rng.normal(size=(batch, length, d_model)),  # x (B, T, D)
            tuple(rng.normal(size=(d_model, d_model)) / math.sqrt(d_model) for _ in range(4)),
            heads,
        )
        for name, batch, length, d_model, heads in plan
    ]


def _multi_head(
    case: _HeadCase, scale: str = "head", split_ok: bool = True, merge_ok: bool = True
) -> np.ndarray:
    """The case's multi-head output (B, T, D), right or with the named mistakes."""
    (batch, length, d_model), (w_q, w_k, w_v, w_o) = case.x.shape, case.weights
    _, heads, d_head = case.widths

    def split(y: np.ndarray) -> np.ndarray:  # (B, T, D) -> (B, H, T, dh)
        if split_ok:
            return y.reshape(batch, length, heads, d_head).swapaxes(1, 2)
        return y.reshape(batch, heads, length, d_head)  # no transpose: tokens cut across heads

    q, k, v = (split(case.x @ w) for w in (w_q, w_k, w_v))  # (B, H, T, dh) each
    root = {"head": d_head, "model": d_model, "heads": heads, "none": 1}[scale]
    out = scaled_dot_product_attention(q, k, v, scale=1 / math.sqrt(root))  # (B, H, T, dh)
    if merge_ok:
        out = out.swapaxes(1, 2)  # (B, T, H, dh): each token's heads side by side
    return out.reshape(batch, length, d_model) @ w_o  # (B, T, D)


def _said(case: _HeadCase, scale: str, split_ok: bool, merge_ok: bool) -> str:
    """What is wrong in this combination of mistakes, with the case's numbers."""
    d_model, heads, d_head = case.widths
    batch, length, _ = case.x.shape
    head = f"each head is {d_head} wide: divide by √{d_head}"
    parts = {
        "model": f"you divided by √{d_model}, the model width; {head}",
        "heads": f"you divided by √{heads}, the number of heads; {head}",
        "none": f"you did not scale the scores at all; {head}",
        "head": "",
    }
    said = [parts[scale]] if parts[scale] else []
    if not split_ok:
        said.append(
            f"your split mixes heads: reshaping ({batch}, {length}, {d_model}) straight to "
            f"({batch}, {heads}, {length}, {d_head}) cuts across tokens; reshape to ({batch}, "
            f"{length}, {heads}, {d_head}) first, then swap the token and head axes"
        )
    if not merge_ok:
        said.append(
            f"your merge is in the wrong order: ({batch}, {heads}, {length}, {d_head}) was "
            f"reshaped straight to ({batch}, {length}, {d_model}); swap the head and token axes "
            f"back to ({batch}, {length}, {heads}, {d_head}) before the reshape"
        )
    return "; and ".join(said)


def _cause(scale: str, split_ok: bool, merge_ok: bool) -> str:
    names = {"model": "scale sqrt(d_model)", "heads": "scale sqrt(n_heads)", "none": "no scale"}
    parts = [names[scale]] if scale in names else []
    parts += [] if split_ok else ["split mixes heads"]
    parts += [] if merge_ok else ["merge order"]
    return " + ".join(parts)


@dataclass(frozen=True)
class MultiHeadCheck(CheckReport):
    """`check_multi_head`'s report."""

    SUBJECT: ClassVar[str] = "the reference multi-head layer"
    QUESTION: ClassVar[str] = "After the split, how wide is a head, and what goes under the root?"


def _run_head_case(fn: Callable[..., Any], case: _HeadCase) -> CaseResult:
    want = _multi_head(case)  # (B, T, D)
    got, failed = call(fn, (case.x, *case.weights, case.n_heads), case.name, case.shape)
    if failed:
        return failed
    out, problem = as_array(got, "the output")
    if problem:
        return CaseResult(case.name, case.shape, False, None, problem, "not an array")
    if out.shape != want.shape:
        hint = (
            f"the output should have shape {want.shape} (batch, tokens, d_model), got "
            f"{out.shape}: merge the heads back and apply w_o"
        )
        return CaseResult(case.name, case.shape, False, None, hint, "shape")
    error = max_error(out, want)
    if close(out, want):
        return CaseResult(case.name, case.shape, True, error, "")
    if not np.all(np.isfinite(out)):
        hint = "the output has NaN or inf: subtract each row's maximum before exp"
        return CaseResult(case.name, case.shape, False, None, hint, "not finite")
    for scale, split_ok, merge_ok in itertools.product(_SCALES, (True, False), (True, False)):
        if (scale, split_ok, merge_ok) != ("head", True, True) and close(
            out, _multi_head(case, scale, split_ok, merge_ok)
        ):
            said = _said(case, scale, split_ok, merge_ok)
            return CaseResult(
                case.name, case.shape, False, error, said, _cause(scale, split_ok, merge_ok)
            )
    hint = (
        "not one of the usual mistakes; check the steps: project with w_q, w_k, w_v, split "
        "each into heads, attend in each head at its own width, merge, project with w_o"
    )
    return CaseResult(case.name, case.shape, False, error, hint, "unknown")


def check_multi_head(
    fn: Callable[..., Any], *, verbose: bool = True, seed: int = 0
) -> MultiHeadCheck:
    """Check the learner's multi-head attention layer against the reference.

    ``fn(x, w_q, w_k, w_v, w_o, n_heads)``: x float64 (B, T, d_model), the
    four projections (d_model, d_model), n_heads an int dividing d_model;
    returns (B, T, d_model): softmax(q_h k_hᵀ / sqrt(d_model / n_heads)) v_h
    in each head h, the heads merged side by side, times w_o. No mask. Runs
    `multi_head_cases`; a wrong answer is compared with each combination of
    the usual mistakes (see the module). Prints the report when ``verbose``
    and returns it. Raises TypeError for an ``fn`` that is not callable.
    """
    if not callable(fn):
        raise TypeError(f"check_multi_head needs a function, got {type(fn).__name__}")
    report = MultiHeadCheck(tuple(_run_head_case(fn, c) for c in multi_head_cases(seed)))
    if verbose:
        print(report)
    return report
