"""Drive the course as a learner does: a real JupyterLab, Debian's Chromium, sliders moved.

Shared by the browser tests (``tests/browser``), the latency benchmark
(``benchmarks/latency.py``), the busy lab that loads the machine
(``benchmarks/busy_lab.py``) and the screenshots (``scripts/screenshots.py``),
which import it as a package from the checkout (it is never installed: pytest's
``pythonpath`` puts the checkout on the path). Nothing here downloads anything:
JupyterLab is started with ``python -m course serve`` (how ``make lab`` serves) on a
free localhost port, and Chromium is the system's, launched by Playwright through
``executable_path``.

By job:

- `server` (`start_lab`, `LabServer`, `scratch_lab`; `start_front_end` for plain
  JupyterLab, Notebook 7 and Voila): the server, its token,
  its log, and a stop that always ends the process group it started (kernels
  included).
- `browser` (`launch_chromium`, `chromium_browser`): the browser with the
  flags this closed network needs.
- `page` (`NotebookPage`): one notebook in one page: open it, run every cell,
  read the cells' outputs, list the explorers' controls in the page, move one
  control and wait for the figure to redraw, and ask the notebook's own kernel
  what its explorers now hold (`NotebookPage.probe`, whose kernel side is
  ``kernel_probe.py``); `restart`, `restart_and_run_all`, `save_notebook`.
- `views` (`widget_outputs`, `layout`, `pictures`, `frame_trace`): what the page shows.
- `hub` (imported as ``labdriver.hub``, POSIX and root only): a class's JupyterHub with
  system learners, each logged in through the hub in a browser context of their own
  (`hub.running_hub`, `hub.log_in`, `hub.course_remote`), for the hub tests, the
  class-load benchmark and the fault tests.
- `a11y` (imported as ``labdriver.a11y``): axe-core's audit of a page (pinned in
  ``axe/package.json``, installed with npm), JupyterLab's light and dark themes, and what a
  screen reader is given for the course's pictures and sliders; `alternatives`: each
  explorer's text alternative checked against its figure (the unit and browser tests').
- `wire` (imported as ``labdriver.wire``: `WireLearner`): a learner with no browser, on
  Jupyter's own protocol (the hub's login form, nbgitpuller's pull, a session, the
  kernel's websocket, Run All, a slider's widget message and the frame that answers it),
  for the class-load benchmark's learners beyond its browsers.
- `sources`: the JavaScript the page runs, kept in ``js/*.js``, and the
  kernel's program, loaded from their files. `repo`: where the course is.

Every wait follows an event the page can see, never a fixed sleep, so the
same code holds on an idle laptop and on a loaded 2-core machine:

- the kernel is *quiet* when every message the page sent it (a cell, a
  widget's change) has had its "idle" status back; a frame is *drawn* when the
  PNG an explorer's Image received has loaded, been decoded, and an animation
  frame has passed (it is on screen);
- Run All is done when the kernel has replied to every code cell and gone
  quiet, and every explorer picture in the page has drawn its first frame;
- a move is done when the change reached the kernel, the kernel went quiet
  after it, and a frame that arrived after the input was drawn in that
  figure's picture.

The timeouts only bound a wait that has stopped making progress; they are
long (minutes) because a loaded machine can be slow without being stuck. When
one expires the error says which step never happened (`RedrawTimeout`).
"""

from __future__ import annotations

from .browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    INSTALL_HINT,
    PlaywrightTimeout,
    chromium_browser,
    chromium_missing,
    launch_chromium,
)
from .page import (
    CHANGE_EVENTS,
    CLICK_HOLD_MS,
    GRAB_MS,
    MOVE_TIMEOUT_MS,
    OPEN_TIMEOUT_MS,
    Move,
    NotebookPage,
    RedrawTimeout,
    open_notebook,
    restart,
    restart_and_run_all,
    save_notebook,
)
from .repo import LAB_COMMAND, NOTEBOOK_GLOB, REPO, notebook_names, numbered_notebooks
from .server import (
    LabServer,
    copy_notebooks,
    free_port,
    lab_test_args,
    random_token,
    running_lab,
    scratch_lab,
    spawn_logged,
    start_front_end,
    start_lab,
)
from .views import frame_trace, layout, pictures, widget_outputs

__all__ = [
    "CHANGE_EVENTS",
    "CHROMIUM",
    "CHROMIUM_ARGS",
    "CLICK_HOLD_MS",
    "GRAB_MS",
    "INSTALL_HINT",
    "LAB_COMMAND",
    "MOVE_TIMEOUT_MS",
    "NOTEBOOK_GLOB",
    "OPEN_TIMEOUT_MS",
    "REPO",
    "LabServer",
    "Move",
    "NotebookPage",
    "PlaywrightTimeout",
    "RedrawTimeout",
    "chromium_browser",
    "chromium_missing",
    "copy_notebooks",
    "frame_trace",
    "free_port",
    "lab_test_args",
    "launch_chromium",
    "layout",
    "notebook_names",
    "numbered_notebooks",
    "open_notebook",
    "pictures",
    "random_token",
    "restart",
    "restart_and_run_all",
    "running_lab",
    "save_notebook",
    "scratch_lab",
    "spawn_logged",
    "start_front_end",
    "start_lab",
    "widget_outputs",
]
