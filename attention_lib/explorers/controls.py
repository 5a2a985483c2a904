"""The head-width and scale controls shared by the developer and researcher explorers.

One definition, so every notebook offers the same choices with the same
names: a head width d (powers of two) and a scale rule (none, 1/sqrt(d), 1/d,
or a free multiplier c).
"""

from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as widgets

from ..lessons.scaling_stats import scale_for

__all__ = ["RULE_LABELS", "WidthAndScale"]

RULE_LABELS = (("none", "none"), ("1/√d", "1/sqrt(d)"), ("1/d", "1/d"), ("custom c", "custom"))


class WidthAndScale:
    """Mixin for an `Explorer`: ``self.width``, ``self.rule``, ``self.multiplier``.

    Call `_make_width_and_scale` in ``__init__`` before ``_watch``-ing them;
    `scale` is the number the current width's raw logits are multiplied by.
    """

    width: widgets.SelectionSlider
    rule: widgets.ToggleButtons
    multiplier: widgets.FloatLogSlider

    def _make_width_and_scale(self, widths: Sequence[int], width: int) -> None:
        self.width = widgets.SelectionSlider(
            options=[(str(d), d) for d in widths],
            value=width,
            description="head width d",
            continuous_update=True,
            style={"description_width": "initial"},
        )
        self.rule = widgets.ToggleButtons(
            options=RULE_LABELS,
            value="1/sqrt(d)",
            description="scale",
            style={"button_width": "68px"},
        )
        self.multiplier = widgets.FloatLogSlider(
            value=1.0, base=10, min=-3, max=2, step=0.1, description="c", readout_format=".3g"
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
