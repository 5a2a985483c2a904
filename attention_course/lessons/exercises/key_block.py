"""Notebook 07, exercise 4: the body of a Triton kernel's key loop, run in the interpreter.

The learner writes ``key_block(q, k, v, m, total, acc, rows, cols, length_k,
qk_scale, IS_CAUSAL) -> (m, total, acc)``, the body of the key loop of
`attention_course.lessons.exercises.triton_skeleton.attention_skeleton` (its
source: `attention_course.lessons.exercises.triton_runner.skeleton_source`).
`check_key_block(attempt)` takes that function (or its source text), runs the
kernel with it in Triton's interpreter on the CPU and holds the output to
FlashAttention's rule: at most twice the error of PyTorch's own attention in
float16, against float64 (`attention_lib.flash.accuracy.Check`), and the stored
log-sum-exp (which the backward pass needs) to within 1e-2 of float64's.

TRITON_INTERPRET=1 must be set before triton is imported, so the kernel
runs in a child process (`attention_course.lessons.exercises.triton_runner`);
`check_key_blocks` checks several bodies in one child (one import of torch
and triton). Importing this module imports neither.

The launches (`kernel_cases`, drawn from a seed) cover head widths 16, 32
and 64, L != S, causal and not, a short last key block, scores that rise and
that fall along the keys (the maximum moves in every block, up or not at
all), scores near 1000 and rows whose scores all lie far below zero.

A function that still raises NotImplementedError (the starter) is not run:
the report says what to write. A wrong kernel is compared with the usual
mistakes (the keys past the end of the last block not masked, the causal
mask ignored or hiding the diagonal, exp instead of exp2, a scale fixed for
one head width instead of qk_scale, acc not rescaled while m and total are
right, p not cast for the second tl.dot, the right output with its lse in
the wrong logarithm units).
"""

from __future__ import annotations

import importlib.util
import math
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from attention_lib.core import scaled_dot_product_attention

from .base import NOT_WRITTEN, CaseResult, CheckReport, case_scores, log_sum_exp, rows_text, seeded
from .draws import far_below, large_scores
from .triton_runner import CHILD_TIMEOUT_S, Body, read_body, run_bodies

__all__ = ["KeyBlockCheck", "check_key_block", "check_key_blocks", "kernel_cases"]


@dataclass(frozen=True)
class KeyBlockCheck(CheckReport):
    """Exercise 4's report: one `CaseResult` per kernel launch."""

    SUBJECT: ClassVar[str] = (
        "the float64 answer, within FlashAttention's rule (at most twice PyTorch's float16 error)"
    )
    QUESTION: ClassVar[str] = (
        "In base 2, what does one pass of the key loop do to m, total and acc?"
    )

    def __str__(self) -> str:
        """The report; where the kernel could not run at all, the one reason why."""
        if self.cause in ("no triton", "timeout"):
            return self.hint
        return super().__str__()


@dataclass(frozen=True)
class _KernelCase:
    name: str
    heads: int
    length_q: int
    length_k: int
    width_v: int
    is_causal: bool
    block_m: int
    block_n: int
    kind: str = ""  # "moving" (the maximum rises along the keys, or falls), "large", "far below"
    width: int = 16

    @property
    def shape(self) -> str:
        causal = " causal" if self.is_causal else ""
        return (
            f"L={self.length_q} S={self.length_k} E={self.width} "
            f"{self.block_m}x{self.block_n}{causal}"
        )

    def inputs(self, seed: int) -> tuple[np.ndarray, ...]:
        """q (H, L, E), k (H, S, E), v (H, S, Ev): seeded, float16 values (in float64)."""
        rng = np.random.default_rng(seed)
        q = rng.normal(size=(self.heads, self.length_q, self.width))
        k = rng.normal(size=(self.heads, self.length_k, self.width))
        if self.kind == "moving":  # every query leans the same way, the keys more and more
            lean = 3 * np.arange(self.length_k)[:, None] / self.length_k  # (S, 1)
            q = 1 + 0.2 * q
            k = lean + 0.2 * k  # (H, S, E): the scores rise along the keys
            k[1::2] = k[1::2, ::-1].copy()  # and fall in every other head
        if self.kind == "large":
            q = large_scores(rng, q, k)
        if self.kind == "far below":
            rows = rng.random(self.length_q) < 0.5
            rows[0] = True
            q, k = far_below(rng, q, k, rows)
        v = rng.normal(size=(self.heads, self.length_k, self.width_v))
        return tuple(x.astype(np.float16).astype(np.float64) for x in (q, k, v))


def kernel_cases(seed: int = 0) -> list[_KernelCase]:
    """The five launches `check_key_block` makes for ``seed``: float16, small, L != S, a short
    last key block, head widths 16, 32 and 64 (the first three launches, in a drawn order).

    The second launch's scores reach about 1000; the fourth is causal with
    rows whose scores all lie far below zero, and tiles of 32 query rows by 16
    keys, so that its first rows meet a tile wholly masked for them; in the
    last the maximum rises along the keys in one head and falls in the other.
    """
    rng = np.random.default_rng(seed)
    widths = [int(w) for w in (*rng.permutation([16, 32, 64]), *rng.choice([16, 32, 64], 2))]

    def between(low: int, high: int) -> int:
        return int(rng.integers(low, high + 1))

    plan = [  # name, H, L, S, causal, block_m, block_n, kind
        ("one block", 1, 16, between(9, 15), False, 16, 16, ""),
        ("short last", 2, between(17, 24), between(33, 40), False, 16, 16, "large"),
        ("causal, L < S", 1, between(20, 28), between(36, 44), True, 16, 32, ""),
        ("causal, L > S", 1, between(36, 44), between(18, 26), True, 32, 16, "far below"),
        ("moving maximum", 2, 16, between(48, 64), bool(rng.integers(2)), 16, 16, "moving"),
    ]
    return [
        _KernelCase(name, heads, n, s, int(rng.choice([16, 32, 64])), causal, bm, bn, kind, width)
        for (name, heads, n, s, causal, bm, bn, kind), width in zip(plan, widths, strict=True)
    ]


# -- the verdicts --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Reference:
    """What a case's output is held to: the float64 answer, and PyTorch's float16 error."""

    out: np.ndarray  # (H, L, Ev) float64 reference
    lse: np.ndarray  # (H, L)
    pytorch: float  # PyTorch's float16 max |error|
    magnitude: float


def _reference(case: _KernelCase, q: np.ndarray, k: np.ndarray, v: np.ndarray) -> _Reference:
    import torch
    import torch.nn.functional as F

    exact = scaled_dot_product_attention(q, k, v, is_causal=case.is_causal)  # (H, L, Ev)
    half = [torch.from_numpy(x).to(torch.float16) for x in (q, k, v)]
    theirs = F.scaled_dot_product_attention(*half, is_causal=case.is_causal).double().numpy()
    lse = log_sum_exp(case_scores(q, k, case.is_causal))  # (H, L)
    pytorch = float(np.max(np.abs(theirs - exact)))
    return _Reference(exact, lse, pytorch, float(np.max(np.abs(exact))))


def _near(got: np.ndarray, want: np.ndarray, tolerance: float) -> bool:
    return bool(np.all(np.isfinite(got)) and np.max(np.abs(got - want)) <= tolerance)


def _masked_tile_rows(case: _KernelCase) -> np.ndarray:
    """(L,) bool: the rows that meet, in the causal loop, a key tile wholly masked for them."""
    rows = np.arange(case.length_q)  # (L,)
    stop = np.minimum(case.length_k, (rows // case.block_m + 1) * case.block_m)  # (L,)
    last_tile = (stop - 1) // case.block_n * case.block_n  # (L,): the start of the last tile
    return last_tile > rows


def _diagnose(
    case: _KernelCase, inputs: tuple, out: np.ndarray, lse: np.ndarray, ref: _Reference, tol: float
) -> tuple[str, str]:
    """(cause, hint) for a kernel whose output breaks the rule."""
    q, k, v = inputs
    length, keys = case.length_q, case.length_k
    i, j = np.arange(length)[:, None], np.arange(keys)[None, :]
    bad = ~np.all(np.isfinite(out), axis=-1)  # (H, L)
    if np.any(bad):
        rows = np.any(bad, axis=0)  # (L,)
        if case.is_causal and rows[0] and not np.any(rows[1:]):
            return "diagonal masked", (
                "row 0 is NaN: it saw no key in its first block, so the diagonal is masked; "
                "query i must see keys j <= i, key i included"
            )
        log2_scores = case_scores(q, k, case.is_causal) * math.log2(math.e)  # (H, L, S)
        finite = log2_scores[:, rows][np.isfinite(log2_scores[:, rows])]
        spread = float(np.max(np.abs(finite), initial=0.0))
        masked = case.is_causal and bool(np.any(_masked_tile_rows(case)[rows]))
        if spread >= 128 or masked:
            why = [f"scores here reach 2^{spread:.0f} in the kernel's units"] * (spread >= 128)
            why += ["some rows meet a tile wholly masked for them"] * masked
            return "overflow", (
                f"NaN or inf in {rows_text(rows)}: an exp2 went past float32's range (2^128) "
                f"or took -inf - (-inf) ({'; '.join(why)}); m_new = tl.maximum(m, tl.max(s, "
                "1)) never falls below m, and then exp2(s - m_new[:, None]) and exp2(m - m_new) "
                "are both at most 1"
            )
        return "not finite", f"NaN or inf in {rows_text(rows)}: exp2 of -inf - (-inf), or 0 / 0?"
    lse_near = bool(np.max(np.abs(lse - ref.lse)) <= 1e-3 * max(1.0, np.max(np.abs(ref.lse))))
    padded = -(-keys // case.block_n) * case.block_n  # the keys the last block covers
    candidates = []
    if padded > keys:
        k_pad, v_pad = (np.pad(x, ((0, 0), (0, padded - keys), (0, 0))) for x in (k, v))
        theirs = scaled_dot_product_attention(q, k_pad, v_pad, is_causal=case.is_causal)
        candidates.append(("end not masked", theirs))
    if case.is_causal:
        stop = np.minimum(keys, (i // case.block_m + 1) * case.block_m)  # the loop's last key
        visited = j < np.minimum(keys, -(-stop // case.block_n) * case.block_n)  # (L, S)
        candidates.append(("causal ignored", scaled_dot_product_attention(q, k, v, visited)))
    base_e = scaled_dot_product_attention(
        q, k, v, is_causal=case.is_causal, scale=case.width**-0.5 * math.log2(math.e)
    )
    candidates.append(("exp not exp2", base_e))
    unscaled = scaled_dot_product_attention(
        q, k, v, is_causal=case.is_causal, scale=math.log(2.0)
    )  # exp2 of the raw scores: e^(s ln 2)
    candidates.append(("no qk_scale", unscaled))
    for other in (16, 32, 64):
        if other != case.width:
            fixed = scaled_dot_product_attention(
                q, k, v, is_causal=case.is_causal, scale=other**-0.5
            )
            candidates.append((f"scale for {other}", fixed))
    hints = {
        "end not masked": f"the last key block is not masked: keys {keys} to {padded - 1}, past "
        f"the end (S = {keys}), were loaded as zeros, scored 0 and took weight; keep only "
        "cols < length_k",
        "causal ignored": "the causal mask was not applied inside the blocks that cross the "
        "diagonal: query i saw keys j > i there (keep cols <= rows)",
        "exp not exp2": "the weights are too sharp by a factor log2(e): qk_scale already "
        "includes log2(e), so take tl.math.exp2, not tl.exp",
        "no qk_scale": "the scores were not multiplied by qk_scale: s = tl.dot(q, tl.trans(k)) "
        "* qk_scale, the scale 1/sqrt(E) with log2(e) folded in for exp2",
        **{
            f"scale for {other}": f"your scale is 1/sqrt({other}), but this case's heads are "
            f"{case.width} wide: multiply by qk_scale, which the skeleton computes for the "
            "case's width (with log2(e) in it)"
            for other in (16, 32, 64)
        },
    }
    for cause, theirs in candidates:
        if _near(out, theirs, tol):
            return ("fixed scale" if cause.startswith("scale for") else cause), hints[cause]
    wrong = np.any(np.any(np.abs(out - ref.out) > tol, axis=-1), axis=0)  # (L,)
    blocks = sorted({int(r) // case.block_m for r in np.flatnonzero(wrong)})
    in_blocks = np.isin(np.arange(length) // case.block_m, blocks)  # (L,)
    picked = [b in blocks for b in range(max(blocks) + 1)]
    where = f"{rows_text(picked, 'query block')}, {rows_text(in_blocks)}"
    if lse_near:
        return "acc not rescaled", (
            f"lse is right but the output is not ({where}): m and total are right, so acc is "
            "off; rescale it by exp2(m - m_new) as total is, before adding tl.dot(p, v)"
        )
    return "unknown", (
        f"the output and lse differ in {where}: check the update against exercise 1, in base 2"
    )


#: float32 statistics from float16 inputs: their lse is within ~1e-3 of float64's; a
#: statistic in the wrong logarithm units is off by a constant factor (> 0.1 here)
_LSE_TOLERANCE = 1e-2


def _lse_off(lse: np.ndarray, want: np.ndarray) -> float:
    """max |lse - want| over the rows (inf if lse has NaN or inf)."""
    lse = np.asarray(lse, dtype=float)
    if lse.shape != want.shape or not np.all(np.isfinite(lse)):
        return math.inf
    return float(np.max(np.abs(lse - want)))


_NO_TRITON = (
    "Triton is not installed here (it needs Linux: pip install -e '.[triton]'), so the kernel "
    "cannot run; the solution below opens on request, after its hints"
)


def _not_run(what: str, hint: str, cause: str) -> KeyBlockCheck:
    """A report of one line: why the kernel did not run."""
    return KeyBlockCheck((CaseResult(what, "", False, None, hint, cause),), ())


def _report(
    body: Body, result: dict | None, cases: list, inputs: list, refs: list
) -> KeyBlockCheck:
    """The report for one body, from what the child returned for it (None: not run)."""
    from attention_lib.flash.accuracy import Check

    if body.starter:
        hint = f"raised {NOT_WRITTEN}: the body of the key loop is not written yet"
        return KeyBlockCheck(
            tuple(CaseResult(c.name, c.shape, False, None, hint, "raised") for c in cases), ()
        )
    if body.problem:
        return _not_run("your source", body.problem, "source")
    if result is None:
        return _not_run("triton", _NO_TRITON, "no triton")
    if "timeout" in result:
        return _not_run("kernel", result["timeout"], "timeout")
    if "error" in result:
        return _not_run("your source", result["error"], "raised")
    lines = []
    for case, x, ref in zip(cases, inputs, refs, strict=True):
        run = result["runs"][case.name]
        if isinstance(run, str):
            lines.append(CaseResult(case.name, case.shape, False, None, run, "raised"))
            continue
        out, lse = run
        ours = float(np.max(np.abs(out - ref.out))) if np.all(np.isfinite(out)) else math.inf
        check = Check(case.name, "float16", out.shape, ours, ref.pytorch, ref.magnitude)
        lse_off = _lse_off(lse, ref.lse)
        if check.passed and lse_off <= _LSE_TOLERANCE:
            ok = "within 2x PyTorch's float16 error"
            lines.append(CaseResult(case.name, case.shape, True, None, ok))
            continue
        if check.passed:  # the right weights, the wrong stored statistic
            hint = (
                f"the output is right, but the stored lse is off by up to {lse_off:.3g} (the "
                "backward pass rebuilds every weight from it): the skeleton reads m in log2 "
                "units, lse = (m + log2(total)) * ln 2, so keep s and m in base 2 (qk_scale "
                "already holds log2(e)) and take tl.math.exp2"
            )
            lines.append(CaseResult(case.name, case.shape, False, None, hint, "lse units"))
            continue
        cause, hint = _diagnose(case, x, out, lse, ref, max(4 * check.tolerance, 2e-3))
        lines.append(CaseResult(case.name, case.shape, False, None, hint, cause))
    return KeyBlockCheck(tuple(lines), ())


@np.errstate(all="ignore")  # a wrong answer's inf and NaN are for the report to name
def check_key_blocks(attempts: Sequence[Any], *, seed: int = 0) -> list[KeyBlockCheck]:
    """`check_key_block` for several bodies at once, on the launches of ``seed``, in one child
    process (one report each)."""
    bodies = [read_body(a) for a in attempts]
    cases = kernel_cases(seed)
    inputs = [c.inputs(seed * 100 + n) for n, c in enumerate(cases)]
    runnable = [b for b in bodies if not (b.starter or b.problem)]
    results: list[dict | None] = [None] * len(runnable)
    refs: list = []
    if runnable and importlib.util.find_spec("triton") is not None:
        try:
            launches = [
                {"name": c.name, "inputs": x, "is_causal": c.is_causal}
                | {"block_m": c.block_m, "block_n": c.block_n}
                for c, x in zip(cases, inputs, strict=True)
            ]
            results = run_bodies(runnable, launches)
        except subprocess.TimeoutExpired:
            said = f"the interpreter did not finish in {CHILD_TIMEOUT_S} s: a loop without end?"
            results = [{"timeout": said}] * len(runnable)
        refs = [_reference(c, *x) for c, x in zip(cases, inputs, strict=True)]
    by_body = dict(zip(map(id, runnable), results, strict=True))
    reports = [_report(b, by_body.get(id(b)), cases, inputs, refs) for b in bodies]
    return [replace(r, seed=seed) for r in reports]


@np.errstate(all="ignore")  # a wrong answer's inf and NaN are for the report to name
def check_key_block(
    attempt: Any, *, verbose: bool = True, seed: int | None = None
) -> KeyBlockCheck:
    """Run the skeleton kernel with ``attempt`` as its key loop's body; check every launch.

    ``attempt`` is the learner's function (its source is read with `inspect.getsource`)
    or its source text: one function of the eleven arguments
    (`attention_course.lessons.exercises.triton_runner.ARGUMENTS`), using only them,
    ``tl``, ``triton`` and ``math``, returning (m, total, acc). Decorators are dropped
    (the child adds @triton.jit). ``seed`` draws the launches (`kernel_cases`; None: the
    attempt's own, from its source). Prints the report when ``verbose``; returns it.
    Raises TypeError for an attempt that is neither a function nor a string, and
    RuntimeError if the interpreter's process itself fails.
    """
    if not (callable(attempt) or isinstance(attempt, str)):
        raise TypeError(f"check_key_block needs a function or its source, got {type(attempt)}")
    seed = seeded(seed, attempt)
    report = check_key_blocks([attempt], seed=seed)[0]
    if verbose:
        print(report)
    return report
