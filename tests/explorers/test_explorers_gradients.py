"""The gradient explorer of notebook 04, driven in-process through its controls under Agg.

Each test sets ``control.value`` (the callback a learner's slider fires) and
checks what is drawn against the library's own numbers: the markers sit on
`jacobian_norms`, the heatmap holds `softmax_jacobian` of the example row.
Any warning is an error, and the figure is really rendered at every extreme.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
from support import legends_over_bars, texts_outside

from attention_course.explorers import GradientExplorer, QKNormExplorer
from attention_course.lessons.figures import retrieval_figure, spread_figure
from attention_course.lessons.saturation import (
    describe_training,
    jacobian_norms,
    qk_norm_view,
    train_retrieval_head,
)
from attention_course.lessons.scaling import POWER_OF_TWO_WIDTHS, dot_product_samples
from attention_lib import softmax
from attention_lib.normalisers import softmax_jacobian
from attention_lib.scales import scale_for

pytestmark = pytest.mark.filterwarnings("error")  # no RuntimeWarning, no matplotlib warning

RULES = ["none", "1/sqrt(d)", "1/d", "custom"]
FLOOR = 1e-7  # the bottom of the explorer's log axis


@pytest.fixture(scope="module")
def explorer():
    e = GradientExplorer(trials=300)
    yield e
    plt.close(e.fig)


@pytest.fixture
def draws(explorer, monkeypatch):
    """Count redraw requests instead of rendering (a full Agg draw takes about a second)."""
    asked = []
    monkeypatch.setattr(explorer.fig.canvas, "draw_idle", lambda *a, **k: asked.append(1))
    return asked


def multiplier_values(slider) -> np.ndarray:
    """Every position of a FloatLogSlider, from its minimum to its maximum."""
    steps = round((slider.max - slider.min) / slider.step)
    return slider.base ** np.linspace(slider.min, slider.max, steps + 1)


def check_drawn(e: GradientExplorer) -> None:
    """Everything drawn equals the library's numbers for the current controls."""
    d, rule, c = e.width.value, e.rule.value, e.multiplier.value
    i = POWER_OF_TWO_WIDTHS.index(d)
    for stat, line, marker in (
        ("mean", e.norm_line, e.norm_marker),
        ("median", e.median_line, e.median_marker),
    ):
        expected = np.maximum(jacobian_norms(e.sweep, rule, c, stat), FLOOR)
        np.testing.assert_allclose(line.get_ydata(), expected, rtol=1e-12)
        assert list(marker.get_xdata()) == [d]
        assert marker.get_ydata()[0] == pytest.approx(expected[i], rel=1e-12)
    p = softmax(e.sweep.logits[d][e.example] * scale_for(rule, d, c))  # (keys,)
    np.testing.assert_allclose([b.get_height() for b in e.weight_bars], p, rtol=1e-12)
    np.testing.assert_allclose(e.heatmap.get_array(), softmax_jacobian(p), rtol=1e-12)
    assert e.heatmap.get_clim() == (-0.25, 0.25)
    assert f"d = {d}:" in e.axes[0].get_title()


def test_controls_cover_the_brief(explorer):
    assert [v for _, v in explorer.width.options] == [2**i for i in range(11)]
    assert [v for _, v in explorer.rule.options] == RULES
    assert (explorer.multiplier.min, explorer.multiplier.max) == (-3, 2)
    assert explorer.controls == [explorer.width, explorer.rule, explorer.multiplier]
    assert explorer.axes[0].get_xscale() == "log"


def test_every_width_and_rule_moves_the_markers(explorer, draws):
    explorer.multiplier.value = 1.0
    for rule in RULES:
        explorer.rule.value = rule
        assert explorer.multiplier.disabled == (rule != "custom")
        for d in POWER_OF_TWO_WIDTHS:
            explorer.width.value = d
            check_drawn(explorer)
    assert len(draws) >= len(RULES) * (len(POWER_OF_TWO_WIDTHS) - 1)


def test_multiplier_through_its_range(explorer, draws):
    explorer.rule.value = "custom"
    explorer.width.value = 128
    for c in multiplier_values(explorer.multiplier):
        explorer.multiplier.value = c
        check_drawn(explorer)
    assert len(draws) > 40


def test_unscaled_marker_falls_and_scaled_holds(explorer, draws):
    explorer.rule.value = "none"
    explorer.width.value = 1
    narrow = explorer.current_norm()
    explorer.width.value = 1024
    assert explorer.current_norm() < 0.2 * narrow
    assert explorer.current_norm("median") < 1e-4
    assert float(explorer.norm_marker.get_ydata()[0]) == pytest.approx(explorer.current_norm())
    # every entry of J is at most 1 - (top weight): a one-hot row has J = 0
    for d in POWER_OF_TWO_WIDTHS:
        explorer.width.value = d
        top = max(b.get_height() for b in explorer.weight_bars)
        assert np.abs(explorer.heatmap.get_array()).max() <= 1 - top + 1e-15
    explorer.rule.value = "1/sqrt(d)"
    assert explorer.current_norm() > 0.3
    assert np.abs(explorer.heatmap.get_array()).max() > 0.05


def test_describe_names_the_setting(explorer, draws):
    explorer.rule.value, explorer.width.value = "1/d", 1024
    text = explorer.describe()
    assert text.startswith("d = 1024, scale rule 1/d (logits × 0.0009766): mean ‖J‖ 0.331")


def test_describe_prints_an_underflowed_norm_as_a_bound():
    # notebook 04's explorer, unscaled at d = 1024: the example row is one-hot and its ‖J‖
    # rounding noise (about 1e-19 on one CPU, another elsewhere); a bound prints the same
    explorer = GradientExplorer()
    explorer.blit = False
    explorer.rule.value, explorer.width.value = "none", 1024
    assert np.linalg.norm(explorer.example_jacobian()) < 1e-12
    assert explorer.describe().endswith("top weight 1.000, ‖J‖ < 1e-12")
    explorer.width.value = 1
    assert explorer.describe().endswith(f"‖J‖ {np.linalg.norm(explorer.example_jacobian()):.3g}")
    plt.close(explorer.fig)


def test_every_extreme_draws_cleanly(explorer, draws):
    # a real Agg render at each corner of the controls; warnings are errors here
    settings = [(1, "none", 1.0), (1024, "none", 1.0), (1024, "1/sqrt(d)", 1.0)]
    settings += [(1024, "1/d", 1.0), (1, "custom", 1e-3), (1024, "custom", 1e2)]
    for d, rule, c in settings:
        explorer.rule.value, explorer.width.value, explorer.multiplier.value = rule, d, c
        check_drawn(explorer)
        explorer.fig.canvas.draw()


def test_retrieval_figure_draws_both_runs():
    u = train_retrieval_head(1.0, steps=30, seed=1)
    s = train_retrieval_head(None, steps=30, seed=1)
    still = retrieval_figure(u, s, window=5)
    fig = still.fig
    assert still.alt.strip(), "a still figure with no text alternative"
    ax_loss, ax_ent = fig.axes
    raw_u, smooth_u, raw_s, smooth_s = ax_loss.get_lines()
    np.testing.assert_array_equal(raw_u.get_ydata(), u.loss)
    np.testing.assert_array_equal(raw_s.get_ydata(), s.loss)
    np.testing.assert_array_equal(smooth_s.get_ydata(), s.smoothed_loss(5))
    assert smooth_u.get_xdata()[0] == 5  # the first full window ends at step 5
    ent_u, ent_s, uniform = ax_ent.get_lines()
    np.testing.assert_array_equal(ent_u.get_ydata(), u.entropy)
    np.testing.assert_array_equal(ent_s.get_ydata(), s.entropy)
    assert uniform.get_ydata()[0] == pytest.approx(np.log(16))
    labels = [t.get_text() for t in ax_ent.get_legend().get_texts()]
    assert labels == ["no scaling", "scaled by 1/√1024", "uniform (ln 16)"]
    for ax in (ax_loss, ax_ent):
        assert ax.get_xlabel() == "training step" and ax.get_ylabel() and ax.get_title()
    # the headline is computed from the runs' losses, not a fixed "learns slowly"
    assert fig.get_suptitle() == describe_training(u, s, window=5)
    assert fig.get_suptitle().startswith("no scaling: the loss ")
    fig.canvas.draw()
    plt.close(fig)
    with pytest.raises(ValueError, match="the runs must match: got 30 steps over 16 keys and 3"):
        retrieval_figure(u, train_retrieval_head(None, steps=3))


def test_spread_figure_draws_raw_and_scaled_scores():
    fig = spread_figure(width=64, samples=2_000, seed=2)
    (ax,) = fig.axes
    raw = dot_product_samples(64, samples=2_000, rng=2)
    (bars,) = ax.containers  # the raw scores: filled bars
    (outline,) = [p for p in ax.patches if p not in bars]  # the scaled: a step outline
    heights = outline.get_xy()[1:-1:2, 1]  # (bins,): the outline's top of each bin
    # every sample lands in a bin, raw and scaled
    assert [sum(b.get_height() for b in bars), heights.sum()] == [2_000, 2_000]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == [f"q·k: std {raw.std():.1f}", f"q·k / √64: std {raw.std() / 8:.2f}"]
    assert ax.get_title().endswith("raw scores spread 8× wider than scaled ones")
    assert ax.get_xlabel() and ax.get_ylabel() == "count of 2,000 pairs"
    fig.canvas.draw()


@pytest.fixture(scope="module")
def qk_explorer():
    e = QKNormExplorer()
    yield e
    plt.close(e.fig)


def test_qk_norm_toggle_draws_the_views(qk_explorer, monkeypatch):
    e = qk_explorer
    monkeypatch.setattr(e.fig.canvas, "draw_idle", lambda *a, **k: None)
    own = qk_norm_view()
    assert e.controls == [e.norm]
    assert [v for _, v in e.norm.options] == ["own", "sqrt(d)", "fit"]
    for value in ("own", "sqrt(d)", "fit", "own"):
        e.norm.value = value
        scores, weights = e.shown()
        np.testing.assert_array_equal([b.get_height() for b in e.score_bars], scores)
        np.testing.assert_array_equal([b.get_height() for b in e.weight_bars], weights)
        tau = e.view.temperature
        for line in e.band:
            assert line.get_visible() == (value != "own")
        if value == "own":
            np.testing.assert_array_equal(scores, own.logits)
        else:
            assert np.abs(scores).max() <= tau + 1e-12  # QK-norm bounds every score by τ
            assert [abs(y) for line in e.band for y in line.get_ydata()] == [tau] * 4
        assert e.fig.get_suptitle() == e.describe()
        top = int(np.argmax(weights))
        assert f'gives {weights[top]:.2f} of its weight to "{e.view.words[top]}"' in e.describe()
        e.fig.canvas.draw()
        assert texts_outside(e.fig) == []
        assert legends_over_bars(e.fig, draw=False) == []
    assert e.views["sqrt(d)"].temperature == 4.0  # sqrt(16)
    # unbounded as trained; QK-norm at τ = √d spreads the weight the model put on one word
    e.norm.value = "own"
    assert "no bound" in e.describe() and e.view.largest_logit > 4 * 4.0
    own_top = e.shown()[1].max()
    e.norm.value = "sqrt(d)"
    assert e.shown()[1].max() < own_top - 0.2
