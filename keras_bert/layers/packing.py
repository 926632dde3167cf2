"""The real positions of a padded (B, T) batch packed into rows (R, ...).

Every layer of a Transformer block but attention treats each position on its
own, so it can run on the real positions alone: `TokenPacking` says where
they go (`pack`) and how to put them back in the batch's layout (`unpack`)
for attention. `keras_bert.models.unpadded` runs the encoder this way.

Legend for shape comments: B = batch, T = sequence length, R = real
positions in the batch, W = any width.
"""

from __future__ import annotations

import tensorflow as tf


class TokenPacking:
    """Where the real positions of `input_mask` (B, T) go in the packed rows.

    Position 0 ([CLS], which the pooler reads) always counts as real, so a
    row's pooled output never depends on padding. Rows are in the batch's
    order, positions in order within a row.
    """

    def __init__(self, input_mask: tf.Tensor) -> None:
        batch, length = tf.shape(input_mask)[0], tf.shape(input_mask)[1]
        real = tf.not_equal(input_mask, 0) | tf.equal(tf.range(length), 0)[None]  # (B, T)
        flat_real = tf.reshape(real, (-1,))  # (B * T,)
        self.shape = (batch, length)
        self.flat_rows = tf.cast(tf.where(flat_real)[:, 0], tf.int32)  # (R,) into B * T
        self.count = tf.size(self.flat_rows)  # R
        # Each position's packed row, or R at padding: the zero row `unpack` appends.
        running = tf.cumsum(tf.cast(flat_real, tf.int32)) - 1  # (B * T,)
        self.row_of = tf.reshape(tf.where(flat_real, running, self.count), (batch, length))

    @property
    def positions(self) -> tf.Tensor:
        """(R,) each packed row's position in its sequence."""
        return self.flat_rows % self.shape[1]

    def pack(self, padded: tf.Tensor) -> tf.Tensor:
        """(B, T, ...) -> (R, ...)."""
        flat = tf.reshape(padded, tf.concat([[-1], tf.shape(padded)[2:]], 0))
        return tf.gather(flat, self.flat_rows)

    def unpack(self, packed: tf.Tensor) -> tf.Tensor:
        """(R, W) -> (B, T, W), zeros at the padding."""
        with_zero_row = tf.concat([packed, tf.zeros_like(packed[:1])], 0)  # (R + 1, W)
        return tf.gather(with_zero_row, self.row_of)
