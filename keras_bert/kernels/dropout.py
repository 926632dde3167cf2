"""Dropout that draws 16 random bits per element instead of a float32.

Why: the attention probabilities' dropout draws one number per (B, N, T, T)
element, the largest random tensor of a pretraining step. TensorFlow's
dropout draws a float32 uniform there, compares, scales and selects, and its
gradient selects and scales again. Here one 32-bit Philox draw serves two
elements (a bitcast, no copy), and the gradient is one multiply by the kept
mask (figures in benchmarks/README.md).

The price: the rate is rounded to a multiple of 2^-16 (0.1 -> 0.100006); the
scale is 1 / (1 - rounded rate), so the expected output is still the input.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from keras_bert.kernels.switch import FastKerasLayer

_LEVELS = 1 << 16  # values of a 16-bit draw


def _int32_seed(seed):
    """A Keras seed generator's state (int64 in the TensorFlow backend) -> the
    int32 pair that XLA's stateless random ops take, as Keras itself does."""
    if seed.dtype == tf.int32:
        return seed
    return tf.cast(tf.math.floormod(seed, tf.int32.max - 1), tf.int32)


def dropout_16_bit(inputs: tf.Tensor, dropped_levels: int, seed: tf.Tensor) -> tf.Tensor:
    """Zeroes each element with probability dropped_levels / 2^16, scales the
    rest by 2^16 / (2^16 - dropped_levels); gradient: the same mask."""

    @tf.custom_gradient
    def apply(inputs):
        size = tf.size(inputs)
        draws = tf.random.stateless_uniform(
            [(size + 1) // 2], seed=seed, minval=None, maxval=None, dtype=tf.uint32
        )
        halves = tf.reshape(tf.bitcast(draws, tf.uint16), [-1])[:size]  # two per draw
        keep = tf.reshape(halves >= tf.constant(dropped_levels, tf.uint16), tf.shape(inputs))
        scale = tf.constant(_LEVELS / (_LEVELS - dropped_levels), inputs.dtype)
        # A cast and a multiply, not tf.where(keep, scale, 0): the same values,
        # and CPU's select has no vectorised 16-bit kernel (in bfloat16 the
        # mask cost 1.8 ms of a (32, 4, 128, 128) dropout, the cast 0.7 ms).
        kept = tf.cast(keep, inputs.dtype) * scale

        def grad(upstream):
            return upstream * kept

        return inputs * kept, grad

    return apply(inputs)


@keras.saving.register_keras_serializable(package="keras_bert")
class FastDropout(FastKerasLayer, keras.layers.Dropout):
    """keras.layers.Dropout (same config, same seed generator) with 16-bit
    draws; a noise shape, another backend, or a rate that rounds to 0 or 1
    take Keras' own path."""

    def call(self, inputs: tf.Tensor, training: bool | None = False) -> tf.Tensor:
        dropped_levels = round(self.rate * _LEVELS)
        if (
            not self.runs_fast_kernels
            or not training
            or self.noise_shape is not None
            or keras.backend.backend() != "tensorflow"
            or not 0 < dropped_levels < _LEVELS
        ):
            return super().call(inputs, training=training)
        return dropout_16_bit(inputs, dropped_levels, _int32_seed(self.seed_generator.next()))
