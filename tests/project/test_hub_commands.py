"""The class hub's commands without a hub (python -m course hub: tests/browser/test_hub.py
runs the real one, as root): the link in the README, the pins, the stamp."""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.parse

import pytest

from course import hub
from course.paths import REPO
from course.project import repository


def test_the_readmes_link_is_the_one_the_command_prints():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    link = hub.pull_link("https://hub.example.org")
    assert link in readme, "README's nbgitpuller link is stale: python -m course hub link"
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

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    teach = project["optional-dependencies"]["teach"]
    assert teach and all(re.fullmatch(r"[\w.-]+==[\w.]+", r) for r in teach), teach
    runtime = {re.split(r"[=<>;\[ ]", r, maxsplit=1)[0] for r in project["dependencies"]}
    assert runtime.isdisjoint({re.split("==", r)[0] for r in teach})
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
