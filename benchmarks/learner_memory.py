"""Memory per learner: the PSS of a learner's kernel and server after they ran a notebook.

Memory is what sizes a class's hub (sizing practice plans 100-300 MB a
learner), so this measures what one learner holds, as a learner would make
it: for each notebook, a fresh JupyterLab of its own (``python -m course
serve``, as ``make lab`` and a hub's single-user server serve), the notebook
opened in Chromium, Run All, then `MOVES` moves of the first slider of each
explorer figure; then the proportional set size (PSS, Linux's
``/proc/PID/smaps_rollup``, read by psutil) of the notebook's kernel and of
the server process.

PSS counts a page shared by k processes as 1/k to each, so the libraries
every kernel maps (numpy's, matplotlib's, torch's when it is loaded) cost
less per learner when several learners run at once: ``--learners 1 3``
(the default) measures each of `GOAL_NOTEBOOKS` with one learner and again
with three at the same time, each with their own server and kernel, as a hub
runs them. Any other process on the machine that maps the same files counts
too (on a shared machine, someone else's torch lowers a kernel's PSS by up
to 50 MiB), so each process's USS (its pages alone: what a learner costs
when very many share the libraries) and RSS (every page it maps: what it
costs alone) are recorded beside it. The record says, per run, each learner's kernel and server PSS,
their sum against the goal (`GOAL_MIB` a learner, server included, on
`GOAL_NOTEBOOKS`), and what the kernel holds that explains it: whether torch
is loaded, how many modules and how many live matplotlib figures.

Writes ``benchmarks/results/learner-memory-<machine>.json`` (``<machine>``
as `benchmarks/latency.py` names it: the processor, e.g.
``intel-xeon-2cpu``), adding this run under ``--label`` beside the runs
already there (a before and an after in one file), with the machine and its
load.

    python benchmarks/learner_memory.py [--label after] [--learners 1 3] [notebooks/01_*.ipynb ...]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil

import labdriver  # the browser driver (labdriver/): one way to start and drive the lab
from attention_course.bench.machine import MachineLoad, busy_warnings, cpu_slug, host_record

REPO = Path(__file__).resolve().parents[1]
MiB = 2**20

#: the notebooks the goal is about (a learner's first hour), and the goal: kernel and server
GOAL_NOTEBOOKS = (
    "00_start_here.ipynb",
    "01_beginner_crowded_room.ipynb",
    "02_developer_scaling.ipynb",
)
GOAL_MIB = 300.0 * 1e6 / MiB  # 300 MB, in MiB as the PSS is given
MOVES = 4  # moves of each figure's first slider, after Run All
# The server as a learner's environment runs it (binder/requirements.txt, which a hub's is
# built from): voila comes with the test extra only, and its server extension alone holds
# about 9 MiB of the server's PSS. ``--server as-installed`` keeps it.
LEARNER_SERVER_ARGS = ("--ServerApp.jpserver_extensions=voila.server_extension=False",)
SETTLE_S = 3.0  # after the last move: the kernel caches its figures' backgrounds when idle

# Run in the kernel after its PSS was read (it adds a little of its own): what it holds.
_KERNEL_HOLDS = r"""
def _memory_holds():
    import gc, json, sys
    figures = 0
    if "matplotlib.figure" in sys.modules:
        from matplotlib.figure import Figure
        gc.unfreeze()  # the explorers freeze what lives long (explorers/base.py): count it
        figures = sum(isinstance(o, Figure) for o in gc.get_objects())
        gc.freeze()
    print(json.dumps({"torch_loaded": "torch" in sys.modules, "modules": len(sys.modules),
                      "live_figures": figures}))
_memory_holds()
"""


def memory_mib(process: psutil.Process) -> dict[str, float]:
    """``process``'s proportional, unique and resident set sizes (PSS, USS, RSS), in MiB."""
    info = process.memory_full_info()
    return {"pss": info.pss / MiB, "uss": info.uss / MiB, "rss": info.rss / MiB}


def others_mapping(name: str) -> int:
    """How many processes outside this benchmark's tree map a file whose path holds ``name``
    (e.g. ``libtorch_cpu.so``): each one lowers the PSS of our processes that map it too."""
    me = psutil.Process()
    ours = {me.pid, *(c.pid for c in me.children(recursive=True))}
    count = 0
    for process in psutil.process_iter():
        if process.pid in ours:
            continue
        with contextlib.suppress(OSError, psutil.Error):
            if name in Path(f"/proc/{process.pid}/maps").read_text():
                count += 1
    return count


def kernels_of(server: labdriver.LabServer) -> list[psutil.Process]:
    """The ipykernel processes ``server`` started."""
    found = []
    for child in psutil.Process(server.proc.pid).children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if "ipykernel" in " ".join(child.cmdline()):
                found.append(child)
    return found


def slider_moves(page: labdriver.NotebookPage, moves: int) -> int:
    """``moves`` key presses on the first slider of each figure box, right then left as
    the slider's ends allow; how many were made."""
    made = 0
    for box in page.controls():
        sliders = [c for c in box if c["kind"] == "slider" and not c["disabled"]]
        if not sliders:
            continue
        control = sliders[0]
        page.scroll_to(control)
        key = "ArrowLeft" if control["atMax"] else "ArrowRight"
        for _ in range(moves):
            page.move(control, key)
            made += 1
            control = next(
                c
                for c in page.controls()[control["box"]]
                if c["nth"] == control["nth"] and c["kind"] == "slider"
            )
            if control["atMax"]:
                key = "ArrowLeft"
            elif control["atMin"]:
                key = "ArrowRight"
    return made


def measure(
    browser, name: str, learners: int, moves: int, server_args: tuple[str, ...] = ()
) -> dict:
    """``learners`` learners, each with a JupyterLab of their own (started with
    ``server_args`` beside the tests' own), run ``name`` and move its sliders; all still
    running, each one's kernel and server PSS (MiB)."""
    with contextlib.ExitStack() as stack:
        pages = []
        for i in range(learners):
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="memory-")))
            server = stack.enter_context(
                labdriver.running_lab(
                    tmp,
                    token=labdriver.random_token(),
                    root_dir=labdriver.copy_notebooks(tmp / "notebooks"),
                    extra_args=[*labdriver.lab_test_args(), *server_args],
                )
            )
            page = labdriver.NotebookPage.open(
                browser, server, name, workspace=f"mem-{i}", viewport=(1280, 800)
            )
            stack.callback(page.close)
            pages.append((server, page))
        made = []
        for _, page in pages:
            page.run_all()
            made.append(slider_moves(page, moves))
            page.quiet()
        time.sleep(SETTLE_S)
        rows = []
        for server, _ in pages:
            kernels = kernels_of(server)
            if len(kernels) != 1:
                raise RuntimeError(f"{name}: expected one kernel under the server, found {kernels}")
            rows.append(
                {
                    "kernel": memory_mib(kernels[0]),
                    "server": memory_mib(psutil.Process(server.proc.pid)),
                }
            )
        others = others_mapping("libtorch_cpu.so")
        holds = json.loads(pages[0][1].execute(_KERNEL_HOLDS).splitlines()[-1])
    result = {"notebook": name, "learners": learners, "moves": made}
    result["other_processes_with_torch"] = others
    for who in ("kernel", "server"):
        for size in ("pss", "uss", "rss"):
            key = who if size == "pss" else f"{who}_{size}"
            result[f"{key}_mib"] = [round(r[who][size], 1) for r in rows]
    for size in ("pss", "uss"):
        total = [r["kernel"][size] + r["server"][size] for r in rows]
        key = "per_learner" if size == "pss" else "per_learner_uss"
        result[f"{key}_mib"] = round(float(np.mean(total)), 1)
    result["goal_mib"] = round(GOAL_MIB, 1) if name in GOAL_NOTEBOOKS else None
    return result | holds


def report(rows: list[dict]) -> list[str]:
    lines = [
        f"PSS per learner, MiB (goal on 00-02: {GOAL_MIB:.0f} MiB = 300 MB, kernel and server)",
        f"  {'notebook':34} learners  kernel  server  total  (USS total)  torch  figures",
    ]
    for r in rows:
        flag = "" if r["goal_mib"] is None or r["per_learner_mib"] <= r["goal_mib"] else "  OVER"
        lines.append(
            f"  {r['notebook'][:34]:34} {r['learners']:8}  {np.mean(r['kernel_mib']):6.1f}  "
            f"{np.mean(r['server_mib']):6.1f}  {r['per_learner_mib']:5.1f}  "
            f"({r['per_learner_uss_mib']:5.1f})     "
            f"{'yes' if r['torch_loaded'] else 'no':>5}  {r['live_figures']:7}{flag}"
        )
    return lines


def _commit() -> str | None:
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            cwd=labdriver.REPO,
            check=True,
            capture_output=True,
            text=True,
        )
        return out.stdout.strip()
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", help="default: every numbered notebook")
    parser.add_argument(
        "--learners",
        type=int,
        nargs="+",
        default=[1, 3],
        help="learners at once; counts above 1 only for 00-02 (default: 1 3)",
    )
    parser.add_argument(
        "--moves", type=int, default=MOVES, help="moves of each figure's first slider"
    )
    parser.add_argument(
        "--server",
        choices=("learner", "as-installed"),
        default="learner",
        help="learner (default): without the server extensions a learner's environment "
        "lacks (voila's); as-installed: every one this environment has",
    )
    parser.add_argument(
        "--label", default=None, help="this run's name in the file (default: the commit)"
    )
    parser.add_argument(
        "--machine",
        default=cpu_slug(),
        help=f"the results file's name, learner-memory-<machine>.json (default: {cpu_slug()})",
    )
    args = parser.parse_args(argv)
    reason = labdriver.chromium_missing()
    if reason:
        print(f"cannot measure in a browser: {reason}", file=sys.stderr)
        return 2
    names = labdriver.notebook_names(args.notebooks)
    commit = _commit()
    label = args.label or commit or "unlabelled"

    server_args = LEARNER_SERVER_ARGS if args.server == "learner" else ()
    started = time.time()
    load = MachineLoad().start()
    rows = []
    with labdriver.chromium_browser() as browser:
        for name in names:
            for learners in args.learners:
                if learners > 1 and name not in GOAL_NOTEBOOKS:
                    continue
                print(f"measuring {name}, {learners} learner(s) ...", flush=True)
                rows.append(measure(browser, name, learners, args.moves, server_args))
                print("\n".join(report(rows[-1:])[2:]), flush=True)
    load.stop()
    lines = [*busy_warnings(load), *report(rows)]
    print("\n".join(lines))

    out = REPO / "benchmarks" / "results" / f"learner-memory-{args.machine}.json"
    record = json.loads(out.read_text()) if out.exists() else {"runs": {}}
    record["machine"] = host_record(args.machine)
    record["runs"][label] = {
        "command": " ".join(["python", "benchmarks/learner_memory.py", *(argv or sys.argv[1:])]),
        "commit": commit,
        "server_args": list(server_args),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "seconds": round(time.time() - started, 1),
        "load": load.record(),
        "results": rows,
        "summary": lines,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"written to {out.relative_to(REPO)} as run {label!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
