"""Every explorer notebook on a laptop: still pictures first, then a fit at 1280x800 and 1024x768.

The checks that test_notebooks_in_browser.py runs on each notebook that shows
an explorer, in the page its other tests use (one open and one Run All serve
both; the page opens at 1280 x 800, JupyterLab's file browser open as it
opens by default). The notebooks are served as committed (a scratch copy):
their saved outputs are exactly what a learner's first open of a fresh clone
shows.

1. **First open** (the notebook is untrusted, as a fresh clone is), read
   before Run All: every widget output shows exactly one picture and the
   one-line note "run the notebook to move the sliders", never the widget's
   text (``VBox(...``) or "Error displaying widget" (`check_still_pictures`).
2. **After Run All, at 1280 x 800**: every explorer is at most 640 px tall
   (controls and figure seen at once in the 679 px notebook area), its figure
   no wider than its cell, no control label or readout cut (``scrollWidth >
   clientWidth``), every slider's track at least 150 px, every row of toggle
   buttons on one line, the picture keeping its figure's shape, and no
   output wider than its cell (`check_fit`, `check_outputs_fit`). (Text
   inside the figures is checked in Python, every explorer at every setting:
   tests/explorers/test_explorers_captions.py.)
3. **The same page at 1024 x 768**: the same checks; the pictures scale to
   the narrower cell.
4. **Save, close, reopen** (now trusted, no kernel has run it), last: every
   explorer shows its last picture (its Image's saved state) and the note,
   its dead controls hidden, never "Error displaying widget: model not found".

Screenshots of each step land in the session's temporary folder (printed
with ``-s``).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import labdriver

MAX_EXPLORER_PX = 640
MIN_TRACK_PX = 150
REOPEN_TIMEOUT_S = 120  # bounds the wait for the saved widget state to be shown
SIZES = {"laptop": (1280, 800), "small": (1024, 768)}
STILL_NOTE = "run the notebook (Run ▸ Run All Cells) to move the sliders"
SETTLE_MS = 1500  # after a resize: the layout and the pictures settle


@cache
def _explorer_notebooks() -> frozenset[str]:
    names = set()
    for path in labdriver.numbered_notebooks():
        cells = json.loads(path.read_text())["cells"]
        if any("Explorer(" in "".join(c["source"]) for c in cells if c["cell_type"] == "code"):
            names.add(path.name)
    return frozenset(names)


def shows_an_explorer(name: str) -> bool:
    """Whether the numbered notebook ``name`` displays an explorer (its source builds one)."""
    return name in _explorer_notebooks()


def resize(page: labdriver.NotebookPage, size: str) -> None:
    """The page's viewport at ``SIZES[size]``, once its layout has settled (no-op if there)."""
    if getattr(page, "size", "laptop") == size:
        return
    width, height = SIZES[size]
    page.page.set_viewport_size({"width": width, "height": height})
    page.page.wait_for_timeout(SETTLE_MS)
    page.size = size


def screenshot(page: labdriver.NotebookPage, folder: Path, label: str) -> Path:
    """The page with its first explorer (or still picture) scrolled into view, as a PNG."""
    page.page.evaluate(
        "() => { const b = document.querySelector('.al-explorer, .al-still');"
        " if (b) b.scrollIntoView(); }"
    )
    page.page.wait_for_timeout(300)
    path = folder / f"{page.path.removesuffix('.ipynb')}-{label}.png"
    page.page.screenshot(path=str(path))
    print(f"screenshot: {path}")
    return path


def check_still_pictures(outputs: list[dict], *, trusted: bool) -> None:
    assert any(o.get("explorer") or o.get("still") for o in outputs), "no explorer output"
    for out in outputs:
        where = f"cell {out['cell']}"
        assert not out.get("missing"), f"{where}: output not rendered"
        assert out["trusted"] is trusted, f"{where}: trusted={out['trusted']}"
        assert "Error displaying widget" not in out["text"], f"{where}: {out['text'][:200]}"
        assert "VBox(" not in out["text"] and "children=" not in out["text"], out["text"][:200]
        if out["explorer"] or out["still"]:  # other widgets: no error, no text repr, is enough
            assert len(out["images"]) == 1, f"{where}: {len(out['images'])} pictures"
            assert out["images"][0]["complete"] and out["images"][0]["natural"] > 0
            assert not out["controlsShown"], f"{where}: dead controls shown beside the picture"
            assert STILL_NOTE in out["text"], f"{where}: no still note: {out['text'][:200]}"


def check_fit(layout: dict, size: str) -> None:
    explorers = layout["explorers"]
    assert explorers, "no explorer box in the page after Run All"
    for e in explorers:
        what = f"explorer {e['box']} at {size}"
        assert e["height"] <= MAX_EXPLORER_PX, f"{what}: {e['height']:.0f} px tall"
        assert e["figureWidth"] <= e["cell"] + 0.5, f"{what}: figure {e['figureWidth']:.0f} px"
        assert e["figureRight"] <= 0.5, f"{what}: figure clipped by {e['figureRight']:.0f} px"
        assert e["cutTexts"] == [], f"{what}: cut labels {e['cutTexts']}"
        narrow = [s for s in e["sliders"] if s["width"] < MIN_TRACK_PX]
        assert narrow == [], f"{what}: slider tracks under {MIN_TRACK_PX} px: {narrow}"
        wrapped = [t for t in e["toggles"] if t["rows"] > 1]
        assert wrapped == [], f"{what}: toggle buttons on several lines: {wrapped}"
        assert abs(e["aspect"] - 1) < 0.02, f"{what}: picture stretched ({e['aspect']:.3f})"


def check_outputs_fit(layout: dict, size: str) -> None:
    assert layout["overflowing"] == [], f"outputs wider than their cell at {size}"
    wide = [p for p in layout["pictures"] if p["right"] > 0.5]
    assert wide == [], f"pictures past their cell's right edge at {size}: {wide}"
