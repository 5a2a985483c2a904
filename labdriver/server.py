"""The server: JupyterLab started with ``python -m course serve``, the way ``make lab`` starts it.

`start_lab` runs it (what ``make lab`` runs) on a free localhost port,
reads its token back from its log when JupyterLab makes its own, and waits
until the server answers; `LabServer.stop` always ends the process group it
started (kernels included). `scratch_lab` is the lab as the tests,
screenshots and benchmarks run it: on a scratch copy of ``notebooks/``, never
the learner's ``my-notebooks/``.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .repo import LAB_COMMAND, REPO

__all__ = [
    "LabServer",
    "copy_notebooks",
    "free_port",
    "lab_test_args",
    "random_token",
    "running_lab",
    "scratch_lab",
    "spawn_logged",
    "start_front_end",
    "start_lab",
]

_TOKEN_IN_LOG = re.compile(r"[?&]token=([0-9a-zA-Z]{16,})")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LabServer:
    """A running ``python -m course serve``: its process, port, token and log file."""

    proc: subprocess.Popen
    port: int
    token: str | None  # None: a server without one (Voila)
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def get(self, path: str, token: str | None = None) -> tuple[int, bytes]:
        """GET ``path`` with no proxy; ``token`` in an Authorization header (None: no token)."""
        request = urllib.request.Request(self.url + path)
        if token:
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
    """Start ``python -m course serve`` on a free port and wait until it answers.

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
        *LAB_COMMAND,
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        "--ServerApp.open_browser=False",
    ]
    args += list(extra_args)
    log_path = workdir / f"lab-{port}.log"
    proc = spawn_logged(args, REPO, env, log_path)
    return _answering(LabServer(proc, port, token or "", log_path), "/api/status", timeout)


def _answering(server: LabServer, ready_path: str | None, timeout: float) -> LabServer:
    """``server`` once ``ready_path`` answers 200 (its token read from its log first, when
    it made its own), or once its port takes connections (``ready_path`` None); stopped,
    with RuntimeError and the log's tail, if it exits or does not answer within ``timeout``
    seconds."""
    proc, log_path = server.proc, server.log_path
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"{proc.args[1:4]} exited with {proc.returncode}:\n{server.log_tail()}"
                )
            if server.token is not None and not server.token:
                found = _TOKEN_IN_LOG.search(log_path.read_text(errors="replace"))
                server.token = found.group(1) if found else ""
            if ready_path is None:
                with (
                    contextlib.suppress(OSError),
                    socket.create_connection(("127.0.0.1", server.port), timeout=1),
                ):
                    return server
            elif server.token or server.token is None:
                with contextlib.suppress(OSError):
                    if server.get(ready_path, server.token)[0] == 200:
                        return server
            time.sleep(0.25)
        raise RuntimeError(
            f"the server did not answer within {timeout:.0f} s:\n{server.log_tail()}"
        )
    except BaseException:
        server.stop()
        raise


def start_front_end(
    workdir: Path, front_end: str, notebook: str | None = None, timeout: float = 120.0
) -> LabServer:
    """A front end a learner may open the course in without ``make lab``, on a free port.

    ``front_end``: ``"lab"`` (plain ``jupyter lab`` with none of the course's settings,
    a learner who skips ``make``), ``"notebook"`` (Jupyter Notebook 7), both on a scratch
    copy of ``notebooks/`` with a random token and the app exposed to the page; or
    ``"voila"``, ``voila notebooks/NOTEBOOK`` run in the repository (where it reads
    ``voila.json``), which has no token.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("JUPYTER_TOKEN", "JUPYTER_CONFIG_PATH")}
    env["JUPYTER_RUNTIME_DIR"] = str(workdir / "runtime")
    env["JUPYTERLAB_SETTINGS_DIR"] = str(workdir / "user-settings")
    env["JUPYTERLAB_WORKSPACES_DIR"] = str(workdir / "workspaces")
    log_path = workdir / f"{front_end}-{port}.log"
    if front_end == "voila":
        if notebook is None:
            raise ValueError("voila serves one notebook: name it")
        args = [sys.executable, "-m", "voila", f"notebooks/{notebook}", f"--port={port}"]
        args += ["--no-browser", "--Voila.ip=127.0.0.1"]
        proc = spawn_logged(args, REPO, env, log_path)
        server = LabServer(proc, port, None, log_path)
        return _answering(server, None, timeout)  # a GET of / would run the notebook
    if front_end not in ("lab", "notebook"):
        raise ValueError(f"unknown front end {front_end!r}: lab, notebook or voila")
    token = random_token()
    env["JUPYTER_TOKEN"] = token
    app = {"lab": "LabApp", "notebook": "JupyterNotebookApp"}[front_end]
    args = [
        sys.executable,
        "-m",
        "jupyter",
        front_end,
        f"--ServerApp.root_dir={copy_notebooks(workdir / 'notebooks')}",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        "--ServerApp.open_browser=False",
        "--ServerApp.ip=127.0.0.1",
        f"--{app}.expose_app_in_browser=True",
    ]
    if os.geteuid() == 0:
        args.append("--ServerApp.allow_root=True")
    proc = spawn_logged(args, REPO, env, log_path)
    return _answering(LabServer(proc, port, token, log_path), "/api/status", timeout)


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
