"""Issue 40's edge report (benchmarks/edge_errors.py): this tree meets every edge on a few
draws, an edge that raises becomes a row, and the report names both commits."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

_BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
_spec = importlib.util.spec_from_file_location("edge_errors", _BENCHMARKS / "edge_errors.py")
edge_errors = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(edge_errors)

import attention_lib  # noqa: E402


def test_this_tree_meets_every_edge():
    report = edge_errors.measure(attention_lib, draws=8)
    assert set(report) == {edge.__name__ for edge in edge_errors.EDGES}
    rows = [row for found in report.values() for row in found]
    assert not [row for row in rows if "raised" in row]
    for row in report["zero_width_infinite_value"]:
        assert row["as_pytorch"] and row["ours"] == float("inf"), row
    assert report["nan_scale_half"][0]["as_pytorch"] == 8
    for row in report["infinite_scale_causal_grouped"]:
        assert row["unexplained"] == row["seen_not_nan"] == row["heads_uneven"] == 0, row
    shares = [row for row in rows if "past_rule" in row]
    assert len(shares) == 6 and all(row["past_rule"] == 0 for row in shares), shares


def test_an_edge_that_raises_is_a_row_of_its_own(monkeypatch):
    def refuses(lib, draws):
        raise TypeError("no such argument")

    refuses.__doc__ = "An edge an earlier commit cannot run."
    monkeypatch.setattr(edge_errors, "EDGES", (refuses,))
    report = edge_errors.measure(attention_lib, draws=1)
    assert report == {"refuses": [{"edge": "refuses", "raised": "TypeError('no such argument')"}]}


def test_the_report_names_both_commits(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(edge_errors, "EDGES", (edge_errors.zero_width_infinite_value,))
    out = tmp_path / "edges.json"
    assert edge_errors.main(["HEAD", "--draws", "1", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    head = edge_errors.commit_of("HEAD")
    assert record["base"] == head and list(record["rows"]) == [head[:7], "now"]
    assert record["command"] == f"python benchmarks/edge_errors.py HEAD --draws 1 --out {out}"
    assert "row 0 sees key 0 alone" in capsys.readouterr().out
