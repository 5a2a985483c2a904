"""Slider latency, as a learner feels it and as the kernel spends it (a benchmark, not a test).

For every control under every explorer figure in every numbered notebook
(one disabled at first, the multiplier c outside the custom rule, is enabled
first by choosing its box's other options, as a learner would):

- browser: the time from the event that makes the change (a key press on a
  slider, the click of a button or checkbox, which comes on release, a
  dropdown's choice) to the first redraw of its figure in Chromium
  (the frame's picture loaded, decoded and an animation frame past), both on the
  page's own clock;
  ``--moves`` moves per control, the first a second after the control was
  scrolled into view (`READ_MS`), as a learner scrolls to a figure and reads
  it before moving anything. The moves are a learner's hand
  (`labdriver.NotebookPage.move`): a slider's handle is grabbed
  `labdriver.GRAB_MS` before its first key, a button held
  `labdriver.CLICK_HOLD_MS`; JupyterLab's work when the press activates the
  cell is done by the time the change comes, as it is for a person;
- kernel: in the notebook's own kernel, over the control's values ``--rounds``
  times, the time to set the control's value: the whole callback, which runs
  the explorer's ``update`` and sends the blitted frame (Agg plus the PNG
  sent to the page in its Image); separately, ``update`` alone; and, for reference,
  a full redraw (``fig.canvas.draw()``, what every move cost before the
  explorers blitted, and what a resize still costs).

Each browser move is also split into four stages that add up to its latency
(`STAGES`, `move_stages`), from stamps the page and the kernel take: the
change reaching the kernel, the kernel's work until it sends the frame, the
frame reaching the page, and the page decoding and painting it. The kernel
also stamps its garbage collections, and each move says how much of its
time in the kernel they took (`GC`).

Prints p50 and p95 per control against the targets (p95 under 100 ms in the
browser, under 60 ms for the whole kernel callback, frame included) and
writes them, with the command and the machine, to
``benchmarks/results/latency-<machine>.json``, by default named after the
processor (`cpu_slug`, e.g. ``latency-amd-epyc-2cpu.json``): latency is a
property of the machine, so each processor model keeps its own file.

Latency on a shared machine says little, so the record also says what the
machine was and how busy: its CPU model and count, the load average before
the run, sampled during it and after, and the CPU time that processes other
than the benchmark's own (its JupyterLab, kernels and Chromium) used meanwhile,
as a share of the machine (`MachineLoad`). When the machine was busy (see
`busy_warnings`) the report starts and ends with a warning, and the record
says ``"busy": true``: such figures are not the idle ones a committed file
should hold.

    python benchmarks/latency.py [--moves 20] [--rounds 2] [notebooks/02_*.ipynb ...]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import labdriver  # the browser driver (labdriver/): one way to start and drive the lab
from attention_course.bench.machine import (
    MachineLoad,
    busy_warnings,
    cpu_model,
    cpu_slug,
    host_record,
)

REPO = Path(__file__).resolve().parents[1]

BROWSER_P95_MS = 100.0
KERNEL_P95_MS = 60.0
SETTLE_MS = 2000  # after Run All, before the first move
# After scrolling a control into view, before its first move: a learner scrolls to a figure
# and reads it before moving anything. (Each figure's first move was its slowest even so,
# 100-180 ms against 70-90 after, on 2026-12-01: JupyterLab activating the cell when the
# handle took focus, 40-100 ms of page work, most of it resetting every other cell's editor
# selection, ran inside the key press's time. A learner grabs first; labdriver's moves do.)
READ_MS = 1000

# The four stages of a browser move, which add up to its latency (`move_stages`).
STAGES = ("to kernel", "in kernel", "to page", "to screen")
GC = "of which gc"  # the kernel's garbage collections within "in kernel"
# The page's and the kernel's clocks are both the system's, read as epoch ms; a stamp a few
# ms before the input still counts as after it (moves are far more than this apart).
CLOCK_SLACK_MS = 5.0

# Installed in the notebook's kernel before the moves: stamps (epoch ms) when a control's
# new value arrives (ipywidgets' set_state, called for each "update" message from the page)
# and when an explorer's picture (an ipywidgets Image) sends a frame.
KERNEL_STAMPS = r"""
def _latency_stamps_install():
    import time
    import ipywidgets

    import gc

    stamps = {"received": [], "sent": [], "gc": []}  # gc: [start, end] of each collection
    started = []

    def stamped_gc(phase, info):
        if phase == "start":
            started[:] = [time.time() * 1e3]
        elif started:
            stamps["gc"].append([started[0], time.time() * 1e3])

    gc.callbacks.append(stamped_gc)
    set_state = ipywidgets.Widget.set_state
    send_state = ipywidgets.Widget.send_state

    def stamped_set_state(self, sync_data):
        stamps["received"].append(time.time() * 1e3)
        return set_state(self, sync_data)

    def stamped_send_state(self, key=None):
        sent = send_state(self, key)
        if isinstance(self, ipywidgets.Image):  # an explorer's frame has gone to the page
            stamps["sent"].append(time.time() * 1e3)
        return sent

    ipywidgets.Widget.set_state = stamped_set_state
    ipywidgets.Widget.send_state = stamped_send_state
    return stamps


def _latency_stamps_take():
    import json
    print(json.dumps(_latency_stamps))
    for times in _latency_stamps.values():
        times.clear()


_latency_stamps = _latency_stamps_install()
"""

_KERNEL_TIMING = r"""
def _latency_in_kernel(rounds):
    import json, time
    import numpy as np
    import ipywidgets as w
    from attention_course.explorers.base import live_explorers

    def values_of(c):
        if isinstance(c, w.Checkbox):
            return [not c.value, c.value]
        if hasattr(c, "_options_values"):
            return list(c._options_values)
        if isinstance(c, w.FloatLogSlider):
            return list(c.base ** np.linspace(c.min, c.max, 12))
        if isinstance(c, (w.IntSlider, w.FloatSlider)):
            return list(np.linspace(c.min, c.max, 12).astype(type(c.value)))
        return []

    explorers = live_explorers()  # frozen ones included, which gc.get_objects() leaves out

    def enable(e, c):
        # a control disabled at the start (the multiplier c outside the custom rule): the
        # options of the explorer's other choice controls, in turn, until it is enabled
        for other in e.controls:
            if other is c or not hasattr(other, "_options_values"):
                continue
            for v in list(other._options_values):
                if c.disabled:
                    other.value = v

    results = []
    for e in explorers:
        names = {id(v): k for k, v in vars(e).items()}
        entries = []
        for c in e.controls:
            if c.disabled:
                enable(e, c)
            values, original = values_of(c), c.value
            callback, update = [], []
            for _ in range(rounds):
                for v in values:
                    if v == c.value or c.disabled:
                        continue
                    t0 = time.perf_counter()
                    c.value = v  # update() and the frame sent to the page
                    t1 = time.perf_counter()
                    e.update()  # the same numbers and artists again, no frame
                    t2 = time.perf_counter()
                    callback.append(1e3 * (t1 - t0))
                    update.append(1e3 * (t2 - t1))
            c.value = original
            entries.append({"control": f"{type(e).__name__}.{names.get(id(c), '?')}",
                            "description": c.description, "blits": e.blits,
                            "callback_ms": callback, "update_ms": update})
        # after the moves: a full draw drops the cached background, which the kernel
        # redraws when idle (a timer) and this loop never is
        full = []
        for _ in range(3):
            t0 = time.perf_counter()
            e.fig.canvas.draw()
            full.append(1e3 * (time.perf_counter() - t0))
        results += [entry | {"full_redraw_ms": full} for entry in entries]
    print(json.dumps(results))
"""


def percentiles(samples: list[float]) -> dict[str, float | int | None]:
    if not samples:
        return {"n": 0, "p50": None, "p95": None}
    a = np.asarray(samples, dtype=float)
    return {
        "n": int(a.size),
        "p50": float(np.percentile(a, 50)),
        "p95": float(np.percentile(a, 95)),
    }


def move_stages(
    page_times: dict[str, float | None],
    received: list[float],
    sent: list[float],
    collections: list[list[float]] | None = None,
) -> dict[str, float] | None:
    """One move's latency split into `STAGES` (ms, adding up to it); None where a stamp is missing.

    ``page_times``: a `labdriver.Move`'s (input, frame arrival and draw on the
    page's clock, and the clock's origin in epoch ms); ``received`` and
    ``sent``: the kernel's stamps (epoch ms) of control values received and
    frames sent. The change is the first value received from the input on;
    the frame the last one sent before the painted frame reached the page.
    With ``collections`` (the kernel's garbage collections, [start, end] in
    epoch ms), also ``"of which gc"``: the part of "in kernel" they took
    (not a stage of its own: the stages still add up to the latency).
    """
    if any(page_times.get(key) is None for key in ("origin", "input", "frame", "draw")):
        return None
    origin = page_times["origin"]
    t_input, frame, draw = (page_times[key] for key in ("input", "frame", "draw"))
    assert origin is not None and t_input is not None and frame is not None and draw is not None
    arrived = [t - origin for t in received if t_input - CLOCK_SLACK_MS <= t - origin <= draw]
    if not arrived:
        return None
    left = [t - origin for t in sent if arrived[0] <= t - origin <= frame + CLOCK_SLACK_MS]
    if not left:
        return None
    times = (t_input, arrived[0], left[-1], frame, draw)
    stages = {stage: b - a for stage, (a, b) in zip(STAGES, itertools.pairwise(times), strict=True)}
    if collections is not None:
        start, end = arrived[0] + origin, left[-1] + origin
        stages[GC] = sum(max(0.0, min(b, end) - max(a, start)) for a, b in collections)
    return stages


def browser_moves(
    page: labdriver.NotebookPage, box: int, j: int, moves: int
) -> tuple[list[float], list[dict[str, float] | None]]:
    """Latencies (ms) of ``moves`` learner moves on control ``j`` of figure box ``box``,
    and each one's `move_stages` (None where a stamp is missing)."""
    latencies: list[float] = []
    page_times: list[dict[str, float | None]] = []
    direction = "ArrowRight"
    enable(page, box, j)
    page.scroll_to(page.controls()[box][j])
    page.page.wait_for_timeout(READ_MS)
    for _ in range(moves):
        control = page.controls()[box][j]
        if control["disabled"]:
            break
        if control["kind"] == "slider":
            if control["atMax"]:
                direction = "ArrowLeft"
            elif control["atMin"]:
                direction = "ArrowRight"
            action = direction
        elif control["kind"] in ("toggle", "dropdown"):
            action = control["options"][(control["active"] + 1) % len(control["options"])]
        else:
            action = "click"
        move = page.move(control, action)
        if move.latency_ms is not None:
            latencies.append(move.latency_ms)
            page_times.append(move.page_times)
    stamps = json.loads(page.execute("_latency_stamps_take()").splitlines()[-1])
    return latencies, [
        move_stages(t, stamps["received"], stamps["sent"], stamps["gc"]) for t in page_times
    ]


def enable(page: labdriver.NotebookPage, box: int, j: int) -> bool:
    """Choose the options of figure box ``box``'s toggles and dropdowns, in turn, until its
    control ``j`` is enabled, as a learner would (02's and 04's multiplier c moves only under
    the custom scale rule); whether it is."""
    for i in range(len(page.controls()[box])):
        if not page.controls()[box][j]["disabled"]:
            return True
        other = page.controls()[box][i]
        if i == j or other["kind"] not in ("toggle", "dropdown") or other["disabled"]:
            continue
        for k, option in enumerate(other["options"]):
            if k != other["active"] and page.controls()[box][j]["disabled"]:
                page.move(other, option)
    return not page.controls()[box][j]["disabled"]


def stage_medians(stages: list[dict[str, float] | None]) -> dict[str, float | None]:
    """Each of `STAGES`' median (ms) over the moves that have all four stamps."""
    known = [s for s in stages if s is not None]
    return {
        stage: float(np.median([s[stage] for s in known])) if known else None for stage in STAGES
    }


def measure_notebook(browser, server, name: str, moves: int, rounds: int) -> dict:
    page = labdriver.NotebookPage.open(browser, server, name, workspace=f"bench-{name[:2]}")
    try:
        page.run_all()
        # As a learner reads before moving anything: in this time each figure's kernel
        # caches its background (100-200 ms a figure), which a move straight after Run All
        # would wait behind (up to 440 ms measured on notebook 01's first figure).
        page.page.wait_for_timeout(SETTLE_MS)
        result: dict = {"notebook": name, "browser": [], "kernel": []}
        boxes = page.controls()
        if boxes:
            page.execute(KERNEL_STAMPS)
        for b, box in enumerate(boxes):
            for j, control in enumerate(box):
                samples, stages = browser_moves(page, b, j, moves)
                result["browser"].append(
                    {"box": b, "description": control["description"], "kind": control["kind"]}
                    | percentiles(samples)
                    | {"samples_ms": [round(s, 1) for s in samples]}
                    | {"stages_p50_ms": stage_medians(stages)}
                    | {"gc_max_ms": max((s[GC] for s in stages if s is not None), default=None)}
                    | {
                        "stages_ms": [
                            None if s is None else {k: round(v, 1) for k, v in s.items()}
                            for s in stages
                        ]
                    }
                )
        if result["browser"]:
            page.execute(_KERNEL_TIMING)
            for entry in json.loads(page.execute(f"_latency_in_kernel({rounds})").splitlines()[-1]):
                result["kernel"].append(
                    {k: entry[k] for k in ("control", "description", "blits")}
                    | {
                        f"{what}_{k}": v
                        for what in ("callback", "update", "full_redraw")
                        for k, v in percentiles(entry[f"{what}_ms"]).items()
                    }
                )
        return result
    finally:
        page.close()


def _fmt(x: float | None) -> str:
    return "   -  " if x is None else f"{x:6.1f}"


def report(results: list[dict], load: MachineLoad | None = None) -> list[str]:
    """The printed report; with ``load``, the machine and its load first, and any warning
    that it was busy at both ends."""
    warnings = busy_warnings(load) if load is not None else []
    lines = [*warnings]
    if load is not None:
        during = load.record()["load_average_during"]
        lines.append(
            f"machine: {cpu_model()}, {load.cpus} CPUs; load average before "
            f"{_loads(load.before)}, during median {_fmt(during['median']).strip()} "
            f"max {_fmt(during['max']).strip()}, after {_loads(load.after)}; "
            f"others' CPU share {_share(load.others_share)}, others' load during "
            f"{_fmt(load.others_load).strip()} (this run's own {_fmt(load.own_cpus).strip()} CPUs)"
        )
    lines.append(
        "browser: key press, click or choice to redrawn figure "
        f"(target p95 < {BROWSER_P95_MS:.0f} ms)"
    )
    for nb in results:
        for r in nb["browser"]:
            flag = "" if r["p95"] is None or r["p95"] < BROWSER_P95_MS else "  MISS"
            lines.append(
                f"  {nb['notebook'][:28]:28} box {r['box']} {r['description'][:34]:34} "
                f"n={r['n']:2} p50 {_fmt(r['p50'])} p95 {_fmt(r['p95'])} "
                f"first {_fmt((r.get('samples_ms') or [None])[0])} ms{flag}"
            )
    lines.append(
        f"where the browser's time goes: p50 of each stage, ms ({', '.join(STAGES)}); "
        "the most any move spent in the kernel's garbage collections"
    )
    for nb in results:
        for r in nb["browser"]:
            medians = r.get("stages_p50_ms") or {}
            stages = "  ".join(f"{stage} {_fmt(medians.get(stage))}" for stage in STAGES)
            lines.append(
                f"  {nb['notebook'][:28]:28} box {r['box']} {r['description'][:34]:34} {stages}"
                f"  (gc at most {_fmt(r.get('gc_max_ms'))})"
            )
    lines.append(
        f"kernel: whole callback, update and frame (target p95 < {KERNEL_P95_MS:.0f} ms); "
        "update alone; a full redraw for reference"
    )
    for nb in results:
        for r in nb["kernel"]:
            flag = (
                "" if r["callback_p95"] is None or r["callback_p95"] < KERNEL_P95_MS else "  MISS"
            )
            lines.append(
                f"  {nb['notebook'][:28]:28} {r['control'][:34]:34} n={r['callback_n']:3} "
                f"callback p50 {_fmt(r['callback_p50'])} p95 {_fmt(r['callback_p95'])}; "
                f"update p95 {_fmt(r['update_p95'])}; "
                f"full redraw p50 {_fmt(r['full_redraw_p50'])} ms{flag}"
            )
    return [*lines, *warnings]


def _loads(loads: tuple[float, float, float] | None) -> str:
    return "-" if loads is None else "/".join(f"{x:.2f}" for x in loads)


def _share(share: float | None) -> str:
    return "-" if share is None else f"{share:.0%}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", help="default: every numbered notebook")
    # 20: of 12 moves numpy's p95 lies 45% of the way from the second slowest to the slowest,
    # so one slow move decides it; of 20 it is the second slowest (and 5% of the way on)
    parser.add_argument("--moves", type=int, default=20, help="browser moves per control")
    parser.add_argument("--rounds", type=int, default=2, help="kernel passes over each control")
    parser.add_argument(
        "--machine",
        default=cpu_slug(),
        help="the results file's name, latency-<machine>.json (default: the processor, "
        f"{cpu_slug()}: one file per model)",
    )
    args = parser.parse_args(argv)
    reason = labdriver.chromium_missing()
    if reason:
        print(f"cannot measure in a browser: {reason}", file=sys.stderr)
        return 2
    names = labdriver.notebook_names(args.notebooks)

    started = time.time()
    load = MachineLoad().start()
    results = []
    with (
        tempfile.TemporaryDirectory(prefix="latency-") as tmp,
        labdriver.scratch_lab(Path(tmp)) as server,
        labdriver.chromium_browser() as browser,
    ):
        for name in names:
            print(f"measuring {name} ...", flush=True)
            results.append(measure_notebook(browser, server, name, args.moves, args.rounds))
        load.stop()  # while our server, kernels and browser still count as ours
    lines = report(results, load)
    print("\n".join(lines))
    out = REPO / "benchmarks" / "results" / f"latency-{args.machine}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "command": " ".join(["python", "benchmarks/latency.py", *(argv or sys.argv[1:])]),
        "machine": host_record(args.machine),
        "load": load.record(),
        "targets_ms": {"browser_p95": BROWSER_P95_MS, "kernel_callback_p95": KERNEL_P95_MS},
        "seconds": round(time.time() - started, 1),
        "results": results,
        "summary": lines,
    }
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"written to {out.relative_to(REPO)}")
    return 3 if busy_warnings(load) else 0  # 3: measured, but on a busy machine


if __name__ == "__main__":
    raise SystemExit(main())
