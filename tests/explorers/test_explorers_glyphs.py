"""Text from cached glyph bitmaps (explorers/glyphs.py) against matplotlib's own Agg text.

The cache must change nothing a learner sees: every figure drawn through it,
first (bitmaps made) and again (bitmaps reused), equals matplotlib's own
drawing pixel for pixel, and every explorer's canvas uses it.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from attention_course.explorers import glyphs
from attention_course.explorers.glyphs import GlyphCachingCanvas, GlyphCachingRenderer
from attention_course.explorers.registry import builds

pytestmark = pytest.mark.filterwarnings("error")


def pixels(fig, canvas_class):
    """``fig`` drawn on a new canvas of ``canvas_class``: (H, W, 4) RGBA."""
    canvas = canvas_class(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba()).copy()


def text_figure():
    """Text as the explorers draw it: titles of several lines, turned labels, sizes, bold,
    a non-Latin sign, mathtext and a rotated annotation."""
    fig = Figure(figsize=(4, 3), dpi=100)
    ax = fig.add_subplot()
    ax.plot([0, 1, 2], [0, 1, 0])
    ax.set_title("softmax1\nq·k × c/√d\nrows sum 0.12–0.98", fontsize=8)
    ax.set_xlabel("key position")
    ax.set_ylabel("weight (turned 90°)")
    ax.text(0.5, 0.5, "bold, 11 pt", fontsize=11, weight="bold")
    ax.text(1.0, 0.2, "at 30°", rotation=30)
    ax.text(1.5, 0.8, r"$\sqrt{d}$ mathtext")
    fig.suptitle("d = 16, c = 1: exact zeros 12/60", fontsize=9)
    return fig


def test_text_drawn_from_the_cache_equals_matplotlibs_own_first_and_again():
    fig = text_figure()
    own = pixels(fig, FigureCanvasAgg)
    canvas = GlyphCachingCanvas(fig)
    canvas.draw()
    first = np.asarray(canvas.buffer_rgba()).copy()
    renderer = canvas.get_renderer()
    assert isinstance(renderer, GlyphCachingRenderer)
    made = renderer.glyph_misses
    assert made >= 10, "each plain line was rasterised once"
    canvas.draw()
    again = np.asarray(canvas.buffer_rgba()).copy()
    assert renderer.glyph_misses == made, "the second draw took every line from the cache"
    assert np.array_equal(first, own)
    assert np.array_equal(again, own)


def test_a_changed_string_size_or_dpi_is_a_new_bitmap():
    fig = Figure(figsize=(2, 1), dpi=100)
    label = fig.text(0.1, 0.5, "12/60 zeros", fontsize=8)
    canvas = GlyphCachingCanvas(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    misses = renderer.glyph_misses
    for change in (lambda: label.set_text("13/60 zeros"), lambda: label.set_fontsize(9)):
        change()
        canvas.draw()
        assert renderer.glyph_misses == misses + 1
        misses = renderer.glyph_misses
        assert np.array_equal(np.asarray(canvas.buffer_rgba()), pixels(fig, FigureCanvasAgg))
    fig.set_dpi(200)  # a new size: a new renderer, its own cache
    canvas.draw()
    assert canvas.get_renderer() is not renderer
    assert np.array_equal(np.asarray(canvas.buffer_rgba()), pixels(fig, FigureCanvasAgg))


def test_the_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(glyphs, "MAX_GLYPH_LINES", 3)
    fig = Figure(figsize=(2, 1), dpi=100)
    label = fig.text(0.1, 0.5, "", fontsize=8)
    canvas = GlyphCachingCanvas(fig)
    for n in range(10):
        label.set_text(f"line {n}")
        canvas.draw()
        assert len(canvas.get_renderer().glyph_lines) <= 3
    assert np.array_equal(np.asarray(canvas.buffer_rgba()), pixels(fig, FigureCanvasAgg))


@pytest.mark.parametrize("test_id", list(builds()))
@pytest.mark.slow  # make check's, not make test's (seconds)
def test_every_explorer_draws_through_the_cache_and_looks_the_same(test_id):
    _, build = builds()[test_id]
    explorer = build()
    try:
        canvas = explorer.fig.canvas
        assert isinstance(canvas, GlyphCachingCanvas)
        canvas.draw()
        assert isinstance(canvas.get_renderer(), GlyphCachingRenderer)
        ours = np.asarray(canvas.buffer_rgba()).copy()
        assert np.array_equal(ours, pixels(explorer.fig, FigureCanvasAgg))
    finally:
        plt.close(explorer.fig)


def test_the_explorer_canvas_draws_through_the_cache_too():
    from attention_course.explorers.canvas import ExplorerCanvas

    assert issubclass(ExplorerCanvas, GlyphCachingCanvas)
    fig = text_figure()
    canvas = ExplorerCanvas(fig)
    canvas.draw()
    assert isinstance(canvas.get_renderer(), GlyphCachingRenderer)
    assert np.array_equal(np.asarray(canvas.buffer_rgba()), pixels(text_figure(), FigureCanvasAgg))
