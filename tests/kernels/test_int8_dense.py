"""The int8 product on oneDNN's kernel (`keras_bert.kernels.int8_dense`) against a
numpy reference of the same scheme, and the quantized `FastDense` that runs it.

Reference: activations to 63 levels each side of zero of each row's largest
magnitude, x ~ step * x_s (x_s in -63 ... 63; the kernel sees x_s + 64);
weights to 127 levels of each column's largest magnitude, w ~ w_q * absmax / 127;
result (step * x_s) (w_q * absmax / 127) + b, in float64. The levels are
computed with the same float32 steps as the layer (x * (1 / step), rounded half
up), so a value on a rounding boundary falls the same way and the comparison is
tight.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert.kernels import int8_dense
from keras_bert.kernels.dense import FastDense
from keras_bert.kernels.int8_dense import column_sums, int8_kernel_available, int8_project

from harness import running_plain_ops

pytestmark = pytest.mark.skipif(
    not int8_kernel_available(), reason="this TensorFlow lacks oneDNN's int8 kernel"
)


def reference_levels(rows):
    rows = rows.astype(np.float32)
    step = np.abs(rows).max(axis=1, keepdims=True) / np.float32(63.0)  # (R, 1)
    levels = np.floor(rows * (np.float32(1.0) / step) + np.float32(64.5)) - 64.0
    return levels.astype(np.float64), step.astype(np.float64)


def reference_weights(kernel):
    absmax = np.abs(kernel).max(axis=0)  # (O,)
    levels = np.round(kernel / absmax * 127.0)
    return levels, absmax / 127.0


def reference_product(rows, kernel, bias):
    x_s, step = reference_levels(rows)
    w_q, w_step = reference_weights(kernel.astype(np.float64))
    return (step * x_s) @ (w_q * w_step) + bias


def test_hand_computed_product():
    # rows [-1, 0, 3]: step 3 / 63, levels -21, 0, 63
    rows = tf.constant([[-1.0, 0.0, 3.0]])
    kernel_q = tf.constant([[2, 0], [1, -1], [-1, 127]], tf.int8)
    kernel_scale = tf.constant([1.0, 0.5])  # w = q / scale: [[2, 0], [1, -2], [-1, 254]]
    bias = tf.constant([0.5, -1.0])
    got = int8_project(
        rows, kernel_q, kernel_scale, tf.constant(column_sums(kernel_q.numpy())), bias
    ).numpy()
    x = 3.0 / 63.0 * np.array([-21.0, 0.0, 63.0])  # [-1, 0, 3]
    expected = [x @ [2, 1, -1] + 0.5, x @ [0, -2, 254] - 1.0]
    np.testing.assert_allclose(got[0], expected, rtol=1e-6)


@pytest.mark.parametrize("rows_count, inputs, units", [(1, 16, 8), (37, 64, 96), (300, 128, 40)])
def test_product_equals_the_numpy_reference(rows_count, inputs, units):
    rng = np.random.default_rng(rows_count)
    rows = rng.normal(size=(rows_count, inputs)).astype(np.float32)
    rows[:, 3] *= 12.0  # an outlier feature, as after BERT's LayerNorms
    kernel = (rng.normal(size=(inputs, units)) * 0.05).astype(np.float32)
    bias = rng.normal(size=units).astype(np.float32)
    w_q, w_step = reference_weights(kernel.astype(np.float64))
    got = int8_project(
        tf.constant(rows),
        tf.constant(w_q.astype(np.int8)),
        tf.constant((1.0 / w_step).astype(np.float32)),
        tf.constant(column_sums(w_q.astype(np.int8))),
        tf.constant(bias),
    )
    expected = reference_product(rows, kernel, bias)
    np.testing.assert_allclose(got.numpy(), expected, atol=1e-5 * np.abs(expected).max())
    # and the quantization error itself is what 63 levels each side allow
    exact = rows.astype(np.float64) @ kernel + bias
    assert np.abs(got.numpy() - exact).max() < 0.05 * np.abs(exact).max()


def test_a_rows_answer_does_not_depend_on_the_other_rows():
    # Each row (a token) on its own range: an outlier token elsewhere in the
    # request neither changes nor coarsens this one's levels.
    rng = np.random.default_rng(7)
    rows = rng.normal(size=(5, 32)).astype(np.float32)
    w_q = rng.integers(-127, 128, size=(32, 16)).astype(np.int8)
    arguments = (
        tf.constant(w_q),
        tf.constant(np.full(16, 200.0, np.float32)),
        tf.constant(column_sums(w_q)),
    )
    alone = int8_project(tf.constant(rows[:1]), *arguments).numpy()
    rows[1:] *= 1000.0
    beside_outliers = int8_project(tf.constant(rows), *arguments).numpy()[:1]
    np.testing.assert_allclose(beside_outliers, alone, rtol=1e-6)
    exact = rows[:1].astype(np.float64) @ (w_q / 200.0)
    assert np.abs(alone - exact).max() < 0.02 * np.abs(exact).max()


def test_constant_rows():
    rows = tf.fill((4, 8), 0.75)  # every level 63: x = 63 * (0.75 / 63)
    kernel_q = tf.constant(np.arange(-8, 8).reshape(8, 2), tf.int8)
    got = int8_project(
        rows, kernel_q, tf.constant([2.0, 4.0]), tf.constant(column_sums(kernel_q.numpy()))
    )
    expected = 0.75 * np.arange(-8, 8).reshape(8, 2).sum(axis=0) / [2.0, 4.0]
    np.testing.assert_allclose(got.numpy(), np.tile(expected, (4, 1)), rtol=1e-6)


def test_zero_rows_give_the_bias_exactly():
    kernel_q = tf.constant(np.arange(-8, 8).reshape(8, 2), tf.int8)
    got = int8_project(
        tf.zeros((3, 8)),  # every level the zero point: x = 0, no step of 0 / 0
        kernel_q,
        tf.constant([2.0, 4.0]),
        tf.constant(column_sums(kernel_q.numpy())),
        tf.constant([0.25, -1.5]),
    )
    np.testing.assert_array_equal(got.numpy(), np.tile([0.25, -1.5], (3, 1)))


def quantized_dense(units=24, activation=None):
    keras.utils.set_random_seed(3)
    layer = FastDense(units, activation=activation)
    layer.build((None, None, 40))
    kernel = layer.kernel.numpy()
    layer.bias.assign(np.linspace(-1.0, 1.0, units))
    layer.quantize("int8", type_check=False)
    return layer, kernel


def test_quantized_fast_dense_runs_the_kernel_and_equals_the_reference():
    layer, kernel = quantized_dense(activation="relu")
    np.testing.assert_array_equal(layer._kernel.numpy(), reference_weights(kernel)[0])
    np.testing.assert_array_equal(
        layer.kernel_column_sums.numpy(), reference_weights(kernel)[0].sum(axis=0)
    )
    inputs = np.random.default_rng(0).normal(size=(3, 5, 40)).astype(np.float32)
    expected = np.maximum(
        reference_product(inputs.reshape(-1, 40), kernel, np.linspace(-1.0, 1.0, 24)), 0.0
    ).reshape(3, 5, 24)
    np.testing.assert_allclose(layer(inputs).numpy(), expected, atol=1e-5)
    graph = tf.function(layer).get_concrete_function(tf.TensorSpec((None, None, 40))).graph
    assert "QuantizedMatMulWithBiasAndDequantize" in {op.type for op in graph.get_operations()}


def test_keras_int8_path_where_the_kernel_is_not_used(monkeypatch):
    """Training (the kernel has no gradient), plain kernels, or a TensorFlow
    without the kernel: Keras' own int8 product, per-row activations."""
    layer, kernel = quantized_dense()
    inputs = tf.constant(np.random.default_rng(1).normal(size=(6, 40)).astype(np.float32))
    exact = inputs.numpy() @ kernel + np.linspace(-1.0, 1.0, 24)
    fast = layer(inputs).numpy()
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        trained = layer(inputs, training=True)
    assert tape.gradient(trained, inputs) is not None
    with running_plain_ops(layer):
        plain = layer(inputs).numpy()
    monkeypatch.setattr(int8_dense, "int8_kernel_available", lambda: False)
    monkeypatch.setattr("keras_bert.kernels.dense.int8_kernel_available", lambda: False)
    missing = layer(inputs).numpy()
    np.testing.assert_allclose(trained.numpy(), plain, atol=1e-6)
    np.testing.assert_allclose(missing, plain, atol=1e-6)
    assert np.abs(plain - fast).max() > 0  # the two schemes do differ
    for outputs in (fast, plain):
        assert np.abs(outputs - exact).max() < 0.03 * np.abs(exact).max()


def test_column_sums_are_saved_and_loaded(tmp_path):
    layer, _ = quantized_dense()
    inputs = keras.Input((7, 40))
    model = keras.Model(inputs, layer(inputs))
    model.save(tmp_path / "int8.keras")
    loaded = keras.models.load_model(tmp_path / "int8.keras")
    loaded_layer = loaded.layers[-1]
    assert loaded_layer.quantization_mode == "int8"
    np.testing.assert_array_equal(
        loaded_layer.kernel_column_sums.numpy(), layer.kernel_column_sums.numpy()
    )
    x = np.random.default_rng(2).normal(size=(2, 7, 40)).astype(np.float32)
    np.testing.assert_array_equal(loaded(x).numpy(), model(x).numpy())
