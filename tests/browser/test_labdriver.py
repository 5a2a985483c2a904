"""The browser driver's parts that need no browser: its script files and its kernel program.

The kernel program (``labdriver/kernel_probe.py``) is run here as the
notebook's kernel runs it, as the main module of a fresh Python beside one
explorer, so the report the browser tests read is pinned without a browser.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import labdriver
from labdriver import sources

DRIVER = Path(labdriver.__file__).parent


def test_every_script_file_is_loaded_and_every_loaded_script_exists():
    files = {path.stem for path in (DRIVER / "js").glob("*.js")}
    python = "\n".join(path.read_text() for path in DRIVER.glob("*.py"))
    loaded = set(re.findall(r"""\bjs\(["'](\w+)["']\)""", python))
    assert loaded == files
    for name in loaded:
        assert sources.js(name).strip()


_IN_THE_KERNEL = """
import json, logging, sys
import matplotlib
matplotlib.use("Agg")
import labdriver.kernel_probe
assert not hasattr(labdriver.kernel_probe, "_browser_test_capture")  # imported: nothing installed
handlers = len(logging.getLogger().handlers)
from attention_course.explorers.tiling import OnlineSoftmaxExplorer
explorer = OnlineSoftmaxExplorer()
exec(compile(labdriver.sources.kernel_probe(), "kernel_probe.py", "exec"))  # as the kernel does
assert len(logging.getLogger().handlers) == handlers + 1
logging.getLogger("ipykernel.comm").error("callback raised")
_browser_test_probe({"OnlineSoftmaxExplorer": "{'n': len(e.controls)}"})
_browser_test_probe({}, full=False)
"""


def test_kernel_probe_reports_the_explorers_and_what_was_logged():
    out = subprocess.run(
        [sys.executable, "-c", _IN_THE_KERNEL], check=True, capture_output=True, text=True
    ).stdout
    full, short = (json.loads(line) for line in out.strip().splitlines())
    (entry,) = full["explorers"]
    assert entry["cls"] == "OnlineSoftmaxExplorer"
    controls = entry["controls"]
    assert controls and all(c["attr"] != "?" and c["kind"] for c in controls)
    assert entry["inputs"] == {"n": len(controls)}
    assert entry["figure"]["axes"] and all("lines" in ax for ax in entry["figure"]["axes"])
    assert full["problems"] == ["ipykernel.comm ERROR: callback raised"]
    (brief,) = short["explorers"]
    assert brief["controls"] == controls and "figure" not in brief and "inputs" not in brief


# A page with init.js, one explorer box as init.js's __alBoxes finds it, and a learner's
# click on a button: pressed, held, released; the frame shown after the release.
_CLICK_PAGE = """
<div class="al-explorer"><img class="widget-image"></div>
<button>run</button>
"""
# a 1 x 1 PNG, the frame the kernel sends
_FRAME = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    "YPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
_SHOW_FRAME = """async (b64) => {
  const png = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const img = window.__alPicture(0);
  img.src = URL.createObjectURL(new Blob([png], {type: 'image/png'}));  // as the Image view does
  await new Promise((done) => {
    const drawn = () => ((img.__draws || []).length ? done() : requestAnimationFrame(drawn));
    drawn();
  });
}"""


def test_a_moves_input_is_the_event_that_makes_its_change(chromium):
    page = chromium.new_page()
    try:
        page.set_content(_CLICK_PAGE)
        page.add_script_tag(content=sources.js("init"))  # as the lab's pages load it first
        since = page.evaluate("() => performance.now()")
        page.locator("button").click(delay=labdriver.CLICK_HOLD_MS)
        page.evaluate(_SHOW_FRAME, _FRAME)  # a frame arrives, loads and is shown
        inputs = page.evaluate("() => window.__inputs")
        pressed = next(e["t"] for e in inputs if e["type"] == "mousedown")
        released = next(e["t"] for e in inputs if e["type"] == "click")
        assert released - pressed >= 0.9 * labdriver.CLICK_HOLD_MS  # the button was held
        first = sources.js("first_draw_after")
        timed = page.evaluate(first, [0, since, labdriver.CHANGE_EVENTS["toggle"]])
        assert timed["input"] == released and timed["draw"] > released
        assert timed["frame"] is not None
        by_press = page.evaluate(first, [0, since, ["mousedown"]])
        assert by_press["input"] == pressed
        assert page.evaluate(first, [0, since, ["keydown"]])["input"] is None
    finally:
        page.close()
