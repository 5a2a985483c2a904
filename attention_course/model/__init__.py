"""The small trained model: its corpus, the model, its training, its weights and report.

A two-layer decoder-only transformer whose attention call and scale rule
are parameters, trained here on sentences where a word must find another
(a pronoun and what it stands for), so that the notebooks can show what
real heads learn. Above the library (it calls the reference and tiled
paths), below the lessons and explorers (they read it):

    catalogue    the trained models' names, settings and labels; where the weights lie
    corpus       its sentences, generated here: pronouns and what they stand for
    weights      the weights read without torch, and the forward pass on them in numpy
    tiny_model   the model; ``attention=`` swaps its attention call; save and load
    head_stats   per head: logit spread, entropy, softmax-Jacobian norm, q-k alignment
    training     ``make model``: train every model, measure its heads, write the files
    report       the committed report: read it, describe the models, compare a retrain
    views        the trained model seen from the notebooks: where a word looks, head maps
                 (in numpy), the attention calls swapped (in torch)
    trained/     the committed weights (``*.npz``), ``report.json`` and ``report.png``

tiny_model and training import torch; catalogue, corpus, head_stats,
report, weights and views do not (views' torch functions import it when
called), so the notebooks that only read the model (01, 02) run without it.
"""
