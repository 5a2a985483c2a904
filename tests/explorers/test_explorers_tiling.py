"""The online-softmax and tiling explorers, driven in-process under Agg."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_rgba
from support import FLOAT64

from attention_course.explorers.tiling import (
    OnlineSoftmaxExplorer,
    TilingExplorer,
    default_stream,
    uncovered_rectangles,
)
from attention_course.lessons.figures.style import VERMILLION
from attention_course.lessons.online import online_softmax_steps
from attention_lib import scaled_dot_product_attention, softmax
from attention_lib.flash import key_blocks, query_blocks

pytestmark = pytest.mark.filterwarnings("error")  # no RuntimeWarning, no matplotlib warning


def quiet(e):
    """Under Agg draw_idle renders at once; the tests read artists and render explicitly."""
    e.fig.canvas.draw_idle = lambda *args, **kwargs: None
    return e


# --- online softmax ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def online() -> OnlineSoftmaxExplorer:
    return quiet(OnlineSoftmaxExplorer())


def test_online_slider_range_and_stream(online: OnlineSoftmaxExplorer) -> None:
    n = len(default_stream())
    assert (online.step.min, online.step.max) == (1, n)
    assert online.controls == [online.step]
    # the default stream is chosen so the max rises more than once after the first score
    assert online.trace.new_max_steps == [5, 10, 13]


def test_online_every_step(online: OnlineSoftmaxExplorer) -> None:
    trace = online.trace
    n = len(trace)
    for t in range(1, n + 1):
        online.step.value = t
        # the running max line and the sum marker show the state after t scores
        np.testing.assert_array_equal(online.max_line.get_ydata(), trace.running_max[:t])
        assert online.sum_marker.get_ydata()[0] == trace.running_sum[t - 1]
        heights = np.array([b.get_height() for b in online.online_bars])
        np.testing.assert_allclose(heights[:t], softmax(trace.scores[:t]), **FLOAT64)
        assert np.all(heights[t:] == 0)
        rescale = np.array([b.get_height() for b in online.rescale_bars])
        assert np.all((rescale >= 0) & (rescale <= 1)) and np.all(rescale[t:] == 0)
        rescaled = [j for j in trace.new_max_steps if j < t]
        reds = [
            j for j, b in enumerate(online.rescale_bars) if b.get_facecolor() == to_rgba(VERMILLION)
        ]
        assert reds == rescaled
        text = online.readout.get_text()
        assert text.startswith(f"step {t} of {n}:")
        assert ("NEW MAX" in text) == (t - 1 in trace.new_max_steps)


def test_online_ends_equal_to_softmax(online: OnlineSoftmaxExplorer) -> None:
    online.step.value = online.step.max
    assert online.max_difference() < 1e-12
    online_heights = [b.get_height() for b in online.online_bars]
    softmax_heights = [b.get_height() for b in online.softmax_bars]
    np.testing.assert_allclose(online_heights, softmax_heights, **FLOAT64)
    # rounding noise is shown as a bound, never as its machine-dependent digits
    assert online.readout.get_text().endswith("max |online − softmax| < 1e-12")
    online.step.value = 11  # the big jump: 2.49 -> 5.30
    assert "NEW MAX: old sum rescaled by exp(m_prev − m) = 0.060" in online.readout.get_text()
    assert online.max_difference() > 0.1  # the unread scores still hold weight
    online.fig.canvas.draw()


def test_online_extremes_draw_cleanly(online: OnlineSoftmaxExplorer) -> None:
    for t in (online.step.min, online.step.max):
        online.step.value = t
        online.fig.canvas.draw()


def test_online_with_masked_or_custom_stream() -> None:
    e = quiet(OnlineSoftmaxExplorer([0.5, 2.0, -1.0]))
    e.step.value = 3
    assert e.max_difference() < 1e-15
    with pytest.raises(ValueError, match="finite scores only"):
        OnlineSoftmaxExplorer([0.0, -np.inf])
    with pytest.raises(ValueError, match="entry 1 is nan"):
        OnlineSoftmaxExplorer([0.0, np.nan])


# --- tiling ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiling() -> TilingExplorer:
    return quiet(TilingExplorer())


def expected_tiles(length_q: int, length_k: int, bq: int, bk: int, causal: bool) -> int:
    return sum(len(key_blocks(rows, length_k, bk, causal)) for rows in query_blocks(length_q, bq))


def set_blocks(e: TilingExplorer, bq: int, bk: int, causal: bool, step: int | None = None) -> None:
    e.block_q.value = bq
    e.block_k.value = bk
    e.causal.value = causal
    e.step.value = e.step.max if step is None else step


def cell_colours(e: TilingExplorer) -> np.ndarray:
    """The drawn face colours of the grid, (L, S, 4)."""
    return np.asarray(e.cells.get_facecolor()).reshape(*e.shape, 4)


def test_controls(tiling: TilingExplorer) -> None:
    assert tiling.controls == [tiling.block_q, tiling.block_k, tiling.causal, tiling.step]
    assert (tiling.block_q.min, tiling.block_q.max) == (1, 16)
    assert (tiling.block_k.min, tiling.block_k.max) == (1, 16)
    assert tiling.step.min == 0


def test_tile_count_is_the_key_blocks_sum() -> None:
    e = quiet(TilingExplorer(length_q=7, length_k=9))  # L != S
    for causal in (False, True):
        for bq in range(1, 8):
            for bk in range(1, 10):
                set_blocks(e, bq, bk, causal)
                want = expected_tiles(7, 9, bq, bk, causal)
                assert len(e.tiles) == e.step.max == e.step.value == want, (bq, bk, causal)


def test_causal_skipping_reduces_the_work(tiling: TilingExplorer) -> None:
    set_blocks(tiling, 4, 4, False)
    assert tiling.step.max == 16 and tiling.skipped_cells() == 0
    set_blocks(tiling, 4, 4, True)
    assert tiling.step.max == 1 + 2 + 3 + 4  # query block i visits i + 1 key tiles
    assert tiling.skipped_cells() == 6 * 16  # the six 4 x 4 tiles above the diagonal
    set_blocks(tiling, 1, 1, True)
    assert tiling.skipped_cells() == 16 * 15 // 2  # exactly the cells above the diagonal
    set_blocks(tiling, 16, 3, True)  # one query block sees every key: nothing to skip
    assert tiling.skipped_cells() == 0 and tiling.step.max == 6
    # skipped cells are drawn hatched grey: one rectangle per query block that skips any
    set_blocks(tiling, 4, 4, True)
    assert skipped_area(tiling) == 96 and tiling.skipped.get_hatch() == "//"
    assert len(tiling.skipped.get_path().to_polygons()) == 3
    set_blocks(tiling, 4, 4, False)
    assert skipped_area(tiling) == 0


def skipped_area(e: TilingExplorer) -> float:
    """Cells the hatched overlay covers (0 when it is hidden)."""
    if not e.skipped.get_visible():
        return 0.0
    return sum(shoelace(p) for p in e.skipped.get_path().to_polygons())


def shoelace(points: np.ndarray) -> float:
    """The area of a closed polygon given by its (n, 2) corners."""
    x, y = points[:, 0], points[:, 1]  # (n,)
    return 0.5 * abs(float(np.dot(x, np.roll(y, 1)) - np.dot(y, np.roll(x, 1))))


@pytest.mark.parametrize("seed", range(20))
def test_uncovered_rectangles_cover_exactly_the_true_cells(seed: int) -> None:
    rng = np.random.default_rng(seed)
    grid = rng.random((int(rng.integers(1, 9)), int(rng.integers(1, 9)))) < rng.random()
    drawn = np.zeros(grid.shape, dtype=int)
    for corners in uncovered_rectangles(grid):
        (c0, r0), (c1, r1) = corners.min(axis=0), corners.max(axis=0)
        assert list(map(tuple, corners)) == [(c0, r0), (c1, r0), (c1, r1), (c0, r1), (c0, r0)]
        drawn[r0:r1, c0:c1] += 1
    np.testing.assert_array_equal(drawn, grid.astype(int))  # each True cell once, no other


def test_the_hatched_rectangles_draw_the_same_pixels_as_a_hatched_square_per_cell() -> None:
    """The overlay became a few rectangles for speed (one hatched path, not one per cell);
    the picture is the one the per-cell squares drew, but for the anti-aliased seams
    where two of those squares met (a handful of pixels, each on a cell boundary)."""
    e = quiet(TilingExplorer())
    set_blocks(e, 3, 2, True, step=4)
    e.fig.canvas.draw()
    ours = np.asarray(e.fig.canvas.buffer_rgba()).copy()
    index = e._cell_tile_index()
    squares = [e._cell_squares[i] for i in np.flatnonzero(index.ravel() < 0)]
    e.skipped.set_visible(False)
    per_cell = PolyCollection(
        squares, facecolors=e.skipped.get_facecolor(), edgecolors="#7f7f7f", linewidths=0,
        hatch="//", zorder=e.skipped.get_zorder(),
    )  # fmt: skip
    e.axes[0].add_collection(per_cell)
    e.fig.canvas.draw()
    theirs = np.asarray(e.fig.canvas.buffer_rgba())
    ys, xs = np.nonzero(np.any(ours != theirs, axis=-1))  # pixel rows and columns that differ
    assert len(xs) <= 16, f"{len(xs)} pixels differ"
    height = theirs.shape[0]
    cells = e.axes[0].transData.inverted().transform(np.c_[xs + 0.5, height - ys - 0.5])
    cell_px = (
        e.axes[0].transData.transform([(1, 0)])[0, 0]
        - e.axes[0].transData.transform([(0, 0)])[0, 0]
    )
    off_grid = np.abs(cells - np.round(cells)).min(axis=1) * cell_px  # pixels to a cell edge
    assert np.all(off_grid <= 1.5), off_grid


def test_cells_shade_as_the_steps_advance(tiling: TilingExplorer) -> None:
    set_blocks(tiling, 5, 3, True, step=0)
    pending = to_rgba("#ffffff")
    covered = 16 * 16 - tiling.skipped_cells()
    assert np.all(cell_colours(tiling)[tiling._cell_tile_index() >= 0] == pending)
    assert not tiling.current_box.get_visible()
    area = 0
    for step, ((r0, r1), (k0, k1)) in enumerate(tiling.tiles, start=1):
        tiling.step.value = step
        area += (r1 - r0) * (k1 - k0)
        colours = cell_colours(tiling)
        not_pending = ~np.all(colours == pending, axis=-1)
        assert not_pending.sum() == area + tiling.skipped_cells()
        current = colours[r0:r1, k0:k1]
        assert np.all((current[..., 0] > 0.95) & (current[..., 2] < 0.7))  # orange shades
        assert tiling.current_box.get_bbox().bounds == (k0, r0, k1 - k0, r1 - r0)
    assert area == covered


def test_rows_finish_block_by_block(tiling: TilingExplorer) -> None:
    set_blocks(tiling, 5, 4, False, step=0)
    assert tiling.rows_done() == 0 and tiling.max_difference() is None
    tiling.step.value = 3  # the first query block (rows 0-4) still has one key tile to go
    assert tiling.rows_done() == 0
    tiling.step.value = 4
    assert tiling.rows_done() == 5
    green = to_rgba("#41ab5d")
    shaded = np.all(np.asarray(tiling.row_cells.get_facecolor()) == green, axis=-1)
    assert shaded.tolist() == [True] * 5 + [False] * 11
    assert "5 of 16 output rows done, max |tiled − unfused| =" in tiling.readout.get_text()


@pytest.mark.parametrize(("bq", "bk"), [(1, 1), (16, 16), (5, 3), (3, 7), (16, 1), (1, 16), (6, 6)])
@pytest.mark.parametrize("causal", [False, True])
def test_final_readout_equals_unfused(tiling: TilingExplorer, bq: int, bk: int, causal) -> None:
    set_blocks(tiling, bq, bk, causal)
    assert tiling.rows_done() == 16
    assert tiling.max_difference() < 1e-12
    reference = scaled_dot_product_attention(
        tiling.query, tiling.key, tiling.value, is_causal=causal
    )
    np.testing.assert_allclose(tiling.tiled(), reference, **FLOAT64)
    assert "16 of 16 output rows done" in tiling.readout.get_text()


def test_memory_readout(tiling: TilingExplorer) -> None:
    set_blocks(tiling, 5, 4, False)
    assert tiling.memory() == (20, 5 * (2 + 4), 256)
    assert [b.get_width() for b in tiling.memory_bars] == [20, 30, 256]
    assert "held: 20 scores (one tile) + 30 for m, l, acc" in tiling.readout.get_text()
    set_blocks(tiling, 16, 16, False)
    assert tiling.memory() == (256, 16 * 6, 256)


@pytest.mark.slow  # make check's, not make test's (seconds)
def test_sliders_through_their_full_range() -> None:
    """Every slider end to end, both causal settings, rendering at the extremes."""
    e = quiet(TilingExplorer())
    for causal in (False, True):
        e.causal.value = causal
        for bq in range(1, 17):
            e.block_q.value = bq
        for bk in range(1, 17):
            e.block_k.value = bk
        for bq, bk in [(1, 1), (16, 16), (5, 3), (16, 1), (1, 16)]:
            e.block_q.value, e.block_k.value = bq, bk
            for step in range(e.step.max + 1):
                e.step.value = step
                assert e.readout.get_text()
            for step in (0, e.step.max):
                e.step.value = step
                e.fig.canvas.draw()


def test_step_is_kept_within_the_new_tile_count(tiling: TilingExplorer) -> None:
    set_blocks(tiling, 1, 1, False)
    assert tiling.step.value == 256
    tiling.block_q.value = 16  # now 16 tiles: the step is clamped to the end
    assert tiling.step.max == tiling.step.value == 16
    assert tiling.rows_done() == 16


def test_online_and_tiling_agree_on_one_row() -> None:
    """A 1 x S tiling with block_k = 1 is the online softmax over that row's scores."""
    e = quiet(TilingExplorer(length_q=1, length_k=9, block_q=1, block_k=1))
    scores = (e.query @ e.key.T)[0] / np.sqrt(e.query.shape[-1])  # (S,)
    weights = online_softmax_steps(scores).weights()  # (S,)
    set_blocks(e, 1, 1, False)
    np.testing.assert_allclose(e.tiled()[0], weights @ e.value, **FLOAT64)
