"""``python -m attention_course.lessons.figures [REPORT]``: draw a training report as a PNG.

REPORT defaults to the committed ``attention_course/model/trained/report.json``;
the picture goes beside it as ``report.png``. ``make model`` runs this after
training.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ...model.catalogue import trained_dir
from ...model.report import load_report
from .model import save_report_figure

__all__: list[str] = []

if __name__ == "__main__":
    report = Path(sys.argv[1]) if len(sys.argv) > 1 else trained_dir() / "report.json"
    size = save_report_figure(load_report(report), report.with_suffix(".png"))
    print(f"wrote {report.with_suffix('.png')} ({size / 1024:.0f} KiB)")
