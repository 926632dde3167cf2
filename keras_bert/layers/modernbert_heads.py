"""ModernBERT's heads: the prediction head (dense -> activation -> LayerNorm)
that both its classifier and its masked-LM read, and the pooling before the
classifier's ([CLS] or the mean of the real tokens).

Legend for shape comments: B = batch, T = sequence length, H = hidden size,
V = vocabulary size.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf
from keras import ops

from keras_bert.kernels.dense import FastDense
from keras_bert.kernels.layer_norm import FastLayerNorm
from keras_bert.kernels.switch import FastKernelsLayer
from keras_bert.layers.activations import ActivationOption
from keras_bert.layers.modernbert_block import dense_options
from keras_bert.layers.packing import gather_positions
from keras_bert.layers.pretraining_heads import TiedEmbeddingConfig


def pool_tokens(hidden: tf.Tensor, input_mask: tf.Tensor, pooling: str) -> tf.Tensor:
    """(B, T, H), (B, T) -> (B, H): [CLS] (`"cls"`), or the mean of the real
    positions (`"mean"`: in a local layer [CLS] sees only its window, so on
    long inputs the mean can read more of the text)."""
    if pooling == "cls":
        return hidden[:, 0, :]
    mask = ops.cast(input_mask, hidden.dtype)[:, :, None]  # (B, T, 1)
    return ops.sum(hidden * mask, axis=1) / ops.maximum(ops.sum(mask, axis=1), 1.0)


@keras.saving.register_keras_serializable(package="keras_bert")
class PredictionHead(ActivationOption, FastKernelsLayer, keras.layers.Layer):
    """(..., H) -> (..., H): dense, activation, LayerNorm (HuggingFace's
    `ModernBertPredictionHead`)."""

    config_fields = ("activation", "use_bias", "norm_bias", "norm_epsilon", "initializer_range")

    def __init__(
        self,
        activation: str = "gelu",
        use_bias: bool = False,
        norm_bias: bool = False,
        norm_epsilon: float = 1e-5,
        initializer_range: float = 0.02,
        fast_kernels: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(locals())
        self.layer_norm = FastLayerNorm(
            epsilon=norm_epsilon,
            center=norm_bias,
            dtype=self.dtype_policy,
            name="layer_norm",
            fast_kernels=fast_kernels,
        )

    def build(self, hidden_shape: tuple) -> None:
        self.dense = FastDense(hidden_shape[-1], name="dense", **dense_options(self))
        self.dense.build(hidden_shape)
        self.layer_norm.build(hidden_shape)

    def call(self, hidden: tf.Tensor) -> tf.Tensor:
        return self.layer_norm(self.activation_fn(self.dense(hidden)))

    def compute_output_shape(self, hidden_shape: tuple) -> tuple:
        return hidden_shape


@keras.saving.register_keras_serializable(package="keras_bert")
class ModernBertMaskedLMHead(TiedEmbeddingConfig, PredictionHead):
    """(B, T, H) -> logits (B, T, V): the prediction head, then the token
    embedding table as the output layer (tied, as HuggingFace's
    `ModernBertForMaskedLM`), plus a bias of its own when `decoder_bias`.
    With `masked_lm_positions` (B, P), at those positions only: (B, P, V)."""

    def __init__(
        self,
        token_embedding: keras.layers.Embedding,
        decoder_bias: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.token_embedding = token_embedding
        self.decoder_bias = decoder_bias

    def build(self, hidden_shape: tuple, masked_lm_positions_shape: tuple | None = None) -> None:
        if not self.token_embedding.built:  # one rebuilt by from_config, not yet shared
            self.token_embedding.build()
        super().build(hidden_shape)
        self.output_bias = (
            self.add_weight(
                name="output_bias", shape=(self.token_embedding.input_dim,), initializer="zeros"
            )
            if self.decoder_bias
            else None
        )

    def call(self, hidden: tf.Tensor, masked_lm_positions: tf.Tensor | None = None) -> tf.Tensor:
        if masked_lm_positions is not None:  # the (H x V) product at P of T positions
            hidden = gather_positions(hidden, masked_lm_positions)  # (B, P, H)
        transformed = super().call(hidden)  # (B, T, H), or (B, P, H)
        table = ops.cast(self.token_embedding.embeddings, transformed.dtype)  # (V, H)
        # Logits in float32: the softmax over the vocabulary loses too much in 16 bits.
        logits = ops.cast(ops.einsum("bth,vh->btv", transformed, table), "float32")
        if self.output_bias is not None:
            logits = logits + ops.cast(self.output_bias, "float32")
        return logits  # (B, T, V)

    def compute_output_shape(
        self, hidden_shape: tuple, masked_lm_positions_shape: tuple | None = None
    ) -> tuple:
        rows = hidden_shape[:-1] if masked_lm_positions_shape is None else masked_lm_positions_shape
        return (*rows, self.token_embedding.input_dim)

    def get_config(self) -> dict:
        return {**super().get_config(), "decoder_bias": self.decoder_bias}
