"""Notebook 02's multi-head exercise: project, split into heads, attend at the head's width, merge.

`check_multi_head(fn)`: the learner's ``fn(x, w_q, w_k, w_v, w_o, n_heads)``
-> (B, T, d_model), on layers drawn from a seed (`multi_head_cases`: heads 8,
16 and 32 wide, and one layer whose scores reach about 1000) against the
reference: q = x @ w_q (the weights multiply on the right, as the exercise
states) split into n_heads heads of width d_head = d_model / n_heads, each
head's attention scaled by 1/sqrt(d_head), the heads merged side by side and
projected by w_o. The exercise is to write the layer, so calling an
attention function (the library's, PyTorch's ``scaled_dot_product_attention``
or ``nn.MultiheadAttention``) fails with the call named. A wrong answer is
compared with every combination of the mistakes the exercise is about, and
each part that is wrong is named with the case's numbers:

- the scale: by sqrt(d_model) (the most common bug in tutorial code), by
  sqrt(n_heads), or none at all;
- the split: (B, T, d_model) reshaped straight to (B, H, T, d_head), which
  mixes tokens into heads (the transpose left out), or left (B, T, H, d_head),
  so that each token's heads attend to each other instead of to the tokens;
- the merge: (B, H, T, d_head) reshaped straight back to (B, T, d_model),
  heads and tokens in the wrong order;
- the weights transposed (``x @ w.T``, nn.Linear's layout), all four or the
  three input projections; the output projection left out.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from attention_lib.core import scaled_dot_product_attention

from .base import (
    HINT_FLOAT64,
    CaseResult,
    CheckReport,
    as_array,
    close,
    fit_scale,
    float32_like,
    max_error,
    rows_close,
    rows_text,
    seeded,
)
from .guards import call

__all__ = ["HINT_TRANSPOSED", "MultiHeadCheck", "check_multi_head", "multi_head_cases"]

HINT_TRANSPOSED = (
    "the weights multiply on the right: x @ w_q, x @ w_k, x @ w_v and merged @ w_o, each "
    "(d_model, d_model) as given, rows for the input features (nn.Linear stores the transpose "
    "and computes x @ W.T; here the weights are already in x @ w order)"
)

_SCALES = ("head", "model", "heads", "none")  # what the scores are divided by (the root of)
_SPLITS = ("right", "mixed", "across")  # heads cut as they should be, across tokens, not moved
_TRANSPOSED = ("none", "all", "inputs")  # which weights were used as w.T


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


@dataclass(frozen=True)
class _Variant:
    """One way of computing the layer: right, or with some of the usual mistakes."""

    scale: str = "head"
    split: str = "right"
    merge_ok: bool = True
    transposed: str = "none"
    projected: bool = True

    @property
    def right(self) -> bool:
        return self == _Variant()


def _variants() -> list[_Variant]:
    """Every combination of the mistakes, the right layer left out."""
    found = []
    for scale, split, merge_ok, transposed, projected in itertools.product(
        _SCALES, _SPLITS, (True, False), _TRANSPOSED, (True, False)
    ):
        if split == "across" and not merge_ok:  # nothing to merge in the wrong order
            continue
        variant = _Variant(scale, split, merge_ok, transposed, projected)
        if not variant.right:
            found.append(variant)
    return found


def multi_head_cases(seed: int = 0) -> list[_HeadCase]:
    """The cases `check_multi_head` runs for ``seed``: heads 8, 16 and 32 wide (2 to 4 heads,
    any order), then a layer whose scores reach about 1000.

    Weights of variance 1/d_model keep q and k near unit variance, so the
    scale the learner picks shows in the weights as it would at
    initialisation; no one constant scale is right for every case.
    """
    rng = np.random.default_rng(seed)
    plan = [(f"{w} wide", int(w)) for w in rng.permutation([8, 16, 32])]
    plan.append(("large scores", int(rng.choice([8, 16]))))
    cases = []
    for name, d_head in plan:
        heads = int(rng.integers(2, 5))
        batch, length, d_model = int(rng.integers(1, 3)), int(rng.integers(3, 8)), heads * d_head
        x = rng.normal(size=(batch, length, d_model))  # (B, T, D)
        weights = tuple(rng.normal(size=(d_model, d_model)) / math.sqrt(d_model) for _ in range(4))
        case = _HeadCase(name, x, weights, heads)
        if name == "large scores":  # scores grow as x squared
            top = float(np.max(_scores(case)))  # > 0: q·k of random projections
            case = _HeadCase(name, x * math.sqrt(rng.uniform(800, 1000) / top), weights, heads)
        cases.append(case)
    return cases


def _split(case: _HeadCase, y: np.ndarray, how: str) -> np.ndarray:
    """(B, T, D) -> (B, H, T, dh) cut as it should be, or cut with the named mistake."""
    (batch, length, _), (_, heads, d_head) = case.x.shape, case.widths
    if how == "mixed":  # no transpose: tokens cut across heads
        return y.reshape(batch, heads, length, d_head)
    heads_last = y.reshape(batch, length, heads, d_head)  # (B, T, H, dh)
    return heads_last if how == "across" else heads_last.swapaxes(1, 2)


def _scores(case: _HeadCase) -> np.ndarray:
    """The right layer's scaled scores, (B, H, T, T)."""
    w_q, w_k = case.weights[:2]
    q, k = _split(case, case.x @ w_q, "right"), _split(case, case.x @ w_k, "right")
    return q @ k.swapaxes(-1, -2) / math.sqrt(case.widths[2])  # (B, H, T, T)


def _multi_head(
    case: _HeadCase, how: _Variant | None = None, scale: float | None = None
) -> np.ndarray:
    """The case's multi-head output (B, T, D), right or computed the ``how`` way (or right but
    with the scores multiplied by ``scale``)."""
    how = how or _Variant()
    (batch, length, d_model), (_, heads, d_head) = case.x.shape, case.widths
    w_q, w_k, w_v, w_o = (
        w.T if how.transposed == "all" or (how.transposed == "inputs" and i < 3) else w
        for i, w in enumerate(case.weights)
    )
    q, k, v = (_split(case, case.x @ w, how.split) for w in (w_q, w_k, w_v))  # (B, H, T, dh)
    root = {"head": d_head, "model": d_model, "heads": heads, "none": 1}[how.scale]
    scale = 1 / math.sqrt(root) if scale is None else scale
    with np.errstate(all="ignore"):
        out = scaled_dot_product_attention(q, k, v, scale=scale)  # (B, H, T, dh)
    if how.split != "across" and how.merge_ok:
        out = out.swapaxes(1, 2)  # (B, T, H, dh): each token's heads side by side
    merged = out.reshape(batch, length, d_model)  # (B, T, D)
    return merged @ w_o if how.projected else merged


def _said(case: _HeadCase, how: _Variant) -> str:
    """What is wrong in this combination of mistakes, with the case's numbers."""
    d_model, heads, d_head = case.widths
    batch, length, _ = case.x.shape
    head = f"each head is {d_head} wide: divide by √{d_head}"
    said = {
        "model": [f"you divided by √{d_model}, the model width; {head}"],
        "heads": [f"you divided by √{heads}, the number of heads; {head}"],
        "none": [f"you did not scale the scores at all; {head}"],
        "head": [],
    }[how.scale]
    if how.transposed != "none":
        said.append(HINT_TRANSPOSED)
    if how.split == "mixed":
        said.append(
            f"your split mixes heads: reshaping ({batch}, {length}, {d_model}) straight to "
            f"({batch}, {heads}, {length}, {d_head}) cuts across tokens; reshape to ({batch}, "
            f"{length}, {heads}, {d_head}) first, then swap the token and head axes"
        )
    if how.split == "across":
        said.append(
            f"your attention ran across each token's {heads} heads, not across the {length} "
            f"tokens: after reshaping to ({batch}, {length}, {heads}, {d_head}), swap to "
            f"({batch}, {heads}, {length}, {d_head}) before the scores"
        )
    if not how.merge_ok:
        said.append(
            f"your merge is in the wrong order: ({batch}, {heads}, {length}, {d_head}) was "
            f"reshaped straight to ({batch}, {length}, {d_model}); swap the head and token axes "
            f"back to ({batch}, {length}, {heads}, {d_head}) before the reshape"
        )
    if not how.projected:
        said.append("the merged heads were not projected: the layer ends with merged @ w_o")
    return "; and ".join(said)


def _cause(how: _Variant) -> str:
    names = {"model": "scale sqrt(d_model)", "heads": "scale sqrt(n_heads)", "none": "no scale"}
    parts = [names[how.scale]] if how.scale in names else []
    parts += ["transposed weights"] if how.transposed != "none" else []
    parts += {"mixed": ["split mixes heads"], "across": ["attends across heads"]}.get(how.split, [])
    parts += [] if how.merge_ok else ["merge order"]
    parts += [] if how.projected else ["no w_o"]
    return " + ".join(parts)


@dataclass(frozen=True)
class MultiHeadCheck(CheckReport):
    """`check_multi_head`'s report."""

    SUBJECT: ClassVar[str] = "the reference multi-head layer"
    QUESTION: ClassVar[str] = "After the split, how wide is a head, and what goes under the root?"


_NAMES = ("x", "w_q", "w_k", "w_v", "w_o", "n_heads")


def _run_head_case(fn: Callable[..., Any], case: _HeadCase) -> CaseResult:
    want = _multi_head(case)  # (B, T, D)
    args = (case.x, *case.weights, case.n_heads)
    got, failed = call(fn, args, case.name, case.shape, _NAMES, forbid=True)
    if failed:
        return failed
    out, cause, problem = as_array(got, "the output")
    if problem:
        return CaseResult(case.name, case.shape, False, None, problem, cause)
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
        bad = rows_text(~np.all(np.isfinite(out.reshape(-1, out.shape[-1])), axis=-1))
        hint = (
            f"the output has NaN or inf ({bad} of the batch's tokens, counted across the batch): "
            "subtract each row's maximum before exp (the scores here reach about 1000)"
        )
        return CaseResult(case.name, case.shape, False, None, hint, "not finite")
    for how in _variants():
        if close(out, _multi_head(case, how)):
            return CaseResult(case.name, case.shape, False, error, _said(case, how), _cause(how))
    if float32_like(out, want):
        return CaseResult(case.name, case.shape, False, error, HINT_FLOAT64, "float32")
    d_head = case.widths[2]
    scale, gap = fit_scale(lambda s: _multi_head(case, scale=s), out, d_head**-0.5)
    if gap < 1e-5 and not math.isclose(scale, d_head**-0.5, rel_tol=1e-3):
        hint = (
            f"your scale is {scale:.4g} (1/√{scale**-2:.3g}) here, but each head is {d_head} "
            f"wide: divide by √{d_head}, the width of this case's heads (a fixed number is "
            "right for one head width only)"
        )
        return CaseResult(case.name, case.shape, False, error, hint, "wrong scale")
    tokens = rows_text(~rows_close(out, want).reshape(-1), "token")
    hint = (
        f"not one of the usual mistakes ({tokens} of the batch differ); check the steps: "
        "project with x @ w_q, x @ w_k, x @ w_v, split each into heads, attend in each head at "
        "its own width, merge, project with @ w_o"
    )
    return CaseResult(case.name, case.shape, False, error, hint, "unknown")


@np.errstate(all="ignore")  # a wrong answer's inf and NaN are for the report to name
def check_multi_head(
    fn: Callable[..., Any], *, verbose: bool = True, seed: int | None = None
) -> MultiHeadCheck:
    """Check the learner's multi-head attention layer against the reference.

    ``fn(x, w_q, w_k, w_v, w_o, n_heads)``: x float64 (B, T, d_model), the
    four projections (d_model, d_model), multiplying on the right (x @ w_q),
    all read-only, n_heads an int dividing d_model; returns (B, T, d_model):
    softmax(q_h k_hᵀ / sqrt(d_model / n_heads)) v_h in each head h, the heads
    merged side by side, times w_o. No mask. Runs `multi_head_cases` drawn
    from ``seed`` (None: the attempt's own); calling an attention function
    fails; a wrong answer is compared with each combination of the usual
    mistakes (see the module). Prints the report when ``verbose`` and
    returns it. Raises TypeError for an ``fn`` that is not callable.
    """
    if not callable(fn):
        raise TypeError(f"check_multi_head needs a function, got {type(fn).__name__}")
    seed = seeded(seed, fn)
    results = tuple(_run_head_case(fn, c) for c in multi_head_cases(seed))
    report = MultiHeadCheck(results, seed=seed)
    if verbose:
        print(report)
    return report
