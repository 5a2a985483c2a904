"""The benchmark harness: its arithmetic, its records and its refusals (no timing asserted)."""

from __future__ import annotations

import contextlib
import itertools
import json

import pytest
import torch

from attention_course.bench import cli, cpu, ratios
from attention_course.bench.floor import OPERATIONS, format_floor, format_threads_and_processes
from attention_course.bench.machine import MachineLoad, busy_warnings
from attention_lib.fits import fit_exponent


def test_flops_follow_flashattentions_count():
    case = cpu.Case("torch SDPA", length=1024, width=64, causal=False, batch_heads=8)
    assert case.flops == 4 * 8 * 1024 * 1024 * 64
    assert cpu.Case("torch SDPA", 1024, 64, True, 8).flops == case.flops / 2


def test_fit_exponent_recovers_a_power_law():
    lengths = [256, 512, 1024, 2048, 4096]
    assert fit_exponent(lengths, [3e-9 * n**2 for n in lengths]) == pytest.approx(2.0)
    # only the largest points count: a fixed cost at small sizes does not bend the fit
    with_overhead = [1.0 + 1e-6 * n**2 if n < 1024 else 1e-6 * n**2 for n in lengths]
    assert fit_exponent(lengths, with_overhead) == pytest.approx(2.0)
    assert fit_exponent([256], [1.0]) is None
    assert fit_exponent([256, 512], [None, 0.0]) is None


@pytest.fixture
def peak_in_this_process(monkeypatch):
    """Each case's memory read in this process (`Runner.peak_here`), not a fresh one: a
    fresh process starts torch, seconds a case. The fresh-process run has its own test."""
    monkeypatch.setattr(cpu.Runner, "fresh_peak", cpu.Runner.peak_here)


def test_a_small_sweep_writes_json_csv_and_plots(tmp_path, peak_in_this_process):
    args = cli.parse_cpu(
        ["--lengths", "32", "64", "--widths", "16", "--paths", "numpy reference",
         "torch SDPA", "torch tiled", "--repeats", "2", "--min-seconds", "0.01",
         "--out", str(tmp_path), "--device", "cpu", "--matmul-size", "128"]
    )  # fmt: skip
    suite = cpu.run_suite(args)
    out = cpu.write(suite, tmp_path)
    table = json.loads((out / "results.json").read_text())
    assert {r["status"] for r in table["results"]} == {"ok"}
    assert len(table["results"]) == 2 * 2 * 3  # lengths x causal x paths
    row = table["results"][0]
    assert row["gflops"] == pytest.approx(4 * 8 * 32 * 32 * 16 / row["median_s"] / 1e9)
    assert table["info"]["torch_threads"] >= 1 and table["matmul_gflops"]["torch"] > 0
    assert (out / "results.csv").read_text().startswith("path,length,width,causal")
    assert (out / "time_vs_length.png").stat().st_size > 0
    assert all(r["peak_mib_beyond_inputs"] is not None for r in table["results"])
    assert "growth exponent in L, torch tiled" in cpu.summary(suite)


def test_sizes_that_do_not_fit_are_refused_and_recorded(
    monkeypatch, tmp_path, peak_in_this_process
):
    monkeypatch.setattr("attention_lib.memory.available_bytes", lambda like: 1024)
    args = cli.parse_cpu(
        ["--lengths", "32", "64", "--widths", "16", "--paths", "numpy reference",
         "numpy tiled", "--out", str(tmp_path), "--device", "cpu", "--repeats", "1",
         "--matmul-size", "128"]
    )  # fmt: skip
    results = {(r.case.path, r.case.length): r for r in cpu.run_suite(args)["results"]}
    refused = results[("numpy reference", 32)]
    assert refused.status == "refused" and "flash_attention" in refused.note
    assert results[("numpy reference", 64)].note == "a shorter length was already refused"
    assert results[("numpy tiled", 64)].status == "ok"


def test_a_cases_memory_is_read_in_a_fresh_process():
    runner = cpu.Runner("cpu", "float32", repeats=1, min_seconds=0.0)
    peak = runner.fresh_peak(cpu.Case("numpy reference", 512, 16, False, 8))
    # 8 heads of 512 x 512 float32 scores are 8 MiB: the reference path holds them and more
    assert peak is None or 8 <= peak < 64


def test_triton_is_skipped_without_a_gpu(tmp_path):
    runner = cpu.Runner("cpu", "float32", repeats=1, min_seconds=0.0)
    result = runner.measure(cpu.Case("triton", 32, 16, False))
    assert result.status == "skipped" and "CUDA" in result.note


def test_log_log_slope_is_exact_on_power_laws_and_names_bad_input():
    from attention_lib.fits import log_log_slope

    xs = [1, 2, 4, 8]
    assert log_log_slope(xs, [3 * x**2 for x in xs]) == pytest.approx(2.0, rel=1e-12)
    assert log_log_slope(xs, [1 / x**0.5 for x in xs]) == pytest.approx(-0.5, rel=1e-12)
    with pytest.raises(ValueError, match=r"two or more .* got 1"):
        log_log_slope([1], [1])
    with pytest.raises(ValueError, match="as many x as y values, got 2 and 1"):
        log_log_slope([1, 2], [1])


# ---------------------------------------------------------------- the ratios to SDPA


def test_ratios_are_measured_idle_and_loaded_side_by_side():
    threads = torch.get_num_threads()
    result = ratios.run_ratios([64], [16], rounds=2, memory_length=0, numpy_lengths=[32])
    rows = result["ratios"]
    assert len(rows) == 2 * 2 * 2  # (forward, + backward) x (causal or not) x (idle, loaded)
    assert {r["load"] for r in rows} == {"idle", "loaded"}
    for r in rows:
        assert r["ratio"] == pytest.approx(r["sdpa_s"] / r["ours_s"])
        assert r["ops_ratio"] == pytest.approx(r["sdpa_s"] / r["ops_s"])
        assert r["tile_kernel"] == "fused"  # float32, no mask, E = Ev: the fused tiles
        assert r["ours_gflops"] == pytest.approx(
            ratios.RatioCase(r["length"], r["width"], r["causal"], r["backward"]).flops
            / r["ours_s"]
            / 1e9
        )
        assert r["score_fraction"] == 1  # at L = 64 one tile covers every score
    assert [n["causal"] for n in result["numpy"]] == [False, True]
    assert set(result["machine_load"]) == {"idle", "loaded"}
    for record in result["machine_load"].values():
        assert 0 <= record["others_cpu_share"] <= 1 and record["busy"] == bool(record["warnings"])
    text = ratios.format_ratios(result)
    assert "forward + backward, causal" in text and "numpy tiled / numpy reference" in text
    assert "other processes' share of the CPU time: idle " in text and ", loaded " in text
    # busy or not (another test worker may be running): the warnings come first and last
    lines = [line for line in text.splitlines() if not line.startswith("WARNING")]
    assert len(lines) == 3 + 4 + 1 + 2 + 4 + 3  # ..., 4 cases, legend, numpy, floor, processes
    (split,) = result["threads_and_processes"]
    assert (split["length"], split["width"]) == (64, 16)
    assert split["threads_ratio"] == pytest.approx(
        split["sdpa_two_threads_s"] / split["ours_two_threads_s"]
    )
    assert split["processes_ratio"] == pytest.approx(
        split["sdpa_two_threads_s"] / split["ours_two_processes_s"]
    )
    assert min(split["ours_two_threads_s"], split["ours_two_processes_s"]) > 0
    (floor,) = result["floor"]
    assert (floor["length"], floor["width"], floor["threads"]) == (64, 16, 1)
    assert set(floor["ns_per_score"]) == set(OPERATIONS)
    assert floor["operations_ns"] == pytest.approx(sum(floor["ns_per_score"].values()))
    assert floor["floor_ratio"] == pytest.approx(floor["sdpa_ns"] / floor["operations_ns"])
    assert floor["ours_ratio"] == pytest.approx(floor["sdpa_ns"] / floor["ours_ns"])
    assert all(x > 0 for x in floor["ns_per_score"].values())
    assert torch.get_num_threads() == threads  # the one-thread timing gave the count back


def test_every_timed_call_starts_after_a_rest(monkeypatch):
    """The threads of the call before spin for milliseconds after it (libgomp): each timed call
    waits QUIET_S first, outside its timing, in the alternating order."""
    events = []
    monkeypatch.setattr(ratios.time, "sleep", lambda s: events.append(("rest", s)))
    fns = {name: (lambda name=name: events.append(("call", name))) for name in ("a", "b")}
    times = ratios._alternate(fns, rounds=3)
    assert events[:2] == [("call", "a"), ("call", "b")]  # the warm-up
    rest = ("rest", ratios.QUIET_S)
    order = ["a", "b", "b", "a", "a", "b"]
    assert events[2:] == [e for name in order for e in (rest, ("call", name))]
    assert {name: len(t) for name, t in times.items()} == {"a": 3, "b": 3}
    assert ratios.QUIET_S >= 0.02  # longer than libgomp's default spin (7-8 ms measured)


def test_three_timed_functions_each_follow_each_equally_often(monkeypatch):
    """Flipped every round, the middle one of three never followed itself (issue 40: the
    same code timed 6-17% slower there). Over a cycle of rounds, every ordered pair of
    consecutive calls (a function after itself too) comes up equally often."""
    from collections import Counter

    calls = []
    monkeypatch.setattr(ratios.time, "sleep", lambda s: None)
    fns = {name: (lambda name=name: calls.append(name)) for name in ("base", "head", "sdpa")}
    orders = ratios.balanced_orders(list(fns))
    assert sorted(orders) == sorted(itertools.permutations(fns))  # each round: all three
    times = ratios._alternate(fns, rounds=2 * len(orders))
    timed = calls[3:]  # after the warm-up
    follows = Counter(itertools.pairwise(timed))
    assert len(follows) == 9 and max(follows.values()) - min(follows.values()) <= 1
    assert {name: len(t) for name, t in times.items()} == {n: 2 * len(orders) for n in fns}
    assert ratios.balanced_orders(["a", "b"]) == [("a", "b"), ("b", "a")]  # the flip
    with pytest.raises(ValueError, match="at most three names, got 4"):
        ratios.balanced_orders(list("abcd"))


def test_the_floor_table_prints_each_operation_and_both_ratios():
    ops = {"scores": 1.0, "exp2": 0.3, "weights x values": 0.95}
    row = {"length": 2048, "width": 64, "block_q": 2048, "block_k": 512, "threads": 1}
    row |= {"ns_per_score": ops, "operations_ns": 2.25, "sdpa_ns": 2.4, "ours_ns": 3.0}
    row |= {"floor_ratio": 2.4 / 2.25, "ours_ratio": 0.8}
    header, columns, line, legend = format_floor([row])
    assert header.startswith("the floor under tile_kernel='ops': one tile's torch operations")
    assert "q k^T      exp2   p [v,1]    sum" in columns
    assert line.split() == "2048 64 2048x512 1.000 0.300 0.950 2.25 2.40 3.00 1.07 0.80".split()
    assert legend.startswith("(SDPA/sum: the best ratio")
    assert format_floor([]) == []


def test_the_ratio_table_warns_first_and_last_when_the_machine_was_busy():
    case = {"length": 64, "width": 16, "causal": True, "backward": False, "rounds": 1}
    row = case | {"ours_gflops": 1.0, "sdpa_gflops": 2.0, "ratio": 0.5, "score_fraction": 0.5}
    row |= {"block_q": 1024, "block_k": 128, "block_k_below": 256}
    row |= {"tile_kernel": "fused", "ops_ratio": 0.3}
    idle = {"others_cpu_share": 0.3, "warnings": ["WARNING: the machine was busy: others"]}
    result = {
        "info": {"load_average": [0.1, 0.2, 0.3], "torch_threads": 2},
        "machine_load": {"idle": idle, "loaded": {"others_cpu_share": 0.02, "warnings": []}},
        "ratios": [row | {"load": "idle"}, row | {"load": "loaded", "ratio": 0.4}],
        "memory": [],
        "numpy": [],
    }
    lines = ratios.format_ratios(result).splitlines()
    assert lines[0] == lines[-1] == "WARNING: the machine was busy: others"
    assert "other processes' share of the CPU time: idle 30%, loaded 2%" in lines
    (case_line,) = (line for line in lines if line.lstrip().startswith("64"))
    assert "fused 1024x128/256" in case_line and case_line.rstrip().endswith("0.80")  # 0.4 / 0.5
    assert case_line.split().count("0.30") == 2  # tile_kernel='ops', idle and loaded
    del result["machine_load"]  # a file written before the load was kept
    assert not ratios.format_ratios(result).startswith("WARNING")


def test_the_threads_and_processes_table_prints_both_ratios():
    row = {"length": 4096, "width": 64, "ours_two_threads_s": 0.294}
    row |= {"ours_two_processes_s": 0.212, "sdpa_two_threads_s": 0.205}
    row |= {"threads_ratio": 0.205 / 0.294, "processes_ratio": 0.205 / 0.212}
    header, columns, line = format_threads_and_processes([row])
    assert header.startswith("tile_kernel='ops': two workers as threads of one process, or as")
    assert columns.split() == ["L", "E", "threads", "processes", "SDPA", "ratio,", "threads",
                               "processes"]  # fmt: skip
    assert line.split() == ["4096", "64", "294.0", "212.0", "205.0", "0.70", "0.97"]
    assert format_threads_and_processes([]) == []


def test_the_load_average_after_our_own_work_is_no_sign_of_others():
    """After the sweep (or the idle ratios) the 1-minute load average counts this run's
    own work: only others' share of the CPU time then says the machine was busy."""
    load = MachineLoad(cpus=2, load_before_counts=False)
    load.before, load.others_share = (1.9, 1.6, 1.9), 0.01
    assert busy_warnings(load) == []
    load.others_share = 0.2
    assert busy_warnings(load)[0].endswith(
        "other processes used 20% of the machine's CPU time during the run (more than 10%)"
    )
    assert not any("load average" in w for w in busy_warnings(load))
    assert MachineLoad(cpus=2, load_before_counts=True, before=(1.9, 1, 1)).record()["busy"]


def test_make_bench_does_not_count_its_sweep_as_others_load(monkeypatch):
    monkeypatch.setattr(ratios, "measure_ratios", lambda cases, rounds, load: [])
    monkeypatch.setattr(ratios, "measure_numpy", lambda *args: [])
    monkeypatch.setattr(ratios, "measure_floor", lambda *args: {})
    monkeypatch.setattr(ratios, "measure_threads_and_processes", lambda *args: {})
    monkeypatch.setattr(ratios, "busy_process", contextlib.nullcontext)
    for after_sweep in (False, True):
        result = ratios.run_ratios([64], [16], 1, 0, [32], after_sweep=after_sweep)
        counts = {k: r["load_average_before_counts"] for k, r in result["machine_load"].items()}
        assert counts == {"idle": not after_sweep, "loaded": False}


def test_the_busy_process_runs_only_inside_its_block():
    with ratios.busy_process() as busy:
        assert busy.poll() is None  # running
    assert busy.poll() is not None  # stopped


def test_memory_is_measured_beyond_inputs_and_outputs_in_a_fresh_process():
    rows = ratios.measure_memory(512, [16])
    assert [r["backward"] for r in rows] == [False, True]
    for r in rows:
        peak = r["peak_mib_beyond_inputs_and_outputs"]
        assert peak is None or -1 < peak < 64  # tiles and copies: a few MiB at most here
        assert r["seconds"] > 0


def test_ratios_only_writes_ratios_json(tmp_path):
    args = ["--ratios-only", "--ratio-lengths", "64", "--ratio-widths", "16", "--rounds", "1",
            "--memory-length", "0", "--numpy-lengths", "32", "--no-load", "--device", "cpu",
            "--out", str(tmp_path)]  # fmt: skip
    assert cli.main(args) == 0
    (written,) = tmp_path.glob("*/ratios.json")
    payload = json.loads(written.read_text())
    assert payload["command"].startswith("python -m attention_course.bench")
    assert {r["load"] for r in payload["ratios"]} == {"idle"}
    assert "cpu_model" in payload["info"] and len(payload["info"]["load_average"]) == 3
    assert not list(tmp_path.glob("*/results.json"))  # no sweep
