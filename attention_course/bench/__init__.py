"""The benchmarks' room: every attention path timed side by side, and the readers of the results.

    python -m attention_course.bench     # make bench; on a CUDA machine the GPU sweep

    cli       the command line: the CPU sweep and ratios, or on a CUDA device the GPU sweep
    cpu       the CPU sweep: every path at every length, time, GFLOP/s, memory beyond inputs
    ratios    the torch tiled path against PyTorch's SDPA, idle and loaded, side by side
    gpu       the GPU sweep: our Triton kernels against SDPA's backends; tile tuning
    machine   what a run records of itself and its machine (one recorder), peak memory
    results   the readers of results.json and gpu_results.json, and what their fits say

Below the lessons (notebook 05 reads the results through `results`) and
above the library it measures. Importing this package, or any module of
it, imports neither torch nor triton: they load when a run starts.
"""
