"""A class on one server, measured: N learners on the course's JupyterHub (a benchmark).

For each N (``--learners``, default 1 5 10 20 30) a fresh hub starts
(`labdriver.hub.running_hub`: the real hub, proxy and spawner, N real system
users), with the course served to nbgitpuller from this checkout. Each
learner is a process of its own (``--drive``) with its own browser context
in one shared Chromium: it logs in through the hub's form, lands on the
course (nbgitpuller's link), opens 01, runs it all, reads for a moment, then
moves 01's sliders, one key press every ``--think`` seconds (2), round the
figures, for ``--duration`` seconds (180), as a class does. All start at once.

Measured per N, while the learners move (from the first learner's first move
to the last learner's last):

- slider latency, key press to redrawn picture on the page's own clock
  (`labdriver.NotebookPage.move`), p50 and p95 over every learner's moves;
- memory per learner: the PSS of their kernel plus their server, the largest
  each learner reached (sampled every `SAMPLE_S` s), median and max over learners;
- CPU: the machine's busy share, split into the learners' processes (servers
  and kernels), the hub (hub, proxy, culler), the browsers (which in a real
  class run on the learners' laptops, not on the server) and anything else;
- kernels lost (a learner's kernel that was there when the moves began and is
  gone or replaced before they end), error outputs after Run All, and moves that
  failed (no redraw within `MOVE_TIMEOUT_MS`).

``--kill`` N: in the run with N learners, learner 0's kernel is killed
(SIGKILL) half-way through the moves, as a crash would; the others' p50 and
p95 before and after are recorded beside the row (the fault run's own row,
with that learner left out of ``lost``).

The browsers and the drivers share the 2 cores with the hub here, so the
latency is a pessimistic one: the row says how much CPU they took.

Writes ``benchmarks/results/hub-<machine>.json`` (``<machine>`` as
`benchmarks/latency.py` names it), a row per N with the machine and its load.
Run as root (it makes and removes system users), with the hub's environment
installed (``python -m course hub install``, which it runs if needed):

    python benchmarks/hub_load.py [--learners 1 5 10 20 30] [--duration 180] [--kill 10]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psutil

import labdriver
from attention_lib.bench.machine import MachineLoad, busy_warnings, cpu_model, cpu_slug
from labdriver import hub as hubdriver
from labdriver.sources import js

REPO = Path(__file__).resolve().parents[1]
MiB = 2**20
NOTEBOOK = "attention-course/notebooks/01_beginner_crowded_room.ipynb"  # in a learner's home
SAMPLE_S = 10.0  # memory and CPU samples
READ_S = 3.0  # after Run All, before the first move: a learner reads the figures first
MOVE_TIMEOUT_MS = 60_000  # a move with no redraw by then is a failure
P95_GOAL_MS = 250.0  # the latency a class should feel, at most, for the learners-per-core figure
LEARNER = "hubload-{:02d}"


# -- one learner: a driver process -------------------------------------------------------


def drive(args: argparse.Namespace) -> int:
    """One learner, end to end; writes what happened to ``args.out`` (JSON)."""
    from playwright.sync_api import sync_playwright

    record: dict[str, Any] = {"learner": args.drive, "moves": [], "failures": []}
    rng = random.Random(args.drive)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.connect_over_cdp(args.cdp)
            hub = _HubAddress(args.hub_url, args.password)
            context = hubdriver.log_in(browser, hub, args.drive)
            record["logged_in_at"] = time.time()
            page = labdriver.NotebookPage.open(
                browser,
                hub.server(args.drive),
                NOTEBOOK,
                workspace="load",
                viewport=(1280, 800),
                context=context,
            )
            record["run_all_s"] = page.run_all(timeout_s=1800)
            record["error_outputs"] = [
                f"{o['ename']}: {o['evalue']}"
                for c in page.cells()
                for o in c["outputs"]
                if o["output_type"] == "error"
            ]
            page.page.wait_for_timeout(READ_S * 1000)
            Path(args.out).with_suffix(".moving").write_text(str(time.time()))
            _move_for(page, args.duration, args.think, rng, record)
    except Exception as error:  # recorded: the parent counts it as an error of this learner
        record["failures"].append(f"{type(error).__name__}: {error}"[:2000])
    Path(args.out).write_text(json.dumps(record))
    return 0


@dataclass
class _HubAddress:
    """What `labdriver.hub.log_in` needs of a hub: its address and the learners' password."""

    url: str
    password: str

    def server(self, name: str) -> hubdriver.LearnerServer:
        return hubdriver.LearnerServer(f"{self.url}/user/{name}")


def _move_for(
    page: labdriver.NotebookPage,
    duration: float,
    think: float,
    rng: random.Random,
    record: dict[str, Any],
) -> None:
    """Key presses on the page's sliders, one every ``think`` s (a random first phase, so
    that the class's moves are spread), round the sliders, for ``duration`` s. A kernel
    that restarted (it died: the server started a new one) is answered as a learner
    answers it: Run All again, then on with the moves."""
    sliders = _sliders(page)
    restarts = page.page.evaluate(js("restarts"))
    turn = rng.randrange(len(sliders))
    directions: dict[tuple[int, int], str] = {}
    start = time.time()
    record["moves_from"] = start
    due = start + rng.uniform(0, think)
    while True:
        now = time.time()
        if now >= start + duration:
            break
        time.sleep(max(0.0, due - now))
        if page.page.evaluate(js("restarts")) != restarts:
            record.setdefault("restarts", []).append(time.time())
            page.run_all(timeout_s=1800)
            sliders, restarts = _sliders(page), page.page.evaluate(js("restarts"))
            due = time.time()
            continue
        key = sliders[turn % len(sliders)]
        turn += 1
        control = next(
            c for c in page.controls()[key[0]] if c["kind"] == "slider" and c["nth"] == key[1]
        )
        direction = directions.get(key, "ArrowRight")
        if control["atMax"]:
            direction = "ArrowLeft"
        elif control["atMin"]:
            direction = "ArrowRight"
        directions[key] = direction
        if not control["disabled"]:
            page.scroll_to(control)
        at = time.time()
        try:
            move = page.move(control, direction, timeout_ms=MOVE_TIMEOUT_MS)
        except labdriver.RedrawTimeout as error:
            record["failures"].append(f"move at {at:.1f}: {error}"[:500])
        else:
            record["moves"].append({"at": at, "late_s": at - due, "ms": move.latency_ms})
        due = max(due + think, time.time())  # a late move does not make the next ones hurry
    record["moves_to"] = time.time()


def _sliders(page: labdriver.NotebookPage) -> list[tuple[int, int]]:
    """(box, nth) of every enabled slider on the page."""
    sliders = [
        (c["box"], c["nth"])
        for box in page.controls()
        for c in box
        if c["kind"] == "slider" and not c["disabled"]
    ]
    if not sliders:
        raise RuntimeError(f"{NOTEBOOK} shows no slider after Run All")
    return sliders


# -- the class: the hub, the learners, the samples ----------------------------------------


@dataclass
class Samples:
    """What the sampler saw: each learner's largest kernel+server PSS, kernels by learner
    at each sample, and CPU seconds by group."""

    pss_mib: dict[str, float] = field(default_factory=dict)
    server_mib: dict[str, float] = field(default_factory=dict)
    kernels: dict[str, list[tuple[float, set[int]]]] = field(default_factory=dict)
    cpu_s: dict[int, tuple[str, float]] = field(default_factory=dict)  # pid: (group, seconds)
    browser_pss_mib: float = 0.0


def _is_kernel(process: psutil.Process) -> bool:
    with contextlib.suppress(psutil.Error):
        return "ipykernel" in " ".join(process.cmdline())
    return False


def sample(hub: hubdriver.Hub, drivers: list[psutil.Process], chromium: int, out: Samples) -> None:
    """One sample: memory of each learner's kernel and server, and CPU time by group."""
    now = time.time()
    learner_pids: set[int] = set()
    for name in hub.learners:
        with contextlib.suppress(KeyError):
            processes = hub.processes(name)
            kernels = {p.pid for p in processes if _is_kernel(p)}
            out.kernels.setdefault(name, []).append((now, kernels))
            pss = server = 0.0
            for p in processes:
                with contextlib.suppress(psutil.Error):
                    learner_pids.add(p.pid)
                    mib = p.memory_full_info().pss / MiB
                    pss += mib
                    if p.pid not in kernels:
                        server += mib
                    out.cpu_s[p.pid] = ("learners", sum(p.cpu_times()[:4]))
            if kernels:  # the learner's own: once their notebook runs
                out.pss_mib[name] = max(out.pss_mib.get(name, 0.0), pss)
                out.server_mib[name] = max(out.server_mib.get(name, 0.0), server)
    groups = [("hub", [psutil.Process(hub.proc.pid)]), ("drivers", drivers)]
    with contextlib.suppress(psutil.Error):
        groups.append(("browser", [psutil.Process(chromium)]))
    browser_pss = 0.0
    for group, roots in groups:
        for root in roots:
            with contextlib.suppress(psutil.Error):
                for p in [root, *root.children(recursive=True)]:
                    if p.pid in learner_pids:
                        continue
                    with contextlib.suppress(psutil.Error):
                        out.cpu_s[p.pid] = (group, sum(p.cpu_times()[:4]))
                        if group in ("browser", "drivers"):
                            browser_pss += p.memory_full_info().pss / MiB
    out.browser_pss_mib = max(out.browser_pss_mib, browser_pss)


def _cpu_by_group(first: dict[int, tuple[str, float]], last: dict[int, tuple[str, float]]) -> dict:
    used: dict[str, float] = {}
    for pid, (group, seconds) in last.items():
        used[group] = used.get(group, 0.0) + seconds - first.get(pid, (group, 0.0))[1]
    return used


@contextlib.contextmanager
def shared_chromium(workdir: Path):
    """Debian's Chromium with a DevTools port, which every learner's driver connects to
    (one browser, a context per learner: a renderer each, one browser process for all)."""
    port = labdriver.free_port()
    profile = workdir / "chromium-profile"
    command = [
        str(labdriver.CHROMIUM),
        *labdriver.CHROMIUM_ARGS,
        f"--remote-debugging-port={port}",
        "--remote-debugging-address=127.0.0.1",
        f"--user-data-dir={profile}",
        "about:blank",
    ]
    proc = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while not _answers(f"{url}/json/version"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("Chromium's DevTools port did not answer")
            time.sleep(0.3)
        yield proc, url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        shutil.rmtree(profile, ignore_errors=True)


def _answers(url: str) -> bool:
    with contextlib.suppress(OSError):
        return hubdriver.request("GET", url)[0] == 200
    return False


def percentiles(samples: list[float]) -> tuple[float | None, float | None]:
    if not samples:
        return None, None
    return float(np.percentile(samples, 50)), float(np.percentile(samples, 95))


def run_class(
    n: int, workdir: Path, repo: str, duration: float, think: float, kill: bool
) -> dict[str, Any]:
    """N learners on a fresh hub, all starting at once; the row for N."""
    names = [LEARNER.format(i) for i in range(n)]
    folder = workdir / f"class-{n}"
    folder.mkdir(parents=True, exist_ok=True)
    with (
        hubdriver.running_hub(folder / "hub", names, repo=repo) as hub,
        shared_chromium(folder) as (chromium, cdp),
    ):
        started = time.time()
        drivers = [
            subprocess.Popen(
                [
                    sys.executable, __file__, "--drive", name, "--hub-url", hub.url,
                    "--password", hub.password, "--cdp", cdp, "--duration", str(duration),
                    "--think", str(think), "--out", str(folder / f"{name}.json"),
                ],
                cwd=REPO,
                stdout=(folder / f"{name}.log").open("w"),
                stderr=subprocess.STDOUT,
            )
            for name in names
        ]  # fmt: skip
        watched = [psutil.Process(d.pid) for d in drivers]
        samples = Samples()
        snapshots = []  # (time, CPU seconds by process, the machine's CPU times)
        killed: dict[str, Any] = {}
        kill_at = None
        while any(d.poll() is None for d in drivers):
            sample(hub, watched, chromium.pid, samples)
            snapshots.append((time.time(), dict(samples.cpu_s), psutil.cpu_times()))
            if (
                kill
                and kill_at is None
                and all((folder / f"{name}.moving").exists() for name in names)
            ):
                kill_at = time.time() + duration / 3  # every learner moves before and after
            if kill_at is not None and time.time() >= kill_at and not killed:
                killed = kill_kernel(hub, names[0])
            to_kill = SAMPLE_S if kill_at is None or killed else kill_at - time.time()
            time.sleep(min(SAMPLE_S, max(0.2, to_kill)))
        records = [
            json_if(folder / f"{name}.json") or {"learner": name, "failures": ["no record"]}
            for name in names
        ]
        seconds = time.time() - started
    return row(n, records, samples, snapshots, killed, seconds)


def json_if(path: Path) -> dict[str, Any] | None:
    with contextlib.suppress(OSError, ValueError):
        return json.loads(path.read_text())
    return None


def _all_moving(samples: Samples, names: list[str]) -> bool:
    return all(samples.kernels.get(n) and samples.kernels[n][-1][1] for n in names)


def kill_kernel(hub: hubdriver.Hub, name: str) -> dict[str, Any]:
    """SIGKILL learner ``name``'s kernel, as a crash would."""
    for p in hub.processes(name):
        if _is_kernel(p):
            p.kill()
            return {"learner": name, "pid": p.pid, "at": time.time()}
    seen = [" ".join(p.cmdline())[:120] for p in hub.processes(name)]
    return {"learner": name, "pid": None, "at": time.time(), "processes": seen}


def lost_kernels(samples: Samples, window: tuple[float, float], spare: str | None) -> list[str]:
    """Learners whose kernel, there when the moves began, was gone or replaced by their end."""
    lost = []
    for name, seen in samples.kernels.items():
        inside = [kernels for at, kernels in seen if window[0] <= at <= window[1]]
        if name != spare and inside and (not inside[0] or inside[-1] != inside[0]):
            lost.append(name)
    return lost


def row(
    n: int,
    records: list[dict[str, Any]],
    samples: Samples,
    snapshots: list[tuple[float, dict[int, tuple[str, float]], Any]],
    killed: dict[str, Any],
    seconds: float,
) -> dict[str, Any]:
    """The row for N learners: latency, memory, CPU in the moves' window, lost, errors."""
    moves = [m for r in records for m in r.get("moves", []) if m["ms"] is not None]
    p50, p95 = percentiles([m["ms"] for m in moves])
    window = (
        min((r.get("moves_from", np.inf) for r in records), default=0.0),
        max((r.get("moves_to", 0.0) for r in records), default=0.0),
    )
    inside = [s for s in snapshots if window[0] <= s[0] <= window[1]] or snapshots[-1:]
    (t0, first_cpu, machine_first), (t1, last_cpu, machine_last) = inside[0], inside[-1]
    wall = max(t1 - t0, 1e-9)
    total = sum(machine_last) - sum(machine_first)
    idle = machine_last.idle + getattr(machine_last, "iowait", 0.0)
    idle -= machine_first.idle + getattr(machine_first, "iowait", 0.0)
    busy = 1.0 - idle / total if total > 0 else None
    cpus = psutil.cpu_count() or 1
    spent = {
        g: round(sec / (wall * cpus), 3) for g, sec in _cpu_by_group(first_cpu, last_cpu).items()
    }
    if busy is not None:
        spent["other"] = round(max(0.0, busy - sum(spent.values())), 3)
    pss = sorted(samples.pss_mib.values())
    result: dict[str, Any] = {
        "learners": n,
        "p50_ms": None if p50 is None else round(p50, 1),
        "p95_ms": None if p95 is None else round(p95, 1),
        "moves": len(moves),
        "late_moves": sum(m["late_s"] > 1.0 for r in records for m in r.get("moves", [])),
        "kernel_mib": round(float(np.median(pss)), 1) if pss else None,
        "kernel_mib_max": round(pss[-1], 1) if pss else None,
        "server_mib": round(float(np.median(list(samples.server_mib.values()))), 1)
        if samples.server_mib
        else None,
        "browsers_mib": round(samples.browser_pss_mib, 1),
        "cpu_busy": None if busy is None else round(busy, 3),
        "cpu_share": spent,
        "lost": len(lost_kernels(samples, window, killed.get("learner"))),
        "errors": sum(
            len(r.get("error_outputs", [])) + len(r.get("failures", [])) for r in records
        ),
        "failures": [f for r in records for f in r.get("failures", [])][:10],
        "run_all_s": percentiles([r["run_all_s"] for r in records if "run_all_s" in r]),
        "moves_window_s": round(window[1] - window[0], 1),
        "seconds": round(seconds, 1),
    }
    if killed:
        at = killed["at"]
        others = [r for r in records if r["learner"] != killed["learner"]]
        before = [m["ms"] for r in others for m in r.get("moves", []) if m["ms"] and m["at"] < at]
        after = [m["ms"] for r in others for m in r.get("moves", []) if m["ms"] and m["at"] >= at]
        killed_record = next(r for r in records if r["learner"] == killed["learner"])
        result["fault"] = killed | {
            "others_before_p50_p95_ms": percentiles(before),
            "others_after_p50_p95_ms": percentiles(after),
            "killed_learner_failures": killed_record.get("failures", []),
        }
        # the killed learner's failed moves are the fault's, not the class's
        result["errors"] -= len(killed_record.get("failures", []))
    return result


# -- the report ----------------------------------------------------------------------------


def _errors(record: dict[str, Any]) -> int:
    """A learner's error outputs after Run All and failed moves (or a driver that failed)."""
    return len(record.get("error_outputs", [])) + len(record.get("failures", []))


def learners_per_core(rows: list[dict[str, Any]], cpus: int) -> float | None:
    """The most learners per core with p95 under `P95_GOAL_MS`, no kernel lost and no error."""
    fine = [
        r["learners"]
        for r in rows
        if "fault" not in r
        and r["p95_ms"] is not None
        and r["p95_ms"] < P95_GOAL_MS
        and not r["lost"]
        and not r["errors"]
    ]
    return max(fine) / cpus if fine else None


def report(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "learners  p50 ms  p95 ms  moves  late  kernel+server MiB (median/max)  "
        "CPU busy (learners/hub/browser+drivers/other)  lost  errors  Run All s (p50/p95)"
    ]
    for r in rows:
        share = r["cpu_share"]
        run_all = r["run_all_s"]
        lines.append(
            f"{r['learners']:8}  {_f(r['p50_ms'])}  {_f(r['p95_ms'])}  {r['moves']:5}  "
            f"{r['late_moves']:4}  {_f(r['kernel_mib'])} / {_f(r['kernel_mib_max'])}"
            f"{'':15}  {_pc(r['cpu_busy'])} ({_pc(share.get('learners'))}/{_pc(share.get('hub'))}/"
            f"{_pc(share.get('browser'))}+{_pc(share.get('drivers'))}/{_pc(share.get('other'))})"
            f"{'':10}"
            f"{r['lost']:4}  {r['errors']:6}  {_f(run_all[0])} / {_f(run_all[1])}"
            + ("  (fault run)" if "fault" in r else "")
        )
        if "fault" in r:
            f = r["fault"]
            lines.append(
                f"          {f['learner']}'s kernel killed: the others' p50/p95 "
                f"{_f(f['others_before_p50_p95_ms'][0])}/{_f(f['others_before_p50_p95_ms'][1])} "
                f"ms before, {_f(f['others_after_p50_p95_ms'][0])}/"
                f"{_f(f['others_after_p50_p95_ms'][1])} ms after"
            )
    return lines


def _f(x: float | None) -> str:
    return "     -" if x is None else f"{x:6.1f}"


def _pc(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learners", type=int, nargs="+", default=[1, 5, 10, 20, 30])
    parser.add_argument("--duration", type=float, default=180.0, help="seconds of moves")
    parser.add_argument("--think", type=float, default=2.0, help="seconds between moves")
    parser.add_argument(
        "--kill", type=int, default=None, metavar="N",
        help="also a fault run with N learners: learner 0's kernel killed half-way",
    )  # fmt: skip
    parser.add_argument(
        "--machine", default=cpu_slug(), help=f"the file's name, hub-<machine>.json ({cpu_slug()})"
    )
    # one learner's driver, started by the benchmark itself
    for option in ("--drive", "--hub-url", "--password", "--cdp", "--out"):
        parser.add_argument(option, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.drive:
        return drive(args)
    reason = hubdriver.hub_missing()
    if reason:
        print(f"cannot start a hub here: {reason}", file=sys.stderr)
        return 2
    runs = [(n, False) for n in args.learners] + ([(args.kill, True)] if args.kill else [])
    out = REPO / "benchmarks" / "results" / f"hub-{args.machine}.json"
    record: dict[str, Any] = {
        "command": " ".join(["python", "benchmarks/hub_load.py", *(argv or sys.argv[1:])]),
        "machine": {
            "name": args.machine,
            "cpu_model": cpu_model(),
            "cpus": os.cpu_count(),
            "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "notebook": NOTEBOOK.rpartition("/")[2],
        "think_s": args.think,
        "duration_s": args.duration,
        "rows": [],
    }
    load = MachineLoad().start()
    with tempfile.TemporaryDirectory(prefix="hub-load-") as tmp:
        workdir = Path(tmp)
        with hubdriver.course_remote(workdir / "remote") as remote:
            for n, kill in runs:
                print(f"{n} learner(s){' (a kernel killed)' if kill else ''} ...", flush=True)
                record["rows"].append(
                    run_class(n, workdir, remote.url, args.duration, args.think, kill)
                )
                print("\n".join(report(record["rows"][-1:])[1:]), flush=True)
        load.stop()
    cpus = os.cpu_count() or 1
    record["load"] = load.record()
    record["learners_per_core_p95_under_250ms"] = learners_per_core(record["rows"], cpus)
    lines = [*busy_warnings(load), *report(record["rows"])]
    lines.append(
        f"learners per core with p95 < {P95_GOAL_MS:.0f} ms, none lost, no error: "
        f"{record['learners_per_core_p95_under_250ms']}"
    )
    record["summary"] = lines
    print("\n".join(lines))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"written to {out.relative_to(REPO)}")
    return 3 if busy_warnings(load) else 0


if __name__ == "__main__":
    raise SystemExit(main())
