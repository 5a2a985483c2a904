"""The cost model's numbers, the tiled memory count, and reading the benchmark suite's files."""

from __future__ import annotations

import json

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest

from attention_course.bench import cpu as cpu_suite
from attention_course.bench.results import (
    benchmark_headline,
    describe_exponents,
    expected_exponent,
    load_benchmarks,
    time_steps,
)
from attention_course.lessons.cost import (
    format_cost_table,
    format_memory_table,
    head_cost,
    tiled_memory,
)
from attention_course.lessons.figures import plot_benchmark
from attention_lib.fits import log_log_slope

MiB = 1024 * 1024


def test_head_cost_at_the_lesson_size() -> None:
    c = head_cost(1024, 64)
    assert c.qk_flops == 2 * 1024**2 * 64 == 134_217_728
    assert c.av_flops == 134_217_728
    assert c.matmul_flops == 268_435_456
    assert c.softmax_exps == c.score_elements == 1024**2
    assert c.score_bytes == 4 * MiB  # float32
    assert head_cost(1024, 64, dtype="float16").score_bytes == 2 * MiB
    assert head_cost(1024, 64, dtype="bfloat16").score_bytes == 2 * MiB
    assert head_cost(16384, 64).score_bytes == 1024 * MiB  # 1 GiB per head


def test_head_cost_grows_like_t_squared_and_d() -> None:
    a, b = head_cost(512, 32, 128), head_cost(1024, 32, 128)
    assert b.qk_flops == 4 * a.qk_flops and b.score_bytes == 4 * a.score_bytes
    assert a.av_flops == 4 * a.qk_flops  # d_v = 4 d_k


def test_head_cost_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="length must be a positive integer, got 0"):
        head_cost(0)
    with pytest.raises(ValueError, match="width_k must be a positive integer, got True"):
        head_cost(8, True)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"width_v must be a positive integer, got 2\.5"):
        head_cost(8, 4, 2.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown dtype 'float99'"):
        head_cost(8, dtype="float99")


def test_cost_table_shows_the_counts() -> None:
    text = format_cost_table([1024, 4096])
    assert "134,217,728" in text and "4.0 MiB" in text
    assert "2,147,483,648" in text and "64.0 MiB" in text  # 2·4096²·64 and 4096² float32


def test_tiled_memory_is_linear_in_t() -> None:
    m = tiled_memory(4096, 64, 128, 128)
    assert (m.rows, m.tile, m.stats, m.accumulator) == (4096, 128 * 128, 2 * 4096, 4096 * 64)
    assert m.total == 16_384 + 8_192 + 262_144
    # doubling T doubles everything but the fixed tile
    m2 = tiled_memory(8192, 64, 128, 128)
    assert m2.total - m2.tile == 2 * (m.total - m.tile)
    # one query block's worth, as the numpy loop holds it, does not grow with T at all
    assert tiled_memory(4096, 64, 128, 128, rows=128) == tiled_memory(8192, 64, 128, 128, rows=128)
    # blocks beyond the lengths are capped, as the last tile is
    assert tiled_memory(10, 4, 64, 64, length_k=6).tile == 10 * 6


def test_tiled_memory_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match=r"rows \(9\) cannot exceed the sequence length \(8\)"):
        tiled_memory(8, 4, 2, 2, rows=9)
    with pytest.raises(ValueError, match="block_k must be a positive integer, got 0"):
        tiled_memory(8, 4, 2, 0)


def test_memory_table_compares_matrix_and_tiles() -> None:
    text = format_memory_table([1024, 16384], width_v=64, block_q=128, block_k=128)
    lines = text.splitlines()
    assert lines[2].split()[0] == "1024" and "4.0 MiB" in lines[2]
    # T = 16384: matrix 1 GiB; tiled 64 KiB + 128 KiB + 4 MiB
    assert "1.0 GiB" in lines[3] and "4.2 MiB" in lines[3]
    assert lines[3].endswith(f"{2**30 / ((16384 + 2 * 16384 + 16384 * 64) * 4):.1f}x")


# --- benchmark files -------------------------------------------------------------------

LENGTHS = [256, 512, 1024, 2048]


def fake_suite(machine: str, gpu: str | None = None) -> dict:
    """A suite as `attention_course.bench.cpu.run_suite` returns it, with made-up times ∝ L²
    and memory ∝ L or L²."""
    results = []
    for causal in (False, True):
        for length in LENGTHS:
            for path, memory_power in (("numpy reference", 2), ("torch tiled", 1)):
                case = cpu_suite.Case(path, length, 64, causal)
                t = 1e-7 * length**2 / (2 if causal else 1)
                peak = 1e-3 * length**memory_power
                results.append(cpu_suite.Result(case, "ok", [t, 1.1 * t, 0.9 * t], peak))
    refused = cpu_suite.Case("numpy reference", 4096, 64, False)
    results.append(cpu_suite.Result(refused, "refused", note="would not fit"))
    info = {"machine": machine, "cpu_count": 2, "torch_threads": 2, "dtype": "float32"}
    if gpu:
        info |= {"gpu": gpu, "device": "cuda"}
    args = {"widths": [64], "lengths": LENGTHS}
    limits = {"numpy": 10.0, "torch": 20.0}
    return {"info": info, "matmul_gflops": limits, "results": results, "args": args}


@pytest.fixture(scope="module")
def results_root(tmp_path_factory: pytest.TempPathFactory):
    """Two machines' results, written by the benchmark suite's own writer."""
    root = tmp_path_factory.mktemp("results")
    cpu_suite.write(fake_suite("cpu-2core-x86_64"), root)
    cpu_suite.write(fake_suite("gpu-nvidia-h200", gpu="NVIDIA H200"), root)
    return root


def test_load_reads_every_machine(results_root) -> None:
    runs = load_benchmarks(results_root)
    assert [r.machine for r in runs] == ["cpu-2core-x86_64", "gpu-nvidia-h200"]
    cpu, gpu = runs
    assert not cpu.is_gpu and gpu.is_gpu
    assert cpu.label == "cpu-2core-x86_64 (2 CPU cores, 2 torch threads, float32)"
    assert gpu.label == "gpu-nvidia-h200 (NVIDIA H200, float32)"
    assert cpu.paths == ["numpy reference", "torch tiled"] and cpu.widths == [64]
    assert cpu.command.startswith("python -m attention_course.bench")


def test_series_keeps_only_successful_measurements(results_root) -> None:
    cpu = load_benchmarks(results_root)[0]
    lengths, times = cpu.series("numpy reference", "time", 64)
    assert lengths == LENGTHS  # the refused 4096 is left out
    assert times == pytest.approx([1e-7 * n**2 for n in LENGTHS])  # the median of the repeats
    _, causal_times = cpu.series("numpy reference", "time", 64, causal=True)
    assert causal_times == pytest.approx([t / 2 for t in times])
    assert cpu.series("torch tiled", "memory", 128) == ([], [])
    with pytest.raises(ValueError, match=r"metric must be one of \['memory', 'time'\]"):
        cpu.series("torch tiled", "flops", 64)


def test_exponents_come_from_bench_fit_exponent(results_root) -> None:
    cpu = load_benchmarks(results_root)[0]
    fits = cpu.exponents(64)
    assert fits["numpy reference"]["time"] == pytest.approx(2.0)
    assert fits["numpy reference"]["memory"] == pytest.approx(2.0)
    assert fits["torch tiled"]["memory"] == pytest.approx(1.0)
    # the same numbers the suite itself wrote into the file
    written = json.loads((results_root / "cpu-2core-x86_64" / "results.json").read_text())
    for path, fit in written["growth_exponents"]["fits"].items():
        assert fits[path] == pytest.approx(fit)


def test_describe_exponents_says_what_the_data_shows(results_root) -> None:
    cpu = load_benchmarks(results_root)[0]
    text = describe_exponents(cpu, 64)
    assert "numpy reference  time  2.00 (near 2), memory  2.00 (near 2)" in text
    assert "torch tiled      time  2.00 (near 2), memory  1.00 (near 1)" in text
    assert "NOT near" not in text
    assert "  time: 2 of 2 paths near the predicted exponent (fitted 2.00 to 2.00)" in text
    assert "  memory: 2 of 2 paths near the predicted exponent (fitted 1.00 to 2.00)" in text
    assert expected_exponent("torch SDPA", "memory") == 1
    assert expected_exponent("torch reference", "memory") == 2
    assert expected_exponent("triton", "time") == 2


def test_describe_exponents_flags_a_miss(tmp_path) -> None:
    suite = fake_suite("cpu-odd")
    for r in suite["results"]:
        if r.case.path == "torch tiled" and r.status == "ok":
            r.peak_mib = 1e-6 * r.case.length**2  # as if the tiled path held the whole matrix
    cpu_suite.write(suite, tmp_path)
    text = describe_exponents(load_benchmarks(tmp_path)[0], 64)
    assert "torch tiled      time  2.00 (near 2), memory  2.00 (NOT near 1)" in text
    assert "  memory: 1 of 2 paths near the predicted exponent" in text


def test_missing_or_broken_results(tmp_path) -> None:
    assert load_benchmarks(tmp_path / "nowhere") == []
    assert load_benchmarks(tmp_path) == []
    bad = tmp_path / "cpu-x" / "results.json"
    bad.parent.mkdir()
    bad.write_text(json.dumps({"results": []}))
    with pytest.raises(ValueError, match=r"cpu-x/results.json is not a benchmark results file"):
        load_benchmarks(tmp_path)


@pytest.mark.filterwarnings("error")
def test_plot_draws_every_path_with_its_slope(results_root) -> None:
    cpu = load_benchmarks(results_root)[0]
    fig, axes = plt.subplots(1, 2)
    plot_benchmark(cpu, axes, 64)
    for ax in axes:
        labels = ax.get_legend_handles_labels()[1]
        assert any(label.startswith("numpy reference  (slope 2.00)") for label in labels)
        assert ax.get_xscale() == ax.get_yscale() == "log"
    memory_labels = axes[1].get_legend_handles_labels()[1]
    assert "torch tiled  (slope 1.00)" in memory_labels
    fig.canvas.draw()
    plt.close(fig)


def test_benchmark_headline_is_computed_from_the_fits(results_root, tmp_path) -> None:
    cpu = load_benchmarks(results_root)[0]
    assert benchmark_headline(cpu, 64) == (
        "time slopes 2.00–2.00 (2 of 2 near 2)\n"
        "memory slopes: paths that store the scores 2.00–2.00 (1 of 1 near 2); "
        "the others 1.00–1.00 (1 of 1 near 1)"
    )
    suite = fake_suite("cpu-odd")
    for r in suite["results"]:
        if r.case.path == "torch tiled" and r.status == "ok":
            r.peak_mib = 1e-6 * r.case.length**2  # as if the tiled path held the whole matrix
    cpu_suite.write(suite, tmp_path)
    odd = benchmark_headline(load_benchmarks(tmp_path)[0], 64)
    assert odd.endswith("the others 2.00–2.00 (0 of 1 near 1)")


def test_time_steps_finds_where_the_time_per_score_jumps_and_fits_past_it() -> None:
    lengths = [256, 512, 1024, 2048, 4096, 8192]
    per_score = [40e-9, 40e-9, 80e-9, 80e-9, 320e-9, 320e-9]  # two steps up, flat between
    times = [c * t**2 for c, t in zip(per_score, lengths, strict=True)]
    s = time_steps(lengths, times)
    assert s.lengths == lengths
    assert s.per_score == pytest.approx(per_score)
    assert s.local == pytest.approx([2, 3, 2, 4, 2])
    assert s.steps == [(512, 1024), (2048, 4096)]
    assert s.past == [4096, 8192] and s.fitted == pytest.approx(2.0)
    assert log_log_slope(lengths, times) > 2.35  # fitted across the steps, the slope is steep


def test_time_steps_without_a_step_fits_every_length_and_a_final_step_fits_nothing() -> None:
    lengths = [512, 1024, 2048]
    flat = time_steps(lengths, [1e-8 * t**2 for t in lengths])
    assert flat.steps == [] and flat.past == lengths and flat.fitted == pytest.approx(2.0)
    last = time_steps(lengths, [1e-8 * t**2 * (8 if t == 2048 else 1) for t in lengths])
    assert last.steps == [(1024, 2048)] and last.past == [2048] and last.fitted is None
    unsorted = time_steps([2048, 512, 1024], [4.0, 0.25, 1.0])
    assert unsorted.lengths == [512, 1024, 2048] and unsorted.steps == []


def test_time_steps_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="one time per length, got 2 and 1"):
        time_steps([1, 2], [1.0])
    with pytest.raises(ValueError, match="two or more measurements"):
        time_steps([256], [1.0])
    with pytest.raises(ValueError, match="must be positive"):
        time_steps([256, 512], [1.0, 0.0])


def test_a_run_says_how_many_heads_each_measurement_ran(results_root, tmp_path) -> None:
    cpu = load_benchmarks(results_root)[0]
    assert cpu.batch_heads == 8  # attention_course.bench.cpu.Case's default
    mixed = dict(json.loads(cpu.source.read_text()))
    mixed["results"] = [*mixed["results"], {**mixed["results"][0], "batch_heads": 1}]
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "results.json").write_text(json.dumps(mixed))
    assert load_benchmarks(tmp_path)[0].batch_heads is None


def test_a_run_gives_the_bytes_of_one_score_tensor(results_root) -> None:
    cpu = load_benchmarks(results_root)[0]
    assert cpu.score_bytes(1024) == 8 * 1024**2 * 4 == 32 * MiB  # B·H = 8, float32


def test_a_gpu_run_counts_its_heads_from_batch_and_heads(tmp_path) -> None:
    rows = [{"path": "triton", "length": 1024, "batch": 2, "heads": 16, "status": "ok"}]
    (tmp_path / "gpu-x").mkdir()
    (tmp_path / "gpu-x" / "results.json").write_text(
        json.dumps({"info": {"device": "cuda", "dtype": "float16"}, "results": rows})
    )
    run = load_benchmarks(tmp_path)[0]
    assert run.batch_heads == 32 and run.score_bytes(1024) == 32 * 1024**2 * 2
