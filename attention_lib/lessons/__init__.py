"""The course's measurements and demonstrations, as functions the notebooks call.

Everything here is built from the library below it (the reference path in
`attention_lib.core`, the execution paths in `attention_lib.flash`, the
normalisers) and is tested like it; nothing below imports from here.

    scaling_stats   width sweeps: logit spread, top weight, entropy per scale rule
    theory          Var(q·k) = d, the softmax Jacobian, a head trained to saturation
    online          the online softmax stepped through, one score at a time
    cost            FLOPs, bytes and the benchmark results, for notebook 05
    alternatives    additive, cosine and linear attention; attention sinks
    mistakes        the four common mistakes, each next to its fix
    exercises       checkers that give feedback on a learner's attempt, and the solutions
    flash_checks    what notebook 07's checkers share: running the attempt, naming rows
    online_exercise, tiled_exercise, backward_exercise
                    notebook 07's numpy exercises: the update, the tiled loop, the backward
    triton_exercise the key loop's body, held to FlashAttention's accuracy rule
    triton_runner   that body in triton_skeleton's kernel, in Triton's interpreter (a
                    child process); flash_solutions: notebook 07's four solutions
    rounding        differences at rounding level printed as a bound, true on any CPU
    gpu             the committed GPU benchmark beside the CPU one; a live run on CUDA

The small model trained here (``make model``), and what the notebooks ask of it:

    corpus          its sentences, generated here: pronouns and what they stand for
    tiny_model      a two-layer transformer; attention call and scale rule are parameters
    training        train it, measure its heads over training, write weights and report;
                    describe the trained models from that report
    head_stats      per head: logit spread, entropy, softmax-Jacobian norm, q-k alignment
    model_views     where "it" looks, every head's map, swapped attention calls
    model_figures   still figures of the training report and of the head maps
    research        the scale inside the gradient, saturation, μP's alignment, QK-norm

tiny_model, training, model_views and research import torch;
triton_skeleton imports torch and triton (only the interpreter's child process loads it).
"""
