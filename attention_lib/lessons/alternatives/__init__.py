"""The researcher's experiments with the attention variants (notebook 06), measured.

    linear   linear attention's time against softmax's; Performer's error
    sinks    softmax1 and attention sinks; sigmoid and differential weights

The variants themselves are library code (`attention_lib.variants`); here
is what the notebook measures with them:

- `time_softmax_vs_linear`: wall time of softmax attention against linear
  attention as the length grows, robust to a busy machine (`TimingRow`),
  with `timing_slopes` (the fitted growth exponents), `timing_warnings`
  (sizes whose repeats spread too much to fit) and `describe_slopes` (the
  fit in words, via `growth_words`).
- `random_feature_error`: how far Performer's estimate is from exact
  softmax attention, against the number of random features.
- `sink_experiment`: a one-head toy model trained with `softmax` and
  `softmax1` on rows that sometimes have nothing to attend to (attention
  sinks, Xiao et al., 2024, arXiv:2309.17453), and `sink_headline`, what
  its held-out rows did.
- `sigmoid_differential_weights`: softmax, sigmoid and differential weights
  of one query and key pair, and `sigmoid_differential_headline`, their row
  sums and signs.

The still figures of these results are in `attention_lib.lessons.figures`.
Torch is imported only by `sink_experiment`.
"""

from .linear import (
    MIN_SAMPLE_S,
    NOISY_SPREAD,
    FeatureErrorRow,
    TimingRow,
    TimingSlopes,
    describe_slopes,
    growth_words,
    random_feature_error,
    time_softmax_vs_linear,
    timing_slopes,
    timing_warnings,
)
from .sinks import (
    SinkRun,
    sigmoid_differential_headline,
    sigmoid_differential_weights,
    sink_experiment,
    sink_headline,
)

__all__ = [
    "MIN_SAMPLE_S",
    "NOISY_SPREAD",
    "FeatureErrorRow",
    "SinkRun",
    "TimingRow",
    "TimingSlopes",
    "describe_slopes",
    "growth_words",
    "random_feature_error",
    "sigmoid_differential_headline",
    "sigmoid_differential_weights",
    "sink_experiment",
    "sink_headline",
    "time_softmax_vs_linear",
    "timing_slopes",
    "timing_warnings",
]
