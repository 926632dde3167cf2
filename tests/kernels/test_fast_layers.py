"""Layers written for speed: the XLA-compiled GELU (training), the GELU that
fuses into its product (inference), the 16-bit dropout and the Transformer
block's fused query / key / value projection. Each is checked against plain
TensorFlow / Keras ops with autodiff, or float64."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert.kernels.dropout import FastDropout, dropout_16_bit
from keras_bert.kernels.gelu import gelu_exact, gelu_exact_compiled, gelu_exact_fused
from keras_bert.layers import TransformerBlock

from harness import assert_same_values_and_gradients


def _values_and_gradients(fn, x, upstream, jit_compile=False):
    @tf.function(jit_compile=jit_compile)
    def run(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(x)
        return y, tape.gradient(y, x, output_gradients=tf.cast(upstream, y.dtype))

    return run(x)


@pytest.mark.parametrize("gelu", [gelu_exact, gelu_exact_compiled])
@pytest.mark.parametrize(
    "dtype,jit_compile", [("float32", False), ("float32", True), ("bfloat16", False)]
)
def test_gelu_equals_keras_exact_gelu_with_autodiff(gelu, dtype, jit_compile):
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(0.0, 3.0, size=500), [0.0, -9.0, 9.0, -40.0, 40.0]])
    x = tf.cast(x, dtype)
    upstream = rng.normal(size=x.shape)
    ours = _values_and_gradients(gelu, x, upstream, jit_compile)
    theirs = _values_and_gradients(
        lambda v: keras.activations.gelu(v, approximate=False), x, upstream, jit_compile
    )
    tolerance = 1e-6 if dtype == "float32" else 1e-2
    assert_same_values_and_gradients(ours, theirs, ("gelu", "d_x"), tolerance)


def test_bfloat16_gelu_is_the_exact_value_rounded_once():
    """In bfloat16 `gelu_exact` computes in float32 (TensorFlow's CPU Erfc has
    no vectorised bfloat16 kernel): value and derivative are then the float64
    ones rounded to bfloat16, within one bfloat16 step (2^-8 relative), where
    a chain of bfloat16 ops drifts further."""
    rng = np.random.default_rng(1)
    x = tf.cast(np.concatenate([rng.normal(0.0, 3.0, size=500), [0.0, -9.0, 9.0]]), "bfloat16")
    values, gradients = _values_and_gradients(gelu_exact, x, np.ones(x.shape))
    assert values.dtype == gradients.dtype == tf.bfloat16
    exact_x = tf.cast(x, tf.float64).numpy()
    erf = np.vectorize(math.erf)
    cdf = 0.5 * (1.0 + erf(exact_x / math.sqrt(2.0)))
    pdf = np.exp(-0.5 * exact_x**2) / math.sqrt(2.0 * math.pi)
    for ours, exact in ((values, exact_x * cdf), (gradients, cdf + exact_x * pdf)):
        ours = tf.cast(ours, tf.float64).numpy()
        np.testing.assert_allclose(ours, exact, rtol=2.0**-8, atol=1e-6)


def test_fused_gelu_after_its_product_is_the_exact_gelu():
    """In a tf.function grappler folds MatMul + BiasAdd + this GELU into one
    oneDNN product (where TensorFlow has oneDNN): that kernel's values, and the
    unfused ops' (eagerly), against the float64 exact GELU."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 32)).astype(np.float32)
    kernel = rng.normal(0.0, 0.5, size=(32, 48)).astype(np.float32)
    bias = rng.normal(size=48).astype(np.float32)
    pre = x.astype(np.float64) @ kernel + bias  # N(0, ~2.9): both tails reached
    erf = np.vectorize(math.erf)
    expected = pre * 0.5 * (1.0 + erf(pre / math.sqrt(2.0)))

    def layer(x):
        return gelu_exact_fused(tf.nn.bias_add(tf.matmul(x, kernel), bias))

    for outputs in (layer(tf.constant(x)), tf.function(layer)(tf.constant(x))):
        np.testing.assert_allclose(outputs.numpy(), expected, rtol=1e-5, atol=2e-6)
    # The derivative, by autodiff, is the exact GELU's too.
    values = tf.constant(pre.astype(np.float32).ravel()[:500])
    ours = _values_and_gradients(gelu_exact_fused, values, np.ones(500))
    theirs = _values_and_gradients(
        lambda v: keras.activations.gelu(v, approximate=False), values, np.ones(500)
    )
    for mine, reference in zip(ours, theirs):
        np.testing.assert_allclose(mine.numpy(), reference.numpy(), rtol=1e-5, atol=2e-6)


def test_dropout_16_bit_drops_at_the_rate_and_scales_the_rest():
    x = tf.ones((256, 1024))
    dropped_levels = round(0.1 * 65536)  # 6554: a rate of 0.1000061
    y, d_x = _values_and_gradients(
        lambda v: dropout_16_bit(v, dropped_levels, tf.constant([7, 11])), x, tf.ones_like(x)
    )
    y = y.numpy()
    scale = 65536 / (65536 - dropped_levels)
    assert set(np.unique(y)) == {0.0, np.float32(scale)}
    # 262,144 Bernoulli(0.1) draws: standard deviation 0.00059.
    assert abs((y == 0).mean() - dropped_levels / 65536) < 0.003
    np.testing.assert_array_equal(d_x, y)  # the gradient is the same mask, same scale
    # No pattern between the two halves of a 32-bit draw, nor along rows.
    assert abs(np.corrcoef((y[:, 0::2] == 0).ravel(), (y[:, 1::2] == 0).ravel())[0, 1]) < 0.01
    # Odd sizes: the last draw's second half is unused.
    odd = dropout_16_bit(tf.ones((3, 5, 7)), dropped_levels, tf.constant([1, 2]))
    assert odd.shape == (3, 5, 7)


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_dropout_layer(policy):
    layer = FastDropout(0.25, dtype=policy, seed=3)
    x = tf.ones((64, 256))
    np.testing.assert_array_equal(layer(x, training=False), x)
    first, second = layer(x, training=True), layer(x, training=True)
    assert first.dtype == layer.compute_dtype
    assert not np.array_equal(first, second)  # a new seed per call
    assert abs(float(tf.reduce_mean(tf.cast(first == 0, tf.float32))) - 0.25) < 0.02
    # Same seed, same masks; also compiled.
    again = FastDropout(0.25, dtype=policy, seed=3)
    np.testing.assert_array_equal(again(x, training=True), first)
    compiled_layer = FastDropout(0.25, dtype=policy, seed=3)
    compiled = tf.function(lambda v: compiled_layer(v, training=True), jit_compile=True)
    np.testing.assert_array_equal(compiled(x), first)
    clone = FastDropout.from_config(layer.get_config())
    assert (clone.rate, clone.seed) == (0.25, 3)


def test_dropout_layer_keeps_keras_paths():
    x = tf.ones((8, 32))
    np.testing.assert_array_equal(FastDropout(0.0)(x, training=True), x)
    np.testing.assert_array_equal(FastDropout(1.0)(x, training=True), tf.zeros_like(x))
    rows = FastDropout(0.5, noise_shape=(8, 1), seed=1)(x, training=True).numpy()
    assert all(len(set(row)) == 1 for row in rows)  # Keras' noise shape: whole rows


def _reference_block(block, hidden, mask_bias, query_positions=None):
    """BERT's post-LN block from plain TensorFlow ops and `keras.activations.gelu`."""
    attention = block.attention
    heads, size = attention.num_heads, attention.head_size

    def dense(layer, x):
        return tf.matmul(x, layer.kernel) + layer.bias

    def split(x):  # (B, T, H) -> (B, N, T, D)
        return tf.transpose(tf.reshape(x, (x.shape[0], x.shape[1], heads, size)), (0, 2, 1, 3))

    def layer_norm(layer, x):
        mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
        return (x - mean) / tf.sqrt(variance + layer.epsilon) * layer.gamma + layer.beta

    queries = (
        hidden if query_positions is None else tf.gather(hidden, query_positions, batch_dims=1)
    )
    scores = tf.matmul(
        split(dense(attention.query, queries)),
        split(dense(attention.key, hidden)),
        transpose_b=True,
    ) / math.sqrt(size)
    probs = tf.nn.softmax(scores + mask_bias)
    context = tf.transpose(tf.matmul(probs, split(dense(attention.value, hidden))), (0, 2, 1, 3))
    context = tf.reshape(context, (context.shape[0], context.shape[1], heads * size))
    attended = layer_norm(
        block.attention_layer_norm, queries + dense(attention.attention_output, context)
    )
    intermediate = keras.activations.gelu(dense(block.intermediate, attended), approximate=False)
    return layer_norm(block.output_layer_norm, attended + dense(block.ffn_output, intermediate))


# Head size 16 (a scale of 1/4, exact) and 12 (1/sqrt(12), rounded).
@pytest.mark.parametrize("hidden_size,heads", [(32, 2), (36, 3)])
@pytest.mark.parametrize("with_query_positions", [False, True])
@pytest.mark.parametrize("fast", [True, False], ids=["fast_kernels", "plain_kernels"])
def test_training_block_equals_plain_tensorflow(hidden_size, heads, with_query_positions, fast):
    """Both of the block's paths (the fast kernels and the plain Keras ops that
    `fast_kernels=False` selects) against BERT's block written from TensorFlow ops."""
    rng = np.random.default_rng(0)
    hidden = tf.constant(rng.normal(size=(3, 10, hidden_size)), tf.float32)
    mask_bias = tf.constant(
        np.where(np.arange(10) < [[10], [7], [4]], 0.0, -10000.0)[:, None, None, :], tf.float32
    )  # (B, 1, 1, T)
    query_positions = (
        tf.constant([[0, 2, 5], [0, 1, 6], [0, 3, 3]]) if with_query_positions else None
    )
    block = TransformerBlock(
        heads,
        2 * hidden_size,
        dropout=0.0,
        attention_dropout=0.0,
        initializer_range=0.5,
        fast_kernels=fast,
    )
    block.build(hidden.shape)
    for variable in block.trainable_variables:  # biases and LayerNorm weights away from 0 / 1
        variable.assign(variable + rng.normal(0.0, 0.1, size=variable.shape))
    upstream = rng.normal(size=(3, 3 if with_query_positions else 10, hidden_size))

    def values_and_gradients(forward):
        with tf.GradientTape() as tape:
            tape.watch(hidden)
            output = forward()
            loss = tf.reduce_sum(output * upstream)
        return [output] + tape.gradient(loss, [hidden] + block.trainable_variables)

    ours = values_and_gradients(
        lambda: block(hidden, mask_bias, query_positions=query_positions, training=True)
    )
    theirs = values_and_gradients(
        lambda: _reference_block(block, hidden, mask_bias, query_positions)
    )
    names = ["output", "d_hidden"] + [v.path for v in block.trainable_variables]
    for mine, reference, name in zip(ours, theirs, names):
        scale = max(float(tf.reduce_max(tf.abs(reference))), 1.0)  # sums cancel: relative to it
        np.testing.assert_allclose(mine, reference, rtol=1e-4, atol=1e-5 * scale, err_msg=name)


def test_attention_with_lora_projections_takes_keras_path():
    # LoRA (or quantized) projections cannot be concatenated into one kernel:
    # they run one by one through Keras' Dense, with the same result.
    hidden = tf.constant(np.random.default_rng(2).normal(size=(2, 6, 16)), tf.float32)
    mask_bias = tf.zeros((2, 1, 1, 6))
    block = TransformerBlock(2, 32, dropout=0.0, attention_dropout=0.0)
    block.build(hidden.shape)
    fused = block(hidden, mask_bias)
    for projection in (block.attention.query, block.attention.key, block.attention.value):
        projection.enable_lora(2)  # lora_b starts at zero: same function
    np.testing.assert_allclose(block(hidden, mask_bias), fused, rtol=1e-5, atol=1e-6)
    assert len(block.trainable_variables) > 0 and any(
        "lora" in v.path for v in block.trainable_variables
    )
