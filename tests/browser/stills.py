"""The still figures a page shows, counted against `support.STILL_FIGURES` in any front end.

A still figure reaches the page as an output's ``<img>`` of a PNG (the HTML of a
`StillFigure`), outside every widget: JupyterLab, Notebook 7 and Voila render it
the same way. Each must be decoded, inked and carry its text alternative.
"""

from __future__ import annotations

from typing import Any

from support import pictures_in

_JS_STILLS = """() => Array.from(document.querySelectorAll('.jp-OutputArea-output img'))
  .filter((img) => img.getAttribute('src').startsWith('data:image/png')
    && !img.closest('.jupyter-widgets, .widget-image, .al-still, .al-explorer'))
  .map((img) => ({complete: img.complete, width: img.naturalWidth, alt: img.alt,
                  inked: window.__alInked ? window.__alInked(img) : 1}))"""


def still_figures(page: Any) -> list[dict]:
    """Every still figure in ``page`` (a Playwright page or a `labdriver.NotebookPage`)."""
    return getattr(page, "page", page).evaluate(_JS_STILLS)


def check_still_figures(page: Any, name: str, where: str) -> None:
    """``page`` shows each still figure that notebook ``name`` lists, drawn, with its alt."""
    stills = still_figures(page)
    _, listed = pictures_in(name.removesuffix(".ipynb"))
    assert len(stills) == listed, f"{where}: {len(stills)} still figures, {listed} listed"
    for still in stills:
        assert still["complete"] and still["width"] > 0, f"{where}: a still figure not drawn"
        assert still["inked"], f"{where}: a blank still figure"
        assert len(still["alt"]) > 40, f"{where}: a still figure's alt is {still['alt']!r}"
