"""`keras_bert.models.unpadded`: inference with the padding packed out of the
per-token layers gives the padded model's outputs at every real position.

The reference is the same encoder's ordinary padded call (itself checked
against HuggingFace and Model Garden in test_encoder.py), run in the test."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from task_models import reviews

from keras_bert import BertEncoder, BertTokenizer
from keras_bert.layers.packing import TokenPacking
from keras_bert.models.classifier import BertClassifier
from keras_bert.models.span_extractor import BertSpanExtractor
from keras_bert.models.token_classifier import BertTokenClassifier

from harness import BERT_DROPOUT, assert_same_gradients, tiny_config

# Different products over the same rows: float32 rounding only.
TOLERANCE = 1e-5


def random_encoder(attention="bidirectional", seed=0):
    keras.utils.set_random_seed(seed)
    # initializer_range 0.2: weights large enough that a wrong row or mask shows.
    return BertEncoder(
        tiny_config(
            vocab_size=200,
            num_hidden_layers=3,
            num_attention_heads=4,
            intermediate_size=48,
            initializer_range=0.2,
            attention=attention,
            **BERT_DROPOUT,
        )
    )


def no_dropout_copy(encoder):
    config = encoder.get_config()
    copy = BertEncoder.from_config(
        {
            **config,
            "config": {
                **config["config"],
                "hidden_dropout_prob": 0.0,
                "attention_probs_dropout_prob": 0.0,
            },
        }
    )
    copy.set_weights(encoder.get_weights())
    return copy


def outputs_and_gradients(encoder, features, weights, **arguments):
    """The encoder's training outputs and the gradients of a loss on the last
    layer at `weights`' positions (B, T, 1) and on the pooled output."""
    with tf.GradientTape() as tape:
        outputs = encoder(features, training=True, **arguments)
        loss = tf.reduce_sum(tf.square(outputs["sequence_output"]) * weights) + tf.reduce_sum(
            outputs["pooled_output"]
        )
    return outputs, tape.gradient(loss, encoder.trainable_variables)


def ragged_batch(lengths, width, seed=0, pair_from=None):
    """ids (B, width) with rows of `lengths` real tokens, 0 after; segment 1
    from `pair_from` on (a sentence pair)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, 200, size=(len(lengths), width)).astype(np.int32)
    mask = (np.arange(width)[None] < np.array(lengths)[:, None]).astype(np.int32)
    segments = np.zeros_like(ids)
    if pair_from is not None:
        segments[:, pair_from:] = 1
    return {"input_ids": ids * mask, "input_mask": mask, "segment_ids": segments * mask}


def assert_same_at_real_positions(padded, unpadded, mask):
    real = mask[..., None].astype(bool)
    np.testing.assert_allclose(
        np.where(real, unpadded, 0), np.where(real, padded, 0), atol=TOLERANCE
    )


def both_ways(model, features):
    padded = model(features, training=False)
    unpadded = model(features, training=False, remove_padding=True)
    return padded, unpadded


@pytest.mark.parametrize("attention", ["bidirectional", "left_to_right"])
def test_encoder_outputs_match_at_real_positions(attention):
    features = ragged_batch([9, 3, 1, 6], width=12, pair_from=5)
    padded, unpadded = both_ways(random_encoder(attention), features)
    mask = features["input_mask"]
    assert_same_at_real_positions(padded["sequence_output"], unpadded["sequence_output"], mask)
    for layer_padded, layer_unpadded in zip(padded["encoder_outputs"], unpadded["encoder_outputs"]):
        assert_same_at_real_positions(layer_padded, layer_unpadded, mask)
    np.testing.assert_allclose(unpadded["pooled_output"], padded["pooled_output"], atol=TOLERANCE)
    # padded positions come out 0, not the padded model's unread values
    assert np.all(np.asarray(unpadded["sequence_output"])[mask == 0] == 0)


def test_holes_in_the_mask_and_a_row_of_padding_only():
    """Any mask works: a masked [CLS] (still the pooler's row) and masked
    positions between real ones."""
    features = ragged_batch([7, 7], width=8)
    features["input_mask"][0, 0] = 0  # [CLS] masked out: the pooler still reads it
    features["input_mask"][1, [2, 4]] = 0
    padded, unpadded = both_ways(random_encoder(), features)
    real = features["input_mask"].copy()
    real[:, 0] = 1
    assert_same_at_real_positions(padded["sequence_output"], unpadded["sequence_output"], real)
    np.testing.assert_allclose(unpadded["pooled_output"], padded["pooled_output"], atol=TOLERANCE)


def test_real_minilm_weights_on_real_reviews(minilm_path, datasets_dir):
    encoder = BertEncoder.from_pretrained(minilm_path)
    tokenizer = BertTokenizer(os.path.join(minilm_path, "vocab.txt"), lowercase=True)
    texts, _ = reviews(datasets_dir, count=8)
    features = tokenizer.pack(tf.constant(texts), seq_length=64, padding="longest")
    padded, unpadded = both_ways(encoder, features)
    assert_same_at_real_positions(
        padded["sequence_output"], unpadded["sequence_output"], features["input_mask"].numpy()
    )
    np.testing.assert_allclose(unpadded["pooled_output"], padded["pooled_output"], atol=TOLERANCE)


def test_task_models_take_the_unpadded_encoder():
    features = ragged_batch([10, 4, 7], width=10, pair_from=6)
    classifier = BertClassifier(random_encoder(seed=1), 3)
    padded, unpadded = both_ways(classifier, features)
    np.testing.assert_allclose(unpadded, padded, atol=TOLERANCE)
    tagger = BertTokenClassifier(random_encoder(seed=2), 5)
    padded, unpadded = both_ways(tagger, features)
    assert_same_at_real_positions(padded, unpadded, features["input_mask"])
    spans = BertSpanExtractor(random_encoder(seed=3))
    padded, unpadded = both_ways(spans, features)
    for name in ("start_logits", "end_logits"):
        real = features["input_mask"].astype(bool)
        np.testing.assert_allclose(
            np.asarray(unpadded[name])[real], np.asarray(padded[name])[real], atol=TOLERANCE
        )


def test_an_argument_of_each_call_traced_into_its_graph():
    """No setting: the unpadded call is asked for by its argument, and a
    trace keeps what its own call said."""
    encoder = random_encoder()
    features = ragged_batch([5, 2], width=6)
    traced = tf.function(
        lambda f, remove: encoder(f, training=False, remove_padding=remove)["sequence_output"]
    )
    unpadded, padded = traced(features, True), traced(features, False)
    assert np.all(np.asarray(unpadded)[features["input_mask"] == 0] == 0)
    assert not np.all(np.asarray(padded)[features["input_mask"] == 0] == 0)
    np.testing.assert_array_equal(traced(features, True), unpadded)
    np.testing.assert_allclose(encoder(features)["sequence_output"], padded, atol=TOLERANCE)
    assert not hasattr(encoder, "remove_padding") and not hasattr(encoder, "padding_removed")


def test_a_task_model_hands_the_arguments_to_its_encoder_in_that_call_only():
    """A functional task model's call passes `remove_padding` on to its encoder
    (Keras' call-context arguments, as `training`); the next call, and another
    model on the same encoder, run padded."""
    features = ragged_batch([5, 2], width=6)
    encoder = random_encoder()
    tagger, classifier = BertTokenClassifier(encoder, 3), BertClassifier(encoder, 2)
    bias = tagger.get_layer("tagger_output").bias.numpy()
    padding = features["input_mask"] == 0
    packed = np.asarray(tagger(features, training=False, remove_padding=True))
    np.testing.assert_allclose(packed[padding], np.broadcast_to(bias, packed[padding].shape))
    padded = np.asarray(tagger(features, training=False))
    assert not np.allclose(padded[padding], packed[padding])
    assert_same_at_real_positions(padded, packed, features["input_mask"])
    np.testing.assert_allclose(
        classifier(features, training=False, remove_padding=True, read_positions=tf.zeros((2, 6))),
        classifier(features, training=False),
        atol=TOLERANCE,
    )


def test_read_positions_need_the_unpadded_call():
    with pytest.raises(ValueError, match="read_positions narrows the unpadded call"):
        random_encoder()(ragged_batch([2], width=3), read_positions=tf.zeros((1, 3), tf.int32))


def test_gradients_match_the_padded_model():
    """A loss on real positions only: the same gradient for every weight."""
    encoder = no_dropout_copy(random_encoder())
    # width 11: attention spans the first 8 positions alone (`TokenPacking.span`)
    features = ragged_batch([8, 3, 6], width=11, pair_from=4)
    weights = tf.constant(features["input_mask"], tf.float32)[..., None]
    _, padded = outputs_and_gradients(encoder, features, weights)
    _, unpadded = outputs_and_gradients(encoder, features, weights, remove_padding=True)
    assert_same_gradients(encoder.trainable_variables, unpadded, padded, atol=1e-4)


def test_packed_training_compiles_no_kernel_per_row_count():
    """XLA compiles its GELU once per input shape: on packed rows (as many as
    the batch's real tokens, a new count nearly every step) the training step
    must not use it, while padded rows (a fixed shape) still do."""
    from keras_bert.kernels import gelu

    encoder = random_encoder()

    def compiled_gelu_traces():
        return gelu._compiled_gelu.experimental_get_tracing_count()

    before = compiled_gelu_traces()
    for lengths in ([8, 3, 6], [5, 5, 2], [9, 1, 4]):  # 17, 12, 14 real tokens
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(
                encoder(ragged_batch(lengths, width=11), training=True, remove_padding=True)[
                    "pooled_output"
                ]
            )
        tape.gradient(loss, encoder.trainable_variables)
    assert compiled_gelu_traces() == before
    # Padded: the compiled one (at a width no other test takes: a shape new to its cache).
    encoder(ragged_batch([8, 3, 6], width=29), training=True)
    assert compiled_gelu_traces() > before


def test_dropout_keeps_the_rate_on_packed_rows():
    encoder = random_encoder()  # hidden dropout 0.1
    features = ragged_batch([12] * 8, width=12)
    noisy = encoder(features, training=True, remove_padding=True)["sequence_output"]
    clean = encoder(features, training=False)["sequence_output"]
    assert not np.allclose(noisy, clean, atol=1e-3)


@pytest.mark.parametrize("groups", [1, 3])
def test_heads_go_between_the_layouts_in_one_gather(groups):
    """`unpack_heads` is the padded layout's unpack, reshape and transpose at
    every real position; `pack_heads` brings attention's output back."""
    mask = np.array([[1, 1, 1, 0, 0], [0, 0, 0, 0, 0], [1, 0, 1, 1, 0], [1, 1, 1, 1, 1]], np.int32)
    packing = TokenPacking(tf.constant(mask))
    real = mask.astype(bool)
    real[:, 0] = True  # [CLS] always counts
    batch, length, heads, size = *mask.shape, 2, 3
    packed = tf.random.stateless_normal([int(real.sum()), groups * heads * size], seed=(0, 1))
    padded = np.reshape(packing.unpack(packed), (batch, length, groups, heads, size))
    expected = np.transpose(padded, (2, 0, 3, 1, 4))  # (k, B, N, T, D)
    split = np.asarray(packing.unpack_heads(packed, heads, groups))
    split = split if groups > 1 else split[None]
    assert split.shape == expected.shape
    at_real = real[None, :, None, :, None] & np.ones(expected.shape, bool)
    np.testing.assert_array_equal(split[at_real], expected[at_real])
    back = packing.pack_heads(tf.constant(expected[0]))
    np.testing.assert_array_equal(back, np.asarray(packed)[:, : heads * size])


@pytest.mark.parametrize("groups", [1, 3])
def test_the_head_gathers_gradients_are_gathers_back(groups):
    """Both gathers' gradients gather back from where each row went, not a
    scatter-add: equal to the plain gather's autodiff gradient wherever the
    padding places get a gradient of 0, as attention gives them."""
    mask = np.array([[1, 1, 1, 0, 0], [0, 0, 0, 0, 0], [1, 0, 1, 1, 0]], np.int32)
    packing = TokenPacking(tf.constant(mask))
    real = mask.astype(bool)
    real[:, 0] = True
    heads, size = 2, 3
    packed = tf.random.stateless_normal([int(real.sum()), groups * heads * size], seed=(2, 3))
    split_shape = ((groups,) if groups > 1 else ()) + (3, heads, int(packing.span), size)
    upstream = tf.random.stateless_normal(split_shape, seed=(4, 5)).numpy()
    at_padding = ~real[:, : int(packing.span)][:, None, :, None]  # (B, 1, S, 1)
    upstream *= ~at_padding  # attention's gradient at padding: 0
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(packed)
        ours = packing.unpack_heads(packed, heads, groups)
        index = packing._head_indices[("unpack", heads, groups)][0]
        theirs = tf.reshape(tf.gather(tf.reshape(packed, (-1, size)), index), ours.shape)
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_allclose(
        tape.gradient(ours, packed, output_gradients=upstream),
        tape.gradient(theirs, packed, output_gradients=upstream),
        atol=1e-6,
    )
    context = tf.random.stateless_normal((3, heads, int(packing.span), size), seed=(6, 7))
    upstream_rows = tf.random.stateless_normal((int(real.sum()), heads * size), seed=(8, 9))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(context)
        ours = packing.pack_heads(context)
        index = packing._head_indices[("pack", heads)][0]
        theirs = tf.reshape(tf.gather(tf.reshape(context, (-1, size)), index), ours.shape)
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(
        tape.gradient(ours, context, output_gradients=upstream_rows),
        tape.gradient(theirs, context, output_gradients=upstream_rows),
    )


def test_attention_spans_up_to_the_last_real_position():
    """Past the batch's last real position every row is padding: attention's
    layout stops there, for the key and the query side alike."""
    mask = np.array([[1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 0, 0], [0, 0, 0, 0, 0, 0]], np.int32)
    packing = TokenPacking(tf.constant(mask))
    assert int(packing.span) == 4
    np.testing.assert_array_equal(packing.attention_mask(tf.constant(mask)), mask[:, :4])
    packed = tf.reshape(tf.range(int(packing.count) * 6, dtype=tf.float32), (-1, 6))
    heads = packing.unpack_heads(packed, 2)  # (B, N, S, D)
    assert heads.shape == (3, 2, 4, 3)
    np.testing.assert_array_equal(packing.pack_heads(heads), packed)
    queries = TokenPacking(tf.constant([[1, 0, 0, 0, 0, 0]] * 3), span=packing.span)
    assert queries.unpack_heads(tf.zeros([3, 6]), 2).shape == (3, 2, 4, 3)


@pytest.mark.parametrize("attention", ["bidirectional", "left_to_right"])
def test_read_positions_give_the_padded_model_there_and_its_gradients(attention):
    """The last block on the read positions alone (training: the fast kernels):
    the padded model's outputs there and at [CLS], 0 elsewhere, and the same
    gradients for a loss that reads only those."""
    encoder = no_dropout_copy(random_encoder(attention))
    features = ragged_batch([8, 3, 6, 1], width=10, pair_from=4)  # attention spans 8
    read = np.zeros_like(features["input_mask"])
    read[0, [1, 2, 5]] = read[1, 2] = read[2, [1, 3, 4, 5]] = 1
    read[3, 4] = 1  # a padding position: not computed, as nothing real is there
    weights = tf.constant(read * features["input_mask"], tf.float32)[..., None]

    padded, padded_gradients = outputs_and_gradients(encoder, features, weights)
    unpadded, unpadded_gradients = outputs_and_gradients(
        encoder, features, weights, remove_padding=True, read_positions=tf.constant(read)
    )
    computed = (read * features["input_mask"]).astype(bool)
    computed[:, 0] = True  # the pooler's row: [CLS], or left to right the last real one
    if attention == "left_to_right":
        computed[np.arange(4), features["input_mask"].sum(axis=1) - 1] = True
    assert_same_at_real_positions(padded["sequence_output"], unpadded["sequence_output"], computed)
    assert np.all(np.asarray(unpadded["sequence_output"])[~computed] == 0)
    np.testing.assert_allclose(unpadded["pooled_output"], padded["pooled_output"], atol=TOLERANCE)
    for layer_padded, layer_unpadded in zip(
        padded["encoder_outputs"][:-1], unpadded["encoder_outputs"][:-1]
    ):
        assert_same_at_real_positions(layer_padded, layer_unpadded, features["input_mask"])
    assert_same_gradients(
        encoder.trainable_variables, unpadded_gradients, padded_gradients, atol=1e-4
    )


def test_classifier_and_tagger_steps_read_their_positions():
    features = ragged_batch([6, 2], width=6)
    classifier = BertClassifier(random_encoder(), 2)
    np.testing.assert_array_equal(
        classifier.read_positions({k: tf.constant(v) for k, v in features.items()}),
        np.zeros((2, 6)),
    )
    tagger = BertTokenClassifier(random_encoder(), 3)
    weights = tf.constant([[0, 1, 0, 1, 1, 0], [0, 1, 0, 0, 0, 0]], tf.float32)
    assert tagger.read_positions(features, None, weights) is weights
    assert tagger.read_positions(features, None, None) is None
    assert (
        BertTokenClassifier(random_encoder(), 3, head="bilstm").read_positions(
            features, None, weights
        )
        is None
    )
