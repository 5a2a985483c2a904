"""The researcher's experiments with the attention variants (notebook 06), measured.

    linear   linear attention's time against softmax's; Performer's error
    sinks    softmax1 and attention sinks; sigmoid and differential weights

The variants themselves are library code (`attention_lib.variants`); these
modules hold what notebook 06 measures with them, each described in its own
docstring. The still figures of these results are in `attention_course.lessons.figures`.
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
