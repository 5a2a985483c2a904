"""Notebook 07, exercise 4: the body of a Triton kernel's key loop, run in the interpreter.

The learner writes ``key_block(q, k, v, m, total, acc, rows, cols,
length_k, qk_scale, IS_CAUSAL) -> (m, total, acc)``, the body of the key
loop of `attention_lib.lessons.triton_skeleton.attention_skeleton` (its
source: `skeleton_source`). `check_key_block(attempt)` takes that function
(or its source text), runs the kernel with it in Triton's interpreter on
the CPU and holds the output to FlashAttention's rule: at most twice the
error of PyTorch's own attention in float16, against float64
(`attention_lib.flash.accuracy.Check`).

TRITON_INTERPRET=1 must be set before triton is imported, so the kernel
runs in a child process (``python -m attention_lib.lessons.triton_exercise
FOLDER``) that sets nothing else: the parent writes the inputs and the
learner's source to a folder, the child writes back each case's output and
log-sum-exp, or the error it raised. `check_key_blocks` checks several
bodies in one child (one import of torch and triton).

A function that still raises NotImplementedError (the starter) is not run:
the report says what to write. A wrong kernel is compared with the usual
mistakes (the keys past the end of the last block not masked, the causal
mask ignored or hiding the diagonal, exp instead of exp2, acc not rescaled
while m and total are right, p not cast for the second tl.dot).
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import math
import os
import subprocess
import sys
import tempfile
import textwrap
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ..core import scaled_dot_product_attention
from .exercises import AttentionCheck, CaseResult
from .flash_checks import NOT_WRITTEN, log_sum_exp, masked_scores, rows_text

__all__ = [
    "ARGUMENTS",
    "KeyBlockCheck",
    "check_key_block",
    "check_key_blocks",
    "kernel_cases",
    "skeleton_source",
]

ARGUMENTS = (
    "q",
    "k",
    "v",
    "m",
    "total",
    "acc",
    "rows",
    "cols",
    "length_k",
    "qk_scale",
    "IS_CAUSAL",
)
_SKELETON = "attention_lib.lessons.triton_skeleton"
_CHILD_TIMEOUT_S = 600


@dataclass(frozen=True)
class KeyBlockCheck(AttentionCheck):
    """Exercise 4's report: one `CaseResult` per kernel launch."""

    oracle: ClassVar[str] = (
        "the float64 answer, within FlashAttention's rule (at most twice PyTorch's float16 error)"
    )
    against: ClassVar[str] = "FlashAttention's accuracy rule"


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
    rising: bool = False  # scores that grow along the keys: the maximum rises every block
    width: int = 16

    @property
    def shape(self) -> str:
        causal = " causal" if self.is_causal else ""
        return f"L={self.length_q} S={self.length_k} {self.block_m}x{self.block_n}{causal}"

    def inputs(self, seed: int) -> tuple[np.ndarray, ...]:
        """q (H, L, E), k (H, S, E), v (H, S, Ev): seeded, float16 values (in float64)."""
        rng = np.random.default_rng(seed)
        q = rng.normal(size=(self.heads, self.length_q, self.width))
        k = rng.normal(size=(self.heads, self.length_k, self.width))
        if self.rising:  # every query leans the same way, and later keys lean further
            q = 1 + 0.2 * q
            k = 3 * np.arange(self.length_k)[:, None] / self.length_k + 0.2 * k
        v = rng.normal(size=(self.heads, self.length_k, self.width_v))
        return tuple(x.astype(np.float16).astype(np.float64) for x in (q, k, v))


def kernel_cases() -> list[_KernelCase]:
    """The launches `check_key_block` makes: float16, tiny, L != S, a short last key block."""
    return [
        _KernelCase("one block", 1, 16, 16, 16, False, 16, 16),
        _KernelCase("short last", 2, 20, 37, 16, False, 16, 16),
        _KernelCase("causal, L < S", 1, 24, 40, 16, True, 16, 32),
        _KernelCase("causal, L > S", 1, 40, 23, 32, True, 16, 16),
        _KernelCase("rising scores", 1, 16, 64, 16, False, 16, 16, rising=True),
    ]


def skeleton_source() -> str:
    """The text of the skeleton kernel, as the learner reads it (triton is not imported)."""
    spec = importlib.util.find_spec(_SKELETON)
    text = Path(spec.origin).read_text()  # type: ignore[union-attr, arg-type]
    node = next(
        n
        for n in ast.parse(text).body
        if isinstance(n, ast.FunctionDef) and n.name == "attention_skeleton"
    )
    lines = text.splitlines()[node.decorator_list[0].lineno - 1 : node.end_lineno]
    return "\n".join(line.replace("  # fmt: skip", "") for line in lines)


# -- the learner's source ------------------------------------------------------------------


@dataclass(frozen=True)
class _Body:
    name: str  # the function's name
    source: str  # its source, decorators blanked
    problem: str = ""  # why it cannot run ("" when it can)
    starter: bool = False  # it still raises NotImplementedError


def _raises_not_written(node: ast.FunctionDef) -> bool:
    for statement in node.body:
        if isinstance(statement, ast.Raise) and statement.exc is not None:
            exc = statement.exc.func if isinstance(statement.exc, ast.Call) else statement.exc
            if isinstance(exc, ast.Name) and exc.id == NOT_WRITTEN:
                return True
    return False


def _read(attempt: Any) -> _Body:
    """The learner's function (or source text) as a `_Body`."""
    if callable(attempt):
        try:
            text = inspect.getsource(attempt)
        except (OSError, TypeError):
            return _Body("", "", "its source cannot be read: define key_block with def in a cell")
    elif isinstance(attempt, str):
        text = attempt
    else:
        raise TypeError(f"check_key_block needs a function or its source, got {type(attempt)}")
    text = textwrap.dedent(text)
    try:
        tree = ast.parse(text)
    except SyntaxError as err:
        return _Body("", text, f"it does not parse: line {err.lineno}: {err.msg}")
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if len(defs) != 1:
        return _Body("", text, f"expected one function definition, found {len(defs)}")
    node = defs[0]
    names = [a.arg for a in node.args.posonlyargs + node.args.args]
    if len(names) != len(ARGUMENTS) or node.args.vararg or node.args.kwonlyargs:
        return _Body(
            node.name,
            text,
            f"key_block takes {len(ARGUMENTS)} arguments ({', '.join(ARGUMENTS)}), "
            f"yours takes {len(names)} ({', '.join(names)})",
        )
    lines = text.splitlines()
    for decorator in node.decorator_list:  # the child adds its own @triton.jit
        for i in range(decorator.lineno - 1, decorator.end_lineno or decorator.lineno):
            lines[i] = ""
    return _Body(node.name, "\n".join(lines) + "\n", starter=_raises_not_written(node))


# -- the child process ---------------------------------------------------------------------

_HINTS = {
    "same dtype": "tl.dot takes two operands of one dtype: p is float32 and v float16, so "
    "cast it first, tl.dot(p.to(v.dtype), v)",
    "NameError": "key_block may use its arguments, tl, triton and math, nothing defined in "
    "other cells",
}


def _error_text(err: BaseException, path: Path) -> str:
    """The exception in one line, with the line of the learner's source it came from.

    The interpreter wraps what the learner's code raised in an InterpreterError;
    the first exception of the chain is the one named.
    """
    chain = [err]
    while chain[-1].__cause__ is not None or chain[-1].__context__ is not None:
        chain.append(chain[-1].__cause__ or chain[-1].__context__)  # type: ignore[arg-type]
    lines = [
        f.lineno
        for e in chain
        for f in traceback.extract_tb(e.__traceback__)
        if f.filename == str(path)
    ]
    where = f" (line {lines[-1]} of your key_block)" if lines else ""
    first = chain[-1]
    text = f"{type(first).__name__}: {first}"
    hint = next((h for key, h in _HINTS.items() if key in text), "")
    return f"raised {text[:400]}{where}" + (f" -> {hint}" if hint else "")


def _child(folder: Path) -> None:
    """Run every body on every case; write {body: {case: (out, lse) or error}} to results.pt."""
    import torch
    import triton
    import triton.language as tl

    skeleton = importlib.import_module(_SKELETON)
    job = torch.load(folder / "job.pt", weights_only=True)
    results = []
    for i, (name, source) in enumerate(job["bodies"]):
        path = folder / f"key_block_{i}.py"
        path.write_text(source)  # triton.jit reads the source back from this file
        scope: dict[str, Any] = {"tl": tl, "triton": triton, "math": math, "__name__": path.stem}
        runs: dict[str, Any] = {}
        try:
            exec(compile(source, str(path), "exec"), scope)
            body = triton.jit(scope[name])
        except Exception as err:  # the learner's code
            results.append({"error": _error_text(err, path)})
            continue
        for case in job["cases"]:
            q, k, v = (x.to(torch.float16) for x in case["inputs"])
            try:
                out, lse = skeleton.launch(
                    body, q, k, v, case["is_causal"], case["block_m"], case["block_n"]
                )
                runs[case["name"]] = (out.double().numpy(), lse.double().numpy())
            except Exception as err:  # the learner's code, run by the interpreter
                runs[case["name"]] = _error_text(err, path)
        results.append({"runs": runs})
    torch.save(results, folder / "results.pt")


def _run_child(bodies: list[_Body], cases: list[_KernelCase], inputs: list[tuple]) -> list[dict]:
    import torch

    with tempfile.TemporaryDirectory(prefix="key-block-") as tmp:
        folder = Path(tmp)
        job = {
            "bodies": [(b.name, b.source) for b in bodies],
            "cases": [
                {
                    "name": c.name,
                    "inputs": [torch.from_numpy(a) for a in x],
                    "is_causal": c.is_causal,
                    "block_m": c.block_m,
                    "block_n": c.block_n,
                }
                for c, x in zip(cases, inputs, strict=True)
            ],
        }
        torch.save(job, folder / "job.pt")
        env = {**os.environ, "TRITON_INTERPRET": "1"}
        done = subprocess.run(
            [sys.executable, "-m", __name__, str(folder)],
            env=env,
            capture_output=True,
            text=True,
            timeout=_CHILD_TIMEOUT_S,
        )
        if done.returncode != 0:
            raise RuntimeError(f"the interpreter's process failed:\n{done.stderr[-3000:]}")
        return torch.load(folder / "results.pt", weights_only=False)


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
    lse = log_sum_exp(masked_scores(q, k, case.is_causal))  # (H, L)
    pytorch = float(np.max(np.abs(theirs - exact)))
    return _Reference(exact, lse, pytorch, float(np.max(np.abs(exact))))


def _near(got: np.ndarray, want: np.ndarray, tolerance: float) -> bool:
    return bool(np.all(np.isfinite(got)) and np.max(np.abs(got - want)) <= tolerance)


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
    hints = {
        "end not masked": f"the last key block is not masked: keys {keys} to {padded - 1}, past "
        f"the end (S = {keys}), were loaded as zeros, scored 0 and took weight; keep only "
        "cols < length_k",
        "causal ignored": "the causal mask was not applied inside the blocks that cross the "
        "diagonal: query i saw keys j > i there (keep cols <= rows)",
        "exp not exp2": "the weights are too sharp by a factor log2(e): qk_scale already "
        "includes log2(e), so take tl.math.exp2, not tl.exp",
    }
    for cause, theirs in candidates:
        if _near(out, theirs, tol):
            return cause, hints[cause]
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


def _report(
    body: _Body, result: dict | None, cases: list, inputs: list, refs: list
) -> KeyBlockCheck:
    """The report for one body, from what the child returned for it (None: not run)."""
    from ..flash.accuracy import Check

    if body.starter:
        hint = f"raised {NOT_WRITTEN}: the body of the key loop is not written yet"
        return KeyBlockCheck(
            tuple(CaseResult(c.name, c.shape, False, None, hint, "raised") for c in cases), ()
        )
    if body.problem:
        return KeyBlockCheck(
            (CaseResult("your source", "", False, None, body.problem, "source"),), ()
        )
    if result is None:
        note = "Triton is not installed here (pip install -e '.[triton]', Linux only)"
        return KeyBlockCheck((CaseResult("triton", "", False, None, note, "no triton"),), ())
    if "error" in result:
        failed = CaseResult("your source", "", False, None, result["error"], "raised")
        return KeyBlockCheck((failed,), ())
    lines = []
    for case, x, ref in zip(cases, inputs, refs, strict=True):
        run = result["runs"][case.name]
        if isinstance(run, str):
            lines.append(CaseResult(case.name, case.shape, False, None, run, "raised"))
            continue
        out, lse = run
        ours = float(np.max(np.abs(out - ref.out))) if np.all(np.isfinite(out)) else math.inf
        check = Check(case.name, "float16", out.shape, ours, ref.pytorch, ref.magnitude)
        if check.passed:
            ok = "within 2x PyTorch's float16 error"
            lines.append(CaseResult(case.name, case.shape, True, None, ok))
            continue
        cause, hint = _diagnose(case, x, out, lse, ref, max(4 * check.tolerance, 2e-3))
        lines.append(CaseResult(case.name, case.shape, False, None, hint, cause))
    return KeyBlockCheck(tuple(lines), ())


def check_key_blocks(attempts: Sequence[Any], *, seed: int = 0) -> list[KeyBlockCheck]:
    """`check_key_block` for several bodies at once, in one child process (one report each)."""
    bodies = [_read(a) for a in attempts]
    cases = kernel_cases()
    inputs = [c.inputs(seed + n) for n, c in enumerate(cases)]
    runnable = [b for b in bodies if not (b.starter or b.problem)]
    results: list[dict | None] = [None] * len(runnable)
    refs: list = []
    if runnable and importlib.util.find_spec("triton") is not None:
        results = list(_run_child(runnable, cases, inputs))
        refs = [_reference(c, *x) for c, x in zip(cases, inputs, strict=True)]
    by_body = dict(zip(map(id, runnable), results, strict=True))
    return [_report(b, by_body.get(id(b)), cases, inputs, refs) for b in bodies]


def check_key_block(attempt: Any, *, verbose: bool = True, seed: int = 0) -> KeyBlockCheck:
    """Run the skeleton kernel with ``attempt`` as its key loop's body; check every launch.

    ``attempt`` is the learner's function (its source is read with
    `inspect.getsource`) or its source text: one function of the eleven
    arguments `ARGUMENTS`, using only them, ``tl``, ``triton`` and ``math``,
    returning (m, total, acc). Decorators are dropped (the child adds
    @triton.jit). Prints the report when ``verbose``; returns it. Raises
    TypeError for an attempt that is neither a function nor a string, and
    RuntimeError if the interpreter's process itself fails.
    """
    report = check_key_blocks([attempt], seed=seed)[0]
    if verbose:
        print(report)
    return report


if __name__ == "__main__":  # the child: python -m attention_lib.lessons.triton_exercise FOLDER
    _child(Path(sys.argv[1]))
