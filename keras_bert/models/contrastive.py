"""Contrastive losses for sentence embeddings, over the global batch, and gradient caching.

The losses are sentence-transformers' (same formulas, same defaults):

  MultipleNegativesRankingLoss  (anchor, positive[, negative]) rows: each
      anchor's positive against every positive (and negative) of the batch,
      cross-entropy over scale * cosine (scale 20); `symmetric` adds each
      positive against every anchor (MultipleNegativesSymmetricRankingLoss).
  CoSENTLoss  (text_a, text_b) rows with a score: log(1 + sum over pairs of
      rows i, j with score_i < score_j of exp(scale * (cos_i - cos_j))).

The negatives are the global batch: under a `tf.distribute` strategy each
replica gathers the others' embeddings (`ReplicaContext.all_gather`, whose
gradient sums the replicas' gradients and hands each its own rows), so two
replicas of 16 rows train exactly as one device with 32. Each replica
returns its share of the global loss; Keras' optimizer sums the replicas'
gradients, so the shares add up to the gradient of the global loss.

Gradient caching (Gao et al., 2021, "Scaling Deep Contrastive Learning Batch
Size under Memory Limited Setup"; sentence-transformers' Cached* losses):
with `mini_batch_size`, the embeddings of a large batch are computed in
chunks without keeping activations, the loss and its gradient with respect
to the embeddings are computed on the whole batch, and then each chunk is
run again with the tape on, its gradient being the embeddings' gradient
pulled back through it. Memory is that of one chunk; the loss and the
gradients equal the uncached ones (the chunks' dropout draws are replayed).

Legend for shape comments: B = global batch, b = this replica's rows,
D = embedding size, V = candidates per anchor (B, or 2B with negatives).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import keras
import tensorflow as tf

from keras_bert.config_fields import ConfigFields
from keras_bert.layers.sentence_pooling import l2_normalize

ANCHOR, POSITIVE, NEGATIVE = "anchor", "positive", "negative"
COLUMNS = (ANCHOR, POSITIVE, NEGATIVE)


# === The global batch ===


def gather_replicas(*parts: tf.Tensor) -> tuple[list[tf.Tensor], tf.Tensor]:
    """(b, k_i) tensors of this replica -> ([(B, k_i)]: every replica's rows,
    in replica order; the offset of this replica's first row). Without a
    strategy (or with one replica): (parts, 0). Replicas may hold different
    row counts.

    One collective for everything: the parts travel together, with a column
    saying which replica each row came from (the offset counts the rows of
    the replicas before). Several differentiable gathers would each add
    collectives to the backward pass, which the replicas' tapes may launch
    in different orders (each replica's collectives must come in one order)."""
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return list(parts), tf.constant(0, tf.int32)
    replica = tf.cast(context.replica_id_in_sync_group, tf.float32)
    rows = tf.shape(parts[0])[:1]
    together = tf.concat([*parts, tf.fill(tf.concat([rows, [1]], 0), replica)], axis=1)
    gathered = context.all_gather(together, axis=0)  # (B, sum k_i + 1)
    sizes = tf.stack([tf.shape(part)[-1] for part in parts] + [1])
    *gathered_parts, source = tf.split(gathered, sizes, num=len(parts) + 1, axis=1)
    offset = tf.reduce_sum(tf.cast(tf.stop_gradient(source[:, 0]) < replica, tf.int32))
    return gathered_parts, offset


def num_replicas() -> int:
    context = tf.distribute.get_replica_context()
    return 1 if context is None else context.num_replicas_in_sync


# === Losses ===


@keras.saving.register_keras_serializable(package="keras_bert")
class MultipleNegativesRankingLoss(ConfigFields):
    """In-batch negatives: for anchor i, positive i against every positive
    (and every hard negative) of the global batch, cross-entropy over
    `scale` * cosine similarity. `symmetric`: the mean with the same loss
    from each positive to every anchor. `mini_batch_size`: gradient caching
    in chunks of that many rows (None: the whole batch at once)."""

    needs_scores = False
    config_fields = ("scale", "symmetric", "mini_batch_size")

    def __init__(
        self, scale: float = 20.0, symmetric: bool = False, mini_batch_size: int | None = None
    ) -> None:
        self.scale = float(scale)
        self.symmetric = bool(symmetric)
        self.mini_batch_size = _check_mini_batch_size(mini_batch_size)

    def __call__(
        self, embeddings: Mapping[str, tf.Tensor], scores: Any = None
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """{anchor, positive[, negative]: (b, D)} -> (this replica's share of
        the global mean loss, this replica's mean loss over its rows)."""
        _check_columns(embeddings, (ANCHOR, POSITIVE), type(self).__name__)
        anchors = l2_normalize(tf.cast(embeddings[ANCHOR], tf.float32))  # (b, D)
        positives = l2_normalize(tf.cast(embeddings[POSITIVE], tf.float32))
        local = [positives]
        if NEGATIVE in embeddings:
            local.append(l2_normalize(tf.cast(embeddings[NEGATIVE], tf.float32)))
        if self.symmetric:
            local.append(anchors)
        gathered, offset = gather_replicas(*local)  # each (B, D)
        all_positives = gathered[0]
        candidates = tf.concat(
            gathered[:2] if NEGATIVE in embeddings else gathered[:1], axis=0
        )  # (V, D)
        labels = offset + tf.range(tf.shape(anchors)[0])  # (b,)
        logits = self.scale * tf.matmul(anchors, candidates, transpose_b=True)  # (b, V)
        rows = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)  # (b,)
        if self.symmetric:
            all_anchors = gathered[-1]  # (B, D)
            backward = self.scale * tf.matmul(positives, all_anchors, transpose_b=True)  # (b, B)
            rows = (rows + tf.nn.sparse_softmax_cross_entropy_with_logits(labels, backward)) / 2
        total_rows = tf.shape(all_positives)[0]
        share = tf.reduce_sum(rows) / tf.cast(total_rows, tf.float32)
        return share, tf.reduce_mean(rows)


@keras.saving.register_keras_serializable(package="keras_bert")
class CoSENTLoss(ConfigFields):
    """Scored pairs (Su, 2022; sentence-transformers' CoSENTLoss): the pairs'
    cosines ranked as their scores, log(1 + sum_{s_i < s_j} exp(scale *
    (cos_i - cos_j))) over every pair of rows of the global batch."""

    needs_scores = True
    config_fields = ("scale", "mini_batch_size")

    def __init__(self, scale: float = 20.0, mini_batch_size: int | None = None) -> None:
        self.scale = float(scale)
        self.mini_batch_size = _check_mini_batch_size(mini_batch_size)

    def __call__(
        self, embeddings: Mapping[str, tf.Tensor], scores: Any = None
    ) -> tuple[tf.Tensor, tf.Tensor]:
        _check_columns(embeddings, (ANCHOR, POSITIVE), type(self).__name__)
        if scores is None:
            raise ValueError("CoSENTLoss trains on scored pairs: fit((texts_a, texts_b), scores)")
        a = l2_normalize(tf.cast(embeddings[ANCHOR], tf.float32))  # (b, D)
        b = l2_normalize(tf.cast(embeddings[POSITIVE], tf.float32))
        cosines = self.scale * tf.reduce_sum(a * b, axis=-1)  # (b,)
        scores = tf.stop_gradient(tf.reshape(tf.cast(scores, tf.float32), [-1]))
        (cosines, scores), _ = gather_replicas(cosines[:, None], scores[:, None])
        cosines, scores = cosines[:, 0], scores[:, 0]  # (B,) each
        differences = cosines[:, None] - cosines[None, :]  # (B, B): cos_i - cos_j
        ranked = scores[:, None] < scores[None, :]
        differences = tf.where(ranked, differences, tf.constant(-1e12, tf.float32))
        loss = tf.reduce_logsumexp(tf.concat([tf.zeros([1]), tf.reshape(differences, [-1])], 0))
        # Every replica computes the whole loss; their shares add up to it.
        return loss / num_replicas(), loss


LOSSES = {"multiple_negatives_ranking": MultipleNegativesRankingLoss, "cosent": CoSENTLoss}


def get_loss(loss: Any) -> Any:
    """A loss object, or its name in `LOSSES`."""
    if isinstance(loss, str):
        if loss not in LOSSES:
            raise ValueError(f"loss {loss!r}: choose one of {sorted(LOSSES)} or pass a loss object")
        return LOSSES[loss]()
    if not callable(loss) or not hasattr(loss, "mini_batch_size"):
        raise TypeError(
            f"loss must be a contrastive loss (MultipleNegativesRankingLoss, "
            f"CoSENTLoss) or one of {sorted(LOSSES)}; got {loss!r}"
        )
    return loss


def _check_columns(embeddings, needed, name):
    missing = [column for column in needed if column not in embeddings]
    if missing:
        raise ValueError(
            f"{name} needs the text columns {list(needed)}; the batch has {sorted(embeddings)}"
        )


def _check_mini_batch_size(size):
    if size is not None and (not isinstance(size, int) or size < 1):
        raise ValueError(f"mini_batch_size must be a positive integer or None, got {size!r}")
    return size


# === Gradients, whole or cached ===

Embed = Callable[[Mapping[str, tf.Tensor]], tf.Tensor]


def loss_and_gradients(
    embed: Embed,
    features: Mapping[str, Mapping[str, tf.Tensor]],
    loss: Any,
    scores: Any,
    variables: list,
    scale_loss: Callable[[tf.Tensor], tf.Tensor] = lambda x: x,
    seed_states: list | None = None,
) -> tuple[tf.Tensor, tf.Tensor, list]:
    """(share, mean over this replica's rows, gradients of `scale_loss(share)`
    with respect to `variables`) for one batch: {column: features (b, T)}.
    `embed(features)` -> (b, D) runs the model in training mode. With the
    loss's `mini_batch_size`, by gradient caching (`seed_states`: the random
    generators' state variables, restored so each chunk's second pass draws
    the same dropout)."""
    if loss.mini_batch_size is None:
        with tf.GradientTape() as tape:
            share, value = loss({name: embed(part) for name, part in features.items()}, scores)
            scaled = scale_loss(share)
        return share, value, _dense(tape.gradient(scaled, variables), variables)
    return _cached(embed, features, loss, scores, variables, scale_loss, seed_states or [])


def _cached(embed, features, loss, scores, variables, scale_loss, seed_states):
    size = loss.mini_batch_size
    # Pass 1: every column's embeddings in chunks, no tape; each chunk's
    # random state is kept for its second pass.
    embeddings, states = {}, {}
    for name, part in features.items():
        embeddings[name], states[name] = _embed_in_chunks(embed, part, size, seed_states)
    after_first_pass = [tf.identity(state) for state in seed_states]
    # The loss on the whole batch, and its gradient with respect to the embeddings.
    with tf.GradientTape() as tape:
        tape.watch(list(embeddings.values()))
        share, value = loss(embeddings, scores)
        scaled = scale_loss(share)
    upstream = tape.gradient(scaled, embeddings)
    # Pass 2: each chunk again, its embeddings' gradient pulled back to the weights.
    gradients = [tf.zeros(v.shape, v.dtype) for v in variables]
    for name, part in features.items():
        gradients = _pull_back_in_chunks(
            embed, part, upstream[name], size, variables, gradients, seed_states, states[name]
        )
    for variable, value_after in zip(seed_states, after_first_pass):
        variable.assign(value_after)
    return share, value, gradients


def _rows(features):
    return tf.shape(features["input_ids"])[0]


def _chunk(features, index, size):
    return {key: value[index * size : (index + 1) * size] for key, value in features.items()}


def _embed_in_chunks(embed, features, size, seed_states):
    count = (_rows(features) + size - 1) // size
    outputs = tf.TensorArray(tf.float32, size=count, infer_shape=False)
    saved = [tf.TensorArray(state.dtype, size=count) for state in seed_states]

    def body(index, outputs, saved):
        saved = [array.write(index, tf.identity(state)) for array, state in zip(saved, seed_states)]
        chunk = tf.stop_gradient(tf.cast(embed(_chunk(features, index, size)), tf.float32))
        return index + 1, outputs.write(index, chunk), saved

    _, outputs, saved = tf.while_loop(
        lambda index, *_: index < count, body, (tf.constant(0), outputs, saved)
    )
    return outputs.concat(), saved


def _pull_back_in_chunks(embed, features, upstream, size, variables, gradients, seed_states, saved):
    count = (_rows(features) + size - 1) // size

    def body(index, gradients):
        restore = [state.assign(array.read(index)) for state, array in zip(seed_states, saved)]
        with tf.control_dependencies(restore):
            with tf.GradientTape() as tape:
                chunk = tf.cast(embed(_chunk(features, index, size)), tf.float32)  # (m, D)
                surrogate = tf.reduce_sum(chunk * upstream[index * size : (index + 1) * size])
        new = _dense(tape.gradient(surrogate, variables), variables)
        return index + 1, [total + one for total, one in zip(gradients, new)]

    _, gradients = tf.while_loop(lambda index, _: index < count, body, (tf.constant(0), gradients))
    return gradients


def _dense(gradients, variables):
    """Gradients as dense tensors, zeros where a variable got none."""
    return [
        tf.zeros(v.shape, v.dtype) if g is None else tf.convert_to_tensor(g)
        for g, v in zip(gradients, variables)
    ]
