"""``python -m course COMMAND``: the README's commands without ``make`` (Windows has none).

python -m course lab [ARGS]     # make lab: .venv if missing, then JupyterLab on your copies
python -m course test [ARGS]    # make test: ruff, the library's, lessons' and explorers' tests,
                                #   one nbval pass over every notebook (a few minutes)
python -m course check [ARGS]   # make check's test suite: ruff, then every test but the
                                #   browser soak, the fresh installs, nbgrader and the hub
python -m course reset NB       # make reset NB=01: the course's version of one notebook again
python -m course install        # only make or update .venv
python -m course labextension [--prefix DIR]  # the course's lab extension into an environment
python -m course serve [ARGS]   # JupyterLab alone, in the running environment
python -m course colab [--check]   # the Colab set-up cells, the addresses in README.md and docs
python -m course site [--out DIR]  # the static site of the executed course
python -m course graded [--check | grade A | strip]  # the graded edition (teachers/graded)
python -m course hub install|start|learners|link ...  # a class's hub (as root; docs/teachers.md)
"""

from __future__ import annotations

import os
import subprocess
import sys

from . import environment
from .paths import REPO

#: make test's pytest arguments, what a learner runs: the library's, the lessons' and the
#: explorers' tests, and every notebook once under nbval, on two workers (each file's tests on
#: one, as nbval needs for a notebook's cells), the tests marked slow left to make check
TEST_ARGS = [
    "-n",
    "2",
    "--dist",
    "loadfile",
    "-m",
    "not slow",
    "lib/tests",
    "--ignore=lib/tests/kernels",
    "tests/lessons",
    "tests/explorers",
    "notebooks",
]
#: make check's pytest arguments: every test, but the soak, the fresh installs, nbgrader's
#: autograde and the class's hub, which make test-soak, make test-install, make test-graded and
#: make test-hub run
CHECK_ARGS = [
    "-n",
    "2",
    "--dist",
    "loadfile",
    "-m",
    "not soak and not install and not grading and not hub",
]


def _in_venv(python: os.PathLike, args: list[str]) -> int:
    """Run ``python -m course ARGS`` in the environment (this process's place where it can)."""
    command = [str(python), "-m", "course", *args]
    sys.stdout.flush()
    sys.stderr.flush()
    if os.name == "nt":
        return subprocess.call(command, cwd=REPO)
    os.chdir(REPO)
    os.execv(command[0], command)
    return 0  # pragma: no cover


def _test(args: list[str], default: list[str]) -> int:
    """ruff's lint and format checks, then pytest with ``default``'s arguments (or
    ``PYTEST_ARGS``'s) and ``args``: make test, make check's test suite."""
    for check in (["check", "."], ["format", "--check", "."]):
        status = subprocess.call([sys.executable, "-m", "ruff", *check], cwd=REPO)
        if status:
            return status
    command = [sys.executable, "-m", "pytest", *pytest_arguments(default), *args]
    return subprocess.call(command, cwd=REPO)


def _labextension(args: list[str]) -> int:
    """The course's built lab extension into an environment (this Python's unless told):
    what an editable install of the course leaves out (Binder's postBuild runs it)."""
    import argparse
    from pathlib import Path

    parser = argparse.ArgumentParser(prog="python -m course labextension")
    parser.add_argument("--prefix", default=sys.prefix, help="the environment (%(default)s)")
    options = parser.parse_args(args)
    print(environment.install_labextension(Path(options.prefix)))
    return 0


def pytest_arguments(default: list[str] = TEST_ARGS) -> list[str]:
    """``PYTEST_ARGS`` from the environment, split, or ``default`` where it is unset or empty
    (make exports it empty when unset)."""
    return os.environ.get("PYTEST_ARGS", "").split() or default


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    command, args = argv[0], argv[1:]
    if command == "install":
        environment.ensure()
        return 0
    if command == "labextension":
        return _labextension(args)
    if command == "reset" and len(args) != 1:
        print("usage: python -m course reset 01 (a notebook's number or name)", file=sys.stderr)
        return 2
    # in the course's environment, made if missing (graded strip: any Python, standard library)
    if command in ("lab", "test", "check", "reset", "site", "graded") and args[:1] != ["strip"]:
        python = environment.ensure()
        if os.path.realpath(sys.prefix) != os.path.realpath(environment.VENV):
            return _in_venv(python, argv)
    if command in ("lab", "serve"):
        from .lab import serve

        return serve(args)
    if command == "test":
        return _test(args, TEST_ARGS)
    if command == "check":
        return _test(args, CHECK_ARGS)
    if command == "reset":
        from .my_notebooks import reset

        reset(args[0])
        return 0
    if command == "colab":
        from .colab import main as colab

        return colab(args)
    if command == "hub":  # any Python 3: the hub's own environment is made under /opt
        from .hub import main as hub

        return hub(args)
    if command == "site":
        from .site import main as site

        return site(args)
    if command == "graded":
        from .graded import main as graded

        return graded(args)
    print(f"python -m course: unknown command {command!r}\n{__doc__}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
