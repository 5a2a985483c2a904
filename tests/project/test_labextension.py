"""The course's JupyterLab extension: built from its source, and found wherever the course runs.

Its source is jupyter/a11y-extension (plain JavaScript, built with @jupyter/builder, the
builder of JupyterLab 4.6, pinned in its package.json); its build, jupyter/labextensions/
attention-course-a11y, is committed, so a learner needs no node. Here, without node:

- the build is its source's (``source.sha256``, written by ``npm run build`` beside it, is
  the hash of the sources now), names the file JupyterLab loads, and its plugin asks for
  no JupyterLab service (so Notebook 7 and Voila run it too);
- each route installs it where JupyterLab finds it, and ``jupyter labextension list`` there
  says it is enabled and OK: ``make lab`` (its JUPYTER_PATH), an environment it is copied
  into, again when the build changes (``.venv``, Binder: ``python -m course labextension``),
  a wheel (its data files; the hub installs the course from one), and this environment
  itself when it is the course's ``.venv``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from course import environment, lab

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "jupyter" / "a11y-extension"
BUILD = environment.LABEXTENSION
NAME = "attention-course-a11y"
REBUILD = "cd jupyter/a11y-extension && npm ci && PATH=$PWD/../../.venv/bin:$PATH npm run build"


def source_hash() -> str:
    """The hash stamp.mjs writes: SHA-256 over each source file (package.json, its lock,
    src/*.js, style/*.css) in sorted order, as its path, a NUL, its bytes and a NUL."""
    sources = ["package.json", "package-lock.json"]
    sources += [f"src/{p.name}" for p in (SOURCE / "src").glob("*.js")]
    sources += [f"style/{p.name}" for p in (SOURCE / "style").glob("*.css")]
    digest = hashlib.sha256()
    for name in sorted(sources):
        digest.update(name.encode() + b"\0" + (SOURCE / name).read_bytes() + b"\0")
    return digest.hexdigest()


def listed(env: dict[str, str]) -> str:
    """``jupyter labextension list`` (its output, both streams) in ``env``."""
    done = subprocess.run(
        [sys.executable, "-m", "jupyter", "labextension", "list"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)


def enabled_in(text: str, folder: Path) -> bool:
    """Whether ``jupyter labextension list``'s ``text`` has the extension enabled and OK
    under ``folder``."""
    sections = re.split(r"\n(?=\S)", text)
    return any(
        s.startswith(str(folder)) and re.search(rf"{NAME} v\S+ enabled\s+OK", s) for s in sections
    )


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("JUPYTER_PATH", "JUPYTER_CONFIG_PATH")}
    return {**env, **extra}


# -- the build ----------------------------------------------------------------------------


def test_the_committed_build_is_built_from_the_source_as_it_is():
    stamp = (BUILD / "source.sha256").read_text(encoding="utf-8").strip()
    assert stamp == source_hash(), f"the build is older than its source: run `{REBUILD}`"


def test_the_build_names_the_file_jupyterlab_loads_and_pins_its_builder():
    built = json.loads((BUILD / "package.json").read_text(encoding="utf-8"))
    source = json.loads((SOURCE / "package.json").read_text(encoding="utf-8"))
    assert built["name"] == source["name"] == NAME
    load = built["jupyterlab"]["_build"]["load"]
    assert (BUILD / load).is_file(), load
    # the builder of JupyterLab's own version (jupyterlab's staging package.json), exactly
    builder = source["devDependencies"]["@jupyter/builder"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", builder), f"pin @jupyter/builder exactly: {builder}"
    lock = json.loads((SOURCE / "package-lock.json").read_text(encoding="utf-8"))
    assert lock["packages"]["node_modules/@jupyter/builder"]["version"] == builder


def test_the_plugin_needs_no_jupyterlab_service():
    index = (SOURCE / "src" / "index.js").read_text(encoding="utf-8")
    plugin = index[index.index("const plugin = {") :]
    assert "autoStart: true" in plugin
    assert "requires" not in plugin and "optional" not in plugin, plugin


def test_pyprojects_data_files_carry_every_built_file():
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib

    tables = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    data = tables["tool"]["setuptools"]["data-files"]
    carried = set()
    for target, patterns in data.items():
        for pattern in patterns:
            for path in ROOT.glob(pattern):
                carried.add(path.relative_to(BUILD).as_posix())
                assert target == f"share/jupyter/labextensions/{NAME}" + (
                    "/" + path.parent.relative_to(BUILD).as_posix() if path.parent != BUILD else ""
                ), (target, path)
    built = {p.relative_to(BUILD).as_posix() for p in BUILD.rglob("*") if p.is_file()}
    assert carried == built


# -- where it is found --------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _served_root(monkeypatch, tmp_path):
    """A folder for `lab.lab_command` to serve: never the learner's my-notebooks/."""
    monkeypatch.setenv("LAB_ROOT_DIR", str(tmp_path))


def test_make_lab_finds_the_repositorys_build_first(tmp_path):
    _, env = lab.lab_command([])  # LAB_ROOT_DIR set: no my-notebooks/ made
    assert env["JUPYTER_PATH"].split(os.pathsep)[0] == str(ROOT / "jupyter")
    assert env["JUPYTER_CONFIG_PATH"].split(os.pathsep)[0] == str(ROOT / "jupyter")
    assert enabled_in(listed(env), ROOT / "jupyter" / "labextensions")


def test_an_environment_it_is_installed_into_finds_it(tmp_path):
    prefix = tmp_path / "env"
    installed = environment.install_labextension(prefix)
    assert installed == prefix / "share" / "jupyter" / "labextensions" / NAME
    assert installed.is_dir() and not installed.is_symlink()  # Voila serves no link's files
    built = {p.relative_to(BUILD) for p in BUILD.rglob("*")}
    assert {p.relative_to(installed) for p in installed.rglob("*")} == built
    stale = installed / "static" / "stale.js"
    stale.write_text("an older build's\n")
    assert environment.install_labextension(prefix) == installed and stale.exists()  # current
    (installed / "source.sha256").write_text("an older build\n")
    environment.install_labextension(prefix)  # not current: copied again, the old one gone
    assert not stale.exists() and {p.relative_to(installed) for p in installed.rglob("*")} == built
    env = clean_env(JUPYTER_PATH=str(prefix / "share" / "jupyter"))
    assert enabled_in(listed(env), installed.parent)


def test_binders_postbuild_copies_it_with_the_course_command(tmp_path):
    post = (ROOT / "binder" / "postBuild").read_text(encoding="utf-8")
    command = '-m course labextension --prefix "${NB_PYTHON_PREFIX}"'
    assert command in post
    done = subprocess.run(
        [sys.executable, "-m", "course", "labextension", "--prefix", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    copied = tmp_path / "share" / "jupyter" / "labextensions" / NAME
    assert not copied.is_symlink() and (copied / "source.sha256").is_file()


def test_the_courses_environment_has_it():
    if Path(sys.prefix).resolve() != environment.VENV.resolve():
        pytest.skip(f"not the course's .venv ({sys.prefix}): nothing to check here")
    installed = environment.labextensions_dir(environment.VENV) / NAME
    assert installed.exists(), "not installed: run `python -m course install` (or make)"
    stamp = (installed / "source.sha256").read_text(encoding="utf-8")
    assert stamp == (BUILD / "source.sha256").read_text(encoding="utf-8"), (
        "an older build: run `python -m course install` (or make)"
    )
    assert enabled_in(listed(clean_env()), installed.parent)


def test_the_hubs_stamp_follows_the_build_not_the_build_tools(tmp_path, monkeypatch):
    from course import hub

    for name in (
        "pyproject.toml",
        "lib/pyproject.toml",
        "constraints.txt",
        "binder/requirements.txt",
        "teachers/hub/package.json",
    ):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("pins\n")
    for name in ("lib/attention_lib/a.py", "course/b.py", f"jupyter/labextensions/{NAME}/c.js"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("1\n")
    tools = tmp_path / "jupyter" / "a11y-extension" / "node_modules" / "x" / "index.js"
    tools.parent.mkdir(parents=True)
    tools.write_text("1\n")
    monkeypatch.setattr(hub, "REPO", tmp_path)
    key = hub.stamp_key()
    tools.write_text("2\n")  # another install of the builder: the environment is the same
    assert hub.stamp_key() == key
    (tmp_path / "jupyter" / "labextensions" / NAME / "c.js").write_text("2\n")  # a new build
    assert hub.stamp_key() != key


@pytest.mark.install
def test_a_wheel_of_the_course_carries_the_built_extension(tmp_path):
    had_build = (ROOT / "build").exists()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), ROOT],
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        if not had_build:  # setuptools' build of the wheel, made in the repository
            shutil.rmtree(ROOT / "build", ignore_errors=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (wheel,) = tmp_path.glob("*.whl")
    package, version = wheel.name.split("-")[:2]
    assert package == "attention_course"  # the courseware's wheel: the library's has no extension
    names = set(zipfile.ZipFile(wheel).namelist())
    prefix = f"{package}-{version}.data/data/share/jupyter/labextensions"
    built = {p.relative_to(BUILD).as_posix() for p in BUILD.rglob("*") if p.is_file()}
    assert {f"{prefix}/{NAME}/{p}" for p in built} <= names
