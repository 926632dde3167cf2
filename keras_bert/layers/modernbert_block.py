"""The pre-norm Transformer block of ModernBERT (Warner et al., 2024).

BERT's block (`keras_bert.layers.transformer`) normalises after each residual
sum; this one normalises each sublayer's input and leaves the residual stream
alone, which trains stably without warm-up tricks at depth. Its attention
turns queries and keys by their positions (`keras_bert.layers.rotary`) and
sees either every position (a global layer) or a window around the query (a
local layer: the mask bias says which, `SlidingWindowMaskBias`); its
feed-forward layer is a GeGLU. Biases are optional everywhere (ModernBERT
has none).

The rows a block runs on are a row layout (`keras_bert.layers.packing.row_layout`,
as BERT's block): the padded (B, T) batch, or its real tokens packed into
rows (R, H), attention alone going back to the (B, S) layout and out again
in one gather each way; the block's code is the same for both.

Legend for shape comments: B = batch, T = sequence length, N = attention
heads, D = head size, H = hidden size (N * D), F = intermediate size. With
the padding packed out, (B, T, H) reads (R, H), R = real tokens, and T in
attention reads S, the positions up to the batch's last real one.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf
from keras import ops

from keras_bert.kernels.dense import FastDense
from keras_bert.kernels.dropout import FastDropout
from keras_bert.kernels.layer_norm import FastLayerNorm
from keras_bert.kernels.switch import FastKernelsLayer
from keras_bert.layers.activations import ActivationOption
from keras_bert.layers.packing import row_layout
from keras_bert.layers.rotary import inverse_frequencies, rotate, rotation_tables

# Added to the scores of keys a query must not see: as BERT's padding bias,
# it vanishes after softmax (exp(-10000) is 0 in float32) yet stays finite in float16.
MASKED_SCORE = -10000.0


def dense_options(layer: Any) -> dict[str, Any]:
    """A FastDense's arguments inside `layer` (one with `use_bias`,
    `initializer_range` and `fast_kernels`): its bias choice, BERT's
    truncated-normal initialiser, its dtype policy and kernels."""
    return dict(
        use_bias=layer.use_bias,
        kernel_initializer=keras.initializers.TruncatedNormal(stddev=layer.initializer_range),
        dtype=layer.dtype_policy,
        fast_kernels=layer.fast_kernels,
    )


@keras.saving.register_keras_serializable(package="keras_bert")
class SlidingWindowMaskBias(keras.layers.Layer):
    """input_mask (B, T) -> additive bias (B, 1, T, T): query i sees key j when
    j is a real token and |i - j| <= `radius` (HuggingFace's bidirectional
    sliding window, `local_attention // 2` on each side)."""

    def __init__(self, radius: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.radius = radius

    def call(self, input_mask: tf.Tensor) -> tf.Tensor:
        padding = 1.0 - ops.cast(input_mask, self.compute_dtype)  # (B, T)
        positions = ops.arange(ops.shape(input_mask)[1])
        distance = ops.abs(positions[:, None] - positions[None, :])  # (T, T)
        outside = ops.cast(distance > self.radius, self.compute_dtype)
        # maximum, not a sum: a padded key outside the window stays at one bias.
        return ops.maximum(padding[:, None, None, :], outside[None, None]) * MASKED_SCORE

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        return (input_shape[0], 1, input_shape[1], input_shape[1])

    def get_config(self) -> dict:
        return {**super().get_config(), "radius": self.radius}


@keras.saving.register_keras_serializable(package="keras_bert")
class RotarySelfAttention(FastKernelsLayer, keras.layers.Layer):
    """Multi-head self-attention with rotary positions: one (H, 3H) product
    for query, key and value (the checkpoints' `Wqkv`), the queries and keys
    turned, scaled dot products plus the mask bias, the output projection."""

    config_fields = (
        "num_heads",
        "head_size",
        "rope_theta",
        "use_bias",
        "dropout",
        "initializer_range",
    )

    def __init__(
        self,
        num_heads: int,
        head_size: int,
        rope_theta: float,
        use_bias: bool = False,
        dropout: float = 0.0,
        initializer_range: float = 0.02,
        fast_kernels: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(locals())
        hidden = num_heads * head_size
        dense = dense_options(self)
        self.qkv = FastDense(3 * hidden, name="qkv", **dense)
        self.attention_output = FastDense(hidden, name="output", **dense)
        self.probs_dropout = FastDropout(
            dropout, dtype=self.dtype_policy, fast_kernels=fast_kernels
        )
        self.output_dropout = FastDropout(
            dropout, dtype=self.dtype_policy, fast_kernels=fast_kernels
        )
        self.frequencies = inverse_frequencies(head_size, rope_theta)

    def build(self, hidden_shape: tuple, mask_bias_shape: tuple | None = None) -> None:
        self.qkv.build(hidden_shape)
        self.attention_output.build(hidden_shape[:-1] + (self.num_heads * self.head_size,))

    def call(
        self,
        hidden: tf.Tensor,
        mask_bias: tf.Tensor,
        packing: Any = None,
        query_packing: Any = None,
        training: bool | None = None,
    ) -> tf.Tensor:
        """hidden (B, T, H), mask_bias (B, 1, 1 or T, T) -> (B, T, H). With
        `packing` (a `TokenPacking`), hidden holds the real positions only,
        (R, H) -> (R, H), the bias spans S positions; with `query_packing` too,
        the output only at its rows, (R, H) -> (Q, H)
        (`keras_bert.layers.packing.PackedRows`)."""
        rows = row_layout(packing, query_packing)
        heads = rows.split_heads(self.qkv(hidden), self.num_heads, groups=3)  # (3, B, N, T, D)
        query, key, value = tf.unstack(heads)  # (B, N, T, D) each
        # Turned in the heads' (B, N, T or S, D) layout, where the packed rows too
        # sit at their positions in the sequence (`TokenPacking.positions`).
        cos, sin = rotation_tables(tf.shape(query)[2], self.frequencies)  # (T, D)
        query, key = rotate(query, cos, sin), rotate(key, cos, sin)
        scores = tf.linalg.matmul(query, key, transpose_b=True) * (
            self.head_size**-0.5
        )  # (B, N, T, T)
        scores = scores + ops.cast(mask_bias, scores.dtype)
        # Softmax in float32: in float16 / bfloat16 the sum over keys loses precision.
        # (tf's, not Keras': Keras warns on a one-token input's single key.)
        probs = tf.cast(tf.nn.softmax(tf.cast(scores, tf.float32), axis=-1), value.dtype)
        probs = self.probs_dropout(probs, training=training)
        # Every position attends; only the query rows come back (B, Q, H) / (Q, H).
        context = rows.merge_heads(tf.matmul(probs, value))
        return self.output_dropout(self.attention_output(context), training=training)

    def compute_output_shape(self, hidden_shape: tuple, mask_bias_shape: tuple) -> tuple:
        return hidden_shape


@keras.saving.register_keras_serializable(package="keras_bert")
class GatedFeedForward(ActivationOption, FastKernelsLayer, keras.layers.Layer):
    """GeGLU (Shazeer, 2020): one (H, 2F) product split into an input and a
    gate, activation(input) * gate, then (F, H). The gate lets each unit scale
    its own output, which beats a plain GELU layer of the same cost."""

    config_fields = ("intermediate_size", "activation", "use_bias", "dropout", "initializer_range")

    def __init__(
        self,
        intermediate_size: int,
        activation: str = "gelu",
        use_bias: bool = False,
        dropout: float = 0.0,
        initializer_range: float = 0.02,
        fast_kernels: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(locals())
        self.hidden_dropout = FastDropout(
            dropout, dtype=self.dtype_policy, fast_kernels=fast_kernels
        )

    def build(self, hidden_shape: tuple) -> None:
        dense = dense_options(self)
        self.input_and_gate = FastDense(2 * self.intermediate_size, name="input_and_gate", **dense)
        self.input_and_gate.build(hidden_shape)
        self.ffn_output = FastDense(hidden_shape[-1], name="output", **dense)
        self.ffn_output.build(hidden_shape[:-1] + (self.intermediate_size,))

    def call(self, hidden: tf.Tensor, training: bool | None = None) -> tf.Tensor:
        """(B, T, H) -> (B, T, H)."""
        inputs, gate = tf.split(self.input_and_gate(hidden), 2, axis=-1)  # (B, T, F) each
        gated = self.hidden_dropout(self.activation_fn(inputs) * gate, training=training)
        return self.ffn_output(gated)

    def compute_output_shape(self, hidden_shape: tuple) -> tuple:
        return hidden_shape


@keras.saving.register_keras_serializable(package="keras_bert")
class PreNormBlock(FastKernelsLayer, keras.layers.Layer):
    """hidden + attention(LayerNorm(hidden)), then + feed_forward(LayerNorm(.)).

    `attention_norm=False` for the first block: the embeddings' LayerNorm
    already normalised its input (as ModernBERT, whose first block has none).
    """

    config_fields = (
        "num_heads",
        "intermediate_size",
        "rope_theta",
        "activation",
        "attention_norm",
        "attention_bias",
        "mlp_bias",
        "norm_bias",
        "norm_epsilon",
        "attention_dropout",
        "mlp_dropout",
        "initializer_range",
    )

    def __init__(
        self,
        num_heads: int,
        intermediate_size: int,
        rope_theta: float,
        activation: str = "gelu",
        attention_norm: bool = True,
        attention_bias: bool = False,
        mlp_bias: bool = False,
        norm_bias: bool = False,
        norm_epsilon: float = 1e-5,
        attention_dropout: float = 0.0,
        mlp_dropout: float = 0.0,
        initializer_range: float = 0.02,
        fast_kernels: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(locals())

    def build(self, hidden_shape: tuple, mask_bias_shape: tuple | None = None) -> None:
        hidden = hidden_shape[-1]
        if hidden % self.num_heads:
            raise ValueError(f"hidden size {hidden} is not divisible by {self.num_heads} heads")
        common = dict(dtype=self.dtype_policy, fast_kernels=self.fast_kernels)
        norm = dict(epsilon=self.norm_epsilon, center=self.norm_bias, **common)
        sublayer = dict(initializer_range=self.initializer_range, **common)
        self.attention_layer_norm = (
            FastLayerNorm(name="attention_layer_norm", **norm) if self.attention_norm else None
        )
        self.attention = RotarySelfAttention(
            self.num_heads,
            hidden // self.num_heads,
            self.rope_theta,
            use_bias=self.attention_bias,
            dropout=self.attention_dropout,
            name="attention",
            **sublayer,
        )
        self.mlp_layer_norm = FastLayerNorm(name="mlp_layer_norm", **norm)
        self.feed_forward = GatedFeedForward(
            self.intermediate_size,
            activation=self.activation,
            use_bias=self.mlp_bias,
            dropout=self.mlp_dropout,
            name="feed_forward",
            **sublayer,
        )
        for layer in (self.attention_layer_norm, self.mlp_layer_norm, self.feed_forward):
            if layer is not None:
                layer.build(hidden_shape)
        self.attention.build(hidden_shape)

    def call(
        self,
        hidden: tf.Tensor,
        mask_bias: tf.Tensor,
        packing: Any = None,
        query_packing: Any = None,
        training: bool | None = None,
    ) -> tf.Tensor:
        """hidden (B, T, H), mask_bias (B, 1, 1 or T, T) -> (B, T, H). With
        `packing` (a `keras_bert.layers.packing.TokenPacking`), hidden holds the
        batch's real positions only, (R, H) -> (R, H); with `query_packing`
        too (a subset of them), (R, H) -> (Q, H): attention's keys and values
        from every row, the rest of the block on the Q rows alone."""
        rows = row_layout(packing, query_packing)
        normed = hidden if self.attention_layer_norm is None else self.attention_layer_norm(hidden)
        attended = self.attention(
            normed, mask_bias, packing=packing, query_packing=query_packing, training=training
        )
        hidden = rows.queries(hidden) + attended  # (B, Q, H) / (Q, H)
        return hidden + self.feed_forward(self.mlp_layer_norm(hidden), training=training)

    def compute_output_shape(self, hidden_shape: tuple, mask_bias_shape: tuple) -> tuple:
        return hidden_shape
