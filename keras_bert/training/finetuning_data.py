"""Fine-tuning batches: one epoch at a time, in an order that is a function of
the seed and the epoch alone.

That is what makes a fine-tuning run resumable at the exact step: a rerun
rebuilds epoch e's order from (seed, e) and skips the batches the restored
optimizer step has consumed, instead of depending on a shuffle buffer's state.
Each element is one optimizer update (`batch_size` rows times the gradient
accumulation steps). Under tf.distribute each input pipeline takes its share
of every update's rows and splits it among its replicas, so the union of the
replicas' batches is the one-device batch, row for row.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np
import tensorflow as tf

from keras_bert.dataset_options import without_autotune
from keras_bert.models.batch_trimming import longest_width, trim_padding


def epoch_order(rows: int, seed: int, epoch: int) -> np.ndarray:
    """The permutation of `rows` that epoch `epoch` of a run with `seed` reads."""
    return np.random.default_rng([seed, epoch]).permutation(rows)


def bucket_boundaries(seq_length: int) -> list[int]:
    return list(range(16, seq_length, 16))


def feature_sets(features: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The encoder features of one row layout: `features` itself (one text or
    pair per row), or each text column's ({"anchor": features, "positive":
    ...}: an embedding model's rows of 2-3 texts)."""
    return [features] if "input_mask" in features else list(features.values())


def num_rows(data: Mapping[str, Any]) -> int:
    return len(feature_sets(data["features"])[0]["input_mask"])


def _row_length(features):
    """A row's length in the graph: its longest text's (rows of several texts)."""
    return tf.reduce_max([tf.reduce_sum(part["input_mask"]) for part in feature_sets(features)])


def _trim(elements, seq_length):
    """A batch's padding past its longest row cut: every text column to its own
    longest (the targets too where they have a token axis, as a tagger's)."""
    features, *rest = elements
    if "input_mask" in features:
        return trim_padding(elements, seq_length, longest_width(features["input_mask"], seq_length))
    columns = {
        name: trim_padding(part, seq_length, longest_width(part["input_mask"], seq_length))
        for name, part in features.items()
    }
    return (columns, *rest)


def batches_per_epoch(
    data: Mapping[str, Any],
    batch_size: int,
    seq_length: int,
    bucket_by_length: bool = False,
    drop_remainder: bool = False,
) -> int:
    """Batches `epoch_dataset` yields in one pass. With length buckets each
    bucket ends on its own partial batch, so there are more than n / batch_size;
    tf.data puts a length in bucket i when boundaries[i-1] <= length < boundaries[i]."""
    lengths = np.max(
        [np.asarray(part["input_mask"]).sum(axis=1) for part in feature_sets(data["features"])],
        axis=0,
    )
    count = (lambda n: n // batch_size) if drop_remainder else (lambda n: math.ceil(n / batch_size))
    if not bucket_by_length:
        return count(len(lengths))
    buckets = np.searchsorted(bucket_boundaries(seq_length), lengths, side="right")
    return int(sum(count(n) for n in np.bincount(buckets)))


def epoch_dataset(
    data: Mapping[str, Any],
    batch_size: int,
    seed: int,
    epoch: int,
    seq_length: int,
    *,
    steps: int | None = None,
    skip: int = 0,
    bucket_by_length: bool = False,
    drop_remainder: bool = False,
    trim: bool = True,
    input_context: tf.distribute.InputContext | None = None,
) -> tf.data.Dataset:
    """Epoch `epoch`'s (features[, targets[, weights]]) batches of `batch_size`
    rows, from batch `skip` on; `data`: {"features", "targets", "weights"},
    the features one dict of arrays or one per text column (`feature_sets`).

    `steps`: the epoch's length when it is not one pass (smoke runs; the pass
    repeats). `trim`: padding cut per batch (off where shapes must be static,
    on TPUs). `input_context`: this input pipeline's share of each batch,
    split into one element per replica it feeds.
    """
    # (features[, targets[, weights]]): an embedding model's rows of texts
    # are their own targets (in-batch negatives), so they have none.
    elements = (data["features"],)
    if data["targets"] is not None:
        elements += (data["targets"],)
    if data["weights"] is not None:
        if data["targets"] is None:
            raise ValueError("sample weights without targets")
        elements += (data["weights"],)
    tensors = tf.nest.map_structure(tf.convert_to_tensor, elements)
    order = tf.data.Dataset.from_tensor_slices(epoch_order(num_rows(data), seed, epoch))

    def rows(index):  # one row (index ()) or a batch of rows (index (B,))
        return tf.nest.map_structure(lambda t: tf.gather(t, index), tensors)

    if bucket_by_length:
        # Batches of similar lengths: less padding to cut, several times faster on CPU.
        boundaries = bucket_boundaries(seq_length)
        dataset = order.map(rows).bucket_by_sequence_length(
            lambda *e: _row_length(e[0]),
            boundaries,
            [batch_size] * (len(boundaries) + 1),
            drop_remainder=drop_remainder,
        )
    else:  # a batch's indices, then one gather per batch
        dataset = order.batch(batch_size, drop_remainder=drop_remainder).map(rows)
    if steps is not None:
        dataset = dataset.repeat().take(steps)
    dataset = dataset.skip(skip)
    if trim:
        # The whole batch's longest, before the replicas' split: every replica
        # gets one shape (Keras builds a distributed model from their mean).
        dataset = dataset.map(lambda *e: _trim(e, seq_length))
    if input_context is not None and input_context.num_replicas_in_sync > 1:
        dataset = _replica_shares(dataset, batch_size, input_context)
    # A new iterator every epoch: autotuning's thread could hold up its end.
    return without_autotune(dataset.prefetch(tf.data.AUTOTUNE))


def _replica_shares(dataset, batch_size, input_context):
    """Full batches -> this pipeline's rows of each, one element per replica it
    feeds (tf.distribute hands a pipeline's consecutive elements to its
    replicas in turn)."""
    replicas = input_context.num_replicas_in_sync
    if batch_size % replicas:
        raise ValueError(f"a batch of {batch_size} rows does not split among {replicas} replicas")
    per_replica = batch_size // replicas
    per_pipeline = batch_size // input_context.num_input_pipelines
    start = input_context.input_pipeline_id * per_pipeline

    def share(*e):
        return tf.nest.map_structure(lambda t: t[start : start + per_pipeline], e)

    return dataset.map(share).unbatch().batch(per_replica, drop_remainder=True)
