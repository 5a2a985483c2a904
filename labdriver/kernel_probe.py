"""The kernel side of `NotebookPage.probe`: a program the page runs in the notebook's kernel.

Not imported by the driver: `NotebookPage.probe` sends this file's source to the
notebook's own kernel once (where it runs as ``__main__``, so the last lines
install the capture), then calls ``_browser_test_probe`` there. It defines the
capture of logged errors and warnings (a slider callback that raises is only
logged by the kernel's comm manager), and a probe that prints, as one JSON
line, every Explorer's controls, what its figure shows (`_browser_test_figure`,
which the unit tests of the text alternatives call in-process too), its text
alternative, and the inputs a test needs to recompute the figure with the
library. Its names start with ``_browser_test_`` to keep out of the way of the
notebook's own.
"""


def _browser_test_setup():
    import logging
    import warnings

    class Capture(logging.Handler):
        def __init__(self):
            super().__init__(logging.WARNING)
            self.records = []
            self.setFormatter(logging.Formatter("%(name)s %(levelname)s: %(message)s"))

        def emit(self, record):
            self.records.append(self.format(record))

    capture = Capture()
    logging.getLogger().addHandler(capture)
    shown = warnings.showwarning

    def showwarning(message, category, filename, lineno, file=None, line=None):
        capture.records.append(f"{category.__name__}: {message} ({filename}:{lineno})")
        shown(message, category, filename, lineno, file, line)

    warnings.showwarning = showwarning
    warnings.simplefilter("always")
    return capture


def _browser_test_figure(fig):
    """What a figure shows, for the checks: per axes its title, texts, legend texts,
    rectangle heights and widths (in drawing order), line y-data and colour-mapped grids
    (images, and meshes: 06's panels); the suptitle and the figure's own texts."""
    import numpy as np
    from matplotlib.collections import QuadMesh
    from matplotlib.patches import Rectangle

    def grids(ax):
        return [*ax.images, *(c for c in ax.collections if isinstance(c, QuadMesh))]

    def legend(ax):
        found = ax.get_legend()
        return [t.get_text() for t in found.get_texts()] if found is not None else []

    sup = fig._suptitle.get_text() if fig._suptitle is not None else ""
    return {
        "suptitle": sup,
        "texts": [t.get_text() for t in fig.texts],
        "axes": [
            {
                "title": ax.get_title(),
                "texts": [t.get_text() for t in ax.texts],
                "legend": legend(ax),
                "heights": [p.get_height() for p in ax.patches if isinstance(p, Rectangle)],
                "widths": [p.get_width() for p in ax.patches if isinstance(p, Rectangle)],
                "lines": [np.asarray(line.get_ydata(), dtype=float) for line in ax.lines],
                "images": [np.asarray(im.get_array(), dtype=float) for im in grids(ax)],
            }
            for ax in fig.axes
        ],
    }


def _browser_test_probe(inputs_by_class, full=True):
    import gc
    import json
    import math

    import numpy as np

    from attention_course.explorers.base import live_explorers, one_line

    def plain(x):
        if isinstance(x, dict):
            return {str(k): plain(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [plain(v) for v in x]
        if isinstance(x, np.ndarray):
            return plain(x.tolist())
        if isinstance(x, np.generic):
            return plain(x.item())
        if isinstance(x, float) and not math.isfinite(x):
            return repr(x)
        return x

    gc.collect()  # an explorer of a cell run again, if nothing holds it any more
    explorers = live_explorers()  # frozen ones included, which gc.get_objects() leaves out
    result = []
    for e in explorers:
        names = {id(v): k for k, v in vars(e).items()}
        controls = [
            {
                "attr": names.get(id(c), "?"),
                "kind": type(c).__name__,
                "description": c.description,
                "value": c.value,
                "label": getattr(c, "label", None),
                "disabled": bool(getattr(c, "disabled", False)),
            }
            for c in e.controls
        ]
        entry = {"key": id(e), "cls": type(e).__name__, "controls": controls}
        if full:
            entry["figure"] = _browser_test_figure(e.fig)
            entry["alt"] = one_line(e.describe())  # the text alternative, as the page gets it
            expr = inputs_by_class.get(type(e).__name__)
            entry["inputs"] = eval(expr, {"e": e, "np": np}) if expr else {}
        result.append(entry)
    print(json.dumps(plain({"explorers": result, "problems": _browser_test_capture.records})))


if __name__ == "__main__":  # in the kernel, not when imported
    _browser_test_capture = _browser_test_setup()
