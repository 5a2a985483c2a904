"""Notebook 02's exercise checkers accept right answers and name the mistake in wrong ones.

Every wrong function below is written as a learner would write it. Reports are read on fixed
seeds where a test asserts their words; the solutions pass on any seed
(tests/lessons/test_checker_attempts.py draws many).
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from attention_course.lessons.exercises import SOLUTIONS, check_attention, check_scale_rule
from attention_course.lessons.exercises.attention import (
    HINT_MASK_AFTER,
    HINT_MASK_IGNORED,
    HINT_MASK_INVERTED,
    HINT_MASK_ZERO,
    HINT_NO_MASK_ARGUMENT,
    HINT_NO_SCALE,
    HINT_TOO_FLAT_D,
    HINT_WRONG_AXIS,
    attention_cases,
)
from attention_course.lessons.exercises.multi_head import multi_head_cases
from attention_course.lessons.exercises.scale_rule import scale_rule_logits
from attention_course.lessons.mistakes import attend_mask_after_softmax, attend_wrong_axis
from attention_lib import softmax

pytestmark = pytest.mark.filterwarnings("error")


# a learner's attention functions, right and wrong, written the way a learner would
def right(q, k, v, mask=None):
    scores = q @ k.T / math.sqrt(q.shape[-1])  # (L, S)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    return softmax(scores, axis=-1) @ v  # (L, dv)


def right_no_mask(q, k, v):
    return softmax(q @ k.T / math.sqrt(q.shape[-1])) @ v


def divide_by_d(q, k, v, mask=None):
    scores = q @ k.T / q.shape[-1]
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    return softmax(scores) @ v


def no_scale(q, k, v, mask=None):
    scores = q @ k.T
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    return softmax(scores) @ v


def half_scale(q, k, v, mask=None):
    return right(q / 2, k, v, mask)


def double_scale(q, k, v, mask=None):
    return right(2 * q, k, v, mask)


def ignores_mask(q, k, v, mask=None):
    return right(q, k, v)


def inverted_mask(q, k, v, mask=None):
    return right(q, k, v, None if mask is None else ~mask)


def mask_to_zero(q, k, v, mask=None):
    scores = q @ k.T / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, 0.0)
    return softmax(scores) @ v


def off_by_a_bit(q, k, v, mask=None):
    return right(q, k, v, mask) + 0.01


def transposed_weights(q, k, v, mask=None):
    return softmax(q @ k.T / math.sqrt(q.shape[-1])).T @ v


def returns_weights(q, k, v, mask=None):
    return softmax(q @ k.T / math.sqrt(q.shape[-1]))


SEED = 7  # the cases the tests below read reports on (any seed has every kind of case)


def test_a_correct_function_passes(capsys: pytest.CaptureFixture[str]) -> None:
    report = check_attention(right, seed=SEED)
    assert report.passed and report.hint == "" and report.cause == "" and report.seed == SEED
    assert len(report.cases) == 7 and all(c.max_abs_error < 1e-12 for c in report.cases)
    out = capsys.readouterr().out
    assert out.startswith("All 7 cases agree with attention_lib.scaled_dot_product_attention.")
    assert out.rstrip().endswith(f"cases drawn with seed {SEED} (pass seed={SEED} to rerun them)")


def test_the_cases_cover_what_the_exercise_promises() -> None:
    for seed in range(20):
        cases = attention_cases(seed)
        widths = {c.query.shape[1] for c in cases[:3]}
        assert len(widths) == 3 and widths <= {4, 8, 16, 32, 64}
        assert all(c.query.shape[0] != c.key.shape[0] for c in cases if c.name != "causal mask")
        assert all(c.value.shape[1] != c.query.shape[1] for c in cases)
        assert [c.mask is not None for c in cases] == [False] * 3 + [True] * 2 + [False] * 2
        scores = [c.query @ c.key.T / math.sqrt(c.query.shape[1]) for c in cases]
        assert 800 <= scores[5].max() <= 1000  # exp overflows past 709
        far = np.all(scores[6] < -900, axis=-1)  # rows whose every score is below -900
        assert far.any() and not far.all() and np.all(scores[6][far].max(axis=-1) <= -900)


def test_cases_are_drawn_from_the_seed_and_differ_between_seeds() -> None:
    a, b, c = attention_cases(3), attention_cases(3), attention_cases(4)
    assert all(np.array_equal(x.query, y.query) for x, y in zip(a, b, strict=True))
    assert not np.array_equal(a[0].query, c[0].query) or a[0].query.shape != c[0].query.shape


def test_agreement_is_printed_as_a_bound_not_as_rounding_digits() -> None:
    # A right answer differs from the reference by rounding only: "below 1e-12" everywhere.
    lines = str(check_attention(right, verbose=False, seed=SEED)).splitlines()[1:8]
    assert all(line.endswith("max abs error below 1e-12") for line in lines), lines

    def slightly_off(q, k, v, mask=None):
        return right(q, k, v, mask) + 3e-10  # inside the checker's tolerance, above rounding

    off = check_attention(slightly_off, verbose=False, seed=SEED)
    assert off.passed
    assert all(str(c).endswith("max abs error 3.00e-10") for c in off.cases), off


def test_a_function_without_mask_fails_the_masked_cases_it_could_not_run() -> None:
    # skipping the masked cases must not read as a pass: masking is half the exercise
    report = check_attention(right_no_mask, verbose=False, seed=SEED)
    assert not report.passed and len(report.cases) == 7
    assert [c.passed for c in report.cases] == [True] * 3 + [False] * 2 + [True] * 2
    assert report.cause == "no mask argument" and report.hint == HINT_NO_MASK_ARGUMENT


@pytest.mark.parametrize(
    ("fn", "cause", "hint"),
    [
        (divide_by_d, "1/d", HINT_TOO_FLAT_D),
        (no_scale, "no scale", HINT_NO_SCALE),
        (attend_wrong_axis, "wrong axis", HINT_WRONG_AXIS),
        (attend_mask_after_softmax, "mask after softmax", HINT_MASK_AFTER),
        (ignores_mask, "mask ignored", HINT_MASK_IGNORED),
        (inverted_mask, "mask inverted", HINT_MASK_INVERTED),
        (mask_to_zero, "mask zero", HINT_MASK_ZERO),
    ],
)
def test_the_usual_mistakes_get_their_hint(fn, cause: str, hint: str) -> None:
    report = check_attention(fn, verbose=False, seed=SEED)
    assert not report.passed
    assert report.cause == cause and report.hint == hint, str(report)


def test_mask_after_softmax_passes_the_unmasked_cases() -> None:
    report = check_attention(attend_mask_after_softmax, verbose=False, seed=SEED)
    assert [c.passed for c in report.cases] == [True] * 3 + [False] * 2 + [True] * 2


def test_another_constant_scale_is_measured() -> None:
    flat = check_attention(half_scale, verbose=False, seed=SEED)
    assert flat.cause == "too flat", str(flat)
    width = flat.cases[0].shape.split("d=")[1].split()[0]
    assert f"match a scale of {0.5 / math.sqrt(int(width)):.4g}, but 1/sqrt(d) =" in flat.hint
    sharp = check_attention(double_scale, verbose=False, seed=SEED)
    assert sharp.cause == "too sharp" and "divided by too little" in sharp.hint


def test_an_unrecognised_error_gets_the_step_by_step_hint_with_its_rows() -> None:
    report = check_attention(off_by_a_bit, verbose=False, seed=SEED)
    assert report.cause == "unknown" and "check the steps one by one" in report.hint
    assert re.search(r"\(rows 0–\d+ differ\)", report.hint), report.hint
    assert all(c.max_abs_error == pytest.approx(0.01) for c in report.cases)


def test_exceptions_and_shapes_are_reported() -> None:
    raised = check_attention(transposed_weights, verbose=False, seed=SEED)
    assert raised.cause == "raised" and "raised ValueError: matmul" in raised.hint
    case = attention_cases(SEED)[0]
    q, k, v = case.query.shape, case.key.shape, case.value.shape
    assert f"(inputs: q {q}, k {k}, v {v})" in raised.hint
    shape = check_attention(returns_weights, verbose=False, seed=SEED)
    assert shape.cause == "shape"
    assert f"expected an output of shape {(q[0], v[1])} (queries × value width), got" in shape.hint


def test_check_attention_refuses_a_non_function_and_a_bad_seed() -> None:
    with pytest.raises(TypeError, match="needs a function fn"):
        check_attention(np.zeros(3))
    with pytest.raises(TypeError, match="seed must be a non-negative int"):
        check_attention(right, seed=-1)


@pytest.mark.parametrize(
    ("fn", "words"),
    [
        (lambda q, k, v, mask=None: right(q, k, v, mask).tolist(), "is a Python list, not a numpy"),
        (lambda q, k, v, mask=None: None, "is None: does your function end with a return?"),
        (lambda q, k, v, mask=None: "out", "is a str, not a numpy array"),
    ],
    ids=["list", "None", "str"],
)
def test_an_answer_that_is_not_an_array_gets_one_sentence(fn, words) -> None:
    report = check_attention(fn, verbose=False, seed=SEED)
    assert not report.passed and report.cause == "not an array" and words in report.hint


# -- notebook 02's scale rule ------------------------------------------------------------


def test_dividing_by_d_flattens_toward_one_sixth(capsys: pytest.CaptureFixture[str]) -> None:
    report = check_scale_rule(lambda d: 1 / d, expect="flatten")
    assert report.passed and report.behaviour == "flatten"
    assert report.tops[-1] == pytest.approx(1 / 6, abs=0.01)
    assert all(b < a for a, b in zip(report.tops, report.tops[1:], strict=False))
    out = capsys.readouterr().out
    assert "toward uniform 1/6 = 0.167 (over-dividing)" in out and out.endswith("as expected.\n")


def test_under_dividing_sharpens_toward_one() -> None:
    report = check_scale_rule(lambda d: d**-0.25, expect="sharpen", verbose=False)
    assert report.passed and report.tops[-1] > 0.8
    none = check_scale_rule(lambda d: 1.0, verbose=False)
    assert none.behaviour == "sharpen" and none.tops[-1] > 0.95 and none.passed


def test_sqrt_d_holds_and_matches_the_reference() -> None:
    report = check_scale_rule(lambda d: 1 / math.sqrt(d), expect="hold", verbose=False)
    assert report.passed and report.tops == report.standard_tops
    # the lesson's "with scaling" column (other draws): 0.418, 0.422, 0.421
    assert report.tops[1:4] == pytest.approx((0.418, 0.422, 0.421), abs=0.01)


def test_a_wrong_expectation_is_reported() -> None:
    report = check_scale_rule(lambda d: 1 / d, expect="hold", verbose=False)
    assert not report.passed and str(report).endswith("expected them to hold instead.")


@pytest.mark.parametrize(
    ("rule", "words"),
    [
        (lambda d: 1.0, "your rule does not divide at all"),
        (lambda d: math.sqrt(d), "your rule multiplies the logits instead of dividing them"),
        (lambda d: 0.5, "your divisor does not grow with d"),
    ],
    ids=["no division", "multiplies", "constant"],
)
def test_a_rule_that_sharpens_without_a_growing_divisor_does_not_pass(rule, words) -> None:
    # the weights climb toward one for all three, as the exercise's do, but none divides
    # by something that grows with d, which is what the exercise asks
    report = check_scale_rule(rule, expect="sharpen", divides=True, verbose=False)
    assert report.behaviour == "sharpen" and not report.passed
    assert words in report.divisor_problem and f"not passed: {words}" in str(report)


def _exercise(rule):
    return check_scale_rule(
        rule, expect="sharpen", divides=True, logits=scale_rule_logits(), verbose=False
    )


def test_a_rule_that_sharpens_only_between_the_ends_does_not_pass() -> None:
    # sqrt(d) up to d = 64, then a divisor that stops growing: the ends differ, the middle
    # holds; the old check compared only the ends
    def holds_then_climbs(d):
        return 1 / math.sqrt(min(d, 64)) / (1 + d / 1e4)

    report = _exercise(holds_then_climbs)
    assert report.behaviour == "sharpen" and not report.passed
    assert "your weights do not climb at every width: from d = 16 to d = 64" in report.problem


def test_a_divisor_that_barely_grows_does_not_pass() -> None:
    report = _exercise(lambda d: 1 / (1 + 1e-4 * d))
    assert report.behaviour == "sharpen" and not report.divisor_problem and not report.passed
    assert report.problem.startswith("your weights are as good as unscaled: at d = 256")
    assert report.unscaled_tops[-1] == pytest.approx(report.tops[-1], abs=0.02)


def test_the_exercise_runs_on_the_second_tables_trials() -> None:
    logits = scale_rule_logits()
    assert sorted(logits) == [4, 16, 64, 256] and logits[4].shape == (2_000, 6)
    # the page's draws: seed 0, the first table's 20,000 pairs first
    rng = np.random.default_rng(0)
    for d in (4, 16, 64, 256):
        rng.normal(size=(2, 20_000, d))
    q, k = rng.normal(size=(2_000, 1, 4)), rng.normal(size=(2_000, 6, 4))
    np.testing.assert_array_equal(logits[4], (q @ k.swapaxes(-1, -2))[:, 0])
    logits[4][0, 0] = 1e9  # a copy: the next caller gets the draws again
    assert scale_rule_logits()[4][0, 0] != 1e9


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, "0.5", [0.5], True])
def test_scale_rule_refuses_bad_scales(bad) -> None:
    with pytest.raises(ValueError, match=r"scale_fn\(4\) returned .*a scale must be a positive"):
        check_scale_rule(lambda d: bad, verbose=False)


def test_scale_rule_says_in_one_sentence_what_a_rule_raised() -> None:
    with pytest.raises(ValueError, match=r"^scale_fn\(4\) raised ZeroDivisionError: division"):
        check_scale_rule(lambda d: 1 / 0, verbose=False)


def test_scale_rule_refuses_an_unknown_expectation() -> None:
    with pytest.raises(ValueError, match="expect must be None or one of"):
        check_scale_rule(lambda d: 1 / d, expect="flat", verbose=False)


# -- the solutions notebook 02 keeps hidden until an attempt passes ---------------------


def _defined(solution):
    scope = {"np": np, "math": math, "softmax": softmax}
    exec(solution.code, scope)
    return scope[solution.name]


def test_the_scale_rule_solution_sharpens_as_the_exercise_asks():
    rule = _defined(SOLUTIONS["under_divided"])
    assert rule(16) == pytest.approx(0.5)
    report = _exercise(rule)
    assert report.passed and report.behaviour == "sharpen" and not report.problem
    assert "d^(1/4)" in SOLUTIONS["under_divided"].explanation


def test_the_scale_rule_can_run_on_given_scores() -> None:
    # notebook 02 passes its second table's draws: the answer comes from those trials
    rng = np.random.default_rng(5)
    scores = {d: rng.normal(size=(300, 6)) * math.sqrt(d) for d in (4, 64, 256)}  # (trials, 6)
    report = check_scale_rule(lambda d: 1 / d, logits=scores, verbose=False)
    assert report.widths == (4, 64, 256) and report.keys == 6
    expected = [softmax(scores[d] / d, axis=-1).max(axis=-1).mean() for d in scores]
    assert report.tops == pytest.approx(expected, rel=1e-12)
    assert report.behaviour == "flatten"


@pytest.mark.parametrize(
    ("logits", "match"),
    [
        ({}, "at least one width"),
        ({4: np.zeros((10, 6)), 16: np.zeros((10, 5))}, r"same shape for every width"),
        ({4: np.zeros((10, 1))}, "at least two keys"),
        ({4: np.zeros(10)}, r"one \(trials, keys\) array per width"),
    ],
)
def test_the_scale_rule_refuses_scores_of_the_wrong_shape(logits, match) -> None:
    with pytest.raises(ValueError, match=match):
        check_scale_rule(lambda d: 1 / d, logits=logits, verbose=False)


# -- notebook 02: one mask for padding and causality ---------------------------------------


def mask_right(lengths, size):
    causal = np.tril(np.ones((size, size), dtype=bool))  # (L, L)
    real = np.arange(size) < np.asarray(lengths)[:, None]  # (B, L)
    return causal & real[:, None, :]


def mask_causal_only(lengths, size):
    return np.broadcast_to(np.tril(np.ones((size, size), dtype=bool)), (len(lengths), size, size))


def mask_padding_only(lengths, size):
    real = np.arange(size) < np.asarray(lengths)[:, None]
    return np.broadcast_to(real[:, None, :], (len(lengths), size, size))


def mask_upper_triangle(lengths, size):
    real = np.arange(size) < np.asarray(lengths)[:, None]
    return np.triu(np.ones((size, size), dtype=bool)) & real[:, None, :]


def mask_or(lengths, size):
    real = np.arange(size) < np.asarray(lengths)[:, None]
    return np.tril(np.ones((size, size), dtype=bool)) | real[:, None, :]


def mask_swapped(lengths, size):
    return ~mask_right(lengths, size)


def mask_rows_too(lengths, size):
    real = np.arange(size) < np.asarray(lengths)[:, None]
    return mask_right(lengths, size) & real[:, :, None]  # padding queries' rows all False


def mask_no_diagonal(lengths, size):
    real = np.arange(size) < np.asarray(lengths)[:, None]
    return np.tril(np.ones((size, size), dtype=bool), k=-1) & real[:, None, :]


def mask_off_by_one(lengths, size):
    real = np.arange(size) <= np.asarray(lengths)[:, None]  # one padding key too many
    return np.tril(np.ones((size, size), dtype=bool)) & real[:, None, :]


def mask_as_floats(lengths, size):
    return mask_right(lengths, size).astype(float)


def mask_one_for_all(lengths, size):
    return np.tril(np.ones((size, size), dtype=bool))  # (L, L): no batch axis


def mask_not_written(lengths, size):
    raise NotImplementedError("replace this line with your mask")


def test_the_combined_mask_solution_and_a_right_mask_pass() -> None:
    from attention_course.lessons.exercises import check_combined_mask

    for fn in (mask_right, _defined(SOLUTIONS["combined_mask"])):
        report = check_combined_mask(fn, verbose=False, seed=SEED)
        assert report.passed and report.cause == "" and len(report.cases) == 3
        assert str(report).startswith("All 3 cases agree with the reference mask.")


def test_the_mask_cases_are_drawn_and_padded_as_promised() -> None:
    from attention_course.lessons.exercises.combined_mask import mask_cases

    for seed in range(20):
        none, three, every = mask_cases(seed)
        assert none.lengths == (none.size,)
        assert three.lengths[0] == three.size > three.lengths[1] > three.lengths[2] == 1
        assert all(0 < n < every.size for n in every.lengths)
    assert mask_cases(1) != mask_cases(2)


@pytest.mark.parametrize(
    ("fn", "cause", "hint_name"),
    [
        (mask_causal_only, "padding left out", "HINT_PADDING_LEFT_OUT"),
        (mask_padding_only, "causality left out", "HINT_CAUSALITY_LEFT_OUT"),
        (mask_upper_triangle, "upper triangle", "HINT_UPPER_TRIANGLE"),
        (mask_or, "or, not and", "HINT_OR_NOT_AND"),
        (mask_swapped, "swapped", "HINT_MASK_SWAPPED"),
        (mask_rows_too, "empty rows", "HINT_EMPTY_ROWS"),
        (mask_no_diagonal, "no diagonal", "HINT_NO_DIAGONAL"),
        (mask_off_by_one, "padding off by one", "HINT_PADDING_OFF_BY_ONE"),
    ],
)
def test_the_usual_mask_mistakes_get_their_message(fn, cause: str, hint_name: str) -> None:
    from attention_course.lessons.exercises import check_combined_mask
    from attention_course.lessons.exercises import combined_mask as exercises

    report = check_combined_mask(fn, verbose=False, seed=SEED)
    assert not report.passed and report.cause == cause, str(report)
    assert report.hint.endswith(getattr(exercises, hint_name)), report.hint
    assert re.match(r"\d+ of \d+ entries differ: ", report.hint), report.hint


def test_the_padding_query_convention_is_stated_as_a_convention() -> None:
    from attention_course.lessons.exercises import check_combined_mask

    report = check_combined_mask(mask_rows_too, verbose=False, seed=SEED)
    assert "This exercise's convention: a padding query keeps the real keys" in report.hint
    assert "PyTorch (since 2.5) returns zeros for it" in report.hint
    lists = check_combined_mask(lambda lengths, size: mask_right(lengths, size).tolist(), seed=3)
    assert lists.cause == "not an array" and "is a Python list, not a numpy array" in lists.hint


def test_a_mask_of_the_wrong_kind_is_told_what_kind_it_must_be() -> None:
    from attention_course.lessons.exercises import check_combined_mask
    from attention_course.lessons.exercises.combined_mask import mask_cases

    floats = check_combined_mask(mask_as_floats, verbose=False, seed=SEED)
    assert floats.cause == "dtype" and "adds a float mask to the scores" in floats.hint
    one = check_combined_mask(mask_one_for_all, verbose=False, seed=SEED)
    size = mask_cases(SEED)[0].size
    assert one.cause == "shape" and "give each its own" in one.hint
    expected = f"expected one (L, L) mask per sequence, shape (1, {size}, {size}), got"
    assert expected in one.hint
    starter = check_combined_mask(mask_not_written, verbose=False, seed=SEED)
    assert starter.not_written and starter.cause == "raised"
    with pytest.raises(TypeError, match=r"needs a function fn\(lengths, size\)"):
        check_combined_mask(np.ones(3))


# -- notebook 02: a KV-cache decode step ---------------------------------------------------


def _attend(q, k, v, mask=None):
    scores = q @ k.T / math.sqrt(q.shape[-1])  # (T, S)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    return softmax(scores, axis=-1) @ v  # (T, dv)


def decode_right(q, k, v, k_cache, v_cache):
    k_cache, v_cache = np.concatenate([k_cache, k]), np.concatenate([v_cache, v])
    t, s = len(q), len(k_cache)
    return _attend(q, k_cache, v_cache, np.tril(np.ones((t, s), bool), k=s - t)), k_cache, v_cache


def decode_top_left(q, k, v, k_cache, v_cache):
    k_cache, v_cache = np.concatenate([k_cache, k]), np.concatenate([v_cache, v])
    mask = np.tril(np.ones((len(q), len(k_cache)), bool))  # what is_causal=True does
    return _attend(q, k_cache, v_cache, mask), k_cache, v_cache


def decode_before_appending(q, k, v, k_cache, v_cache):
    out = _attend(q, k_cache, v_cache) if len(k_cache) else np.zeros((len(q), v.shape[1]))
    return out, np.concatenate([k_cache, k]), np.concatenate([v_cache, v])


def decode_in_front(q, k, v, k_cache, v_cache):
    k_cache, v_cache = np.concatenate([k, k_cache]), np.concatenate([v, v_cache])
    return _attend(q, k_cache, v_cache), k_cache, v_cache


def decode_no_mask(q, k, v, k_cache, v_cache):
    k_cache, v_cache = np.concatenate([k_cache, k]), np.concatenate([v_cache, v])
    return _attend(q, k_cache, v_cache), k_cache, v_cache


def decode_old_cache(q, k, v, k_cache, v_cache):
    out, _, _ = decode_right(q, k, v, k_cache, v_cache)
    return out, k_cache, v_cache


def decode_unscaled(q, k, v, k_cache, v_cache):
    k_cache, v_cache = np.concatenate([k_cache, k]), np.concatenate([v_cache, v])
    t, s = len(q), len(k_cache)
    scores = np.where(np.tril(np.ones((t, s), bool), k=s - t), q @ k_cache.T, -np.inf)
    return softmax(scores, axis=-1) @ v_cache, k_cache, v_cache


def decode_own_key_hidden(q, k, v, k_cache, v_cache):
    k_cache, v_cache = np.concatenate([k_cache, k]), np.concatenate([v_cache, v])
    t, s = len(q), len(k_cache)
    return (
        _attend(q, k_cache, v_cache, np.tril(np.ones((t, s), bool), k=s - t - 1)),
        k_cache,
        v_cache,
    )


def decode_output_only(q, k, v, k_cache, v_cache):
    return decode_right(q, k, v, k_cache, v_cache)[0]


def test_the_decode_step_solution_and_a_right_step_pass() -> None:
    from attention_course.lessons.exercises import check_decode_step

    for fn in (decode_right, _defined(SOLUTIONS["decode_step"])):
        report = check_decode_step(fn, verbose=False, seed=SEED)
        assert report.passed and len(report.cases) == 6
        assert all("max abs error below 1e-12" in str(c) for c in report.cases)


@pytest.mark.parametrize(
    ("fn", "cause", "hint_name"),
    [
        (decode_top_left, "top-left", "HINT_TOP_LEFT"),
        (decode_before_appending, "not appended", "HINT_NOT_APPENDED"),
        (decode_in_front, "cache front", "HINT_CACHE_FRONT"),
        (decode_no_mask, "no mask", "HINT_NO_CHUNK_MASK"),
        (decode_old_cache, "cache stale", "HINT_CACHE_STALE"),
        (decode_unscaled, "no scale", "HINT_NO_SCALE"),
        (decode_own_key_hidden, "own key hidden", "HINT_OWN_KEY"),
    ],
)
def test_the_usual_decode_mistakes_get_their_message(fn, cause: str, hint_name: str) -> None:
    from attention_course.lessons.exercises import check_decode_step
    from attention_course.lessons.exercises import decode as exercises

    with np.errstate(invalid="ignore", divide="ignore"):  # a softmax over an empty cache
        report = check_decode_step(fn, verbose=False, seed=SEED)
    assert not report.passed and report.cause == cause, report
    assert report.hint == getattr(exercises, hint_name)


def test_a_decode_step_without_its_cache_is_told_what_to_return() -> None:
    from attention_course.lessons.exercises import check_decode_step

    report = check_decode_step(decode_output_only, verbose=False, seed=SEED)
    assert report.cause == "returns" and "(output, k_cache, v_cache)" in report.hint
    with pytest.raises(TypeError, match="needs a function fn"):
        check_decode_step("decode")


def test_the_top_left_mistake_passes_the_case_where_top_left_is_right() -> None:
    # with an empty cache (P = 0) the score matrix is square and both alignments agree
    from attention_course.lessons.exercises import check_decode_step

    report = check_decode_step(decode_top_left, verbose=False, seed=SEED)
    assert [c.passed for c in report.cases][:5] == [False, False, False, False, True]


# -- notebook 02: multi-head attention -----------------------------------------------------


def heads(x, w_q, w_k, w_v, w_o, n_heads, *, root=None, split_ok=True, merge_ok=True, t=False):
    """A learner's multi-head layer with one knob per mistake (defaults: right)."""
    batch, length, d_model = x.shape
    d_head = d_model // n_heads
    if t:  # nn.Linear's layout: x @ W.T
        w_q, w_k, w_v, w_o = w_q.T, w_k.T, w_v.T, w_o.T

    def split(y):
        if split_ok:
            return y.reshape(batch, length, n_heads, d_head).transpose(0, 2, 1, 3)
        return y.reshape(batch, n_heads, length, d_head)

    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d_head if root is None else root(x, n_heads))
    out = softmax(scores, axis=-1) @ v  # (B, H, T, dh)
    if merge_ok:
        out = out.transpose(0, 2, 1, 3)
    return out.reshape(batch, length, d_model) @ w_o


def _heads(**knobs):
    return lambda x, w_q, w_k, w_v, w_o, n_heads: heads(x, w_q, w_k, w_v, w_o, n_heads, **knobs)


def _first(seed=SEED):
    """The first case's (batch, tokens, d_model, heads, d_head)."""
    case = multi_head_cases(seed)[0]
    (b, t, d), h = case.x.shape, case.n_heads
    return b, t, d, h, d // h


B, T, D, H, DH = _first()
HEAD_MISTAKES = [
    (
        "scale sqrt(d_model)",
        f"you divided by √{D}, the model width; each head is {DH} wide: divide by √{DH}",
        _heads(root=lambda x, h: x.shape[-1]),
    ),
    (
        "scale sqrt(n_heads)",
        f"you divided by √{H}, the number of heads; each head is {DH} wide: divide by √{DH}",
        _heads(root=lambda x, h: h),
    ),
    (
        "no scale",
        f"you did not scale the scores at all; each head is {DH} wide: divide by √{DH}",
        _heads(root=lambda x, h: 1),
    ),
    (
        "split mixes heads",
        f"your split mixes heads: reshaping ({B}, {T}, {D}) straight to ({B}, {H}, {T}, {DH}) "
        f"cuts across tokens; reshape to ({B}, {T}, {H}, {DH}) first",
        _heads(split_ok=False),
    ),
    (
        "merge order",
        f"your merge is in the wrong order: ({B}, {H}, {T}, {DH}) was reshaped straight to "
        f"({B}, {T}, {D})",
        _heads(merge_ok=False),
    ),
    (
        "scale sqrt(d_model) + merge order",
        f"you divided by √{D}, the model width; each head is {DH} wide: divide by √{DH}; and your "
        "merge is in the wrong order",
        _heads(root=lambda x, h: x.shape[-1], merge_ok=False),
    ),
    ("transposed weights", "the weights multiply on the right: x @ w_q", _heads(t=True)),
]


def test_the_multi_head_solution_passes_every_case() -> None:
    from attention_course.lessons.exercises import check_multi_head

    for fn in (_defined(SOLUTIONS["multi_head"]), _heads()):
        report = check_multi_head(fn, verbose=False, seed=SEED)
        assert report.passed and len(report.cases) == 4, str(report)
    assert len(SOLUTIONS["multi_head"].hints) == 3


def test_the_multi_head_cases_have_heads_8_16_and_32_wide() -> None:
    for seed in range(20):
        cases = multi_head_cases(seed)
        assert sorted(c.widths[2] for c in cases[:3]) == [8, 16, 32]
        scores = []
        for c in cases:
            _, heads_, d_head = c.widths
            b, t, _ = c.x.shape
            q = (c.x @ c.weights[0]).reshape(b, t, heads_, d_head).swapaxes(1, 2)
            k = (c.x @ c.weights[1]).reshape(b, t, heads_, d_head).swapaxes(1, 2)
            scores.append(np.max(q @ k.swapaxes(-1, -2) / math.sqrt(d_head)))
        assert max(scores[:3]) < 100 and 800 <= scores[3] <= 1000.1


@pytest.mark.parametrize(("cause", "words", "fn"), HEAD_MISTAKES, ids=[m[0] for m in HEAD_MISTAKES])
def test_each_multi_head_mistake_is_named_with_its_numbers(cause, words, fn) -> None:
    from attention_course.lessons.exercises import check_multi_head

    report = check_multi_head(fn, verbose=False, seed=SEED)
    assert not report.passed and report.cause == cause, str(report)
    assert report.cases[0].hint.startswith(words), report.cases[0].hint


def test_a_scale_fixed_for_one_head_width_is_named_on_the_others() -> None:
    from attention_course.lessons.exercises import check_multi_head

    report = check_multi_head(_heads(root=lambda x, h: 16), verbose=False, seed=SEED)
    assert not report.passed
    sixteen = next(c for c in report.cases if c.name == "16 wide")
    assert sixteen.passed  # right for 16-wide heads only
    eight = next(c for c in report.cases if c.name == "8 wide")
    assert not eight.passed and "each head is 8 wide: divide by √8" in eight.hint


def test_multi_head_bad_returns_get_one_sentence() -> None:
    from attention_course.lessons.exercises import check_multi_head

    wrong_shape = check_multi_head(lambda x, *w: x[:, :, :4], verbose=False, seed=SEED)
    assert wrong_shape.cause == "shape" and f"should have shape {(B, T, D)}" in wrong_shape.hint
    listed = check_multi_head(lambda x, *w: heads(x, *w).tolist(), verbose=False, seed=SEED)
    assert listed.cause == "not an array" and "Python list" in listed.hint
    raised = check_multi_head(lambda x, *w: 1 / 0, verbose=False, seed=SEED)
    assert raised.cause == "raised" and "raised ZeroDivisionError" in raised.hint
