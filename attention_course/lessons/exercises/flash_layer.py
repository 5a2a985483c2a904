"""Notebook 07, exercise 4: FlashAttention as a layer to train with, a ``torch.autograd.Function``.

The learner writes ``class FlashAttention(torch.autograd.Function)`` whose
``forward(ctx, q, k, v, is_causal=False)`` calls their exercise-2
``flash_forward`` on every head (q (..., L, E), k (..., S, E), v (..., S,
Ev), torch tensors, any leading axes), saves what the backward pass needs
(the output and the log-sum-exp, not the weights) and returns the output in
q's dtype; ``backward(ctx, d_out)`` calls their exercise-3 ``flash_backward``
and returns dq, dk, dv and None for ``is_causal``. `check_flash_layer(cls)`
runs ``cls.apply`` on cases drawn from a seed (`layer_cases`: several
heads and batches, causal and not, L != S, scores near 1000, float32 inputs
as the model's) and holds the output to PyTorch's
``scaled_dot_product_attention`` and the gradients to torch autograd's, both
in float64, then runs ``torch.autograd.gradcheck`` on a small float64 case.

It also watches how the answer is reached: ``flash_forward`` and
``flash_backward`` are found by name in the namespace of the class's
methods (a notebook's) and counted while the check runs: forward must call
flash_forward, backward must call flash_backward and not flash_forward
again (the forward's statistics are saved, not recomputed), and neither may
call an attention function (`attention_course.lessons.exercises.tripwires`).
Where the learner's flash_forward or flash_backward is not written yet, or
gets a small probe case wrong, the check runs with the course's in its
place, for the length of the check, and its report says so in a note: this
exercise is about the wrapper. (Where the solutions are not installed, a
graded class, it says which exercise to finish first.)

A wrong answer is named: forward returns a numpy array or float64 for
float32 inputs; backward returns too few gradients, numpy arrays, gradients
that ignore ``is_causal``, or dQ and dK from a δ without the forward's output;
the inputs written into (a numpy view of a tensor shares its memory).

Importing this module imports neither torch nor triton; a check imports torch.
"""

from __future__ import annotations

import contextlib
import inspect
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from attention_lib.core import scaled_dot_product_attention

from .base import NOT_WRITTEN, CaseResult, CheckReport, case_scores, log_sum_exp, rows_text, seeded
from .draws import large_scores
from .guards import call
from .tripwires import ForbiddenCall, forbidden

__all__ = [
    "FLASH_LAYER_SECONDS",
    "INNER",
    "FlashLayerCheck",
    "check_flash_layer",
    "layer_cases",
    "namespace_of",
]

#: how long a whole check may run the learner's code (gradcheck runs the forward ~200 times)
FLASH_LAYER_SECONDS = 60
#: the learner's functions the layer wraps, and the exercise each comes from
INNER = {"flash_forward": "exercise 2", "flash_backward": "exercise 3"}


@dataclass(frozen=True)
class FlashLayerCheck(CheckReport):
    """Exercise 4's report: one `CaseResult` per case, a note where the course's inner
    functions stood in for the learner's."""

    SUBJECT: ClassVar[str] = (
        "PyTorch's attention and its autograd gradients in float64, and torch.autograd.gradcheck"
    )
    QUESTION: ClassVar[str] = (
        "What must forward keep for backward, and which gradients does backward return?"
    )


def namespace_of(fn: Any) -> dict[str, Any] | None:
    """The namespace ``fn``'s code runs in: a function's globals, or for a class those of its
    first method (a notebook's namespace for a class defined in a cell)."""
    space = getattr(fn, "__globals__", None)
    if isinstance(space, dict):
        return space
    if inspect.isclass(fn):
        for value in vars(fn).values():
            inner = getattr(value, "__func__", value)  # a staticmethod's function
            space = getattr(inner, "__globals__", None)
            if isinstance(space, dict) and inspect.isfunction(inner):
                return space
    return None


# -- the cases -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _LayerCase:
    name: str
    query: np.ndarray  # (B, H, L, E)
    key: np.ndarray  # (B, H, S, E)
    value: np.ndarray  # (B, H, S, Ev)
    d_out: np.ndarray  # (B, H, L, Ev)
    is_causal: bool
    float32: bool = False
    gradcheck: bool = False

    @property
    def shape(self) -> str:
        b, h, length, width = self.query.shape
        causal = " causal" if self.is_causal else ""
        kind = " float32" if self.float32 else ""
        return f"B={b} H={h} L={length} S={self.key.shape[2]} E={width}{causal}{kind}"


def layer_cases(seed: int = 0) -> list[_LayerCase]:
    """The cases of `check_flash_layer` for ``seed``: two batches of two heads; causal with three
    heads; L != S; scores near 1000; float32 inputs as the model's; then gradcheck on a small
    causal (or not) float64 case."""
    rng = np.random.default_rng(seed)

    def between(low: int, high: int) -> int:
        return int(rng.integers(low, high + 1))

    plan = [  # name, B, H, L, S, causal, float32, gradcheck
        ("batch, heads", 2, 2, between(4, 9), None, False, False, False),
        ("causal", 1, 3, between(5, 10), None, True, False, False),
        ("L != S", 1, 2, between(3, 6), between(7, 10), False, False, False),
        ("large scores", 1, 2, between(4, 8), None, bool(rng.integers(2)), False, False),
        ("float32", 2, 2, between(5, 9), None, True, True, False),
        ("gradcheck", 1, 2, between(3, 5), None, bool(rng.integers(2)), False, True),
    ]
    cases = []
    for name, b, h, length, keys, causal, f32, grad in plan:
        keys = length if keys is None else keys
        width = 4 if grad else int(rng.choice([4, 8, 16]))
        width_v = 3 if grad else int(rng.integers(2, 6))
        q = rng.normal(size=(b, h, length, width))
        k = rng.normal(size=(b, h, keys, width))
        v = rng.normal(size=(b, h, keys, width_v))
        if name == "large scores":
            q = large_scores(rng, q, k)
        d_out = rng.normal(size=(b, h, length, width_v))
        if f32:  # float32 values, so that the float64 reference sees the same inputs
            q, k, v, d_out = (x.astype(np.float32).astype(float) for x in (q, k, v, d_out))
        cases.append(_LayerCase(name, q, k, v, d_out, causal, f32, grad))
    return cases


# -- the learner's inner functions -------------------------------------------------------------


def _probe_forward(fn: Callable[..., Any]) -> str:
    """ "" if ``fn`` is a working flash_forward on a small causal case, else why not."""
    rng = np.random.default_rng(7)
    q, k, v = rng.normal(size=(5, 4)), rng.normal(size=(6, 4)), rng.normal(size=(6, 3))
    got, failed = call(fn, (q, k, v, 2, 4, True), "probe", "", ("q", "k", "v"))
    if failed is not None:
        return "not written" if NOT_WRITTEN in failed.hint else "fails"
    want = scaled_dot_product_attention(q, k, v, is_causal=True)  # (L, Ev)
    lse = log_sum_exp(case_scores(q, k, True))  # (L,)
    try:
        out, got_lse = got
        ok = np.allclose(np.asarray(out, float), want) and np.allclose(np.asarray(got_lse), lse)
    except Exception:  # whatever came back: not a working flash_forward
        ok = False
    return "" if ok else "fails"


def _probe_backward(fn: Callable[..., Any]) -> str:
    """ "" if ``fn`` is a working flash_backward on a small causal case, else why not."""
    rng = np.random.default_rng(8)
    q, k, v = rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 6, 4)), rng.normal(size=(2, 6, 3))
    d_out = rng.normal(size=(2, 5, 3))
    out = scaled_dot_product_attention(q, k, v, is_causal=True)  # (H, L, Ev)
    lse = log_sum_exp(case_scores(q, k, True))  # (H, L)
    args = (q, k, v, out, lse, d_out, True)
    got, failed = call(fn, args, "probe", "", ("q", "k", "v", "out", "lse", "d_out"))
    if failed is not None:
        return "not written" if NOT_WRITTEN in failed.hint else "fails"
    want = _reference(q[None], k[None], v[None], d_out[None], True)[1:]
    try:
        ok = all(np.allclose(np.asarray(g, float), w[0]) for g, w in zip(got, want, strict=True))
    except Exception:  # whatever came back: not a working flash_backward
        ok = False
    return "" if ok else "fails"


_PROBES = {"flash_forward": _probe_forward, "flash_backward": _probe_backward}


@dataclass
class _Calls:
    """The calls of the inner functions, by phase ("forward" or "backward")."""

    phase: str = "forward"
    made: dict[str, list[str]] = field(default_factory=lambda: {"forward": [], "backward": []})


@contextlib.contextmanager
def _inner_functions(space: dict[str, Any] | None) -> Iterator[tuple[_Calls, list[str], str]]:
    """The inner functions in ``space`` watched for the length of the block, the course's in
    place of any that is missing, not written or wrong (where the solutions are installed):
    yields (the calls, the notes, why the check cannot run: "" when it can)."""
    calls, notes, saved = _Calls(), [], {}
    if space is None:
        yield calls, notes, "its methods' namespace cannot be read: define the class in a cell"
        return
    from .solutions import INSTALLED, solution_function

    problem = ""
    chosen: dict[str, Callable[..., Any]] = {}
    for name, where in INNER.items():
        own = space.get(name)
        status = "missing" if not callable(own) else _PROBES[name](own)
        if not status:
            chosen[name] = own
            continue
        said = {
            "missing": f"there is no {name} in this notebook",
            "not written": f"your {name} is not written yet",
            "fails": f"your {name} does not pass {where}'s check yet",
        }[status]
        if not INSTALLED:
            problem = problem or f"{said}: finish {where} first, this exercise wraps it"
            continue
        chosen[name] = solution_function(name)
        notes.append(f"{said}, so your class ran with the course's {name} in its place")

    def watched(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def inner(*args: Any, **kwargs: Any) -> Any:
            calls.made[calls.phase].append(name)
            return fn(*args, **kwargs)

        return inner

    for name in INNER:
        if name in space:
            saved[name] = space[name]
        if name in chosen:
            space[name] = watched(name, chosen[name])
    try:
        yield calls, notes, problem
    finally:
        for name in INNER:
            space.pop(name, None)
        space.update(saved)


# -- the reference, and the usual mistakes ----------------------------------------------------


def _reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, d_out: np.ndarray, causal: bool):
    """(out, dq, dk, dv): PyTorch's attention and its autograd gradients, float64 numpy."""
    import torch
    import torch.nn.functional as F

    q_, k_, v_ = (torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in (q, k, v))
    out = F.scaled_dot_product_attention(q_, k_, v_, is_causal=causal)
    out.backward(torch.from_numpy(np.asarray(d_out, dtype=float)))
    return tuple(x.detach().numpy() for x in (out, q_.grad, k_.grad, v_.grad))


def _from_p(case: _LayerCase, p: np.ndarray, delta: np.ndarray) -> tuple[np.ndarray, ...]:
    """(dq, dk, dv) from weights p (B, H, L, S) and delta (B, H, L, 1), by the formulas."""
    q, k, v, d_out = case.query, case.key, case.value, case.d_out
    scale = 1 / math.sqrt(q.shape[-1])
    ds = p * (d_out @ v.swapaxes(-1, -2) - delta)  # (B, H, L, S)
    return scale * ds @ k, scale * ds.swapaxes(-1, -2) @ q, p.swapaxes(-1, -2) @ d_out


def _gradient_mistake(case: _LayerCase, got: tuple[np.ndarray, ...], want: tuple) -> tuple:
    """(cause, hint) for gradients that miss autograd's."""
    q, k = case.query, case.key
    out = want[0]
    lse = log_sum_exp(case_scores(q, k, case.is_causal))  # (B, H, L)
    delta = np.sum(case.d_out * out, axis=-1, keepdims=True)  # (B, H, L, 1)
    with np.errstate(all="ignore"):
        unmasked = np.exp(case_scores(q, k, False) - lse[..., None])  # (B, H, L, S)
        p = np.exp(case_scores(q, k, case.is_causal) - lse[..., None])  # (B, H, L, S)
    candidates = []
    if case.is_causal:
        candidates.append(("backward not causal", _from_p(case, unmasked, delta)))
    candidates.append(("no out in backward", _from_p(case, p, np.zeros_like(delta))))
    hints = {
        "backward not causal": "the gradients are those of attention without the causal mask: "
        "forward was causal, backward was not; keep is_causal (ctx.is_causal = is_causal) "
        "and pass it to flash_backward",
        "no out in backward": "dV is right but dQ and dK are not: flash_backward's δ = "
        "rowsum(d_out * out) needs the forward's own output; save it in forward and pass it",
    }
    for cause, theirs in candidates:
        if all(np.allclose(g, t, rtol=1e-6, atol=1e-8) for g, t in zip(got, theirs, strict=True)):
            return cause, hints[cause]
    names = ("dq", "dk", "dv")
    wrong = [
        f"{n} ({rows_text(np.any(~np.isclose(g, w, rtol=1e-6, atol=1e-8), axis=-1).reshape(-1))})"
        for n, g, w in zip(names, got, want[1:], strict=True)
        if not np.allclose(g, w, rtol=1e-6, atol=1e-8)
    ]
    return "wrong gradients", (
        f"{', '.join(wrong)} differ from autograd's (rows counted over batch and heads): "
        "check what backward hands to flash_backward: the saved q, k, v, out and lse, "
        "d_out, each reshaped as forward did, and is_causal; then the gradients reshaped back "
        "to q's, k's and v's shapes"
    )


_TORCH_ERRORS = {
    "incorrect number of gradients": "backward returns one gradient per argument of forward: "
    "dq, dk, dv, and None for is_causal",
    "save_for_backward can only save": "ctx.save_for_backward keeps tensors only: save "
    "torch.from_numpy(lse), and keep other values as attributes (ctx.is_causal = is_causal)",
    "on Tensor that requires grad": "take .detach() before .numpy(): the check's inputs require "
    "gradients, as the model's do",
    "returned an invalid gradient": "each gradient must have the shape of its input: reshape "
    "dq, dk and dv back to q's, k's and v's shapes",
    "expected Variable or None": "backward must return torch tensors (torch.from_numpy(dq), "
    "...) and None for is_causal, not numpy arrays",
}


def _raised(err: BaseException) -> str:
    text = f"{type(err).__name__}: {err}".rstrip(": ").splitlines()[0][:300]
    hint = next((h for key, h in _TORCH_ERRORS.items() if key in str(err)), "")
    return f"raised {text}" + (f" -> {hint}" if hint else "")


# -- one case -----------------------------------------------------------------------------------


def _tensors(case: _LayerCase) -> list[Any]:
    import torch

    dtype = torch.float32 if case.float32 else torch.float64
    return [torch.tensor(x, dtype=dtype) for x in (case.query, case.key, case.value, case.d_out)]


def _failed(case: _LayerCase, hint: str, cause: str, error: float | None = None) -> CaseResult:
    return CaseResult(case.name, case.shape, False, error, hint, cause)


def _run(cls: Any, case: _LayerCase, calls: _Calls) -> Any:
    """The learner's output and gradients for ``case`` (numpy float64), or a failed case."""
    import torch

    q, k, v, d_out = _tensors(case)
    kept = [x.clone() for x in (q, k, v, d_out)]
    for x in (q, k, v):
        x.requires_grad_(True)
    try:
        with forbidden(_first_method(cls)) as forbid:
            calls.phase = "forward"
            out = cls.apply(q, k, v, case.is_causal)
            if not isinstance(out, torch.Tensor):
                return _failed(
                    case,
                    f"forward returned a {type(out).__module__}.{type(out).__name__}, not a "
                    "torch tensor: return torch.from_numpy(out), reshaped and in q's dtype",
                    "not a tensor",
                )
            if out.dtype != q.dtype:
                return _failed(
                    case,
                    f"forward returned {out.dtype} for {q.dtype} inputs: return the output in "
                    "q's dtype, out.to(q.dtype) (the model is float32, and its next layer "
                    "expects its own dtype)",
                    "dtype",
                )
            if tuple(out.shape) != case.d_out.shape:
                return _failed(
                    case,
                    f"the output should have shape {case.d_out.shape}, got {tuple(out.shape)}: "
                    "reshape it back to q's leading axes",
                    "shape",
                )
            if out.grad_fn is None:
                return _failed(
                    case,
                    "the output is not connected to q, k and v: call FlashAttention.apply(q, "
                    "k, v, is_causal), never forward directly",
                    "no graph",
                )
            calls.phase = "backward"
            out.backward(d_out)
        if forbid:
            raise ForbiddenCall(forbid[0])
    except ForbiddenCall as err:
        return _failed(case, err.hint.replace("your function", "your class"), "calls attention")
    except Exception as err:  # the learner's code, or torch's checks of what it returned
        return _failed(case, _raised(err), "raised")
    written = [
        n
        for n, x, y in zip(("q", "k", "v", "d_out"), (q, k, v, d_out), kept, strict=True)
        if not torch.equal(x.detach(), y)
    ]
    if written:
        return _failed(
            case,
            f"your class writes into {' and '.join(written)}, which belong to the caller (a "
            "numpy view of a tensor shares its memory): compute new arrays instead",
            "writes input",
        )
    grads = [x.grad for x in (q, k, v)]
    if any(g is None for g in grads):
        return _failed(case, "backward gave no gradient for q, k or v", "no gradients")
    return out.detach().double().numpy(), *(g.double().numpy() for g in grads)


def _first_method(cls: Any) -> Any:
    """A function defined in the class, for the tripwires to find its namespace."""
    for value in vars(cls).values():
        inner = getattr(value, "__func__", value)
        if inspect.isfunction(inner):
            return inner
    return None


def _gradcheck(cls: Any, case: _LayerCase, calls: _Calls) -> CaseResult | None:
    """torch.autograd.gradcheck on the case: None if it passes, else the failed case."""
    import torch

    q, k, v, _ = _tensors(case)
    inputs = tuple(x.requires_grad_(True) for x in (q, k, v))
    try:
        with forbidden(_first_method(cls)):
            calls.phase = "gradcheck"
            calls.made.setdefault("gradcheck", [])
            ok = torch.autograd.gradcheck(
                lambda a, b, c: cls.apply(a, b, c, case.is_causal), inputs, raise_exception=False
            )
    except ForbiddenCall as err:
        return _failed(case, err.hint.replace("your function", "your class"), "calls attention")
    except Exception as err:
        return _failed(case, _raised(err), "raised")
    if ok:
        return None
    return _failed(
        case,
        "torch.autograd.gradcheck fails: backward's gradients are not the derivatives of "
        "forward's output (compared with finite differences in float64)",
        "gradcheck",
    )


def _check_case(cls: Any, case: _LayerCase, calls: _Calls) -> CaseResult:
    got = _run(cls, case, calls)
    if isinstance(got, CaseResult):
        return got
    want = _reference(case.query, case.key, case.value, case.d_out, case.is_causal)
    tol = {"rtol": 1e-4, "atol": 1e-5} if case.float32 else {"rtol": 1e-7, "atol": 1e-9}
    error = max(float(np.max(np.abs(g - w))) for g, w in zip(got, want, strict=True))
    if not all(np.all(np.isfinite(g)) for g in got):
        return _failed(case, "NaN or inf in the output or the gradients", "not finite")
    if not np.allclose(got[0], want[0], **tol):
        bad = np.any(~np.isclose(got[0], want[0], **tol), axis=-1).reshape(-1)  # (B·H·L,)
        return _failed(
            case,
            f"the output differs from PyTorch's attention in {rows_text(bad)} (counted over "
            "batch and heads): hand flash_forward one head at a time, q (L, E), k (S, E), "
            "v (S, Ev), and put the heads back in order",
            "wrong output",
            error,
        )
    if not all(np.allclose(g, w, **tol) for g, w in zip(got[1:], want[1:], strict=True)):
        cause, hint = _gradient_mistake(case, got[1:], want)
        return _failed(case, hint, cause, error)
    forward, backward = calls.made["forward"], calls.made["backward"]
    if "flash_forward" not in forward:
        return _failed(
            case,
            "the output is right, but forward never called flash_forward: this exercise wraps "
            "your exercise-2 function",
            "no flash_forward",
            error,
        )
    if "flash_backward" not in backward:
        return _failed(
            case,
            "the gradients are right, but backward never called flash_backward: this exercise "
            "wraps your exercise-3 function",
            "no flash_backward",
            error,
        )
    if "flash_forward" in backward:
        return _failed(
            case,
            "backward called flash_forward again: save out and lse in forward "
            "(ctx.save_for_backward) and hand them to flash_backward, with no second pass",
            "forward recomputed",
            error,
        )
    return CaseResult(case.name, case.shape, True, error, "")


@np.errstate(all="ignore")  # a wrong answer's inf and NaN are for the report to name
def check_flash_layer(
    cls: Any, *, verbose: bool = True, seed: int | None = None
) -> FlashLayerCheck:
    """Check the learner's ``FlashAttention``, a ``torch.autograd.Function`` used as
    ``FlashAttention.apply(q, k, v, is_causal)`` (see the module docstring).

    `layer_cases` drawn from ``seed`` (None: the attempt's own, from its source);
    every case runs forward and backward, the last ``torch.autograd.gradcheck``.
    Prints the report when ``verbose``; returns it. Raises TypeError for an
    attempt that is neither a class nor a function.
    """
    if not callable(cls):
        raise TypeError(f"check_flash_layer needs a class, got {type(cls).__name__}")
    seed = seeded(seed, cls)
    cases = layer_cases(seed)
    import torch

    if not (inspect.isclass(cls) and issubclass(cls, torch.autograd.Function)):
        what = "a function" if inspect.isfunction(cls) else f"a {type(cls).__name__}"
        hint = (
            f"FlashAttention is {what}, not a class derived from torch.autograd.Function: "
            "write class FlashAttention(torch.autograd.Function) with static methods "
            "forward(ctx, q, k, v, is_causal=False) and backward(ctx, d_out)"
        )
        report = FlashLayerCheck(
            (CaseResult("your class", "", False, None, hint, "not a Function"),)
        )
        return _done(report, seed, verbose)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: one thread, and one order of every sum
    try:
        with _inner_functions(namespace_of(cls)) as (calls, notes, problem):
            if problem:
                hint = problem
                results = (CaseResult("your class", "", False, None, hint, "inner functions"),)
            else:
                results = tuple(
                    (_gradcheck(cls, c, calls) or CaseResult(c.name, c.shape, True, None, ""))
                    if c.gradcheck
                    else _check_case(cls, c, calls)
                    for c in cases
                )
    finally:
        torch.set_num_threads(threads)
    if all(r.cause == "raised" and NOT_WRITTEN in r.hint for r in results):
        notes = []  # the starter: a question, not notes about the inner functions
    return _done(FlashLayerCheck(results, tuple(notes)), seed, verbose)


def _done(report: FlashLayerCheck, seed: int, verbose: bool) -> FlashLayerCheck:
    report = FlashLayerCheck(report.cases, report.notes, seed)
    if verbose:
        print(report)
    return report
