"""The explorers on Colab's widget versions: ipywidgets 7 in a Notebook 6 page.

Colab's runtime keeps ipywidgets 7.7.1 and its front end renders only ipywidgets 7's
core widgets; the course's Colab cell leaves them as they are (``--no-deps``). This test
gives the explorers that same pair, as near as this machine gets to Colab:

- a scratch virtual environment (under pytest's tmp dir, made anew each run: minutes of
  pip) with Colab's published pins: ipywidgets 7.7.1, widgetsnbextension 3.6.10, numpy
  2.1.3, matplotlib 3.10.0; the course installed from a copy of this checkout with
  ``--no-deps``, as the Colab cell installs it, beside the runtime requirements the course
  imports (torch, psutil, tqdm, which Colab has; array-api-compat and isal, which the Colab
  cell adds) at pyproject.toml's pins;
- a front end that speaks ipywidgets 7's widget protocol: Notebook 6.5's classic page (its
  server from that environment, on a free localhost port with a random token, serving a
  scratch copy of ``notebooks/``), in Debian's Chromium (`conftest.chromium`).

On notebooks 01 and 02 (whose explorers, the trained model's among them, cover both
kinds of control row): Run All in the page, then every explorer has drawn (its picture an
image of PNG data, as many as the explorers' registry says the notebook shows), no output
is an error or a widget's text repr (what a front end without the widget's model shows),
and moving one slider with the keyboard redraws that explorer's picture.

Skipped, with pip's message, where the package index cannot be reached; ``make
test-install`` runs it (marked ``install``), never ``make test``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import pictures_in

import labdriver

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

pytestmark = [pytest.mark.install, pytest.mark.slow]

ROOT = labdriver.REPO
#: Colab's published pins of the packages the explorers draw and show with.
COLAB_PINS = {
    "ipywidgets": "7.7.1",
    "widgetsnbextension": "3.6.10",
    "numpy": "2.1.3",
    "matplotlib": "3.10.0",
}
#: the classic Notebook, whose page loads widgetsnbextension 3's ipywidgets 7 manager
#: (the newest 6.5 release that installs here; Notebook 7 speaks ipywidgets 8's protocol)
FRONT_END = "notebook==6.5.*"
#: what the course imports at run time beyond Colab's pins, at pyproject.toml's pins
COURSE_RUNTIME = ("torch", "array-api-compat", "isal", "psutil", "tqdm")
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
NOTEBOOKS = ["01_beginner_crowded_room.ipynb", "02_developer_scaling.ipynb"]
PIP_TIMEOUT_S = 1200
OPEN_TIMEOUT_MS = 180_000
RUN_TIMEOUT_MS = 900_000
MOVE_TIMEOUT_MS = 180_000
#: what an output shows when the page has no view for a widget: its Python repr
#: (``IntSlider(value=3, ...)``, ``VBox(children=(...))``), or ipywidgets' own notices
WIDGET_REPR = re.compile(
    r"\b[A-Z]\w*\((?:children|value|description|options|layout|style|min|max)="
    r"|IntSlider\(|FloatSlider\(|VBox\(children=|Image\(value="
    r"|Failed to display Jupyter Widget|Error displaying widget|Error rendering"
)


def _run(command, timeout: float, **kwargs) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(
            [str(c) for c in command], capture_output=True, text=True, timeout=timeout, **kwargs
        )
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{' '.join(map(str, command))} took more than {timeout} s:\n{e.stdout}")


def _runtime_requirements() -> list[str]:
    """COURSE_RUNTIME as the course's pyproject.toml(s) pin them (markers kept); the
    library's own pyproject.toml (``lib/``, where it has one) first."""
    found: dict[str, str] = {}
    for pyproject in (ROOT / "lib" / "pyproject.toml", ROOT / "pyproject.toml"):
        if not pyproject.is_file():
            continue
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
        for requirement in project.get("dependencies", []):
            name = re.match(r"[A-Za-z0-9_.-]+", requirement).group(0).lower()
            found.setdefault(name, requirement)
    return [found.get(name, name) for name in COURSE_RUNTIME]


def _copy_checkout(dest: Path) -> Path:
    """The checkout's files (what git tracks and what it does not ignore), so pip builds the
    course in a copy and leaves nothing (``build/``) in the repository."""
    listed = _run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], 120, cwd=ROOT
    )
    if listed.returncode:
        pytest.skip(f"git cannot list the checkout's files: {listed.stderr.strip()}")
    for name in filter(None, listed.stdout.split("\0")):
        source = ROOT / name
        if source.is_file():  # a file another change has moved away is left out
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def _pip(env: Path, *args: str, timeout: float = PIP_TIMEOUT_S) -> None:
    done = _run([env / "bin" / "python", "-m", "pip", *args], timeout)
    assert done.returncode == 0, (
        f"pip {' '.join(args)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )


@pytest.fixture(scope="module")
def colab_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with Colab's widget pins, Notebook 6.5 and the course (``--no-deps``)."""
    base = tmp_path_factory.mktemp("colab")
    env = base / "env"
    made = _run([sys.executable, "-m", "venv", env], 300)
    assert made.returncode == 0, made.stderr
    python = env / "bin" / "python"

    pins = [f"{name}=={version}" for name, version in COLAB_PINS.items()]
    probe = ["-m", "pip", "install", "--dry-run", "--no-deps", "--timeout", "15", "--retries"]
    looked = _run([python, *probe, "0", *pins, FRONT_END], 300)
    if looked.returncode:
        pytest.skip(f"pip cannot reach the package index: {looked.stderr.strip()[-1500:]}")

    # --no-compile: torch's thousands of modules compile on import, not all at install
    _pip(env, "install", "--no-compile", *pins, FRONT_END, *_runtime_requirements())
    checkout = _copy_checkout(base / "checkout")
    course = (
        [checkout / "lib", checkout]
        if (checkout / "lib" / "pyproject.toml").is_file()
        else [checkout]
    )
    _pip(env, "install", "--no-compile", "--no-deps", *map(str, course))

    # the course's install moved none of Colab's pins
    listed = _run([python, "-m", "pip", "list", "--format=json"], 300)
    versions = {p["name"].lower(): p["version"] for p in json.loads(listed.stdout)}
    assert {n: versions.get(n) for n in COLAB_PINS} == COLAB_PINS
    assert versions["notebook"].startswith("6.5."), versions["notebook"]
    return env


@pytest.fixture(scope="module")
def notebook6(colab_env: Path, tmp_path_factory: pytest.TempPathFactory):
    """Notebook 6.5's server from the Colab environment, on a scratch copy of the notebooks."""
    work = tmp_path_factory.mktemp("notebook6")
    root = labdriver.copy_notebooks(work / "notebooks")
    port, token = labdriver.free_port(), labdriver.random_token()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("JUPYTER", "PYTHON", "VIRTUAL_ENV", "IPYTHON"))
    }
    env.update(
        PATH=f"{colab_env / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        JUPYTER_TOKEN=token,  # in the environment: kept out of the process list
        JUPYTER_CONFIG_DIR=str(work / "config"),  # none of this machine's own settings
        JUPYTER_DATA_DIR=str(work / "data"),
        JUPYTER_RUNTIME_DIR=str(work / "runtime"),
        JUPYTER_PREFER_ENV_PATH="1",
        IPYTHONDIR=str(work / "ipython"),
    )
    args = [
        colab_env / "bin" / "jupyter",
        "notebook",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        "--NotebookApp.port_retries=0",
    ]
    if os.geteuid() == 0:
        args.append("--allow-root")
    log_path = work / f"notebook6-{port}.log"
    proc = labdriver.spawn_logged([str(a) for a in args], root, env, log_path)
    server = labdriver.LabServer(proc, port, token, log_path)
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                pytest.fail(f"Notebook 6 exited with {proc.returncode}:\n{server.log_tail()}")
            with contextlib.suppress(OSError):
                if server.get("/api/status", token)[0] == 200:
                    break
            if time.monotonic() > deadline:
                pytest.fail(f"Notebook 6 did not answer within 180 s:\n{server.log_tail()}")
            time.sleep(0.5)
        yield server
    finally:
        server.stop()


# -- the page: Notebook 6's own objects (window.Jupyter), ipywidgets 7's DOM ----------------

_JS_READY = """() => !!(window.Jupyter && Jupyter.notebook && Jupyter.notebook.kernel
  && Jupyter.notebook.kernel.is_connected() && Jupyter.notebook.kernel.widget_manager)"""
# Run All (Cell > Run All), counting the cells as they start and finish
_JS_RUN_ALL = """() => {
  const nb = Jupyter.notebook;
  window.__colab = {started: 0, finished: 0};
  nb.events.on('execute.CodeCell', () => { window.__colab.started += 1; });
  nb.events.on('finished_execute.CodeCell', () => { window.__colab.finished += 1; });
  nb.execute_all_cells();
  return nb.get_cells().filter((c) => c.cell_type === 'code' && c.get_text().trim()).length;
}"""
_JS_RUN_DONE = """(cells) => window.__colab.started === cells
  && document.querySelectorAll('.cell.running').length === 0 && !Jupyter.notebook.kernel_busy"""
_JS_RUN_STATE = """() => ({...window.__colab, busy: Jupyter.notebook.kernel_busy,
  running: document.querySelectorAll('.cell.running').length})"""
_JS_DRAWN = """(n) => {
  const boxes = document.querySelectorAll('.al-explorer');
  return boxes.length === n && Array.from(boxes).every((box) => {
    const img = box.querySelector(':scope > img.widget-image');
    return img && img.src && img.complete && img.naturalWidth > 0;
  });
}"""
# each explorer's picture: its source read back as bytes (a blob: URL in ipywidgets 7)
_JS_PICTURES = """async () => Promise.all(Array.from(document.querySelectorAll('.al-explorer'))
  .map(async (box) => {
    const img = box.querySelector(':scope > img.widget-image');
    if (!img) return {picture: false};
    let bytes = 0, png = false;
    if (img.src) {
      try {
        const data = new Uint8Array(await (await fetch(img.src)).arrayBuffer());
        bytes = data.length;
        png = [137, 80, 78, 71, 13, 10, 26, 10].every((b, i) => data[i] === b);
      } catch (e) { /* left false */ }
    }
    return {picture: true, src: img.src, width: img.naturalWidth, height: img.naturalHeight,
            bytes, png};
  }))"""
_JS_OUTPUTS = """() => Array.from(document.querySelectorAll('.output_subarea'))
  .map((n) => ({error: n.classList.contains('output_error'), text: n.innerText}))"""
# the first enabled slider (ipywidgets 7: a jQuery UI slider) of the first explorer with one,
# its handle marked for the locator; at its maximum the move goes left
_JS_PICK_SLIDER = """() => {
  const boxes = Array.from(document.querySelectorAll('.al-explorer'));
  for (const [b, box] of boxes.entries()) {
    for (const row of box.querySelectorAll('.widget-hslider')) {
      const handle = row.querySelector('.ui-slider-handle');
      if (!handle || row.querySelector('.ui-slider-disabled, .ui-state-disabled')) continue;
      handle.setAttribute('data-colab-move', String(b));
      const readout = row.querySelector('.widget-readout');
      return {box: b, label: row.querySelector('.widget-label').innerText,
              readout: readout ? (readout.value || readout.innerText) : '',
              atMax: handle.style.left === '100%'};
    }
  }
  return null;
}"""
_JS_STATE_OF = """(b) => {
  const box = document.querySelectorAll('.al-explorer')[b];
  const img = box.querySelector(':scope > img.widget-image');
  const readout = box.querySelector('[data-colab-move]').closest('.widget-hslider')
    .querySelector('.widget-readout');
  return {src: img.src, readout: readout ? (readout.value || readout.innerText) : ''};
}"""
_JS_REDRAWN = """([b, before]) => {
  const img = document.querySelectorAll('.al-explorer')[b]
    .querySelector(':scope > img.widget-image');
  return img.src && img.src !== before && img.complete && img.naturalWidth > 0;
}"""
# what the kernel runs: the versions it imports, from which environment
_JS_KERNEL_VERSIONS = """(code) => new Promise((resolve) => {
  let text = '';
  Jupyter.notebook.kernel.execute(code, {
    iopub: {output: (msg) => { text += msg.content.text || ''; }},
    shell: {reply: () => setTimeout(() => resolve(text), 500)},
  }, {silent: false, store_history: false});
})"""
_KERNEL_VERSIONS = (
    "import json, sys, ipywidgets, matplotlib, numpy; print(json.dumps({'prefix': sys.prefix,"
    " 'ipywidgets': ipywidgets.__version__, 'numpy': numpy.__version__,"
    " 'matplotlib': matplotlib.__version__}))"
)


def saved_state_errors(name: str) -> set[str]:
    """What ipywidgets 7's manager raises restoring the committed notebook's saved widget
    state (written by ipywidgets 8) when the page opens: one message per model of a module
    version or class it lacks. The explorers the kernel makes on Run All are not these."""
    nb = json.loads((ROOT / "notebooks" / name).read_text(encoding="utf-8"))
    state = nb["metadata"].get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    return {
        f"Cannot find model module {m['model_module']}@{m['model_module_version']}, "
        f"{m['model_name']}"
        for m in state.values()
    }


def _wait(page, script: str, arg, timeout_ms: int, what: str, state=None) -> None:
    try:
        page.wait_for_function(script, arg=arg, timeout=timeout_ms, polling=250)
    except labdriver.PlaywrightTimeout:
        seen = page.evaluate(state) if state else ""
        pytest.fail(f"{what} within {timeout_ms / 1000:.0f} s {seen}")


@pytest.mark.parametrize("name", NOTEBOOKS, ids=[n[:2] for n in NOTEBOOKS])
def test_explorers_draw_and_redraw_on_colabs_widgets(chromium, notebook6, colab_env, name):
    explorers, _ = pictures_in(name.removesuffix(".ipynb"))
    assert explorers, f"{name} shows no explorer: pick another notebook"
    context = chromium.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page_errors: list[str] = []
    page.on("pageerror", lambda error: page_errors.append(str(error)))
    try:
        page.goto(
            f"{notebook6.url}/notebooks/{name}?token={notebook6.token}", timeout=OPEN_TIMEOUT_MS
        )
        _wait(page, _JS_READY, None, OPEN_TIMEOUT_MS, "the kernel and ipywidgets 7 not ready")
        cells = page.evaluate(_JS_RUN_ALL)
        _wait(page, _JS_RUN_DONE, cells, RUN_TIMEOUT_MS, "Run All not done", _JS_RUN_STATE)

        # the kernel is the Colab environment's, with Colab's versions
        seen = json.loads(page.evaluate(_JS_KERNEL_VERSIONS, _KERNEL_VERSIONS))
        assert Path(seen.pop("prefix")) == colab_env
        assert seen == {n: COLAB_PINS[n] for n in seen}

        outputs = page.evaluate(_JS_OUTPUTS)
        errors = [o["text"][-2000:] for o in outputs if o["error"]]
        assert errors == [], f"{name}: error outputs after Run All:\n" + "\n".join(errors)
        reprs = [o["text"][:300] for o in outputs if WIDGET_REPR.search(o["text"])]
        assert reprs == [], f"{name}: outputs that are a widget's text, not the widget: {reprs}"

        _wait(page, _JS_DRAWN, explorers, MOVE_TIMEOUT_MS, f"not all {explorers} explorers drawn")
        pictures = page.evaluate(_JS_PICTURES)
        assert len(pictures) == explorers, f"{name}: {len(pictures)} explorers shown"
        undrawn = [p for p in pictures if not (p.get("png") and p["bytes"] and p["width"])]
        assert undrawn == [], f"{name}: explorers without a drawn PNG picture: {undrawn}"

        slider = page.evaluate(_JS_PICK_SLIDER)
        assert slider is not None, f"{name}: no explorer has an enabled slider"
        before = page.evaluate(_JS_STATE_OF, slider["box"])
        handle = page.locator("[data-colab-move]")
        handle.scroll_into_view_if_needed()
        handle.focus()
        page.keyboard.press("ArrowLeft" if slider["atMax"] else "ArrowRight")
        _wait(
            page,
            _JS_REDRAWN,
            [slider["box"], before["src"]],
            MOVE_TIMEOUT_MS,
            f"moving {slider['label']!r} (explorer {slider['box']}) redrew nothing",
        )
        after = page.evaluate(_JS_STATE_OF, slider["box"])
        assert after["readout"] != before["readout"], f"{slider['label']!r} did not move"
        redrawn = page.evaluate(_JS_PICTURES)[slider["box"]]
        assert redrawn["png"] and redrawn["width"], f"{name}: the redrawn picture {redrawn}"

        unexplained = sorted(set(page_errors) - saved_state_errors(name))
        assert unexplained == [], f"{name}: the page raised {unexplained}"
    finally:
        with contextlib.suppress(Exception):  # the kernel's memory back before the next page
            page.evaluate("() => Jupyter.notebook.session.delete()")
        context.close()
