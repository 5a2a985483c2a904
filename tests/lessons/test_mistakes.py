"""Each common mistake is made for real, caught by its check; the correct version passes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attention_course.lessons.mistakes import (
    MistakeCaught,
    MistakeRun,
    attend_mask_after_softmax,
    attend_wrong_axis,
    check_no_future_leak,
    check_not_saturated,
    check_rows_sum_to_one,
    check_scale_matches_head_width,
    future_leak,
    multi_head_qk,
    qk_normalised_weights,
    random_rows,
    run_mask_after_softmax,
    run_model_width_scale,
    run_scale_as_knob,
    run_wrong_axis,
    split_heads,
)
from attention_lib import attention_weights, scaled_dot_product_attention, softmax

pytestmark = pytest.mark.filterwarnings("error")


@pytest.fixture
def qkv() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    return rng.normal(size=(6, 8)), rng.normal(size=(6, 8)), rng.normal(size=(6, 3))


# -- 1. model width instead of head width ------------------------------------------


@pytest.mark.parametrize(("d_model", "n_heads"), [(512, 8), (256, 4), (96, 1)])
def test_model_width_scale_is_off_by_sqrt_heads(d_model: int, n_heads: int) -> None:
    run = run_model_width_scale(d_model=d_model, n_heads=n_heads)
    ratio = run.numbers["spread ratio (sqrt(n_heads))"]
    assert ratio == pytest.approx(math.sqrt(n_heads), rel=1e-12)  # the same logits, rescaled
    assert run.numbers["logit std, 1/sqrt(head width)"] == pytest.approx(1.0, abs=0.15)
    assert run.correct_passes
    if n_heads == 1:  # one head: model width is head width, nothing to catch
        assert run.caught is None
    else:
        assert run.caught is not None
        assert "computed from d_model, the width of all heads together" in run.caught
        assert run.numbers["mean top weight, mistaken"] < run.numbers["mean top weight, right"]


def test_check_scale_matches_head_width() -> None:
    q = np.zeros((8, 16, 64))  # (heads, L, head width)
    check_scale_matches_head_width(1 / 8, q)  # passes: returns None
    with pytest.raises(MistakeCaught, match=r"1/sqrt\(512\).*one head is 64 wide.*factor of 2\.83"):
        check_scale_matches_head_width(1 / math.sqrt(512), q)


def test_split_heads() -> None:
    x = np.arange(4 * 12, dtype=float).reshape(4, 12)  # (L, d_model)
    heads = split_heads(x, 3)  # (3, 4, 4)
    assert heads.shape == (3, 4, 4)
    assert np.array_equal(heads[1], x[:, 4:8])
    with pytest.raises(ValueError, match="d_model 12 must be a positive multiple of n_heads 5"):
        split_heads(x, 5)


# -- 2. softmax over the wrong axis ---------------------------------------------------


def test_wrong_axis_is_caught() -> None:
    run = run_wrong_axis()
    assert run.caught is not None and "must sum to 1 over the keys" in run.caught
    assert run.correct_passes
    assert run.numbers["largest |column sum - 1|, mistaken"] < 1e-12  # it normalised columns
    assert (
        run.numbers["smallest row sum, mistaken"]
        < 0.9
        < 1.1
        < run.numbers["largest row sum, mistaken"]
    )


def test_check_rows_sum_to_one_names_the_worst_row() -> None:
    scores = np.array([[0.0, 5.0], [0.0, 0.0], [3.0, 0.0]])  # (3, 2)
    check_rows_sum_to_one(softmax(scores, axis=-1))
    expected = r"row 1 sums to 0\.0519 \(row sums range 0\.0519 to 1\.0320\)"
    with pytest.raises(MistakeCaught, match=expected):
        check_rows_sum_to_one(softmax(scores, axis=0))


def test_attend_wrong_axis_normalises_columns(qkv: tuple) -> None:
    q, k, _ = qkv
    identity = np.eye(6)
    mixed = attend_wrong_axis(q, k, identity)  # (L, S): with v = I the output is the weights
    assert np.allclose(mixed.sum(axis=0), 1.0)
    assert not np.allclose(mixed.sum(axis=1), 1.0)


# -- 3. mask after softmax -----------------------------------------------------------------


def test_mask_after_softmax_is_caught_twice() -> None:
    run = run_mask_after_softmax()
    assert run.caught is not None
    assert "must sum to 1" in run.caught and "still influences" in run.caught
    assert run.correct_passes
    assert run.numbers["row sum of the first query, mistaken"] < 1.0
    assert run.numbers["largest output difference from the right answer"] > 0.1


def test_future_leak_check(qkv: tuple) -> None:
    q, k, v = qkv
    keep = np.tril(np.ones((6, 6), dtype=bool))  # (L, S)

    def right(q_, k_, v_):  # the mask on the scores, by hand
        scores = np.where(keep, q_ @ k_.T / math.sqrt(8), -np.inf)  # (L, S)
        return softmax(scores, axis=-1) @ v_

    check_no_future_leak(right, q, k, v)
    check_no_future_leak(
        lambda a, b, c: scaled_dot_product_attention(a, b, c, is_causal=True), q, k, v
    )
    with pytest.raises(MistakeCaught, match="changing the last key moved the outputs"):
        check_no_future_leak(lambda a, b, c: attend_mask_after_softmax(a, b, c, keep), q, k, v)
    # the measure itself: rounding for the fix, a real move for the mistake; inputs untouched
    before = [x.copy() for x in (q, k, v)]
    assert future_leak(right, q, k, v) < 1e-12
    leak = future_leak(lambda a, b, c: attend_mask_after_softmax(a, b, c, keep), q, k, v)
    assert leak > 0.01
    assert all(np.array_equal(x, y) for x, y in zip(before, (q, k, v), strict=True))


def test_the_mistakes_share_their_seeded_inputs_with_the_explorer() -> None:
    """One definition of each mistake's inputs: the run and the explorer draw the same."""
    from attention_course.explorers import MistakeExplorer

    q, k = random_rows(16, 64, 2)
    assert q.shape == k.shape == (16, 64) and not np.array_equal(q, k)
    np.testing.assert_array_equal(random_rows(16, 64, 3)[1], k)  # one generator, in turn
    explorer = MistakeExplorer("scale as a knob")
    np.testing.assert_array_equal(explorer.q, q)
    heads_q, heads_k = multi_head_qk(512, 8, 16)
    assert heads_q.shape == heads_k.shape == (8, 16, 64)
    np.testing.assert_array_equal(MistakeExplorer("model width").k, heads_k)


def test_attend_mask_after_softmax_without_mask_is_plain_attention(qkv: tuple) -> None:
    q, k, v = qkv
    assert np.allclose(attend_mask_after_softmax(q, k, v), scaled_dot_product_attention(q, k, v))


# -- 4. the scale as a knob ------------------------------------------------------------------


def test_scale_as_knob() -> None:
    run = run_scale_as_knob(width=64, growths=(1.0, 2.0, 4.0, 8.0), tuned_at=2.0)
    n = run.numbers
    # logits grow like g²: exactly, since the same draws are multiplied
    assert n["g=8: logit std, standard"] / n["g=1: logit std, standard"] == pytest.approx(64)
    # the tuned scale undoes exactly the growth it was tuned at, and no other
    assert n["g=2: logit std, tuned"] == pytest.approx(n["g=1: logit std, standard"])
    assert n["g=8: top weight, tuned"] > 0.9 > n["g=2: top weight, tuned"]
    # QK normalisation does not see the growth at all, and stays within sqrt(E)
    qk_tops = [n[f"g={g}: top weight, QK norm"] for g in (1, 2, 4, 8)]
    assert max(qk_tops) - min(qk_tops) < 1e-12
    assert all(n[f"g={g}: max |logit|, QK norm"] <= 8.0 for g in (1, 2, 4, 8))
    assert run.caught is not None and "collapsed onto single keys" in run.caught
    assert run.correct_passes
    assert run.table.count("\n") == 4  # header and one row per growth


def test_qk_normalised_weights(qkv: tuple) -> None:
    q, k, _ = qkv
    small = qk_normalised_weights(q, k)
    huge = qk_normalised_weights(1e3 * q, 1e3 * k)
    assert np.allclose(small, huge)
    cos = (q / np.linalg.norm(q, axis=-1, keepdims=True)) @ (
        k / np.linalg.norm(k, axis=-1, keepdims=True)
    ).T  # (L, S)
    assert np.allclose(qk_normalised_weights(q, k, temperature=3.0), softmax(3.0 * cos))
    assert np.allclose(small, softmax(math.sqrt(8) * cos))  # default temperature sqrt(E)
    assert np.allclose(small.sum(axis=-1), 1.0)


def test_check_not_saturated() -> None:
    check_not_saturated(np.full((4, 5), 0.2))
    with pytest.raises(MistakeCaught, match=r"mean top weight 1\.000 > 0\.9"):
        check_not_saturated(np.eye(4))


def test_mistake_run_text() -> None:
    missed = MistakeRun("t", {"x": 1.0}, caught=None, correct_passes=False)
    assert "NOT caught" in str(missed) and "FAILS" in str(missed)
    text = str(run_wrong_axis())
    assert text.startswith("2. softmax over the query axis") and "passes" in text


def test_rounding_level_numbers_are_printed_as_a_bound() -> None:
    # |column sum - 1| of the mistake and |row sum - 1| of the right version are float
    # rounding (0 here, 2.2e-16 on other CPUs): printed as a bound, true everywhere
    text = str(run_wrong_axis())
    assert "largest |column sum - 1|, mistaken: below 1e-12" in text
    assert "largest |row sum - 1|, right: below 1e-12" in text
    assert "smallest row sum, mistaken: 0.3212" in text  # a real number keeps 4 digits
    shown = str(MistakeRun("t", {"tiny": -3e-13, "zero": 0.0, "real": 2e-12}, None, True))
    assert "tiny: below 1e-12" in shown and "zero: below 1e-12" in shown
    assert "real: 2e-12" in shown


def test_runs_are_seeded() -> None:
    assert run_scale_as_knob().numbers == run_scale_as_knob().numbers
    assert str(run_model_width_scale()) == str(run_model_width_scale())
    assert attention_weights(np.ones((1, 2)), np.ones((3, 2))).shape == (1, 3)


# -- 5. dropout left on in evaluation ---------------------------------------------------


def test_dropout_in_eval_is_caught_and_the_fix_passes():
    import torch

    from attention_course.lessons.mistakes import (
        MistakeCaught,
        attention_layer,
        check_eval_is_deterministic,
        run_dropout_in_eval,
    )

    q, k, v = torch.randn(3, 1, 2, 6, 8, generator=torch.Generator().manual_seed(1)).unbind()
    with pytest.raises(MistakeCaught, match=r"dropout_p=self\.p if self\.training else 0\.0"):
        check_eval_is_deterministic(attention_layer(0.2, mistaken=True), q, k, v)
    fixed = attention_layer(0.2)
    check_eval_is_deterministic(fixed, q, k, v)  # no dropout in evaluation
    assert fixed.training  # the check leaves the mode as it found it
    with torch.no_grad():
        assert not torch.equal(fixed(q, k, v), fixed(q, k, v))  # it still drops in training

    state = torch.get_rng_state()
    run = run_dropout_in_eval()
    assert torch.equal(state, torch.get_rng_state()), "the learner's random state is left as it was"
    assert str(run) == str(run_dropout_in_eval())  # the same draws on every run
    assert run.caught and run.correct_passes
    assert run.numbers["largest difference, two calls in eval, mistaken"] > 0.1
    assert run.numbers["largest difference from no dropout, fixed"] < 1e-6


def test_the_mistakes_import_no_torch_until_the_fifth_runs():
    import subprocess
    import sys

    code = "import sys, attention_course.lessons.mistakes; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
