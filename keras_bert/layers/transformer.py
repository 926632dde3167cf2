"""The post-LN Transformer block of BERT (Vaswani et al., 2017; Devlin et al., 2018).

Legend for shape comments: B = batch, T = sequence length, N = attention heads,
D = head size, H = hidden size (N * D), F = intermediate (feed-forward) size.
"""

from __future__ import annotations

import math
from typing import Any

import keras
import tensorflow as tf
from keras import ops

from keras_bert.kernels.dense import FastDense, project
from keras_bert.kernels.dropout import FastDropout
from keras_bert.kernels.gelu import gelu_exact, gelu_exact_compiled, gelu_exact_fused
from keras_bert.kernels.layer_norm import FastLayerNorm
from keras_bert.kernels.switch import FastKernelsOption
from keras_bert.layers.activations import get_activation


def gather_positions(sequence: tf.Tensor, positions: tf.Tensor, flat: bool = False) -> tf.Tensor:
    """sequence (B, T, H), positions (B, P) -> (B, P, H), or (B * P, H) if `flat`.

    Flattened gather as in the original `gather_indexes`: one static-shape
    gather that XLA and TPUs handle well, instead of a batched gather.
    """
    batch, length, hidden = ops.shape(sequence)[0], ops.shape(sequence)[1], ops.shape(sequence)[2]
    offsets = ops.arange(batch, dtype="int32")[:, None] * length  # (B, 1)
    flat_positions = ops.reshape(ops.cast(positions, "int32") + offsets, (-1,))  # (B * P,)
    flat_sequence = ops.reshape(sequence, (-1, hidden))  # (B * T, H)
    gathered = ops.take(flat_sequence, flat_positions, axis=0)  # (B * P, H)
    return gathered if flat else ops.reshape(gathered, (batch, -1, hidden))  # (B, P, H)


@keras.saving.register_keras_serializable(package="keras_bert")
class SelfAttention(FastKernelsOption, keras.layers.Layer):
    """Multi-head scaled dot-product self-attention with an additive mask bias.
    `fast_kernels` (`keras_bert.kernels.switch`): the fast or the plain path."""

    def __init__(self, num_heads: int, head_size: int, dropout: float = 0.0,
                 initializer_range: float = 0.02, fast_kernels: bool = True,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._init_fast_kernels(fast_kernels)
        fast = {"fast_kernels": fast_kernels}
        self.num_heads = num_heads
        self.head_size = head_size
        self.dropout = dropout
        self.initializer_range = initializer_range
        hidden = num_heads * head_size
        init = keras.initializers.TruncatedNormal(stddev=initializer_range)
        # Separate H x H projections, the layout of the original checkpoints.
        policy = self.dtype_policy
        self.query = FastDense(hidden, kernel_initializer=init, dtype=policy, name="query", **fast)
        self.key = FastDense(hidden, kernel_initializer=init, dtype=policy, name="key", **fast)
        self.value = FastDense(hidden, kernel_initializer=init, dtype=policy, name="value",
                               **fast)
        self.attention_output = FastDense(hidden, kernel_initializer=init, dtype=policy,
                                          name="output", **fast)
        self.probs_dropout = FastDropout(dropout, dtype=policy, **fast)

    def build(self, hidden_shape: tuple, mask_bias_shape: tuple | None = None) -> None:
        input_shape = hidden_shape
        for dense in (self.query, self.key, self.value):
            dense.build(input_shape)
        self.attention_output.build(input_shape[:-1] + (self.num_heads * self.head_size,))

    def _heads(self, hidden, projections, scales, training=None, packing=None):
        """hidden (B, T, H) -> one (B, N, T, D) per projection, each scaled.
        With `packing` (a `keras_bert.layers.packing.TokenPacking`), hidden is
        the batch's real positions (R, H): projected there, then split into
        heads in the (B, T) layout by one gather (no transpose).

        Training: the projections run as one product with their kernels side
        by side, (B * T, H) x (H, k * H), and their heads are split by one
        transpose (one gather when packed): the backward pass has one product
        for the input instead of three and their sum. A scale is folded into
        its kernel and bias (H x H) rather than applied to the (B, N, T, D)
        output.
        Inference (and with `fast_kernels=False`, or with LoRA or quantized
        projections): one product per projection. Side by side, the kernels
        would be concatenated (and the query's scaled) again on every call, a
        copy of every attention weight per request, a large share of a small
        batch's serving time.
        """
        def scaled(tensor, scale):
            return tensor if scale == 1.0 else tensor * ops.cast(scale, tensor.dtype)

        def split_heads(outputs, groups=1):  # (B, T, k * H) or (R, k * H) -> (k, B, N, T, D)
            if packing is not None:  # one gather, no transpose (`TokenPacking.unpack_heads`)
                return packing.unpack_heads(outputs, self.num_heads, groups)
            batch, length = ops.shape(hidden)[0], ops.shape(hidden)[1]
            if groups == 1:
                return ops.transpose(ops.reshape(outputs, (
                    batch, length, self.num_heads, self.head_size)), (0, 2, 1, 3))
            heads = ops.reshape(outputs, (batch, length, groups, self.num_heads,
                                          self.head_size))  # (B, T, k, N, D)
            return ops.transpose(heads, (2, 0, 3, 1, 4))

        if not training or not self.runs_fast_kernels or any(
                p.quantization_mode is not None or p.lora_enabled for p in projections):
            return [split_heads(scaled(p(hidden), s))  # (B, N, T, D)
                    for p, s in zip(projections, scales)]
        kernel = tf.concat([scaled(tf.cast(p.kernel, self.compute_dtype), s)
                            for p, s in zip(projections, scales)], axis=1)  # (H, k * H)
        bias = tf.concat([scaled(tf.cast(p.bias, self.compute_dtype), s)
                          for p, s in zip(projections, scales)], axis=0)  # (k * H,)
        rows = tf.reshape(tf.cast(hidden, self.compute_dtype), (-1, kernel.shape[0]))
        hidden_outputs = tf.nn.bias_add(project(rows, kernel), bias)  # (B * T or R, k * H)
        heads = split_heads(hidden_outputs, len(projections))  # (k, B, N, T, D), or (B, N, T, D)
        return tf.unstack(heads, len(projections)) if len(projections) > 1 else [heads]

    def call(self, hidden: tf.Tensor, mask_bias: tf.Tensor, query_hidden: tf.Tensor | None = None,
             packing: Any = None, query_packing: Any = None,
             training: bool | None = None) -> tf.Tensor:
        """hidden (B, T, H) -> (B, T, H); with `query_hidden` (B, Q, H), only those
        Q positions attend (to all T): -> (B, Q, H). With `packing` (a
        `TokenPacking`), hidden holds the real positions only, (R, H) -> (R, H):
        attention runs on them put back in the (B, T) layout; with
        `query_packing` too, only its rows attend: query_hidden (Q, H) -> (Q, H)."""
        # Folded into the query kernel (`_heads`): bit for bit the scaled product at
        # head sizes 4^k (64: a scale of 1/8), within rounding elsewhere.
        query_scale = 1.0 / math.sqrt(self.head_size)
        if query_hidden is None:
            query, key, value = self._heads(
                hidden, (self.query, self.key, self.value), (query_scale, 1.0, 1.0), training,
                packing)
        else:  # packed: the queries in the (B, T) layout of their own packing
            (query,) = self._heads(query_hidden, (self.query,), (query_scale,),
                                   training, query_packing)  # (B, N, Q or T, D)
            key, value = self._heads(hidden, (self.key, self.value), (1.0, 1.0),
                                     training, packing)  # (B, N, T, D)
        # transpose_b: the kernel reads K as stored, no transposed copy (nor its gradient's).
        scores = tf.linalg.matmul(query, key, transpose_b=True)  # (B, N, Q, T)
        scores = scores + ops.cast(mask_bias, scores.dtype)
        # Softmax in float32: in float16 / bfloat16 the sum over keys loses precision.
        probs = ops.cast(ops.softmax(ops.cast(scores, "float32"), axis=-1), value.dtype)
        probs = self.probs_dropout(probs, training=training)
        context = ops.matmul(probs, value)  # (B, N, Q, D)
        if packing is not None:  # (R or Q, H)
            return self.attention_output((query_packing or packing).pack_heads(context))
        context = ops.transpose(context, (0, 2, 1, 3))  # (B, Q, N, D)
        batch, length = ops.shape(context)[0], ops.shape(context)[1]
        context = ops.reshape(context, (batch, length, self.num_heads * self.head_size))
        return self.attention_output(context)  # (B, Q, H)

    def compute_output_shape(self, hidden_shape: tuple, mask_bias_shape: tuple,
                             query_hidden_shape: tuple | None = None) -> tuple:
        return hidden_shape if query_hidden_shape is None else query_hidden_shape

    def get_config(self) -> dict:
        return self._fast_kernels_config({
            **super().get_config(), "num_heads": self.num_heads, "head_size": self.head_size,
            "dropout": self.dropout, "initializer_range": self.initializer_range})


@keras.saving.register_keras_serializable(package="keras_bert")
class TransformerBlock(FastKernelsOption, keras.layers.Layer):
    """attention -> dropout -> add -> LayerNorm -> FFN (GELU) -> dropout -> add -> LayerNorm.
    `fast_kernels` (`keras_bert.kernels.switch`): the fast or the plain path."""

    def __init__(self, num_heads: int, intermediate_size: int, activation: str = "gelu",
                 dropout: float = 0.1, attention_dropout: float = 0.1,
                 initializer_range: float = 0.02, layer_norm_epsilon: float = 1e-12,
                 fast_kernels: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._init_fast_kernels(fast_kernels)
        self.num_heads = num_heads
        self.intermediate_size = intermediate_size
        self.activation = activation
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.initializer_range = initializer_range
        self.layer_norm_epsilon = layer_norm_epsilon

    def build(self, hidden_shape: tuple, mask_bias_shape: tuple | None = None) -> None:
        input_shape = hidden_shape
        hidden = input_shape[-1]
        if hidden % self.num_heads:
            raise ValueError(f"hidden size {hidden} is not divisible by {self.num_heads} heads")
        init = keras.initializers.TruncatedNormal(stddev=self.initializer_range)
        policy = self.dtype_policy
        fast = {"fast_kernels": self.fast_kernels}
        self.attention = SelfAttention(
            self.num_heads, hidden // self.num_heads, dropout=self.attention_dropout,
            initializer_range=self.initializer_range, dtype=policy, name="attention", **fast)
        self.attention.build(input_shape)
        self.attention_layer_norm = FastLayerNorm(
            epsilon=self.layer_norm_epsilon, dtype=policy, name="attention_layer_norm", **fast)
        self.attention_layer_norm.build(input_shape)
        self.intermediate = FastDense(
            self.intermediate_size, kernel_initializer=init, dtype=policy, name="intermediate",
            **fast)
        self.intermediate_activation = get_activation(self.activation, self.runs_fast_kernels)
        self.intermediate.build(input_shape)
        self.ffn_output = FastDense(hidden, kernel_initializer=init, dtype=policy, name="output",
                                    **fast)
        self.ffn_output.build(input_shape[:-1] + (self.intermediate_size,))
        self.output_layer_norm = FastLayerNorm(
            epsilon=self.layer_norm_epsilon, dtype=policy, name="output_layer_norm", **fast)
        self.output_layer_norm.build(input_shape)
        self.hidden_dropout = FastDropout(self.dropout, dtype=policy, **fast)

    def call(self, hidden: tf.Tensor, mask_bias: tf.Tensor,
             query_positions: tf.Tensor | None = None, packing: Any = None,
             query_packing: Any = None, training: bool | None = None) -> tf.Tensor:
        """hidden (B, T, H) -> (B, T, H).

        With `packing` (a `keras_bert.layers.packing.TokenPacking`), hidden
        holds the batch's real positions only, (R, H) -> (R, H): everything but
        attention's product runs on those rows.

        With `query_packing` too (a second `TokenPacking`, of a subset of those
        positions), the block's output only there, (R, H) -> (Q, H): keys and
        values come from all R rows, everything else runs on the Q. A tagger's
        last block needs only its labelled pieces, a classifier's only [CLS].

        With `query_positions` (B, Q), the block's output only at those
        positions, (B, Q, H): they attend to all T positions, and the rest of
        the block (residuals, feed-forward, LayerNorms) runs on Q rows instead
        of T. The pretrainer's last block needs only [CLS] and the masked
        positions: 21 of 128 rows at 20 predictions.
        """
        if packing is not None and query_positions is not None:
            raise ValueError("query_positions and packing: one or the other (query_packing "
                             "for the packed rows)")
        if query_packing is not None:
            if packing is None:
                raise ValueError("query_packing needs packing (the rows its positions are in)")
            # The real rows (of `packing`) at query_packing's positions.
            rows = tf.gather(tf.reshape(packing.row_of, (-1,)), query_packing.flat_rows)
            queries = tf.gather(hidden, rows)  # (Q, H)
        elif query_positions is not None:
            queries = gather_positions(hidden, query_positions)
        else:
            queries = hidden
        if query_positions is not None and mask_bias.shape[2] != 1:
            # Left-to-right attention: a bias row per query (B, 1, T, T) -> (B, 1, Q, T).
            mask_bias = gather_positions(mask_bias[:, 0], query_positions)[:, None]
        attended = self.attention(
            hidden, mask_bias, queries if query_positions is not None or query_packing is not None
            else None, packing=packing, query_packing=query_packing, training=training)
        attended = self.hidden_dropout(attended, training=training)
        hidden = self.attention_layer_norm(queries + attended)
        # The feed-forward layers on rows (R, H): the GELU then directly follows
        # its product, which the CPU kernels fuse (`gelu_exact_fused`).
        rows = hidden if len(hidden.shape) == 2 else tf.reshape(hidden, (-1, hidden.shape[-1]))
        intermediate = self.intermediate(rows)  # (R, F)
        if self.activation == "gelu" and self.runs_fast_kernels:
            intermediate = self._fast_gelu(intermediate, packed=packing is not None,
                                           training=training)
        else:
            intermediate = self.intermediate_activation(intermediate)
        feed_forward = self.ffn_output(intermediate)  # (R, H)
        if len(hidden.shape) != 2:
            feed_forward = tf.reshape(feed_forward, tf.shape(hidden))  # (B, T, H)
        feed_forward = self.hidden_dropout(feed_forward, training=training)
        return self.output_layer_norm(hidden + feed_forward)  # (B, T, H)

    @staticmethod
    def _fast_gelu(rows: tf.Tensor, packed: bool, training: bool | None) -> tf.Tensor:
        """The exact GELU on (rows, F) (`keras_bert.kernels.gelu`). Inference: the
        form the CPU's product takes as a post-op. Training: XLA-compiled with its
        gradient, except on packed rows: XLA compiles once per shape, and their
        count is the batch's real tokens, a new one nearly every step, so the
        compiles would never pay off; there, the plain ops with the derivative
        written out."""
        if not training:
            return gelu_exact_fused(rows)
        return gelu_exact(rows) if packed else gelu_exact_compiled(rows)

    def compute_output_shape(self, hidden_shape: tuple, mask_bias_shape: tuple,
                             query_positions_shape: tuple | None = None) -> tuple:
        if query_positions_shape is None:
            return hidden_shape
        return (hidden_shape[0], query_positions_shape[1], hidden_shape[2])

    def get_config(self) -> dict:
        return self._fast_kernels_config({
            **super().get_config(), "num_heads": self.num_heads,
            "intermediate_size": self.intermediate_size, "activation": self.activation,
            "dropout": self.dropout, "attention_dropout": self.attention_dropout,
            "initializer_range": self.initializer_range,
            "layer_norm_epsilon": self.layer_norm_epsilon})
