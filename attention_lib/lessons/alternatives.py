"""Alternatives to the dot product and to softmax, written once for numpy and torch.

Score functions (what replaces ``q · k * scale``):

- `additive_logits` / `additive_attention`: Bahdanau et al. (2015),
  ``v^T tanh(W1 q + W2 k)``, one small network per query-key pair.
- `cosine_logits` / `cosine_attention`: Swin Transformer V2 (Liu et al., 2022),
  ``cos(q, k) / tau``, logits bounded by 1/tau.

Kernelised (linear) attention (what replaces ``exp(q · k)``):

- `linear_attention` with `elu_feature_map` (Katharopoulos et al., 2020) or
  with `performer_feature_map` (positive random features, Choromanski et al.,
  2021; `performer_attention` approximates softmax attention this way).
  Reassociated, ``phi(Q) (phi(K)^T V)``, the cost is linear in the length.
- `kernel_weights`: the same weights written out the slow, quadratic way.

Measurements for notebook 06: `time_softmax_vs_linear` (with `timing_slopes`,
`timing_warnings` and `describe_slopes`) and
`random_feature_error`. The attention-sink demonstration (`sink_experiment`)
trains a one-head toy model with `softmax` and `softmax1`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from ..backend import describe, device_of, namespace, require_floating
from ..core import scaled_dot_product_attention
from ..fits import log_log_slope
from ..inputs import prepare
from ..masks import apply_mask, causal_mask
from ..normalisers import softmax, softmax1

__all__ = [
    "MIN_SAMPLE_S",
    "NOISY_SPREAD",
    "AdditiveParams",
    "FeatureErrorRow",
    "SinkRun",
    "TimingRow",
    "TimingSlopes",
    "additive_attention",
    "additive_hidden",
    "additive_logits",
    "additive_params",
    "cosine_attention",
    "cosine_logits",
    "describe_slopes",
    "elu_feature_map",
    "growth_words",
    "kernel_weights",
    "linear_attention",
    "performer_attention",
    "performer_feature_map",
    "random_feature_error",
    "random_projection",
    "sink_experiment",
    "time_softmax_vs_linear",
    "timing_slopes",
    "timing_warnings",
]

Normaliser = Callable[..., Any]
FeatureMap = Callable[[Any], Any]

SWIN_MIN_TAU = 0.01  # Swin V2 keeps tau above 0.01 (it clamps the log of 1/tau at log 100)


def _as_like(values: np.ndarray, like: Any, xp: Any) -> Any:
    """``values`` (numpy) as an array of ``like``'s library, dtype and device."""
    return xp.asarray(values, dtype=like.dtype, device=device_of(like))


def _check_pair(xp: Any, query: Any, key: Any, value: Any | None, same_width: bool) -> None:
    """Ranks, dtypes, lengths and batch shapes of query (..., L, Eq), key (..., S, Ek),
    value (..., S, Ev); ``same_width`` also requires Eq == Ek."""
    arrays = {"query": query, "key": key} | ({} if value is None else {"value": value})
    for name, x in arrays.items():
        if x.ndim < 2:
            raise ValueError(
                f"{name} needs at least 2 dimensions (..., length, width), got {describe(x)}"
            )
        require_floating(xp, x, name)
    if len({x.dtype for x in arrays.values()}) > 1:
        found = ", ".join(f"{n} {x.dtype}" for n, x in arrays.items())
        raise TypeError(f"query, key and value must share one dtype, got {found}")
    if same_width and query.shape[-1] != key.shape[-1]:
        raise ValueError(
            "query and key must have the same head width E (last dimension), got "
            f"query {tuple(query.shape)} and key {tuple(key.shape)}"
        )
    if value is not None and key.shape[-2] != value.shape[-2]:
        raise ValueError(
            "key and value must have the same length S (second-to-last dimension), got "
            f"key {tuple(key.shape)} and value {tuple(value.shape)}"
        )
    batch = tuple(query.shape[:-2])
    try:
        fits = np.broadcast_shapes(batch, *(tuple(x.shape[:-2]) for x in arrays.values())) == batch
    except ValueError:
        fits = False
    if not fits:
        shapes = ", ".join(f"{n} {tuple(x.shape)}" for n, x in arrays.items())
        raise ValueError(
            f"the batch dimensions of key and value must broadcast to the query's {batch}, "
            f"got {shapes}"
        )


# -- additive attention (Bahdanau et al., 2015) ----------------------------------------


@dataclass(frozen=True)
class AdditiveParams:
    """The additive scorer's parameters: w_query (H, Eq), w_key (H, Ek), v (H,).

    Numpy or torch arrays (the inputs' library); H is the hidden width.
    """

    w_query: Any
    w_key: Any
    v: Any

    @property
    def shapes(self) -> str:
        return (
            f"w_query {tuple(self.w_query.shape)}, w_key {tuple(self.w_key.shape)}, "
            f"v {tuple(self.v.shape)}"
        )


def additive_params(
    query_width: int, key_width: int, hidden: int = 16, seed: int = 0
) -> AdditiveParams:
    """Seeded float64 numpy parameters with Glorot-like 1/sqrt(fan-in) spread.

    Shapes: w_query (hidden, query_width), w_key (hidden, key_width), v (hidden,).
    Raises ValueError for a width below 1.
    """
    if min(query_width, key_width, hidden) < 1:
        raise ValueError(
            f"widths must be at least 1, got query_width={query_width}, "
            f"key_width={key_width}, hidden={hidden}"
        )
    rng = np.random.default_rng(seed)
    return AdditiveParams(
        w_query=rng.normal(size=(hidden, query_width)) / math.sqrt(query_width),  # (H, Eq)
        w_key=rng.normal(size=(hidden, key_width)) / math.sqrt(key_width),  # (H, Ek)
        v=rng.normal(size=(hidden,)) / math.sqrt(hidden),  # (H,)
    )


def additive_hidden(query: Any, key: Any, params: AdditiveParams | None = None) -> Any:
    """The hidden units ``tanh(W1 q + W2 k)`` of the additive scorer: (..., L, S, H).

    Arguments and errors as `additive_logits`, which sums these against ``v``.
    Additive scores have no 1/sqrt(d), but the scale is still there, in the
    size of W1 and W2: where W1 q + W2 k is large the units sit at ±1, and a
    saturated tanh passes almost no gradient (its slope 1 − tanh² is near 0).
    """
    xp = namespace(query, key)
    _check_pair(xp, query, key, None, same_width=False)
    if params is None:
        params = additive_params(query.shape[-1], key.shape[-1])
    hidden = params.v.shape[0] if params.v.ndim == 1 else -1
    if (
        params.v.ndim != 1
        or tuple(params.w_query.shape) != (hidden, query.shape[-1])
        or tuple(params.w_key.shape) != (hidden, key.shape[-1])
    ):
        raise ValueError(
            "additive parameters must be w_query (H, Eq), w_key (H, Ek), v (H,) for "
            f"query {tuple(query.shape)} and key {tuple(key.shape)}; got {params.shapes}"
        )
    w_query, w_key = (
        p if namespace(p) is xp else _as_like(np.asarray(p), query, xp)
        for p in (params.w_query, params.w_key)
    )
    hq = xp.matmul(query, xp.matrix_transpose(w_query))  # (..., L, H)
    hk = xp.matmul(key, xp.matrix_transpose(w_key))  # (..., S, H)
    return xp.tanh(xp.expand_dims(hq, axis=-2) + xp.expand_dims(hk, axis=-3))  # (.., L, S, H)


def additive_logits(query: Any, key: Any, params: AdditiveParams | None = None) -> Any:
    """Additive scores ``v^T tanh(W1 q + W2 k)`` for every query-key pair, shape (..., L, S).

    query (..., L, Eq) and key (..., S, Ek) may have different widths (in
    Bahdanau et al. the decoder state and the encoder annotations do).
    ``params`` default to `additive_params(Eq, Ek)` (seed 0); numpy params are
    moved to a torch input's dtype and device. The (..., L, S, H) tensor of
    hidden activations (`additive_hidden`) is what a single matrix multiply
    avoids: memory and work grow with L * S * H instead of L * S.

    Raises TypeError/ValueError naming the shapes for bad inputs, and
    ValueError when the parameters do not fit the widths.
    """
    xp = namespace(query, key)
    if params is None:
        params = additive_params(query.shape[-1], key.shape[-1])
    hidden_act = additive_hidden(query, key, params)  # (..., L, S, H), checks the arguments
    v = params.v if namespace(params.v) is xp else _as_like(np.asarray(params.v), query, xp)
    return xp.sum(hidden_act * v, axis=-1)  # (..., L, S)


def additive_attention(
    query: Any,
    key: Any,
    value: Any,
    params: AdditiveParams | None = None,
    *,
    normaliser: Normaliser = softmax,
) -> Any:
    """Additive attention: ``normaliser(additive_logits(query, key)) @ value``, (..., L, Ev).

    Shapes and errors as `additive_logits`; value is (..., S, Ev).
    """
    xp = namespace(query, key, value)
    _check_pair(xp, query, key, value, same_width=False)
    weights = normaliser(additive_logits(query, key, params), axis=-1)  # (..., L, S)
    return xp.matmul(weights, value)  # (..., L, Ev)


# -- cosine attention (Swin Transformer V2) ---------------------------------------------


def _unit_rows(xp: Any, x: Any, eps: float = 1e-12) -> Any:
    """Rows scaled to unit length (a zero row stays zero), like F.normalize."""
    norm = xp.sqrt(xp.sum(x * x, axis=-1, keepdims=True))  # (..., n, 1)
    return x / xp.clip(norm, min=eps)  # (..., n, E)


def cosine_logits(query: Any, key: Any, tau: float = 0.1, *, min_tau: float = SWIN_MIN_TAU) -> Any:
    """Scores ``cos(q, k) / tau``, shape (..., L, S), each in [-1/tau, 1/tau].

    query (..., L, E), key (..., S, E). ``tau`` is the temperature Swin V2
    learns per head (a float, or an array broadcasting against (..., L, S),
    e.g. (H, 1, 1), torch autograd intact); values below ``min_tau`` are
    raised to it as Swin V2 does (``min_tau=0`` turns that off). Swin V2
    starts at tau = 0.1. Unlike ``q · k / sqrt(E)`` the logits cannot grow
    with the head width or the size of the activations.

    Raises ValueError for a tau that is not positive after clamping, and
    errors naming the shapes for bad inputs.
    """
    xp = namespace(query, key)
    _check_pair(xp, query, key, None, same_width=True)
    if isinstance(tau, (int, float)):
        given, tau = float(tau), max(float(tau), min_tau)
        if not tau > 0:
            raise ValueError(f"tau must be positive, got {given} (with min_tau={min_tau})")
    else:
        tau = xp.clip(tau, min=min_tau) if min_tau > 0 else tau
        if bool(xp.any(tau <= 0)):
            raise ValueError(f"tau must be positive, got {tau}")
    cos = xp.matmul(_unit_rows(xp, query), xp.matrix_transpose(_unit_rows(xp, key)))  # (.., L, S)
    return cos / tau  # (..., L, S)


def cosine_attention(
    query: Any,
    key: Any,
    value: Any,
    tau: float = 0.1,
    *,
    min_tau: float = SWIN_MIN_TAU,
    normaliser: Normaliser = softmax,
) -> Any:
    """Cosine attention: ``normaliser(cos(q, k) / tau) @ value``, shape (..., L, Ev).

    Shapes and errors as `cosine_logits`; value is (..., S, Ev).
    """
    xp = namespace(query, key, value)
    _check_pair(xp, query, key, value, same_width=True)
    weights = normaliser(cosine_logits(query, key, tau, min_tau=min_tau), axis=-1)  # (..., L, S)
    return xp.matmul(weights, value)  # (..., L, Ev)


# -- kernelised (linear) attention -------------------------------------------------------


def elu_feature_map(x: Any) -> Any:
    """``elu(x) + 1``, Katharopoulos et al.'s positive feature map, same shape as x.

    Equal to x + 1 for x > 0 and exp(x) otherwise: always positive, so the
    normaliser phi(q) · sum_j phi(k_j) never vanishes.
    """
    xp = namespace(x)
    return xp.where(x > 0, x + 1, xp.exp(xp.clip(x, max=0.0)))  # (..., n, E)


def random_projection(
    width: int, num_features: int, seed: int = 0, orthogonal: bool = True
) -> np.ndarray:
    """Gaussian directions w for the random features, float64 numpy of shape (m, E).

    ``orthogonal=True`` builds blocks of E mutually orthogonal rows (QR of a
    Gaussian matrix) and gives each row the length of a Gaussian vector, so
    each row is still N(0, I) but the rows are less redundant (Performer's
    ORF). Raises ValueError for a width or count below 1.
    """
    if width < 1 or num_features < 1:
        raise ValueError(
            f"width and num_features must be at least 1, got {width} and {num_features}"
        )
    rng = np.random.default_rng(seed)
    if not orthogonal:
        return rng.normal(size=(num_features, width))  # (m, E)
    blocks = []
    for _ in range(-(-num_features // width)):
        q, r = np.linalg.qr(rng.normal(size=(width, width)))  # (E, E), orthonormal columns
        q = q * np.sign(np.diag(r))  # fix the signs, else Q is not uniformly (Haar) distributed
        blocks.append(q.T)  # (E, E), orthonormal rows
    rows = np.concatenate(blocks)[:num_features]  # (m, E)
    lengths = np.linalg.norm(rng.normal(size=(num_features, width)), axis=-1)  # (m,)
    return rows * lengths[:, None]  # (m, E)


def performer_feature_map(projection: Any) -> FeatureMap:
    """``phi(x) = exp(W x - |x|^2 / 2) / sqrt(m)``: positive random features (FAVOR+).

    ``projection`` W is (m, E) (see `random_projection`). Then
    E_w[phi(q) · phi(k)] = exp(q · k), so normalised kernel attention
    approximates softmax attention. Every feature is positive. Returns a
    function mapping (..., n, E) to (..., n, m). (Large |x| can overflow
    exp; Performer's code subtracts a per-row maximum, which cancels in the
    ratio; the inputs here are scaled by sqrt(scale) and stay small.)
    """
    m, width = projection.shape

    def phi(x: Any) -> Any:
        xp = namespace(x)
        if x.shape[-1] != width:
            raise ValueError(
                f"the projection {tuple(projection.shape)} expects width {width}, got {describe(x)}"
            )
        w = projection if namespace(projection) is xp else _as_like(np.asarray(projection), x, xp)
        wx = xp.matmul(x, xp.matrix_transpose(w))  # (..., n, m)
        half_sq = xp.sum(x * x, axis=-1, keepdims=True) / 2  # (..., n, 1)
        return xp.exp(wx - half_sq) / math.sqrt(m)  # (..., n, m)

    return phi


def linear_attention(
    query: Any, key: Any, value: Any, feature_map: FeatureMap = elu_feature_map
) -> Any:
    """Kernelised attention in time linear in the length, shape (..., L, Ev).

    out_i = phi(q_i) (sum_j phi(k_j)^T v_j) / (phi(q_i) · sum_j phi(k_j)):
    ``phi(K)^T V`` (m, Ev) and ``phi(K)^T 1`` (m,) are formed once, so no
    (L, S) matrix exists; work is O((L + S) m Ev). query (..., L, E), key
    (..., S, E), value (..., S, Ev); ``feature_map`` maps (..., n, E) to
    (..., n, m) with positive entries. Errors name the shapes at fault.
    """
    xp = namespace(query, key, value)
    _check_pair(xp, query, key, value, same_width=True)
    phi_q = feature_map(query)  # (..., L, m)
    phi_k = feature_map(key)  # (..., S, m)
    kv = xp.matmul(xp.matrix_transpose(phi_k), value)  # (..., m, Ev)
    k_sum = xp.sum(phi_k, axis=-2)  # (..., m)
    numerator = xp.matmul(phi_q, kv)  # (..., L, Ev)
    k_sum = xp.expand_dims(k_sum, axis=-2)  # (..., 1, m)
    denominator = xp.sum(phi_q * k_sum, axis=-1, keepdims=True)  # (..., L, 1)
    return numerator / denominator  # (..., L, Ev)


def kernel_weights(query: Any, key: Any, feature_map: FeatureMap = elu_feature_map) -> Any:
    """The weights linear attention applies, written out: (..., L, S), rows sum to one.

    ``phi(Q) phi(K)^T`` divided by its row sums: the quadratic form that
    `linear_attention` never builds. For drawing and checking only.
    """
    xp = namespace(query, key)
    _check_pair(xp, query, key, None, same_width=True)
    sim = xp.matmul(feature_map(query), xp.matrix_transpose(feature_map(key)))  # (..., L, S)
    return sim / xp.sum(sim, axis=-1, keepdims=True)  # (..., L, S)


def _performer_map(query: Any, num_features: int, seed: int, orthogonal: bool) -> FeatureMap:
    projection = random_projection(query.shape[-1], num_features, seed, orthogonal)  # (m, E)
    return performer_feature_map(projection)


def performer_attention(
    query: Any,
    key: Any,
    value: Any,
    num_features: int = 256,
    *,
    scale: float | None = None,
    seed: int = 0,
    orthogonal: bool = True,
) -> Any:
    """Softmax attention approximated by positive random features, shape (..., L, Ev).

    Approximates ``scaled_dot_product_attention(query, key, value, scale=scale)``
    (scale defaults to 1/sqrt(E)): the inputs are multiplied by sqrt(scale) so
    that phi(q') · phi(k') estimates exp(q · k * scale), then `linear_attention`
    runs with `performer_feature_map`. The error falls like 1/sqrt(num_features)
    (see `random_feature_error`). Errors as `linear_attention`; ValueError for a
    negative scale.
    """
    problem = prepare(query, key, value, scale=scale)
    if problem.scale < 0 or not math.isfinite(problem.scale):
        raise ValueError(f"performer_attention needs a finite scale >= 0, got {problem.scale}")
    root = math.sqrt(problem.scale)
    phi = _performer_map(query, num_features, seed, orthogonal)
    out = linear_attention(problem.query * root, problem.key * root, problem.value, phi)
    return problem.xp.astype(out, problem.out_dtype)  # (..., L, Ev)


# -- measurements for the notebook ---------------------------------------------------------


@dataclass(frozen=True)
class TimingRow:
    """Seconds per call at one length T: the median of the repeats, and their spread.

    ``*_spread`` is the interquartile range of the repeats over their median
    (0 when every repeat took the same time): how far one reading can be trusted.
    """

    length: int
    softmax_s: float
    linear_s: float
    softmax_spread: float = 0.0
    linear_spread: float = 0.0


#: Above this interquartile range / median, `timing_warnings` reports a size as noisy.
NOISY_SPREAD = 0.25
#: A timed sample repeats a call until it lasts at least this long (as ``timeit`` does).
MIN_SAMPLE_S = 0.02


def _quartile_spread(times: Sequence[float]) -> float:
    """(75th - 25th percentile) / median of ``times``."""
    q1, median, q3 = np.percentile(times, [25, 50, 75])
    return float((q3 - q1) / median) if median > 0 else 0.0


def time_softmax_vs_linear(
    lengths: Sequence[int] = (512, 1024, 2048, 4096),
    width: int = 64,
    repeats: int = 7,
    seed: int = 0,
    dtype: Any = np.float32,
    warmup: int = 2,
) -> list[TimingRow]:
    """Wall time of softmax attention (reference path) and elu+1 linear attention
    on one head of length T = L = S, width E = Ev = ``width``, numpy.

    Measured to hold up on a busy machine: ``warmup`` untimed calls per path
    and size first (allocation, library loading, caches), then ``repeats``
    rounds that each time every size and path once, in turn (a burst of
    load then touches every size instead of skewing one), with
    ``time.perf_counter``; a sample of a fast call repeats it until the
    sample lasts `MIN_SAMPLE_S` and reports the time per call. Each row holds
    the median of its repeats and their spread (`TimingRow`);
    `timing_warnings` says which are too noisy to fit.
    The sizes start where the quadratic term dominates softmax's fixed costs,
    so `timing_slopes` fits where the asymptote holds. Machine-dependent:
    never assert on the times. Raises ValueError for no lengths, a length or
    width below 1, or fewer than 1 repeat.
    """
    if not lengths or min(lengths) < 1 or width < 1 or repeats < 1 or warmup < 0:
        raise ValueError(
            f"need lengths >= 1, width >= 1, repeats >= 1 and warmup >= 0; got lengths "
            f"{tuple(lengths)}, width {width}, repeats {repeats}, warmup {warmup}"
        )
    rng = np.random.default_rng(seed)
    calls = {}
    for t in lengths:
        qkv = tuple(rng.standard_normal((t, width)).astype(dtype) for _ in range(3))  # (T, E)
        calls[t] = {
            "softmax": partial(scaled_dot_product_attention, *qkv),
            "linear": partial(linear_attention, *qkv),
        }
    # calls per timed sample: enough that one sample lasts MIN_SAMPLE_S, so a fast path's
    # reading is not mostly timer and scheduler noise
    number: dict[tuple[int, str], int] = {}
    for t, paths in calls.items():
        for path, fn in paths.items():
            took = 0.0
            for _ in range(max(warmup, 1)):
                start = time.perf_counter()
                fn()
                took = time.perf_counter() - start
            number[t, path] = max(1, math.ceil(MIN_SAMPLE_S / max(took, 1e-9)))
    times: dict[tuple[int, str], list[float]] = {key: [] for key in number}
    for _ in range(repeats):
        for t, paths in calls.items():
            for path, fn in paths.items():
                n = number[t, path]
                start = time.perf_counter()
                for _ in range(n):
                    fn()
                times[t, path].append((time.perf_counter() - start) / n)
    return [
        TimingRow(
            length=t,
            softmax_s=float(np.median(times[t, "softmax"])),
            linear_s=float(np.median(times[t, "linear"])),
            softmax_spread=_quartile_spread(times[t, "softmax"]),
            linear_spread=_quartile_spread(times[t, "linear"]),
        )
        for t in lengths
    ]


@dataclass(frozen=True)
class TimingSlopes:
    """Growth exponents k of time ~ T**k, fitted on the largest ``points`` lengths."""

    softmax: float
    linear: float
    from_length: int
    points: int


def timing_slopes(rows: Sequence[TimingRow], points: int = 3) -> TimingSlopes:
    """Log-log slopes of the median times over the ``points`` largest lengths.

    Raises ValueError (from `attention_lib.fits.log_log_slope`) with fewer than two rows.
    """
    lengths = [r.length for r in rows]
    kept = sorted(lengths)[-points:]
    return TimingSlopes(
        softmax=log_log_slope(lengths, [r.softmax_s for r in rows], points),
        linear=log_log_slope(lengths, [r.linear_s for r in rows], points),
        from_length=kept[0],
        points=len(kept),
    )


def timing_warnings(rows: Sequence[TimingRow], limit: float = NOISY_SPREAD) -> list[str]:
    """One line per size whose repeats spread more than ``limit`` (IQR / median), else []."""
    warnings = []
    for r in rows:
        for path, spread in (("softmax", r.softmax_spread), ("linear", r.linear_spread)):
            if spread > limit:
                warnings.append(
                    f"warning: {path} at T = {r.length} varied by {spread:.0%} of its median "
                    f"between repeats (more than {limit:.0%}): the machine was busy; run the "
                    "cell again for a steadier fit"
                )
    return warnings


def growth_words(slope: float, tolerance: float = 0.3) -> str:
    """How a fitted exponent reads: "about linearly" within ``tolerance`` of 1,
    "about quadratically" within it of 2, else the exponent itself."""
    if abs(slope - 1) <= tolerance:
        return "about linearly"
    if abs(slope - 2) <= tolerance:
        return "about quadratically"
    return f"like T^{slope:.1f}"


def describe_slopes(slopes: TimingSlopes) -> str:
    """A title computed from the fitted slopes: what each path's time did, in words and numbers."""
    return (
        f"Fitted on T ≥ {slopes.from_length}: softmax grows {growth_words(slopes.softmax)} "
        f"(slope {slopes.softmax:.2f}), linear attention {growth_words(slopes.linear)} "
        f"(slope {slopes.linear:.2f})"
    )


@dataclass(frozen=True)
class FeatureErrorRow:
    """Relative error of Performer attention with m features, over several projections."""

    num_features: int
    mean_error: float
    std_error: float


def random_feature_error(
    feature_counts: Sequence[int] = (16, 64, 256, 1024, 4096),
    length: int = 32,
    width: int = 16,
    projections: int = 8,
    seed: int = 0,
    orthogonal: bool = False,
    input_std: float = 0.5,
) -> list[FeatureErrorRow]:
    """How far `performer_attention` is from exact softmax attention, against m.

    One seeded problem (query, key, value (length, width), float64, normal with
    standard deviation ``input_std`` for query and key, 1 for value); for each
    m, ``projections`` independent random projections (seeds 0, 1, ...); the
    error is ``|approx - exact|_F / |exact|_F``. Plain Gaussian features by
    default, whose error falls like 1/sqrt(m) (orthogonal ones do somewhat
    better at small m). The estimator's variance grows like
    exp(|q + k|^2 * scale): with input_std = 1 and width 16 the error at m = 4096
    is still about 0.5, which is why the default inputs are small.
    """
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((length, width)) for _ in range(3))  # (T, E) each
    q, k = q * input_std, k * input_std  # (T, E)
    exact = scaled_dot_product_attention(q, k, v)  # (T, E)
    rows = []
    for m in feature_counts:
        errors = [
            np.linalg.norm(performer_attention(q, k, v, m, seed=s, orthogonal=orthogonal) - exact)
            / np.linalg.norm(exact)
            for s in range(projections)
        ]
        rows.append(FeatureErrorRow(m, float(np.mean(errors)), float(np.std(errors))))
    return rows


# -- attention sinks (Xiao et al., 2024) ---------------------------------------------------


@dataclass(frozen=True)
class SinkRun:
    """One trained toy head, measured on held-out "nothing" and "match" rows.

    ``first_weight_nothing`` is the mean weight on position 0 in rows whose
    query has no matching key (NaN-free: position 0 is the first content key
    when there is no extra first token). ``example_weights`` (L, S') is one
    held-out sequence's weights, ``example_match`` (L,) says which rows match.
    """

    normaliser: str
    first_token: bool
    loss_nothing: float
    loss_match: float
    first_weight_nothing: float
    first_weight_match: float
    row_total_nothing: float
    row_total_match: float
    example_weights: np.ndarray
    example_match: np.ndarray


def sink_experiment(
    normaliser: str = "softmax",
    first_token: bool = True,
    *,
    vocab: int = 8,
    keys: int = 3,
    queries: int = 6,
    width: int = 8,
    steps: int = 200,
    batch: int = 64,
    lr: float = 0.1,
    seed: int = 0,
) -> SinkRun:
    """Train one attention head whose rows sometimes have nothing to attend to.

    Task: each sequence holds ``keys`` distinct tokens out of ``vocab``; each of
    ``queries`` query tokens must return its own target vector if its token is
    among the keys, and the zero vector if it is not (a "nothing" row, about
    half of them). Learned tables give each token a query, a key and a value
    (``width`` wide); the head computes ``normaliser(q k^T / sqrt(width)) v``,
    trained with Adam on the mean squared error, float64, seeded.

    With ``first_token=True`` every sequence starts with a content-free token
    whose key and value are zero vectors (its logit is 0 for every query).
    ``normaliser`` is ``"softmax"`` or ``"softmax1"``. Torch is imported here.
    """
    import torch

    norm_fns = {"softmax": softmax, "softmax1": softmax1}
    if normaliser not in norm_fns:
        raise ValueError(f"normaliser must be 'softmax' or 'softmax1', got {normaliser!r}")
    if not 1 <= keys <= vocab:
        raise ValueError(f"keys must be between 1 and vocab={vocab}, got {keys}")
    norm_fn = norm_fns[normaliser]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: one thread is faster and reproducible
    try:
        gen = torch.Generator().manual_seed(seed)
        f64 = torch.float64

        def draw(*shape: int) -> Any:
            return torch.randn(*shape, generator=gen, dtype=f64)

        tables = [torch.nn.Parameter(0.3 * draw(vocab, width)) for _ in range(3)]  # (V, d) each
        targets = draw(vocab, width)  # (V, d)
        optimiser = torch.optim.Adam(tables, lr=lr)

        def sample(n: int) -> tuple[Any, Any, Any, Any]:
            key_tok = torch.rand(n, vocab, generator=gen).argsort(-1)[:, :keys]  # (n, S)
            query_tok = torch.randint(0, vocab, (n, queries), generator=gen)  # (n, L)
            match = (query_tok[..., None] == key_tok[:, None, :]).any(-1)  # (n, L)
            target = torch.where(match[..., None], targets[query_tok], 0.0)  # (n, L, d)
            return query_tok, key_tok, match, target

        def forward(query_tok: Any, key_tok: Any) -> tuple[Any, Any]:
            w_q, w_k, w_v = tables
            q, k, v = w_q[query_tok], w_k[key_tok], w_v[key_tok]  # (n, L, d), (n, S, d) x2
            if first_token:
                blank = torch.zeros(q.shape[0], 1, width, dtype=f64)  # (n, 1, d)
                k, v = torch.cat([blank, k], 1), torch.cat([blank, v], 1)  # (n, 1 + S, d)
            weights = norm_fn(q @ k.transpose(-1, -2) / math.sqrt(width))  # (n, L, S')
            return weights, weights @ v  # (n, L, S'), (n, L, d)

        for _ in range(steps):
            query_tok, key_tok, match, target = sample(batch)
            loss = ((forward(query_tok, key_tok)[1] - target) ** 2).mean()
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()

        with torch.no_grad():
            query_tok, key_tok, match, target = sample(1024)
            weights, out = forward(query_tok, key_tok)  # (n, L, S'), (n, L, d)
            sq_err = ((out - target) ** 2).mean(-1)  # (n, L)
            nothing = ~match
            return SinkRun(
                normaliser=normaliser,
                first_token=first_token,
                loss_nothing=float(sq_err[nothing].mean()),
                loss_match=float(sq_err[match].mean()),
                first_weight_nothing=float(weights[..., 0][nothing].mean()),
                first_weight_match=float(weights[..., 0][match].mean()),
                row_total_nothing=float(weights.sum(-1)[nothing].mean()),
                row_total_match=float(weights.sum(-1)[match].mean()),
                example_weights=weights[0].numpy(),
                example_match=match[0].numpy(),
            )
    finally:
        torch.set_num_threads(threads)


# -- sigmoid attention (Ramapuram et al., 2024) and differential attention (Ye et al., 2024)


def _masked_scores(query: Any, key: Any, attn_mask: Any, is_causal: bool, scale: float | None):
    """(xp, scaled scores (..., L, S) with masked entries -inf, accumulation-dtype inputs).

    Arguments, shapes and errors as `attention_lib.scaled_dot_product_attention`
    (the value is not needed here, so the key stands in for it).
    """
    problem = prepare(query, key, key, attn_mask, is_causal, scale)
    xp, q, k = problem.xp, problem.query, problem.key
    scores = xp.matmul(q * problem.scale, xp.matrix_transpose(k))  # (..., L, S)
    scores = apply_mask(xp, scores, problem.mask)  # (..., L, S)
    if problem.is_causal:
        keep = causal_mask(xp, (0, q.shape[-2]), (0, k.shape[-2]), device_of(q))  # (L, S)
        scores = apply_mask(xp, scores, keep)  # (..., L, S)
    return xp, scores, problem


def _sigmoid(xp: Any, x: Any) -> Any:
    """Logistic sigmoid without overflow: exp(-|x|) never exceeds 1, and σ(-inf) = 0."""
    z = xp.exp(-xp.abs(x))  # (...), in [0, 1]
    return xp.where(x >= 0, 1 / (1 + z), z / (1 + z))


def sigmoid_weights(
    query: Any,
    key: Any,
    attn_mask: Any = None,
    is_causal: bool = False,
    *,
    scale: float | None = None,
    bias: float | None = None,
) -> Any:
    """Sigmoid attention's weights ``sigmoid(q·k * scale + bias)``, shape (..., L, S).

    Ramapuram et al. (2024), "Theory, analysis, and best practices for
    sigmoid self-attention", arXiv:2409.04431: each weight is its own
    sigmoid, so a row need not sum to one and no key competes with another.
    ``bias`` defaults to their b = -log(n), n = S the number of keys, which
    starts every weight near 1/(n + 1) (the sum of a row near one). Masked
    keys (``attn_mask``, ``is_causal``: as in
    `attention_lib.scaled_dot_product_attention`) get weight 0. Query (...,
    L, E), key (..., S, E), numpy or torch; errors as SDPA's.
    """
    xp, scores, problem = _masked_scores(query, key, attn_mask, is_causal, scale)
    b = -math.log(scores.shape[-1]) if bias is None else float(bias)
    return xp.astype(_sigmoid(xp, scores + b), problem.out_dtype)  # (..., L, S)


def sigmoid_attention(
    query: Any,
    key: Any,
    value: Any,
    attn_mask: Any = None,
    is_causal: bool = False,
    *,
    scale: float | None = None,
    bias: float | None = None,
) -> Any:
    """Sigmoid attention ``sigmoid(q·k * scale + bias) @ value``, shape (..., L, Ev).

    See `sigmoid_weights`; value is (..., S, Ev).
    """
    xp = namespace(query, key, value)
    _check_pair(xp, query, key, value, same_width=True)
    weights = sigmoid_weights(query, key, attn_mask, is_causal, scale=scale, bias=bias)
    return xp.matmul(weights, value)  # (..., L, Ev)


def differential_lambda_init(layer: int) -> float:
    """λ_init = 0.8 - 0.6·exp(-0.3·(layer - 1)) for layer 1, 2, ... (Ye et al., 2024, eq. 2):
    0.2 in the first layer, rising towards 0.8. Raises ValueError for a layer below 1."""
    if isinstance(layer, bool) or not isinstance(layer, int) or layer < 1:
        raise ValueError(f"layer counts from 1, got {layer!r}")
    return 0.8 - 0.6 * math.exp(-0.3 * (layer - 1))


def differential_lambda(
    lambda_q1: Any, lambda_k1: Any, lambda_q2: Any, lambda_k2: Any, lambda_init: float
) -> Any:
    """λ = exp(λ_q1 · λ_k1) - exp(λ_q2 · λ_k2) + λ_init, the learned re-parametrisation of
    Ye et al. (2024); the four vectors (d,) are learned per layer."""
    xp = namespace(lambda_q1, lambda_k1, lambda_q2, lambda_k2)
    return (
        xp.exp(xp.sum(lambda_q1 * lambda_k1)) - xp.exp(xp.sum(lambda_q2 * lambda_k2)) + lambda_init
    )


def differential_weights(
    query: Any,
    key: Any,
    lam: float,
    attn_mask: Any = None,
    is_causal: bool = False,
    *,
    scale: float | None = None,
) -> Any:
    """Differential attention's weights softmax(Q1 K1ᵀ·s) - λ softmax(Q2 K2ᵀ·s): (..., L, S).

    Ye et al. (2024), "Differential Transformer", arXiv:2410.05258: query
    (..., L, 2d) and key (..., S, 2d) hold [Q1, Q2] and [K1, K2] side by side
    (the first d columns, then the last d). The scale s defaults to 1/sqrt(d),
    d the width of one half. The difference of two softmax maps cancels
    what both put on the same keys (their "attention noise"); each row sums
    to 1 - λ, and may be negative. Masks as `sigmoid_weights`. ``lam`` is a
    number (see `differential_lambda`). Raises ValueError for an odd width.
    """
    xp = namespace(query, key)
    _check_pair(xp, query, key, None, same_width=True)
    width = query.shape[-1]
    if width % 2:
        raise ValueError(
            f"query and key need an even width 2d to split into two halves, got {width}"
        )
    d = width // 2
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    maps = []
    for half in (slice(0, d), slice(d, width)):
        q, k = query[..., half], key[..., half]  # (..., L, d), (..., S, d)
        _, scores, problem = _masked_scores(q, k, attn_mask, is_causal, scale)
        maps.append(softmax(scores, axis=-1))  # (..., L, S), rows sum to 1 (0 if all masked)
    return xp.astype(maps[0] - float(lam) * maps[1], problem.out_dtype)  # (..., L, S)


def differential_attention(
    query: Any,
    key: Any,
    value: Any,
    lam: float,
    attn_mask: Any = None,
    is_causal: bool = False,
    *,
    scale: float | None = None,
) -> Any:
    """Differential attention ``(softmax(Q1 K1ᵀ·s) - λ softmax(Q2 K2ᵀ·s)) @ value``: (..., L, Ev).

    See `differential_weights`; value is (..., S, Ev) (the paper's is 2d wide).
    The paper then normalises each head's output (RMSNorm) and multiplies it
    by 1 - λ_init; that belongs to the layer, not to this attention call.
    """
    xp = namespace(query, key, value)
    _check_pair(xp, query, key, value, same_width=True)
    weights = differential_weights(query, key, lam, attn_mask, is_causal, scale=scale)
    return xp.matmul(weights, value)  # (..., L, Ev)


__all__ += [
    "differential_attention",
    "differential_lambda",
    "differential_lambda_init",
    "differential_weights",
    "sigmoid_attention",
    "sigmoid_weights",
]
