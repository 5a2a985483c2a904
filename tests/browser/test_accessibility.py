"""The course for a screen reader and a keyboard: WCAG 2.1 AA in JupyterLab and on the static site.

For each numbered notebook, opened in JupyterLab (``make lab``'s, with the course's lab
extension, ``jupyter/labextensions``) and run (Run All):

- every explorer picture, and every answer's picture, has its text alternative as its
  ``alt``, and that alternative is a polite live region (``role="status"``); every widget
  slider is named by its label and reads the value its readout shows (``aria-valuetext``:
  a log-scale slider's readout, not its exponent);
- axe-core (pinned in labdriver/axe; `labdriver.a11y`) finds no critical or serious
  violation of WCAG 2.1 A and AA (nor of axe's best practices) in the notebook's content
  (its rendered markdown and its outputs; JupyterLab's own chrome is out of scope), in
  JupyterLab's light theme and its dark one; the notebook is audited a view at a time, as
  axe tests colour contrast only on screen (`labdriver.a11y.audit_scrolled`); the moderate
  and minor violations are printed;
- every control of every explorer is moved as a learner does, and after each move (once
  the control rests: the kernel sends the alternative after the frame) the picture's
  ``alt`` and the live region say what the kernel's explorer now says (``describe``),
  which says the numbers its figure draws (`labdriver.alternatives`);
- the keyboard alone works: Tab reaches each control of each explorer in turn, a key moves
  it (an arrow on a slider or a dropdown, Space on a toggle button or a checkbox), and the
  picture redraws and its alternative follows;
- saved, closed and reopened without a kernel, each explorer's saved picture still has its
  alternative (last: it closes the notebook's page).

And every page of the static site (``python -m course site``) passes axe-core the same way.

axe-core is installed by ``npm ci --prefix labdriver/axe``; without it these tests skip,
saying so (under CI they fail).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import laptop
import pytest

import labdriver
from attention_course.explorers.registry import shown_in
from labdriver import a11y
from labdriver.alternatives import check_alternative

pytestmark = pytest.mark.browser

KEYBOARD_TIMEOUT_MS = labdriver.MOVE_TIMEOUT_MS
ARROWS = 4  # arrow presses on a slider until its picture changes
STEP_WAIT_MS = 2_000  # for a frame after the kernel went quiet (it is on its way or none)
MAX_TABS = 60  # Tab presses through one explorer's controls (01's has 2 to 9 stops)
KEY_FOR = {"slider": "ArrowRight", "toggle": "Space", "checkbox": "Space", "dropdown": "ArrowDown"}
_AT_MAX = """() => document.activeElement.getAttribute('aria-valuenow')
  === document.activeElement.getAttribute('aria-valuemax')"""


@pytest.fixture(scope="session")
def axe_ready() -> None:
    reason = a11y.axe_missing()
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI is set and axe-core is missing: {reason}")
    pytest.skip(reason)


def _explorer_notebook(name: str) -> bool:
    return bool(shown_in(name.removesuffix(".ipynb")))


# -- what a screen reader is given ----------------------------------------------------------


def test_pictures_have_their_alternatives_and_sliders_their_names(notebook) -> None:
    given = a11y.accessible(notebook)
    explorers = sum(shown_in(notebook.path.removesuffix(".ipynb")).values())
    described = [p for p in given["pictures"] if p["box"] >= 0]
    assert len(described) == explorers, f"{len(described)} explorer pictures, {explorers} shown"
    failures = []
    for picture in given["pictures"]:
        where = f"picture of box {picture['box']}" if picture["box"] >= 0 else "answer picture"
        if not picture["text"]:
            failures.append(f"{where}: no text alternative")
        elif picture["alt"] != picture["text"]:
            failures.append(f"{where}: alt {picture['alt']!r}, alternative {picture['text']!r}")
        if (picture["role"], picture["live"]) != ("status", "polite"):
            failures.append(f"{where}: its alternative is not a polite live region: {picture}")
    for slider in given["sliders"]:
        if not slider["name"]:
            failures.append(f"a slider with no name: {slider}")
        if slider["valuetext"] != slider["readout"]:
            failures.append(
                f"slider {slider['name']!r} reads {slider['valuetext']!r}, "
                f"its readout shows {slider['readout']!r}"
            )
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("theme", [a11y.LIGHT, a11y.DARK])
def test_axe_finds_no_critical_or_serious_violation(notebook, axe_ready, theme) -> None:
    try:
        a11y.set_theme(notebook, theme)
        audit = a11y.audit_scrolled(notebook, include=a11y.NOTEBOOK_CONTENT)
    finally:
        a11y.set_theme(notebook, a11y.LIGHT)
    print(f"{notebook.path}, {theme}: {audit.by_impact()} ({audit.passes} rules passed)")
    others = audit.report(("moderate", "minor"))
    if others:
        print(others)
    assert not audit.gating(), f"{theme}:\n{audit.report(a11y.GATING)}"


# -- every move, said -----------------------------------------------------------------------


def _actions(control: dict) -> list[str]:
    """What a learner does to ``control`` here: a slider one step, then to its end and back
    to its start; each other toggle button; a checkbox twice; the next dropdown option."""
    if control["kind"] == "slider":
        return ["ArrowLeft" if control["atMax"] else "ArrowRight", "End", "Home"]
    if control["kind"] == "toggle":
        return [o for i, o in enumerate(control["options"]) if i != control["active"]][:3]
    if control["kind"] == "checkbox":
        return ["click", "click"]
    options = control["options"]
    return [options[(control["active"] + 1) % len(options)]] if len(options) > 1 else []


def _values(entry: dict) -> dict:
    return {c["attr"]: c["value"] for c in entry["controls"]}


def _moved(before: dict, after: dict, description: str) -> dict | None:
    """The kernel's explorer whose control called ``description`` changed value."""
    old = {e["key"]: _values(e) for e in before["explorers"]}
    for entry in after["explorers"]:
        for control in entry["controls"]:
            was = old.get(entry["key"], {}).get(control["attr"])
            if control["description"] == description and was != control["value"]:
                return entry
    return None


@pytest.mark.notebooks(only=_explorer_notebook)
def test_the_alternative_follows_every_move(notebook) -> None:
    laptop.resize(notebook, "laptop")
    state = notebook.probe()
    failures, log = [], []
    for b, box in enumerate(notebook.controls()):
        for j in range(len(box)):
            dom = notebook.controls()[b][j]
            for action in _actions(dom):
                dom = notebook.controls()[b][j]
                if dom["disabled"]:
                    break
                what = f"box {b} {dom['kind']} {dom['description']!r} ← {action}"
                try:
                    notebook.move(dom, action)
                except (labdriver.RedrawTimeout, labdriver.PlaywrightTimeout) as error:
                    failures.append(f"{what}: {str(error).splitlines()[0]}")
                    break
                new = notebook.probe()
                entry = _moved(state, new, dom["description"])
                state = new
                if entry is None:
                    continue  # already there (a slider at its end): nothing to say anew
                shown = a11y.described(notebook, b, {entry["alt"]})
                log.append(f"{what}: {shown['alt']}")
                if shown["alt"] != entry["alt"] or shown["text"] != entry["alt"]:
                    failures.append(
                        f"{what}: the page says {shown['alt']!r} (live region "
                        f"{shown['text']!r}), the kernel's explorer {entry['alt']!r}"
                    )
                    continue
                try:
                    check_alternative(entry["cls"], entry["alt"], _values(entry), entry["figure"])
                except AssertionError as error:
                    failures.append(f"{what}: {error}")
    print("\n".join(log))
    assert not failures, "\n".join(failures)


@pytest.mark.notebooks(only=_explorer_notebook)
def test_the_keyboard_alone_reaches_and_moves_every_control(notebook) -> None:
    page = notebook.page
    failures = []
    for b, box in enumerate(notebook.controls()):
        expected = {(c["kind"], c["nth"]) for c in box if not c["disabled"]}
        first = notebook._locator(box[0])
        first.scroll_into_view_if_needed()
        # the box's first control takes the focus, as a learner Tabs or clicks into it, and
        # JupyterLab makes its cell the active one
        first.locator("button, input, select, .noUi-handle").first.focus()
        page.wait_for_timeout(labdriver.GRAB_MS)
        reached, operated, failed = set(), set(), set()
        for _ in range(MAX_TABS):
            where = a11y.focused(page)
            if where["box"] != b:
                break
            control = (where["kind"], where["nth"])
            if where["kind"]:
                reached.add(control)
                if where["disabled"]:
                    expected.discard(control)  # disabled by a key pressed before
                if control not in operated | failed:
                    acted = _press(notebook, b, where)  # None: a part no key moves (a
                    if acted:  # slider's readout, the toggle button already chosen)
                        operated.add(control)
                    elif acted is False:
                        failed.add(control)
                        failures.append(f"box {b}: {control} did not redraw the picture")
            page.keyboard.press("Tab")
        missing = expected - reached
        if missing:
            failures.append(f"box {b}: Tab never reached {sorted(missing)}")
        stuck = (expected & reached) - operated
        if stuck:
            failures.append(f"box {b}: no key moved {sorted(stuck)}")
    assert not failures, "\n".join(failures)


def _press(notebook, b: int, where: dict) -> bool | None:
    """Press the key that moves the focused control; True when the picture redrew and its
    alternative is the kernel's, False when it did not redraw, None when this element is a
    part that no key moves (a slider's readout, the toggle button already chosen, a control
    disabled by an earlier key).

    A slider's arrow goes up to `ARROWS` times: one step may change nothing the picture
    shows (a log-scale volume from 0.0100 to 0.0112 still reads "×0.01", and an unchanged
    frame is not sent)."""
    kind = where["kind"]
    if (kind == "slider" and not where["handle"]) or (kind == "toggle" and where["active"]):
        return None
    if where["disabled"]:  # an earlier key disabled it (a rule that leaves c unused)
        return None
    key = KEY_FOR[kind]
    if kind == "slider" and notebook.page.evaluate(_AT_MAX):
        key = "ArrowLeft"
    notebook.quiet()
    since = notebook.now()
    next_draw = labdriver.sources.js("next_draw")
    for _ in range(ARROWS if kind == "slider" else 1):
        notebook.page.keyboard.press(key)
        notebook.quiet()  # the kernel has answered the key: a frame, if any, has been sent
        if notebook.page.evaluate(next_draw, [b, since, ["keydown"], STEP_WAIT_MS]):
            break
    times = notebook.page.evaluate(next_draw, [b, since, ["keydown"], KEYBOARD_TIMEOUT_MS])
    if times is None:
        return False
    notebook.quiet()
    says = {e["alt"] for e in notebook.probe()["explorers"]}
    return a11y.described(notebook, b, says)["alt"] in says


# -- the other front ends: the extension runs wherever the course opens ----------------------

QUICK = "01_beginner_crowded_room.ipynb"  # five explorers: sliders, toggles, dropdowns
_JS_DRAWN = """(n) => window.__alBoxes().length === n
  && window.__alBoxes().every((_, b) => (window.__alPicture(b).__draws || []).length > 0)"""


def check_what_a_screen_reader_gets(page, where: str) -> None:
    """Every explorer picture of `QUICK` has its alternative as its alt, in a polite live
    region; every slider is named and reads its readout."""
    given = a11y.accessible(page)
    explorers = [p for p in given["pictures"] if p["box"] >= 0]
    assert len(explorers) == sum(shown_in(QUICK.removesuffix(".ipynb")).values()), where
    for picture in explorers:
        assert picture["alt"] and picture["alt"] == picture["text"], f"{where}: {picture}"
        assert (picture["role"], picture["live"]) == ("status", "polite"), f"{where}: {picture}"
    assert given["sliders"], f"{where}: no slider"
    for slider in given["sliders"]:
        assert slider["name"] and slider["valuetext"] == slider["readout"], f"{where}: {slider}"


@pytest.fixture(scope="module")
def front_ends(chromium_ready, tmp_path_factory):
    """Plain JupyterLab and Notebook 7 in this environment, none of the course's settings."""
    started = {}
    try:
        for ui in ("lab", "notebook"):
            started[ui] = labdriver.start_front_end(tmp_path_factory.mktemp(f"a11y-{ui}"), ui)
        yield started
    finally:
        for server in started.values():
            server.stop()


@pytest.mark.parametrize("ui", ["lab", "notebook"])
def test_the_extension_runs_in_plain_jupyterlab_and_notebook_7(ui, front_ends, chromium) -> None:
    page = labdriver.NotebookPage.open(
        chromium, front_ends[ui], QUICK, workspace=f"a11y-{ui}", viewport=(1280, 800), ui=ui
    )
    try:
        page.run_all()
        check_what_a_screen_reader_gets(page, ui)
    finally:
        page.close()


def test_the_extension_runs_in_voila(chromium_ready, chromium, tmp_path) -> None:
    server = labdriver.start_front_end(tmp_path, "voila", QUICK)
    context = chromium.new_context(viewport={"width": 1280, "height": 800})
    try:
        page = context.new_page()
        page.add_init_script(labdriver.sources.js("init"))
        page.goto(server.url + "/", wait_until="load", timeout=labdriver.OPEN_TIMEOUT_MS)
        explorers = sum(shown_in(QUICK.removesuffix(".ipynb")).values())
        page.wait_for_function(
            _JS_DRAWN, arg=explorers, timeout=labdriver.OPEN_TIMEOUT_MS, polling=250
        )
        check_what_a_screen_reader_gets(page, "voila")
    finally:
        context.close()
        server.stop()


# -- the static site --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def site_pages(tmp_path_factory) -> list[Path]:
    from course import site

    return site.build(tmp_path_factory.mktemp("site"))


def test_every_site_page_passes_axe(site_pages, chromium, axe_ready) -> None:
    context = chromium.new_context(viewport={"width": 1280, "height": 800})
    failures = []
    try:
        page = context.new_page()
        for path in site_pages:
            page.goto(path.as_uri(), wait_until="load")
            audit = a11y.audit(page)
            print(f"{path.name}: {audit.by_impact()} ({audit.passes} rules passed)")
            others = audit.report(("moderate", "minor"))
            if others:
                print(others)
            if audit.gating():
                failures.append(f"{path.name}:\n{audit.report(a11y.GATING)}")
    finally:
        context.close()
    assert not failures, "\n".join(failures)


# -- saved and reopened (last: it closes the notebook's page) ---------------------------------


@pytest.mark.notebooks(only=_explorer_notebook)
def test_saved_pictures_keep_their_alternatives(notebook, lab_server, chromium) -> None:
    labdriver.save_notebook(notebook)
    notebook.close()
    name = notebook.path
    reopened = labdriver.open_notebook(
        chromium, lab_server, name, f"a11y-reopened-{name[:2]}", laptop.SIZES["laptop"]
    )
    try:
        explorers = sum(shown_in(name.removesuffix(".ipynb")).values())
        deadline = time.monotonic() + laptop.REOPEN_TIMEOUT_S
        while True:  # the saved widget state is restored some time after the page loads
            pictures = [p for p in a11y.accessible(reopened)["pictures"] if p["box"] >= 0]
            said = [p for p in pictures if p["alt"] and p["alt"] == p["text"]]
            if len(said) == explorers or time.monotonic() > deadline:
                break
            reopened.page.wait_for_timeout(500)
        assert len(said) == explorers, f"reopened, {len(said)} of {explorers} said: {pictures}"
    finally:
        reopened.close()
