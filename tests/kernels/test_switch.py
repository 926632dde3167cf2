"""The fast kernels are a model option: saved in the config, per model, with
an environment override for debugging; never process state."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert import BertClassifier, BertEncoder
from keras_bert.kernels.switch import FAST_KERNELS_ENV
from keras_bert.models.fast_path import with_fast_kernels

from harness import tiny_config


def switchable_layers(model):
    return [
        layer
        for layer in model._flatten_layers(include_self=False)
        if hasattr(layer, "runs_fast_kernels")
    ]


@pytest.fixture
def inputs():
    rng = np.random.default_rng(0)
    mask = (np.arange(10) < np.array([[10], [6], [3]])).astype("int32")
    return {
        "input_ids": tf.constant(rng.integers(5, 40, size=(3, 10)) * mask, tf.int32),
        "input_mask": tf.constant(mask),
        "segment_ids": tf.zeros((3, 10), tf.int32),
    }


def train_step_gradients(model, inputs):
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(inputs, training=True)["pooled_output"] ** 2)
    return [tf.convert_to_tensor(g) for g in tape.gradient(loss, model.trainable_variables)]


def test_two_encoders_in_one_process_keep_their_own_setting(inputs):
    keras.utils.set_random_seed(1)
    fast = BertEncoder(tiny_config())
    plain = BertEncoder(tiny_config(), fast_kernels=False)
    plain.set_weights(fast.get_weights())
    assert {layer.runs_fast_kernels for layer in switchable_layers(fast)} == {True}
    assert {layer.runs_fast_kernels for layer in switchable_layers(plain)} == {False}
    # Built in either order, traced in either order: each runs its own path, same values.
    for mine, theirs in zip(
        train_step_gradients(plain, inputs), train_step_gradients(fast, inputs)
    ):
        np.testing.assert_allclose(mine, theirs, rtol=1e-4, atol=1e-6)
    assert {layer.runs_fast_kernels for layer in switchable_layers(fast)} == {True}


def test_the_option_is_saved_and_reloads(tmp_path):
    model = BertClassifier(BertEncoder(tiny_config(), fast_kernels=False), 2)
    assert model.get_config()["encoder"]["config"]["fast_kernels"] is False
    model.save(tmp_path / "plain.keras")
    restored = keras.models.load_model(tmp_path / "plain.keras")
    assert restored.encoder.fast_kernels is False
    assert {layer.runs_fast_kernels for layer in switchable_layers(restored)} == {False}


def test_a_plain_copy_has_the_same_weights_and_outputs(inputs):
    model = BertClassifier(BertEncoder(tiny_config()), 2)
    plain = with_fast_kernels(model, False)
    assert {layer.runs_fast_kernels for layer in switchable_layers(plain)} == {False}
    np.testing.assert_allclose(plain(inputs).numpy(), model(inputs).numpy(), atol=1e-5)


@pytest.mark.parametrize("value, expected", [("0", False), ("off", False), ("1", True)])
def test_the_environment_overrides_for_debugging(monkeypatch, value, expected):
    monkeypatch.setenv(FAST_KERNELS_ENV, value)
    encoder = BertEncoder(tiny_config(), fast_kernels=not expected)
    assert {layer.runs_fast_kernels for layer in switchable_layers(encoder)} == {expected}
    assert encoder.fast_kernels is (not expected)  # the config keeps the model's option


def test_a_bad_value_names_the_variable_and_the_choices(monkeypatch):
    monkeypatch.setenv(FAST_KERNELS_ENV, "maybe")
    with pytest.raises(ValueError, match="KERAS_BERT_FAST_KERNELS='maybe': use 1"):
        BertEncoder(tiny_config())
    monkeypatch.delenv(FAST_KERNELS_ENV)
    with pytest.raises(ValueError, match="fast_kernels must be True or False"):
        BertEncoder(tiny_config(), fast_kernels="no")
