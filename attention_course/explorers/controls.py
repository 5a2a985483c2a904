"""The head-width and scale controls shared by the developer and researcher explorers.

One definition, so every notebook offers the same choices with the same
names: a head width d (powers of two) and a scale rule (none, 1/sqrt(d), 1/d,
or a free multiplier c).
"""

from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as widgets

from attention_lib.scales import scale_for

__all__ = ["RULE_LABELS", "SLIDER_TRACK_PX", "WidthAndScale", "fit_label", "fit_slider"]

RULE_LABELS = (("none", "none"), ("1/√d", "1/sqrt(d)"), ("1/d", "1/d"), ("custom c", "custom"))

#: The width of a slider's track: a learner can place it, and the browser test's floor is 150.
SLIDER_TRACK_PX = 200
_READOUT_PX = 72  # ipywidgets' readout: at least --jp-widgets-inline-width-tiny
_MARGINS_PX = 30  # the label's margin and the track's insets for the handle
_CHAR_PX = 7.5  # a generous average width of one character of JupyterLab's 13 px UI font


def _text_px(text: str) -> int:
    return int(len(text) * _CHAR_PX) + 8


def fit_label(control: widgets.Widget) -> widgets.Widget:
    """Give ``control``'s description all the room it needs (no "head widt…"); returns it."""
    control.style.description_width = "initial"
    return control


def fit_slider(slider: widgets.Widget, track_px: int = SLIDER_TRACK_PX) -> widgets.Widget:
    """Size a slider so its label shows whole and its track is ``track_px`` wide; returns it.

    ipywidgets gives a slider a fixed total width (300 px) shared by label, track
    and readout, so a long label squeezes the track; this sets the total from the
    label's length instead.
    """
    fit_label(slider)
    total = _text_px(slider.description) + track_px + _READOUT_PX + _MARGINS_PX
    slider.layout.width = f"{total}px"
    return slider


class WidthAndScale:
    """Mixin for an `Explorer`: ``self.width``, ``self.rule``, ``self.multiplier``.

    Call `_make_width_and_scale` in ``__init__`` before ``_watch``-ing them;
    `scale` is the number the current width's raw logits are multiplied by.
    """

    width: widgets.SelectionSlider
    rule: widgets.ToggleButtons
    multiplier: widgets.FloatLogSlider

    def _make_width_and_scale(self, widths: Sequence[int], width: int) -> None:
        self.width = fit_slider(
            widgets.SelectionSlider(
                options=[(str(d), d) for d in widths],
                value=width,
                description="head width d",
                continuous_update=True,
            )
        )
        self.rule = fit_label(
            widgets.ToggleButtons(options=RULE_LABELS, value="1/sqrt(d)", description="scale")
        )
        self.rule.style.button_width = "auto"  # each button as wide as its label
        self.rule.layout.width = "auto"  # the label and the buttons on one line
        self.multiplier = fit_slider(
            widgets.FloatLogSlider(
                value=1.0, base=10, min=-3, max=2, step=0.1, description="c", readout_format=".3g"
            )
        )

    @property
    def scale(self) -> float:
        """The number the current width's raw logits are multiplied by."""
        return scale_for(self.rule.value, self.width.value, self.multiplier.value)

    def setting(self) -> str:
        """The current width and rule, as the explorers' `describe` lines begin."""
        return f"d = {self.width.value}, scale rule {self.rule.value} (logits × {self.scale:.4g})"

    def _sync_multiplier(self) -> None:
        """The multiplier only means something under the custom rule."""
        self.multiplier.disabled = self.rule.value != "custom"
