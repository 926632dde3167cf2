"""Every keras_bert layer through `harness.run_layer_test`: output shapes, a
config round trip (get_config() is exactly the constructor arguments, and
from_config gives the same outputs with the same weights), mixed_float16 and
mixed_bfloat16, and one training step with finite gradients everywhere.

Legend: B = batch (2), T = sequence length (8), H = hidden size (32), V = vocabulary (40).
"""

import keras
import numpy as np
import pytest

from keras_bert.kernels.dense import FastDense
from keras_bert.kernels.dropout import FastDropout
from keras_bert.kernels.layer_norm import FastLayerNorm
from keras_bert.layers import AttentionMaskBias, PositionEmbedding, SelfAttention, TransformerBlock
from keras_bert.layers.pooling import WeightedLayerSum
from keras_bert.layers.pretraining_heads import MaskedLMHead, NextSentenceHead
from keras_bert.layers.sentence_pooling import MeanPool
from keras_bert.layers.task_heads import BiLSTMHead, SpanHead

from harness import run_layer_test, tiny_config

CONFIG = tiny_config()
B, T, H, V = 2, 8, CONFIG.hidden_size, CONFIG.vocab_size
RNG = np.random.default_rng(0)
HIDDEN = RNG.normal(size=(B, T, H)).astype("float32")  # (B, T, H)
# The second sequence has 3 padded positions: masks and biases are not all ones.
INPUT_MASK = np.array([[1] * T, [1] * (T - 3) + [0] * 3], "int32")  # (B, T)
PADDING_BIAS = np.asarray(AttentionMaskBias()(INPUT_MASK))  # (B, 1, 1, T)
CAUSAL_BIAS = np.asarray(AttentionMaskBias(causal=True)(INPUT_MASK))  # (B, 1, T, T)


def initializer():
    return keras.initializers.TruncatedNormal(stddev=CONFIG.initializer_range)


@pytest.mark.parametrize("mask_bias", [PADDING_BIAS, CAUSAL_BIAS], ids=["padding", "causal"])
def test_transformer_block(mask_bias):
    run_layer_test(
        TransformerBlock,
        dict(
            num_heads=CONFIG.num_attention_heads,
            intermediate_size=CONFIG.intermediate_size,
            activation="gelu",
            dropout=0.1,
            attention_dropout=0.1,
            initializer_range=CONFIG.initializer_range,
            layer_norm_epsilon=1e-12,
        ),
        dict(hidden=HIDDEN, mask_bias=mask_bias),
        (B, T, H),
        # attention: query, key, value, output (kernel + bias each); two
        # LayerNorms (gamma + beta); the feed-forward's two projections.
        expected_num_trainable_weights=16,
    )


def test_self_attention():
    run_layer_test(
        SelfAttention,
        dict(
            num_heads=CONFIG.num_attention_heads,
            head_size=CONFIG.head_size,
            dropout=0.1,
            initializer_range=CONFIG.initializer_range,
        ),
        dict(hidden=HIDDEN, mask_bias=PADDING_BIAS),
        (B, T, H),
        expected_num_trainable_weights=8,
    )


def test_position_embedding():
    run_layer_test(
        PositionEmbedding,
        dict(max_length=16, initializer=initializer()),
        HIDDEN,
        (1, T, H),
        expected_num_trainable_weights=1,
        # Only the input's length is read, never its values.
        check_input_gradients=False,
    )


@pytest.mark.parametrize("causal, shape", [(False, (B, 1, 1, T)), (True, (B, 1, T, T))])
def test_attention_mask_bias(causal, shape):
    layer = run_layer_test(
        AttentionMaskBias, dict(causal=causal), INPUT_MASK, shape, expected_num_trainable_weights=0
    )
    # -10000 at the padded keys (and, causal, at every later key), 0 elsewhere.
    bias = np.asarray(layer(INPUT_MASK))
    assert set(np.unique(bias)) == {-10000.0, 0.0}
    np.testing.assert_array_equal(bias[1, 0, 0, T - 3 :], -10000.0)


def test_span_head():
    run_layer_test(
        SpanHead,
        dict(initializer_range=CONFIG.initializer_range),
        HIDDEN,
        ((B, T), (B, T)),
        expected_num_trainable_weights=2,
    )


def test_bilstm_head():
    run_layer_test(
        BiLSTMHead,
        dict(units=4, num_layers=2),
        dict(sequence=HIDDEN, input_mask=INPUT_MASK),
        (B, T, 2 * 4),
        # Two BiLSTMs of two LSTMs, each a kernel, a recurrent kernel and a bias.
        expected_num_trainable_weights=12,
    )


def test_masked_lm_head():
    positions = np.array([[1, 4, 7], [0, 2, 3]], "int32")  # (B, P)
    run_layer_test(
        MaskedLMHead,
        dict(
            token_embedding=keras.layers.Embedding(V, H, name="token_embedding"),
            activation=CONFIG.hidden_act,
            initializer_range=CONFIG.initializer_range,
            layer_norm_epsilon=1e-12,
        ),
        dict(sequence_output=HIDDEN, masked_lm_positions=positions),
        (B, 3, V),
        # The transform (kernel, bias), its LayerNorm, the output bias, and the
        # tied token table, which the head trains too.
        expected_num_trainable_weights=6,
        expected_output_dtype="float32",
    )  # logits: the softmax over V wants 32 bits


def test_next_sentence_head():
    run_layer_test(
        NextSentenceHead,
        dict(initializer_range=CONFIG.initializer_range),
        HIDDEN[:, 0],
        (B, 2),
        expected_num_trainable_weights=2,
        expected_output_dtype="float32",
    )


def test_mean_pool():
    layer = run_layer_test(
        MeanPool,
        {},
        dict(sequence_output=HIDDEN, input_mask=INPUT_MASK),
        (B, H),
        expected_num_trainable_weights=0,
    )
    pooled = np.asarray(layer(HIDDEN, INPUT_MASK))
    mask = INPUT_MASK[..., None]
    mean = (HIDDEN * mask).sum(axis=1) / mask.sum(axis=1)
    np.testing.assert_allclose(
        pooled, mean / np.linalg.norm(mean, axis=-1, keepdims=True), rtol=1e-5, atol=1e-6
    )


def test_weighted_layer_sum():
    layers = [RNG.normal(size=(B, T, H)).astype("float32") for _ in range(3)]
    layer = run_layer_test(
        WeightedLayerSum, {}, layers, (B, T, H), expected_num_trainable_weights=1
    )
    # The weights start equal: the plain mean of the layers.
    np.testing.assert_allclose(
        np.asarray(layer(layers)), np.mean(layers, axis=0), rtol=1e-5, atol=1e-7
    )  # float32 rounding near 0


def test_fast_dense():
    run_layer_test(
        FastDense,
        dict(units=16, activation="relu", kernel_initializer=initializer()),
        HIDDEN,
        (B, T, 16),
        expected_num_trainable_weights=2,
    )


def test_fast_dropout():
    run_layer_test(
        FastDropout, dict(rate=0.25, seed=1), HIDDEN, (B, T, H), expected_num_trainable_weights=0
    )


def test_fast_layer_norm():
    run_layer_test(
        FastLayerNorm, dict(epsilon=1e-12), HIDDEN, (B, T, H), expected_num_trainable_weights=2
    )
