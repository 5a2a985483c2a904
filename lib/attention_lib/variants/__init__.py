"""Attention variants: other scores than ``q · k * scale``, other maps than softmax's.

Library code beside the reference path (`attention_lib.core`), written once
for numpy and torch, each taking query (..., L, E), key (..., S, E) and
value (..., S, Ev) as `attention_lib.scaled_dot_product_attention` does and
refusing bad input with errors that name the shapes at fault:

    additive       Bahdanau et al. (2015): ``v^T tanh(W1 q + W2 k)``
    cosine         cosine scores: Swin V2's ``cos(q, k) / tau``, QK-norm's ``gain · cos``
    linear         kernelised attention in linear time: elu+1, Performer's random features
    sigmoid        Ramapuram et al. (2024): ``sigmoid(q · k * scale + bias)``, no competition
    differential   Ye et al. (2024): the difference of two softmax maps

The variants that keep the dot product (sigmoid, differential) build on the
reference path's own masked scores, `attention_lib.core.masked_scores`.
The course's experiments with them (timings, attention sinks, the random
features' error) are in `attention_course.lessons.alternatives`.
"""

from .additive import (
    AdditiveParams,
    additive_attention,
    additive_hidden,
    additive_logits,
    additive_params,
)
from .cosine import SWIN_MIN_TAU, cosine_attention, cosine_logits, cosines, qk_norm_logits
from .differential import (
    differential_attention,
    differential_lambda,
    differential_lambda_init,
    differential_weights,
)
from .linear import (
    elu_feature_map,
    kernel_weights,
    linear_attention,
    performer_attention,
    performer_feature_map,
    performer_weights,
    random_projection,
)
from .sigmoid import sigmoid_attention, sigmoid_weights

__all__ = [
    "SWIN_MIN_TAU",
    "AdditiveParams",
    "additive_attention",
    "additive_hidden",
    "additive_logits",
    "additive_params",
    "cosine_attention",
    "cosine_logits",
    "cosines",
    "differential_attention",
    "differential_lambda",
    "differential_lambda_init",
    "differential_weights",
    "elu_feature_map",
    "kernel_weights",
    "linear_attention",
    "performer_attention",
    "performer_feature_map",
    "performer_weights",
    "qk_norm_logits",
    "random_projection",
    "sigmoid_attention",
    "sigmoid_weights",
]
