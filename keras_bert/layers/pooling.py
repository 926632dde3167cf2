"""Pooling of token outputs: the pooler's token, the last real positions (which
`keras_bert.layers.sentence_pooling` reads too); weighted sums of layers (the
feature-based setting). Sentence embeddings' pooling: `sentence_pooling`.

Legend for shape comments: B = batch, T = sequence length, H = hidden size.
"""

import keras
import tensorflow as tf
from keras import ops


def last_real_positions(input_mask: tf.Tensor) -> tf.Tensor:
    """(B, T) -> (B, T) bool, True at each row's last real position: where the
    running count of real tokens reaches their total."""
    mask = ops.cast(ops.not_equal(input_mask, 0), "int32")
    return ops.logical_and(
        ops.equal(ops.cumsum(mask, axis=1), ops.sum(mask, axis=1, keepdims=True)), mask > 0
    )


def pooled_token(hidden: tf.Tensor, input_mask: tf.Tensor, attention: str) -> tf.Tensor:
    """(B, T, H), (B, T) -> (B, H): the position BERT's pooler reads, [CLS], or
    left to right the last real token."""
    if attention != "left_to_right":
        return hidden[:, 0, :]
    last = ops.cast(last_real_positions(input_mask), hidden.dtype)  # (B, T)
    return ops.einsum("bt,bth->bh", last, hidden)


@keras.saving.register_keras_serializable(package="keras_bert")
class WeightedLayerSum(keras.layers.Layer):
    """L x (B, T, H) -> (B, T, H): sum of the layers with learned softmax
    weights (ELMo's scalar mix), the paper's "weighted sum" feature-based
    choices. The weights start equal: the plain mean of the layers."""

    def build(self, layers_shape: list) -> None:
        self.layer_weights = self.add_weight(
            name="layer_weights", shape=(len(layers_shape),), initializer="zeros"
        )

    def call(self, layers: list) -> tf.Tensor:
        weights = keras.ops.softmax(self.layer_weights)  # (L,)
        stacked = keras.ops.stack(layers, axis=0)  # (L, B, T, H)
        return keras.ops.einsum("l,lbth->bth", keras.ops.cast(weights, stacked.dtype), stacked)

    def compute_output_shape(self, layers_shape: list) -> tuple:
        return tuple(layers_shape[0])
