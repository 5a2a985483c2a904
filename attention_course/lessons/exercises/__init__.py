"""The "Try it yourself" exercises: checkers that run the learner's code and say what is off.

Each checker runs the learner's function on cases drawn from a seed (the
seed is in the report; by default a hash of the function's source, so that
the same function meets the same cases and a changed one new cases) against
the library's reference, on read-only arrays, and prints a report in the
learner's terms (which mistake it looks like, on which rows, what the
function did that the exercise forbids); the solutions wait here, off the
page, for a solution gate to show after an attempt (where installed: a graded
class's install has none).

Notebook 02 (the reference call, in numpy):

    attention       `check_attention`: your own attention against the reference
    scale_rule      `check_scale_rule`: your scale as a function of the head width
    combined_mask   `check_combined_mask`: one mask for a padded, causal batch
    decode          `check_decode_step`: a KV-cache decode step, append then attend
    multi_head      `check_multi_head`: project, split into heads, attend at the head's
                    width, merge

Notebook 07 (FlashAttention, built by hand):

    online_update   `check_online_update`: one step of the online softmax
    flash_steps     exercise 2 in steps: `check_key_loop` (one query block's walk over the
                    keys), `check_key_stop` (the causal stop), `check_diagonal_mask`
    flash_forward   `check_flash_forward`: the tiled forward pass, with the log-sum-exp
    flash_backward  `check_flash_backward`: the backward pass from the log-sum-exp
    flash_layer     `check_flash_layer`: exercises 2 and 3 wrapped in a torch.autograd.Function,
                    gradcheck; flash_training trains the small model with it
    softmax_kernels `check_row_softmax`, `check_online_softmax`: the Triton warm-up, whole
                    kernels, in the interpreter (softmax_child runs them there)
    key_block       `check_key_block`: a Triton kernel's key loop, in the interpreter;
                    triton_runner, triton_child and triton_skeleton run it there

    base            what every checker shares: the report, one tolerance, the answer read
                    as an array, the attempt's seed
    guards          running the learner's code: read-only arguments, writes named, a time
                    limit
    tripwires       the attention functions "your own attention" and the multi-head
                    layer may not call
    watch           arrays that record which keys a tiled pass reads
    draws           the extremes every exercise's cases include (scores near 1000, rows
                    far below zero, L != S)
    feedback        a report as the learner reads it; a check that never raises
    registry        every exercise once: its checker and cases, for the gates and the
                    graded edition alike
    grading         the graded edition's checks by exercise name (teachers/graded)
    solutions       every exercise's solution and explanation, read from `answers`
                    (a graded class's install leaves that one module out)

Importing this package imports neither torch nor triton.
"""

from .attention import AttentionCheck, check_attention
from .base import CaseResult, CheckReport, Solution
from .combined_mask import MaskCheck, check_combined_mask
from .decode import DecodeCheck, check_decode_step
from .flash_backward import FlashBackwardCheck, check_flash_backward
from .flash_forward import FlashForwardCheck, check_flash_forward
from .flash_layer import FlashLayerCheck, check_flash_layer
from .flash_steps import (
    DiagonalMaskCheck,
    KeyLoopCheck,
    KeyStopCheck,
    check_diagonal_mask,
    check_key_loop,
    check_key_stop,
)
from .key_block import KeyBlockCheck, check_key_block, check_key_blocks
from .multi_head import MultiHeadCheck, check_multi_head
from .online_update import OnlineUpdateCheck, check_online_update
from .registry import EXERCISES, Exercise
from .scale_rule import ScaleRuleCheck, check_scale_rule
from .softmax_kernels import (
    OnlineSoftmaxCheck,
    RowSoftmaxCheck,
    check_online_softmax,
    check_row_softmax,
)
from .solutions import FLASH_SOLUTIONS, SOLUTIONS, solution_function, solution_scope
from .triton_runner import skeleton_source

__all__ = [
    "EXERCISES",
    "FLASH_SOLUTIONS",
    "SOLUTIONS",
    "AttentionCheck",
    "CaseResult",
    "CheckReport",
    "DecodeCheck",
    "DiagonalMaskCheck",
    "Exercise",
    "FlashBackwardCheck",
    "FlashForwardCheck",
    "FlashLayerCheck",
    "KeyBlockCheck",
    "KeyLoopCheck",
    "KeyStopCheck",
    "MaskCheck",
    "MultiHeadCheck",
    "OnlineSoftmaxCheck",
    "OnlineUpdateCheck",
    "RowSoftmaxCheck",
    "ScaleRuleCheck",
    "Solution",
    "check_attention",
    "check_combined_mask",
    "check_decode_step",
    "check_diagonal_mask",
    "check_flash_backward",
    "check_flash_forward",
    "check_flash_layer",
    "check_key_block",
    "check_key_blocks",
    "check_key_loop",
    "check_key_stop",
    "check_multi_head",
    "check_online_softmax",
    "check_online_update",
    "check_row_softmax",
    "check_scale_rule",
    "skeleton_source",
    "solution_function",
    "solution_scope",
]
