"""JupyterLab on the course notebooks: the one place this command lives.

``python -m course lab`` (what ``make lab`` runs) makes the environment if it
must, then serves; the browser driver (labdriver) starts the serving part,
``python -m course serve``, for the browser and security tests, the
screenshots and the latency benchmark. Serving:

- the learner's own copies of the notebooks, ``my-notebooks/`` (git-ignored),
  made and kept up to date by `course.my_notebooks`: their work never lands
  in ``notebooks/``, and a course update is offered beside their copy, never
  over it. ``LAB_ROOT_DIR`` names another folder to serve as it is (the tests
  serve a scratch copy of ``notebooks/``, so they test the course as committed);
- on 127.0.0.1 only, with token authentication kept (an empty
  ``JUPYTER_TOKEN``, which would switch authentication off, is refused);
- as root (a container's default user) with ``--allow-root``, which JupyterLab
  otherwise demands, said aloud: the server is no more exposed than for any
  other user (localhost only, token required), and the learner already is root;
- with the course's JupyterLab defaults (``jupyter/labconfig``) layered over the
  environment's through ``JUPYTER_CONFIG_PATH``, and the course's lab extension as built
  in the repository (``jupyter/labextensions``) first on ``JUPYTER_PATH``, for this
  process only.

Extra arguments go to ``jupyter lab`` (a port, ``--no-browser``...); one that
sets the address again is an error ("only accepts one value"), so none can
widen it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

from . import my_notebooks
from .paths import REPO

__all__ = ["lab_command", "serve"]


def _refusal(args: list[str]) -> str | None:
    """Why these arguments or this environment must not start a server (None: they may)."""
    if "JUPYTER_TOKEN" in os.environ and os.environ["JUPYTER_TOKEN"] == "":
        return (
            "JUPYTER_TOKEN is set but empty, which would disable authentication; "
            "unset it (a random token is made) or give it a value"
        )
    for arg in args:
        if re.search(r"[Tt]oken=$", arg):
            return f"refusing {arg!r}: an empty token disables authentication"
    return None


def lab_command(args: list[str]) -> tuple[list[str], dict[str, str]]:
    """The ``jupyter lab`` command line and environment `serve` runs."""
    env = dict(os.environ)
    root = env.get("LAB_ROOT_DIR")
    if not root:
        my_notebooks.sync()
        root = str(REPO / "my-notebooks")
    as_root = []
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        print(
            "course lab: running as root (as in most containers): passing --allow-root; "
            "the server still listens on 127.0.0.1 only and needs its token",
            file=sys.stderr,
        )
        as_root = ["--ServerApp.allow_root=True"]
    course = str(REPO / "jupyter")  # its labconfig/ and labextensions/
    for variable in ("JUPYTER_CONFIG_PATH", "JUPYTER_PATH"):
        env[variable] = os.pathsep.join(filter(None, [course, env.get(variable)]))
    command = [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        f"--ServerApp.root_dir={root}",
        *as_root,
        *args,
        "--ServerApp.ip=127.0.0.1",
    ]
    return command, env


def serve(args: list[str]) -> int:
    """Start JupyterLab as the module's docstring says; returns its exit status."""
    why = _refusal(args)
    if why:
        print(f"course lab: {why}", file=sys.stderr)
        return 2
    command, env = lab_command(args)
    sys.stderr.flush()
    if os.name == "nt":  # no exec on Windows: wait for it, and pass its status on
        return subprocess.call(command, env=env)
    os.execve(command[0], command, env)  # the server takes this process's place (and its group)
    return 0  # pragma: no cover
