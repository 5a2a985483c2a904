"""Notebook 07's numpy checkers accept the solutions and name each typical mistake.

Every wrong function below is written as a learner would write it: the
solution with one thing done wrong. Each must fail with the cause (and the
words) its checker keeps for that mistake, and the untouched starter must
read as a question.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from attention_lib.core import masked_scores
from attention_lib.lessons.exercises.base import rows_text
from attention_lib.lessons.exercises.feedback import feedback
from attention_lib.lessons.exercises.flash_backward import backward_cases, check_flash_backward
from attention_lib.lessons.exercises.flash_forward import check_flash_forward, forward_cases
from attention_lib.lessons.exercises.online_update import check_online_update, update_cases
from attention_lib.lessons.exercises.solutions import (
    FLASH_SOLUTIONS,
    solution_function,
    solution_scope,
)

pytestmark = pytest.mark.filterwarnings("error")

update = online_update = solution_function("online_update")

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


def update_starter(m, total, acc, s, v):
    raise NotImplementedError("write the update")


def test_the_update_solution_passes_every_case(capsys):
    report = check_online_update(update)
    assert report.passed and len(report.cases) == 6
    out = capsys.readouterr().out
    assert out.startswith("All 6 cases agree with the definition of (m, total, acc)")
    assert "max abs error below 1e-12" in out and "e-1" not in out.replace("1e-12", "")


@pytest.mark.parametrize(
    ("fn", "cause", "words"),
    [
        (acc_not_rescaled, "acc not rescaled", "the accumulator was not rescaled when the maximum"),
        (total_not_rescaled, "total not rescaled", "total was not rescaled"),
        (rescale_inverted, "rescale inverted", "exp(m - m_new) <= 1, not exp(m_new - m)"),
        (old_max_forgotten, "old max forgotten", "m_new = max(m, rowmax(s))"),
        (no_shift_guard, "masked row", "shift by 0 where m_new is -inf"),
        (normalised_every_step, "normalised", "keep acc unnormalised"),
    ],
)
def test_each_update_mistake_gets_its_own_message(fn, cause, words):
    report = check_online_update(fn, verbose=False)
    assert not report.passed
    assert report.cause == cause, str(report)
    assert words in report.hint


def test_the_rows_where_the_maximum_rose_are_named():
    report = check_online_update(acc_not_rescaled, verbose=False)
    rises = next(c for c in report.cases if c.name == "max rises")
    assert "(rows 0, 2, 4: the maximum rose there)" in rises.hint  # even rows, +4


def test_an_unshifted_exp_overflows_at_large_scores():
    report = check_online_update(unshifted_exp, verbose=False)
    large = next(c for c in report.cases if c.name == "large scores")
    assert large.cause == "overflow" and "exp(800) overflows" in large.hint


def test_the_update_starter_asks_a_question_and_bad_returns_are_explained():
    said = feedback(check_online_update(update_starter, verbose=False))
    assert said.startswith("Your function is not written yet")
    assert "the definition of (m, total, acc) over every score seen on 6 cases" in said
    assert "what must happen to total and acc" in said
    flat = check_online_update(lambda m, t, a, s, v: (m[:, 0], t, a), verbose=False)
    assert flat.cause == "shape" and "keepdims=True" in flat.hint
    two = check_online_update(lambda m, t, a, s, v: (m, t), verbose=False)
    assert "return m_new, total_new, acc_new" in two.hint
    with pytest.raises(TypeError, match="needs a function"):
        check_online_update("online_update")


def test_update_cases_are_seeded_and_the_learners_writes_do_not_leak():
    first, again = update_cases(), update_cases()
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a.scores, b.scores)

    def writes_into_its_inputs(m, total, acc, s, v):
        out = update(m, total, acc, s, v)
        m[:], total[:], acc[:], s[:], v[:] = 7.0, 7.0, 7.0, 7.0, 7.0
        return out

    assert check_online_update(writes_into_its_inputs, verbose=False).passed


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
):
    """The solution's loop with one knob per mistake (defaults: the solution)."""
    length, keys = len(q), len(k)
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    out, lse = np.zeros((length, v.shape[-1])), np.zeros(length)
    for r0 in range(0, row_stop(length, block_q) if row_stop else length, block_q):
        r1 = min(r0 + block_q, length)
        m, total = np.full((r1 - r0, 1), -np.inf), np.zeros((r1 - r0, 1))
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


FORWARD_MISTAKES = [
    (
        "last key block",
        "the last key block (keys 10–12",
        _with(key_stop=lambda s, r1, bk: s // bk * bk),
    ),
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
]


def test_the_tiled_solution_and_the_knobless_loop_pass():
    assert check_flash_forward(solution_function("flash_forward"), verbose=False).passed
    assert check_flash_forward(_with(), verbose=False).passed


@pytest.mark.parametrize(
    ("cause", "words", "fn"), FORWARD_MISTAKES, ids=[m[0] for m in FORWARD_MISTAKES]
)
def test_each_tiling_mistake_gets_its_own_message(cause, words, fn):
    report = check_flash_forward(fn, verbose=False)
    assert not report.passed
    assert report.cause == cause, str(report)
    assert words in report.hint, report.hint


def untiled_one_call(q, k, v, block_q, block_k, is_causal=False):
    """The whole score matrix in one online_update call: right numbers, no tiles."""
    s = masked_scores(q, k, is_causal=is_causal)  # (L, S)
    m, total, acc = online_update(
        np.full((len(q), 1), -np.inf), np.zeros((len(q), 1)), np.zeros((len(q), v.shape[-1])), s, v
    )
    return acc / total, (m + np.log(total))[:, 0]


def no_update_at_all(q, k, v, block_q, block_k, is_causal=False):
    """The reference, no online softmax at all."""
    s = masked_scores(q, k, is_causal=is_causal)  # (L, S)
    lse = np.logaddexp.reduce(s, axis=-1)  # (L,)
    return np.exp(s - lse[:, None]) @ v, lse


def own_arithmetic(q, k, v, block_q, block_k, is_causal=False):
    """Calls online_update on tiles for show (scores of 0), answers from the whole matrix."""
    tiled(np.zeros_like(q), k, v, block_q, block_k, is_causal)
    return no_update_at_all(q, k, v, block_q, block_k, is_causal)


TILING_GAPS = [
    ("not tiled", "larger than one tile", untiled_one_call),
    ("no online_update", "never called online_update", no_update_at_all),
    ("tile above diagonal", "stop each query block's key", _with(key_stop=lambda s, r1, bk: s)),
    ("own arithmetic", "let exercise 1's update do the arithmetic", own_arithmetic),
]


@pytest.mark.parametrize(("cause", "words", "fn"), TILING_GAPS, ids=[g[0] for g in TILING_GAPS])
def test_a_right_answer_that_is_not_tiled_by_online_update_does_not_pass(cause, words, fn):
    # the numbers are right: what fails is how they were reached
    report = check_flash_forward(fn, verbose=False)
    assert not report.passed
    assert report.cause == cause, str(report)
    assert words in report.hint, report.hint
    assert all(c.max_abs_error is not None and c.max_abs_error < 1e-9 for c in report.cases)


def test_the_watched_online_update_is_put_back():
    check_flash_forward(_with(), verbose=False)
    assert online_update is update and globals()["online_update"] is update


def test_a_bottom_right_mask_is_named_where_it_leaves_rows_without_keys():
    report = check_flash_forward(_bottom_right, verbose=False)
    longer = next(c for c in report.cases if c.name == "causal, L > S")  # L = 10, S = 6
    assert longer.cause == "bottom-right" and longer.hint.startswith("rows 0–3 are NaN")


def test_the_forward_checker_explains_shapes_and_the_starter():
    def lse_as_column(q, k, v, bq, bk, causal=False):
        out, lse = solution_function("flash_forward")(q, k, v, bq, bk, causal)
        return out, lse[:, None]

    report = check_flash_forward(lse_as_column, verbose=False)
    assert report.cause == "shape" and "lse should have shape (6,), got (6, 1)" in report.hint

    def starter(q, k, v, block_q, block_k, is_causal=False):
        raise NotImplementedError

    assert feedback(check_flash_forward(starter, verbose=False)).startswith(
        "Your function is not written yet"
    )


def test_forward_cases_cover_what_the_exercise_promises():
    cases = forward_cases()
    assert any(len(c.query) < len(c.key) and c.is_causal for c in cases)
    assert any(len(c.query) > len(c.key) and c.is_causal for c in cases)
    assert any(len(c.key) % c.block_k and len(c.query) % c.block_q for c in cases)
    assert any(np.abs(masked_scores(c.query, c.key)).max() > 709 for c in cases)


# -- exercise 3: wrong backward passes -----------------------------------------------------


def backward(q, k, v, out, lse, d_out, is_causal=False, *, knob=""):
    """The solution's backward pass with one mistake switched on by ``knob``."""
    group = q.shape[0] // k.shape[0]
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
    delta = np.sum(d_out * out, axis=-1, keepdims=True)
    dv = p.swapaxes(-1, -2) @ d_out
    dp = d_out @ v_all.swapaxes(-1, -2)
    ds = p * dp if knob == "no delta" else p * (dp - delta)
    dq_scale = 1.0 if knob == "no scale" else scale
    dq, dk = ds @ k_all * dq_scale, ds.swapaxes(-1, -2) @ q * dq_scale
    if knob == "no group sum":
        return dq, dk, dv
    combine = np.mean if knob == "group mean" else np.sum
    dk = combine(dk.reshape(k.shape[0], group, *dk.shape[1:]), axis=1)
    dv = combine(dv.reshape(v.shape[0], group, *dv.shape[1:]), axis=1)
    return dq, dk, dv


BACKWARD_MISTAKES = [
    ("no delta", "dS is missing the - δ term"),
    ("no scale", "dQ and dK lack the scale"),
    ("no group sum", "dK is missing the group sum"),
    ("group mean", "it must be their sum"),
    ("P unmasked", "P was recomputed without the causal mask"),
    ("P unscaled", "P was recomputed from unscaled scores"),
    ("lse unused", "your function did not use lse"),
]


def test_the_backward_solution_passes_every_case_and_reads_lse(capsys):
    report = check_flash_backward(solution_function("flash_backward"))
    assert report.passed and [c.name for c in report.cases][-1] == "reads lse"
    assert capsys.readouterr().out.startswith("All 6 cases agree with torch autograd")
    assert check_flash_backward(backward, verbose=False).passed


@pytest.mark.parametrize(
    ("knob", "words"), BACKWARD_MISTAKES, ids=[m[0] for m in BACKWARD_MISTAKES]
)
def test_each_backward_mistake_gets_its_own_message(knob, words):
    def fn(*args):
        return backward(*args, knob=knob)

    report = check_flash_backward(fn, verbose=False)
    assert not report.passed
    assert report.cause == knob, str(report)
    assert words in report.hint, report.hint


def test_a_backward_that_fails_early_skips_the_lse_case_with_a_note():
    report = check_flash_backward(lambda *a: backward(*a, knob="no delta"), verbose=False)
    assert "reads lse" not in [c.name for c in report.cases]
    assert report.notes == ("the lse case runs once the case 'one head' passes",)


def test_the_backward_cases_have_grouped_heads_and_the_starter_is_a_question():
    assert any(c.group > 1 for c in backward_cases())

    def starter(q, k, v, out, lse, d_out, is_causal=False):
        raise NotImplementedError

    said = feedback(check_flash_backward(starter, verbose=False))
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


def key_loop_with(*, short_last=True, scale=None, divide=True, whole=False):
    """The step-2a solution with one knob per mistake."""

    def key_loop(q, k, v, block_k):
        s_of = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
        m, total = np.full((len(q), 1), -np.inf), np.zeros((len(q), 1))
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
]


def test_each_step_of_exercise_2_passes_its_solution():
    from attention_lib.lessons.exercises import check_diagonal_mask, check_key_loop, check_key_stop

    assert check_key_loop(solution_function("key_loop"), verbose=False).passed
    assert check_key_loop(key_loop_with(), verbose=False).passed
    assert check_key_stop(solution_function("key_stop"), verbose=False).passed
    assert check_diagonal_mask(solution_function("diagonal_mask"), verbose=False).passed


@pytest.mark.parametrize(
    ("cause", "words", "fn"), KEY_LOOP_MISTAKES, ids=[m[0] for m in KEY_LOOP_MISTAKES]
)
def test_each_key_loop_mistake_gets_its_own_message(cause, words, fn):
    from attention_lib.lessons.exercises import check_key_loop

    report = check_key_loop(fn, verbose=False)
    assert not report.passed and report.cause == cause, str(report)
    assert words in report.hint, report.hint


@pytest.mark.parametrize(
    ("cause", "words", "fn"),
    [
        ("walks every key", "lie above the diagonal", lambda r1, s, c: s),
        ("misses the diagonal", "sees key", lambda r1, s, c: min(s, r1 - 1) if c else s),
        ("past the last key", "there are only 10 keys", lambda r1, s, c: r1 if c else s),
        ("stopped without causal", "without is_causal", lambda r1, s, c: min(s, r1)),
        ("not an int", "return one int", lambda r1, s, c: [min(s, r1)]),
    ],
    ids=["every key", "r1 - 1", "past the end", "not causal", "a list"],
)
def test_each_key_stop_mistake_gets_its_own_message(cause, words, fn):
    from attention_lib.lessons.exercises import check_key_stop

    report = check_key_stop(fn, verbose=False)
    assert not report.passed and report.cause == cause, str(report)
    assert words in report.hint, report.hint


def _tile_mask(keep, origin=True):
    def diagonal_mask(s, r0, k0):
        r0, k0 = (r0, k0) if origin else (0, 0)
        rows = np.arange(r0, r0 + s.shape[0])[:, None]
        cols = np.arange(k0, k0 + s.shape[1])[None, :]
        return np.where(keep(rows, cols), s, -np.inf)

    return diagonal_mask


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
        ("shape", "is a Python list", lambda s, r0, k0: s.tolist()),
    ],
    ids=["tile indices", "diagonal", "upper", "inverted", "zeros", "list"],
)
def test_each_diagonal_mask_mistake_gets_its_own_message(cause, words, fn):
    from attention_lib.lessons.exercises import check_diagonal_mask

    report = check_diagonal_mask(fn, verbose=False)
    assert not report.passed and report.cause == cause, str(report)
    assert words in report.hint, report.hint
