"""ModernBertEncoder with the padding packed out of its per-token layers
(`keras_bert.models.unpadded`): every real position's outputs and every
gradient are the padded model's, the padding's outputs 0, and the task
models and both pretrainers take that path in their steps.

The references: the same encoder's ordinary padded call (itself checked
against HuggingFace in test_modernbert.py), run in the test, and
HuggingFace's own outputs for the fixture's rows."""

import dataclasses
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert import BertClassifier, ModernBertEncoder, ModernBertPretrainer
from keras_bert.checkpoints.modernbert import read_config
from keras_bert.models import modernbert, modernbert_electra
from keras_bert.models.electra_pretrainer import DRAWS
from keras_bert.models.modernbert_electra import ModernBertElectraPretrainer
from keras_bert.models.modernbert_pretrainer import masked_rows
from keras_bert.models.token_classifier import BertTokenClassifier

from harness import assert_same_gradients
from repo_paths import TESTS_DIR

# The same products on the same rows, summed in another order: float32 rounding.
TOLERANCE = 1e-5
FIXTURES = os.path.join(TESTS_DIR, "fixtures", "modernbert")
# Rows of 9, 3, 6 and 1 real tokens padded to 12: attention spans the first 9.
LENGTHS, WIDTH = [9, 3, 6, 1], 12


# 3 layers (global, local, global), hidden 32, biases everywhere, no dropout.
TINY = read_config(os.path.join(TESTS_DIR, "fixtures", "modernbert", "tiny_mlm_biases"))[0]


def random_encoder(pooling="cls", seed=0):
    """3 layers (global, local, global), a window of 2 on each side (the
    sliding window matters at every length but 1), biases everywhere;
    initializer_range 0.2: weights large enough that a wrong row, position or
    mask shows. No dropout (ModernBERT's default)."""
    keras.utils.set_random_seed(seed)
    config = dataclasses.replace(
        TINY, local_attention=4, initializer_range=0.2, classifier_pooling=pooling
    )
    return ModernBertEncoder(config)


def ragged_batch(lengths=LENGTHS, width=WIDTH, seed=0, vocab_size=64):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, vocab_size, size=(len(lengths), width)).astype(np.int32)
    mask = (np.arange(width)[None] < np.array(lengths)[:, None]).astype(np.int32)
    return {"input_ids": ids * mask, "input_mask": mask}


def assert_same_at(expected, got, where):
    where = np.asarray(where).astype(bool)
    np.testing.assert_allclose(np.asarray(got)[where], np.asarray(expected)[where], atol=TOLERANCE)


def outputs_and_gradients(encoder, features, weights, **arguments):
    """Training outputs and the gradients of a loss on the last layer at
    `weights`' positions (B, T, 1), on every block's real positions and on
    the pooled output."""
    real = tf.cast(features["input_mask"], tf.float32)[..., None]
    with tf.GradientTape() as tape:
        outputs = encoder(features, training=True, **arguments)
        loss = tf.reduce_sum(tf.square(outputs["sequence_output"]) * weights)
        loss += tf.reduce_sum(outputs["pooled_output"])
        for layer in outputs["encoder_outputs"][:-1]:
            loss += tf.reduce_sum(tf.sin(layer) * real)
    return outputs, tape.gradient(loss, encoder.trainable_variables)


# === The encoder ===


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_real_positions_match_the_padded_model_and_the_padding_is_0(pooling):
    encoder = random_encoder(pooling)
    features = ragged_batch()
    mask = features["input_mask"]
    padded = encoder(features)
    unpadded = encoder(features, remove_padding=True)
    assert_same_at(padded["sequence_output"], unpadded["sequence_output"], mask)
    assert np.all(np.asarray(unpadded["sequence_output"])[mask == 0] == 0)
    np.testing.assert_allclose(unpadded["pooled_output"], padded["pooled_output"], atol=TOLERANCE)
    assert len(unpadded["encoder_outputs"]) == 3
    for layer_padded, layer_unpadded in zip(padded["encoder_outputs"], unpadded["encoder_outputs"]):
        assert_same_at(layer_padded, layer_unpadded, mask)
        assert np.all(np.asarray(layer_unpadded)[mask == 0] == 0)


def test_each_row_alone_is_huggingfaces_row():
    """The fixture's padded batch, unpadded: HuggingFace's outputs for each
    sequence run alone (an independent implementation of rotary positions and
    the sliding window)."""
    folder = os.path.join(FIXTURES, "tiny_mlm_biases")
    expected = dict(np.load(folder + "_outputs.npz"))
    encoder = ModernBertEncoder.from_pretrained(folder)
    got = encoder(
        {"input_ids": expected["input_ids"], "input_mask": expected["input_mask"]},
        remove_padding=True,
    )["sequence_output"].numpy()
    for row, length in enumerate(expected["input_mask"].sum(axis=1)):
        np.testing.assert_allclose(
            got[row, :length], expected[f"unpadded_{row}"][0], rtol=0, atol=TOLERANCE
        )


def test_gradients_match_the_padded_model():
    encoder = random_encoder()
    features = ragged_batch()
    weights = tf.constant(features["input_mask"], tf.float32)[..., None]
    _, padded = outputs_and_gradients(encoder, features, weights)
    _, unpadded = outputs_and_gradients(encoder, features, weights, remove_padding=True)
    assert_same_gradients(encoder.trainable_variables, unpadded, padded, atol=TOLERANCE)


def test_read_positions_narrow_the_last_block_to_the_rows_read():
    """[CLS] pooling: the last block and final norm at the read rows and
    [CLS] alone, the padded model's values there and its gradients for a loss
    that reads only those; 0 elsewhere."""
    encoder = random_encoder("cls")
    features = ragged_batch()
    read = np.zeros_like(features["input_mask"])
    read[0, [2, 5, 8]] = read[2, [1, 4]] = 1
    read[1, 7] = 1  # a padding position: nothing real there, not computed
    computed = read * features["input_mask"]
    computed[:, 0] = 1
    weights = tf.constant(computed, tf.float32)[..., None]
    padded, padded_gradients = outputs_and_gradients(encoder, features, weights)
    unpadded, gradients = outputs_and_gradients(
        encoder, features, weights, remove_padding=True, read_positions=tf.constant(read)
    )
    for name in ("sequence_output",):
        assert_same_at(padded[name], unpadded[name], computed)
        assert np.all(np.asarray(unpadded[name])[computed == 0] == 0)
    assert_same_at(padded["encoder_outputs"][-1], unpadded["encoder_outputs"][-1], computed)
    np.testing.assert_allclose(unpadded["pooled_output"], padded["pooled_output"], atol=TOLERANCE)
    assert_same_gradients(encoder.trainable_variables, gradients, padded_gradients, atol=TOLERANCE)


def test_mean_pooling_reads_every_real_row_whatever_the_read_positions():
    encoder = random_encoder("mean")
    features = ragged_batch()
    padded = encoder(features)
    unpadded = encoder(
        features, remove_padding=True, read_positions=tf.zeros_like(features["input_mask"])
    )
    assert_same_at(padded["sequence_output"], unpadded["sequence_output"], features["input_mask"])
    np.testing.assert_allclose(unpadded["pooled_output"], padded["pooled_output"], atol=TOLERANCE)


def test_read_positions_need_the_unpadded_call():
    features = ragged_batch()
    with pytest.raises(ValueError, match="remove_padding=True"):
        random_encoder()(features, read_positions=tf.zeros_like(features["input_mask"]))


# === Task models and pretrainers ===


def classifier_loss_and_gradients(model, x, y, arguments):
    with tf.GradientTape() as tape:
        logits = model(x, training=True, **arguments)
        loss = model.compute_loss(x, y, logits, training=True)
    return float(loss), tape.gradient(loss, model.trainable_variables)


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_a_classifiers_step_packs_and_has_the_padded_steps_loss_and_gradients(pooling, monkeypatch):
    encoder = random_encoder(pooling)
    model = BertClassifier(encoder, 3, dropout=0.0)
    model.compile(optimizer="sgd")
    x = {name: tf.constant(value) for name, value in ragged_batch().items()}
    y = tf.constant([0, 2, 1, 1])
    arguments = model.step_arguments(x, y)
    assert arguments["remove_padding"] is True

    packed_calls = []
    forward_pass = encoder.forward_pass

    def counted(inputs, **call_arguments):
        packed_calls.append(call_arguments["read_positions"] is not None)
        return forward_pass(inputs, **call_arguments)

    monkeypatch.setattr(encoder, "forward_pass", counted)
    unpadded_loss, unpadded = classifier_loss_and_gradients(model, x, y, arguments)
    assert packed_calls == [True]  # the classifier's call reached the encoder's
    padded_loss, padded = classifier_loss_and_gradients(model, x, y, {})
    assert packed_calls == [True]
    assert unpadded_loss == pytest.approx(padded_loss, abs=TOLERANCE)
    assert_same_gradients(model.trainable_variables, unpadded, padded, atol=TOLERANCE)


def test_a_taggers_step_has_the_padded_steps_loss_and_gradients():
    model = BertTokenClassifier(random_encoder(), 3, dropout=0.0)
    model.compile(optimizer="sgd")
    x = {name: tf.constant(value) for name, value in ragged_batch().items()}
    y = tf.constant(np.random.default_rng(1).integers(0, 3, x["input_mask"].shape))
    weights = tf.cast(x["input_mask"], tf.float32) * tf.constant([[0.0] + [1.0] * (WIDTH - 1)])
    arguments = model.step_arguments(x, y, weights)
    assert arguments["remove_padding"] is True and arguments["read_positions"] is weights

    def loss_and_gradients(arguments):
        with tf.GradientTape() as tape:
            logits = model(x, training=True, **arguments)
            loss = model.compute_loss(x, y, logits, weights, training=True)
        return float(loss), tape.gradient(loss, model.trainable_variables)

    unpadded_loss, unpadded = loss_and_gradients(arguments)
    padded_loss, padded = loss_and_gradients({})
    assert unpadded_loss == pytest.approx(padded_loss, abs=TOLERANCE)
    assert_same_gradients(model.trainable_variables, unpadded, padded, atol=TOLERANCE)


def pretraining_batch(vocab_size, seed=0):
    """`ragged_batch` with 3 masked positions per row among its real tokens
    (the 1-token row's at [CLS], weight 0 but one)."""
    x = ragged_batch(seed=seed, vocab_size=vocab_size)
    rng = np.random.default_rng(seed)
    positions = np.array([[1, 4, 7], [0, 1, 2], [2, 3, 5], [0, 0, 0]], np.int32)
    weights = np.array([[1, 1, 1], [0, 1, 1], [1, 0.5, 1], [1, 0, 0]], np.float32)
    return {
        **x,
        "masked_lm_positions": positions,
        "masked_lm_ids": rng.integers(5, vocab_size, positions.shape).astype(np.int32),
        "masked_lm_weights": weights,
    }


def update_loss_and_gradients(model, x, pack):
    model.jit_compile = not pack  # XLA needs static shapes: no packing (`may_pack_padding`)
    with tf.GradientTape() as tape:
        loss, _ = model.update_loss(x)
    return float(loss), tape.gradient(loss, model.trainable_variables)


@pytest.mark.parametrize("kind", [ModernBertPretrainer, ModernBertElectraPretrainer])
def test_the_pretrainers_pack_in_training_with_the_padded_loss_and_gradients(kind, monkeypatch):
    config = read_config(os.path.join(FIXTURES, "tiny_mlm_biases"))[0]
    keras.utils.set_random_seed(3)
    model = kind(ModernBertEncoder(config))
    x = {name: tf.constant(value) for name, value in pretraining_batch(config.vocab_size).items()}
    if kind is ModernBertElectraPretrainer:
        x[DRAWS] = tf.constant(np.random.default_rng(0).uniform(size=(4, 3)), tf.float32)
    # The discriminator's forward pass, called with a packing or without.
    module = modernbert if kind is ModernBertPretrainer else modernbert_electra
    packed_calls = []
    forward = module.modernbert_forward

    def counted(parts, inputs, **arguments):
        packed_calls.append(arguments.get("packing") is not None)
        return forward(parts, inputs, **arguments)

    monkeypatch.setattr(module, "modernbert_forward", counted)
    unpadded_loss, unpadded = update_loss_and_gradients(model, x, pack=True)
    assert packed_calls == [True]
    padded_loss, padded = update_loss_and_gradients(model, x, pack=False)
    # Padded: the masked LM calls its functional graph (no forward-pass call);
    # ELECTRA's discriminator runs the forward pass without a packing.
    assert packed_calls[1:] == ([] if kind is ModernBertPretrainer else [False])
    assert unpadded_loss == pytest.approx(padded_loss, abs=TOLERANCE)
    assert_same_gradients(model.trainable_variables, unpadded, padded, atol=TOLERANCE)


def test_masked_rows_mark_the_weighted_masked_positions():
    x = pretraining_batch(64)
    expected = np.zeros((4, WIDTH), np.int32)
    for row, column in zip(*np.nonzero(x["masked_lm_weights"])):
        expected[row, x["masked_lm_positions"][row, column]] = 1
    np.testing.assert_array_equal(masked_rows(x), expected)
