"""The tiled execution paths: FlashAttention's online softmax, one tile of scores at a time.

    dispatch        `flash_attention`: checks the call and runs its route
    route           which path takes which call, in which dtype and tiles, decided once
                    (`choose_route`, `Route`, `Tiling`)
    loop            the readable loop (`tiled_loop`), numpy (and any array-API namespace)
    fused_tiles     the torch path's tiles on PyTorch's fused CPU kernel, merged by the
                    online softmax, and their backward pass (`tile_kernel="fused"`)
    torch_tiled     the torch loop with each tile as torch operations, forward in place and
                    FlashAttention's backward pass (`torch_tiled_attention`,
                    `TorchTiledFunction`, `tile_kernel="ops"`), on `workers`' threads
    triton/         the Triton path (CUDA, or the interpreter): launch (the launchers and
                    autograd Function), forward and backward (the kernels), configs (their
                    tile table), common (what the kernels share)
    accuracy        FlashAttention's rule: at most twice PyTorch's error against float64
    tiles           the query and key blocks every path walks

Importing this package imports neither torch nor triton.
"""

from .dispatch import flash_attention
from .route import BACKENDS, TILE_KERNELS
from .tiles import key_blocks, query_blocks, row_shift

__all__ = ["BACKENDS", "TILE_KERNELS", "flash_attention", "key_blocks", "query_blocks", "row_shift"]
