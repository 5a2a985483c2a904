"""Notebook 07, the Triton warm-up: a row softmax kernel, then its online version, run in the
interpreter.

The learner writes a whole kernel, ``row_softmax(X, Y, length, stride, BLOCK)``
and then ``online_softmax(X, Y, length, stride, BLOCK)``: one program per row
of a (rows, stride) float32 matrix X, whose first ``length`` columns are the
row's scores (the rest is padding), writing the row's softmax into the same
columns of Y. ``row_softmax`` gets BLOCK >= length (the next power of two)
and holds the whole row at once: load it (past the end: -inf), subtract its
maximum, exponentiate, divide by the sum. ``online_softmax`` gets a BLOCK
smaller than the row and walks it in blocks, carrying the running maximum m
and the sum of exp(x - m), rescaled by exp(m - m_new) whenever the maximum
grows; a second walk writes exp(x - m) / total (Milakov and Gimelshein, 2018).

`check_row_softmax` and `check_online_softmax` take the function (its source is
read with `inspect.getsource`; the learner's notebook needs no triton) or its
source text, annotate its last argument ``tl.constexpr``, and run it in
Triton's interpreter in a child process
(`attention_course.lessons.exercises.softmax_child`, through
`attention_course.lessons.exercises.triton_runner.run_bodies`). The launches
(`softmax_cases`, drawn from a seed) hold ordinary rows, rows whose length is
not a multiple of the block (their scores all negative, so that a tail
padded with 0 instead of -inf takes the maximum), scores near +1000 (exp
overflows float32 past 88.7), rows whose scores all lie below -900 (exp
underflows to 0 there) and, for the online kernel, rows whose maximum rises
from block to block. Each output is held to float64's softmax within twice
PyTorch's float32 error plus 2e-6, and the padding of Y must be left as it
was. A wrong kernel is compared with the usual mistakes, which the report
names: no maximum subtracted (overflow at large scores), a running maximum
started at 0 (NaN or 0 for rows far below zero), the running sum not
rescaled when the maximum grows, the tail of a short row loaded as 0
instead of -inf, exp2 for exp, no division, and a store past the row's end.

Importing this module imports neither torch nor triton.
"""

from __future__ import annotations

import ast
import importlib.util
import math
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from .base import NOT_WRITTEN, CaseResult, CheckReport, rows_text, seeded
from .triton_runner import CHILD_TIMEOUT_S, Body, read_body, run_bodies

__all__ = [
    "CHILD",
    "KERNEL_ARGUMENTS",
    "OnlineSoftmaxCheck",
    "RowSoftmaxCheck",
    "check_online_softmax",
    "check_row_softmax",
    "check_softmax_kernels",
    "softmax_cases",
]

#: the kernel's arguments, as the starter names them (the learner may rename them)
KERNEL_ARGUMENTS = ("X", "Y", "length", "stride", "BLOCK")
#: the child process that runs the kernels
CHILD = "attention_course.lessons.exercises.softmax_child"
#: float32 exp overflows past this
_EXP_MAX = math.log(np.finfo(np.float32).max)
#: beyond twice PyTorch's float32 error: the float32 rounding a correct kernel may add
_FLOOR = 2e-6


@dataclass(frozen=True)
class RowSoftmaxCheck(CheckReport):
    """The row softmax kernel's report: one `CaseResult` per launch."""

    SUBJECT: ClassVar[str] = "float64's softmax, within twice PyTorch's float32 error"
    QUESTION: ClassVar[str] = (
        "With the whole row in one block, what do you load past its end, and what do you "
        "subtract before exp?"
    )

    def __str__(self) -> str:
        """The report; where the kernel could not run at all, the one reason why."""
        if self.cause in ("no triton", "timeout"):
            return self.hint
        return super().__str__()


@dataclass(frozen=True)
class OnlineSoftmaxCheck(RowSoftmaxCheck):
    """The online softmax kernel's report."""

    QUESTION: ClassVar[str] = (
        "Walking the row one block at a time, what must happen to the running sum when the "
        "running maximum grows?"
    )


@dataclass(frozen=True)
class _SoftmaxCase:
    name: str
    scores: np.ndarray  # (rows, length) float32 values, in float64
    stride: int
    block: int
    kind: str = ""  # "tail", "large", "far below", "rising"

    @property
    def length(self) -> int:
        return int(self.scores.shape[1])

    @property
    def shape(self) -> str:
        return f"{self.scores.shape[0]} rows x {self.length}, BLOCK {self.block}"

    def matrix(self) -> np.ndarray:
        """X (rows, stride): the scores, then padding that is no score (50: a kernel that
        loads it unmasked lets it take the maximum)."""
        rows = self.scores.shape[0]
        x = np.full((rows, self.stride), 50.0)
        x[:, : self.length] = self.scores
        return x


def _power_of_two(n: int) -> int:
    return 1 << (int(n) - 1).bit_length()


def softmax_cases(online: bool, seed: int = 0) -> list[_SoftmaxCase]:
    """The launches of the row (``online`` False) or online kernel for ``seed``: float32 rows of
    ordinary scores, rows whose length is not a multiple of the block with every score below
    zero, scores near +1000, rows far below zero, and (online) a maximum that rises along
    the row. Row kernel: BLOCK is the next power of two above the length (never equal to
    it); online: BLOCK 16 or 32, at least three blocks a row."""
    rng = np.random.default_rng(seed)

    def length() -> int:
        if not online:
            n = int(rng.integers(5, 100))
            return n + 1 if n & (n - 1) == 0 else n  # never a power of two: a tail to mask
        return int(rng.integers(50, 130))

    cases = []
    plan = [("ordinary", ""), ("short tail", "tail"), ("large scores", "large")]
    plan += [("far below 0", "far below")] + [("rising max", "rising")] * online
    for name, kind in plan:
        n, rows = length(), int(rng.integers(3, 6))
        block = int(rng.choice([16, 32])) if online else _power_of_two(n)
        if online:  # three blocks or more, the last one short
            n = max(n, 2 * block + 1)
            n += 1 if n % block == 0 else 0
        x = rng.normal(0.0, 3.0, size=(rows, n))
        if kind == "tail":
            x = -rng.uniform(2.0, 8.0, size=(rows, n))  # all below 0: the padding would win
        if kind == "large":
            x = x + rng.uniform(300.0, 1000.0, size=(rows, 1))  # (rows, n), exp overflows
        if kind == "far below":
            x = -rng.uniform(900.0, 1000.0, size=(rows, 1)) + x  # exp underflows to 0
        if kind == "rising":
            x = np.linspace(-10.0, 30.0, n)[None, :] + rng.normal(0.0, 1.0, size=(rows, n))
            x[0] = x[0, ::-1]  # and one row where it falls: the first block holds it
        cases.append(_SoftmaxCase(name, x.astype(np.float32).astype(float), n + 3, block, kind))
    return cases


# -- the verdicts --------------------------------------------------------------------------


def _softmax(x: np.ndarray) -> np.ndarray:
    """Row softmax in float64 (..., n)."""
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def _torch_error(case: _SoftmaxCase, want: np.ndarray) -> float:
    """PyTorch's float32 softmax's max |error| against float64's, for this case."""
    import torch

    theirs = torch.softmax(torch.from_numpy(case.scores).to(torch.float32), dim=-1)
    return float(np.max(np.abs(theirs.double().numpy() - want)))


def _unrescaled(x: np.ndarray, block: int) -> np.ndarray:
    """The online softmax with the running sum not rescaled when the maximum grows."""
    m = np.full(x.shape[0], -np.inf)
    total = np.zeros(x.shape[0])
    for c0 in range(0, x.shape[1], block):
        part = x[:, c0 : c0 + block]
        m = np.maximum(m, part.max(axis=1))
        total = total + np.exp(part - m[:, None]).sum(axis=1)
    return np.exp(x - m[:, None]) / total[:, None]


def _candidates(case: _SoftmaxCase, online: bool) -> list[tuple[str, np.ndarray]]:
    x = case.scores
    padded = -(-case.length // case.block) * case.block  # the columns the last block covers
    zeros = np.pad(x, ((0, 0), (0, padded - case.length)))  # the tail loaded as 0
    found = [("tail not masked", _softmax(zeros)[:, : case.length])]
    if online:
        found.append(("sum not rescaled", _unrescaled(x, case.block)))
    found.append(("exp2", _softmax(x * math.log(2.0))))
    found.append(("not divided", np.exp(x - x.max(axis=1, keepdims=True))))
    return found


def _hints(case: _SoftmaxCase, online: bool) -> dict[str, str]:
    padded = -(-case.length // case.block) * case.block
    return {
        "tail not masked": f"the tail of the row is not masked with -inf: columns {case.length} "
        f"to {padded - 1} lie past the row's end (length {case.length}, BLOCK {case.block}), "
        "were loaded as 0 and took part (every score here is below 0, so they even took the "
        "maximum); load with mask=cols < length, other=float('-inf')",
        "sum not rescaled": "the running sum was not rescaled when the maximum grew: what was "
        "summed as exp(x - m) must be multiplied by exp(m - m_new) before the new block's "
        "exp(x - m_new) is added (the rows here rise, so the maximum grows in every block)",
        "exp2": "tl.math.exp2 computes 2^x: the softmax here is in base e, take tl.exp (the "
        "Triton attention kernel folds log2(e) into its scale first; this one does not)",
        "not divided": "the output is exp(x - max), not divided by the row's sum: the entries "
        "of a softmax row add up to 1",
    }


def _diagnose(
    case: _SoftmaxCase, out: np.ndarray, want: np.ndarray, tol: float, online: bool
) -> tuple[str, str]:
    """(cause, hint) for a kernel whose output misses the softmax."""
    x = case.scores
    rows = ~np.all(np.isfinite(out), axis=1)  # (rows,)
    zero = np.all(out == 0, axis=1)  # (rows,): exp(x - 0) underflowed in every column
    if np.any(rows | zero):
        bad = rows | zero
        where = rows_text(bad)
        if case.kind == "large":
            return "no max subtraction", (
                f"NaN or inf in {where}: these scores reach {x[bad].max():.0f}, and float32's "
                f"exp overflows past {_EXP_MAX:.1f}; subtract the row's maximum first, so that "
                "every exponent is at most 0 and exp(x - max) at most 1"
            )
        if case.kind == "far below":
            said = f"{'NaN' if np.any(rows) else '0'} in {where}, whose scores all lie below "
            said += f"{x[bad].max():.0f}: exp of them underflows to 0 in float32"
            if online:
                return "m starts at 0", (
                    f"{said}, so the running maximum must be the row's own: start m at "
                    "-inf (tl.full((), float('-inf'), tl.float32)), not 0, and subtract it"
                )
            return "no max subtraction", f"{said}; subtract the row's maximum before exp"
        return "not finite", (
            f"NaN or inf in {where}: look for exp of scores that were not shifted by the "
            "maximum, or 0 / 0 where a row's sum came out 0"
        )
    hints = _hints(case, online)
    for cause, theirs in _candidates(case, online):
        if np.max(np.abs(out - theirs)) <= max(tol, 1e-4 * np.max(np.abs(theirs))):
            return cause, hints[cause]
    wrong = np.any(np.abs(out - want) > tol, axis=1)  # (rows,)
    sums = out.sum(axis=1)  # (rows,)
    said = f"the output differs in {rows_text(wrong)} (their sums: "
    said += ", ".join(f"{s:.4g}" for s in sums[wrong][:3])
    return "unknown", (
        f"{said}): check the load's mask and -inf, the maximum, and "
        + ("the rescaling of the running sum" if online else "the sum you divide by")
    )


_NO_TRITON = (
    "Triton is not installed here (it needs Linux: pip install -e '.[triton]'), so the kernel "
    "cannot run; the solution below opens on request, after its hints"
)


def _not_run(report: type, what: str, hint: str, cause: str) -> Any:
    return report((CaseResult(what, "", False, None, hint, cause),), ())


def _report(
    body: Body, result: dict | None, cases: list, online: bool, refs: list
) -> RowSoftmaxCheck:
    kind = OnlineSoftmaxCheck if online else RowSoftmaxCheck
    name = "online_softmax" if online else "row_softmax"
    if body.starter:
        hint = f"raised {NOT_WRITTEN}: the kernel {name} is not written yet"
        return kind(tuple(CaseResult(c.name, c.shape, False, None, hint, "raised") for c in cases))
    if body.problem:
        return _not_run(kind, "your source", body.problem, "source")
    if result is None:
        return _not_run(kind, "triton", _NO_TRITON, "no triton")
    if "timeout" in result:
        return _not_run(kind, "kernel", result["timeout"], "timeout")
    if "error" in result:
        return _not_run(kind, "your source", result["error"], "raised")
    lines = []
    for case, (want, torch_error) in zip(cases, refs, strict=True):
        run = result["runs"][case.name]
        if isinstance(run, str):
            lines.append(CaseResult(case.name, case.shape, False, None, run, "raised"))
            continue
        from .softmax_child import SENTINEL

        matrix, after = run
        out, pad = matrix[:, : case.length], matrix[:, case.length :]  # (rows, length), (rows, 3)
        tol = 2 * torch_error + _FLOOR
        past = np.any(pad != SENTINEL, axis=1)  # (rows,): wrote past the row's end
        past[-1] |= not after  # the last row's store ran on past the matrix
        if np.any(past):
            hint = (
                f"your kernel wrote past the end of {rows_text(past)} "
                f"(columns {case.length} and on, which belong to the caller): mask the store "
                "with cols < length"
            )
            lines.append(CaseResult(case.name, case.shape, False, None, hint, "store not masked"))
            continue
        if np.any(out == SENTINEL):
            hint = "some columns of the row were never written: store every block of the row"
            lines.append(CaseResult(case.name, case.shape, False, None, hint, "not stored"))
            continue
        error = float(np.max(np.abs(out - want))) if np.all(np.isfinite(out)) else math.inf
        if error <= tol:
            lines.append(CaseResult(case.name, case.shape, True, error, ""))
            continue
        cause, hint = _diagnose(case, out, want, tol, online)
        shown = error if math.isfinite(error) else None
        lines.append(CaseResult(case.name, case.shape, False, shown, hint, cause))
    return kind(tuple(lines))


def _constexpr_block(body: Body) -> Body:
    """The body with its last argument annotated ``tl.constexpr`` (the learner's cell defines
    it without triton), the text spliced so that line numbers stay the learner's."""
    if body.problem or body.starter:
        return body
    node = next(n for n in ast.parse(body.source).body if isinstance(n, ast.FunctionDef))
    last = (node.args.posonlyargs + node.args.args)[-1]
    if last.annotation is not None:
        return body
    lines = body.source.splitlines()
    row, end = last.lineno - 1, last.end_col_offset or 0
    lines[row] = lines[row][:end] + ": tl.constexpr" + lines[row][end:]
    return replace(body, source="\n".join(lines) + "\n")


@np.errstate(all="ignore")  # a wrong kernel's inf and NaN are for the report to name
def check_softmax_kernels(
    attempts: Sequence[Any], *, online: bool, seed: int = 0
) -> list[RowSoftmaxCheck]:
    """`check_row_softmax` (``online`` False) or `check_online_softmax` for several kernels
    at once, on the launches of ``seed``, in one child process (one report each)."""
    what = "online_softmax" if online else "row_softmax"
    bodies = [_constexpr_block(read_body(a, KERNEL_ARGUMENTS, what)) for a in attempts]
    cases = softmax_cases(online, seed)
    runnable = [b for b in bodies if not (b.starter or b.problem)]
    results: list[dict | None] = [None] * len(runnable)
    refs: list = []
    if runnable and importlib.util.find_spec("triton") is not None:
        launches = [
            {"name": c.name, "inputs": [c.matrix()], "length": c.length, "block": c.block}
            for c in cases
        ]
        try:
            results = run_bodies(runnable, launches, child=CHILD)
        except subprocess.TimeoutExpired:
            said = f"the interpreter did not finish in {CHILD_TIMEOUT_S} s: a loop without end?"
            results = [{"timeout": said}] * len(runnable)
        wants = [_softmax(c.scores) for c in cases]
        refs = [(w, _torch_error(c, w)) for c, w in zip(cases, wants, strict=True)]
    by_body = dict(zip(map(id, runnable), results, strict=True))
    reports = [_report(b, by_body.get(id(b)), cases, online, refs) for b in bodies]
    return [replace(r, seed=seed) for r in reports]


def _check(attempt: Any, online: bool, verbose: bool, seed: int | None) -> RowSoftmaxCheck:
    what = "online_softmax" if online else "row_softmax"
    if not (callable(attempt) or isinstance(attempt, str)):
        raise TypeError(f"check_{what} needs a function or its source, got {type(attempt)}")
    seed = seeded(seed, attempt)
    report = check_softmax_kernels([attempt], online=online, seed=seed)[0]
    if verbose:
        print(report)
    return report


def check_row_softmax(
    attempt: Any, *, verbose: bool = True, seed: int | None = None
) -> RowSoftmaxCheck:
    """Run the learner's ``row_softmax(X, Y, length, stride, BLOCK)`` kernel in the interpreter,
    one program per row, BLOCK the next power of two above the row's length; check each launch.

    ``attempt`` is the function (its source is read) or its source text, using its
    arguments, ``tl``, ``triton`` and ``math``. ``seed`` draws the launches
    (`softmax_cases`; None: the attempt's own, from its source). Prints the report when
    ``verbose``; returns it. Raises TypeError for an attempt that is neither a function nor
    a string, and RuntimeError if the interpreter's process itself fails.
    """
    return _check(attempt, False, verbose, seed)


def check_online_softmax(
    attempt: Any, *, verbose: bool = True, seed: int | None = None
) -> OnlineSoftmaxCheck:
    """As `check_row_softmax`, for ``online_softmax(X, Y, length, stride, BLOCK)``: BLOCK 16 or
    32, rows of three blocks or more, and rows whose maximum rises from block to block."""
    return _check(attempt, True, verbose, seed)  # type: ignore[return-value]
