"""The GPU benchmark's arithmetic, arguments, records and report, checked on the CPU.

Nothing here times anything: rows given to the writer and the target
evaluator are inputs to those functions, made up for the test, never
results. The timing itself needs a CUDA device (make gpu-check).
"""

from __future__ import annotations

import csv
import json

import pytest

from attention_course.bench import cli, gpu
from attention_course.bench.machine import gpu_machine_name


def test_shapes_are_flashattention2s():
    assert gpu.fa2_shape(1024, 64) == (16, 32)
    assert gpu.fa2_shape(16384, 128) == (1, 16)
    for length in gpu.LENGTHS:
        for width in gpu.WIDTHS:
            batch, heads = gpu.fa2_shape(length, width)
            assert batch * length == 16384 and heads * width == 2048
    with pytest.raises(ValueError, match="L to divide 16384 and E to divide 2048, got L = 3000"):
        gpu.fa2_shape(3000, 64)


def test_flops_follow_flashattention2s_count():
    case = gpu.GpuCase("sdpa flash", "forward", "float16", 4096, 64, False, 4, 32)
    assert case.flops == 4 * 4 * 32 * 4096 * 4096 * 64
    causal = gpu.GpuCase("sdpa flash", "forward", "float16", 4096, 64, True, 4, 32)
    assert causal.flops == case.flops / 2
    both = gpu.GpuCase("sdpa flash", "forward+backward", "float16", 4096, 64, True, 4, 32)
    assert both.flops == 3.5 * causal.flops
    # at B·L and H·E fixed, the work grows linearly in L
    a, b = (
        gpu.GpuCase("x", "forward", "float16", n, 64, False, *gpu.fa2_shape(n, 64))
        for n in (1024, 4096)
    )
    assert b.flops == 4 * a.flops


def test_the_sweep_covers_the_issues_grid():
    todo = list(gpu.cases(gpu.LENGTHS, gpu.WIDTHS, gpu.DTYPES))
    assert len(todo) == 2 * 2 * 2 * 5 * 2 * 5  # dtypes, widths, causal, lengths, modes, paths
    assert {c.path for c in todo} == {
        "triton kernel", "flash_attention", "sdpa flash", "sdpa cudnn", "sdpa efficient"
    }  # fmt: skip
    assert {c.mode for c in todo} == {"forward", "forward+backward"}
    assert {(c.length, c.batch) for c in todo if c.width == 128} == {
        (1024, 16), (2048, 8), (4096, 4), (8192, 2), (16384, 1)
    }  # fmt: skip


def test_arguments():
    args = cli.parse_gpu([])
    assert args.lengths == [1024, 2048, 4096, 8192, 16384] and args.widths == [64, 128]
    assert args.dtypes == ["float16", "bfloat16"] and not args.tune
    assert cli.parse_gpu(["--quick"]).lengths == [1024, 4096]
    assert cli.parse_gpu(["--tune"]).lengths == [4096]
    assert cli.parse_gpu(["--tune", "--lengths", "2048"]).lengths == [2048]
    with pytest.raises(SystemExit):
        cli.parse_gpu(["--lengths", "3000"])


def test_the_cpu_suite_stays_on_the_cpu():
    assert cli._device(["--device", "cpu", "--quick"]) == "cpu"
    assert cli._device(["--device", "cuda:1"]) == "cuda:1"
    import torch

    assert cli._device([]) == ("cuda" if torch.cuda.is_available() else "cpu")


@pytest.mark.skipif(
    __import__("torch").cuda.is_available(), reason="this machine has a CUDA device"
)
def test_without_cuda_the_gpu_suite_says_so():
    with pytest.raises(RuntimeError, match="needs a CUDA device and none is visible"):
        gpu.run(cli.parse_gpu([]))


def _row(path, tflops, mode="forward", length=4096, causal=False, status="ok"):
    """A row as the writer receives it (test input, not a measurement)."""
    return {
        "path": path, "mode": mode, "dtype": "float16", "length": length, "width": 64,
        "causal": causal, "batch": 16384 // length, "heads": 32, "status": status,
        "median_ms": None if tflops is None else 1.0, "tflops": tflops,
        "peak_mib_beyond_inputs": None, "tiles": "", "note": "" if status == "ok" else "why",
    }  # fmt: skip


def test_targets_are_ratios_measured_side_by_side():
    rows = [
        _row("triton kernel", 375.0),
        _row("sdpa flash", 300.0),
        _row("sdpa cudnn", 450.0),
        _row("flash_attention", 360.0),
        _row("triton kernel", 200.0, length=1024),  # below the targets' lengths
        _row("sdpa flash", 300.0, length=1024),
        _row("triton kernel", 100.0, mode="forward+backward"),
        _row("sdpa flash", 125.0, mode="forward+backward"),
        _row("sdpa efficient", None, status="skipped"),
    ]
    assert gpu.ratios(rows, "triton kernel", "sdpa flash", "forward") == {
        ("forward", "float16", 64, False, 4096): 1.25,
        ("forward", "float16", 64, False, 1024): 200 / 300,
    }
    report = {t["name"]: t for t in gpu.evaluate_targets(rows)}
    flash = report["forward, kernel alone vs SDPA flash"]
    assert (flash["cases"], flash["met"], flash["worst_ratio"]) == (1, 1, 1.25)
    cudnn = report["forward, kernel alone vs SDPA cuDNN"]
    assert cudnn["met"] == 0 and cudnn["worst_ratio"] == pytest.approx(375 / 450)
    assert cudnn["worst_case"] == "dtype float16, E 64, not causal, L 4096"
    through = report["forward, through flash_attention vs kernel alone"]
    assert through["met"] == 1 and through["worst_ratio"] == pytest.approx(0.96)
    backward = report["forward+backward, kernel alone vs SDPA flash"]
    assert backward["met"] == 0 and backward["worst_ratio"] == pytest.approx(0.8)
    assert report["forward+backward, through flash_attention vs SDPA flash"]["cases"] == 0


def test_results_are_written_as_json_csv_and_a_plot(tmp_path):
    rows = [_row(p, t, length=n) for p, t in (("triton kernel", 380.0), ("sdpa flash", 300.0))
            for n in (1024, 4096)]  # fmt: skip
    rows.append(_row("sdpa cudnn", None, status="skipped"))
    payload = {
        "command": "python -m attention_course.bench",
        "info": {"machine": gpu_machine_name("NVIDIA H200"), "gpu": "NVIDIA H200"},
        "results": rows,
        "targets": gpu.evaluate_targets(rows),
        "memory": {"batch": 1, "heads": 16, "length": 65536, "width": 128, "dtype": "bfloat16",
                   "causal": True, "beyond_inputs_mib": 260.0, "output_mib": 256.0,
                   "lse_mib": 4.0, "limit_mib": 273.0, "met": True},
    }  # fmt: skip
    out = gpu.write(payload, tmp_path)
    assert out == tmp_path / "gpu-nvidia-h200"
    assert json.loads((out / "gpu_results.json").read_text()) == payload
    with (out / "gpu_results.csv").open() as f:
        table = list(csv.DictReader(f))
    assert len(table) == 5 and table[0]["path"] == "triton kernel" and table[0]["tflops"] == "380.0"
    assert (out / "gpu_tflops.png").stat().st_size > 10_000
    text = gpu.summary(payload)
    assert "skipped sdpa cudnn: why" in text
    assert "1.27x" in text  # 380 / 300, kernel over SDPA flash, side by side
    assert "met in 1 of 1, worst 1.27x at dtype float16, E 64, not causal, L 4096" in text
    assert "260 MiB beyond the inputs, limit 273 MiB (output 256 + lse 4, +5%): met" in text


def test_machine_names():
    assert gpu_machine_name("NVIDIA H200") == "gpu-nvidia-h200"
    assert gpu_machine_name("NVIDIA H100 80GB HBM3") == "gpu-nvidia-h100-80gb-hbm3"


def test_tuning_names_the_fastest_tile_and_whether_the_table_leads_with_it():
    from attention_lib.flash.triton.configs import candidates

    first, second = candidates("forward", 64, "float16", False)[:2]
    rows = [
        {"kernel": "forward", "dtype": "float16", "width": 64, "causal": False, "length": 4096,
         **t.as_dict(), "status": "ok", "median_ms": ms, "tflops": 1.0 / ms}
        for t, ms in ((first, 2.0), (second, 1.0))
    ]  # fmt: skip
    rows.append({**rows[0], "block_m": 256, "status": "failed", "median_ms": None})
    (winner,) = gpu.tune_winners(rows)
    assert (winner["block_m"], winner["block_n"]) == (second.block_m, second.block_n)
    assert winner["table_leads_with_it"] is False
    assert "not the table's first: update it" in gpu.tuning_table([winner])
