"""The course's GPU view: committed GPU results beside the CPU ones, and the guarded live run."""

from __future__ import annotations

import json

import matplotlib.pyplot as plt
import pytest

from attention_course.bench import gpu as gpu_suite
from attention_course.bench.results import load_benchmarks, load_gpu_runs
from attention_course.lessons import gpu
from attention_course.lessons.figures import plot_cpu_and_gpu


def _rows():
    """Rows in the GPU suite's format, made up for these tests (not measurements)."""
    rows = []
    for path, base in (("triton kernel", 300.0), ("sdpa flash", 250.0)):
        for length in (1024, 4096):
            rows.append({
                "path": path, "mode": "forward", "dtype": "float16", "length": length,
                "width": 64, "causal": False, "batch": 16384 // length, "heads": 32,
                "status": "ok", "median_ms": 1.0, "tflops": base * length / 4096,
                "peak_mib_beyond_inputs": 1.0, "tiles": "", "note": "",
            })  # fmt: skip
    return rows


def _write(root):
    info = {"machine": "gpu-test-card", "gpu": "Test Card"}
    payload = {"command": "make gpu-check", "info": info, "results": _rows(), "targets": []}
    return gpu_suite.write(payload, root)


def test_no_gpu_results_says_so_in_text_and_figure(tmp_path):
    assert load_gpu_runs(tmp_path) == []
    assert gpu.gpu_caption([]) == gpu.NO_GPU_RESULTS
    fig, axes = plt.subplots(1, 2)
    plot_cpu_and_gpu(None, [], axes)
    (text,) = [t.get_text() for t in axes[1].texts]
    assert " ".join(text.split()) == gpu.NO_GPU_RESULTS
    assert max(len(line) for line in text.splitlines()) <= 36  # fits the panel
    plt.close(fig)


def test_committed_gpu_results_are_read_and_drawn(tmp_path):
    _write(tmp_path)
    (run,) = load_gpu_runs(tmp_path)
    assert run.gpu == "Test Card" and run.command == "make gpu-check"
    assert run.series("triton kernel", "forward", "float16", 64, False) == (
        [1024, 4096],
        [75.0, 300.0],
    )
    assert gpu.gpu_caption([run]) == (
        "Forward pass on Test Card at L = 4096, E = 64, float16, not causal, in TFLOP/s: "
        "triton kernel 300, sdpa flash 250 (measured by `make gpu-check`)."
    )
    fig, axes = plt.subplots(1, 2)
    plot_cpu_and_gpu(None, [run], axes)
    assert [line.get_label() for line in axes[1].get_lines()] == ["triton kernel", "sdpa flash"]
    assert axes[1].get_ylabel().startswith("TFLOP/s") and axes[1].get_yscale() == "log"
    plt.close(fig)


def test_gpu_files_stay_out_of_the_cpu_loader(tmp_path):
    _write(tmp_path)
    assert load_benchmarks(tmp_path) == []  # the CPU loader reads results.json only


def test_the_committed_cpu_run_is_drawn_in_tflops():
    (cpu_run,) = [r for r in load_benchmarks() if not r.is_gpu]
    fig, axes = plt.subplots(1, 2)
    plot_cpu_and_gpu(cpu_run, load_gpu_runs(), axes)
    lines = axes[0].get_lines()
    assert {line.get_label() for line in lines} >= {"torch SDPA", "torch tiled"}
    sdpa = next(line for line in lines if line.get_label() == "torch SDPA")
    row = next(r for r in cpu_run.rows if r["path"] == "torch SDPA" and r["width"] == 64
               and not r["causal"] and r["status"] == "ok")  # fmt: skip
    assert row["gflops"] / 1e3 in list(sdpa.get_ydata())
    plt.close(fig)


def test_a_bad_gpu_file_is_named(tmp_path):
    (tmp_path / "gpu-x").mkdir()
    (tmp_path / "gpu-x" / "gpu_results.json").write_text(json.dumps({"info": {}}))
    with pytest.raises(ValueError, match=r"gpu-x/gpu_results\.json is not a GPU results file"):
        load_gpu_runs(tmp_path)


@pytest.mark.skipif(
    __import__("torch").cuda.is_available(), reason="this machine has a CUDA device"
)
def test_the_live_comparison_prints_the_same_line_on_every_cpu_machine():
    assert gpu.live_comparison() is None
    assert gpu.describe_live(None) == gpu.NO_LIVE_GPU


def test_a_live_comparison_is_described_as_a_table():
    speeds = {"flash_attention": {1024: 200.0}, "torch SDPA": {1024: 160.0}}
    result = gpu.LiveComparison("Test Card", "float16", 64, False, speeds)
    text = gpu.describe_live(result)
    assert (
        text.splitlines()[0] == "live on Test Card, E = 64, float16, not causal, forward TFLOP/s:"
    )
    assert text.splitlines()[-1].split() == ["1024", "200.0", "160.0", "1.25x"]
