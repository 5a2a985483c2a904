"""Every explorer notebook on a laptop: still pictures first, then a fit at 1280x800 and 1024x768.

The notebooks are served as committed (a scratch copy, by a JupyterLab started
with ``scripts/lab``): their saved outputs are exactly what a learner's first
open of a fresh clone shows. Then, per notebook, in one page:

1. **First open** (the notebook is untrusted, as a fresh clone is): every
   widget output shows exactly one picture and the one-line note "run the
   notebook to move the sliders", never the widget's text (``VBox(...``) or
   "Error displaying widget".
2. **Run All at 1280 x 800**, JupyterLab's file browser open as it opens by
   default: every explorer is at most 640 px tall (controls and figure seen
   at once in the 679 px notebook area), its figure no wider than its cell,
   no control label or readout cut (``scrollWidth > clientWidth``), every
   slider's track at least 150 px, every row of toggle buttons on one line,
   no ipympl header, toolbar or resize handle, and no output wider than its
   cell. (Text inside the figures is checked in Python, every explorer at
   every setting: tests/explorers/test_explorers_captions.py.)
3. **The same page at 1024 x 768**: the same checks; the canvases scale to
   the narrower cell.
4. **Save, close, reopen** (now trusted, no kernel has run it): every
   explorer shows its still picture and the note again, never "Error
   displaying widget: model not found".

Screenshots of both sizes land in the test's temporary folder (printed with
``-s``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import labdriver

pytestmark = pytest.mark.browser

MAX_EXPLORER_PX = 640
MIN_TRACK_PX = 150
REOPEN_TIMEOUT_S = 120  # bounds the wait for the saved widget state to be shown
SIZES = {"laptop": (1280, 800), "small": (1024, 768)}
STILL_NOTE = "run the notebook (Run ▸ Run All Cells) to move the sliders"


def explorer_notebooks() -> list[str]:
    """The numbered notebooks that display an explorer (their source builds one)."""
    names = []
    for path in labdriver.numbered_notebooks():
        cells = json.loads(path.read_text())["cells"]
        if any("Explorer(" in "".join(c["source"]) for c in cells if c["cell_type"] == "code"):
            names.append(path.name)
    return names


NOTEBOOKS = explorer_notebooks()


@pytest.fixture(scope="session")
def committed_lab(chromium_ready, tmp_path_factory):
    """JupyterLab on its own scratch copy of the committed notebooks (the visits save them)."""
    with labdriver.scratch_lab(tmp_path_factory.mktemp("laptop-lab")) as server:
        yield server


class Visit:
    """One notebook's trip: first open, Run All, the two sizes, save and reopen."""

    def __init__(self, browser, server, name: str, shots: Path) -> None:
        self.browser, self.server, self.name, self.shots = browser, server, name, shots
        self.page = labdriver.open_notebook(
            browser, server, name, f"laptop-{name[:2]}", SIZES["laptop"]
        )
        self.ran = False
        self.size = "laptop"

    def run_all(self) -> None:
        if not self.ran:
            self.page.run_all()
            self.ran = True

    def resize(self, size: str) -> None:
        if size == self.size:
            return
        width, height = SIZES[size]
        self.page.page.set_viewport_size({"width": width, "height": height})
        self.page.page.wait_for_timeout(1500)  # let the layout and the canvases settle
        self.size = size

    def screenshot(self, label: str) -> Path:
        self.page.page.evaluate(
            "() => { const b = document.querySelector('.al-explorer, .al-still');"
            " if (b) b.scrollIntoView(); }"
        )
        self.page.page.wait_for_timeout(300)
        path = self.shots / f"{self.name.removesuffix('.ipynb')}-{label}.png"
        self.page.page.screenshot(path=str(path))
        print(f"screenshot: {path}")
        return path

    def reopen(self) -> None:
        self.run_all()
        labdriver.save_notebook(self.page)
        self.page.close()
        self.page = labdriver.open_notebook(
            self.browser, self.server, self.name, f"reopened-{self.name[:2]}", SIZES["laptop"]
        )
        self.size = "laptop"


@pytest.fixture(scope="module", params=NOTEBOOKS, ids=[n.removesuffix(".ipynb") for n in NOTEBOOKS])
def visit(request, committed_lab, chromium, tmp_path_factory):
    shots = tmp_path_factory.mktemp("screenshots")
    trip = Visit(chromium, committed_lab, request.param, shots)
    try:
        yield trip
    finally:
        trip.page.close()


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
            assert out["canvases"] == [], f"{where}: a live canvas beside the still picture"
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
        assert not e["header"] and not e["toolbar"], f"{what}: ipympl header or toolbar shown"
        assert e["handle"] == 0, f"{what}: ipympl's resize handle is drawn"


def check_outputs_fit(layout: dict, size: str) -> None:
    assert layout["overflowing"] == [], f"outputs wider than their cell at {size}"
    wide = [p for p in layout["pictures"] if p["right"] > 0.5]
    assert wide == [], f"pictures past their cell's right edge at {size}: {wide}"


def test_first_open_shows_still_pictures(visit):
    check_still_pictures(labdriver.widget_outputs(visit.page), trusted=False)
    visit.screenshot("first-open")


@pytest.mark.parametrize("size", list(SIZES))
def test_explorers_and_outputs_fit_the_screen(visit, size):
    visit.run_all()
    visit.resize(size)  # one resize per size: the layout is read once for both checks
    layout = labdriver.layout(visit.page)
    check_fit(layout, size)
    check_outputs_fit(layout, size)
    visit.screenshot(size)


def test_reopened_after_save_shows_still_pictures(visit):
    visit.reopen()
    # the saved widget state is restored some time after the page loads (seconds, on a
    # loaded machine): wait until the check holds, or report it as it stands at the end
    deadline = time.monotonic() + REOPEN_TIMEOUT_S
    while True:
        try:
            check_still_pictures(labdriver.widget_outputs(visit.page), trusted=True)
            break
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            visit.page.page.wait_for_timeout(500)
    visit.screenshot("reopened")
