"""The training report (``trained/report.json``): written once by ``make model``, read everywhere.

- `load_report`: the committed report (or another one).
- `describe_models`: the trained models as the course describes them,
  read from the report so the description stays true.
- `compare` and `format_comparison`: a retrain against the committed
  report, within `TOLERANCES` (the same numbers on the machine that wrote
  it; float rounding on another CPU grows in training, so not there).
- `dump_report`: the JSON text of a report, a list of numbers per line.
- `report_models`, `head_metric`: a report's runs, and one head measurement
  at one checkpoint, as the lessons read them.

Imports numpy only: a notebook reading the report does not load torch.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .catalogue import MODEL_LABELS, trained_dir

__all__ = [
    "TOLERANCES",
    "compare",
    "describe_models",
    "dump_report",
    "format_comparison",
    "head_metric",
    "load_report",
    "report_models",
]


def dump_report(report: dict[str, Any]) -> str:
    """The report as JSON text: one key per line, every list of numbers on one line."""
    text = json.dumps(report, indent=1)
    flat = re.compile(r"\[\s+([^\[\]{}]*?)\s+\]")  # a list holding no list or object
    for _ in range(2):  # innermost lists first, then the lists of them
        text = flat.sub(lambda m: "[" + " ".join(m.group(1).split()) + "]", text)
    return text + "\n"


# -- the report against a retrain ----------------------------------------------------------

#: How far a retrain may land from the committed report on another machine. On the
#: machine that wrote it, a retrain with the same thread count is identical.
TOLERANCES = {
    "heldout accuracy (absolute)": 0.03,
    "heldout loss (relative)": 0.10,
    "training loss, 100-step means (relative)": 0.10,
    "first 10 steps' losses (relative)": 1e-4,
}


def _windows(losses: Sequence[float], size: int = 100) -> np.ndarray:
    x = np.asarray(losses, dtype=float)  # (steps,)
    n = len(x) // size
    return x[: n * size].reshape(n, size).mean(axis=1)  # (n,)


def compare(expected: dict[str, Any], actual: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows (model, quantity, deviation, tolerance, ok) for every model in ``expected``.

    Quantities: each family's held-out accuracy, the held-out loss, the
    100-step means of the training loss and the first 10 steps' losses, as
    in `TOLERANCES`. A model missing from ``actual`` is a failed row.
    """
    rows = []
    for name, want in expected["models"].items():
        got = actual["models"].get(name)
        if got is None:
            rows.append(
                {
                    "model": name,
                    "quantity": "present",
                    "deviation": math.inf,
                    "tolerance": 0.0,
                    "ok": False,
                }
            )
            continue
        checks = []
        for family, acc in want["final"]["heldout_accuracy"].items():
            dev = abs(got["final"]["heldout_accuracy"][family] - acc)
            checks.append((f"heldout accuracy, {family}", dev, "heldout accuracy (absolute)"))
        w, g = want["final"]["heldout_loss"], got["final"]["heldout_loss"]
        checks.append(("heldout loss", abs(g - w) / w, "heldout loss (relative)"))
        ww, gw = _windows(want["losses"]), _windows(got["losses"])
        if len(ww) != len(gw):
            dev = math.inf
        else:
            dev = float(np.max(np.abs(gw - ww) / ww)) if len(ww) else 0.0
        checks.append(("training loss curve", dev, "training loss, 100-step means (relative)"))
        w10, g10 = np.asarray(want["losses"][:10]), np.asarray(got["losses"][:10])
        dev = float(np.max(np.abs(g10 - w10) / w10)) if len(g10) == 10 else math.inf
        checks.append(("first 10 losses", dev, "first 10 steps' losses (relative)"))
        for quantity, dev, key in checks:
            tol = TOLERANCES[key]
            rows.append(
                {
                    "model": name,
                    "quantity": quantity,
                    "deviation": dev,
                    "tolerance": tol,
                    "ok": bool(dev <= tol),
                }
            )
    return rows


def format_comparison(rows: Sequence[dict[str, Any]]) -> str:
    lines = [f"{'model':<10} {'quantity':<32} {'deviation':>10} {'tolerance':>10}  ok"]
    for r in rows:
        lines.append(
            f"{r['model']:<10} {r['quantity']:<32} {r['deviation']:>10.3g} "
            f"{r['tolerance']:>10.3g}  {'yes' if r['ok'] else 'NO'}"
        )
    return "\n".join(lines)


def load_report(path: str | Path | None = None) -> dict[str, Any]:
    """The committed training report (``trained/report.json``), or the one at ``path``."""
    path = trained_dir() / "report.json" if path is None else Path(path)
    return json.loads(Path(path).read_text())


def describe_models(report: dict[str, Any] | None = None) -> str:
    """The trained models as the course describes them everywhere: one line each, then what
    they share, read from ``report`` (the committed one by default), so it stays true.

    Per model: its scale rule and the scale c, the query/key width d of one
    head, the value width of one head, its parameter count and its held-out
    pronoun accuracy. Then the shape every model shares (layers, heads,
    model width, MLP width) and how each was trained.
    """
    report = load_report() if report is None else report
    rows = [
        (
            MODEL_LABELS.get(name, name),
            f"{run['scale']:g}",
            str(run["model"]["head_width"]),
            str(run["model"]["value_width"]),
            f"{run['parameters']:,}",
            f"{run['final']['heldout_accuracy']['pronoun']:.2f}",
        )
        for name, run in report["models"].items()
    ]
    header = ("model", "scale c", "q/k width d", "value width", "parameters", "pronouns right")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(
            f"{cell:<{w}}" if i == 0 else f"{cell:>{w}}"
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in [header, *rows]
    ]
    shapes = {
        (
            m["model"]["n_layers"],
            m["model"]["n_heads"],
            m["model"]["d_model"],
            m["model"]["mlp_width"],
        )
        for m in report["models"].values()
    }
    if len(shapes) != 1:
        raise ValueError(f"the report's models differ in more than the head: {sorted(shapes)}")
    ((layers, heads, width, mlp),) = shapes
    config = report["train_config"]
    held = next(iter(report["models"].values()))["final"]["heldout_sentences"]["pronoun"]
    lines += [
        f"every model: {layers} layers of {heads} heads, model width {width}, MLP width {mlp};",
        f"trained alike: {config['steps']:,} steps of {config['batch']} sentences, AdamW, "
        f"seed {config['seed']};",
        f"pronouns right: the share of {held:,} held-out pronoun sentences whose answer is "
        "the model's top guess",
    ]
    return "\n".join(lines)


def report_models(
    report: dict[str, Any] | None = None, names: Sequence[str] | None = None
) -> dict[str, Any]:
    """The report's runs of the models ``names`` (every model by default), by name, from
    ``report`` (the committed one by default). Raises KeyError for a model it lacks."""
    report = load_report() if report is None else report
    names = list(report["models"]) if names is None else list(names)
    return {n: report["models"][n] for n in names}


def head_metric(checkpoint: dict[str, Any], metric: str) -> np.ndarray:
    """One head measurement (a name of `attention_course.model.head_stats.METRICS`) at one of a
    run's checkpoints: (layers, H) float64."""
    return np.asarray(checkpoint["heads"][metric], dtype=float)  # (layers, H)
