"""The Triton path: kernels for CUDA (or Triton's interpreter on the CPU) and their launchers.

    launch     the launchers, `plan` and `triton_attention`, and the autograd Function
    forward    the forward kernel; backward the backward kernels (δ, dK and dV, dQ)
    configs    the tile table; common  what the kernels share

Importing this package imports nothing; each module but ``configs`` imports
triton (and ``launch`` torch) when it is imported.
"""

__all__: list[str] = []
