"""EntityF1: entity-level F1 as a streaming Keras metric, computed in the graph.

`keras_bert.datasets.metrics.entity_scores` scores decoded tag strings after
prediction; this metric scores the same entities batch by batch inside
`fit` / `evaluate`'s steps: plain TensorFlow ops with static shapes (cumsum,
scatter, gather), so it runs where those steps run, XLA-compiled
(`jit_compile=True`, Keras' default on GPUs) and under `tf.distribute` (its
three counts are "sum" variables: replicas add up). No `py_function`, which
neither XLA nor TPUs can run.

It reads what a tagger's steps get: y_true the tag id of each word piece
(B, T), y_pred the logits (B, T, K) and sample weights (B, T) that are 0 on the
pieces that are not a word's first (and on padding). The words of a row are
its pieces of positive weight (and id >= 0, for `ignore_class=-1` style
labels), in order; the other pieces do not break an entity. Weights select
words and do not weigh entities, as entity F1 has no weights.

Entities are chunked by conlleval's rules, seqeval's default (lenient) mode:
the same reading as `entity_scores(true, predicted, scheme=...)` (L- and U-
tags as seqeval reads them, or as E- and S- with scheme="BILOU"). Strict mode
is not computed here.

Legend for shape comments: B = batch, T = sequence length, K = number of tags,
W = T + 1 (the words, then at least one O that ends the row's last entity).
"""

from __future__ import annotations

from typing import Any, Sequence

import keras
import tensorflow as tf

from keras_bert.config_fields import ConfigFields
from keras_bert.datasets.metrics import SCHEMES, lenient_tag

# Prefix codes of the lenient rules; _OTHER: a prefix they do not know (L, U
# without scheme="BILOU"), which starts or ends an entity only where the type changes.
_O, _B, _I, _E, _S, _OTHER = range(6)
_CODES = {"O": _O, "B": _B, "I": _I, "E": _E, "S": _S, "L": _OTHER, "U": _OTHER}


def _among(codes, wanted):
    return tf.reduce_any(tf.stack([tf.equal(codes, c) for c in wanted]), axis=0)


def _shift(values, fill, step):
    """(B, W) values moved one column right (step 1) or left (step -1), `fill` entering."""
    edge = tf.fill([tf.shape(values)[0], 1], tf.constant(fill, values.dtype))
    if step == 1:
        return tf.concat([edge, values[:, :-1]], axis=1)
    return tf.concat([values[:, 1:], edge], axis=1)


def _rows_like(values):
    return tf.broadcast_to(tf.range(tf.shape(values)[0])[:, tf.newaxis], tf.shape(values))


def _latest_start(starts):
    """(B, W) bool -> (B, W) int32: the column of the latest start at or before
    each column, -1 before the first. (TensorFlow has no cumulative max: the
    k-th start's column is scattered to slot k, then read back by start count.)"""
    width = tf.shape(starts)[1]
    count = tf.cumsum(tf.cast(starts, tf.int32), axis=1)  # (B, W)
    columns = tf.broadcast_to(tf.range(width)[tf.newaxis], tf.shape(starts))
    slot = tf.where(starts, count - 1, width)  # non-starts go to a spare slot, adding 0
    column_of = tf.scatter_nd(
        tf.stack([_rows_like(starts), slot], axis=-1),
        tf.where(starts, columns + 1, 0),
        tf.stack([tf.shape(starts)[0], width + 1]),
    )  # (B, W + 1)
    latest = tf.gather(column_of, tf.maximum(count - 1, 0), batch_dims=1) - 1  # (B, W)
    return tf.where(count > 0, latest, -1)


def _chunks(prefix, kind):
    """Prefix codes and type ids (B, W) of rows of words ending in O ->
    (ends, start, kind): whether an entity ends at each word (B, W), the
    column where it starts (B, W) and its type (`kind` there)."""
    prev_prefix, prev_kind = _shift(prefix, _O, 1), _shift(kind, -1, 1)
    next_prefix, next_kind = _shift(prefix, _O, -1), _shift(kind, -1, -1)
    inside = tf.not_equal(prefix, _O)
    starts = (
        _among(prefix, (_B, _S))
        | (_among(prev_prefix, (_E, _S, _O)) & _among(prefix, (_E, _I)))
        | (inside & tf.not_equal(prev_kind, kind))
    )
    ends = (
        _among(prefix, (_E, _S))
        | (_among(prefix, (_B, _I)) & _among(next_prefix, (_B, _S, _O)))
        | (inside & tf.not_equal(kind, next_kind))
    )
    # An entity ending at a word began at the latest start, as seqeval's
    # begin_offset keeps it.
    return ends, _latest_start(starts), kind


@keras.saving.register_keras_serializable(package="keras_bert")
class EntityF1(ConfigFields, keras.metrics.Metric):
    """Entity-level F1 (micro, over all types) of a tagger, accumulated over batches.

    Args:
      label_names: the tag names, index-aligned with the logits (the tagger's
        `label_names`).
      scheme: the tags' scheme, one of `keras_bert.datasets.metrics.SCHEMES`
        ("IOB2" by default), checked against `label_names`; None reads any tags
        (IO labels such as "PER" too), as `entity_scores` does.
      name, dtype: as any Keras metric.

    `update_state(y_true, y_pred, sample_weight)`: tag ids (B, T), logits
    (B, T, K) and weights (B, T), 0 where a piece is not a word (see the
    module docstring). `result()`: F1 = 2 correct / (true + predicted entities),
    0 when there are none.

    Compile it among the weighted metrics, `compile(weighted_metrics=[EntityF1(...)])`:
    Keras hands the sample weights to those only, and without them every piece
    of a tagger's batch reads as a word (its non-first pieces as O tags,
    splitting entities).
    """

    config_fields = ("label_names", "scheme", "name", "dtype")

    def __init__(
        self,
        label_names: Sequence[str],
        scheme: str | None = "IOB2",
        name: str = "entity_f1",
        dtype: Any = None,
    ) -> None:
        super().__init__(name=name, dtype=dtype)
        if scheme is not None and scheme not in SCHEMES:
            raise ValueError(f"scheme must be one of {', '.join(SCHEMES)} or None, got {scheme!r}")
        label_names = [str(label) for label in label_names]
        if not label_names:
            raise ValueError(
                "EntityF1 needs the tag names (label_names), index-aligned with the logits"
            )
        split = [lenient_tag(label, scheme) for label in label_names]
        kinds = sorted({kind for prefix, kind in split if prefix != "O"})

        # === Tables: tag id + 1 -> prefix code / type id (entry 0: no word, an O) ===
        self._prefixes = [_O] + [_CODES[prefix] for prefix, _ in split]
        self._kinds = [-1] + [kinds.index(kind) if prefix != "O" else -1 for prefix, kind in split]

        # === State ===
        self.true_entities = self.add_variable(
            shape=(), initializer="zeros", dtype="float32", name="true_entities"
        )
        self.predicted_entities = self.add_variable(
            shape=(), initializer="zeros", dtype="float32", name="predicted_entities"
        )
        self.correct_entities = self.add_variable(
            shape=(), initializer="zeros", dtype="float32", name="correct_entities"
        )

        # === Config ===
        self.label_names = label_names
        self.scheme = scheme

    def update_state(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> None:
        y_pred = tf.convert_to_tensor(y_pred)
        y_true = tf.convert_to_tensor(y_true)
        if y_true.shape.rank == y_pred.shape.rank:  # (B, T, 1) labels
            y_true = tf.squeeze(y_true, axis=-1)
        true_ids = tf.cast(y_true, tf.int32)  # (B, T)
        pred_ids = tf.argmax(y_pred, axis=-1, output_type=tf.int32)  # (B, T)
        words = true_ids >= 0  # (B, T)
        if sample_weight is not None:
            weight = tf.convert_to_tensor(sample_weight)
            if weight.shape.rank == 3:
                weight = tf.squeeze(weight, axis=-1)
            words &= tf.broadcast_to(
                tf.reshape(weight, [tf.shape(weight)[0], -1]) > 0, tf.shape(true_ids)
            )

        # Each row's words packed to its front (word w of a row at column w),
        # O after them: a piece that is not a word does not split an entity.
        batch, width = tf.shape(true_ids)[0], tf.shape(true_ids)[1]
        column = tf.where(words, tf.cumsum(tf.cast(words, tf.int32), axis=1) - 1, width)
        at = tf.stack([_rows_like(true_ids), column], axis=-1)  # (B, T, 2)

        def packed(ids):  # (B, T) -> (B, W) tag id + 1, 0 past the row's words
            return tf.scatter_nd(at, tf.where(words, ids + 1, 0), tf.stack([batch, width + 1]))

        true_end, true_start, true_kind = _chunks(*self._read(packed(true_ids)))
        pred_end, pred_start, pred_kind = _chunks(*self._read(packed(pred_ids)))
        correct = (
            true_end & pred_end & tf.equal(true_start, pred_start) & tf.equal(true_kind, pred_kind)
        )
        for variable, counted in (
            (self.true_entities, true_end),
            (self.predicted_entities, pred_end),
            (self.correct_entities, correct),
        ):
            variable.assign_add(tf.reduce_sum(tf.cast(counted, "float32")))

    def _read(self, ids):
        # Constants of the traced step (not tensors held by the metric, which
        # would live on one device).
        return (
            tf.gather(tf.constant(self._prefixes, tf.int32), ids),
            tf.gather(tf.constant(self._kinds, tf.int32), ids),
        )

    def result(self) -> tf.Tensor:
        f1 = tf.math.divide_no_nan(
            2.0 * self.correct_entities, self.true_entities + self.predicted_entities
        )
        return tf.cast(f1, self.dtype)
