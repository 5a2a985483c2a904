"""The alternatives lesson's experiments and figure (`attention_course.lessons.alternatives`):
the random-feature approximation, the timing, the attention-sink demonstration, and the sigmoid
and differential weights' figure; the functions they run are the library's
(lib/tests/test_alternatives.py, lib/tests/test_sigmoid_differential.py)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from support import FLOAT64

import attention_lib as al
from attention_course.lessons.alternatives import (
    random_feature_error,
    sink_experiment,
    time_softmax_vs_linear,
)
from attention_lib import variants
from attention_lib.fits import log_log_slope


def test_performer_converges_to_softmax_attention():
    # seeded: measured 0.42 mean error at m=16, 0.044 at m=4096 (plain Gaussian features)
    rows = random_feature_error((16, 4096), projections=8, seed=0)
    small, large = rows[0].mean_error, rows[1].mean_error
    assert 0.2 < small < 0.8
    assert large < 0.08
    assert large < small / 5


def test_random_feature_error_falls_like_one_over_root_m():
    # measured slope -0.41 over m = 16 ... 4096 (seed 0); 1/sqrt(m) is -0.5
    rows = random_feature_error((16, 64, 256, 1024, 4096), projections=8, seed=0)
    slope = log_log_slope([r.num_features for r in rows], [r.mean_error for r in rows])
    assert -0.6 < slope < -0.3
    errors = [r.mean_error for r in rows]
    assert all(a > b for a, b in itertools.pairwise(errors))


def test_timing_returns_positive_seconds_per_length():
    rows = time_softmax_vs_linear(lengths=(16, 32), width=8, repeats=1)
    assert [r.length for r in rows] == [16, 32]
    assert all(r.softmax_s > 0 and r.linear_s > 0 for r in rows)  # no timing targets


# -- attention sinks ----------------------------------------------------------------------
# Measured (seed 0, 200 steps; the numbers the notebook prints):
#   softmax,  first token:  weight on it in "nothing" rows 0.987, loss ~0
#   softmax1, first token:  0.486 (shared with softmax1's built-in zero slot), rows sum 0.514
#   softmax,  no first token: loss on "nothing" rows 0.088, rows spread ~1/3 over 3 keys
#   softmax1, no first token: loss ~0, "nothing" rows sum to 0.013


@pytest.fixture(scope="module")
def sink_runs():
    return {
        (norm, first): sink_experiment(norm, first, seed=0)
        for norm in ("softmax", "softmax1")
        for first in (True, False)
    }


def test_softmax_piles_surplus_weight_on_the_first_token(sink_runs):
    soft, soft1 = sink_runs["softmax", True], sink_runs["softmax1", True]
    assert soft.first_weight_nothing > 0.95
    assert soft.first_weight_match < 0.05  # it is a sink, not a favourite
    assert soft1.first_weight_nothing < 0.55
    assert soft.first_weight_nothing - soft1.first_weight_nothing > 0.4
    assert soft.loss_nothing < 1e-3 and soft1.loss_nothing < 1e-3


def test_softmax1_needs_no_sink(sink_runs):
    soft, soft1 = sink_runs["softmax", False], sink_runs["softmax1", False]
    assert soft.row_total_nothing == pytest.approx(1.0, abs=1e-12)
    assert soft.loss_nothing > 0.05  # nothing to say "nothing" with
    assert soft1.row_total_nothing < 0.05  # it declines to attend instead
    assert soft1.row_total_match > 0.95
    assert soft1.loss_nothing < 1e-3 and soft1.loss_match < 1e-3


def test_a_blank_first_token_makes_softmax_the_same_model_as_softmax1(sink_runs):
    # softmax over [0, s] with a zero value equals softmax1(s): same init, same data, same fit
    with_sink, plain1 = sink_runs["softmax", True], sink_runs["softmax1", False]
    np.testing.assert_allclose(with_sink.example_weights[:, 1:], plain1.example_weights, atol=1e-9)
    assert with_sink.loss_nothing == pytest.approx(plain1.loss_nothing, abs=1e-9)


def test_sink_experiment_is_seeded_and_checks_arguments(sink_runs):
    again = sink_experiment("softmax", True, seed=0)
    np.testing.assert_array_equal(again.example_weights, sink_runs["softmax", True].example_weights)
    with pytest.raises(ValueError, match=r"'softmax' or 'softmax1', got 'sparsemax'"):
        sink_experiment("sparsemax")
    with pytest.raises(ValueError, match=r"between 1 and vocab=8, got 9"):
        sink_experiment(keys=9)


def test_example_row_sums_follow_the_normaliser(sink_runs):
    run = sink_runs["softmax1", False]
    sums = run.example_weights.sum(-1)
    assert (sums < 1).all()
    assert math.isclose(sink_runs["softmax", False].example_weights.sum(-1).min(), 1.0)


def test_the_sigmoid_and_differential_figure_draws_the_library_weights():
    from attention_course.lessons.alternatives import (
        sigmoid_differential_headline,
        sigmoid_differential_weights,
    )
    from attention_course.lessons.figures import sigmoid_differential_figure

    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((6, 16)), rng.standard_normal((10, 16))  # (L, E), (S, E)
    weights = sigmoid_differential_weights(q, k, lam=0.5)
    assert list(weights) == ["softmax", "sigmoid", "differential, λ = 0.5"]
    assert np.allclose(weights["sigmoid"], variants.sigmoid_weights(q, k), atol=0)
    assert np.allclose(weights["differential, λ = 0.5"].sum(-1), 0.5, **FLOAT64)
    assert np.allclose(weights["softmax"], al.softmax(q @ k.T / 4), atol=1e-15)
    line = sigmoid_differential_headline(weights)
    parts = line.split("; ")
    assert parts[0] == "softmax: rows sum 1.00–1.00"
    s = weights["sigmoid"].sum(-1)
    assert parts[1] == f"sigmoid: rows sum {s.min():.2f}–{s.max():.2f}"
    negative = int((weights["differential, λ = 0.5"] < 0).sum())
    assert negative > 0 and f"{negative}/60 negative" in parts[2]
    fig = sigmoid_differential_figure(q, k, lam=0.5).fig
    assert fig._suptitle.get_text() == "\n".join(parts)
    images = [im.get_array() for ax in fig.axes for im in ax.images]
    assert len(images) == 3 and np.allclose(images[2], weights["differential, λ = 0.5"])
    assert fig.get_size_inches()[0] * fig.dpi <= 840
    assert variants.differential_lambda_init(1) == pytest.approx(0.2)
    assert "λ = 0.2" in list(sigmoid_differential_weights(q, k))[2]
