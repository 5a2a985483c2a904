"""Saturation and gradients: when a softmax row nears one-hot, its gradient vanishes.

Notebook 04's researcher claims, each a function that checks it numerically:

    jacobian    the softmax Jacobian's norm against the head width and the scale rule;
                the scale inside the gradient (dQ = c·dS·K), checked with autograd
    retrieval   a head trained to saturation: it learns slowly and stays saturated,
                over several seeds
    trained     the trained models' heads: when they saturate, every head's numbers,
                and QK-norm applied to a model's own queries and keys

The Jacobian itself, p_i (δ_ij − p_j), and the simplex check are library
code (`attention_lib.normalisers`). Importing this package does not import
torch; the functions that train or run a model do.
"""

from .jacobian import (
    ScoreGradient,
    jacobian_norm_table,
    jacobian_norms,
    jacobian_row_norms,
    reduce_norms,
    score_gradient_check,
)
from .retrieval import (
    ROWS,
    RetrievalComparison,
    RetrievalRun,
    compare_retrieval_heads,
    describe_training,
    run_label,
    train_retrieval_head,
)
from .trained import (
    QKNormView,
    fit_qk_temperature,
    head_table,
    qk_norm_view,
    saturation_table,
)

__all__ = [
    "ROWS",
    "QKNormView",
    "RetrievalComparison",
    "RetrievalRun",
    "ScoreGradient",
    "compare_retrieval_heads",
    "describe_training",
    "fit_qk_temperature",
    "head_table",
    "jacobian_norm_table",
    "jacobian_norms",
    "jacobian_row_norms",
    "qk_norm_view",
    "reduce_norms",
    "run_label",
    "saturation_table",
    "score_gradient_check",
    "train_retrieval_head",
]
