"""Drive the course as a learner does: a real JupyterLab, Debian's Chromium, sliders moved.

Shared by the browser tests (``tests/browser``) and the latency benchmark
(``benchmarks/latency.py``). Nothing here downloads anything: JupyterLab is
started with ``scripts/lab`` (the command ``make lab`` runs) on a free
localhost port, and Chromium is the system's, launched by Playwright through
``executable_path``.

Three parts:

- `start_lab` / `LabServer`: the server, its token, its log, and a stop that
  always ends the process group it started (kernels included).
- `launch_chromium`: the browser with the flags this closed network needs.
- `NotebookPage`: one notebook in one page: open it, run every cell, read the
  cells' outputs, list the explorers' controls in the page, move one control
  and wait for the figure to redraw, and ask the notebook's own kernel what
  its explorers now hold (`probe`).

Every wait follows an event the page can see, never a fixed sleep, so the
same code holds on an idle laptop and on a loaded 2-core machine:

- the kernel is *quiet* when every message the page sent it (a cell, a
  widget's change, ipympl's request for a frame) has had its "idle" status
  back; a frame is *drawn* when the PNG ipympl received has been decoded and
  painted onto the figure's canvas;
- Run All is done when the kernel has replied to every code cell and gone
  quiet, and every explorer figure in the page has drawn its first frame;
- a move is done when the change reached the kernel, the kernel went quiet
  after it, and a frame that arrived after the input was drawn on that
  figure's canvas.

The timeouts only bound a wait that has stopped making progress; they are
long (minutes) because a loaded machine can be slow without being stuck. When
one expires the error says which step never happened (`RedrawTimeout`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
LAB_SCRIPT = REPO / "scripts" / "lab"
NOTEBOOK_GLOB = "notebooks/[0-9][0-9]_*.ipynb"
CHROMIUM = Path("/usr/bin/chromium")
# Without the background-networking flags Chromium keeps trying (and failing) to
# reach Google's services on this closed network.
CHROMIUM_ARGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
INSTALL_HINT = "install Debian's Chromium: `apt-get install chromium` (as root)"
# Bounds on waits that have stopped making progress (the waits themselves follow events).
# Generous: on a 2-core machine shared with a second JupyterLab and Chromium, one slider
# frame has been seen to take several seconds.
OPEN_TIMEOUT_MS = 240_000  # the page loads and its kernel starts
MOVE_TIMEOUT_MS = 120_000  # a control's change reaches the kernel and its frame is painted
_TOKEN_IN_LOG = re.compile(r"[?&]token=([0-9a-zA-Z]{16,})")


def numbered_notebooks() -> list[Path]:
    """The course's numbered notebooks (``notebooks/NN_*.ipynb``), in order."""
    return sorted(REPO.glob(NOTEBOOK_GLOB))


def chromium_missing() -> str | None:
    """Why the browser cannot run here (None when it can)."""
    if not CHROMIUM.exists():
        return f"{CHROMIUM} not found; {INSTALL_HINT}"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:  # pragma: no cover - playwright is a pinned dev dependency
        return "the playwright package is missing; run `make` to install the dev dependencies"
    return None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- the server ----------------------------------------------------------------------------


@dataclass
class LabServer:
    """A running ``scripts/lab``: its process, port, token and log file."""

    proc: subprocess.Popen
    port: int
    token: str
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def get(self, path: str, token: str | None = None) -> tuple[int, bytes]:
        """GET ``path`` with no proxy; ``token`` in an Authorization header (None: no token)."""
        request = urllib.request.Request(self.url + path)
        if token is not None:
            request.add_header("Authorization", f"token {token}")
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(request, timeout=10) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the server (it shuts its kernels down); kill its process group if it hangs."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        # anything left in the group we started (a kernel that ignored shutdown)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)


def spawn_logged(
    args: Sequence[str], cwd: Path, env: Mapping[str, str], log_path: Path
) -> subprocess.Popen:
    """Start ``args`` with its output in ``log_path``, in a process group of its own (so that
    stopping it can end everything it started: a server's kernels, make's children)."""
    with open(log_path, "wb") as log:
        return subprocess.Popen(
            list(args),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def start_lab(
    workdir: Path,
    *,
    token: str | None = None,
    root_dir: Path | None = None,
    extra_args: Sequence[str] = (),
    isolate_user_settings: bool = True,
    timeout: float = 120.0,
) -> LabServer:
    """Start ``scripts/lab`` on a free port and wait until it answers.

    ``token`` None lets JupyterLab make its own random token (as ``make lab``
    does), read back from its log; otherwise it is passed as JUPYTER_TOKEN.
    ``root_dir`` None serves a scratch copy of ``notebooks/`` under ``workdir``:
    the script's own default, the learner's ``my-notebooks/`` in the repo, is
    never touched by a test (tests/browser/test_make_lab.py runs ``make lab``
    in a fresh copy of the repo of its own). With
    ``isolate_user_settings`` the learner's own JupyterLab settings and
    workspaces are replaced by empty folders under ``workdir``, so only the
    repo's defaults apply. Raises RuntimeError with the log's tail if the
    server exits or does not answer within ``timeout`` seconds.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = dict(os.environ)
    env.pop("JUPYTER_TOKEN", None)
    if token is not None:
        env["JUPYTER_TOKEN"] = token
    env["LAB_ROOT_DIR"] = str(root_dir or copy_notebooks(workdir / "notebooks"))
    env["JUPYTER_RUNTIME_DIR"] = str(workdir / "runtime")
    if isolate_user_settings:
        env["JUPYTERLAB_SETTINGS_DIR"] = str(workdir / "user-settings")
        env["JUPYTERLAB_WORKSPACES_DIR"] = str(workdir / "workspaces")
    args = [
        str(LAB_SCRIPT),
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        "--ServerApp.open_browser=False",
    ]
    args += list(extra_args)
    log_path = workdir / f"lab-{port}.log"
    proc = spawn_logged(args, REPO, env, log_path)
    server = LabServer(proc, port, token or "", log_path)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"scripts/lab exited with {proc.returncode}:\n{server.log_tail()}"
                )
            if not server.token:
                found = _TOKEN_IN_LOG.search(log_path.read_text(errors="replace"))
                server.token = found.group(1) if found else ""
            if server.token:
                with contextlib.suppress(OSError):
                    if server.get("/api/status", server.token)[0] == 200:
                        return server
            time.sleep(0.25)
        raise RuntimeError(
            f"JupyterLab did not answer within {timeout:.0f} s:\n{server.log_tail()}"
        )
    except BaseException:
        server.stop()
        raise


@contextlib.contextmanager
def running_lab(workdir: Path, **kwargs: Any) -> Iterator[LabServer]:
    """`start_lab` as a context manager that always stops the server."""
    server = start_lab(workdir, **kwargs)
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def scratch_lab(workdir: Path) -> Iterator[LabServer]:
    """JupyterLab as the tests run it: a scratch copy of the notebooks under ``workdir``,
    a random token, the app exposed to the page; stopped on exit."""
    root = copy_notebooks(workdir / "notebooks")
    with running_lab(
        workdir, token=random_token(), root_dir=root, extra_args=lab_test_args()
    ) as server:
        yield server


def copy_notebooks(dest: Path) -> Path:
    """A scratch copy of ``notebooks/``: the browser runs and saves there, never in the repo."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(REPO / "notebooks", dest, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    return dest


def lab_test_args() -> list[str]:
    """Extra `jupyter lab` arguments the tests add: expose the app object to the page."""
    return ["--LabApp.expose_app_in_browser=True"]


def random_token() -> str:
    return secrets.token_hex(24)


# -- the browser ---------------------------------------------------------------------------


def launch_chromium(playwright: Any) -> Any:
    """Debian's Chromium through Playwright (nothing is downloaded)."""
    return playwright.chromium.launch(
        executable_path=str(CHROMIUM), headless=True, args=list(CHROMIUM_ARGS)
    )


@contextlib.contextmanager
def chromium_browser() -> Iterator[Any]:
    """Playwright's Chromium (Debian's, see `launch_chromium`), closed on exit."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            yield browser
        finally:
            browser.close()


# The frame trace, installed with _INIT_JS: in order, on performance.now()'s clock, every
# step a picture takes on its way to an explorer's canvas, so a canvas left blank can be
# followed back to its frames (`NotebookPage.canvas_trace`). ipympl's page keeps, per
# figure, one <img> that frames are decoded into and one offscreen canvas that the
# decoded frame is drawn on; each view's canvas copies the offscreen one. Logged: a blob
# URL made (its byte count matches the binary message it came from), an <img> given a
# frame and the frame loaded (or failed), a canvas resized (which clears it) or cleared,
# and every drawImage (destination canvas, source image or canvas, and whether that source
# had finished loading). The kernel's messages join the same log in _JS_TRACK_KERNEL.
_TRACE_JS = """
(() => {
  const trace = window.__trace = [];
  let ids = 0;
  const id = (el) => el.__tid || (el.__tid = `${el.tagName === 'IMG' ? 'img' : 'cv'}${++ids}`);
  const log = (e, fields) => {
    if (trace.length < 200000) trace.push({t: performance.now(), e, ...fields});
  };
  window.__traceId = id;
  const blobUrl = URL.createObjectURL;
  URL.createObjectURL = function (blob) {
    const url = blobUrl.call(URL, blob);
    log('blob', {url, bytes: blob.size});
    return url;
  };
  const src = Object.getOwnPropertyDescriptor(HTMLImageElement.prototype, 'src');
  const hooked = new WeakSet();
  Object.defineProperty(HTMLImageElement.prototype, 'src', {
    configurable: true,
    get() { return src.get.call(this); },
    set(value) {
      const img = this;
      if (typeof value === 'string' && value.startsWith('blob:')) {
        log('src', {img: id(img), url: value});
        if (!hooked.has(img)) {
          hooked.add(img);
          img.addEventListener('load', () => log('load', {img: id(img), url: img.src,
            size: [img.naturalWidth, img.naturalHeight]}));
          img.addEventListener('error', () => log('error', {img: id(img), url: img.src}));
        }
      }
      src.set.call(this, value);
    },
  });
  for (const dim of ['width', 'height']) {
    const prop = Object.getOwnPropertyDescriptor(HTMLCanvasElement.prototype, dim);
    Object.defineProperty(HTMLCanvasElement.prototype, dim, {
      configurable: true,
      get() { return prop.get.call(this); },
      set(value) { log('size', {cv: id(this), [dim]: Number(value)}); prop.set.call(this, value); },
    });
  }
  const setAttribute = Element.prototype.setAttribute;
  Element.prototype.setAttribute = function (name, value) {
    if (this instanceof HTMLCanvasElement && (name === 'width' || name === 'height')) {
      log('size', {cv: id(this), [name]: Number(value)});
    }
    return setAttribute.call(this, name, value);
  };
  const clearRect = CanvasRenderingContext2D.prototype.clearRect;
  CanvasRenderingContext2D.prototype.clearRect = function (...args) {
    log('clear', {cv: id(this.canvas)});
    return clearRect.apply(this, args);
  };
  const drawImage = CanvasRenderingContext2D.prototype.drawImage;
  CanvasRenderingContext2D.prototype.drawImage = function (source, ...rest) {
    const ready = source instanceof HTMLImageElement ? source.complete && source.naturalWidth > 0
      : source.width > 0 && source.height > 0;
    log('draw', {cv: id(this.canvas), from: id(source), ready});
    return drawImage.call(this, source, ...rest);
  };
})();
"""

# Installed in every page before JupyterLab loads, all on performance.now()'s clock:
# every drawImage on every canvas (ipympl paints each new frame with drawImage); every
# PNG frame that reaches the page (ipympl makes a blob URL of each and loads it into
# an <img>), with the image it went to, so a frame still being decoded can be told
# from one that is painted; and every key press, mouse press and input event.
_INIT_JS = (
    """
(() => {
  const draw = CanvasRenderingContext2D.prototype.drawImage;
  CanvasRenderingContext2D.prototype.drawImage = function (...args) {
    const c = this.canvas;
    (c.__draws || (c.__draws = [])).push(performance.now());
    return draw.apply(this, args);
  };
  window.__frames = [];  // arrival time of every PNG frame
  window.__images = new Set();  // the <img> elements frames are loaded into
  const src = Object.getOwnPropertyDescriptor(HTMLImageElement.prototype, 'src');
  Object.defineProperty(HTMLImageElement.prototype, 'src', {
    configurable: true,
    get() { return src.get.call(this); },
    set(value) {
      if (typeof value === 'string' && value.startsWith('blob:')) {
        window.__frames.push(performance.now());
        window.__images.add(this);
      }
      src.set.call(this, value);
    },
  });
  window.__inputTimes = [];
  for (const type of ['keydown', 'mousedown', 'input']) {  // input: a <select> changed
    document.addEventListener(type, (e) => window.__inputTimes.push(e.timeStamp), true);
  }
})();
"""
    + _TRACE_JS
)

# JavaScript run in the page; `window.jupyterapp` is there because the tests start
# JupyterLab with expose_app_in_browser.
_JS_PANEL = "window.jupyterapp.shell.currentWidget"

_JS_READY = """(path) => {
  const app = window.jupyterapp;
  if (!app || !app.shell) return false;
  const w = app.shell.currentWidget;
  if (!w || !w.context || w.context.path !== path || !w.sessionContext) return false;
  const k = w.sessionContext.session && w.sessionContext.session.kernel;
  return !!k && k.status === 'idle' && w.content.widgets.length > 0;
}"""

# Installed once the notebook's kernel is connected: the messages the page sends the
# kernel that still await their "idle" status, and the replies to cells. A request's
# outputs (a cell's text, a widget's frame) all arrive before its idle status.
_JS_TRACK_KERNEL = """() => {
  const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
  const track = window.__kernel = {
    kernel, outstanding: new Map(), updates: [], replies: [], lastIdle: 0,
  };
  kernel.anyMessage.connect((_, {msg, direction}) => {
    const now = performance.now();
    if (msg.channel === 'iopub' || msg.channel === 'shell') {  // the comms, in the frame trace
      const type = msg.header.msg_type;
      const data = msg.content && msg.content.data;
      if (type === 'comm_open' && data && data.state) {
        window.__trace.push({t: now, e: 'open', comm: msg.content.comm_id,
          model: data.state._model_name, size: data.state._size, mode: data.state._image_mode,
          children: data.state.children});
      } else if (type === 'comm_msg' && data) {
        const entry = {t: now, e: direction === 'send' ? 'sent' : 'msg',
                       comm: msg.content.comm_id, method: data.method};
        if (data.state) {
          entry.keys = Object.keys(data.state).join(',');
          if ('_image_mode' in data.state) entry.mode = data.state._image_mode;
          if ('_size' in data.state) entry.size = data.state._size;
        }
        if (data.method === 'custom' && data.content) {
          const inner = data.content.data;
          let parsed = null;
          try {
            parsed = typeof inner === 'string' ? JSON.parse(inner) : data.content;
          } catch (e) {}
          entry.type = parsed && parsed.type;
          if (parsed && parsed.size) entry.size = parsed.size;
        }
        if (msg.buffers && msg.buffers.length) entry.bytes = msg.buffers[0].byteLength;
        window.__trace.push(entry);
      }
    }
    if (direction === 'send' && msg.channel === 'shell') {
      track.outstanding.set(msg.header.msg_id, `${msg.header.msg_type}@${Math.round(now)}`);
      const data = msg.header.msg_type === 'comm_msg' && msg.content.data;
      if (data && data.method === 'update') track.updates.push(now);  // a control's new value
    } else if (direction === 'recv' && msg.header.msg_type === 'status'
               && msg.content.execution_state === 'idle') {
      track.outstanding.delete(msg.parent_header.msg_id);
      track.lastIdle = now;
    } else if (direction === 'recv' && msg.header.msg_type === 'execute_reply') {
      track.replies.push({at: now, status: msg.content.status});
      // a request aborted after an earlier error has no outputs, and may get no status
      if (msg.content.status === 'aborted') track.outstanding.delete(msg.parent_header.msg_id);
    }
  });
  return true;
}"""

# The page's state as the waits see it (``since``: a performance.now() time).
_JS_STATE = """(since) => {
  const track = window.__kernel;
  const pending = Array.from(window.__images).filter((img) => !img.complete).length;
  return {
    now: performance.now(),
    status: track.kernel.status,
    outstanding: Array.from(track.outstanding.values()),
    quiet: track.outstanding.size === 0 && track.kernel.status === 'idle' && pending === 0,
    decoding: pending,
    sent: track.updates.filter((t) => t >= since).length,
    frames: window.__frames.filter((t) => t >= since).length,
    replies: track.replies.filter((r) => r.at >= since).length,
  };
}"""

_JS_RUN_START = """() => {
  const w = window.jupyterapp.shell.currentWidget;
  const since = performance.now();
  window.jupyterapp.commands.execute('notebook:run-all-cells');
  const code = w.content.widgets.filter((c) => c.model.type === 'code'
                                          && c.model.sharedModel.getSource().trim() !== '');
  return {since, cells: code.length};
}"""


_JS_RUN_DONE = """([since, cells]) => {
  const track = window.__kernel;
  const pending = Array.from(window.__images).filter((img) => !img.complete).length;
  if (track.outstanding.size > 0 || track.kernel.status !== 'idle' || pending > 0) return false;
  if (track.replies.filter((r) => r.at >= since).length >= cells) return true;
  // a cell that failed (and was not tagged to) ends the run early: the test reports it
  const tagged = (c) => (c.model.getMetadata('tags') || []).includes('raises-exception');
  return window.jupyterapp.shell.currentWidget.content.widgets.some(
    (c) => c.model.type === 'code' && !tagged(c)
           && c.model.outputs.toJSON().some((o) => o.output_type === 'error'));
}"""

# Every widget output of every cell is rendered, and every ipympl figure among them has
# painted a frame. Returns what is still missing ([] when all is in place).
_JS_VIEWS_MISSING = """() => {
  const w = window.jupyterapp.shell.currentWidget;
  const missing = [];
  w.content.widgets.forEach((cell, index) => {
    if (cell.model.type !== 'code') return;
    const wanted = cell.model.outputs.toJSON().filter(
      (o) => o.data && o.data['application/vnd.jupyter.widget-view+json']).length;
    const shown = cell.node.querySelectorAll('.jp-OutputArea-output .jupyter-widgets').length;
    if (shown === 0 && wanted > 0) missing.push(`cell ${index}: widget not rendered`);
    cell.node.querySelectorAll('.jupyter-matplotlib-canvas-div').forEach((div) => {
      const canvas = div.querySelector('canvas');
      if (!canvas || !(canvas.__draws || []).length || canvas.width === 0) {
        missing.push(`cell ${index}: figure has no frame yet`);
      }
    });
  });
  return missing;
}"""

_JS_CELLS = """() => {
  const w = window.jupyterapp.shell.currentWidget;
  return w.content.widgets.map((c, index) => {
    const editor = c.node.querySelector('.jp-InputArea-editor');
    const box = editor ? editor.getBoundingClientRect() : null;
    return {
      index,
      type: c.model.type,
      source: c.model.sharedModel.getSource(),
      tags: c.model.getMetadata('tags') || [],
      inputHidden: !!c.inputHidden,
      executionCount: c.model.type === 'code' ? c.model.executionCount : null,
      editorVisible: !!editor && editor.offsetParent !== null && box.height > 0,
      outputs: c.model.type !== 'code' ? [] : c.model.outputs.toJSON().map((o) => ({
        output_type: o.output_type,
        name: o.name || null,
        text: Array.isArray(o.text) ? o.text.join('') : (o.text || ''),
        ename: o.ename || null,
        evalue: o.evalue || null,
        mimes: Object.keys(o.data || {}),
      })),
      shownStderr: Array.from(c.node.querySelectorAll(
        '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
      )).map((n) => n.textContent),
      shownErrors: Array.from(c.node.querySelectorAll(
        '.jp-RenderedText[data-mime-type*="error"]'
      )).map((n) => n.textContent),
      outputText: c.model.type === 'code'
        ? Array.from(c.node.querySelectorAll('.jp-OutputArea')).map((n) => n.innerText).join('\\n')
        : '',
    };
  });
}"""

_JS_EXECUTE = """async (code) => {
  const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
  const future = kernel.requestExecute(
    {code, silent: false, store_history: false, allow_stdin: false, stop_on_error: false});
  let out = '';
  let error = null;
  future.onIOPub = (msg) => {
    const type = msg.header.msg_type;
    if (type === 'stream' && msg.content.name === 'stdout') out += msg.content.text;
    if (type === 'error') error = msg.content.traceback.join('\\n');
  };
  await future.done;
  return {out, error};
}"""

# The explorers' figure boxes in the page: a VBox holding an ipympl canvas, with the
# controls above it. Each control: its kind, description and whether it can be used.
_JS_CONTROLS = """() => {
  const boxes = Array.from(document.querySelectorAll('.jp-Notebook .widget-vbox'))
    .filter((b) => Array.from(b.children).some((c) => c.classList.contains('jupyter-matplotlib')));
  const kinds = [['slider', '.widget-hslider'], ['toggle', '.widget-toggle-buttons'],
                 ['checkbox', '.widget-checkbox'], ['dropdown', '.widget-dropdown']];
  const cells = window.jupyterapp.shell.currentWidget.content.widgets.map((c) => c.node);
  return boxes.map((box, b) => {
    const counts = {};
    const cell = cells.findIndex((node) => node.contains(box));
    return Array.from(box.querySelectorAll(kinds.map(([, s]) => s).join(', '))).map((el) => {
      const kind = kinds.find(([, s]) => el.matches(s))[0];
      const nth = counts[kind] = (counts[kind] === undefined ? 0 : counts[kind] + 1);
      // a checkbox's description is in .widget-label-basic; its .widget-label is a spacer
      const label = Array.from(el.querySelectorAll('.widget-label, .widget-label-basic'))
        .find((n) => n.textContent.replace(/\u200b/g, '').trim() !== '');
      const handle = el.querySelector('.noUi-handle');
      const readout = el.querySelector('.widget-readout');
      const disabled = kind === 'slider'
        ? !!el.querySelector('.noUi-target[disabled]')
        : !!el.querySelector('button:disabled, input:disabled, select:disabled');
      const buttons = Array.from(el.querySelectorAll('button'));
      const options = Array.from(el.querySelectorAll('option'));
      const aria = (name) => handle.getAttribute(`aria-${name}`);
      return {
        box: b, cell, kind, nth,
        description: label ? label.textContent.trim() : '',
        disabled,
        readout: readout ? readout.textContent.trim() : null,
        atMax: handle ? aria('valuenow') === aria('valuemax') : null,
        atMin: handle ? aria('valuenow') === aria('valuemin') : null,
        options: kind === 'toggle' ? buttons.map((x) => x.textContent.trim())
               : kind === 'dropdown' ? options.map((x) => x.textContent.trim())
               : [],
        active: kind === 'toggle' ? buttons.findIndex((x) => x.classList.contains('mod-active'))
              : kind === 'dropdown' ? el.querySelector('select').selectedIndex
              : kind === 'checkbox' ? Number(el.querySelector('input').checked) : null,
      };
    });
  });
}"""

_JS_CANVAS = """(b) => {
  const boxes = Array.from(document.querySelectorAll('.jp-Notebook .widget-vbox'))
    .filter((x) => Array.from(x.children).some((c) => c.classList.contains('jupyter-matplotlib')));
  const canvas = boxes[b].querySelector('.jupyter-matplotlib-canvas-div canvas');
  const data = canvas.toDataURL();
  let h = 0;
  for (let i = 0; i < data.length; i++) h = (h * 31 + data.charCodeAt(i)) | 0;
  const draws = canvas.__draws || [];
  return {hash: `${data.length}:${h}`, draws: draws.length,
          width: canvas.width, height: canvas.height};
}"""

_JS_FIRST_DRAW_AFTER = """([b, since]) => {
  const boxes = Array.from(document.querySelectorAll('.jp-Notebook .widget-vbox'))
    .filter((x) => Array.from(x.children).some((c) => c.classList.contains('jupyter-matplotlib')));
  const canvas = boxes[b].querySelector('.jupyter-matplotlib-canvas-div canvas');
  const input = window.__inputTimes.filter((t) => t >= since)[0];
  const draw = (canvas.__draws || []).find((t) => input !== undefined && t > input);
  return input === undefined || draw === undefined ? null : draw - input;
}"""

# Defined once in the notebook's kernel: capture of logged errors and warnings (a
# slider callback that raises is only logged by the kernel's comm manager), and a
# probe that reports every Explorer's controls, what its figure shows, and the
# inputs a test needs to recompute the figure with the library.
_KERNEL_SETUP = r"""
def _browser_test_setup():
    import logging, warnings

    class Capture(logging.Handler):
        def __init__(self):
            super().__init__(logging.WARNING)
            self.records = []
            self.setFormatter(logging.Formatter("%(name)s %(levelname)s: %(message)s"))

        def emit(self, record):
            self.records.append(self.format(record))

    capture = Capture()
    logging.getLogger().addHandler(capture)
    shown = warnings.showwarning

    def showwarning(message, category, filename, lineno, file=None, line=None):
        capture.records.append(f"{category.__name__}: {message} ({filename}:{lineno})")
        shown(message, category, filename, lineno, file, line)

    warnings.showwarning = showwarning
    warnings.simplefilter("always")
    return capture


def _browser_test_probe(inputs_by_class, full=True):
    import gc, json, math
    import numpy as np
    from matplotlib.patches import Rectangle
    from attention_lib.explorers.base import Explorer

    def plain(x):
        if isinstance(x, dict):
            return {str(k): plain(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [plain(v) for v in x]
        if isinstance(x, np.ndarray):
            return plain(x.tolist())
        if isinstance(x, np.generic):
            return plain(x.item())
        if isinstance(x, float) and not math.isfinite(x):
            return repr(x)
        return x

    def figure(fig):
        sup = fig._suptitle.get_text() if fig._suptitle is not None else ""
        return {"suptitle": sup, "texts": [t.get_text() for t in fig.texts], "axes": [{
            "title": ax.get_title(),
            "texts": [t.get_text() for t in ax.texts],
            "heights": [p.get_height() for p in ax.patches if isinstance(p, Rectangle)],
            "widths": [p.get_width() for p in ax.patches if isinstance(p, Rectangle)],
            "lines": [np.asarray(l.get_ydata(), dtype=float) for l in ax.lines],
            "images": [np.asarray(im.get_array(), dtype=float) for im in ax.images],
        } for ax in fig.axes]}

    import warnings
    gc.collect()
    with warnings.catch_warnings():  # isinstance on every object can trip lazy-module warnings
        warnings.simplefilter("ignore")
        explorers = [o for o in gc.get_objects() if isinstance(o, Explorer)]
    result = []
    for e in explorers:
        names = {id(v): k for k, v in vars(e).items()}
        controls = [{
            "attr": names.get(id(c), "?"),
            "kind": type(c).__name__,
            "description": c.description,
            "value": c.value,
            "label": getattr(c, "label", None),
            "disabled": bool(getattr(c, "disabled", False)),
        } for c in e.controls]
        entry = {"key": id(e), "cls": type(e).__name__, "controls": controls}
        if full:
            entry["figure"] = figure(e.fig)
            expr = inputs_by_class.get(type(e).__name__)
            entry["inputs"] = eval(expr, {"e": e, "np": np}) if expr else {}
        result.append(entry)
    print(json.dumps(plain({"explorers": result, "problems": _browser_test_capture.records})))


_browser_test_capture = _browser_test_setup()
"""


@dataclass
class Move:
    """One learner action on one control: what was done and what followed."""

    box: int
    kind: str
    description: str
    action: str
    readout_before: str | None
    readout_after: str | None
    latency_ms: float | None  # input event to the first redraw of that figure
    changed_pixels: bool


@dataclass
class NotebookPage:
    """One notebook open in its own browser page, with its own kernel."""

    page: Any
    server: LabServer
    path: str
    external_requests: list[str] = field(default_factory=list)
    run_seconds: float | None = None
    _probe_ready: bool = False

    @classmethod
    def open(
        cls,
        browser: Any,
        server: LabServer,
        path: str,
        workspace: str,
        viewport: tuple[int, int] = (1280, 1000),
    ) -> NotebookPage:
        """Open ``path`` (relative to the server root) in a new workspace; wait for its kernel.

        The page tracks the kernel's messages from then on (the waits of `run_all`,
        `move` and `quiet` follow them).
        """
        context = browser.new_context(
            viewport={"width": viewport[0], "height": viewport[1]}, device_scale_factor=1
        )
        page = context.new_page()
        self = cls(page, server, path)
        page.on("request", self._watch_request)
        page.add_init_script(_INIT_JS)
        page.set_default_timeout(MOVE_TIMEOUT_MS)  # clicks and key presses on a loaded machine
        url = f"{server.url}/lab/workspaces/{workspace}/tree/{path}?token={server.token}"
        page.goto(url, wait_until="commit", timeout=OPEN_TIMEOUT_MS)  # then wait for the app
        page.wait_for_function(_JS_READY, arg=path, timeout=OPEN_TIMEOUT_MS, polling=250)
        page.evaluate(_JS_TRACK_KERNEL)
        return self

    def _watch_request(self, request: Any) -> None:
        url = request.url
        if url.startswith(("http:", "https:", "ws:", "wss:")) and not url.startswith(
            (self.server.url, self.server.url.replace("http", "ws", 1))
        ):
            self.external_requests.append(url)

    def close(self) -> None:
        """Shut the notebook's kernel down and close the page."""
        with contextlib.suppress(Exception):
            self.page.evaluate(f"() => {_JS_PANEL}.sessionContext.shutdown()")
        self.page.context.close()

    # -- cells -----------------------------------------------------------------------------
    def run_all(self, timeout_s: float = 900) -> float:
        """Run → Run All Cells and wait for the events that end it; seconds taken.

        Done when the kernel has replied to every non-empty code cell (a cell
        that fails stops the run; the rest are answered "aborted") and gone
        quiet, and every widget output is rendered with its figure's first
        frame painted. Raises RedrawTimeout saying which of these never came.
        """
        start = time.monotonic()
        run = self.page.evaluate(_JS_RUN_START)
        args = [run["since"], run["cells"]]
        try:
            self.page.wait_for_function(
                _JS_RUN_DONE, arg=args, timeout=timeout_s * 1000, polling=250
            )
        except PlaywrightTimeout as error:
            state = self.page.evaluate(_JS_STATE, run["since"])
            raise RedrawTimeout(
                f"Run All did not finish in {timeout_s:.0f} s: {state['replies']} of "
                f"{run['cells']} cells answered; {_describe(state)}"
            ) from error
        left = max(1.0, timeout_s - (time.monotonic() - start))
        try:
            self.page.wait_for_function(
                f"() => ({_JS_VIEWS_MISSING})().length === 0", timeout=left * 1000, polling=250
            )
        except PlaywrightTimeout as error:
            missing = self.page.evaluate(_JS_VIEWS_MISSING)
            raise RedrawTimeout(f"after Run All, still missing: {missing}") from error
        self.run_seconds = time.monotonic() - start
        return self.run_seconds

    def cells(self) -> list[dict]:
        """Every cell: type, tags, whether its code is hidden, outputs (model and shown)."""
        return self.page.evaluate(_JS_CELLS)

    def dialogs(self) -> list[str]:
        """Text of every dialog and toast notification on screen."""
        return self.page.evaluate(
            """() => Array.from(document.querySelectorAll('.jp-Dialog, .Toastify__toast'))
                 .map((n) => n.innerText.trim())"""
        )

    # -- kernel ----------------------------------------------------------------------------
    def execute(self, code: str) -> str:
        """Run ``code`` in the notebook's kernel (not in a cell); return its stdout."""
        result = self.page.evaluate(_JS_EXECUTE, code)
        if result["error"]:
            raise RuntimeError(f"kernel raised:\n{_strip_ansi(result['error'])}")
        return result["out"]

    def probe(self, inputs_by_class: Mapping[str, str] | None = None, full: bool = True) -> dict:
        """What the kernel's explorers hold now (see ``_KERNEL_SETUP``)."""
        if not self._probe_ready:
            self.execute(_KERNEL_SETUP)
            self._probe_ready = True
        out = self.execute(f"_browser_test_probe({dict(inputs_by_class or {})!r}, full={full})")
        return json.loads(out.strip().splitlines()[-1])

    # -- controls --------------------------------------------------------------------------
    def controls(self) -> list[list[dict]]:
        """The controls of each explorer figure box in the page, box by box."""
        return self.page.evaluate(_JS_CONTROLS)

    def _locator(self, control: dict) -> Any:
        boxes = self.page.locator(".jp-Notebook .widget-vbox:has(> .jupyter-matplotlib)")
        selector = {
            "slider": ".widget-hslider",
            "toggle": ".widget-toggle-buttons",
            "checkbox": ".widget-checkbox",
            "dropdown": ".widget-dropdown",
        }[control["kind"]]
        return boxes.nth(control["box"]).locator(selector).nth(control["nth"])

    def canvas(self, box: int) -> dict:
        return self.page.evaluate(_JS_CANVAS, box)

    def move(self, control: dict, action: str, timeout_ms: float = MOVE_TIMEOUT_MS) -> Move:
        """Do ``action`` on ``control`` as a learner would and wait for its figure to redraw.

        Slider actions are keys pressed on the focused handle (``"ArrowRight"``,
        ``"End"``...); a toggle's action is the text of the button to click; a
        dropdown's the option to choose; a checkbox's ``"click"``.

        Before the action the kernel must be quiet (`quiet`), so no frame of an
        earlier state is still on its way to be taken for this move's. After
        it, the change must reach the kernel, the kernel must go quiet, and a
        frame that arrived after the input must be painted on this figure.
        Raises RedrawTimeout naming the step that did not happen within
        ``timeout_ms``.
        """
        box = control["box"]
        self.quiet(timeout_ms)
        before = self.canvas(box)
        since = self.page.evaluate("() => performance.now()")
        element = self._locator(control)
        if control["kind"] == "slider":
            handle = element.locator(".noUi-handle")
            handle.focus()
            self.page.keyboard.press(action)
        elif control["kind"] == "toggle":
            element.locator("button", has_text=action).first.click()
        elif control["kind"] == "checkbox":
            element.locator("input").click()
        elif control["kind"] == "dropdown":
            element.locator("select").select_option(label=action)
        else:  # pragma: no cover - _JS_CONTROLS only reports the kinds above
            raise ValueError(f"unknown control kind {control['kind']!r}")
        try:
            self.page.wait_for_function(
                _JS_MOVE_DONE, arg=[box, since], timeout=timeout_ms, polling=100
            )
        except PlaywrightTimeout as error:
            state = self.page.evaluate(_JS_STATE, since)
            canvas = self.canvas(box)
            raise RedrawTimeout(_move_stuck(state, canvas, before, timeout_ms)) from error
        latency = self.page.evaluate(_JS_FIRST_DRAW_AFTER, [box, since])
        after = self.canvas(box)
        readout_after = self.controls()[box][_index_of(self.controls()[box], control)]["readout"]
        return Move(
            box,
            control["kind"],
            control["description"],
            action,
            control["readout"],
            readout_after,
            latency,
            after["hash"] != before["hash"],
        )

    def quiet(self, timeout_ms: float = MOVE_TIMEOUT_MS) -> None:
        """Wait until the kernel is quiet and every frame that reached the page is painted.

        Quiet: every message the page sent the kernel has had its idle status
        back (so all the frames it caused have arrived) and no frame is still
        being decoded. Raises RedrawTimeout with what is still outstanding.
        """
        try:
            self.page.wait_for_function(
                "() => (" + _JS_STATE + ")(0).quiet", timeout=timeout_ms, polling=100
            )
        except PlaywrightTimeout as error:
            state = self.page.evaluate(_JS_STATE, 0)
            raise RedrawTimeout(
                f"the page never went quiet in {timeout_ms / 1000:.0f} s: {_describe(state)}"
            ) from error

    def screenshot(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(path), full_page=True)
        return path


# A move is done when the page sent the control's new value to the kernel, the kernel went
# quiet after it, and the figure's canvas painted a frame that arrived after the input.
# (Counting any redraw of the canvas instead let a late frame of the previous move pass
# for this one, and the test then read the kernel before the change had reached it.)
_JS_MOVE_DONE = (
    """([b, since]) => {
  const state = ("""
    + _JS_STATE
    + """)(since);
  if (!state.quiet || state.sent === 0) return false;
  const boxes = Array.from(document.querySelectorAll('.jp-Notebook .widget-vbox'))
    .filter((x) => Array.from(x.children).some((c) => c.classList.contains('jupyter-matplotlib')));
  const canvas = boxes[b].querySelector('.jupyter-matplotlib-canvas-div canvas');
  const frame = window.__frames.find((t) => t >= since);
  return frame !== undefined && (canvas.__draws || []).some((t) => t > frame);
}"""
)


class RedrawTimeout(AssertionError):
    """A wait on the page ran out of time; the message says which step never happened."""


# Playwright's TimeoutError, imported lazily: this module is imported without playwright
# installed (to say how to install it).
try:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
except ImportError:  # pragma: no cover - playwright is a pinned dev dependency
    PlaywrightTimeout = TimeoutError  # type: ignore[misc,assignment]


def _describe(state: dict) -> str:
    waiting = ", ".join(state["outstanding"]) or "none"
    return (
        f"kernel {state['status']}, requests awaiting their idle status: {waiting}, "
        f"frames still decoding: {state['decoding']}"
    )


def _move_stuck(state: dict, canvas: dict, before: dict, timeout_ms: float) -> str:
    """Which step of a move did not happen: the cause of a RedrawTimeout."""
    waited = f"in {timeout_ms / 1000:.0f} s"
    if state["sent"] == 0:
        return f"the page sent the kernel no new value {waited} (the input did not register)"
    if not state["quiet"]:
        return f"the kernel did not finish handling the change {waited}: {_describe(state)}"
    if state["frames"] == 0:
        return (
            f"the kernel handled the change ({state['sent']} message(s), now quiet) "
            f"but sent no frame {waited}"
        )
    return (
        f"{state['frames']} frame(s) reached the page but the figure's canvas did not paint "
        f"one {waited} (draws {before['draws']} before, {canvas['draws']} now, "
        f"canvas {canvas['width']}x{canvas['height']})"
    )


def _index_of(controls: list[dict], control: dict) -> int:
    for i, c in enumerate(controls):
        if c["kind"] == control["kind"] and c["nth"] == control["nth"]:
            return i
    raise LookupError(f"control {control['description']!r} is no longer in the page")


def _strip_ansi(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


# -- layout, still pictures, saved notebooks (explorers/canvas.py) -------------------------


def open_notebook(
    browser: Any,
    server: LabServer,
    path: str,
    workspace: str,
    viewport: tuple[int, int] = (1280, 800),
) -> NotebookPage:
    """`NotebookPage.open` at a learner's screen size (1280 x 800 unless told)."""
    return NotebookPage.open(browser, server, path, workspace, viewport)


def save_notebook(page: NotebookPage, timeout_ms: float = 30_000) -> None:
    """File ▸ Save, and wait until the document is no longer dirty."""
    page.page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    page.page.wait_for_function(
        f"() => !{_JS_PANEL}.context.model.dirty", timeout=timeout_ms, polling=250
    )


# Every output that holds a widget view, as the page shows it: text, pictures, errors.
_JS_WIDGET_OUTPUTS = """() => {
  const w = window.jupyterapp.shell.currentWidget;
  const mime = 'application/vnd.jupyter.widget-view+json';
  const shown = (n) => n.offsetParent !== null && n.getBoundingClientRect().width > 0;
  const out = [];
  w.content.widgets.forEach((c, index) => {
    if (c.model.type !== 'code') return;
    c.model.outputs.toJSON().forEach((o, k) => {
      if (!(o.data && o.data[mime])) return;
      const node = c.node.querySelectorAll('.jp-OutputArea-output')[k];
      if (!node) { out.push({cell: index, missing: true}); return; }
      const canvases = Array.from(
        node.querySelectorAll('.jupyter-matplotlib-canvas-div canvas:first-child')).filter(shown);
      out.push({
        cell: index,
        model: o.data[mime].model_id,
        trusted: !!c.model.trusted,
        text: node.innerText,
        images: Array.from(node.querySelectorAll('img')).filter(shown).map((i) => ({
          width: i.getBoundingClientRect().width, natural: i.naturalWidth, complete: i.complete})),
        canvases: canvases.map((cv) => {
          let inked = 0;
          if (cv.width && cv.height) {
            const d = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data;
            for (let i = 0; i < d.length; i += 4 * 13) if (d[i + 3] > 0 && d[i] < 200) inked++;
          }
          return {width: cv.width, height: cv.height, inked, trace: window.__traceId(cv)};
        }),
        explorer: !!node.querySelector('.al-explorer'),
        still: !!node.querySelector('.al-still'),
      });
    });
  });
  return out;
}"""


def widget_outputs(page: NotebookPage) -> list[dict]:
    """Every widget output of the notebook as shown: its text, visible images and canvases.

    Each canvas reports its size and ``inked``, a count of sampled pixels
    that are drawn and dark (0 for a blank or transparent canvas).
    ``explorer``: the output holds an explorer's box (the live widget, or one
    rebuilt from saved state); ``still``: it holds an explorer's still picture.
    """
    return page.page.evaluate(_JS_WIDGET_OUTPUTS)


def frame_trace(page: NotebookPage, output: dict, since: float = 0.0) -> list[str]:
    """The frame trace (``_TRACE_JS``) of one widget output's figure, one line per step.

    ``output`` is an entry of `widget_outputs`. Its box's model names its
    canvas model (a child of the box with ipympl's model name); that
    model's binary messages give the byte counts of its frames, which name
    their blob URLs, which name the <img> they were decoded in, whose draws
    name the offscreen canvas, whose draws name the view canvases. Every
    step on that chain after ``since`` (a performance.now() time) is listed,
    times in ms from the first.
    """
    trace = [e for e in page.page.evaluate("() => window.__trace") if e["t"] >= since]
    opened = {e["comm"]: e for e in trace if e["e"] == "open"}

    def canvases_in(comm: str, depth: int = 0) -> set[str]:
        entry = opened.get(comm, {})
        if entry.get("model") == "MPLCanvasModel":
            return {comm}
        found: set[str] = set()
        for child in entry.get("children") or []:
            if depth < 4 and isinstance(child, str):
                found |= canvases_in(child.removeprefix("IPY_MODEL_"), depth + 1)
        return found

    comms = canvases_in(output["model"])
    frames = {
        e["bytes"] for e in trace if e["e"] == "msg" and e.get("comm") in comms and e.get("bytes")
    }
    urls = {e["url"] for e in trace if e["e"] == "blob" and e["bytes"] in frames}
    images = {e["img"] for e in trace if e["e"] == "src" and e["url"] in urls}
    views = {c["trace"] for c in output.get("canvases", [])}
    offscreen = {e["cv"] for e in trace if e["e"] == "draw" and e["from"] in images}
    offscreen |= {e["from"] for e in trace if e["e"] == "draw" and e["cv"] in views}
    elements = images | offscreen | views
    chain = [
        e
        for e in trace
        if e.get("comm") in comms
        or e.get("url") in urls
        or e.get("img") in elements
        or e.get("cv") in elements
    ]
    if not chain:
        return [f"no trace for model {output['model']} (canvas models {sorted(comms)})"]
    start = chain[0]["t"]
    names = {"comm", "t", "e"}
    return [
        f"{e['t'] - start:9.1f} {e['e']:<6} "
        + " ".join(f"{k}={v}" for k, v in e.items() if k not in names and v is not None)
        for e in chain
    ]


# The layout of every explorer box and every other picture in the notebook's outputs.
_JS_LAYOUT = """() => {
  const shown = (n) => n.offsetParent !== null && n.getBoundingClientRect().width > 0
    && getComputedStyle(n).visibility !== 'hidden';
  const cut = (n) => n.scrollWidth > n.clientWidth + 1;
  const label = (n) => n.textContent.replace(/\\u200b/g, '').trim();
  const boxes = Array.from(document.querySelectorAll('.jp-Notebook .al-explorer')).filter(shown);
  const explorers = boxes.map((box, b) => {
    const area = box.closest('.jp-OutputArea-output').getBoundingClientRect();
    const rect = box.getBoundingClientRect();
    const canvasDiv = box.querySelector('.jupyter-matplotlib-canvas-div');
    const figure = canvasDiv ? canvasDiv.getBoundingClientRect() : null;
    const texts = Array.from(box.querySelectorAll(
      '.al-controls .widget-label, .al-controls .widget-label-basic, .al-controls button, ' +
      '.al-controls .widget-readout, .al-controls select'))
      .filter(shown).filter((n) => label(n) !== '');
    const sliders = Array.from(box.querySelectorAll('.al-controls .slider-container')).filter(shown)
      .map((s) => ({label: label(s.closest('.widget-slider').querySelector('.widget-label')),
                    width: s.getBoundingClientRect().width}));
    const toggles = Array.from(box.querySelectorAll('.al-controls .widget-toggle-buttons'))
      .filter(shown).map((t) => {
        const tops = Array.from(t.querySelectorAll('button'))
          .map((x) => Math.round(x.getBoundingClientRect().top));
        return {label: label(t.querySelector('.widget-label')), rows: new Set(tops).size};
      });
    const header = box.querySelector('.jupyter-matplotlib-header');
    const toolbar = box.querySelector('.jupyter-matplotlib-toolbar');
    const top = box.querySelector('.jupyter-matplotlib-canvas-div canvas:nth-child(2)');
    let handle = 0;
    if (top && top.width > 20 && top.height > 20) {
      const d = top.getContext('2d').getImageData(top.width - 20, top.height - 20, 20, 20).data;
      for (let i = 3; i < d.length; i += 4) if (d[i] > 0) handle++;
    }
    return {
      box: b, height: rect.height, width: rect.width, cell: area.width,
      figureWidth: figure ? figure.width : null,
      figureRight: figure ? figure.right - area.right : null,
      cutTexts: texts.filter(cut).map((n) => label(n)),
      sliders, toggles,
      header: !!header && shown(header), toolbar: !!toolbar && shown(toolbar), handle,
    };
  });
  const overflowing = Array.from(document.querySelectorAll('.jp-Notebook .jp-OutputArea-output'))
    .filter(shown).filter((o) => o.scrollWidth > o.clientWidth + 1)
    .map((o) => ({width: o.clientWidth, content: o.scrollWidth, text: o.innerText.slice(0, 80)}));
  const pictures = Array.from(document.querySelectorAll(
    '.jp-Notebook .jp-OutputArea-output img, .jp-Notebook .jp-OutputArea-output canvas'))
    .filter(shown).map((n) => {
      const area = n.closest('.jp-OutputArea-output').getBoundingClientRect();
      const r = n.getBoundingClientRect();
      return {tag: n.tagName, width: r.width, right: r.right - area.right};
    });
  const panel = document.querySelector('.jp-NotebookPanel-notebook').getBoundingClientRect();
  return {explorers, overflowing, pictures, notebookHeight: panel.height};
}"""


def layout(page: NotebookPage) -> dict:
    """How the notebook's explorers and pictures sit in the page at its current size.

    ``explorers``: per explorer box, its height and width, its output area's
    width (``cell``), its figure's width and how far its right edge passes the
    area's (``figureRight`` > 0: clipped), the control texts that are cut
    (``scrollWidth > clientWidth``), every slider's track width, how many rows
    each row of toggle buttons takes, whether ipympl's header or toolbar shows,
    and ``handle``, drawn pixels where ipympl's resize handle would be.
    ``overflowing``: output areas whose content is wider than they are.
    ``pictures``: every visible image and canvas in the outputs, with its
    right edge against its area's. ``notebookHeight``: the notebook's height.
    """
    return page.page.evaluate(_JS_LAYOUT)


def restart_and_run_all(page: NotebookPage, timeout_s: float = 300) -> float:
    """Restart the notebook's kernel, wait until it is idle, then `NotebookPage.run_all`. Seconds.

    The restart is awaited first: JupyterLab's "restart and run all" command
    queues the cells only once the new kernel is up, and until then the page
    looks finished (idle, every cell with an execution count).
    """
    start = time.monotonic()
    page.page.evaluate(f"async () => {{ await {_JS_PANEL}.sessionContext.restartKernel(); }}")
    page.page.wait_for_function(
        f"() => {{ const k = {_JS_PANEL}.sessionContext.session.kernel;"
        " return !!k && k.status === 'idle'; }",
        timeout=timeout_s * 1000,
        polling=250,
    )
    page.run_all(timeout_s)
    return time.monotonic() - start
