"""The tiled execution paths: FlashAttention's online softmax, one tile of scores at a time.

    dispatch        `flash_attention`, which picks a path (``backend=``)
    loop            the readable loop, numpy (and any array-API namespace)
    autograd        the torch loop, in place, with FlashAttention's backward pass
    triton_kernels  the Triton path's launchers and autograd Function (CUDA, or the interpreter)
    triton_forward  the Triton forward kernel; triton_backward its backward kernels
    triton_configs  their tile table; triton_common  what the kernels share
    accuracy        FlashAttention's rule: at most twice PyTorch's error against float64
    tiles           the query and key blocks every path walks

Importing this package imports neither torch nor triton.
"""

from .dispatch import BACKENDS, flash_attention
from .tiles import key_blocks, query_blocks, row_shift

__all__ = ["BACKENDS", "flash_attention", "key_blocks", "query_blocks", "row_shift"]
