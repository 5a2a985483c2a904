"""A class's JupyterHub, driven as learners drive it: the hub tests, the class-load benchmark
and the fault tests start it here.

- `start_hub` / `running_hub`: the course's hub (teachers/hub/jupyterhub_config.py, run
  from the environment ``python -m course hub install`` makes under /opt) on a free
  localhost port, with real system learners (``useradd``, `course.hub.add_learner`),
  JupyterHub's DummyAuthenticator with one random password, and an admin API token for
  the tests (`Hub.api`). `Hub.stop` ends the hub, its proxy and every learner's server,
  and removes the learners it made (``userdel -r``): `running_hub` does it on any exit.
- `log_in`: a learner's own browser context, logged in through the hub's login form
  (cookies and all), waiting until their server has started and the page they land on
  (the course's nbgitpuller link) has opened JupyterLab.
- `Hub.processes`: a learner's server and kernels, as psutil sees them; `Hub.cgroups`:
  the cgroups the hub's spawner put them in (`course_cgroups`, teachers/hub's module),
  removed by `Hub.stop` too, should the hub have been killed before it could.
- `LearnerServer`: a learner's server as `NotebookPage.open` takes it (its URL under
  ``/user/<name>``; the context's cookies authenticate, no token).
- `course_remote`: the course as committed, in a bare git repository served by
  ``git daemon`` on localhost, that nbgitpuller pulls from in place of GitHub.
- `hub_missing`: why a hub cannot run here (None: it can).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from course import hub as course_hub

from .browser import chromium_missing
from .page import OPEN_TIMEOUT_MS
from .repo import REPO
from .server import free_port, spawn_logged
from .sources import js

__all__ = [
    "CourseRemote",
    "Hub",
    "LearnerServer",
    "course_cgroups",
    "course_remote",
    "hub_missing",
    "local_ports",
    "log_in",
    "running_hub",
    "start_hub",
]


@cache
def course_cgroups() -> Any:
    """teachers/hub/course_cgroups.py, the hub's per-learner cgroups (a module of the
    teachers' folder, which the hub imports from beside its config, not a package's).
    Registered under that name, as the hub imports it: a test that imports
    course_spawner.py from there gets this same module."""
    path = REPO / "teachers" / "hub" / "course_cgroups.py"
    loaded = sys.modules.get("course_cgroups")
    if loaded is not None and Path(loaded.__file__ or "") == path:
        return loaded
    spec = importlib.util.spec_from_file_location("course_cgroups", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["course_cgroups"] = module
    spec.loader.exec_module(module)
    return module


def hub_missing() -> str | None:
    """Why the hub tests cannot run on this machine, or None."""
    if os.geteuid() != 0:
        return "the hub tests make system users (useradd): run them as root"
    for tool in ("/usr/bin/python3", "/usr/sbin/useradd"):
        if not Path(tool).exists():
            return f"{tool} is missing"
    for tool in ("npm", "git"):
        if shutil.which(tool) is None:
            return f"{tool} is missing (apt-get install {tool})"
    return chromium_missing()


@dataclass
class LearnerServer:
    """A learner's single-user server behind the hub (what `NotebookPage.open` needs)."""

    url: str  # http://127.0.0.1:PORT/user/NAME
    token: str | None = None  # the browser context's hub cookies authenticate instead


@dataclass
class Hub:
    """A running hub: its process group, address, state folder, learners and log."""

    proc: subprocess.Popen
    port: int
    state: Path
    log_path: Path
    password: str  # every learner's (DummyAuthenticator)
    admin_token: str  # the "course-tests" service's, with the admin role
    learners: list[str] = field(default_factory=list)
    made_users: list[str] = field(default_factory=list)  # removed by stop
    made_group: bool = False  # the class's group did not exist before: removed by stop

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def server(self, name: str) -> LearnerServer:
        return LearnerServer(f"{self.url}/user/{name}")

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def processes(self, name: str) -> list[Any]:
        """Learner ``name``'s processes now (their server and kernels), as psutil.Process:
        what the class-load benchmark measures and the fault tests kill."""
        import pwd

        import psutil  # a runtime requirement of the course, imported where it is needed

        uid = pwd.getpwnam(name).pw_uid
        return [p for p in psutil.process_iter(["uids"]) if p.info["uids"].real == uid]

    def cgroups(self, name: str) -> Any:
        """Learner ``name``'s cgroups (`course_cgroups.LearnerCgroups`): the hub's spawner
        makes them under the hub's own cgroup, which is this process's (it started the hub)."""
        return course_cgroups().find(name)

    def api(
        self, method: str, path: str, token: str | None = "admin", body: Any = None
    ) -> tuple[int, Any]:
        """``method`` ``/hub/api`` + ``path`` with ``token`` ("admin": the tests' admin
        token; None: none); (status, decoded JSON or text)."""
        token = self.admin_token if token == "admin" else token
        return request(method, f"{self.url}/hub/api{path}", token, body)

    def stop(self, timeout: float = 60.0) -> None:
        """Stop the hub (it stops the learners' servers and its proxy), end whatever is left
        of its process group, then remove the users it made."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)
        # the proxy runs in a session of its own; a hub that failed to start leaves it
        with contextlib.suppress(OSError, ValueError):
            pid = int((self.state / "jupyterhub-proxy.pid").read_text())
            if "configurable-http-proxy" in " ".join(_cmdline(pid)):
                os.kill(pid, signal.SIGKILL)
        # a hub that was killed left its learners' cgroups (and what runs in them)
        for name in self.learners:
            with contextlib.suppress(course_cgroups().Unavailable):
                course_cgroups().remove(self.cgroups(name))
        for name in self.made_users:
            course_hub.remove_learner(name)
        self.made_users.clear()
        if self.made_group:
            subprocess.run(["groupdel", course_hub.LEARNERS_GROUP], check=False)
            self.made_group = False


def _cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_text().split("\0")


def local_ports() -> dict[str, str]:
    """Free ports for the hub's own API and the proxy's (jupyterhub_config.py's
    ``COURSE_HUB_HUB_PORT`` and ``COURSE_HUB_PROXY_API_PORT``): two hubs may run at once."""
    return {"COURSE_HUB_HUB_PORT": str(free_port()), "COURSE_HUB_PROXY_API_PORT": str(free_port())}


def request(method: str, url: str, token: str | None = None, body: Any = None) -> tuple[int, Any]:
    """One HTTP request with no proxy and no redirects followed; (status, JSON or text, or
    for a redirect where it leads)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if token:
        req.add_header("Authorization", f"token {token}")

    class _NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any) -> None:
            return None

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect)
    try:
        with opener.open(req, timeout=30) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, raw = error.code, error.read()
        if 300 <= status < 400:  # not followed: where it leads is the answer
            return status, error.headers.get("Location", "")
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode(errors="replace")


def start_hub(
    workdir: Path,
    learners: Iterable[str],
    *,
    admins: Iterable[str] = ("teacher",),
    repo: str | None = None,
    branch: str = "main",
    cull_timeout: int = 3600,
    settings: dict[str, str] | None = None,
    timeout: float = 180.0,
) -> Hub:
    """Install the environment if its stamp is stale (minutes, once), make the learners'
    users, and start the course's hub on a free 127.0.0.1 port; wait until it answers.

    ``repo``: the course repository the learners' landing link pulls (None: pyproject's,
    on GitHub; the tests pass `course_remote`'s). ``settings``: more ``COURSE_HUB_*``
    variables for jupyterhub_config.py, over these. Raises RuntimeError with the log's tail
    if the hub exits or does not answer within ``timeout`` seconds; what was made is
    cleaned up first.
    """
    course_hub.install()
    learners = list(learners)
    workdir.mkdir(parents=True, exist_ok=True)
    state = Path(tempfile.mkdtemp(prefix="state-", dir=workdir))
    port = free_port()
    hub = Hub(
        proc=None,  # type: ignore[arg-type]  # set below, once the users exist
        port=port,
        state=state,
        log_path=workdir / f"hub-{port}.log",
        password=secrets.token_hex(12),
        admin_token=secrets.token_hex(24),
        learners=learners,
    )
    import grp  # POSIX only, as the hub is
    import pwd

    try:
        grp.getgrnam(course_hub.LEARNERS_GROUP)
    except KeyError:
        hub.made_group = True
    for name in learners:
        try:
            pwd.getpwnam(name)
        except KeyError:
            hub.made_users.append(name)
        course_hub.add_learner(name)
    env = course_hub.hub_environment(
        state=state, ip="127.0.0.1", port=port, repo=repo, branch=branch
    )
    env.update(
        COURSE_HUB_AUTH="dummy",
        COURSE_HUB_DUMMY_PASSWORD=hub.password,
        COURSE_HUB_ADMINS=",".join(admins),
        COURSE_HUB_LEARNERS=",".join(learners),
        COURSE_HUB_CULL_TIMEOUT=str(cull_timeout),
        COURSE_HUB_TEST_TOKEN=hub.admin_token,
        **local_ports(),
    )
    env.update(settings or {})
    env.pop("JUPYTER_CONFIG_PATH", None)
    hub.proc = spawn_logged(course_hub.hub_command(), state, env, hub.log_path)
    deadline = time.monotonic() + timeout
    while True:
        if hub.proc.poll() is not None:
            hub.stop()
            raise RuntimeError(f"the hub exited ({hub.proc.returncode}):\n{hub.log_tail()}")
        with contextlib.suppress(OSError):
            if hub.api("GET", "/")[0] == 200 and hub.api("GET", "/users")[0] == 200:
                return hub
        if time.monotonic() > deadline:
            hub.stop()
            raise RuntimeError(f"the hub did not answer in {timeout:.0f} s:\n{hub.log_tail()}")
        time.sleep(0.5)


@contextlib.contextmanager
def running_hub(workdir: Path, learners: Iterable[str], **kwargs: Any) -> Iterator[Hub]:
    """`start_hub` as a context manager: the hub stopped and its users removed on any exit."""
    hub = start_hub(workdir, learners, **kwargs)
    try:
        yield hub
    finally:
        hub.stop()


def log_in(
    browser: Any,
    hub: Hub,
    name: str,
    viewport: tuple[int, int] = (1280, 800),
    keep_kernel: bool = False,
) -> Any:
    """A new browser context for learner ``name``, logged in through the hub's login form;
    returns the context once the page they land on shows JupyterLab (the landing link,
    nbgitpuller's, has brought the course into their home first). The notebook it opens
    (00_start_here) starts a kernel; unless ``keep_kernel`` it is shut down once up, so
    that the learner's kernels are those of the notebooks the caller opens."""
    context = browser.new_context(
        viewport={"width": viewport[0], "height": viewport[1]}, device_scale_factor=1
    )
    try:
        page = context.new_page()
        page.set_default_timeout(OPEN_TIMEOUT_MS)
        page.goto(f"{hub.url}/hub/login", wait_until="domcontentloaded")
        page.fill("#username_input", name)
        page.fill("#password_input", hub.password)
        page.click("#login_submit")
        page.wait_for_url(f"{hub.url}/user/{name}/lab**", timeout=OPEN_TIMEOUT_MS)
        page.wait_for_selector(".jp-LabShell", timeout=OPEN_TIMEOUT_MS)
        landed = urllib.parse.unquote(page.url.partition("/lab/tree/")[2].split("?")[0])
        if landed.endswith(".ipynb") and not keep_kernel:
            page.wait_for_function(js("ready"), arg=landed, polling=250)
            page.evaluate(js("shutdown"))
        page.close()
    except Exception:
        context.close()
        raise
    return context


@dataclass
class CourseRemote:
    """The course's repository as the learners' nbgitpuller reaches it: a bare repository
    (``path``: push to it as the course's maintainer) served read-only by ``git daemon``
    on 127.0.0.1 (``url``), as GitHub serves the real one. (A path or file:// URL would not
    do: a learner's git refuses a repository another user owns, "dubious ownership".)"""

    path: Path
    url: str
    proc: subprocess.Popen

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(10)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)


@contextlib.contextmanager
def course_remote(workdir: Path, name: str = "attention-course") -> Iterator[CourseRemote]:
    """A bare repository ``<workdir>/<name>.git`` holding the course as committed (HEAD, as
    branch ``main``), served by ``git daemon`` while the context lasts."""
    workdir.mkdir(parents=True, exist_ok=True)
    remote = workdir / f"{name}.git"
    if remote.exists():
        shutil.rmtree(remote)
    git = ["git", "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "--quiet", "--bare", str(remote)], check=True)
    subprocess.run(
        [*git, "-C", str(REPO), "push", "--quiet", str(remote), "HEAD:refs/heads/main"],
        check=True,
    )
    port = free_port()
    daemon = [
        "git", "daemon", "--reuseaddr", "--export-all", "--listen=127.0.0.1",
        f"--port={port}", f"--base-path={workdir}", str(workdir),
    ]  # fmt: skip
    served = CourseRemote(
        remote,
        f"git://127.0.0.1:{port}/{remote.name}",
        spawn_logged(daemon, workdir, os.environ, workdir / "git-daemon.log"),
    )
    try:
        deadline = time.monotonic() + 30
        while subprocess.run(
            ["git", "ls-remote", served.url], capture_output=True, check=False
        ).returncode:
            if served.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"git daemon did not serve {served.url}")
            time.sleep(0.2)
        yield served
    finally:
        served.stop()
