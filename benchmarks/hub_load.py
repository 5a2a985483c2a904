"""A class on one server, measured: N learners on the course's JupyterHub (a benchmark).

For each N (``--learners``, default 1 5 10 20 30) a fresh hub starts
(`labdriver.hub.running_hub`: the real hub, proxy and spawner, N real system
users), with the course served to nbgitpuller from this checkout. Each
learner is a process of its own (``--drive``): the first ``--browsers`` (5)
with their own browser context in one shared Chromium, the others on the wire
(`labdriver.wire`: the same login, pull, kernel, cells and widget messages
with no page, `BROWSERS` says why). The learners arrive ``--arrive`` seconds apart (5),
each logs in through the hub's form, lands on the course (nbgitpuller's
link), opens 01, runs it all and reads for a moment; once every learner is
ready, all move 01's sliders together, one key press every ``--think``
seconds (2), a few presses a slider, round the figures, for ``--duration``
seconds (180), as a class does. The file is written after each N.

The machine's CPUs are split (cpuset cgroups, `cpu_split`): the hub and the
class (the learners' servers and kernels) on CPUs 1 and up, the browsers, their
drivers and this benchmark on CPU 0. In a class the browsers run on the
learners' own machines; here they must not take the class's CPU, and the
class's figures are per CPU it had. (A browser spends about 0.1 s of CPU on a
move, more than the kernel: one CPU holds only a few learners' browsers before
their own work adds to the latency, which the stages show.)

Measured per N, while the learners move (from the first learner's first move
to the last learner's last):

- slider latency, key press to redrawn picture on the page's own clock
  (`labdriver.NotebookPage.press`), p50 and p95 over the browser learners' moves;
  to the frame's arrival in the page (or, on the wire, at the learner), over
  every learner's; and by stage (`latency.STAGES`: to the
  kernel, in it, to the page, to the screen), from stamps the page and the
  kernel take (`latency.KERNEL_STAMPS`);
- memory per learner: the PSS of their kernel plus their server, the largest
  each learner reached (sampled every `SAMPLE_S` s), median and max over learners;
- CPU: how busy the class's CPUs were (learners' processes and the hub), and the
  browsers' CPU; the machine's share by group (learners, hub, browser, drivers,
  other: the benchmark itself, git daemon serving the course);
- kernels lost (a learner's kernel that was there when the moves began and is
  gone or replaced before they end), error outputs after Run All, and moves that
  failed (no redraw within `MOVE_TIMEOUT_MS`).

``--kill`` N: a run with N learners where learner 0's kernel is killed
(SIGKILL) a third of the way into the moves, as a crash would; that learner
answers it as a learner does (closes the dialog, runs all again, moves on);
the others' p50 and p95 before and after are recorded beside the row (that
learner left out of ``lost``, and their failed moves out of ``errors``).

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
from latency import KERNEL_STAMPS, STAGES, move_stages  # benchmarks/latency.py

import labdriver
from attention_course.bench.machine import MachineLoad, busy_warnings, cpu_slug, host_record
from labdriver import OPEN_TIMEOUT_MS
from labdriver import hub as hubdriver

REPO = Path(__file__).resolve().parents[1]
MiB = 2**20
NOTEBOOK = "attention-course/notebooks/01_beginner_crowded_room.ipynb"  # in a learner's home
SAMPLE_S = 10.0  # memory and CPU samples
READ_S = 3.0  # after Run All, before the first move: a learner reads the figures first
# Learners arrive one after another, this far apart, as a class logs in: a hub that starts
# 20 servers at once on one CPU takes minutes, and the logins time out. Each then runs 01
# and waits; once all are ready (or have failed) the class moves together (`GO`).
ARRIVE_S = 5.0
GO = "go"  # the file, in the class's folder, that starts every learner's moves
MOVE_TIMEOUT_MS = 60_000  # a move with no redraw by then is a failure
PRESSES_PER_SLIDER = 5  # a learner tries a slider a few steps before the next one
# Learners in a browser; the rest of a class speak to their servers on the wire
# (labdriver.wire): the same logins, pulls, kernels, cells and widget messages, with no page.
# A browser context holds about 430 MiB and a tenth of a CPU per move (5 took 0.75 of the
# browsers' CPU, 10 all of it), and in a class they run on the learners' own machines: 30 of
# them here would take 13 GiB and the CPU the class is measured on. Five give the picture's
# latency while the class's load grows.
BROWSERS = 5
# In a class the browsers run on the learners' own machines, not on the hub's. Here they
# share it, so the machine's CPUs are split (cpusets): CPU 0 for the browsers, their
# drivers and this benchmark; the others for the hub and the class, which the rows'
# "per core" figures count. (A move every 2 s costs a browser about 0.1 s of CPU, more than
# the kernel spends on it: with one CPU for them, about 20 learners' browsers fill it.)
CPUSET = Path("/sys/fs/cgroup/cpuset")
P95_GOAL_MS = 250.0  # the latency a class should feel, at most, for the learners-per-core figure
CLASS_BUSY_MAX = 0.8  # past this a CPU's queue, and so the latency, grows fast
LEARNER = "hubload-{:02d}"


# -- one learner: a driver process -------------------------------------------------------


def drive(args: argparse.Namespace) -> int:
    """One learner, end to end; writes what happened to ``args.out`` (JSON)."""
    from playwright.sync_api import sync_playwright

    record: dict[str, Any] = {"learner": args.drive, "moves": [], "failures": []}
    rng = random.Random(args.drive)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.connect_over_cdp(args.cdp, timeout=OPEN_TIMEOUT_MS)
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
            page.execute(KERNEL_STAMPS)
            page.page.wait_for_timeout(READ_S * 1000)
            # ready: the class starts moving together (`run_class` says when)
            out = Path(args.out)
            out.with_suffix(".ready").write_text(str(time.time()))
            while not (out.parent / GO).exists():
                time.sleep(0.2)
            _move_for(page, args.duration, args.think, rng, record)
            stamps = json.loads(page.execute("_latency_stamps_take()").splitlines()[-1])
            for move in record["moves"]:
                move["stages"] = move_stages(
                    move.pop("page_times"), stamps["received"], stamps["sent"]
                )
    except Exception as error:  # recorded: the parent counts it as an error of this learner
        record["failures"].append(f"{type(error).__name__}: {error}"[:2000])
    Path(args.out).write_text(json.dumps(record))
    return 0


def drive_wire(args: argparse.Namespace) -> int:
    """One learner on the wire (`labdriver.wire`), the same steps as `drive`'s: log in, land
    on the course, run 01, read, then move with the class. Their moves time the key press to
    the frame's arrival (``frame_ms``: no page draws it, so ``ms`` is None)."""
    from labdriver.wire import WireLearner  # the learner's moves: `_move_wire_for`

    record: dict[str, Any] = {"learner": args.drive, "wire": True, "moves": [], "failures": []}
    rng = random.Random(args.drive)
    learner = None
    try:
        learner = WireLearner.log_in(args.hub_url, args.drive, args.password)
        record["logged_in_at"] = time.time()
        learner.open(NOTEBOOK)
        record["run_all_s"], record["error_outputs"] = learner.run_all(timeout=1800)
        learner.execute(KERNEL_STAMPS)
        time.sleep(READ_S)
        out = Path(args.out)
        out.with_suffix(".ready").write_text(str(time.time()))
        while not (out.parent / GO).exists():
            time.sleep(0.2)
        _move_wire_for(learner, args.duration, args.think, rng, record)
        printed, _ = learner.execute("_latency_stamps_take()")
        stamps = json.loads(printed.splitlines()[-1])
        for move in record["moves"]:
            move["stages"] = move_stages(move.pop("page_times"), stamps["received"], stamps["sent"])
            if move["stages"] is not None:
                del move["stages"]["to screen"]  # nothing is drawn: the arrival is the end
    except Exception as error:  # recorded: the parent counts it as an error of this learner
        record["failures"].append(f"{type(error).__name__}: {error}"[:2000])
    finally:
        if learner is not None:
            learner.close()
    Path(args.out).write_text(json.dumps(record))
    return 0


def _move_wire_for(
    learner: Any, duration: float, think: float, rng: random.Random, record: dict[str, Any]
) -> None:
    """`_move_for`'s moves, on the wire: the same pace, order and turns at a slider's ends;
    a kernel that restarted gets Run All again."""
    from labdriver.wire import slider_position

    sliders = learner.sliders()
    if not sliders:
        raise RuntimeError(f"{NOTEBOOK} shows no slider after Run All")
    turn = rng.randrange(len(sliders))
    directions: dict[str, int] = {}
    start = since = time.time()
    record["moves_from"] = start
    due = start + rng.uniform(0, think)
    presses, restarts = 0, learner.restarts
    while time.time() < start + duration:
        time.sleep(max(0.0, due - time.time()))
        if learner.restarts != restarts:
            record.setdefault("restarts", []).append(time.time())
            learner.run_all(timeout=1800)
            learner.execute(KERNEL_STAMPS)
            for move in record["moves"]:
                move["page_times"] = {}  # stamps of a dead kernel: no stages
            sliders, restarts, due = learner.sliders(), learner.restarts, time.time()
            continue
        slider = sliders[(turn + presses // PRESSES_PER_SLIDER) % len(sliders)]
        presses += 1
        state, position = slider.state, slider_position(slider.state, slider.model)
        direction = directions.get(slider.comm_id, 1)
        if position >= state["max"] - 1e-9:
            direction = -1
        elif position <= state["min"] + 1e-9:
            direction = 1
        directions[slider.comm_id] = direction
        at = time.time()
        times = learner.press(slider, direction, timeout=MOVE_TIMEOUT_MS / 1e3)
        if times is None:
            record["failures"].append(f"move at {at - since:.1f} s: no frame in 60 s")
        else:
            record["moves"].append(
                {"at": at, "late_s": at - due, "ms": None,
                 "frame_ms": times["frame"] - times["input"], "page_times": times}
            )  # fmt: skip
        due = max(due + think, time.time())
    record["moves_to"] = time.time()


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
    that the class's moves are spread), `PRESSES_PER_SLIDER` on one slider before the next,
    for ``duration`` s. A kernel that restarted (it died: the server started a new one) is
    answered as a learner answers it: the dialog closed, Run All again, on with the moves."""
    sliders = _sliders(page)
    turn = rng.randrange(len(sliders))
    directions: dict[tuple[int, int], str] = {}
    start = since = time.time()
    watched_from = page.now()
    record["moves_from"] = start
    due = start + rng.uniform(0, think)
    presses = 0
    while time.time() < start + duration:
        time.sleep(max(0.0, due - time.time()))
        statuses = page.kernel_statuses(watched_from)
        if "autorestarting" in statuses or "restarting" in statuses:
            record.setdefault("restarts", []).append(time.time())
            page.dismiss_dialogs()
            watched_from = page.now()
            page.run_all(timeout_s=1800)
            page.execute(KERNEL_STAMPS)  # the new kernel's (the old one's died with it)
            for move in record["moves"]:
                move["page_times"] = {}  # stamps of a dead kernel: no stages
            sliders, due = _sliders(page), time.time()
            continue
        key = sliders[(turn + presses // PRESSES_PER_SLIDER) % len(sliders)]
        presses += 1
        control = next(
            c for c in page.controls()[key[0]] if c["kind"] == "slider" and c["nth"] == key[1]
        )
        direction = directions.get(key, "ArrowRight")
        if control["atMax"]:
            direction = "ArrowLeft"
        elif control["atMin"]:
            direction = "ArrowRight"
        directions[key] = direction
        at = time.time()
        times = page.press(control, direction, timeout_ms=MOVE_TIMEOUT_MS)
        if times is None:
            record["failures"].append(f"move at {at - since:.1f} s: no redraw in 60 s")
        else:
            frame = None if times["frame"] is None else times["frame"] - times["input"]
            record["moves"].append(
                {"at": at, "late_s": at - due, "ms": times["draw"] - times["input"],
                 "frame_ms": frame, "page_times": times}
            )  # fmt: skip
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
                    out.cpu_s[p.pid] = ("learners", sum(p.cpu_times()[:2]))
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
                        out.cpu_s[p.pid] = (group, sum(p.cpu_times()[:2]))
                        if group in ("browser", "drivers"):
                            browser_pss += p.memory_full_info().pss / MiB
    out.browser_pss_mib = max(out.browser_pss_mib, browser_pss)


def _cpu_by_group(first: dict[int, tuple[str, float]], last: dict[int, tuple[str, float]]) -> dict:
    used: dict[str, float] = {}
    for pid, (group, seconds) in last.items():
        used[group] = used.get(group, 0.0) + seconds - first.get(pid, (group, 0.0))[1]
    return used


@dataclass
class CpuSplit:
    """The machine's CPUs split between the class (the hub, the learners' servers and
    kernels: ``server``) and the browsers (``browsers``, with this benchmark): cpuset
    cgroups, or None where they could not be made (``how`` says why)."""

    server: Path | None
    browsers: Path | None
    server_cpus: int
    how: str

    def join(self, folder: Path | None) -> None:
        """Move this process (and so what it starts from now on) into ``folder``."""
        if folder is not None:
            (folder / "cgroup.procs").write_text(str(os.getpid()))


def _own_cgroup(controller: str) -> str:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return path
    raise OSError(f"no {controller} cgroup in /proc/self/cgroup")


@contextlib.contextmanager
def cpu_split() -> Any:
    """`CpuSplit`: CPU 0 for the browsers, the rest for the class; this process starts
    on the browsers' side. Undone on exit (what is left in either cpuset is ended)."""
    cpus = os.cpu_count() or 1
    made: list[Path] = []
    try:
        if cpus < 2:
            raise OSError("one CPU: nothing to split")
        base = CPUSET / _own_cgroup("cpuset").lstrip("/")
        mems = (base / "cpuset.mems").read_text().strip()
        for name, cpu_list in (("hubload-browsers", "0"), ("hubload-server", f"1-{cpus - 1}")):
            folder = base / name
            folder.mkdir(exist_ok=True)
            made.append(folder)
            (folder / "cpuset.cpus").write_text(cpu_list)
            (folder / "cpuset.mems").write_text(mems)
    except OSError as error:
        _remove_cpusets(made)
        yield CpuSplit(None, None, cpus, f"not split: {error}")
        return
    split = CpuSplit(made[1], made[0], cpus - 1, f"class on CPUs 1-{cpus - 1}, browsers on 0")
    try:
        split.join(split.browsers)
        yield split
    finally:
        with contextlib.suppress(OSError):
            (base / "cgroup.procs").write_text(str(os.getpid()))
        _remove_cpusets(made)


def _remove_cpusets(folders: list[Path]) -> None:
    for folder in folders:
        for _ in range(50):
            with contextlib.suppress(OSError, ValueError):
                for pid in (folder / "cgroup.procs").read_text().split():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(pid), signal.SIGKILL)
            try:
                folder.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.1)


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
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
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
    n: int,
    workdir: Path,
    repo: str,
    duration: float,
    think: float,
    kill: bool,
    split: CpuSplit,
    arrive: float = ARRIVE_S,
    browsers: int = BROWSERS,
) -> dict[str, Any]:
    """N learners on a fresh hub, arriving ``arrive`` s apart, moving together; the row.
    The first ``browsers`` drive a browser context each, the others the wire."""
    names = [LEARNER.format(i) for i in range(n)]
    folder = workdir / f"class-{n}{'-kill' if kill else ''}"  # its own markers (`GO`)
    folder.mkdir(parents=True, exist_ok=True)
    split.join(split.server)  # the hub, and so every learner's server and kernel
    try:
        started_hub = hubdriver.start_hub(folder / "hub", names, repo=repo)
    finally:
        split.join(split.browsers)
    drivers: list[subprocess.Popen] = []
    with (
        contextlib.closing(_Stopper(started_hub, drivers)) as stopper,
        shared_chromium(folder) as (chromium, cdp),
    ):
        hub = stopper.hub
        started = time.time()
        for i, name in enumerate(names):
            if i:
                time.sleep(arrive)  # the next learner arrives
            command = [
                sys.executable, __file__, "--drive", name, "--hub-url", hub.url,
                "--password", hub.password, "--cdp", cdp, "--duration", str(duration),
                "--think", str(think), "--out", str(folder / f"{name}.json"),
                *(["--wire"] if i >= browsers else []),
            ]  # fmt: skip
            log = (folder / f"{name}.log").open("w")
            drivers.append(
                subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
            )
        watched = [psutil.Process(d.pid) for d in drivers]
        samples = Samples()
        snapshots = []  # (time, CPU seconds by process, the machine's CPU times)
        killed: dict[str, Any] = {}
        kill_at = go_at = None
        while any(d.poll() is None for d in drivers):
            sample(hub, watched, chromium.pid, samples)
            snapshots.append((time.time(), dict(samples.cpu_s), psutil.cpu_times()))
            if go_at is None and all(
                (folder / f"{name}.ready").exists() or d.poll() is not None
                for name, d in zip(names, drivers, strict=True)
            ):
                (folder / GO).write_text("")  # every learner ready (or failed): move
                go_at = time.time()
                if kill:
                    kill_at = go_at + duration / 3  # every learner moves before and after
            if kill_at is not None and time.time() >= kill_at and not killed:
                killed = kill_kernel(hub, names[0])
            wait = SAMPLE_S if kill_at is None or killed else kill_at - time.time()
            time.sleep(min(SAMPLE_S, 1.0 if go_at is None else SAMPLE_S, max(0.2, wait)))
        records = [
            json_if(folder / f"{name}.json") or {"learner": name, "failures": ["no record"]}
            for name in names
        ]
        seconds = time.time() - started
    return row(n, records, samples, snapshots, killed, seconds, split)


@dataclass
class _Stopper:
    """Closed on any exit of a class's run: its drivers ended, then its hub stopped."""

    hub: hubdriver.Hub
    drivers: list[subprocess.Popen]

    def close(self) -> None:
        for driver in self.drivers:
            if driver.poll() is None:
                driver.kill()
                driver.wait()
        self.hub.stop()


def json_if(path: Path) -> dict[str, Any] | None:
    with contextlib.suppress(OSError, ValueError):
        return json.loads(path.read_text())
    return None


def kill_kernel(hub: hubdriver.Hub, name: str) -> dict[str, Any]:
    """SIGKILL learner ``name``'s kernel, as a crash would."""
    for p in hub.processes(name):
        if _is_kernel(p):
            p.kill()
            return {"learner": name, "pid": p.pid, "at": time.time()}
    seen = [" ".join(p.cmdline())[:120] for p in hub.processes(name)]
    return {"learner": name, "pid": None, "at": time.time(), "processes": seen}


def lost_kernels(samples: Samples, window: tuple[float, float], spare: str | None) -> list[str]:
    """Learners whose kernel, there when the moves began, was gone or replaced by their end.
    (A learner who never got a kernel, because their login or Run All failed, is counted in
    the row's errors, not here.)"""
    lost = []
    for name, seen in samples.kernels.items():
        inside = [kernels for at, kernels in seen if window[0] <= at <= window[1]]
        if name != spare and inside and inside[0] and inside[-1] != inside[0]:
            lost.append(name)
    return lost


def row(
    n: int,
    records: list[dict[str, Any]],
    samples: Samples,
    snapshots: list[tuple[float, dict[int, tuple[str, float]], Any]],
    killed: dict[str, Any],
    seconds: float,
    split: CpuSplit,
) -> dict[str, Any]:
    """The row for N learners: latency, memory, CPU in the moves' window, lost, errors.

    The picture's latency (``p50_ms``, ``p95_ms``) is the browser learners'; the frame's
    arrival and the stages are every learner's (the wire learners' have no "to screen")."""
    moves = [m for r in records for m in r.get("moves", [])]
    p50, p95 = percentiles([m["ms"] for m in moves if m["ms"] is not None])
    staged = [m["stages"] for m in moves if m.get("stages")]
    stages = {
        stage: [
            round(x, 1) if x is not None else None
            for x in percentiles([st[stage] for st in staged if stage in st])
        ]
        for stage in STAGES
    }
    wire = sum(bool(r.get("wire")) for r in records)
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
    # how busy each side of the split was: the class's CPUs, and the browsers'
    class_share = spent.get("learners", 0.0) + spent.get("hub", 0.0)
    server_busy = class_share * cpus / split.server_cpus
    browsers_busy = (
        ((busy or 0.0) - class_share) * cpus / max(cpus - split.server_cpus, 1)
        if split.server
        else None
    )
    pss = sorted(samples.pss_mib.values())
    result: dict[str, Any] = {
        "learners": n,
        "browser_learners": n - wire,
        "wire_learners": wire,
        "p50_ms": None if p50 is None else round(p50, 1),
        "p95_ms": None if p95 is None else round(p95, 1),
        "frame_p50_p95_ms": [
            None if x is None else round(x, 1)
            for x in percentiles([m["frame_ms"] for m in moves if m.get("frame_ms") is not None])
        ],
        "stages_p50_p95_ms": stages,
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
        "server_cores": split.server_cpus,
        "server_busy": round(server_busy, 3),
        "browsers_busy": None if browsers_busy is None else round(browsers_busy, 3),
        "cpus": split.how,
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
            "others_moves_before_after": [len(before), len(after)],
            "killed_learner_failures": killed_record.get("failures", []),
        }
        # the killed learner's failed moves are the fault's, not the class's
        result["errors"] -= len(killed_record.get("failures", []))
    return result


# -- the report ----------------------------------------------------------------------------


def _errors(record: dict[str, Any]) -> int:
    """A learner's error outputs after Run All and failed moves (or a driver that failed)."""
    return len(record.get("error_outputs", [])) + len(record.get("failures", []))


def class_cpu_ms_per_move(r: dict[str, Any]) -> float | None:
    """The class's CPU time (learners' servers and kernels, and the hub) per move, ms."""
    if not r["moves"]:
        return None
    return 1e3 * r["server_busy"] * r["server_cores"] * r["moves_window_s"] / r["moves"]


def paced(r: dict[str, Any], think: float) -> bool:
    """Whether the learners kept their pace (at least 80% of a move every ``think`` s): past
    that the browsers (one CPU here) hold them back, and the class gets less than N's load."""
    window = r["moves_window_s"] * r["learners"]
    return bool(window) and r["moves"] / window >= 0.8 / think


def learners_per_core(rows: list[dict[str, Any]], think: float) -> dict[str, Any]:
    """Learners per core of the class, p95 under `P95_GOAL_MS`, none lost, no error:

    - ``by_picture``: the largest class whose whole moves (key press to redrawn picture,
      browsers included: what the learners here saw) met it;
    - ``by_class``: the largest class that kept its pace (`paced`) and whose own part (in
      the kernel, the value's arrival to the frame sent, on the server's clock) met it,
      with its CPUs under `CLASS_BUSY_MAX` busy;
    - ``projected``: `CLASS_BUSY_MAX` of a core over one learner's CPU (the class's CPU
      per move, median over the paced rows, a move every ``think`` s): the class a core
      holds before its queue grows, where the browsers here cannot drive that many.
    """
    clean = [r for r in rows if "fault" not in r and not r["lost"] and not r["errors"]]

    def best(fine: list[dict[str, Any]]) -> dict[str, Any] | None:
        if not fine:
            return None
        top = max(fine, key=lambda r: r["learners"])
        return {
            "learners": top["learners"],
            "per_core": round(top["learners"] / top["server_cores"], 2),
        }

    per_move = [
        ms for r in clean if paced(r, think) and (ms := class_cpu_ms_per_move(r)) is not None
    ]
    return {
        "by_picture": best([r for r in clean if (r["p95_ms"] or np.inf) < P95_GOAL_MS]),
        "by_class": best(
            [
                r
                for r in clean
                if paced(r, think)
                and (r["stages_p50_p95_ms"]["in kernel"][1] or np.inf) < P95_GOAL_MS
                and r["server_busy"] < CLASS_BUSY_MAX
            ]
        ),
        "class_cpu_ms_per_move": round(float(np.median(per_move)), 1) if per_move else None,
        "projected_per_core": round(CLASS_BUSY_MAX * think * 1e3 / float(np.median(per_move)), 1)
        if per_move
        else None,
    }


def report(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "learners  key press to picture p50/p95 ms  (to frame p95)  moves late  "
        "kernel+server MiB median/max  class CPUs busy  browsers' CPU busy  lost errors  "
        "Run All s p50/p95"
    ]
    for r in rows:
        run_all = r["run_all_s"]
        lines.append(
            f"{r['learners']:8}  {_f(r['p50_ms'])} / {_f(r['p95_ms'])}{'':17}"
            f"({_f(r['frame_p50_p95_ms'][1])})  {r['moves']:5} {r['late_moves']:4}  "
            f"{_f(r['kernel_mib'])} / {_f(r['kernel_mib_max'])}{'':14}"
            f"{_pc(r['server_busy']):>5} of {r['server_cores']}{'':9}{_pc(r['browsers_busy']):>5}"
            f"{'':13}{r['lost']:4} {r['errors']:6}  {_f(run_all[0])} / {_f(run_all[1])}"
            + ("  (fault run)" if "fault" in r else "")
        )
        stages = r["stages_p50_p95_ms"]
        per_move = class_cpu_ms_per_move(r)
        rate = r["moves"] / max(r["moves_window_s"] * r["learners"], 1e-9)
        browsers = r.get("browser_learners", r["learners"])
        lines.append(
            f"          {browsers} in a browser, {r['learners'] - browsers} on the wire (their "
            f"moves end at the frame's arrival); a move every "
            f"{1 / rate if rate else float('inf'):.1f} s a learner; the class's CPU "
            f"{_f(per_move).strip()} ms a move"
        )
        lines.append(
            "          p50/p95 by stage, ms: "
            + ", ".join(f"{k} {_f(v[0]).strip()}/{_f(v[1]).strip()}" for k, v in stages.items())
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


def _earlier(old: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """An existing file's runs and rows (a file of one run, from before rows named their
    run, as run 0)."""
    if "runs" in old:
        return old["runs"], old["rows"]
    run = {key: old[key] for key in ("command", "cpus", "load") if key in old}
    return [run], [r | {"run": 0} for r in old["rows"]]


def _named_runs(
    runs: list[dict[str, Any]], rows: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Only the runs a row names, renumbered in their order: a run whose rows were all
    measured again leaves the file with them (its load no longer describes any row)."""
    named = sorted({r["run"] for r in rows})
    number = {old: new for new, old in enumerate(named)}
    return [runs[i] for i in named], [r | {"run": number[r["run"]]} for r in rows]


def _stop(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--learners", type=int, nargs="*", default=[1, 5, 10, 20, 30], help="none: --kill only"
    )
    parser.add_argument("--duration", type=float, default=180.0, help="seconds of moves")
    parser.add_argument("--think", type=float, default=2.0, help="seconds between moves")
    parser.add_argument(
        "--arrive", type=float, default=ARRIVE_S, help="seconds between learners' logins"
    )
    parser.add_argument(
        "--kill", type=int, default=None, metavar="N",
        help="also a fault run with N learners: learner 0's kernel killed half-way",
    )  # fmt: skip
    parser.add_argument(
        "--machine", default=cpu_slug(), help=f"the file's name, hub-<machine>.json ({cpu_slug()})"
    )
    parser.add_argument(
        "--add",
        action="store_true",
        help="keep the file's rows, this run's replacing those of the same N (each row names "
        "its run: command, load)",
    )
    # one learner's driver, started by the benchmark itself
    parser.add_argument(
        "--browsers", type=int, default=BROWSERS, metavar="K",
        help=f"learners in a browser (the first K of each class; the rest on the wire: "
        f"labdriver.wire); default {BROWSERS}",
    )  # fmt: skip
    for option in ("--drive", "--hub-url", "--password", "--cdp", "--out"):
        parser.add_argument(option, help=argparse.SUPPRESS)
    parser.add_argument("--wire", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.drive:
        return drive_wire(args) if args.wire else drive(args)
    reason = hubdriver.hub_missing()
    if reason:
        print(f"cannot start a hub here: {reason}", file=sys.stderr)
        return 2
    runs = [(n, False) for n in args.learners] + ([(args.kill, True)] if args.kill else [])
    out = REPO / "benchmarks" / "results" / f"hub-{args.machine}.json"
    this_run: dict[str, Any] = {
        "command": " ".join(["python", "benchmarks/hub_load.py", *(argv or sys.argv[1:])]),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    record: dict[str, Any] = {
        "machine": host_record(args.machine),
        "notebook": NOTEBOOK.rpartition("/")[2],
        "think_s": args.think,
        "arrive_s": args.arrive,
        "duration_s": args.duration,
        "runs": [],
        "rows": [],
    }
    if args.add and out.exists():
        record["runs"], record["rows"] = _earlier(json.loads(out.read_text()))
    rows: list[dict[str, Any]] = []
    # a stop (SIGTERM, or SIGINT in the background) still ends the hub and removes its users
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _stop)
    load = MachineLoad().start()
    with (
        tempfile.TemporaryDirectory(prefix="hub-load-") as tmp,
        cpu_split() as split,
        hubdriver.course_remote(Path(tmp) / "remote") as remote,
    ):
        this_run["cpus"] = split.how
        for n, kill in runs:
            print(f"{n} learner(s){' (a kernel killed)' if kill else ''} ...", flush=True)
            rows.append(
                run_class(
                    n,
                    Path(tmp),
                    remote.url,
                    args.duration,
                    args.think,
                    kill,
                    split,
                    args.arrive,
                    args.browsers,
                )
                | {"run": len(record["runs"])}
            )
            print("\n".join(report(rows[-1:])[1:]), flush=True)
            _write(out, record, rows, this_run | {"complete": False}, args.think, [])
        load.stop()
    lines = _write(
        out, record, rows, this_run | {"load": load.record()}, args.think, busy_warnings(load)
    )
    print("\n".join(lines))
    print(f"written to {out.relative_to(REPO)}")
    return 3 if busy_warnings(load) else 0


def _write(
    out: Path,
    record: dict[str, Any],
    rows: list[dict[str, Any]],
    run: dict[str, Any],
    think: float,
    warnings: list[str],
) -> list[str]:
    """Write the file with this run's rows so far (after each N: a run stopped part-way keeps
    what it measured) over the earlier rows; the summary's lines."""
    new = {(r["learners"], "fault" in r) for r in rows}
    kept = [r for r in record["rows"] if (r["learners"], "fault" in r) not in new]
    merged = dict(record)
    merged["runs"], merged["rows"] = _named_runs(
        [*record["runs"], run], sorted(kept + rows, key=lambda r: ("fault" in r, r["learners"]))
    )
    merged["learners_per_core_p95_under_250ms"] = learners_per_core(merged["rows"], think)
    lines = [*warnings, *report(merged["rows"])]
    lines.append(
        f"learners per class core with p95 < {P95_GOAL_MS:.0f} ms, none lost, no error: "
        f"{merged['learners_per_core_p95_under_250ms']}"
    )
    merged["summary"] = lines
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(merged, indent=1) + "\n")
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
