"""The bias gradient under mixed precision is the float32 sum of the upstream
rows, rounded once (keras_bert.kernels.bias): TensorFlow's CPU BiasAdd sums a
bfloat16 gradient in bfloat16 and loses most of a long batch's rows."""

import numpy as np
import pytest
import tensorflow as tf

from keras_bert.kernels.bias import bias_add
from keras_bert.kernels.dense import FastDense

from harness import tolerance

ROWS, WIDTH = 4096, 8  # batch 64 x length 64, the quickstart's fine-tuning batch


def _upstream(dtype):
    # Positive-mean rows, as a bias gradient's are: the running sum grows
    # large, and each new row must still count.
    values = np.random.default_rng(0).normal(0.5, 1.0, (ROWS, WIDTH)).astype(np.float32)
    return tf.cast(values, dtype)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_the_bias_gradient_is_the_float32_sum_rounded_once(dtype):
    upstream = _upstream(dtype)
    outputs = tf.zeros((ROWS, WIDTH), dtype)
    bias = tf.zeros((WIDTH,), tf.float32)
    with tf.GradientTape() as tape:
        tape.watch(bias)
        result = bias_add(outputs, bias)
    gradient = tape.gradient(result, bias, output_gradients=upstream)
    # The oracle: NumPy's float64 sum of the very values the layer received.
    expected = tf.cast(upstream, tf.float64).numpy().sum(axis=0)
    np.testing.assert_allclose(gradient.numpy(), expected, rtol=tolerance(1, dtype))


def test_float32_keeps_tensorflow_s_own_bias_add():
    outputs = tf.random.stateless_normal((16, WIDTH), seed=(1, 2))
    bias = tf.range(WIDTH, dtype=tf.float32)
    np.testing.assert_array_equal(bias_add(outputs, bias), tf.nn.bias_add(outputs, bias))


def test_a_mixed_bfloat16_dense_layer_gets_the_float32_bias_gradient():
    layer = FastDense(WIDTH, dtype="mixed_bfloat16")
    inputs = tf.random.stateless_normal((ROWS, 4), seed=(3, 4))
    layer.build(inputs.shape)
    upstream = _upstream("bfloat16")
    with tf.GradientTape() as tape:
        outputs = layer(inputs)
    gradient = tape.gradient(outputs, layer.bias, output_gradients=upstream)
    expected = tf.cast(upstream, tf.float64).numpy().sum(axis=0)
    np.testing.assert_allclose(
        tf.convert_to_tensor(gradient).numpy(), expected, rtol=tolerance(1, "bfloat16")
    )
