"""ELECTRA's layers: the discriminator head (is each token the original or a
replacement?) and the replacements themselves, sampled from the generator.

(The generator's head is BERT's masked-LM head, `MaskedLMHead`, over the
generator's own narrower embeddings.)

Legend for shape comments: B = batch, T = sequence length, H = hidden size,
P = masked positions per sequence, V = vocabulary size, N = B * P draws,
K = ids per sampling block.
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


# Ids per block of the two-level inverse CDF (`sample_from_softmax`).
SAMPLING_BLOCK = 256


def sample_from_softmax(logits: tf.Tensor, draws: tf.Tensor) -> tf.Tensor:
    """logits (B, P, V) and uniform draws in [0, 1) (B, P) -> ids (B, P) int32
    drawn from softmax(logits), with no gradient (ELECTRA's stop_gradient).

    By the inverse of the cumulative distribution: the first id whose running
    probability passes the draw. One draw per prediction rather than ELECTRA's
    Gumbel noise over all V ids: a replica then cuts its rows out of the
    draws of the whole batch (`ReplacedTokens.update_draws`), so sampling does
    not depend on how replicas and micro-batches split the batch. In two
    levels, blocks of `SAMPLING_BLOCK` ids then the ids of the chosen block:
    a float32 running sum over 30k ids drifts (4.5 % of samples of a 30,522-id
    softmax off the float64 answer; none in two levels) and costs 6x as much
    on the CPU (`tests/models/test_electra_pretrainer.py`, benchmarks/electra_step.py).
    """
    vocabulary = logits.shape[-1]
    blocks = -(-vocabulary // SAMPLING_BLOCK)
    rows = tf.reshape(tf.stop_gradient(tf.cast(logits, tf.float32)), (-1, vocabulary))  # (N, V)
    probabilities = tf.pad(tf.nn.softmax(rows), [[0, 0], [0, blocks * SAMPLING_BLOCK - vocabulary]])
    probabilities = tf.reshape(probabilities, (-1, blocks, SAMPLING_BLOCK))  # (N, V / K, K)
    running = tf.cumsum(tf.reduce_sum(probabilities, axis=-1), axis=-1)  # (N, V / K)
    threshold = tf.reshape(tf.cast(draws, tf.float32), (-1, 1)) * running[:, -1:]  # (N, 1)
    # Rounding may leave the draw at a total: never past the last block, id.
    block = tf.minimum(tf.reduce_sum(tf.cast(running <= threshold, tf.int32), -1), blocks - 1)
    before = tf.gather(tf.pad(running, [[0, 0], [1, 0]]), block, batch_dims=1)  # (N,)
    inside = tf.cumsum(tf.gather(probabilities, block, batch_dims=1), axis=-1)  # (N, K)
    offset = tf.reduce_sum(tf.cast(inside <= threshold - before[:, None], tf.int32), -1)
    ids = block * SAMPLING_BLOCK + tf.minimum(offset, SAMPLING_BLOCK - 1)  # (N,)
    return tf.reshape(tf.minimum(ids, vocabulary - 1), tf.shape(draws))  # (B, P)


@keras.saving.register_keras_serializable(package="keras_bert")
class ReplacedTokens(keras.layers.Layer):
    """ELECTRA's corruption: the generator's logits at the masked positions ->
    the discriminator's input and its labels.

    Each masked position (masked_lm_weights > 0) gets an id sampled from the
    generator's softmax; every other position keeps its id, the original.
    Returns `replaced_ids` (B, T) and `labels` (B, T), int32: 1 where the
    input now differs from the original, so a sample equal to the original
    counts as original (0). The draws come from the layer's seed generator
    (saved in checkpoints with the dropout RNG) unless `draws` is given.
    """

    def __init__(self, seed: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # === Config ===
        self.seed = seed
        # === State ===
        self.seed_generator = keras.random.SeedGenerator(seed)

    def update_draws(self, masked_lm_positions: tf.Tensor) -> tf.Tensor:
        """This replica's uniform draws (B, P) for its rows of one update.

        Every replica draws those of the whole global batch from the same
        seed (replica r holds rows r * B to (r + 1) * B of it, as tf.distribute
        splits batches) and keeps its own rows, so each sequence gets the
        draws it would get on one device; micro-batches are cut from these.
        The (replicas * B, P) draws are few: one per prediction.
        """
        context = tf.distribute.get_replica_context()
        replicas, replica = 1, 0
        if context is not None:
            replicas, replica = context.num_replicas_in_sync, context.replica_id_in_sync_group
        rows = masked_lm_positions.shape[0] or tf.shape(masked_lm_positions)[0]
        predictions = masked_lm_positions.shape[1] or tf.shape(masked_lm_positions)[1]
        draws = keras.random.uniform((replicas * rows, predictions), seed=self.seed_generator)
        return draws[replica * rows : (replica + 1) * rows]  # (B, P)

    def call(
        self,
        masked_lm_logits: tf.Tensor,
        input_ids: tf.Tensor,
        masked_lm_positions: tf.Tensor,
        masked_lm_ids: tf.Tensor,
        masked_lm_weights: tf.Tensor,
        draws: tf.Tensor | None = None,
    ) -> tuple[tf.Tensor, tf.Tensor]:
        if draws is None:
            draws = keras.random.uniform(tf.shape(masked_lm_positions), seed=self.seed_generator)
        sampled = sample_from_softmax(masked_lm_logits, draws)  # (B, P)
        # Padded predictions (weight 0, position 0: [CLS]) write nothing.
        written = tf.cast(masked_lm_weights > 0, tf.int32)  # (B, P)
        at = (
            tf.one_hot(
                tf.cast(masked_lm_positions, tf.int32), tf.shape(input_ids)[1], dtype=tf.int32
            )
            * written[..., None]
        )  # (B, P, T)
        replaced = tf.reduce_max(at, axis=1) > 0  # (B, T)
        sampled_ids = tf.reduce_sum(at * sampled[..., None], axis=1)  # (B, T)
        original_ids = tf.reduce_sum(at * tf.cast(masked_lm_ids, tf.int32)[..., None], axis=1)
        replaced_ids = tf.where(replaced, sampled_ids, tf.cast(input_ids, tf.int32))  # (B, T)
        labels = tf.cast(replaced & tf.not_equal(sampled_ids, original_ids), tf.int32)  # (B, T)
        return replaced_ids, labels

    def compute_output_spec(self, masked_lm_logits, input_ids, *args, **kwargs):
        return (
            keras.KerasTensor(input_ids.shape, dtype="int32"),
            keras.KerasTensor(input_ids.shape, dtype="int32"),
        )

    def get_config(self) -> dict:
        return {**super().get_config(), "seed": self.seed}
