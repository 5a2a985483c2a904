#!/usr/bin/env python3
"""The GPU check: the Triton kernels' correctness on a CUDA device, then the benchmark sweep.

    make gpu-check                                   # or: python3 scripts/gpu_check.py
    python3 scripts/gpu_check.py --quick             # L 1024 and 4096 in the sweep
    TRITON_INTERPRET=1 python3 scripts/gpu_check.py --smoke   # tiny, on the CPU

1. Correctness: forward and backward through ``flash_attention(...,
   backend="triton")`` in float16 and bfloat16 (and float32 for three
   cases), for L != S both ways, causal or not, grouped heads, E != Ev,
   head widths 16 to 256, transposed inputs, scores in the hundreds, batches
   that broadcast apart (in 16 bits the output also as computed for a
   backward pass, its weights in two parts); each held to FlashAttention's
   rule (at most twice PyTorch's own error against a float64 reference,
   `attention_lib.flash.accuracy`).
2. The benchmark (`attention_course.bench.gpu`): our kernels against SDPA's
   flash, cuDNN and memory-efficient backends, forward and forward+backward,
   and the memory figure at L = 65536. Results land in
   ``attention_course/bench/measured/gpu-<device>/`` with this check's records
   (gpu_check.json).
3. A short table last: every check's outcome and each target's.

It runs with the GPU machine's own packages (torch >= 2.11, triton >= 3.6,
numpy, matplotlib, psutil, tqdm); a pure-Python requirement they lack
(array-api-compat) is imported from its wheel in ``.whl/`` (``make
gpu-wheels`` fetches it where there is a network). Exits 1 when a
correctness check fails, 2 when it cannot run.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WHEELS = ROOT / ".whl"
#: where notebook 05 reads GPU runs (attention_course.bench.results.MEASURED; the package is
#: imported only once the path is set up)
MEASURED = ROOT / "attention_course" / "bench" / "measured"
# pure-Python requirements the GPU machine may lack: (import name, distribution name)
CARRIED = (("array_api_compat", "array-api-compat"),)


def bring_wheels(wheels: Path = WHEELS, carried=CARRIED) -> list[str]:
    """Make each carried package importable, from its wheel when it is not installed.

    A pure-Python wheel is a zip archive Python can import from directly, so
    the wheel file itself goes on sys.path. Returns the wheels used; raises
    SystemExit naming the missing package and how to fetch it.
    """
    used = []
    for module, distribution in carried:
        try:
            importlib.import_module(module)
            continue
        except ImportError:
            pass
        found = sorted(wheels.glob(distribution.replace("-", "_") + "-*.whl"))
        if not found:
            raise SystemExit(
                f"{module} is not installed and no wheel of {distribution} is in {wheels}/: "
                "run `make gpu-wheels` on a machine with a network and bring .whl/ along"
            )
        sys.path.insert(0, str(found[-1]))
        importlib.invalidate_caches()
        importlib.import_module(module)
        used.append(found[-1].name)
    return used


def pinned(distribution: str, constraints: Path = ROOT / "constraints.txt") -> str:
    """The ``name==version`` constraints.txt pins for a distribution (the one place pins live)."""
    for line in constraints.read_text().splitlines():
        text = line.split(";")[0].strip()
        if text.startswith(distribution + "=="):
            return text
    raise SystemExit(f"{distribution} is not pinned in {constraints}")


def fetch_wheels() -> int:
    """Download the carried packages' pinned wheels into .whl/ (needs pip and a network)."""
    import subprocess

    for _, distribution in CARRIED:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                   "-d", str(WHEELS), pinned(distribution)]  # fmt: skip
        print(" ".join(command))
        subprocess.run(command, check=True)
    return 0


# (name, query shape, key shape, value shape, keywords): on the GPU, then tiny for --smoke
GPU_CASES = [
    ("E64 L1024", (2, 8, 1024, 64), (2, 8, 1024, 64), (2, 8, 1024, 64), {}),
    ("E128 causal L1000", (2, 4, 1000, 128), (2, 4, 1000, 128), (2, 4, 1000, 128),
     dict(is_causal=True)),
    ("E64 causal L512 S1536", (1, 4, 512, 64), (1, 4, 1536, 64), (1, 4, 1536, 64),
     dict(is_causal=True)),
    ("E64 causal L1536 S512", (1, 4, 1536, 64), (1, 4, 512, 64), (1, 4, 512, 64),
     dict(is_causal=True)),
    ("grouped heads 8/2 E128 causal", (2, 8, 777, 128), (2, 2, 777, 128), (2, 2, 777, 128),
     dict(is_causal=True, enable_gqa=True)),
    ("E80 Ev96 L700 S900", (1, 4, 700, 80), (1, 4, 900, 80), (1, 4, 900, 96), {}),
    ("E256 L512 causal", (1, 2, 512, 256), (1, 2, 512, 256), (1, 2, 512, 256),
     dict(is_causal=True)),
    ("E16 L300 S333", (3, 2, 300, 16), (3, 2, 333, 16), (3, 2, 333, 16), {}),
    ("E32 key/value broadcast over heads", (2, 4, 256, 32), (2, 1, 256, 32), (2, 1, 256, 32),
     dict(is_causal=True)),
    # scores in the hundreds: the backward pass's weights from the row max and log2 total
    ("E64 causal, scores in the hundreds (scale 30)", (1, 4, 512, 64), (1, 4, 512, 64),
     (1, 4, 512, 64), dict(is_causal=True, scale=30.0)),
    # batches that broadcast apart: per-entry launches, float32 gradients summed once
    ("E64 rank-5 broadcast batches", (2, 1, 4, 256, 64), (1, 2, 4, 256, 64), (2, 2, 1, 256, 64),
     {}),
]  # fmt: skip
SMOKE_CASES = [
    ("E16 L37 S53 tiles 16x16", (1, 2, 37, 16), (1, 2, 53, 16), (1, 2, 53, 16),
     dict(block_q=16, block_k=16)),
    ("grouped heads causal", (1, 4, 33, 32), (1, 2, 21, 32), (1, 2, 21, 32),
     dict(is_causal=True, enable_gqa=True, block_q=16, block_k=16)),
]  # fmt: skip
DTYPES = ("float16", "bfloat16", "float32")
# float32 runs its products on the FMA units and compiles slowly: on the GPU, three cases
FLOAT32_CASES = ("E64 L1024", "grouped heads 8/2 E128 causal", "E80 Ev96 L700 S900")


def _inputs(shapes, dtype, device, seed, transposed=False):
    """Seeded standard-normal q, k, v; (B, L, H, E) storage seen as (B, H, L, E) if transposed."""
    import torch

    g = torch.Generator().manual_seed(seed)
    out = []
    for shape in shapes:
        if transposed:
            x = torch.randn((shape[0], shape[2], shape[1], shape[3]), generator=g)
            x = x.to(device, getattr(torch, dtype)).transpose(1, 2)  # (B, H, L, E) view
        else:
            x = torch.randn(shape, generator=g).to(device, getattr(torch, dtype))
        out.append(x)
    return out


def correctness(cases, device: str, float32_cases=None, echo=print) -> list[dict]:
    """Forward and gradient checks for every case and dtype; one record per check.

    float32 only for the cases named in ``float32_cases`` (None: every case).
    """
    import torch

    from attention_lib.flash.accuracy import forward_check, gradient_checks

    records = []
    for i, (name, *shapes, kw) in enumerate(cases):
        for dtype in DTYPES:
            if dtype == "float32" and float32_cases is not None and name not in float32_cases:
                continue
            for transposed in (False, True) if i == 0 else (False,):
                label = f"{name} {dtype}" + (" (B, L, H, E) layout" if transposed else "")
                q, k, v = _inputs(shapes, dtype, device, seed=i, transposed=transposed)
                kwargs = dict(backend="triton", **kw)
                checks = [forward_check(f"{label} out", q, k, v, **kwargs)]
                if dtype != "float32":  # the forward for a backward pass: P V in two parts
                    checks.append(
                        forward_check(f"{label} out for backward", q, k, v, True, **kwargs)
                    )
                g = torch.Generator().manual_seed(100 + i)
                grad_out = torch.randn((*checks[0].shape,), generator=g)
                grad_out = grad_out.to(device, getattr(torch, dtype))
                checks += gradient_checks(label, q, k, v, grad_out, **kwargs)
                for c in checks:
                    records.append(c.as_dict())
                    mark = "ok  " if c.passed else "FAIL"
                    echo(f"{mark} {c.name}: error {c.ours:.2e}, PyTorch's {c.pytorch:.2e}, "
                         f"allowed {c.tolerance:.2e}")  # fmt: skip
    return records


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--smoke", action="store_true", help="tiny checks only, on the CPU (TRITON_INTERPRET=1)"
    )
    parser.add_argument("--quick", action="store_true", help="the benchmark at L 1024 and 4096")
    parser.add_argument("--no-bench", action="store_true", help="correctness checks only")
    parser.add_argument(
        "--fetch-wheels", action="store_true", help="download the carried wheels into .whl/"
    )
    parser.add_argument("--out", type=Path, default=MEASURED)
    args = parser.parse_args(argv)
    if args.fetch_wheels:
        return fetch_wheels()
    sys.path[:0] = [str(ROOT / "lib"), str(ROOT)]  # the library and the course, uninstalled
    carried = bring_wheels()
    start = time.perf_counter()
    import torch

    if args.smoke:
        from attention_lib.flash.triton.common import INTERPRETED

        if not INTERPRETED:
            print("--smoke runs the kernels in Triton's interpreter: set TRITON_INTERPRET=1")
            return 2
        device, cases = "cpu", SMOKE_CASES
    elif torch.cuda.is_available():
        device, cases = "cuda", GPU_CASES
    else:
        print("no CUDA device visible: the GPU check needs one (--smoke runs a CPU smoke test)")
        return 2
    import triton

    name = torch.cuda.get_device_name() if device == "cuda" else "the CPU (Triton's interpreter)"
    print(f"GPU check on {name}: torch {torch.__version__}, triton {triton.__version__}"
          + (f", carried wheels {carried}" if carried else ""))  # fmt: skip
    records = correctness(cases, device, None if args.smoke else FLOAT32_CASES)
    failed = [r for r in records if not r["passed"]]
    check_s = time.perf_counter() - start
    payload = None
    if device == "cuda" and not args.no_bench:
        from attention_course.bench import cli, gpu

        # do_bench's repeats shortened (its medians over 50 ms of calls) to fit five minutes
        timing = ["--warmup-ms", "10", "--rep-ms", "50", "--out", str(args.out)]
        bench_args = cli.parse_gpu((["--quick"] if args.quick else []) + timing)
        command = "make gpu-check" + (" GPU_CHECK_ARGS=--quick" if args.quick else "")
        payload = gpu.run(bench_args, command)
        out = gpu.write(payload, args.out)
        check = {"command": command, "seconds": check_s, "checks": records}
        (out / "gpu_check.json").write_text(json.dumps(check, indent=2) + "\n")
        print(gpu.summary(payload))
        print(f"wrote {out}/")
    print(f"\ncorrectness: {len(records) - len(failed)} of {len(records)} checks passed "
          f"({check_s:.0f} s)")  # fmt: skip
    for r in failed:
        print(f"  FAILED {r['name']}: error {r['ours']:.2e} > allowed {r['tolerance']:.2e}")
    if payload is not None:
        print(gpu.targets_table(payload))
    print(f"total {time.perf_counter() - start:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
