"""The researcher's questions, answered from autograd and from the committed training report."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attention_course.lessons.printing import format_table
from attention_course.lessons.saturation import (
    fit_qk_temperature,
    head_table,
    qk_norm_view,
    saturation_table,
    score_gradient_check,
)
from attention_course.lessons.scaling import alignment_table, width_growth
from attention_course.model.head_stats import saturation_step
from attention_course.model.report import load_report


@pytest.mark.parametrize("width", [4, 64, 1024])
def test_the_scale_sits_inside_the_gradient(width):
    check = score_gradient_check(width)
    assert check.scale == 1 / math.sqrt(width)
    assert check.dq_error < 1e-12 and check.dk_error < 1e-12
    assert check.dq_norm / check.dq_norm_unit == pytest.approx(check.scale, rel=1e-12)
    unscaled = score_gradient_check(width, scale=1.0)
    assert unscaled.dq_norm == pytest.approx(unscaled.dq_norm_unit, rel=1e-12)
    with pytest.raises(ValueError, match="positive"):
        score_gradient_check(0)


def test_the_saturation_table_is_computed_from_the_checkpoints():
    report = load_report()
    rows = {r["model"]: r for r in saturation_table(report)}
    assert set(rows) == set(report["models"])
    for name, row in rows.items():
        assert row["saturates_at"] == saturation_step(report["models"][name]["checkpoints"])
        assert 0 <= row["saturated_start"] <= 1 and 0 <= row["jacobian_end"] <= 0.5
        assert row["scale"] == report["models"][name]["scale"]


def test_the_alignment_table_starts_near_independence():
    rows = {r["model"]: r for r in alignment_table()}
    for name, row in rows.items():
        assert row["parallel"] == math.sqrt(row["d"])
        assert row["alignment_start"] == pytest.approx(1.0, abs=0.25), name
        assert 0 < row["alignment_end"] <= row["alignment_end_max"] <= row["parallel"]
        # raw q·k at initialisation: unit-variance components, so about sqrt(d)
        assert row["raw_qk_start"] / math.sqrt(row["d"]) == pytest.approx(1.0, rel=0.3), name


def test_width_growth_is_a_power_of_the_width_ratio():
    g = width_growth()
    assert (g["d_narrow"], g["d_wide"]) == (16, 64)
    assert (g["independent"], g["aligned"]) == (2.0, 4.0)
    assert g["grew"] == pytest.approx(4 ** g["exponent"])


def test_format_table_prints_none_as_a_dash():
    rows = [{"a": "first model", "b": None, "c": 1.23456}, {"a": "x", "b": 12, "c": 10.0}]
    text = format_table(rows, [("a", "model", "s"), ("b", "b", "d"), ("c", "c", ".2f")])
    assert text.splitlines() == [
        "model         b      c",
        "first model   -   1.23",
        "x            12  10.00",
    ]


def test_qk_norm_bounds_the_trained_models_logits():
    view = qk_norm_view(name="none_d16")
    assert view.temperature == 4.0  # sqrt(16)
    assert np.abs(view.qk_logits).max() <= view.temperature + 1e-12
    assert view.largest_qk_logit <= view.temperature + 1e-12
    assert view.weights.sum() == pytest.approx(1) and view.qk_weights.sum() == pytest.approx(1)
    assert view.words[-1] == "it"
    fixed = qk_norm_view(name="none_d16", temperature=2.0)
    assert fixed.largest_qk_logit <= 2.0 + 1e-12
    with pytest.raises(ValueError, match="temperature"):
        qk_norm_view(temperature=-1.0)


def test_a_fitted_temperature_stays_in_its_bounds():
    tau = fit_qk_temperature("sqrt_d16", bounds=(0.5, 50.0))
    assert 0.5 <= tau <= 50.0


def test_what_the_committed_models_show():
    """The qualitative findings notebooks 04-06 state, read from the committed report."""
    sat = {r["model"]: r for r in saturation_table()}
    assert sat["none_d16"]["saturates_at"] is not None and sat["none_d16"]["saturates_at"] <= 400
    assert [sat[n]["saturates_at"] for n in ("sqrt_d16", "inv_d64", "sqrt_d64")] == [None] * 3
    order = sorted(sat, key=lambda n: sat[n]["jacobian_end"])
    assert order == ["none_d16", "sqrt_d64", "sqrt_d16", "inv_d64"]
    align = {r["model"]: r for r in alignment_table()}
    assert all(r["alignment_end"] > 1.3 for r in align.values())  # q and k became correlated
    assert max(align, key=lambda n: align[n]["alignment_end"]) == "inv_d64"
    growth = width_growth()
    assert 0.5 < growth["exponent"] < 1.0  # between independence (1/2) and alignment (1)
    view = qk_norm_view(name="none_d16")
    assert view.largest_logit > 4 * view.temperature  # unbounded without QK-norm


def test_the_head_table_reads_every_head_of_a_checkpoint():
    report = load_report()
    rows = head_table(report, ["none_d16", "inv_d64"])
    assert [(r["model"], r["layer"], r["head"]) for r in rows[:5]] == [
        ("none_d16", 1, 1),
        ("none_d16", 1, 2),
        ("none_d16", 1, 3),
        ("none_d16", 1, 4),
        ("none_d16", 2, 1),
    ]
    assert len(rows) == 16 and {r["step"] for r in rows} == {1500}
    last = report["models"]["inv_d64"]["checkpoints"][-1]["heads"]
    row = rows[8 + 4 + 2]  # inv_d64, layer 2, head 3
    assert (row["model"], row["layer"], row["head"]) == ("inv_d64", 2, 3)
    for metric in ("logit_spread", "entropy", "log_keys", "jacobian_norm", "saturated_fraction"):
        assert row[metric] == last[metric][1][2]
    # the mean over heads is what the saturation table reports
    sat = {r["model"]: r for r in saturation_table(report)}
    mean_j = np.mean([r["jacobian_norm"] for r in rows if r["model"] == "none_d16"])
    assert mean_j == pytest.approx(sat["none_d16"]["jacobian_end"], rel=1e-12)
    first = head_table(report, ["none_d16"], checkpoint=0)
    assert {r["step"] for r in first} == {0}
    with pytest.raises(IndexError, match="checkpoint 21 out of range: none_d16 has 21"):
        head_table(report, ["none_d16"], checkpoint=21)
