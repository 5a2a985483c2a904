"""A learner without a browser: Jupyter's own protocol, over HTTP and the kernel's websocket.

A class's server sees a learner as requests and kernel messages, never as a
page. The class-load benchmark (``benchmarks/hub_load.py``) needs more learners
than one machine's browsers can carry beside the class itself: a JupyterLab
page holds about 430 MiB and a CPU's tenth per move, so 30 of them would take
13 GiB and more CPU than the 2-core course machine has, while on a real class's
server they cost nothing (each runs on its learner's laptop). A `WireLearner`
sends the server what a learner's JupyterLab sends for the same steps:

- logs in through the hub's form (`WireLearner.log_in`) and follows the landing
  link (nbgitpuller's, to its end: the course pulled into their home), or, on a
  plain server, holds its token (`WireLearner.with_token`);
- opens a notebook: a session, which starts its kernel, and the kernel's
  websocket (`open`);
- runs every code cell in order, stopping at an error as Run All does
  (`run_all`), and keeps the state of every widget the kernel opens;
- moves a slider of an explorer (`press`): the widget ``update`` message a
  slider's key press sends, timed to the explorer's new frame, the update of
  its Image that the kernel sends in reply (the PNG in a binary buffer).

What it leaves out is the page's own work: no layout, decode or paint, and
none of JupyterLab's polling. Its time is the key press to the frame's arrival,
what the browsers' moves call "to frame"; `press` returns it in the form
`benchmarks/latency.py`'s `move_stages` reads (the frame's arrival as its draw).
"""

from __future__ import annotations

import itertools
import json
import math
import queue
import struct
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

__all__ = [
    "SLIDERS",
    "Widget",
    "WireError",
    "WireLearner",
    "next_value",
    "parse_frame",
    "slider_position",
]

#: the ipywidgets models a learner moves with arrow keys
SLIDERS = ("IntSliderModel", "FloatSliderModel", "FloatLogSliderModel")
EXPLORER_CLASS = "al-explorer"  # an explorer's box (attention_course.explorers.base.ExplorerBox)


class WireError(RuntimeError):
    """A step the server or kernel did not answer as a learner's page expects."""


@dataclass
class Widget:
    """A widget the kernel opened: its comm, model name and current state."""

    comm_id: str
    model: str
    state: dict[str, Any] = field(default_factory=dict)

    def children(self) -> list[str]:
        """The comm ids of a box's children (``IPY_MODEL_<id>`` in its state)."""
        return [c.removeprefix("IPY_MODEL_") for c in self.state.get("children", [])]


def parse_frame(frame: str | bytes) -> dict[str, Any]:
    """One websocket frame from jupyter_server as a message dict.

    Text: the message as JSON. Binary (a message with buffers, an Image's
    PNG): a count of parts, each part's offset (big-endian 32-bit), the
    message's JSON, then its buffers (jupyter_server's
    ``serialize_binary_message``)."""
    if isinstance(frame, str):
        return json.loads(frame)
    (parts,) = struct.unpack("!I", frame[:4])
    offsets = [*struct.unpack(f"!{parts}I", frame[4 : 4 * (parts + 1)]), len(frame)]
    msg = json.loads(frame[offsets[0] : offsets[1]].decode())
    msg["buffers"] = [frame[a:b] for a, b in itertools.pairwise(offsets[1:])]
    return msg


def slider_position(state: dict[str, Any], model: str) -> float:
    """Where a slider's handle sits on its own scale, the one ``min`` and ``max`` are on: its
    value, or a log slider's exponent."""
    if model == "FloatLogSliderModel":
        return math.log(state["value"], state.get("base", 10.0))
    return state["value"]


def next_value(state: dict[str, Any], model: str, direction: int) -> float | int:
    """A slider's value after one arrow key, ``direction`` +1 (right) or -1 (left):
    one step, held within its range (a log slider steps its exponent)."""
    step = state.get("step") or 1
    if model == "FloatLogSliderModel":
        base = state.get("base", 10.0)
        exponent = slider_position(state, model) + direction * step
        exponent = min(max(exponent, state["min"]), state["max"])
        return base ** (round(exponent / step) * step)
    value = state["value"] + direction * step
    value = min(max(value, state["min"]), state["max"])
    if model == "IntSliderModel":
        return int(value)
    return round(value / step) * step  # on the slider's grid, as the page's is


class WireLearner:
    """One learner's server, spoken to on the wire (see the module's docstring)."""

    def __init__(self, server_url: str, http: Any, name: str = "learner") -> None:
        self.server_url = server_url.rstrip("/")  # http://HOST:PORT[/user/NAME]
        self.http = http  # a requests.Session: the learner's cookies or token
        self.name = name
        self.session_id = uuid.uuid4().hex
        self.ws: Any = None
        self.kernel_id: str | None = None
        self.widgets: dict[str, Widget] = {}  # kept by the reader thread (`_read`)
        self._lock = threading.Lock()  # held while the widgets change or are walked
        self._inbox: queue.Queue = queue.Queue()
        self.restarts = 0  # the kernel restarted under us (it died: the server started one)
        self.last_frame = b""  # the PNG of the last frame `press` waited for

    # -- getting in ---------------------------------------------------------------------

    @classmethod
    def with_token(cls, server_url: str, token: str) -> WireLearner:
        """A learner of a plain server that takes ``token`` (the tests' JupyterLab)."""
        import requests

        http = requests.Session()
        http.trust_env = False  # no proxy: the server is local
        http.headers["Authorization"] = f"token {token}"
        return cls(server_url, http)

    @classmethod
    def log_in(cls, hub_url: str, name: str, password: str, timeout: float = 600.0) -> WireLearner:
        """Log in through the hub's form and follow where it sends a learner: the hub starts
        their server (its spawn-pending page, asked again until the server is up), and the
        landing link, nbgitpuller's, pulls the course into their home (its event stream,
        read to its end, as the landing page's script reads it)."""
        import requests

        hub_url = hub_url.rstrip("/")
        http = requests.Session()
        http.trust_env = False
        form = http.get(f"{hub_url}/hub/login", timeout=60)
        form.raise_for_status()
        fields = {"username": name, "password": password, "_xsrf": http.cookies.get("_xsrf", "")}
        landed = http.post(f"{hub_url}/hub/login", data=fields, timeout=timeout)
        deadline = time.monotonic() + timeout
        while "/hub/spawn-pending/" in landed.url or "/hub/spawn/" in landed.url:
            if time.monotonic() > deadline:
                raise WireError(f"{name}'s server did not start in {timeout:.0f} s")
            time.sleep(1.0)
            landed = http.get(landed.url, timeout=timeout)
        landed.raise_for_status()
        server_url = f"{hub_url}/user/{name}"
        if not landed.url.startswith(server_url):
            raise WireError(f"{name} landed on {landed.url}, not on their server")
        learner = cls(server_url, http, name)
        path = urllib.parse.urlparse(landed.url).path
        if path.rstrip("/").endswith("/git-pull"):
            learner._pull(urllib.parse.urlparse(landed.url).query, timeout)
        return learner

    def _pull(self, query: str, timeout: float) -> None:
        """nbgitpuller's pull: its event stream (``git-pull/api``), read to the end."""
        events = []
        with self.http.get(
            f"{self.server_url}/git-pull/api?{query}", stream=True, timeout=timeout
        ) as stream:
            stream.raise_for_status()
            for line in stream.iter_lines(decode_unicode=True):
                if line and line.startswith("data:"):
                    events.append(json.loads(line[5:]))
        if not events or events[-1].get("phase") != "finished":
            last = events[-1] if events else "no event"
            raise WireError(f"{self.name}'s pull did not finish: {str(last)[:500]}")

    def _xsrf_headers(self) -> dict[str, str]:
        """The server's XSRF header for a request made with cookies (none with a token): its
        ``_xsrf`` cookie (set for the server's path; the hub has one of its own), sent back.
        Any page of the server sets it: the lab's, if no page has yet."""
        if "Authorization" in self.http.headers:
            return {}
        here = urllib.parse.urlparse(self.server_url).path.rstrip("/") + "/"

        def cookie() -> str | None:
            return next(
                (
                    c.value
                    for c in self.http.cookies
                    if c.name == "_xsrf" and here.startswith(c.path)
                ),
                None,
            )

        if cookie() is None:
            self.http.get(f"{self.server_url}/lab", timeout=120).raise_for_status()
        token = cookie()
        if token is None:
            raise WireError(f"{self.server_url} set no _xsrf cookie")
        return {"X-XSRFToken": token}

    # -- a notebook and its kernel -------------------------------------------------------

    def open(self, path: str, timeout: float = 300.0) -> None:
        """Open ``path`` (relative to the server's root) as the page does: a session, which
        starts its kernel, and the kernel's websocket."""
        import requests
        import websocket  # websocket-client

        reply = self.http.post(
            f"{self.server_url}/api/sessions",
            json={"path": path, "name": path, "type": "notebook", "kernel": {"name": "python3"}},
            headers=self._xsrf_headers(),
            timeout=timeout,
        )
        if reply.status_code not in (200, 201):
            raise WireError(f"session for {path}: {reply.status_code} {reply.text[:300]}")
        self.path = path
        self.kernel_id = reply.json()["kernel"]["id"]
        ws_url = self.server_url.replace("http", "ws", 1)
        url = f"{ws_url}/api/kernels/{self.kernel_id}/channels?session_id={self.session_id}"
        # the cookies (or token) the page's own requests to this server carry
        request = self.http.prepare_request(requests.Request("GET", f"{self.server_url}/api"))
        headers = [
            f"{k}: {v}" for k, v in request.headers.items() if k in ("Cookie", "Authorization")
        ]
        self.ws = websocket.create_connection(url, header=headers, timeout=timeout)
        self.ws.settimeout(None)  # the reader blocks until a message or the close
        self._inbox = queue.Queue()
        threading.Thread(target=self._read, name=f"wire-{self.name}", daemon=True).start()
        self._wait(
            lambda m: m["msg_type"] == "kernel_info_reply",
            self._send("kernel_info_request", {}),
            timeout,
        )

    def close(self) -> None:
        """Close the kernel's websocket (the kernel runs on, as after a closed tab)."""
        if self.ws is not None:
            self.ws.close()
            self.ws = None

    def shut_down(self) -> None:
        """Close, and end the notebook's session and so its kernel, as the page's "Shut Down
        Kernel" does."""
        self.close()
        if self.kernel_id is not None:
            self.http.delete(
                f"{self.server_url}/api/kernels/{self.kernel_id}",
                headers=self._xsrf_headers(),
                timeout=120,
            ).raise_for_status()
            self.kernel_id = None

    def _send(self, msg_type: str, content: dict[str, Any], channel: str = "shell") -> str:
        msg_id = uuid.uuid4().hex
        self.ws.send(
            json.dumps(
                {
                    "header": {
                        "msg_id": msg_id,
                        "msg_type": msg_type,
                        "session": self.session_id,
                        "username": self.name,
                        "date": datetime.now(timezone.utc).isoformat(),
                        "version": "5.3",
                    },
                    "parent_header": {},
                    "metadata": {},
                    "content": content,
                    "channel": channel,
                    "buffers": [],
                }
            )
        )
        return msg_id

    def _read(self) -> None:
        """The reader thread: every message as it arrives, stamped (``received``, epoch ms),
        its widget news kept (`widgets`), a restart counted, then queued for `_wait`.
        Reading all the time also answers the server's pings: a socket left unread while
        the learner reads the page (a minute, waiting for the class) was closed."""
        while True:
            try:
                frame = self.ws.recv()
            except Exception as error:  # closed, by us or the server
                self._inbox.put(error)
                return
            if not frame:  # websocket-client's answer to a close frame
                self._inbox.put(WireError("the server closed the kernel's websocket"))
                return
            msg = parse_frame(frame)
            msg["received"] = time.time() * 1e3
            with self._lock:
                self._absorb(msg)
            self._inbox.put(msg)

    def _absorb(self, msg: dict[str, Any]) -> None:
        msg["msg_type"] = msg.get("msg_type") or msg["header"]["msg_type"]
        content = msg.get("content", {})
        if msg["msg_type"] == "comm_open" and content.get("target_name") == "jupyter.widget":
            data = content.get("data", {})
            model = data.get("state", {}).get("_model_name", "")
            self.widgets[content["comm_id"]] = Widget(
                content["comm_id"], model, data.get("state", {})
            )
        elif msg["msg_type"] == "comm_msg" and content.get("comm_id") in self.widgets:
            data = content.get("data", {})
            if data.get("method") in ("update", "echo_update"):
                self.widgets[content["comm_id"]].state.update(data.get("state", {}))
        elif msg["msg_type"] == "comm_close":
            self.widgets.pop(content.get("comm_id"), None)
        elif msg["msg_type"] == "status" and content.get("execution_state") in (
            "restarting",
            "autorestarting",
        ):
            self.restarts += 1

    def _wait(self, done: Any, parent: str, timeout: float, into: list | None = None) -> dict:
        """Take messages until ``done(msg)`` for a reply to ``parent``; messages with that
        parent go into ``into`` meanwhile. WireError if the time runs out first."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WireError(f"no answer to {parent} in {timeout:.0f} s")
            try:
                msg = self._inbox.get(timeout=left)
            except queue.Empty:
                continue
            if isinstance(msg, Exception):
                self._inbox.put(msg)  # the socket stays closed for every later wait
                raise WireError(f"waiting for an answer to {parent}: {msg!r}")
            if msg.get("parent_header", {}).get("msg_id") != parent:
                continue
            if into is not None:
                into.append(msg)
            if done(msg):
                return msg

    def execute(self, code: str, timeout: float = 600.0) -> tuple[str, list[str]]:
        """Run ``code``: (what it printed, its errors as "Name: value")."""
        parent = self._send(
            "execute_request",
            {"code": code, "silent": False, "store_history": True, "user_expressions": {},
             "allow_stdin": False, "stop_on_error": True},
        )  # fmt: skip
        replies: list[dict] = []
        self._wait(
            lambda m: m["msg_type"] == "status" and m["content"]["execution_state"] == "idle",
            parent,
            timeout,
            replies,
        )
        printed = "".join(
            m["content"]["text"]
            for m in replies
            if m["msg_type"] == "stream" and m["content"].get("name") == "stdout"
        )
        errors = [
            f"{m['content']['ename']}: {m['content']['evalue']}"
            for m in replies
            if m["msg_type"] == "error"
        ]
        return printed, errors

    def run_all(self, timeout: float = 1800.0) -> tuple[float, list[str]]:
        """Every code cell of the open notebook, in order, as Run All runs them; stops at the
        first cell that raises. (seconds, error outputs)."""
        reply = self.http.get(f"{self.server_url}/api/contents/{self.path}", timeout=120)
        reply.raise_for_status()
        cells = [c for c in reply.json()["content"]["cells"] if c["cell_type"] == "code"]
        start = time.monotonic()
        for cell in cells:
            source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
            left = timeout - (time.monotonic() - start)
            _, errors = self.execute(source, max(left, 1.0))
            if errors:
                return time.monotonic() - start, errors
        return time.monotonic() - start, []

    # -- the explorers ------------------------------------------------------------------

    def sliders(self) -> list[Widget]:
        """The enabled sliders of every explorer the kernel shows, in the boxes' order."""
        with self._lock:
            return self._sliders()

    def _sliders(self) -> list[Widget]:
        found = []
        for box in self.widgets.values():
            if EXPLORER_CLASS not in box.state.get("_dom_classes", []):
                continue
            todo = box.children()
            while todo:
                widget = self.widgets.get(todo.pop(0))
                if widget is None:
                    continue
                if widget.model in SLIDERS and not widget.state.get("disabled"):
                    found.append(widget)
                todo = widget.children() + todo
        return found

    def press(
        self, slider: Widget, direction: int, timeout: float = 60.0
    ) -> dict[str, float] | None:
        """One arrow key on ``slider``: the value sent as the page sends it, and the time
        (epoch ms) until the explorer's new frame arrived: `move_stages`' page times, the
        frame's arrival standing for its draw. None if no frame came within ``timeout``."""
        value = next_value(slider.state, slider.model, direction)
        at = time.time() * 1e3
        parent = self._send(
            "comm_msg",
            {"comm_id": slider.comm_id,
             "data": {"method": "update", "state": {"value": value}, "buffer_paths": []}},
        )  # fmt: skip
        slider.state["value"] = value

        def frame(msg: dict[str, Any]) -> bool:
            content = msg.get("content", {})
            widget = self.widgets.get(content.get("comm_id"))
            data = content.get("data", {})
            return (
                msg["msg_type"] == "comm_msg"
                and widget is not None
                and widget.model == "ImageModel"
                and data.get("method") == "update"
                and ["value"] in data.get("buffer_paths", [])
            )

        try:
            reply = self._wait(frame, parent, timeout)
        except WireError:
            return None
        arrived = reply["received"]
        self.last_frame = reply["buffers"][0] if reply.get("buffers") else b""
        return {"origin": 0.0, "input": at, "frame": arrived, "draw": arrived}
