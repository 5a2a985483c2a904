"""``python -m course site [--out DIR]``: the executed course as a static site.

For a visitor who wants to look before installing: one HTML page per committed
notebook, as it was executed (nbconvert's HTML exporter with its JupyterLab
template), and an index page listing them, written into ``site/`` (git-ignored)
or ``--out DIR``. Nothing is executed: the pages show the committed outputs.

Every page stands alone, with no script, style sheet or font from the network
(a saved copy works offline), and:

- each explorer shows its last picture. A widget's display bundle carries a still
  (``text/html``: ``<div class="al-still"><img src="data:image/png;...">``) beside
  the widget view; the view and the saved widget state are dropped, so the still is
  what is shown. A bundle without one takes the last frame of the widget's Image
  from the saved state, or failing that one line saying the explorer runs in a live
  notebook; never a widget's text repr, and no widget manager from a CDN;
- LaTeX becomes MathML when the page is built (``latex2mathml``), which browsers
  show natively: no MathJax from a CDN;
- code cells whose source is hidden in the notebook (cell metadata ``"jupyter":
  {"source_hidden": true}``: all of a beginner notebook's) show no input, only
  their outputs; the Colab set-up cell, which does nothing outside Colab, is left out;
- links between notebooks (``02_developer_scaling.ipynb``) point at the pages
  (``02_developer_scaling.html``).

Importing this module needs only the standard library; building needs the course's
environment (nbconvert, nbformat and latex2mathml: pyproject.toml's ``dev`` extra).
"""

from __future__ import annotations

import argparse
import html
import re
import sys
import time
from pathlib import Path

from .colab import SETUP_TAG
from .paths import REPO
from .project import binder_link, version

__all__ = ["DEFAULT_OUT", "NOTEBOOKS", "binder_link", "build", "main", "prepare"]

NOTEBOOKS = REPO / "notebooks"
DEFAULT_OUT = REPO / "site"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
#: what a widget's display bundle may carry for a front end without widgets
STILLS = ("text/html", "image/png", "image/jpeg", "image/svg+xml")
#: cells the site leaves out: the Colab set-up (it does nothing anywhere else)
LEAVE_OUT_TAGS = frozenset({SETUP_TAG})
NO_STILL = (
    '<p class="al-no-still"><em>An interactive explorer: it runs in a live notebook '
    "(Binder, Colab or your own JupyterLab).</em></p>"
)
DEPTHS = ("beginner", "developer", "researcher")

# The JupyterLab template, less everything it would load from the network: require.js,
# the widget manager (its state is dropped anyway), MathJax (the math is MathML) and
# mermaid (no diagrams); plus a line of navigation.
TEMPLATE = """\
{%- extends 'index.html.j2' -%}
{%- block html_head_js -%}{%- endblock html_head_js -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block extra_css -%}
<style type="text/css">
nav.course-nav { margin: 0 0 1em; padding: 0.5em 0; border-bottom: 1px solid #ddd;
  font-family: var(--jp-ui-font-family); font-size: var(--jp-ui-font-size1); }
nav.course-nav a { margin-right: 1em; }
math { font-size: 1.1em; }
math[display="block"] { margin: 0.6em 0; }
/* WCAG 2.1 AA: text at 4.5:1 against its background (prompts, code, error output), and links
   told from the text around them without colour (tests/browser/test_accessibility.py). This
   block comes before the template's own style, hence the body prefixes. */
body {
  --jp-cell-prompt-not-active-opacity: 1;
  --jp-cell-prompt-not-active-font-color: #616161;
  --jp-mirror-editor-number-color: #006f00;
  --jp-mirror-editor-comment-color: #326a6a;
  --jp-mirror-editor-operator-color: #7d1dc4;
  --jp-mirror-editor-meta-color: #7d1dc4;
}
body .jp-RenderedHTMLCommon a:link, body .jp-RenderedHTMLCommon a:visited {
  text-decoration: underline; }
.jp-RenderedText[data-mime-type="application/vnd.jupyter.stderr"] pre span {
  color: inherit !important; }
</style>
{%- endblock extra_css -%}
{%- block body_header -%}
{{ super() }}
{{ resources.course_nav }}
{%- endblock body_header -%}
"""


def notebooks(folder: Path = NOTEBOOKS) -> list[Path]:
    """The course's notebooks, in order: ``NN_name.ipynb``."""
    return sorted(folder.glob("[0-9][0-9]_*.ipynb"))


def _title(nb) -> str:
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            found = re.search(r"^#{1,2}\s+(.+?)\s*$", cell.source, re.M)
            if found:
                return found.group(1)
    return ""


def _depth(path: Path) -> str:
    words = path.stem.split("_")
    return words[1] if len(words) > 1 and words[1] in DEPTHS else "everyone"


def _image_from_state(model_id: str, state: dict) -> str | None:
    """The last frame of the Image widget at or under ``model_id`` in the saved state, as
    an ``<img>``, or None."""
    seen, todo = set(), [model_id]
    while todo:
        key = todo.pop(0)
        if key in seen or key not in state:
            continue
        seen.add(key)
        model = state[key]
        values = model.get("state", {})
        if model.get("model_name") == "ImageModel":
            for buffer in model.get("buffers", []):
                if buffer.get("path") == ["value"] and buffer.get("encoding") == "base64":
                    kind = values.get("format", "png")
                    data = buffer["data"]
                    src = f"data:image/{kind};base64,{data}"
                    return f'<div class="al-still"><img src="{src}"/></div>'
        for child in values.get("children", []):
            todo.append(str(child).removeprefix("IPY_MODEL_"))
    return None


def prepare(nb) -> None:
    """Make a notebook (an nbformat node) ready for a page that loads nothing: see the
    module's docstring. Changes ``nb`` in place."""
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    kept = []
    for cell in nb.cells:
        if LEAVE_OUT_TAGS & set(cell.metadata.get("tags", [])):
            continue
        if cell.metadata.get("jupyter", {}).get("source_hidden"):
            cell.metadata.setdefault("transient", {})["remove_source"] = True
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if WIDGET_VIEW not in data:
                continue
            view = data.pop(WIDGET_VIEW)
            if not any(kind in data for kind in STILLS):
                still = _image_from_state(view.get("model_id", ""), state)
                data["text/html"] = still or NO_STILL
            data.pop("text/plain", None)  # the widget's repr: VBox(children=...)
        kept.append(cell)
    nb.cells = kept
    nb.metadata.pop("widgets", None)
    title = _title(nb)
    if title:
        nb.metadata["title"] = title


def _link_pages(page: str) -> str:
    """``href="NN_name.ipynb#x"`` -> ``href="NN_name.html#x"`` (relative links only)."""
    return re.sub(r'(href=")(?![a-z][a-z0-9+.-]*:|/)([^"#?]*?)\.ipynb(?=["#?])', r"\1\2.html", page)


def _exporter():
    import jinja2
    from latex2mathml.converter import convert
    from nbconvert.exporters import HTMLExporter
    from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath

    def mathml(tex: str, display: bool) -> str:
        try:
            return convert(tex.strip(), display="block" if display else "inline")
        except Exception as e:  # latex2mathml raises its own kinds
            raise ValueError(f"latex2mathml cannot convert {tex!r}: {e}") from e

    class MathMLRenderer(IPythonRenderer):
        def block_math(self, body: str) -> str:
            return mathml(body, display=True)

        def inline_math(self, body: str) -> str:
            return mathml(body, display=False)

        def latex_environment(self, name: str, body: str) -> str:
            return mathml(f"\\begin{{{name}}}{body}\\end{{{name}}}", display=True)

    class SiteExporter(HTMLExporter):
        @jinja2.pass_context
        def markdown2html(self, context, source):
            cell = context.get("cell", {})
            path = context.get("resources", {}).get("metadata", {}).get("path", "")
            renderer = MathMLRenderer(
                escape=False,
                attachments=cell.get("attachments", {}),
                embed_images=self.embed_images,
                path=path,
                anchor_link_text=self.anchor_link_text,
                exclude_anchor_links=self.exclude_anchor_links,
                **self.lexer_options,
            )
            return MarkdownWithMath(renderer=renderer).render(source)

    return SiteExporter(
        template_name="lab",
        template_file="course_site.html.j2",
        extra_loaders=[jinja2.DictLoader({"course_site.html.j2": TEMPLATE})],
        embed_images=True,
    )


def _nav(current: str) -> str:
    live = binder_link(current) if current.endswith(".ipynb") else binder_link()
    return (
        '<nav class="course-nav"><a href="index.html">Attention, three ways: all notebooks</a>'
        f'<a href="{html.escape(live)}">Run this notebook live on Binder</a></nav>'
    )


def _index(entries: list[tuple[Path, str]]) -> str:
    rows = "\n".join(
        f'<tr><td><a href="{p.stem}.html">{html.escape(p.stem)}</a></td>'
        f"<td>{_depth(p)}</td><td>{html.escape(title)}</td></tr>"
        for p, title in entries
    )
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8"/>
<meta name="viewport" content="width=device-width, initial-scale=1.0"/>
<title>Attention, three ways</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 56em; margin: 2em auto; padding: 0 1em;
  line-height: 1.5; color: #222; }}
table {{ border-collapse: collapse; width: 100%; }}
th, td {{ text-align: left; padding: 0.3em 0.6em; border-bottom: 1px solid #ddd; }}
</style>
</head>
<body>
<h1>Attention, three ways</h1>
<p>Scaled dot-product attention taught at three depths: beginner (no maths, no code),
developer (code) and researcher (maths and papers). These pages are the course's
notebooks as executed (version {html.escape(version())}): each explorer shows its
last picture. To move the sliders, run the notebooks:
<a href="{html.escape(binder_link())}">on Binder</a>, on Colab, or on your own machine
(<code>make lab</code>, or <code>python -m course lab</code>).
Start with <a href="00_start_here.html">00_start_here</a>.</p>
<table>
<thead><tr><th>notebook</th><th>depth</th><th>what it is</th></tr></thead>
<tbody>
{rows}
</tbody>
</table>
</body>
</html>
"""


def build(out: Path = DEFAULT_OUT, folder: Path = NOTEBOOKS) -> list[Path]:
    """Write one page per notebook in ``folder`` and ``index.html`` into ``out``; returns
    the pages written, the index last. Notebook pages left from an earlier build
    (``NN_*.html``) are removed; nothing else in ``out`` is touched."""
    import nbformat

    exporter = _exporter()
    out.mkdir(parents=True, exist_ok=True)
    for old in [*out.glob("[0-9][0-9]_*.html"), out / "index.html"]:  # ours, never others'
        old.unlink(missing_ok=True)
    written, entries = [], []
    for path in notebooks(folder):
        nb = nbformat.read(path, as_version=4)
        prepare(nb)
        resources = {
            "metadata": {"name": path.stem, "path": str(path.parent)},
            "course_nav": _nav(path.name),
        }
        page, _ = exporter.from_notebook_node(nb, resources=resources)
        target = out / f"{path.stem}.html"
        target.write_text(_link_pages(page), encoding="utf-8")
        written.append(target)
        entries.append((path, nb.metadata.get("title", path.stem)))
    index = out / "index.html"
    index.write_text(_index(entries), encoding="utf-8")
    return [*written, index]


def main(argv: list[str] | None = None) -> int:
    """``python -m course site [--out DIR]``."""
    parser = argparse.ArgumentParser(
        prog="python -m course site", description=__doc__.split("\n\n")[1]
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="default: site/")
    args = parser.parse_args(argv)
    try:
        import latex2mathml  # noqa: F401
        import nbconvert  # noqa: F401
    except ModuleNotFoundError as e:
        print(
            f"course site: {e.name} is missing: run this in the course's environment "
            "(.venv/bin/python -m course site, after make or python -m course install)",
            file=sys.stderr,
        )
        return 2
    started = time.perf_counter()
    pages = build(args.out)
    seconds = time.perf_counter() - started
    print(f"{len(pages)} pages in {args.out} ({seconds:.1f} s): open {args.out / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
