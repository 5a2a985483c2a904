"""Every explorer's blitted frames against full redraws, pixel for pixel.

A slider move redraws only the explorer's ``live`` artists over a cached
background (explorers/base.py). If `update` changed an artist that is not
live, or a static artist lies on top of a live one, the frame differs from a
full redraw of the same state; these tests move every control to its ends
and middle and compare the two.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
from support import control_values, frame_and_full_draw

from attention_course.explorers import VolumeKnobExplorer
from attention_course.explorers.registry import builds

pytestmark = pytest.mark.filterwarnings("error")

#: every explorer the registry builds without the trained model: {test id: build}
EXPLORERS = {test_id: build for test_id, (_, build) in builds().items()}


@pytest.fixture
def blitting(request):
    """An explorer that blits under Agg, as it does under ipympl, closed afterwards."""
    explorer = EXPLORERS[request.param]()
    explorer.blit = True
    yield explorer
    plt.close(explorer.fig)


def differing_pixels(frame, full):
    return int(np.any(frame != full, axis=-1).sum())


@pytest.mark.parametrize("blitting", list(EXPLORERS), indirect=True)
@pytest.mark.slow  # make check's, not make test's (seconds)
def test_every_frame_matches_a_full_redraw(blitting):
    explorer = blitting
    assert explorer.blits and explorer.live, "each explorer lists the artists it updates"
    explorer.fig.canvas.draw()  # what the browser shows first
    for control in explorer.controls:
        for value in control_values(control):
            if control.disabled:
                break
            control.value = value
            frame, full = frame_and_full_draw(explorer)
            wrong = differing_pixels(frame, full)
            assert wrong == 0, (
                f"{type(explorer).__name__}: after {control.description!r} = {value!r} the "
                f"blitted frame differs from a full redraw in {wrong} pixels"
            )


@pytest.mark.parametrize("blitting", ["VolumeKnob"], indirect=True)
def test_an_artist_left_out_of_live_shows_stale_pixels(blitting):
    """The comparison above can fail: drop the bars from live and the frame goes stale."""
    explorer = blitting
    explorer.live = [a for a in explorer.live if a not in set(explorer.bars)]
    explorer.fig.canvas.draw()
    explorer.volume.value = 50.0  # draws the background, bars and all, as they are now
    explorer.volume.value = 0.05  # restores it: the bars of volume 50 stay
    frame, full = frame_and_full_draw(explorer)
    assert differing_pixels(frame, full) > 1000


@pytest.mark.parametrize("blitting", ["VolumeKnob"], indirect=True)
def test_a_frame_after_a_resize_uses_the_new_size(blitting):
    """A full draw started elsewhere (here a resize) replaces the cached background."""
    explorer = blitting
    explorer.fig.canvas.draw()
    explorer.fig.set_size_inches(6, 3.5)
    explorer.fig.canvas.draw()
    explorer.volume.value = 0.1
    frame, full = frame_and_full_draw(explorer)
    assert frame.shape == full.shape == (350, 600, 4)
    assert differing_pixels(frame, full) == 0


@pytest.mark.parametrize("blitting", ["VolumeKnob"], indirect=True)
def test_a_frame_draws_only_the_live_artists(blitting, monkeypatch):
    """A move restores the background and draws the live artists, and nothing else."""
    explorer = blitting
    explorer.fig.canvas.draw()
    explorer.volume.value = 3.0  # the first frame draws the background once
    drawn = []
    monkeypatch.setattr(explorer.fig, "draw_artist", drawn.append)
    monkeypatch.setattr(explorer.fig.canvas, "draw_idle", lambda: pytest.fail("full redraw"))
    explorer.volume.value = 5.0
    assert drawn == explorer.drawing_order()
    frame = {spine for spine in explorer.ax.spines.values()}  # drawn over the bars' edges
    assert set(drawn) == set(explorer.live) | frame


def test_without_live_artists_a_move_asks_for_a_full_redraw(monkeypatch):
    explorer = VolumeKnobExplorer()
    explorer.live = []
    asked = []
    monkeypatch.setattr(explorer.fig.canvas, "draw_idle", lambda: asked.append(1))
    explorer.volume.value = 2.0
    assert asked == [1] and not explorer.blits
    plt.close(explorer.fig)


def test_blitting_is_the_default_only_on_a_browser_canvas():
    """Under Agg (no browser) moves ask for a full redraw unless told to blit."""
    explorer = VolumeKnobExplorer()
    assert explorer.blit is None and not explorer.blits
    plt.close(explorer.fig)


@pytest.mark.parametrize("blitting", ["VolumeKnob"], indirect=True)
def test_a_frame_leaves_nothing_for_pyplot_to_redraw(blitting):
    """pyplot redraws stale figures after each widget message (post_execute); a frame is current."""
    explorer = blitting
    explorer.fig.canvas.draw()
    explorer.volume.value = 7.0
    assert not explorer.fig.stale
    explorer.ax.set_xlabel("changed outside a move")
    assert explorer.fig.stale, "a change outside a move still asks for a redraw"


@pytest.mark.parametrize("blitting", list(EXPLORERS), indirect=True)
@pytest.mark.slow  # make check's, not make test's (seconds)
def test_the_first_draw_pins_the_axis_labels_where_they_were(blitting):
    """After the first draw every axis label stays put (explorers/base.py,
    `_pin_axis_labels`): drawn again, the figure is the same, pixel for pixel, and a
    label no longer follows its tick labels."""
    explorer = blitting
    canvas = explorer.fig.canvas
    canvas.draw()  # laid out, labels placed by matplotlib, then pinned
    first = np.asarray(canvas.buffer_rgba()).copy()
    assert not explorer.fig.stale, "pinning changes nothing that needs a redraw"
    canvas.draw()
    assert differing_pixels(np.asarray(canvas.buffer_rgba()), first) == 0
    renderer = canvas.get_renderer()
    for ax in explorer.fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            before = axis.label.get_window_extent(renderer).bounds
            axis.set_tick_params(labelsize=40)  # tick labels that would push a free label away
            axis._update_label_position(renderer)  # what every draw of the axis does
            assert axis.label.get_window_extent(renderer).bounds == before
