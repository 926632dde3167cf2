"""The post-LN Transformer block of BERT (Vaswani et al., 2017; Devlin et al., 2018).

Written once, as the paper draws it. The speed work sits behind named helpers
a reader can skip (`docs/fast_path.md`): the rows a call runs on (padded, the
padding packed out, only the rows whose output is read) are a row layout
(`keras_bert.layers.packing.row_layout`), the training step's one product for
query, key and value is `keras_bert.kernels.fused_projection`, and the exact
GELU's fast forms are `keras_bert.kernels.gelu.fast_gelu`.

Legend for shape comments: B = batch, T = sequence length, Q = the positions
whose output a call returns (T unless it selects queries), N = attention
heads, D = head size, H = hidden size (N * D), F = intermediate (feed-forward)
size. With the padding packed out, (B, T, H) reads (R, H), R = real positions.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import keras
import tensorflow as tf
from keras import ops

from keras_bert.kernels.dense import FastDense
from keras_bert.kernels.dropout import FastDropout
from keras_bert.kernels.fused_projection import can_fuse, fused_projection, scaled
from keras_bert.kernels.gelu import fast_gelu
from keras_bert.kernels.layer_norm import FastLayerNorm
from keras_bert.kernels.switch import FastKernelsLayer
from keras_bert.layers.activations import ActivationOption
from keras_bert.layers.packing import row_layout


@keras.saving.register_keras_serializable(package="keras_bert")
class SelfAttention(FastKernelsLayer, keras.layers.Layer):
    """Multi-head scaled dot-product self-attention with an additive mask bias.
    `fast_kernels` (`keras_bert.kernels.switch`): the fast or the plain path."""

    config_fields = ("num_heads", "head_size", "dropout", "initializer_range")

    def __init__(
        self,
        num_heads: int,
        head_size: int,
        dropout: float = 0.0,
        initializer_range: float = 0.02,
        fast_kernels: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(locals())
        fast = {"fast_kernels": fast_kernels}
        hidden = num_heads * head_size
        init = keras.initializers.TruncatedNormal(stddev=initializer_range)
        # Separate H x H projections, the layout of the original checkpoints.
        policy = self.dtype_policy
        self.query = FastDense(hidden, kernel_initializer=init, dtype=policy, name="query", **fast)
        self.key = FastDense(hidden, kernel_initializer=init, dtype=policy, name="key", **fast)
        self.value = FastDense(hidden, kernel_initializer=init, dtype=policy, name="value", **fast)
        self.attention_output = FastDense(
            hidden, kernel_initializer=init, dtype=policy, name="output", **fast
        )
        self.probs_dropout = FastDropout(dropout, dtype=policy, **fast)

    def build(self, hidden_shape: tuple, mask_bias_shape: tuple | None = None) -> None:
        for dense in (self.query, self.key, self.value):
            dense.build(hidden_shape)
        self.attention_output.build(hidden_shape[:-1] + (self.num_heads * self.head_size,))

    def call(
        self,
        hidden: tf.Tensor,
        mask_bias: tf.Tensor,
        query_hidden: tf.Tensor | None = None,
        packing: Any = None,
        query_packing: Any = None,
        training: bool | None = None,
    ) -> tf.Tensor:
        """hidden (B, T, H) -> (B, T, H); with `query_hidden` (B, Q, H), only those
        Q positions attend (to all T): -> (B, Q, H). With `packing` (a
        `TokenPacking`), hidden holds the real positions only, (R, H) -> (R, H),
        and with `query_packing` too, query_hidden (Q, H) -> (Q, H)
        (`keras_bert.layers.packing.PackedRows`)."""
        rows = row_layout(packing, query_packing)
        scale = 1.0 / math.sqrt(self.head_size)  # on the queries, before the product
        if query_hidden is None:
            query, key, value = self._heads(
                hidden,
                (self.query, self.key, self.value),
                (scale, 1.0, 1.0),
                rows.split_heads,
                training,
            )
        else:
            (query,) = self._heads(
                query_hidden, (self.query,), (scale,), rows.split_query_heads, training
            )  # (B, N, Q, D)
            key, value = self._heads(
                hidden, (self.key, self.value), (1.0, 1.0), rows.split_heads, training
            )  # (B, N, T, D)
        # transpose_b: the kernel reads K as stored, no transposed copy (nor its gradient's).
        scores = tf.linalg.matmul(query, key, transpose_b=True)  # (B, N, Q, T)
        scores = scores + ops.cast(mask_bias, scores.dtype)
        # Softmax in float32: in float16 / bfloat16 the sum over keys loses precision.
        probs = ops.cast(ops.softmax(ops.cast(scores, "float32"), axis=-1), value.dtype)
        probs = self.probs_dropout(probs, training=training)
        context = ops.matmul(probs, value)  # (B, N, Q, D)
        return self.attention_output(rows.merge_heads(context))  # (B, Q, H)

    def _heads(
        self,
        inputs: tf.Tensor,
        projections: Sequence[FastDense],
        scales: Sequence[float],
        split_heads: Callable,
        training: bool | None,
    ) -> list[tf.Tensor]:
        """inputs (B, T, H) -> one (B, N, T, D) per projection, times its scale,
        split into heads by the row layout's `split_heads`. Training on the fast
        kernels: one product for all of them (`fused_projection`), split at once;
        otherwise (inference, the plain path) one product per projection."""
        if not (training and self.runs_fast_kernels and can_fuse(projections)):
            return [
                split_heads(scaled(p(inputs), s), self.num_heads)
                for p, s in zip(projections, scales)
            ]
        heads = split_heads(
            fused_projection(inputs, projections, scales), self.num_heads, len(projections)
        )  # (k, B, N, T, D), or (B, N, T, D)
        return tf.unstack(heads, len(projections)) if len(projections) > 1 else [heads]

    def compute_output_shape(
        self, hidden_shape: tuple, mask_bias_shape: tuple, query_hidden_shape: tuple | None = None
    ) -> tuple:
        return hidden_shape if query_hidden_shape is None else query_hidden_shape


@keras.saving.register_keras_serializable(package="keras_bert")
class TransformerBlock(ActivationOption, FastKernelsLayer, keras.layers.Layer):
    """attention -> dropout -> add -> LayerNorm -> FFN (GELU) -> dropout -> add -> LayerNorm.
    `fast_kernels` (`keras_bert.kernels.switch`): the fast or the plain path."""

    config_fields = (
        "num_heads",
        "intermediate_size",
        "activation",
        "dropout",
        "attention_dropout",
        "initializer_range",
        "layer_norm_epsilon",
    )

    def __init__(
        self,
        num_heads: int,
        intermediate_size: int,
        activation: str = "gelu",
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        initializer_range: float = 0.02,
        layer_norm_epsilon: float = 1e-12,
        fast_kernels: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(locals())

    def build(self, hidden_shape: tuple, mask_bias_shape: tuple | None = None) -> None:
        input_shape = hidden_shape  # (B, T, H)
        hidden = input_shape[-1]
        if hidden % self.num_heads:
            raise ValueError(f"hidden size {hidden} is not divisible by {self.num_heads} heads")
        init = keras.initializers.TruncatedNormal(stddev=self.initializer_range)
        policy = self.dtype_policy
        fast = {"fast_kernels": self.fast_kernels}
        self.attention = SelfAttention(
            self.num_heads,
            hidden // self.num_heads,
            dropout=self.attention_dropout,
            initializer_range=self.initializer_range,
            dtype=policy,
            name="attention",
            **fast,
        )
        self.attention.build(input_shape)
        self.attention_layer_norm = FastLayerNorm(
            epsilon=self.layer_norm_epsilon, dtype=policy, name="attention_layer_norm", **fast
        )
        self.attention_layer_norm.build(input_shape)
        self.intermediate = FastDense(
            self.intermediate_size,
            kernel_initializer=init,
            dtype=policy,
            name="intermediate",
            **fast,
        )
        self.intermediate.build(input_shape)
        self.ffn_output = FastDense(
            hidden, kernel_initializer=init, dtype=policy, name="output", **fast
        )
        self.ffn_output.build(input_shape[:-1] + (self.intermediate_size,))
        self.output_layer_norm = FastLayerNorm(
            epsilon=self.layer_norm_epsilon, dtype=policy, name="output_layer_norm", **fast
        )
        self.output_layer_norm.build(input_shape)
        self.hidden_dropout = FastDropout(self.dropout, dtype=policy, **fast)

    def call(
        self,
        hidden: tf.Tensor,
        mask_bias: tf.Tensor,
        query_positions: tf.Tensor | None = None,
        packing: Any = None,
        query_packing: Any = None,
        training: bool | None = None,
    ) -> tf.Tensor:
        """hidden (B, T, H) -> (B, T, H).

        With `query_positions` (B, Q), the block's output only at those
        positions, (B, Q, H): they attend to all T positions, and the rest of
        the block runs on Q rows instead of T (the pretrainer's last block:
        [CLS] and the masked positions, 21 of 128 rows at 20 predictions).
        With `packing` (a `keras_bert.layers.packing.TokenPacking`), hidden
        holds the batch's real positions only, (R, H) -> (R, H); with
        `query_packing` too (a subset of them), (R, H) -> (Q, H) (a
        classifier's [CLS], a tagger's labelled pieces). `row_layout` says
        which rows are the queries and how attention goes between layouts.
        """
        rows = row_layout(packing, query_packing, query_positions)
        queries = rows.queries(hidden)  # (B, Q, H)
        attended = self.attention(
            hidden,
            rows.query_mask_bias(mask_bias),
            queries if rows.selects_queries else None,
            packing=packing,
            query_packing=query_packing,
            training=training,
        )
        attended = self.hidden_dropout(attended, training=training)
        hidden = self.attention_layer_norm(queries + attended)  # (B, Q, H)
        feed_forward = self._feed_forward(hidden, packed=packing is not None, training=training)
        feed_forward = self.hidden_dropout(feed_forward, training=training)
        return self.output_layer_norm(hidden + feed_forward)  # (B, Q, H)

    def _feed_forward(self, hidden: tf.Tensor, packed: bool, training: bool | None) -> tf.Tensor:
        """(B, Q, H) -> (B, Q, H): intermediate, activation, output, on rows (B * Q, H)
        so that the GELU directly follows its product, which the CPU kernels fuse."""
        rows = hidden if len(hidden.shape) == 2 else tf.reshape(hidden, (-1, hidden.shape[-1]))
        intermediate = self.intermediate(rows)  # (B * Q, F)
        if self.activation == "gelu" and self.runs_fast_kernels:
            # The exact GELU in the form for the step (`fast_gelu`): fused, compiled or plain.
            intermediate = fast_gelu(intermediate, training, varying_rows=packed)
        else:
            intermediate = self.activation_fn(intermediate)
        feed_forward = self.ffn_output(intermediate)  # (B * Q, H)
        return (
            feed_forward if len(hidden.shape) == 2 else tf.reshape(feed_forward, tf.shape(hidden))
        )

    def compute_output_shape(
        self,
        hidden_shape: tuple,
        mask_bias_shape: tuple,
        query_positions_shape: tuple | None = None,
    ) -> tuple:
        if query_positions_shape is None:
            return hidden_shape
        return (hidden_shape[0], query_positions_shape[1], hidden_shape[2])
