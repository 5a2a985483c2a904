"""`make lab` is safe: localhost only, token required, and the repo's quiet defaults apply.

The server here is started exactly as ``make lab`` starts it: ``python -m course serve``,
which the Makefile's ``lab`` target calls, with JupyterLab making its own
random token. The only additions are a free port and no browser window
(`test_make_lab.py` runs ``make lab`` itself). No browser is needed.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess

import psutil
import pytest

import labdriver

MAKEFILE = labdriver.REPO / "Makefile"


def test_make_lab_runs_the_make_free_command() -> None:
    recipe = re.search(r"^lab:.*\n((?:\t.*\n)+)", MAKEFILE.read_text(), re.MULTILINE)
    assert recipe, "no `lab:` target in the Makefile"
    lines = [line.strip() for line in recipe.group(1).splitlines()]
    assert lines == ["$(PYTHON) -m course lab"], f"one call of python -m course lab, got {lines}"


@pytest.fixture(scope="module")
def make_lab(tmp_path_factory: pytest.TempPathFactory):
    workdir = tmp_path_factory.mktemp("make-lab")
    with labdriver.running_lab(workdir, isolate_user_settings=False) as server:
        yield server


def test_token_is_required(make_lab) -> None:
    assert len(make_lab.token) >= 32, "JupyterLab's own token should be long and random"
    for path in ("/api/contents", "/api/kernels", "/api/sessions"):
        status, _ = make_lab.get(path)
        assert status == 403, f"GET {path} without a token answered {status}"
        status, _ = make_lab.get(path, token="0" * len(make_lab.token))
        assert status == 403, f"GET {path} with a wrong token answered {status}"
        status, body = make_lab.get(path, token=make_lab.token)
        assert status == 200, f"GET {path} with the token answered {status}"
        json.loads(body)  # the real answer, not a login page


def test_listens_on_localhost_only(make_lab) -> None:
    server = psutil.Process(make_lab.proc.pid)
    listening = []
    for process in (server, *server.children(recursive=True)):
        try:  # a short-lived child may be gone by the time its sockets are read
            connections = process.net_connections(kind="tcp")
        except psutil.NoSuchProcess:
            continue
        listening += [
            c.laddr
            for c in connections
            if c.status == psutil.CONN_LISTEN and c.laddr.port == make_lab.port
        ]
    assert listening, f"nothing listens on port {make_lab.port}"
    assert {address.ip for address in listening} == {"127.0.0.1"}, listening
    # and the port does not answer on this machine's other addresses
    others = {
        a.address
        for addresses in psutil.net_if_addrs().values()
        for a in addresses
        if a.family == socket.AF_INET and not a.address.startswith("127.")
    }
    for address in others:
        with socket.socket() as s:
            s.settimeout(2)
            assert s.connect_ex((address, make_lab.port)) != 0, f"answers on {address}"


def test_repo_defaults_switch_off_prompts(make_lab) -> None:
    """The settings the learner's JupyterLab starts from come from jupyter/labconfig."""
    overrides = json.loads(
        (labdriver.REPO / "jupyter/labconfig/default_setting_overrides.json").read_text()
    )
    assert overrides["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"
    for plugin, settings in overrides.items():
        status, body = make_lab.get(f"/lab/api/settings/{plugin}", token=make_lab.token)
        assert status == 200, (plugin, status)
        schema = json.loads(body)["schema"]["properties"]
        for key, value in settings.items():
            assert schema[key]["default"] == value, f"{plugin} {key}: {schema[key]['default']!r}"


@pytest.mark.parametrize(
    ("env", "args", "message"),
    [
        ({"JUPYTER_TOKEN": ""}, [], "JUPYTER_TOKEN is set but empty"),
        ({}, ["--IdentityProvider.token="], "an empty token disables authentication"),
    ],
)
def test_the_lab_command_refuses_to_drop_the_token(env, args, message) -> None:
    result = subprocess.run(
        [*labdriver.LAB_COMMAND, *args],
        cwd=labdriver.REPO,
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert message in result.stderr


def test_the_lab_command_refuses_another_address(tmp_path) -> None:
    with pytest.raises(RuntimeError, match="ip only accepts one value"):
        labdriver.start_lab(tmp_path, extra_args=["--ServerApp.ip=0.0.0.0"], timeout=60)
