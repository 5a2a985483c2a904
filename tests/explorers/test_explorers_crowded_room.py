"""The beginner explorers of notebook 01, driven in-process through their controls.

Each test sets ``control.value`` (which fires the same callback a learner's
slider does) and checks what is drawn: bar heights, labels, titles. Any
warning is an error here, and every control's minimum and maximum are drawn.
"""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
from support import FLOAT64

from attention_course.explorers import (
    NudgeExplorer,
    SlotsExplorer,
    ThreeStepsExplorer,
    VolumeKnobExplorer,
)
from attention_course.explorers.crowded_room import share_prediction
from attention_course.lessons.crowded_room import (
    FRIENDS,
    LESSON_HEAD_SLOTS,
    LESSON_SCORES,
    RELEVANCE,
    changed_hands,
    format_three_steps,
    learning_signal,
    three_steps,
)
from attention_lib import softmax
from attention_lib.scales import turn_volume

pytestmark = pytest.mark.filterwarnings("error")


@pytest.fixture
def close_figures():
    yield
    plt.close("all")


class RedrawCounter:
    """Stands in for ``canvas.draw_idle`` during sweeps and counts the redraws asked for.

    Under Agg, ``draw_idle`` draws at once (a fraction of a second per figure);
    the sweeps below move the controls hundreds of times, so they count the
    requests instead, and the extremes tests draw for real.
    """

    def __init__(self, explorer) -> None:
        self.calls = 0
        explorer.fig.canvas.draw_idle = self

    def __call__(self, *args, **kwargs) -> None:
        self.calls += 1


def move(control, value, redraws: RedrawCounter) -> None:
    """Set ``control.value`` as a learner would and check one redraw was asked for."""
    old, before = control.value, redraws.calls
    control.value = value
    assert redraws.calls - before == (control.value != old)


def heights(bars) -> np.ndarray:
    return np.array([bar.get_height() for bar in bars])


def log_slider_values(slider) -> np.ndarray:
    """Every position of a FloatLogSlider, from its minimum to its maximum."""
    steps = round((slider.max - slider.min) / slider.step)
    return slider.base ** np.linspace(slider.min, slider.max, steps + 1)


def float_slider_values(slider) -> np.ndarray:
    steps = round((slider.max - slider.min) / slider.step)
    return np.linspace(slider.min, slider.max, steps + 1)


# --- the volume knob -------------------------------------------------------------------


@pytest.mark.usefixtures("close_figures")
def test_volume_top_bar_rises_with_volume_and_bars_add_to_one():
    explorer = VolumeKnobExplorer()
    redraws = RedrawCounter(explorer)
    tops = []
    for volume in log_slider_values(explorer.volume):
        move(explorer.volume, volume, redraws)
        drawn = heights(explorer.bars)  # (5,)
        assert drawn.sum() == pytest.approx(1.0, abs=1e-12)
        np.testing.assert_allclose(drawn, softmax(explorer.volume.value * RELEVANCE), rtol=1e-12)
        tops.append(drawn[0])
    tops = np.array(tops)
    assert np.all(np.diff(tops) >= 0), "Ana's share must never fall as the volume rises"
    rising = tops < 1 - 1e-9
    assert np.all(np.diff(tops[rising]) > 0), "strictly rising until it saturates at one"
    assert tops[-1] > 1 - 1e-12


@pytest.mark.usefixtures("close_figures")
def test_volume_extremes_blur_and_pick_a_winner():
    explorer = VolumeKnobExplorer()
    RedrawCounter(explorer)  # draw once per state below, explicitly
    explorer.volume.value = 10**explorer.volume.min
    explorer.fig.canvas.draw()
    # At volume 0.01 the scores (spread 3) differ by at most 0.03: every share within 1% of 1/5.
    np.testing.assert_allclose(heights(explorer.bars), 0.2, atol=0.01)
    assert explorer.ax.get_title().startswith("volume ×0.01: Ana gets 20%")

    explorer.volume.value = 10**explorer.volume.max
    explorer.fig.canvas.draw()
    np.testing.assert_allclose(heights(explorer.bars), [1, 0, 0, 0, 0], **FLOAT64)
    assert [label.get_text() for label in explorer.labels] == ["100%"] + ["<0.001%"] * 4
    assert explorer.ax.get_title() == "volume ×100.00: Ana gets 100% of your attention"


def test_the_volume_knob_refuses_a_negative_volume_and_mismatched_names():
    with pytest.raises(ValueError, match=r"volume must be a finite number >= 0, got -1"):
        turn_volume(RELEVANCE, -1.0)
    with pytest.raises(ValueError, match=r"got 2 names for 5 relevance scores"):
        VolumeKnobExplorer(RELEVANCE, names=("Ana", "Ben"))
    with pytest.raises(ValueError, match=r"relevance must be a 1-d list of at least 2 scores"):
        VolumeKnobExplorer(np.ones((2, 2)), names=("a", "b"))


# --- the three steps -------------------------------------------------------------------


def test_three_steps_reproduce_the_lessons_numbers_as_printed():
    steps = three_steps()
    assert steps.divisor == pytest.approx(math.sqrt(8))
    np.testing.assert_array_equal(steps.scores, [0.1, 4.0, 0.0, 0.2])
    np.testing.assert_array_equal(np.round(steps.turned_down, 1), [0.0, 1.4, 0.0, 0.1])
    np.testing.assert_array_equal(np.round(steps.shares, 2), [0.14, 0.57, 0.14, 0.15])
    assert steps.shares.sum() == pytest.approx(1.0, abs=1e-12)
    # A reader who works from the printed (rounded) row gets the same shares.
    np.testing.assert_array_equal(
        np.round(softmax(np.round(steps.turned_down, 1)), 2), [0.14, 0.57, 0.14, 0.15]
    )
    np.testing.assert_allclose(steps.mixed, steps.shares @ steps.values)
    # "it" picks up the dog's meaning: the mix is mostly "animal".
    assert steps.features[int(np.argmax(steps.mixed))] == "animal"


def test_format_three_steps_prints_the_lessons_rows():
    text = format_three_steps(three_steps())
    assert text.splitlines() == [
        "                               the     dog  barked      it",
        'score "it" against each        0.1     4.0     0.0     0.2',
        "turn down (÷ 2.83)             0.0     1.4     0.0     0.1",
        "share out                     0.14    0.57    0.14    0.15   (adds up to 1.00)",
        'mix into a new "it"       animal 0.61, action 0.20, pointer word 0.26',
    ]
    assert not any(bracket in text for bracket in "[]"), "no arrays for a beginner"


@pytest.mark.usefixtures("close_figures")
def test_three_steps_switch_draws_the_shares_with_and_without_turning_down():
    explorer = ThreeStepsExplorer()
    RedrawCounter(explorer)  # draw once per state below, explicitly
    np.testing.assert_allclose(heights(explorer.score_bars), LESSON_SCORES)
    assert [t.get_text() for t in explorer.share_labels] == ["0.14", "0.57", "0.14", "0.15"]
    assert [t.get_text() for t in explorer.down_labels] == ["0.0", "1.4", "0.0", "0.1"]

    explorer.turn_down.value = False
    explorer.fig.canvas.draw()
    np.testing.assert_allclose(heights(explorer.down_bars), LESSON_SCORES)
    shares = heights(explorer.share_bars)
    np.testing.assert_allclose(shares, softmax(LESSON_SCORES))
    assert shares[1] > 0.9, "without turning down, 'dog' takes almost everything"
    np.testing.assert_allclose(heights(explorer.mix_bars), shares @ explorer.steps.values)
    assert explorer.axes[0, 1].get_title() == "2. turn down: off, scores unchanged"

    explorer.turn_down.value = True
    explorer.fig.canvas.draw()
    np.testing.assert_allclose(
        heights(explorer.share_bars), three_steps(slots=LESSON_HEAD_SLOTS).shares
    )
    assert explorer.axes[0, 1].get_title() == "2. turn down: every score ÷ 2.83"


@pytest.mark.usefixtures("close_figures")
def test_three_steps_withhold_the_shares_until_the_guess_above_is_locked_in():
    """The share of "dog" is the page's guess's answer: no bar, number or title gives it first."""
    guess = share_prediction("dog")
    explorer = ThreeStepsExplorer(after=guess)
    withheld = [*explorer.share_bars, *explorer.share_labels, *explorer.mix_bars]
    for turn_down in (False, True):  # the switch works, and still gives nothing away
        explorer.turn_down.value = turn_down
        assert explorer.withheld and not any(a.get_visible() for a in withheld)
        assert all(note.get_visible() for note in explorer.waiting)
        titles = [ax.get_title() for ax in explorer.axes[1]]
        assert titles == ["3. share out", '4. mix: the new "it"']
    guess.lock()
    assert not explorer.withheld and all(a.get_visible() for a in withheld)
    assert not any(note.get_visible() for note in explorer.waiting)
    assert explorer.axes[1, 0].get_title().endswith('"dog" gets 57%')
    assert ThreeStepsExplorer(after=guess).withheld is False  # made after the lock: all shown


def test_three_steps_refuses_mismatched_inputs():
    with pytest.raises(ValueError, match=r"scores \(4,\) and values \(3, 2\)"):
        three_steps(LESSON_SCORES, np.ones((3, 2)))
    with pytest.raises(
        ValueError, match=r"got 2 words and 3 features for values of shape \(4, 3\)"
    ):
        three_steps(words=("a", "b"))
    with pytest.raises(ValueError, match=r"slots must be a positive integer, got 0"):
        three_steps(slots=0)


# --- the number of slots ---------------------------------------------------------------


@pytest.mark.usefixtures("close_figures")
def test_slots_spread_grows_unscaled_and_stays_near_one_divided():
    explorer = SlotsExplorer()
    assert explorer.keys == len(FRIENDS), "the same room as the five friends"
    redraws = RedrawCounter(explorer)
    options = list(explorer.slots.options)
    assert (options[0], options[-1]) == (1, 256)
    raw_spread, raw_top, cool_spread, cool_top = [], [], [], []
    for divide, spreads, tops in ((False, raw_spread, raw_top), (True, cool_spread, cool_top)):
        move(explorer.divide, divide, redraws)
        for d in options:
            move(explorer.slots, d, redraws)
            bars = heights(explorer.hist_bars)
            assert bars.sum() == pytest.approx(1.0), "the histogram shows every pair"
            assert bars.max() <= explorer.ax_hist.get_ylim()[1]
            assert explorer.spread_lines[1].get_xdata()[0] == pytest.approx(explorer.spread)
            ranked = heights(explorer.share_bars)
            assert ranked.sum() == pytest.approx(1.0)
            assert np.all(np.diff(ranked) <= 0), "shares are drawn loudest first"
            spreads.append(explorer.spread)
            tops.append(ranked[0])
    # Raw totals spread like sqrt(slots); divided, they stay at about 1.
    assert np.all(np.diff(raw_spread) > 0)
    np.testing.assert_allclose(raw_spread, np.sqrt(options), rtol=0.1)
    np.testing.assert_allclose(cool_spread, 1.0, atol=0.1)
    # Unscaled the loudest voice takes over; divided it holds near the 5-key value ~0.45.
    assert np.all(np.diff(raw_top) > 0)
    assert raw_top[-1] > 0.9
    # (one slot is a little flatter, 0.35: a single product q*k is not bell-shaped)
    assert max(cool_top) - min(cool_top) < 0.1
    assert 0.3 < min(cool_top) and max(cool_top) < 0.5


@pytest.mark.usefixtures("close_figures")
def test_slots_extremes_draw_without_warnings():
    explorer = SlotsExplorer()
    RedrawCounter(explorer)  # draw once per state below, explicitly
    titles = []
    for divide in (False, True):
        explorer.divide.value = divide
        for d in (explorer.slots.options[0], explorer.slots.options[-1]):
            explorer.slots.value = d
            explorer.fig.canvas.draw()
            titles.append(explorer.ax_hist.get_title())
    assert titles == [
        "1 slot, raw, not divided: typical size 1.0",
        "256 slots, raw, not divided: typical size 16.1",
        "1 slot, divided by 1.0: typical size 1.0",
        "256 slots, divided by 16.0: typical size 1.0",
    ]


def test_slots_refuses_too_few_draws():
    with pytest.raises(ValueError, match=r"need pairs >= 2, trials >= 1, keys >= 2; got 1, 10, 5"):
        SlotsExplorer(pairs=1, trials=10)


# --- the nudge -------------------------------------------------------------------------


@pytest.mark.usefixtures("close_figures")
def test_nudge_moves_the_calm_room_far_more_than_the_loud_one():
    explorer = NudgeExplorer()
    redraws = RedrawCounter(explorer)
    for who in FRIENDS:
        move(explorer.who, who, redraws)
        for nudge in float_slider_values(explorer.nudge):
            move(explorer.nudge, nudge, redraws)
            for room in ("calm", "loud"):
                drawn = heights(explorer.after_bars[room])
                assert drawn.sum() == pytest.approx(1.0)
                np.testing.assert_allclose(drawn, explorer.after[room])
            moved = explorer.moved
            np.testing.assert_allclose(heights(explorer.moved_bars), [moved["calm"], moved["loud"]])
            if abs(explorer.nudge.value) < 1e-9:
                assert moved == {"calm": 0.0, "loud": 0.0}
            else:
                assert moved["calm"] > 0.001
                assert moved["calm"] > 100 * moved["loud"], (who, nudge, moved)
            assert explorer.signal["calm"] > 100 * explorer.signal["loud"]


@pytest.mark.usefixtures("close_figures")
def test_nudge_extremes_draw_without_warnings():
    explorer = NudgeExplorer()
    RedrawCounter(explorer)  # draw once per state below, explicitly
    explorer.who.value = "Ana"
    for nudge in (explorer.nudge.min, explorer.nudge.max):
        explorer.nudge.value = nudge
        explorer.fig.canvas.draw()
    assert explorer.ax_moved.get_title() == "nudge Ana by +1.00:\nhow much moved"
    # Ana +1 in the calm room: her share goes from 56% to 78%.
    assert explorer.moved["calm"] == pytest.approx(
        changed_hands(softmax(RELEVANCE), softmax(RELEVANCE + np.array([1.0, 0, 0, 0, 0])))
    )
    assert explorer.moved_labels[0].get_text() == f"{explorer.moved['calm']:.0%}"


def test_learning_signal_and_changed_hands():
    # Two equal shares: Jacobian [[0.25, -0.25], [-0.25, 0.25]], Frobenius norm 0.5.
    assert learning_signal(np.array([0.5, 0.5])) == pytest.approx(0.5)
    assert learning_signal(np.array([1.0, 0.0, 0.0])) == 0.0
    assert changed_hands(np.array([0.5, 0.5]), np.array([0.8, 0.2])) == pytest.approx(0.3)
    with pytest.raises(ValueError, match=r"loud room's volume must be a finite number > 1"):
        NudgeExplorer(loud=0.5)


# --- the widget every explorer shows ---------------------------------------------------


@pytest.mark.usefixtures("close_figures")
@pytest.mark.parametrize(
    "make", [VolumeKnobExplorer, ThreeStepsExplorer, SlotsExplorer, NudgeExplorer]
)
def test_widget_shows_the_controls_above_the_figure(make):
    explorer = make()
    widget = explorer.widget
    assert list(widget.children[0].children) == explorer.controls
    assert len(explorer.controls) >= 1
