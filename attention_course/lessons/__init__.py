"""The course's experiments, measurements and figures, as functions the notebooks call.

Filed by idea, not by notebook. Everything here is built from the floors
below it (the library: `attention_lib.core`, `attention_lib.flash`, the
normalisers and `attention_lib.variants`; the trained model,
`attention_course.model`) and is tested like them; nothing below imports from
here, and the explorers above call it for their numbers.

    crowded_room   notebook 01's analogy: friends, the volume knob, the three steps for "it"
    scaling        the scale against the head width: the width sweep, Var(q·k) = d,
                   μP's alignment in the trained models
    saturation/    the softmax Jacobian's norm against the width, the scale in the
                   gradient, a head trained to saturation, the trained heads, QK-norm
    mistakes       the four common mistakes, each run for real next to its fix
    exercises/     checkers that give feedback on a learner's attempt, and the solutions
                   (notebook 02's four, notebook 07's four)
    online         the online softmax stepped through, one score at a time
    cost           FLOPs, bytes, memory traffic; then the benchmark results' readers
    gpu            the committed GPU benchmark beside the CPU one; a live run on CUDA
    alternatives   the experiments with the attention variants: timing, sinks,
                   random features' error, sigmoid and differential maps
    figures/       every still figure, in one style
    printing       how a lesson prints a rounding-level difference, and a table
    environment    notebook 00's check of the versions and of numpy against torch, run in a
                   second Python so that the learner's kernel never holds torch

The functions that train or run a model (in saturation, alternatives'
`sink_experiment`) import torch when called; importing a module here does not.
"""
