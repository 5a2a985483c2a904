"""No explorer is ever blank after Run All: every notebook with one, run again and again.

Each notebook that has an explorer is opened once, then restarted and run in
full `RUNS` times (01, with five explorers, `RUNS_01` times), while a second
learner's JupyterLab and Chromium keep the machine busy
(`benchmarks/busy_lab.py`, started and stopped here): a loaded machine is where
the races were seen. After each run:

- every explorer picture in the page (a core ipywidgets Image) has its
  figure's size and drawn pixels within `SETTLE_S` seconds (under ipympl, the
  course's earlier canvas, a blank one stayed blank for good);
- no frame reached the page that its image could not decode (the frame
  trace, `labdriver.frame_trace`);
- the kernel has no subshell: the course's JupyterLab sends widget messages
  on the kernel's main shell (jupyter/labconfig), so they are handled on one
  thread in the order the page sent them, as matplotlib assumes.

A failure lists, per blank explorer, the trace of what its picture received
and loaded, and writes every trace to the test's temporary folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

import labdriver

pytestmark = [pytest.mark.browser, pytest.mark.soak]

RUNS = 3
RUNS_01 = 10
SETTLE_S = 30  # first frames keep arriving after the kernel goes idle; a blank one stays blank
BUSY_LAB = labdriver.REPO / "benchmarks" / "busy_lab.py"
_VIEW = "application/vnd.jupyter.widget-view+json"
_STILL = 'class="al-still"'


def committed_explorers(path: Path) -> int:
    """How many explorers the committed notebook shows (outputs with a live view and a still).

    An explorer's still is ``<div class="al-still">`` (explorers/base.py); a reveal box's
    placeholder, ``al-reveal-still``, also holds the letters "al-still" but is no explorer.
    """
    cells = json.loads(path.read_text())["cells"]
    outputs = [o.get("data", {}) for c in cells for o in c.get("outputs", [])]
    return sum(_VIEW in d and _STILL in "".join(d.get("text/html", "")) for d in outputs)


EXPLORERS = {
    path.name: n for path in labdriver.numbered_notebooks() if (n := committed_explorers(path))
}


@pytest.fixture(scope="module")
def busy_machine(tmp_path_factory: pytest.TempPathFactory):
    """A second learner (benchmarks/busy_lab.py) running the heaviest notebooks meanwhile;
    ``process.log`` is its output."""
    log = tmp_path_factory.mktemp("busy-lab") / "busy_lab.log"
    command = [sys.executable, str(BUSY_LAB), "--minutes", "60"]
    process = labdriver.spawn_logged(command, labdriver.REPO, os.environ, log)
    process.log = log
    try:
        yield process
    finally:
        stop_process_tree(process)


def stop_process_tree(process: subprocess.Popen, timeout: float = 60.0) -> None:
    """SIGTERM (busy_lab stops its lab and browser), then kill whatever of its tree is left."""
    tree: list[psutil.Process] = []
    with contextlib.suppress(psutil.NoSuchProcess):
        tree = [psutil.Process(process.pid), *psutil.Process(process.pid).children(recursive=True)]
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout)
    for left in tree:
        with contextlib.suppress(psutil.NoSuchProcess):
            left.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(5)


def blank_explorers(page: labdriver.NotebookPage, expected: int) -> list[dict]:
    """The widget outputs of every explorer whose picture is missing, 0 x 0 or blank."""
    explorers = [o for o in labdriver.widget_outputs(page) if o["explorer"]]
    assert len(explorers) == expected, f"{len(explorers)} explorers in the page, not {expected}"
    return [
        out
        for out in explorers
        if len(out["pictures"]) != 1
        or not (out["pictures"][0]["width"] and out["pictures"][0]["height"])
        or not out["pictures"][0]["inked"]
    ]


_JS_UNDECODED = """(since) => window.__trace
  .filter((e) => e.t >= since && e.e === 'error').map((e) => e.img)"""

_KERNEL_SUBSHELLS = (
    "import threading\n"
    "print([t.name for t in threading.enumerate() if t.name.startswith('subshell')])"
)


@pytest.mark.parametrize(
    "name", sorted(EXPLORERS), ids=[n.removesuffix(".ipynb") for n in sorted(EXPLORERS)]
)
def test_every_explorer_is_drawn_after_each_run(name, lab_server, chromium, busy_machine, tmp_path):
    runs = RUNS_01 if name.startswith("01_") else RUNS
    page = labdriver.open_notebook(chromium, lab_server, name, f"soak-{name[:2]}")
    failures = []
    try:
        for run in range(1, runs + 1):
            since = page.page.evaluate("() => performance.now()")
            labdriver.restart_and_run_all(page)
            deadline = time.monotonic() + SETTLE_S
            blank = blank_explorers(page, EXPLORERS[name])
            while blank and time.monotonic() < deadline:
                page.page.wait_for_timeout(500)
                blank = blank_explorers(page, EXPLORERS[name])
            undecoded = page.page.evaluate(_JS_UNDECODED, since)
            subshells = page.execute(_KERNEL_SUBSHELLS).strip()
            if subshells != "[]":
                failures.append(f"run {run}: widget messages go to kernel subshells {subshells}")
            if undecoded:
                failures.append(f"run {run}: {len(undecoded)} frame(s) the page could not decode")
            suspects = blank or (labdriver.widget_outputs(page) if undecoded else [])
            for out in suspects:
                trace = labdriver.frame_trace(page, out, since)
                if out not in blank and not any(" error " in line for line in trace):
                    continue
                (tmp_path / f"run{run}-cell{out['cell']}.txt").write_text("\n".join(trace))
                what = f"blank {SETTLE_S} s after Run All" if out in blank else "a frame undecoded"
                failures.append(
                    f"run {run}: cell {out['cell']} {what} ({out['pictures']}); "
                    "its frame trace:\n  " + "\n  ".join(trace[-40:])
                )
    finally:
        page.close()
    assert busy_machine.poll() is None, (
        f"the busy lab stopped before the soak ended:\n{busy_machine.log.read_text()[-3000:]}"
    )
    assert not failures, f"{name}, {runs} runs (traces in {tmp_path}):\n" + "\n".join(failures)
