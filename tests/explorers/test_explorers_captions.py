"""Every explorer's captions, at every setting: true of what is drawn, and inside the figure.

For each explorer the sweep sets every combination of its controls' ends,
middles and options (`support.control_settings`), and after each setting

- every painted text lies inside the figure (a title that grows past the
  edge after the layout froze is cut off in the browser: 01's "…68% on
  averag");
- every computed caption (titles, headlines, readouts) states what the drawn
  artists show: the checks below read the bars, lines and images, recompute
  the claim with their own rules, and compare. A caption that says "near
  uniform" where the drawn curve is not, or counts zeros the image does not
  have, fails here.

The thresholds behind the words ("at every width", "near uniform", "nearly
one-hot") are the explorers' own constants, restated here as numbers.
"""

from __future__ import annotations

import math
import re

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
from support import FLOAT64, control_settings, legends_over_bars, texts_outside

from attention_course.explorers import (
    AlternativesExplorer,
    GradientExplorer,
    MistakeExplorer,
    NudgeExplorer,
    OnlineSoftmaxExplorer,
    ScalingExplorer,
    SlotsExplorer,
    ThreeStepsExplorer,
    TilingExplorer,
    VolumeKnobExplorer,
)
from attention_course.explorers.registry import builds
from attention_course.lessons.crowded_room import WORD_VALUES, percent, three_steps

pytestmark = pytest.mark.filterwarnings("error")


def number(pattern: str, text: str) -> float:
    found = re.search(pattern, text)
    assert found, f"expected {pattern!r} in {text!r}"
    return float(found.group(1))


def heights(bars) -> np.ndarray:
    return np.array([b.get_height() for b in bars])


def shown(value: float, text: str, digits: int) -> None:
    """``text`` is ``value`` rounded to ``digits`` decimals."""
    assert text == f"{value:.{digits}f}", (text, value)


# -- the beginner explorers ----------------------------------------------------------------


def check_volume_knob(e: VolumeKnobExplorer) -> None:
    shares = heights(e.bars)
    top = int(np.argmax(shares))
    title = e.ax.get_title()
    assert f"{e.names[top]} gets {percent(shares[top])} of your attention" in title, title
    assert abs(number(r"volume ×([\d.]+)", title) - e.volume.value) <= 0.005 + 1e-9
    for label, share in zip(e.labels, shares, strict=True):
        assert label.get_text() == percent(share)


def check_three_steps(e: ThreeStepsExplorer) -> None:
    scores = np.array([b.get_height() for b in e.score_bars])
    down = heights(e.down_bars)
    title = e.axes[0, 1].get_title()
    if e.turn_down.value:
        divisor = number(r"÷ ([\d.]+)", title)
        np.testing.assert_allclose(down, scores / divisor, atol=0.005 * scores.max())
    else:
        assert "off, scores unchanged" in title
        np.testing.assert_allclose(down, scores)
    shares = heights(e.share_bars)
    title = e.axes[1, 0].get_title()
    assert f"adds up to {shares.sum():.2f}" in title, title
    assert f'"dog" gets {shares[1]:.0%}' in title, title
    mixed = heights(e.mix_bars)
    nearest = e.steps.words[int(np.argmin(np.linalg.norm(WORD_VALUES - mixed, axis=-1)))]
    assert e.axes[1, 1].get_title().endswith(f'closest to "{nearest}"')


def check_slots(e: SlotsExplorer) -> None:
    d = int(e.slots.value)
    divisor = math.sqrt(d) if e.divide.value else 1.0
    totals = e.totals[d] / divisor  # (N,)
    title = e.ax_hist.get_title()
    shown(totals.std(), re.search(r"typical size ([\d.]+)$", title).group(1), 1)
    line = e.spread_lines[1].get_xdata()[0]
    inside = np.mean(np.abs(totals) <= line)
    legend = e.ax_hist.get_legend().get_texts()[0].get_text()
    assert legend == f"typical size: {inside:.0%} of totals lie between", legend
    top = heights(e.share_bars)[0]
    assert e.ax_share.get_title() == f"the loudest gets {top:.0%} on average"


def check_nudge(e: NudgeExplorer) -> None:
    calm, loud = heights(e.moved_bars)
    headline = e.headline.get_text()
    if calm == 0 and loud == 0:
        assert "nothing moves" in headline, headline
    else:
        assert headline == (
            f"The same nudge moves {percent(calm)} of the calm room's attention, "
            f"{percent(loud)} of the loud room's"
        ), headline


# -- the developer and researcher explorers ---------------------------------------------


def check_scaling(e: ScalingExplorer) -> None:
    tops = np.asarray(e.top_line.get_ydata())  # (widths,) the curve drawn
    headline = e.fig.get_suptitle()
    uniform = 1 / e.keys
    lo, hi = tops.min(), tops.max()
    if "at every width" in headline:
        assert hi - lo <= 0.1, (headline, tops)
        span = re.search(r"mean top weight ([\d.]+)(?:–([\d.]+))? at every width", headline)
        assert span, headline
        shown(lo, span.group(1), 2)
        shown(hi, span.group(2) or span.group(1), 2)
        assert ("near uniform" in headline) == (hi <= uniform + 0.02), (headline, tops)
        assert ("nearly one-hot" in headline) == (hi > uniform + 0.02 and lo >= 0.95)
    else:
        assert hi - lo > 0.1, (headline, tops)
        ends = re.search(r"([\d.]+) at d = 1 → ([\d.]+) at d = 1024", headline)
        assert ends, headline
        shown(tops[0], ends.group(1), 2)
        shown(tops[-1], ends.group(2), 2)
        assert ("near uniform" in headline) == (tops[-1] <= uniform + 0.02)
        assert ("nearly one-hot" in headline) == (tops[-1] >= 0.95 and tops[-1] > uniform + 0.02)
    rule = {"none": "No scaling", "1/sqrt(d)": "Scaled by 1/√d", "1/d": "Scaled by 1/d"}
    expected = rule.get(e.rule.value, f"A fixed c = {e.multiplier.value:.3g}")
    assert headline.startswith(expected + ":"), headline
    weights = heights(e.key_bars)
    assert e.axes[1].get_title().endswith(f"top {weights.max():.2f}")
    # the example is one query at every width: its weights follow from one pattern z·√d
    pattern = e.sweep.logits[1024][e.example] / 32
    np.testing.assert_allclose(
        weights, softmax_of(pattern * math.sqrt(e.width.value) * e.scale), **FLOAT64
    )
    std = (e.sweep.logits[e.width.value] * e.scale).std()
    title = e.axes[0].get_title()
    assert abs(number(r"std ([\d.e+-]+)", title) / std - 1) <= 5e-3, (title, std)


def softmax_of(x: np.ndarray) -> np.ndarray:
    z = np.exp(x - x.max())
    return z / z.sum()


def check_gradient(e: GradientExplorer) -> None:
    mean, median = e.curve("mean"), e.curve("median")  # what the two lines draw (floored)
    np.testing.assert_allclose(e.norm_line.get_ydata(), np.maximum(mean, 1e-7))
    np.testing.assert_allclose(e.median_line.get_ydata(), np.maximum(median, 1e-7))
    headline = e.fig.get_suptitle()
    lo, hi = mean.min(), mean.max()
    if "at every width: the gradient passes" in headline:
        assert lo > 0 and hi / lo <= 1.5, (headline, mean)
        assert f"{lo:.2g}–{hi:.2g}" in headline
    elif "the gate is shut" in headline:
        assert not (lo > 0 and hi / lo <= 1.5) and median.max() <= 1e-3, (headline, median)
    else:
        assert f"{mean[0]:.2g} at d = 1 → {mean[-1]:.2g} at d = 1024" in headline, headline
        assert ("the gate closes" in headline) == (median[-1] <= 1e-3), (headline, median)
    p = heights(e.weight_bars)
    assert e.axes[1].get_title() == f"one query's weights: top {p.max():.2f}"
    jac = np.asarray(e.heatmap.get_array())
    assert e.axes[2].get_title() == f"its Jacobian: ‖J‖ = {np.linalg.norm(jac):.2g}"


def check_online(e: OnlineSoftmaxExplorer) -> None:
    t = e.step.value
    rescale = heights(e.rescale_bars)
    readout = e.readout.get_text()
    assert readout.startswith(f"step {t} of {len(e.trace)}"), readout
    assert ("NEW MAX" in readout) == (t > 1 and 0 < rescale[t - 1] < 1), (readout, rescale)
    online = heights(e.online_bars)
    diff = np.abs(online - e.softmax).max()
    gap = "< 1e-12" if diff < 1e-12 else f"= {diff:.1e}"  # noise is said as a bound
    assert f"max |online − softmax| {gap}" in readout, readout


def check_tiling(e: TilingExplorer) -> None:
    readout = e.readout.get_text()
    done = sum(tuple(c[:3]) != (1.0, 1.0, 1.0) for c in e.row_cells.get_facecolor())
    assert f"{done} of {e.shape[0]} output rows done" in readout, readout
    tile, stats, full = (b.get_width() for b in e.memory_bars)
    assert f"held: {tile:g} score" in readout and f"vs {full:g} for the full" in readout
    assert f"+ {stats:g} for m, l, acc" in readout, readout
    if e.causal.value:
        polygons = e.skipped.get_path().to_polygons() if e.skipped.get_visible() else []
        drawn = sum(  # each polygon's area (shoelace), in cells
            0.5 * abs(np.dot(p[:, 0], np.roll(p[:, 1], 1)) - np.dot(p[:, 1], np.roll(p[:, 0], 1)))
            for p in polygons
        )
        assert f"{drawn:g} of {e.shape[0] * e.shape[1]} score cells" in readout


def check_alternatives(e: AlternativesExplorer) -> None:
    images = {name: np.asarray(im.get_array()) for name, im in e.images.items()}
    headline = e.suptitle.get_text()
    size = images["sparsemax"].size
    for name in ("sparsemax", "entmax15", "softmax"):
        assert f"{name} {int(np.sum(images[name] == 0))}/{size}" in headline, headline
    sums = images["softmax1"].sum(-1)
    assert f"rows sum {sums.min():.2f}–{sums.max():.2f}" in headline, headline
    assert headline.startswith(f"d = {e.width.value}, c = {e.multiplier.value:.2g}:")
    for name, w in images.items():
        if name != "softmax1":
            assert f"{int(np.sum(w == 0))}/{w.size} zeros" in e.axes[name].get_title()


def check_mistake(e: MistakeExplorer) -> None:
    title = e.ax_effect.get_title()
    if e.name in ("wrong axis", "mask after softmax"):
        sums = heights(e.effect_bars)
        np.testing.assert_allclose(sums, np.asarray(e.image.get_array()).sum(-1))
        if np.allclose(sums, 1.0):
            assert title.startswith("every row sums to 1"), title
        else:
            assert title.startswith(f"row sums {sums.min():.2f} to {sums.max():.2f}, not 1")
        if e.name == "mask after softmax":
            leak = e.future_leak(e.version.value)
            moves = "moves earlier outputs" in title
            assert moves == (leak > 1e-9), (title, leak)
    elif e.name == "model width":
        tops = heights(e.effect_bars)
        assert title.endswith(f"mean top weight {tops.mean():.2f}"), title
    else:
        g, top = (v[0] for v in e.knob_marker.get_data())
        assert title.startswith(f"at {g}× growth: mean top weight {top:.2f}"), title
        assert ("collapsed (above 0.9)" in title) == (top > 0.9), title
    active = "the mistake (in use)" if e.version.value == "mistake" else "the fix (in use)"
    assert active in e.code.value


#: the caption check of every explorer class that the fast tests build (the registry's)
CHECKS = {
    VolumeKnobExplorer: check_volume_knob,
    ThreeStepsExplorer: check_three_steps,
    SlotsExplorer: check_slots,
    NudgeExplorer: check_nudge,
    ScalingExplorer: check_scaling,
    GradientExplorer: check_gradient,
    OnlineSoftmaxExplorer: check_online,
    TilingExplorer: check_tiling,
    AlternativesExplorer: check_alternatives,
    MistakeExplorer: check_mistake,
}
EXPLORERS = builds()  # {test id: (registry entry, build)}


def test_every_explorer_the_registry_builds_has_a_caption_check():
    missing = {entry.name for entry, _ in EXPLORERS.values()} - {cls.__name__ for cls in CHECKS}
    assert not missing, f"add a check for {sorted(missing)} to CHECKS in {__file__}"


@pytest.mark.parametrize("name", list(EXPLORERS))
@pytest.mark.slow  # make check's, not make test's (seconds)
def test_every_caption_is_true_and_inside_the_figure_at_every_setting(name):
    entry, make = EXPLORERS[name]
    check = CHECKS[entry.cls]
    explorer = make()
    assert texts_outside(explorer.fig) == [], "texts cut at the first draw"
    settings = 0
    for setting in control_settings(explorer.controls):
        for control, value in setting:
            if not control.disabled:
                control.value = value
        check(explorer)
        outside = texts_outside(explorer.fig)
        applied = {c.description: c.value for c, _ in setting}
        assert outside == [], f"{name}: texts past the figure's edge at {applied}: {outside}"
        hidden = legends_over_bars(explorer.fig, draw=False)  # texts_outside drew it
        assert hidden == [], f"{name}: a legend hides bars at {applied}: {hidden}"
        settings += 1
    assert settings >= 2


def test_the_sweep_fails_on_a_false_caption():
    """The checks can fail: a headline that calls a flat, near-uniform curve sharp is caught."""
    explorer = ScalingExplorer(trials=300)
    explorer.rule.value = "custom"
    explorer.multiplier.value = 1e-3
    check_scaling(explorer)
    explorer.title.set_text("A fixed c = 0.001: mean top weight 0.17 at every width")
    with pytest.raises(AssertionError):
        check_scaling(explorer)


def test_a_legend_over_a_bar_is_reported():
    """The legend check can fail: panel 4's legend squeezed down onto the feature bars."""
    explorer = ThreeStepsExplorer()
    assert legends_over_bars(explorer.fig) == []
    explorer.axes[1, 1].set_ylim(0, 1.0)
    assert legends_over_bars(explorer.fig), "bars reaching into the legend must be reported"


def test_a_title_grown_past_the_edge_is_reported():
    explorer = SlotsExplorer()
    explorer.fig.canvas.draw()  # the layout freezes here, as in the browser
    explorer.ax_share.set_title("the loudest voice gets 68% on average, and then some more words")
    assert texts_outside(explorer.fig), "a title running past the right edge must be reported"


def test_the_volume_suptitle_holds_at_the_ends():
    """The static suptitle (down: equal shares; up: one voice takes all) holds at the ends."""
    explorer = VolumeKnobExplorer()
    explorer.volume.value = 10**explorer.volume.min
    assert np.ptp(heights(explorer.bars)) < 0.03
    explorer.volume.value = 10**explorer.volume.max
    assert heights(explorer.bars).max() > 0.999


def test_three_steps_mix_follows_the_lesson():
    steps = three_steps()
    assert steps.words[int(np.argmax(steps.shares))] == "dog"
