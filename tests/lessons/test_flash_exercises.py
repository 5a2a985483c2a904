"""Notebook 07's numpy checkers accept the solutions and name each typical mistake.

Every wrong function below is written as a learner would write it: the solution with one
thing done wrong. Each must fail with the cause (and the words) its checker keeps for that
mistake, and the untouched starter must read as a question. Reports are read on a fixed
seed; the solutions pass on any (tests/lessons/test_checker_attempts.py).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course.lessons.exercises.base import rows_text
from attention_course.lessons.exercises.feedback import feedback
from attention_course.lessons.exercises.flash_backward import backward_cases, check_flash_backward
from attention_course.lessons.exercises.flash_forward import check_flash_forward, forward_cases
from attention_course.lessons.exercises.online_update import (
    check_online_update,
    update_cases,
    whole_row_case,
)
from attention_course.lessons.exercises.solutions import (
    FLASH_SOLUTIONS,
    solution_function,
    solution_scope,
)

pytestmark = pytest.mark.filterwarnings("error")

update = online_update = solution_function("online_update")
SEED = 11  # the cases the reports below are read on

# -- exercise 1: wrong updates -------------------------------------------------------------


def _shift(m_new):
    return np.where(m_new == -np.inf, 0.0, m_new)


def acc_not_rescaled(m, total, acc, s, v):
    m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
    p, rescale = np.exp(s - _shift(m_new)), np.exp(m - _shift(m_new))
    return m_new, rescale * total + p.sum(-1, keepdims=True), acc + p @ v


def total_not_rescaled(m, total, acc, s, v):
    m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
    p, rescale = np.exp(s - _shift(m_new)), np.exp(m - _shift(m_new))
    return m_new, total + p.sum(-1, keepdims=True), rescale * acc + p @ v


def rescale_inverted(m, total, acc, s, v):
    m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
    p, rescale = np.exp(s - _shift(m_new)), np.exp(m_new - m)
    return m_new, rescale * total + p.sum(-1, keepdims=True), rescale * acc + p @ v


def old_max_forgotten(m, total, acc, s, v):
    m_new = s.max(axis=-1, keepdims=True)
    p, rescale = np.exp(s - _shift(m_new)), np.exp(m - _shift(m_new))
    return m_new, rescale * total + p.sum(-1, keepdims=True), rescale * acc + p @ v


def block_max(m, total, acc, s, v):
    m_new = np.maximum(m, s.max())  # one maximum for the whole block
    p, rescale = np.exp(s - _shift(m_new)), np.exp(m - _shift(m_new))
    return m_new, rescale * total + p.sum(-1, keepdims=True), rescale * acc + p @ v


def no_shift_guard(m, total, acc, s, v):
    m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
    p, rescale = np.exp(s - m_new), np.exp(m - m_new)
    return m_new, rescale * total + p.sum(-1, keepdims=True), rescale * acc + p @ v


def normalised_every_step(m, total, acc, s, v):
    m_new, total_new, acc_new = update(m, total, acc, s, v)
    return m_new, total_new, acc_new / total_new


def unshifted_exp(m, total, acc, s, v):
    m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
    p, rescale = np.exp(s) / np.exp(_shift(m_new)), np.exp(m - _shift(m_new))
    return m_new, rescale * total + p.sum(-1, keepdims=True), rescale * acc + p @ v


def float32_update(m, total, acc, s, v):
    state = update(*(x.astype(np.float32) for x in (m, total, acc, s, v)))
    return tuple(x.astype(np.float64) for x in state)


def in_place(m, total, acc, s, v):
    m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
    p, rescale = np.exp(s - _shift(m_new)), np.exp(m - _shift(m_new))
    acc *= rescale  # into the caller's state
    return m_new, rescale * total + p.sum(-1, keepdims=True), acc + p @ v


def update_starter(m, total, acc, s, v):
    raise NotImplementedError("write the update")


def test_the_update_solution_passes_every_case(capsys):
    report = check_online_update(update, seed=SEED)
    assert report.passed and len(report.cases) == 8
    out = capsys.readouterr().out
    assert out.startswith("All 8 cases agree with the definition of (m, total, acc)")
    assert out.count("max abs error below 1e-12") == 8


def test_the_update_cases_cover_what_the_exercise_promises():
    for seed in range(10):
        cases = {c.name: c for c in update_cases(seed)}
        assert np.max(cases["large scores"].scores) > 790  # exp overflows past 709
        assert np.max(cases["far below 0"].scores) < -745  # exp underflows to 0
        assert np.all(np.isneginf(cases["masked block"].scores))
        assert np.any(np.all(np.isneginf(cases["masked keys"].scores), axis=-1))
        scores, _, block = whole_row_case(seed)
        assert scores[1].min() > 800 and scores[2].max() < -900 and 4 <= block <= 6


@pytest.mark.parametrize(
    ("fn", "cause", "words"),
    [
        (acc_not_rescaled, "acc not rescaled", "the accumulator was not rescaled when the maximum"),
        (total_not_rescaled, "total not rescaled", "total was not rescaled"),
        (rescale_inverted, "rescale inverted", "exp(m - m_new) <= 1, not exp(m_new - m)"),
        (old_max_forgotten, "old max forgotten", "m_new = max(m, rowmax(s))"),
        (block_max, "block max", "not of each row"),
        (no_shift_guard, "masked row", "shift by 0 where m_new is -inf"),
        (normalised_every_step, "normalised", "keep acc unnormalised"),
        (float32_update, "float32", "compute in float64"),
        (in_place, "writes input", "writes into its argument acc"),
    ],
)
def test_each_update_mistake_gets_its_own_message(fn, cause, words):
    report = check_online_update(fn, verbose=False, seed=SEED)
    assert not report.passed
    assert report.cause == cause, str(report)
    assert words in report.hint


def test_the_rows_where_the_maximum_rose_are_named():
    report = check_online_update(acc_not_rescaled, verbose=False, seed=SEED)
    rises = next(c for c in report.cases if c.name == "max rises")
    case = next(c for c in update_cases(SEED) if c.name == "max rises")
    (m, _, _), (m_new, _, _) = case.states()
    assert f"({rows_text((m_new > m)[:, 0])}: the maximum rose there)" in rises.hint


def test_an_unshifted_exp_overflows_at_large_scores_and_underflows_far_below():
    report = check_online_update(unshifted_exp, verbose=False, seed=SEED)
    large = next(c for c in report.cases if c.name == "large scores")
    assert large.cause == "overflow" and "exp(1000) overflows" in large.hint
    low = next(c for c in report.cases if c.name == "far below 0")
    assert low.cause == "underflow" and "exp(s) is 0" in low.hint


def test_the_update_starter_asks_a_question_and_bad_returns_are_explained():
    said = feedback(check_online_update(update_starter, verbose=False, seed=SEED))
    assert said.startswith("Your function is not written yet")
    assert "the definition of (m, total, acc) over every score seen on 8 cases" in said
    assert "what must happen to total and acc" in said
    flat = check_online_update(lambda m, t, a, s, v: (m[:, 0], t, a), verbose=False, seed=SEED)
    assert flat.cause == "shape" and "keepdims=True" in flat.hint
    two = check_online_update(lambda m, t, a, s, v: (m, t), verbose=False, seed=SEED)
    assert "return m_new, total_new, acc_new" in two.hint
    listed = check_online_update(lambda *a: [x.tolist() for x in update(*a)], seed=SEED)
    assert listed.cause == "not an array" and "m_new is a Python list" in listed.hint
    with pytest.raises(TypeError, match="needs a function"):
        check_online_update("online_update")


def test_update_cases_are_seeded():
    for a, b in zip(update_cases(4), update_cases(4), strict=True):
        np.testing.assert_array_equal(a.scores, b.scores)
    pairs = zip(update_cases(4), update_cases(5), strict=True)
    assert any(a.scores.shape != b.scores.shape for a, b in pairs)


# -- exercise 2: wrong tiled loops ----------------------------------------------------------


def tiled(
    q,
    k,
    v,
    block_q,
    block_k,
    is_causal=False,
    *,
    key_stop=None,
    mask=None,
    row_stop=None,
    lse_of=None,
    divide=True,
    scale=None,
    start=-np.inf,
):
    """The solution's loop with one knob per mistake (defaults: the solution)."""
    length, keys = len(q), len(k)
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    out, lse = np.zeros((length, v.shape[-1])), np.zeros(length)
    for r0 in range(0, row_stop(length, block_q) if row_stop else length, block_q):
        r1 = min(r0 + block_q, length)
        m, total = np.full((r1 - r0, 1), start), np.zeros((r1 - r0, 1))
        acc = np.zeros((r1 - r0, v.shape[-1]))
        stop = key_stop(keys, r1, block_k) if key_stop else (min(keys, r1) if is_causal else keys)
        for k0 in range(0, stop, block_k):
            k1 = min(k0 + block_k, keys)
            s = q[r0:r1] @ k[k0:k1].T * scale
            rows, cols = np.arange(r0, r1)[:, None], np.arange(k0, k1)[None, :]
            keep = (mask if mask and is_causal else lambda r, c: c <= r if is_causal else c >= 0)(
                rows, cols
            )
            m, total, acc = online_update(m, total, acc, np.where(keep, s, -np.inf), v[k0:k1])
        out[r0:r1] = acc / total if divide else acc
        lse[r0:r1] = (lse_of or (lambda m, t: m + np.log(t)))(m, total)[:, 0]
    return out, lse


def _with(**knobs):
    def fn(q, k, v, block_q, block_k, is_causal=False):
        return tiled(q, k, v, block_q, block_k, is_causal, **knobs)

    return fn


def _bottom_right(q, k, v, block_q, block_k, is_causal=False):
    offset = len(k) - len(q)
    return tiled(
        q, k, v, block_q, block_k, is_causal,
        key_stop=lambda keys, r1, bk: keys,
        mask=lambda r, c: c <= r + offset,
    )  # fmt: skip


def _last_key_block(seed=SEED):
    case = next(c for c in forward_cases(seed) if c.name == "uneven tiles")
    cut = len(case.key) // case.block_k * case.block_k
    return f"the last key block (keys {cut}–{len(case.key) - 1}"


FORWARD_MISTAKES = [
    ("last key block", _last_key_block(), _with(key_stop=lambda s, r1, bk: s // bk * bk)),
    (
        "tiles not masked",
        "the tiles that cross the diagonal were not masked",
        _with(mask=lambda r, c: c >= 0),
    ),
    (
        "causal ignored",
        "is_causal had no effect",
        _with(key_stop=lambda s, r1, bk: s, mask=lambda r, c: c >= 0),
    ),
    ("bottom-right", "aligned bottom-right", _bottom_right),
    (
        "diagonal masked",
        "query i sees keys j <= i, key i included",
        _with(mask=lambda r, c: c < r),
    ),
    ("not divided", "not divided by total after the last key block", _with(divide=False)),
    ("no scale", "not multiplied by 1/sqrt(E)", _with(scale=1.0)),
    (
        "last query block",
        "the last query block, shorter than block_q",
        _with(row_stop=lambda n, b: n // b * b),
    ),
    ("lse is m", "lse is the row maximum m alone", _with(lse_of=lambda m, t: m)),
    ("lse lacks m", "add m back", _with(lse_of=lambda m, t: np.log(t))),
    ("lse not logged", "the log of total, not total", _with(lse_of=lambda m, t: m + t)),
    ("m starts at 0", "start each query block from m = -inf", _with(start=0.0)),
]


def test_the_tiled_solution_and_the_knobless_loop_pass():
    assert check_flash_forward(solution_function("flash_forward"), verbose=False, seed=SEED).passed
    assert check_flash_forward(_with(), verbose=False, seed=SEED).passed


@pytest.mark.parametrize(
    ("cause", "words", "fn"), FORWARD_MISTAKES, ids=[m[0] for m in FORWARD_MISTAKES]
)
def test_each_tiling_mistake_gets_its_own_message(cause, words, fn):
    report = check_flash_forward(fn, verbose=False, seed=SEED)
    assert not report.passed
    assert report.cause == cause, str(report)
    assert words in report.hint, report.hint


def untiled_one_call(q, k, v, block_q, block_k, is_causal=False):
    """The whole score matrix in one online_update call: right numbers, no tiles."""
    s = q @ k.T / math.sqrt(q.shape[-1])  # (L, S)
    if is_causal:
        s = np.where(np.tri(len(q), len(k), dtype=bool), s, -np.inf)
    m, total, acc = online_update(
        np.full((len(q), 1), -np.inf), np.zeros((len(q), 1)), np.zeros((len(q), v.shape[-1])), s, v
    )
    return acc / total, (m + np.log(total))[:, 0]


def no_update_at_all(q, k, v, block_q, block_k, is_causal=False):
    """The reference, no online softmax at all."""
    s = q @ k.T / math.sqrt(q.shape[-1])  # (L, S)
    if is_causal:
        s = np.where(np.tri(len(q), len(k), dtype=bool), s, -np.inf)
    lse = np.logaddexp.reduce(s, axis=-1)  # (L,)
    return np.exp(s - lse[:, None]) @ v, lse


def skip_masked_tiles(q, k, v, block_q, block_k, is_causal=False):
    """Every tile computed; the ones above the diagonal then left out of the update."""
    out, lse = np.zeros((len(q), v.shape[-1])), np.zeros(len(q))
    for r0 in range(0, len(q), block_q):
        r1 = min(r0 + block_q, len(q))
        m, total = np.full((r1 - r0, 1), -np.inf), np.zeros((r1 - r0, 1))
        acc = np.zeros((r1 - r0, v.shape[-1]))
        for k0 in range(0, len(k), block_k):
            s = q[r0:r1] @ k[k0 : k0 + block_k].T / math.sqrt(q.shape[-1])
            if is_causal:
                keep = np.arange(k0, k0 + s.shape[1])[None, :] <= np.arange(r0, r1)[:, None]
                s = np.where(keep, s, -np.inf)
            if np.all(np.isneginf(s)):
                continue  # a tile above the diagonal: computed, then skipped
            m, total, acc = online_update(m, total, acc, s, v[k0 : k0 + block_k])
        out[r0:r1], lse[r0:r1] = acc / total, (m + np.log(total))[:, 0]
    return out, lse


def dense_fed_by_tiles(q, k, v, block_q, block_k, is_causal=False):
    """The whole score matrix first, then handed to online_update block by block."""
    s_all = q @ k.T / math.sqrt(q.shape[-1])  # (L, S): every key read at once
    if is_causal:
        s_all = np.where(np.tri(len(q), len(k), dtype=bool), s_all, -np.inf)
    out, lse = np.zeros((len(q), v.shape[-1])), np.zeros(len(q))
    for r0 in range(0, len(q), block_q):
        r1 = min(r0 + block_q, len(q))
        m, total = np.full((r1 - r0, 1), -np.inf), np.zeros((r1 - r0, 1))
        acc = np.zeros((r1 - r0, v.shape[-1]))
        for k0 in range(0, min(len(k), r1) if is_causal else len(k), block_k):
            s = s_all[r0:r1, k0 : k0 + block_k]
            m, total, acc = online_update(m, total, acc, s, v[k0 : k0 + block_k])
        out[r0:r1], lse[r0:r1] = acc / total, (m + np.log(total))[:, 0]
    return out, lse


def own_arithmetic(q, k, v, block_q, block_k, is_causal=False):
    """Tiles handed to online_update as asked, its states thrown away: the answer is the
    function's own running sums."""
    out, lse = np.zeros((len(q), v.shape[-1])), np.zeros(len(q))
    for r0 in range(0, len(q), block_q):
        r1 = min(r0 + block_q, len(q))
        empty = np.full((r1 - r0, 1), -np.inf), np.zeros((r1 - r0, 1))
        m, total = empty
        acc = np.zeros((r1 - r0, v.shape[-1]))
        for k0 in range(0, min(len(k), r1) if is_causal else len(k), block_k):
            s = q[r0:r1] @ k[k0 : k0 + block_k].T / math.sqrt(q.shape[-1])
            if is_causal:
                keep = np.arange(k0, k0 + s.shape[1])[None, :] <= np.arange(r0, r1)[:, None]
                s = np.where(keep, s, -np.inf)
            values = v[k0 : k0 + block_k]
            online_update(*empty, np.zeros_like(acc), s, values)  # called, its result unused
            m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
            p, rescale = np.exp(s - m_new), np.exp(m - m_new)
            m, total, acc = (
                m_new,
                rescale * total + p.sum(-1, keepdims=True),
                rescale * acc + p @ values,
            )
        out[r0:r1], lse[r0:r1] = acc / total, (m + np.log(total))[:, 0]
    return out, lse


TILING_GAPS = [
    ("not tiled", "larger than one tile", untiled_one_call),
    ("no online_update", "never called online_update", no_update_at_all),
    ("tile above diagonal", "past the block's last row", _with(key_stop=lambda s, r1, bk: s)),
    ("tile above diagonal", "never compute them", skip_masked_tiles),
    ("not tiled", "more than one tile", dense_fed_by_tiles),
    ("own arithmetic", "let exercise 1's update do the arithmetic", own_arithmetic),
]


@pytest.mark.parametrize(
    ("cause", "words", "fn"), TILING_GAPS, ids=[g[2].__name__ for g in TILING_GAPS]
)
def test_a_right_answer_that_is_not_tiled_by_online_update_does_not_pass(cause, words, fn):
    # the numbers are right (where a case ran): what fails is how they were reached
    report = check_flash_forward(fn, verbose=False, seed=SEED)
    assert not report.passed
    assert report.cause == cause, str(report)
    assert words in report.hint, report.hint
    assert all(c.max_abs_error is not None and c.max_abs_error < 1e-9 for c in report.cases)


def test_the_watched_online_update_is_put_back():
    check_flash_forward(_with(), verbose=False, seed=SEED)
    assert online_update is update and globals()["online_update"] is update


def test_a_bottom_right_mask_is_named_where_it_leaves_rows_without_keys():
    report = check_flash_forward(_bottom_right, verbose=False, seed=SEED)
    longer = next(c for c in report.cases if c.name == "causal, L > S")
    case = next(c for c in forward_cases(SEED) if c.name == "causal, L > S")
    gap = len(case.query) - len(case.key)
    assert longer.cause == "bottom-right" and longer.hint.startswith(f"rows 0–{gap - 1} are NaN")


def test_the_forward_checker_explains_shapes_writes_and_the_starter():
    def lse_as_column(q, k, v, bq, bk, causal=False):
        out, lse = solution_function("flash_forward")(q, k, v, bq, bk, causal)
        return out, lse[:, None]

    report = check_flash_forward(lse_as_column, verbose=False, seed=SEED)
    length = len(forward_cases(SEED)[0].query)
    assert report.cause == "shape"
    assert f"lse should have shape ({length},), got ({length}, 1)" in report.hint

    def scales_k_in_place(q, k, v, bq, bk, causal=False):
        k *= 1.0
        return solution_function("flash_forward")(q, k, v, bq, bk, causal)

    writes = check_flash_forward(scales_k_in_place, verbose=False, seed=SEED)
    assert writes.cause == "writes input" and "writes into its argument k," in writes.hint

    def starter(q, k, v, block_q, block_k, is_causal=False):
        raise NotImplementedError

    assert feedback(check_flash_forward(starter, verbose=False, seed=SEED)).startswith(
        "Your function is not written yet"
    )


def test_an_array_library_that_refuses_the_watched_keys_is_told_why():
    from attention_lib.core import masked_scores

    def through_the_library(q, k, v, block_q, block_k, is_causal=False):
        return masked_scores(q, k), None

    report = check_flash_forward(through_the_library, verbose=False, seed=SEED)
    assert report.cause == "raised" and "record which keys are read" in report.hint


def test_forward_cases_cover_what_the_exercise_promises():
    for seed in range(10):
        cases = forward_cases(seed)
        assert any(len(c.query) < len(c.key) and c.is_causal for c in cases)
        assert any(len(c.query) > len(c.key) and c.is_causal for c in cases)
        assert any(len(c.key) % c.block_k and len(c.query) % c.block_q for c in cases)
        assert len({c.query.shape[1] for c in cases}) >= 3
        scores = [c.query @ c.key.T / math.sqrt(c.query.shape[1]) for c in cases]
        assert max(s.max() for s in scores) > 709  # exp overflows
        assert any(np.any(s.max(axis=-1) < -745) for s in scores)  # a row underflows whole
        # a causal case has tiles wholly above the diagonal, which a causal loop skips
        above = [
            k0 >= r1
            for c in cases
            if c.is_causal
            for r1 in range(c.block_q, len(c.query) + c.block_q, c.block_q)
            for k0 in range(0, len(c.key), c.block_k)
        ]
        assert any(above)


# -- exercise 3: wrong backward passes -----------------------------------------------------


def backward(q, k, v, out, lse, d_out, is_causal=False, *, knob=""):
    """The solution's backward pass with one mistake switched on by ``knob``."""
    group = q.shape[0] // k.shape[0]
    if knob == "head mapping":
        k_all, v_all = np.tile(k, (group, 1, 1)), np.tile(v, (group, 1, 1))
    else:
        k_all, v_all = np.repeat(k, group, axis=0), np.repeat(v, group, axis=0)
    scale = 1 / math.sqrt(q.shape[-1])
    s = q @ k_all.swapaxes(-1, -2) * (1.0 if knob == "P unscaled" else scale)
    if is_causal and knob != "P unmasked":
        s = np.where(np.tri(*s.shape[-2:], dtype=bool), s, -np.inf)
    if knob == "lse unused":
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
    else:
        p = np.exp(s - lse[..., None])
    dp = d_out @ v_all.swapaxes(-1, -2)
    if knob == "delta from P":
        delta = np.sum(p * dp, axis=-1, keepdims=True)
    else:
        delta = np.sum(d_out * out, axis=-1, keepdims=True)
    dv = p.swapaxes(-1, -2) @ d_out
    ds = p * dp if knob == "no delta" else p * (dp - delta)
    dq_scale = 1.0 if knob == "no scale" else scale
    dq, dk = ds @ k_all * dq_scale, ds.swapaxes(-1, -2) @ q * dq_scale
    if knob == "no group sum":
        return dq, dk, dv
    if knob == "head mapping":  # the interleaved heads summed back consistently
        return dq, dk.reshape(group, *k.shape).sum(0), dv.reshape(group, *v.shape).sum(0)
    combine = np.mean if knob == "group mean" else np.sum
    dk = combine(dk.reshape(k.shape[0], group, *dk.shape[1:]), axis=1)
    dv = combine(dv.reshape(v.shape[0], group, *dv.shape[1:]), axis=1)
    if knob == "float32":
        return tuple(x.astype(np.float32) for x in (dq, dk, dv))
    return dq, dk, dv


BACKWARD_MISTAKES = [
    ("no delta", "dS is missing the - δ term"),
    ("no scale", "dQ and dK lack the scale"),
    ("no group sum", "dK is missing the group sum"),
    ("group mean", "it must be their sum"),
    ("P unmasked", "P was recomputed without the causal mask"),
    ("P unscaled", "P was recomputed from unscaled scores"),
    ("lse unused", "your function did not use lse for dQ, dK, dV"),
    ("delta from P", "δ came from the recomputed P, not from the output"),
    ("head mapping", "query head h reads key head h // group"),
    ("float32", "compute in float64"),
]


def test_the_backward_solution_passes_every_case_and_reads_lse(capsys):
    report = check_flash_backward(solution_function("flash_backward"), seed=SEED)
    assert report.passed and len(report.cases) == 7
    assert capsys.readouterr().out.startswith(
        "All 7 cases agree with the float64 gradients of attention (torch autograd's)"
    )
    assert check_flash_backward(backward, verbose=False, seed=SEED).passed


@pytest.mark.parametrize(
    ("knob", "words"), BACKWARD_MISTAKES, ids=[m[0] for m in BACKWARD_MISTAKES]
)
def test_each_backward_mistake_gets_its_own_message(knob, words):
    def fn(*args):
        return backward(*args, knob=knob)

    report = check_flash_backward(fn, verbose=False, seed=SEED)
    assert not report.passed
    assert report.cause == knob, str(report)
    assert words in report.hint, report.hint


def test_the_backward_cases_cover_what_the_exercise_promises():
    for seed in range(10):
        cases = backward_cases(seed)
        assert any(c.group > 1 and c.key.shape[0] > 1 for c in cases)  # two groups of heads
        assert {c.is_causal for c in cases} == {True, False}
        assert all(c.query.shape[1] != c.key.shape[1] for c in cases)
        scores = [c.query @ np.repeat(c.key, c.group, 0).swapaxes(-1, -2) for c in cases]
        scores = [s / math.sqrt(c.query.shape[-1]) for s, c in zip(scores, cases, strict=True)]
        assert max(s.max() for s in scores) > 709
        assert any(np.any(s.max(axis=-1) < -745) for s in scores)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10**6 - 1))
def test_the_backward_oracle_is_torch_autograds_gradients(seed):
    import torch
    import torch.nn.functional as F

    for case in backward_cases(seed):
        leaves = [torch.tensor(x, requires_grad=True) for x in (case.query, case.key, case.value)]
        with torch.enable_grad():
            out = F.scaled_dot_product_attention(
                *leaves, is_causal=case.is_causal, enable_gqa=case.group > 1
            )  # (H, L, Ev)
            out.backward(torch.from_numpy(case.d_out))
        for ours, theirs in zip(case.gradients(), leaves, strict=True):
            scale = max(1.0, float(np.abs(theirs.grad.numpy()).max()))
            np.testing.assert_allclose(ours, theirs.grad.numpy(), rtol=1e-10, atol=1e-12 * scale)


def test_the_backward_starter_is_a_question():
    def starter(q, k, v, out, lse, d_out, is_causal=False):
        raise NotImplementedError

    said = feedback(check_flash_backward(starter, verbose=False, seed=SEED))
    assert said.startswith("Your function is not written yet") and "torch autograd" in said


# -- the pieces they share -----------------------------------------------------------------


def test_rows_are_named_as_runs():
    assert rows_text([True, True, True, False, True]) == "rows 0–2, 4"
    assert rows_text([False, True]) == "row 1"
    assert rows_text([False, False], "head") == "no heads"


def test_every_numpy_solution_is_shown_as_code_that_defines_its_function():
    for name in ("online_update", "flash_forward", "flash_backward"):
        assert FLASH_SOLUTIONS[name].code.startswith(f"def {name}(")
        assert callable(solution_function(name))
    assert "online_update" in solution_scope("flash_forward")
    with pytest.raises(KeyError, match="no solution"):
        solution_scope("nothing")


# -- exercise 2 in steps: the key loop, the causal stop, the mask inside the diagonal tile ---


def key_loop_with(*, short_last=True, scale=None, divide=True, whole=False, start=-np.inf):
    """The step-2a solution with one knob per mistake."""

    def key_loop(q, k, v, block_k):
        s_of = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
        m, total = np.full((len(q), 1), start), np.zeros((len(q), 1))
        acc = np.zeros((len(q), v.shape[-1]))
        step = len(k) if whole else block_k
        stop = len(k) if short_last else len(k) // block_k * block_k
        for k0 in range(0, stop, step):
            s = q @ k[k0 : k0 + step].T * s_of
            m, total, acc = online_update(m, total, acc, s, v[k0 : k0 + step])
        return (acc / total if divide else acc), (m + np.log(total))[:, 0]

    return key_loop


KEY_LOOP_MISTAKES = [
    ("last key block", "was left out", key_loop_with(short_last=False)),
    ("no scale", "not multiplied by 1/sqrt(E)", key_loop_with(scale=1.0)),
    ("not divided", "not divided by total", key_loop_with(divide=False)),
    ("not tiled", "larger than one tile", key_loop_with(whole=True)),
    ("m starts at 0", "start each query block from m = -inf", key_loop_with(start=0.0)),
]


def test_each_step_of_exercise_2_passes_its_solution():
    from attention_course.lessons.exercises import (
        check_diagonal_mask,
        check_key_loop,
        check_key_stop,
    )

    for seed in (SEED, 0):
        assert check_key_loop(solution_function("key_loop"), verbose=False, seed=seed).passed
        assert check_key_loop(key_loop_with(), verbose=False, seed=seed).passed
        assert check_key_stop(solution_function("key_stop"), verbose=False, seed=seed).passed
        assert check_diagonal_mask(
            solution_function("diagonal_mask"), verbose=False, seed=seed
        ).passed


@pytest.mark.parametrize(
    ("cause", "words", "fn"), KEY_LOOP_MISTAKES, ids=[m[0] for m in KEY_LOOP_MISTAKES]
)
def test_each_key_loop_mistake_gets_its_own_message(cause, words, fn):
    from attention_course.lessons.exercises import check_key_loop

    report = check_key_loop(fn, verbose=False, seed=SEED)
    assert not report.passed and report.cause == cause, str(report)
    assert words in report.hint, report.hint


@pytest.mark.parametrize(
    ("cause", "words", "fn"),
    [
        ("walks every key", "lie above the diagonal", lambda r1, s, c: s),
        ("misses the diagonal", "sees key", lambda r1, s, c: min(s, r1 - 1) if c else s),
        (
            "past the last key",
            "keys; with L > S a query block can end",
            lambda r1, s, c: r1 if c else s,
        ),
        ("stopped without causal", "without is_causal", lambda r1, s, c: min(s, r1)),
        ("not an int", "return one int", lambda r1, s, c: [min(s, r1)]),
        ("not an int", "got bool", lambda r1, s, c: True),
    ],
    ids=["every key", "r1 - 1", "past the end", "not causal", "a list", "a bool"],
)
def test_each_key_stop_mistake_gets_its_own_message(cause, words, fn):
    from attention_course.lessons.exercises import check_key_stop

    report = check_key_stop(fn, verbose=False, seed=SEED)
    assert not report.passed and report.cause == cause, str(report)
    assert words in report.hint, report.hint


def _tile_mask(keep, origin=True):
    def diagonal_mask(s, r0, k0):
        r0, k0 = (r0, k0) if origin else (0, 0)
        rows = np.arange(r0, r0 + s.shape[0])[:, None]
        cols = np.arange(k0, k0 + s.shape[1])[None, :]
        return np.where(keep(rows, cols), s, -np.inf)

    return diagonal_mask


def _mask_in_place(s, r0, k0):
    rows = np.arange(r0, r0 + s.shape[0])[:, None]
    cols = np.arange(k0, k0 + s.shape[1])[None, :]
    s[cols > rows] = -np.inf  # the caller's tile
    return s


@pytest.mark.parametrize(
    ("cause", "words", "fn"),
    [
        (
            "tile indices",
            "counts rows and columns from the tile's corner",
            _tile_mask(lambda i, j: j <= i, origin=False),
        ),
        ("diagonal hidden", "the diagonal is masked", _tile_mask(lambda i, j: j < i)),
        ("upper triangle", "points the wrong way", _tile_mask(lambda i, j: j >= i)),
        ("inverted", "the mask is inverted", _tile_mask(lambda i, j: j > i)),
        (
            "zeros not -inf",
            "a score of 0 still takes weight",
            lambda s, r0, k0: np.where(_tile_mask(lambda i, j: j <= i)(s, r0, k0) < -1e300, 0, s),
        ),
        ("not an array", "is a Python list", lambda s, r0, k0: s.tolist()),
        ("writes input", "writes into its argument s,", _mask_in_place),
    ],
    ids=["tile indices", "diagonal", "upper", "inverted", "zeros", "list", "in place"],
)
def test_each_diagonal_mask_mistake_gets_its_own_message(cause, words, fn):
    from attention_course.lessons.exercises import check_diagonal_mask

    report = check_diagonal_mask(fn, verbose=False, seed=SEED)
    assert not report.passed and report.cause == cause, str(report)
    assert words in report.hint, report.hint


def test_the_mask_tiles_include_one_wholly_masked_and_one_wholly_seen():
    from attention_course.lessons.exercises.flash_steps import mask_tiles

    for seed in range(10):
        tiles = {name: (s, r0, k0) for name, s, r0, k0 in mask_tiles(seed)}
        s, r0, k0 = tiles["above"]
        assert k0 > r0 + s.shape[0] - 1  # every key after every row: all masked
        s, r0, k0 = tiles["below"]
        assert k0 + s.shape[1] - 1 <= r0  # every key at or before every row: none masked
