"""``python -m course.runtimes [--check]``: 00's sentence on how long each notebook runs.

00 tells a newcomer how long a notebook takes top to bottom. Written by hand it
went stale each time the notebooks were executed again; here it is computed
from the committed notebooks' own execution metadata (the times nbconvert or
JupyterLab stamped on every cell: `notebook_seconds`) and written between
00's ``<!-- run times: python -m course.runtimes -->`` and
``<!-- end of run times -->`` markers. ``make notebooks`` runs it after the
execution; ``--check`` fails when the sentence and the metadata disagree (the
tests run it). Standard library only.
"""

from __future__ import annotations

import json
import re
import sys
from datetime import datetime
from pathlib import Path

from .paths import REPO

__all__ = ["main", "notebook_seconds", "sentence", "sync"]

NOTEBOOKS = REPO / "notebooks"
START = "<!-- run times: python -m course.runtimes -->"
END = "<!-- end of run times -->"


def _stamp(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def notebook_seconds(path: Path) -> float:
    """From the first cell's start to the last cell's reply, as the notebook's metadata says.

    Raises LookupError for a notebook whose code cells carry no execution times
    (never executed by a client that records them).
    """
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    times = [c.get("metadata", {}).get("execution", {}) for c in cells if c["cell_type"] == "code"]
    starts = [_stamp(t["iopub.execute_input"]) for t in times if "iopub.execute_input" in t]
    ends = [_stamp(t["shell.execute_reply"]) for t in times if "shell.execute_reply" in t]
    if not starts or not ends:
        raise LookupError(f"{path.name} records no execution times: execute it (make notebooks)")
    return (max(ends) - min(starts)).total_seconds()


def _seconds(s: float) -> str:
    return f"about {s:.0f} s" if s >= 10 else f"about {s:.1f} s"


def sentence(folder: Path = NOTEBOOKS) -> str:
    """The quickest and the slowest notebook, with their times, and the ones over a minute."""
    seconds = {p.name[:2]: notebook_seconds(p) for p in sorted(folder.glob("[0-9][0-9]_*.ipynb"))}
    quickest = min(seconds, key=seconds.get)
    slowest = max(seconds, key=seconds.get)
    slow = [n for n, s in seconds.items() if s >= 60]
    over = f"; over a minute: {', '.join(slow)}" if slow else ""
    return (
        f"on the machine that ran the committed copies, {quickest} was the quickest "
        f"({_seconds(seconds[quickest])}) and {slowest} the slowest "
        f"({_seconds(seconds[slowest])}){over}"
    )


def sync(check: bool = False, folder: Path = NOTEBOOKS) -> bool:
    """Write the sentence into 00 between its markers; True if it was already there."""
    path = folder / "00_start_here.ipynb"
    notebook = json.loads(path.read_text(encoding="utf-8"))
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.S)
    region = START + sentence(folder) + END
    for cell in notebook["cells"]:
        text = "".join(cell["source"])
        if cell["cell_type"] == "markdown" and pattern.search(text):
            new = pattern.sub(lambda _: region, text)
            if new == text:
                return True
            if not check:
                cell["source"] = new.splitlines(keepends=True)
                path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")
            return False
    raise LookupError(f"{path.name} has no {START!r} ... {END!r} region")


def main(argv: list[str] | None = None) -> int:
    check = "--check" in (argv or [])
    if sync(check):
        return 0
    if check:
        print("00's run times are stale: run python -m course.runtimes", file=sys.stderr)
        return 1
    print("rewrote 00's run times")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
