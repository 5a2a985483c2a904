"""The benchmark suite: every attention path, measured side by side in one run.

    python -m attention_lib.bench                 # the sweep, then the ratios (about 20 minutes
                                                  # on 2 cores)
    python -m attention_lib.bench --quick         # a small sweep and small ratios, for trying it
    python -m attention_lib.bench --ratios-only   # the ratios alone (about 5 minutes)

On a machine with a CUDA device the same command runs the GPU benchmark
instead (`attention_lib.bench_gpu`: our kernels against PyTorch's SDPA
backends, timed with CUDA events); ``--device cpu`` keeps this one.

For each path, sequence length, head width and causal setting it records the
median time over repeats, the achieved GFLOP/s (4·B·H·L·S·E FLOPs, halved for
causal, as FlashAttention's benchmark counts them), the peak memory beyond the
inputs (the process high-water mark on the CPU, `max_memory_allocated` on a
GPU), and each as a fraction of a plain matrix product timed in the same run,
the machine's practical limit. Ratios measured in one run are what to compare:
these machines are shared and noisy. Sizes that would not fit are refused and
recorded as such. Results go to ``benchmarks/results/<machine>/`` as JSON, CSV
and PNG plots, with the machine, versions and thread count.

Then the ratios (`attention_lib.bench_ratios`): our torch tiled path against
PyTorch's SDPA, forward and forward + backward, causal and not, timed
alternately, idle and with one other busy process the run starts and stops
itself; its memory beyond inputs and outputs at L = 16384; the numpy tiled
loop against the numpy reference. They go to ``ratios.json`` beside the
sweep's files, with the load average the machine had.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .core import scaled_dot_product_attention
from .fits import log_log_slope
from .flash import flash_attention
from .memory import AttentionMemoryError, available_bytes, format_bytes

__all__ = ["Case", "Result", "fit_exponent", "main", "run_suite"]

MiB = 1024 * 1024
FULL_LENGTHS = (256, 512, 1024, 2048, 4096, 8192, 16384)
QUICK_LENGTHS = (256, 512, 1024)


@dataclass(frozen=True)
class Case:
    """One measurement: a path at one size."""

    path: str
    length: int
    width: int
    causal: bool
    batch_heads: int = 8

    @property
    def flops(self) -> float:
        """4·B·H·L·S·E (two matmuls of 2·L·S·E each), halved when causal."""
        n = 4.0 * self.batch_heads * self.length * self.length * self.width
        return n / 2 if self.causal else n


@dataclass
class Result:
    """What one `Case` measured; ``status`` is "ok", "refused" or "failed"."""

    case: Case
    status: str
    times_s: list[float] = field(default_factory=list)
    peak_mib: float | None = None  # memory beyond the inputs
    note: str = ""

    @property
    def median_s(self) -> float | None:
        return statistics.median(self.times_s) if self.times_s else None

    @property
    def gflops(self) -> float | None:
        t = self.median_s
        return self.case.flops / t / 1e9 if t else None


# --- memory -------------------------------------------------------------------


class _HostPeak:
    """Peak resident memory of this process during one run, via Linux's VmHWM.

    glibc keeps freed blocks below its mmap threshold (up to 32 MiB) for reuse,
    so a run's temporaries could land in memory that is already resident and
    never show in the high-water mark. For the measured run we lower the
    threshold to 64 KiB, so every sizeable block is fresh memory, and restore
    a large one for the timed runs, so they keep their fast reuse.
    """

    M_TRIM_THRESHOLD = -1  # mallopt parameter numbers, from glibc's malloc.h
    M_MMAP_THRESHOLD = -3

    def __init__(self) -> None:
        import ctypes
        import ctypes.util

        self.libc = None
        if Path("/proc/self/clear_refs").exists() and platform.libc_ver()[0] == "glibc":
            self.libc = ctypes.CDLL(ctypes.util.find_library("c"))

    @staticmethod
    def _status_kib(key: str) -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
        raise KeyError(key)

    def reset(self) -> None:
        if self.libc is None:
            return
        self.libc.mallopt(self.M_MMAP_THRESHOLD, 64 * 1024)
        self.libc.malloc_trim(0)  # hand freed heap memory back first
        Path("/proc/self/clear_refs").write_text("5")  # resets the high-water mark
        self.base = self._status_kib("VmRSS")

    def peak_beyond_base_mib(self) -> float | None:
        if self.libc is None:
            return None  # no way to read a per-run peak here
        peak = (self._status_kib("VmHWM") - self.base) / 1024
        # back to the steady state glibc's dynamic threshold reaches on its own:
        # blocks up to 32 MiB reused from the heap, trimmed only beyond 64 MiB
        self.libc.mallopt(self.M_MMAP_THRESHOLD, 32 * MiB)
        self.libc.mallopt(self.M_TRIM_THRESHOLD, 64 * MiB)
        return peak


class _CudaPeak:
    def __init__(self, torch: Any) -> None:
        self.torch = torch

    def reset(self) -> None:
        self.torch.cuda.synchronize()
        self.torch.cuda.reset_peak_memory_stats()
        self.base = self.torch.cuda.memory_allocated()

    def peak_beyond_base_mib(self) -> float:
        return (self.torch.cuda.max_memory_allocated() - self.base) / MiB


# --- the paths ------------------------------------------------------------------


@dataclass(frozen=True)
class AttentionPath:
    """A named way to compute attention, and the array library it runs in."""

    name: str
    library: str  # "numpy" or "torch"
    run: Callable[[Any, Any, Any, bool], Any]
    gpu_only: bool = False


def _torch_sdpa(q: Any, k: Any, v: Any, causal: bool) -> Any:
    import torch.nn.functional as F

    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


PATHS = {
    p.name: p
    for p in [
        AttentionPath(
            "numpy reference",
            "numpy",
            lambda q, k, v, c: scaled_dot_product_attention(q, k, v, is_causal=c),
        ),
        AttentionPath(
            "numpy tiled",
            "numpy",
            lambda q, k, v, c: flash_attention(q, k, v, is_causal=c, backend="tiled"),
        ),
        AttentionPath(
            "torch reference",
            "torch",
            lambda q, k, v, c: scaled_dot_product_attention(q, k, v, is_causal=c),
        ),
        AttentionPath("torch SDPA", "torch", _torch_sdpa),
        AttentionPath(
            "torch tiled",
            "torch",
            lambda q, k, v, c: flash_attention(q, k, v, is_causal=c, backend="tiled"),
        ),
        AttentionPath(
            "triton",
            "torch",
            lambda q, k, v, c: flash_attention(q, k, v, is_causal=c, backend="triton"),
            gpu_only=True,
        ),
    ]
}


class Runner:
    """Makes inputs, times and measures one case at a time on one device."""

    def __init__(self, device: str, dtype: str, repeats: int, min_seconds: float) -> None:
        import torch

        self.torch = torch
        self.device = torch.device(device)
        self.dtype = dtype
        self.repeats = repeats
        self.min_seconds = min_seconds
        self.on_gpu = self.device.type == "cuda"

    def inputs(self, case: Case, library: str) -> tuple[Any, Any, Any]:
        shape = (1, case.batch_heads, case.length, case.width)  # (B, H, L, E)
        rng = np.random.default_rng(0)
        arrays = [rng.standard_normal(shape, dtype=np.float32) for _ in range(3)]
        if library == "numpy":
            return tuple(a.astype(self.dtype, copy=False) for a in arrays)  # type: ignore[return-value]
        dt = getattr(self.torch, self.dtype)
        return tuple(self.torch.from_numpy(a).to(self.device, dt) for a in arrays)  # type: ignore[return-value]

    def sync(self) -> None:
        if self.on_gpu:
            self.torch.cuda.synchronize()

    def measure(self, case: Case) -> Result:
        """Time ``case`` here (repeats, medians); measure its memory in a fresh process.

        On the CPU the memory run is one call in a new Python process
        (`peak_here`), after a short warm-up there: in this one, memory
        freed by earlier cases is reused without raising the high-water
        mark, and a run could show less than its own output.
        """
        path = PATHS[case.path]
        if path.gpu_only and not self.on_gpu:
            return Result(case, "skipped", note="needs a CUDA GPU")
        q, k, v = self.inputs(case, path.library)
        on_device = self.on_gpu and path.library == "torch"
        peak = _CudaPeak(self.torch) if on_device else None
        gc.collect()
        try:
            with self.torch.no_grad():
                if peak is not None:
                    peak.reset()
                start = time.perf_counter()
                path.run(q, k, v, case.causal)  # the warm-up (and the memory run on a GPU)
                self.sync()
                first = time.perf_counter() - start
                peak_mib = peak.peak_beyond_base_mib() if peak is not None else None
                # a long first run is a fair sample too: its few extra page faults are
                # lost in the arithmetic, and skipping it would double the sweep
                times: list[float] = [first] if first > 5 * self.min_seconds else []
                # ``repeats`` runs, or fewer once they add up to 10 x min_seconds
                while len(times) < self.repeats and sum(times) < 10 * self.min_seconds:
                    start = time.perf_counter()
                    path.run(q, k, v, case.causal)
                    self.sync()
                    times.append(time.perf_counter() - start)
        except AttentionMemoryError as err:
            return Result(case, "refused", note=str(err))
        except Exception as err:  # recorded, not fatal: one bad path must not lose the run
            return Result(case, "failed", note=f"{type(err).__name__}: {err}")
        if peak is None:
            del q, k, v
            peak_mib = self.fresh_peak(case)
        return Result(case, "ok", times, peak_mib)

    def fresh_peak(self, case: Case) -> float | None:
        """`peak_here` in a new Python process (None if it cannot say)."""
        fields = ", ".join(repr(x) for x in dataclasses.astuple(case))
        code = (
            "import json; from attention_lib.bench import Case, Runner; "
            f"print(json.dumps(Runner('cpu', {self.dtype!r}, 1, 0.0).peak_here(Case({fields}))))"
        )
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        if done.returncode != 0:
            print(f"memory run of {case} failed: {done.stderr.strip()[-500:]}", file=sys.stderr)
            return None
        return json.loads(done.stdout.splitlines()[-1])

    def peak_here(self, case: Case) -> float | None:
        """Peak memory beyond the inputs of one call of ``case``, in this process (MiB).

        A call at a short length first sets up what every call shares (the
        libraries' buffers, the tiled path's threads), so it is not counted.
        """
        path = PATHS[case.path]
        warm = dataclasses.replace(case, length=min(case.length, 128))
        with self.torch.no_grad():
            path.run(*self.inputs(warm, path.library), warm.causal)
            q, k, v = self.inputs(case, path.library)
            gc.collect()
            peak = _HostPeak()
            peak.reset()
            path.run(q, k, v, case.causal)
            return peak.peak_beyond_base_mib()

    def matmul_gflops(self, library: str, n: int = 2048) -> float:
        """GFLOP/s of an n x n x n matrix product in ``library``: the practical limit."""
        rng = np.random.default_rng(1)
        a, b = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
        if library == "torch":
            dt = getattr(self.torch, self.dtype)
            a, b = (self.torch.from_numpy(x).to(self.device, dt) for x in (a, b))
        times = []
        for _ in range(5):
            start = time.perf_counter()
            a @ b
            self.sync()
            times.append(time.perf_counter() - start)
        return 2.0 * n**3 / statistics.median(times) / 1e9


# --- the sweep --------------------------------------------------------------------


def cases(
    paths: Sequence[str], lengths: Sequence[int], widths: Sequence[int], batch_heads: int
) -> Iterator[Case]:
    for width in widths:
        for causal in (False, True):
            for length in lengths:
                for path in paths:
                    yield Case(path, length, width, causal, batch_heads)


def fit_exponent(
    lengths: Sequence[float], values: Sequence[float | None], points: int = 3
) -> float | None:
    """Growth exponent in L over the largest ``points`` lengths with a measurement.

    Missing (None) and non-positive values, refused or failed runs, are left
    out; None when fewer than two measurements remain.
    """
    pairs = [(x, y) for x, y in zip(lengths, values, strict=True) if y is not None and y > 0]
    if len(pairs) < 2:
        return None
    return log_log_slope([p[0] for p in pairs], [p[1] for p in pairs], points)


def machine_info(runner: Runner) -> dict[str, Any]:
    torch = runner.torch
    info = {
        "machine": machine_name(runner),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "torch": torch.__version__,
        "device": str(runner.device),
        "dtype": runner.dtype,
        "free_memory": format_bytes(available_bytes(np.zeros(1))),
        "cpu_model": cpu_model(),
        "load_average": list(os.getloadavg()),  # 1, 5 and 15 minutes, when the run started
    }
    if runner.on_gpu:
        info["gpu"] = torch.cuda.get_device_name(runner.device)
    try:
        import triton

        info["triton"] = triton.__version__
    except ImportError:
        info["triton"] = None
    return info


def cpu_model() -> str:
    """The processor's model name (Linux's /proc/cpuinfo), or what `platform` knows."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def busy_warning() -> str | None:
    """A warning when the machine already runs other work (1-minute load average > cores / 2)."""
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    if load <= cores / 2:
        return None
    return (
        f"warning: the machine is busy (load average {load:.2f} on {cores} cores): "
        "timings are slower and noisier; compare the ratios measured side by side"
    )


def machine_name(runner: Runner) -> str:
    if runner.on_gpu:
        gpu = runner.torch.cuda.get_device_name(runner.device)
        return "gpu-" + "".join(c if c.isalnum() else "-" for c in gpu.lower()).strip("-")
    return f"cpu-{os.cpu_count()}core-{platform.machine()}"


def run_suite(args: argparse.Namespace) -> dict[str, Any]:
    from tqdm import tqdm

    runner = Runner(args.device, args.dtype, args.repeats, args.min_seconds)
    info = machine_info(runner)
    paths = [p for p in args.paths if runner.on_gpu or not PATHS[p].gpu_only]
    limits = {
        lib: runner.matmul_gflops(lib, args.matmul_size)
        for lib in {PATHS[p].library for p in paths}
    }
    todo = list(cases(paths, args.lengths, args.widths, args.batch_heads))
    results: list[Result] = []
    given_up: set[tuple[str, int, bool]] = set()  # a refused length refuses every longer one
    for case in tqdm(todo, desc="attention benchmark", unit="case"):
        key = (case.path, case.width, case.causal)
        if key in given_up:
            results.append(Result(case, "refused", note="a shorter length was already refused"))
            continue
        result = runner.measure(case)
        if result.status == "refused" or (result.median_s or 0) > args.max_seconds:
            given_up.add(key)
            if result.status == "ok":
                result.note = f"longer lengths skipped: this one took {result.median_s:.1f} s"
        results.append(result)
    return {"info": info, "matmul_gflops": limits, "results": results, "args": vars(args)}


# --- output -------------------------------------------------------------------------


def rows(suite: dict[str, Any]) -> list[dict[str, Any]]:
    limits = suite["matmul_gflops"]
    out = []
    for r in suite["results"]:
        limit = limits.get(PATHS[r.case.path].library)
        out.append(
            {
                **dataclasses.asdict(r.case),
                "status": r.status,
                "median_s": r.median_s,
                "repeats": len(r.times_s),
                "gflops": r.gflops,
                "fraction_of_matmul": r.gflops / limit if r.gflops and limit else None,
                "peak_mib_beyond_inputs": r.peak_mib,
                "note": r.note,
            }
        )
    return out


def exponents(table: list[dict[str, Any]], width: int) -> dict[str, dict[str, float | None]]:
    """Fitted growth exponents of time and memory in L, per path, non-causal."""
    fits: dict[str, dict[str, float | None]] = {}
    for path in dict.fromkeys(r["path"] for r in table):
        sel = [
            r
            for r in table
            if r["path"] == path and r["width"] == width and not r["causal"] and r["status"] == "ok"
        ]
        lengths = [r["length"] for r in sel]
        fits[path] = {
            "time": fit_exponent(lengths, [r["median_s"] for r in sel]),
            "memory": fit_exponent(lengths, [r["peak_mib_beyond_inputs"] for r in sel]),
        }
    return fits


def plot(
    table: list[dict[str, Any]], fits: dict[str, Any], width: int, out: Path, title: str
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for metric, label, fname in [
        ("median_s", "median time per call (s)", "time_vs_length.png"),
        ("peak_mib_beyond_inputs", "peak memory beyond inputs (MiB)", "memory_vs_length.png"),
    ]:
        fig, ax = plt.subplots(figsize=(8, 5), layout="constrained")
        for path, fit in fits.items():
            sel = [
                r
                for r in table
                if r["path"] == path
                and r["width"] == width
                and not r["causal"]
                and r["status"] == "ok"
                and r[metric]
            ]
            if not sel:
                continue
            slope = fit["time" if metric == "median_s" else "memory"]
            tag = f" (slope {slope:.2f})" if slope is not None else ""
            ax.loglog([r["length"] for r in sel], [r[metric] for r in sel], "o-", label=path + tag)
        ax.set_xlabel("sequence length L = S (tokens)")
        ax.set_ylabel(label)
        ax.set_title(f"{label.split(' (')[0]} against length, E = {width}, B·H = 8\n{title}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(title="path (fitted growth exponent in L)", fontsize=8)
        fig.savefig(out / fname, dpi=100)
        plt.close(fig)


def write(suite: dict[str, Any], out_root: Path) -> Path:
    out = out_root / suite["info"]["machine"]
    out.mkdir(parents=True, exist_ok=True)
    table = rows(suite)
    width = min(suite["args"]["widths"])
    fits = exponents(table, width)
    payload = {
        "command": _command(),
        "info": suite["info"],
        "matmul_gflops": suite["matmul_gflops"],
        "growth_exponents": {"width": width, "causal": False, "fits": fits},
        "results": table,
    }
    (out / "results.json").write_text(json.dumps(payload, indent=2) + "\n")
    with (out / "results.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(table[0]))
        writer.writeheader()
        writer.writerows(table)
    plot(table, fits, width, out, suite["info"]["machine"])
    return out


def summary(suite: dict[str, Any]) -> str:
    """A plain-text table of the run, then the fitted growth exponents."""
    columns = [  # header, row key, width, number format
        ("path", "path", -16, ""),
        ("L", "length", 6, ""),
        ("E", "width", 4, ""),
        ("causal", "causal", 6, ""),
        ("time s", "median_s", 9, ".4f"),
        ("GFLOP/s", "gflops", 8, ".1f"),
        ("of mm", "fraction_of_matmul", 6, ".2f"),
        ("peak MiB", "peak_mib_beyond_inputs", 9, ".1f"),
        ("status", "status", -8, ""),
    ]

    def cell(text: str, width: int) -> str:  # negative width: left-aligned
        return text.ljust(-width) if width < 0 else text.rjust(width)

    lines = [f"matrix product (practical limit), GFLOP/s: {suite['matmul_gflops']}"]
    lines.append(" ".join(cell(h, w) for h, _, w, _ in columns))
    table = rows(suite)
    for r in table:
        texts = (
            "-" if r[k] is None else format(r[k], f) if f else str(r[k]) for _, k, _, f in columns
        )
        lines.append(" ".join(cell(t, w) for t, (_, _, w, _) in zip(texts, columns, strict=True)))
    width = min(suite["args"]["widths"])
    for path, fit in exponents(table, width).items():
        t, m = (None if x is None else round(x, 2) for x in (fit["time"], fit["memory"]))
        lines.append(f"growth exponent in L, {path} (E={width}): time {t}, memory {m}")
    return "\n".join(lines)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m attention_lib.bench", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--quick", action="store_true", help=f"lengths {QUICK_LENGTHS}, width 64 only")
    p.add_argument("--lengths", type=int, nargs="+", default=list(FULL_LENGTHS))
    p.add_argument("--widths", type=int, nargs="+", default=[64, 128])
    p.add_argument("--paths", nargs="+", default=list(PATHS), choices=list(PATHS))
    p.add_argument("--batch-heads", type=int, default=8)
    p.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    p.add_argument(
        "--device", default=None, help="torch device (default: cuda if present, else cpu)"
    )
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument(
        "--min-seconds",
        type=float,
        default=0.5,
        help="repeats stop once they add up to ten times this",
    )
    p.add_argument(
        "--max-seconds",
        type=float,
        default=120.0,
        help="a path slower than this skips longer lengths",
    )
    p.add_argument("--matmul-size", type=int, default=2048, help="n of the n x n x n baseline")
    p.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    ratios = p.add_argument_group("ratios (our torch tiled path against SDPA)")
    ratios.add_argument("--ratios-only", action="store_true", help="skip the sweep")
    ratios.add_argument("--no-ratios", action="store_true", help="skip the ratios")
    ratios.add_argument("--ratio-lengths", type=int, nargs="+", default=[2048, 4096])
    ratios.add_argument("--ratio-widths", type=int, nargs="+", default=[64, 128])
    ratios.add_argument("--rounds", type=int, default=7, help="timings of each path per case")
    ratios.add_argument(
        "--memory-length", type=int, default=16384, help="L of the memory check (0: none)"
    )
    ratios.add_argument("--numpy-lengths", type=int, nargs="+", default=[1024, 2048])
    ratios.add_argument("--no-load", action="store_true", help="skip the loaded measurements")
    args = p.parse_args(argv)
    if args.quick:
        args.lengths, args.widths = list(QUICK_LENGTHS), [64]
        args.ratio_lengths, args.ratio_widths, args.rounds = [1024], [64], 3
        args.memory_length, args.numpy_lengths = 4096, [512]
    if args.device is None:
        import torch

        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.dtype == "bfloat16":  # numpy has no bfloat16
        args.paths = [x for x in args.paths if PATHS[x].library == "torch"]
    return args


def _device(argv: Sequence[str] | None) -> str:
    """The --device asked for, or cuda when torch sees one, else cpu."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--device", default=None)
    known, _ = pre.parse_known_args(argv)
    if known.device is not None:
        return str(known.device)
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def main(argv: Sequence[str] | None = None) -> int:
    """The CPU suite below, or on a CUDA device the GPU suite (`attention_lib.bench_gpu`)."""
    if _device(argv).startswith("cuda"):
        from . import bench_gpu

        return bench_gpu.main(argv)
    args = parse(argv)
    if (warning := busy_warning()) is not None:
        print(warning)
    if not args.ratios_only:
        suite = run_suite(args)
        out = write(suite, args.out)
        print(summary(suite))
        print(f"wrote {out}/results.json, results.csv, time_vs_length.png, memory_vs_length.png")
    if not args.no_ratios:
        from . import bench_ratios

        result = bench_ratios.run_ratios(
            args.ratio_lengths,
            args.ratio_widths,
            args.rounds,
            args.memory_length,
            args.numpy_lengths,
            loaded=not args.no_load,
        )
        runner = Runner(args.device, args.dtype, args.repeats, args.min_seconds)
        out = args.out / machine_name(runner)
        out.mkdir(parents=True, exist_ok=True)
        payload = {"command": _command(), "info": machine_info(runner), **result}
        (out / "ratios.json").write_text(json.dumps(payload, indent=2) + "\n")
        print(bench_ratios.format_ratios(result))
        print(f"wrote {out}/ratios.json")
    return 0


def _command() -> str:
    return "python -m attention_lib.bench " + " ".join(sys.argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())
