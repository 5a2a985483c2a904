"""Timings that hold, and the still figures the notebooks show, sized and titled from data.

Timing: no time is asserted (machine-dependent); what is tested is the
measurement's shape (warm-up, repeats, spread), the slope fit on the largest
lengths, the warning when repeats disagree, and a title that says
"quadratically" only for a slope near 2.
"""

from __future__ import annotations

import numpy as np
import pytest
from support import texts_outside

from attention_course.lessons.alternatives import (
    SinkRun,
    TimingRow,
    describe_slopes,
    growth_words,
    sink_headline,
    time_softmax_vs_linear,
    timing_slopes,
    timing_warnings,
)
from attention_course.lessons.crowded_room import sharing_headline, three_steps
from attention_course.lessons.figures import (
    retrieval_figure,
    sharing_picture,
    sink_figure,
    timing_figure,
)
from attention_course.lessons.saturation import RetrievalRun, describe_training

pytestmark = pytest.mark.filterwarnings("error")


def power_rows(lengths=(256, 512, 1024, 2048, 4096), soft=2.0, lin=1.0) -> list[TimingRow]:
    return [TimingRow(t, 1e-9 * t**soft, 1e-7 * t**lin) for t in lengths]


def test_timing_measures_every_length_with_a_spread():
    rows = time_softmax_vs_linear(lengths=(16, 32), width=8, repeats=3, warmup=1)
    assert [r.length for r in rows] == [16, 32]
    for r in rows:  # no timing target: only that there is a time and a spread
        assert r.softmax_s > 0 and r.linear_s > 0
        assert r.softmax_spread >= 0 and r.linear_spread >= 0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"lengths": ()}, r"need lengths >= 1.*lengths \(\)"),
        ({"lengths": (16,), "repeats": 0}, r"repeats must be a positive integer, got 0"),
        ({"lengths": (16,), "width": 0}, r"width must be a positive integer, got 0"),
        ({"lengths": (16, 0)}, r"every length must be a positive integer, got 0"),
        ({"lengths": (16,), "warmup": -1}, r"warmup must be >= 0, got -1"),
    ],
)
def test_timing_refuses_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        time_softmax_vs_linear(**kwargs)


def test_slopes_are_fitted_on_the_largest_lengths():
    rows = power_rows()
    # an outlier at the smallest length (the 26.6 ms at T = 256) is left out of the fit
    rows[0] = TimingRow(256, 26.6e-3, rows[0].linear_s)
    slopes = timing_slopes(rows, points=3)
    assert slopes.from_length == 1024 and slopes.points == 3
    assert slopes.softmax == pytest.approx(2.0) and slopes.linear == pytest.approx(1.0)
    assert timing_slopes(rows, points=5).softmax < 1.5  # fitted over the outlier: wrong


def test_the_title_is_computed_from_the_slopes():
    slopes = timing_slopes(power_rows(soft=1.9, lin=0.84), points=3)
    title = describe_slopes(slopes)
    assert title == (
        "Fitted on T ≥ 1024: softmax grows about quadratically (slope 1.90), "
        "linear attention about linearly (slope 0.84)"
    )
    odd = describe_slopes(timing_slopes(power_rows(soft=1.5, lin=0.49), points=3))
    assert "softmax grows like T^1.5" in odd and "linear attention like T^0.5" in odd
    assert "quadratically" not in odd and "linearly" not in odd


@pytest.mark.parametrize(
    ("slope", "words"),
    [
        (1.0, "about linearly"),
        (1.29, "about linearly"),
        (1.31, "like T^1.3"),
        (2.2, "about quadratically"),
        (0.49, "like T^0.5"),
    ],
)
def test_growth_words(slope, words):
    assert growth_words(slope) == words


def test_noisy_repeats_are_warned_about():
    rows = [TimingRow(1024, 1e-3, 1e-4, softmax_spread=0.1, linear_spread=0.6)]
    warnings = timing_warnings(rows)
    assert len(warnings) == 1
    assert warnings[0].startswith("warning: linear at T = 1024 varied by 60% of its median")
    assert timing_warnings(rows, limit=0.7) == []


def test_the_timing_figure_labels_every_length_and_fits_a_cell():
    fig = timing_figure(power_rows(soft=1.9, lin=0.9), points=3).fig
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["256", "512", "1024", "2048", "4096"]
    assert ax.get_title() == describe_slopes(timing_slopes(power_rows(soft=1.9, lin=0.9)))
    assert fig.bbox.width <= 840 and texts_outside(fig) == []
    fits = [line for line in ax.lines if line.get_linestyle() in ("--", ":")]
    assert len(fits) == 2 and list(fits[0].get_xdata()) == [1024, 2048, 4096]


def sink_runs() -> dict:
    rng = np.random.default_rng(0)
    runs = {}
    for first in (False, True):
        for norm in ("softmax", "softmax1"):
            w = rng.random((6, 3 + first))  # (L, S')
            w /= w.sum(-1, keepdims=True)
            runs[norm, first] = SinkRun(
                norm, first, 0.1, 0.1, 0.987, 0.5, 0.013, 1.0, w, np.arange(6) % 2 == 0
            )
    return runs


def test_the_sink_figure_fits_and_its_title_comes_from_the_runs():
    runs = sink_runs()
    fig = sink_figure(runs).fig
    assert fig.bbox.width <= 840 and texts_outside(fig) == []
    assert fig.get_suptitle() == sink_headline(runs)
    assert "puts 99% of their weight on it" in sink_headline(runs)
    assert "sum to 0.01" in sink_headline(runs)
    del runs["softmax1", True]
    with pytest.raises(KeyError, match="missing"):
        sink_figure(runs)


def retrieval(scale: float, loss: np.ndarray) -> RetrievalRun:
    return RetrievalRun(scale, 1024, 16, loss, np.full(loss.size, 1.0))


def test_the_training_caption_says_what_the_loss_did():
    steps = np.arange(150)
    flat = retrieval(1.0, np.full(150, 1.8))
    falling = retrieval(1 / 32, 0.7 * np.exp(-steps / 5) + 1e-3)
    text = describe_training(flat, falling)
    assert (
        text.splitlines()[0] == "no scaling: the loss stays near 1.8; never below 0.1 in 150 steps"
    )
    assert text.splitlines()[1].startswith("scaled by 1/√1024: the loss falls from 0.33 to 0.001 (")
    assert "× lower)" in text.splitlines()[1]
    assert "below 0.1 by step" in text.splitlines()[1]
    slow = retrieval(1.0, np.linspace(1.8, 0.6, 150))
    assert "falls from 1.8 to 0.64 (64% lower)" in describe_training(slow, falling)
    fig = retrieval_figure(slow, falling).fig
    assert fig.get_suptitle() == describe_training(slow, falling)
    assert fig.bbox.width <= 840 and texts_outside(fig) == []


def test_the_sharing_picture_takes_the_weights_it_is_given():
    shares = three_steps().shares
    fig = sharing_picture(shares)
    title = fig.axes[0].get_title()
    assert title.startswith('"it" gives most of its attention to "dog" (57%)')
    assert fig.bbox.width <= 840 and texts_outside(fig) == []
    spread = sharing_picture([0.3, 0.4, 0.3], words=("the", "dog", "barked"))
    assert 'its biggest share of attention to "dog" (40%)' in spread.axes[0].get_title()
    from_scores = sharing_picture(scores=[0.0, 0.0, 0.0], words=("a", "b", "c"))
    assert "(33%)" in from_scores.axes[0].get_title()
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert {"the", "dog", "barked", "it", "57%", "14%"} <= set(texts)
    assert sharing_headline(np.array([0.2, 0.8]), ("x", "y"), "q") == (
        '"q" gives most of its attention to "y" (80%)'
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({}, "give either weights"),
        ({"weights": [0.5, 0.5], "scores": [1, 2]}, "give either weights"),
        ({"weights": [0.5, 0.5]}, "one share per word: 4 words"),
        ({"weights": [0.5, 0.6, 0.0, 0.0]}, r"add up to 1.*sum 1.100000"),
        ({"weights": [1.2, -0.2, 0.0, 0.0]}, "must be >= 0"),
    ],
)
def test_the_sharing_picture_refuses_bad_shares(kwargs, match):
    with pytest.raises(ValueError, match=match):
        sharing_picture(**kwargs)
