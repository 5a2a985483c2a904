"""`make lab`, the README's first command, works for every learner: as root and not.

Each case runs ``make lab`` itself, in a fresh checkout of this tree (its
tracked and unignored files, no ``my-notebooks/``), with a clean environment
and a home folder of its own, as the learner who owns that checkout:

- **root**, as in most containers (JupyterLab refuses root unless told;
  course/lab.py tells it, and says so);
- **an ordinary user**: this test's own user when it is not root; when it is,
  the unprivileged ``nobody`` (uid 65534) through ``setpriv``, with the
  checkout and the home folder given to that user.

The checkout's ``.venv`` is lent from this one (building an environment
takes minutes and is what ``make test`` from a clean clone already does),
with ``pyproject.toml`` dated before its stamp so that ``make`` does not
reinstall: a link to it, or, where the user cannot run its interpreter (a
Python under root's 0700 home, as on the course machine), a small venv on
the system's Python of the same version that reads this one's packages:
in place where the user can read them, else through hard links in the
venv (this checkout may lie in a folder only root can enter, as a clone
made in ``mktemp -d`` does). Where neither works the test says why, naming
the folder.
Then the lab page answers with the token from the printed link and refuses
without it, the server listens on 127.0.0.1 as that user, and
the learner's copies of the notebooks are there, theirs.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

import labdriver

REPO = labdriver.REPO
NOBODY = 65534
_LINK = re.compile(r"http://127\.0\.0\.1:(\d+)/lab\?token=([0-9a-f]{32,})")


def fresh_checkout(dest: Path, uid: int | None = None, lend_as_link: bool = True) -> Path:
    """This tree's tracked and unignored files in ``dest``, with a ``.venv`` lent
    (`lent_environment` for ``uid`` unless ``lend_as_link``)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    if lend_as_link:
        (dest / ".venv").symlink_to(REPO / ".venv")
    else:
        lent_environment(dest / ".venv", uid)
    stamp = (dest / ".venv" / ".installed").stat().st_mtime
    os.utime(dest / "pyproject.toml", (stamp - 60, stamp - 60))
    return dest


def _ours() -> Path:
    return REPO / ".venv" / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"


def system_python() -> Path | None:
    """The system's Python of this one's version (packages built for one load in the other)."""
    found = shutil.which(f"python{sys.version_info[0]}.{sys.version_info[1]}", path="/usr/bin")
    return Path(found) if found else None


def lent_environment(venv: Path, uid: int | None) -> None:
    """A venv on `system_python` that imports this one's packages and shares its ``share/``
    (JupyterLab's pages, the widget extensions), with the ``jupyter`` command and the
    stamp ``make`` looks for.

    Where ``uid`` can read this environment, one ``.pth`` line and a link lend it;
    where it cannot (a folder above it that only its owner may enter), hard links to
    its files inside ``venv`` do: a file's own mode decides who reads it, not the
    folder it was found through. Skips the test, naming the folder, where neither
    works (another file system).
    """
    python = system_python()
    subprocess.run([str(python), "-m", "venv", "--without-pip", str(venv)], check=True)
    site = venv / "lib" / _ours().name / "site-packages"
    packages, share = _ours() / "site-packages", REPO / ".venv" / "share"
    if uid is None or can_read(uid, packages):
        line = f"import site; site.addsitedir({str(packages)!r})\n"
        (site / "_lent_from_the_course_checkout.pth").write_text(line)
        (venv / "share").symlink_to(share)
    else:
        site.rmdir()
        for source, dest in ((packages, site), (share, venv / "share")):
            linked = subprocess.run(["cp", "-al", str(source), str(dest)], capture_output=True)
            if linked.returncode:
                pytest.skip(
                    f"uid {uid} cannot read {unreadable_folder(uid, source)}, where this "
                    f"checkout's environment lies, and cannot be lent it through hard links "
                    f"({linked.stderr.decode().strip()[-200:]}): clone the course into a "
                    "folder others can enter"
                )
    commands = {"jupyter": "jupyter_core.command", "jupyter-lab": "jupyterlab.labapp"}
    for name, module in commands.items():  # `jupyter lab` runs the jupyter-lab beside it
        script = venv / "bin" / name
        body = f"import sys\nfrom {module} import main\nsys.exit(main())\n"
        script.write_text(f"#!{venv / 'bin' / 'python'}\n{body}")
        script.chmod(0o755)
    (venv / ".installed").touch()


def _as(uid: int) -> list[str]:
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]


def can_read(uid: int, path: Path) -> bool:
    """Whether ``uid`` can read ``path`` (every folder above it entered)."""
    return subprocess.run([*_as(uid), "test", "-r", str(path)], timeout=60).returncode == 0


def unreadable_folder(uid: int, path: Path) -> Path:
    """The first folder on the way to ``path`` that ``uid`` cannot enter (else ``path``)."""
    for folder in reversed(path.parents):
        if subprocess.run([*_as(uid), "test", "-x", str(folder)], timeout=60).returncode:
            return folder
    return path


def give(path: Path, uid: int) -> None:
    """``path`` and all below it to ``uid``, but for a lent ``.venv``'s contents: those may
    be hard links to this environment's own files, which must stay as they are."""
    for found, folders, files in os.walk(path):
        if Path(found).name == ".venv":
            folders.clear()
            continue
        for name in [*folders, *files]:
            os.chown(Path(found) / name, uid, uid, follow_symlinks=False)
    os.chown(path, uid, uid)


def can_run(uid: int, program: Path) -> bool:
    """Whether ``uid`` can run the Python ``program`` from a shell, as make does.

    (setpriv running it directly is no proof: on the course machine that
    worked where a shell of the same user was refused.)
    """
    command = [*_as(uid), "/bin/sh", "-c", '"$0" -c pass', str(program)]
    return subprocess.run(command, capture_output=True, timeout=60).returncode == 0


def _get(url: str) -> tuple[int, str, str]:
    """(status, Location header, body) of a GET that follows no redirect and uses no proxy."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), NoRedirect)
    try:
        with opener.open(url, timeout=30) as response:
            return response.status, "", response.read().decode(errors="replace")
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Location", ""), error.read().decode(errors="replace")


@contextlib.contextmanager
def make_lab(
    checkout: Path, home: Path, uid: int | None
) -> Iterator[tuple[int, str, str, psutil.Process]]:
    """``make lab`` in ``checkout`` (as ``uid`` through setpriv; None: as this process);
    yields (port, token, output so far, the JupyterLab process) once the link is
    printed, and stops it after."""
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8", "BROWSER": "true"}
    command = ["make", "lab"]
    if uid is not None:
        command = [*_as(uid), *command]
    log_path = home / "make-lab.log"
    proc = labdriver.spawn_logged(command, checkout, env, log_path)
    try:
        deadline = time.monotonic() + 180
        while not (found := _LINK.search(log_path.read_text(errors="replace"))):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"`make lab` printed no link:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.5)
        server = next(  # make's, not another test's server under the same worker
            p
            for p in psutil.Process(proc.pid).children(recursive=True)
            if "jupyter-lab" in " ".join(p.cmdline())
        )
        yield int(found.group(1)), found.group(2), log_path.read_text(errors="replace"), server
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)


def learners() -> list:
    """(id, uid to run as or None, expected uid, why it cannot run or None)."""
    me = os.geteuid()
    if me == 0:
        setpriv = shutil.which("setpriv")
        why = None if setpriv else "setpriv (util-linux) is missing: cannot drop to nobody"
        if not why and not can_run(NOBODY, REPO / ".venv" / "bin" / "python"):
            python = system_python()
            if python is None or not can_run(NOBODY, python):
                why = (
                    "nobody can run neither this environment's Python nor a system "
                    f"python{sys.version_info[0]}.{sys.version_info[1]} to lend it"
                )
        return [("root", None, 0, None), ("ordinary-user", NOBODY, NOBODY, why)]
    return [
        ("root", None, 0, "this test runs as an ordinary user: it cannot start make lab as root"),
        ("ordinary-user", None, me, None),
    ]


@pytest.mark.parametrize(
    ("as_uid", "expected_uid", "cannot"),
    [case[1:] for case in learners()],
    ids=[case[0] for case in learners()],
)
def test_make_lab_serves_the_learner_with_its_token(as_uid, expected_uid, cannot) -> None:
    if cannot:
        pytest.skip(cannot)
    if not (REPO / ".venv" / ".installed").exists():
        pytest.skip("no .venv here to lend the checkout (run `make` first)")
    base = Path(tempfile.mkdtemp(prefix="make-lab-", dir="/tmp"))  # not under a 0700 folder
    try:
        base.chmod(0o755)
        link = as_uid is None or can_run(as_uid, REPO / ".venv" / "bin" / "python")
        checkout = fresh_checkout(base / "course", as_uid, lend_as_link=link)
        home = base / "home"
        home.mkdir()
        if as_uid is not None:
            for path in (checkout, home):
                give(path, as_uid)
        with make_lab(checkout, home, as_uid) as (port, token, output, server):
            url = f"http://127.0.0.1:{port}"
            status, _, page = _get(f"{url}/lab?token={token}")
            assert status == 200 and "<title>JupyterLab</title>" in page, (status, page[:300])
            status, location, page = _get(f"{url}/lab")
            assert status in (302, 403) and "JupyterLab" not in page, (status, page[:300])
            if status == 302:
                assert location.startswith("/login"), location
            assert _get(f"{url}/api/contents")[0] == 403
            assert _get(f"{url}/api/contents?token={token}")[0] == 200

            assert server.uids().real == expected_uid
            addresses = {
                c.laddr.ip for c in server.net_connections("tcp") if c.status == psutil.CONN_LISTEN
            }
            assert addresses == {"127.0.0.1"}, addresses
            assert ("running as root" in output) == (expected_uid == 0), output[-2000:]

            mine = checkout / "my-notebooks"
            course = sorted(p.name for p in (checkout / "notebooks").glob("*.ipynb"))
            assert sorted(p.name for p in mine.glob("*.ipynb")) == course
            assert all(p.stat().st_uid == expected_uid for p in mine.iterdir())
            assert f"root_dir={mine}" in " ".join(server.cmdline())
    finally:
        shutil.rmtree(base, ignore_errors=True)
