"""A class on one server: JupyterHub for the learners (``python -m course hub ...``, as root).

The shape is The Littlest JupyterHub's, on this course's environment:

- ``install``: the learners' environment in its own prefix (``/opt/attention-course``
  unless ``COURSE_HUB_PREFIX`` says otherwise), made with Debian's ``/usr/bin/python3``:
  a Python every user can run (the machine's default Python may live under ``/root``,
  which a learner's server cannot enter). It holds the library and the course, with
  JupyterLab (the ``lab`` extra), at constraints.txt's pins (torch as the CPU build from
  Binder's index, binder/requirements.txt), and the ``teach`` extra (JupyterHub, whose
  ``jupyterhub-singleuser`` runs each learner's server, the idle culler, nbgitpuller).
  The hub runs from the same environment: one set of pins, and the hub and the learners'
  servers are the same JupyterHub version, as they must be. configurable-http-proxy
  comes from npm (teachers/hub/package.json pins it) into ``<prefix>/proxy``. The
  course's Jupyter settings (``jupyter/``: the lab defaults, nbgrader left out) are
  copied to ``<prefix>/jupyter``, which each learner's server puts on
  ``JUPYTER_CONFIG_PATH``, as ``make lab`` does; the teacher's server reads
  ``<prefix>/jupyter-teacher``, the same defaults with nbgrader on (`write_settings`).
  A stamp keyed on the pins and the course's sources skips all of it when nothing changed.
  ``install --graded`` makes it a graded class's environment: the course's solutions
  (``python -m course graded strip``) removed, now and after every later install or
  ``start``, until ``install --no-graded`` puts them back.
- ``learners add NAME...`` / ``learners remove NAME...``: system users (``useradd``,
  home mode 700, in the group ``attention-learners``; ``userdel -r``), one server and one
  home each.
- ``start``: the hub, with teachers/hub/jupyterhub_config.py; its settings are
  ``COURSE_HUB_*`` environment variables (see that file), the course's nbgitpuller link
  the page each learner lands on.
- ``link HUB_URL``: the nbgitpuller link that brings the course (and each update) into a
  learner's home and opens 00_start_here.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import urllib.parse
from pathlib import Path

from . import graded as course_graded
from .environment import install_arguments
from .paths import REPO
from .project import pin, repository

__all__ = [
    "CONFIG",
    "PREFIX",
    "add_learner",
    "hub_command",
    "install",
    "pull_link",
    "remove_learner",
    "stamp_key",
    "write_settings",
]

#: where the learners' environment, the proxy and the lab settings go
PREFIX = Path(os.environ.get("COURSE_HUB_PREFIX", "/opt/attention-course"))
#: the hub's configuration, read by ``jupyterhub -f``
CONFIG = REPO / "teachers" / "hub" / "jupyterhub_config.py"
#: the Python the learners' environment is made from: outside /root, runnable by everyone
BASE_PYTHON = "/usr/bin/python3"
#: the system group of the class: `add_learner` puts each learner in it, and a hub started
#: without a list of learners lets in its members alone (jupyterhub_config.py)
LEARNERS_GROUP = "attention-learners"
#: in the prefix, when the class is graded: each install strips the solutions again
GRADED_MARKER = ".graded"
#: the teacher's settings folder under the prefix (`write_settings`)
TEACHER_SETTINGS = "jupyter-teacher"
#: the solutions' one module, in the installed course (python -m course graded strip)
_ANSWERS = "attention_course/lessons/exercises/answers.py"
#: the notebook a learner lands on, relative to the course's folder in their home
START_NOTEBOOK = "notebooks/00_start_here.ipynb"
#: a learner's name: what useradd accepts and nothing a shell or a URL would bend
_NAME = re.compile(r"[a-z_][a-z0-9_-]{0,31}")


def _pins() -> str:
    """The text the environment is built from: the runtime pins, the teach extra, Binder's
    CPU index, the proxy's pin."""
    return "\n".join(
        (REPO / name).read_text(encoding="utf-8")
        for name in (
            "pyproject.toml",
            "lib/pyproject.toml",
            "constraints.txt",
            "binder/requirements.txt",
            "teachers/hub/package.json",
        )
    )


def stamp_key() -> str:
    """A hash of everything the installed environment is made from: the pins, the course's
    importable sources (installed as a copy, not editable), its lab settings and its built
    lab extension (a wheel's data files), not the extension's build tools (node_modules)."""
    digest = hashlib.sha256(_pins().encode())
    for top in ("lib/attention_lib", "attention_course", "course", "jupyter"):
        for path in sorted((REPO / top).rglob("*")):
            if path.is_file() and not {"__pycache__", "node_modules"} & set(path.parts):
                digest.update(str(path.relative_to(REPO)).encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()


def _torch_index() -> str:
    """Binder's CPU-build index for torch (binder/requirements.txt: the one place it is
    written): PyPI's Linux torch wheel is the CUDA build, several GB."""
    text = (REPO / "binder" / "requirements.txt").read_text(encoding="utf-8")
    found = re.search(r"^--extra-index-url\s+(\S+)", text, re.MULTILINE)
    if not found:
        raise LookupError("binder/requirements.txt names no --extra-index-url (torch's CPU build)")
    return found.group(1)


def _require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise SystemExit(f"course hub {what}: must run as root (it makes users or writes /opt)")


def install(prefix: Path = PREFIX, *, force: bool = False, graded: bool | None = None) -> Path:
    """Make or update the environment under ``prefix`` (see the module's docstring);
    returns its ``jupyterhub`` command. Does nothing when the stamp matches, but for
    ``graded``: True strips the course's solutions from it (and marks the prefix so that
    every later install does too), False puts them back, None keeps the prefix's choice."""
    _require_root("install")
    marker = prefix / GRADED_MARKER
    if graded is None:
        graded = marker.exists()
    python = str(prefix / "user" / "bin" / "python")
    stamp = prefix / ".installed"
    key = stamp_key()
    hub = prefix / "user" / "bin" / "jupyterhub"
    proxy = prefix / "proxy" / "node_modules" / ".bin" / "configurable-http-proxy"
    current = stamp.exists() and stamp.read_text().strip() == key and proxy.exists()
    # an ungraded class needs the solutions a graded one stripped: the course reinstalled
    if force or not current or (not graded and not _has_solutions(prefix)):
        _build(prefix, key)
    if graded:
        if course_graded.strip(python):
            raise SystemExit(f"course hub install: could not strip the solutions from {prefix}")
        marker.write_text("the course's solutions are stripped from user/ at each install\n")
    else:
        marker.unlink(missing_ok=True)
        if not _has_solutions(prefix):
            raise SystemExit(f"course hub install: the course's solutions are missing in {prefix}")
    return hub


def _has_solutions(prefix: Path) -> bool:
    """Whether the course installed under ``prefix`` (a copy, in site-packages) holds its
    solutions (answers.py)."""
    return any((prefix / "user").glob(f"lib/python3*/site-packages/{_ANSWERS}"))


def _build(prefix: Path, key: str) -> None:
    """Make or update the environment under ``prefix``, then write its stamp, ``key``."""
    user = prefix / "user"
    stamp = prefix / ".installed"
    if not Path(BASE_PYTHON).exists():
        raise SystemExit(f"course hub install: {BASE_PYTHON} is missing (apt-get install python3)")
    prefix.mkdir(parents=True, exist_ok=True)
    os.chmod(prefix, 0o755)
    if not (user / "bin" / "python").exists():
        print(f"course hub: making {user} with {BASE_PYTHON}", file=sys.stderr)
        subprocess.run([BASE_PYTHON, "-m", "venv", str(user)], check=True)
    # A copy of the course, not an editable install: the repository may sit where learners
    # cannot read (under /root), and their kernels import attention_lib from here.
    builds = [folder for folder in (REPO / "build", REPO / "lib" / "build") if not folder.exists()]
    pip = [str(user / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    # torch first, alone with Binder's CPU index (one retry: a closed network answers fast)
    subprocess.run(
        [*pip, "--retries", "1", "--extra-index-url", _torch_index(), pin("torch")],
        cwd=prefix, check=True,
    )  # fmt: skip
    subprocess.run([*pip, *install_arguments("lab,teach", editable=False)], cwd=prefix, check=True)
    for folder in builds:  # setuptools' builds of the copies, made in the repository
        shutil.rmtree(folder, ignore_errors=True)
    proxy_dir = prefix / "proxy"
    proxy_dir.mkdir(exist_ok=True)
    shutil.copy2(REPO / "teachers" / "hub" / "package.json", proxy_dir / "package.json")
    subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--omit=dev", "--prefix", str(proxy_dir)],
        check=True,
    )
    write_settings(prefix)
    subprocess.run(["chmod", "-R", "a+rX", str(prefix)], check=True)
    stamp.write_text(key + "\n")


def write_settings(prefix: Path) -> None:
    """The course's Jupyter settings, copied where every user can read them.

    ``<prefix>/jupyter`` (each learner's ``JUPYTER_CONFIG_PATH``): the course's folder
    ``jupyter/`` as ``make lab`` reads it, its lab defaults and the switches that leave
    nbgrader out of a learner's server (its JupyterLab extension, and its server extensions:
    about 10 MiB of each learner's server, PSS, where jupyterhub-singleuser has already
    loaded much of what nbgrader imports). ``<prefix>/jupyter-teacher`` (an admin's,
    `TEACHER_SETTINGS`): the same lab defaults with nbgrader on, for the formgrader.
    """
    course = REPO / "jupyter"
    learners, teacher = prefix / "jupyter", prefix / TEACHER_SETTINGS
    for settings in (learners, teacher):
        shutil.rmtree(settings, ignore_errors=True)
    shutil.copytree(course / "labconfig", learners / "labconfig")
    shutil.copytree(course / "jupyter_server_config.d", learners / "jupyter_server_config.d")
    (teacher / "labconfig").mkdir(parents=True)
    shutil.copy2(
        course / "labconfig" / "default_setting_overrides.json",
        teacher / "labconfig" / "default_setting_overrides.json",
    )


def add_learner(name: str) -> Path:
    """A system user ``name``, in the class's group, with a home of their own that no one else
    may read; its path."""
    import pwd  # POSIX only, like useradd: imported here so the other commands load anywhere

    _require_root("learners add")
    if not _NAME.fullmatch(name):
        raise ValueError(f"learner name {name!r}: use lowercase letters, digits, - and _")
    subprocess.run(["groupadd", "--force", LEARNERS_GROUP], check=True)
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(
            ["useradd", "--create-home", "--shell", "/bin/bash", "--groups", LEARNERS_GROUP, name],
            check=True,
        )
    else:
        subprocess.run(["usermod", "--append", "--groups", LEARNERS_GROUP, name], check=True)
    home = Path(pwd.getpwnam(name).pw_dir)
    os.chmod(home, 0o700)  # Debian's useradd leaves homes readable by all (UMASK 022)
    return home


def remove_learner(name: str) -> None:
    """Remove user ``name`` and their home (``userdel -r``); nothing if there is no such user.
    Their processes are ended first (userdel refuses a user who is logged in)."""
    import pwd

    _require_root("learners remove")
    try:
        pwd.getpwnam(name)
    except KeyError:
        return
    subprocess.run(["pkill", "-KILL", "-u", name], check=False)
    subprocess.run(["userdel", "--remove", name], check=True, stderr=subprocess.DEVNULL)


def pull_link(
    hub_url: str,
    repo: str | None = None,
    branch: str = "main",
    start: str = START_NOTEBOOK,
) -> str:
    """The nbgitpuller link: clone or update ``repo`` into ``~/<its name>`` and open
    ``start`` in JupyterLab. ``repo`` None: pyproject.toml's repository (course.project)."""
    if repo is None:
        owner, name = repository()
        repo = f"https://github.com/{owner}/{name}"
    folder = course_folder(repo)
    query = urllib.parse.urlencode(
        {
            "repo": repo,
            "branch": branch,
            "targetpath": folder,
            "urlpath": f"lab/tree/{folder}/{start}",
        }
    )
    return f"{hub_url.rstrip('/')}/hub/user-redirect/git-pull?{query}"


def course_folder(repo: str) -> str:
    """The folder nbgitpuller makes in a learner's home: the repository's name."""
    path = urllib.parse.urlparse(repo).path  # a plain path is all path
    name = path.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git")
    if not name:
        raise ValueError(f"repository address {repo!r} names no repository")
    return name


def hub_command(prefix: Path = PREFIX) -> list[str]:
    """The command line that runs the hub with the course's configuration."""
    return [str(prefix / "user" / "bin" / "jupyterhub"), "-f", str(CONFIG)]


def hub_environment(
    *,
    prefix: Path = PREFIX,
    state: Path,
    ip: str,
    port: int,
    repo: str | None = None,
    branch: str = "main",
) -> dict[str, str]:
    """The ``COURSE_HUB_*`` settings jupyterhub_config.py reads, over this environment
    (an admin, the authenticator, the culler's timeout... are taken from it as they are)."""
    env = dict(os.environ)
    link = pull_link(f"http://{ip}:{port}", repo, branch)
    env.update(
        COURSE_HUB_PREFIX=str(prefix),
        COURSE_HUB_STATE=str(state),
        COURSE_HUB_IP=ip,
        COURSE_HUB_PORT=str(port),
        # the page a learner's login lands on: the pull link's path, on their own server
        COURSE_HUB_DEFAULT_URL=link.split("/hub/user-redirect", 1)[1],
    )
    return env


def _start(args: argparse.Namespace) -> int:
    _require_root("start")
    install(args.prefix)
    state = Path(args.state)
    state.mkdir(parents=True, exist_ok=True)
    os.chmod(state, 0o700)  # the cookie secret and the database: root's alone
    env = hub_environment(
        prefix=args.prefix,
        state=state,
        ip=args.ip,
        port=args.port,
        repo=args.repo,
        branch=args.branch,
    )
    command = hub_command(args.prefix)
    print(f"course hub: {' '.join(command)} (in {state})", file=sys.stderr)
    os.chdir(state)
    os.execve(command[0], command, env)
    return 0  # pragma: no cover


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course hub",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--prefix", type=Path, default=PREFIX, help="default: %(default)s")
    sub = parser.add_subparsers(dest="command", required=True)
    do = sub.add_parser("install", help="make or update the environment under --prefix")
    do.add_argument("--force", action="store_true", help="reinstall even if the stamp matches")
    do.add_argument(
        "--graded",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a graded class: the course's solutions stripped from the learners' environment, "
        "now and at every later install (--no-graded: put them back; default: as it was)",
    )
    do = sub.add_parser("start", help="start the hub (installs first if needed)")
    do.add_argument("--ip", default="127.0.0.1", help="address to listen on (%(default)s)")
    do.add_argument("--port", type=int, default=8000)
    do.add_argument("--state", default="/srv/attention-course", help="database, cookie secret")
    do.add_argument("--repo", default=None, help="course repository (pyproject's by default)")
    do.add_argument("--branch", default="main")
    do = sub.add_parser("learners", help="add or remove learners' system users")
    do.add_argument("action", choices=["add", "remove"])
    do.add_argument("names", nargs="+")
    do = sub.add_parser("link", help="print the nbgitpuller link for a hub address")
    do.add_argument("hub_url")
    do.add_argument("--repo", default=None)
    do.add_argument("--branch", default="main")
    args = parser.parse_args(argv)
    if args.command == "install":
        print(install(args.prefix, force=args.force, graded=args.graded))
    elif args.command == "start":
        return _start(args)
    elif args.command == "learners":
        for name in args.names:
            if args.action == "add":
                print(f"{name}: {add_learner(name)}")
            else:
                remove_learner(name)
    else:
        print(pull_link(args.hub_url, args.repo, args.branch))
    return 0
