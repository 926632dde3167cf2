"""FastLayerNorm without a bias (`center=False`, ModernBERT's norms) on the
closed-form gradient: Keras' own layer's values and gradients."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert.kernels.layer_norm import FastLayerNorm


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_values_and_gradients_equal_keras_layer_norm_without_bias(policy):
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(2.0, 3.0, size=(3, 5, 16)), tf.float32)
    upstream = tf.constant(rng.normal(size=(3, 5, 16)), tf.float32)
    gamma = rng.normal(size=16)
    results = []
    for cls in (FastLayerNorm, keras.layers.LayerNormalization):
        layer = cls(epsilon=1e-5, center=False, dtype=policy)
        layer.build(x.shape)
        layer.set_weights([gamma])
        inputs = tf.cast(x, layer.compute_dtype)
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            y = layer(inputs)
            loss = tf.reduce_sum(tf.cast(y, tf.float32) * upstream)
        results.append([y, *tape.gradient(loss, [inputs, layer.gamma])])
    assert len(results[0][0].shape) == 3 and [w.name for w in layer.weights] == ["gamma"]
    tolerance = 1e-5 if policy == "float32" else 1e-2
    for ours, keras_result, name in zip(*results, ("output", "d_x", "d_gamma")):
        assert ours.dtype == keras_result.dtype, name
        np.testing.assert_allclose(
            tf.cast(ours, tf.float32),
            tf.cast(keras_result, tf.float32),
            rtol=tolerance,
            atol=tolerance,
            err_msg=name,
        )
