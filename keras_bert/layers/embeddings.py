"""Embedding-side layers of the BERT encoder.

Legend for shape comments: B = batch, T = sequence length, H = hidden size.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import keras
from keras import ops

if TYPE_CHECKING:
    import tensorflow as tf


@keras.saving.register_keras_serializable(package="keras_bert")
class PositionEmbedding(keras.layers.Layer):
    """Learned absolute position embeddings, sliced to the input's length, or
    gathered at given `positions` (R,) (rows packed without their padding)."""

    def __init__(
        self,
        max_length: int,
        initializer: str | dict | keras.initializers.Initializer = "glorot_uniform",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.max_length = max_length
        self.initializer = keras.initializers.get(initializer)

    def build(self, input_shape: tuple) -> None:
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.max_length, input_shape[-1]),
            initializer=self.initializer,
        )

    def call(self, inputs: tf.Tensor, positions: tf.Tensor | None = None) -> tf.Tensor:
        # inputs: (B, T, H), only its length is used.
        if positions is not None:
            return ops.take(self.embeddings, positions, axis=0)  # (R, H)
        length = ops.shape(inputs)[1]
        # A slice, not `embeddings[:length]`: LiteRT runs a strided slice whose
        # end is computed (a request padded to its longest text) on no kernel.
        table = ops.slice(self.embeddings, (0, 0), (length, self.embeddings.shape[1]))  # (T, H)
        return ops.expand_dims(table, 0)  # (1, T, H)

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        return (1, input_shape[1], input_shape[2])

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "max_length": self.max_length,
            "initializer": keras.initializers.serialize(self.initializer),
        }


@keras.saving.register_keras_serializable(package="keras_bert")
class AttentionMaskBias(keras.layers.Layer):
    """input_mask (B, T) of 1/0 -> additive attention bias (B, 1, 1, T), or
    (B, 1, T, T) with `causal`: query t also gets the bias at every key after t.

    Padding gets -10000 (as the original BERT) rather than -inf: it vanishes
    after softmax yet stays finite in float16, where -1e9 would overflow.
    """

    def __init__(self, causal: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.causal = causal

    def call(self, input_mask: tf.Tensor) -> tf.Tensor:
        padding = 1.0 - ops.cast(input_mask, self.compute_dtype)  # (B, T)
        # expand_dims, not padding[:, None, None, :]: LiteRT has no kernel for
        # that strided slice once T is only known per request.
        masked = ops.expand_dims(ops.expand_dims(padding, 1), 1)  # (B, 1, 1, T)
        if self.causal:
            length = ops.shape(input_mask)[1]
            later = ops.triu(ops.ones((length, length), self.compute_dtype), k=1)  # (T, T)
            # maximum, not a sum: a later padded key stays at -10000 (finite in float16).
            masked = ops.maximum(masked, later[None, None])  # (B, 1, T, T)
        return masked * -10000.0

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        if self.causal:
            return (input_shape[0], 1, input_shape[1], input_shape[1])
        return (input_shape[0], 1, 1, input_shape[1])

    def get_config(self) -> dict:
        return {**super().get_config(), "causal": self.causal}
