"""Fixtures for the browser tests: one JupyterLab, one Chromium, one page per notebook.

The server is started with ``python -m course serve`` (how ``make lab`` serves) on a free
localhost port with a random token, serving a scratch copy of ``notebooks/``
(the browser runs cells and JupyterLab may autosave: never in the repo), with
the learner's own JupyterLab settings swapped for an empty folder so only the
repo's defaults (``jupyter/labconfig``) apply. It is stopped, kernels and all,
at the end of the session whatever happens.

Without ``/usr/bin/chromium`` these tests skip and say how to install it;
when the ``CI`` environment variable is set a missing browser is a failure.
"""

from __future__ import annotations

import os
from pathlib import Path

import laptop
import pytest

import labdriver

NOTEBOOKS = [path.name for path in labdriver.numbered_notebooks()]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "browser: drives JupyterLab in Debian's Chromium (skips without it)"
    )
    config.addinivalue_line(
        "markers", "notebooks(only): run a browser test only on notebooks whose name passes"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``notebook`` over the numbered notebooks that exist at collection time.

    A test can narrow the list with ``@pytest.mark.notebooks(only=predicate)``.
    """
    if "notebook" not in metafunc.fixturenames:
        return
    names = NOTEBOOKS
    narrow = metafunc.definition.get_closest_marker("notebooks")
    if narrow is not None:
        names = [name for name in names if narrow.kwargs["only"](name)]
    metafunc.parametrize(
        "notebook",
        names,
        indirect=True,
        scope="module",
        ids=[n.removesuffix(".ipynb") for n in names],
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Keep each notebook's tests together (in file order), so its page opens once."""
    here = Path(__file__).parent

    def notebook_of(item: pytest.Item) -> str:
        callspec = getattr(item, "callspec", None)
        return callspec.params.get("notebook", "") if callspec else ""

    positions = [i for i, item in enumerate(items) if Path(str(item.fspath)).parent == here]
    ordered = sorted((items[i] for i in positions), key=notebook_of)  # stable: file order kept
    for i, item in zip(positions, ordered, strict=True):
        items[i] = item


@pytest.fixture(scope="session")
def chromium_ready() -> None:
    """Skip (or, under CI, fail) when Debian's Chromium is not installed."""
    reason = labdriver.chromium_missing()
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI is set and the browser tests cannot run: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def lab_server(chromium_ready, tmp_path_factory: pytest.TempPathFactory):
    """A JupyterLab started as ``make lab`` starts it, on a scratch copy of the notebooks."""
    with labdriver.scratch_lab(tmp_path_factory.mktemp("lab")) as server:
        yield server


@pytest.fixture(scope="session")
def chromium(chromium_ready):
    with labdriver.chromium_browser() as browser:
        yield browser


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder the browser tests' screenshots land in."""
    return tmp_path_factory.mktemp("screenshots")


@pytest.fixture(scope="module")
def notebook(request: pytest.FixtureRequest, lab_server, chromium, screenshots):
    """The notebook ``request.param`` open in its own page at a laptop's size, every cell run
    once.

    What the page showed before the run (the committed outputs of an untrusted
    notebook, as a fresh clone's first open shows them) is kept as
    ``page.first_open`` (`labdriver.widget_outputs`; with a screenshot, where
    the notebook shows an explorer) for `laptop`'s checks.
    """
    name = request.param
    page = labdriver.NotebookPage.open(
        chromium,
        lab_server,
        name,
        workspace=name.removesuffix(".ipynb").replace("_", "-"),
        viewport=laptop.SIZES["laptop"],
    )
    try:
        page.first_open = labdriver.widget_outputs(page)
        if laptop.shows_an_explorer(name):
            laptop.screenshot(page, screenshots, "first-open")
        page.run_all()
        yield page
    finally:
        page.close()  # a second close (after a test closed it) does nothing
