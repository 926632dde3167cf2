"""ELECTRA's discriminator head: is each token the original or a replacement?

(The generator's head is BERT's masked-LM head, `MaskedLMHead`, over the
generator's own narrower embeddings.)

Legend for shape comments: B = batch, T = sequence length, H = hidden size.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf
from keras import ops

from keras_bert.layers.activations import get_activation


@keras.saving.register_keras_serializable(package="keras_bert")
class ReplacedTokenHead(keras.layers.Layer):
    """sequence_output (B, T, H) -> one logit per token (B, T), float32:
    dense + activation, then a dense to one unit (google-research/electra's
    `discriminator_predictions`; positive: replaced)."""

    def __init__(
        self,
        hidden_size: int,
        activation: str = "gelu",
        initializer_range: float = 0.02,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        # === Config ===
        self.hidden_size = hidden_size
        self.activation = activation
        self.initializer_range = initializer_range

        # === Layers ===
        init = keras.initializers.TruncatedNormal(stddev=initializer_range)
        self.dense = keras.layers.Dense(
            hidden_size,
            activation=get_activation(activation),
            kernel_initializer=init,
            dtype=self.dtype_policy,
            name="dense",
        )
        self.prediction = keras.layers.Dense(
            1, kernel_initializer=init, dtype=self.dtype_policy, name="prediction"
        )

    def build(self, sequence_output_shape: tuple) -> None:
        self.dense.build(sequence_output_shape)
        self.prediction.build((*sequence_output_shape[:-1], self.hidden_size))

    def call(self, sequence_output: tf.Tensor) -> tf.Tensor:
        logits = self.prediction(self.dense(sequence_output))  # (B, T, 1)
        return ops.cast(ops.squeeze(logits, axis=-1), "float32")  # (B, T)

    def compute_output_shape(self, sequence_output_shape: tuple) -> tuple:
        return tuple(sequence_output_shape[:-1])

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "hidden_size": self.hidden_size,
            "activation": self.activation,
            "initializer_range": self.initializer_range,
        }
