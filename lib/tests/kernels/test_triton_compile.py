"""The Triton kernels compiled ahead of time for real GPUs (sm_75 to sm_90), with no GPU.

Triton's interpreter runs a kernel's Python, so it accepts code the GPU
compiler refuses (a plain Python global inside a kernel, for one: every
interpreter test passed while every GPU launch failed). Here each launch the
library can make is compiled the way a GPU launch would compile it: built by
the launcher's own ``*_launch`` functions from the tile table
(`attention_lib.flash.triton.configs`), so a tile added there is compiled
here at once, and handed to ``triton.compile`` for a CUDA target.

Two depths, both failing on any compile error:

- front end (AST to Triton IR), for every configuration: every kernel, padded
  head width, dtype, causal setting and tile the launcher or
  ``bench --tune`` can choose, plus odd widths, strides and lengths. This is
  where a kernel's Python is checked (globals, constexprs, types, shapes),
  in about a tenth of a second each.
- the whole pipeline to a cubin, for sm_80 and sm_90, for the tile the
  launcher runs: every kernel at the benchmark's widths (64 and 128) in
  float16 with and without the causal mask and in bfloat16 with it, at the
  widest (256, the most shared memory) in float16 with it, and in float32
  at width 64 (its products run on the FMA units, the same code for both
  targets: sm_80 only); the δ kernel at 64 and 128. Widths 16 and 32 share
  the code paths of 64: ``make test-compile`` (CI runs it after ``make
  test``) compiles them whole, and ``--full`` compiles everything whole. This checks layouts,
  matrix-product instructions, software pipelining, and the shared memory
  each program needs against the target's limit. A whole compile takes
  seconds of CPU (float32's backward more than ten), so the other
  configurations get it from ``python lib/tests/kernels/test_triton_compile.py --full``.

sm_75 (Colab's T4), sm_86 and sm_89 (RTX 30xx and 40xx) have less shared
memory per program (64, 99 and 99 KiB against sm_80's 163 and sm_90's 227)
and run their own tiles where the main table's would not fit
(`configs.tile_family`). Every tile a launch can choose there is compiled
to the front end, and the tile each runs is compiled whole, causal, at every
table row (widths 64, 128 and 256) in float16 and float32, and checked
against the target's limit; ``make test-compile`` adds width 16. bfloat16
is not compiled for sm_75: the launcher refuses it there (`launch.refusal`).

The backward kernels also store float32 gradients for 16-bit inputs (an
input broadcast along batch dimensions has its per-entry gradients summed
in float32): those pointer types are other compiles, front end for every
padded width, whole at width 64, causal. The forward kernel for a backward
pass (``for_backward``: 16-bit weights in two parts, one more product) is
another compile of every 16-bit forward configuration, at the same depth.

The compiles run in a child process (this file run as a script) with one
worker per core; a compiled kernel lands in Triton's own cache, keyed on its
source, so a rerun with unchanged kernels is quick.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

# the kernels take torch tensors; "triton.language", not "triton": with lib/tests on sys.path
# this folder passes for a namespace package named triton
pytest.importorskip("torch", reason="the Triton kernels take torch tensors")
pytest.importorskip(
    "triton.language", reason="triton is not installed (pip install -e '.[triton]', Linux only)"
)

ROOT = Path(__file__).resolve().parents[2]
# compute capability, and the most shared memory one program (block) may use, in bytes
# (NVIDIA's CUDA C++ Programming Guide, the opt-in maximum per thread block; KiB of 1024)
TARGETS = {
    "sm_75": (75, 64 * 1024),  # Turing: Colab's T4, RTX 20xx
    "sm_80": (80, 163 * 1024),  # A100
    "sm_86": (86, 99 * 1024),  # RTX 30xx, A10, A40: 101376 bytes
    "sm_89": (89, 99 * 1024),  # RTX 40xx, L4: 101376 bytes
    "sm_90": (90, 227 * 1024),  # H100, H200
}
#: every configuration at the depth the module docstring gives; the others (less shared
#: memory, their own tiles where the main table's would not fit) whole only where a
#: program's shared memory is decided
MAIN_TARGETS = ("sm_80", "sm_90")
FULL_WIDTHS = (64, 128)  # the benchmark's head widths: every 16-bit choice compiled whole
#: compiled whole by ``make test-compile`` (CI, after make test: --narrow), front end here;
#: for sm_75, sm_86 and sm_89 at the first only
NARROW_WIDTHS = (16, 32)
DTYPE_NAMES = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}


@dataclass(frozen=True)
class Config:
    """One kernel compile: which kernel, on what inputs, with which tile, for which GPU."""

    kernel: str  # forward, dkdv, dq or delta
    width: int  # E
    width_v: int  # Ev
    dtype: str
    causal: bool
    tile: tuple[int, int, int, int]  # (block_m, block_n, num_warps, num_stages)
    arch: str
    whole: bool  # through to a cubin (else the front end only)
    length: int = 256  # L = S: a multiple of 16, or not
    layout: str = "bhld"  # bhld (contiguous), blhd (heads inside rows), or strided features
    grads: str = "same"  # the gradients' dtype: the inputs' ("same") or "float32"
    for_backward: bool = False  # forward: 16-bit weights in two parts, for a backward pass

    @property
    def name(self) -> str:
        mode = "cubin" if self.whole else "ir"
        widths = f"E{self.width}" + (f"-Ev{self.width_v}" if self.width_v != self.width else "")
        extra = (
            "" if (self.length, self.layout) == (256, "bhld") else f"-L{self.length}-{self.layout}"
        )
        extra += "" if self.grads == "same" else f"-grads-{self.grads}"
        extra += "-for-backward" if self.for_backward else ""
        tile = "x".join(map(str, self.tile))
        causal = "causal" if self.causal else "full"
        return f"{self.arch}-{mode}-{self.kernel}-{widths}-{self.dtype}-{causal}-{tile}{extra}"


def configurations(whole_everywhere: bool = False, narrow: bool = False) -> list[Config]:
    """Every compile to check, derived from the launcher's tile table; ``narrow``: also
    whole at `NARROW_WIDTHS`, float16 causal (``make test-compile``)."""
    from attention_lib.flash.triton.configs import (
        DELTA_TILE,
        DTYPES,
        HEAD_DIMS,
        MIN_CAPABILITY,
        candidates,
        every_choice,
    )

    def whole(kernel: str, head_dim: int, dtype: str, causal: bool, tile, arch: str) -> bool:
        if whole_everywhere:
            return True
        if tile != candidates(kernel, head_dim, dtype, causal, TARGETS[arch][0])[0]:
            return False  # a --tune candidate: front end only
        if arch not in MAIN_TARGETS:  # each width's tile against the limit, 16-bit and float32
            if narrow and head_dim == NARROW_WIDTHS[0]:
                return dtype == "float16" and causal
            return causal and head_dim >= 64 and dtype in ("float16", "float32")
        if dtype == "float32":  # products on the FMA units, the same code for both targets
            return causal and head_dim == 64 and arch == "sm_80"
        if head_dim in FULL_WIDTHS:  # the benchmark's widths: float16 both ways, bfloat16 causal
            return dtype == "float16" or causal
        # the widest tile (most shared memory) too; narrower ones share its code paths
        wide = head_dim > max(FULL_WIDTHS) or (narrow and head_dim in NARROW_WIDTHS)
        return dtype == "float16" and causal and wide

    configs = []
    for arch, (capability, _) in TARGETS.items():
        runs = [d for d in DTYPES if capability >= MIN_CAPABILITY.get(d, 0)]  # not sm_75's bf16
        for kernel, head_dim, dtype, causal, tile in every_choice(capability):
            shape = (tile.block_m, tile.block_n, tile.num_warps, tile.num_stages)
            flag = whole(kernel, head_dim, dtype, causal, tile, arch)
            configs.append(Config(kernel, head_dim, head_dim, dtype, causal, shape, arch, flag))
            if kernel == "forward" and dtype != "float32":  # P V in two parts: other code
                configs.append(
                    Config(kernel, head_dim, head_dim, dtype, causal, shape, arch, flag,
                           for_backward=True)
                )  # fmt: skip
        # float32 gradients of 16-bit inputs (broadcast inputs' per-entry gradients)
        for kernel in ("dkdv", "dq"):
            for head_dim in HEAD_DIMS:
                for dtype in [d for d in runs if d != "float32"]:
                    tile = candidates(kernel, head_dim, dtype, True, capability)[0]
                    shape = (tile.block_m, tile.block_n, tile.num_warps, tile.num_stages)
                    flag = whole_everywhere or head_dim == 64
                    configs.append(
                        Config(kernel, head_dim, head_dim, dtype, True, shape, arch, flag,
                               grads="float32")
                    )  # fmt: skip
        delta = (DELTA_TILE.block_m, DELTA_TILE.block_n, DELTA_TILE.num_warps, 1)
        narrow_widths = NARROW_WIDTHS if arch in MAIN_TARGETS else NARROW_WIDTHS[:1]
        for head_dim in HEAD_DIMS:
            for dtype in runs:
                flag = whole_everywhere or head_dim in FULL_WIDTHS
                flag = flag or (narrow and head_dim in narrow_widths)
                configs.append(Config("delta", head_dim, head_dim, dtype, False, delta, arch, flag))
        # padded widths (E < HEAD_DIM), E != Ev, lengths that are not multiples of 16,
        # heads inside the rows (B, L, H, E), and features that are not contiguous
        for kernel in ("forward", "dkdv", "dq"):
            for width, width_v, length, layout in (
                (40, 80, 100, "bhld"),
                (8, 256, 256, "blhd"),
                (128, 96, 256, "strided"),
            ):
                head_dim = max(16, 1 << (max(width, width_v) - 1).bit_length())
                tile = candidates(kernel, head_dim, "float16", True, capability)[0]
                shape = (tile.block_m, tile.block_n, tile.num_warps, tile.num_stages)
                configs.append(
                    Config(
                        kernel, width, width_v, "float16", True, shape, arch, False, length, layout
                    )
                )
    return configs


# ------------------------------------------------------------------ child process


def _tensor(shape, dtype, layout):
    """A tensor of logical shape (B, H, L, w) in one of the layouts the kernels meet."""
    import torch

    b, h, n, w = shape
    if layout == "blhd":
        return torch.empty((b, n, h, w), dtype=dtype).transpose(1, 2)  # (B, H, L, w) view
    if layout == "strided":
        return torch.empty((b, h, n, 2 * w), dtype=dtype)[..., ::2]  # feature stride 2
    return torch.empty(shape, dtype=dtype)


def launch_for(config: Config):
    """The `Launch` the library builds for this configuration, on small CPU tensors."""
    import torch

    from attention_lib.flash.triton import launch as tk
    from attention_lib.flash.triton.configs import Tile

    dtype = getattr(torch, config.dtype)
    heads, heads_kv, n, lay = 4, 2, config.length, config.layout  # grouped heads: group = 2
    q = _tensor((1, heads, n, config.width), dtype, lay)  # (B, H, L, E)
    k = _tensor((1, heads_kv, n, config.width), dtype, lay)  # (B, Hkv, S, E)
    v = _tensor((1, heads_kv, n, config.width_v), dtype, lay)  # (B, Hkv, S, Ev)
    out = _tensor((1, heads, n, config.width_v), dtype, lay)  # (B, H, L, Ev)
    stats = torch.empty((2, 1, heads, n), dtype=torch.float32)  # (2, B, H, L): max, log2 total
    delta = torch.empty((1, heads, n), dtype=torch.float32)  # (B, H, L)
    tile = Tile(*config.tile)
    scale = config.width**-0.5
    if config.kernel == "forward":
        return tk.forward_launch(
            q, k, v, out, stats, config.causal, scale, tile, config.for_backward
        )
    if config.kernel == "delta":
        return tk.delta_launch(out, out, delta)
    grad = dtype if config.grads == "same" else getattr(torch, config.grads)
    dk, dv, dq = (torch.empty_like(x, dtype=grad) for x in (k, v, q))
    if config.kernel == "dkdv":
        return tk.dkdv_launch(q, k, v, out, stats, delta, dk, dv, config.causal, scale, tile)
    return tk.dq_launch(q, k, v, out, stats, delta, dq, config.causal, scale, tile)


def source(launch):
    """The launch as ``triton.compiler.ASTSource``, specialised as Triton's JIT would.

    The JIT specialises integers equal to 1 into constants and marks integers
    and pointers divisible by 16 (bytes, for pointers) as such; each
    distinct specialisation is a separate compile on the GPU.
    """
    import torch
    from triton.compiler import ASTSource

    names = launch.kernel.arg_names
    signature, constexprs, attrs = {}, {}, {}
    for i, (name, value) in enumerate(zip(names[: len(launch.args)], launch.args, strict=True)):
        if isinstance(value, torch.Tensor):
            signature[name] = "*" + DTYPE_NAMES[str(value.dtype).removeprefix("torch.")]
            if value.data_ptr() % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
        elif isinstance(value, bool):
            signature[name] = "u1"
        elif isinstance(value, int):
            if value == 1:
                signature[name], constexprs[name] = "constexpr", 1
                continue
            signature[name] = "i32" if -(2**31) <= value < 2**31 else "i64"
            if value % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
        elif isinstance(value, float):
            signature[name] = "fp32"
        else:
            raise TypeError(f"{name}: no signature type for {type(value).__name__}")
    for name, value in launch.constexprs.items():
        signature[name], constexprs[name] = "constexpr", value
    missing = set(names) - set(signature)
    if missing:
        raise TypeError(f"{launch.kernel.__name__}: arguments not given: {sorted(missing)}")
    return ASTSource(fn=launch.kernel, signature=signature, constexprs=constexprs, attrs=attrs)


def front_end(src, target, options):
    """Triton's first stage alone: the kernel's Python to Triton IR (where globals are checked).

    The same calls ``triton.compile`` makes before its lowering stages
    (triton 3.6 to 3.9); a CompilationError here is the one a GPU launch raises.
    """
    from triton._C.libtriton import ir
    from triton.compiler.compiler import make_backend

    backend = make_backend(target)
    opts = backend.parse_options(options)
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    codegen = backend.get_codegen_implementation(opts)
    return src.make_ir(target, opts, codegen, backend.get_module_map(), context)


def compile_config(config: Config) -> dict:
    """Compile one configuration; what it produced, or the error it raised."""
    import triton
    from triton.backends.compiler import GPUTarget

    arch, _ = TARGETS[config.arch]
    start = time.process_time()
    result: dict = {"error": None, "shared": None, "cubin_bytes": None}
    try:
        launch = launch_for(config)
        src = source(launch)
        target = GPUTarget("cuda", arch, 32)
        options = {"num_warps": launch.tile.num_warps, "num_stages": launch.tile.num_stages}
        if config.whole:
            compiled = triton.compile(src, target=target, options=options)
            result["shared"] = compiled.metadata.shared
            result["cubin_bytes"] = len(compiled.asm["cubin"])
        else:
            front_end(src, target, options)
    except Exception as err:  # reported per configuration by the tests
        result["error"] = f"{type(err).__name__}: {err}"[:3000]
    result["cpu_s"] = time.process_time() - start
    return result


def _init_worker() -> None:
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # triton 3.9 warns when unset


def run(configs: list[Config], jobs: int) -> dict[str, dict]:
    """Compile every configuration with ``jobs`` worker processes: {name: result}."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # the longest compiles first, so the pool's last minutes are not one long compile
    order = sorted(configs, key=lambda c: (not c.whole, c.dtype != "float32", -c.width))
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(jobs, mp_context=context, initializer=_init_worker) as pool:
        results = pool.map(compile_config, order, chunksize=1)
        return {c.name: r for c, r in zip(order, results, strict=True)}


# the child: python lib/tests/kernels/test_triton_compile.py [--full] [--jobs N]
if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="compile the Triton kernels for sm_75 to sm_90")
    parser.add_argument("--full", action="store_true", help="every configuration to a cubin")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--match", default="", help="only configurations whose name has this")
    parser.add_argument(
        "--narrow",
        action="store_true",
        help="only the whole compiles at widths 16 and 32 (sm_75, sm_86, sm_89: 16)",
    )
    parser.add_argument(
        "--check", action="store_true", help="exit 1, naming each, if a compile fails or overflows"
    )
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    start = time.perf_counter()
    todo = [c for c in configurations(args.full, args.narrow) if args.match in c.name]
    if args.narrow:
        todo = [c for c in todo if c.whole and c.width in NARROW_WIDTHS]
    results = run(todo, args.jobs)
    wall = time.perf_counter() - start
    print(json.dumps({"results": results, "wall_s": wall, "jobs": args.jobs}))
    if args.check:
        bad = [f"{n}: {r['error']}" for n, r in results.items() if r["error"]]
        bad += [
            f"{n}: {r['shared']} bytes of shared memory per program, over the target's"
            for n, r in results.items()
            if r["shared"] is not None and r["shared"] > TARGETS[n.split("-")[0]][1]
        ]
        print("\n".join([*bad, f"{len(results) - len(bad)} of {len(results)} compiles passed"]),
              file=sys.stderr)  # fmt: skip
        sys.exit(1 if bad else 0)
    sys.exit(0)


# ------------------------------------------------------------------ the tests


@pytest.fixture(scope="module")
def compiled():
    env = {**os.environ, "TRITON_INTERPRET": "0"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    result = subprocess.run(
        [sys.executable, __file__], env=env, capture_output=True, text=True, timeout=3600
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])["results"]


def _names(whole: bool | None = None) -> list[str]:
    sys.path.insert(0, str(ROOT))
    return [c.name for c in configurations() if whole is None or c.whole == whole]


@pytest.mark.parametrize("name", _names())
def test_compiles(compiled, name):
    assert compiled[name]["error"] is None, compiled[name]["error"]


@pytest.mark.parametrize("name", _names(whole=True))
def test_fits_the_targets_shared_memory(compiled, name):
    arch = name.split("-")[0]
    result = compiled[name]
    assert result["cubin_bytes"] and result["cubin_bytes"] > 0, result
    assert result["shared"] <= TARGETS[arch][1], (
        f"{name} needs {result['shared']} bytes of shared memory per program, "
        f"over {arch}'s {TARGETS[arch][1]}"
    )


def test_make_test_compile_compiles_the_narrow_widths_whole():
    """What make test leaves to the front end at widths 16 and 32 is whole under --narrow."""
    here = {c.name for c in configurations() if c.whole}
    narrow = {c.name: c for c in configurations(narrow=True) if c.whole}
    added = [c for name, c in narrow.items() if name not in here]
    assert here <= set(narrow)
    assert {c.width for c in added} == set(NARROW_WIDTHS)
    assert {c.kernel for c in added} == {"forward", "dkdv", "dq", "delta"}
    assert {c.arch for c in added} == set(TARGETS)


def test_every_table_entry_is_compiled():
    """Every tile a launch can choose on each target, the tile it runs there whole."""
    from attention_lib.flash.triton.configs import choose, every_choice

    configs = configurations()
    names = {(c.kernel, c.width, c.dtype, c.causal, c.tile, c.arch) for c in configs}
    cubins = {(c.kernel, c.width, c.dtype, c.tile, c.arch) for c in configs if c.whole}
    for arch, (capability, _) in TARGETS.items():
        for kernel, head_dim, dtype, causal, t in every_choice(capability):
            shape = (t.block_m, t.block_n, t.num_warps, t.num_stages)
            assert (kernel, head_dim, dtype, causal, shape, arch) in names
        for kernel in ("forward", "dkdv", "dq"):
            for head_dim in (64, 128, 256):  # each row of the table: the shared memory it needs
                t = choose(kernel, head_dim, "float16", True, capability)
                shape = (t.block_m, t.block_n, t.num_warps, t.num_stages)
                assert (kernel, head_dim, "float16", shape, arch) in cubins


def test_the_targets_limits_are_the_tables():
    """The limits checked here are the ones the tile table chooses by, GPU by GPU."""
    from attention_lib.flash.triton.configs import SHARED_MEMORY

    for arch, (capability, limit) in TARGETS.items():
        assert arch == f"sm_{capability}" and SHARED_MEMORY[capability] == limit
    assert TARGETS["sm_86"][1] == TARGETS["sm_89"][1] == 101376


def test_bfloat16_is_not_compiled_for_sm_75():
    """The launcher refuses bfloat16 below sm_80 (`launch.refusal`): nothing to compile."""
    configs = configurations()
    assert not [c.name for c in configs if c.arch == "sm_75" and c.dtype == "bfloat16"]
    assert [c for c in configs if c.arch == "sm_86" and c.dtype == "bfloat16"]


@pytest.mark.filterwarnings("ignore:TRITON_DEFAULT_FP_FUSION is unset")  # triton 3.9
def test_the_front_end_refuses_a_plain_global():
    """The check that would have caught ``LN2 = 0.69...`` read inside a kernel.

    Triton's interpreter runs both probes; the GPU compiler's front end takes
    only the ``tl.constexpr`` global.
    """
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    target, options = GPUTarget("cuda", 90, 32), {"num_warps": 1, "num_stages": 1}
    for probe in (_reads_constexpr_global, _reads_plain_global):
        src = ASTSource(fn=probe, signature={"X": "*fp32"})
        if probe is _reads_plain_global:
            with pytest.raises(Exception, match="Cannot access global variable _PLAIN"):
                front_end(src, target, options)
        else:
            assert front_end(src, target, options) is not None


if importlib.util.find_spec("triton") is not None:  # probes for the test above
    import triton.language as tl
    from triton.runtime.jit import JITFunction

    _PLAIN = 0.6931471805599453  # a plain Python float, as LN2 once was
    _CONSTEXPR = tl.constexpr(0.6931471805599453)

    # JITFunction, not @triton.jit: under TRITON_INTERPRET=1 the decorator gives the
    # interpreter's function, which the GPU front end cannot take
    def _plain(X):
        tl.store(X, tl.load(X) * _PLAIN)

    def _constexpr(X):
        tl.store(X, tl.load(X) * _CONSTEXPR)

    _reads_plain_global = JITFunction(_plain)
    _reads_constexpr_global = JITFunction(_constexpr)
