"""The latency benchmark's arithmetic and report (the browser part runs in `make bench-latency`)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "latency.py"
_spec = importlib.util.spec_from_file_location("latency_benchmark", _PATH)
latency = importlib.util.module_from_spec(_spec)
sys.modules["latency_benchmark"] = latency  # its dataclasses look their module up
_spec.loader.exec_module(latency)


def test_percentiles_of_samples_and_of_none():
    assert latency.percentiles([]) == {"n": 0, "p50": None, "p95": None}
    got = latency.percentiles([10.0, 20.0, 30.0, 40.0, 1000.0])
    assert got["n"] == 5 and got["p50"] == 30.0
    assert got["p95"] == pytest.approx(808.0)  # linear between 40 and 1000


def _kernel(control, callback_p95):
    entry = {"control": control, "description": control, "blits": True}
    for what, p95 in (("callback", callback_p95), ("update", 2.0), ("full_redraw", 150.0)):
        entry |= {f"{what}_n": 12, f"{what}_p50": p95 / 2, f"{what}_p95": p95}
    return entry


def test_report_flags_each_miss_against_its_own_target():
    results = [
        {
            "notebook": "01_beginner.ipynb",
            "browser": [
                {"box": 0, "description": "fast", "n": 6, "p50": 60.0, "p95": 99.9},
                {"box": 0, "description": "slow", "n": 2, "p50": 80.0, "p95": 100.0}
                | {"samples_ms": [101.5, 58.5]},
            ],
            "kernel": [_kernel("E.fast", 59.9), _kernel("E.slow", 60.0)],
        }
    ]
    lines = latency.report(results)
    rows = {
        name: line
        for line in lines
        for name in ("fast", "slow", "E.fast", "E.slow")
        if f" {name} " in line and "p95" in line  # not the stages' lines
    }
    assert "MISS" not in rows["fast"] and rows["slow"].endswith("MISS")
    # each control's first move (a second after it was scrolled into view), beside its p95
    assert "p95  100.0 first  101.5 ms" in rows["slow"] and "first    -   ms" in rows["fast"]
    assert "MISS" not in rows["E.fast"] and rows["E.slow"].endswith("MISS")
    assert "update p95    2.0; full redraw p50   75.0 ms" in rows["E.slow"]


def _load(others_share=0.0, before=(0.1, 0.1, 0.1), cpus=2):
    load = latency.MachineLoad(cpus=cpus)  # attention_course.bench.machine's, as latency uses it
    load.before, load.after, load.during = before, (0.2, 0.2, 0.2), [0.5, 1.5]
    load.others_share = others_share
    return load


@pytest.mark.parametrize(
    ("others_share", "before", "warned"),
    [
        (0.05, (0.9, 0.5, 0.5), []),
        (0.11, (0.9, 0.5, 0.5), ["other processes used 11%"]),
        (0.05, (1.1, 0.5, 0.5), ["load average was 1.1 before the run, on 2 CPUs"]),
        (0.5, (3.0, 3.0, 3.0), ["other processes used 50%", "load average was 3.0"]),
    ],
)
def test_busy_warnings_name_each_sign(others_share, before, warned):
    warnings = latency.busy_warnings(_load(others_share, before))
    assert len(warnings) == (len(warned) + 1 if warned else 0)
    for sign, line in zip(warned, warnings, strict=False):
        assert line.startswith("WARNING: the machine was busy: ") and sign in line
    if warned:
        assert "not an idle machine's" in warnings[-1]
    assert _load(others_share, before).record()["busy"] == bool(warned)


@pytest.mark.parametrize(
    ("during", "own", "warned"),
    [([4.4, 4.5, 4.6], 1.2, "load average during the run was 4.5 (median), 3.3 of it others'"),
     ([1.4, 1.5, 1.6], 1.2, None), ([4.5], None, None)],
)  # fmt: skip
def test_a_run_is_busy_when_others_load_the_machine_during_it(during, own, warned):
    """Others' short-lived processes escape the CPU-time count (2% beside a load average of 4.5
    on 2 CPUs): the load average during the run, less the run's own CPUs, shows them."""
    load = _load(others_share=0.02)
    load.during, load.own_cpus = during, own
    warnings = latency.busy_warnings(load)
    if warned is None:
        assert warnings == []
    else:
        assert warned in warnings[0] and "on 2 CPUs" in warnings[0]
        assert load.record()["busy"] and load.record()["others_load_during"] == pytest.approx(3.3)


def test_a_busy_report_starts_and_ends_with_the_warning_and_names_the_machine():
    results = [{"notebook": "01_b.ipynb", "browser": [], "kernel": []}]
    lines = latency.report(results, _load(others_share=0.4))
    assert lines[0].startswith("WARNING") and lines[-1].startswith("WARNING")
    machine = next(line for line in lines if line.startswith("machine: "))
    assert latency.cpu_model() in machine and "2 CPUs" in machine
    assert "load average before 0.10/0.10/0.10, during median 1.0 max 1.5" in machine
    assert "others' CPU share 40%, others' load during - (this run's own - CPUs)" in machine
    quiet = latency.report(results, _load(others_share=0.01))
    assert not any(line.startswith("WARNING") for line in quiet)


def test_machine_load_counts_the_cpu_of_a_process_not_its_own(tmp_path):
    """A spinning process outside the benchmark's tree (an orphan, as another learner's
    would be) is counted; the benchmark's own child is not."""
    import subprocess
    import time

    import psutil

    stop = tmp_path / "stop"
    spinner = tmp_path / "spin.py"
    spinner.write_text(f"import pathlib\nwhile not pathlib.Path({str(stop)!r}).exists(): pass\n")
    load = latency.MachineLoad().start()
    own = subprocess.Popen([sys.executable, str(spinner)])
    pidfile = tmp_path / "pid"
    orphan = f"'{sys.executable}' '{spinner}' & echo $! > '{pidfile}'"
    subprocess.run(["sh", "-c", orphan], check=True)  # sh exits: its child is no longer ours
    try:
        other = psutil.Process(int(pidfile.read_text()))
        deadline = time.monotonic() + 30
        while other.cpu_times().user < 0.5 and time.monotonic() < deadline:
            time.sleep(0.1)
        spent = sum(other.cpu_times()[:2])
        ours = load._ours()
        load.stop()
    finally:
        stop.touch()
        own.wait(30)
    assert own.pid in ours and other.pid not in ours
    assert spent >= 0.5, "the spinner never got the CPU"
    assert load.others_cpu_seconds >= 0.95 * spent
    assert 0 < load.others_share <= 1.0
    assert load.own_cpus is not None and load.own_cpus > 0  # the own spinner
    assert load.before is not None and load.after is not None


ORIGIN = 1.7e12  # the page clock's origin, epoch ms


def test_a_moves_four_stages_add_up_to_its_latency():
    page = {"origin": ORIGIN, "input": 100.0, "frame": 170.0, "draw": 195.0}
    # a value from the move before, this move's, then an echo; a frame from before the
    # change, then two frames, the second the one painted
    received = [ORIGIN + 20.0, ORIGIN + 104.0, ORIGIN + 110.0]
    sent = [ORIGIN + 60.0, ORIGIN + 150.0, ORIGIN + 160.0]
    stages = latency.move_stages(page, received, sent)
    assert stages == {"to kernel": 4.0, "in kernel": 56.0, "to page": 10.0, "to screen": 25.0}
    assert sum(stages.values()) == page["draw"] - page["input"]
    assert list(stages) == list(latency.STAGES)


def test_the_kernels_collections_within_its_stage_are_counted_apart():
    page = {"origin": ORIGIN, "input": 100.0, "frame": 170.0, "draw": 195.0}
    received, sent = [ORIGIN + 104.0], [ORIGIN + 160.0]  # in kernel: 104 to 160
    # one before the change arrived, one straddling its arrival, one inside, one after
    collections = [
        [ORIGIN + a, ORIGIN + b] for a, b in ((90, 95), (100, 110), (120, 150), (165, 168))
    ]
    stages = latency.move_stages(page, received, sent, collections)
    assert stages is not None and stages[latency.GC] == 6.0 + 30.0
    assert sum(stages[s] for s in latency.STAGES) == page["draw"] - page["input"]
    assert latency.move_stages(page, received, sent, [])[latency.GC] == 0.0


def test_a_kernel_stamp_a_little_before_the_input_still_counts_and_missing_stamps_give_none():
    page = {"origin": ORIGIN, "input": 100.0, "frame": 170.0, "draw": 195.0}
    early = latency.move_stages(page, [ORIGIN + 97.0], [ORIGIN + 150.0])  # clocks 3 ms apart
    assert early is not None and early["to kernel"] == -3.0
    assert latency.move_stages(page, [ORIGIN + 20.0], [ORIGIN + 150.0]) is None  # too early
    assert latency.move_stages(page, [ORIGIN + 104.0], [ORIGIN + 60.0]) is None  # no frame after
    assert latency.move_stages(page | {"frame": None}, [ORIGIN + 104.0], [ORIGIN + 150.0]) is None


def test_stage_medians_skip_moves_without_stamps_and_the_report_prints_them():
    one = {"to kernel": 4.0, "in kernel": 40.0, "to page": 10.0, "to screen": 20.0}
    two = {"to kernel": 6.0, "in kernel": 50.0, "to page": 30.0, "to screen": 30.0}
    medians = latency.stage_medians([one, None, two])
    assert medians == {"to kernel": 5.0, "in kernel": 45.0, "to page": 20.0, "to screen": 25.0}
    assert latency.stage_medians([None]) == dict.fromkeys(latency.STAGES)
    entry = {"box": 1, "description": "block_q", "n": 2, "p50": 90.0, "p95": 99.0}
    results = [{"notebook": "05_x.ipynb", "browser": [entry | {"stages_p50_ms": medians}]}]
    results[0]["kernel"] = []
    lines = latency.report(results)
    (line,) = (x for x in lines if "to screen" in x and "block_q" in x)
    assert "to kernel    5.0  in kernel   45.0  to page   20.0  to screen   25.0" in line


@pytest.mark.parametrize(
    ("model", "cpus", "slug"),
    [
        ("AMD EPYC", 2, "amd-epyc-2cpu"),
        ("Intel(R) Xeon(R) Processor", 2, "intel-xeon-2cpu"),
        ("Intel(R) Core(TM) i7-1185G7 @ 3.00GHz", 8, "intel-core-i7-1185g7-8cpu"),
        ("AMD Ryzen 7 PRO 7840U", 16, "amd-ryzen-7-pro-7840u-16cpu"),
        ("", 4, "unknown-4cpu"),
    ],
)
def test_results_are_named_after_the_processor(model, cpus, slug):
    assert latency.cpu_slug(model, cpus) == slug


def test_the_default_file_is_this_machines_processor():
    assert latency.cpu_slug().endswith(f"-{os.cpu_count()}cpu")
    assert latency.cpu_slug() == latency.cpu_slug(latency.cpu_model())


class _FakePage:
    """Two controls in one box: a scale rule (toggle) and c, enabled only under "custom"."""

    def __init__(self):
        self.rule = 1
        self.moves = []

    def controls(self):
        options = ["none", "1/√d", "1/d", "custom c"]
        rule = {"kind": "toggle", "options": options, "active": self.rule, "disabled": False}
        c = {"kind": "slider", "disabled": options[self.rule] != "custom c"}
        return [[rule, c]]

    def move(self, control, action):
        self.moves.append(action)
        self.rule = control["options"].index(action)


def test_a_disabled_control_is_enabled_by_its_boxs_options_before_its_moves():
    page = _FakePage()
    assert latency.enable(page, 0, 1)
    assert page.moves == ["none", "1/d", "custom c"], "the active option skipped; stops at c"
    assert latency.enable(page, 0, 1) and len(page.moves) == 3, "already enabled: no move"
    assert latency.enable(page, 0, 0) and len(page.moves) == 3


def test_a_control_no_option_enables_is_reported():
    page = _FakePage()
    page.controls = lambda: [[{"kind": "slider", "disabled": True}]]
    assert not latency.enable(page, 0, 0) and page.moves == []
