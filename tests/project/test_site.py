"""The static site (python -m course site): every page of a fresh build, checked.

Each page must show every picture the committed notebook holds (each explorer's still,
each figure), no error output but the ones a lesson shows on purpose, no widget's text
repr, nothing loaded from the network, no code where the notebook hides it (all of a
beginner page's), math as MathML, and only relative links that resolve.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from html import unescape
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from support import pictures_in

from course import project, site

for _needed in ("nbconvert", "latex2mathml"):  # the dev extra's pins: the site needs them
    try:
        __import__(_needed)
    except ModuleNotFoundError:
        why = f"the site needs {_needed} (pyproject.toml's dev extra): pip install -e '.[dev]'"
        if os.environ.get("CI"):
            pytest.fail(f"CI is set: {why}", pytrace=False)
        pytest.skip(why, allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = site.notebooks()
STDERR = 'data-mime-type="application/vnd.jupyter.stderr"'
# a widget shown as text: what a front end without widgets prints for each kind of widget
WIDGET_REPR = re.compile(
    r"\b(?:VBox|HBox|Box|GridBox|Image|Output|HTML|Label|Canvas|MPLCanvas|Toolbar|Button|"
    r"Checkbox|Dropdown|ToggleButtons?|\w*Slider|Play|Text)\((?:children|value|layout|"
    r"description|options|toolbar|outputs)="
)
TEX = re.compile(r"\$[^$]*\\[A-Za-z]+[^$]*\$|\\\(|\\\[|\\begin\{")


def _cells(page: str) -> list[str]:
    """The page's cells, each from its opening <div class="jp-Cell ..."> to the next one."""
    body = re.sub(r"<style[^>]*>.*?</style>", "", page, flags=re.S)
    return re.split(r'(?=<div [^>]*class="jp-Cell )', body)[1:]


def _text(fragment: str) -> str:
    return re.sub(r"<[^>]+>", " ", fragment)


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _shown_code_cells(nb: dict) -> int:
    return sum(
        c["cell_type"] == "code"
        and not c["metadata"].get("jupyter", {}).get("source_hidden")
        and site.LEAVE_OUT_TAGS.isdisjoint(c["metadata"].get("tags", []))
        for c in nb["cells"]
    )


def _pictures(nb: dict) -> list[str]:
    """The base64 of every distinct picture the notebook's outputs hold: still figures
    (image/png, and the <img> of it in their text/html) and explorers' stills (an <img> in the
    text/html beside the widget view)."""
    found: dict[str, None] = {}
    for cell in nb["cells"]:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "image/png" in data:
                found["".join(data["image/png"]).strip()] = None
            html = "".join(data.get("text/html", ""))
            found.update(
                dict.fromkeys(re.findall(r'<img [^>]*src="data:image/png;base64,([^"]+)"', html))
            )
    return list(found)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "course", "site", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_one_page_per_notebook_and_an_index_listing_them(built):
    pages = sorted(p.name for p in built.glob("*.html"))
    assert pages == sorted([*(f"{p.stem}.html" for p in NOTEBOOKS), "index.html"])
    index = (built / "index.html").read_text(encoding="utf-8")
    table = index.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    listed = re.findall(r'<a href="([^"]+\.html)">', table)
    assert listed == [f"{p.stem}.html" for p in NOTEBOOKS]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem[:2])
def test_every_page(built, notebook):
    nb = _load(notebook)
    page = (built / f"{notebook.stem}.html").read_text(encoding="utf-8")
    cells = _cells(page)
    shown = "".join(cells)

    # pictures: every explorer's still and every still figure, as support.STILL_FIGURES and the
    # explorers' registry count them, each once and each with a text alternative
    pictures = _pictures(nb)
    for data in pictures:
        assert f"data:image/png;base64,{data[:200]}" in shown, f"a picture is missing: {data[:40]}"
    images = re.findall(r'<img [^>]*src="data:image/png;base64,[^>]*>', shown)
    assert len(images) == sum(pictures_in(notebook.stem)) == len(pictures), (
        f"{notebook.name}: {len(images)} pictures on the page, {len(pictures)} in the notebook, "
        f"{pictures_in(notebook.stem)} (explorers, still figures) listed"
    )
    alts = [re.search(r"""alt=(?:"[^"]+"|'[^']+')""", image) for image in images]
    assert all(alts), f"{notebook.name}: a picture with no text alternative"

    # errors: only where the lesson raises on purpose, and then its own message
    for cell in cells:
        if STDERR in cell:
            assert "celltag_raises-exception" in cell.split(">", 1)[0], _text(cell)[:500]
    for c in nb["cells"]:
        for o in c.get("outputs", []):
            if o["output_type"] == "error":
                assert "raises-exception" in c["metadata"].get("tags", [])
                assert o["evalue"][:40] in unescape(_text(shown))
    assert "Error displaying widget" not in shown

    # no widget: neither its text repr nor its view or state for a widget manager
    assert not WIDGET_REPR.search(_text(shown)), WIDGET_REPR.search(_text(shown)).group(0)
    assert "application/vnd.jupyter.widget" not in page

    # nothing loaded from the network: no script at all, every resource a data: URL or a
    # file beside the page, no style sheet importing one
    assert "<script" not in page
    for tag, attr, value in re.findall(
        r"<(\w+)\b[^>]*?\s(src|srcset|poster|data|href)=\"([^\"]*)\"", page
    ):
        if tag == "a":
            continue
        assert value.startswith("data:") or not urlsplit(value).scheme, (tag, attr, value)
    styles = "".join(re.findall(r"<style[^>]*>(.*?)</style>", page, flags=re.S))
    assert not re.search(r"@import|url\(\s*['\"]?(?:https?:)?//", styles)

    # code: as many inputs as the notebook shows (none on a beginner page)
    inputs = len(re.findall(r'class="jp-CodeMirrorEditor', shown))
    assert inputs == _shown_code_cells(nb)
    if "_beginner_" in notebook.name:
        assert inputs == 0
        assert not re.search(r"\bimport \w+|display\(", _text(shown))

    # math: MathML, no TeX left for a MathJax that is not there
    visible = re.sub(r"<(pre|code|math)\b.*?</\1>", "", shown, flags=re.S)
    assert not TEX.search(unescape(_text(visible))), TEX.search(unescape(_text(visible)))
    if "_researcher_" in notebook.name:
        assert "<math" in shown


def test_every_relative_link_resolves(built):
    for page in sorted(built.glob("*.html")):
        text = page.read_text(encoding="utf-8")
        ids = set(re.findall(r'\sid="([^"]+)"', text))
        for href in re.findall(r'<a\b[^>]*\shref="([^"]*)"', text):
            parts = urlsplit(href)
            if parts.scheme:
                assert parts.scheme in ("http", "https", "mailto"), (page.name, href)
                continue
            assert ".ipynb" not in parts.path, (page.name, href)
            target = built / unquote(parts.path) if parts.path else page
            assert target.is_file(), (page.name, href)
            if parts.fragment:
                targets = ids if target == page else None
                if targets is None:
                    targets = set(re.findall(r'\sid="([^"]+)"', target.read_text("utf-8")))
                assert unquote(parts.fragment) in {unquote(i) for i in targets}, (page.name, href)


def test_notebook_links_become_page_links():
    page = '<a href="02_developer_scaling.ipynb#x">a</a> <a href="https://h/03_a.ipynb">b</a>'
    assert site._link_pages(page) == (
        '<a href="02_developer_scaling.html#x">a</a> <a href="https://h/03_a.ipynb">b</a>'
    )


def test_a_widget_without_a_still_shows_its_saved_picture_or_a_line_never_its_repr():
    import nbformat

    view = {"model_id": "box", "version_major": 2, "version_minor": 0}
    state = {
        "box": {"model_name": "VBoxModel", "state": {"children": ["IPY_MODEL_img"]}},
        "img": {
            "model_name": "ImageModel",
            "state": {"format": "png"},
            "buffers": [{"path": ["value"], "encoding": "base64", "data": "iVBORw0KGgo="}],
        },
    }
    cell = nbformat.v4.new_code_cell("explorer", metadata={"jupyter": {"source_hidden": True}})
    repr_ = {"text/plain": "VBox(children=(Image(value=b'...'),))"}
    cell.outputs = [
        nbformat.v4.new_output("display_data", data={**repr_, site.WIDGET_VIEW: view}),
        nbformat.v4.new_output(
            "display_data", data={**repr_, site.WIDGET_VIEW: {**view, "model_id": "gone"}}
        ),
    ]
    setup = nbformat.v4.new_code_cell("install", metadata={"tags": ["colab-setup"]})
    nb = nbformat.v4.new_notebook(cells=[setup, cell])
    nb.metadata["widgets"] = {site.WIDGET_STATE: {"state": state, "version_major": 2}}
    site.prepare(nb)
    assert len(nb.cells) == 1 and nb.cells[0].metadata["transient"]["remove_source"]
    first, second = (o["data"] for o in nb.cells[0].outputs)
    assert first == {"text/html": first["text/html"]}
    assert 'src="data:image/png;base64,iVBORw0KGgo="' in first["text/html"]
    assert second == {"text/html": site.NO_STILL}
    assert "widgets" not in nb.metadata


def test_binder_link_is_read_from_pyproject():
    owner_name = "/".join(project.repository())
    assert site.binder_link("01_beginner_crowded_room.ipynb") == (
        f"https://mybinder.org/v2/gh/{owner_name}/v{project.version()}"
        "?urlpath=lab/tree/notebooks/01_beginner_crowded_room.ipynb"
    )


def test_pages_in_a_browser_load_nothing_from_outside_and_draw_every_picture(built):
    """Each page opened from disk in Chromium: no request leaves the folder, every <img>
    decodes, and the MathML takes space on the page (a browser that shows it)."""
    from labdriver.browser import chromium_missing

    why = chromium_missing()
    if why:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set and the browser cannot run: {why}")
        pytest.skip(why)
    # Playwright's sync API refuses a thread whose asyncio loop runs (an earlier test in this
    # worker may leave one): the browser gets a thread of its own
    failures: list[BaseException] = []
    thread = threading.Thread(target=lambda: _open_pages(built, failures))
    thread.start()
    thread.join()
    if failures:
        raise failures[0]


def _open_pages(built, failures: list[BaseException]) -> None:
    try:
        _check_pages(built)
    except BaseException as error:  # re-raised in the test's own thread
        failures.append(error)


def _check_pages(built) -> None:
    from labdriver.browser import chromium_browser

    requests: list[str] = []
    with chromium_browser() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.on("request", lambda request: requests.append(request.url))
        for path in sorted(built.glob("*.html")):
            page.goto(path.as_uri(), wait_until="load", timeout=120_000)
            drawn = page.evaluate(
                "() => [...document.images].map(i => i.complete && i.naturalWidth > 0)"
            )
            assert all(drawn), f"{path.name}: {drawn.count(False)} pictures not drawn"
            math = page.evaluate(
                "() => [...document.querySelectorAll('math')]"
                ".filter(m => !m.closest('details:not([open])'))"
                ".filter(m => m.getBoundingClientRect().width === 0).length"
            )
            assert math == 0, f"{path.name}: {math} formulas take no space"
    outside = [url for url in requests if not url.startswith(("file:", "data:"))]
    assert not outside, outside[:5]
