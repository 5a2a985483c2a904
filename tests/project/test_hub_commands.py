"""The class hub's commands without a hub (python -m course hub: tests/browser/test_hub.py
runs the real one, as root): the link in docs/teachers.md, the pins, the stamp, the learners' and
the teacher's settings."""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.parse

import pytest
from support import server_extensions_on, stand_in_spawner

from course import hub
from course.paths import REPO
from course.project import repository


def test_the_teachers_guides_link_is_the_one_the_command_prints():
    guide = (REPO / "docs" / "teachers.md").read_text(encoding="utf-8")
    link = hub.pull_link("https://hub.example.org")
    assert link in guide, "docs/teachers.md's nbgitpuller link is stale: python -m course colab"
    printed = subprocess.run(
        [sys.executable, "-m", "course", "hub", "link", "https://hub.example.org"],
        cwd=REPO, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert printed == link


def test_the_link_pulls_pyprojects_repository_and_opens_00():
    query = urllib.parse.parse_qs(hub.pull_link("https://h.example").split("?", 1)[1])
    owner, name = repository()
    assert query == {
        "repo": [f"https://github.com/{owner}/{name}"],
        "branch": ["main"],
        "targetpath": [name],
        "urlpath": [f"lab/tree/{name}/notebooks/00_start_here.ipynb"],
    }
    assert (REPO / "notebooks" / "00_start_here.ipynb").is_file()


@pytest.mark.parametrize("bad", ["", "https://github.com/", "/"])
def test_a_repository_address_without_a_name_is_refused(bad):
    with pytest.raises(ValueError, match="names no repository"):
        hub.course_folder(bad)


def test_teaching_tools_are_pinned_apart_from_the_runtime():
    import tomllib

    from course.project import pins

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    teach = project["optional-dependencies"]["teach"]
    assert teach and all(re.fullmatch(r"[\w.-]+==[\w.]+", pins()[name]) for name in teach), teach
    runtime = {re.split(r"[=<>;\[ ]", r, maxsplit=1)[0] for r in project["dependencies"]}
    assert runtime.isdisjoint(teach)
    proxy = (REPO / "teachers" / "hub" / "package.json").read_text(encoding="utf-8")
    assert re.search(r'"configurable-http-proxy": "\d+\.\d+\.\d+"', proxy), "pin it exactly"


def test_the_stamp_follows_the_pins(monkeypatch):
    before = hub.stamp_key()
    real = hub._pins
    monkeypatch.setattr(hub, "_pins", lambda: real() + "\nnumpy==0.0.0")
    assert hub.stamp_key() != before
    monkeypatch.setattr(hub, "_pins", real)
    assert hub.stamp_key() == before


def test_learner_names_that_useradd_or_a_url_would_bend_are_refused(monkeypatch):
    monkeypatch.setattr(hub, "_require_root", lambda what: None)
    for bad in ["Alice", "a b", "../x", "x;rm", "-x"]:
        with pytest.raises(ValueError, match="learner name"):
            hub.add_learner(bad)


@pytest.fixture
def fake_prefix(monkeypatch, tmp_path):
    """A hub prefix whose build writes the course's copy with its solutions (no pip), and a
    strip that removes them as `course.graded.strip` does; the builds and strips counted."""
    calls = {"build": 0, "strip": 0}
    answers = tmp_path / "user/lib/python3.11/site-packages/attention_course/lessons/exercises"

    def build(prefix, key):
        calls["build"] += 1
        answers.mkdir(parents=True, exist_ok=True)
        (answers / "answers.py").write_text("SOLUTION = 1\n")
        (prefix / "proxy/node_modules/.bin").mkdir(parents=True, exist_ok=True)
        (prefix / "proxy/node_modules/.bin/configurable-http-proxy").touch()
        (prefix / ".installed").write_text(key + "\n")

    def strip(python):
        assert python == str(tmp_path / "user/bin/python")
        calls["strip"] += 1
        (answers / "answers.py").unlink(missing_ok=True)
        return 0

    monkeypatch.setattr(hub, "_require_root", lambda what: None)
    monkeypatch.setattr(hub, "_build", build)
    monkeypatch.setattr(hub.course_graded, "strip", strip)
    return tmp_path, answers / "answers.py", calls


def test_a_graded_hub_strips_the_solutions_at_every_install_until_told_otherwise(fake_prefix):
    prefix, answers, calls = fake_prefix
    hub.install(prefix)
    assert answers.exists() and calls == {"build": 1, "strip": 0}
    hub.install(prefix)  # the stamp matches: nothing to do
    assert answers.exists() and calls == {"build": 1, "strip": 0}
    hub.install(prefix, graded=True)
    assert not answers.exists() and calls == {"build": 1, "strip": 1}
    assert (prefix / hub.GRADED_MARKER).exists()
    hub.install(prefix, force=True)  # a reinstall (a course update, then `start`): still graded
    assert not answers.exists() and calls == {"build": 2, "strip": 2}
    hub.install(prefix, graded=False)  # the solutions come back with the course's copy
    assert answers.exists() and calls == {"build": 3, "strip": 2}
    assert not (prefix / hub.GRADED_MARKER).exists()
    hub.install(prefix)
    assert answers.exists() and calls == {"build": 3, "strip": 2}


def test_a_failed_strip_stops_the_install(fake_prefix, monkeypatch):
    prefix, answers, _ = fake_prefix
    monkeypatch.setattr(hub.course_graded, "strip", lambda python: 1)
    with pytest.raises(SystemExit, match="could not strip the solutions"):
        hub.install(prefix, graded=True)
    assert answers.exists()


def test_the_install_command_takes_graded_and_no_graded(monkeypatch):
    seen = []
    monkeypatch.setattr(hub, "install", lambda prefix, force, graded: seen.append(graded) or "hub")
    for flags in ([], ["--graded"], ["--no-graded"]):
        assert hub.main(["install", *flags]) == 0
    assert seen == [None, True, False]


def test_the_learners_settings_leave_nbgrader_out_and_the_teachers_keep_it(tmp_path):
    hub.write_settings(tmp_path)
    learners, teacher = tmp_path / "jupyter", tmp_path / hub.TEACHER_SETTINGS
    overrides = (REPO / "jupyter" / "labconfig" / "default_setting_overrides.json").read_text()
    for settings in (learners, teacher):
        assert (settings / "labconfig" / "default_setting_overrides.json").read_text() == overrides
    # a learner's server: no nbgrader (about 10 MiB of each on the hub), its lab panels hidden
    assert [k for k in server_extensions_on(str(learners)) if "nbgrader" in k] == []
    assert (learners / "labconfig" / "page_config.json").read_text() == (
        REPO / "jupyter" / "labconfig" / "page_config.json"
    ).read_text()
    # the teacher's: the formgrader and the assignment lists, and no page switches
    assert "nbgrader.server_extensions.formgrader" in server_extensions_on(str(teacher))
    assert not (teacher / "labconfig" / "page_config.json").exists()
    hub.write_settings(tmp_path)  # again, over the first: the same folders
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jupyter", hub.TEACHER_SETTINGS]


@pytest.mark.parametrize("admin", [False, True])
def test_the_teachers_server_alone_reads_the_teachers_settings(admin):
    _, spawner = stand_in_spawner(
        admin=admin,
        environment={"JUPYTER_CONFIG_PATH": "/opt/course/jupyter"},
        teacher_settings="/opt/course/jupyter-teacher",
    )
    wanted = "/opt/course/jupyter-teacher" if admin else "/opt/course/jupyter"
    assert spawner.get_env()["JUPYTER_CONFIG_PATH"] == wanted
