"""Hand-written gradients that exist for speed: the FastDense layer's kernel
gradient, the masked-LM cross-entropy and the masked-LM output layer fused
with it. Each must give the values and gradients of the TensorFlow / Keras
ops it replaces (autodiff through `keras.layers.Dense`, matmul + bias +
`tf.nn.sparse_softmax_cross_entropy_with_logits`), in float32, mixed
precision and under XLA."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert.kernels.dense import FastDense
from keras_bert.kernels.masked_lm_loss import (
    cross_entropy_and_prediction,
    tied_output_cross_entropy,
)


def _dense_values_and_gradients(layer, x, upstream, jit_compile):
    @tf.function(jit_compile=jit_compile)
    def run(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x)
            loss = tf.reduce_sum(tf.cast(y, tf.float32) * upstream)
        return [y] + tape.gradient(loss, [x, layer.kernel, layer.bias])

    return run(x)


# The two transposed-copy layouts (bert-mini's feed-forward output and
# intermediate kernels), the plain product (other widths, square), 2-D input.
@pytest.mark.parametrize(
    "x_shape,units",
    [((2, 3, 1024), 256), ((2, 3, 256), 1024), ((3, 7, 24), 8), ((3, 7, 8), 8), ((5, 12), 4)],
)
@pytest.mark.parametrize(
    "policy,jit_compile", [("float32", False), ("float32", True), ("mixed_bfloat16", False)]
)
def test_dense_equals_keras_dense(x_shape, units, policy, jit_compile):
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=x_shape), tf.float32)
    upstream = tf.constant(rng.normal(size=x_shape[:-1] + (units,)), tf.float32)
    kernel, bias = rng.normal(size=(x_shape[-1], units)), rng.normal(size=units)
    results = []
    for cls in (FastDense, keras.layers.Dense):
        layer = cls(units, activation="tanh", dtype=policy)
        layer.build(x.shape)
        layer.set_weights([kernel, bias])
        results.append(
            _dense_values_and_gradients(
                layer, tf.cast(x, layer.compute_dtype), upstream, jit_compile
            )
        )
    names = ("output", "d_x", "d_kernel", "d_bias")
    for ours, theirs, name in zip(*results, names):
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, name
    if policy == "float32":
        for ours, theirs, name in zip(*results, names):
            np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5, err_msg=name)
        return
    # bfloat16 keeps 8 bits of mantissa, and which products round where depends on the
    # CPU's kernels (oneDNN's bfloat16 matmul on AVX-512 CPUs, Eigen's elsewhere): the
    # two layers can differ by more than either errs. So each is held to the exact
    # values of its bfloat16 inputs: ours must be as accurate as Keras' own layer, or
    # within four bfloat16 steps of the largest value (2^-6 of it; a wrong gradient is
    # off by its whole size).
    exact = _dense_tanh_float64(x, kernel, bias, upstream)
    for ours, theirs, reference, name in zip(*results, exact, names):
        ours_error, keras_error = (
            np.abs(tf.cast(t, tf.float64).numpy() - reference).max() for t in (ours, theirs)
        )
        bound = max(1.25 * keras_error, 2**-6 * np.abs(reference).max())
        assert ours_error <= bound, (name, ours_error, keras_error)


def _dense_tanh_float64(x, kernel, bias, upstream):
    """tanh(x W + b) and the gradients of sum(y * upstream), in float64, from
    the bfloat16-rounded inputs the layers compute with."""
    x, kernel, bias = (
        tf.cast(tf.cast(t, tf.bfloat16), tf.float64).numpy() for t in (x, kernel, bias)
    )
    y = np.tanh(x @ kernel + bias)
    d_z = upstream.numpy() * (1 - y**2)
    rows, d_rows = x.reshape(-1, x.shape[-1]), d_z.reshape(-1, d_z.shape[-1])
    return y, d_z @ kernel.T, rows.T @ d_rows, d_rows.sum(axis=0)


def test_dense_config_round_trip_and_keras_paths():
    layer = FastDense(6, activation="gelu", use_bias=False, name="projection")
    clone = FastDense.from_config(layer.get_config())
    assert (clone.units, clone.use_bias, clone.name) == (6, False, "projection")
    x = tf.constant(np.random.default_rng(1).normal(size=(2, 3, 4)), tf.float32)
    clone.build(x.shape)
    reference = keras.layers.Dense(6, activation="gelu", use_bias=False)
    reference.build(x.shape)
    reference.set_weights(clone.get_weights())
    np.testing.assert_allclose(clone(x), reference(x), rtol=1e-5, atol=1e-6)
    # LoRA goes through Keras' own call, with its extra weights.
    clone.enable_lora(2)
    np.testing.assert_allclose(clone(x), reference(x), rtol=1e-5, atol=1e-6)  # lora_b is zeros


def _cross_entropy_values_and_gradients(fn, logits, labels, weights, jit_compile):
    @tf.function(jit_compile=jit_compile)
    def run(logits):
        with tf.GradientTape() as tape:
            tape.watch(logits)
            loss, predicted = fn(logits, labels)
            total = tf.reduce_sum(loss * weights)
        return loss, predicted, tape.gradient(total, logits)

    return run(logits)


def _reference_cross_entropy(logits, labels):
    return (
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits),
        tf.argmax(logits, axis=-1, output_type=tf.int32),
    )


@pytest.mark.parametrize("jit_compile", [False, True])
def test_cross_entropy_equals_tensorflow_op(jit_compile):
    rng = np.random.default_rng(0)
    logits = rng.normal(0.0, 4.0, size=(3, 5, 97)).astype("float32")
    labels = rng.integers(0, 97, size=(3, 5)).astype("int32")
    # Labels far below the best logit: p(label) underflows float32 (loss > 87).
    logits[0, 0, labels[0, 0]] = -300.0
    logits[0, 1, :] = 0.0
    logits[0, 1, 7] = 250.0
    labels[0, 2] = int(np.argmax(logits[0, 2]))  # the label is the prediction
    weights = rng.uniform(size=(3, 5)).astype("float32")
    ours = _cross_entropy_values_and_gradients(
        cross_entropy_and_prediction,
        tf.constant(logits),
        tf.constant(labels),
        tf.constant(weights),
        jit_compile,
    )
    theirs = _cross_entropy_values_and_gradients(
        _reference_cross_entropy,
        tf.constant(logits),
        tf.constant(labels),
        tf.constant(weights),
        jit_compile,
    )
    assert float(theirs[0][0, 0]) > 200 and float(theirs[0][0, 1]) > 200
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-5, atol=1e-5, err_msg="loss")
    np.testing.assert_array_equal(ours[1], theirs[1], err_msg="prediction")
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-5, atol=1e-6, err_msg="d_logits")


def test_cross_entropy_rejects_a_label_outside_the_vocabulary():
    logits = tf.zeros((2, 10))
    for bad in (10, -1):
        with pytest.raises(tf.errors.InvalidArgumentError, match="masked_lm_ids holds"):
            cross_entropy_and_prediction(logits, tf.constant([3, bad]), labels_name="masked_lm_ids")


def _tied_output_values_and_gradients(fused, hidden, table, bias, labels, weights, jit_compile):
    """Loss, prediction and the gradients for hidden, table and bias; with
    `fused` False, through the logits and TensorFlow's cross-entropy op."""

    @tf.function(jit_compile=jit_compile)
    def run(hidden, table, bias):
        with tf.GradientTape() as tape:
            tape.watch([hidden, table, bias])
            compute_table = tf.cast(table, hidden.dtype)  # float32 weights, 16-bit compute
            if fused:
                loss, predicted = tied_output_cross_entropy(hidden, compute_table, bias, labels)
            else:
                logits = tf.cast(tf.matmul(hidden, compute_table, transpose_b=True), tf.float32)
                loss, predicted = _reference_cross_entropy(logits + bias, labels)
            total = tf.reduce_sum(loss * weights)
        return [loss, predicted] + tape.gradient(total, [hidden, table, bias])

    return run(hidden, table, bias)


@pytest.mark.parametrize(
    "dtype,jit_compile",
    [("float32", False), ("float32", True), ("bfloat16", False), ("float16", False)],
)
def test_tied_output_cross_entropy_equals_logits_then_tensorflow_op(dtype, jit_compile):
    rng = np.random.default_rng(0)
    rows, hidden_size, vocabulary = 12, 16, 97
    hidden = rng.normal(size=(rows, hidden_size)).astype("float32")
    table = rng.normal(0.0, 0.5, size=(vocabulary, hidden_size)).astype("float32")
    bias = rng.normal(size=vocabulary).astype("float32")
    labels = rng.integers(0, vocabulary, size=rows).astype("int32")
    labels[3] = labels[4] = labels[5]  # one label row gets three scatters
    labels[6] = int(np.argmax(hidden[6] @ table.T + bias))  # the label is the prediction
    # Weights as the pretrainer's (a padded prediction weighs 0); float16
    # scaled as by a loss-scale optimizer.
    weights = rng.uniform(size=rows).astype("float32") * (1024.0 if dtype == "float16" else 1.0)
    weights[7] = 0.0
    args = (
        tf.cast(hidden, dtype),
        tf.constant(table),
        tf.constant(bias),
        tf.constant(labels),
        tf.constant(weights),
        jit_compile,
    )
    ours = _tied_output_values_and_gradients(True, *args)
    theirs = _tied_output_values_and_gradients(False, *args)
    tolerance = {"float32": 1e-5, "bfloat16": 2e-2, "float16": 2e-3}[dtype]
    names = ("loss", "prediction", "d_hidden", "d_table", "d_bias")
    np.testing.assert_array_equal(ours[1], theirs[1], err_msg="prediction")
    for mine, reference, name in zip(ours, theirs, names):
        assert mine.dtype == reference.dtype and mine.shape == reference.shape, name
        scale = float(tf.reduce_max(tf.abs(tf.cast(reference, tf.float32))))
        np.testing.assert_allclose(
            tf.cast(mine, tf.float32),
            tf.cast(reference, tf.float32),
            rtol=tolerance,
            atol=tolerance * max(scale, 1.0),
            err_msg=name,
        )


def test_tied_output_cross_entropy_rejects_a_label_outside_the_vocabulary():
    hidden, table, bias = tf.zeros((2, 4)), tf.zeros((10, 4)), tf.zeros((10,))
    for bad in (10, -1):
        with pytest.raises(tf.errors.InvalidArgumentError, match="masked_lm_ids holds"):
            tied_output_cross_entropy(
                hidden, table, bias, tf.constant([3, bad]), labels_name="masked_lm_ids"
            )
