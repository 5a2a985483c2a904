"""Seeded inputs in numpy or torch, and the PyTorch oracle, for the library's tests; the
run's own SIGTERM handling (`stop_on_sigterm`); the server extensions a Jupyter settings
folder turns on (`server_extensions_on`); the hub's spawner with stand-ins
(`stand_in_spawner`); every picture each notebook shows (`STILL_FIGURES`, `pictures_in`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

import numpy as np
from arrays import (  # noqa: F401 (the library's array helpers, lib/tests/arrays.py, for the course's tests)
    FLOAT64,
    LIBS,
    as_lib,
    float64_guard,
    make,
    qkv,
    to_numpy,
    torch_sdpa,
    without_float64,
)

#: Every still figure a notebook shows, by the id of the cell that draws it, with the words its
#: prose uses for it (None where the prose does not point at it). The committed outputs, the
#: browser tests in every front end and the static site's test all count against this list
#: (`pictures_in`), so a figure that stops being a picture fails all three.
STILL_FIGURES: dict[str, dict[str, str | None]] = {
    "04_researcher_variance_and_gradients": {
        "c715126e": "Right panel, red",  # a saturated head in training
        "9bf4b65c": "(top right)",  # the training report
    },
    "05_researcher_cost_and_tiling": {
        "efd31b64": "the dotted grey guides",  # time and memory against T
        "f9c3ac68": "The figure puts the committed CPU run (left)",  # CPU beside GPU
        "6c006d27": None,  # HBM traffic against T
    },
    "06_researcher_alternatives": {
        "10868c8c": "(dashed and dotted lines)",  # softmax against linear attention, timed
        "42b0930a": None,  # random features' error
        "756a47e2": None,  # attention sinks
        "2a03a6ed": "The three maps side by side",  # sigmoid and differential attention
    },
    "07_researcher_build_flash_attention": {
        "8461d290": "The dashed vermillion curve",  # the model trained with FlashAttention
    },
}


def pictures_in(notebook: str) -> tuple[int, int]:
    """(explorer pictures, still figures) that ``notebook`` (its name without ``.ipynb``) shows:
    the explorers' registry's count and `STILL_FIGURES`'."""
    from attention_course.explorers.registry import shown_in

    return sum(shown_in(notebook).values()), len(STILL_FIGURES.get(notebook, {}))


def control_values(control):
    """A few values a learner can give ``control``: its ends and middle, or every option."""
    import ipywidgets as widgets

    if isinstance(control, widgets.Checkbox):
        return [not control.value, control.value]
    options = getattr(control, "_options_values", None)
    if options is not None:
        options = list(options)
        if len(options) <= 4:
            return options
        return [options[0], options[len(options) // 2], options[-1]]
    low, high = control.min, control.max
    if isinstance(control, widgets.FloatLogSlider):
        return [control.base**low, control.base ** ((low + high) / 2), control.base**high]
    middle = (low + high) / 2
    return [low, int(middle) if isinstance(control.value, int) else middle, high]


def frame_and_full_draw(explorer):
    """The blitted frame the explorer just sent, and a full redraw of the same state (RGBA)."""
    canvas = explorer.fig.canvas
    frame = np.asarray(canvas.buffer_rgba()).copy()  # (H, W, 4)
    canvas.draw()
    full = np.asarray(canvas.buffer_rgba()).copy()  # (H, W, 4)
    return frame, full


# -- notebooks under nbval in a subprocess ---------------------------------------------
# (tests/notebooks/test_offline.py and tests/notebooks/test_portable_outputs.py: the same
# notebooks, checked by the same nbval, in another environment than the test session's own)


def guarded_env(env=None):
    """``env`` (default: this process's) with the network guard on for every Python it starts.

    ``tests/netguard/sitecustomize.py``, first on PYTHONPATH, refuses every
    connection and name lookup that is not for a loopback address (see
    tests/notebooks/test_offline.py, which checks that it does).
    """
    import os
    from pathlib import Path

    env = dict(os.environ if env is None else env)
    guard = str(Path(__file__).resolve().parent / "netguard")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [guard, env.get("PYTHONPATH")]))
    return env


def start_nbval(notebooks, env, report, log):
    """Start ``python -m pytest`` on ``notebooks`` (nbval, the project's settings) in ``env``.

    The run writes a JUnit ``report`` and its output to ``log`` (paths); returns the
    Popen. Several can run at once: each notebook gets its own kernel.
    """
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q"]
    args += [f"--junitxml={report}", *map(str, notebooks)]
    with open(log, "wb") as out:
        return subprocess.Popen(args, cwd=repo, env=env, stdout=out, stderr=subprocess.STDOUT)


def nbval_outcomes(notebooks, report, log):
    """notebook name -> ("passed" or "failed", the first failing cell and nbval's diff).

    Fails the calling test if the run left no report (pytest could not start).
    """
    import xml.etree.ElementTree as ET
    from pathlib import Path

    import pytest

    if not Path(report).exists():
        tail = Path(log).read_text(errors="replace")[-3000:] if Path(log).exists() else ""
        pytest.fail(f"nbval did not run:\n{tail}")
    outcomes = {}
    for case in ET.parse(report).iter("testcase"):
        # nbval's items are "notebooks/NN_name.ipynb::Cell i": the classname holds the stem
        classname = case.get("classname") or ""
        notebook = next((nb.name for nb in notebooks if nb.stem in classname), classname)
        problem = next(iter([*case.iter("failure"), *case.iter("error")]), None)
        if problem is not None and outcomes.get(notebook, ("passed",))[0] == "passed":
            message = (problem.get("message") or "") + (problem.text or "")[-2000:]
            outcomes[notebook] = ("failed", f"{case.get('name')}: {message}")
        else:
            outcomes.setdefault(notebook, ("passed", ""))
    return outcomes


def drawn_texts(fig):
    """[(text, window extent)] of every text a full draw of ``fig`` paints (Agg), in order.

    Only what is painted: tick labels of ticks outside the view, empty or
    invisible texts are not. The draw is the canvas's own, so an explorer
    freezes its layout on it exactly as in the browser.
    """
    from matplotlib.text import Text

    seen = []
    original = Text.draw

    def draw(self, renderer):
        original(self, renderer)
        if self.get_visible() and self.get_text().strip():
            seen.append((self.get_text(), self.get_window_extent(renderer)))

    Text.draw = draw
    try:
        fig.canvas.draw()
    finally:
        Text.draw = original
    return seen


def texts_outside(fig, tolerance=0.5):
    """The painted texts of ``fig`` that reach past its edges: [(text, (x0, y0, x1, y1))]."""
    box = fig.bbox
    return [
        (text, tuple(round(v, 1) for v in extent.extents))
        for text, extent in drawn_texts(fig)
        if extent.x0 < box.x0 - tolerance
        or extent.y0 < box.y0 - tolerance
        or extent.x1 > box.x1 + tolerance
        or extent.y1 > box.y1 + tolerance
    ]


def legends_over_bars(fig, tolerance=1.0, draw=True):
    """The bars of ``fig`` that a legend of the same axes hides part of.

    [(legend's first label, bar's x, bar's height)] for every visible bar of
    non-zero height (made by ``ax.bar``: other rectangles, such as the hatched
    masked cells a legend may sit on, are not data) whose painted box overlaps
    its axes' legend by more than ``tolerance`` pixels each way.
    Draws the figure first (``draw=False``: the caller just did), so the
    legend sits where the page shows it.
    """
    from matplotlib.container import BarContainer

    if draw:
        fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    hidden = []
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is None or not legend.get_visible():
            continue
        box = legend.get_window_extent(renderer)
        label = legend.get_texts()[0].get_text() if legend.get_texts() else ""
        bars = [b for c in ax.containers if isinstance(c, BarContainer) for b in c]
        for bar in bars:
            if not (bar.get_visible() and bar.get_height()):
                continue
            b = bar.get_window_extent(renderer)
            dx = min(box.x1, b.x1) - max(box.x0, b.x0)
            dy = min(box.y1, b.y1) - max(box.y0, b.y0)
            if dx > tolerance and dy > tolerance:
                hidden.append((label, round(bar.get_x(), 3), round(bar.get_height(), 3)))
    return hidden


def control_settings(controls, limit=200):
    """Settings to sweep: every combination of `control_values` when there are at most
    ``limit``, else each control's values in turn with the others at their defaults.

    Yields lists of (control, value) to apply in order.
    """
    import itertools

    values = [control_values(c) for c in controls]
    total = 1
    for v in values:
        total *= len(v)
    if total <= limit:
        for combo in itertools.product(*values):
            yield list(zip(controls, combo, strict=True))
    else:
        defaults = [c.value for c in controls]
        for i, c in enumerate(controls):
            for v in values[i]:
                yield [(o, d) for o, d in zip(controls, defaults, strict=True) if o is not c] + [
                    (c, v)
                ]


# -- a notebook's own code, run by a test ---------------------------------------------------


def notebook_cell(notebook, cell_id):
    """The source of the code cell ``cell_id`` of ``notebook`` (a path), IPython magics
    (lines starting with %) left out. Raises KeyError naming the id when it is not there."""
    import json
    from pathlib import Path

    for cell in json.loads(Path(notebook).read_text())["cells"]:
        if cell.get("id") == cell_id and cell["cell_type"] == "code":
            lines = "".join(cell["source"]).splitlines()
            return "\n".join(line for line in lines if not line.lstrip().startswith("%"))
    raise KeyError(f"{Path(notebook).name} has no code cell with id {cell_id!r}")


def tagged_cell_id(notebook, tag):
    """The id of the one code cell of ``notebook`` tagged ``tag`` (AssertionError otherwise)."""
    import json
    from pathlib import Path

    cells = json.loads(Path(notebook).read_text())["cells"]
    found = [
        c["id"]
        for c in cells
        if c["cell_type"] == "code" and tag in c.get("metadata", {}).get("tags", [])
    ]
    assert len(found) == 1, f"expected one code cell tagged {tag!r} in {Path(notebook).name}"
    return found[0]


def run_cells(notebook, cell_ids, namespace=None):
    """Run the code cells ``cell_ids`` of ``notebook``, in the order given, in one
    namespace (a fresh one unless given), and return it: a test that checks a notebook's
    code this way checks the very lines the reader sees, so the two cannot drift."""
    namespace = {"__name__": "__notebook__"} if namespace is None else namespace
    for cell_id in cell_ids:
        exec(compile(notebook_cell(notebook, cell_id), f"<cell {cell_id}>", "exec"), namespace)
    return namespace


def stop_on_sigterm() -> None:
    """Make SIGTERM (a CI job's timeout, ``kill``) end a pytest run as Ctrl-C does.

    pytest then tears its fixtures down: the JupyterLab servers, kernels, browsers, hubs
    and system users they made go with the run. Python's default for SIGTERM ends the
    process at once, and a soak stopped that way left its JupyterLab, Notebook 7 server
    and a kernel running. Only the main thread may set a handler (root conftest.py).
    """
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt)


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"stopped by signal {signum}")


# Prints the server extensions a Jupyter server would load with JUPYTER_CONFIG_PATH as set.
_EXTENSIONS_ON = (
    "import json\n"
    "from jupyter_core.paths import jupyter_config_path\n"
    "from jupyter_server.extension.config import ExtensionConfigManager\n"
    "m = ExtensionConfigManager(read_config_path=jupyter_config_path())\n"
    "print(json.dumps(sorted(k for k, on in m.get_jpserver_extensions().items() if on)))\n"
)


def server_extensions_on(config_path: str | None) -> list[str]:
    """The server extensions on for a Jupyter server whose ``JUPYTER_CONFIG_PATH`` is
    ``config_path`` (None: unset), as that server reads its settings, in a fresh Python."""
    env = {k: v for k, v in os.environ.items() if k != "JUPYTER_CONFIG_PATH"}
    if config_path is not None:
        env["JUPYTER_CONFIG_PATH"] = config_path
    listed = subprocess.run(
        [sys.executable, "-c", _EXTENSIONS_ON], capture_output=True, text=True, env=env, check=True
    )
    return json.loads(listed.stdout)


def stand_in_spawner(admin: bool = False, **traits):
    """The hub's spawner (teachers/hub/course_spawner.py) with stand-ins for the hub and the
    user (the system user "nobody", an admin or not), without a hub; (its module, it).
    Skips where JupyterHub (the teach extra) is missing."""
    import logging
    from pathlib import Path
    from types import SimpleNamespace

    import pytest

    pytest.importorskip("jupyterhub")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "teachers" / "hub"))
    try:
        import course_spawner
    finally:
        sys.path.pop(0)
    hub = SimpleNamespace(public_host="", api_url="http://127.0.0.1:9/hub/api", base_url="/hub/")
    user = SimpleNamespace(
        name="nobody", url="/user/nobody/", escaped_name="nobody", id=1, admin=admin
    )
    spawner = course_spawner.CourseSpawner(user=user, hub=hub, api_token="t", **traits)
    spawner.log = logging.getLogger("course-spawner-test")
    return course_spawner, spawner
