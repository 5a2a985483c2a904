"""The course opens wherever notebooks open: plain JupyterLab, Notebook 7 and Voila.

``make lab`` is tested by test_notebooks_in_browser.py. Here, in the same real
Chromium, the other front ends this machine can run:

- **plain lab**: ``jupyter lab`` started with none of the course's settings
  (``jupyter/labconfig``), as a learner who skips ``make`` starts it;
- **Notebook 7**: ``jupyter notebook``;
- **Voila**: ``voila notebooks/NN_….ipynb``, run in the repository as the
  README says (it reads ``voila.json`` there), which runs the notebook on the
  server and shows it as an app.

For each, on each notebook: Run All gives no error output (a cell that raises
on purpose, tagged ``raises-exception``, shows its own message: in Voila the
error's name and text, never "There was an error when executing cell"), every
explorer is drawn (its picture not blank), every still figure the notebook
lists (`support.STILL_FIGURES`) is a drawn picture with its text alternative,
and moving a slider redraws the picture. ``make test`` runs notebook 01 (five
explorers, the trained model among them) in each front end; the soak (``make
test-soak``) runs them all.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from stills import check_still_figures

import labdriver
from attention_course.explorers.registry import shown_in

FRONT_ENDS = ("lab", "notebook", "voila")
QUICK = "01_beginner_crowded_room.ipynb"
ALL = [path.name for path in labdriver.numbered_notebooks()]
VOILA_HIDDEN_ERROR = "There was an error when executing cell"
OPEN_TIMEOUT_MS = labdriver.OPEN_TIMEOUT_MS
MOVE_TIMEOUT_MS = labdriver.MOVE_TIMEOUT_MS


def explorers_in(name: str) -> int:
    return sum(shown_in(name.removesuffix(".ipynb")).values())


def deliberate_errors(name: str) -> list[str]:
    """``ename: evalue`` of each error the committed notebook shows on purpose."""
    nb = json.loads((labdriver.REPO / "notebooks" / name).read_text(encoding="utf-8"))
    return [
        f"{o['ename']}: {o['evalue']}".splitlines()[0]
        for c in nb["cells"]
        if "raises-exception" in c.get("metadata", {}).get("tags", [])
        for o in c.get("outputs", [])
        if o["output_type"] == "error"
    ]


def check_pictures(page, name: str, where: str) -> None:
    """Every explorer drawn and every still figure shown, as many as the notebook lists."""
    pictures = labdriver.pictures(page)
    assert len(pictures) == explorers_in(name), f"{where}: {len(pictures)} explorer pictures"
    blank = [p for p in pictures if not (p["width"] and p["draws"] and p["inked"])]
    assert blank == [], f"{where}: blank pictures {blank}"
    check_still_figures(page, name, where)


# -- plain JupyterLab and Notebook 7: the page driver's own waits ----------------------


def run_in_notebook_ui(
    chromium, server, name: str, ui: str, where: str, *, folder: str = "", context=None
) -> None:
    """Run All, check the outputs and pictures, move a slider. ``folder``: where the notebook
    is under the server's root; ``context``: a logged-in browser context (a hub learner's)."""
    page = labdriver.NotebookPage.open(
        chromium,
        server,
        folder + name,
        workspace=f"fe-{name[:2]}",
        viewport=(1280, 800),
        ui=ui,
        context=context,
    )
    try:
        page.run_all()
        errors = [  # none but the deliberate ones
            f"cell {c['index']}: {o['ename']}: {o['evalue']}"
            for c in page.cells()
            if "raises-exception" not in c["tags"]
            for o in c["outputs"]
            if o["output_type"] == "error"
        ]
        assert errors == [], f"{where}: error outputs after Run All: {errors}"
        # the page renders its outputs from these (off-screen cells may not be laid out)
        raised = [
            f"{o['ename']}: {o['evalue']}".splitlines()[0]
            for c in page.cells()
            for o in c["outputs"]
            if o["output_type"] == "error"
        ]
        assert raised == deliberate_errors(name), f"{where}: errors {raised}"
        check_pictures(page, name, where)
        sliders = [
            c for box in page.controls() for c in box if c["kind"] == "slider" and not c["disabled"]
        ]
        if sliders:
            control = sliders[0]
            page.scroll_to(control)
            # Notebook 7 keeps arrow keys from a slider's handle: there a learner clicks
            key = "ArrowLeft" if control["atMax"] else "ArrowRight"
            action = {"lab": key, "notebook": "track:0.9" if not control["atMax"] else "track:0.1"}
            move = page.move(control, action[ui])
            assert move.changed_pixels, f"{where}: moving {control['description']!r} redrew nothing"
    finally:
        page.close()


# -- Voila: no notebook, no cells; the page is the app -----------------------------------

_JS_VOILA_ERRORS = """() => Array.from(document.querySelectorAll(
  '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'))
  .map((n) => n.innerText)"""
_JS_DRAWN = """(n) => window.__alBoxes().length === n
  && window.__alBoxes().every((_, b) => (window.__alPicture(b).__draws || []).length > 0)"""
_JS_REDRAWN = """([b, since]) => {
  const frame = window.__frames.find((t) => t >= since);
  return frame !== undefined && (window.__alPicture(b).__draws || []).some((t) => t > frame);
}"""


def run_in_voila(chromium, tmp_path: Path, name: str, where: str) -> None:
    expected = explorers_in(name)
    server = labdriver.start_front_end(tmp_path, "voila", name)
    context = chromium.new_context(viewport={"width": 1280, "height": 800})
    try:
        page = context.new_page()
        page.add_init_script(labdriver.sources.js("init") + labdriver.sources.js("trace"))
        page.set_default_timeout(MOVE_TIMEOUT_MS)
        # Voila runs the whole notebook before it sends the page
        page.goto(server.url + "/", wait_until="load", timeout=OPEN_TIMEOUT_MS)
        page.wait_for_function(_JS_DRAWN, arg=expected, timeout=OPEN_TIMEOUT_MS, polling=250)
        text = page.inner_text("body")
        assert VOILA_HIDDEN_ERROR not in text, f"{where}: an error shown without its message"
        errors = [e for e in page.evaluate(_JS_VOILA_ERRORS) if "Error" in e or "Traceback" in e]
        deliberate = deliberate_errors(name)
        for message in deliberate:
            assert message in text, f"{where}: the deliberate error {message!r} is not shown"
        assert len(errors) == len(deliberate), f"{where}: error outputs {errors}"
        check_pictures(page, name, where)
        controls = page.evaluate(labdriver.sources.js("controls"))
        sliders = [
            c for box in controls for c in box if c["kind"] == "slider" and not c["disabled"]
        ]
        if sliders:
            slider = sliders[0]
            box = page.locator(".al-explorer:has(> img.widget-image)").nth(slider["box"])
            handle = box.locator(".widget-hslider").nth(slider["nth"]).locator(".noUi-handle")
            before = page.evaluate(labdriver.sources.js("canvas"), slider["box"])
            since = page.evaluate("() => performance.now()")
            handle.scroll_into_view_if_needed()
            handle.focus()
            page.keyboard.press("ArrowLeft" if slider["atMax"] else "ArrowRight")
            page.wait_for_function(_JS_REDRAWN, arg=[slider["box"], since], polling=100)
            after = page.evaluate(labdriver.sources.js("canvas"), slider["box"])
            assert after["hash"] != before["hash"], f"{where}: the slider redrew nothing"
    finally:
        context.close()
        server.stop()


@pytest.fixture(scope="module")
def servers(chromium_ready, tmp_path_factory):
    """Plain JupyterLab and Notebook 7, each on a scratch copy of the notebooks, started once."""
    started = {}
    try:
        for ui in ("lab", "notebook"):
            started[ui] = labdriver.start_front_end(tmp_path_factory.mktemp(ui), ui)
        yield started
    finally:
        for server in started.values():
            server.stop()


def _run(front_end, name, servers, chromium, tmp_path):
    where = f"{front_end}, {name}"
    if front_end == "voila":
        run_in_voila(chromium, tmp_path, name, where)
    else:
        run_in_notebook_ui(chromium, servers[front_end], name, front_end, where)


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_notebook_01_runs_draws_and_moves(front_end, servers, chromium, tmp_path):
    _run(front_end, QUICK, servers, chromium, tmp_path)


@pytest.mark.soak
@pytest.mark.parametrize("name", ALL, ids=[n.removesuffix(".ipynb") for n in ALL])
@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_every_notebook_runs_draws_and_moves(front_end, name, servers, chromium, tmp_path):
    _run(front_end, name, servers, chromium, tmp_path)
