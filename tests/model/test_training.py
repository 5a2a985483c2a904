"""Training: seeded and deterministic, and the committed report is what the code produces.

A full retrain takes minutes (``make model MODEL_ARGS=--check`` does it and
compares); here the first steps of every model are rerun and held to the
committed report, and a short run is repeated to show it is deterministic.
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import asdict, replace

import numpy as np
import pytest
import torch

from attention_course.model.catalogue import MODEL_LABELS, TRAINED, trained_dir
from attention_course.model.corpus import build_corpus
from attention_course.model.head_stats import METRICS
from attention_course.model.report import TOLERANCES, compare, load_report
from attention_course.model.training import TrainConfig, main, train

SHORT = replace(
    TrainConfig(),
    steps=6,
    batch=8,
    early_checkpoints=(3,),
    probe=(("pronoun", 8), ("agreement", 8), ("name", 4)),
)


@pytest.fixture(scope="module")
def report():
    return load_report()


def test_the_learning_rate_warms_up_then_decays():
    c = TrainConfig()
    assert c.learning_rate(0) == pytest.approx(c.lr / c.warmup)
    assert c.learning_rate(c.warmup - 1) == pytest.approx(c.lr)
    assert c.learning_rate(c.warmup) == pytest.approx(c.lr)
    assert c.learning_rate(c.steps) == pytest.approx(c.lr * c.min_lr_ratio)
    lrs = [c.learning_rate(s) for s in range(c.warmup, c.steps)]
    assert lrs == sorted(lrs, reverse=True)


def test_checkpoints_start_at_zero_and_end_at_the_last_step():
    c = TrainConfig()
    steps = c.checkpoint_steps()
    assert steps[0] == 0 and steps[-1] == c.steps and steps == sorted(set(steps))
    assert {10, 25, 50, 100, 200} <= set(steps)
    assert TrainConfig().checkpoint_steps(30) == [0, 10, 25, 30]


@pytest.mark.slow
def test_a_short_seeded_run_is_deterministic():
    runs = [train("sqrt_d16", SHORT) for _ in range(2)]
    (m1, r1), (m2, r2) = runs
    assert r1.losses == r2.losses and len(r1.losses) == 6
    assert r1.checkpoints == r2.checkpoints
    assert [c["step"] for c in r1.checkpoints] == [0, 3, 6]
    for (name, a), (_, b) in zip(m1.state_dict().items(), m2.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    assert torch.get_num_threads() >= 1  # restored


@pytest.mark.slow
@pytest.mark.parametrize("name", ["sqrt_d16", "inv_d64"])  # both head widths, two rules
def test_the_first_steps_reproduce_the_committed_report(name, report):
    """Same seed, same data, same schedule: the first 10 losses and the measurements
    before training and after 10 steps agree with the committed run (within float
    rounding across CPUs)."""
    _, run = train(name, stop_after=10)
    want = report["models"][name]
    tol = TOLERANCES["first 10 steps' losses (relative)"]
    np.testing.assert_allclose(run.losses, want["losses"][:10], rtol=tol)
    for got, expected in zip(run.checkpoints, want["checkpoints"][:2], strict=True):
        assert got["step"] == expected["step"]
        for metric in METRICS:
            np.testing.assert_allclose(
                got["heads"][metric],
                expected["heads"][metric],
                rtol=1e-3,
                atol=1e-5,
                err_msg=f"{name} step {got['step']} {metric}",
            )
        assert got["probe_loss"] == pytest.approx(expected["probe_loss"], rel=1e-4)


def test_the_committed_report_is_what_this_code_writes(report):
    assert report["command"] == "make model"
    assert report["train_config"] == json.loads(json.dumps(asdict(TrainConfig())))
    corpus = build_corpus()
    assert report["corpus"]["sentences"] == corpus.counts()
    assert report["corpus"]["vocab_size"] == len(corpus.vocab)
    assert set(report["models"]) == set(TRAINED)
    for name, run in report["models"].items():
        path = trained_dir() / run["file"]
        assert path.stat().st_size == run["file_bytes"] < 600_000, name
        assert [c["step"] for c in run["checkpoints"]] == TrainConfig().checkpoint_steps()
        assert len(run["losses"]) == TrainConfig().steps
        assert run["model"]["scale_rule"] == TRAINED[name]["scale_rule"]
        assert all(math.isfinite(x) for x in run["losses"])


def test_every_model_learns_the_pronouns(report):
    """What the notebooks build on: each trained model answers held-out pronoun sentences
    far above chance (1 in 20 actions)."""
    for name, run in report["models"].items():
        assert run["final"]["heldout_accuracy"]["pronoun"] > 0.9, name
        assert run["losses"][-1] < run["losses"][0] / 2, name


def test_compare_passes_a_report_against_itself_and_flags_a_drift(report):
    rows = compare(report, report)
    assert rows and all(r["ok"] and r["deviation"] == 0 for r in rows)
    drifted = copy.deepcopy(report)
    run = drifted["models"]["sqrt_d16"]
    run["final"]["heldout_accuracy"]["pronoun"] -= 0.1
    run["losses"] = [x * 1.2 for x in run["losses"]]
    bad = {(r["model"], r["quantity"]) for r in compare(report, drifted) if not r["ok"]}
    assert bad == {
        ("sqrt_d16", "heldout accuracy, pronoun"),
        ("sqrt_d16", "training loss curve"),
        ("sqrt_d16", "first 10 losses"),
    }
    del drifted["models"]["inv_d64"]
    assert any(r["quantity"] == "present" and not r["ok"] for r in compare(report, drifted))


@pytest.mark.slow
def test_the_command_writes_weights_and_report_and_checks_them(tmp_path, capsys):
    args = ["--models", "sqrt_d16", "--steps", "12", "--out", str(tmp_path)]
    assert main(args) == 0
    written = json.loads((tmp_path / "report.json").read_text())
    assert written["models"]["sqrt_d16"]["file_bytes"] == (tmp_path / "sqrt_d16.npz").stat().st_size
    assert main([*args, "--check"]) == 0
    out = capsys.readouterr().out
    assert "the retrain agrees with the committed report" in out


def test_an_unknown_model_is_refused():
    with pytest.raises(ValueError, match="unknown model"):
        train("gpt5", SHORT)


def test_the_models_are_described_from_the_report(report):
    from attention_course.model.report import describe_models

    text = describe_models(report)
    lines = text.splitlines()
    assert lines[0].split()[:2] == ["model", "scale"]
    rows = {line.split("  ")[0].strip(): line.split() for line in lines[1:5]}
    for name, run in report["models"].items():
        cells = rows[MODEL_LABELS[name]]
        # scale, query/key width, value width, parameters, held-out pronoun accuracy
        assert cells[-5:] == [
            f"{run['scale']:g}",
            str(run["model"]["head_width"]),
            str(run["model"]["value_width"]),
            f"{run['parameters']:,}",
            f"{run['final']['heldout_accuracy']['pronoun']:.2f}",
        ]
    assert len(lines) == 4 + 1 + 3
    assert "2 layers of 4 heads, model width 64, MLP width 128" in text
    assert "1,500 steps of 64 sentences" in text
    # the d = 64 models: query/key width 64 per head, value width 16
    assert rows["1/d, d = 64"][-4:-2] == ["64", "16"]
    odd = copy.deepcopy(report)
    odd["models"]["inv_d64"]["model"]["n_heads"] = 2
    with pytest.raises(ValueError, match="differ in more than the head"):
        describe_models(odd)


def test_notebook_00_describes_the_models_the_report_holds(report):
    # 00 describes the trained models once, in a table; it must be the report's models
    notebook = trained_dir().parents[2] / "notebooks" / "00_start_here.ipynb"
    text = "".join("".join(c["source"]) for c in json.loads(notebook.read_text())["cells"])
    rows = [line.split("|")[1:-1] for line in text.splitlines() if line.startswith("| 1/")]
    rows += [line.split("|")[1:-1] for line in text.splitlines() if line.startswith("| none")]
    described = {cells[0].strip(): int(cells[2].strip()) for cells in rows}
    expected = {MODEL_LABELS[n]: run["model"]["head_width"] for n, run in report["models"].items()}
    assert described == expected
    shape = {
        (run["model"]["n_layers"], run["model"]["n_heads"]) for run in report["models"].values()
    }
    prose = " ".join(text.split())
    assert shape == {(2, 4)} and "two layers of four heads, model width 64" in prose
    assert {run["model"]["value_width"] for run in report["models"].values()} == {16}
    assert "values of width 16 in every head" in prose


def test_make_model_draws_the_report_beside_it(tmp_path):
    """``make model``'s second step: the report's figure, written as report.png next to it."""
    import shutil
    import subprocess
    import sys

    from PIL import Image

    shutil.copy(trained_dir() / "report.json", tmp_path / "report.json")
    command = [
        sys.executable,
        "-m",
        "attention_course.lessons.figures",
        str(tmp_path / "report.json"),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    assert f"wrote {tmp_path / 'report.png'}" in done.stdout
    with Image.open(tmp_path / "report.png") as image:
        assert image.format == "PNG" and image.size == (576, 540)  # 8 x 7.5 in at 72 dpi


@pytest.mark.slow
def test_the_attention_hook_trains_with_another_call_and_leaves_the_default_as_it_was():
    """``train(..., attention=)`` (notebook 07 trains with the learner's FlashAttention): the
    model's own attention passed as a call trains bit for bit as the default does, and a call
    passed is the one every training step uses."""
    from attention_course.model.tiny_model import model_attention

    config = replace(TrainConfig(), steps=4, checkpoint_every=10**6, early_checkpoints=())
    corpus = build_corpus()
    _, default = train("sqrt_d16", config, corpus=corpus)
    calls = []

    def counted(q, k, v, scale):
        calls.append(q.shape)
        return model_attention(q, k, v, scale)

    _, hooked = train("sqrt_d16", config, corpus=corpus, attention=counted)
    assert hooked.losses == default.losses
    assert len(calls) == config.steps * 2  # two layers, every step
    assert hooked.final == default.final  # the held-out evaluation uses the model's own
