"""Train the tiny models, record what their heads do over training, write weights and report.

    python -m attention_course.model.training            # what `make model` runs
    python -m attention_course.model.training --check    # retrain, compare with the report

Each model of `attention_course.model.catalogue.TRAINED` is trained on the
corpus of `attention_course.model.corpus` with AdamW, seeded, on one torch
thread per model (``--jobs 2`` trains two at once, one per core). Every
``checkpoint_every`` steps (and before the first) it records, on a fixed
probe of held-out sentences, the loss, the answer accuracy and per layer and
head the measurements of `attention_course.model.head_stats`; at the end, the
loss and accuracy on every held-out sentence.
The weights go to ``<out>/<name>.npz``, everything else to
``<out>/report.json`` (`attention_course.model.report`; ``make model`` then
draws it, ``report.png``, with `attention_course.lessons.figures`).

On one machine a retrain reproduces the report exactly: the data order,
the initial weights and the thread count are fixed. On another, float
rounding differs in the last bits and training amplifies it, so
`attention_course.model.report.compare` holds a retrain to its tolerances instead.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from .catalogue import TRAINED, trained_dir
from .corpus import FAMILIES, Corpus, Sentence, build_corpus
from .head_stats import METRICS, head_summary, row_mask
from .report import compare, dump_report, format_comparison, load_report
from .tiny_model import Attend, TinyTransformer, save_model
from .weights import ModelConfig

__all__ = [
    "COMMAND",
    "Evaluation",
    "TrainConfig",
    "TrainingRun",
    "evaluate",
    "head_measurements",
    "main",
    "probe_sentences",
    "train",
    "train_all",
]

#: what writes the committed weights and report (recorded in the report)
COMMAND = "make model"


@dataclass(frozen=True)
class TrainConfig:
    """How each model is trained (the same for all of them).

    ``family_weights`` is the share of each family in a batch; sentences are
    drawn with replacement from the training split. The learning rate warms
    up linearly over ``warmup`` steps, then follows a cosine down to
    ``min_lr_ratio`` of its peak.
    """

    steps: int = 1500
    batch: int = 64
    lr: float = 3e-3
    warmup: int = 100
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.01
    checkpoint_every: int = 100
    early_checkpoints: tuple[int, ...] = (10, 25, 50, 75, 150)
    seed: int = 0
    threads: int = 1
    family_weights: tuple[tuple[str, float], ...] = (
        ("pronoun", 0.6),
        ("agreement", 0.3),
        ("name", 0.1),
    )
    probe: tuple[tuple[str, int], ...] = (("pronoun", 256), ("agreement", 192), ("name", 19))

    def checkpoint_steps(self, steps: int | None = None) -> list[int]:
        """The steps after which the heads are measured: 0 (before training), the early
        ones, every ``checkpoint_every``, and the last (of ``steps``, default all)."""
        last = self.steps if steps is None else steps
        every = range(0, last + 1, self.checkpoint_every)
        return sorted({0, last, *every, *(s for s in self.early_checkpoints if s <= last)})

    def learning_rate(self, step: int) -> float:
        """The learning rate at ``step`` (0-based)."""
        if step < self.warmup:
            return self.lr * (step + 1) / self.warmup
        progress = (step - self.warmup) / max(1, self.steps - self.warmup)
        cosine = 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
        return self.lr * (self.min_lr_ratio + (1 - self.min_lr_ratio) * cosine)


# -- evaluation ---------------------------------------------------------------------------


@dataclass
class Evaluation:
    """A model on a set of sentences: loss, answer accuracy, and where each head looks.

    ``accuracy`` maps "all" and each family to the share of sentences whose
    answer is the model's top next-word guess at the query position.
    ``antecedent`` maps each family to a (layers, heads) array: the share of
    sentences where that head's largest weight from the query position
    lands on the antecedent.
    """

    loss: float
    accuracy: dict[str, float]
    antecedent: dict[str, np.ndarray]


def _lengths(tokens: torch.Tensor) -> np.ndarray:
    return (tokens != 0).sum(dim=-1).numpy()  # (N,), PAD has id 0


def _loss(
    model: TinyTransformer, tokens: torch.Tensor, attention: str | Attend = "model"
) -> torch.Tensor:
    """Mean next-token cross-entropy over the real (non-padding) targets."""
    logits = model(tokens[:, :-1], attention=attention)  # (B, T-1, V)
    targets = tokens[:, 1:]  # (B, T-1)
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=0
    )


@torch.no_grad()
def evaluate(
    model: TinyTransformer,
    corpus: Corpus,
    sentences: Sequence[Sentence],
    attention: str | Attend = "model",
) -> Evaluation:
    """`Evaluation` of ``model`` on ``sentences`` (each family present is scored), its
    attention computed by ``attention`` (a name of `ATTENTION` or a call, as the model takes)."""
    tokens = torch.from_numpy(corpus.encode(sentences))  # (N, T)
    trace: list = []
    logits = model(tokens, attention=attention, trace=trace)  # (N, T, V)
    loss = F.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1), ignore_index=0
    )
    rows = torch.arange(len(sentences))  # (N,)
    query = torch.tensor([s.query for s in sentences])  # (N,)
    answer = tokens[rows, query + 1]  # (N,)
    right = (logits[rows, query].argmax(dim=-1) == answer).numpy()  # (N,)
    weights = torch.stack([layer.weights for layer in trace], dim=1)  # (N, layers, H, T, T)
    looked = weights[rows, :, :, query].argmax(dim=-1).numpy()  # (N, layers, H)
    hit = looked == np.array([s.antecedent for s in sentences])[:, None, None]  # (N, layers, H)
    family = np.array([s.family for s in sentences])  # (N,)
    accuracy = {"all": float(right.mean())}
    antecedent = {}
    for name in FAMILIES:
        chosen = family == name  # (N,)
        if chosen.any():
            accuracy[name] = float(right[chosen].mean())
            antecedent[name] = hit[chosen].mean(axis=0)  # (layers, H)
    return Evaluation(float(loss), accuracy, antecedent)


def probe_sentences(corpus: Corpus, config: TrainConfig = TrainConfig()) -> list[Sentence]:
    """The fixed held-out sentences the per-head measurements are taken on (seeded)."""
    rng = np.random.default_rng(config.seed + 2)
    chosen: list[Sentence] = []
    for family, count in config.probe:
        pool = corpus.heldout[family]
        picks = rng.permutation(len(pool))[: min(count, len(pool))]  # (count,)
        chosen += [pool[i] for i in sorted(picks)]
    return chosen


@torch.no_grad()
def head_measurements(
    model: TinyTransformer, corpus: Corpus, sentences: Sequence[Sentence]
) -> dict[str, list[list[float]]]:
    """Every metric of `head_stats.METRICS`: {metric: [[per head] per layer]}."""
    tokens = torch.from_numpy(corpus.encode(sentences))  # (N, T)
    rows = row_mask(_lengths(tokens), tokens.shape[-1])  # (N, T)
    trace: list = []
    model(tokens, trace=trace)
    per_layer = [head_summary(t.q, t.k, t.logits, t.weights, rows) for t in trace]
    return {m: [layer[m].tolist() for layer in per_layer] for m in METRICS}


# -- training -----------------------------------------------------------------------------


@dataclass
class TrainingRun:
    """One model's training record (what goes into the report)."""

    name: str
    model: dict[str, Any]
    scale: float
    parameters: int
    losses: list[float] = field(default_factory=list)
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    final: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0  # wall-clock time of the run, evaluations included
    cpu_seconds: float = 0.0  # CPU time of this process: the wall time on an idle core

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _sampling_weights(corpus: Corpus, config: TrainConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """Every training sentence's tokens (N, T) and its probability of being drawn (N,)."""
    shares = dict(config.family_weights)
    if set(shares) != set(FAMILIES):
        raise ValueError(f"family_weights must name every family {FAMILIES}, got {list(shares)}")
    tokens, weights = [], []
    for family in FAMILIES:
        items = corpus.train[family]
        tokens.append(corpus.encode(items))  # (n, T)
        weights.append(np.full(len(items), shares[family] / len(items)))  # (n,)
    return torch.from_numpy(np.concatenate(tokens)), torch.from_numpy(np.concatenate(weights))


def _rounded(per_family: dict[str, np.ndarray]) -> dict[str, list[list[float]]]:
    """(layers, H) arrays per family as nested lists, 6 decimals (JSON)."""
    return {f: [[round(float(x), 6) for x in layer] for layer in v] for f, v in per_family.items()}


def _checkpoint(
    model: TinyTransformer, corpus: Corpus, probe: Sequence[Sentence], step: int
) -> dict[str, Any]:
    """The measurements after ``step`` steps, all on the probe (held-out sentences, a
    tenth of them: the whole held-out set is scored once, at the end)."""
    model.eval()
    held = evaluate(model, corpus, probe)
    entry = {
        "step": step,
        "probe_loss": round(held.loss, 6),
        "probe_accuracy": {k: round(v, 6) for k, v in held.accuracy.items()},
        "probe_antecedent_hits": _rounded(held.antecedent),
        "heads": {
            m: [[round(x, 6) for x in layer] for layer in values]
            for m, values in head_measurements(model, corpus, probe).items()
        },
    }
    model.train()
    return entry


def train(
    name: str,
    config: TrainConfig = TrainConfig(),
    stop_after: int | None = None,
    corpus: Corpus | None = None,
    attention: str | Attend = "model",
    **model_changes: Any,
) -> tuple[TinyTransformer, TrainingRun]:
    """Train the model ``name`` of `TRAINED` (its settings, then ``model_changes``).

    ``attention`` computes every training step's attention: a name of
    `attention_course.model.tiny_model.ATTENTION` or a call ``(q, k, v, scale) ->
    out`` with autograd, causal, as the model takes (notebook 07 trains with
    the learner's FlashAttention); the checkpoints and the final held-out
    evaluation use the model's own (`evaluate` takes ``attention`` too).

    ``stop_after`` ends the run after that many steps with the full run's
    schedule unchanged, so its first steps are those of the full run (the
    tests compare them with the committed report). Runs on
    ``config.threads`` torch threads and restores the previous count.
    Raises ValueError for an unknown name.
    """
    if name not in TRAINED:
        raise ValueError(f"unknown model {name!r}; choose one of {list(TRAINED)}")
    corpus = build_corpus() if corpus is None else corpus
    model_config = ModelConfig(
        vocab_size=len(corpus.vocab), length=corpus.length, **{**TRAINED[name], **model_changes}
    )
    steps = config.steps if stop_after is None else min(stop_after, config.steps)
    threads = torch.get_num_threads()
    torch.set_num_threads(config.threads)
    try:
        started, cpu_started = time.perf_counter(), time.process_time()
        model = TinyTransformer(model_config, seed=config.seed)
        decay = [p for p in model.parameters() if p.ndim >= 2]
        no_decay = [p for p in model.parameters() if p.ndim < 2]
        optimiser = torch.optim.AdamW(
            [
                {"params": decay, "weight_decay": config.weight_decay},
                {"params": no_decay, "weight_decay": 0.0},
            ],
            lr=config.lr,
            betas=(0.9, 0.98),
        )
        tokens, weights = _sampling_weights(corpus, config)  # (N, T), (N,)
        gen = torch.Generator().manual_seed(config.seed + 1)
        probe = probe_sentences(corpus, config)
        run = TrainingRun(name, asdict(model_config), model_config.scale, model.parameter_count())
        measure_at = set(config.checkpoint_steps(steps))
        run.checkpoints.append(_checkpoint(model, corpus, probe, 0))
        model.train()
        for step in range(steps):
            for group in optimiser.param_groups:
                group["lr"] = config.learning_rate(step)
            batch = tokens[torch.multinomial(weights, config.batch, True, generator=gen)]
            loss = _loss(model, batch, attention)
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            optimiser.step()
            run.losses.append(float(f"{loss.item():.6g}"))
            if step + 1 in measure_at:
                run.checkpoints.append(_checkpoint(model, corpus, probe, step + 1))
        model.eval()
        held = evaluate(model, corpus, [s for f in FAMILIES for s in corpus.heldout[f]])
        run.final = {
            "steps": steps,
            "heldout_loss": round(held.loss, 6),
            "heldout_accuracy": {k: round(v, 6) for k, v in held.accuracy.items()},
            "antecedent_hits": _rounded(held.antecedent),
            "heldout_sentences": {f: len(corpus.heldout[f]) for f in FAMILIES},
        }
        run.seconds = round(time.perf_counter() - started, 2)
        run.cpu_seconds = round(time.process_time() - cpu_started, 2)
    finally:
        torch.set_num_threads(threads)
    return model, run


def _train_one(args: tuple[str, TrainConfig, str]) -> tuple[dict[str, Any], int]:
    """Worker: train one model, save its weights under ``out``; (run, file bytes)."""
    name, config, out = args
    corpus = build_corpus()
    model, run = train(name, config, corpus=corpus)
    size = save_model(model, Path(out) / f"{name}.npz", corpus.vocab)
    return run.as_dict(), size


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def train_all(
    names: Sequence[str] = tuple(TRAINED),
    config: TrainConfig = TrainConfig(),
    out: str | Path | None = None,
    jobs: int = 1,
) -> dict[str, Any]:
    """Train ``names``, write ``<out>/<name>.npz`` and ``<out>/report.json``; return the report.

    ``jobs`` > 1 trains that many models at once in separate processes (each
    on ``config.threads`` threads): the same results, sooner on a machine
    with the cores to spare.
    """
    out = Path(trained_dir() if out is None else out)
    out.mkdir(parents=True, exist_ok=True)
    corpus = build_corpus()
    load_before = os.getloadavg()
    started = time.perf_counter()
    work = [(name, config, str(out)) for name in names]
    if jobs > 1:
        import multiprocessing

        with multiprocessing.get_context("spawn").Pool(jobs) as pool:
            results = pool.map(_train_one, work)
    else:
        results = [_train_one(w) for w in work]
    wall = time.perf_counter() - started
    models = {}
    for run, size in results:
        run["file"] = f"{run['name']}.npz"
        run["file_bytes"] = size
        models[run["name"]] = run
    report = {
        "command": COMMAND,
        "environment": {
            "torch": torch.__version__,
            "numpy": np.__version__,
            "python": platform.python_version(),
            "cpu": _cpu_name(),
            "cpu_count": os.cpu_count(),
            "torch_threads_per_model": config.threads,
            "jobs": jobs,
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
            "wall_seconds": round(wall, 2),
        },
        "corpus": {
            "vocab_size": len(corpus.vocab),
            "length": corpus.length,
            "seed": corpus.seed,
            "sentences": corpus.counts(),
        },
        "train_config": asdict(config),
        "models": models,
    }
    (out / "report.json").write_text(dump_report(report))
    return report


# -- the command ---------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m attention_course.model.training",
        description="Train the tiny models and write their weights and report.",
    )
    parser.add_argument("--models", nargs="+", choices=list(TRAINED), default=list(TRAINED))
    parser.add_argument("--steps", type=int, default=TrainConfig.steps)
    parser.add_argument("--jobs", type=int, default=1, help="models trained at once")
    parser.add_argument("--out", type=Path, default=None, help="default: the package's trained/")
    parser.add_argument(
        "--check",
        action="store_true",
        help="retrain into a temporary folder and compare with the committed report",
    )
    args = parser.parse_args(argv)
    config = replace(TrainConfig(), steps=args.steps)
    if args.check:
        expected = load_report(args.out / "report.json" if args.out else None)
        with tempfile.TemporaryDirectory() as tmp:
            actual = train_all(args.models, config, tmp, args.jobs)
        expected["models"] = {k: v for k, v in expected["models"].items() if k in args.models}
        rows = compare(expected, actual)
        print(format_comparison(rows))
        for name, run in actual["models"].items():
            print(f"{name}: trained in {run['seconds']:.1f} s ({run['cpu_seconds']:.1f} s of CPU)")
        ok = all(r["ok"] for r in rows)
        print("the retrain agrees with the committed report" if ok else "OUT OF TOLERANCE")
        return 0 if ok else 1
    report = train_all(args.models, config, args.out, args.jobs)
    out = Path(trained_dir() if args.out is None else args.out)
    for name, run in report["models"].items():
        acc = run["final"]["heldout_accuracy"]
        print(
            f"{name}: {run['seconds']:.1f} s ({run.get('cpu_seconds', 0):.1f} s of CPU), "
            f"held-out accuracy {acc['all']:.3f} "
            f"(pronoun {acc['pronoun']:.3f}), {run['file_bytes'] / 1024:.0f} KiB"
        )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
