#!/usr/bin/env python3
"""A second learner on the machine: JupyterLab and Chromium kept busy until stopped.

    .venv/bin/python benchmarks/busy_lab.py [--minutes 60] [NOTEBOOK ...]

Starts its own JupyterLab (as ``make lab`` does, on a scratch copy of the
notebooks) and its own Chromium, then restarts the kernel and runs every cell
of each named notebook in turn (default: the three heaviest explorers, 01, 04
and 06), over and over, printing one line per run. Run the browser tests
beside it to check that their waits hold on a loaded machine:

    .venv/bin/python benchmarks/busy_lab.py & make test; kill %1

SIGTERM (``kill``) stops it cleanly: its JupyterLab, kernels and Chromium go with
it. The soak test (tests/browser/test_no_blank_explorer.py) starts and stops it
this way.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from pathlib import Path

import labdriver  # the browser driver (labdriver/): one way to start and drive the lab

DEFAULT = [
    "01_beginner_crowded_room.ipynb",
    "04_researcher_variance_and_gradients.ipynb",
    "06_researcher_alternatives.ipynb",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", default=DEFAULT)
    parser.add_argument("--minutes", type=float, default=60.0, help="stop after this long")
    args = parser.parse_args(argv)
    # a SystemExit unwinds the `with` below, which stops the server and closes the browser
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    stop = time.monotonic() + 60 * args.minutes
    with (
        tempfile.TemporaryDirectory() as scratch,
        labdriver.scratch_lab(Path(scratch)) as server,
        labdriver.chromium_browser() as browser,
    ):
        pages = [
            labdriver.open_notebook(browser, server, name, f"busy-{name[:2]}")
            for name in args.notebooks
        ]
        runs = 0
        while time.monotonic() < stop:
            for name, page in zip(args.notebooks, pages, strict=True):
                seconds = labdriver.restart_and_run_all(page, timeout_s=1800)
                runs += 1
                print(f"busy lab: run {runs}, {name} in {seconds:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
