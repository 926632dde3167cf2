"""The post-LN Transformer block of BERT (Vaswani et al., 2017; Devlin et al., 2018).

Legend for shape comments: B = batch, T = sequence length, N = attention heads,
D = head size, H = hidden size (N * D), F = intermediate (feed-forward) size.
"""

import math

import keras
import tensorflow as tf
from keras import ops

from keras_bert.layers.dense import Dense
from keras_bert.layers.normalization import LayerNormalization


@tf.custom_gradient
def gelu_exact(x):
    """The exact GELU x * Phi(x), values bit-identical to Keras' exact gelu,
    with its derivative Phi(x) + x * phi(x) written out.

    Why: autodiff through erfc builds about twice as many full-size (B, T, F)
    elementwise ops for the backward pass; without XLA to fuse them, GELU
    forward + backward took about 9 % of a CPU pretraining step, and this
    takes about 40 % less time.
    """
    cdf = 0.5 * tf.math.erfc(x * tf.cast(-1.0 / math.sqrt(2.0), x.dtype))  # Phi(x)

    def grad(upstream):
        pdf = tf.exp(-0.5 * tf.square(x)) * tf.cast(1.0 / math.sqrt(2.0 * math.pi), x.dtype)
        return upstream * (cdf + x * pdf)

    return x * cdf, grad


def get_activation(name):
    """Maps BertConfig.hidden_act to a function; "gelu" is the exact (erf) GELU."""
    if name == "gelu":
        return gelu_exact
    if name == "gelu_approximate":
        return lambda x: keras.activations.gelu(x, approximate=True)
    return keras.activations.get(name)


def gather_positions(sequence, positions, flat=False):
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
class SelfAttention(keras.layers.Layer):
    """Multi-head scaled dot-product self-attention with an additive mask bias."""

    def __init__(self, num_heads, head_size, dropout=0.0, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.head_size = head_size
        self.dropout = dropout
        self.initializer_range = initializer_range
        hidden = num_heads * head_size
        init = keras.initializers.TruncatedNormal(stddev=initializer_range)
        # Separate H x H projections, the layout of the original checkpoints.
        self.query = Dense(hidden, kernel_initializer=init, dtype=self.dtype_policy, name="query")
        self.key = Dense(hidden, kernel_initializer=init, dtype=self.dtype_policy, name="key")
        self.value = Dense(hidden, kernel_initializer=init, dtype=self.dtype_policy, name="value")
        self.attention_output = Dense(
            hidden, kernel_initializer=init, dtype=self.dtype_policy, name="output")
        self.probs_dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy)

    def build(self, hidden_shape, mask_bias_shape=None):
        input_shape = hidden_shape
        for dense in (self.query, self.key, self.value):
            dense.build(input_shape)
        self.attention_output.build(input_shape[:-1] + (self.num_heads * self.head_size,))

    def _split_heads(self, x):  # (B, T, H) -> (B, N, T, D)
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        x = ops.reshape(x, (batch, length, self.num_heads, self.head_size))
        return ops.transpose(x, (0, 2, 1, 3))

    def call(self, hidden, mask_bias, query_hidden=None, training=None):
        """hidden (B, T, H) -> (B, T, H); with `query_hidden` (B, Q, H), only those
        Q positions attend (to all T): -> (B, Q, H)."""
        query_hidden = hidden if query_hidden is None else query_hidden
        query = self._split_heads(self.query(query_hidden))  # (B, N, Q, D)
        key = self._split_heads(self.key(hidden))  # (B, N, T, D)
        value = self._split_heads(self.value(hidden))  # (B, N, T, D)
        query = query * ops.cast(1.0 / math.sqrt(self.head_size), query.dtype)
        # transpose_b: the kernel reads K as stored, no transposed copy (nor its gradient's).
        scores = tf.linalg.matmul(query, key, transpose_b=True)  # (B, N, Q, T)
        scores = scores + ops.cast(mask_bias, scores.dtype)
        # Softmax in float32: in float16 / bfloat16 the sum over keys loses precision.
        probs = ops.cast(ops.softmax(ops.cast(scores, "float32"), axis=-1), value.dtype)
        probs = self.probs_dropout(probs, training=training)
        context = ops.matmul(probs, value)  # (B, N, Q, D)
        context = ops.transpose(context, (0, 2, 1, 3))  # (B, Q, N, D)
        batch, length = ops.shape(context)[0], ops.shape(context)[1]
        context = ops.reshape(context, (batch, length, self.num_heads * self.head_size))
        return self.attention_output(context)  # (B, Q, H)

    def compute_output_shape(self, hidden_shape, mask_bias_shape, query_hidden_shape=None):
        return hidden_shape if query_hidden_shape is None else query_hidden_shape

    def get_config(self):
        return {**super().get_config(), "num_heads": self.num_heads,
                "head_size": self.head_size, "dropout": self.dropout,
                "initializer_range": self.initializer_range}


@keras.saving.register_keras_serializable(package="keras_bert")
class TransformerBlock(keras.layers.Layer):
    """attention -> dropout -> add -> LayerNorm -> FFN (GELU) -> dropout -> add -> LayerNorm."""

    def __init__(self, num_heads, intermediate_size, activation="gelu", dropout=0.1,
                 attention_dropout=0.1, initializer_range=0.02, layer_norm_epsilon=1e-12,
                 **kwargs):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.intermediate_size = intermediate_size
        self.activation = activation
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.initializer_range = initializer_range
        self.layer_norm_epsilon = layer_norm_epsilon

    def build(self, hidden_shape, mask_bias_shape=None):
        input_shape = hidden_shape
        hidden = input_shape[-1]
        if hidden % self.num_heads:
            raise ValueError(f"hidden size {hidden} is not divisible by {self.num_heads} heads")
        init = keras.initializers.TruncatedNormal(stddev=self.initializer_range)
        policy = self.dtype_policy
        self.attention = SelfAttention(
            self.num_heads, hidden // self.num_heads, dropout=self.attention_dropout,
            initializer_range=self.initializer_range, dtype=policy, name="attention")
        self.attention.build(input_shape)
        self.attention_layer_norm = LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=policy, name="attention_layer_norm")
        self.attention_layer_norm.build(input_shape)
        self.intermediate = Dense(
            self.intermediate_size, activation=get_activation(self.activation),
            kernel_initializer=init, dtype=policy, name="intermediate")
        self.intermediate.build(input_shape)
        self.ffn_output = Dense(hidden, kernel_initializer=init, dtype=policy, name="output")
        self.ffn_output.build(input_shape[:-1] + (self.intermediate_size,))
        self.output_layer_norm = LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=policy, name="output_layer_norm")
        self.output_layer_norm.build(input_shape)
        self.hidden_dropout = keras.layers.Dropout(self.dropout, dtype=policy)

    def call(self, hidden, mask_bias, query_positions=None, training=None):
        """hidden (B, T, H) -> (B, T, H).

        With `query_positions` (B, Q), the block's output only at those
        positions, (B, Q, H): they attend to all T positions, and the rest of
        the block (residuals, feed-forward, LayerNorms) runs on Q rows instead
        of T. The pretrainer's last block needs only [CLS] and the masked
        positions: 21 of 128 rows at 20 predictions.
        """
        queries = hidden if query_positions is None else gather_positions(hidden, query_positions)
        attended = self.attention(hidden, mask_bias, None if query_positions is None else queries,
                                  training=training)
        attended = self.hidden_dropout(attended, training=training)
        hidden = self.attention_layer_norm(queries + attended)
        feed_forward = self.ffn_output(self.intermediate(hidden))  # (B, T, F) -> (B, T, H)
        feed_forward = self.hidden_dropout(feed_forward, training=training)
        return self.output_layer_norm(hidden + feed_forward)  # (B, T, H)

    def compute_output_shape(self, hidden_shape, mask_bias_shape, query_positions_shape=None):
        if query_positions_shape is None:
            return hidden_shape
        return (hidden_shape[0], query_positions_shape[1], hidden_shape[2])

    def get_config(self):
        return {**super().get_config(), "num_heads": self.num_heads,
                "intermediate_size": self.intermediate_size, "activation": self.activation,
                "dropout": self.dropout, "attention_dropout": self.attention_dropout,
                "initializer_range": self.initializer_range,
                "layer_norm_epsilon": self.layer_norm_epsilon}
