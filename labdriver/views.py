"""What a notebook page shows: its widget outputs, its layout, one picture's frame trace.

Read from the page as it is, for the tests of layout, still pictures and blank
explorers (what ``explorers/canvas.py`` promises): `widget_outputs` (every
widget output's text, images and explorer pictures, with how much ink each
picture holds), `layout` (every explorer box's size, cut texts, sliders and
toggles; outputs wider than their area) and `frame_trace` (one picture's
frames followed from the kernel's messages to its <img>, from ``trace.js``).
"""

from __future__ import annotations

from typing import Any

from .page import NotebookPage
from .sources import js

__all__ = ["frame_trace", "layout", "pictures", "widget_outputs"]

_JS_WIDGET_OUTPUTS = js("widget_outputs")
_JS_LAYOUT = js("layout")
_JS_PICTURES = js("pictures")


def widget_outputs(page: NotebookPage) -> list[dict]:
    """Every widget output of the notebook as shown: its text, visible images and pictures.

    Each explorer picture (``pictures``) reports its size in pixels and
    ``inked``, a count of sampled pixels that are drawn and dark (0 for a
    blank picture); ``controlsShown``, whether any explorer control shows.
    ``explorer``: the output holds an explorer's box (the live widget, or one
    rebuilt from saved state); ``still``: it holds an explorer's still picture.
    """
    return page.page.evaluate(_JS_WIDGET_OUTPUTS)


def pictures(page: Any) -> list[dict]:
    """Every explorer picture in ``page`` (a Playwright page, or a `NotebookPage`), in any
    front end: its size, its draws so far and ``inked`` (0 when blank)."""
    return getattr(page, "page", page).evaluate(_JS_PICTURES)


def frame_trace(page: NotebookPage, output: dict, since: float = 0.0) -> list[str]:
    """The frame trace (``trace.js``) of one widget output's picture, one line per step.

    ``output`` is an entry of `widget_outputs`. Its box's model names its
    Image model (a child of the box); that model's binary messages give the
    byte counts of its frames, which name their blob URLs, which name the
    <img> they were loaded in. Every step on that chain after ``since`` (a
    performance.now() time) is listed, times in ms from the first.
    """
    trace = [e for e in page.page.evaluate("() => window.__trace") if e["t"] >= since]
    opened = {e["comm"]: e for e in trace if e["e"] == "open"}

    def images_in(comm: str, depth: int = 0) -> set[str]:
        entry = opened.get(comm, {})
        if entry.get("model") == "ImageModel":
            return {comm}
        found: set[str] = set()
        for child in entry.get("children") or []:
            if depth < 4 and isinstance(child, str):
                found |= images_in(child.removeprefix("IPY_MODEL_"), depth + 1)
        return found

    comms = images_in(output["model"])
    frames = {e["bytes"] for e in trace if e["e"] in ("msg", "open") and e.get("comm") in comms} - {
        None
    }
    urls = {e["url"] for e in trace if e["e"] == "blob" and e["bytes"] in frames}
    views = {p["trace"] for p in output.get("pictures", [])}
    images = views | {e["img"] for e in trace if e["e"] == "src" and e["url"] in urls}
    chain = [
        e for e in trace if e.get("comm") in comms or e.get("url") in urls or e.get("img") in images
    ]
    if not chain:
        return [f"no trace for model {output['model']} (Image models {sorted(comms)})"]
    start = chain[0]["t"]
    names = {"comm", "t", "e"}
    return [
        f"{e['t'] - start:9.1f} {e['e']:<6} "
        + " ".join(f"{k}={v}" for k, v in e.items() if k not in names and v is not None)
        for e in chain
    ]


def layout(page: NotebookPage) -> dict:
    """How the notebook's explorers and pictures sit in the page at its current size.

    ``explorers``: per explorer box, its height and width, its output area's
    width (``cell``), its figure's width and how far its right edge passes the
    area's (``figureRight`` > 0: clipped), the control texts that are cut
    (``scrollWidth > clientWidth``), every slider's track width, how many rows
    each row of toggle buttons takes, and ``aspect``, the picture's shown
    aspect ratio over its own (1 when it keeps the figure's shape).
    ``overflowing``: output areas whose content is wider than they are.
    ``pictures``: every visible image and canvas in the outputs, with its
    right edge against its area's. ``notebookHeight``: the notebook's height.
    """
    return page.page.evaluate(_JS_LAYOUT)
