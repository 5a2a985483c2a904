"""A class on one server: the course's JupyterHub, with real system learners, in Chromium.

One hub for the module (teachers/hub/jupyterhub_config.py, run by `labdriver.hub` as
``python -m course hub start`` runs it: proxy from npm, LocalProcessSpawner, the idle
culler), two learners made with ``useradd`` and removed with ``userdel -r`` at the end
whatever happens, the course served by ``git daemon`` in place of GitHub. Each learner
logs in through the hub's login form and lands, through the course's nbgitpuller link, on
00_start_here in their own home.

- the hub: each learner runs 01 (no error output, every explorer drawn, a slider redraws);
- security: one learner cannot reach the other's server, files or hub API, with their
  cookies or their token; no request without credentials is served; only the teacher is an
  admin; everything listens on 127.0.0.1; homes are the learner's own (mode 700);
- a graded class: ``hub install --graded`` leaves the learners' Python no solution, through
  a later install too, and ``--no-graded`` brings them back;
- updates: the link again after a course commit brings the new 05 and keeps the learner's
  saved 02 work; a deleted notebook comes back; a malformed link or a missing branch says
  so and changes nothing;
- the teacher's own command, ``python -m course hub start``, with PAM: a learner of the
  class logs in with their password; a wrong password, and a system user outside the
  class, do not; the learner's server, left idle, is stopped by the idle culler.

Run as root by ``make test-hub`` (not ``make test``: a few minutes); skips, saying why,
when not root or without Chromium, npm or git.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

import psutil
import pytest
from test_front_ends import QUICK, run_in_notebook_ui

import labdriver
from course import hub as course_hub
from course.hub import pull_link
from labdriver import OPEN_TIMEOUT_MS
from labdriver import hub as hubdriver
from labdriver.wire import WireLearner, slider_position

pytestmark = [pytest.mark.hub, pytest.mark.slow]

ADA, BOB = "hubtest-ada", "hubtest-bob"
OUTSIDER = "hubtest-outsider"  # a system user who is not in the class
CULL_S = 20  # the idle culler's timeout in the test of the teacher's command
COURSE = "attention-course"  # the folder nbgitpuller makes: the repository's name
NOTEBOOKS = f"{COURSE}/notebooks/"
EXERCISE_NB = "02_developer_scaling.ipynb"
UPDATED_NB = "05_researcher_cost_and_tiling.ipynb"
DELETED_NB = "03_developer_pytorch_and_mistakes.ipynb"
TYPED = "my_note = 42  # typed by the learner"
STARTER = "# the course's new first line\n"  # the course's update to the exercise cell


@pytest.fixture(scope="module")
def ready():
    reason = hubdriver.hub_missing()
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="module")
def workdir(ready):
    with tempfile.TemporaryDirectory(prefix="hub-test-") as folder:
        yield Path(folder)


@pytest.fixture(scope="module")
def remote(workdir):
    with hubdriver.course_remote(workdir / "remote") as served:
        yield served


@pytest.fixture(scope="module")
def hub(workdir, remote):
    for name in (ADA, BOB):  # left by a run that was killed before it could clean up
        course_hub.remove_learner(name)
    with hubdriver.running_hub(workdir / "hub", [ADA, BOB], repo=remote.url) as running:
        yield running


@pytest.fixture(scope="module")
def learners(hub, chromium):
    """Each learner's browser context, logged in through the login form."""
    contexts = {}
    try:
        for name in (ADA, BOB):
            contexts[name] = hubdriver.log_in(chromium, hub, name)
        yield contexts
    finally:
        for context in contexts.values():
            context.close()


def home(name: str) -> Path:
    return Path(f"/home/{name}")


def tree_digest(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` but git's own, with its content's hash."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(folder).parts
    }


# -- the hub ------------------------------------------------------------------------------


def test_each_learner_lands_on_the_course_with_its_lab_settings(hub, learners):
    overrides = json.loads(
        (labdriver.REPO / "jupyter" / "labconfig" / "default_setting_overrides.json").read_text()
    )
    tracker = "@jupyterlab/notebook-extension:tracker"
    for name in (ADA, BOB):
        course = home(name) / COURSE
        assert (course / "notebooks" / QUICK).is_file(), f"{name}: no course in {course}"
        answer = learners[name].request.get(f"{hub.server(name).url}/lab/api/settings/{tracker}")
        assert answer.status == 200, answer.status
        defaults = {k: v.get("default") for k, v in answer.json()["schema"]["properties"].items()}
        wanted = overrides[tracker]
        assert {k: defaults[k] for k in wanted} == wanted, f"{name}: course settings not applied"
        # nor does a learner's server load nbgrader (its formgrader answers 302 where loaded)
        formgrader = learners[name].request.get(f"{hub.server(name).url}/formgrader")
        assert formgrader.status == 404, f"{name}'s server serves the formgrader"
        # the landing notebook's kernel was shut down by log_in: none runs yet
        kernels = learners[name].request.get(f"{hub.server(name).url}/api/kernels")
        assert kernels.status == 200 and kernels.json() == [], kernels.text()


@pytest.mark.parametrize("name", [ADA, BOB])
def test_each_learner_runs_01_draws_and_moves(name, hub, learners, chromium):
    run_in_notebook_ui(
        chromium,
        hub.server(name),
        QUICK,
        "lab",
        f"hub, {name}, {QUICK}",
        folder=NOTEBOOKS,
        context=learners[name],
    )


def test_a_learner_on_the_wire_goes_through_the_same_doors(hub, learners):
    """The class-load benchmark's learners beyond its browsers (`labdriver.wire`): the login
    form, the landing link's pull, a session in their home, Run All, a slider's frame."""
    learner = WireLearner.log_in(hub.url, BOB, hub.password)
    try:
        learner.open(f"{NOTEBOOKS}{QUICK}")
        _, errors = learner.run_all()
        assert errors == []
        slider = learner.sliders()[0]
        at_max = slider_position(slider.state, slider.model) >= slider.state["max"]
        assert learner.press(slider, -1 if at_max else 1) is not None
        assert learner.last_frame.startswith(b"\x89PNG")
    finally:
        learner.shut_down()  # the tests after this one expect no kernel of 01's


# -- security -----------------------------------------------------------------------------


def test_a_learner_cannot_reach_another_learners_server_files_or_api(hub, learners):
    ada = learners[ADA]
    status, body = hub.api("POST", f"/users/{ADA}/tokens", body={"note": "test"})
    assert status in (200, 201), body
    token = body["token"]
    bob = hub.server(BOB).url
    targets = [
        f"{bob}/lab",
        f"{bob}/api/contents/{NOTEBOOKS.rstrip('/')}",
        f"{bob}/files/{NOTEBOOKS}{QUICK}",
        f"{bob}/api/kernels",
        f"{hub.url}/hub/api/users/{BOB}",
    ]
    refused = {}
    for url in targets:
        with_cookies = ada.request.get(url).status  # redirects followed, to the hub's answer
        with_token = hubdriver.request("GET", url, token)[0]
        refused[url] = (with_cookies, with_token)
    for method, path in [
        ("POST", f"/users/{BOB}/server"),
        ("DELETE", f"/users/{BOB}/server"),
        ("POST", f"/users/{BOB}/tokens"),
        ("GET", f"/users/{BOB}/tokens"),
    ]:
        refused[f"{method} {path}"] = (None, hub.api(method, path, token)[0])
    allowed = {u: codes for u, codes in refused.items() if not set(codes) <= {None, 403, 404}}
    assert allowed == {}, f"{ADA} reached {BOB}'s: {allowed}"
    # the same token does open Ada's own server: the refusals above are about Bob
    assert hubdriver.request("GET", f"{hub.server(ADA).url}/api/contents/", token)[0] == 200


def test_a_request_without_credentials_is_refused(hub, learners):
    for url in [
        f"{hub.server(ADA).url}/api/contents/{NOTEBOOKS.rstrip('/')}",
        f"{hub.server(ADA).url}/files/{NOTEBOOKS}{QUICK}",
        f"{hub.url}/hub/api/users",
        f"{hub.url}/hub/api/users/{ADA}",
    ]:
        status, body = hubdriver.request("GET", url)
        # a page redirects to the hub's login (302), an API answers 401/403: never content
        to_login = status == 302 and urllib.parse.urlparse(body).path.startswith("/hub/")
        assert to_login or status in (401, 403), f"{url}: {status} {body!r:.200}"


def test_only_the_teacher_is_an_admin(hub):
    status, users = hub.api("GET", "/users")
    assert status == 200
    assert {u["name"]: u["admin"] for u in users} == {"teacher": True, ADA: False, BOB: False}


def test_the_idle_culler_runs_as_a_hub_service(hub):
    status, service = hub.api("GET", "/services/idle-culler")
    assert status == 200 and service["pid"], service
    command = psutil.Process(service["pid"]).cmdline()
    assert "jupyterhub_idle_culler" in command and "--timeout=3600" in command, command


def test_everything_listens_on_localhost_only(hub, learners):
    uids = {psutil.Process().uids().real}
    uids |= {int(subprocess.check_output(["id", "-u", n], text=True)) for n in (ADA, BOB)}
    mine = [hub.proc.pid, *(p.pid for p in psutil.Process(hub.proc.pid).children(True))]
    listening = {
        (c.laddr.ip, c.laddr.port, c.pid)
        for c in psutil.net_connections("inet")
        if c.status == psutil.CONN_LISTEN and c.pid in mine
    }
    ports = {port for _, port, _ in listening}
    assert hub.port in ports, f"nothing listens on the hub's port {hub.port}: {listening}"
    assert len(ports) >= 4, f"hub, proxy API and two learners' servers expected: {listening}"
    assert all(hub.processes(n) for n in (ADA, BOB)), "a learner's server is not running"
    wide = {s for s in listening if s[0] not in ("127.0.0.1", "::1")}
    assert wide == set(), f"listening beyond localhost: {wide}"


def test_a_learners_files_are_theirs_alone(hub, learners):
    for owner, other in [(ADA, BOB), (BOB, ADA)]:
        uid = int(subprocess.check_output(["id", "-u", owner], text=True))
        folder = home(owner)
        notebook = folder / NOTEBOOKS / QUICK
        assert folder.stat().st_uid == uid and notebook.stat().st_uid == uid
        assert folder.stat().st_mode & 0o077 == 0, f"{folder}: mode {folder.stat().st_mode:o}"
        tried = subprocess.run(
            ["runuser", "-u", other, "--", "cat", str(notebook)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert tried.returncode != 0 and "Permission denied" in tried.stderr, tried
        assert tried.stdout == ""


# -- course updates by nbgitpuller --------------------------------------------------------


def _notebook(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _write_notebook(path: Path, nb: dict) -> None:
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def _exercise_cell(nb: dict) -> int:
    """The "your own attention" exercise's cell (my_attention)."""
    return next(
        i
        for i, c in enumerate(nb["cells"])
        if c["cell_type"] == "code" and "".join(c["source"]).startswith("def my_attention")
    )


def _commit_update(remote, workdir: Path) -> dict[str, bytes]:
    """The course's maintainer changes 02 (its title, and the learner's exercise cell) and 05,
    commits and pushes; returns the new files' bytes."""
    clone = workdir / "maintainer"
    subprocess.run(["git", "clone", "--quiet", str(remote.path), str(clone)], check=True)
    nb02 = clone / "notebooks" / EXERCISE_NB
    nb = _notebook(nb02)
    nb["cells"][1]["source"][0] = nb["cells"][1]["source"][0].rstrip("\n") + " (updated)\n"
    cell = nb["cells"][_exercise_cell(nb)]
    # a line the learner did not touch (merged in) and the line their typing follows (both
    # changed it: a conflict, which nbgitpuller settles for the learner)
    cell["source"] = [STARTER, *cell["source"][:-1], cell["source"][-1] + "  # run me"]
    _write_notebook(nb02, nb)
    nb05 = clone / "notebooks" / UPDATED_NB
    nb = _notebook(nb05)
    first = next(c for c in nb["cells"] if c["cell_type"] == "markdown")
    first["source"].append("\n\n*Updated for this class.*")
    _write_notebook(nb05, nb)
    git = ["git", "-C", str(clone), "-c", "user.name=Course", "-c", "user.email=c@example.org"]
    subprocess.run([*git, "commit", "--quiet", "-am", "update 02 and 05"], check=True)
    subprocess.run([*git, "push", "--quiet", "origin", "HEAD:main"], check=True)
    return {name: (clone / "notebooks" / name).read_bytes() for name in (EXERCISE_NB, UPDATED_NB)}


def _click_link(hub, context, link: str) -> tuple[str, str]:
    """Open ``link`` as the learner; wait for JupyterLab, nbgitpuller's error panel or an
    error page. ("lab", URL), ("error", the page's text and nbgitpuller's log) or
    ("http <status>", the page's text)."""
    page = context.new_page()
    try:
        response = page.goto(link, wait_until="domcontentloaded", timeout=OPEN_TIMEOUT_MS)
        if response is not None and response.status >= 400:
            return f"http {response.status}", page.inner_text("body")
        page.wait_for_function(
            "() => !!document.querySelector('.jp-LabShell')"
            " || !!document.querySelector('#container-error:not(.hidden)')",
            timeout=OPEN_TIMEOUT_MS,
            polling=250,
        )
        if page.query_selector(".jp-LabShell"):
            return "lab", page.url
        log = page.locator("#status-details").text_content() or ""
        return "error", page.inner_text("body") + "\n" + log
    finally:
        page.close()


def _type_in_exercise(hub, context, name: str) -> None:
    """Open 02, type a line at the end of the exercise cell, File ▸ Save."""
    path = NOTEBOOKS + EXERCISE_NB
    nb = labdriver.NotebookPage.open(
        None, hub.server(name), path, workspace="exercise", context=context
    )
    try:
        index = _exercise_cell(_notebook(home(name) / path))
        nb.page.evaluate(
            """(i) => { const nb = window.jupyterapp.shell.currentWidget.content;
                        nb.activeCellIndex = i; nb.activeCell.node.scrollIntoView(); }""",
            index,
        )
        nb.page.locator(".jp-Cell.jp-mod-active .cm-content").click()
        nb.page.keyboard.press("Control+End")
        nb.page.keyboard.press("Enter")
        nb.page.keyboard.type(TYPED)
        labdriver.save_notebook(nb)
    finally:
        nb.close()


def test_an_update_keeps_the_learners_saved_work(hub, learners, remote, workdir):
    mine = home(ADA) / NOTEBOOKS
    _type_in_exercise(hub, learners[ADA], ADA)
    saved = _notebook(mine / EXERCISE_NB)
    index = _exercise_cell(saved)
    assert "".join(saved["cells"][index]["source"]).endswith(TYPED), "the typing was not saved"
    new = _commit_update(remote, workdir)
    link = pull_link(hub.url, remote.url)
    outcome, text = _click_link(hub, learners[ADA], link)
    assert outcome == "lab", text[-2000:]
    assert text.endswith(f"/user/{ADA}/lab/tree/{COURSE}/notebooks/00_start_here.ipynb"), text
    assert (mine / UPDATED_NB).read_bytes() == new[UPDATED_NB], "05 was not updated"
    after = _notebook(mine / EXERCISE_NB)
    # every line the learner saved is there as saved; the course's untouched-line change too
    mixed = dict(saved["cells"][index], source=[STARTER, *saved["cells"][index]["source"]])
    assert after["cells"][index] == mixed, "the learner's exercise was not kept as saved"
    # nbgitpuller merges the course's other changes to the file (git merge -Xours)
    upstream = json.loads(new[EXERCISE_NB])
    assert after["cells"][1] == upstream["cells"][1], "02's updated title did not arrive"
    others = [i for i in range(len(saved["cells"])) if i not in (1, index)]
    assert [after["cells"][i] for i in others] == [saved["cells"][i] for i in others]


def test_a_deleted_notebook_comes_back(hub, learners, remote):
    page = learners[BOB].new_page()
    try:
        page.goto(f"{hub.server(BOB).url}/lab", wait_until="domcontentloaded")
        page.wait_for_function("() => !!window.jupyterapp", timeout=OPEN_TIMEOUT_MS)
        page.evaluate(
            "(p) => window.jupyterapp.serviceManager.contents.delete(p)", NOTEBOOKS + DELETED_NB
        )
    finally:
        page.close()
    gone = home(BOB) / NOTEBOOKS / DELETED_NB
    assert not gone.exists()
    outcome, text = _click_link(hub, learners[BOB], pull_link(hub.url, remote.url))
    assert outcome == "lab", text[-2000:]
    committed = subprocess.run(
        ["git", "-C", str(remote.path), "show", f"main:notebooks/{DELETED_NB}"],
        capture_output=True,
        check=True,
    ).stdout
    assert gone.read_bytes() == committed, "nbgitpuller did not restore the deleted notebook"


@pytest.mark.parametrize(
    ("change", "outcome", "message"),
    [
        ("branch", "error", "Branch does not exist"),
        ("repo", "error", "Remote content unavailable"),
        ("no-repo", "http 400", "Missing argument repo"),
    ],
)
def test_a_bad_link_says_so_and_changes_nothing(change, outcome, message, hub, learners, remote):
    before = tree_digest(home(ADA))
    link = {
        "branch": pull_link(hub.url, remote.url, branch="no-such-branch"),
        "repo": pull_link(hub.url, remote.url.replace(COURSE, "nowhere")),
        "no-repo": f"{hub.url}/hub/user-redirect/git-pull?branch=main",
    }[change]
    seen, text = _click_link(hub, learners[ADA], link)
    assert (seen, message in text) == (outcome, True), text[-2000:]
    # nothing in the learner's home changed, and nothing was added (no ~/nowhere)
    after = tree_digest(home(ADA))
    changed = {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
    assert {p for p in changed if not p.startswith(".")} == set(), changed


# -- a graded class -----------------------------------------------------------------------

_FIND_ANSWERS = (
    "import importlib.util as u; "
    "print(u.find_spec('attention_course.lessons.exercises.answers') is not None)"
)


def _learner_reaches_solutions(name: str) -> bool:
    """Whether learner ``name``'s Python on the hub (their kernels') can import the solutions."""
    python = course_hub.PREFIX / "user" / "bin" / "python"
    done = subprocess.run(
        ["runuser", "-u", name, "--", str(python), "-c", _FIND_ANSWERS],
        capture_output=True,
        text=True,
        check=False,
        cwd="/",
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip() == "True"


def test_a_graded_class_leaves_the_learners_no_solution(hub):
    """``hub install --graded``: the learners' environment holds no solution, and keeps none
    through a later install (``start`` installs first); ``--no-graded`` reinstalls the
    course's copy, solutions included. Last of the module's hub: the reinstall replaces the
    course under the learners' running servers."""
    assert _learner_reaches_solutions(ADA)
    try:
        assert course_hub.main(["install", "--graded"]) == 0
        assert not _learner_reaches_solutions(ADA)
        assert course_hub.main(["install"]) == 0  # as `hub start` does: still graded
        assert not _learner_reaches_solutions(ADA)
    finally:
        assert course_hub.main(["install", "--no-graded"]) == 0
    assert _learner_reaches_solutions(ADA)
    assert not (course_hub.PREFIX / course_hub.GRADED_MARKER).exists()


# -- the teacher's own command, with PAM ----------------------------------------------------


def test_the_teachers_command_lets_in_the_class_alone_and_culls_idle_servers(ready, chromium):
    """``python -m course hub start`` as docs/teachers.md says, with its default authenticator
    (PAM: the system users' own passwords, the class's group alone), and its idle culler
    (here after `CULL_S` seconds, not an hour)."""
    name, password = "hubtest-pam", "Pam-pass-42"
    for user in (name, OUTSIDER):  # left by a run that was killed before it could clean up
        course_hub.remove_learner(user)
    state = Path(tempfile.mkdtemp(prefix="hub-pam-"))
    port = labdriver.free_port()
    made_group = subprocess.run(["getent", "group", course_hub.LEARNERS_GROUP]).returncode
    course_hub.add_learner(name)
    # a system user with a password who is not in the class's group
    subprocess.run(["useradd", "--no-create-home", OUTSIDER], check=True)
    passwords = f"{name}:{password}\n{OUTSIDER}:{password}\n"
    subprocess.run(["chpasswd"], input=passwords, text=True, check=True)
    command = [sys.executable, "-m", "course", "hub", "start", f"--port={port}"]
    token = secrets.token_hex(24)
    env = dict(
        os.environ,
        **hubdriver.local_ports(),  # beside the module's hub
        COURSE_HUB_CULL_TIMEOUT=str(CULL_S),
        COURSE_HUB_TEST_TOKEN=token,  # to watch the learner's server through the hub's API
    )
    proc = labdriver.spawn_logged(
        [*command, f"--state={state}"], labdriver.REPO, env, state / "hub.log"
    )
    started = hubdriver.Hub(proc, port, state, state / "hub.log", password, token)
    context = chromium.new_context()
    try:
        page = context.new_page()
        page.set_default_timeout(OPEN_TIMEOUT_MS)
        url = f"http://127.0.0.1:{port}/hub/login"
        for _ in range(240):
            assert proc.poll() is None, started.log_tail()
            if _answers(url):
                break
            time.sleep(0.5)
        tries = {}
        for user, secret in [(OUTSIDER, password), (name, "wrong"), (name, password)]:
            page.goto(url)
            page.fill("#username_input", user)
            page.fill("#password_input", secret)
            page.click("#login_submit")
            page.wait_for_load_state("domcontentloaded")
            tries[user, secret] = "/hub/login" not in page.url
        assert tries == {
            (OUTSIDER, password): False,
            (name, "wrong"): False,
            (name, password): True,
        }
        # the learner's server starts; once they leave, the idle culler stops it
        assert _server_becomes(started, name, lambda s: bool(s) and s["ready"]), "no server"
        context.close()
        assert _server_becomes(started, name, lambda s: s is None), "the idle server stayed"
    finally:
        context.close()
        started.stop()
        course_hub.remove_learner(name)
        subprocess.run(["userdel", OUTSIDER], check=False)
        if made_group:
            subprocess.run(["groupdel", course_hub.LEARNERS_GROUP], check=False)
        shutil.rmtree(state, ignore_errors=True)


def _server_becomes(hub, name: str, wanted, timeout: float = 180) -> bool:
    """Poll the hub's API until learner ``name``'s server (None: none) is ``wanted``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, user = hub.api("GET", f"/users/{name}")
        if status == 200 and wanted(user["servers"].get("")):
            return True
        time.sleep(1)
    return False


def _answers(url: str) -> bool:
    try:
        return hubdriver.request("GET", url)[0] == 200
    except OSError:
        return False
