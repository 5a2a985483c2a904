"""The trained model read in numpy (attention_course.model.weights) is the torch model's forward
pass.

The notebooks that only read the model (01, 02) run this one, without torch;
the torch model stays the definition, so they are held together here on
every trained model, every showcase sentence and volumes from nearly flat to
nearly one-hot, in float64, to the one float64 bound.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_course.model.catalogue import TRAINED
from attention_course.model.corpus import SHOWCASE, build_corpus, parse
from attention_course.model.tiny_model import inference, load_model
from attention_course.model.weights import ModelConfig, NumpyModel, read_weights
from tests.support import FLOAT64


def scaled(values: np.ndarray) -> dict:
    """FLOAT64's bound for values of order one, scaled to these values' size: the logits reach
    about 150 at volume 20, where one unit in the last place is already 3e-14."""
    return {"rtol": 0.0, "atol": FLOAT64["atol"] * max(1.0, float(np.abs(values).max()))}


@pytest.mark.parametrize("name", list(TRAINED))
def test_the_numpy_forward_is_the_torch_models_in_float64(name):
    tokens = build_corpus().encode([parse(s) for s in SHOWCASE])  # (N, T), padded
    numpy_model = NumpyModel(*read_weights(name))
    torch_model = load_model(name).double()
    for volume in (0.05, 1.0, 20.0):
        logits, layers = numpy_model.forward(tokens, volume=volume)
        trace: list = []
        with inference():
            expected = torch_model(torch.from_numpy(tokens), trace=trace, volume=volume)
        np.testing.assert_allclose(logits, expected.numpy(), **scaled(expected.numpy()))
        assert len(layers) == len(trace) == numpy_model.config.n_layers
        for ours, theirs in zip(layers, trace, strict=True):
            np.testing.assert_allclose(ours.weights, theirs.weights.numpy(), **FLOAT64)
            finite = np.isfinite(theirs.logits.numpy())  # (B, H, T, T): -inf above the diagonal
            assert np.array_equal(np.isfinite(ours.logits), finite)
            want = theirs.logits.numpy()[finite]
            np.testing.assert_allclose(ours.logits[finite], want, **scaled(want))


def test_reading_checks_the_name_and_the_tokens():
    with pytest.raises(ValueError, match="unknown model 'sqrt_d32'"):
        read_weights("sqrt_d32")
    model = NumpyModel(*read_weights("sqrt_d16"))
    too_long = np.zeros((1, model.config.length + 1), dtype=np.int64)
    with pytest.raises(ValueError, match="more than this model's"):
        model.forward(too_long)
    with pytest.raises(ValueError, match="volume must be a finite number >= 0, got -1"):
        model.forward(too_long[:, :3], volume=-1.0)


def test_the_torch_model_takes_its_config_from_the_numpy_reader():
    from attention_course.model import tiny_model

    assert tiny_model.ModelConfig is ModelConfig
    config, vocab, arrays = read_weights("sqrt_d16")
    assert vocab == build_corpus().vocab
    assert set(arrays) == set(load_model("sqrt_d16").state_dict())
    assert config == load_model("sqrt_d16").config
