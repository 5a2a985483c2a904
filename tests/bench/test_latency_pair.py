"""The paired latency comparison's verdicts (benchmarks/latency_pair.py), on made-up runs."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "latency_pair.py"
_spec = importlib.util.spec_from_file_location("latency_pair", _PATH)
latency_pair = importlib.util.module_from_spec(_spec)
sys.modules["latency_pair"] = latency_pair
_spec.loader.exec_module(latency_pair)


def _run(shift_ms: dict[str, float], seed: int) -> dict:
    """A latency.py record: notebook 01, one box, a control per key of ``shift_ms``, 20 moves
    each around 50 ms (plus the shift), every stage a quarter of the move."""
    rng = np.random.default_rng(seed)
    browser = []
    for description, shift in shift_ms.items():
        samples = (50.0 + shift + rng.normal(0.0, 3.0, size=20)).round(1).tolist()
        stages = [{stage: ms / 4 for stage in latency_pair.STAGES} for ms in samples]
        browser.append(
            {"box": 0, "description": description, "samples_ms": samples, "stages_ms": stages}
        )
    return {"results": [{"notebook": "01_x.ipynb", "browser": browser}], "load": {}}


def test_a_shift_well_past_the_noise_is_slower_or_faster_and_none_is_the_same():
    before = latency_pair.controls(
        [_run({"a": 0, "b": 0, "c": 0}, 1), _run({"a": 0, "b": 0, "c": 0}, 2)]
    )
    after = latency_pair.controls(
        [_run({"a": 10, "b": 0, "c": -10}, 3), _run({"a": 10, "b": 0, "c": -10}, 4)]
    )
    got = latency_pair.compare(before, after)
    verdicts = {row["control"][2]: row["verdict"] for row in got["rows"]}
    assert verdicts == {"a": "slower", "b": "same", "c": "faster"}
    assert (got["controls"], got["slower"], got["faster"]) == (3, 1, 1)
    a = next(row for row in got["rows"] if row["control"][2] == "a")
    low, high = a["interval_95"]
    assert 0 < low < a["p50_difference"] < high and a["n"] == [40, 40]


def test_the_report_pools_runs_and_compares_each_sides_own_runs(tmp_path):
    files = {}
    for name, shift, seed in (("a1", 0, 1), ("a2", 0, 2), ("b1", 5, 3), ("b2", 5, 4)):
        files[name] = tmp_path / f"{name}.json"
        files[name].write_text(json.dumps(_run({"x": shift}, seed)))
    out = latency_pair.report([files["a1"], files["a2"]], [files["b1"], files["b2"]])
    assert out["summary"]["before"]["controls"] == 1
    assert out["summary"]["after"]["median_p50"] - out["summary"]["before"]["median_p50"] > 3
    stages = out["summary"]["after"]["stages_median_p50_p95"]
    assert stages["in kernel"][0] == pytest.approx(out["summary"]["after"]["median_p50"] / 4)
    assert out["before_run_2_against_run_1"]["controls"] == 1
    assert out["after_against_before"]["rows"][0]["n"] == [40, 40]
