"""The five common attention mistakes, each run for real and caught by a check.

    checks   `MistakeCaught`, `MistakeRun` and the ``check_*`` assertions
    runs     the shared inputs, the wrong functions and the ``run_*`` functions
    dropout  the fifth: attention dropout left on in evaluation (torch, imported on use)

Every ``run_*`` function makes the mistake on seeded inputs, computes the
correct version next to it with `attention_lib`, and runs the check that is
meant to catch it on both. It returns a `MistakeRun`: the numbers worth
printing, what the check said about the mistaken version (``caught``) and
whether the correct version passed (``correct_passes``).

The checks (``check_*``) are ordinary development-time assertions: they raise
`MistakeCaught` (an AssertionError) with a message that says what is wrong and
what usually causes it, and return None when all is well.

The inputs each mistake is made on (`random_rows`, `multi_head_qk`) and the
measure of a causal leak (`future_leak`) are shared with the mistakes'
explorer (`attention_course.explorers.mistakes`), which draws the same runs.
"""

from .checks import (
    MistakeCaught,
    MistakeRun,
    check_no_future_leak,
    check_not_saturated,
    check_rows_sum_to_one,
    check_scale_matches_head_width,
    future_leak,
)
from .dropout import attention_layer, check_eval_is_deterministic, run_dropout_in_eval
from .runs import (
    attend_mask_after_softmax,
    attend_wrong_axis,
    multi_head_qk,
    qk_normalised_weights,
    random_rows,
    run_mask_after_softmax,
    run_model_width_scale,
    run_scale_as_knob,
    run_wrong_axis,
    split_heads,
)

__all__ = [
    "MistakeCaught",
    "MistakeRun",
    "attend_mask_after_softmax",
    "attend_wrong_axis",
    "attention_layer",
    "check_eval_is_deterministic",
    "check_no_future_leak",
    "check_not_saturated",
    "check_rows_sum_to_one",
    "check_scale_matches_head_width",
    "future_leak",
    "multi_head_qk",
    "qk_normalised_weights",
    "random_rows",
    "run_dropout_in_eval",
    "run_mask_after_softmax",
    "run_model_width_scale",
    "run_scale_as_knob",
    "run_wrong_axis",
    "split_heads",
]
