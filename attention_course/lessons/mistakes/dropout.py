"""5. Attention dropout left on at evaluation: the eval-mode trap.

A layer that calls ``F.scaled_dot_product_attention(q, k, v, dropout_p=self.p)``
drops weights in training, as it should, and keeps dropping them after
``model.eval()``: the function has no idea of the module's mode, so the
argument must carry it, ``dropout_p=self.p if self.training else 0.0``.
Nothing fails. An evaluated model just gives another answer on every call.

`AttentionLayer` is the smallest such layer, mistaken or not;
`check_eval_is_deterministic` is the check that catches it (two calls in
evaluation mode must agree); `run_dropout_in_eval` makes the mistake beside
the fix. Torch is imported by the functions, never with this module.
"""

from __future__ import annotations

from typing import Any

from .checks import MistakeCaught, MistakeRun, _run_check

__all__ = ["attention_layer", "check_eval_is_deterministic", "run_dropout_in_eval"]


def attention_layer(p: float = 0.1, mistaken: bool = False) -> Any:
    """A ``torch.nn.Module`` whose forward is attention with dropout ``p`` on its weights:
    ``mistaken`` passes ``dropout_p=p`` in every mode, else only in training."""
    import torch
    import torch.nn.functional as F

    class AttentionLayer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.p = p

        def forward(self, q: Any, k: Any, v: Any) -> Any:  # (B, H, L, E) each
            drop = self.p if (mistaken or self.training) else 0.0
            return F.scaled_dot_product_attention(q, k, v, dropout_p=drop)  # (B, H, L, Ev)

    return AttentionLayer()


def check_eval_is_deterministic(layer: Any, *inputs: Any) -> None:
    """Two calls of ``layer`` in evaluation mode on the same inputs must give the same output.

    Raises `MistakeCaught` with how far they differ, and the fix, when they do not.
    """
    import torch

    was_training = layer.training
    layer.eval()
    try:
        with torch.no_grad():
            first, second = layer(*inputs), layer(*inputs)
    finally:
        layer.train(was_training)
    gap = (first - second).abs().max().item()
    if gap > 0:
        raise MistakeCaught(
            f"in evaluation mode two calls on the same input differ by up to {gap:.2g}: dropout "
            "is still on; pass dropout_p=self.p if self.training else 0.0"
        )


def run_dropout_in_eval(p: float = 0.1, length: int = 8, width: int = 16, seed: int = 0):
    """The mistaken layer beside the fixed one, in evaluation mode, on seeded inputs.

    Numbers: how far the mistaken layer's two evaluation calls differ and how far
    one of them is from attention without dropout; the fixed layer matches it.
    """
    import torch
    import torch.nn.functional as F

    gen = torch.Generator().manual_seed(seed)
    q, k, v = torch.randn(3, 1, 1, length, width, generator=gen).unbind()  # (B, H, L, E) each
    exact = F.scaled_dot_product_attention(q, k, v)  # (B, H, L, E), no dropout
    mistaken, fixed = attention_layer(p, mistaken=True), attention_layer(p)
    with torch.random.fork_rng(), torch.no_grad():  # the same draws every run; yours untouched
        torch.manual_seed(seed)
        mistaken.eval()
        first, second = mistaken(q, k, v), mistaken(q, k, v)
        fixed.eval()
        right = fixed(q, k, v)
        caught = _run_check(lambda: check_eval_is_deterministic(mistaken, q, k, v))
        passes = _run_check(lambda: check_eval_is_deterministic(fixed, q, k, v)) is None
    return MistakeRun(
        title=f"5. attention dropout (p = {p:g}) left on in evaluation mode",
        numbers={
            "largest difference, two calls in eval, mistaken": (first - second).abs().max().item(),
            "largest difference from no dropout, mistaken": (first - exact).abs().max().item(),
            "largest difference from no dropout, fixed": (right - exact).abs().max().item(),
        },
        caught=caught,
        correct_passes=passes,
    )
