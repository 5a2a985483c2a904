"""The latency benchmark's arithmetic and report (the browser part runs in `make bench-latency`)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "latency.py"
_spec = importlib.util.spec_from_file_location("latency_benchmark", _PATH)
latency = importlib.util.module_from_spec(_spec)
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
                {"box": 0, "description": "fast", "n": 6, "p50": 90.0, "p95": 249.9},
                {"box": 0, "description": "slow", "n": 6, "p50": 200.0, "p95": 250.0},
            ],
            "kernel": [_kernel("E.fast", 59.9), _kernel("E.slow", 60.0)],
        }
    ]
    lines = latency.report(results)
    rows = {
        name: line
        for line in lines
        for name in ("fast", "slow", "E.fast", "E.slow")
        if f" {name} " in line
    }
    assert "MISS" not in rows["fast"] and rows["slow"].endswith("MISS")
    assert "MISS" not in rows["E.fast"] and rows["E.slow"].endswith("MISS")
    assert "update p95    2.0; full redraw p50   75.0 ms" in rows["E.slow"]
