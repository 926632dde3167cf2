"""FastLayerNorm with a hand-written gradient: the same values and
gradients as Keras's own layer (autodiff), in float32 and mixed precision,
with a bias (BERT's norms) and without (`center=False`, ModernBERT's)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert.kernels.layer_norm import FastLayerNorm

from harness import assert_same_values_and_gradients


def _values_and_gradients(layer, x, upstream):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x)
        loss = tf.reduce_sum(tf.cast(y, tf.float32) * upstream)
    return [y] + tape.gradient(loss, [x, *layer.weights])


@pytest.mark.parametrize("center,epsilon", [(True, 1e-12), (False, 1e-5)])
@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_values_and_gradients_equal_keras_layer_norm(policy, center, epsilon):
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(2.0, 3.0, size=(3, 5, 16)), tf.float32)
    upstream = tf.constant(rng.normal(size=(3, 5, 16)), tf.float32)
    weights = {"gamma": rng.normal(size=16), "beta": rng.normal(size=16)}
    if not center:
        del weights["beta"]
    results = []
    for cls in (FastLayerNorm, keras.layers.LayerNormalization):
        layer = cls(epsilon=epsilon, center=center, dtype=policy)
        layer.build(x.shape)
        assert [w.name for w in layer.weights] == list(weights)
        layer.set_weights(list(weights.values()))
        results.append(_values_and_gradients(layer, tf.cast(x, layer.compute_dtype), upstream))
    assert len(results[0][0].shape) == 3
    names = ("output", "d_x", *(f"d_{name}" for name in weights))
    assert_same_values_and_gradients(*results, names, 1e-5 if policy == "float32" else 1e-2)


def test_config_round_trip_and_other_axes_fall_back():
    layer = FastLayerNorm(epsilon=1e-12)
    clone = FastLayerNorm.from_config(layer.get_config())
    assert clone.epsilon == 1e-12
    x = tf.constant(np.random.default_rng(1).normal(size=(2, 4, 6)), tf.float32)
    for axis in (1, [1, 2]):
        ours, theirs = FastLayerNorm(axis=axis), keras.layers.LayerNormalization(axis=axis)
        np.testing.assert_allclose(ours(x), theirs(x), rtol=1e-5, atol=1e-6)
