import keras
import numpy as np
import pytest

from keras_bert import BertConfig, BertEncoder

import harness


def tiny_config(**overrides):
    """The harness's tiny encoder with 2 layers (the encoder's own tests: one
    layer feeds the next), 4 heads, 50 ids and 16 positions."""
    values = dict(vocab_size=50, num_attention_heads=4, max_position_embeddings=16)
    values.update(num_hidden_layers=2)
    return harness.tiny_config(**{**values, **overrides})


def random_inputs(batch=2, length=8, vocab=50, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "input_ids": rng.integers(5, vocab, (batch, length)).astype("int32"),
        "input_mask": np.ones((batch, length), "int32"),
        "segment_ids": (np.arange(length)[None, :] >= length // 2).repeat(batch, 0).astype("int32"),
    }


@pytest.mark.parametrize(
    "preset, expected",
    [
        ("base", 109_482_240),
        pytest.param(
            "large", 335_141_888, marks=pytest.mark.slow
        ),  # 1.3 GB of weights to initialise
    ],
)
def test_exact_sizes(preset, expected):
    assert BertEncoder(BertConfig.preset(preset)).count_params() == expected


def test_outputs_and_shapes():
    encoder = BertEncoder(tiny_config())
    outputs = encoder(random_inputs())
    assert outputs["sequence_output"].shape == (2, 8, 32)
    assert outputs["pooled_output"].shape == (2, 32)
    assert len(outputs["encoder_outputs"]) == 2
    np.testing.assert_allclose(outputs["encoder_outputs"][-1], outputs["sequence_output"])
    # Dynamic batch and length.
    assert encoder(random_inputs(batch=3, length=5))["sequence_output"].shape == (3, 5, 32)


def test_padding_is_invisible():
    encoder = BertEncoder(tiny_config())
    inputs = random_inputs(length=6)
    padded = {name: np.pad(value, ((0, 0), (0, 4))) for name, value in inputs.items()}
    padded["input_ids"][:, 6:] = 7  # Garbage ids under the padding must not matter either.
    plain = encoder(inputs)
    with_padding = encoder(padded)
    np.testing.assert_allclose(
        with_padding["sequence_output"][:, :6], plain["sequence_output"], atol=1e-5
    )
    np.testing.assert_allclose(with_padding["pooled_output"], plain["pooled_output"], atol=1e-5)


def test_config_and_keras_file_round_trip(tmp_path):
    encoder = BertEncoder(tiny_config())
    inputs = random_inputs()
    expected = encoder(inputs)["sequence_output"]
    clone = BertEncoder.from_config(encoder.get_config())
    assert clone.config == encoder.config
    path = str(tmp_path / "encoder.keras")
    encoder.save(path)
    restored = keras.models.load_model(path)
    assert isinstance(restored, BertEncoder)
    np.testing.assert_allclose(restored(inputs)["sequence_output"], expected, atol=1e-6)


def test_initialisation_is_truncated_normal():
    encoder = BertEncoder(tiny_config(vocab_size=2000, initializer_range=0.02))
    table = np.asarray(encoder.token_embedding.embeddings)
    assert abs(table.std() - 0.02 * 0.88) < 0.002  # std of N(0, 0.02) truncated at 2 sigma
    assert np.abs(table).max() <= 0.04 + 1e-6


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision(policy):
    reference = BertEncoder(tiny_config())
    encoder = BertEncoder(tiny_config(), dtype=policy)
    assert encoder.dtype_policy.name == policy  # its own, not the global float32
    encoder.set_weights(reference.get_weights())
    inputs = random_inputs()
    outputs = encoder(inputs)
    assert outputs["sequence_output"].dtype == policy.split("_")[1]
    assert all(w.dtype == "float32" for w in encoder.weights)
    np.testing.assert_allclose(
        np.asarray(outputs["sequence_output"], "float32"),
        reference(inputs)["sequence_output"],
        atol=0.1,
    )


def test_jit_compile_matches_eager():
    encoder = BertEncoder(tiny_config())
    inputs = random_inputs()
    import tensorflow as tf

    compiled = tf.function(lambda x: encoder(x)["sequence_output"], jit_compile=True)
    np.testing.assert_allclose(compiled(inputs), encoder(inputs)["sequence_output"], atol=1e-5)
