"""The scaling explorer and the statistics behind it, driven in-process under Agg."""

from __future__ import annotations

import itertools
import math

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest

from attention_course.explorers import ScalingExplorer
from attention_course.lessons.scaling import POWER_OF_TWO_WIDTHS, sweep_widths, weight_stats
from attention_lib import attention_weights
from attention_lib.normalisers import entropy
from attention_lib.scales import scale_for

pytestmark = pytest.mark.filterwarnings("error")  # no RuntimeWarning, no matplotlib warning

UNIFORM_TOP = 1 / 6
UNIFORM_ENTROPY = math.log(6)


@pytest.fixture(scope="module")
def explorer() -> ScalingExplorer:
    e = ScalingExplorer()
    # Under Agg draw_idle renders the whole figure at once; the tests read the
    # artists instead, and test_every_extreme_draws_cleanly renders explicitly.
    e.fig.canvas.draw_idle = lambda *args, **kwargs: None
    return e


def set_controls(e: ScalingExplorer, width: int, rule: str, multiplier: float = 1.0) -> None:
    e.rule.value = rule
    e.multiplier.value = multiplier
    e.width.value = width


def drawn_top(e: ScalingExplorer) -> float:
    """The mean top weight at the marked point, as drawn."""
    return float(e.top_marker.get_ydata()[0])


def drawn_hist_std(e: ScalingExplorer) -> float:
    """Standard deviation of the logits as the histogram bars show them."""
    heights, edges, _ = e.hist.get_data()
    centres = (edges[:-1] + edges[1:]) / 2
    p = heights / heights.sum()
    mean = float(np.sum(p * centres))
    return float(np.sqrt(np.sum(p * (centres - mean) ** 2)))


def sweep_tops(e: ScalingExplorer, rule: str) -> list[float]:
    tops = []
    for d in POWER_OF_TWO_WIDTHS:
        set_controls(e, d, rule)
        tops.append(drawn_top(e))
    return tops


def test_controls_cover_the_brief(explorer: ScalingExplorer) -> None:
    assert [v for _, v in explorer.width.options] == [2**i for i in range(11)]
    assert [v for _, v in explorer.rule.options] == ["none", "1/sqrt(d)", "1/d", "custom"]
    assert explorer.multiplier.min == -3 and explorer.multiplier.max == 2
    assert explorer.controls == [explorer.width, explorer.rule, explorer.multiplier]


def test_unscaled_top_weight_rises_with_width(explorer: ScalingExplorer) -> None:
    tops = sweep_tops(explorer, "none")
    assert all(b > a for a, b in itertools.pairwise(tops)), tops
    assert tops[0] < 0.4 and tops[-1] > 0.95
    # the red curve is the same numbers, and the marker sits on it
    assert np.allclose(explorer.top_line.get_ydata(), tops)


def test_scaled_top_weight_stays_flat(explorer: ScalingExplorer) -> None:
    tops = dict(zip(POWER_OF_TWO_WIDTHS, sweep_tops(explorer, "1/sqrt(d)"), strict=True))
    wide = [tops[d] for d in POWER_OF_TWO_WIDTHS if d >= 16]
    assert max(wide) - min(wide) < 0.015, wide
    # the lesson's table (other draws): 0.418, 0.422, 0.421 at d = 16, 64, 256
    for d, lesson in ((16, 0.418), (64, 0.422), (256, 0.421)):
        assert tops[d] == pytest.approx(lesson, abs=0.01)


def test_over_dividing_flattens_toward_one_sixth(explorer: ScalingExplorer) -> None:
    tops = sweep_tops(explorer, "1/d")
    assert all(b < a for a, b in itertools.pairwise(tops)), tops
    assert tops[-1] == pytest.approx(UNIFORM_TOP, abs=0.01)
    entropies = explorer.entropy_line.get_ydata()
    assert entropies[-1] == pytest.approx(UNIFORM_ENTROPY, abs=0.01)


def test_entropy_falls_without_scaling(explorer: ScalingExplorer) -> None:
    set_controls(explorer, 1024, "none")
    entropies = np.asarray(explorer.entropy_line.get_ydata())
    assert np.all(np.diff(entropies) < 0)
    assert entropies[-1] < 0.1
    assert explorer.entropy_marker.get_ydata()[0] == pytest.approx(entropies[-1])


def test_histogram_spread_grows_with_width_unscaled(explorer: ScalingExplorer) -> None:
    spreads = {}
    for d in (1, 16, 256, 1024):
        set_controls(explorer, d, "none")
        spreads[d] = drawn_hist_std(explorer)
        lo, hi = explorer.axes[0].get_xlim()
        assert lo == pytest.approx(-hi) and hi > 0
    # std(q·k) = sqrt(d): 16x wider heads, 4x the spread (binning costs a few percent)
    assert spreads[256] / spreads[16] == pytest.approx(4.0, rel=0.1)
    assert spreads[1024] / spreads[16] == pytest.approx(8.0, rel=0.1)
    assert spreads[1] < spreads[16] < spreads[256] < spreads[1024]


def test_histogram_spread_stays_near_one_when_scaled(explorer: ScalingExplorer) -> None:
    for d in (4, 64, 1024):
        set_controls(explorer, d, "1/sqrt(d)")
        assert drawn_hist_std(explorer) == pytest.approx(1.0, rel=0.1)
        assert "std 1" in explorer.axes[0].get_title() or "std 0.9" in explorer.axes[0].get_title()


def test_histogram_covers_the_logits(explorer: ScalingExplorer) -> None:
    set_controls(explorer, 64, "none")
    shares = explorer.hist.get_data().values.sum()
    assert 0.99 <= shares <= 1.0  # the range holds at least 99.5 % of the logits


def test_one_query_weights_are_a_distribution(explorer: ScalingExplorer) -> None:
    set_controls(explorer, 1024, "none")
    sharp = [b.get_height() for b in explorer.key_bars]
    set_controls(explorer, 1024, "1/d")
    flat = [b.get_height() for b in explorer.key_bars]
    assert sum(sharp) == pytest.approx(1.0) and sum(flat) == pytest.approx(1.0)
    assert max(sharp) > 0.99  # the example query picks one key when unscaled
    assert max(flat) < 0.2  # and spreads out when over-divided


def test_custom_multiplier(explorer: ScalingExplorer) -> None:
    set_controls(explorer, 64, "none")
    unscaled = list(explorer.top_line.get_ydata())
    assert explorer.multiplier.disabled
    set_controls(explorer, 64, "custom", 1.0)
    assert not explorer.multiplier.disabled
    assert np.allclose(explorer.top_line.get_ydata(), unscaled)  # c = 1 is no scaling
    set_controls(explorer, 64, "custom", 0.01)
    small = drawn_top(explorer)
    set_controls(explorer, 64, "custom", 10.0)
    large = drawn_top(explorer)
    assert small < 0.2 < 0.98 < large
    assert explorer.scale == pytest.approx(10.0)


EXTREMES = [(rule, 1.0) for rule in ("none", "1/sqrt(d)", "1/d")] + [
    ("custom", 1e-3),
    ("custom", 100.0),
]  # the multiplier only acts under "custom"


@pytest.mark.parametrize(("rule", "multiplier"), EXTREMES)
@pytest.mark.parametrize("width", [1, 1024])
def test_every_extreme_draws_cleanly(
    explorer: ScalingExplorer, rule: str, width: int, multiplier: float
) -> None:
    set_controls(explorer, width, rule, multiplier)
    explorer.fig.canvas.draw()  # a full render: any matplotlib warning fails the test
    heights = explorer.hist.get_data().values
    assert np.all(np.isfinite(heights)) and max(heights) > 0
    lo, hi = explorer.axes[0].get_xlim()
    assert np.isfinite([lo, hi]).all() and lo < hi
    assert sum(b.get_height() for b in explorer.key_bars) == pytest.approx(1.0)
    assert np.all(np.isfinite(explorer.top_line.get_ydata()))
    assert np.all(np.isfinite(explorer.entropy_line.get_ydata()))
    assert explorer.top_marker.get_xdata()[0] == width


def test_describe_prints_the_current_point(explorer: ScalingExplorer) -> None:
    set_controls(explorer, 64, "1/sqrt(d)")
    text = explorer.describe()
    assert text.startswith("d = 64, scale rule 1/sqrt(d) (logits × 0.125): logit std 1.00")
    assert f"mean top weight {explorer.current_stats().top:.3f}" in text


def test_widget_stacks_controls_over_the_figure(explorer: ScalingExplorer) -> None:
    box = explorer.widget
    assert list(box.children[0].children) == explorer.controls


# -- the statistics ------------------------------------------------------------------


def test_scale_rules() -> None:
    assert scale_for("none", 64) == 1.0
    assert scale_for("1/sqrt(d)", 64) == 0.125
    assert scale_for("1/d", 64) == 1 / 64
    assert scale_for("custom", 64, 0.5) == 0.5


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("sqrt", 4), "unknown scale rule 'sqrt'"),
        (("none", 0), "head width d must be a positive integer, got 0"),
        (("custom", 4, -1.0), "multiplier must be positive and finite, got -1.0"),
        (("custom", 4, math.inf), "multiplier must be positive and finite"),
    ],
)
def test_scale_for_refuses_bad_input(args: tuple, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        scale_for(*args)


def test_sweep_draws_each_width_from_its_own_seed() -> None:
    both = sweep_widths((4, 16), trials=50)
    alone = sweep_widths((16,), trials=50)
    assert np.array_equal(both.logits[16], alone.logits[16])
    assert both.logits[4].shape == (50, 6)


def test_sweep_stats_equal_attention_weights() -> None:
    sweep = sweep_widths((64,), trials=300)
    rng = np.random.default_rng([0, 64])  # the sweep's own draws, redone
    q = rng.normal(size=(300, 1, 64))  # (N, 1, d)
    k = rng.normal(size=(300, 6, 64))  # (N, 6, d)
    weights = attention_weights(q, k)[:, 0, :]  # (N, 6)
    stats = sweep.stats("1/sqrt(d)")[0]
    assert stats.top == pytest.approx(weights.max(axis=-1).mean(), rel=1e-12)
    assert stats.entropy == pytest.approx(entropy(weights).mean(), rel=1e-12)


def test_raw_logit_spread_is_sqrt_d() -> None:
    sweep = sweep_widths((4, 256), trials=4000)
    assert sweep.logits[4].std() == pytest.approx(2.0, rel=0.05)
    assert sweep.logits[256].std() == pytest.approx(16.0, rel=0.05)


def test_weight_stats_at_the_two_ends() -> None:
    uniform = weight_stats(np.zeros((3, 6)), 1.0)
    assert uniform.top == pytest.approx(1 / 6) and uniform.entropy == pytest.approx(math.log(6))
    one_hot = weight_stats(np.array([[1e4, 0, 0, 0, 0, 0]]), 1.0)  # exp underflows to exact 0
    assert one_hot.top == 1.0 and one_hot.entropy == 0.0


def test_sweep_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="every width must be a positive integer, got 0"):
        sweep_widths((0, 4))
    with pytest.raises(ValueError, match="need at least one width"):
        sweep_widths(())
    with pytest.raises(ValueError, match="at least 1 trial and 2 keys"):
        sweep_widths((4,), keys=1)
    with pytest.raises(ValueError, match="need one scale per width"):
        sweep_widths((4, 16), trials=5).stats_for_scales([1.0])
