"""No explorer is ever blank after Run All: notebook 01, ten runs in a row.

After Run All, 01's last explorer sometimes showed an empty 0 x 0 canvas
(about one run in three, more on a busy machine): ipympl sized the view from
a size that arrived after the message telling it to resize. The explorers'
canvases now open with their size (explorers/canvas.py). This test restarts
the kernel and runs every cell ten times, and after each run every explorer
canvas in the page must have its figure's size and drawn pixels on it.
"""

from __future__ import annotations

import labdriver
import pytest

pytestmark = pytest.mark.browser

RUNS = 10
NOTEBOOK = "01_beginner_crowded_room.ipynb"


@pytest.mark.slow
def test_every_explorer_is_drawn_after_each_of_ten_runs(lab_server, chromium):
    page = labdriver.open_notebook(chromium, lab_server, NOTEBOOK, "ten-runs")
    blank = []
    try:
        for run in range(RUNS):
            labdriver.restart_and_run_all(page)
            page.page.wait_for_timeout(2000)  # the first frames arrive after the kernel is idle
            explorers = [o for o in labdriver.widget_outputs(page) if o["explorer"]]
            assert len(explorers) == 4, f"run {run + 1}: {len(explorers)} explorers in the page"
            for out in explorers:
                canvases = out["canvases"]
                if len(canvases) != 1 or not (
                    canvases[0]["width"] > 0 and canvases[0]["height"] > 0 and canvases[0]["inked"]
                ):
                    blank.append((run + 1, out["cell"], canvases))
    finally:
        page.close()
    assert blank == [], f"blank explorers (run, cell, canvases): {blank}"
