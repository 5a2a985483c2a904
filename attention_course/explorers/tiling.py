"""The researcher's tiling explorers: online softmax and the tiled path, step by step.

`OnlineSoftmaxExplorer` walks a stream of scores one at a time and shows the
running maximum, the running sum and its rescaling when a new maximum
arrives (`attention_course.lessons.online`). `TilingExplorer` walks the tiles that
`flash_attention` visits, in its order (`attention_lib.flash.key_blocks`),
on the L x S score grid, with the output rows finished so far compared
against the unfused reference.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as widgets
import numpy as np
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.patches import Patch, PathPatch, Rectangle
from matplotlib.path import Path
from matplotlib.ticker import MaxNLocator

from attention_lib.core import scaled_dot_product_attention
from attention_lib.flash import flash_attention, key_blocks, query_blocks
from attention_lib.normalisers import softmax

from ..lessons.cost import tiled_memory
from ..lessons.figures.style import BLUE, GREEN, ORANGE, PURPLE, VERMILLION
from ..lessons.online import online_softmax_steps
from .base import Explorer
from .controls import fit_label, fit_slider

__all__ = ["OnlineSoftmaxExplorer", "TilingExplorer", "default_stream", "uncovered_rectangles"]

_SEEN, _CURRENT, _UNSEEN = BLUE, ORANGE, "#dddddd"


def default_stream(n: int = 16, seed: int = 14) -> np.ndarray:
    """A seeded stream of n scores (normal, sd 2) whose maximum changes several times."""
    return np.random.default_rng(seed).normal(0.0, 2.0, n)  # (n,)


class OnlineSoftmaxExplorer(Explorer):
    """A slider over a stream of scores; the online softmax's state at that step.

    Control: ``step`` (IntSlider, 1 to n: how many scores have been read).
    Four panels: the scores read so far with the running maximum m_t; the
    rescale factor exp(m_{t-1} - m_t) at each step (below 1 where a new
    maximum arrived); the running sum l_t; and the weights computed from the
    state, exp(x_i - m_t) / l_t, beside the ordinary softmax of the whole
    stream. At the last step the two sets of bars coincide.

    Artists the tests read: ``score_bars``, ``max_line``, ``rescale_bars``,
    ``sum_line``, ``sum_marker``, ``online_bars``, ``softmax_bars``,
    ``readout`` (a Text).
    """

    def __init__(self, scores: Any = None) -> None:
        self.trace = online_softmax_steps(default_stream() if scores is None else scores)
        x = self.trace.scores
        if not np.isfinite(x).all():
            raise ValueError("the explorer draws finite scores only; -inf has no bar height")
        n = len(x)
        self.softmax = softmax(x)  # (n,) the ordinary softmax, the target
        steps = np.arange(1, n + 1)  # (n,) step t reads score t (1-based for the reader)

        fig = self._make_figure(figsize=(8.4, 5.4))
        grid = {"left": 0.08, "right": 0.98, "top": 0.85, "bottom": 0.1, "hspace": 0.6}
        ax_scores, ax_rescale, ax_sum, ax_w = fig.subplots(
            2, 2, gridspec_kw={**grid, "wspace": 0.25}
        ).ravel()
        self.axes = (ax_scores, ax_rescale, ax_sum, ax_w)

        self.score_bars = ax_scores.bar(steps, x, color=_UNSEEN)
        (self.max_line,) = ax_scores.step(
            steps,
            self.trace.running_max,
            where="mid",
            color=VERMILLION,
            lw=2,
            label="running max m",
        )
        ax_scores.axhline(0, color="black", lw=0.6)
        ax_scores.set_ylim(min(x.min(), 0) - 0.5, max(x.max(), 0) + 0.8)
        ax_scores.set_xlabel("position in the stream")
        ax_scores.set_ylabel("score x")
        ax_scores.set_title("scores read so far (grey: not yet read)", fontsize=10)
        # upper left: over the default stream's first scores, which are small
        ax_scores.legend(loc="upper left", fontsize=8)

        self.rescale_bars = ax_rescale.bar(steps, np.zeros(n), color=PURPLE)
        ax_rescale.axhline(1, color="gray", ls="--", lw=1)
        ax_rescale.set_ylim(0, 1.1)
        ax_rescale.set_xlim(0.4, n + 0.6)
        ax_rescale.set_xlabel("step")
        ax_rescale.set_ylabel("exp(m_prev − m)")
        ax_rescale.set_title("rescale factor: below 1 when the max grows", fontsize=10)

        (self.sum_line,) = ax_sum.plot([], [], "-", color=GREEN, lw=2, label="l after step")
        (self.sum_marker,) = ax_sum.plot([], [], "o", color=GREEN, ms=8)
        ax_sum.set_xlim(0.4, n + 0.6)
        ax_sum.set_ylim(0, self.trace.running_sum.max() * 1.15)
        ax_sum.set_xlabel("step")
        ax_sum.set_ylabel("running sum l = Σ exp(x − m)")
        ax_sum.set_title("running sum, measured against the current max", fontsize=10)

        half = 0.4
        self.online_bars = ax_w.bar(
            steps - half / 2, np.zeros(n), width=half, color=_SEEN, label="online, from (m, l)"
        )
        self.softmax_bars = ax_w.bar(
            steps + half / 2,
            self.softmax,
            width=half,
            color="gray",
            hatch="///",  # told from the online bars by more than their colour
            label="softmax(all)",
        )
        ax_w.set_ylim(0, 1.2)  # the first step puts the whole weight on one score
        ax_w.set_xlabel("position in the stream")
        ax_w.set_ylabel("weight")
        ax_w.set_title("exp(x − m) / l so far vs the ordinary softmax", fontsize=10)
        ax_w.legend(loc="upper center", ncols=2, fontsize=8)
        for ax in self.axes:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))

        self.readout = fig.text(0.5, 0.985, "", ha="center", va="top", fontsize=10)
        self.step = fit_slider(
            widgets.IntSlider(
                value=1, min=1, max=n, description="scores read", continuous_update=True
            ),
            track_px=320,
        )
        self._watch(self.step)
        self.live = [
            *self.score_bars,
            self.max_line,
            *ax_scores.lines,
            ax_scores.get_legend(),
            *self.rescale_bars,
            *ax_rescale.lines,
            self.sum_line,
            self.sum_marker,
            *self.online_bars,
            ax_w.get_legend(),
            self.readout,
        ]
        self.update()

    def max_difference(self) -> float:
        """Largest |online weight − softmax weight| at the current step, over the whole stream.

        Unread scores count as weight 0 for the online side, so only the
        last step can give (nearly) zero.
        """
        online = np.zeros_like(self.softmax)  # (n,)
        t = self.step.value
        online[:t] = self.trace.weights(t - 1)
        return float(np.max(np.abs(online - self.softmax)))

    def describe(self) -> str:
        """The state at the current step in one line."""
        t = self.step.value
        i = t - 1
        m, total, r = self._state(i)
        if i == 0:
            event = "first score: m starts at it, l = 1"
        elif r < 1:
            event = f"NEW MAX: old sum rescaled by exp(m_prev − m) = {r:.3f}"
        else:
            event = "max unchanged: rescale factor 1"
        diff = self.max_difference()
        # rounding noise is said as a bound: its digits differ from one CPU to the next
        gap = "< 1e-12" if diff < 1e-12 else f"= {diff:.1e}"
        return (
            f"step {t} of {len(self.trace)}: x = {self.trace.scores[i]:+.3f}, m = {m:.3f}, "
            f"l = {total:.4f}; {event}; max |online − softmax| {gap}"
        )

    def _state(self, i: int) -> tuple[float, float, float]:
        tr = self.trace
        return float(tr.running_max[i]), float(tr.running_sum[i]), float(tr.rescale[i])

    def update(self) -> None:
        """Redraw every panel for the current step."""
        t = self.step.value
        n = len(self.trace)
        seen = np.arange(n) < t  # (n,)
        for j, bar in enumerate(self.score_bars):
            bar.set_facecolor(_CURRENT if j == t - 1 else _SEEN if seen[j] else _UNSEEN)
        steps = np.arange(1, t + 1)  # (t,)
        self.max_line.set_data(steps, self.trace.running_max[:t])
        rescale = np.where(seen, self.trace.rescale, 0.0)  # (n,)
        rescale[0] = 0.0  # step 1 has no previous sum to rescale
        for bar, r in zip(self.rescale_bars, rescale, strict=True):
            bar.set_height(r)
            bar.set_facecolor(VERMILLION if 0 < r < 1 else PURPLE)
        self.sum_line.set_data(steps, self.trace.running_sum[:t])
        self.sum_marker.set_data([t], [self.trace.running_sum[t - 1]])
        weights = self.trace.weights(t - 1)  # (t,)
        for j, bar in enumerate(self.online_bars):
            bar.set_height(weights[j] if j < t else 0.0)
        self.readout.set_text(self.describe().replace("; ", "\n", 1))  # two lines fit the width


# --- the tiled computation ------------------------------------------------------------

# cell colours on the score grid
_PENDING = "#ffffff"
_VISITED = "#6baed6"
_VISITED_MASKED = "#c6dbef"  # inside a visited causal tile but above the diagonal: masked
_NOW = "#fd8d3c"
_NOW_MASKED = "#fdd0a2"
_SKIPPED = "#bdbdbd"
_ROW_DONE = "#41ab5d"
_DOT = "#4d4d4d"  # the dot in a masked cell: 3:1 and more against the masked colours
_DOT_MS = 3.5  # its diameter in points


def uncovered_rectangles(uncovered: np.ndarray) -> list[np.ndarray]:
    """The True cells of an (L, S) grid as few axis-aligned rectangles, each (5, 2) corners.

    Runs of True along each row, merged with the same run in the rows below: a
    causal grid's skipped cells become one rectangle per query block. Cell (r, c)
    is the unit square from (c, r) to (c + 1, r + 1), as on the explorer's grid.
    """
    rectangles = []
    open_runs: dict[tuple[int, int], int] = {}  # (c0, c1) -> first row
    for r in range(uncovered.shape[0] + 1):
        row = uncovered[r] if r < uncovered.shape[0] else np.zeros(uncovered.shape[1], bool)
        edges = np.flatnonzero(np.diff(np.concatenate([[0], row.astype(np.int8), [0]])))
        runs = set(zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True))
        for c0, c1 in set(open_runs) - runs:  # ended above this row
            r0 = open_runs.pop((c0, c1))
            rectangles.append(np.array([(c0, r0), (c1, r0), (c1, r), (c0, r), (c0, r0)]))
        for run in runs - set(open_runs):
            open_runs[run] = r
    return sorted(rectangles, key=lambda corners: (corners[0, 1], corners[0, 0]))


class TilingExplorer(Explorer):
    """`flash_attention`'s tiles, visited one at a time on the L x S score grid.

    Controls: ``block_q`` and ``block_k`` (IntSliders, 1 to L and 1 to S),
    ``causal`` (Checkbox) and ``step`` (IntSlider, 0 to the number of tiles
    visited: how many tiles have been computed). The tiles come from
    `attention_lib.flash.key_blocks` for each query block, in the order the
    tiled path visits them (query blocks outer, key blocks inner).

    The grid shows visited tiles shaded, the current tile in orange, and with
    ``causal`` the cells above the diagonal that are never computed in grey
    with hatching (tiles wholly above the diagonal are skipped; the masked
    cells of tiles that cross it are drawn pale). The strip to its right
    marks the output rows finished so far; the readout compares them with the
    unfused `scaled_dot_product_attention` (max abs difference) and sets the
    memory held (one tile of scores plus m, l and acc for one query block)
    against the full score matrix.

    Inputs: seeded float64 query (L, E), key (S, E), value (S, Ev).
    Artists the tests read: ``cells`` (a PolyCollection of the L x S cells,
    row by row), ``skipped`` (a PathPatch: the cells no tile covers, as the
    few hatched rectangles of `uncovered_rectangles`; hidden when none),
    ``row_cells`` (a PolyCollection of L squares, row by row),
    ``current_box``, ``tile_edges``, ``memory_bars``, ``readout``.
    """

    def __init__(
        self,
        length_q: int = 16,
        length_k: int = 16,
        width: int = 4,
        value_width: int = 4,
        seed: int = 0,
        block_q: int = 5,
        block_k: int = 4,
    ) -> None:
        rng = np.random.default_rng(seed)
        self.query = rng.standard_normal((length_q, width))  # (L, E)
        self.key = rng.standard_normal((length_k, width))  # (S, E)
        self.value = rng.standard_normal((length_k, value_width))  # (S, Ev)
        self.shape = (length_q, length_k)
        self._reference: dict[bool, np.ndarray] = {}
        self._tiled: dict[tuple[int, int, bool], np.ndarray] = {}
        self._syncing = False

        fig = self._make_figure(figsize=(8.4, 4.8))
        ax_grid = fig.add_axes((0.07, 0.09, 0.5, 0.7))
        ax_rows = fig.add_axes((0.585, 0.09, 0.03, 0.7), sharey=ax_grid)
        ax_mem = fig.add_axes((0.72, 0.45, 0.26, 0.28))
        self.axes = (ax_grid, ax_rows, ax_mem)

        # one square per score cell, in one collection: an update only recolours them
        self._cell_squares = [
            [(c, r), (c + 1, r), (c + 1, r + 1), (c, r + 1)]
            for r in range(length_q)
            for c in range(length_k)
        ]
        self.cells = PolyCollection(
            self._cell_squares, facecolors=_PENDING, edgecolors="#e6e6e6", linewidths=0.3
        )
        ax_grid.add_collection(self.cells)
        # the cells no tile covers (causal skipping), hatched on top: one path of a few
        # rectangles. Agg hatches path by path: a hatched square per cell was half of a
        # causal frame's drawing (about 48 ms of its 65 on the loaded 2-core machine)
        self.skipped = PathPatch(
            Path(np.zeros((1, 2))), facecolor=_SKIPPED, edgecolor="#7f7f7f", lw=0, hatch="//"
        )
        ax_grid.add_patch(self.skipped)
        # a dot in each masked cell of the tiles computed so far: told from the others by
        # more than their paler colour. A line's markers: Agg stamps one cached dot per cell
        (self.masked_dots,) = ax_grid.plot(
            [], [], ls="", marker="o", ms=_DOT_MS, mew=0, color=_DOT, zorder=1.5
        )
        self.tile_edges = LineCollection([], colors="black", linewidths=0.9)
        ax_grid.add_collection(self.tile_edges)
        self.current_box = Rectangle((0, 0), 1, 1, fill=False, edgecolor=VERMILLION, lw=2.5)
        ax_grid.add_patch(self.current_box)
        ax_grid.set_xlim(0, length_k)
        ax_grid.set_ylim(length_q, 0)  # query row 0 at the top, as the matrix is written
        ax_grid.set_aspect("equal", adjustable="box")
        ax_grid.set_xlabel("key position (columns of the L × S score matrix)")
        ax_grid.set_ylabel("query position (rows)")
        fig.legend(
            [
                Patch(facecolor=_VISITED),
                Patch(facecolor=_NOW, edgecolor=VERMILLION, lw=2.5),
                Patch(facecolor=_VISITED_MASKED, hatch="."),  # sparse dots, as the cells' dots
                Patch(facecolor=_SKIPPED, hatch="//"),
            ],
            ["tile computed", "current tile", "masked inside a tile", "skipped (causal)"],
            loc="upper left",
            bbox_to_anchor=(0.7, 0.33),
            fontsize=8,
            title="score cells",
            title_fontsize=8,
        )

        # one square per output row, in one collection (a patch each drew 16 times a frame)
        self.row_cells = PolyCollection(
            [[(0, r), (1, r), (1, r + 1), (0, r + 1)] for r in range(length_q)],
            facecolors=_PENDING,
            edgecolors="#999999",
            linewidths=0.3,
        )
        ax_rows.add_collection(self.row_cells)
        ax_rows.set_xlim(0, 1)
        ax_rows.set_xticks([])
        ax_rows.tick_params(labelleft=False)
        ax_rows.set_title("output\nrows\ndone", fontsize=8)

        labels = ["score tile\nbq × bk", "m, l, acc\n(bq rows)", "full scores\nL × S"]
        self.memory_bars = ax_mem.barh(
            [2, 1, 0], [0, 0, length_q * length_k], color=[ORANGE, GREEN, "gray"]
        )
        ax_mem.set_yticks([2, 1, 0], labels, fontsize=8)
        ax_mem.set_xlim(0, length_q * length_k * 1.05)
        ax_mem.set_xlabel("numbers held (per head)", fontsize=8)
        ax_mem.tick_params(axis="x", labelsize=8)
        ax_mem.set_title("memory held during the tile", fontsize=9)

        self.readout = fig.text(0.5, 0.985, "", ha="center", va="top", fontsize=9.5)

        self.block_q = fit_slider(
            widgets.IntSlider(value=block_q, min=1, max=length_q, description="block_q"),
            track_px=160,
        )
        self.block_k = fit_slider(
            widgets.IntSlider(value=block_k, min=1, max=length_k, description="block_k"),
            track_px=160,
        )
        self.causal = fit_label(
            widgets.Checkbox(
                value=False, description="causal", indent=False, layout={"width": "auto"}
            )
        )
        self.step = fit_slider(
            widgets.IntSlider(value=0, min=0, max=1, description="tiles done"), track_px=300
        )
        self._watch(self.block_q, self.block_k, self.causal, self.step)
        self.live = [
            self.cells,
            self.skipped,
            self.tile_edges,
            self.current_box,
            self.masked_dots,
            self.row_cells,
            *self.memory_bars,
            self.readout,
        ]
        self._sync_step()
        self.update()

    # -- the computation ----------------------------------------------------------------
    @property
    def tiles(self) -> list[tuple[tuple[int, int], tuple[int, int]]]:
        """((r0, r1), (k0, k1)) of every tile the tiled path visits, in its order."""
        length_q, length_k = self.shape
        causal = self.causal.value
        return [
            (rows, cols)
            for rows in query_blocks(length_q, self.block_q.value)
            for cols in key_blocks(rows, length_k, self.block_k.value, causal)
        ]

    def reference(self) -> np.ndarray:
        """The unfused result (L, Ev), computed once per causal setting."""
        causal = self.causal.value
        if causal not in self._reference:
            self._reference[causal] = scaled_dot_product_attention(
                self.query, self.key, self.value, is_causal=causal
            )
        return self._reference[causal]

    def tiled(self) -> np.ndarray:
        """`flash_attention` with the current block sizes (L, Ev), cached per setting."""
        setting = (self.block_q.value, self.block_k.value, self.causal.value)
        if setting not in self._tiled:
            self._tiled[setting] = flash_attention(
                self.query,
                self.key,
                self.value,
                is_causal=setting[2],
                block_q=setting[0],
                block_k=setting[1],
                backend="tiled",
            )
        return self._tiled[setting]

    def rows_done(self) -> int:
        """How many output rows are final after ``step`` tiles: whole query blocks only."""
        tiles, step = self.tiles, self.step.value
        done = 0
        for i in range(step):
            rows = tiles[i][0]
            last_of_block = i + 1 == len(tiles) or tiles[i + 1][0] != rows
            if last_of_block:
                done = rows[1]
        return done

    def max_difference(self) -> float | None:
        """Max |tiled − unfused| over the finished output rows; None before any row is done."""
        done = self.rows_done()
        if done == 0:
            return None
        return float(np.max(np.abs(self.tiled()[:done] - self.reference()[:done])))

    def memory(self) -> tuple[int, int, int]:
        """Numbers held per head: (one score tile, m + l + acc for one query block, full L x S)."""
        length_q, length_k = self.shape
        held = tiled_memory(
            length_q,
            self.value.shape[-1],
            self.block_q.value,
            self.block_k.value,
            rows=min(self.block_q.value, length_q),
            length_k=length_k,
        )
        return held.tile, held.stats + held.accumulator, length_q * length_k

    def describe(self) -> str:
        """The current tile, the rows finished and how they compare, in two lines."""
        tiles, step = self.tiles, self.step.value
        if step == 0:
            where = f"no tile computed yet ({len(tiles)} to visit)"
        else:
            (r0, r1), (k0, k1) = tiles[step - 1]
            where = f"tile {step} of {len(tiles)}: query rows {r0}–{r1 - 1}, keys {k0}–{k1 - 1}"
        skipped = self.skipped_cells()
        if self.causal.value:
            where += f"; {skipped} of {self.shape[0] * self.shape[1]} score cells never computed"
        diff = self.max_difference()
        rows = f"{self.rows_done()} of {self.shape[0]} output rows done"
        check = "" if diff is None else f", max |tiled − unfused| = {diff:.1e}"
        tile, stats, full = self.memory()
        return (
            f"{where}\n{rows}{check}\nheld: {tile} score{'s' * (tile != 1)} (one tile) "
            f"+ {stats} for m, l, acc "
            f"(one query block) vs {full} for the full score matrix"
        )

    def skipped_cells(self) -> int:
        """Score cells no visited tile covers (the causal skipping), over the whole grid."""
        return int((self._cell_tile_index() < 0).sum())

    def _cell_tile_index(self) -> np.ndarray:
        """(L, S) int array: the index of the tile covering each cell, -1 if none does."""
        index = np.full(self.shape, -1)
        for i, ((r0, r1), (k0, k1)) in enumerate(self.tiles):
            index[r0:r1, k0:k1] = i
        return index

    # -- drawing -----------------------------------------------------------------------
    def _sync_step(self) -> None:
        """Fit the step slider's range to the tile count, without a redraw of its own."""
        self._syncing = True
        try:
            total = len(self.tiles)
            if self.step.value > total:
                self.step.value = total
            self.step.max = total
        finally:
            self._syncing = False

    def _on_change(self, change: dict[str, Any]) -> None:
        if self._syncing:
            return
        if change.get("owner") is not self.step:
            self._sync_step()
        super()._on_change(change)

    def update(self) -> None:
        """Recolour the grid and the row strip, move the box, refresh the readout."""
        step = self.step.value
        tiles = self.tiles
        index = self._cell_tile_index()  # (L, S)
        rows = np.arange(self.shape[0])[:, None]  # (L, 1)
        cols = np.arange(self.shape[1])[None, :]  # (1, S)
        masked = (cols > rows) if self.causal.value else np.zeros(self.shape, dtype=bool)
        colours = np.full(self.shape, _PENDING, dtype=object)  # (L, S)
        colours[(index >= 0) & (index < step - 1)] = _VISITED
        colours[(index >= 0) & (index < step - 1) & masked] = _VISITED_MASKED
        colours[index == step - 1] = _NOW if step > 0 else _PENDING
        colours[(index == step - 1) & masked & (step > 0)] = _NOW_MASKED
        colours[index < 0] = _SKIPPED  # also hatched by the overlay below
        self.cells.set_facecolor(list(colours.ravel()))
        rectangles = uncovered_rectangles(index < 0)
        if rectangles:
            outline = Path.make_compound_path(*(Path(r, closed=True) for r in rectangles))
            self.skipped.set_path(outline)
        self.skipped.set_visible(bool(rectangles))
        dotted_rows, dotted_cols = np.nonzero((index >= 0) & (index < step) & masked)
        self.masked_dots.set_data(dotted_cols + 0.5, dotted_rows + 0.5)  # a dot mid-cell

        segments = []
        for (r0, r1), (k0, k1) in tiles:
            segments.append([(k0, r0), (k1, r0), (k1, r1), (k0, r1), (k0, r0)])
        self.tile_edges.set_segments(segments)
        if step > 0:
            (r0, r1), (k0, k1) = tiles[step - 1]
            self.current_box.set_bounds(k0, r0, k1 - k0, r1 - r0)
        self.current_box.set_visible(step > 0)

        done = self.rows_done()
        self.row_cells.set_facecolor([_ROW_DONE] * done + [_PENDING] * (self.shape[0] - done))

        for bar, n in zip(self.memory_bars, self.memory(), strict=True):
            bar.set_width(n)
        self.readout.set_text(self.describe())
