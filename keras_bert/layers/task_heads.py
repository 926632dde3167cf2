"""Task heads that are more than one stock Keras layer.

Legend for shape comments: B = batch, T = sequence length, H = hidden size.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import keras

if TYPE_CHECKING:
    import tensorflow as tf


@keras.saving.register_keras_serializable(package="keras_bert")
class SpanHead(keras.layers.Layer):
    """Start and end logits of every token: S·T_i and E·T_i.

    One (H, 2) kernel, as run_squad.py's `cls/squad/output_weights`, whose
    columns are the start vector S and the end vector E.

    Args:
      initializer_range: stddev of the truncated-normal kernel initialiser.
    """

    def __init__(self, initializer_range: float = 0.02, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.initializer_range = initializer_range
        self.dense = keras.layers.Dense(
            2, kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
            dtype=self.dtype_policy, name="dense")

    def build(self, input_shape: tuple) -> None:
        self.dense.build(input_shape)

    def call(self, sequence_output: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        logits = self.dense(sequence_output)  # (B, T, 2)
        return logits[..., 0], logits[..., 1]  # (B, T), (B, T)

    def compute_output_shape(self, input_shape: tuple) -> tuple[tuple, tuple]:
        return tuple(input_shape[:-1]), tuple(input_shape[:-1])

    def get_config(self) -> dict:
        config = super().get_config()
        config["initializer_range"] = self.initializer_range
        return config
