"""Pretraining heads of BERT: masked LM and next-sentence (or sentence-order) prediction.

Legend for shape comments: B = batch, T = sequence length, P = masked
positions per sequence (max_predictions_per_seq), H = hidden size,
V = vocabulary size.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf
from keras import ops

from keras_bert.kernels.layer_norm import FastLayerNorm
from keras_bert.kernels.masked_lm_loss import (
    plain_cross_entropy_and_prediction,
    tied_output_cross_entropy,
)
from keras_bert.kernels.switch import FastKernelsLayer
from keras_bert.layers.activations import get_activation
from keras_bert.layers.packing import gather_positions


class TiedEmbeddingConfig:
    """Mixin for a head whose output layer is the encoder's token embedding
    (`token_embedding`), shared: the model passes the encoder's again when it
    is rebuilt from its own config. The head's config still holds it (as
    keras-hub's MaskedLMHead), so that from_config(get_config()) builds a head
    on its own. It comes before the head's base class."""

    token_embedding: keras.layers.Embedding

    def get_config(self) -> dict:
        config = super().get_config()  # type: ignore[misc]
        config["token_embedding"] = keras.saving.serialize_keras_object(self.token_embedding)
        return config

    @classmethod
    def from_config(cls, config: dict) -> Any:
        config = dict(config)
        if isinstance(config.get("token_embedding"), dict):
            config["token_embedding"] = keras.saving.deserialize_keras_object(
                config["token_embedding"]
            )
        return cls(**config)


@keras.saving.register_keras_serializable(package="keras_bert")
class MaskedLMHead(TiedEmbeddingConfig, FastKernelsLayer, keras.layers.Layer):
    """dense + activation + LayerNorm, then logits against the token embedding table.

    The output projection is tied to `token_embedding.embeddings` (V, H) and has
    only its own bias (V,), as in the original `get_masked_lm_output`. It runs
    only at the masked positions: P of T per sequence, so the (H x V) product
    costs P/T of what it would over the whole sequence.
    """

    config_fields = ("token_embedding", "activation", "initializer_range", "layer_norm_epsilon")

    def __init__(
        self,
        token_embedding: keras.layers.Embedding,
        activation: str = "gelu",
        initializer_range: float = 0.02,
        layer_norm_epsilon: float = 1e-12,
        fast_kernels: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(locals())
        # === Layers ===
        init = keras.initializers.TruncatedNormal(stddev=initializer_range)
        self.dense = keras.layers.Dense(
            token_embedding.output_dim,
            activation=get_activation(activation, self.runs_fast_kernels),
            kernel_initializer=init,
            dtype=self.dtype_policy,
            name="transform",
        )
        self.layer_norm = FastLayerNorm(
            epsilon=layer_norm_epsilon,
            dtype=self.dtype_policy,
            name="transform_layer_norm",
            fast_kernels=fast_kernels,
        )

    def build(
        self, sequence_output_shape: tuple, masked_lm_positions_shape: tuple | None = None
    ) -> None:
        if not self.token_embedding.built:  # one rebuilt by from_config, not yet shared
            self.token_embedding.build()
        # The dense reads the encoder's width (H) and writes the embeddings'
        # (E: H in BERT, narrower in ELECTRA's generator).
        self.dense.build((None, None, sequence_output_shape[-1]))
        self.layer_norm.build((None, None, self.token_embedding.output_dim))
        self.output_bias = self.add_weight(
            name="output_bias", shape=(self.token_embedding.input_dim,), initializer="zeros"
        )

    def transform(
        self, sequence_output: tf.Tensor, masked_lm_positions: tf.Tensor | None = None
    ) -> tf.Tensor:
        """sequence_output (B, T, H) and masked_lm_positions (B, P) -> the
        transformed hidden states at the masked positions, (B * P, H); without
        positions, sequence_output is already at the masked positions, (B, P, H)."""
        # 2-D (B * P, H) throughout: the transform is one MatMul + BiasAdd.
        if masked_lm_positions is None:
            hidden = ops.reshape(sequence_output, (-1, ops.shape(sequence_output)[2]))
        else:
            hidden = gather_positions(sequence_output, masked_lm_positions, flat=True)
        return self.layer_norm(self.dense(hidden))  # (B * P, H)

    def call(
        self, sequence_output: tf.Tensor, masked_lm_positions: tf.Tensor | None = None
    ) -> tf.Tensor:
        """sequence_output (B, T, H) and masked_lm_positions (B, P) -> logits
        (B, P, V); without positions, sequence_output is already the hidden
        states at the masked positions, (B, P, H)."""
        rows = sequence_output if masked_lm_positions is None else masked_lm_positions
        batch, predictions = ops.shape(rows)[0], ops.shape(rows)[1]
        hidden = self.transform(sequence_output, masked_lm_positions)  # (B * P, H)
        table = ops.cast(self.token_embedding.embeddings, hidden.dtype)  # (V, H)
        # The (V, H) table as stored (transpose_b): neither it nor its gradient
        # is transposed, and the output bias is a fusable BiasAdd (faster than
        # a 3-D matmul against the transposed table).
        logits = tf.matmul(hidden, table, transpose_b=True)  # (B * P, V)
        # Logits in float32: the softmax over 30k classes loses too much in 16 bits.
        logits = tf.nn.bias_add(ops.cast(logits, "float32"), ops.cast(self.output_bias, "float32"))
        return ops.reshape(
            logits, (batch, predictions, self.token_embedding.input_dim)
        )  # (B, P, V)

    def loss_and_prediction(
        self, sequence_output: tf.Tensor, labels: tf.Tensor, labels_name: str = "masked_lm_ids"
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """Training's shortcut past the logits: sequence_output (B, P, H) at the
        masked positions and labels (B, P) -> cross-entropy (B, P) float32 and
        arg-max prediction (B, P) int32 of `call`'s logits, from
        `tied_output_cross_entropy` (the same values, a faster gradient)."""
        if not self.runs_fast_kernels:  # the plain path: logits, then the loss
            return plain_cross_entropy_and_prediction(self(sequence_output), labels, labels_name)
        hidden = self.transform(sequence_output)  # (B * P, H)
        table = ops.cast(self.token_embedding.embeddings, hidden.dtype)  # (V, H)
        loss, predicted = tied_output_cross_entropy(
            hidden, table, self.output_bias, labels, labels_name=labels_name
        )  # (B * P,) each
        return ops.reshape(loss, ops.shape(labels)), ops.reshape(predicted, ops.shape(labels))

    def compute_output_shape(
        self, sequence_output_shape: tuple, masked_lm_positions_shape: tuple | None = None
    ) -> tuple:
        rows = (
            sequence_output_shape
            if masked_lm_positions_shape is None
            else masked_lm_positions_shape
        )
        return (rows[0], rows[1], self.token_embedding.input_dim)


class TwoLogitHead(keras.layers.Layer):
    """(..., H) -> (..., 2): one Dense layer of two units (named `dense_name`),
    BERT's truncated-normal initialiser; the base of the next-sentence head
    and the span head."""

    dense_name = "dense"

    def __init__(self, initializer_range: float = 0.02, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # === Config ===
        self.initializer_range = initializer_range
        # === Layers ===
        self.dense = keras.layers.Dense(
            2,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
            dtype=self.dtype_policy,
            name=self.dense_name,
        )

    def build(self, input_shape: tuple) -> None:
        self.dense.build(input_shape)

    def get_config(self) -> dict:
        return {**super().get_config(), "initializer_range": self.initializer_range}


@keras.saving.register_keras_serializable(package="keras_bert")
class NextSentenceHead(TwoLogitHead):
    """pooled_output (B, H) -> 2 logits: is-next / random (NSP) or in-order / swapped (SOP)."""

    dense_name = "seq_relationship"

    def call(self, pooled_output: tf.Tensor) -> tf.Tensor:
        return ops.cast(self.dense(pooled_output), "float32")  # (B, 2)

    def compute_output_shape(self, pooled_output_shape: tuple) -> tuple:
        return (pooled_output_shape[0], 2)
