"""Rotary position embeddings (Su et al., 2021, "RoFormer").

Instead of adding a learned vector per position to the input, each query and
key is turned by an angle that grows with its position: pairs of dimensions
(d, d + D/2) rotate at frequency theta^(-2d/D). The product of a query and a
key then depends on their distance only, and no table limits the length.
Written as HuggingFace's `rotate_half` form (the halves, not interleaved
pairs), the layout its ModernBERT checkpoints were trained with.

Legend for shape comments: B = batch, N = heads, T = sequence length,
D = head size.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf


def inverse_frequencies(head_size: int, theta: float) -> np.ndarray:
    """(D/2,) float32: theta^(-2d/D), computed in float32 as HuggingFace does,
    so the angles round as in the checkpoints' own code."""
    exponents = np.arange(0, head_size, 2, dtype=np.float32) / np.float32(head_size)
    return (np.float32(1.0) / np.power(np.float32(theta), exponents)).astype(np.float32)


def rotation_tables(length: tf.Tensor, frequencies: np.ndarray) -> tuple[tf.Tensor, tf.Tensor]:
    """The cosines and sines (T, D) of positions 0 .. T-1, in float32."""
    positions = tf.cast(tf.range(length), tf.float32)
    angles = positions[:, None] * tf.constant(frequencies)[None, :]  # (T, D/2)
    angles = tf.concat([angles, angles], axis=-1)  # (T, D)
    return tf.cos(angles), tf.sin(angles)


def rotate(x: tf.Tensor, cos: tf.Tensor, sin: tf.Tensor) -> tf.Tensor:
    """x (B, N, T, D) turned by its positions' angles, in float32 (a 16-bit
    angle at position 8000 is off by several radians), returned in x's dtype."""
    dtype = x.dtype
    x = tf.cast(x, tf.float32)
    first, second = tf.split(x, 2, axis=-1)  # (B, N, T, D/2) each
    turned = tf.concat([-second, first], axis=-1)  # (B, N, T, D)
    return tf.cast(x * cos + turned * sin, dtype)
