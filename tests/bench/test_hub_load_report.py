"""The class-load benchmark's arithmetic: a row from learners' records, kernels lost, the
learners-per-core figure, the CPU split's fallback (the hub part runs in `make bench-hub`)."""

from __future__ import annotations

import importlib.util
import sys
from collections import namedtuple
from pathlib import Path

import pytest

_BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(_BENCHMARKS))  # hub_load imports latency.py from beside it
_spec = importlib.util.spec_from_file_location("hub_load_benchmark", _BENCHMARKS / "hub_load.py")
hub_load = importlib.util.module_from_spec(_spec)
sys.modules["hub_load_benchmark"] = hub_load
_spec.loader.exec_module(hub_load)

# psutil.cpu_times()'s shape, as the row reads it (user, system, idle, iowait)
Times = namedtuple("Times", "user system idle iowait")
SPLIT = hub_load.CpuSplit(Path("/server"), Path("/browsers"), 1, "class on CPUs 1-1")


def _move(at: float, ms: float) -> dict:
    stages = {stage: ms / 4 for stage in hub_load.STAGES}
    return {"at": at, "late_s": 0.0, "ms": ms, "frame_ms": ms / 2, "stages": stages}


def _row(records, samples=None, killed=None):
    snapshots = [
        (100.0, {1: ("learners", 0.0), 2: ("browser", 0.0)}, Times(0, 0, 0, 0)),
        # 10 s on 2 CPUs: learners 5 CPU-s, browser 4 CPU-s, 11 idle
        (110.0, {1: ("learners", 5.0), 2: ("browser", 4.0)}, Times(8, 1, 10, 1)),
    ]
    return hub_load.row(
        len(records), records, samples or hub_load.Samples(), snapshots, killed or {}, 60.0, SPLIT
    )


def test_a_row_takes_every_learners_moves_and_counts_their_errors():
    records = [
        {
            "learner": "a",
            "moves": [_move(100 + i, 10.0 * (i + 1)) for i in range(10)],
            "moves_from": 100.0,
            "moves_to": 110.0,
            "run_all_s": 5.0,
            "error_outputs": ["NameError: x"],
            "failures": [],
        },
        {
            "learner": "b",
            "moves": [_move(100 + i, 100.0 + 10.0 * i) for i in range(10)],
            "moves_from": 101.0,
            "moves_to": 109.0,
            "run_all_s": 7.0,
            "failures": ["move at 3.0 s: no redraw in 60 s"],
        },
    ]
    r = _row(records)
    assert r["learners"] == 2 and r["moves"] == 20
    # the moves are 10..100 and 100..190 ms: numpy's percentiles of the 20
    assert r["p50_ms"] == pytest.approx(100.0)
    assert r["p95_ms"] == pytest.approx(180.5)
    assert r["frame_p50_p95_ms"] == [50.0, 90.2]
    assert r["errors"] == 2  # one error output, one failed move
    assert r["run_all_s"] == pytest.approx((6.0, 6.9))
    # CPU in the window: 9 of 20 CPU-s busy; the learners had 5 of the class's 10
    assert r["cpu_busy"] == pytest.approx(0.45)
    assert r["cpu_share"]["learners"] == pytest.approx(0.25)
    assert r["cpu_share"]["browser"] == pytest.approx(0.2)
    assert r["server_busy"] == pytest.approx(0.5)
    assert r["browsers_busy"] == pytest.approx(0.4)


def _wire_move(at: float, frame_ms: float) -> dict:
    stages = {stage: frame_ms / 3 for stage in hub_load.STAGES if stage != "to screen"}
    return {"at": at, "late_s": 0.0, "ms": None, "frame_ms": frame_ms, "stages": stages}


def test_a_wire_learners_moves_count_for_the_frame_and_the_class_but_not_the_picture():
    records = [
        {"learner": "a", "moves": [_move(100 + i, 10.0 * (i + 1)) for i in range(10)],
         "moves_from": 100.0, "moves_to": 110.0, "run_all_s": 5.0, "failures": []},
        {"learner": "b", "wire": True, "moves": [_wire_move(100 + i, 1000.0) for i in range(10)],
         "moves_from": 100.0, "moves_to": 110.0, "run_all_s": 5.0, "failures": []},
    ]  # fmt: skip
    r = _row(records)
    assert (r["browser_learners"], r["wire_learners"]) == (1, 1)
    assert r["moves"] == 20  # the class's load: both learners' moves
    assert r["p95_ms"] == pytest.approx(95.5)  # the picture: the browser's 10..100 ms alone
    assert r["frame_p50_p95_ms"][1] == 1000.0  # the frame's arrival: every learner's
    # "to screen" is the browser's alone; the other stages are both learners'
    assert r["stages_p50_p95_ms"]["to screen"] == [13.8, 23.9]  # 2.5..25 ms
    assert r["stages_p50_p95_ms"]["in kernel"][1] == pytest.approx(333.3)
    assert any("1 in a browser, 1 on the wire" in line for line in hub_load.report([r]))


def test_a_kill_splits_the_others_moves_and_leaves_out_the_killed_learners_failures():
    records = [
        {"learner": "a", "moves": [_move(100 + i, 50.0) for i in range(4)],
         "failures": ["move at 2.0 s: no redraw in 60 s"]},
        {"learner": "b", "moves": [_move(100 + i, 10.0 * (i + 1)) for i in range(4)],
         "failures": []},
    ]  # fmt: skip
    r = _row(records, killed={"learner": "a", "pid": 7, "at": 102.0})
    fault = r["fault"]
    assert fault["others_moves_before_after"] == [2, 2]
    assert fault["others_before_p50_p95_ms"] == pytest.approx((15.0, 19.5))
    assert fault["others_after_p50_p95_ms"] == pytest.approx((35.0, 39.5))
    assert fault["killed_learner_failures"] == ["move at 2.0 s: no redraw in 60 s"]
    assert r["errors"] == 0


def test_a_kernel_lost_is_one_gone_or_replaced_inside_the_moves_window():
    samples = hub_load.Samples()
    samples.kernels = {
        "kept": [(90.0, set()), (100.0, {5}), (105.0, {5}), (120.0, set())],
        "replaced": [(100.0, {6}), (105.0, {8})],
        "gone": [(100.0, {7}), (105.0, set())],
        "spared": [(100.0, {9}), (105.0, {10})],  # the fault run's own kill
        "never": [(100.0, set()), (105.0, set())],  # their login failed: an error, not a loss
    }
    assert sorted(hub_load.lost_kernels(samples, (100.0, 110.0), "spared")) == ["gone", "replaced"]


def test_learners_per_core_is_the_largest_clean_class_under_the_goal():
    def r(n, p95, in_kernel=50.0, busy=0.5, moves=None, lost=0, errors=0, **more):
        stages = {"in kernel": [in_kernel / 2, in_kernel]}
        moves = n * 90 if moves is None else moves  # 180 s at a move every 2 s: paced
        return {"learners": n, "p95_ms": p95, "lost": lost, "errors": errors, "server_cores": 1,
                "stages_p50_p95_ms": stages, "server_busy": busy, "moves": moves,
                "moves_window_s": 180.0} | more  # fmt: skip

    rows = [
        r(1, 90.0, busy=0.02),  # 40 ms of the class's CPU a move
        r(5, 200.0, busy=0.1),  # 40 ms
        r(10, 240.0, errors=1),  # an error: not a class that worked
        r(20, 400.0, busy=0.4),  # the picture late, the class's own part in time; 40 ms
        r(30, 600.0, busy=0.3, moves=1000),  # held back: 1000 of 2700 moves
        r(40, 900.0, in_kernel=300.0, busy=0.7),
        r(50, 100.0, fault={}),  # the fault run counts for none
    ]
    best = hub_load.learners_per_core(rows, think=2.0)
    assert best["by_picture"] == {"learners": 5, "per_core": 5.0}
    assert best["by_class"] == {"learners": 20, "per_core": 20.0}
    # the paced clean rows: 40 ms a move (1, 5 and 20 learners) and 35 ms (40): median 40
    assert best["class_cpu_ms_per_move"] == pytest.approx(40.0)
    assert best["projected_per_core"] == pytest.approx(40.0)  # 0.8 of 2000 ms over 40 ms
    none = hub_load.learners_per_core([r(1, 300.0, lost=1)], think=2.0)
    assert none == {"by_picture": None, "by_class": None, "class_cpu_ms_per_move": None,
                    "projected_per_core": None}  # fmt: skip


def test_without_cpusets_the_class_and_browsers_share_the_machine_and_it_says_why(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(hub_load, "CPUSET", tmp_path / "no-cpuset-here")
    with hub_load.cpu_split() as split:
        assert split.server is None and split.browsers is None
        assert split.how.startswith("not split: ")
        split.join(split.server)  # nothing to join: a no-op, not an error


def test_an_earlier_file_of_one_run_becomes_run_0():
    old = {"command": "python benchmarks/hub_load.py", "cpus": "class on CPUs 1-1",
           "load": {"busy": False}, "rows": [{"learners": 1}, {"learners": 5}]}  # fmt: skip
    runs, rows = hub_load._earlier(old)
    assert runs == [{"command": "python benchmarks/hub_load.py", "cpus": "class on CPUs 1-1",
                     "load": {"busy": False}}]  # fmt: skip
    assert rows == [{"learners": 1, "run": 0}, {"learners": 5, "run": 0}]
    assert hub_load._earlier({"runs": runs, "rows": rows}) == (runs, rows)


def test_a_run_whose_rows_were_all_measured_again_leaves_the_file():
    runs = [{"command": "busy day"}, {"command": "idle day"}, {"command": "today"}]
    rows = [{"learners": 1, "run": 2}, {"learners": 10, "run": 1}]  # run 0's row, 1, redone
    kept, renumbered = hub_load._named_runs(runs, rows)
    assert kept == [{"command": "idle day"}, {"command": "today"}]
    assert renumbered == [{"learners": 1, "run": 1}, {"learners": 10, "run": 0}]
