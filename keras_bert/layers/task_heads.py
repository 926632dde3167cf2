"""Task heads that are more than one stock Keras layer.

Legend for shape comments: B = batch, T = sequence length, H = hidden size.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import keras

from keras_bert.layers.pretraining_heads import TwoLogitHead

if TYPE_CHECKING:
    import tensorflow as tf


@keras.saving.register_keras_serializable(package="keras_bert")
class SpanHead(TwoLogitHead):
    """Start and end logits of every token: S·T_i and E·T_i.

    One (H, 2) kernel, as run_squad.py's `cls/squad/output_weights`, whose
    columns are the start vector S and the end vector E.

    Args:
      initializer_range: stddev of the truncated-normal kernel initialiser.
    """

    def call(self, sequence_output: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        logits = self.dense(sequence_output)  # (B, T, 2)
        return logits[..., 0], logits[..., 1]  # (B, T), (B, T)

    def compute_output_shape(self, input_shape: tuple) -> tuple[tuple, tuple]:
        return tuple(input_shape[:-1]), tuple(input_shape[:-1])


# "linear": the paper's output layer on each token; "bilstm": a randomly
# initialised BiLSTM before it (the paper's "LTR & No NSP + BiLSTM" row, and
# its feature-based tagger, two BiLSTM layers over frozen features).
HEADS = ("linear", "bilstm")


@keras.saving.register_keras_serializable(package="keras_bert")
class BiLSTMHead(keras.layers.Layer):
    """sequence (B, T, H) and input_mask (B, T) -> (B, T, 2U): `num_layers`
    bidirectional LSTMs of `units` per direction, padding masked out (the
    backward LSTM starts at each sequence's last real token).

    Args:
      units: LSTM units per direction.
      num_layers: stacked BiLSTMs (1 for the ablation's head, 2 in the
        paper's feature-based tagger).
    """

    def __init__(self, units: int, num_layers: int = 1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if num_layers < 1:
            raise ValueError(f"BiLSTMHead needs num_layers >= 1, got {num_layers}")
        self.units = units
        self.num_layers = num_layers
        # The head's dtype policy on its LSTMs too: under mixed precision they
        # would otherwise compute (and return) float32.
        self.bilstms = [
            keras.layers.Bidirectional(
                keras.layers.LSTM(units, return_sequences=True, dtype=self.dtype_policy),
                name=f"bilstm_{i}",
                dtype=self.dtype_policy,
            )
            for i in range(num_layers)
        ]

    def build(self, sequence_shape: tuple, input_mask_shape: tuple | None = None) -> None:
        shape = tuple(sequence_shape)
        for bilstm in self.bilstms:
            bilstm.build(shape)
            shape = shape[:-1] + (2 * self.units,)

    def call(
        self, sequence: tf.Tensor, input_mask: tf.Tensor, training: bool | None = None
    ) -> tf.Tensor:
        mask = keras.ops.cast(input_mask, "bool")  # (B, T)
        for bilstm in self.bilstms:
            sequence = bilstm(sequence, mask=mask, training=training)  # (B, T, 2U)
        # A new tensor without the LSTM's Keras mask: the head after it reads
        # every position (padding weighs nothing in the loss) and takes no mask.
        return keras.ops.copy(sequence)

    def compute_output_shape(
        self, sequence_shape: tuple, input_mask_shape: tuple | None = None
    ) -> tuple:
        return tuple(sequence_shape[:-1]) + (2 * self.units,)

    def get_config(self) -> dict:
        return {**super().get_config(), "units": self.units, "num_layers": self.num_layers}
