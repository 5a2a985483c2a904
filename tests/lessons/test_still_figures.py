"""Still figures as the learner gets them: a PNG with a text alternative that states the numbers.

`attention_course.lessons.figures.still.StillFigure` is what every figure function
hands a notebook. Its display bundle must be a picture wherever it is shown
(``text/html`` with an ``<img alt>``, ``image/png``), and its alternative must
say what the picture shows, with the numbers drawn, computed from the same data.
"""

from __future__ import annotations

import base64
import configparser
import html
import io
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from support import texts_outside

from attention_course.bench.results import BenchmarkRun
from attention_course.lessons.alternatives import FeatureErrorRow, TimingRow
from attention_course.lessons.cost import attention_traffic
from attention_course.lessons.figures import (
    StillFigure,
    benchmark_figure,
    cpu_and_gpu_figure,
    feature_error_figure,
    report_figure,
    sigmoid_differential_figure,
    timing_figure,
    traffic_figure,
)
from attention_course.lessons.figures.still import PNG_SANITIZER, figure_png
from attention_course.lessons.figures.style import still_figure
from attention_course.lessons.gpu import NO_GPU_RESULTS
from attention_course.model.report import load_report

REPO = Path(__file__).resolve().parents[2]


def _inked(png: bytes) -> bool:
    """Whether a PNG has more than one colour (a blank canvas has one)."""
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))  # (H, W, 3)
    return len(np.unique(pixels.reshape(-1, 3), axis=0)) > 1


def _a_figure() -> StillFigure:
    fig = still_figure(4.0, 2.0)
    fig.add_subplot().plot([0, 1], [1, 0])
    return StillFigure(fig, 'a line falling from 1 to 0 & "back"')


def test_a_still_displays_as_an_image_with_its_alternative_in_every_format():
    still = _a_figure()
    data, metadata = still._repr_mimebundle_()
    assert set(data) == {"text/html", "image/png", "text/plain"}
    png = data["image/png"]
    assert png.startswith(b"\x89PNG") and _inked(png)
    assert Image.open(io.BytesIO(png)).size == (400, 200)  # its own pixels, at 100 dpi
    assert metadata == {"image/png": {"width": 400, "height": 200}}
    assert data["text/plain"] == still.alt == repr(still)
    (img,) = re.findall(r"<img [^>]*/>", data["text/html"])
    assert f'alt="{html.escape(still.alt)}"' in img
    (src,) = re.findall(r'src="data:image/png;base64,([^"]+)"', img)
    assert base64.b64decode(src) == png


def test_a_still_without_an_alternative_is_refused():
    with pytest.raises(ValueError, match="needs a text alternative"):
        StillFigure(still_figure(), "  ")


def test_the_notebooks_sanitizer_leaves_out_the_pictures_bytes_and_nothing_else():
    config = configparser.ConfigParser()
    config.read(REPO / "notebooks" / "sanitize.cfg")
    assert config["still pictures"]["regex"] == PNG_SANITIZER
    html_out = _a_figure().html()
    sanitized = re.sub(PNG_SANITIZER, "PICTURE", html_out)
    assert "base64" not in sanitized and 'alt="a line falling' in sanitized


def test_a_palette_png_keeps_the_figures_size_in_fewer_bytes():
    fig = _a_figure().fig
    full, reduced = figure_png(fig), figure_png(fig, colours=256)
    assert Image.open(io.BytesIO(reduced)).size == Image.open(io.BytesIO(full)).size
    assert len(reduced) < len(full)


# -- each figure's alternative says what it draws ------------------------------------------


def test_the_training_reports_alternative_gives_each_models_last_checkpoint():
    report = load_report()
    still = report_figure(report, ["sqrt_d16", "none_d16"])
    assert still.alt.startswith("Six line charts over 1,500 training steps, one line per model")
    last = report["models"]["none_d16"]["checkpoints"][-1]
    assert f"pronouns right {last['probe_accuracy']['pronoun']:.2f}" in still.alt
    assert "none (×1), d = 16 (squares): loss " in still.alt
    assert "1/√d, d = 16 (circles)" in still.alt
    markers = [line.get_marker() for line in still.fig.axes[0].lines]
    assert markers == ["o", "s"]  # the models differ by marker, not by colour alone


def test_the_traffic_figures_alternative_gives_every_lines_ends():
    still = traffic_figure([1024, 256, 4096], width=64, block=128)
    assert "T = 256, 1024, 4096, d = 64" in still.alt
    fa2 = attention_traffic(4096, 64, "flash2", "backward", 128, 128).bytes("float16") / 2**20
    assert f"FlashAttention-2 backward 0.534 to {fa2:.3g} MiB" in still.alt
    assert still.fig.bbox.width <= 840 and texts_outside(still.fig) == []


def test_the_feature_error_figures_alternative_gives_each_error_and_the_slope():
    rows = [FeatureErrorRow(m, 1.0 / m**0.4, 0.01) for m in (16, 64, 256)]
    still = feature_error_figure(rows)
    errs = ", ".join(f"{r.mean_error:.3f}" for r in rows)
    assert f"m = 16, 64, 256: {errs}" in still.alt
    assert "Fitted slope -0.40 against -0.5" in still.alt
    assert still.fig.axes[0].get_title().startswith("Random-feature error against m")


def test_the_timing_figures_alternative_gives_the_milliseconds_and_slopes():
    rows = [TimingRow(t, 1e-9 * t**2, 1e-7 * t) for t in (256, 512, 1024, 2048)]
    still = timing_figure(rows, points=3)
    assert "T = 256, 512, 1024, 2048" in still.alt
    assert "softmax attention (circles) 0.0655, 0.262, 1.05, 4.19 ms" in still.alt
    assert "slope 2.00" in still.alt and "slope 1.00" in still.alt


def test_the_sigmoid_differential_alternative_gives_the_scale_and_the_row_sums():
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((4, 8)), rng.standard_normal((6, 8))
    still = sigmoid_differential_figure(q, k, lam=0.5)
    assert still.alt.startswith("Three heatmaps of 4 queries' weights over their keys")
    assert "rows sum" in still.alt
    hatches = {bar.get_hatch() for bar in still.fig.axes[3].patches}
    assert len(hatches) == 3  # the row sums' bars differ by hatching, not by colour alone


def _run(rows: list[dict]) -> BenchmarkRun:
    return BenchmarkRun(Path("cpu-x/results.json"), {"machine": "cpu-x", "dtype": "float32"}, rows)


def _rows(path: str, power: float) -> list[dict]:
    return [
        {"path": path, "length": t, "width": 64, "causal": False, "status": "ok",
         "median_s": 1e-9 * t**power, "peak_mib_beyond_inputs": 1e-4 * t**power,
         "gflops": 2.0}
        for t in (512, 1024, 2048, 4096)
    ]  # fmt: skip


def test_the_benchmark_figures_alternative_gives_each_paths_exponents():
    still = benchmark_figure(_run(_rows("torch SDPA", 2.0) + _rows("torch tiled", 1.0)), 64)
    assert "T = 512, 1024, 2048, 4096" in still.alt
    assert "torch SDPA: time 2.00, memory 2.00" in still.alt
    assert "torch tiled: time 1.00, memory 1.00" in still.alt
    lines = [line for line in still.fig.axes[0].lines if not line.get_label().startswith("_")]
    assert len({line.get_marker() for line in lines}) == len(lines)


def test_the_cpu_and_gpu_alternative_says_when_there_is_no_gpu_run():
    still = cpu_and_gpu_figure(_run(_rows("torch SDPA", 2.0)), [], width=64)
    assert "torch SDPA 0.002 TFLOP/s at L = 512 to 0.002 at L = 4096" in still.alt
    assert still.alt.endswith(NO_GPU_RESULTS)
    assert "CPU: no results" in cpu_and_gpu_figure(None, [], width=64).alt
