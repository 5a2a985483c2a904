"""Wrong attempts, one or more for each kind of miss the checkers once let through, and the
promises that hold for every attempt.

The kinds: cases that one specific answer fits (a scale fixed for one head width, a softmax
that does not subtract its maximum, a running maximum that starts at 0, a backward pass that
reads lse for dV only, a scale rule whose divisor barely grows); an answer reached without
doing the exercise (calling an attention function, computing every tile and skipping some,
feeding a dense result through online_update); two verdicts for one attempt (a list where an
array is asked); side effects (writing into an argument); messages that point the wrong way
(float32, transposed weights, the grouped heads mapped the wrong way). Each attempt must fail
with the cause its checker names that mistake by, and words that say it.

For every attempt here, the notebook's gate and the graded edition give one verdict on the
same seed; the course's solutions pass on any seed; and whatever a function does (raises,
hangs, returns the wrong type or NaN, writes into its arguments), the learner reads one
sentence and never a traceback from the checker's own code.
"""

from __future__ import annotations

import importlib.util
import math
import signal
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attention_course.explorers.gate import ExerciseGate
from attention_course.lessons.exercises import SOLUTIONS, grading
from attention_course.lessons.exercises.base import SEEDS
from attention_course.lessons.exercises.feedback import feedback
from attention_course.lessons.exercises.registry import EXERCISES, run
from attention_course.lessons.exercises.solutions import solution_function
from attention_lib import scaled_dot_product_attention as library_attention
from attention_lib import softmax

online_update = solution_function("online_update")  # what exercise 2's attempts build on
SEED = 23
#: the exercises run in Triton's interpreter (a child process each check, tested in tests/triton)
TRITON = ("row_softmax", "online_softmax", "key_block")


def _solution(name: str) -> Any:
    if name in SOLUTIONS:
        scope = {"np": np, "math": math, "softmax": softmax}
        exec(SOLUTIONS[name].code, scope)
        return scope[name]
    return solution_function(name)


# -- notebook 02 ------------------------------------------------------------------------------


def attention_by_the_library(q, k, v, mask=None):
    return library_attention(q, k, v, mask)


def attention_by_pytorch(q, k, v, mask=None):
    import torch
    import torch.nn.functional as F

    args = [torch.from_numpy(np.array(x)) for x in (q, k, v)]
    masked = None if mask is None else torch.from_numpy(np.array(mask))
    return F.scaled_dot_product_attention(*args, attn_mask=masked).numpy()


def attention_without_the_maximum(q, k, v, mask=None):
    scores = q @ k.T / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    e = np.exp(scores)
    return e / e.sum(axis=-1, keepdims=True) @ v


def attention_in_float32(q, k, v, mask=None):
    q, k, v = (x.astype(np.float32) for x in (q, k, v))
    scores = q @ k.T / np.float32(math.sqrt(q.shape[-1]))
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    return (softmax(scores, axis=-1) @ v).astype(np.float64)


def attention_scaling_q_in_place(q, k, v, mask=None):
    q /= math.sqrt(q.shape[-1])
    scores = q @ k.T if mask is None else np.where(mask, q @ k.T, -np.inf)
    return softmax(scores, axis=-1) @ v


def _heads(x, w, n_heads):  # (B, T, D) -> (B, H, T, dh)
    b, t, d = x.shape
    return (x @ w).reshape(b, t, n_heads, d // n_heads).swapaxes(1, 2)


def _merge(heads, w_o):  # (B, H, T, dh) -> (B, T, D)
    b, h, t, dh = heads.shape
    return heads.swapaxes(1, 2).reshape(b, t, h * dh) @ w_o


def multi_head_scale_for_16(x, w_q, w_k, w_v, w_o, n_heads):
    q, k, v = (_heads(x, w, n_heads) for w in (w_q, w_k, w_v))
    return _merge(softmax(q @ k.swapaxes(-1, -2) / 4.0, axis=-1) @ v, w_o)  # right for 16 wide


def multi_head_linear_layout(x, w_q, w_k, w_v, w_o, n_heads):
    q, k, v = (_heads(x, w.T, n_heads) for w in (w_q, w_k, w_v))  # nn.Linear: x @ W.T
    scores = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])
    return _merge(softmax(scores, axis=-1) @ v, w_o.T)


def multi_head_by_pytorch(x, w_q, w_k, w_v, w_o, n_heads):
    import torch
    import torch.nn.functional as F

    q, k, v = (torch.from_numpy(_heads(x, w, n_heads)) for w in (w_q, w_k, w_v))
    return _merge(F.scaled_dot_product_attention(q, k, v).numpy(), w_o)


def multi_head_by_module(x, w_q, w_k, w_v, w_o, n_heads):
    import torch

    layer = torch.nn.MultiheadAttention(x.shape[-1], n_heads, bias=False, batch_first=True)
    t = torch.from_numpy(np.array(x))
    return layer(t, t, t)[0].detach().numpy()


def multi_head_by_the_library(x, w_q, w_k, w_v, w_o, n_heads):
    q, k, v = (_heads(x, w, n_heads) for w in (w_q, w_k, w_v))
    return _merge(library_attention(q, k, v), w_o)


def multi_head_without_the_maximum(x, w_q, w_k, w_v, w_o, n_heads):
    q, k, v = (_heads(x, w, n_heads) for w in (w_q, w_k, w_v))
    e = np.exp(q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1]))
    return _merge(e / e.sum(axis=-1, keepdims=True) @ v, w_o)


def decode_grows_the_cache_in_place(q, k, v, k_cache, v_cache):
    past = len(k_cache)
    for cache, new in ((k_cache, k), (v_cache, v)):
        cache.resize((past + len(new), cache.shape[1]), refcheck=False)  # the caller's array
        cache.flags.writeable = True
        cache[past:] = new
    t, s = len(q), len(k_cache)
    mask = np.tril(np.ones((t, s), dtype=bool), k=s - t)
    scores = np.where(mask, q @ k_cache.T / math.sqrt(q.shape[-1]), -np.inf)
    return softmax(scores, axis=-1) @ v_cache, k_cache, v_cache


def decode_returns_lists(q, k, v, k_cache, v_cache):
    out, k_cache, v_cache = _solution("decode_step")(q, k, v, k_cache, v_cache)
    return out.tolist(), k_cache, v_cache


def barely_growing_divisor(d):
    return 1 / (1 + 1e-4 * d)


# -- notebook 07 ------------------------------------------------------------------------------


def update_in_float32(m, total, acc, s, v):
    state = online_update(*(x.astype(np.float32) for x in (m, total, acc, s, v)))
    return tuple(x.astype(np.float64) for x in state)


def key_loop_from_zero(q, k, v, block_k):
    m, total = np.zeros((len(q), 1)), np.zeros((len(q), 1))  # the maximum starts at 0
    acc = np.zeros((len(q), v.shape[-1]))
    for k0 in range(0, len(k), block_k):
        s = q @ k[k0 : k0 + block_k].T / math.sqrt(q.shape[-1])
        m, total, acc = online_update(m, total, acc, s, v[k0 : k0 + block_k])
    return acc / total, (m + np.log(total))[:, 0]


def _forward(q, k, v, block_q, block_k, is_causal, tile_of, walk_every_key=False):
    """A forward pass whose tiles come from ``tile_of(r0, r1, k0, k1)``."""
    length, keys = len(q), len(k)
    out, lse = np.zeros((length, v.shape[-1])), np.zeros(length)
    for r0 in range(0, length, block_q):
        r1 = min(r0 + block_q, length)
        m, total = np.full((r1 - r0, 1), -np.inf), np.zeros((r1 - r0, 1))
        acc = np.zeros((r1 - r0, v.shape[-1]))
        stop = keys if walk_every_key or not is_causal else min(keys, r1)
        for k0 in range(0, stop, block_k):
            k1 = min(k0 + block_k, keys)
            s = tile_of(r0, r1, k0, k1)
            if np.all(np.isneginf(s)):
                continue  # computed, found wholly masked, skipped
            m, total, acc = online_update(m, total, acc, s, v[k0:k1])
        out[r0:r1], lse[r0:r1] = acc / total, (m + np.log(total))[:, 0]
    return out, lse


def _masked(s, r0, k0, is_causal):
    if not is_causal:
        return s
    keep = np.arange(k0, k0 + s.shape[1])[None, :] <= np.arange(r0, r0 + s.shape[0])[:, None]
    return np.where(keep, s, -np.inf)


def forward_every_tile_skipping_masked(q, k, v, block_q, block_k, is_causal=False):
    def tile(r0, r1, k0, k1):
        return _masked(q[r0:r1] @ k[k0:k1].T / math.sqrt(q.shape[-1]), r0, k0, is_causal)

    return _forward(q, k, v, block_q, block_k, is_causal, tile, walk_every_key=True)


def forward_dense_fed_by_tiles(q, k, v, block_q, block_k, is_causal=False):
    dense = _masked(q @ k.T / math.sqrt(q.shape[-1]), 0, 0, is_causal)  # (L, S) at once

    def tile(r0, r1, k0, k1):
        return dense[r0:r1, k0:k1]

    return _forward(q, k, v, block_q, block_k, is_causal, tile)


def backward_mixed_lse(q, k, v, out, lse, d_out, is_causal=False):
    """P from lse for dV only; dQ and dK from a softmax recomputed from scratch."""
    group = q.shape[0] // k.shape[0]
    k_all, v_all = np.repeat(k, group, axis=0), np.repeat(v, group, axis=0)
    scale = q.shape[-1] ** -0.5
    s = q @ k_all.swapaxes(-1, -2) * scale
    if is_causal:
        s = np.where(np.tri(*s.shape[-2:], dtype=bool), s, -np.inf)
    p_lse = np.exp(s - lse[..., None])
    p = softmax(s, axis=-1)
    dv = (p_lse.swapaxes(-1, -2) @ d_out).reshape(k.shape[0], group, *v.shape[1:]).sum(1)
    ds = p * (d_out @ v_all.swapaxes(-1, -2) - np.sum(d_out * out, axis=-1, keepdims=True))
    dk = (ds.swapaxes(-1, -2) @ q * scale).reshape(k.shape[0], group, *k.shape[1:]).sum(1)
    return ds @ k_all * scale, dk, dv


def backward_heads_interleaved(q, k, v, out, lse, d_out, is_causal=False):
    """Key heads repeated with np.tile: query head h reads key head h % Hkv."""
    group = q.shape[0] // k.shape[0]
    k_all, v_all = np.tile(k, (group, 1, 1)), np.tile(v, (group, 1, 1))
    scale = q.shape[-1] ** -0.5
    s = q @ k_all.swapaxes(-1, -2) * scale
    if is_causal:
        s = np.where(np.tri(*s.shape[-2:], dtype=bool), s, -np.inf)
    p = np.exp(s - lse[..., None])
    ds = p * (d_out @ v_all.swapaxes(-1, -2) - np.sum(d_out * out, axis=-1, keepdims=True))
    dk = (ds.swapaxes(-1, -2) @ q * scale).reshape(group, *k.shape).sum(0)
    dv = (p.swapaxes(-1, -2) @ d_out).reshape(group, *v.shape).sum(0)
    return ds @ k_all * scale, dk, dv


def diagonal_mask_in_place(s, r0, k0):
    rows = np.arange(r0, r0 + s.shape[0])[:, None]
    s[np.arange(k0, k0 + s.shape[1])[None, :] > rows] = -np.inf
    return s


@dataclass(frozen=True)
class Attempt:
    kind: str  # which kind of miss it is
    exercise: str
    fn: Any
    cause: str  # the checker's name for the mistake
    words: str  # what the report must say

    def __str__(self) -> str:
        return f"{self.exercise}: {getattr(self.fn, '__name__', self.fn)}"


ATTEMPTS = [
    # 1. cases that one answer fits
    Attempt(
        "fitted",
        "multi_head",
        multi_head_scale_for_16,
        "wrong scale",
        "a fixed number is right for one head width only",
    ),
    Attempt(
        "fitted",
        "my_attention",
        attention_without_the_maximum,
        "not finite",
        "subtract each row's maximum before exp",
    ),
    Attempt(
        "fitted",
        "multi_head",
        multi_head_without_the_maximum,
        "not finite",
        "subtract each row's maximum before exp",
    ),
    Attempt("fitted", "key_loop", key_loop_from_zero, "m starts at 0", "from m = -inf"),
    Attempt("fitted", "flash_backward", backward_mixed_lse, "lse unused", "did not use lse for dQ"),
    Attempt(
        "fitted",
        "under_divided",
        barely_growing_divisor,
        "",
        "your weights are as good as unscaled",
    ),
    # 2. the answer without the exercise
    Attempt(
        "bypass",
        "my_attention",
        attention_by_the_library,
        "calls attention",
        "calling attention_lib.scaled_dot_product_attention is what notebook 03 does",
    ),
    Attempt(
        "bypass",
        "my_attention",
        attention_by_pytorch,
        "calls attention",
        "your function calls torch.nn.functional.scaled_dot_product_attention",
    ),
    Attempt(
        "bypass",
        "multi_head",
        multi_head_by_pytorch,
        "calls attention",
        "calls torch.nn.functional.scaled_dot_product_attention",
    ),
    Attempt(
        "bypass",
        "multi_head",
        multi_head_by_module,
        "calls attention",
        "calls torch.nn.MultiheadAttention",
    ),
    Attempt(
        "bypass",
        "multi_head",
        multi_head_by_the_library,
        "calls attention",
        "calls attention_lib.scaled_dot_product_attention",
    ),
    Attempt(
        "bypass",
        "flash_forward",
        forward_every_tile_skipping_masked,
        "tile above diagonal",
        "past the block's last row",
    ),
    Attempt(
        "bypass", "flash_forward", forward_dense_fed_by_tiles, "not tiled", "more than one tile"
    ),
    # 3. two verdicts: a list is refused everywhere, with one message
    Attempt(
        "verdicts",
        "decode_step",
        decode_returns_lists,
        "not an array",
        "the output is a Python list, not a numpy array",
    ),
    # 4. side effects
    Attempt(
        "writes",
        "decode_step",
        decode_grows_the_cache_in_place,
        "writes input",
        "writes into its arguments k_cache and v_cache",
    ),
    Attempt(
        "writes",
        "my_attention",
        attention_scaling_q_in_place,
        "writes input",
        "writes into its argument q,",
    ),
    Attempt("writes", "diagonal_mask", diagonal_mask_in_place, "writes input", "its argument s,"),
    # 5. messages that name the mistake
    Attempt("messages", "online_update", update_in_float32, "float32", "compute in float64"),
    Attempt("messages", "my_attention", attention_in_float32, "float32", "compute in float64"),
    Attempt(
        "messages",
        "multi_head",
        multi_head_linear_layout,
        "transposed weights",
        "the weights multiply on the right: x @ w_q",
    ),
    Attempt(
        "messages",
        "flash_backward",
        backward_heads_interleaved,
        "head mapping",
        "query head h reads key head h // group",
    ),
]


def _report(attempt: Attempt, seed: int = SEED) -> tuple[Any, str]:
    return run(attempt.exercise, attempt.fn, seed, hints=False)


@pytest.mark.parametrize("attempt", ATTEMPTS, ids=str)
def test_each_wrong_attempt_fails_naming_its_mistake(attempt: Attempt) -> None:
    report, text = _report(attempt)
    assert report is not None and not report.passed, text
    if attempt.exercise == "under_divided":
        assert attempt.words in report.problem, text
        return
    assert report.cause == attempt.cause, text
    assert attempt.words in report.hint, report.hint
    assert "Traceback" not in text


def test_every_kind_of_miss_has_attempts() -> None:
    kinds = {a.kind for a in ATTEMPTS}
    assert kinds == {"fitted", "bypass", "verdicts", "writes", "messages"}


def test_a_float32_update_lists_the_rows_it_differs_in_by_the_verdicts_tolerance() -> None:
    from attention_course.lessons.exercises.base import rows_close
    from attention_course.lessons.exercises.online_update import _update_mistake, update_cases

    case = update_cases(SEED)[1]
    state, want = case.states()
    got = update_in_float32(*state, case.scores, case.values)
    assert not all(rows_close(x, w).all() for x, w in zip(got, want, strict=True))
    cause, hint = _update_mistake(case, got)
    assert cause == "float32" and "no rows" not in hint


def test_the_tripwires_are_taken_down_after_the_check() -> None:
    import attention_lib
    import attention_lib.core

    _report(ATTEMPTS[6])  # the library's attention, called and caught
    assert attention_lib.scaled_dot_product_attention is library_attention
    assert attention_lib.core.scaled_dot_product_attention is library_attention
    assert globals()["library_attention"] is library_attention
    out = library_attention(np.eye(2), np.eye(2), np.eye(2))  # it works again
    assert out.shape == (2, 2)


# -- one verdict: the gate and the graded edition, on every attempt ---------------------------


def _everything() -> list[tuple[str, Any]]:
    """Every numpy attempt the tests hold: this module's, the two checker modules', the
    solutions."""
    import test_exercises as t02
    import test_flash_exercises as t07

    numpy_exercises = [n for n in EXERCISES if n not in TRITON]
    found = [(a.exercise, a.fn) for a in ATTEMPTS] + [(n, _solution(n)) for n in numpy_exercises]
    attention = [t02.right, t02.right_no_mask, t02.divide_by_d, t02.no_scale, t02.half_scale]
    attention += [t02.double_scale, t02.ignores_mask, t02.inverted_mask, t02.mask_to_zero]
    attention += [t02.off_by_a_bit, t02.transposed_weights, t02.returns_weights]
    found += [("my_attention", fn) for fn in attention]
    masks = [getattr(t02, n) for n in dir(t02) if n.startswith("mask_")]
    found += [("combined_mask", fn) for fn in masks]
    decodes = [getattr(t02, n) for n in dir(t02) if n.startswith("decode_")]
    found += [("decode_step", fn) for fn in decodes]
    found += [("multi_head", fn) for _, _, fn in t02.HEAD_MISTAKES]
    updates = [t07.acc_not_rescaled, t07.total_not_rescaled, t07.rescale_inverted]
    updates += [t07.old_max_forgotten, t07.block_max, t07.no_shift_guard, t07.unshifted_exp]
    updates += [t07.normalised_every_step, t07.float32_update, t07.in_place]
    found += [("online_update", fn) for fn in updates]
    found += [("flash_forward", fn) for _, _, fn in [*t07.FORWARD_MISTAKES, *t07.TILING_GAPS]]
    found += [("key_loop", fn) for _, _, fn in t07.KEY_LOOP_MISTAKES]
    found += [
        ("flash_backward", lambda *a, knob=knob: t07.backward(*a, knob=knob))
        for knob, _ in t07.BACKWARD_MISTAKES
    ]
    import test_flash_layer as layer

    found += [("FlashAttention", cls) for _, _, cls in layer.LAYER_MISTAKES]
    return found


@pytest.mark.parametrize(("name", "fn"), _everything())
@pytest.mark.slow  # make check's, not make test's (seconds)
def test_the_gate_and_the_graded_edition_give_one_verdict(name, fn, capsys) -> None:
    gate = ExerciseGate(name)
    for seed in (SEED, 1):
        ours = gate.attempt(fn, seed=seed)
        theirs = grading.check(name, fn, seed)
        assert str(ours) == str(theirs)
        graded = True
        try:
            grading.grade(name, fn, seed)
        except AssertionError as failed:
            graded = False
            assert str(failed) == f"{name}: not yet.\n{feedback(theirs, hints=False)}"
        assert ours.passed == theirs.passed == graded


# -- the course's solutions, on any seed ------------------------------------------------------


@pytest.mark.parametrize("name", [n for n in EXERCISES if n not in TRITON])
@pytest.mark.slow  # make check's, not make test's (seconds)
def test_the_solutions_pass_on_any_seed(name: str) -> None:
    fn = _solution(name)

    @settings(
        max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(seed=st.integers(0, SEEDS - 1))
    def passes(seed: int) -> None:
        report = EXERCISES[name].check(fn, seed)
        assert report.passed, str(report)

    passes()


# -- bad input: one sentence, never a traceback of the checker's ------------------------------

_ARGUMENTS = {  # each numpy exercise's first array argument
    "my_attention": "q",
    "combined_mask": "lengths",
    "decode_step": "q",
    "multi_head": "x",
    "online_update": "m",
    "key_loop": "q",
    "flash_forward": "q",
    "flash_backward": "q",
    "diagonal_mask": "s",
}


def _raises(*args):
    raise RuntimeError("something broke")


def _wrong_type(*args):
    return {"not": "an array"}


def _nan(*args):
    first = np.asarray(args[0], dtype=float)
    return np.full_like(first, np.nan)


def _writes(*args):
    args[0][...] = 0
    return args[0]


@pytest.mark.parametrize("name", [*_ARGUMENTS, "key_stop"])
@pytest.mark.parametrize("bad", [_raises, _wrong_type, _nan, _writes], ids=lambda f: f.__name__)
def test_a_function_that_misbehaves_gets_one_sentence(name, bad, capsys) -> None:
    if bad is _writes and name not in _ARGUMENTS:
        pytest.skip("key_stop's arguments are numbers")
    gate = ExerciseGate(name)
    report = gate.attempt(bad, seed=SEED)
    out = capsys.readouterr().out
    assert "Traceback" not in out and report is not None and not report.passed
    hint = report.hint
    said = {
        _raises: "raised RuntimeError: something broke",
        _wrong_type: "is a dict, not a numpy array",
        _writes: f"writes into its argument {_ARGUMENTS.get(name)},",
    }.get(bad)
    if said and not (bad is _wrong_type and name in ("decode_step", "online_update", "key_loop")):
        if bad is _wrong_type and name == "key_stop":
            said = "return one int"
        if bad is _wrong_type and name in ("flash_forward", "flash_backward"):
            said = {"flash_forward": "return two arrays", "flash_backward": "return the three"}[
                name
            ]
        assert said in hint, hint
    assert "\n" not in hint


@pytest.mark.parametrize(
    "name", [n for n in EXERCISES if n not in (*TRITON, "under_divided", "FlashAttention")]
)
def test_a_function_that_never_returns_is_stopped(name, capsys) -> None:
    def forever(*args):
        while True:
            pass

    gate = ExerciseGate(name, seconds=0.3)
    assert gate.attempt(forever, seed=SEED) is None
    assert capsys.readouterr().out.startswith("Your function did not return within 0.3 s")
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)  # the timer is gone


# -- the Triton exercise, in the interpreter --------------------------------------------------

needs_triton = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None,
    reason="triton is not installed (pip install -e '.[triton]', Linux only)",
)


def _kernel_body(old: str, new: str) -> str:
    from attention_course.lessons.exercises import FLASH_SOLUTIONS

    body = FLASH_SOLUTIONS["key_block"].code
    assert old in body, old
    return body.replace(old, new)


KERNEL_ATTEMPTS = {  # body -> (cause, words)
    "scale for 16": (
        _kernel_body("* qk_scale", "* (0.25 * 1.4426950408889634)"),
        "fixed scale",
        "your scale is 1/sqrt(16), but this case's heads are",
    ),
    "exp2 of the scores": (
        _kernel_body(
            "p = tl.math.exp2(s - m_new[:, None])",
            "p = tl.math.exp2(s) / tl.math.exp2(m_new[:, None])",
        ),
        "overflow",
        "an exp2 went past float32's range",
    ),
    "no qk_scale": (
        _kernel_body("* qk_scale", ""),
        "no qk_scale",
        "the scores were not multiplied by qk_scale",
    ),
    "old maximum forgotten": (
        _kernel_body("m_new = tl.maximum(m, tl.max(s, 1))", "m_new = tl.max(s, 1)"),
        "overflow",
        "m_new = tl.maximum(m, tl.max(s, 1)) never falls below m",
    ),
}


@needs_triton
@pytest.mark.slow
def test_the_kernel_launches_cover_every_width_and_the_wrong_bodies_are_named() -> None:
    from attention_course.lessons.exercises import FLASH_SOLUTIONS
    from attention_course.lessons.exercises.key_block import check_key_blocks, kernel_cases

    for seed in (0, 1, 2):
        assert sorted(c.width for c in kernel_cases(seed)[:3]) == [16, 32, 64]
    bodies = [FLASH_SOLUTIONS["key_block"].code] + [b for b, _, _ in KERNEL_ATTEMPTS.values()]
    for seed in (SEED, 4):
        solution, *wrong = check_key_blocks(bodies, seed=seed)
        assert solution.passed, str(solution)
        for (name, (_, cause, words)), report in zip(KERNEL_ATTEMPTS.items(), wrong, strict=True):
            assert not report.passed and report.cause == cause, (name, str(report))
            assert words in report.hint, (name, report.hint)


@needs_triton
@pytest.mark.slow
def test_the_kernel_gate_and_the_graded_edition_give_one_verdict(capsys) -> None:
    gate = ExerciseGate("key_block")
    body = KERNEL_ATTEMPTS["scale for 16"][0]
    ours, theirs = gate.attempt(body, seed=SEED), grading.check("key_block", body, SEED)
    assert str(ours) == str(theirs) and not ours.passed
    with pytest.raises(AssertionError, match="key_block: not yet"):
        grading.grade("key_block", body, SEED)
