"""The benchmark suite: every attention path, measured side by side in one run.

    python -m attention_course.bench                 # the sweep, then the ratios (about 20 minutes
                                                  # on 2 cores)
    python -m attention_course.bench --quick         # a small sweep and small ratios, for trying it
    python -m attention_course.bench --ratios-only   # the ratios alone (about 10 minutes)

On the CPU (or with ``--device cpu``) it runs the sweep of every path
(`attention_course.bench.cpu`), then the ratios (`attention_course.bench.ratios`):
our torch tiled path against PyTorch's SDPA, forward and forward +
backward, causal and not, timed alternately, idle and with one other busy
process the run starts and stops itself; its memory beyond inputs and
outputs at L = 16384; the numpy tiled loop against the numpy reference.
They go to ``ratios.json`` beside the sweep's files, with the machine and
its load average as the ratios started.

On a machine with a CUDA device the same command runs the GPU benchmark
instead (`attention_course.bench.gpu`: our kernels against PyTorch's SDPA
backends, timed with CUDA events), with the options of `parse_gpu`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from . import cpu, gpu
from .machine import busy_warning, command_line, machine_name
from .results import MEASURED

__all__ = ["main", "parse_cpu", "parse_gpu"]


def parse_cpu(argv: Sequence[str] | None) -> argparse.Namespace:
    """The CPU suite's options (the sweep's, then the ratios'), from ``argv``."""
    p = argparse.ArgumentParser(
        prog="python -m attention_course.bench", description=__doc__.split("\n\n")[0]
    )
    p.add_argument(
        "--quick", action="store_true", help=f"lengths {cpu.QUICK_LENGTHS}, width 64 only"
    )
    p.add_argument("--lengths", type=int, nargs="+", default=list(cpu.FULL_LENGTHS))
    p.add_argument("--widths", type=int, nargs="+", default=[64, 128])
    p.add_argument("--paths", nargs="+", default=list(cpu.PATHS), choices=list(cpu.PATHS))
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
    p.add_argument("--out", type=Path, default=MEASURED)
    ratios = p.add_argument_group("ratios (our torch tiled path against SDPA)")
    ratios.add_argument("--ratios-only", action="store_true", help="skip the sweep")
    ratios.add_argument("--no-ratios", action="store_true", help="skip the ratios")
    ratios.add_argument("--ratio-lengths", type=int, nargs="+", default=[2048, 4096])
    ratios.add_argument("--ratio-widths", type=int, nargs="+", default=[64, 128])
    ratios.add_argument(
        "--rounds", type=int, default=6, help="timings of each path per case (its 6 orders)"
    )
    ratios.add_argument(
        "--memory-length", type=int, default=16384, help="L of the memory check (0: none)"
    )
    ratios.add_argument("--numpy-lengths", type=int, nargs="+", default=[1024, 2048])
    ratios.add_argument("--no-load", action="store_true", help="skip the loaded measurements")
    args = p.parse_args(argv)
    if args.quick:
        args.lengths, args.widths = list(cpu.QUICK_LENGTHS), [64]
        args.ratio_lengths, args.ratio_widths, args.rounds = [1024], [64], 3
        args.memory_length, args.numpy_lengths = 4096, [512]
    if args.device is None:
        import torch

        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.dtype == "bfloat16":  # numpy has no bfloat16
        args.paths = [x for x in args.paths if cpu.PATHS[x].library == "torch"]
    return args


def parse_gpu(argv: Sequence[str] | None) -> argparse.Namespace:
    """The GPU suite's options, from ``argv``; exits (argparse's error) for a length or width
    that FlashAttention-2's shapes cannot take (`attention_course.bench.gpu.fa2_shape`)."""
    p = argparse.ArgumentParser(
        prog="python -m attention_course.bench",
        description="The GPU benchmark (on a CUDA device): " + gpu.__doc__.split("\n\n")[0],
    )
    p.add_argument("--device", default="cuda", help="a CUDA device (default: cuda)")
    p.add_argument("--quick", action="store_true", help=f"lengths {gpu.QUICK_LENGTHS} only")
    p.add_argument("--lengths", type=int, nargs="+", default=list(gpu.LENGTHS))
    p.add_argument("--widths", type=int, nargs="+", default=list(gpu.WIDTHS))
    p.add_argument("--dtypes", nargs="+", default=list(gpu.DTYPES), choices=list(gpu.DTYPES))
    p.add_argument("--modes", nargs="+", default=list(gpu.MODES), choices=list(gpu.MODES))
    p.add_argument("--paths", nargs="+", default=list(gpu.PATHS), choices=list(gpu.PATHS))
    p.add_argument("--warmup-ms", type=int, default=25, help="do_bench's warm-up, in ms")
    p.add_argument("--rep-ms", type=int, default=100, help="do_bench's timed repeats, in ms")
    p.add_argument("--no-memory", action="store_true", help="skip the L = 65536 memory figure")
    p.add_argument(
        "--tune", action="store_true", help="time each kernel's tile candidates (default L 4096)"
    )
    p.add_argument("--out", type=Path, default=MEASURED)
    args = p.parse_args(argv)
    if args.quick:
        args.lengths = list(gpu.QUICK_LENGTHS)
    if args.tune and "--lengths" not in (argv or sys.argv[1:]):
        args.lengths = [4096]
    for length in args.lengths:
        for width in args.widths:
            try:
                gpu.fa2_shape(length, width)
            except ValueError as err:
                p.error(str(err))
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
    """The CPU suite (sweep, then ratios), or on a CUDA device the GPU suite."""
    if _device(argv).startswith("cuda"):
        return _gpu_main(argv)
    args = parse_cpu(argv)
    if (warning := busy_warning()) is not None:
        print(warning)
    if not args.ratios_only:
        suite = cpu.run_suite(args)
        out = cpu.write(suite, args.out)
        print(cpu.summary(suite))
        print(f"wrote {out}/results.json, results.csv, time_vs_length.png, memory_vs_length.png")
    if not args.no_ratios:
        from . import ratios

        result = ratios.run_ratios(
            args.ratio_lengths,
            args.ratio_widths,
            args.rounds,
            args.memory_length,
            args.numpy_lengths,
            loaded=not args.no_load,
            after_sweep=not args.ratios_only,
        )
        out = args.out / machine_name("cpu")
        out.mkdir(parents=True, exist_ok=True)
        payload = {"command": command_line(), **result}
        (out / "ratios.json").write_text(json.dumps(payload, indent=2) + "\n")
        print(ratios.format_ratios(result))
        print(f"wrote {out}/ratios.json")
    return 0


def _gpu_main(argv: Sequence[str] | None) -> int:
    args = parse_gpu(argv)
    payload = gpu.run(args)
    out = gpu.write(payload, args.out)
    if payload["results"]:
        print(gpu.summary(payload))
    print(f"wrote {out}/")
    return 0
