"""The page: one notebook open in one Chromium page, driven as a learner drives it.

`NotebookPage` opens a notebook, runs every cell (`NotebookPage.run_all`),
reads the cells' outputs, lists the explorers' controls in the page, moves one
control and waits for its figure to redraw (`NotebookPage.move`), and asks the
notebook's own kernel what its explorers now hold (`NotebookPage.probe`).
`restart`, `restart_and_run_all` and `save_notebook` are the kernel's and the file's
commands. The JavaScript it runs in the page is in ``js/`` (`sources.js`);
every wait follows an event the page can see (see the package's docstring),
and a wait that runs out raises `RedrawTimeout` saying which step never
happened.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .browser import PlaywrightTimeout
from .server import LabServer
from .sources import js, kernel_probe

__all__ = [
    "CHANGE_EVENTS",
    "CLICK_HOLD_MS",
    "GRAB_MS",
    "MOVE_TIMEOUT_MS",
    "OPEN_TIMEOUT_MS",
    "Move",
    "NotebookPage",
    "RedrawTimeout",
    "open_notebook",
    "restart",
    "restart_and_run_all",
    "save_notebook",
]

# Bounds on waits that have stopped making progress (the waits themselves follow events).
# Generous: on a 2-core machine shared with a second JupyterLab and Chromium, one slider
# frame has been seen to take several seconds.
OPEN_TIMEOUT_MS = 240_000  # the page loads and its kernel starts
MOVE_TIMEOUT_MS = 120_000  # a control's change reaches the kernel and its frame is painted

# A learner's hand, which `NotebookPage.move` follows. A button is held this long between
# press and release (a person's click lasts about a tenth of a second), and acts on release.
CLICK_HOLD_MS = 100
# A slider is grabbed (its handle clicked, which focuses it) before its first key press, and
# the key comes at least this long after: a person's hand moves from mouse to keys. The grab
# activates the notebook cell; JupyterLab's work for that (40-100 ms on the 2-core course
# machine, most of it resetting every other cell's editor selection) is done by then.
GRAB_MS = 300
# A learner aims at a slider's track once it has stopped moving: cells around it may still
# be laid out as the page scrolls to it (Notebook 7 renders cells as they come into view),
# and a click aimed at a track that then moves lands beside it. Steady: the same box
# `STEADY_MS` apart, for at most `STEADY_TIMEOUT_MS`.
STEADY_MS = 100
STEADY_TIMEOUT_MS = 5_000
# The event that makes each kind of control's change, from which a move's latency counts.
CHANGE_EVENTS = {
    "slider": ["keydown"],
    "toggle": ["click"],
    "checkbox": ["click"],
    "dropdown": ["input"],
}

# The page scripts (installed in every page before JupyterLab loads) and the functions the
# page object evaluates in the page: js/*.js.
_INIT_JS = js("init") + js("trace")
_JS_READY = js("ready")
_JS_TRACK_KERNEL = js("track_kernel")
_JS_STATE = js("state")
_JS_MOVE_DONE = f"({js('move_done')})({_JS_STATE})"
_JS_RUN_START = js("run_start")
_JS_RUN_DONE = js("run_done")
_JS_VIEWS_MISSING = js("views_missing")
_JS_CELLS = js("cells")
_JS_DIALOGS = js("dialogs")
_JS_EXECUTE = js("execute")
_JS_CONTROLS = js("controls")
_JS_CANVAS = js("canvas")
_JS_FIRST_DRAW_AFTER = js("first_draw_after")
_JS_SHUTDOWN = js("shutdown")
_JS_SAVE = js("save")
_JS_SAVED = js("saved")
_JS_RESTART = js("restart")
_JS_KERNEL_IDLE = js("kernel_idle")
_JS_NEXT_DRAW = js("next_draw")
_JS_KERNEL_RESTARTED = js("kernel_restarted")


@dataclass
class Move:
    """One learner action on one control: what was done and what followed."""

    box: int
    kind: str
    description: str
    action: str
    readout_before: str | None
    readout_after: str | None
    latency_ms: float | None  # input event to the first redraw of that figure
    changed_pixels: bool
    # on the page's clock (ms): "input", "frame" (the painted frame reached the page), "draw",
    # and "origin", performance.timeOrigin (epoch ms); None where not happened
    page_times: dict[str, float | None] = field(default_factory=dict)


@dataclass
class NotebookPage:
    """One notebook open in its own browser page, with its own kernel."""

    page: Any
    server: LabServer
    path: str
    external_requests: list[str] = field(default_factory=list)
    run_seconds: float | None = None
    _probe_ready: bool = False
    _own_context: bool = True  # close() closes it; False: the caller's (a hub learner's)

    @classmethod
    def open(
        cls,
        browser: Any,
        server: LabServer,
        path: str,
        workspace: str,
        viewport: tuple[int, int] = (1280, 1000),
        ui: str = "lab",
        context: Any = None,
    ) -> NotebookPage:
        """Open ``path`` (relative to the server root) in a new workspace; wait for its kernel.

        ``ui``: ``"lab"`` (JupyterLab) or ``"notebook"`` (Jupyter Notebook 7, one notebook
        a page). The page tracks the kernel's messages from then on (the waits of
        `run_all`, `move` and `quiet` follow them). ``context``: a browser context to open
        the page in (a hub learner's, logged in: ``server`` is then a
        `labdriver.hub.LearnerServer`, with no token), left open by `close`; None: a new
        one of its own at ``viewport``.
        """
        own = context is None
        if own:
            context = browser.new_context(
                viewport={"width": viewport[0], "height": viewport[1]}, device_scale_factor=1
            )
        page = context.new_page()
        self = cls(page, server, path, _own_context=own)
        page.on("request", self._watch_request)
        page.add_init_script(_INIT_JS)
        page.set_default_timeout(MOVE_TIMEOUT_MS)  # clicks and key presses on a loaded machine
        where = {"lab": f"lab/workspaces/{workspace}/tree", "notebook": "notebooks"}[ui]
        url = f"{server.url}/{where}/{path}" + (f"?token={server.token}" if server.token else "")
        page.goto(url, wait_until="commit", timeout=OPEN_TIMEOUT_MS)  # then wait for the app
        page.wait_for_function(_JS_READY, arg=path, timeout=OPEN_TIMEOUT_MS, polling=250)
        page.evaluate(_JS_TRACK_KERNEL)
        return self

    def _watch_request(self, request: Any) -> None:
        url = request.url
        if url.startswith(("http:", "https:", "ws:", "wss:")) and not url.startswith(
            (self.server.url, self.server.url.replace("http", "ws", 1))
        ):
            self.external_requests.append(url)

    def close(self) -> None:
        """Shut the notebook's kernel down and close the page (and its context, if its own)."""
        with contextlib.suppress(Exception):
            self.page.evaluate(_JS_SHUTDOWN)
        if self._own_context:
            self.page.context.close()
        else:
            self.page.close()

    # -- cells -----------------------------------------------------------------------------
    def run_all(self, timeout_s: float = 900) -> float:
        """Run → Run All Cells and wait for the events that end it; seconds taken.

        Done when the kernel has replied to every non-empty code cell (a cell
        that fails stops the run; the rest are answered "aborted") and gone
        quiet, and every widget output is rendered with its figure's first
        frame painted. Raises RedrawTimeout saying which of these never came.
        """
        start = time.monotonic()
        run = self.page.evaluate(_JS_RUN_START)
        args = [run["since"], run["cells"]]
        try:
            self.page.wait_for_function(
                _JS_RUN_DONE, arg=args, timeout=timeout_s * 1000, polling=250
            )
        except PlaywrightTimeout as error:
            state = self.page.evaluate(_JS_STATE, run["since"])
            raise RedrawTimeout(
                f"Run All did not finish in {timeout_s:.0f} s: {state['replies']} of "
                f"{run['cells']} cells answered; {_describe(state)}"
            ) from error
        left = max(1.0, timeout_s - (time.monotonic() - start))
        try:
            self.page.wait_for_function(
                f"() => ({_JS_VIEWS_MISSING})().length === 0", timeout=left * 1000, polling=250
            )
        except PlaywrightTimeout as error:
            missing = self.page.evaluate(_JS_VIEWS_MISSING)
            raise RedrawTimeout(f"after Run All, still missing: {missing}") from error
        self.run_seconds = time.monotonic() - start
        return self.run_seconds

    def cells(self) -> list[dict]:
        """Every cell: type, tags, whether its code is hidden, outputs (model and shown)."""
        return self.page.evaluate(_JS_CELLS)

    def dialogs(self) -> list[str]:
        """Text of every dialog and toast notification on screen."""
        return self.page.evaluate(_JS_DIALOGS)

    def dismiss_dialogs(self) -> None:
        """Click each dialog's default button (a learner's "Ok"), until none is left."""
        button = self.page.locator(".jp-Dialog .jp-mod-accept")
        while button.count():
            button.first.click()

    def now(self) -> float:
        """The page's clock (performance.now(), ms): a ``since`` for the waits."""
        return self.page.evaluate("() => performance.now()")

    # -- kernel ----------------------------------------------------------------------------
    def execute(self, code: str) -> str:
        """Run ``code`` in the notebook's kernel (not in a cell); return its stdout."""
        result = self.page.evaluate(_JS_EXECUTE, code)
        if result["error"]:
            raise RuntimeError(f"kernel raised:\n{_strip_ansi(result['error'])}")
        return result["out"]

    def kernel_statuses(self, since: float = 0) -> list[str]:
        """The statuses the kernel went through since ``since`` (the page's clock)."""
        return self.page.evaluate(
            "(since) => window.__kernel.statuses.filter((s) => s.t >= since).map((s) => s.status)",
            since,
        )

    def wait_restarted(self, since: float, timeout_s: float = 300) -> list[str]:
        """Wait until the kernel has been restarted after ``since`` (by the server after it
        died: "autorestarting") and the new one is idle; the statuses it went through.
        Raises RedrawTimeout with them if not within ``timeout_s``."""
        try:
            self.page.wait_for_function(
                _JS_KERNEL_RESTARTED, arg=since, timeout=timeout_s * 1000, polling=250
            )
        except PlaywrightTimeout as error:
            seen = self.kernel_statuses(since)
            raise RedrawTimeout(
                f"the kernel was not restarted and idle in {timeout_s:.0f} s: statuses {seen}"
            ) from error
        return self.kernel_statuses(since)

    def probe(self, inputs_by_class: Mapping[str, str] | None = None, full: bool = True) -> dict:
        """What the kernel's explorers hold now (see ``kernel_probe.py``)."""
        if not self._probe_ready:
            self.execute(kernel_probe())
            self._probe_ready = True
        out = self.execute(f"_browser_test_probe({dict(inputs_by_class or {})!r}, full={full})")
        return json.loads(out.strip().splitlines()[-1])

    # -- controls --------------------------------------------------------------------------
    def controls(self) -> list[list[dict]]:
        """The controls of each explorer figure box in the page, box by box."""
        return self.page.evaluate(_JS_CONTROLS)

    def _locator(self, control: dict) -> Any:
        boxes = self.page.locator(".al-explorer:has(> img.widget-image)")
        selector = {
            "slider": ".widget-hslider",
            "toggle": ".widget-toggle-buttons",
            "checkbox": ".widget-checkbox",
            "dropdown": ".widget-dropdown",
        }[control["kind"]]
        return boxes.nth(control["box"]).locator(selector).nth(control["nth"])

    def scroll_to(self, control: dict) -> None:
        """Scroll ``control`` into view, as a learner does before moving it, and return once
        the page has painted the scrolled view (two animation frames later)."""
        self._locator(control).scroll_into_view_if_needed()
        self.page.evaluate(
            "() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))"
        )

    def canvas(self, box: int) -> dict:
        """Box ``box``'s picture: a hash of its pixels, its draws so far, its size."""
        return self.page.evaluate(_JS_CANVAS, box)

    def move(self, control: dict, action: str, timeout_ms: float = MOVE_TIMEOUT_MS) -> Move:
        """Do ``action`` on ``control`` as a learner would and wait for its figure to redraw.

        Slider actions are keys pressed on the focused handle (``"ArrowRight"``,
        ``"End"``...), or ``"track:F"``, a click on the track at fraction F of its width;
        a toggle's action is the text of the button to click; a
        dropdown's the option to choose; a checkbox's ``"click"``. As a learner's
        hand does it: a handle not yet focused is grabbed first, `GRAB_MS` before
        the key; a click holds the button `CLICK_HOLD_MS`. The latency counts from
        the event that makes the change (`CHANGE_EVENTS`: the key press, the click
        on release, the select's input).

        Before the action the kernel must be quiet (`quiet`), so no frame of an
        earlier state is still on its way to be taken for this move's. After
        it, the change must reach the kernel, the kernel must go quiet, and a
        frame that arrived after the input must be painted on this figure.
        Raises RedrawTimeout naming the step that did not happen within
        ``timeout_ms``.
        """
        box = control["box"]
        self.quiet(timeout_ms)
        before = self.canvas(box)
        since = self.page.evaluate("() => performance.now()")
        element = self._locator(control)
        if control["kind"] == "slider" and action.startswith("track:"):
            # a click on the track at that fraction of its width (Notebook 7 keeps arrow keys
            # from a slider's handle: a learner there clicks or drags)
            element.scroll_into_view_if_needed()
            base = element.locator(".noUi-base")
            fraction = float(action.removeprefix("track:"))
            for _ in range(2):  # once more, re-aimed, only where the track moved meanwhile
                track = self._steady_box(base)
                self.page.mouse.click(
                    track["x"] + fraction * track["width"],
                    track["y"] + track["height"] / 2,
                    delay=CLICK_HOLD_MS,
                )
                if base.bounding_box() == track:
                    break
        elif control["kind"] == "slider":
            self._grab(element.locator(".noUi-handle"))
            self.page.keyboard.press(action)
        elif control["kind"] == "toggle":
            element.locator("button", has_text=action).first.click(delay=CLICK_HOLD_MS)
        elif control["kind"] == "checkbox":
            element.locator("input").click(delay=CLICK_HOLD_MS)
        elif control["kind"] == "dropdown":
            element.locator("select").select_option(label=action)
        else:  # pragma: no cover - _JS_CONTROLS only reports the kinds above
            raise ValueError(f"unknown control kind {control['kind']!r}")
        try:
            self.page.wait_for_function(
                _JS_MOVE_DONE, arg=[box, since], timeout=timeout_ms, polling=100
            )
        except PlaywrightTimeout as error:
            state = self.page.evaluate(_JS_STATE, since)
            canvas = self.canvas(box)
            raise RedrawTimeout(_move_stuck(state, canvas, before, timeout_ms)) from error
        events = ["click"] if action.startswith("track:") else CHANGE_EVENTS[control["kind"]]
        times = self.page.evaluate(_JS_FIRST_DRAW_AFTER, [box, since, events])
        drawn = times["input"] is not None and times["draw"] is not None
        latency = times["draw"] - times["input"] if drawn else None
        after = self.canvas(box)
        readout_after = self.controls()[box][_index_of(self.controls()[box], control)]["readout"]
        return Move(
            box,
            control["kind"],
            control["description"],
            action,
            control["readout"],
            readout_after,
            latency,
            after["hash"] != before["hash"],
            times,
        )

    def _steady_box(self, locator: Any) -> dict:
        """``locator``'s bounding box once it stays put (`STEADY_MS`), or the last one read
        after `STEADY_TIMEOUT_MS`."""
        box = locator.bounding_box()
        deadline = time.monotonic() + STEADY_TIMEOUT_MS / 1000
        while time.monotonic() < deadline:
            self.page.wait_for_timeout(STEADY_MS)
            again = locator.bounding_box()
            if again == box:
                break
            box = again
        return box

    def _grab(self, handle: Any) -> None:
        """Focus a slider's handle as a hand grabs it, `GRAB_MS` before the first key."""
        if not handle.evaluate("(el) => el === document.activeElement"):
            handle.focus()
            self.page.wait_for_timeout(GRAB_MS)

    def press(
        self, control: dict, key: str, timeout_ms: float = MOVE_TIMEOUT_MS
    ) -> dict[str, float | None] | None:
        """Press ``key`` on slider ``control`` (scrolled to and grabbed first, if its handle
        is not focused) and wait for its figure's next draw. Returns the move's times on
        the page's clock, as `Move.page_times` (``input``, the key press; ``frame``, the
        arrival of the frame drawn; ``draw``; ``origin``), or None if no draw came within
        ``timeout_ms``.

        The lean `move`, for many learners on one machine (benchmarks/hub_load.py): no
        wait for a quiet kernel first, no pixel hashes, no readouts, and one promise that
        the page resolves on the draw instead of polling. `move`'s checks cost the browser
        about 0.2 s of CPU a move, more than the kernel's work, on the 2-core machine.
        """
        if control["kind"] != "slider":
            raise ValueError(
                f"press works on sliders; {control['description']!r} is a {control['kind']}"
            )
        handle = self._locator(control).locator(".noUi-handle")
        if not handle.evaluate("(el) => el === document.activeElement"):
            self.scroll_to(control)
            self._grab(handle)
        since = self.now()
        self.page.keyboard.press(key)
        return self.page.evaluate(
            _JS_NEXT_DRAW, [control["box"], since, CHANGE_EVENTS["slider"], timeout_ms]
        )

    def quiet(self, timeout_ms: float = MOVE_TIMEOUT_MS) -> None:
        """Wait until the kernel is quiet and every frame that reached the page is painted.

        Quiet: every message the page sent the kernel has had its idle status
        back (so all the frames it caused have arrived) and no frame is still
        being decoded. Raises RedrawTimeout with what is still outstanding.
        """
        try:
            self.page.wait_for_function(
                "() => (" + _JS_STATE + ")(0).quiet", timeout=timeout_ms, polling=100
            )
        except PlaywrightTimeout as error:
            state = self.page.evaluate(_JS_STATE, 0)
            raise RedrawTimeout(
                f"the page never went quiet in {timeout_ms / 1000:.0f} s: {_describe(state)}"
            ) from error

    def screenshot(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(path), full_page=True)
        return path


class RedrawTimeout(AssertionError):
    """A wait on the page ran out of time; the message says which step never happened."""


def _describe(state: dict) -> str:
    waiting = ", ".join(state["outstanding"]) or "none"
    return (
        f"kernel {state['status']}, requests awaiting their idle status: {waiting}, "
        f"frames still decoding: {state['decoding']}"
    )


def _move_stuck(state: dict, canvas: dict, before: dict, timeout_ms: float) -> str:
    """Which step of a move did not happen: the cause of a RedrawTimeout."""
    waited = f"in {timeout_ms / 1000:.0f} s"
    if state["sent"] == 0:
        return f"the page sent the kernel no new value {waited} (the input did not register)"
    if not state["quiet"]:
        return f"the kernel did not finish handling the change {waited}: {_describe(state)}"
    if state["frames"] == 0:
        return (
            f"the kernel handled the change ({state['sent']} message(s), now quiet) "
            f"but sent no frame {waited}"
        )
    return (
        f"{state['frames']} frame(s) reached the page but the figure's picture did not draw "
        f"one {waited} (draws {before['draws']} before, {canvas['draws']} now, "
        f"picture {canvas['width']}x{canvas['height']})"
    )


def _index_of(controls: list[dict], control: dict) -> int:
    for i, c in enumerate(controls):
        if c["kind"] == control["kind"] and c["nth"] == control["nth"]:
            return i
    raise LookupError(f"control {control['description']!r} is no longer in the page")


def _strip_ansi(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


# -- a learner's screen, File ▸ Save, Kernel ▸ Restart -------------------------------------


def open_notebook(
    browser: Any,
    server: LabServer,
    path: str,
    workspace: str,
    viewport: tuple[int, int] = (1280, 800),
) -> NotebookPage:
    """`NotebookPage.open` at a learner's screen size (1280 x 800 unless told)."""
    return NotebookPage.open(browser, server, path, workspace, viewport)


def save_notebook(page: NotebookPage, timeout_ms: float = 30_000) -> None:
    """File ▸ Save, and wait until the document is no longer dirty."""
    page.page.evaluate(_JS_SAVE)
    page.page.wait_for_function(_JS_SAVED, timeout=timeout_ms, polling=250)


def restart(page: NotebookPage, timeout_s: float = 300) -> None:
    """Kernel ▸ Restart Kernel, and wait until the new kernel is idle.

    What the old kernel was still asked is forgotten by the waits (it will
    never answer: ``js/track_kernel.js``), as JupyterLab forgets it.
    """
    page.page.evaluate(_JS_RESTART)
    page.page.wait_for_function(_JS_KERNEL_IDLE, timeout=timeout_s * 1000, polling=250)


def restart_and_run_all(page: NotebookPage, timeout_s: float = 300) -> float:
    """`restart`, then `NotebookPage.run_all`. Seconds.

    The restart is awaited first: JupyterLab's "restart and run all" command
    queues the cells only once the new kernel is up, and until then the page
    looks finished (idle, every cell with an execution count).
    """
    start = time.monotonic()
    restart(page, timeout_s)
    page.run_all(timeout_s)
    return time.monotonic() - start
