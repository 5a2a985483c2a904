"""Every picture is a picture: the committed outputs as a learner's front end shows them.

nbval compares each output with itself, so a figure committed as the text
``<Figure size 840x390 with 2 Axes>`` passed it for as long as it stayed that
way. These tests read the committed notebooks and fail on what a learner would
see instead of a picture:

- an output that is the text repr of a figure or a widget, with nothing to show
  in its place (no ``image/png``, no ``<img>`` in its HTML, no widget view);
- a PNG with no ink: one colour from edge to edge;
- a still figure of `support.STILL_FIGURES` that is not a picture with a text
  alternative, or whose prose no longer points at it; a picture that list does
  not name; an explorer without the still picture it leaves for pages with no
  kernel (`support.pictures_in` counts both).
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from support import STILL_FIGURES, pictures_in

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(REPO.glob("notebooks/[0-9][0-9]_*.ipynb"))
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
TEXT_REPR = re.compile(
    r"^\s*(<Figure size|<matplotlib\.|<Axes|<AxesSubplot|<IPython\.core\.display\."
    r"|(VBox|HBox|Box|GridBox|Image|IntSlider|FloatSlider|FloatLogSlider|SelectionSlider"
    r"|IntRangeSlider|FloatRangeSlider|ToggleButtons|ToggleButton|Dropdown|RadioButtons"
    r"|HTML|HTMLMath|Button|Output|Label|Checkbox|Play|Tab|Accordion|Text|Textarea"
    r"|BoundedIntText|BoundedFloatText|IntText|FloatText)\((children|value|description|"
    r"layout|options|index|max|min|format)=)",
    re.MULTILINE,
)
DATA_URL = re.compile(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"')
ALT = re.compile(r'<img [^>]*alt="([^"]*)"')


def _notebook(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _text(value: str | list[str]) -> str:
    return value if isinstance(value, str) else "".join(value)


def _pngs(output: dict) -> list[bytes]:
    """Every PNG an output carries: its ``image/png`` and the data URLs in its HTML."""
    data = output.get("data", {})
    found = [base64.b64decode(_text(data["image/png"]))] if "image/png" in data else []
    found += [base64.b64decode(m) for m in DATA_URL.findall(_text(data.get("text/html", "")))]
    return found


def _inked(png: bytes) -> bool:
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))  # (H, W, 3)
    return bool((pixels != pixels[:1, :1]).any())


def _is_still_figure(output: dict) -> bool:
    """A still figure's display bundle (`StillFigure`): a PNG and an ``<img>`` of it, no widget."""
    data = output.get("data", {})
    return (
        "image/png" in data
        and "<img " in _text(data.get("text/html", ""))
        and (WIDGET_VIEW not in data)
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem[:2])
def test_no_output_is_a_figure_or_a_widget_as_text(path):
    shown_as_text = []
    for index, cell in enumerate(_notebook(path)["cells"]):
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if output["output_type"] == "stream":
                text = _text(output["text"])
            elif _pngs(output) or WIDGET_VIEW in data:
                continue  # the repr is only the fallback of a picture or a widget
            else:
                text = _text(data.get("text/plain", ""))
            shown_as_text += [f"cell {index}: {m.group(0)!r}" for m in TEXT_REPR.finditer(text)]
    assert shown_as_text == [], f"{path.name} shows these as text, not as pictures"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem[:2])
def test_every_committed_picture_has_ink(path):
    blank = []
    for index, cell in enumerate(_notebook(path)["cells"]):
        for output in cell.get("outputs", []):
            try:
                pngs = _pngs(output)
            except binascii.Error as error:
                blank.append(f"cell {index}: not base64 ({error})")
                continue
            blank += [f"cell {index}" for png in pngs if not _inked(png)]
    assert blank == [], f"{path.name}: pictures with no ink"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem[:2])
def test_every_still_figure_is_a_picture_with_its_alternative_where_the_prose_says(path):
    cells = _notebook(path)["cells"]
    listed = STILL_FIGURES.get(path.stem, {})
    by_id = {cell.get("id"): index for index, cell in enumerate(cells)}
    for cell_id, phrase in listed.items():
        assert cell_id in by_id, f"{path.name}: no cell {cell_id}"
        index = by_id[cell_id]
        stills = [o for o in cells[index].get("outputs", []) if _is_still_figure(o)]
        assert stills, f"{path.name} cell {index} ({cell_id}): no still figure"
        for output in stills:
            alts = ALT.findall(_text(output["data"]["text/html"]))
            assert alts and all(len(alt) > 40 for alt in alts), (path.name, index, alts)
            assert _text(output["data"]["text/plain"]).strip(), (path.name, index)
        if phrase is not None:
            nearby = cells[max(0, index - 3) : index + 4]
            prose = " ".join(_text(c["source"]) for c in nearby if c["cell_type"] == "markdown")
            prose = " ".join(prose.split())  # a phrase may break across lines
            assert phrase in prose, f"{path.name} cell {index}: the prose no longer says {phrase!r}"
    drawn = [
        index
        for index, cell in enumerate(cells)
        if any(_is_still_figure(o) for o in cell.get("outputs", []))
    ]
    assert sorted(drawn) == sorted(by_id[c] for c in listed), (
        f"{path.name}: still figures in cells {drawn}; support.STILL_FIGURES names "
        f"{sorted(by_id.get(c) for c in listed)}"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem[:2])
def test_every_explorer_leaves_a_still_picture(path):
    explorers, _ = pictures_in(path.stem)
    stills = sum(
        'class="al-still"' in _text(o.get("data", {}).get("text/html", ""))
        for cell in _notebook(path)["cells"]
        for o in cell.get("outputs", [])
    )
    assert stills == explorers, f"{path.name}: {stills} still pictures for {explorers} explorers"
