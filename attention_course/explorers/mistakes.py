"""Notebook 03's four mistakes as code: the buggy line beside the fix, and what each does.

`MistakeExplorer(name)` shows one mistake of `attention_course.lessons.mistakes`
as two lines of code side by side (the mistake and the fix, the one in use
highlighted), a toggle between them, and a figure that redraws: the
attention weights, and what goes wrong downstream (row sums that are not
one, masked keys that still move earlier outputs, weights flattened or
collapsed). Its inputs are the seeded ones the ``run_*`` function of the same
mistake uses (`random_rows`, `multi_head_qk`), and its leak is that lesson's
`future_leak`, so its numbers are that function's (the tests check they agree).

`MistakeTable(run)` renders a `MistakeRun`'s numbers as a table (HTML, with a
plain-text fallback) instead of a monospace dump that wraps mid-word.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ipywidgets as widgets
import numpy as np

from attention_lib.core import attention_weights, scaled_dot_product_attention
from attention_lib.normalisers import softmax

from ..lessons.figures.style import BLUE, GREEN, ORANGE, VERMILLION
from ..lessons.mistakes import (
    MistakeRun,
    attend_mask_after_softmax,
    future_leak,
    multi_head_qk,
    qk_normalised_weights,
    random_rows,
)
from .base import Explorer
from .controls import fit_label, fit_slider

__all__ = ["MISTAKES", "MistakeExplorer", "MistakeTable", "code_pair_html"]


@dataclass(frozen=True)
class _Mistake:
    title: str
    mistake: str  # the buggy line(s), as code
    fix: str  # the fixed line(s)


MISTAKES: dict[str, _Mistake] = {
    "model width": _Mistake(
        "1. the scale from the model width, not the head width",
        "scale = 1 / math.sqrt(d_model)  # 512: the whole layer",
        "scale = 1 / math.sqrt(d_model // n_heads)  # 64: one head",
    ),
    "wrong axis": _Mistake(
        "2. softmax over the wrong axis",
        "weights = softmax(scores, axis=0)  # down each column: over the queries",
        "weights = softmax(scores, axis=-1)  # along each row: over the keys",
    ),
    "mask after softmax": _Mistake(
        "3. the mask applied after the softmax",
        "weights = softmax(scores, axis=-1) * keep  # zeroed after sharing out",
        "weights = softmax(np.where(keep, scores, -np.inf), axis=-1)  # masked before",
    ),
    "scale as a knob": _Mistake(
        "4. the scale tuned by hand instead of QK normalisation",
        "scale = 1 / (math.sqrt(E) * 2**2)  # tuned once, when q and k had grown 2x",
        "q, k = q / norm(q), k / norm(k); scale = math.sqrt(E)  # QK normalisation",
    ),
}

_VERSIONS = (("the mistake", "mistake"), ("the fix", "fix"))
_GROWTHS = (1, 2, 4, 8)


#: The code blocks' colours, each at least 4.5:1 against both backgrounds (WCAG 2.1 AA): the
#: text's own colour is set too, so the blocks read the same in a dark theme.
_CODE_TEXT = "#1a1a1a"
_MISTAKE_RED = "#c0392b"  # 5.1:1 on the backgrounds
_FIX_GREEN = "#196f3d"  # 5.8:1
_IN_USE_BACKGROUND = "#fff8e6"
_IDLE_BACKGROUND = "#f7f7f7"


def code_pair_html(mistake: str, fix: str, active: str) -> str:
    """The two lines side by side as HTML code blocks; ``active`` ("mistake"/"fix") highlighted
    (a thick border, and "(in use)" after its label: not by colour alone)."""

    def block(label: str, code: str, colour: str, on: bool) -> str:
        border = f"3px solid {colour}" if on else "1px solid #ccc"
        background = _IN_USE_BACKGROUND if on else _IDLE_BACKGROUND
        return (
            f'<div style="flex: 1 1 300px; min-width: 0; border: {border}; '
            f'background: {background}; color: {_CODE_TEXT}; padding: 4px 8px; margin: 2px;">'
            f'<div style="font-weight: bold; color: {colour};">{html.escape(label)}'
            f"{' (in use)' if on else ''}</div>"
            # wrapped at spaces only (a long comment goes on to the next line); a word never
            # splits, and a token wider than the box scrolls inside it
            '<pre style="white-space: pre-wrap; overflow-wrap: normal; word-break: normal; '
            'overflow-x: auto; font-size: 12px; margin: 2px 0;">'
            f"<code>{html.escape(code)}</code></pre></div>"
        )

    return (
        '<div style="display: flex; flex-wrap: wrap;">'
        + block("the mistake", mistake, _MISTAKE_RED, active == "mistake")
        + block("the fix", fix, _FIX_GREEN, active == "fix")
        + "</div>"
    )


class MistakeExplorer(Explorer):
    """One of the four mistakes, its fix a click away, with weights and consequences drawn.

    ``name`` is a key of `MISTAKES`. Controls: ``version`` (ToggleButtons:
    "mistake" or "fix"), and for "scale as a knob" also ``growth`` (how much
    the queries and keys have grown: 1, 2, 4, 8). ``code`` is the HTML widget
    with the two lines, shown above the figure. After each update:
    ``weights`` (the matrix drawn on the left), ``consequence`` (the numbers
    on the right) and ``finding`` (the right panel's title, computed from
    them). Raises ValueError for an unknown name.
    """

    def __init__(self, name: str) -> None:
        if name not in MISTAKES:
            raise ValueError(f"unknown mistake {name!r}; choose one of {list(MISTAKES)}")
        self.name = name
        self.spec = MISTAKES[name]
        setups: dict[str, Callable[[], None]] = {
            "model width": self._setup_model_width,
            "wrong axis": self._setup_wrong_axis,
            "mask after softmax": self._setup_mask_after,
            "scale as a knob": self._setup_knob,
        }
        fig = self._make_figure(figsize=(8.4, 3.6), layout="constrained")
        self.ax_weights, self.ax_effect = fig.subplots(1, 2, width_ratios=(1, 1.25))
        fig.suptitle(self.spec.title, fontsize=11)
        self.version = fit_label(
            widgets.ToggleButtons(options=_VERSIONS, value="mistake", description="run")
        )
        self.version.style.button_width = "auto"
        self.version.layout.width = "auto"
        self.code = widgets.HTML()
        self.above = [self.code]
        setups[name]()
        self.image = self.ax_weights.imshow(
            np.zeros_like(self._weights_for("mistake")),
            vmin=0,
            vmax=1,
            cmap="viridis",
            interpolation="nearest",
        )
        self.ax_weights.set_xlabel("key")
        self.ax_weights.set_ylabel("query")
        fig.colorbar(self.image, ax=self.ax_weights, label="weight", shrink=0.9)
        self._watch(self.version, *getattr(self, "_extra_controls", []))
        self.live = [self.image, self.ax_weights.title, self.ax_effect.title, *self._effect_live]
        self.update()

    # -- inputs, as the run_* function of each mistake makes them -------------------------
    def _setup_model_width(self, d_model: int = 512, n_heads: int = 8, length: int = 16) -> None:
        self.q, self.k = multi_head_qk(d_model, n_heads, length)  # (H, L, dh) each
        self.scales = {"mistake": 1 / math.sqrt(d_model), "fix": 1 / math.sqrt(d_model // n_heads)}
        heads = np.arange(1, n_heads + 1)  # (H,)
        self.effect_bars = self.ax_effect.bar(heads, np.zeros(n_heads), color=ORANGE)
        uniform = self.ax_effect.axhline(1 / length, color="gray", ls="--", lw=1)
        uniform.set_label(f"uniform (1/{length})")
        self.ax_effect.set_ylim(0, 0.6)
        self.ax_effect.set_xticks(heads)
        self.ax_effect.set_xlabel("head")
        self.ax_effect.set_ylabel("mean top weight")
        self.ax_effect.legend(loc="upper right", fontsize=8)
        self._effect_live = [*self.effect_bars, uniform]

    def _setup_wrong_axis(self, length: int = 5, width: int = 16) -> None:
        q, k = random_rows(length, width, 2)  # (L, E) each
        self.scores = q @ k.T / math.sqrt(width)  # (L, L)
        self._row_sum_panel(length)

    def _setup_mask_after(self, length: int = 6, width: int = 8) -> None:
        self.q, self.k, self.v = random_rows(length, width, 3)  # (L, E) each
        self.keep = np.tril(np.ones((length, length), dtype=bool))  # (L, L) causal
        self.scores = self.q @ self.k.T / math.sqrt(width)  # (L, L)
        self._row_sum_panel(length)

    def _setup_knob(self, width: int = 64, length: int = 16, tuned_at: float = 2.0) -> None:
        self.q, self.k = random_rows(length, width, 2)  # (L, E) each
        self.tuned = 1.0 / math.sqrt(width) / tuned_at**2
        self.tuned_at = tuned_at
        self.growth = fit_slider(
            widgets.SelectionSlider(
                options=[(f"{g}×", g) for g in _GROWTHS], value=2, description="q and k grown"
            ),
            track_px=160,
        )
        self._extra_controls = [self.growth]
        tops = {
            version: [self._top_at(version, g) for g in _GROWTHS] for version in ("mistake", "fix")
        }
        self.knob_curves = tops
        for version, style, colour, label in (
            ("mistake", "o-", BLUE, f"scale tuned at growth {tuned_at:g}"),
            ("fix", "s-", GREEN, "QK normalisation"),
        ):
            self.ax_effect.plot(_GROWTHS, tops[version], style, color=colour, label=label)
        (self.knob_marker,) = self.ax_effect.plot(
            [2], [0], "o", color="black", ms=14, mfc="none", mew=2, label="in use"
        )
        self.ax_effect.axhline(0.9, color=VERMILLION, ls=":", lw=1, label="collapsed (0.9)")
        self.ax_effect.set_xscale("log", base=2)
        self.ax_effect.set_xticks(_GROWTHS, [f"{g}×" for g in _GROWTHS])
        self.ax_effect.minorticks_off()
        self.ax_effect.set_ylim(0, 1.05)
        self.ax_effect.set_xlabel("growth of q and k during training")
        self.ax_effect.set_ylabel("mean top weight")
        self.ax_effect.legend(loc="center right", fontsize=8)
        self._effect_live = [self.knob_marker]

    def _row_sum_panel(self, length: int) -> None:
        rows = np.arange(length)  # (L,)
        self.effect_bars = self.ax_effect.bar(rows, np.zeros(length), color=ORANGE)
        ones = self.ax_effect.axhline(1, color="gray", ls="--", lw=1, label="must be 1")
        self.ax_effect.set_ylim(0, 1.6)
        self.ax_effect.set_xticks(rows)
        self.ax_effect.set_xlabel("query (row of the weights)")
        self.ax_effect.set_ylabel("row sum of the weights")
        self.ax_effect.legend(loc="upper right", fontsize=8)
        self._effect_live = [*self.effect_bars, ones]

    # -- numbers ---------------------------------------------------------------------------
    def _top_at(self, version: str, growth: float) -> float:
        q, k = growth * self.q, growth * self.k  # (L, E) each
        if version == "mistake":
            weights = attention_weights(q, k, scale=self.tuned)  # (L, L)
        else:
            weights = qk_normalised_weights(q, k)  # (L, L)
        return float(weights.max(axis=-1).mean())

    def _weights_for(self, version: str) -> np.ndarray:
        """The weights the ``version`` computes, as drawn (head 0 for the multi-head layer)."""
        if self.name == "model width":
            return attention_weights(self.q, self.k, scale=self.scales[version])[0]  # (L, L)
        if self.name == "wrong axis":
            return softmax(self.scores, axis=0 if version == "mistake" else -1)  # (L, L)
        if self.name == "mask after softmax":
            if version == "mistake":
                return softmax(self.scores, axis=-1) * self.keep  # (L, L)
            return softmax(np.where(self.keep, self.scores, -np.inf), axis=-1)  # (L, L)
        growth = self.growth.value if hasattr(self, "growth") else 2
        q, k = growth * self.q, growth * self.k  # (L, E)
        if version == "mistake":
            return attention_weights(q, k, scale=self.tuned)  # (L, L)
        return qk_normalised_weights(q, k)  # (L, L)

    def future_leak(self, version: str) -> float:
        """How far earlier outputs move when the last key and value change (mask mistake)."""

        def attend(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
            if version == "mistake":
                return attend_mask_after_softmax(q, k, v, self.keep)  # (L, E)
            return scaled_dot_product_attention(q, k, v, is_causal=True)  # (L, E)

        return future_leak(attend, self.q, self.k, self.v)

    # -- drawing ---------------------------------------------------------------------------
    def update(self) -> None:
        version = self.version.value
        self.code.value = code_pair_html(self.spec.mistake, self.spec.fix, version)
        self.weights = weights = self._weights_for(version)  # (L, S)
        self.image.set_data(weights)
        which = "the mistake" if version == "mistake" else "the fix"
        self.ax_weights.set_title(f"weights with {which}", fontsize=10)
        if self.name == "model width":
            tops = attention_weights(self.q, self.k, scale=self.scales[version]).max(-1).mean(-1)
            self.consequence = {"mean top weight per head": tops}  # (H,)
            for bar, top in zip(self.effect_bars, tops, strict=True):
                bar.set_height(top)
            spread = float((self.q @ self.k.swapaxes(-1, -2) * self.scales[version]).std())
            self.finding = f"logit spread {spread:.2f}; mean top weight {tops.mean():.2f}"
        elif self.name in ("wrong axis", "mask after softmax"):
            sums = weights.sum(axis=-1)  # (L,)
            self.consequence = {"row sums": sums}
            for bar, total in zip(self.effect_bars, sums, strict=True):
                bar.set_height(total)
            ok = bool(np.allclose(sums, 1.0))
            self.finding = (
                "every row sums to 1"
                if ok
                else f"row sums {sums.min():.2f} to {sums.max():.2f}, not 1"
            )
            if self.name == "mask after softmax":
                leak = self.future_leak(version)
                self.consequence["future leak"] = leak
                self.finding += (
                    f";\nthe last key moves earlier outputs by {leak:.2g}"
                    if leak > 1e-9
                    else ";\nthe last key cannot move earlier outputs"
                )
        else:
            g = self.growth.value
            top = self._top_at(version, g)
            self.consequence = {"mean top weight": top, "growth": g}
            self.knob_marker.set_data([g], [top])
            state = "collapsed (above 0.9)" if top > 0.9 else "not collapsed"
            self.finding = f"at {g}× growth: mean top weight {top:.2f},\n{state}"
        self.ax_effect.set_title(self.finding, fontsize=10)

    def describe(self) -> str:
        """Which version runs, the weights' shape, and the finding the right panel states."""
        which = "the mistake" if self.version.value == "mistake" else "the fix"
        queries, keys = self.weights.shape
        finding = " ".join(self.finding.split())
        return (
            f"{self.spec.title}, running {which}: a heatmap of the weights of {queries} "
            f"queries over {keys} keys; {finding}"
        )


# -- results as tables -------------------------------------------------------------------

_GROWTH_KEY = re.compile(r"^(g=[^:]+): (.+)$")


def _number(value: float) -> str:
    """A measurement as printed: rounding noise (below 1e-12) as a bound, not its digits."""
    if abs(value) < 1e-12:
        return "< 1e-12"
    if float(value).is_integer() and abs(value) < 1e6:
        return f"{int(value)}"
    return f"{value:.4g}"


class MistakeTable:
    """A `MistakeRun` as a table: its measurements, then what each check said.

    Renders as HTML in a notebook (``_repr_html_``) and as aligned plain text
    elsewhere. Measurements named ``"g=2: top weight, tuned"`` (one row per
    growth) become one row per g and one column per measurement.
    """

    def __init__(self, run: MistakeRun) -> None:
        self.run = run

    def rows(self) -> tuple[list[str], list[list[str]]]:
        """(header, rows) of the measurements table."""
        numbers = self.run.numbers
        grouped: dict[str, dict[str, float]] = {}
        for name, value in numbers.items():
            found = _GROWTH_KEY.match(name)
            if not found:
                break
            grouped.setdefault(found.group(1), {})[found.group(2)] = value
        else:
            if grouped:
                columns = list(next(iter(grouped.values())))
                header = ["growth", *columns]
                rows = [
                    [g.removeprefix("g="), *(_number(v[c]) for c in columns)]
                    for g, v in grouped.items()
                ]
                return header, rows
        return ["measurement", "value"], [[name, _number(v)] for name, v in numbers.items()]

    def checks(self) -> list[tuple[str, str]]:
        """(which version, what its check said)."""
        return [
            ("the mistake", self.run.caught or "NOT caught"),
            ("the fix", "passes" if self.run.correct_passes else "FAILS"),
        ]

    def _repr_html_(self) -> str:
        header, rows = self.rows()
        head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>"
            for row in rows
        )
        checks = "".join(
            f"<tr><td>{html.escape(who)}</td><td>{html.escape(said)}</td></tr>"
            for who, said in self.checks()
        )
        return (
            f"<p><b>{html.escape(self.run.title)}</b></p>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
            f"<table><thead><tr><th>check on</th><th>what it said</th></tr></thead>"
            f"<tbody>{checks}</tbody></table>"
        )

    def __str__(self) -> str:
        header, rows = self.rows()
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        lines = [self.run.title]
        for row in [header, *rows]:
            cells = "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True))
            lines.append(("  " + cells).rstrip())
        lines += [f"  check on {who}: {said}" for who, said in self.checks()]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))
