#!/usr/bin/env python3
"""Screenshots of every notebook as a learner sees it on a laptop, after Run All.

    .venv/bin/python scripts/screenshots.py [--size 1280x800] [--out docs/screenshots] [NN ...]

For each numbered notebook (or the ones named by number): JupyterLab, started as
``make lab`` starts it on a scratch copy of ``notebooks/``, opens it in Debian's
Chromium at the given window size with the file browser open (JupyterLab's
default); Run ▸ Run All Cells runs it, the page waits until every explorer has
painted, and then the notebook is scrolled one screenful at a time. Each
screenful of the notebook area is pasted into one tall picture,
``<out>/<notebook>.png``, so a reader sees exactly what the window showed, top
to bottom; ``<out>/<notebook>-first-screen.png`` is the whole window at the top.
Pictures are stored with a 128-colour palette (text and flat plots lose nothing
a reader would see) to keep the repository small.
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
from pathlib import Path

import labdriver  # the browser driver (labdriver/): one way to start and drive the lab

REPO = Path(__file__).resolve().parents[1]

# The notebook's scrolling area in JupyterLab 4.
_JS_SCROLLER = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const outer = panel.content.node.querySelector('.jp-WindowedPanel-outer');
  const box = outer.getBoundingClientRect();
  return {x: box.x, y: box.y, width: box.width, height: box.height,
          scrollHeight: outer.scrollHeight};
}"""
_JS_SCROLL_TO = """(top) => {
  const panel = window.jupyterapp.shell.currentWidget;
  const outer = panel.content.node.querySelector('.jp-WindowedPanel-outer');
  outer.scrollTop = top;
  return outer.scrollTop;
}"""


def _png(data: bytes):
    from PIL import Image

    return Image.open(io.BytesIO(data)).convert("RGB")


def trim_bottom(image, margin: int = 24):
    """``image`` without the blank space JupyterLab leaves below a notebook's last cell."""
    import numpy as np

    rows = np.asarray(image.convert("L")) < 250  # (H, W): not white
    inked = np.flatnonzero(rows.any(axis=1))
    bottom = int(inked[-1]) + 1 + margin if inked.size else image.height
    return image.crop((0, 0, image.width, min(bottom, image.height)))


def _save(image, path: Path) -> None:
    from PIL import Image

    image.quantize(colors=128, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)


def shoot(browser, server, name: str, size: tuple[int, int], out: Path) -> list[Path]:
    """Run ``name`` in a page of ``size`` and write its pictures; the paths written."""
    from PIL import Image

    workspace = "shots-" + name.removesuffix(".ipynb").replace("_", "-")
    page = labdriver.open_notebook(browser, server, name, workspace, viewport=size)
    try:
        page.run_all()
        page.page.wait_for_timeout(1500)  # let the layout and the pictures settle
        stem = name.removesuffix(".ipynb")
        page.page.evaluate(_JS_SCROLL_TO, 0)
        page.page.wait_for_timeout(500)
        first = out / f"{stem}-first-screen.png"
        _save(_png(page.page.screenshot()), first)

        area = page.page.evaluate(_JS_SCROLLER)
        clip = {k: area[k] for k in ("x", "y", "width", "height")}
        tall = Image.new("RGB", (round(area["width"]), round(area["scrollHeight"])), "white")
        top = 0.0
        while True:
            reached = page.page.evaluate(_JS_SCROLL_TO, top)
            page.page.wait_for_timeout(400)  # the windowed notebook renders what scrolled in
            area = page.page.evaluate(_JS_SCROLLER)  # cells may have grown as they rendered
            if area["scrollHeight"] > tall.height:
                grown = Image.new("RGB", (tall.width, round(area["scrollHeight"])), "white")
                grown.paste(tall, (0, 0))
                tall = grown
            tall.paste(_png(page.page.screenshot(clip=clip)), (0, round(reached)))
            if reached + clip["height"] >= area["scrollHeight"] - 1:
                break
            top = reached + clip["height"]
        whole = out / f"{stem}.png"
        _save(trim_bottom(tall.crop((0, 0, tall.width, round(area["scrollHeight"])))), whole)
        return [first, whole]
    finally:
        page.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("numbers", nargs="*", help="notebook numbers (default: all)")
    parser.add_argument("--size", default="1280x800", help="window size, WIDTHxHEIGHT")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "screenshots")
    args = parser.parse_args(argv)
    width, height = (int(v) for v in args.size.lower().split("x"))
    reason = labdriver.chromium_missing()
    if reason:
        print(reason, file=sys.stderr)
        return 2
    names = [p.name for p in labdriver.numbered_notebooks()]
    if args.numbers:
        names = [n for n in names if n[:2] in {f"{int(x):02d}" for x in args.numbers}]
    args.out.mkdir(parents=True, exist_ok=True)

    with (
        tempfile.TemporaryDirectory() as scratch,
        labdriver.scratch_lab(Path(scratch)) as server,
        labdriver.chromium_browser() as browser,
    ):
        for name in names:
            for path in shoot(browser, server, name, (width, height), args.out):
                print(path.relative_to(REPO) if path.is_relative_to(REPO) else path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
