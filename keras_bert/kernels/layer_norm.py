"""LayerNorm over the last axis with its gradient written out.

Legend for shape comments: R = rows (every axis but the last), H = hidden size.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from keras_bert.kernels.switch import FastKerasLayer


def layer_norm(
    x: tf.Tensor,
    gamma: tf.Tensor | keras.Variable,
    beta: tf.Tensor | keras.Variable,
    epsilon: float,
) -> tf.Tensor:
    """(x - mean) / sqrt(variance + epsilon) * gamma + beta over the last axis,
    in float32 (as Keras computes it), returned in x's dtype.

    Why a hand-written gradient: autodiff through the mean, the variance and
    their broadcasts builds about twice the element-wise ops of the closed
    form below (figures in benchmarks/README.md).
    """
    dtype = x.dtype
    x = tf.cast(x, tf.float32)
    gamma, beta = tf.cast(gamma, tf.float32), tf.cast(beta, tf.float32)

    @tf.custom_gradient
    def normalize(x, gamma, beta):
        mean = tf.reduce_mean(x, axis=-1, keepdims=True)
        centered = x - mean
        inverse_std = tf.math.rsqrt(
            tf.reduce_mean(tf.square(centered), axis=-1, keepdims=True) + epsilon
        )
        normalized = centered * inverse_std

        def grad(upstream):
            hidden = tf.shape(upstream)[-1]
            rows = tf.reshape(upstream, (-1, hidden))  # (R, H)
            d_gamma = tf.reduce_sum(rows * tf.reshape(normalized, (-1, hidden)), axis=0)
            d_beta = tf.reduce_sum(rows, axis=0)
            d_normalized = upstream * gamma
            d_x = inverse_std * (
                d_normalized
                - tf.reduce_mean(d_normalized, axis=-1, keepdims=True)
                - normalized * tf.reduce_mean(d_normalized * normalized, axis=-1, keepdims=True)
            )
            return d_x, d_gamma, d_beta

        return normalized * gamma + beta, grad

    return tf.cast(normalize(x, gamma, beta), dtype)


@keras.saving.register_keras_serializable(package="keras_bert")
class FastLayerNorm(FastKerasLayer, keras.layers.LayerNormalization):
    """keras.layers.LayerNormalization (same weights, config and values) whose
    last-axis case uses `layer_norm`'s closed-form gradient; without a bias
    (`center=False`, ModernBERT's norms) too, as a bias of zeros."""

    def call(self, inputs: tf.Tensor) -> tf.Tensor:
        if not (
            self.runs_fast_kernels
            and self.scale
            and not self.rms_scaling
            and self.axis in (-1, [-1], len(inputs.shape) - 1, [len(inputs.shape) - 1])
        ):
            return super().call(inputs)
        # A constant zero bias: its gradient, a sum over rows, is computed and dropped.
        beta = self.beta if self.center else tf.zeros_like(self.gamma)
        outputs = layer_norm(inputs, self.gamma, beta, self.epsilon)
        return tf.cast(outputs, self.compute_dtype)
