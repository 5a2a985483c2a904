"""attention_lib: scaled dot-product attention, to read, to check and to measure.

Two execution paths with one meaning:

- `scaled_dot_product_attention`: the reference path, PyTorch's semantics,
  the whole score matrix at once.
- `flash_attention`: the tiled path, FlashAttention's online softmax, one
  tile of scores at a time.

Every function takes numpy arrays (and returns numpy) or torch tensors (and
returns torch, on the same device). Importing this package does not import
torch; torch loads when a tensor arrives or `best_device` is called.

The package is a house of floors, each importing only from the floors below
(tests/project/test_layering.py reads every import):

    variants/         the attention variants (additive, cosine / QK-norm, linear /
                      Performer, sigmoid, differential)
    core · flash/     the reference path and the masked scores the variants reuse;
                      the tiled paths (numpy loop, torch path, Triton kernels)
    scales · nonfinite
                      the scale (1/sqrt(d), the other rules, the volume knob); the
                      rule for non-finite inputs
    inputs · masks · normalisers · memory · dropout
                      argument checking (once), masks, softmax and its alternatives
                      with the softmax Jacobian and the simplex check, refusals, dropout
    backend · fits    numpy / torch dispatch (array-api-compat); a slope fit

It needs numpy and array-api-compat only; the course that teaches with it
(``attention_course``) is a package of its own, above it.
"""

from .backend import best_device
from .core import attention_weights, scaled_dot_product_attention
from .flash import flash_attention
from .memory import AttentionMemoryError
from .normalisers import entmax15, softmax, softmax1, sparsemax

__all__ = [
    "AttentionMemoryError",
    "attention_weights",
    "best_device",
    "entmax15",
    "flash_attention",
    "scaled_dot_product_attention",
    "softmax",
    "softmax1",
    "sparsemax",
]

__version__ = "0.1.0"
